//! Placement policies end to end: `MYRIAD_MAP_BY`, `MYRIAD_RANK_ORDER` and
//! `MYRIAD_REPORT_BINDINGS` on synthetic machines.
//!
//! The variables are process-global, so each case runs in a child process of
//! this test binary (re-run with a filter naming the test) and the parent
//! checks the child's report.

use myriad::topology::{Level, RankOrder};
use myriad::Runtime;

mod common;
use common::in_child as child_stderr;

/// `(worker, numa, package, ranks)` of each report line.
fn report(stderr: &str) -> Vec<(usize, usize, usize, usize)> {
    stderr
        .lines()
        .filter_map(|l| l.strip_prefix("[myriad] worker "))
        .map(|rest| {
            let n: Vec<usize> = rest
                .split(|c: char| !c.is_ascii_digit())
                .filter(|s| !s.is_empty())
                .map(|s| s.parse().unwrap())
                .collect();
            (n[0], n[3], n[4], n[5])
        })
        .collect()
}

/// The counts of the report's "ranks run per worker" line, by worker.
fn ranks_run_per_worker(stderr: &str) -> Vec<usize> {
    let line = stderr
        .lines()
        .find_map(|l| l.strip_prefix("[myriad] ranks run per worker: "))
        .unwrap_or_else(|| panic!("no report of ranks per worker\n{stderr}"));
    line.split(", ")
        .map(|w| w.rsplit(' ').next().unwrap().parse().unwrap())
        .collect()
}

fn small_job() {
    let out = Runtime::builder()
        .ranks(7)
        .run(|universe| {
            use myriad::traits::*;
            universe.world().barrier();
        })
        .unwrap();
    assert_eq!(out.len(), 7);
}

#[test]
fn map_by_package_spreads_workers_over_packages() {
    let envs = [
        ("HWLOC_SYNTHETIC", "package:2 numa:1 core:2 pu:1"),
        ("MYRIAD_WORKERS", "2"),
        ("MYRIAD_REPORT_BINDINGS", "1"),
    ];
    let by_package = [envs.as_slice(), &[("MYRIAD_MAP_BY", "package")]].concat();
    if let Some(stderr) = child_stderr(
        "map_by_package_spreads_workers_over_packages",
        &by_package,
        small_job,
    ) {
        let lines = report(&stderr);
        assert_eq!(lines.len(), 2, "{stderr}");
        assert_eq!((lines[0].2, lines[1].2), (0, 1), "{stderr}");
        // 7 ranks in blocks: 4 then 3.
        assert_eq!((lines[0].3, lines[1].3), (4, 3), "{stderr}");
    }
}

#[test]
fn map_by_core_fills_the_first_package_first() {
    let envs = [
        ("HWLOC_SYNTHETIC", "package:2 numa:1 core:2 pu:1"),
        ("MYRIAD_WORKERS", "2"),
        ("MYRIAD_REPORT_BINDINGS", "1"),
        ("MYRIAD_MAP_BY", "core"),
    ];
    if let Some(stderr) = child_stderr(
        "map_by_core_fills_the_first_package_first",
        &envs,
        small_job,
    ) {
        let lines = report(&stderr);
        assert_eq!(lines.len(), 2, "{stderr}");
        assert_eq!((lines[0].2, lines[1].2), (0, 0), "{stderr}");
    }
}

#[test]
fn builder_map_by_numa_and_cyclic_order() {
    let envs = [
        ("HWLOC_SYNTHETIC", "numa:2 core:2 pu:1"),
        ("MYRIAD_REPORT_BINDINGS", "1"),
    ];
    let body = || {
        Runtime::builder()
            .ranks(5)
            .workers(4)
            .map_by(Level::Numa)
            .rank_order(RankOrder::Cyclic)
            .run(|_| ())
            .unwrap();
    };
    if let Some(stderr) = child_stderr("builder_map_by_numa_and_cyclic_order", &envs, body) {
        let lines = report(&stderr);
        assert_eq!(
            lines.iter().map(|l| l.1).collect::<Vec<_>>(),
            [0, 1, 0, 1],
            "{stderr}"
        );
        assert_eq!(
            lines.iter().map(|l| l.3).collect::<Vec<_>>(),
            [2, 1, 1, 1],
            "{stderr}"
        );
    }
}

