//! Real processes of one host over shared memory (issue 15, item 2): the
//! built-in launcher (`MYRIAD_PROCESSES`) re-runs each test as the
//! launcher, which re-runs it as each process.
//!
//! * `auto` picks shared memory for the processes of one host, and
//!   messages cross it in order per pair, with `ANY_SOURCE`, and 16 MiB
//!   single-copy (CMA) or, with CMA off, through the rings;
//! * a segment that cannot be created (`MYRIAD_SHM_RING_BYTES` at an
//!   impossible size) leaves `auto` on TCP with a warning, and makes
//!   `MYRIAD_TRANSPORT=shm` an error;
//! * a peer killed mid-job fails the ranks waiting on it, naming it, and
//!   so does a sender killed while its receiver may read its lent buffer.
//!
//! The cross-process cases of `tests/processes*.rs` also run over shared
//! memory between threads (`shm::` modules); `.ci/run` runs the tests
//! with real processes again under `MYRIAD_TRANSPORT=shm`.

mod common;

use std::time::Duration;

use myriad::traits::*;

/// How long a launch may take before the test fails as a hang.
const LIMIT: Duration = Duration::from_secs(90);

/// This run's PMI rank if it is a process of the launch of `test`,
/// `Some(None)` if it is the launcher, `None` if it is the test itself.
fn role(test: &str) -> Option<Option<u32>> {
    if std::env::var("MYRIAD_TEST_LAUNCH").as_deref() != Ok(test) {
        return None;
    }
    Some(std::env::var("PMI_RANK").ok().map(|r| r.parse().unwrap()))
}

/// Runs `test` as the built-in launcher of `processes` processes with
/// `envs`: the exit status and standard error.
fn launch(test: &str, processes: u32, envs: &[(&str, &str)]) -> (Option<i32>, String) {
    let (status, stdout, stderr) = common::launched::launch(
        test,
        processes,
        envs,
        &[
            "MYRIAD_TRANSPORT",
            "MYRIAD_SHM_RING_BYTES",
            "MYRIAD_SHM_CMA",
        ],
        LIMIT,
    );
    (status.code(), format!("{stderr}\n--- stdout ---\n{stdout}"))
}

/// The launcher's part: `myriad::run` launches and exits the process.
fn be_the_launcher() -> ! {
    let _ = myriad::run(6, |_| ());
    unreachable!("the built-in launcher exits the process");
}

const FRAMES: u32 = 3000;
const BIG: usize = 16 << 20;

/// 6 ranks over 3 processes (2 each): every rank but 0 sends rank 0
/// `FRAMES` messages of growing sizes (many times the rings' size in
/// all, tag 1); rank 0 takes them with `ANY_SOURCE` and checks each sender's
/// order and bytes; rank 2 (process 1) also sends 16 MiB (tag 2).
/// Exits the process with 3 on a failed check.
fn traffic() {
    let results = myriad::run(6, |universe| {
        let world = universe.world();
        let (rank, size) = (world.rank(), world.size());
        let body = |from: i32, i: u32| -> Vec<u8> {
            (0..(i as usize * 13) % 2000)
                .map(|j| (from as usize * 31 + i as usize + j) as u8)
                .collect()
        };
        let mut ok = true;
        if rank == 0 {
            let mut next = vec![0u32; size as usize];
            for _ in 0..FRAMES * (size as u32 - 1) {
                let (msg, status) = world.any_process().receive_vec_with_tag::<u8>(1);
                let from = status.source_rank();
                let i = next[from as usize];
                ok &= msg == body(from, i);
                next[from as usize] += 1;
            }
            ok &= next[1..].iter().all(|&n| n == FRAMES);
            let mut big = vec![0u8; BIG];
            world
                .process_at_rank(2)
                .receive_into_with_tag(&mut big[..], 2);
            ok &= big.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8);
        } else {
            for i in 0..FRAMES {
                world
                    .process_at_rank(0)
                    .send_with_tag(&body(rank, i)[..], 1);
            }
            if rank == 2 {
                let big: Vec<u8> = (0..BIG).map(|i| (i % 251) as u8).collect();
                world.process_at_rank(0).send_with_tag(&big[..], 2);
            }
        }
        world.barrier();
        ok
    })
    .unwrap();
    if results.iter().any(|ok| !ok) {
        eprintln!(
            "process {}: wrong or missing messages",
            std::env::var("PMI_RANK").unwrap()
        );
        std::process::exit(3);
    }
}

#[test]
fn auto_picks_shared_memory_and_messages_cross_it_in_order() {
    const TEST: &str = "auto_picks_shared_memory_and_messages_cross_it_in_order";
    match role(TEST) {
        None => {}
        Some(None) => be_the_launcher(),
        Some(Some(_)) => return traffic(),
    }
    let (status, out) = launch(TEST, 3, &[("MYRIAD_REPORT_BINDINGS", "1")]);
    assert_eq!(status, Some(0), "{out}");
    for (p, others) in [(0, "1, 2"), (1, "0, 2"), (2, "0, 1")] {
        let line = format!("process {p} (host ");
        let report = out
            .lines()
            .find(|l| l.starts_with("[myriad] transport: ") && l.contains(&line))
            .unwrap_or_else(|| panic!("no transport line of process {p}:\n{out}"));
        assert!(
            report.contains(&format!(
                "shared memory with processes {others} (large messages read by CMA from {others}), TCP with none"
            )),
            "{report}"
        );
    }
}

