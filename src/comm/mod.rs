//! Communicators: who talks to whom, in which context.
//!
//! A communicator handle ([`SimpleCommunicator`]) is one rank's view of a
//! communicator: the job, the communicator's shared state (context id, group,
//! name, barrier) and the rank's own rank in it. Handles are cheap (two `Arc`
//! clones); the shared state is created once per communicator, not per rank.
//!
//! Context ids keep the traffic of different communicators apart: each
//! communicator owns two, one for point-to-point messages and one for the
//! messages of its collectives.
//!
//! | file | question it answers |
//! |---|---|
//! | `mod.rs` | what a communicator is: `Members`, `CommShared`, the `Registry` of context ids and names, the rank's handle `CommCore` and `caller()` |
//! | `communicator.rs` | the API over it: the `Communicator` trait, `SimpleCommunicator`, `Process`, `AnyProcess` |
//! | `split.rs` | how the ranks of a communicator agree on new ones (`duplicate`, `split_*`; the protocol is in its docs) |
//! | `route.rs` | how a handle reaches point-to-point: its endpoint, routes and match specifications, and the rank and tag checks |
//! | `group.rs` | groups: ordered sets of world ranks and their algebra |
//! | `locality.rs` | where a communicator's members live: its members in this process, one leader per process, the process count |
//! | `cartesian.rs` | Cartesian topologies: coordinates, shifts, sub-grids |
//! | `attribute.rs` | attributes cached on a rank's communicator handle |

pub(crate) mod attribute;
mod cartesian;
mod communicator;
mod group;
pub(crate) mod locality;
mod route;
pub(crate) mod split;

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use crate::coll;
use crate::error::{CommError, Error};
use crate::identity::{Processes, WorldRank};
use crate::runtime::job::Job;
use crate::sched::{self, RankCtx};
use crate::Rank;

pub use attribute::{AnyCommunicator, CommAttribute};
use attribute::{AppNum, Attributes, UniverseSize};
pub use cartesian::{dims_create, CartesianCommunicator, CartesianLayout};
pub use communicator::SimpleCommunicator;
pub use communicator::{AnyProcess, AsCore, Communicator, CommunicatorRelation, Process};
pub use group::{Group, GroupRelation, SystemGroup, UserGroup};
pub use split::{Color, Key};

/// Which world ranks a communicator (or a group) has, in its rank order.
///
/// Canonical: a table that lists world ranks `0..n` in order is always
/// stored as `World(n)` (see [`Members::from_vec`]), so two member lists are
/// equal exactly when their representations are.
#[derive(Debug, Clone)]
pub(crate) enum Members {
    /// Ranks `0..n` of the world, in order (no table).
    World(u32),
    /// An explicit table: rank `i` is world rank `ranks[i]`. Shared by the
    /// communicator and the groups taken from it.
    Ranks(Arc<[u32]>),
}

impl Members {
    /// The members listed in `ranks`, in that order.
    pub(crate) fn from_vec(ranks: Vec<u32>) -> Members {
        if ranks.iter().enumerate().all(|(i, &w)| i as u32 == w) {
            Members::World(ranks.len() as u32)
        } else {
            Members::Ranks(ranks.into())
        }
    }

    #[inline]
    pub(crate) fn size(&self) -> u32 {
        match self {
            Members::World(n) => *n,
            Members::Ranks(ranks) => ranks.len() as u32,
        }
    }

    #[inline]
    pub(crate) fn world_rank(&self, rank: Rank) -> u32 {
        match self {
            Members::World(_) => rank as u32,
            Members::Ranks(ranks) => ranks[rank as usize],
        }
    }

    /// The rank of world rank `world` among the members (a linear search
    /// for a table).
    pub(crate) fn position(&self, world: u32) -> Option<Rank> {
        match self {
            Members::World(n) => (world < *n).then_some(world as Rank),
            Members::Ranks(ranks) => ranks.iter().position(|&w| w == world).map(|i| i as Rank),
        }
    }

    /// The world ranks, in rank order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        let (n, table) = match self {
            Members::World(n) => (*n as usize, None),
            Members::Ranks(ranks) => (ranks.len(), Some(ranks)),
        };
        (0..n).map(move |i| table.map_or(i as u32, |t| t[i]))
    }

    /// Whether both list the same world ranks in the same order.
    pub(crate) fn same(&self, other: &Members) -> bool {
        match (self, other) {
            (Members::World(a), Members::World(b)) => a == b,
            (Members::Ranks(a), Members::Ranks(b)) => Arc::ptr_eq(a, b) || a == b,
            _ => false,
        }
    }

    /// Whether both hold the same world ranks, in any order.
    pub(crate) fn same_set(&self, other: &Members) -> bool {
        if self.size() != other.size() {
            return false;
        }
        let sorted = |m: &Members| {
            let mut v: Vec<u32> = m.iter().collect();
            v.sort_unstable();
            v
        };
        self.same(other) || sorted(self) == sorted(other)
    }
}

