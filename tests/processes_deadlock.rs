//! Deadlocks across processes: when every rank of every process waits and
//! no message is in flight, every process's job fails with
//! `Error::Deadlock` naming every rank's wait (the termination wave of
//! `p2p::remote`); a wait that a busy rank or a message in flight will end
//! is no deadlock. Jobs of 2 to 4 processes run as threads of this test
//! process, joined by the loopback transport (`loopback::`) and by TCP
//! (`tcp::`); `real_processes_*` runs them as processes of the built-in
//! launcher. Every job runs under a time limit: without the wave these
//! jobs hang.

use std::time::{Duration, Instant};

use myriad::traits::*;
use myriad::Error;

#[macro_use]
mod common;

use common::joined::{joined, Via, LIMIT};

/// The deadlock report of process `p`'s failed job.
fn report_of<T: std::fmt::Debug>(p: usize, result: &Result<Vec<T>, Error>) -> &str {
    match result {
        Err(Error::Deadlock { report }) => report,
        other => panic!("process {p}: expected a deadlock, got {other:?}"),
    }
}

cases!(
    a_receive_receive_deadlock_is_reported_in_every_process,
    a_ring_whose_last_message_waits_for_a_long_computation_is_no_deadlock,
    ranks_waiting_on_a_finished_process_are_reported,
    waves_racing_late_messages_report_nothing,
    waves_racing_messages_between_other_processes_report_nothing,
    a_deadlock_after_some_traffic_is_reported,
);

/// Every rank receives from the next one (in another process): all wait,
/// nothing is in flight. Every process reports every rank's wait.
fn a_receive_receive_deadlock_is_reported_in_every_process(via: Via) {
    for layout in [&[1, 1][..], &[2, 1, 1], &[1, 2, 1, 1]] {
        let layout: &'static [usize] = layout;
        let size: usize = layout.iter().sum();
        let results = joined(via, layout, |universe| {
            let world = universe.world();
            let next = (world.rank() + 1) % world.size();
            let _ = world.process_at_rank(next).receive::<u32>();
        });
        assert_eq!(results.len(), layout.len());
        for (p, result) in results.iter().enumerate() {
            let report = report_of(p, result);
            assert!(
                report.contains(&format!("{} processes waiting", layout.len())),
                "{layout:?}, process {p}: {report}"
            );
            for rank in 0..size {
                let wait = format!("rank {rank}: receive from rank {}", (rank + 1) % size);
                assert!(
                    report.contains(&wait),
                    "{layout:?}, process {p}: no {wait:?} in {report}"
                );
            }
        }
    }
}

/// A ring: rank 0 computes for a while before it sends, every other rank
/// passes on what it receives. Meanwhile every other process idles, its
/// ranks waiting: no deadlock.
fn a_ring_whose_last_message_waits_for_a_long_computation_is_no_deadlock(via: Via) {
    for layout in [&[1, 1][..], &[1, 1, 1], &[1, 1, 1, 1]] {
        let layout: &'static [usize] = layout;
        let results = joined(via, layout, |universe| {
            let world = universe.world();
            let (rank, size) = (world.rank(), world.size());
            let next = world.process_at_rank((rank + 1) % size);
            let previous = world.process_at_rank((rank + size - 1) % size);
            if rank == 0 {
                compute(Duration::from_millis(400));
                next.send(&1u32);
                previous.receive::<u32>().0
            } else {
                let (hops, _) = previous.receive::<u32>();
                next.send(&(hops + 1));
                hops
            }
        });
        let size = layout.len() as u32;
        let out: Vec<u32> = results
            .into_iter()
            .enumerate()
            .flat_map(|(p, r)| r.unwrap_or_else(|e| panic!("{layout:?}, process {p}: {e}")))
            .collect();
        let expected: Vec<u32> = (0..size).map(|r| if r == 0 { size } else { r }).collect();
        assert_eq!(out, expected, "{layout:?}");
    }
}

/// One process's ranks finish (goodbye) while the others' wait for them:
/// the waiting processes report, the finished one succeeds. Process 0
/// (the first coordinator of the wave) finishing, too.
fn ranks_waiting_on_a_finished_process_are_reported(via: Via) {
    for finished in [0, 1] {
        let results = joined(via, &[1, 1, 1], move |universe| {
            let world = universe.world();
            if world.rank() != finished {
                let _ = world.process_at_rank(finished).receive::<u32>();
            }
        });
        for (p, result) in results.iter().enumerate() {
            if p as i32 == finished {
                assert!(result.is_ok(), "process {p}: {result:?}");
                continue;
            }
            let report = report_of(p, result);
            for rank in (0..3).filter(|&r| r != finished) {
                let wait = format!("rank {rank}: receive from rank {finished}");
                assert!(
                    report.contains(&wait),
                    "process {p}: no {wait:?} in {report}"
                );
            }
        }
    }
}

