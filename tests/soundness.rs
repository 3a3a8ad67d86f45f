//! Safe programs that used to reach freed memory, leak a panic into other
//! ranks or block a worker (issue 8, section 1, items 1, 3 and 8). Each test
//! runs its job on a plain thread with a time limit: the failures they guard
//! against include hangs.
//!
//! Run them under AddressSanitizer too (the memory ones report a
//! heap-use-after-free there without the fix):
//! `RUSTFLAGS=-Zsanitizer=address CARGO_TARGET_DIR=target-asan cargo +nightly
//! test --target x86_64-unknown-linux-gnu -p myriad --test soundness`.

use std::cell::RefCell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::Duration;

use myriad::request::{Request, StaticScope, WaitGuard};
use myriad::traits::*;
use myriad::{Error, Runtime};

mod common;

/// How long a job of this file may take before it counts as a hang.
const LIMIT: Duration = Duration::from_secs(10);

type Stashed = Request<'static, [u64; 4], StaticScope>;

thread_local! {
    /// A request handed from one rank to another (or to a micro-task) of the
    /// same worker thread: a thread-local is per OS thread, not per rank.
    static STASH: RefCell<Option<Stashed>> = const { RefCell::new(None) };
    static STASHED_BARRIER: RefCell<Option<Request<'static, ()>>> = const { RefCell::new(None) };
}

/// Item 1: rank 0 posts a receive and stashes its request in a
/// thread-local; rank 1, on the same worker, takes it and waits for it. The
/// wait fails (wrong rank) and used to free the request while rank 0's
/// mailbox still pointed to its completion: rank 2's send then wrote into
/// freed memory (ASan: heap-use-after-free in `Completion::waiter`, the
/// request having been freed by `Request::try_wait`) and the message was
/// lost. Now the failed wait withdraws the receive: the message stays
/// queued and rank 0 receives it.
#[test]
fn a_request_waited_by_another_rank_is_withdrawn_not_freed() {
    let out = common::within_time_limit("request waited by another rank", LIMIT, || {
        Runtime::builder().ranks(3).workers(1).run(|universe| {
            let world = universe.world();
            match world.rank() {
                0 => {
                    let request = world
                        .process_at_rank(2)
                        .immediate_receive_into(StaticScope, common::leaked_buffer());
                    STASH.with(|s| *s.borrow_mut() = Some(request));
                    world.barrier(); // stashed
                    world.barrier(); // rank 1 waited for it
                    let (got, _) = world.process_at_rank(2).receive::<[u64; 4]>();
                    Ok(got[0])
                }
                1 => {
                    world.barrier();
                    let request = STASH.with(|s| s.borrow_mut().take()).expect("stashed");
                    let waited = request.try_wait().map(|_| 0).map_err(|e| e.to_string());
                    world.barrier();
                    waited
                }
                _ => {
                    world.barrier();
                    world.barrier();
                    world.process_at_rank(0).send(&[7u64; 4]);
                    Ok(0)
                }
            }
        })
    });
    let out = out.expect("the job runs to its end");
    assert_eq!(out[0], Ok(7), "rank 0 receives the message: {out:?}");
    let err = out[1].as_ref().expect_err("the wrong rank's wait fails");
    assert!(
        err.contains("rank 1 used a communicator handle that belongs to rank 0"),
        "{err}"
    );
}

/// Item 1, inside a parallel region: the chunk that takes the stashed
/// request runs outside of any rank, so its wait fails; the receive must be
/// withdrawn (not freed) and the message received afterwards.
#[test]
fn a_request_waited_in_a_parallel_for_chunk_is_withdrawn_not_freed() {
    let out = common::within_time_limit("request waited in a parallel_for chunk", LIMIT, || {
        Runtime::builder().ranks(2).workers(1).run(|universe| {
            let world = universe.world();
            if world.rank() == 0 {
                let request = world
                    .process_at_rank(1)
                    .immediate_receive_into(StaticScope, common::leaked_buffer());
                STASH.with(|s| *s.borrow_mut() = Some(request));
                let errors = Mutex::new(Vec::new());
                myriad::parallel_for(0..8, 1, |_| {
                    if let Some(request) = STASH.with(|s| s.borrow_mut().take()) {
                        let err = request.try_wait().expect_err("outside of any rank");
                        errors.lock().unwrap().push(err.to_string());
                    }
                });
                let errors = errors.into_inner().unwrap();
                assert_eq!(errors.len(), 1, "one chunk took the request: {errors:?}");
                assert!(errors[0].contains("micro-task"), "{}", errors[0]);
                world.barrier();
                let (got, _) = world.process_at_rank(1).receive::<[u64; 4]>();
                got[0]
            } else {
                world.barrier();
                world.process_at_rank(0).send(&[9u64; 4]);
                0
            }
        })
    });
    assert_eq!(out.expect("the job runs to its end"), vec![9, 0]);
}

