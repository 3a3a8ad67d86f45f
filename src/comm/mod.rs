//! Communicators: who talks to whom, in which context (layer L3, the
//! communicator core; see ARCHITECTURE.md, "Layers").
//!
//! A communicator handle
//! ([`SimpleCommunicator`](crate::communicator::SimpleCommunicator), whose
//! API is the layer L5 module `communicator`) is one rank's view of a
//! communicator: the job's [`JobCore`] (scheduler, mailboxes, registry), the
//! communicator's shared state (context id, group, name, and what the
//! collectives keep per communicator) and the rank's own rank in it. Handles
//! are cheap (two `Arc` clones); the shared state is created once per
//! communicator, not per rank.
//!
//! Context ids keep the traffic of different communicators apart: each
//! communicator owns two, one for point-to-point messages and one for the
//! messages of its collectives. A new communicator's pair is derived from
//! its parent's and the creating call, the same way in every process
//! (`context.rs`).
//!
//! This layer knows nothing of collectives: the per-communicator state of
//! `coll` rides in [`CommShared`]'s `ext` (the handle the API holds is
//! `coll::CommCore`, this [`Core`] with `coll::State` there), and creating
//! communicators (`duplicate`, `split_*`), which meets in collective rounds,
//! is `coll/create.rs`.
//!
//! | file | question it answers |
//! |---|---|
//! | `mod.rs` | what a communicator is: `Members`, `CommShared`, the `Registry` of names, the job's `JobCore`, the rank's handle `Core` and `caller()` |
//! | `context.rs` | how a new communicator's context ids are derived, identically in every process |
//! | `route.rs` | how a handle reaches point-to-point: its endpoint, routes and match specifications, and the rank and tag checks |
//! | `group.rs` | groups: ordered sets of world ranks and their algebra |
//! | `locality.rs` | where a communicator's members live: its members in this process, one leader per process, the process count |
//! | `grid.rs` | Cartesian grids: extents, periods, coordinates |
//! | `topo.rs` | the virtual topology a communicator carries: a grid, a graph, or each rank's distributed-graph edges |
//! | `predefined.rs` | the world's predefined attributes (`UniverseSize`, `AppNum`) as plain values the `Registry` keeps |
//!
//! The API over this core (the `Communicator` trait, `SimpleCommunicator`,
//! the Cartesian API, attributes) is the module `communicator`, layer L5.

pub(crate) mod context;
pub(crate) mod grid;
mod group;
pub(crate) mod locality;
mod predefined;
mod route;
pub(crate) mod topo;

use std::any::Any;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, Weak};

use crate::error::{CommError, Error};
use crate::identity::{Processes, WorldRank};
use crate::p2p;
use crate::sched::{self, RankCtx};
use crate::Rank;

pub(crate) use group::members_of;
pub use group::{Group, GroupRelation, SystemGroup, UserGroup};
pub use predefined::{AppNum, UniverseSize};

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
///
/// `X` is what the layer above keeps per communicator, in the same
/// allocation (the collectives' `coll::State`: sequence numbers, checker,
/// rounds, algorithm choices, group meetings); this layer never looks into
/// it. Every communicator is made by [`Registry::world`] or
/// [`Registry::create`], through [`CommShared::new`].
#[derive(Debug)]
pub(crate) struct CommShared<X> {
    /// Context id of point-to-point traffic; collectives use `context + 1`
    /// (see [`context`] for how it is derived).
    pub(crate) context: u64,
    pub(crate) group: Members,
    /// Whom point-to-point calls name by rank: the communicator's own
    /// members, or an inter-communicator's remote group.
    pub(crate) peers: Members,
    /// The context pair messages to `peers` travel in: `context` itself, or
    /// the pair the remote group of an inter-communicator receives in (each
    /// side of an inter-communicator owns its pair, see `context.rs`).
    pub(crate) peer_context: u64,
    /// Its members in this process, the leader of each process.
    pub(crate) locality: locality::Locality,
    /// Its virtual topology, set once by the creating call (`topo.rs`).
    pub(crate) topology: std::sync::OnceLock<topo::Topo>,
    /// The registry's name table, from which the communicator removes its
    /// name when it goes (`None` for the world, which lasts as long).
    names: Option<Names>,
    /// The upper layer's state of this communicator.
    pub(crate) ext: X,
}