/// Ping-pong between processes with a random short computation before
/// each answer, many times: the waiting side idles while a message is in
/// flight or its peer computes, so waves run and race the messages.
/// Nothing may be reported.
fn waves_racing_late_messages_report_nothing(via: Via) {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for round in 0..150 {
        seed = xorshift(seed);
        let s = seed;
        let layout: &'static [usize] = if round % 2 == 0 { &[1, 1] } else { &[1, 1, 1] };
        let results = joined(via, layout, move |universe| {
            let world = universe.world();
            let (rank, size) = (world.rank(), world.size());
            let mut rng = s ^ (rank as u64 + 1).wrapping_mul(0x2545_f491_4f6c_dd1d);
            let mut value = 0u64;
            for hop in 0..4 {
                let turn = hop % size;
                if rank == turn {
                    rng = xorshift(rng);
                    compute(Duration::from_micros(rng % 3000));
                    world.process_at_rank((rank + 1) % size).send(&value);
                } else if rank == (turn + 1) % size {
                    value = world.process_at_rank(turn).receive::<u64>().0 + 1;
                }
            }
            value
        });
        for (p, result) in results.iter().enumerate() {
            assert!(result.is_ok(), "round {round}, process {p}: {result:?}");
        }
    }
}

/// Process 0 (which runs the waves) idles while processes 1 and 2
/// exchange messages with random short computations between them, many
/// times: a wave often finds one of them idle and the other idle with a
/// message in flight to it. Nothing may be reported.
fn waves_racing_messages_between_other_processes_report_nothing(via: Via) {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for round in 0..30 {
        seed = xorshift(seed);
        let s = seed;
        let results = joined(via, &[1, 1, 1], move |universe| {
            let world = universe.world();
            let rank = world.rank();
            let mut rng = s ^ (rank as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            if rank == 0 {
                return world.process_at_rank(2).receive::<u64>().0;
            }
            let other = world.process_at_rank(3 - rank);
            let mut value = 0u64;
            for hop in 0..200 {
                if hop % 2 == rank as u64 - 1 {
                    rng = xorshift(rng);
                    compute(Duration::from_micros(rng % 400));
                    other.send(&value);
                } else {
                    value = other.receive::<u64>().0 + 1;
                }
            }
            if rank == 2 {
                world.process_at_rank(0).send(&value);
            }
            value
        });
        for (p, result) in results.iter().enumerate() {
            assert!(result.is_ok(), "round {round}, process {p}: {result:?}");
        }
    }
}

/// Messages go back and forth, then every rank waits for one more that
/// nobody sends: reported once the traffic is over.
fn a_deadlock_after_some_traffic_is_reported(via: Via) {
    let results = joined(via, &[2, 2], |universe| {
        let world = universe.world();
        let (rank, size) = (world.rank(), world.size());
        let next = world.process_at_rank((rank + 1) % size);
        let previous = world.process_at_rank((rank + size - 1) % size);
        for i in 0..50u32 {
            if rank % 2 == 0 {
                next.send(&i);
                let _ = previous.receive::<u32>();
            } else {
                let _ = previous.receive::<u32>();
                next.send(&i);
            }
        }
        let _ = world
            .process_at_rank((rank + 2) % size)
            .receive_with_tag::<u32>(9);
    });
    for (p, result) in results.iter().enumerate() {
        let report = report_of(p, result);
        for rank in 0..4 {
            let wait = format!("rank {rank}: receive from rank {}, tag 9", (rank + 2) % 4);
            assert!(
                report.contains(&wait),
                "process {p}: no {wait:?} in {report}"
            );
        }
    }
}

/// Keeps the calling worker busy for `time` (a rank that computes).
fn compute(time: Duration) {
    let end = Instant::now() + time;
    while Instant::now() < end {
        std::hint::spin_loop();
    }
}

fn xorshift(mut x: u64) -> u64 {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    x
}

/// Real processes of the built-in launcher (`MYRIAD_PROCESSES=3`, 4 ranks):
/// every rank receives from the next; every process's job fails with the
/// deadlock, and every process exits non-zero on its own, naming every
/// rank's wait.
#[test]
fn real_processes_of_the_built_in_launcher_all_report_the_deadlock() {
    const TEST: &str = "real_processes_of_the_built_in_launcher_all_report_the_deadlock";
    if std::env::var("MYRIAD_TEST_LAUNCH").as_deref() == Ok(TEST) {
        let process = std::env::var("PMI_RANK").ok();
        let result = myriad::run(4, |universe| {
            let world = universe.world();
            let next = (world.rank() + 1) % world.size();
            let _ = world.process_at_rank(next).receive::<u32>();
        });
        // The launcher's own `run` never returns.
        let process = process.expect("a process of the launcher");
        match result {
            Err(err @ Error::Deadlock { .. }) => {
                // One write: the processes share the launcher's stderr, and a
                // message written in pieces interleaves with the others'.
                let text = format!("process {process} failed: {err}\n");
                let _ = std::io::Write::write_all(&mut std::io::stderr(), text.as_bytes());
                std::process::exit(3);
            }
            other => panic!("process {process}: expected a deadlock, got {other:?}"),
        }
    }
    let (status, _, stderr) = common::launched::launch(TEST, 3, &[], &[], LIMIT);
    assert_eq!(status.code(), Some(3), "{stderr}");
    for process in 0..3 {
        let reported = format!("process {process} failed: deadlock: ");
        assert!(
            stderr.lines().any(|l| l.starts_with(&reported)),
            "process {process} reported nothing:\n{stderr}"
        );
    }
    for rank in 0..4 {
        let wait = format!("rank {rank}: receive from rank {}", (rank + 1) % 4);
        assert!(stderr.contains(&wait), "no {wait:?} in\n{stderr}");
    }
}