/// State shared by all ranks of one communicator.
#[derive(Debug)]
pub(crate) struct CommShared {
    /// Context id of point-to-point traffic; collectives use `context + 1`.
    pub(crate) context: u32,
    pub(crate) group: Members,
    /// Its members in this process, the leader of each process.
    pub(crate) locality: locality::Locality,
    /// Sequence numbers, checker, rounds, algorithm choices.
    pub(crate) coll: coll::State,
    /// `split_by_subgroup(_with_tag)` calls in progress (`split.rs`).
    pub(crate) group_meetings: split::GroupMeetings,
    /// The registry's name table, from which the communicator removes its
    /// name when it goes (`None` for the world, which lasts as long).
    names: Option<Names>,
}

impl CommShared {
    pub(crate) fn new(
        context: u32,
        group: Members,
        processes: &Processes,
        check_collectives: bool,
    ) -> CommShared {
        let size = group.size() as usize;
        CommShared {
            context,
            locality: locality::Locality::new(&group, processes),
            group,
            coll: coll::State::new(size, check_collectives, coll::Selection::from_env()),
            group_meetings: split::GroupMeetings::default(),
            names: None,
        }
    }
}

impl Drop for CommShared {
    fn drop(&mut self) {
        if let Some(names) = &self.names {
            names
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&self.context);
        }
    }
}

/// Communicator names by context id (the even id of each pair).
type Names = Arc<Mutex<HashMap<u32, String>>>;

/// Communicator bookkeeping of a job.
#[derive(Debug)]
pub(crate) struct Registry {
    next_context: AtomicU32,
    names: Names,
    /// Whether new communicators check their collective calls.
    pub(crate) check_collectives: bool,
    /// Where the world ranks live (each communicator's locality).
    processes: Processes,
    pub(crate) world: Arc<CommShared>,
    /// The world communicator's predefined attributes.
    universe_size: UniverseSize,
    appnum: AppNum,
}

impl Registry {
    pub(crate) fn new(processes: &Processes, check_collectives: bool) -> Registry {
        let ranks = processes.world_size();
        let mut names = HashMap::new();
        names.insert(0, "MPI_COMM_WORLD".to_string());
        Registry {
            next_context: AtomicU32::new(2),
            names: Arc::new(Mutex::new(names)),
            check_collectives,
            processes: processes.clone(),
            world: Arc::new(CommShared::new(
                0,
                Members::World(ranks),
                processes,
                check_collectives,
            )),
            universe_size: UniverseSize::new(ranks),
            appnum: AppNum::new(0),
        }
    }

    /// Reserves a context id pair for a new communicator.
    pub(crate) fn new_context(&self) -> u32 {
        self.next_context.fetch_add(2, Ordering::Relaxed)
    }

    /// A new communicator of `members`, with its own context pair and
    /// `name` (forgotten when the communicator is dropped).
    pub(crate) fn create(&self, members: Members, name: &str) -> Arc<CommShared> {
        let context = self.new_context();
        self.set_name(context, name);
        let mut shared = CommShared::new(context, members, &self.processes, self.check_collectives);
        shared.names = Some(Arc::clone(&self.names));
        Arc::new(shared)
    }

    /// The name of the communicator owning `context` (either of its two ids).
    pub(crate) fn name(&self, context: u32) -> String {
        let base = context & !1;
        let names = self.names.lock().unwrap_or_else(|e| e.into_inner());
        match names.get(&base) {
            Some(name) => name.clone(),
            None => format!("#{}", base / 2),
        }
    }

    pub(crate) fn set_name(&self, context: u32, name: &str) {
        self.names
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(context & !1, name.to_string());
    }
}

/// One rank's handle to a communicator (internal; reached through
/// [`Communicator`]).
#[doc(hidden)]
#[derive(Clone)]
pub struct CommCore {
    job: Arc<Job>,
    shared: Arc<CommShared>,
    rank: Rank,
    world: WorldRank,
}

