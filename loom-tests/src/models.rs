//! The models. A rank's suspension is a blocked loom thread: `try_park`
//! returning `true` is followed by `thread::park()`, and an unparker that
//! gets `true` from `unpark` "requeues" the rank with `Thread::unpark`. If a
//! wake-up were lost, every thread would block and loom would report the
//! deadlock.
//!
//! The parked party is always a spawned thread joined by the model's main
//! thread, never the main thread itself: a leftover unpark token on a thread
//! that later calls `join` confuses loom's join.

use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;

use crate::completion::{Completion, Outcome};
use crate::idle::Sleep;
use crate::join::JoinLatch;
use crate::park::ParkState;

/// Parks the calling "rank" until `done()`: the runtime's `wait_until`.
/// Returns how many times it really parked.
fn wait_until(state: &ParkState, mut done: impl FnMut() -> bool) -> usize {
    let mut parks = 0;
    while !done() {
        if state.try_park() {
            parks += 1;
            // Suspended until a waker requeues us (which took the state
            // back to RUNNING, or left a notification for the next
            // `try_park`).
            thread::park();
        }
    }
    parks
}

/// Makes the rank's condition true, then wakes it as the runtime does.
fn wake(state: &ParkState, requeues: &AtomicUsize, rank: &thread::Thread) {
    if state.unpark() {
        requeues.fetch_add(1, Ordering::SeqCst);
        rank.unpark();
    }
}

#[test]
fn park_loses_no_wake_up_with_two_wakers() {
    loom::model(|| {
        let state = Arc::new(ParkState::new());
        let flags = Arc::new([AtomicBool::new(false), AtomicBool::new(false)]);
        let requeues = Arc::new(AtomicUsize::new(0));
        let rank = {
            let (state, flags) = (state.clone(), flags.clone());
            thread::spawn(move || {
                wait_until(&state, || {
                    flags[0].load(Ordering::Acquire) && flags[1].load(Ordering::Acquire)
                })
            })
        };
        let rank_thread = rank.thread().clone();
        let other = {
            let (state, flags, requeues, rank_thread) = (
                state.clone(),
                flags.clone(),
                requeues.clone(),
                rank_thread.clone(),
            );
            thread::spawn(move || {
                flags[1].store(true, Ordering::Release);
                wake(&state, &requeues, &rank_thread);
            })
        };
        flags[0].store(true, Ordering::Release);
        wake(&state, &requeues, &rank_thread);
        other.join().unwrap();
        let parks = rank.join().unwrap();
        // Every real park was matched by exactly one requeue.
        assert_eq!(parks, requeues.load(Ordering::SeqCst));
    });
}

#[test]
fn completion_publishes_its_outcome_to_the_parked_owner() {
    loom::model(|| {
        let completion = Arc::new(Completion::new(7));
        let state = Arc::new(ParkState::new());
        let requeues = Arc::new(AtomicUsize::new(0));
        let owner = {
            let (completion, state) = (completion.clone(), state.clone());
            thread::spawn(move || {
                wait_until(&state, || completion.is_done());
                let outcome = completion.outcome();
                (outcome.source, outcome.tag, outcome.bytes)
            })
        };
        // The completer: read the waiter first, the owner may be gone after.
        assert_eq!(completion.waiter(), 7);
        // SAFETY: this thread is the only completer.
        unsafe {
            completion.complete(Outcome {
                source: 3,
                tag: 5,
                bytes: 40,
                ..Outcome::default()
            })
        };
        wake(&state, &requeues, owner.thread());
        assert_eq!(owner.join().unwrap(), (3, 5, 40));
    });
}

/// The wait of a blocking call on a spinning completion (`p2p::wait_for`):
/// a look (the spin, bounded in the runtime), then announce the park and
/// park until done. Returns how many times it really parked.
fn wait_spinning(state: &ParkState, completion: &Completion) -> usize {
    let mut parks = 0;
    if completion.is_done() {
        return parks;
    }
    while completion.announce_park() {
        if state.try_park() {
            parks += 1;
            thread::park();
        }
    }
    parks
}

