//! How a communicator handle reaches point-to-point (`p2p`, a layer
//! below, which knows no communicator): the rank's endpoint, routes to
//! communicator ranks, match specifications of receives, and the checks
//! whose errors name communicator ranks and sizes. Point-to-point calls
//! name *peers*: the communicator's ranks, or the remote group of an
//! inter-communicator (`CommShared::peers`).

use super::Core;
use crate::error::Error;
use crate::identity::WorldRank;
use crate::p2p::{Endpoint, MatchSpec, Node, Route};
use crate::{Rank, Tag, ANY_SOURCE, ANY_TAG, TAG_UB};

impl<X> Core<X> {
    /// The calling rank's point-to-point endpoint.
    #[inline]
    pub(crate) fn endpoint(&self) -> Endpoint<'_, impl Node> {
        Endpoint {
            node: self.job(),
            world: self.world(),
        }
    }

    /// The route of a message from this rank to peer `dest` (checked by the
    /// caller) in `context` (the point-to-point one, or the collective one).
    ///
    /// The peers are the communicator's ranks, or an inter-communicator's
    /// remote group, which receives in its own context pair: the route
    /// carries the matching id of the peers' pair (the same pair for an
    /// intra-communicator), and this rank's local rank as the source, which
    /// is how the remote side names it.
    #[inline]
    pub(crate) fn route(&self, context: u64, dest: Rank) -> Route {
        let shared = self.shared();
        Route {
            context: context
                .wrapping_sub(shared.context)
                .wrapping_add(shared.peer_context),
            source: self.rank(),
            dest,
            dest_world: WorldRank::new(shared.peers.world_rank(dest)),
        }
    }

    /// What a receive from `source` (or `ANY_SOURCE`) with `tag` (or
    /// `ANY_TAG`) in `context` accepts.
    #[inline]
    pub(crate) fn accept(&self, context: u64, source: Rank, tag: Tag) -> MatchSpec {
        MatchSpec {
            context,
            source,
            tag,
        }
    }

    /// Whether `dest` names a peer and `tag` is a send tag: the rule itself,
    /// without an error, for the blocking send, which names its operation
    /// (for the error, [`Self::check_send`]) only when this fails.
    #[inline]
    pub(crate) fn send_ok(&self, dest: Rank, tag: Tag) -> bool {
        (0..self.shared().peers.size() as Rank).contains(&dest) && (0..=TAG_UB).contains(&tag)
    }

    /// Whether `source` names a peer (or is `ANY_SOURCE`) and `tag` is a
    /// receive tag (or `ANY_TAG`): the rule itself, as [`Self::send_ok`],
    /// for the blocking receive ([`Self::check_receive`] gives the error).
    #[inline]
    pub(crate) fn receive_ok(&self, source: Rank, tag: Tag) -> bool {
        (source == ANY_SOURCE || (0..self.shared().peers.size() as Rank).contains(&source))
            && (tag == ANY_TAG || (0..=TAG_UB).contains(&tag))
    }

    /// Checks a destination rank and a send tag: [`Self::send_ok`], and
    /// when it fails, the error naming what is wrong.
    pub(crate) fn check_send(&self, op: &'static str, dest: Rank, tag: Tag) -> Result<(), Error> {
        if self.send_ok(dest, tag) {
            return Ok(());
        }
        self.check_peer(op, dest)?;
        Err(Error::Tag { op, tag })
    }

    /// Checks a source rank (or `ANY_SOURCE`) and a receive tag (or
    /// `ANY_TAG`): [`Self::receive_ok`], and when it fails, the error.
    pub(crate) fn check_receive(
        &self,
        op: &'static str,
        source: Rank,
        tag: Tag,
    ) -> Result<(), Error> {
        if self.receive_ok(source, tag) {
            return Ok(());
        }
        if source != ANY_SOURCE {
            self.check_peer(op, source)?;
        }
        Err(Error::Tag { op, tag })
    }
}
