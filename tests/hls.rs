//! Hierarchical local storage: one value per group of ranks (process, NUMA
//! node, worker), built by exactly one rank per group with `single`,
//! updated by generations, level barriers, poisoning, and failures.

use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use myriad::hls::{AccessError, Hls, HlsLevel};
use myriad::traits::*;
use myriad::{Error, Runtime};

/// Runs `f` on a thread and fails if it takes longer than a minute (a hang
/// becomes a failure instead of a stuck test run).
fn within_a_minute<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(panic::catch_unwind(AssertUnwindSafe(f)));
    });
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(Ok(value)) => value,
        Ok(Err(payload)) => panic::resume_unwind(payload),
        Err(_) => panic!("the job hung"),
    }
}

/// The message of a caught panic.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        String::new()
    }
}

/// A small table and its checksum.
fn table(len: usize, seed: u64) -> Vec<u64> {
    (0..len as u64).map(|i| i * 31 + seed).collect()
}

fn checksum(t: &[u64]) -> u64 {
    t.iter()
        .step_by(97)
        .fold(0, |a, &x| a.wrapping_mul(7).wrapping_add(x))
}

static PROCESS_TABLE: Hls<Vec<u64>> = Hls::new(HlsLevel::Process);
static PROCESS_BUILDS: AtomicUsize = AtomicUsize::new(0);

#[test]
fn process_single_builds_one_table_for_10000_ranks() {
    let ranks = 10_000;
    let expected = checksum(&table(4096, 5));
    let out = Runtime::builder()
        .ranks(ranks)
        .workers(2)
        .run(|universe| {
            let ran = PROCESS_TABLE.single(|previous| {
                assert!(previous.is_none());
                PROCESS_BUILDS.fetch_add(1, Ordering::SeqCst);
                // Let other ranks arrive and park meanwhile.
                for _ in 0..3 {
                    myriad::yield_now();
                }
                table(4096, 5)
            });
            let group = PROCESS_TABLE.group();
            assert_eq!((group.index(), group.size()), (0, ranks));
            let sum = PROCESS_TABLE.with(|t| checksum(t));
            (ran, sum, universe.world().rank())
        })
        .unwrap();
    assert_eq!(PROCESS_BUILDS.load(Ordering::SeqCst), 1);
    assert_eq!(out.iter().filter(|(ran, _, _)| *ran).count(), 1);
    assert!(out.iter().all(|&(_, sum, _)| sum == expected));
}

static WORKER_TABLE: Hls<Vec<u64>> = Hls::new(HlsLevel::Worker);
static WORKER_BUILDS: AtomicUsize = AtomicUsize::new(0);

#[test]
fn worker_single_builds_one_table_per_worker() {
    let (ranks, workers) = (10_000, 4);
    let out = Runtime::builder()
        .ranks(ranks)
        .workers(workers)
        .run(|_| {
            let group = HlsLevel::Worker.group();
            WORKER_TABLE.single(|_| {
                WORKER_BUILDS.fetch_add(1, Ordering::SeqCst);
                table(1024, group.index() as u64)
            });
            let sum = WORKER_TABLE.with(|t| checksum(t));
            (group.index(), group.size(), sum)
        })
        .unwrap();
    assert_eq!(WORKER_BUILDS.load(Ordering::SeqCst), workers);
    for (rank, &(index, size, sum)) in out.iter().enumerate() {
        // Block assignment: 2,500 consecutive ranks per worker.
        assert_eq!(index, rank / (ranks / workers), "rank {rank}");
        assert_eq!(size, ranks / workers);
        // Each rank read its own group's table.
        assert_eq!(sum, checksum(&table(1024, index as u64)), "rank {rank}");
    }
}

mod common;

/// Re-runs the test `name` alone in a child process with `envs` set
/// (environment variables are process-global) and checks that it passed.
fn in_child(name: &str, envs: &[(&str, &str)], body: impl FnOnce()) {
    common::in_child(name, envs, body);
}

static NUMA_TABLE: Hls<Vec<u64>> = Hls::new(HlsLevel::Numa);
static NUMA_BUILDS: AtomicUsize = AtomicUsize::new(0);
static PACKAGE_VALUE: Hls<usize> = Hls::new(HlsLevel::Package);
static PACKAGE_BUILDS: AtomicUsize = AtomicUsize::new(0);

