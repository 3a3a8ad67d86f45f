//! Models of the hand-over between polling workers and the progress thread
//! (`src/p2p/pollers.rs`). loom's park has no timeout, so a progress thread
//! that stands aside stays parked unless a poller wakes it: a lost wake-up
//! is a deadlock loom reports.

use std::time::Duration;

use loom::sync::Arc;
use loom::thread;

use crate::pollers::Pollers;

const PAUSE: Duration = Duration::from_millis(1);

/// The last poller leaving for sleep never leaves the progress thread
/// parked, however the two interleave.
#[test]
fn the_last_poller_to_sleep_wakes_the_progress_thread() {
    loom::model(|| {
        let pollers = Arc::new(Pollers::new());
        pollers.begin();
        let progress = {
            let pollers = pollers.clone();
            thread::spawn(move || {
                pollers.stand_aside(PAUSE);
            })
        };
        pollers.end(true);
        progress.join().unwrap();
    });
}

/// Two pollers: only the second to leave (for sleep) must wake it.
#[test]
fn two_pollers_the_last_to_sleep_wakes_it() {
    loom::model(|| {
        let pollers = Arc::new(Pollers::new());
        pollers.begin();
        pollers.begin();
        let progress = {
            let pollers = pollers.clone();
            thread::spawn(move || {
                pollers.stand_aside(PAUSE);
            })
        };
        let other = {
            let pollers = pollers.clone();
            thread::spawn(move || pollers.end(true))
        };
        pollers.end(true);
        other.join().unwrap();
        progress.join().unwrap();
    });
}

/// A poller that left to run a rank (the progress thread may stand aside
/// for it) and came back, then left for sleep: it never leaves the
/// progress thread parked.
#[test]
fn a_poller_back_from_a_rank_then_to_sleep_wakes_it() {
    loom::model(|| {
        let pollers = Arc::new(Pollers::new());
        pollers.begin();
        let progress = {
            let pollers = pollers.clone();
            thread::spawn(move || {
                pollers.stand_aside(PAUSE);
            })
        };
        pollers.end(false);
        pollers.begin();
        pollers.end(true);
        progress.join().unwrap();
    });
}
