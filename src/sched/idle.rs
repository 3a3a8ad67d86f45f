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
//! worker                              waker
//! ------                              -----
//! sleeping[w] = true        (SeqCst)  publish work             (SeqCst)
//! sleepers += 1                       if sleeping[w].swap(false) (SeqCst) {
//! look for work             (SeqCst)      sleepers -= 1
//! if found: cancel()                      unpark(thread w)
//! else: park the thread               }
//! ```
//!
//! Both sides store then load with `SeqCst`, so in the single total order
//! either the waker's claim comes after the announcement (it wakes the
//! worker) or the waker's publication comes before the worker's last look
//! (the worker sees the work): the classic Dekker argument, modelled with loom
//! in `loom-tests`. `std::thread::park` keeps a token, so an unpark that
//! arrives between the last look and the park is not lost either.
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

    /// Number of workers.
    pub(crate) fn workers(&self) -> usize {
        self.sleeping.len()
    }

    /// Step 1 of going to sleep. The caller must look for work again after
    /// this and then call [`Sleep::cancel`] or park its thread.
    pub(crate) fn announce(&self, worker: usize) -> Announcement {
        self.sleeping[worker].store(true, Ordering::SeqCst);
        let sleepers = self.sleepers.fetch_add(1, Ordering::SeqCst) + 1;
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
        // A cheap load first: most pushes go to awake workers.
        if !self.sleeping[worker].load(Ordering::SeqCst) {
            return false;
        }
        if self.sleeping[worker].swap(false, Ordering::SeqCst) {
            self.sleepers.fetch_sub(1, Ordering::SeqCst);
            true
        } else {
            false
        }
    }
}
