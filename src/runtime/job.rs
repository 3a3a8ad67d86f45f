//! A job: everything the ranks of one `run` share (layer L5). Running it
//! (workers, stacks, results) is the runtime's (`run.rs`, layer L6).
//!
//! ## Growing and shrinking
//!
//! A job of one process grows while it runs: [`Job::spawn`] appends ranks
//! (their park slots and mailboxes go to the end of the scheduler's and
//! `p2p`'s grow-only tables, `crate::grow`; their world ranks and local
//! indices follow the job's last rank) and queues them for the workers,
//! which start them as they start the job's own ranks. What a spawned
//! rank runs, its world and its side of the inter-communicator to its
//! parents are a [`SpawnedGroup`] the job keeps (one per spawn call); the
//! runtime's body asks for it ([`Job::spawned_group`]) when a rank of local
//! index beyond the started ones begins. Spawning takes one lock, held
//! only by spawns (the limit check and the tables' growth are one step);
//! lookups by the ranks never take it.
//!
//! Shrinking needs nothing here: retired ranks leave their communicators
//! and return from their closure (`communicator::spawn`); the job tracks
//! only, per rank, the immediate rooted collectives it still has pending
//! ([`PendingRoot`]), which a retiring rank must not have.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, Weak};

use crate::coll::{self, CommCore};
use crate::comm::context::{self, Creation};
use crate::comm::{CommShared, JobCore, Members, Registry, Remote};
use crate::environment::Universe;
use crate::error::{Error, ResourceError};
use crate::grow::GrowTable;
use crate::hardware::{RankAssignment, WorkerPlacement};
use crate::identity::{LocalIndex, Processes, WorldRank};
use crate::p2p;
use crate::sched::stack::StackBudget;
use crate::sched::worker::WorkerShared;
use crate::sched::{self, RankCtx, Threading};
use crate::transport::Transport;

/// Everything the ranks of one job share (in this process: its ranks are
/// the ones `JobCore`'s `p2p::Shared::processes` places here).
///
/// What communicators run on (scheduler, mailboxes, registry) is the
/// [`JobCore`] of the communicator layer, which every communicator handle
/// holds an `Arc` of; the job adds what only the layers above it use. Its
/// fields are private: the methods below are the protocols other modules
/// use.
#[derive(Debug)]
pub(crate) struct Job {
    core: Arc<JobCore>,
    /// The world communicator's shared state.
    world: Arc<CommShared<coll::State>>,
    /// `Hls` values and the groups of ranks that share them.
    hls: crate::hls::JobHls,
    /// Spawned ranks and what bounds them.
    growth: Growth,
}

/// The limits of a job's growth, from the runtime's configuration.
#[derive(Debug, Clone, Copy)]
pub(crate) struct JobGrowth {
    /// The most ranks the job may have.
    pub(crate) max_ranks: usize,
    /// What `MPI_UNIVERSE_SIZE` says: the limit when the user set one,
    /// else the ranks started.
    pub(crate) universe_size: u32,
    /// What more rank stacks may cost.
    pub(crate) budget: StackBudget,
}

/// What a job needs to grow (module docs).
#[derive(Debug)]
struct Growth {
    /// The most ranks the job may have.
    max_ranks: usize,
    /// `MPI_UNIVERSE_SIZE` (see [`JobGrowth`]).
    universe_size: u32,
    /// What more rank stacks may cost.
    budget: StackBudget,
    /// The spawned groups, by first local index; taken by spawns and by
    /// each spawned rank once, when it starts.
    groups: Mutex<Vec<Arc<SpawnedGroup>>>,
    /// Held by a spawn from its limit check to the ranks' queueing.
    spawning: Mutex<()>,
    /// Per rank (local index): immediate collectives it started as their
    /// root and that have not completed.
    pending_roots: GrowTable<AtomicU32>,
}

