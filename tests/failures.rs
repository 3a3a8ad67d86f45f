//! Bad input and failing jobs: clear errors, never hangs.

use std::sync::Mutex;

use myriad::topology::SimpleCommunicator;
use myriad::traits::*;
use myriad::{Error, StackGuard};

fn panic_message(err: Error) -> (i32, String) {
    match err {
        Error::Panic { rank, message } => (rank, message),
        other => panic!("expected a rank panic, got: {other}"),
    }
}

#[test]
fn send_to_rank_size_or_minus_one_names_the_rank() {
    for bad in [4, -1] {
        let err = myriad::run(4, |universe| {
            let world = universe.world();
            if world.rank() == 2 {
                world.process_at_rank(bad).send(&1u8);
            }
        })
        .unwrap_err();
        let (rank, message) = panic_message(err);
        assert_eq!(rank, 2);
        assert!(
            message.contains(&format!("rank {bad} is not in the communicator"))
                && message.contains("0..4"),
            "{message}"
        );
        assert!(
            message.contains("tests/failures.rs"),
            "call site: {message}"
        );
    }
}

/// The send path names its operation only when a check fails (the name is
/// picked out of line); each send mode must still name its own, and the
/// call site.
#[test]
fn bad_send_tags_name_the_operation_and_call_site() {
    type SendFn = fn(&myriad::topology::Process<'_>);
    let cases: [(&str, SendFn); 3] = [
        ("send", |p| p.send_with_tag(&1u8, -3)),
        ("buffered_send", |p| p.buffered_send_with_tag(&1u8, -3)),
        ("synchronous_send", |p| {
            p.synchronous_send_with_tag(&1u8, -3)
        }),
    ];
    for (op, send) in cases {
        let err = myriad::run(2, move |universe| {
            let world = universe.world();
            if world.rank() == 1 {
                send(&world.process_at_rank(0));
            }
        })
        .unwrap_err();
        let (rank, message) = panic_message(err);
        assert_eq!(rank, 1);
        assert!(
            message.starts_with(&format!("{op}: tag -3 is not valid")),
            "{message}"
        );
        assert!(
            message.contains("tests/failures.rs"),
            "call site: {message}"
        );
    }
}

#[test]
fn negative_tags_are_rejected() {
    let out = myriad::run(2, |universe| {
        let world = universe.world();
        let peer = world.process_at_rank(1 - world.rank());
        let send = peer.try_send_with_tag(&1u32, -5).unwrap_err();
        let mut x = 0u32;
        let recv = peer.try_receive_into_with_tag(&mut x, -7).unwrap_err();
        (send, recv)
    })
    .unwrap();
    let (send, recv) = &out[0];
    assert!(matches!(send, Error::Tag { tag: -5, .. }), "{send}");
    assert!(send.to_string().contains("tag -5 is not valid"), "{send}");
    assert!(matches!(recv, Error::Tag { tag: -7, .. }), "{recv}");
    // The panicking form fails the job with the same message.
    let err = myriad::run(2, |universe| {
        let world = universe.world();
        if world.rank() == 0 {
            world.process_at_rank(1).send_with_tag(&1u8, -1);
        }
    })
    .unwrap_err();
    assert!(panic_message(err).1.contains("tag -1 is not valid"));
}

#[test]
fn a_panicking_rank_among_a_thousand_ends_the_job() {
    let err = myriad::run(1000, |universe| {
        let world = universe.world();
        world.barrier();
        if world.rank() == 637 {
            panic!("boom from {}", world.rank());
        }
        // Everyone else waits for a message that never comes, or in a barrier.
        if world.rank() % 2 == 0 {
            world.barrier();
        } else {
            let _ = world.any_process().receive::<u8>();
        }
    })
    .unwrap_err();
    let (rank, message) = panic_message(err);
    assert_eq!(rank, 637);
    assert!(message.contains("boom from 637"), "{message}");
    assert!(message.contains("tests/failures.rs"), "{message}");
}

#[test]
fn receive_receive_deadlock_names_both_ranks_and_call_sites() {
    let err = myriad::run(2, |universe| {
        let world = universe.world();
        let other = 1 - world.rank();
        let _ = world.process_at_rank(other).receive_with_tag::<u64>(3);
    })
    .unwrap_err();
    let Error::Deadlock { report } = &err else {
        panic!("expected a deadlock, got {err}");
    };
    let line = line!() - 6;
    for (rank, peer) in [(0, 1), (1, 0)] {
        let expected = format!(
            "rank {rank}: receive from rank {peer}, tag 3, on communicator MPI_COMM_WORLD, at tests/failures.rs:{line}:"
        );
        assert!(
            report.contains(&expected),
            "missing {expected:?} in:\n{report}"
        );
    }
}

#[test]
fn a_missing_barrier_is_a_deadlock_not_a_hang() {
    let err = myriad::run(100, |universe| {
        let world = universe.world();
        if world.rank() != 42 {
            world.barrier();
        }
    })
    .unwrap_err();
    let Error::Deadlock { report } = &err else {
        panic!("expected a deadlock, got {err}");
    };
    assert!(report.contains("all 99 live ranks"), "{report}");
    assert!(report.contains("barrier"), "{report}");
    assert!(report.contains("1 ranks finished"), "{report}");
}

#[test]
fn a_synchronous_send_nobody_receives_is_a_deadlock() {
    let err = myriad::run(3, |universe| {
        let world = universe.world();
        if world.rank() == 1 {
            world.process_at_rank(2).synchronous_send_with_tag(&7u8, 9);
        }
    })
    .unwrap_err();
    let Error::Deadlock { report } = &err else {
        panic!("expected a deadlock, got {err}");
    };
    assert!(
        report.contains("rank 1: synchronous send to rank 2, tag 9"),
        "{report}"
    );
}

#[test]
fn a_communicator_used_by_another_rank_is_an_error() {
    let smuggled: Mutex<Option<SimpleCommunicator>> = Mutex::new(None);
    let out = myriad::run(2, |universe| {
        let world = universe.world();
        if world.rank() == 0 {
            *smuggled.lock().unwrap() = Some(world.clone());
        }
        world.barrier();
        if world.rank() == 1 {
            let theirs = smuggled.lock().unwrap().take().unwrap();
            return Some(
                theirs
                    .process_at_rank(1)
                    .try_send_with_tag(&1u8, 0)
                    .unwrap_err(),
            );
        }
        None
    })
    .unwrap();
    let err = out[1].clone().unwrap();
    assert!(matches!(err, Error::Comm { .. }), "{err}");
    assert!(err.to_string().contains("belongs to rank 0"), "{err}");
}

#[test]
fn mpi_outside_a_rank_is_a_clear_error() {
    let payload = std::panic::catch_unwind(|| myriad::initialize()).unwrap_err();
    let message = payload
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert!(message.contains("outside of any rank"), "{message}");
    // A communicator taken out of its job cannot be used from a plain thread.
    let world = myriad::run(1, |universe| universe.world())
        .unwrap()
        .remove(0);
    let err = world
        .process_at_rank(0)
        .try_send_with_tag(&1u8, 0)
        .unwrap_err();
    assert!(err.to_string().contains("outside of any rank"), "{err}");
}

#[test]
fn invalid_configuration_is_reported() {
    let err = myriad::Runtime::builder().ranks(0).run(|_| ()).unwrap_err();
    assert!(matches!(err, Error::Config { .. }), "{err}");
    let err = myriad::Runtime::builder()
        .ranks(2)
        .workers(0)
        .run(|_| ())
        .unwrap_err();
    assert!(err.to_string().contains("worker"), "{err}");
}

#[test]
fn mprotect_guards_beyond_the_mapping_limit_fail_with_advice() {
    let limit: usize = std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(65530);
    let ranks = limit / 2 + 1000;
    let err = myriad::Runtime::builder()
        .ranks(ranks)
        .stack_guard(StackGuard::Mprotect)
        .run(|_| ())
        .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::Resources { .. }), "{text}");
    assert!(text.contains("vm.max_map_count"), "{text}");
    assert!(text.contains("sysctl -w vm.max_map_count="), "{text}");
    // Within the budget, mprotect guards work.
    let out = myriad::Runtime::builder()
        .ranks(100)
        .stack_guard(StackGuard::Mprotect)
        .run(|universe| {
            let world = universe.world();
            world.barrier();
            world.rank()
        })
        .unwrap();
    assert_eq!(out.len(), 100);
}
