//! Claiming and withdrawing queued descriptors: who may touch the memory a
//! posted receive or a rendezvous send points into, and until when.
//!
//! A descriptor in a mailbox points into its *owner*'s memory (the waiting
//! party: a rank, a task acting for one, or an OS thread): a buffer and a
//! [`Completion`]. Every decision about that memory is taken under the lock
//! of the mailbox that holds (or held) the descriptor:
//!
//! | step        | who        | under the lock                                  | then                                      |
//! |-------------|------------|-------------------------------------------------|-------------------------------------------|
//! | post        | owner      | push the descriptor                             | wait for `DONE`                           |
//! | [`claim`]   | peer       | refused if aborting, else take the descriptor   | copy, then `complete` (never parks)       |
//! | [`withdraw`]| owner      | remove the descriptor if still queued           | its memory is its own again               |
//! | [`hold`]    | prober     | (claimed) mark the completion `HELD`            | may keep it for long                      |
//! | [`take_held`]| holder    | refused if aborting, else leave `HELD`          | copy, then `complete` (never parks)       |
//! | [`abandon_held`]| owner  | if aborting and still `HELD`: give it up        | its memory is its own again               |
//!
//! ## Why nobody touches freed memory
//!
//! * A claim and a withdrawal of one descriptor exclude each other (same
//!   lock, the descriptor is in the queue for exactly one of them). An owner
//!   that finds its descriptor gone knows a claimer has it, and that the
//!   claimer copies and completes without parking: it waits for `DONE`
//!   before its memory goes (`p2p::settle`).
//! * A matched probe holds a rendezvous message for as long as the program
//!   likes. Once the job aborts its sender may not wait that long (the
//!   holder may never run again): it gives the message up under the lock,
//!   and only while it is still `HELD`. The holder leaves `HELD` under the
//!   same lock and only while the job is not aborting; so exactly one of
//!   the two wins, and a refused holder touches neither the sender's buffer
//!   nor its completion.
//! * Once the job aborts no claim is made at all: a failed job's ranks and
//!   tasks are unwound in parallel by their workers, and a destructor's MPI
//!   call must not reach into memory another worker is freeing. Refused
//!   calls behave as if the peer had not arrived yet (their waits then fail
//!   with the abort); descriptors only leave the mailboxes by their owners'
//!   withdrawals.
//!
//! ## The abort flag
//!
//! A claimer reads the job's abort flag under the mailbox lock, and only
//! when it found a match (the unmatched path reads nothing). An owner that
//! saw the flag set, then took the lock, is followed by every later holder
//! of the lock: the lock orders the owner's read before the claimer's, and
//! reads of one atomic ordered that way never go back in its modification
//! order, so a relaxed load under the lock suffices.
//!
//! This module imports nothing above `p2p::completion`, so `loom-tests`
//! compiles it with loom's atomics (the claim/withdraw models).

use std::collections::VecDeque;

use super::completion::Completion;

/// Takes the first entry of `queue` that `matches` (the claim), unless
/// the job is aborting.
///
/// Call it under the lock of the mailbox that holds `queue`; `aborting` is
/// called (under that lock) only if an entry matches. A refused claim
/// leaves the entry where it is, for its owner to withdraw.
/// (`#[inline(always)]`: every message matches through it.)
#[inline(always)]
pub(crate) fn claim<T>(
    queue: &mut VecDeque<T>,
    mut matches: impl FnMut(&T) -> bool,
    aborting: impl FnOnce() -> bool,
) -> Option<T> {
    // The front first, without an iterator: a receive posted before its
    // message (or a message before its receive) is nearly always the only
    // entry, and `VecDeque`'s iterator walks two slices.
    let i = match queue.front() {
        None => return None,
        Some(first) if matches(first) => 0,
        Some(_) => 1 + queue.iter().skip(1).position(matches)?,
    };
    if aborting() {
        return refused();
    }
    if i == 0 {
        // The common case (matching is mostly in order): no shifting.
        queue.pop_front()
    } else {
        queue.remove(i)
    }
}

#[cold]
fn refused<T>() -> Option<T> {
    None
}

/// Removes the entry `is_it` picks, if it is still queued (the owner
/// withdraws its descriptor); `true` if it was. Call it under the lock of
/// the mailbox that holds `queue`.
pub(crate) fn withdraw<T>(queue: &mut VecDeque<T>, is_it: impl FnMut(&T) -> bool) -> bool {
    match queue.iter().position(is_it) {
        Some(i) => {
            queue.remove(i);
            true
        }
        None => false,
    }
}

/// A matched probe keeps the rendezvous message it just claimed: marks its
/// sender's completion `HELD`, under the lock it claimed it under.
pub(crate) fn hold(completion: &Completion) {
    completion.hold();
}

/// The holder of a held rendezvous message is about to receive it (or to
/// release it as cancelled): `true` if it may, and from now on it copies
/// and completes without parking, like any claimer; `false` once the job is
/// aborting, and then it must never touch the message's buffer or
/// completion again (the sender may have given it up, see
/// [`abandon_held`]).
///
/// # Safety
///
/// Call it under the lock of the mailbox the message was queued in, with
/// `aborting` read under that lock, and with `completion` the completion
/// of a message the caller holds (claimed and [`hold`]: its sender keeps
/// the completion alive until it is done, or until it gives the message up
/// under that lock, which it does only once the job aborts).
pub(crate) unsafe fn take_held(completion: *const Completion, aborting: bool) -> bool {
    if aborting {
        return false;
    }
    // SAFETY: the job is not aborting and we hold the lock, so the sender
    // has not given the message up and cannot before we are done with it
    // (the caller's contract).
    unsafe { (*completion).release_hold() };
    true
}

/// The sender of a rendezvous message, whose job is aborting, gives it up
/// if a matched probe still holds it: `true` if it did (no holder will
/// touch the message any more: its buffer and completion are the sender's
/// again), `false` if the message is not held (the sender waits for `DONE`
/// as after any claim).
///
/// Call it under the lock of the mailbox the message was queued in, with
/// `aborting` read under that lock.
pub(crate) fn abandon_held(completion: &Completion, aborting: bool) -> bool {
    aborting && completion.is_held()
}