#[test]
fn numa_single_builds_one_table_per_numa_node() {
    let name = "numa_single_builds_one_table_per_numa_node";
    in_child(name, &[("HWLOC_SYNTHETIC", "numa:2 core:1 pu:1")], || {
        let ranks = 1000;
        let out = Runtime::builder()
            .ranks(ranks)
            .workers(2)
            .run(|_| {
                let numa = HlsLevel::Numa.group();
                NUMA_TABLE.single(|_| {
                    NUMA_BUILDS.fetch_add(1, Ordering::SeqCst);
                    table(512, numa.index() as u64)
                });
                PACKAGE_VALUE.single(|_| {
                    PACKAGE_BUILDS.fetch_add(1, Ordering::SeqCst);
                    7
                });
                let sum = NUMA_TABLE.with(|t| checksum(t));
                let package = PACKAGE_VALUE.group();
                (numa.index(), numa.size(), sum, package.size())
            })
            .unwrap();
        assert_eq!(NUMA_BUILDS.load(Ordering::SeqCst), 2);
        // One package holds both NUMA nodes.
        assert_eq!(PACKAGE_BUILDS.load(Ordering::SeqCst), 1);
        for (rank, &(index, size, sum, package)) in out.iter().enumerate() {
            // One worker per NUMA node, ranks in blocks.
            assert_eq!(index, rank / (ranks / 2), "rank {rank}");
            assert_eq!(size, ranks / 2);
            assert_eq!(sum, checksum(&table(512, index as u64)));
            assert_eq!(package, ranks);
        }
    });
}

