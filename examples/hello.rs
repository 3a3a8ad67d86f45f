//! Every rank says hello through a barrier; rank 0 measures the memory.
//!
//! ```text
//! cargo run --release --example hello -- --ranks 100000
//! ```
//!
//! The last line is `hello: ranks=N workers=W wall_s=... rss_per_rank_kib=...`
//! where the RSS per rank is (process RSS at the barrier − RSS before the ranks
//! started) / N.

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
    let ranks = runtime
        .run(|universe| {
            let world = universe.world();
            let (rank, size) = (world.rank(), world.size());
            if size <= 16 {
                println!("hello from rank {rank} of {size}");
            }
            world.barrier();
            if rank == 0 {
                rss_at_barrier.store(rss_bytes(), Ordering::Relaxed);
                workers.store(
                    myriad::environment::worker_count() as u64,
                    Ordering::Relaxed,
                );
            }
            rank
        })
        .unwrap_or_else(|err| {
            eprintln!("hello: {err}");
            std::process::exit(1);
        });
    let wall = start.elapsed().as_secs_f64();
    let n = ranks.len();
    assert!(
        ranks.iter().enumerate().all(|(i, &r)| r as usize == i),
        "every rank answered once, in order"
    );
    let per_rank = rss_at_barrier
        .load(Ordering::Relaxed)
        .saturating_sub(rss_before) as f64
        / n as f64
        / 1024.0;
    println!(
        "hello: ranks={n} workers={} wall_s={wall:.3} rss_per_rank_kib={per_rank:.2}",
        workers.load(Ordering::Relaxed)
    );
}
