//! Inter-communicators: two disjoint groups that talk to each other
//! (MPI 3.1 §6.6; rsmpi's `InterCommunicator`).
//!
//! ## Design
//!
//! Each side of an inter-communicator is a communicator of its own (its
//! local group, its own context pair, its own collective state) whose
//! *peers* — the ranks point-to-point calls name — are the other side's
//! group, and whose messages travel in the other side's context pair
//! (`CommShared::peers`, `peer_context`; `comm/route.rs` maps a route to
//! them). So `process_at_rank(r)` names remote rank `r`, a receive from `r`
//! matches what remote rank `r` sent, and a message's status names the
//! sender by its rank in its own group, as MPI says; the point-to-point
//! layer knows nothing of it.
//!
//! [`InterCommunicator::create`] (`MPI_Intercomm_create`) runs in three
//! steps, each an ordinary operation:
//!
//! 1. every rank reads the sequence number its local communicator's next
//!    collective gets (equal at all its ranks); the local leader swaps its
//!    side's description — local context, that sequence number, member
//!    list — with the remote leader in the peer communicator, with the
//!    user's tag (an immediate send and a receive, so neither blocks the
//!    other);
//! 2. the leader broadcasts the remote side's description to its local
//!    group (two broadcasts: length, then data);
//! 3. every rank derives both sides' context pairs from the four values
//!    (`comm/context.rs`, `InterSide`), checks that the groups are
//!    disjoint, and the local group creates its side in one collective
//!    creation (`coll::create::create_inter`).
//!
//! Both sides derive the same two pairs without a further message, in any
//! process. Bad arguments (a leader out of range, a peer rank out of range,
//! overlapping groups) are errors at every rank that can see them; ranks
//! passing different leaders are caught by the broadcast's checker;
//! leaders passing different tags never meet and the deadlock report names
//! their receives.
//!
//! `duplicate` and `merge` are collective over both sides; each side runs a
//! collective creation over its own group, and the sides' sequence numbers
//! on the inter-communicator stay equal, so each side derives the other's
//! new pair. A merge swaps the sides' `high` flags between their ranks 0,
//! and the two sides' deciding ranks share one communicator through the
//! registry (`Registry::meet`). Other collectives on an inter-communicator
//! are `Error::Unsupported`.
//!
//! Across processes: sides that each live in one process work (the sides
//! reach each other by point-to-point, each process makes its own side and
//! its own merged communicator from values both know); a side whose ranks
//! live in several processes is `Error::Unsupported` (its creation,
//! `duplicate` and `merge`, `coll/create.rs`).

use std::collections::HashSet;
use std::panic::Location;

use super::attribute::Attributes;
use super::{AsCore, Communicator, SimpleCommunicator};
use crate::coll::create::{self as split, InterPlan};
use crate::coll::CommCore;
use crate::collective::Root;
use crate::comm::context::{self, Creation as Derivation};
use crate::comm::{Remote, UserGroup};
use crate::error::{raise, ArgError, Error, OrRaise};
use crate::point_to_point::{Destination, Source};
use crate::{Rank, Tag, TAG_UB};

/// How [`InterCommunicator::merge`] orders the two groups (rsmpi's
/// `MergeOrder`, MPI's `high` flag).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MergeOrder {
    /// This side's ranks come first.
    Low,
    /// This side's ranks come last.
    High,
}

/// One side of an inter-communicator: this rank's group (the local group)
/// and the remote group it talks to (rsmpi's `InterCommunicator`).
///
/// `size`, `rank` and `group` describe the local group; `process_at_rank(r)`
/// and receives name ranks of the remote group ([`remote_size`]). Point-to-
/// point operations work as on any communicator; collectives other than
/// `duplicate` and [`merge`] are `Error::Unsupported`.
///
/// ```
/// use myriad::topology::{Color, InterCommunicator, MergeOrder};
/// use myriad::traits::*;
///
/// let out = myriad::run(5, |universe| {
///     let world = universe.world();
///     // Ranks 0, 1 form one group, 2, 3, 4 the other.
///     let left = world.rank() < 2;
///     let local = world.split_by_color(Color::with_value(left as i32)).unwrap();
///     let remote_leader = if left { 2 } else { 0 };
///     let inter = InterCommunicator::create(&local, 0, &world, remote_leader, 7);
///     assert_eq!(inter.remote_size(), if left { 3 } else { 2 });
///     // Left rank i sends to right rank i.
///     if left {
///         inter.process_at_rank(inter.rank()).send(&(10 * world.rank()));
///     } else if inter.rank() < 2 {
///         let (x, status) = inter.process_at_rank(inter.rank()).receive::<i32>();
///         assert_eq!((x, status.source_rank()), (10 * inter.rank(), inter.rank()));
///     }
///     let merged = inter.merge(if left { MergeOrder::High } else { MergeOrder::Low });
///     merged.rank()
/// })
/// .unwrap();
/// assert_eq!(out, [3, 4, 0, 1, 2]);
/// ```
///
/// [`remote_size`]: Self::remote_size
/// [`merge`]: Self::merge
#[derive(Debug, Clone)]
pub struct InterCommunicator {
    core: CommCore,
    attrs: Attributes,
}

