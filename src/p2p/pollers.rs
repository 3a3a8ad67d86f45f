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
//! it parks for at most a pause and looks again (each pause in a row
//! twice the last, up to a bound: each look takes a worker's CPU).
//!
//! A worker brackets its polling between [`Pollers::begin`] and
//! [`Pollers::end`]; the last poller to leave for sleep unparks a progress
//! thread that stands aside, so arrivals for sleeping workers are not
//! delayed by the pause. One that leaves to run a rank does not (that would
//! cost a wake-up per message again): a rank that computes for longer than
//! the pause has the progress thread back in its wait by then.
//!
//! It also stands aside while nobody polls *this instant* but a worker
//! began polling since its last look and has not left for sleep: a worker
//! in a ping-pong with another process leaves its poll for every message,
//! to run the rank the message woke, and is back within microseconds. A
//! progress thread that took such a moment for idleness went into the
//! transport's wait, which (after a light first sleep) asks the peers of
//! the host to ring its doorbell: a system call on their every send, and a
//! wake-up that preempts a polling worker, until it ran again (thousands
//! per second in a 1 B ping-pong under load). So it waits only once a
//! whole pause went by without a poller, or the last one left for sleep.
//!
//! The hand-over goes through a mutex, taken only on those two slow
//! paths (a poller leaving for sleep, the progress thread standing aside):
//! the progress thread reads the count and says it stands aside under the
//! lock, the last poller leaving for sleep looks (and notes that it went
//! to sleep) under it, so either the poller sees it aside and unparks it,
//! or it sees the count at zero and the note.

use crate::sync::{AtomicU64, Mutex, Ordering};
#[cfg(loom)]
use loom::thread::{self, Thread};
#[cfg(not(loom))]
use std::thread::{self, Thread};
use std::time::Duration;

/// The workers polling the transport now, and the progress thread when it
/// stands aside for them.
#[derive(Debug)]
pub(crate) struct Pollers {
    /// Workers between `begin` and `end` (the low 32 bits), and the
    /// `begin`s so far (the high 32, wrapping): one word, so that a
    /// `begin` stays one read-modify-write.
    state: AtomicU64,
    aside: Mutex<Aside>,
}

/// One poller in [`Pollers::state`]: a `begin` adds it and counts itself.
const ONE: u64 = 1;
/// One `begin` in the high half of [`Pollers::state`].
const BEGUN: u64 = 1 << 32;

/// The pollers in a value of [`Pollers::state`].
fn count(state: u64) -> u64 {
    state & (BEGUN - 1)
}

/// The `begin`s in a value of [`Pollers::state`].
fn begun(state: u64) -> u64 {
    state >> 32
}

#[derive(Debug)]
struct Aside {
    /// The progress thread stands aside (parked, or about to park).
    now: bool,
    /// The progress thread, once it has stood aside.
    thread: Option<Thread>,
    /// The `begin`s the progress thread saw at its last look.
    seen: u64,
    /// The last poller left for sleep since that look.
    slept: bool,
    /// Pauses stood aside in a row: each one twice as long as the last,
    /// up to [`LONGEST`] times the first.
    streak: u32,
}

/// The longest pause, in first pauses (a power of two). A progress thread
/// that woke every first pause (1 ms) while two processes ping-ponged took
/// the CPU of a polling worker each time where each worker has one: a
/// round trip of ~0.7 µs that meets it costs a wake-up and two switches
/// (5-50 µs; such round trips held 18-42 % of a 1 B ping-pong's time).
/// Doubling: its wake-ups 1250-1600/s → 600-830/s in that ping-pong at
/// load 4-5 (the rest follow workers that slept while the peer process
/// was preempted; with no other load, nearly all were these pauses). The
/// cost: a worker that went back to computing is noticed up to this many
/// first pauses late.
const LONGEST: u32 = 16;

impl Pollers {
    /// Nobody polls yet.
    pub(crate) fn new() -> Pollers {
        Pollers {
            state: AtomicU64::new(0),
            aside: Mutex::new(Aside {
                now: false,
                thread: None,
                seen: 0,
                slept: false,
                streak: 0,
            }),
        }
    }

    /// A worker starts polling (it found no rank to run).
    pub(crate) fn begin(&self) {
        self.state.fetch_add(BEGUN + ONE, Ordering::SeqCst);
    }

    /// A worker stops polling: to run what it found, or (`to_sleep`) to
    /// sleep, when the last one hands polling back to the progress thread.
    pub(crate) fn end(&self, to_sleep: bool) {
        if count(self.state.fetch_sub(ONE, Ordering::SeqCst)) == 1 && to_sleep {
            let mut aside = self.aside.lock().unwrap_or_else(|e| e.into_inner());
            aside.slept = true;
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
    /// worker polls, or began to since the last call and did not leave for
    /// sleep, parks for at most `pause` (or until the last poller leaves
    /// for sleep) and returns `true`; the caller looks again. Each pause
    /// in a row is twice the last, up to [`LONGEST`] times `pause`: while
    /// workers keep polling, each wake-up only takes a CPU from one.
    pub(crate) fn stand_aside(&self, pause: Duration) -> bool {
        let pause = {
            let mut aside = self.aside.lock().unwrap_or_else(|e| e.into_inner());
            let state = self.state.load(Ordering::SeqCst);
            let polled = begun(state) != aside.seen;
            aside.seen = begun(state);
            let slept = std::mem::replace(&mut aside.slept, false);
            if count(state) == 0 && (!polled || slept) {
                aside.streak = 0;
                return false;
            }
            aside.now = true;
            if aside.thread.is_none() {
                aside.thread = Some(thread::current());
            }
            let times = 1 << aside.streak.min(LONGEST.trailing_zeros());
            aside.streak = aside.streak.saturating_add(1);
            pause * times
        };
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
    fn a_poller_gone_to_run_a_rank_keeps_it_aside_one_pause() {
        let pollers = Pollers::new();
        pollers.begin();
        pollers.end(false);
        // Back any moment: a pause aside, then (nobody came back) it waits.
        assert!(pollers.stand_aside(Duration::from_millis(1)));
        assert!(!pollers.stand_aside(Duration::from_secs(60)));
    }

    #[test]
    fn a_poller_gone_to_sleep_leaves_it_to_wait() {
        let pollers = Pollers::new();
        pollers.begin();
        pollers.end(false);
        pollers.begin();
        pollers.end(true);
        assert!(!pollers.stand_aside(Duration::from_secs(60)));
    }

    #[test]
    fn pauses_in_a_row_double_up_to_the_longest_and_start_over() {
        let pollers = Pollers::new();
        let streak = || pollers.aside.lock().unwrap().streak;
        for n in 1..=8 {
            // A worker came back each time: it stands aside again.
            pollers.begin();
            pollers.end(false);
            assert!(pollers.stand_aside(Duration::ZERO));
            assert_eq!(streak(), n);
        }
        // Nobody polled since: it waits, and the next pause is the first.
        assert!(!pollers.stand_aside(Duration::ZERO));
        assert_eq!(streak(), 0);
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
