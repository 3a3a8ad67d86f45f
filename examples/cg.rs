//! The seed-000 workload emulator (SAM): a Conjugate-Gradient-like loop with
//! two `all_reduce` and one `all_gather` per iteration on block-distributed
//! vectors.
//!
//! ```text
//! cargo run --release --example cg -- --ranks 64 --iters 100 [--n 1000000]
//! ```
//!
//! Each rank owns a block of an `n`-element vector. Per iteration: a local
//! matrix-vector product with a 1-D Laplacian (needs the gathered direction
//! vector), two dot products reduced with `all_reduce`, and the axpy updates.
//! Last line: `cg: ranks=N iters=K time_per_iter_us=...`.

use std::time::Instant;

use myriad::collective::SystemOperation;
use myriad::traits::*;

mod common;
use common::arg;

fn main() {
    common::usage("cg --ranks R [--processes P] [--iters 100] [--n 1048576]");
    let iters: usize = arg("--iters").unwrap_or(100);
    let n_global: usize = arg("--n").unwrap_or(1 << 20);
    let result = myriad::Runtime::from_env().run(|universe| {
        let world = universe.world();
        let (rank, size) = (world.rank() as usize, world.size() as usize);
        let block = n_global.div_ceil(size);
        let n = block * size;
        let lo = rank * block;
        // Solve A x = b with A = tridiag(-1, 2, -1), b = A·1 (so x → 1).
        let a_times = |v: &[f64], out: &mut [f64]| {
            for (i, o) in out.iter_mut().enumerate() {
                let g = lo + i;
                let left = if g > 0 { v[g - 1] } else { 0.0 };
                let right = if g + 1 < n { v[g + 1] } else { 0.0 };
                *o = 2.0 * v[g] - left - right;
            }
        };
        let ones = vec![1.0f64; n];
        let mut b = vec![0.0f64; block];
        a_times(&ones, &mut b);
        let mut x = vec![0.0f64; block];
        let mut r = b.clone();
        let mut p = r.clone();
        let mut p_all = vec![0.0f64; n];
        let mut ap = vec![0.0f64; block];
        let dot = |u: &[f64], v: &[f64]| u.iter().zip(v).map(|(a, b)| a * b).sum::<f64>();
        let mut rr = 0.0f64;
        world.all_reduce_into(&dot(&r, &r), &mut rr, SystemOperation::sum());
        world.barrier();
        let start = Instant::now();
        for _ in 0..iters {
            world.all_gather_into(&p[..], &mut p_all[..]);
            a_times(&p_all, &mut ap);
            let mut pap = 0.0f64;
            world.all_reduce_into(&dot(&p, &ap), &mut pap, SystemOperation::sum());
            let alpha = rr / pap;
            for i in 0..block {
                x[i] += alpha * p[i];
                r[i] -= alpha * ap[i];
            }
            let mut rr_new = 0.0f64;
            world.all_reduce_into(&dot(&r, &r), &mut rr_new, SystemOperation::sum());
            let beta = rr_new / rr;
            rr = rr_new;
            for i in 0..block {
                p[i] = r[i] + beta * p[i];
            }
        }
        let elapsed = start.elapsed().as_secs_f64();
        (elapsed, rr.sqrt())
    });
    match result {
        Ok(out) => {
            let slowest = out.iter().map(|o| o.0).fold(0.0, f64::max);
            println!("# residual norm after {iters} iterations: {:.3e}", out[0].1);
            println!(
                "cg: ranks={} iters={iters} time_per_iter_us={:.2}",
                out.len(),
                slowest / iters as f64 * 1e6
            );
        }
        Err(err) => {
            eprintln!("cg: {err}");
            std::process::exit(1);
        }
    }
}
