//! Models of the claim/withdraw protocol of queued descriptors
//! (`src/p2p/claim.rs`, compiled here against loom's types).
//!
//! A mailbox is a loom mutex around a queue of descriptors; a descriptor
//! points into its owner's memory: a buffer (a loom cell, so loom fails the
//! model if two threads touch it without one happening before the other)
//! and a [`Completion`]. When the owner is done with the operation its
//! memory goes away: the model then writes `FREED` into the buffer, and a
//! party that touches the buffer afterwards either races with that write
//! (loom reports it) or finds `FREED` (the model asserts it never does).
//!
//! The abort flag is read with `Relaxed` loads (the runtime's are
//! `Acquire`, so the models check the weaker claim).

use std::collections::VecDeque;

use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::{Arc, Mutex};
use loom::thread;

use crate::claim;
use crate::completion::{Completion, Outcome};

const EMPTY: u64 = 0;
const DATA: u64 = 42;
const FREED: u64 = 0xdead;

/// A waiting party's memory: its buffer and its completion.
struct Owner {
    buf: UnsafeCell<u64>,
    completion: Completion,
}

impl Owner {
    fn new() -> Owner {
        Owner {
            buf: UnsafeCell::new(EMPTY),
            completion: Completion::new(0),
        }
    }

    /// The owner's memory goes away (its frame unwinds, its `Vec` drops).
    fn free(&self) {
        self.buf.with_mut(|b| {
            // SAFETY: loom checks that no other access is concurrent.
            unsafe { *b = FREED }
        });
    }
}

/// A descriptor in a mailbox (which owner it belongs to is implicit: there
/// is one).
struct Descriptor;

type Queue = Mutex<VecDeque<Descriptor>>;

/// The copy of a claimer or a holder: writes (a receive) or reads (a
/// rendezvous send) the owner's buffer, then completes its completion.
fn copy_and_complete(owner: &Owner, write: bool) {
    if write {
        owner.buf.with_mut(|b| {
            // SAFETY: loom checks that no other access is concurrent.
            let b = unsafe { &mut *b };
            assert_ne!(*b, FREED, "a claimer wrote into freed memory");
            *b = DATA;
        });
    } else {
        owner.buf.with(|b| {
            // SAFETY: as above.
            assert_ne!(unsafe { *b }, FREED, "a holder read freed memory");
        });
    }
    // SAFETY: the claimer (or holder that took the message) is the only
    // completer.
    unsafe {
        owner.completion.complete(Outcome {
            bytes: 8,
            ..Outcome::default()
        })
    };
}

/// The runtime's `settle` after its descriptor was found claimed: the
/// claimer copies and completes without parking.
fn wait_done(completion: &Completion) {
    while !completion.is_done() {
        thread::yield_now();
    }
}

/// A posted receive: a claimer (a sender, maybe a destructor running while
/// the job is torn down) and its owner withdrawing it race, while the job
/// may abort. Exactly one of claim and withdrawal wins; the owner's memory
/// is freed only once the claimer is done with it; and once a party that
/// set the abort flag saw the descriptor still queued (under the lock), no
/// claim takes it: it is withdrawn by its owner.
#[test]
fn a_posted_descriptor_is_claimed_or_withdrawn_and_never_claimed_after_an_abort() {
    loom::model(|| {
        let queue: Arc<Queue> = Arc::new(Mutex::new(VecDeque::new()));
        let owner = Arc::new(Owner::new());
        let abort = Arc::new(AtomicBool::new(false));
        // Posted before anyone can see it.
        queue.lock().unwrap().push_back(Descriptor);

        let claimer = {
            let (queue, owner, abort) = (queue.clone(), owner.clone(), abort.clone());
            thread::spawn(move || {
                let claimed = {
                    let mut q = queue.lock().unwrap();
                    claim::claim(&mut q, |_| true, || abort.load(Ordering::Relaxed)).is_some()
                };
                if claimed {
                    copy_and_complete(&owner, true);
                }
                claimed
            })
        };
        let aborter = {
            let (queue, abort) = (queue.clone(), abort.clone());
            thread::spawn(move || {
                abort.store(true, Ordering::Relaxed);
                // What a party that aborted finds queued afterwards.
                !queue.lock().unwrap().is_empty()
            })
        };

        // The owner settles: withdraw, or wait for the claimer.
        let withdrawn = claim::withdraw(&mut queue.lock().unwrap(), |_| true);
        if !withdrawn {
            wait_done(&owner.completion);
            assert_eq!(owner.completion.outcome().bytes, 8);
            owner.buf.with(|b| {
                // SAFETY: loom checks that no other access is concurrent.
                assert_eq!(unsafe { *b }, DATA, "the claimer's data is visible");
            });
        }
        owner.free();

        let claimed = claimer.join().unwrap();
        let queued_after_abort = aborter.join().unwrap();
        assert!(claimed != withdrawn, "exactly one of claim and withdrawal");
        if queued_after_abort {
            assert!(!claimed, "a descriptor was claimed after the abort");
        }
    });
}