/// The ranks one spawn call added: what they run and the communicators
/// they start with.
pub(crate) struct SpawnedGroup {
    /// Local index (= world rank: one process) of its first rank.
    pub(crate) first: u32,
    /// Its rank count.
    pub(crate) size: u32,
    /// What each of its ranks runs.
    body: Box<dyn Fn(Universe) + Send + Sync>,
    /// Its world (`MPI_COMM_WORLD` of the spawned ranks).
    pub(crate) world: Arc<CommShared<coll::State>>,
    /// Its side of the inter-communicator to the parents.
    pub(crate) parent: Arc<CommShared<coll::State>>,
}

impl std::fmt::Debug for SpawnedGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpawnedGroup")
            .field("first", &self.first)
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

/// What every parent of a spawn needs to make its side of the
/// inter-communicator: plain numbers, which the root broadcasts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Spawned {
    /// World rank of the first spawned rank (the others follow).
    pub(crate) first: u32,
    /// Spawned ranks.
    pub(crate) size: u32,
    /// The parents' side's context pair.
    pub(crate) parents_context: u64,
    /// The children's side's context pair.
    pub(crate) children_context: u64,
}

impl Spawned {
    /// The contexts of a spawn from the communicator of context `parent`
    /// at its sequence number `seq` (`comm/context.rs`): the children's
    /// world, the parents' side, the children's side.
    pub(crate) fn contexts(parent: u64, seq: u32) -> (u64, u64, u64) {
        let world = context::derive(parent, Creation::Spawn { seq });
        let parents = context::derive(
            parent,
            Creation::InterSide {
                seq,
                remote: world,
                remote_seq: 0,
            },
        );
        let children = context::derive(
            world,
            Creation::InterSide {
                seq: 0,
                remote: parent,
                remote_seq: seq,
            },
        );
        (world, parents, children)
    }

    /// The children's world ranks.
    pub(crate) fn members(&self) -> Members {
        Members::from_vec((self.first..self.first + self.size).collect())
    }
}