/// Item 1, immediate collectives: the request's completion is signalled by
/// a task that only the rank's worker runs. Another rank that waits for it
/// can neither complete it nor wait for it without stalling that worker
/// (here it would be waiting for itself: it is the other barrier member), so
/// the job fails with an error naming the misuse instead of freeing the
/// completion under the task (which used to write into freed memory once
/// rank 1 entered the barrier).
#[test]
fn an_immediate_collective_waited_by_another_rank_fails_the_job() {
    let out =
        common::within_time_limit("immediate collective waited by another rank", LIMIT, || {
            Runtime::builder().ranks(2).workers(1).run(|universe| {
                let world = universe.world();
                if world.rank() == 0 {
                    let request = world.immediate_barrier();
                    STASHED_BARRIER.with(|s| *s.borrow_mut() = Some(request));
                    world.process_at_rank(1).send(&1u8);
                    world.process_at_rank(1).receive::<u8>();
                } else {
                    world.process_at_rank(0).receive::<u8>();
                    let request = STASHED_BARRIER
                        .with(|s| s.borrow_mut().take())
                        .expect("stashed");
                    let _ = request.try_wait();
                    // The barrier the task of rank 0 waits for.
                    world.barrier();
                    world.process_at_rank(0).send(&1u8);
                }
            })
        });
    let err = out.expect_err("the job fails");
    let message = err.to_string();
    assert!(
        message.contains("immediate collective") && message.contains("rank 0"),
        "{message}"
    );
}

/// Item 1, a claimed message: rank 1's matched probe holds rank 0's
/// synchronous send (a claim that may last), and rank 2 waits for rank 0's
/// stashed request. It cannot withdraw the send nor wait for rank 1 (it
/// would block the worker rank 1 needs), so the job fails instead of
/// freeing the completion rank 1's receive then writes into.
#[test]
fn a_held_send_waited_by_another_rank_fails_the_job() {
    static DATA: [u64; 4] = [3; 4];
    thread_local! {
        static SEND: RefCell<Option<Request<'static, [u64; 4]>>> = const { RefCell::new(None) };
    }
    let out = common::within_time_limit("held send waited by another rank", LIMIT, || {
        Runtime::builder().ranks(3).workers(1).run(|universe| {
            let world = universe.world();
            match world.rank() {
                0 => {
                    let request = world
                        .process_at_rank(1)
                        .immediate_synchronous_send(StaticScope, &DATA);
                    SEND.with(|s| *s.borrow_mut() = Some(request));
                    world.barrier();
                    world.barrier();
                    world.barrier();
                }
                1 => {
                    world.barrier();
                    let (message, _) = world.process_at_rank(0).matched_probe();
                    world.barrier(); // rank 2 waits for the send now
                    world.barrier();
                    let (got, _) = message.matched_receive::<[u64; 4]>();
                    assert_eq!(got, DATA);
                }
                _ => {
                    world.barrier();
                    world.barrier();
                    let request = SEND.with(|s| s.borrow_mut().take()).expect("stashed");
                    let _ = request.try_wait();
                    world.barrier();
                }
            }
        })
    });
    let message = out.expect_err("the job fails").to_string();
    assert!(
        message.contains("matched probe") && message.contains("rank 0"),
        "{message}"
    );
}

/// Item 1 audit: a rank unwinding out of a `WaitGuard` of a running
/// immediate collective cannot wait for the task (it must not suspend while
/// unwinding, and the task needs its worker). It used to spin on the worker
/// forever; now the job fails at once (with rank 0's panic), and the task
/// never touches the freed request.
#[test]
fn unwinding_past_a_running_immediate_collective_fails_the_job() {
    let out = common::within_time_limit("unwinding past an immediate collective", LIMIT, || {
        Runtime::builder().ranks(2).workers(1).run(|universe| {
            let world = universe.world();
            if world.rank() == 0 {
                let caught = panic::catch_unwind(AssertUnwindSafe(|| {
                    let _guard = WaitGuard::from(world.immediate_barrier());
                    panic!("boom");
                }));
                assert!(caught.is_err());
            }
            world.barrier();
        })
    });
    // The job fails with the panic that started it all, not its consequence.
    let error = out.expect_err("the job fails");
    assert!(
        matches!(&error, myriad::Error::Panic { rank: 0, message } if message.contains("boom")),
        "{error}"
    );
}

/// What a rank saw while another rank of its worker was unwinding.
#[derive(Debug, PartialEq)]
struct Seen {
    /// `std::thread::panicking()` on the observing rank.
    panicking: bool,
}

