//! Access cost of a `rank_local!` value against a `std::thread_local!` one,
//! both measured inside a running rank (one rank on one worker):
//!
//! * `access/thread_local`: `Cell<u64>` increment through `thread_local!`;
//! * `access/rank_local`: the same through `rank_local!` (the current-rank
//!   pointer, then the rank's table).
//!
//! After criterion's report, a direct timing of both loops prints the ratio
//! (the target is at most 3×):
//!
//! ```text
//! cargo bench --bench rank_local
//! ```

use std::cell::Cell;
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::Criterion;

thread_local! {
    static PER_THREAD: Cell<u64> = const { Cell::new(0) };
}

myriad::rank_local! {
    static PER_RANK: Cell<u64> = Cell::new(0);
}

/// `iters` increments through `thread_local!`, as user code writes them:
/// the value goes through `black_box` so that every increment happens, but
/// the compiler may hoist what it can of the lookup out of the loop (the
/// thread-local's address; for `rank_local!`, the address of the
/// current-rank pointer, not its value).
#[inline(never)]
fn thread_local_loop(iters: u64) {
    for _ in 0..iters {
        PER_THREAD.with(|c| c.set(black_box(c.get()) + 1));
    }
}

/// `iters` increments through `rank_local!`, like [`thread_local_loop`].
#[inline(never)]
fn rank_local_loop(iters: u64) {
    for _ in 0..iters {
        PER_RANK.with(|c| c.set(black_box(c.get()) + 1));
    }
}

/// Runs `run(iters)` inside a rank (one rank, one worker) and returns the
/// time it took there.
fn in_rank(run: fn(u64), iters: u64) -> Duration {
    let times = myriad::Runtime::builder()
        .ranks(1)
        .workers(1)
        .stack_size(8 << 20)
        .run(|_| {
            // Create the values (and touch the loop) before timing.
            run(16);
            let start = Instant::now();
            run(iters);
            start.elapsed()
        })
        .expect("bench job");
    times[0]
}

fn access(c: &mut Criterion) {
    let mut group = c.benchmark_group("access");
    group.bench_function("thread_local", |b| {
        b.iter_custom(|iters| in_rank(thread_local_loop, iters))
    });
    group.bench_function("rank_local", |b| {
        b.iter_custom(|iters| in_rank(rank_local_loop, iters))
    });
    group.finish();
}

/// Best of several direct timings of each loop, in ns per access; the two
/// loops alternate so that both see the same machine (it may be shared).
fn ns_per_access() -> (f64, f64) {
    const ITERS: u64 = 50_000_000;
    let ns = |run: fn(u64)| in_rank(run, ITERS).as_secs_f64() * 1e9 / ITERS as f64;
    (0..7).fold((f64::INFINITY, f64::INFINITY), |(thread, rank), _| {
        (
            thread.min(ns(thread_local_loop)),
            rank.min(ns(rank_local_loop)),
        )
    })
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    access(&mut criterion);
    criterion.final_summary();
    // `cargo test --benches` runs this binary with `--test`: skip the timing.
    if std::env::args().any(|a| a == "--test" || a == "--list") {
        return;
    }
    let (thread, rank) = ns_per_access();
    println!(
        "rank_local: thread_local {thread:.3} ns, rank_local {rank:.3} ns per access, \
         ratio {:.2}x",
        rank / thread
    );
}
