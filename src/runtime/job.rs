//! A job: everything the ranks of one `run` share (layer L5). Running it
//! (workers, stacks, results) is the runtime's (`run.rs`, layer L6).

use std::sync::{Arc, Weak};

use crate::coll::{self, CommCore};
use crate::comm::{CommShared, JobCore, Registry};
use crate::hardware::{RankAssignment, WorkerPlacement};
use crate::identity::{Processes, WorldRank};
use crate::p2p;
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
    size: u32,
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
    ) -> Arc<Job> {
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
            let comms = Registry::new(processes, check_collectives);
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
                size: processes.world_size(),
                hls: crate::hls::JobHls::new(placements, assignment),
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

    fn progress(&self) -> bool {
        p2p::remote::progress(&*self.core)
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