/// A rendezvous message held by a matched probe: the holder receives it
/// (reading the sender's buffer) while the job aborts and the sender,
/// which has seen the abort, gives up a message still held. Exactly one of
/// them wins: a holder that receives does so before the sender's memory
/// goes, and a sender that gives up is never touched again.
#[test]
fn a_held_message_is_received_or_given_up_never_both() {
    loom::model(|| held_message_model(true));
}

/// The holder must read the abort flag under the mailbox lock: read before
/// it, the flag may say "not aborting" while the sender, under the lock,
/// sees the abort and gives the message up; the holder then reads freed
/// memory, which the model catches.
#[test]
#[should_panic]
fn the_model_catches_a_flag_read_outside_the_lock() {
    loom::model(|| held_message_model(false));
}

fn held_message_model(flag_under_lock: bool) {
    let queue: Arc<Queue> = Arc::new(Mutex::new(VecDeque::new()));
    let owner = Arc::new(Owner::new());
    owner.buf.with_mut(|b| {
        // SAFETY: no other thread exists yet.
        unsafe { *b = DATA }
    });
    let abort = Arc::new(AtomicBool::new(false));
    queue.lock().unwrap().push_back(Descriptor);
    // The matched probe: claims the message and holds it under the lock.
    {
        let mut q = queue.lock().unwrap();
        assert!(claim::claim(&mut q, |_| true, || abort.load(Ordering::Relaxed)).is_some());
        claim::hold(&owner.completion);
    }

    let holder = {
        let (queue, owner, abort) = (queue.clone(), owner.clone(), abort.clone());
        thread::spawn(move || {
            let early = abort.load(Ordering::Relaxed);
            let took = {
                let _q = queue.lock().unwrap();
                let aborting = if flag_under_lock {
                    abort.load(Ordering::Relaxed)
                } else {
                    early
                };
                // SAFETY: under the mailbox lock, the message held by this
                // thread; with `flag_under_lock` false the flag is not read
                // under the lock, which the model is there to catch.
                unsafe { claim::take_held(&owner.completion, aborting) }
            };
            if took {
                copy_and_complete(&owner, false);
            }
            took
        })
    };
    let aborter = {
        let abort = abort.clone();
        thread::spawn(move || abort.store(true, Ordering::Relaxed))
    };

    // The sender learns of the abort (its wait fails), then settles.
    aborter.join().unwrap();
    let abandoned = {
        let _q = queue.lock().unwrap();
        claim::abandon_held(&owner.completion, abort.load(Ordering::Relaxed))
    };
    if !abandoned {
        wait_done(&owner.completion);
    }
    owner.free();

    let received = holder.join().unwrap();
    assert!(received != abandoned, "exactly one of receive and give-up");
}

/// Without an abort a held message is always received, and its sender
/// waits for that.
#[test]
fn a_held_message_is_received_when_the_job_does_not_abort() {
    loom::model(|| {
        let queue: Arc<Queue> = Arc::new(Mutex::new(VecDeque::new()));
        let owner = Arc::new(Owner::new());
        let abort = Arc::new(AtomicBool::new(false));
        queue.lock().unwrap().push_back(Descriptor);
        let holder = {
            let (queue, owner, abort) = (queue.clone(), owner.clone(), abort.clone());
            thread::spawn(move || {
                {
                    let mut q = queue.lock().unwrap();
                    if claim::claim(&mut q, |_| true, || abort.load(Ordering::Relaxed)).is_none() {
                        return false;
                    }
                    claim::hold(&owner.completion);
                }
                thread::yield_now();
                let took = {
                    let _q = queue.lock().unwrap();
                    // SAFETY: as in the model above.
                    unsafe { claim::take_held(&owner.completion, abort.load(Ordering::Relaxed)) }
                };
                assert!(took, "no abort, no refusal");
                copy_and_complete(&owner, false);
                true
            })
        };
        // The sender settles while the probe may be holding its message.
        let withdrawn = claim::withdraw(&mut queue.lock().unwrap(), |_| true);
        if !withdrawn {
            loop {
                let _q = queue.lock().unwrap();
                assert!(!claim::abandon_held(
                    &owner.completion,
                    abort.load(Ordering::Relaxed)
                ));
                if owner.completion.is_done() {
                    break;
                }
                drop(_q);
                thread::yield_now();
            }
        }
        owner.free();
        let received = holder.join().unwrap();
        assert!(received != withdrawn);
    });
}
