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
//!
//! ## Waking the waiter, or not
//!
//! A waiter that spins on its completion before it parks (a blocking call
//! whose worker has nothing else to run, on a job whose workers have a CPU
//! each) needs no wake-up while it spins: the completer's write of `DONE`
//! is what it reads. So the state holds a third bit, `WAKE`: "the waiter
//! may be parked, unpark it". A waiter that will not spin starts with it
//! ([`Completion::new`]); one that spins ([`Completion::spinning`]) sets it
//! with a read-modify-write ([`Completion::announce_park`]) only when it
//! gives up spinning, and parks only if that RMW did not read `DONE`. The
//! completer learns whether to unpark from its own RMW that sets `DONE`
//! ([`Completion::finish`]): both RMWs act on one atomic, so exactly one
//! of them comes first, and either the waiter reads `DONE` (and does not
//! park) or the completer reads `WAKE` (and unparks it, through the park
//! protocol of `sched::park`, which loses no wake-up). Once `WAKE` is set
//! nobody clears it, so a completer that loads it set may store `DONE`
//! without an RMW (the path of waiters that never spin, unchanged). The
//! holder of a matched probe sets and clears `HELD` with RMWs too, so that
//! it never erases a `WAKE` set meanwhile.
//!
//! A spinning waiter costs its completer no access to the waiter's park
//! state: a 1 B message between ranks of two workers moves the completion's
//! line to the completer and back, not the park state's line as well.

use std::mem::MaybeUninit;

#[cfg(not(loom))]
use crate::datatype::BaseKind;
use crate::sync::{AtomicU8, Ordering, UnsafeCell};

/// The loom models compile this file alone, against `crate::sync` only
/// (`loom-tests`), and build no fault: a stand-in for the base kinds.
#[cfg(loom)]
type BaseKind = u8;

const PENDING: u8 = 0;
/// A matched probe holds the message.
const HELD: u8 = 1;
/// The outcome is published.
const DONE: u8 = 2;
/// The waiter may park: the completer must unpark it.
const WAKE: u8 = 4;

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
    /// The kinds, not their names (two `&str`): the outcome, which every
    /// completer writes, is two words shorter.
    Type {
        index: usize,
        sent: BaseKind,
        expected: BaseKind,
    },
}

/// How the waiter of a completion waits for it ([`Completion::waiting`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Waiting {
    /// It is done: no wait.
    Done,
    /// Its completer unparks the waiter in any case (made by
    /// [`Completion::new`], or the waiter announced the park): park until
    /// done.
    Woken,
    /// The waiter may spin on it, then must announce the park
    /// ([`Completion::announce_park`]).
    Spinning,
}

/// A one-shot completion flag with its outcome.
///
/// The state first (`repr(C)`), then the waiter, which its completer reads
/// first, and the outcome's first fields: a waiter spinning on the state
/// finds them in the line it reloads. (Aligned to a line of its own, it
/// cost the blocking calls of one worker ~11 instructions a message for
/// realigning their frames, callgrind.)
#[derive(Debug)]
#[repr(C)]
pub(crate) struct Completion {
    state: AtomicU8,
    /// World rank of the rank to unpark.
    waiter: u32,
    /// Written once, by the completer, before `DONE`: left uninitialised
    /// until then, as most completions (a send whose receive was posted,
    /// an eager send, a message already there) are never written at all
    /// and zeroing its 80 bytes cost every blocking call ~6 instructions
    /// (callgrind).
    outcome: UnsafeCell<MaybeUninit<Outcome>>,
}

// SAFETY: `outcome` is written only by the completer before the `Release`
// store of `DONE` and read only by the owner after an `Acquire` load of
// `DONE`; the rest is atomic or immutable.
unsafe impl Sync for Completion {}
// SAFETY: as above; the completion holds no thread-bound data.
unsafe impl Send for Completion {}

impl Completion {
    /// A pending completion that will wake `waiter` (a world rank): its
    /// completer always unparks it.
    pub(crate) fn new(waiter: u32) -> Completion {
        Completion {
            state: AtomicU8::new(WAKE),
            outcome: UnsafeCell::new(MaybeUninit::uninit()),
            waiter,
        }
    }