impl Job {
    /// The job of the ranks `processes` places here, hosted by itself: its
    /// scheduler gets the workers' shared halves (`workers`), its `Hls`
    /// groups follow the workers' placement and the rank assignment;
    /// `transport` reaches the other processes of a job of several.
    // Plain values from the runtime (which keeps its `Config` to itself),
    // each used once: a struct for them would only rename the arguments.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        processes: &Processes,
        workers: Box<[WorkerShared]>,
        placements: &[WorkerPlacement],
        assignment: RankAssignment,
        threading: Threading,
        eager_limit: usize,
        check_collectives: bool,
        transport: Option<Arc<dyn Transport>>,
        growth: JobGrowth,
    ) -> Arc<Job> {
        let JobGrowth {
            max_ranks,
            universe_size,
            budget,
        } = growth;
        Arc::new_cyclic(|this: &Weak<Job>| {
            // Deadlock reports name communicators through the job (alive while
            // any rank can be reported: the runtime holds it).
            let namer = {
                let this = this.clone();
                move |context: u64| {
                    this.upgrade()
                        .map_or_else(|| context.to_string(), |job| job.core.comms().name(context))
                }
            };
            let comms =
                Registry::new(processes, check_collectives).with_universe_size(universe_size);
            let world = coll::create::world(&comms, processes.world_size());
            let host: Weak<dyn sched::Host> = this.clone();
            Job {
                core: Arc::new(JobCore::new(
                    sched::Scheduler::new(processes.local_ranks(), workers, threading, namer),
                    p2p::Shared::new(processes.clone(), eager_limit, transport),
                    comms,
                    host,
                )),
                world,
                hls: crate::hls::JobHls::new(placements, assignment),
                growth: Growth {
                    max_ranks,
                    universe_size,
                    budget,
                    groups: Mutex::new(Vec::new()),
                    spawning: Mutex::new(()),
                    pending_roots: GrowTable::new(crate::grow::populated(
                        (0..processes.local_count()).map(|_| AtomicU32::new(0)),
                    )),
                },
            }
        })
    }

    /// The job of a rank context (`RankCtx::host` is opaque to `sched`).
    #[inline]
    pub(crate) fn of(ctx: &RankCtx) -> &Job {
        // SAFETY: every context's host is the address of its job's `Arc`
        // allocation: the workers get it from `run_job` (`WorkerArgs::host`)
        // and thread contexts from the job's `JobCore` (a `Weak` of the job,
        // `sched::thread::context`), and no other type hosts ranks. The job
        // outlives every rank context: workers, which own the ranks, are
        // joined before `run_job` drops its `Arc`; thread contexts are never
        // the current context (`sched::rank::current`), through which alone
        // callers reach this function.
        unsafe { &*ctx.host().cast::<Job>() }
    }

    /// A new `Arc` of the job of a rank context.
    pub(crate) fn arc_of(ctx: &RankCtx) -> Arc<Job> {
        let ptr = Job::of(ctx) as *const Job;
        // SAFETY: `ptr` is `Arc::as_ptr` of a live `Arc<Job>` (see `of`);
        // we add the reference we are about to create.
        unsafe {
            Arc::increment_strong_count(ptr);
            Arc::from_raw(ptr)
        }
    }

    /// Whether `ctx` is a context of a rank of this job.
    #[inline]
    pub(crate) fn hosts(&self, ctx: &RankCtx) -> bool {
        std::ptr::eq(ctx.host(), (self as *const Job).cast())
    }

    /// What the job's communicators run on.
    pub(crate) fn core(&self) -> &Arc<JobCore> {
        &self.core
    }

    /// The job's scheduler.
    #[inline]
    pub(crate) fn sched(&self) -> &sched::Scheduler {
        self.core.sched()
    }

    /// The `Hls` values of the job.
    #[inline]
    pub(crate) fn hls(&self) -> &crate::hls::JobHls {
        &self.hls
    }

    /// The point-to-point state: mailboxes and the eager pool (the memory
    /// report reads them).
    pub(crate) fn p2p(&self) -> &p2p::Shared {
        p2p::Node::p2p(&*self.core)
    }

    /// The cross-process half of point-to-point, in a job of several
    /// processes.
    pub(crate) fn remote(&self) -> Option<&p2p::remote::Remote> {
        p2p::Node::p2p(&*self.core).remote()
    }

    /// Which process hosts which world ranks, and which one this is.
    pub(crate) fn processes(&self) -> &crate::identity::Processes {
        p2p::Node::p2p(&*self.core).processes()
    }

    /// `MPI_UNIVERSE_SIZE`: the rank limit the user set, else the ranks
    /// started.
    pub(crate) fn universe_size(&self) -> u32 {
        self.growth.universe_size
    }

    /// Adds `size` ranks running `body`, spawned by the root of `parent`
    /// at the parent's sequence number `seq`: checks the rank limit and
    /// the stack budget (an error leaves the job as it was), makes the
    /// children's world and their side of the inter-communicator, grows
    /// the per-rank tables and queues the ranks.
    pub(crate) fn spawn(
        &self,
        parent: &CommCore,
        seq: u32,
        size: usize,
        body: Box<dyn Fn(Universe) + Send + Sync>,
    ) -> Result<Spawned, Error> {
        let growth = &self.growth;
        let _spawning = growth.spawning.lock().unwrap_or_else(|e| e.into_inner());
        let ranks = self.sched().rank_count();
        if ranks + size > growth.max_ranks {
            return Err(Error::Resources(ResourceError::RankLimit {
                asked: size,
                ranks,
                max: growth.max_ranks,
            }));
        }
        growth.budget.check(size).map_err(Error::Resources)?;
        let (world_context, parents_context, children_context) =
            Spawned::contexts(parent.p2p_context(), seq);
        let spawned = Spawned {
            first: ranks as u32,
            size: size as u32,
            parents_context,
            children_context,
        };
        let registry = self.core.comms();
        let name = parent.name();
        let world = coll::create::standalone(
            registry,
            world_context,
            spawned.members(),
            None,
            &format!("world of the ranks spawned from {name}"),
        )?;
        let side = coll::create::standalone(
            registry,
            children_context,
            spawned.members(),
            Some(Remote {
                members: parent.shared().group.clone(),
                context: parents_context,
            }),
            &format!("inter-communicator of the ranks spawned from {name} to their parents"),
        )?;
        let group = Arc::new(SpawnedGroup {
            first: spawned.first,
            size: spawned.size,
            body,
            world,
            parent: side,
        });
        // Nothing can fail from here on: the tables grow, then the ranks
        // are queued (their group first: a worker may start them at once).
        p2p::Node::p2p(&*self.core).grow(size);
        growth.pending_roots.append(size, |_| AtomicU32::new(0));
        growth
            .groups
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(group);
        let locals = self.sched().spawn_ranks(size, |i| WorldRank::new(i as u32));
        debug_assert_eq!(locals.start, ranks);
        Ok(spawned)
    }

    /// The spawned group of the rank of local index `local`, if it was
    /// spawned.
    pub(crate) fn spawned_group(&self, local: LocalIndex) -> Option<Arc<SpawnedGroup>> {
        if (local.get() as usize) < self.growth.pending_roots.initial() {
            return None;
        }
        let groups = self.growth.groups.lock().unwrap_or_else(|e| e.into_inner());
        let i = groups.partition_point(|g| g.first <= local.get());
        let group = groups.get(i.checked_sub(1)?)?;
        (local.get() < group.first + group.size).then(|| Arc::clone(group))
    }

    /// Runs spawned rank `rank` (local index `local`): its group's body,
    /// with a universe whose world is its group's.
    pub(crate) fn run_spawned(self: &Arc<Job>, rank: WorldRank, local: LocalIndex) {
        let group = self
            .spawned_group(local)
            .expect("a rank beyond the started ones was spawned");
        let universe = Universe::spawned(Arc::clone(self), rank, Arc::clone(&group));
        (group.body)(universe);
    }

    /// Immediate collectives the rank of local index `local` started as
    /// their root and that have not completed.
    pub(crate) fn pending_roots(&self, local: LocalIndex) -> u32 {
        self.growth
            .pending_roots
            .get(local.get() as usize)
            .map_or(0, |n| n.load(Ordering::Acquire))
    }

    /// World rank `rank`'s handle to the world communicator.
    pub(crate) fn world(&self, rank: WorldRank) -> CommCore {
        CommCore::new(
            Arc::clone(&self.core),
            Arc::clone(&self.world),
            rank.as_rank(),
        )
    }
}