/// A completer of a spinning completion (`p2p::deliver`): it wakes the
/// waiter only if `finish` says the waiter may have parked.
fn finish_and_wake(
    completion: &Completion,
    state: &ParkState,
    requeues: &AtomicUsize,
    owner: &thread::Thread,
) {
    // SAFETY: the calling thread is the only completer.
    let wake_it = unsafe {
        completion.finish(Outcome {
            source: 3,
            tag: 5,
            bytes: 40,
            ..Outcome::default()
        })
    };
    if let Some(waiter) = wake_it {
        assert_eq!(waiter, 7);
        wake(state, requeues, owner);
    }
}

#[test]
fn a_spinning_completion_wakes_its_owner_only_once_it_announced_the_park() {
    loom::model(|| {
        let completion = Arc::new(Completion::spinning(7, true));
        let state = Arc::new(ParkState::new());
        let requeues = Arc::new(AtomicUsize::new(0));
        let owner = {
            let (completion, state) = (completion.clone(), state.clone());
            thread::spawn(move || {
                let parks = wait_spinning(&state, &completion);
                let outcome = completion.outcome();
                (parks, (outcome.source, outcome.tag, outcome.bytes))
            })
        };
        finish_and_wake(&completion, &state, &requeues, owner.thread());
        let (parks, outcome) = owner.join().unwrap();
        assert_eq!(outcome, (3, 5, 40));
        assert_eq!(parks, requeues.load(Ordering::SeqCst));
    });
}

#[test]
fn holding_a_spinning_send_never_erases_its_park_announcement() {
    loom::model(|| {
        // A rendezvous sender waits on its completion while a matched
        // probe holds the message, then receives it (`p2p::claim`).
        let completion = Arc::new(Completion::spinning(7, true));
        let state = Arc::new(ParkState::new());
        let requeues = Arc::new(AtomicUsize::new(0));
        let owner = {
            let (completion, state) = (completion.clone(), state.clone());
            thread::spawn(move || {
                let parks = wait_spinning(&state, &completion);
                (parks, completion.outcome().bytes)
            })
        };
        completion.hold();
        assert!(completion.is_held());
        completion.release_hold();
        finish_and_wake(&completion, &state, &requeues, owner.thread());
        let (parks, bytes) = owner.join().unwrap();
        assert_eq!(bytes, 40);
        assert_eq!(parks, requeues.load(Ordering::SeqCst));
    });
}

#[test]
fn idle_workers_see_work_published_before_they_sleep() {
    loom::model(|| {
        let sleep = Arc::new(Sleep::new(2));
        let pending = Arc::new(AtomicUsize::new(0));
        let worker = {
            let (sleep, pending) = (sleep.clone(), pending.clone());
            thread::spawn(move || loop {
                // Worker 0: look, announce, look again, then park.
                if pending.load(Ordering::SeqCst) > 0 {
                    break;
                }
                let announcement = sleep.announce(0);
                if pending.load(Ordering::SeqCst) > 0 {
                    sleep.cancel(announcement);
                    break;
                }
                thread::park();
                sleep.cancel(announcement);
            })
        };
        // The waker: publish, then claim the announcement.
        pending.fetch_add(1, Ordering::SeqCst);
        if sleep.claim(0) {
            worker.thread().unpark();
        }
        worker.join().unwrap();
    });
}

