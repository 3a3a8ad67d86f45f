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

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use crate::coll;
use crate::error::{raise, Error};
use crate::runtime::job::Job;
use crate::sched::{self, RankCtx};
use crate::Rank;

/// Which world ranks a communicator has, in its rank order.
#[derive(Debug)]
pub(crate) enum Group {
    /// Ranks `0..n` of the world, in order (no table).
    World(u32),
    /// An explicit table: comm rank `i` is world rank `ranks[i]`.
    #[allow(dead_code)]
    Ranks(Box<[u32]>),
}

impl Group {
    #[inline]
    pub(crate) fn size(&self) -> u32 {
        match self {
            Group::World(n) => *n,
            Group::Ranks(ranks) => ranks.len() as u32,
        }
    }

    #[inline]
    pub(crate) fn world_rank(&self, rank: Rank) -> u32 {
        match self {
            Group::World(_) => rank as u32,
            Group::Ranks(ranks) => ranks[rank as usize],
        }
    }
}

/// State shared by all ranks of one communicator.
#[derive(Debug)]
pub(crate) struct CommShared {
    /// Context id of point-to-point traffic; collectives use `context + 1`.
    pub(crate) context: u32,
    pub(crate) group: Group,
    /// Sequence numbers, checker, rounds, algorithm choices.
    pub(crate) coll: coll::State,
}

impl CommShared {
    pub(crate) fn new(context: u32, group: Group, check_collectives: bool) -> CommShared {
        let size = group.size() as usize;
        CommShared {
            context,
            group,
            coll: coll::State::new(size, check_collectives, coll::Selection::from_env()),
        }
    }
}

/// Communicator bookkeeping of a job.
#[derive(Debug)]
pub(crate) struct Registry {
    next_context: AtomicU32,
    names: Mutex<HashMap<u32, String>>,
    /// Whether new communicators check their collective calls.
    #[allow(dead_code)]
    pub(crate) check_collectives: bool,
    pub(crate) world: Arc<CommShared>,
}

impl Registry {
    pub(crate) fn new(ranks: u32, check_collectives: bool) -> Registry {
        let mut names = HashMap::new();
        names.insert(0, "MPI_COMM_WORLD".to_string());
        Registry {
            next_context: AtomicU32::new(2),
            names: Mutex::new(names),
            check_collectives,
            world: Arc::new(CommShared::new(0, Group::World(ranks), check_collectives)),
        }
    }

    /// Reserves a context id pair for a new communicator.
    #[allow(dead_code)]
    pub(crate) fn new_context(&self) -> u32 {
        self.next_context.fetch_add(2, Ordering::Relaxed)
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
    world: u32,
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
        let world = shared.group.world_rank(rank);
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
    pub(crate) fn world(&self) -> u32 {
        self.world
    }

    #[inline]
    pub(crate) fn size(&self) -> Rank {
        self.shared.group.size() as Rank
    }

    /// The world rank of communicator rank `rank` (checked by the caller).
    #[inline]
    pub(crate) fn world_rank(&self, rank: Rank) -> u32 {
        self.shared.group.world_rank(rank)
    }

    #[inline]
    pub(crate) fn p2p_context(&self) -> u32 {
        self.shared.context
    }

    /// The context of the calling rank, checked to be this handle's rank.
    #[inline]
    pub(crate) fn caller(&self) -> Result<&'static RankCtx, Error> {
        match sched::rank::current() {
            Some(ctx) if std::ptr::eq(ctx.job, &*self.job) && ctx.rank == self.world => Ok(ctx),
            other => Err(self.wrong_caller(other)),
        }
    }

