//! Micro-tasks: the work items of hybrid parallel regions.
//!
//! MPC runs MPI ranks and OpenMP threads on one scheduler; myriad does the
//! same with micro-tasks: plain closures (no coroutine, no stack of their
//! own) that any worker runs between ranks. A parallel region
//! (`hybrid::parallel_for`, `hybrid::scope`) pushes a few *helpers* into the
//! job's micro-task queue and works on the region itself; each helper claims
//! chunks until none is left, then signals the region. The rank that opened
//! the region parks until every helper is done, so its worker runs other
//! ranks and micro-tasks meanwhile.
//!
//! A micro-task never parks: it runs on the worker's own stack, between two
//! coroutine switches. Blocking MPI calls from a micro-task are refused (the
//! calling thread runs no rank at that moment).

use std::sync::atomic::{AtomicUsize, Ordering};

use crossbeam_deque::{Injector, Steal};

use super::Scheduler;
use crate::identity::WorldRank;

/// A queued micro-task. Its lifetime was erased by the region that pushed
/// it, which waits for it before the borrows it captures end.
pub(crate) struct MicroTask {
    /// The world rank whose region it belongs to (for error reports).
    pub(crate) rank: WorldRank,
    pub(crate) run: Box<dyn FnOnce() + Send>,
}

impl std::fmt::Debug for MicroTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MicroTask")
    }
}

/// The job's queue of micro-tasks, shared by its workers.
#[derive(Debug, Default)]
pub(crate) struct MicroQueue {
    queue: Injector<MicroTask>,
    /// Tasks pushed and not yet popped. Workers look at the queue at every
    /// scheduling decision; one load of this counter is much cheaper than
    /// `Injector::steal` on an empty queue, which would otherwise cost every
    /// rank switch a few dozen instructions.
    queued: AtomicUsize,
}

impl MicroQueue {
    /// Queues `tasks` and wakes sleeping workers to run them.
    pub(crate) fn push(&self, sched: &Scheduler, tasks: impl IntoIterator<Item = MicroTask>) {
        let mut pushed = 0;
        for task in tasks {
            // Counted before it is visible: `pop` never sees a task with
            // the counter at zero.
            self.queued.fetch_add(1, Ordering::Release);
            self.queue.push(task);
            pushed += 1;
        }
        if pushed > 0 {
            // Idle workers look at the queue before sleeping (`has_work`);
            // claim the sleeping ones so they look again.
            for (i, worker) in sched.workers.iter().enumerate() {
                if sched.sleep.claim(i) {
                    worker.unpark();
                }
            }
        }
    }

    /// A micro-task to run, if any.
    #[inline]
    pub(crate) fn pop(&self) -> Option<MicroTask> {
        if self.queued.load(Ordering::Acquire) == 0 {
            return None;
        }
        loop {
            match self.queue.steal() {
                Steal::Success(task) => {
                    self.queued.fetch_sub(1, Ordering::Relaxed);
                    return Some(task);
                }
                Steal::Empty => return None,
                Steal::Retry => continue,
            }
        }
    }

    /// Whether no task is queued (used before a worker sleeps; a task being
    /// pushed right now is announced by the pusher's wake-up).
    pub(crate) fn is_empty(&self) -> bool {
        self.queued.load(Ordering::Acquire) == 0
    }
}
