//! Request collections (`multiple_scope`, `RequestCollection`), as in rsmpi
//! 0.8: each request is handed out once, in completion order for the
//! `_any`/`_some` forms; the test forms never block; a collection dropped
//! or unwound with pending requests settles them (withdrawn, so a later
//! receive gets the message and the buffer is never written); a request of
//! another rank gives a clear error. Jobs run on a plain thread with a time
//! limit, since a broken wait would hang.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::panic::{self, AssertUnwindSafe};
use std::time::Duration;

use myriad::collective::SystemOperation;
use myriad::request::{multiple_scope, Request, StaticScope};
use myriad::traits::*;
use myriad::Runtime;

mod common;

/// How long a job of this file may take before it counts as a hang.
const LIMIT: Duration = Duration::from_secs(60);

const SIZES: &[usize] = &[1, 2, 3, 4, 7, 64];

/// The message of a caught panic.
fn message(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

const COUNT: usize = 8;

/// A ring: COUNT sends to the next rank, COUNT receives from the previous
/// one and an immediate all-reduce, all in one collection; `wait_any` hands
/// out each index exactly once with its buffer, then `None`.
#[test]
fn wait_any_hands_out_every_request_once() {
    for &n in SIZES {
        let out = common::within_time_limit("wait_any", LIMIT, move || {
            myriad::run(n, |universe| {
                let world = universe.world();
                let (rank, size) = (world.rank(), world.size());
                let next = world.process_at_rank((rank + 1) % size);
                let prev = world.process_at_rank((rank + size - 1) % size);
                let mut got = vec![-1i32; COUNT];
                let mut sum = 0i32;
                let mut seen = BTreeSet::new();
                let (mut sends, mut receives, mut reduced) = (0, 0, 0);
                multiple_scope(2 * COUNT + 1, |scope, coll| {
                    let mut kinds = Vec::new();
                    for _ in 0..COUNT {
                        kinds.push((coll.add(next.immediate_send(scope, &rank)), 's'));
                    }
                    for slot in got.iter_mut() {
                        kinds.push((coll.add(prev.immediate_receive_into(scope, slot)), 'r'));
                    }
                    let r = world.immediate_all_reduce_into(
                        scope,
                        &1i32,
                        &mut sum,
                        SystemOperation::sum(),
                    );
                    kinds.push((coll.add(r), 'a'));
                    assert_eq!(
                        kinds.iter().map(|k| k.0).collect::<Vec<_>>(),
                        (0..2 * COUNT + 1).collect::<Vec<_>>()
                    );
                    assert_eq!(coll.incomplete(), 2 * COUNT + 1);
                    while let Some((i, status, data)) = coll.wait_any() {
                        assert!(seen.insert(i), "index {i} handed out twice");
                        assert_eq!(coll.incomplete(), 2 * COUNT + 1 - seen.len());
                        match kinds[i].1 {
                            's' => {
                                assert_eq!(*data, rank);
                                sends += 1;
                            }
                            'r' => {
                                assert_eq!(*data, (rank + size - 1) % size);
                                assert_eq!(status.source_rank(), (rank + size - 1) % size);
                                receives += 1;
                            }
                            _ => {
                                assert_eq!(*data, size);
                                reduced += 1;
                            }
                        }
                    }
                    assert_eq!(coll.incomplete(), 0);
                    assert!(coll.wait_any().is_none(), "nothing left");
                });
                assert_eq!((sends, receives, reduced), (COUNT, COUNT, 1));
                assert_eq!(seen.len(), 2 * COUNT + 1);
                got
            })
        });
        let out = out.unwrap_or_else(|e| panic!("{n} ranks: {e}"));
        for (rank, got) in out.iter().enumerate() {
            let prev = ((rank + n - 1) % n) as i32;
            assert_eq!(got, &vec![prev; COUNT], "{n} ranks, rank {rank}");
        }
    }
}

/// `wait_some` until nothing is incomplete, then `wait_all` of a second
/// batch: every index once, `incomplete` counts down, `wait_all` in index
/// order; both leave `result` empty on an empty collection.
#[test]
fn wait_some_and_wait_all_hand_out_every_request_once() {
    for &n in SIZES {
        let out = common::within_time_limit("wait_some", LIMIT, move || {
            myriad::run(n, |universe| {
                let world = universe.world();
                let (rank, size) = (world.rank(), world.size());
                let next = world.process_at_rank((rank + 1) % size);
                let prev = world.process_at_rank((rank + size - 1) % size);
                let mut got = vec![-1i32; 2 * COUNT];
                let (first, second) = got.split_at_mut(COUNT);
                let mut result = vec![];
                multiple_scope(2 * COUNT, |scope, coll| {
                    for slot in first.iter_mut() {
                        coll.add(prev.immediate_receive_into(scope, slot));
                    }
                    for _ in 0..COUNT {
                        coll.add(next.immediate_send(scope, &rank));
                    }
                    let mut seen = BTreeSet::new();
                    while coll.incomplete() > 0 {
                        coll.wait_some(&mut result);
                        assert!(!result.is_empty(), "wait_some returns at least one");
                        for &(i, _, _) in &result {
                            assert!(seen.insert(i), "index {i} handed out twice");
                        }
                        assert_eq!(coll.incomplete(), 2 * COUNT - seen.len());
                    }
                    assert_eq!(seen, (0..2 * COUNT).collect());
                    coll.wait_some(&mut result);
                    assert!(result.is_empty());
                });
                multiple_scope(2 * COUNT, |scope, coll| {
                    for _ in 0..COUNT {
                        coll.add(next.immediate_send(scope, &rank));
                    }
                    for slot in second.iter_mut() {
                        coll.add(prev.immediate_receive_into(scope, slot));
                    }
                    coll.wait_all(&mut result);
                    let indices: Vec<usize> = result.iter().map(|r| r.0).collect();
                    assert_eq!(indices, (0..2 * COUNT).collect::<Vec<_>>());
                    assert!(result[COUNT..]
                        .iter()
                        .all(|r| *r.2 == (rank + size - 1) % size));
                    assert_eq!(coll.incomplete(), 0);
                    coll.wait_all(&mut result);
                    assert!(result.is_empty(), "nothing handed out twice");
                });
                got
            })
        });
        let out = out.unwrap_or_else(|e| panic!("{n} ranks: {e}"));
        for (rank, got) in out.iter().enumerate() {
            let prev = ((rank + n - 1) % n) as i32;
            assert_eq!(got, &vec![prev; 2 * COUNT], "{n} ranks, rank {rank}");
        }
    }
}

/// Out of order: rank 2k posts receives with tags 1 and 2 from rank 2k+1,
/// which sends tag 2, then waits for a go-ahead before sending tag 1.
/// `wait_any` must return the tag-2 receive (index 1) although index 0 comes
/// first; the test forms then report nothing (index 0 cannot complete before
/// the go-ahead, and they do not block); after the go-ahead the rest
/// completes. An odd last rank and 1 rank run a collection of immediate
/// barriers only.
#[test]
fn wait_any_returns_the_request_that_can_complete_and_tests_never_block() {
    for &n in SIZES {
        let out = common::within_time_limit("out of order", LIMIT, move || {
            myriad::run(n, |universe| {
                let world = universe.world();
                let (rank, size) = (world.rank(), world.size());
                let partner = rank ^ 1;
                if partner >= size {
                    multiple_scope(2, |_, coll| {
                        coll.add(world.immediate_barrier());
                        let mut result = vec![];
                        coll.wait_all(&mut result);
                        assert_eq!(result.len(), 1);
                    });
                    return vec![];
                }
                let other = world.process_at_rank(partner);
                if rank % 2 == 1 {
                    world.barrier();
                    other.send_with_tag(&20i32, 2);
                    let (go, _) = other.receive::<i32>();
                    assert_eq!(go, 99);
                    other.send_with_tag(&10i32, 1);
                    return vec![];
                }
                let (mut a, mut b) = (0i32, 0i32);
                multiple_scope(3, |scope, coll| {
                    assert_eq!(
                        coll.add(other.immediate_receive_into_with_tag(scope, &mut a, 1)),
                        0
                    );
                    assert_eq!(
                        coll.add(other.immediate_receive_into_with_tag(scope, &mut b, 2)),
                        1
                    );
                    // Takes part while the receives are pending.
                    world.barrier();
                    let (i, status, data) = coll.wait_any().expect("one completes");
                    assert_eq!((i, status.tag(), *data), (1, 2, 20));
                    let mut result = vec![(9, status, data)];
                    for _ in 0..3 {
                        assert!(coll.test_any().is_none(), "index 0 cannot complete yet");
                        coll.test_some(&mut result);
                        assert!(result.is_empty(), "test_some clears and finds none");
                        assert!(!coll.test_all(&mut result));
                        assert!(result.is_empty());
                    }
                    assert_eq!(coll.incomplete(), 1);
                    other.send(&99i32);
                    let (i, status, data) = loop {
                        if let Some(done) = coll.test_any() {
                            break done;
                        }
                    };
                    assert_eq!((i, status.tag(), *data), (0, 1, 10));
                    assert!(coll.test_any().is_none());
                    assert!(coll.test_all(&mut result));
                    assert!(result.is_empty(), "no request handed out twice");
                });
                vec![a, b]
            })
        });
        let out = out.unwrap_or_else(|e| panic!("{n} ranks: {e}"));
        for (rank, got) in out.iter().enumerate() {
            if rank % 2 == 0 && rank + 1 < n {
                assert_eq!(got, &vec![10, 20], "{n} ranks, rank {rank}");
            }
        }
    }
}

/// `test_some` and `test_all` pick up what completed: polling them to the
/// end hands out every request once.
#[test]
fn test_some_and_test_all_poll_to_the_end() {
    for &n in SIZES {
        let out = common::within_time_limit("test_some", LIMIT, move || {
            myriad::run(n, |universe| {
                let world = universe.world();
                let (rank, size) = (world.rank(), world.size());
                let mut got = vec![-1i32; size as usize];
                let mut result = vec![];
                multiple_scope(2 * size as usize, |scope, coll| {
                    for (peer, slot) in got.iter_mut().enumerate() {
                        coll.add(
                            world
                                .process_at_rank(peer as i32)
                                .immediate_receive_into(scope, slot),
                        );
                    }
                    for peer in 0..size {
                        coll.add(world.process_at_rank(peer).immediate_send(scope, &rank));
                    }
                    let mut seen = BTreeSet::new();
                    while coll.incomplete() > size as usize {
                        coll.test_some(&mut result);
                        for &(i, _, _) in &result {
                            assert!(seen.insert(i), "index {i} handed out twice");
                        }
                    }
                    while !coll.test_all(&mut result) {}
                    for &(i, _, _) in &result {
                        assert!(seen.insert(i), "index {i} handed out twice");
                    }
                    assert_eq!(seen.len(), 2 * size as usize);
                    assert_eq!(coll.incomplete(), 0);
                });
                got
            })
        });
        let out = out.unwrap_or_else(|e| panic!("{n} ranks: {e}"));
        for got in out {
            assert_eq!(got, (0..n as i32).collect::<Vec<_>>());
        }
    }
}

/// A collection dropped with a pending receive (the closure returns early)
/// withdraws it and then panics; a collection unwound through by a panic
/// withdraws it without a second panic. The message stays queued for a
/// later receive and the buffer of the withdrawn one is never written.
#[test]
fn a_collection_dropped_or_unwound_with_pending_requests_settles_them() {
    for &n in &SIZES[1..] {
        let out = common::within_time_limit("dropped collection", LIMIT, move || {
            Runtime::builder().ranks(n).workers(1).run(|universe| {
                let world = universe.world();
                let (rank, size) = (world.rank(), world.size());
                let partner = rank ^ 1;
                if partner >= size {
                    world.barrier();
                    return (0, 0, String::new(), String::new());
                }
                let other = world.process_at_rank(partner);
                if rank % 2 == 1 {
                    world.barrier();
                    other.send_with_tag(&5i32, 5);
                    other.send_with_tag(&6i32, 6);
                    return (0, 0, String::new(), String::new());
                }
                let (mut early, mut unwound) = (0i32, 0i32);
                let dropped = panic::catch_unwind(AssertUnwindSafe(|| {
                    multiple_scope(1, |scope, coll| {
                        coll.add(other.immediate_receive_into_with_tag(scope, &mut early, 5));
                    })
                }))
                .map_err(message)
                .expect_err("dropping an incomplete collection panics");
                let boom = panic::catch_unwind(AssertUnwindSafe(|| {
                    multiple_scope(1, |scope, coll| {
                        coll.add(other.immediate_receive_into_with_tag(scope, &mut unwound, 6));
                        panic!("boom");
                    })
                }))
                .map_err(message)
                .expect_err("the panic goes through");
                world.barrier();
                let (five, _) = other.receive_with_tag::<i32>(5);
                let (six, _) = other.receive_with_tag::<i32>(6);
                assert_eq!((early, unwound), (0, 0), "withdrawn receives write nothing");
                (five, six, dropped, boom)
            })
        });
        let out = out.unwrap_or_else(|e| panic!("{n} ranks: {e}"));
        for (rank, (five, six, dropped, boom)) in out.iter().enumerate() {
            if rank % 2 == 0 && rank + 1 < n {
                assert_eq!((*five, *six), (5, 6), "{n} ranks, rank {rank}");
                assert!(
                    dropped.contains("dropped with 1 request(s) not completed"),
                    "{dropped}"
                );
                assert_eq!(boom, "boom");
            }
        }
    }
}

thread_local! {
    /// A request handed from one rank to another of the same worker.
    static STASH: RefCell<Option<Request<'static, [u64; 4], StaticScope>>> =
        const { RefCell::new(None) };
}

/// Rank 1 puts rank 0's pending receive into its own collection: waiting
/// for it fails with the wrong-rank error (instead of parking forever), the
/// collection's drop withdraws the receive (not freed under the mailbox),
/// and rank 0 gets the message with a later receive.
#[test]
fn a_collection_waiting_for_another_ranks_request_fails_clearly() {
    let out = common::within_time_limit("another rank's request", LIMIT, || {
        Runtime::builder().ranks(3).workers(1).run(|universe| {
            let world = universe.world();
            match world.rank() {
                0 => {
                    let request = world
                        .process_at_rank(2)
                        .immediate_receive_into(StaticScope, common::leaked_buffer());
                    STASH.with(|s| *s.borrow_mut() = Some(request));
                    world.barrier();
                    world.barrier();
                    let (got, _) = world.process_at_rank(2).receive::<[u64; 4]>();
                    (got[0].to_string(), String::new())
                }
                1 => {
                    world.barrier();
                    let request = STASH.with(|s| s.borrow_mut().take()).expect("stashed");
                    let mut waited = String::new();
                    let dropped = panic::catch_unwind(AssertUnwindSafe(|| {
                        multiple_scope(1, |_, coll| {
                            coll.add(request);
                            waited = panic::catch_unwind(AssertUnwindSafe(|| {
                                coll.wait_any().map(|r| r.0)
                            }))
                            .map_err(message)
                            .expect_err("the wrong rank's wait fails");
                        })
                    }))
                    .map_err(message)
                    .expect_err("dropped incomplete");
                    world.barrier();
                    (waited, dropped)
                }
                _ => {
                    world.barrier();
                    world.barrier();
                    world.process_at_rank(0).send(&[7u64; 4]);
                    (String::new(), String::new())
                }
            }
        })
    });
    let out = out.expect("the job runs to its end");
    assert_eq!(out[0].0, "7", "rank 0 receives the message: {out:?}");
    assert!(
        out[1]
            .0
            .contains("rank 1 used a communicator handle that belongs to rank 0"),
        "{}",
        out[1].0
    );
    assert!(out[1].1.contains("not completed"), "{}", out[1].1);
}

/// A failed operation (a truncated receive) in a collection fails the job
/// with the operation's error, reported at the caller's line, as
/// `Request::wait` does.
#[test]
fn a_truncated_receive_in_a_collection_fails_with_its_error() {
    for &n in &SIZES[1..] {
        let err = common::within_time_limit("truncation", LIMIT, move || {
            myriad::run(n, |universe| {
                let world = universe.world();
                let (rank, size) = (world.rank(), world.size());
                let partner = rank ^ 1;
                if partner >= size {
                    return;
                }
                let other = world.process_at_rank(partner);
                if rank % 2 == 1 {
                    other.send(&[1u32, 2, 3, 4][..]);
                    return;
                }
                let mut small = [0u32; 2];
                multiple_scope(1, |scope, coll| {
                    coll.add(other.immediate_receive_into(scope, &mut small[..]));
                    coll.wait_any();
                });
            })
        });
        let text = err.expect_err("the job fails").to_string();
        assert!(
            text.contains("panicked: message truncated")
                && text.contains("tests/request_collections.rs"),
            "{n} ranks: {text}"
        );
    }
}
