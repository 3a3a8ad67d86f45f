//! Who is asleep: the protocol by which idle workers sleep and are woken.
//!
//! A worker with nothing to run *announces* that it is going to sleep, then
//! looks for work one last time, and only then blocks in the kernel. Anyone
//! who gives a worker work (pushes to its inbox) first publishes the work and
//! then *claims* the worker's announcement; whoever claims it (the waker, or
//! the worker itself when its last look found work) takes the worker out of
//! the sleeper count, exactly once.
//!
//! ```text
//! worker                                   waker
//! ------                                   -----
//! sleepers += 1                            publish work
//! sleeping[w].swap(true)         (AcqRel)  if sleeping[w].swap(false) (AcqRel) {
//! look for work                                sleepers -= 1
//! if found: cancel()                           unpark(thread w)
//! else: park the thread                    }
//! ```
//!
//! Both sides touch `sleeping[w]` with read-modify-writes, so they are
//! ordered in its modification order. If the waker's swap comes after the
//! announcement, it reads `true` and wakes the worker. If it comes before, the
//! announcement reads the value the waker wrote, so the waker's release
//! synchronises with the worker's acquire: the work published before the
//! claim is visible to the worker's last look. (A plain store and load would
//! need `SeqCst` on both sides, the Dekker pattern, which loom cannot check;
//! the RMW form is checked in `loom-tests`.) `std::thread::park` keeps a
//! token, so an unpark that arrives between the last look and the park is not
//! lost either.
//!
//! When `sleepers` reaches the number of workers, every worker has looked for
//! work after announcing and nobody running is left to create more: the job
//! is idle. The worker that completes the count checks timers and external
//! waiters and, if there are none, reports a deadlock (`sched::deadlock`).

use crate::sync::{AtomicBool, AtomicUsize, Ordering};

/// Sleep announcements of the workers of one job.
#[derive(Debug)]
pub(crate) struct Sleep {
    sleeping: Box<[AtomicBool]>,
    sleepers: AtomicUsize,
}

/// Evidence that a worker announced sleep and must either cancel it or park.
#[derive(Debug)]
#[must_use]
pub(crate) struct Announcement {
    worker: usize,
    /// Number of sleepers including this one at the time of the announcement.
    pub(crate) sleepers: usize,
}

impl Sleep {
    pub(crate) fn new(workers: usize) -> Self {
        Sleep {
            sleeping: (0..workers).map(|_| AtomicBool::new(false)).collect(),
            sleepers: AtomicUsize::new(0),
        }
    }

    /// Whether every worker has announced sleep.
    pub(crate) fn all_asleep(&self) -> bool {
        self.sleepers.load(Ordering::SeqCst) == self.sleeping.len()
    }

    /// Number of workers.
    pub(crate) fn workers(&self) -> usize {
        self.sleeping.len()
    }

    /// Step 1 of going to sleep. The caller must look for work again after
    /// this and then call [`Sleep::cancel`] or park its thread.
    pub(crate) fn announce(&self, worker: usize) -> Announcement {
        // Count first: a waker decrements only after it claimed the flag,
        // so the count never goes below zero.
        let sleepers = self.sleepers.fetch_add(1, Ordering::SeqCst) + 1;
        self.sleeping[worker].swap(true, Ordering::AcqRel);
        Announcement { worker, sleepers }
    }

    /// The worker found work after announcing, or woke up: withdraw the
    /// announcement unless a waker already did.
    pub(crate) fn cancel(&self, announcement: Announcement) {
        self.claim(announcement.worker);
    }

    /// Called by a waker after it published work for `worker`. Returns `true`
    /// if the worker had announced sleep: the caller must then unpark its
    /// thread.
    pub(crate) fn claim(&self, worker: usize) -> bool {
        // Always an RMW, never a cheaper load: see the module docs.
        if self.sleeping[worker].swap(false, Ordering::AcqRel) {
            self.sleepers.fetch_sub(1, Ordering::SeqCst);
            true
        } else {
            false
        }
    }
}