    /// A pending completion whose waiter `waiter` spins on it before it
    /// parks (if `spins`, else as [`new`](Self::new)): its completer
    /// unparks it only once it announced the park
    /// ([`announce_park`](Self::announce_park); module docs).
    #[inline]
    pub(crate) fn spinning(waiter: u32, spins: bool) -> Completion {
        Completion {
            // Without a branch: the blocking calls of a worker that never
            // spins run this on every message.
            state: AtomicU8::new(PENDING | ((!spins as u8) * WAKE)),
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
        self.state.load(Ordering::Acquire) & DONE != 0
    }

    /// How its waiter (the caller) waits for it now: one load.
    #[inline]
    pub(crate) fn waiting(&self) -> Waiting {
        let state = self.state.load(Ordering::Acquire);
        if state & DONE != 0 {
            Waiting::Done
        } else if state & WAKE != 0 {
            Waiting::Woken
        } else {
            Waiting::Spinning
        }
    }

    /// The waiter stops spinning and is about to park: `true` if it must
    /// (from now on the completer unparks it), `false` if the outcome is
    /// available (module docs).
    #[inline]
    pub(crate) fn announce_park(&self) -> bool {
        self.state.fetch_or(WAKE, Ordering::AcqRel) & DONE == 0
    }

    /// Whether a matched probe holds the message (it will complete later,
    /// possibly much later).
    pub(crate) fn is_held(&self) -> bool {
        self.state.load(Ordering::Acquire) & (HELD | DONE) == HELD
    }

    /// Marks the completion as held by a matched probe.
    pub(crate) fn hold(&self) {
        // An RMW: the waiter may be setting `WAKE` (module docs).
        self.state.fetch_or(HELD, Ordering::AcqRel);
    }

    /// The holder of a held message starts receiving (or releasing) it:
    /// the completion is claimed again, and will be done without the
    /// holder parking (see `p2p::claim::take_held`).
    pub(crate) fn release_hold(&self) {
        debug_assert!(self.is_held());
        self.state.fetch_and(!HELD, Ordering::AcqRel);
    }

    /// Publishes the outcome and answers whether the waiter must be
    /// unparked (it may have parked: module docs): `Some(waiter)`, the
    /// rank to unpark, read before `DONE`. The completion may be freed as
    /// soon as this returns.
    ///
    /// The outcome is written before anything is read: the completer's
    /// first access to the waiter's line is a write, which takes it once,
    /// for writing (a first read took it shared, and the write then had to
    /// take it again from the waiter spinning on it).
    ///
    /// # Safety
    ///
    /// Only the rank that claimed the descriptor may call this, once.
    #[inline]
    #[must_use]
    pub(crate) unsafe fn finish(&self, outcome: Outcome) -> Option<u32> {
        // SAFETY: the claimer is the only writer and the owner does not read
        // before `DONE` (module docs).
        self.outcome.with_mut(|o| unsafe { (*o).write(outcome) });
        // Before `DONE`: the waiter may return right after.
        let waiter = self.waiter;
        // `WAKE` is never cleared and `HELD` is ours (we claimed): once
        // `WAKE` is set, a store cannot erase anybody's write.
        let wake = if self.state.load(Ordering::Relaxed) & WAKE != 0 {
            self.state.store(DONE | WAKE, Ordering::Release);
            true
        } else {
            self.state.swap(DONE, Ordering::AcqRel) & WAKE != 0
        };
        wake.then_some(waiter)
    }

    /// Publishes the outcome, for a completer that unparks the waiter
    /// whatever [`finish`](Self::finish) would answer. The completion may
    /// be freed as soon as this returns.
    ///
    /// # Safety
    ///
    /// Only the rank that claimed the descriptor may call this, once.
    #[inline]
    pub(crate) unsafe fn complete(&self, outcome: Outcome) {
        // SAFETY: the caller's contract, as `finish`'s.
        let _ = unsafe { self.finish(outcome) };
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

    /// [`outcome`](Self::outcome) in place, without copying it out and
    /// without its check, for a waiter that just saw the completion done:
    /// the blocking receive after its wait (the check cost 3 instructions
    /// a message, callgrind).
    ///
    /// # Safety
    ///
    /// The caller observed `DONE` with `Acquire` (or stronger) ordering
    /// on this completion: [`is_done`](Self::is_done), or a wait that
    /// returns only once it saw it (`p2p::wait_for`).
    #[inline]
    pub(crate) unsafe fn outcome_ref_done(&self) -> &Outcome {
        debug_assert!(self.is_done());
        // SAFETY: as in `outcome`, with `DONE` observed by the caller:
        // initialised and published before `DONE` and never written after,
        // so it may be lent for as long as `self` is borrowed.
        self.outcome.with(|o| unsafe { (*o).assume_init_ref() })
    }
}

/// [`Completion::outcome`] of a completion not done: a bug of the caller.
#[cold]
#[inline(never)]
fn not_done() -> ! {
    panic!("the outcome of a pending completion was read")
}
