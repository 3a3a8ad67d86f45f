//! Latency of one-sided communication: window creation, passive-target
//! epochs and operations, at several sizes and rank counts.
//!
//! ```text
//! cargo run --release --example rma_bench -- [--ranks 2,16,256] [--sizes 8,1024]
//!     [--ops create_free,barrier,get,lock_get_unlock,lock_all_gets,put_flush,put_vector,fetch_and_op]
//!     [--iters 200] [--budget-s 60]
//! ```
//!
//! Prints `operation bytes ranks latency_us` rows (the same rows as the C
//! twin, `benches/rma_vs_mpi.c`, which `benches/rma_vs_mpi.sh` runs side by
//! side with ratios):
//!
//! * `create_free`: `with_window` over `bytes` per rank (create, then free:
//!   both collective), every rank; the slowest rank's average per window.
//! * `barrier`: a barrier at the same rank count, for the target "creation
//!   + free ≤ 2× a barrier".
//! * `get`: one `get` of `bytes` from rank 1 inside an open shared lock
//!   epoch, by rank 0 while the others wait in a barrier (average per get).
//! * `lock_get_unlock`: shared lock on rank 1, get `bytes`, unlock, by rank 0.
//! * `lock_all_gets`: `lock_all`, one get of `bytes` from every rank,
//!   `unlock_all`, by rank 0 (per epoch).
//! * `put_flush`: put `bytes` to rank 1 and flush, inside an exclusive
//!   lock epoch, by rank 0.
//! * `put_vector`: put `bytes` to every other `u64` of rank 1 through a
//!   vector target type (`put_typed`, blocks of one element, stride two)
//!   and flush, inside an exclusive lock epoch, by rank 0.
//! * `fetch_and_op`: a `u64` sum on rank 1 inside `lock_all`, by rank 0
//!   (printed at 8 bytes only).
//!
//! Each row is the median of 5 repetitions of `--iters` operations (fewer
//! for large sizes and rank counts: about `--iters` × 8 KiB bytes per
//! repetition at most); the repetitions of all rows of a rank count
//! alternate, so that a slow phase of a shared machine hits every row alike.
//! The origin rows start after a barrier, once every rank has made its part
//! of the window. Rank counts whose rows would exceed `--budget-s`
//! of measured time are skipped with a comment. Timings on a shared
//! machine vary: run it twice and read ranges.

use std::time::Instant;

use myriad::collective::SystemOperation;
use myriad::datatype::UserDatatype;
use myriad::topology::SimpleCommunicator;
use myriad::traits::*;
use myriad::window::{Epoch, LockType, TargetView, WindowCreation};

mod common;
use common::{arg, list, median};

const OPS: &[&str] = &[
    "create_free",
    "barrier",
    "get",
    "lock_get_unlock",
    "lock_all_gets",
    "put_flush",
    "put_vector",
    "fetch_and_op",
];

/// Iterations of one repetition of `op` at `bytes` on `ranks` ranks.
fn iterations(op: &str, bytes: usize, ranks: usize, iters: usize) -> usize {
    let per_byte = (iters * 8192 / bytes.max(1)).max(3);
    let n = iters.min(per_byte);
    match op {
        "create_free" | "barrier" => (iters * 64 / ranks).clamp(5, iters),
        "lock_all_gets" => (n * 16 / ranks).clamp(3, n),
        _ => n,
    }
}

/// Times `iters` iterations of `op` on this rank; returns microseconds per
/// iteration as the slowest rank saw it (every rank gets the same value).
fn measure(world: &SimpleCommunicator, op: &str, bytes: usize, iters: usize) -> f64 {
    let rank = world.rank();
    let elems = bytes.div_ceil(8).max(1);
    // `put_vector` writes every other element: twice the room.
    let room = if op == "put_vector" { 2 * elems } else { elems };
    let mut buf = vec![rank as u64; room];
    let mut out = vec![0u64; elems];
    world.barrier();
    let mut elapsed = 0.0f64;
    match op {
        "create_free" => {
            let start = Instant::now();
            for _ in 0..iters {
                world.with_window(&mut buf, |_| ()).unwrap();
            }
            elapsed = start.elapsed().as_secs_f64();
        }
        "barrier" => {
            let start = Instant::now();
            for _ in 0..iters {
                world.barrier();
            }
            elapsed = start.elapsed().as_secs_f64();
        }
        _ => {
            world
                .with_window(&mut buf, |win| {
                    // Creation waits for nobody: let every rank make its
                    // part before timing accesses to it.
                    world.barrier();
                    if rank == 0 {
                        elapsed = origin(win, op, &mut out, iters);
                    }
                    world.barrier();
                })
                .unwrap();
        }
    }
    let mut slowest = 0.0f64;
    world.all_reduce_into(&elapsed, &mut slowest, SystemOperation::max());
    slowest * 1e6 / iters as f64
}

