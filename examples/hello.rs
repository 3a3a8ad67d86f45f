//! Every rank says hello through a barrier and counts the ranks with an
//! all-reduce; rank 0 measures the memory.
//!
//! ```text
//! cargo run --release --example hello -- --ranks 100000
//! ```
//!
//! The last line is
//! `hello: ranks=N processes=P workers=W wall_s=... rss_per_rank_kib=...`, printed
//! once, by the process hosting world rank 0, where the RSS per rank is (its RSS at
//! the barrier − its RSS before the ranks started) / the ranks it hosts, and W its
//! workers. The same program runs as several processes under `mpiexec` or
//! with `--processes P` (each process's `run` returns its own ranks' results).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use myriad::traits::*;

mod common;
use common::rss_bytes;

fn main() {
    let runtime = myriad::Runtime::from_env();
    let rss_before = rss_bytes();
    let rss_at_barrier = AtomicU64::new(0);
    let workers = AtomicU64::new(0);
    let start = Instant::now();
    let first = AtomicU64::new(0);
    let processes = AtomicU64::new(1);
    let ranks = runtime
        .run(|universe| {
            let world = universe.world();
            let (rank, size) = (world.rank(), world.size());
            if size <= 16 {
                println!("hello from rank {rank} of {size}");
            }
            world.barrier();
            let mut total = 0u64;
            world.all_reduce_into(
                &1u64,
                &mut total,
                myriad::collective::SystemOperation::sum(),
            );
            assert_eq!(total, size as u64, "the all-reduce counts every rank");
            let hosted = universe.process_ranks();
            if rank == hosted.start {
                first.store(hosted.start as u64, Ordering::Relaxed);
                processes.store(universe.process_count() as u64, Ordering::Relaxed);
                rss_at_barrier.store(rss_bytes(), Ordering::Relaxed);
                workers.store(
                    myriad::environment::worker_count() as u64,
                    Ordering::Relaxed,
                );
            }
            (rank, size)
        })
        .unwrap_or_else(|err| {
            eprintln!("hello: {err}");
            std::process::exit(1);
        });
    let wall = start.elapsed().as_secs_f64();
    let first = first.load(Ordering::Relaxed) as usize;
    assert!(
        ranks
            .iter()
            .enumerate()
            .all(|(i, &(r, _))| r as usize == first + i),
        "every rank of this process answered once, in order"
    );
    if first != 0 {
        return;
    }
    let n = ranks[0].1;
    let per_rank = rss_at_barrier
        .load(Ordering::Relaxed)
        .saturating_sub(rss_before) as f64
        / ranks.len() as f64
        / 1024.0;
    println!(
        "hello: ranks={n} processes={} workers={} wall_s={wall:.3} rss_per_rank_kib={per_rank:.2}",
        processes.load(Ordering::Relaxed),
        workers.load(Ordering::Relaxed)
    );
}