impl<X> CommShared<X> {
    fn new(
        context: u64,
        group: Members,
        remote: Option<Remote>,
        processes: &Processes,
        names: Option<Names>,
        ext: X,
    ) -> CommShared<X> {
        let (peers, peer_context) = match remote {
            Some(remote) => (remote.members, remote.context),
            None => (group.clone(), context),
        };
        CommShared {
            context,
            locality: locality::Locality::new(&group, processes),
            group,
            peers,
            peer_context,
            topology: std::sync::OnceLock::new(),
            names,
            ext,
        }
    }

    /// Whether this is one side of an inter-communicator.
    #[inline]
    pub(crate) fn is_inter(&self) -> bool {
        self.peer_context != self.context
    }

    /// The remote side of an inter-communicator.
    pub(crate) fn remote(&self) -> Option<Remote> {
        self.is_inter().then(|| Remote {
            members: self.peers.clone(),
            context: self.peer_context,
        })
    }
}

/// The remote side of an inter-communicator: its group, and the context
/// pair it receives in (its own communicator's pair).
#[derive(Debug, Clone)]
pub(crate) struct Remote {
    pub(crate) members: Members,
    pub(crate) context: u64,
}

impl<X> Drop for CommShared<X> {
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
type Names = Arc<Mutex<HashMap<u64, String>>>;

/// Communicator bookkeeping of a job: names (by context id), whether new
/// communicators check their collective calls, the world's predefined
/// attributes.
#[derive(Debug)]
pub(crate) struct Registry {
    names: Names,
    /// Whether new communicators check their collective calls.
    check_collectives: bool,
    /// Where the world ranks live (each communicator's locality).
    processes: Processes,
    /// The world communicator's predefined attributes.
    universe_size: UniverseSize,
    appnum: AppNum,
    /// Merged communicators made by one side of an inter-communicator and
    /// not yet taken by the other, by context id ([`Registry::meet`]).
    merges: Mutex<HashMap<u64, Box<dyn Any + Send + Sync>>>,
    /// Communicators made by one member in this process of a creation
    /// across processes and not yet taken by all the others, by context id,
    /// with how many are still to take it ([`Registry::share`]).
    shares: Mutex<HashMap<u64, Share>>,
}

/// A communicator of [`Registry::share`] (its type erased, as the job's
/// collective state is a layer above) and how many are still to take it.
type Share = (Box<dyn Any + Send + Sync>, usize);

impl Registry {
    pub(crate) fn new(processes: &Processes, check_collectives: bool) -> Registry {
        let ranks = processes.world_size();
        let mut names = HashMap::new();
        names.insert(context::WORLD, "MPI_COMM_WORLD".to_string());
        Registry {
            names: Arc::new(Mutex::new(names)),
            check_collectives,
            processes: processes.clone(),
            universe_size: UniverseSize::new(ranks),
            appnum: AppNum::new(0),
            merges: Mutex::new(HashMap::new()),
            shares: Mutex::new(HashMap::new()),
        }
    }

    /// The registry, answering `MPI_UNIVERSE_SIZE` with `size` (the most
    /// ranks the job may have; the world size by default).
    pub(crate) fn with_universe_size(mut self, size: u32) -> Registry {
        self.universe_size = UniverseSize::new(size);
        self
    }

    /// Whether new communicators check their collective calls.
    pub(crate) fn check_collectives(&self) -> bool {
        self.check_collectives
    }

    /// The world communicator of `ranks` ranks (context pair 0, 1).
    pub(crate) fn world<X>(&self, ranks: u32, ext: X) -> Arc<CommShared<X>> {
        Arc::new(CommShared::new(
            context::WORLD,
            Members::World(ranks),
            None,
            &self.processes,
            None,
            ext,
        ))
    }

