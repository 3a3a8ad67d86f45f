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
//!
//! With `--phases` it also prints where the wall time went, as the moments
//! the last rank passed each step (seconds since the start of `run`, taken
//! with one clock read per rank and step, so a little slower):
//! `hello-phases: first_rank_s=... all_started_s=... barrier_s=...
//! all_reduce_s=... returned_s=...`: set-up until the first rank runs,
//! then every rank in the barrier (all started), out of it, out of the
//! all-reduce, and `run` returned (the ranks finished, teardown done).

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use myriad::traits::*;

mod common;
use common::rss_bytes;

/// Shards of [`Phases`]' moments: a worker thread writes its own shard (one
/// 128-byte block, two cache lines), not a line every rank of every worker
/// writes (which bounced between the workers at every rank and step).
const SHARDS: usize = 16;

/// The shard of this thread: threads take them in turn as they first
/// record a moment (more threads than shards share).
fn shard() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SHARD: Cell<usize> = const { Cell::new(usize::MAX) };
    }
    SHARD.with(|s| {
        if s.get() == usize::MAX {
            s.set(NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS);
        }
        s.get()
    })
}

/// One shard: the earliest first-rank moment and the latest moment of each
/// step its threads saw.
#[derive(Default)]
#[repr(align(128))]
struct Shard {
    first_rank: AtomicU64,
    steps: [AtomicU64; 3],
}

/// The moments (nanoseconds since the start) the last rank passed each step
/// (`--phases`).
struct Phases {
    start: Instant,
    shards: [Shard; SHARDS],
}

impl Phases {
    fn new(start: Instant) -> Phases {
        let shards: [Shard; SHARDS] = Default::default();
        for shard in &shards {
            shard.first_rank.store(u64::MAX, Ordering::Relaxed);
        }
        Phases { start, shards }
    }

    fn now(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    fn entered(&self) {
        let first = &self.shards[shard()].first_rank;
        let now = self.now();
        if now < first.load(Ordering::Relaxed) {
            first.fetch_min(now, Ordering::Relaxed);
        }
    }

    fn passed(&self, step: usize) {
        self.shards[shard()].steps[step].fetch_max(self.now(), Ordering::Relaxed);
    }

    fn print(&self, returned: f64) {
        let s = |ns: u64| ns as f64 * 1e-9;
        let first = self
            .shards
            .iter()
            .map(|sh| sh.first_rank.load(Ordering::Relaxed));
        let step = |i: usize| {
            self.shards
                .iter()
                .map(|sh| sh.steps[i].load(Ordering::Relaxed))
                .max()
                .unwrap_or(0)
        };
        println!(
            "hello-phases: first_rank_s={:.3} all_started_s={:.3} barrier_s={:.3} all_reduce_s={:.3} returned_s={returned:.3}",
            s(first.min().unwrap_or(0)),
            s(step(0)),
            s(step(1)),
            s(step(2)),
        );
    }
}

fn main() {
    common::usage("hello --ranks R [--workers W] [--processes P] [--phases]");
    let runtime = myriad::Runtime::from_env();
    let rss_before = rss_bytes();
    let rss_at_barrier = AtomicU64::new(0);
    let workers = AtomicU64::new(0);
    let start = Instant::now();
    let first = AtomicU64::new(0);
    let processes = AtomicU64::new(1);
    let phases = std::env::args()
        .any(|a| a == "--phases")
        .then(|| Phases::new(start));
    let ranks = runtime
        .run(|universe| {
            let world = universe.world();
            let (rank, size) = (world.rank(), world.size());
            if let Some(phases) = &phases {
                phases.entered();
            }
            if size <= 16 {
                println!("hello from rank {rank} of {size}");
            }
            let step = |i| {
                if let Some(phases) = &phases {
                    phases.passed(i)
                }
            };
            step(0);
            world.barrier();
            step(1);
            let mut total = 0u64;
            world.all_reduce_into(
                &1u64,
                &mut total,
                myriad::collective::SystemOperation::sum(),
            );
            step(2);
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
    if let Some(phases) = &phases {
        phases.print(wall);
    }
}
