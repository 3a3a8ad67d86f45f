//! Hybrid parallel regions: `parallel_for` and `scope` inside ranks.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use myriad::traits::*;
use myriad::Runtime;

#[test]
fn parallel_for_covers_every_index_once() {
    let out = Runtime::builder()
        .ranks(1)
        .workers(2)
        .run(|_| {
            let hits: Vec<AtomicUsize> = (0..10_007).map(|_| AtomicUsize::new(0)).collect();
            myriad::parallel_for(3..10_007, 64, |i| {
                hits[i].fetch_add(1, Ordering::Relaxed);
            });
            hits.iter()
                .enumerate()
                .all(|(i, h)| h.load(Ordering::Relaxed) == usize::from(i >= 3))
        })
        .unwrap();
    assert_eq!(out, vec![true]);
}

#[test]
fn regions_of_many_ranks_at_once() {
    // Ranks × tasks oversubscription: 64 ranks on 2 workers, each opening
    // regions between messages.
    let out = Runtime::builder()
        .ranks(64)
        .workers(2)
        .run(|universe| {
            let world = universe.world();
            let mut total = 0u64;
            for round in 0..5u64 {
                let sum = AtomicU64::new(0);
                myriad::parallel_for(0..1000, 7, |i| {
                    sum.fetch_add(i as u64 * (round + 1), Ordering::Relaxed);
                });
                let mut all = 0u64;
                world.all_reduce_into(
                    &sum.into_inner(),
                    &mut all,
                    myriad::collective::SystemOperation::sum(),
                );
                total += all;
            }
            total
        })
        .unwrap();
    // Σ_round 64 · 499500 · (round + 1) = 64 · 499500 · 15.
    assert!(out.iter().all(|&t| t == 64 * 499_500 * 15), "{out:?}");
}

#[test]
fn region_work_spreads_over_workers() {
    let threads = Runtime::builder()
        .ranks(1)
        .workers(2)
        .run(|_| {
            let seen = Mutex::new(HashSet::new());
            myriad::parallel_for(0..40, 1, |_| {
                seen.lock().unwrap().insert(std::thread::current().id());
                std::thread::sleep(Duration::from_millis(5));
            });
            seen.into_inner().unwrap().len()
        })
        .unwrap();
    assert_eq!(threads, vec![2], "both workers should take chunks");
}

#[test]
fn scope_runs_every_spawned_closure() {
    let out = Runtime::builder()
        .ranks(8)
        .workers(2)
        .run(|universe| {
            let rank = universe.world().rank() as usize;
            let mut parts = [0usize; 16];
            myriad::hybrid::scope(|s| {
                for (i, p) in parts.iter_mut().enumerate() {
                    s.spawn(move || *p = i * rank);
                }
            });
            parts.iter().sum::<usize>()
        })
        .unwrap();
    let expected: Vec<usize> = (0..8).map(|r| r * (0..16).sum::<usize>()).collect();
    assert_eq!(out, expected);
}

#[test]
fn panicking_chunk_fails_the_job_with_its_message() {
    let err = Runtime::builder()
        .ranks(4)
        .workers(2)
        .run(|universe| {
            let world = universe.world();
            let me = world.rank();
            myriad::parallel_for(0..100, 1, |i| {
                if me == 1 && i == 50 {
                    panic!("chunk 50 exploded");
                }
            });
            world.barrier();
        })
        .unwrap_err();
    let s = err.to_string();
    assert!(s.contains("chunk 50 exploded"), "{s}");
}

#[test]
fn regions_outside_a_rank_run_serially() {
    let sum = AtomicU64::new(0);
    myriad::parallel_for(0..100, 10, |i| {
        sum.fetch_add(i as u64, Ordering::Relaxed);
    });
    assert_eq!(sum.into_inner(), 4950);
    let mut v = [0; 4];
    myriad::hybrid::scope(|s| {
        for (i, x) in v.iter_mut().enumerate() {
            s.spawn(move || *x = i);
        }
    });
    assert_eq!(v, [0, 1, 2, 3]);
}

#[test]
fn blocking_calls_from_micro_tasks_are_refused() {
    let err = Runtime::builder()
        .ranks(2)
        .workers(2)
        .run(|universe| {
            let world = universe.world();
            myriad::hybrid::scope(|s| {
                s.spawn(|| world.barrier());
            });
        })
        .unwrap_err();
    let s = err.to_string();
    assert!(s.contains("outside of any rank"), "{s}");
}

#[test]
fn parallel_chunks_mut_writes_each_chunk_once() {
    let out = Runtime::builder()
        .ranks(3)
        .workers(2)
        .run(|_| {
            let mut v = vec![0u32; 1001];
            myriad::hybrid::parallel_chunks_mut(&mut v, 10, |k, chunk| {
                for (i, x) in chunk.iter_mut().enumerate() {
                    *x += (k * 10 + i) as u32 + 1;
                }
            });
            v.iter().enumerate().all(|(i, &x)| x == i as u32 + 1)
        })
        .unwrap();
    assert_eq!(out, vec![true; 3]);
}
