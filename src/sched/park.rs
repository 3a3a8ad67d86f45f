//! The per-rank park state: how a rank waits without losing a wake-up.
//!
//! A rank that must wait for a condition (a request completing, a barrier
//! opening) runs
//!
//! ```text
//! loop {
//!     if condition() { break }
//!     if state.try_park() { suspend to the worker }
//! }
//! ```
//!
//! and whoever makes the condition true publishes it first and then calls
//! [`ParkState::unpark`]; when that returns `true` the caller must put the rank
//! back on its worker's run queue (exactly one caller gets `true` per park).
//!
//! ## States
//!
//! | state      | meaning                                                    |
//! |------------|------------------------------------------------------------|
//! | `RUNNING`  | the rank runs (or is queued to run) and has no pending wake |
//! | `PARKED`   | the rank suspended itself; only an unpark requeues it       |
//! | `NOTIFIED` | a wake arrived; the next `try_park` returns at once         |
//!
//! ## Why no wake-up is lost
//!
//! * `unpark` takes a parked rank back with a `compare_exchange(PARKED ->
//!   RUNNING)`: the rank is suspended (or about to suspend: the worker that
//!   owns it is busy running it and only pops its queue after the switch)
//!   and this caller, alone, requeues it. The requeue (a queue under a lock,
//!   or the rank's own worker thread) carries the caller's condition write
//!   to the rank, which re-checks its condition when it runs: the rank
//!   leaves `PARKED` without a read-modify-write of its own when it resumes
//!   (the locked instruction right after the switch waited for the stores
//!   of the switch, cold stack lines, to drain: ~7 % of a 1,024-rank
//!   barrier's time).
//! * Otherwise `unpark` is a `swap(NOTIFIED)`. If it reads `PARKED` (the
//!   rank parked since the first look), this caller requeues it, and the
//!   rank resumes with the notification pending: one extra re-check. If it
//!   reads anything else, the rank is running or queued and will see
//!   `NOTIFIED` in `try_park`.
//! * `try_park` is a `compare_exchange(RUNNING -> PARKED)`: it fails exactly
//!   when a notification is pending, and the rank then re-checks its condition.
//! * Leaving `NOTIFIED` is always a read-modify-write (`swap(RUNNING)`), never a
//!   plain store: an RMW reads the latest value, so it synchronises with the
//!   release of the *last* unparker, whose condition write is then visible to
//!   the re-check. A plain store would allow the store-buffering outcome in
//!   which the re-check misses the condition and the following `try_park`
//!   succeeds, losing the wake-up (the loom model in `loom-tests` covers it).
//!
//! A rank is pinned to one worker, so no other thread ever resumes it: the
//! requeue by the unparker cannot race with the rank still running.

use crate::sync::{AtomicU8, Ordering};

const RUNNING: u8 = 0;
const PARKED: u8 = 1;
const NOTIFIED: u8 = 2;

/// The park/unpark state of one rank.
#[derive(Debug)]
pub(crate) struct ParkState {
    state: AtomicU8,
}

impl ParkState {
    /// A running rank with no pending notification.
    #[cfg(not(loom))]
    pub(crate) const fn new() -> Self {
        ParkState {
            state: AtomicU8::new(RUNNING),
        }
    }

    /// A running rank with no pending notification.
    #[cfg(loom)]
    pub(crate) fn new() -> Self {
        ParkState {
            state: AtomicU8::new(RUNNING),
        }
    }

    /// Called by the rank before suspending. Returns `true` if the rank is now
    /// parked and must suspend; `false` if a notification was pending (it is
    /// consumed and the rank must re-check its condition).
    #[inline]
    pub(crate) fn try_park(&self) -> bool {
        match self
            .state
            .compare_exchange(RUNNING, PARKED, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => true,
            Err(_) => {
                // NOTIFIED: consume it with an RMW (see the module docs).
                self.state.swap(RUNNING, Ordering::AcqRel);
                false
            }
        }
    }

    /// [`try_park`](Self::try_park) for a rank whose worker is the only
    /// thread that touches park states (`Scheduler::is_solo`): the same
    /// transitions with a load and a store, no read-modify-write (no other
    /// thread can write between the two).
    #[inline]
    pub(crate) fn try_park_alone(&self) -> bool {
        if self.state.load(Ordering::Relaxed) == RUNNING {
            self.state.store(PARKED, Ordering::Relaxed);
            true
        } else {
            self.state.store(RUNNING, Ordering::Relaxed);
            false
        }
    }

    /// Leaves any pending notification (a read-modify-write, see the
    /// module docs): for a party whose waits do not loop through
    /// `try_park` (an OS thread's), and for a slot made ready for reuse. A
    /// rank resumed after `try_park` needs no call: its unparker took it
    /// back to `RUNNING`.
    #[inline]
    pub(crate) fn resumed(&self) {
        self.state.swap(RUNNING, Ordering::AcqRel);
    }

    /// Called by any thread after it made the rank's condition true. Returns
    /// `true` if the rank was parked: the caller must then requeue it.
    #[inline]
    pub(crate) fn unpark(&self) -> bool {
        // The load is a hint (a running rank's line is not taken for a
        // compare-exchange bound to fail); the exchange decides.
        if self.state.load(Ordering::Relaxed) == PARKED
            && self
                .state
                .compare_exchange(PARKED, RUNNING, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            return true;
        }
        self.state.swap(NOTIFIED, Ordering::AcqRel) == PARKED
    }

    /// [`unpark`](Self::unpark) by the only thread that touches park
    /// states (`Scheduler::is_solo`, as
    /// [`try_park_alone`](Self::try_park_alone)).
    #[inline]
    pub(crate) fn unpark_alone(&self) -> bool {
        if self.state.load(Ordering::Relaxed) == PARKED {
            self.state.store(RUNNING, Ordering::Relaxed);
            true
        } else {
            self.state.store(NOTIFIED, Ordering::Relaxed);
            false
        }
    }

    /// Whether a wake-up is pending (the rank runs and has not consumed it):
    /// what a rank that spins before parking watches (a load, so that the
    /// spin does not take the line from the waker; `try_park` consumes it).
    #[inline]
    pub(crate) fn is_notified(&self) -> bool {
        self.state.load(Ordering::Acquire) == NOTIFIED
    }

    /// Whether the rank is parked right now (deadlock reports only).
    pub(crate) fn is_parked(&self) -> bool {
        self.state.load(Ordering::Acquire) == PARKED
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn alone_and_shared_transitions_agree() {
        let state = ParkState::new();
        assert!(state.try_park_alone(), "a running rank parks");
        assert!(state.is_parked());
        assert!(state.unpark_alone(), "its waker requeues it");
        assert!(!state.unpark_alone(), "a running rank is notified");
        assert!(state.is_notified());
        assert!(!state.try_park_alone(), "the notification is consumed");
        assert!(!state.is_notified());
        // The modes mix on the one thread that uses both.
        assert!(state.try_park_alone());
        assert!(state.unpark());
        assert!(!state.unpark());
        assert!(!state.try_park_alone());
        assert!(state.try_park());
        assert!(state.unpark_alone());
    }
}