    /// A new communicator of `members` with the context pair `context`
    /// (derived by the creating call, [`context::derive`]) and `name`
    /// (forgotten when the communicator is dropped); with `remote`, one side
    /// of an inter-communicator whose point-to-point calls reach that
    /// remote group.
    ///
    /// # Errors
    ///
    /// A live communicator holds the pair (a collision of the derivation,
    /// see `context.rs`): refused rather than mixing the two
    /// communicators' messages.
    pub(crate) fn create<X>(
        &self,
        context: u64,
        members: Members,
        remote: Option<Remote>,
        name: &str,
        ext: X,
    ) -> Result<Arc<CommShared<X>>, Error> {
        debug_assert_eq!(context & 1, 0, "context pairs start at an even id");
        {
            let mut names = self.names.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(holder) = names.get(&context) {
                return Err(Error::Comm(CommError::ContextCollision {
                    name: name.to_string(),
                    context,
                    holder: holder.clone(),
                }));
            }
            names.insert(context, name.to_string());
        }
        Ok(Arc::new(CommShared::new(
            context,
            members,
            remote,
            &self.processes,
            Some(Arc::clone(&self.names)),
            ext,
        )))
    }

    /// A predefined communicator (`MPI_COMM_SELF`): registered under
    /// `name` on first use and never forgotten, like the world; each call
    /// makes a new shared state with the same pair (one rank: nothing of
    /// its collectives is shared with another rank).
    pub(crate) fn predefined_comm<X>(
        &self,
        context: u64,
        members: Members,
        name: &str,
        ext: X,
    ) -> Arc<CommShared<X>> {
        self.names
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(context)
            .or_insert_with(|| name.to_string());
        Arc::new(CommShared::new(
            context,
            members,
            None,
            &self.processes,
            None,
            ext,
        ))
    }

    /// The communicator with context pair `context` that two parties make
    /// together (the two sides of an inter-communicator's merge, whose
    /// collective state must be one): the first to come makes it with
    /// `make`, the second takes it. Without a `partner` in this process
    /// (the other side lives in another process, which makes its own), the
    /// one made is not kept for anyone.
    pub(crate) fn meet<X: Send + Sync + 'static>(
        &self,
        context: u64,
        partner: bool,
        make: impl FnOnce() -> Result<Arc<CommShared<X>>, Error>,
    ) -> Result<Arc<CommShared<X>>, Error> {
        if !partner {
            return make();
        }
        let mut merges = self.merges.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(made) = merges.remove(&context) {
            let made = made
                .downcast::<Arc<CommShared<X>>>()
                .expect("one kind of communicator state per job");
            return Ok(*made);
        }
        let made = make()?;
        merges.insert(context, Box::new(Arc::clone(&made)));
        Ok(made)
    }

    /// The communicator of `members` with context pair `context` that its
    /// members in this process share, each deciding on its own (a creation
    /// across processes): the first to come makes it with `make` (which
    /// checks the pair, [`Registry::create`]), the others take it; the
    /// last of them removes the entry. A pending entry of other members
    /// under the same pair is a collision, refused like one.
    pub(crate) fn share<X: Send + Sync + 'static>(
        &self,
        context: u64,
        members: &Members,
        make: impl FnOnce() -> Result<Arc<CommShared<X>>, Error>,
    ) -> Result<Arc<CommShared<X>>, Error> {
        let mut shares = self.shares.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((made, left)) = shares.get_mut(&context) {
            let made = Arc::clone(
                made.downcast_ref::<Arc<CommShared<X>>>()
                    .expect("one kind of communicator state per job"),
            );
            if !made.group.same(members) {
                return Err(Error::Comm(CommError::ContextCollision {
                    name: "a new communicator".to_string(),
                    context,
                    holder: self.name(context),
                }));
            }
            *left -= 1;
            if *left == 0 {
                shares.remove(&context);
            }
            return Ok(made);
        }
        let made = make()?;
        let others = made.locality.local_count().saturating_sub(1);
        if others > 0 {
            shares.insert(context, (Box::new(Arc::clone(&made)), others));
        }
        Ok(made)
    }

    /// The name of the communicator owning `context` (either of its two ids).
    pub(crate) fn name(&self, context: u64) -> String {
        let base = context & !1;
        let names = self.names.lock().unwrap_or_else(|e| e.into_inner());
        match names.get(&base) {
            Some(name) => name.clone(),
            None => format!("#{}", base / 2),
        }
    }

    pub(crate) fn set_name(&self, context: u64, name: &str) {
        self.names
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(context & !1, name.to_string());
    }
}