#[test]
fn forced_shared_memory_without_cma_moves_large_messages_through_the_rings() {
    const TEST: &str = "forced_shared_memory_without_cma_moves_large_messages_through_the_rings";
    match role(TEST) {
        None => {}
        Some(None) => be_the_launcher(),
        Some(Some(_)) => return traffic(),
    }
    let (status, out) = launch(
        TEST,
        3,
        &[
            ("MYRIAD_TRANSPORT", "shm"),
            ("MYRIAD_SHM_CMA", "off"),
            ("MYRIAD_SHM_RING_BYTES", "64K"),
            ("MYRIAD_REPORT_BINDINGS", "1"),
        ],
    );
    assert_eq!(status, Some(0), "{out}");
    // Reported once per process.
    assert_eq!(
        out.matches("single-copy reads (CMA) are off").count(),
        3,
        "{out}"
    );
    assert_eq!(
        out.matches("(large messages read by CMA from none), TCP with none")
            .count(),
        3,
        "{out}"
    );
}

#[test]
fn a_segment_that_cannot_be_created_leaves_auto_on_tcp_with_a_warning() {
    const TEST: &str = "a_segment_that_cannot_be_created_leaves_auto_on_tcp_with_a_warning";
    match role(TEST) {
        None => {}
        Some(None) => be_the_launcher(),
        Some(Some(_)) => return traffic(),
    }
    // 2^62-byte rings: the segment cannot be created anywhere.
    let huge = ("MYRIAD_SHM_RING_BYTES", "4194304T");
    let (status, out) = launch(TEST, 3, &[huge, ("MYRIAD_REPORT_BINDINGS", "1")]);
    assert_eq!(status, Some(0), "{out}");
    assert_eq!(out.matches("could not be created").count(), 3, "{out}");
    assert_eq!(
        out.matches("are reached through TCP, not shared memory")
            .count(),
        3,
        "{out}"
    );
    assert_eq!(
        out.matches("shared memory with processes none").count(),
        3,
        "{out}"
    );
    // Forced, it is an error naming what failed.
    let (status, out) = launch(TEST, 3, &[huge, ("MYRIAD_TRANSPORT", "shm")]);
    assert_ne!(status, Some(0), "{out}");
    assert!(
        out.contains("MYRIAD_TRANSPORT=shm")
            && out.contains("shared memory does not reach")
            && out.contains("could not be created"),
        "{out}"
    );
}

#[test]
fn a_peer_killed_mid_job_fails_the_ranks_waiting_on_it() {
    const TEST: &str = "a_peer_killed_mid_job_fails_the_ranks_waiting_on_it";
    match role(TEST) {
        None => {}
        Some(None) => be_the_launcher(),
        Some(Some(process)) => {
            let result = myriad::run(3, |universe| {
                let world = universe.world();
                match world.rank() {
                    0 => {
                        // The first message arrives; the second never.
                        let _ = world.process_at_rank(2).receive_vec::<u8>();
                        world.process_at_rank(2).receive_vec::<u8>();
                    }
                    2 => {
                        world.process_at_rank(0).send(&[1u8; 100][..]);
                        // SAFETY: raising a signal has no memory effects.
                        unsafe { libc::raise(libc::SIGKILL) };
                    }
                    _ => {}
                }
            });
            exit_on_failure(process, result);
            return;
        }
    }
    assert_process_0_names_process_2(TEST);
}

/// A sender killed while its 16 MiB send waits (its buffer lent for the
/// receiver to read by CMA) fails the receiver naming it, whether the
/// receiver's read or the connection's end notices first.
#[test]
fn a_sender_killed_while_its_buffer_is_lent_fails_the_receiver() {
    const TEST: &str = "a_sender_killed_while_its_buffer_is_lent_fails_the_receiver";
    match role(TEST) {
        None => {}
        Some(None) => be_the_launcher(),
        Some(Some(process)) => {
            let result = myriad::run(3, |universe| {
                let world = universe.world();
                match world.rank() {
                    0 => {
                        let mut big = vec![0u8; BIG];
                        world.process_at_rank(2).receive_into(&mut big[..]);
                        // Never sent: ends in the failure if the read
                        // above still found the killed process's memory.
                        world.process_at_rank(2).receive_vec::<u8>();
                    }
                    2 => {
                        let big = vec![5u8; BIG];
                        myriad::request::scope(|scope| {
                            let _pending = world.process_at_rank(0).immediate_send(scope, &big[..]);
                            // SAFETY: raising a signal has no memory effects.
                            unsafe { libc::raise(libc::SIGKILL) };
                        });
                    }
                    _ => {}
                }
            });
            exit_on_failure(process, result);
            return;
        }
    }
    assert_process_0_names_process_2(TEST);
}

/// A child process of the peer-loss tests: reports its job's failure on
/// stderr, for the parent to read, and exits with 3.
fn exit_on_failure<T>(process: impl std::fmt::Display, result: Result<T, myriad::Error>) {
    if let Err(err) = result {
        let text = format!("process {process} failed: {err}\n");
        let _ = std::io::Write::write_all(&mut std::io::stderr(), text.as_bytes());
        std::process::exit(3);
    }
}

/// Runs `test` as 3 processes over shared memory, process 2 killing itself:
/// the job fails, and process 0 names process 2.
fn assert_process_0_names_process_2(test: &str) {
    let (status, out) = launch(test, 3, &[("MYRIAD_TRANSPORT", "shm")]);
    assert_ne!(status, Some(0), "{out}");
    let line = out
        .lines()
        .find(|l| l.starts_with("process 0 failed: "))
        .unwrap_or_else(|| panic!("process 0 reported nothing:\n{out}"));
    assert!(line.contains("process 2"), "{line}");
}