    #[cold]
    fn wrong_caller(&self, ctx: Option<&RankCtx>) -> Error {
        let message = match ctx {
            None => format!(
                "an MPI operation on a communicator of rank {} was called outside of any \
                 rank (from a plain thread); ranks start with myriad::run, myriad::launch \
                 or Runtime::run",
                self.world
            ),
            Some(ctx) if std::ptr::eq(ctx.job, &*self.job) => format!(
                "rank {} used a communicator handle that belongs to rank {}; handles must \
                 stay with the rank that created them",
                ctx.rank, self.world
            ),
            Some(ctx) => format!(
                "rank {} of one job used a communicator of another job (rank {})",
                ctx.rank, self.world
            ),
        };
        Error::Comm { message }
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

mod sealed {
    /// Access to a communicator's internals.
    pub trait AsCore {
        /// The rank's handle.
        fn core(&self) -> &super::CommCore;
    }
}

/// Access to a communicator's internals (sealed: only myriad's types
/// implement it).
#[doc(hidden)]
pub use sealed::AsCore;

/// A communicator: a group of ranks and a context to talk in (rsmpi's
/// `Communicator`). Object safe: `&dyn Communicator` works.
pub trait Communicator: AsCore {
    /// Number of ranks in the communicator.
    fn size(&self) -> Rank {
        self.core().size()
    }

    /// The calling rank's rank in the communicator.
    fn rank(&self) -> Rank {
        self.core().rank()
    }

    /// The process with rank `r`, as a destination or source.
    ///
    /// # Panics
    ///
    /// If `r` is not in `0..size()` (the message names both).
    #[track_caller]
    fn process_at_rank(&self, r: Rank) -> Process<'_> {
        let core = self.core();
        if let Err(err) = core.check_rank("process_at_rank", r) {
            raise(err);
        }
        Process { core, rank: r }
    }

    /// Any process: a source that matches messages from every rank.
    fn any_process(&self) -> AnyProcess<'_> {
        AnyProcess { core: self.core() }
    }

    /// The calling process itself.
    fn this_process(&self) -> Process<'_> {
        let core = self.core();
        Process {
            core,
            rank: core.rank(),
        }
    }

    /// The communicator's name (`MPI_COMM_WORLD` for the world).
    fn get_name(&self) -> String {
        let core = self.core();
        core.job().comms.name(core.p2p_context())
    }

    /// Names the communicator (for error and deadlock reports).
    fn set_name(&self, name: &str) {
        let core = self.core();
        core.job().comms.set_name(core.p2p_context(), name);
    }
}

/// A communicator handle (rsmpi's `SimpleCommunicator`).
#[derive(Debug, Clone)]
pub struct SimpleCommunicator {
    core: CommCore,
}

impl SimpleCommunicator {
    pub(crate) fn from_core(core: CommCore) -> Self {
        SimpleCommunicator { core }
    }

    /// The world communicator of the calling rank.
    ///
    /// # Panics
    ///
    /// Outside of any rank.
    #[track_caller]
    pub fn world() -> SimpleCommunicator {
        let Some(ctx) = sched::rank::current() else {
            raise(Error::Comm {
                message: "SimpleCommunicator::world() was called outside of any rank".into(),
            });
        };
        // SAFETY: the job outlives the running rank; `Job::arc` recovers the
        // `Arc` that owns it.
        let job = unsafe { Job::arc_from_ptr(ctx.job) };
        let world = Arc::clone(&job.comms.world);
        SimpleCommunicator::from_core(CommCore::new(job, world, ctx.rank as Rank))
    }
}

impl AsCore for SimpleCommunicator {
    fn core(&self) -> &CommCore {
        &self.core
    }
}

impl Communicator for SimpleCommunicator {}

/// One rank of a communicator, as a destination or source (rsmpi's
/// `Process`).
#[derive(Debug, Clone, Copy)]
pub struct Process<'a> {
    pub(crate) core: &'a CommCore,
    pub(crate) rank: Rank,
}

impl Process<'_> {
    /// The process's rank in its communicator.
    pub fn rank(&self) -> Rank {
        self.rank
    }

    /// Whether this is the calling process.
    pub fn is_self(&self) -> bool {
        self.rank == self.core.rank()
    }
}

/// Every rank of a communicator as a source (rsmpi's `AnyProcess`).
#[derive(Debug, Clone, Copy)]
pub struct AnyProcess<'a> {
    pub(crate) core: &'a CommCore,
}

impl AsCore for Process<'_> {
    fn core(&self) -> &CommCore {
        self.core
    }
}

impl AsCore for AnyProcess<'_> {
    fn core(&self) -> &CommCore {
        self.core
    }
}