/// Rank 0's loop of `op` (the others wait in a barrier meanwhile).
fn origin(win: &myriad::window::Window<'_, u64>, op: &str, out: &mut [u64], iters: usize) -> f64 {
    let size = win.size();
    let target = 1 % size;
    let start;
    match op {
        "get" => {
            let lock = win.lock(target, LockType::Shared).unwrap();
            start = Instant::now();
            for _ in 0..iters {
                lock.get(target, 0, out).unwrap();
            }
            let t = start.elapsed().as_secs_f64();
            drop(lock);
            return t;
        }
        "lock_get_unlock" => {
            start = Instant::now();
            for _ in 0..iters {
                let lock = win.lock(target, LockType::Shared).unwrap();
                lock.get(target, 0, out).unwrap();
                lock.unlock();
            }
        }
        "lock_all_gets" => {
            start = Instant::now();
            for _ in 0..iters {
                let all = win.lock_all().unwrap();
                for t in 0..size {
                    all.get(t, 0, out).unwrap();
                }
                all.unlock_all();
            }
        }
        "put_flush" => {
            let lock = win.lock(target, LockType::Exclusive).unwrap();
            start = Instant::now();
            for _ in 0..iters {
                lock.put(target, 0, out).unwrap();
                lock.flush();
            }
            let t = start.elapsed().as_secs_f64();
            drop(lock);
            return t;
        }
        "put_vector" => {
            let u64t = u64::equivalent_datatype();
            let every_other = UserDatatype::vector(out.len() as i32, 1, 2, &u64t);
            let to = TargetView::new(0, &every_other);
            let lock = win.lock(target, LockType::Exclusive).unwrap();
            start = Instant::now();
            for _ in 0..iters {
                lock.put_typed(target, &to, &out[..]).unwrap();
                lock.flush();
            }
            let t = start.elapsed().as_secs_f64();
            drop(lock);
            return t;
        }
        "fetch_and_op" => {
            let all = win.lock_all().unwrap();
            start = Instant::now();
            for _ in 0..iters {
                std::hint::black_box(
                    all.fetch_and_op(target, 0, 1u64, SystemOperation::sum())
                        .unwrap(),
                );
            }
            let t = start.elapsed().as_secs_f64();
            drop(all);
            return t;
        }
        other => panic!("unknown operation {other}"),
    }
    start.elapsed().as_secs_f64()
}

fn main() {
    common::usage(
        "rma_bench [--ranks 2,16,256] [--sizes 8,1024] [--ops create_free,barrier,get,lock_get_unlock,lock_all_gets,put_flush,put_vector,fetch_and_op] [--iters 200] [--budget-s 60]",
    );
    let ranks: Vec<usize> =
        list("--ranks").unwrap_or_else(|| vec![2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]);
    let sizes: Vec<usize> =
        list("--sizes").unwrap_or_else(|| vec![8, 64, 1024, 8192, 65536, 1 << 20]);
    let ops: Vec<String> =
        list("--ops").unwrap_or_else(|| OPS.iter().map(|s| s.to_string()).collect());
    for op in &ops {
        if !OPS.contains(&op.as_str()) {
            eprintln!("--ops: unknown operation {op:?} (valid: {})", OPS.join(","));
            std::process::exit(2);
        }
    }
    let iters: usize = arg("--iters").unwrap_or(200);
    let budget: f64 = arg("--budget-s").unwrap_or(60.0);
    let clock = Instant::now();
    println!("# operation bytes ranks latency_us");
    for &n in &ranks {
        if clock.elapsed().as_secs_f64() > budget {
            println!("# {n} ranks and above skipped: --budget-s {budget} spent");
            break;
        }
        let ops = ops.clone();
        let sizes = sizes.clone();
        let rows = myriad::run(n, move |universe| {
            let world = universe.world();
            let mut cases = Vec::new();
            for op in &ops {
                let op_sizes: &[usize] = match op.as_str() {
                    "fetch_and_op" | "barrier" => &[8],
                    _ => &sizes,
                };
                for &bytes in op_sizes {
                    cases.push((op.as_str(), bytes, Vec::new()));
                }
            }
            // Repetitions alternate between the cases (A B A B ...), so a
            // slow phase of the shared machine hits them all alike.
            for _ in 0..5 {
                for (op, bytes, reps) in cases.iter_mut() {
                    let it = iterations(op, *bytes, n, iters);
                    reps.push(measure(&world, op, *bytes, it));
                }
            }
            cases
                .into_iter()
                .map(|(op, bytes, mut reps)| format!("{op} {bytes} {n} {:.3}", median(&mut reps)))
                .collect::<Vec<_>>()
        })
        .unwrap();
        for row in &rows[0] {
            println!("{row}");
        }
    }
}
