//! Runtime benchmarks, each comparing alternatives in one run:
//!
//! * `switch`: a rank yielding to another rank on the same worker (one
//!   coroutine switch out and one in, plus the worker loop);
//! * `pingpong/<workers>w/<bytes>`: one-way time of a message between two
//!   ranks, on one worker and on two (1 B and 8 B latency: the path of a
//!   send into a receive already posted, and on one worker the directed
//!   hand-off; 1 MiB and 16 MiB bandwidth), next to `memcpy/<bytes>`, a
//!   plain copy of the same size;
//! * `start_join/10000_few_alive_at_once`: starting and joining a job of
//!   10,000 ranks that return at once (they run one after another on a few
//!   reused stacks: never more than a few alive together);
//! * `start_join/10000_all_alive_barrier`: the same with a barrier in every
//!   rank, so that all 10,000 are alive at once.
//!
//! ```text
//! cargo bench --bench runtime
//! ```

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use myriad::traits::*;

/// Time per yield of one rank while another yields too, on one worker.
fn switch(c: &mut Criterion) {
    c.bench_function("switch/yield_now", |b| {
        b.iter_custom(|iters| {
            let times = myriad::Runtime::builder()
                .ranks(2)
                .workers(1)
                .run(|_| {
                    let start = Instant::now();
                    for _ in 0..iters {
                        myriad::yield_now();
                    }
                    start.elapsed()
                })
                .unwrap();
            // Both ranks yield `iters` times in the same interval: each yield
            // is one switch out of a rank and one into the other.
            times[0] / 2
        })
    });
}

/// One-way time per message of `bytes`, averaged over `iters` round trips.
fn pingpong_once(workers: usize, bytes: usize, iters: u64) -> Duration {
    let times = myriad::Runtime::builder()
        .ranks(2)
        .workers(workers)
        .run(|universe| {
            let world = universe.world();
            let rank = world.rank();
            let peer = world.process_at_rank(1 - rank);
            let mut buf = vec![0u8; bytes];
            // Warm up (first touch of the pages, wake-up of the workers).
            for _ in 0..2 {
                if rank == 0 {
                    peer.send(&buf[..]);
                    peer.receive_into(&mut buf[..]);
                } else {
                    peer.receive_into(&mut buf[..]);
                    peer.send(&buf[..]);
                }
            }
            let start = Instant::now();
            for _ in 0..iters.div_ceil(2) {
                if rank == 0 {
                    peer.send(&buf[..]);
                    peer.receive_into(&mut buf[..]);
                } else {
                    peer.receive_into(&mut buf[..]);
                    peer.send(&buf[..]);
                }
            }
            start.elapsed()
        })
        .unwrap();
    // `iters` one-way messages (rounded up to whole round trips).
    times[0] * (iters as u32) / (2 * iters.div_ceil(2) as u32)
}

fn pingpong(c: &mut Criterion) {
    let mut group = c.benchmark_group("pingpong");
    for bytes in [1usize, 8, 1 << 20, 16 << 20] {
        group.throughput(Throughput::Bytes(bytes as u64));
        if bytes > 8 {
            group.sample_size(10);
        }
        for workers in [1usize, 2] {
            group.bench_with_input(
                BenchmarkId::new(format!("{workers}w"), bytes),
                &bytes,
                |b, &bytes| b.iter_custom(|iters| pingpong_once(workers, bytes, iters)),
            );
        }
        if bytes > 8 {
            let src = vec![1u8; bytes];
            let mut dst = vec![0u8; bytes];
            group.bench_with_input(BenchmarkId::new("memcpy", bytes), &bytes, |b, _| {
                b.iter(|| {
                    dst.copy_from_slice(black_box(&src));
                    black_box(&mut dst);
                })
            });
        }
    }
    group.finish();
}

fn start_join(c: &mut Criterion) {
    let mut group = c.benchmark_group("start_join");
    group.sample_size(10);
    // Each rank returns at once: ranks run one after another on a few
    // reused stacks and no more than a few are ever alive together. This is
    // the runtime's fixed cost per rank, not what a job of 10,000 live ranks
    // costs.
    group.bench_function("10000_few_alive_at_once", |b| {
        b.iter(|| {
            myriad::run(10_000, |universe| black_box(universe.world().rank())).unwrap();
        })
    });
    // Every rank waits in a barrier: all 10,000 are alive at once, each on
    // its own stack, as in a real job.
    group.bench_function("10000_all_alive_barrier", |b| {
        b.iter(|| {
            myriad::run(10_000, |universe| {
                let world = universe.world();
                world.barrier();
                black_box(world.rank())
            })
            .unwrap();
        })
    });
    group.finish();
}

criterion_group!(benches, switch, pingpong, start_join);
criterion_main!(benches);
