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
//! When `sleepers` reaches the number of workers, every worker has announced
//! and nobody running is left to create more work, but a worker counts from
//! its announcement on: one may still be about to find work in its last look
//! and cancel. The worker that completes the count checks timers, external
//! waiters and the workers' queued wake-ups (the slots a worker is to
//! unpark itself still read parked) and, if there are none, reports a
//! deadlock (`sched::deadlock::check_stable`, which confirms the count and
//! the queues after reading the slots).
//!
//! ## Spinning before sleep
//!
//! Before it announces sleep an idle worker polls for a while (the worker
//! loop's `spin`), and says so here ([`Sleep::set_polling`]).
//! A worker that is neither polling nor announced is *busy*: it runs ranks
//! (or is being woken to run them) and may publish work for the others at
//! any moment. While some other worker is busy, an idle one polls on
//! ([`Sleep::others_busy`], bounded by the worker loop) instead of sleeping:
//! rayon's and tokio's rule. Without it two workers fall into a cycle in which
//! each sleeps while the other is being woken (tens of microseconds in the
//! kernel here, longer than the base poll), and every exchange pays a wake-up.
//! The polling flags are a hint read with relaxed loads: it decides only how
//! long a worker polls, never whether a wake-up is delivered (the
//! announce/claim protocol above does that alone), and when every worker is
//! idle none is busy, so all of them go to sleep and the deadlock check runs.

use crate::sync::{AtomicBool, AtomicUsize, Ordering};

/// Sleep announcements of the workers of one job.
#[derive(Debug)]
pub(crate) struct Sleep {
    /// One line each: a waker claims its peer's flag on every cross-worker
    /// wake-up, which must not evict the flags other workers write.
    sleeping: Box<[Padded<AtomicBool>]>,
    sleepers: AtomicUsize,
    /// Workers polling for work before they sleep (a hint, see the module
    /// docs), one line each: written by its worker only, read rarely.
    polling: Box<[Padded<AtomicBool>]>,
}

/// A value alone on its cache line (two lines: the adjacent-line prefetcher
/// pairs them).
#[derive(Debug)]
#[repr(align(128))]
struct Padded<T>(T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
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
            sleeping: (0..workers)
                .map(|_| Padded(AtomicBool::new(false)))
                .collect(),
            sleepers: AtomicUsize::new(0),
            polling: (0..workers)
                .map(|_| Padded(AtomicBool::new(false)))
                .collect(),
        }
    }

    /// Worker `worker` starts (`true`) or stops polling for work before
    /// sleep.
    pub(crate) fn set_polling(&self, worker: usize, polling: bool) {
        self.polling[worker].store(polling, Ordering::Relaxed);
    }

    /// Whether a worker other than `worker` is busy: neither polling for
    /// work nor announced asleep (a worker being woken counts as busy). Such
    /// a worker may publish work for `worker` soon. A hint: the flags are
    /// read one after another, with relaxed loads.
    pub(crate) fn others_busy(&self, worker: usize) -> bool {
        (0..self.sleeping.len()).any(|w| {
            w != worker
                && !self.polling[w].load(Ordering::Relaxed)
                && !self.sleeping[w].load(Ordering::Relaxed)
        })
    }

    /// How many workers are idle: polling for work or announced asleep (a
    /// hint, read like [`others_busy`](Self::others_busy)'s flags).
    pub(crate) fn idle(&self) -> usize {
        (0..self.sleeping.len())
            .filter(|&w| {
                self.polling[w].load(Ordering::Relaxed) || self.sleeping[w].load(Ordering::Relaxed)
            })
            .count()
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
