//! How a communicator handle reaches point-to-point (`p2p`, a layer
//! below, which knows no communicator): the rank's endpoint, routes to
//! communicator ranks, match specifications of receives, and the checks
//! whose errors name communicator ranks and sizes.

use super::Core;
use crate::error::Error;
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

    /// The route of a message from this rank to rank `dest` (checked by the
    /// caller) in `context` (the point-to-point one, or the collective one).
    #[inline]
    pub(crate) fn route(&self, context: u64, dest: Rank) -> Route {
        Route {
            context,
            source: self.rank(),
            dest,
            dest_world: self.world_rank(dest),
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

    /// Checks a destination rank and a send tag.
    pub(crate) fn check_send(&self, op: &'static str, dest: Rank, tag: Tag) -> Result<(), Error> {
        if dest < 0 || dest >= self.size() {
            return Err(Error::Rank {
                op,
                rank: dest,
                size: self.size(),
            });
        }
        if !(0..=TAG_UB).contains(&tag) {
            return Err(Error::Tag { op, tag });
        }
        Ok(())
    }

    /// Checks a source rank (or `ANY_SOURCE`) and a receive tag (or
    /// `ANY_TAG`).
    pub(crate) fn check_receive(
        &self,
        op: &'static str,
        source: Rank,
        tag: Tag,
    ) -> Result<(), Error> {
        if source != ANY_SOURCE && (source < 0 || source >= self.size()) {
            return Err(Error::Rank {
                op,
                rank: source,
                size: self.size(),
            });
        }
        if tag != ANY_TAG && !(0..=TAG_UB).contains(&tag) {
            return Err(Error::Tag { op, tag });
        }
        Ok(())
    }
}
