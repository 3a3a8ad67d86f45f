//! The reader/owner protocol of buffers published into a collective round:
//! who may still touch another rank's memory, and when its owner may go.
//!
//! In a shared-memory round ranks publish their buffers (the *owners*) and
//! other ranks read or write them directly (the *readers*; a gather's
//! senders write). A [`Gate`] counts the readers' accesses. Each round has a
//! fixed number of *turns*, one per access its algorithm makes (the non-root
//! ranks of a broadcast, every rank of an all-to-all, the one rank that
//! reduces in rank order). A reader takes a turn with [`Gate::enter`], makes
//! its copies, which never block, and ends it with [`Gate::leave`]. An owner
//! leaves the round only
//!
//! * once every turn has been taken and ended ([`Gate::finished`], the
//!   normal way: nobody can enter any more), or
//! * after [`Gate::close`], which refuses every later turn, and once the
//!   turns in progress have ended ([`Gate::drained`]): the way out when its
//!   wait in the round fails (the job aborts) or it unwinds.
//!
//! A refused reader touches nothing: it behaves as if it had never come.
//!
//! ## State
//!
//! One word, changed only by read-modify-writes:
//!
//! | bits   | meaning                                             |
//! |--------|-----------------------------------------------------|
//! | 63     | closed                                              |
//! | 32..63 | turns entered (granted, and refused ones until undone) |
//! | 0..32  | turns left                                          |
//!
//! `enter` adds one to *entered* and is granted if the word was not closed
//! and fewer than `turns` had entered; a refusal subtracts it again.
//! `leave` adds one to *left*. `close` sets the closed bit. Since all of them
//! are RMWs on one word they are totally ordered: a turn entered before the
//! close is counted in the *entered* the owner drains against; one entered
//! after it sees the bit and is refused.
//!
//! *Granted turns never exceed `turns`*, so `left == turns` means every
//! granted turn has ended and no other can be granted: `finished` is enough
//! for the owner to go without closing. (`turns` is the number of accesses
//! the algorithm makes, so in a healthy round the cap never refuses anyone.)
//!
//! ## Memory ordering
//!
//! A reader's accesses to the buffers happen before its `leave` (Release).
//! The owner's `finished`/`drained` load (Acquire) reads a value at or after
//! every counted `leave` in the word's modification order; every later
//! change is an RMW, so it reads from their release sequences and the
//! readers' accesses happen before whatever the owner does next (return,
//! free its buffer). What the owner wrote before publishing reaches the
//! readers through the round's own flags (`Round::publish`, arrivals), not
//! through the gate.
//!
//! ## Cost
//!
//! Two RMWs per access (`enter`, `leave`), on a word the round's readers
//! share; none per element. An owner that finishes normally pays one load
//! per look at its condition, and a `close` (one RMW) only on the way out of
//! a failed round.

use crate::sync::{AtomicU64, Ordering};

const CLOSED: u64 = 1 << 63;
const ENTER: u64 = 1 << 32;
const LEAVE: u64 = 1;
const FIELD: u64 = (1 << 31) - 1;

fn entered(state: u64) -> u64 {
    (state >> 32) & FIELD
}

fn left(state: u64) -> u64 {
    state & 0xffff_ffff
}

/// The in-flight accesses to the buffers published into one round.
#[derive(Debug)]
pub(crate) struct Gate {
    state: AtomicU64,
    turns: u64,
}

impl Gate {
    /// A gate for `turns` accesses (at most 2³¹ − 1).
    pub(crate) fn new(turns: u32) -> Gate {
        let turns = u64::from(turns).min(FIELD);
        Gate {
            state: AtomicU64::new(0),
            turns,
        }
    }

    /// Takes a turn: `true` if granted (the published buffers stay valid
    /// until the matching [`leave`](Self::leave)); `false` if the gate is
    /// closed or every turn was taken (the caller must touch nothing).
    #[inline]
    pub(crate) fn enter(&self) -> bool {
        let before = self.state.fetch_add(ENTER, Ordering::Acquire);
        if before & CLOSED == 0 && entered(before) < self.turns {
            return true;
        }
        self.refuse()
    }

    #[cold]
    fn refuse(&self) -> bool {
        // As if it had never come: the owner drains against `entered`.
        self.state.fetch_sub(ENTER, Ordering::Release);
        false
    }

    /// Ends a turn granted by [`enter`](Self::enter); `true` if it was the
    /// last of all turns (the caller wakes the owners).
    #[inline]
    pub(crate) fn leave(&self) -> bool {
        let before = self.state.fetch_add(LEAVE, Ordering::Release);
        debug_assert!(left(before) < entered(before), "a leave without an enter");
        left(before) + 1 == self.turns
    }

    /// Whether every turn has been taken and ended: no access is in
    /// progress and none can start (Acquire: the accesses happened before).
    #[inline]
    pub(crate) fn finished(&self) -> bool {
        left(self.state.load(Ordering::Acquire)) == self.turns
    }

    /// Refuses every turn not yet granted (the owner's way out of a failed
    /// round); wait for [`drained`](Self::drained) before the buffers go.
    pub(crate) fn close(&self) {
        self.state.fetch_or(CLOSED, Ordering::AcqRel);
    }

    /// The owner's way out of a failed round: [`close`](Self::close), then
    /// wait until [`drained`](Self::drained). Spins (then yields): turns in
    /// progress are copies on other threads that never wait for the owner,
    /// and the owner may be unwinding, where it cannot park.
    pub(crate) fn close_and_drain(&self) {
        self.close();
        let mut spins = 0u32;
        while !self.drained() {
            if spins < 100 {
                spins += 1;
                crate::sync::spin_loop();
            } else {
                #[cfg(not(loom))]
                std::thread::yield_now();
                #[cfg(loom)]
                loom::thread::yield_now();
            }
        }
    }

    /// Whether no granted turn is in progress (Acquire: the accesses of the
    /// ended ones happened before). Once it holds after
    /// [`close`](Self::close), none can be granted any more either.
    pub(crate) fn drained(&self) -> bool {
        let state = self.state.load(Ordering::Acquire);
        entered(state) == left(state)
    }
}