#[test]
fn a_missing_level_is_an_error_listing_the_levels() {
    let envs = [
        ("HWLOC_SYNTHETIC", "numa:2 core:1 pu:1"),
        ("MYRIAD_MAP_BY", "package"),
    ];
    let body = || {
        let err = Runtime::builder().ranks(2).run(|_| ()).unwrap_err();
        let message = err.to_string();
        assert!(message.contains("package"), "{message}");
        assert!(message.contains("numa, core, pu"), "{message}");
    };
    child_stderr(
        "a_missing_level_is_an_error_listing_the_levels",
        &envs,
        body,
    );
}

#[test]
fn unknown_policy_names_are_errors() {
    let body = || {
        let err = Runtime::builder().ranks(2).run(|_| ()).unwrap_err();
        let message = err.to_string();
        assert!(message.contains("MYRIAD_MAP_BY"), "{message}");
        assert!(message.contains("package, numa, core, pu"), "{message}");
    };
    child_stderr(
        "unknown_policy_names_are_errors",
        &[("MYRIAD_MAP_BY", "l3cache")],
        body,
    );
}

#[test]
fn unknown_rank_order_is_an_error() {
    let body = || {
        let err = Runtime::builder().ranks(2).run(|_| ()).unwrap_err();
        let message = err.to_string();
        assert!(
            message.contains("MYRIAD_RANK_ORDER") && message.contains("block or cyclic"),
            "{message}"
        );
    };
    child_stderr(
        "unknown_rank_order_is_an_error",
        &[("MYRIAD_RANK_ORDER", "diagonal")],
        body,
    );
}

/// A started rank stays on its worker, so a worker that runs out of ranks to
/// start takes only enough of another's to even their counts: every later
/// collective waits for the worker with the most ranks. Rank 0 holds worker
/// 0's thread (a blocking sleep, not a parked rank) while worker 1 has
/// started its own share; taking half of worker 0's queue at a time, as
/// stealing did, left worker 0 with 2 of the 400 ranks.
#[test]
fn a_stalled_worker_keeps_its_share_of_ranks() {
    let body = || {
        Runtime::builder()
            .ranks(400)
            .workers(2)
            .report_bindings(true)
            .run(|universe| {
                use myriad::traits::*;
                let world = universe.world();
                if world.rank() == 0 {
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
                world.barrier();
            })
            .unwrap();
    };
    if let Some(stderr) = child_stderr("a_stalled_worker_keeps_its_share_of_ranks", &[], body) {
        assert_eq!(ranks_run_per_worker(&stderr), [200, 200], "{stderr}");
    }
}

/// Ranks that ended leave room: a worker whose ranks all returned takes
/// unstarted ranks from one still busy with its own (a job of short ranks
/// that never wait for each other is balanced by work, not by count).
#[test]
fn a_worker_whose_ranks_ended_takes_from_a_busy_one() {
    let body = || {
        Runtime::builder()
            .ranks(40)
            .workers(2)
            .report_bindings(true)
            .run(|universe| {
                use myriad::traits::*;
                // Worker 0's share (ranks 0-19 in blocks) holds its thread.
                if universe.world().rank() < 20 {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
            })
            .unwrap();
    };
    if let Some(stderr) = child_stderr(
        "a_worker_whose_ranks_ended_takes_from_a_busy_one",
        &[],
        body,
    ) {
        let counts = ranks_run_per_worker(&stderr);
        assert_eq!(counts.iter().sum::<usize>(), 40, "{stderr}");
        assert!(counts[1] > 25, "worker 1 took too few: {stderr}");
    }
}
