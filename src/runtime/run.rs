//! Running a job (layer L6): `run_job` is the whole life of a job:
//!
//! 1. discover the topology and place one worker per processing unit;
//! 2. map a stack pool (checking the mapping budget when guard pages split
//!    mappings) and give each worker its block of unstarted ranks;
//! 3. run the workers on scoped threads until every rank finished or the job
//!    failed (the workers unwind what is left, see `sched::worker`);
//! 4. return the ranks' results, or the error that ended the job.
//!
//! The job the ranks share is `job.rs` (layer L5).

use std::cell::UnsafeCell;
use std::sync::{Arc, Barrier};

use crossbeam_deque::Worker as Deque;

use super::config::Config;
use super::job::Job;
use crate::environment::Universe;
use crate::error::{Error, ResourceError};
use crate::hardware::{self, RankAssignment, Topology};
use crate::identity::{LocalIndex, Processes};
use crate::sched;
use crate::sched::stack::StackPool;
use crate::sched::worker::{self, WorkerArgs, WorkerShared};

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
    // Under a launcher: go on only as its job's one process (`launch`).
    if let Some(bootstrap) = crate::launch::join(&config.launch)? {
        return Err(crate::launch::unsupported(bootstrap));
    }
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
    let job = Job::new(
        &processes,
        shared,
        &placements,
        assignment,
        config.threading,
        config.eager_limit,
        config.check_collectives,
    );
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