/// A worker polls before it sleeps, on while the other worker is busy (the
/// polling flags are a hint read with relaxed loads): whatever it reads
/// there, work published by the busy worker reaches it, by its polling or
/// through the announce/claim protocol, and the other worker's wake-up is
/// not lost. The poll is bounded (two looks), as the runtime's is by time.
#[test]
fn a_worker_polling_before_sleep_loses_no_wake_up() {
    loom::model(|| {
        let sleep = Arc::new(Sleep::new(2));
        let pending = Arc::new(AtomicUsize::new(0));
        let worker = {
            let (sleep, pending) = (sleep.clone(), pending.clone());
            thread::spawn(move || {
                sleep.set_polling(0, true);
                let mut found = false;
                for _ in 0..2 {
                    if pending.load(Ordering::SeqCst) > 0 {
                        found = true;
                        break;
                    }
                    if !sleep.others_busy(0) {
                        break;
                    }
                }
                sleep.set_polling(0, false);
                while !found {
                    let announcement = sleep.announce(0);
                    if pending.load(Ordering::SeqCst) > 0 {
                        sleep.cancel(announcement);
                        break;
                    }
                    thread::park();
                    sleep.cancel(announcement);
                    found = pending.load(Ordering::SeqCst) > 0;
                }
            })
        };
        // Worker 1, busy: it starts polling itself only after it published.
        pending.fetch_add(1, Ordering::SeqCst);
        if sleep.claim(0) {
            worker.thread().unpark();
        }
        worker.join().unwrap();
        // Every announcement was withdrawn: nobody counts as asleep.
        assert!(!sleep.all_asleep());
    });
}

#[test]
fn sleeper_counts_never_underflow_and_reach_every_worker() {
    loom::model(|| {
        let sleep = Arc::new(Sleep::new(2));
        let other = {
            let sleep = sleep.clone();
            thread::spawn(move || {
                let a = sleep.announce(1);
                let n = a.sleepers;
                sleep.cancel(a);
                n
            })
        };
        // A waker claiming worker 1 at any moment.
        let claimer = {
            let sleep = sleep.clone();
            thread::spawn(move || {
                sleep.claim(1);
            })
        };
        let a = sleep.announce(0);
        let mine = a.sleepers;
        sleep.cancel(a);
        let theirs = other.join().unwrap();
        claimer.join().unwrap();
        assert!(
            (1..=2).contains(&mine) && (1..=2).contains(&theirs),
            "{mine} {theirs}"
        );
    });
}

/// The lock's exclusion and publication rest on its `try_lock` swap and its
/// release store; the spinning around them is a retry loop, which loom cannot
/// explore (a waiter spinning on a relaxed load may see a stale value forever
/// in the model). Two threads take the lock if they can and update the
/// value: loom's cell tracking fails the model if both ever access it at
/// once, and each update must be visible to the next holder. (Under loom
/// the unlock is a swap, see `SpinGuard`'s `Drop`.)
#[test]
fn spin_lock_excludes_and_publishes() {
    use crate::sync::spin::SpinLock;
    loom::model(|| {
        let lock = Arc::new(SpinLock::new(0usize));
        let other = {
            let lock = lock.clone();
            thread::spawn(move || match lock.try_lock() {
                Some(mut value) => {
                    *value += 1;
                    1
                }
                None => 0,
            })
        };
        let mine = match lock.try_lock() {
            Some(mut value) => {
                *value += 1;
                1
            }
            None => 0,
        };
        let got = other.join().unwrap() + mine;
        assert!(got >= 1);
        assert_eq!(lock.try_lock().map(|v| *v), Some(got));
    });
}

/// `thread::JoinHandle::join` from any rank: the joiner registers its slot
/// and parks until the thread has finished; the ending thread marks the
/// latch and wakes the slot it finds. Whatever the interleaving, the joiner
/// is woken (a lost wake-up would leave it parked: a loom deadlock), and a
/// wake is sent only to a registered slot.
#[test]
fn join_latch_wakes_a_joiner_that_registers_at_any_time() {
    loom::model(|| {
        let latch = Arc::new(JoinLatch::new());
        let state = Arc::new(ParkState::new());
        let requeues = Arc::new(AtomicUsize::new(0));
        let joiner = {
            let (latch, state) = (latch.clone(), state.clone());
            thread::spawn(move || {
                if latch.register(4) {
                    wait_until(&state, || latch.is_finished())
                } else {
                    0
                }
            })
        };
        // The thread ends.
        if let Some(slot) = latch.finish() {
            assert_eq!(slot, 4);
            wake(&state, &requeues, joiner.thread());
        }
        let parks = joiner.join().unwrap();
        assert_eq!(parks, requeues.load(Ordering::SeqCst));
    });
}
