//! Completion of an operation whose other half runs on another rank.
//!
//! A blocked receive (or a rendezvous send) leaves a descriptor in a mailbox
//! that points to a [`Completion`] owned by the waiting rank: on its stack for
//! blocking calls, in the request's box for immediate ones. The peer that
//! matches the descriptor (the *completer*) removes it from the mailbox under
//! the mailbox lock (the *claim*), copies the data, writes the outcome and
//! marks the completion done.
//!
//! ## Hand-off rules
//!
//! * The completer reads everything it needs from the completion (the waiter's
//!   rank) **before** calling [`Completion::complete`]: from that moment the
//!   waiter may return and its stack frame be gone (rayon's latch rule).
//! * `complete` writes the outcome, then stores `DONE` with `Release`; the
//!   waiter loads `DONE` with `Acquire` before reading the outcome.
//! * A matched probe holds a rendezvous message for a while (`HELD`) before it
//!   receives it; every other claim is followed by `complete` without the
//!   completer ever parking in between, so a waiter that finds its descriptor
//!   gone from the mailbox may simply wait for `DONE`. The holder leaves
//!   `HELD` (back to a plain claim) just before it receives; once the job
//!   aborts, the sender may give up a message that is still `HELD`. Both
//!   decide under the mailbox lock (`p2p::claim`).

use std::mem::MaybeUninit;

use crate::sync::{AtomicU8, Ordering, UnsafeCell};

const PENDING: u8 = 0;
const HELD: u8 = 1;
const DONE: u8 = 2;

/// The result of a point-to-point operation, written by its completer.
///
/// `Copy`: it is moved on every message (written into the completion, read
/// out of it, returned by `start_*`), and a derived `Clone` of the
/// `Option<Fault>` is a match where a copy is a few moves.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Outcome {
    /// Source rank in the communicator (for receives).
    pub(crate) source: i32,
    /// Tag of the matched message.
    pub(crate) tag: i32,
    /// Bytes in the message.
    pub(crate) bytes: usize,
    /// The operation was cancelled.
    pub(crate) cancelled: bool,
    /// Why the data could not be delivered as is, if it could not.
    pub(crate) fault: Option<Fault>,
    /// The received message's flow id in a trace (0: none; `crate::trace`).
    pub(crate) flow: u64,
}

/// A delivery problem reported to the receiver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// The message did not fit; `buffer` bytes were copied.
    Truncated { buffer: usize },
    /// The type signatures differ at base value `index`; nothing was copied.
    Type {
        index: usize,
        sent: &'static str,
        expected: &'static str,
    },
}

/// A one-shot completion flag with its outcome.
#[derive(Debug)]
pub(crate) struct Completion {
    state: AtomicU8,
    /// Written once, by the completer, before `DONE`: left uninitialised
    /// until then, as most completions (a send whose receive was posted,
    /// an eager send, a message already there) are never written at all
    /// and zeroing its 80 bytes cost every blocking call ~6 instructions
    /// (callgrind).
    outcome: UnsafeCell<MaybeUninit<Outcome>>,
    /// World rank of the rank to unpark.
    waiter: u32,
}

// SAFETY: `outcome` is written only by the completer before the `Release`
// store of `DONE` and read only by the owner after an `Acquire` load of
// `DONE`; the rest is atomic or immutable.
unsafe impl Sync for Completion {}
// SAFETY: as above; the completion holds no thread-bound data.
unsafe impl Send for Completion {}

impl Completion {
    /// A pending completion that will wake `waiter` (a world rank).
    pub(crate) fn new(waiter: u32) -> Completion {
        Completion {
            state: AtomicU8::new(PENDING),
            outcome: UnsafeCell::new(MaybeUninit::uninit()),
            waiter,
        }
    }

    /// The rank to wake; read it *before* `complete`.
    #[inline]
    pub(crate) fn waiter(&self) -> u32 {
        self.waiter
    }

    /// Whether the outcome is available.
    #[inline]
    pub(crate) fn is_done(&self) -> bool {
        self.state.load(Ordering::Acquire) == DONE
    }

    /// Whether a matched probe holds the message (it will complete later,
    /// possibly much later).
    pub(crate) fn is_held(&self) -> bool {
        self.state.load(Ordering::Acquire) == HELD
    }

    /// Marks the completion as held by a matched probe.
    pub(crate) fn hold(&self) {
        self.state.store(HELD, Ordering::Release);
    }

    /// The holder of a held message starts receiving (or releasing) it:
    /// the completion is claimed again, and will be done without the
    /// holder parking (see `p2p::claim::take_held`).
    pub(crate) fn release_hold(&self) {
        debug_assert!(self.is_held());
        self.state.store(PENDING, Ordering::Release);
    }

    /// Publishes the outcome. The completion may be freed as soon as this
    /// returns.
    ///
    /// # Safety
    ///
    /// Only the rank that claimed the descriptor may call this, once.
    #[inline]
    pub(crate) unsafe fn complete(&self, outcome: Outcome) {
        // SAFETY: the claimer is the only writer and the owner does not read
        // before `DONE` (module docs).
        self.outcome.with_mut(|o| unsafe { (*o).write(outcome) });
        self.state.store(DONE, Ordering::Release);
    }

    /// The outcome of a done completion.
    ///
    /// # Panics
    ///
    /// If the completion is not done (callers wait for [`is_done`] first;
    /// the check keeps reading the uninitialised outcome out of safe code).
    ///
    /// [`is_done`]: Self::is_done
    #[inline]
    pub(crate) fn outcome(&self) -> Outcome {
        if !self.is_done() {
            not_done();
        }
        // SAFETY: `DONE` was observed with `Acquire` (just above), so the
        // completer's write of the outcome, made before its `Release`
        // store of `DONE`, is visible and initialised, and nobody writes it
        // after.
        self.outcome.with(|o| unsafe { (*o).assume_init() })
    }

    /// [`outcome`](Self::outcome) in place, without copying it out.
    ///
    /// # Panics
    ///
    /// If the completion is not done, as `outcome`.
    #[inline]
    pub(crate) fn outcome_ref(&self) -> &Outcome {
        if !self.is_done() {
            not_done();
        }
        // SAFETY: as in `outcome`: initialised and published before `DONE`
        // (observed with `Acquire` just above) and never written after, so
        // it may be lent for as long as `self` is borrowed.
        self.outcome.with(|o| unsafe { (*o).assume_init_ref() })
    }
}

/// [`Completion::outcome`] of a completion not done: a bug of the caller.
#[cold]
#[inline(never)]
fn not_done() -> ! {
    panic!("the outcome of a pending completion was read")
}