impl InterCommunicator {
    /// Creates an inter-communicator (`MPI_Intercomm_create`; rsmpi 0.8
    /// only gets them from `spawn`). Every rank of `local` (an
    /// intra-communicator) calls with the same `local_leader`; the leaders
    /// of both groups name each other in `peer` (`remote_leader`, only read
    /// at the local leader; `peer` is only used there) and pass the same
    /// `tag`. The two groups must be disjoint.
    ///
    /// # Panics
    ///
    /// If `local` is an inter-communicator, `local_leader` is not a rank of
    /// `local`, `remote_leader` not a rank of `peer` (at the leader), the
    /// tag is out of range, or the groups overlap.
    #[track_caller]
    pub fn create(
        local: &dyn Communicator,
        local_leader: Rank,
        peer: &dyn Communicator,
        remote_leader: Rank,
        tag: Tag,
    ) -> InterCommunicator {
        const OP: &str = "InterCommunicator::create";
        let site = Location::caller();
        let core = local.core();
        if core.shared().is_inter() {
            raise(Error::Arg(ArgError::WrongKindOfCommunicator {
                op: OP,
                comm: core.name(),
                needs: "an intra-communicator",
            }));
        }
        core.check_rank(OP, local_leader).or_raise();
        if !(0..=TAG_UB).contains(&tag) {
            raise(Error::Tag { op: OP, tag });
        }
        // 1. The sequence number of the local communicator's next
        // collective (the broadcast below), equal at all its ranks.
        let seq = core.coll().next_seq(core.rank());
        let mut remote: Vec<u64> = Vec::new();
        if core.rank() == local_leader {
            let peer_core = peer.core();
            if peer_core.shared().is_inter() {
                raise(Error::Arg(ArgError::WrongKindOfCommunicator {
                    op: OP,
                    comm: peer_core.name(),
                    needs: "an intra-communicator as the peer",
                }));
            }
            peer_core.check_peer(OP, remote_leader).or_raise();
            let mine: Vec<u64> = [core.p2p_context(), u64::from(seq)]
                .into_iter()
                .chain(core.shared().group.iter().map(u64::from))
                .collect();
            let other = peer.process_at_rank(remote_leader);
            remote = crate::request::scope(|scope| {
                let sent = other.immediate_send_with_tag(scope, &mine[..], tag);
                let (remote, _) = other.receive_vec_with_tag::<u64>(tag);
                sent.wait();
                remote
            });
        }
        // 2. The leader tells its group.
        let leader = local.process_at_rank(local_leader);
        let mut len = remote.len() as u64;
        leader.broadcast_into(&mut len);
        remote.resize(len as usize, 0);
        leader.broadcast_into(&mut remote[..]);
        // 3. Both pairs, the checks, the side.
        let [remote_context, remote_seq, ref members @ ..] = remote[..] else {
            unreachable!("a leader sends its context and sequence number first")
        };
        let members: Vec<u32> = members.iter().map(|&w| w as u32).collect();
        let local_set: HashSet<u32> = core.shared().group.iter().collect();
        if let Some(&both) = members.iter().find(|w| local_set.contains(w)) {
            raise(Error::Arg(ArgError::GroupsNotDisjoint {
                op: OP,
                world_rank: both as Rank,
            }));
        }
        let remote_seq = remote_seq as u32;
        let own = context::derive(
            core.p2p_context(),
            Derivation::InterSide {
                seq,
                remote: remote_context,
                remote_seq,
            },
        );
        let theirs = context::derive(
            remote_context,
            Derivation::InterSide {
                seq: remote_seq,
                remote: core.p2p_context(),
                remote_seq: seq,
            },
        );
        let plan = InterPlan {
            context: own,
            remote: Remote {
                members: crate::comm::Members::from_vec(members),
                context: theirs,
            },
        };
        let core = split::create_inter(core, plan, site).or_raise();
        InterCommunicator::from_core(core)
    }

    pub(crate) fn from_core(core: CommCore) -> InterCommunicator {
        InterCommunicator {
            core,
            attrs: Attributes::default(),
        }
    }

    /// Number of ranks in the remote group (`MPI_Comm_remote_size`).
    pub fn remote_size(&self) -> Rank {
        self.core.shared().peers.size() as Rank
    }

    /// The remote group (`MPI_Comm_remote_group`); the calling rank is not
    /// in it, so its `rank()` is `None`.
    pub fn remote_group(&self) -> UserGroup {
        UserGroup::remote(self.core.shared().peers.clone())
    }

    /// Merges both groups into one intra-communicator
    /// (`MPI_Intercomm_merge`). Collective over both groups; every rank of
    /// one group passes the same order. The `Low` group's ranks come first;
    /// if both groups pass the same order, the group holding the lowest
    /// world rank comes first.
    ///
    /// # Panics
    ///
    /// If the ranks of one group pass different orders.
    #[track_caller]
    pub fn merge(&self, merge_order: MergeOrder) -> SimpleCommunicator {
        let high = merge_order == MergeOrder::High;
        let merged = split::merge(&self.core, high, Location::caller()).or_raise();
        SimpleCommunicator::from_core(merged)
    }

    /// A new inter-communicator with the same groups and new contexts
    /// (`MPI_Comm_dup`); attributes whose type sets
    /// [`CLONE_ON_DUP`](super::CommAttribute::CLONE_ON_DUP) are copied.
    /// Collective over both groups.
    #[track_caller]
    pub fn duplicate(&self) -> InterCommunicator {
        let ask = split::Ask::new(split::Creation::Duplicate, Some(0), self.core.rank());
        let new = split::create(&self.core, ask, Location::caller())
            .or_raise()
            .expect("every rank takes part in a duplicate");
        InterCommunicator {
            core: new,
            attrs: self.attrs.duplicate(),
        }
    }
}

impl AsCore for InterCommunicator {
    fn core(&self) -> &CommCore {
        &self.core
    }

    fn attributes(&self) -> Option<&Attributes> {
        Some(&self.attrs)
    }

    fn attributes_mut(&mut self) -> Option<&mut Attributes> {
        Some(&mut self.attrs)
    }
}

impl Communicator for InterCommunicator {}
