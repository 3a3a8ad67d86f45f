//! Who polls the transport: idle workers, or the progress thread.
//!
//! Idle workers poll the transport between ranks (collaborative polling);
//! the progress thread blocks in the transport's wait for the times nobody
//! polls (every worker computes, or sleeps). Both at once is worse than
//! either: the progress thread's `epoll_wait` returns for every frame that
//! arrives, so on a machine with as many cores as busy workers each
//! arrival preempts a polling worker for a wake-up that finds the frame
//! already taken (or spins, the socket still readable, until the worker
//! reads it). So the progress thread *stands aside* while a worker polls:
//! it parks for at most a pause and looks again.
//!
//! A worker brackets its polling between [`Pollers::begin`] and
//! [`Pollers::end`]; the last poller to leave for sleep unparks a progress
//! thread that stands aside, so arrivals for sleeping workers are not
//! delayed by the pause. One that leaves to run a rank does not (that would
//! cost a wake-up per message again): a rank that computes for longer than
//! the pause has the progress thread back in its wait by then.
//!
//! The hand-over goes through a mutex, taken only on those two slow
//! paths (a poller leaving for sleep, the progress thread standing aside):
//! the progress thread reads the count and says it stands aside under the
//! lock, the last poller leaving for sleep looks under it, so either the
//! poller sees it aside and unparks it, or it sees the count at zero.

use crate::sync::{AtomicUsize, Mutex, Ordering};
#[cfg(loom)]
use loom::thread::{self, Thread};
#[cfg(not(loom))]
use std::thread::{self, Thread};
use std::time::Duration;

/// The workers polling the transport now, and the progress thread when it
/// stands aside for them.
#[derive(Debug)]
pub(crate) struct Pollers {
    /// Workers between `begin` and `end`.
    count: AtomicUsize,
    aside: Mutex<Aside>,
}

#[derive(Debug)]
struct Aside {
    /// The progress thread stands aside (parked, or about to park).
    now: bool,
    /// The progress thread, once it has stood aside.
    thread: Option<Thread>,
}

impl Pollers {
    /// Nobody polls yet.
    pub(crate) fn new() -> Pollers {
        Pollers {
            count: AtomicUsize::new(0),
            aside: Mutex::new(Aside {
                now: false,
                thread: None,
            }),
        }
    }

    /// A worker starts polling (it found no rank to run).
    pub(crate) fn begin(&self) {
        self.count.fetch_add(1, Ordering::SeqCst);
    }

    /// A worker stops polling: to run what it found, or (`to_sleep`) to
    /// sleep, when the last one hands polling back to the progress thread.
    pub(crate) fn end(&self, to_sleep: bool) {
        if self.count.fetch_sub(1, Ordering::SeqCst) == 1 && to_sleep {
            let aside = self.aside.lock().unwrap_or_else(|e| e.into_inner());
            if aside.now {
                if let Some(thread) = &aside.thread {
                    thread.unpark();
                }
            }
        }
    }

    /// Unparks the progress thread if it ever stood aside (when the job
    /// ends, so that it sees its stop flag at once).
    pub(crate) fn release(&self) {
        let aside = self.aside.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(thread) = &aside.thread {
            thread.unpark();
        }
    }

    /// Called by the progress thread before it waits in the transport: if a
    /// worker polls, parks for at most `pause` (or until the last poller
    /// leaves for sleep) and returns `true`; the caller looks again.
    pub(crate) fn stand_aside(&self, pause: Duration) -> bool {
        if self.count.load(Ordering::SeqCst) == 0 {
            return false;
        }
        {
            let mut aside = self.aside.lock().unwrap_or_else(|e| e.into_inner());
            if self.count.load(Ordering::SeqCst) == 0 {
                return false;
            }
            aside.now = true;
            if aside.thread.is_none() {
                aside.thread = Some(thread::current());
            }
        }
        park_timeout(pause);
        self.aside.lock().unwrap_or_else(|e| e.into_inner()).now = false;
        true
    }
}

#[cfg(not(loom))]
fn park_timeout(pause: Duration) {
    thread::park_timeout(pause);
}

/// loom has no timed park: its models end the pause by an unpark.
#[cfg(loom)]
fn park_timeout(_pause: Duration) {
    thread::park();
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Instant;

    #[test]
    fn nobody_polls_nothing_to_stand_aside_for() {
        let pollers = Pollers::new();
        assert!(!pollers.stand_aside(Duration::from_secs(60)));
    }

    #[test]
    fn the_last_poller_leaving_for_sleep_ends_the_pause() {
        let pollers = Arc::new(Pollers::new());
        pollers.begin();
        let start = Instant::now();
        let aside = {
            let pollers = pollers.clone();
            std::thread::spawn(move || pollers.stand_aside(Duration::from_secs(60)))
        };
        // Whether the progress thread parked before or after this, it does
        // not wait out its minute.
        pollers.end(true);
        aside.join().unwrap();
        assert!(start.elapsed() < Duration::from_secs(30));
    }
}