/// Item 3: rank 0 panics; a destructor on its stack makes a blocking
/// receive while it unwinds. Parking there suspended the coroutine in the
/// middle of its unwind, and the worker thread's panic count went along with
/// every rank it resumed next: rank 1 saw `std::thread::panicking()` true.
/// Now a blocking call made while unwinding never suspends: it fails at
/// once (when it would have to wait) with an error saying why.
#[test]
fn a_blocking_call_while_unwinding_never_suspends() {
    struct ReceiveOnDrop<'a, C: Communicator>(&'a C, &'a RefCell<Option<Result<u32, Error>>>);
    impl<C: Communicator> Drop for ReceiveOnDrop<'_, C> {
        fn drop(&mut self) {
            let got = self
                .0
                .process_at_rank(1)
                .try_receive_with_tag::<u32>(myriad::ANY_TAG);
            *self.1.borrow_mut() = Some(got.map(|(v, _)| v));
        }
    }
    let out = common::within_time_limit("blocking receive while unwinding", LIMIT, || {
        Runtime::builder().ranks(2).workers(1).run(|universe| {
            let world = universe.world();
            if world.rank() == 0 {
                let in_drop = RefCell::new(None);
                let caught = panic::catch_unwind(AssertUnwindSafe(|| {
                    let _receive = ReceiveOnDrop(&world, &in_drop);
                    // Rank 1 may run from here on.
                    world.process_at_rank(1).send(&0u8);
                    panic!("boom");
                }));
                assert!(caught.is_err());
                let in_drop = in_drop.into_inner().expect("the destructor ran");
                // Whatever the destructor got, the message is received
                // exactly once.
                let value = match in_drop {
                    Ok(v) => v,
                    Err(err) => {
                        assert!(err.to_string().contains("unwind"), "{err}");
                        world.process_at_rank(1).receive::<u32>().0
                    }
                };
                assert_eq!(value, 5);
                Seen { panicking: false }
            } else {
                world.process_at_rank(0).receive::<u8>();
                let seen = Seen {
                    panicking: std::thread::panicking(),
                };
                world.process_at_rank(0).send(&5u32);
                seen
            }
        })
    });
    let out = out.expect("the job runs to its end");
    assert_eq!(
        out[1],
        Seen { panicking: false },
        "rank 1 saw rank 0's panic"
    );
}

/// Item 3, the other suspension points: `myriad::sleep`, `myriad::yield_now`
/// and `Request::test` in a destructor while unwinding do not suspend the
/// rank either (sleep blocks the worker thread for its duration instead).
#[test]
fn sleep_yield_and_test_while_unwinding_never_suspend() {
    for case in ["sleep", "yield", "test"] {
        let out = common::within_time_limit(case, LIMIT, move || {
            Runtime::builder().ranks(2).workers(1).run(move |universe| {
                let world = universe.world();
                if world.rank() == 0 {
                    struct OnDrop<F: FnMut()>(F);
                    impl<F: FnMut()> Drop for OnDrop<F> {
                        fn drop(&mut self) {
                            (self.0)();
                        }
                    }
                    let caught = panic::catch_unwind(AssertUnwindSafe(|| {
                        let request = world
                            .process_at_rank(1)
                            .immediate_receive_into(StaticScope, common::leaked_buffer());
                        let mut request = Some(request);
                        let _on_drop = OnDrop(|| match case {
                            "sleep" => myriad::sleep(Duration::from_millis(5)),
                            "yield" => myriad::yield_now(),
                            _ => {
                                let r = request.take().expect("once");
                                // Dropped unfinished while unwinding:
                                // withdrawn, no second panic.
                                let _ = r.test();
                            }
                        });
                        world.process_at_rank(1).send(&0u8);
                        panic!("boom");
                    }));
                    assert!(caught.is_err());
                    world.process_at_rank(1).send(&1u8);
                    Seen { panicking: false }
                } else {
                    world.process_at_rank(0).receive::<u8>();
                    let seen = Seen {
                        panicking: std::thread::panicking(),
                    };
                    world.process_at_rank(0).receive::<u8>();
                    seen
                }
            })
        });
        let out = out.unwrap_or_else(|e| panic!("{case}: {e}"));
        assert_eq!(
            out[1],
            Seen { panicking: false },
            "{case}: rank 1 saw rank 0's panic"
        );
    }
}

/// Item 8: a `JoinHandle` joined by a rank other than the one that spawned
/// the thread. The join used to block the worker in `std`'s join; here the
/// thread waits for rank 0, which shares that worker, so the job hung. Now
/// the joining rank parks and the thread's end wakes it.
#[test]
fn a_thread_joined_by_another_rank_parks_that_rank() {
    let out = common::within_time_limit("join from another rank", LIMIT, || {
        let handle: Mutex<Option<myriad::thread::JoinHandle<u32>>> = Mutex::new(None);
        Runtime::builder().ranks(2).workers(1).run(move |universe| {
            let world = universe.world();
            if world.rank() == 0 {
                let (tx, rx) = mpsc::channel::<u32>();
                let thread = myriad::thread::spawn(move || rx.recv().unwrap() + 1);
                *handle.lock().unwrap() = Some(thread);
                // Parks until rank 1 has the handle (its send does not
                // switch ranks: rank 1 then joins before rank 0 runs).
                world.process_at_rank(1).send(&0u8);
                world.process_at_rank(1).receive::<u8>();
                tx.send(41).unwrap();
                0
            } else {
                world.process_at_rank(0).receive::<u8>();
                let thread = handle.lock().unwrap().take().expect("handed over");
                world.process_at_rank(0).send(&0u8);
                thread.join().expect("the thread does not panic")
            }
        })
    });
    assert_eq!(out.expect("the job runs to its end"), vec![0, 42]);
}