/// What a job's communicators run on: the scheduler, the point-to-point
/// state (mailboxes, eager pool) and the communicator registry. The job
/// (`runtime::job`, a layer above) owns it and hands every communicator
/// handle an `Arc` of it, so nothing here needs the job itself.
#[derive(Debug)]
pub(crate) struct JobCore {
    sched: sched::Scheduler,
    p2p: p2p::Shared,
    comms: Registry,
    /// The job as `sched` knows it (the `RankCtx::host` of its ranks), for
    /// the contexts of OS threads acting for a rank (`sched::thread`).
    host: Weak<dyn sched::Host>,
}

impl JobCore {
    pub(crate) fn new(
        sched: sched::Scheduler,
        p2p: p2p::Shared,
        comms: Registry,
        host: Weak<dyn sched::Host>,
    ) -> JobCore {
        JobCore {
            sched,
            p2p,
            comms,
            host,
        }
    }

    #[inline]
    pub(crate) fn sched(&self) -> &sched::Scheduler {
        &self.sched
    }

    #[inline]
    pub(crate) fn comms(&self) -> &Registry {
        &self.comms
    }
}

// What point-to-point reaches through an endpoint.
impl p2p::Node for JobCore {
    #[inline]
    fn sched(&self) -> &sched::Scheduler {
        &self.sched
    }

    #[inline]
    fn p2p(&self) -> &p2p::Shared {
        &self.p2p
    }
}

/// One rank's handle to a communicator (internal; reached through
/// [`Communicator`] as `coll::CommCore`, which names `X`).
///
/// [`Communicator`]: crate::communicator::Communicator
#[doc(hidden)]
pub struct Core<X> {
    job: Arc<JobCore>,
    shared: Arc<CommShared<X>>,
    rank: Rank,
    world: WorldRank,
}

impl<X> Clone for Core<X> {
    fn clone(&self) -> Self {
        Core {
            job: Arc::clone(&self.job),
            shared: Arc::clone(&self.shared),
            rank: self.rank,
            world: self.world,
        }
    }
}

impl<X> fmt::Debug for Core<X> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CommCore")
            .field("context", &self.shared.context)
            .field("rank", &self.rank)
            .field("size", &self.size())
            .finish()
    }
}

impl<X> Core<X> {
    pub(crate) fn new(job: Arc<JobCore>, shared: Arc<CommShared<X>>, rank: Rank) -> Core<X> {
        let world = WorldRank::new(shared.group.world_rank(rank));
        Core {
            job,
            shared,
            rank,
            world,
        }
    }

    /// A handle of this rank to another communicator of the same job.
    pub(crate) fn with_shared(&self, shared: Arc<CommShared<X>>, rank: Rank) -> Core<X> {
        Core::new(Arc::clone(&self.job), shared, rank)
    }

    #[inline]
    pub(crate) fn job(&self) -> &JobCore {
        &self.job
    }

    #[inline]
    pub(crate) fn shared(&self) -> &CommShared<X> {
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

    #[inline]
    pub(crate) fn p2p_context(&self) -> u64 {
        self.shared.context
    }

    /// The name of the communicator (for messages).
    pub(crate) fn name(&self) -> String {
        self.job.comms.name(self.shared.context)
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
            Some(ctx) if self.runs(ctx) && ctx.rank == self.world => Ok(ctx),
            // An OS thread of the rank (thread levels Serialized, Multiple);
            // never a worker thread, which must not block in MPI.
            None if !sched::worker::on_worker_thread() => {
                // A handle is made by its own rank, which runs here.
                let local = (self.job.p2p.processes().local(self.world))
                    .expect("a communicator handle's rank lives in its process");
                sched::thread::context(&self.job.sched, &self.job.host, local)
            }
            other => Err(self.wrong_caller(other)),
        }
    }

    /// Whether `ctx` is a context of this handle's job (one scheduler per
    /// job).
    #[inline]
    fn runs(&self, ctx: &RankCtx) -> bool {
        std::ptr::eq(ctx.sched(), &self.job.sched)
    }

