//! The end of a thread that a rank may join: a one-shot latch whose waiter
//! is whichever rank joins, known only once it joins (`thread::JoinHandle`
//! may be handed to another rank before it is joined).
//!
//! ## Protocol
//!
//! One word holds `RUNNING` (nobody joins yet), the park slot of the rank
//! that joins, or `FINISHED`; both sides change it with a read-modify-write,
//! so they are totally ordered without relying on `SeqCst` stores and loads
//! (which loom models as acquire/release):
//!
//! * the joiner swaps `RUNNING` for its slot ([`JoinLatch::register`]); if
//!   it finds `FINISHED` instead it does not wait; else it parks until
//!   [`JoinLatch::is_finished`];
//! * the thread, when it ends, swaps in `FINISHED` ([`JoinLatch::finish`])
//!   and unparks the slot it replaced, if any.
//!
//! Whichever RMW comes second sees the other's value: either the joiner
//! learns that the thread has finished, or the thread learns whom to wake.
//! The unpark goes through the park protocol (`sched::park`), so a wake
//! that arrives before the joiner parks is not lost either (loom model in
//! `loom-tests`).

use crate::sync::{AtomicUsize, Ordering};

/// Nobody joins yet.
const RUNNING: usize = usize::MAX;
/// The thread has ended.
const FINISHED: usize = usize::MAX - 1;

/// Whether a thread has ended, and which slot to wake when it does.
#[derive(Debug)]
pub(crate) struct JoinLatch {
    state: AtomicUsize,
}

impl JoinLatch {
    /// A running thread that nobody joins yet.
    pub(crate) fn new() -> Self {
        JoinLatch {
            state: AtomicUsize::new(RUNNING),
        }
    }

    /// The joiner (there is one: joining consumes the handle): slot `slot`
    /// is to be woken when the thread ends. `false` if it has ended already.
    pub(crate) fn register(&self, slot: u32) -> bool {
        match self.state.compare_exchange(
            RUNNING,
            slot as usize,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => true,
            Err(state) => {
                debug_assert_eq!(state, FINISHED, "a thread is joined once");
                false
            }
        }
    }

    /// Whether the thread has ended.
    pub(crate) fn is_finished(&self) -> bool {
        self.state.load(Ordering::Acquire) == FINISHED
    }

    /// The thread ends: marks it and returns the slot to unpark, if a
    /// joiner registered.
    pub(crate) fn finish(&self) -> Option<u32> {
        match self.state.swap(FINISHED, Ordering::AcqRel) {
            RUNNING => None,
            slot => Some(slot as u32),
        }
    }
}
