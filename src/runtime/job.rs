//! A job: the ranks of one `run`, their workers and everything they share.
//!
//! `run_job` is the whole life of a job:
//!
//! 1. discover the topology and place one worker per processing unit;
//! 2. map a stack pool (checking the mapping budget when guard pages split
//!    mappings) and give each worker its block of unstarted ranks;
//! 3. run the workers on scoped threads until every rank finished or the job
//!    failed (the workers unwind what is left, see `sched::worker`);
//! 4. return the ranks' results, or the error that ended the job.

use std::cell::UnsafeCell;
use std::sync::{Arc, Barrier, Weak};

use crossbeam_deque::Worker as Deque;

use super::config::Config;
use crate::coll::{self, CommCore};
use crate::comm::{CommShared, JobCore, Registry};
use crate::environment::Universe;
use crate::error::{Error, ResourceError};
use crate::hardware::{self, RankAssignment, Topology};
use crate::identity::{LocalIndex, Processes, WorldRank};
use crate::p2p;
use crate::sched::stack::StackPool;
use crate::sched::worker::{self, WorkerArgs, WorkerShared};
use crate::sched::{self, RankCtx};

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
    size: u32,
}

impl Job {
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

    /// The number of ranks the job started with.
    #[inline]
    pub(crate) fn size(&self) -> u32 {
        self.size
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

// The only type that hosts ranks: `Job::of` relies on it.
impl sched::Host for Job {
    fn scheduler(&self) -> &sched::Scheduler {
        self.core.sched()
    }
}

/// One result slot per rank of this process (by local index), each written
/// once by its rank.
struct Results<T> {
    slots: Box<[UnsafeCell<Option<T>>]>,
}

// SAFETY: each slot is written by exactly one rank (its own) and read only
// after all workers are joined; `T: Send` lets values cross threads.
unsafe impl<T: Send> Sync for Results<T> {}

impl<T> Results<T> {
    fn new(n: usize) -> Self {
        Results {
            slots: (0..n).map(|_| UnsafeCell::new(None)).collect(),
        }
    }

    /// # Safety
    ///
    /// Only the rank of local index `rank` calls this, once.
    unsafe fn set(&self, rank: LocalIndex, value: T) {
        // SAFETY: the caller is the slot's only writer.
        unsafe { *self.slots[rank.get() as usize].get() = Some(value) };
    }

    fn into_vec(self) -> Vec<T> {
        self.slots
            .into_vec()
            .into_iter()
            .map(|slot| slot.into_inner().expect("every rank returned"))
            .collect()
    }
}

/// Runs `f` on `config.ranks` ranks and returns their results in rank order
/// (the ranks of this process by local index: one process hosts them all,
/// in world rank order).
pub(crate) fn run_job<T, F>(config: &Config, f: F) -> Result<Vec<T>, Error>
where
    T: Send,
    F: Fn(Universe) -> T + Sync,
{
    super::panic_hook::install();
    crate::coll::env_defaults()?;
    // One process hosts every rank until a launcher starts more.
    let processes = Processes::single(config.ranks as u32);
    let ranks = processes.local_count() as usize;
    let topo = Topology::detect().map_err(|e| Error::config(e.to_string()))?;
    let placements = hardware::place_workers(&topo, config.workers, config.map_by)
        .map_err(|e| Error::config(format!("placing workers by {}: {e}", config.map_by)))?;
    let binds = config.bind && topo.binds_for_real();
    let workers = placements.len();

    let pool = StackPool::new(config.stack_size, ranks, config.guard).map_err(|e| {
        Error::Resources(ResourceError::StackPool {
            reason: e.to_string(),
        })
    })?;
    pool.check_map_budget(ranks).map_err(Error::Resources)?;

    let assignment = RankAssignment::new(ranks, workers, config.rank_order);
    let deques: Vec<Deque<u32>> = (0..workers).map(|_| Deque::new_fifo()).collect();
    for (w, deque) in deques.iter().enumerate() {
        for rank in assignment.ranks_of(w) {
            deque.push(rank as u32);
        }
    }
    let shared: Box<[WorkerShared]> = deques
        .iter()
        .map(|d| WorkerShared::new(d.stealer()))
        .collect();
    let job = Arc::new_cyclic(|this: &Weak<Job>| {
        // Deadlock reports name communicators through the job (alive while
        // any rank can be reported: `run_job` holds it).
        let namer = {
            let this = this.clone();
            move |context: u64| {
                this.upgrade()
                    .map_or_else(|| context.to_string(), |job| job.core.comms().name(context))
            }
        };
        let comms = Registry::new(&processes, config.check_collectives);
        let world = coll::create::world(&comms, processes.world_size());
        let host: Weak<dyn sched::Host> = this.clone();
        Job {
            core: Arc::new(JobCore::new(
                sched::Scheduler::new(processes.local_ranks(), shared, config.threading, namer),
                p2p::Shared::new(processes.clone(), config.eager_limit),
                comms,
                host,
            )),
            world,
            size: processes.world_size(),
            hls: crate::hls::JobHls::new(&placements, assignment),
        }
    });
    if config.report_bindings {
        eprintln!("[myriad] {topo}; stack guards: {:?}", pool.mode());
        eprint!(
            "{}",
            hardware::binding_report(&placements, &assignment.counts(), binds)
        );
    }

    let results = Results::new(ranks);
    let body = |rank, local| {
        let universe = Universe::new(Arc::clone(&job), rank);
        sched::rank::with_current(|ctx| {
            if let Some(ctx) = ctx {
                ctx.initialized.set(true);
            }
        });
        let value = f(universe);
        // SAFETY: the body runs once per rank, on that rank.
        unsafe { results.set(local, value) };
    };
    let start = Barrier::new(workers);
    let exit = Barrier::new(workers);
    std::thread::scope(|scope| {
        for (index, deque) in deques.into_iter().enumerate() {
            let args = WorkerArgs {
                sched: job.sched(),
                host: &*job,
                index,
                deque,
                body: &body,
                pool: &pool,
                bind_to: binds.then_some(placements[index].pu.os_index),
                start: &start,
                exit: &exit,
            };
            let thread = std::thread::Builder::new()
                .name(format!("myriad-w{index}"))
                .spawn_scoped(scope, move || worker::run(args));
            if let Err(err) = thread {
                // The workers already started wait for all at their exit
                // barrier: stand in for the missing ones.
                job.sched()
                    .fail(Error::Resources(ResourceError::WorkerThread {
                        index,
                        reason: err.to_string(),
                    }));
                for _ in index..workers {
                    let (start, exit) = (&start, &exit);
                    scope.spawn(move || {
                        start.wait();
                        exit.wait();
                    });
                }
                break;
            }
        }
    });
    // Threads still acting for ranks get errors from now on.
    job.sched().end_threads();
    if config.report_bindings {
        let hosted: Vec<String> = job
            .sched()
            .ranks_per_worker()
            .iter()
            .enumerate()
            .map(|(i, n)| format!("worker {i}: {n}"))
            .collect();
        eprintln!("[myriad] ranks run per worker: {}", hosted.join(", "));
    }
    if let Some(error) = job.sched().take_failure() {
        return Err(error);
    }
    Ok(results.into_vec())
}