    #[cold]
    fn wrong_caller(&self, ctx: Option<&RankCtx>) -> Error {
        let owner = self.world.as_rank();
        Error::Comm(match ctx {
            None => CommError::FromWorkerThread { owner },
            Some(ctx) if self.runs(ctx) => CommError::ForeignHandle {
                rank: ctx.rank.as_rank(),
                owner,
            },
            Some(ctx) => CommError::OtherJob {
                rank: ctx.rank.as_rank(),
                owner,
            },
        })
    }

    /// Checks that `rank` names a peer: a rank of the communicator, or of
    /// an inter-communicator's remote group.
    pub(crate) fn check_peer(&self, op: &'static str, rank: Rank) -> Result<(), Error> {
        let size = self.shared.peers.size() as Rank;
        if rank < 0 || rank >= size {
            return Err(Error::Rank { op, rank, size });
        }
        Ok(())
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
    use crate::identity::ProcessId;

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
        let comm = registry
            .create(6, table, None, "split of MPI_COMM_WORLD", ())
            .unwrap();
        let context = comm.context;
        assert_eq!(registry.name(context + 1), "split of MPI_COMM_WORLD");
        drop(comm);
        assert_eq!(registry.name(context), format!("#{}", context / 2));
        assert_eq!(registry.name(0), "MPI_COMM_WORLD");
    }

    /// A derived pair that a live communicator holds is refused with an
    /// error naming both, and is free again once that communicator goes.
    #[test]
    fn a_context_collision_is_an_error_not_a_shared_context() {
        let registry = Registry::new(&Processes::single(4), true);
        let first = registry
            .create(8, Members::World(2), None, "dup of MPI_COMM_WORLD", ())
            .unwrap();
        let err = registry
            .create(
                8,
                Members::from_vec(vec![3]),
                None,
                "split of MPI_COMM_WORLD",
                (),
            )
            .unwrap_err();
        let message = err.to_string();
        assert!(
            message.contains("could not create split of MPI_COMM_WORLD")
                && message.contains("live communicator dup of MPI_COMM_WORLD"),
            "{message}"
        );
        // The refused communicator did not take the name of the first.
        assert_eq!(registry.name(8), "dup of MPI_COMM_WORLD");
        drop(first);
        assert!(registry
            .create(8, Members::World(1), None, "again", ())
            .is_ok());
        // The world's pair is held for the whole job.
        assert!(registry
            .create(0, Members::World(1), None, "x", ())
            .is_err());
    }

    /// The members of a creation across processes in this process share
    /// one communicator; the last of them lets the registry forget it; a
    /// pending pair of other members is a collision.
    #[test]
    fn local_members_share_a_communicator_made_once() {
        // Process 1 of a job of blocks [2, 3]: world ranks 2, 3, 4 here.
        let registry = Registry::new(&Processes::from_blocks(&[2, 3], ProcessId::new(1)), true);
        let members = Members::from_vec(vec![4, 0, 2]);
        let made = std::cell::Cell::new(0);
        let make = || {
            made.set(made.get() + 1);
            registry.create(12, members.clone(), None, "split", ())
        };
        let first = registry.share(12, &members, make).unwrap();
        let other = Members::from_vec(vec![4, 2]);
        let err = registry
            .share(12, &other, || -> Result<Arc<CommShared<()>>, Error> {
                unreachable!("the pending pair is found")
            })
            .unwrap_err();
        assert!(err.to_string().contains("12"), "{err}");
        let second = registry.share(12, &members, make).unwrap();
        assert!(Arc::ptr_eq(&first, &second));
        assert_eq!(made.get(), 1);
        // Two local members took it: the entry is gone, a later pair of
        // the same value after both dropped is made anew.
        drop((first, second));
        let again = registry.share(12, &members, make).unwrap();
        assert_eq!(made.get(), 2);
        drop(again);
    }

    /// A merge whose other side lives in another process keeps nothing.
    #[test]
    fn a_meeting_without_a_partner_here_keeps_nothing() {
        let registry = Registry::new(&Processes::single(4), true);
        let made = registry
            .meet(20, false, || {
                registry.create(20, Members::World(4), None, "m", ())
            })
            .unwrap();
        drop(made);
        assert!(registry.merges.lock().unwrap().is_empty());
        assert!(registry
            .create(20, Members::World(2), None, "again", ())
            .is_ok());
    }
}