/// An immediate collective its root started and that has not completed:
/// counted for the root's rank while alive (a retiring rank must have
/// none, `communicator::spawn`).
#[derive(Debug)]
pub(crate) struct PendingRoot {
    job: Arc<Job>,
    local: LocalIndex,
}

impl PendingRoot {
    /// Counts one for the rank of `ctx`.
    pub(crate) fn enter(ctx: &RankCtx) -> PendingRoot {
        let job = Job::arc_of(ctx);
        if let Some(n) = job.growth.pending_roots.get(ctx.local.get() as usize) {
            n.fetch_add(1, Ordering::AcqRel);
        }
        PendingRoot {
            job,
            local: ctx.local,
        }
    }
}

impl Drop for PendingRoot {
    fn drop(&mut self) {
        if let Some(n) = self.job.growth.pending_roots.get(self.local.get() as usize) {
            n.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

// The only type that hosts ranks: `Job::of` relies on it.
impl sched::Host for Job {
    fn scheduler(&self) -> &sched::Scheduler {
        self.core.sched()
    }

    fn progress(&self) -> bool {
        p2p::remote::progress(&*self.core)
    }

    fn polls(&self) -> bool {
        self.remote().is_some()
    }

    fn transfer_under_way(&self) -> bool {
        self.remote().is_some_and(|remote| remote.transport_busy())
    }

    fn copy_under_way(&self) -> bool {
        self.remote().is_some_and(|remote| remote.copy_under_way())
    }

    fn polling(&self, polling: bool, to_sleep: bool) {
        if let Some(remote) = self.remote() {
            if polling {
                remote.pollers().begin();
            } else {
                remote.pollers().end(to_sleep);
            }
        }
    }
}