/// A value that counts its drops.
struct Counted(u64, &'static AtomicUsize);

impl Drop for Counted {
    fn drop(&mut self) {
        self.1.fetch_add(1, Ordering::SeqCst);
    }
}

static GENERATION: Hls<Counted> = Hls::new(HlsLevel::Worker);
static GENERATION_DROPS: AtomicUsize = AtomicUsize::new(0);
static GENERATION_RUNS: AtomicUsize = AtomicUsize::new(0);

#[test]
fn repeated_singles_are_generations_seen_in_order() {
    let (ranks, workers, generations) = (300, 2, 6u64);
    let out = within_a_minute(move || {
        Runtime::builder()
            .ranks(ranks)
            .workers(workers)
            .run(|universe| {
                let rank = universe.world().rank();
                let mut seen = Vec::new();
                let mut drops_after_third = 0;
                for k in 1..=generations {
                    // Shuffle the order in which ranks arrive.
                    for _ in 0..(rank as u64 * 7 + k) % 4 {
                        myriad::yield_now();
                    }
                    GENERATION.single(|previous| {
                        GENERATION_RUNS.fetch_add(1, Ordering::SeqCst);
                        let previous = previous.map_or(0, |p| p.0);
                        assert_eq!(previous, k - 1, "the runner sees the last generation");
                        myriad::yield_now();
                        Counted(previous + 1, &GENERATION_DROPS)
                    });
                    seen.push(GENERATION.with(|g| g.0));
                    if k == 3 {
                        // Every rank passed generation 3: generations 1 and
                        // 2 of both groups are gone, 3 is kept.
                        HlsLevel::Process.barrier();
                        drops_after_third = GENERATION_DROPS.load(Ordering::SeqCst);
                        HlsLevel::Process.barrier();
                    }
                }
                (seen, drops_after_third)
            })
            .unwrap()
    });
    let expected: Vec<u64> = (1..=generations).collect();
    for (rank, (seen, drops)) in out.iter().enumerate() {
        assert_eq!(seen, &expected, "rank {rank}");
        assert_eq!(*drops, 2 * workers, "rank {rank}");
    }
    // One run per generation per worker group; every value dropped by the
    // end of the job.
    assert_eq!(
        GENERATION_RUNS.load(Ordering::SeqCst),
        generations as usize * workers
    );
    assert_eq!(
        GENERATION_DROPS.load(Ordering::SeqCst),
        generations as usize * workers
    );
}

static BARRIER_COUNTS: [AtomicUsize; 3] = [
    AtomicUsize::new(0),
    AtomicUsize::new(0),
    AtomicUsize::new(0),
];

#[test]
fn level_barriers_wait_for_every_rank_of_the_group() {
    let (ranks, workers, rounds) = (301, 3, 5);
    within_a_minute(move || {
        Runtime::builder()
            .ranks(ranks)
            .workers(workers)
            .run(|universe| {
                let rank = universe.world().rank() as usize;
                let group = HlsLevel::Worker.group();
                for round in 1..=rounds {
                    for _ in 0..(rank + round) % 3 {
                        myriad::yield_now();
                    }
                    BARRIER_COUNTS[group.index()].fetch_add(1, Ordering::SeqCst);
                    HlsLevel::Worker.barrier();
                    // Everyone of my group arrived, nobody started the next
                    // round (it would need me at the second barrier).
                    assert_eq!(
                        BARRIER_COUNTS[group.index()].load(Ordering::SeqCst),
                        round * group.size(),
                        "rank {rank} round {round}"
                    );
                    HlsLevel::Worker.barrier();
                }
                // Process level: all three groups are done.
                HlsLevel::Process.barrier();
                let total: usize = BARRIER_COUNTS
                    .iter()
                    .map(|c| c.load(Ordering::SeqCst))
                    .sum();
                assert_eq!(total, rounds * ranks);
            })
            .unwrap();
    });
}

static FAILING: Hls<Vec<u64>> = Hls::new(HlsLevel::Process);

#[test]
fn a_panic_in_single_fails_the_job_with_its_message_and_nothing_hangs() {
    let err = within_a_minute(|| {
        Runtime::builder()
            .ranks(200)
            .workers(2)
            .run(|_| {
                FAILING.single(|_| {
                    // Others arrive and park first.
                    for _ in 0..5 {
                        myriad::yield_now();
                    }
                    panic!("the table could not be built");
                });
                FAILING.with(|t| t.len())
            })
            .unwrap_err()
    });
    match err {
        Error::Panic { message, .. } => {
            assert!(
                message.contains("the table could not be built"),
                "{message}"
            )
        }
        other => panic!("unexpected error: {other}"),
    }
}

static POISONED: Hls<u64> = Hls::new(HlsLevel::Process);

#[test]
fn a_caught_panic_in_single_poisons_the_generation_for_everyone() {
    let ranks = 50;
    let out = within_a_minute(move || {
        Runtime::builder()
            .ranks(ranks)
            .workers(2)
            .run(|universe| {
                let rank = universe.world().rank();
                let first = panic::catch_unwind(|| {
                    POISONED.single(|_| {
                        for _ in 0..5 {
                            myriad::yield_now();
                        }
                        panic!("runner {rank} failed");
                    })
                });
                let first = first.map_err(|p| panic_message(&*p));
                // Later calls of the group fail too.
                let again =
                    panic::catch_unwind(|| POISONED.single(|_| 1)).map_err(|p| panic_message(&*p));
                (first, again)
            })
            .unwrap()
    });
    let runners: Vec<usize> = out
        .iter()
        .enumerate()
        .filter(|(_, (first, _))| matches!(first, Err(m) if m.starts_with("runner")))
        .map(|(rank, _)| rank)
        .collect();
    assert_eq!(runners.len(), 1, "{out:?}");
    let runner = runners[0];
    for (rank, (first, again)) in out.iter().enumerate() {
        if rank != runner {
            let message = first.as_ref().unwrap_err();
            assert!(message.contains("poisoned"), "{message}");
            assert!(
                message.contains(&format!("rank {runner} panicked")),
                "{message}"
            );
        }
        let message = again.as_ref().unwrap_err();
        assert!(message.contains("poisoned"), "{message}");
    }
}

static OUTSIDE: Hls<u64> = Hls::new(HlsLevel::Process);

#[test]
fn hls_outside_of_any_rank_fails_clearly() {
    let message = |f: &dyn Fn()| {
        let payload = panic::catch_unwind(AssertUnwindSafe(f)).unwrap_err();
        panic_message(&*payload)
    };
    for m in [
        message(&|| {
            OUTSIDE.single(|_| 1);
        }),
        message(&|| {
            OUTSIDE.with(|v| *v);
        }),
        message(&|| HlsLevel::Numa.barrier()),
        message(&|| {
            HlsLevel::Worker.group();
        }),
    ] {
        assert!(m.contains("outside of any rank"), "{m}");
    }
    assert_eq!(OUTSIDE.try_with(|v| *v), Err(AccessError::OutsideRank));
    // And from a parallel region's closures, which run outside of any rank.
    let err = Runtime::builder()
        .ranks(1)
        .workers(2)
        .run(|_| {
            myriad::parallel_for(0..8, 1, |_| {
                OUTSIDE.single(|_| 1);
            });
        })
        .unwrap_err();
    assert!(err.to_string().contains("outside of any rank"), "{err}");
}

static UNSET: Hls<u64> = Hls::new(HlsLevel::Process);
static NESTED: Hls<u64> = Hls::new(HlsLevel::Worker);

#[test]
fn reading_before_single_and_single_inside_with_are_errors() {
    let out = myriad::run(2, |_| UNSET.try_with(|v| *v)).unwrap();
    assert_eq!(out, [Err(AccessError::Uninitialized); 2]);
    let err = Runtime::builder()
        .ranks(1)
        .workers(1)
        .run(|_| {
            NESTED.single(|_| 1);
            NESTED.with(|_| NESTED.single(|_| 2));
        })
        .unwrap_err();
    assert!(err.to_string().contains("inside `with`"), "{err}");
}

static PER_JOB: Hls<Counted> = Hls::new(HlsLevel::Process);
static PER_JOB_DROPS: AtomicUsize = AtomicUsize::new(0);

#[test]
fn values_belong_to_the_job() {
    for job in 0..2u64 {
        let out = myriad::run(4, |_| {
            PER_JOB.single(|previous| {
                // A new job starts without the last one's value.
                assert!(previous.is_none());
                Counted(job, &PER_JOB_DROPS)
            });
            PER_JOB.with(|v| v.0)
        })
        .unwrap();
        assert_eq!(out, [job; 4]);
        // Dropped with its job.
        assert_eq!(PER_JOB_DROPS.load(Ordering::SeqCst), job as usize + 1);
    }
}