impl fmt::Debug for CommCore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CommCore")
            .field("context", &self.shared.context)
            .field("rank", &self.rank)
            .field("size", &self.size())
            .finish()
    }
}

impl CommCore {
    pub(crate) fn new(job: Arc<Job>, shared: Arc<CommShared>, rank: Rank) -> CommCore {
        let world = WorldRank::new(shared.group.world_rank(rank));
        CommCore {
            job,
            shared,
            rank,
            world,
        }
    }

    #[inline]
    pub(crate) fn job(&self) -> &Job {
        &self.job
    }

    #[inline]
    pub(crate) fn shared(&self) -> &CommShared {
        &self.shared
    }

    /// This rank in the communicator.
    #[inline]
    pub(crate) fn rank(&self) -> Rank {
        self.rank
    }

    /// This rank in the world.
    #[inline]
    pub(crate) fn world(&self) -> WorldRank {
        self.world
    }

    #[inline]
    pub(crate) fn size(&self) -> Rank {
        self.shared.group.size() as Rank
    }

    /// The world rank of communicator rank `rank` (checked by the caller).
    #[inline]
    pub(crate) fn world_rank(&self, rank: Rank) -> WorldRank {
        WorldRank::new(self.shared.group.world_rank(rank))
    }

    #[inline]
    pub(crate) fn p2p_context(&self) -> u32 {
        self.shared.context
    }

    /// The context of the calling rank, checked to be this handle's rank,
    /// lent for as long as the caller borrows the handle.
    ///
    /// Sound because the context is that of the party running this call:
    /// the rank's coroutine (or a task acting for it), whose context lives
    /// on its stack until it ends, or an OS thread acting for it, whose
    /// context lives as long as the job this handle holds
    /// (`sched::thread::context`). Crate code keeps the reference within
    /// the operation that asked (it is passed down, as in `coll::Call`),
    /// never in a value that outlives the operation: what must outlive it
    /// keeps the context's slot or rank number (a `PendingOp`'s waiter).
    #[inline]
    pub(crate) fn caller(&self) -> Result<&RankCtx, Error> {
        // SAFETY: the reference is bound to the borrow of `self` and used
        // only by the operation running on this rank's stack (see above);
        // `Some` only for this handle's rank, which is the code running.
        match unsafe { sched::rank::current_unchecked() } {
            Some(ctx) if self.job.hosts(ctx) && ctx.rank == self.world => Ok(ctx),
            // An OS thread of the rank (thread levels Serialized, Multiple);
            // never a worker thread, which must not block in MPI.
            None if !sched::worker::on_worker_thread() => {
                // A handle is made by its own rank, which runs here.
                let local = (self.job.p2p.processes().local(self.world))
                    .expect("a communicator handle's rank lives in its process");
                sched::thread::context(&self.job, local)
            }
            other => Err(self.wrong_caller(other)),
        }
    }

    #[cold]
    fn wrong_caller(&self, ctx: Option<&RankCtx>) -> Error {
        let owner = self.world.as_rank();
        Error::Comm(match ctx {
            None => CommError::FromWorkerThread { owner },
            Some(ctx) if self.job.hosts(ctx) => CommError::ForeignHandle {
                rank: ctx.rank.as_rank(),
                owner,
            },
            Some(ctx) => CommError::OtherJob {
                rank: ctx.rank.as_rank(),
                owner,
            },
        })
    }

    /// Checks that `rank` is in the communicator.
    pub(crate) fn check_rank(&self, op: &'static str, rank: Rank) -> Result<(), Error> {
        if rank < 0 || rank >= self.size() {
            return Err(Error::Rank {
                op,
                rank,
                size: self.size(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_are_canonical_and_names_go_with_their_communicator() {
        assert!(matches!(
            Members::from_vec(vec![0, 1, 2]),
            Members::World(3)
        ));
        let table = Members::from_vec(vec![2, 0, 1]);
        assert!(matches!(table, Members::Ranks(_)));
        assert_eq!(table.position(1), Some(2));
        assert!(table.same_set(&Members::World(3)) && !table.same(&Members::World(3)));

        let registry = Registry::new(&Processes::single(4), true);
        let comm = registry.create(table, "split of MPI_COMM_WORLD");
        let context = comm.context;
        assert_eq!(registry.name(context + 1), "split of MPI_COMM_WORLD");
        drop(comm);
        assert_eq!(registry.name(context), format!("#{}", context / 2));
        assert_eq!(registry.name(0), "MPI_COMM_WORLD");
    }
}
