//! Jacobi iteration on an N×N grid (seed 003): 1-D decomposition in row
//! strips, halo exchange by each rank with `send_receive`, and the interior
//! update either serial per rank (pure MPI: one rank per worker, no tasks)
//! or split among the job's workers with `parallel_for` (hybrid: fewer
//! ranks, each using every worker through micro-tasks).
//!
//! ```text
//! cargo run --release --example jacobi                       # both modes, all cores
//! cargo run --release --example jacobi -- --scaling strong   # E = T1/Tp over worker counts
//! cargo run --release --example jacobi -- --scaling weak     # rows grow with the workers
//! cargo run --release --example jacobi -- --check            # compare with a serial solve
//! cargo run --release --example jacobi -- --scaling strong --plot jacobi.svg
//! ```
//!
//! `--plot FILE.svg` (with `--scaling`) draws seed 003's figure: the
//! efficiency E and the communication fraction against the worker count,
//! one line per mode, with the ideal E = 1.
//!
//! Flags: `--n N` (grid size, default 2048), `--iters K` (default 100),
//! `--mode mpi|hybrid|both`, `--workers W` (default: all PUs),
//! `--counts 1,2,4` (worker counts for `--scaling`), `--ranks-per-worker R`
//! (pure MPI: R ranks per worker, default 1), `--hybrid-ranks H` (hybrid:
//! ranks in the job, default 1).
//!
//! One row per run: `mode ranks workers n time_per_iter_ms comm_fraction
//! efficiency`, where `n` is `rows`x`columns`, the communication fraction is
//! the share of the ranks' time spent in halo exchanges (including waiting
//! for slower neighbours), and the efficiency is E = T1/Tp (strong: same
//! grid; weak: the grid grows with the workers) against the 1-worker run of
//! the same mode (`-` without `--scaling`).

#[path = "common/mod.rs"]
mod common;

use std::time::Instant;

use common::plot::{self, Axis, Series};
use common::{arg, list};
use myriad::collective::SystemOperation;
use myriad::point_to_point::send_receive_into;
use myriad::traits::*;
use myriad::Runtime;

/// How a run splits the work.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    /// One (or `R`) ranks per worker, serial updates.
    Mpi,
    /// `H` ranks in all, updates in parallel regions over every worker.
    Hybrid,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Mpi => "mpi",
            Mode::Hybrid => "hybrid",
        }
    }
}

/// One measured run.
#[derive(Clone, Copy, Debug)]
struct Outcome {
    ranks: usize,
    workers: usize,
    rows: usize,
    cols: usize,
    time_per_iter: f64,
    comm_fraction: f64,
    checksum: f64,
}

/// The value on the top boundary; the other boundaries are 0.
const TOP: f64 = 1.0;

/// Runs `iters` Jacobi sweeps of a `rows`×`cols` grid on one job.
fn run(
    mode: Mode,
    ranks: usize,
    workers: usize,
    rows: usize,
    cols: usize,
    iters: usize,
) -> Outcome {
    let per_rank = Runtime::builder()
        .ranks(ranks)
        .workers(workers)
        .run(|universe| {
            let world = universe.world();
            let (rank, size) = (world.rank() as usize, world.size() as usize);
            // Interior rows 1..rows-1 in near-equal strips.
            let interior = rows - 2;
            let local = interior / size + usize::from(rank < interior % size);
            // Local rows: 0 = halo (or the top boundary), 1..=local, local+1
            // = halo (or the bottom boundary).
            let mut u = vec![0.0f64; (local + 2) * cols];
            if rank == 0 {
                u[..cols].fill(TOP);
            }
            let mut v = u.clone();
            let up = (rank > 0).then(|| world.process_at_rank(rank as i32 - 1));
            let down = (rank + 1 < size).then(|| world.process_at_rank(rank as i32 + 1));
            // Chunks of rows for the parallel regions: 16 per worker, so
            // that the last ones taken leave little imbalance.
            let chunk_rows = (local / (workers * 16)).max(1);
            world.barrier();
            let start = Instant::now();
            let mut comm = 0.0f64;
            for _ in 0..iters {
                let t = Instant::now();
                exchange_halos(&mut u, cols, local, up.as_ref(), down.as_ref());
                comm += t.elapsed().as_secs_f64();
                let (src, dst) = (&u, &mut v[cols..(local + 1) * cols]);
                match mode {
                    Mode::Mpi => {
                        for (i, row) in dst.chunks_mut(cols).enumerate() {
                            update_row(src, row, i + 1, cols);
                        }
                    }
                    Mode::Hybrid => {
                        myriad::hybrid::parallel_chunks_mut(dst, chunk_rows * cols, |k, rows| {
                            for (r, row) in rows.chunks_mut(cols).enumerate() {
                                update_row(src, row, k * chunk_rows + r + 1, cols);
                            }
                        });
                    }
                }
                std::mem::swap(&mut u, &mut v);
            }
            let total = start.elapsed().as_secs_f64();
            let interior_sum: f64 = u[cols..(local + 1) * cols].iter().sum();
            let mut sums = [0.0f64; 3];
            world.all_reduce_into(
                &[interior_sum, comm, total][..],
                &mut sums[..],
                SystemOperation::sum(),
            );
            let mut slowest = 0.0f64;
            world.all_reduce_into(&total, &mut slowest, SystemOperation::max());
            (sums[0], sums[1] / sums[2], slowest)
        })
        .unwrap_or_else(|err| {
            eprintln!("jacobi: {err}");
            std::process::exit(1)
        });
    let (checksum, comm_fraction, slowest) = per_rank[0];
    Outcome {
        ranks,
        workers,
        rows,
        cols,
        time_per_iter: slowest / iters as f64,
        comm_fraction,
        checksum,
    }
}

/// Sends the first interior row up and the last one down; receives the
/// neighbours' rows into the halos.
fn exchange_halos(
    u: &mut [f64],
    cols: usize,
    local: usize,
    up: Option<&myriad::topology::Process<'_>>,
    down: Option<&myriad::topology::Process<'_>>,
) {
    let (top, rest) = u.split_at_mut(cols);
    let (interior, bottom) = rest.split_at_mut(local * cols);
    let (first, last) = (&interior[..cols], &interior[(local - 1) * cols..]);
    // Phase 1: rows go up.
    match (up, down) {
        (Some(up), Some(down)) => {
            send_receive_into(first, up, bottom, down);
        }
        (Some(up), None) => up.send(first),
        (None, Some(down)) => {
            down.receive_into(bottom);
        }
        (None, None) => {}
    }
    // Phase 2: rows go down.
    match (up, down) {
        (Some(up), Some(down)) => {
            send_receive_into(last, down, top, up);
        }
        (None, Some(down)) => down.send(last),
        (Some(up), None) => {
            up.receive_into(top);
        }
        (None, None) => {}
    }
}

/// One row of the update: the mean of the four neighbours, boundary columns
/// kept at 0.
fn update_row(u: &[f64], row: &mut [f64], i: usize, cols: usize) {
    let (above, here, below) = (
        &u[(i - 1) * cols..i * cols],
        &u[i * cols..(i + 1) * cols],
        &u[(i + 1) * cols..(i + 2) * cols],
    );
    for j in 1..cols - 1 {
        row[j] = 0.25 * (above[j] + below[j] + here[j - 1] + here[j + 1]);
    }
}

/// The same sweeps on one thread, for `--check`.
fn serial_checksum(rows: usize, cols: usize, iters: usize) -> f64 {
    let mut u = vec![0.0f64; rows * cols];
    u[..cols].fill(TOP);
    let mut v = u.clone();
    for _ in 0..iters {
        for i in 1..rows - 1 {
            update_row(&u, &mut v[i * cols..(i + 1) * cols], i, cols);
        }
        std::mem::swap(&mut u, &mut v);
    }
    u[cols..(rows - 1) * cols].iter().sum()
}

fn print_row(mode: Mode, o: &Outcome, efficiency: Option<f64>) {
    println!(
        "{:<7} {:>5} {:>7} {:>11} {:>16.3} {:>13.3} {:>10}",
        mode.name(),
        o.ranks,
        o.workers,
        format!("{}x{}", o.rows, o.cols),
        o.time_per_iter * 1e3,
        o.comm_fraction,
        efficiency.map_or("-".to_string(), |e| format!("{e:.2}")),
    );
}

fn main() {
    common::usage(
        "jacobi [--n 2048] [--iters 100] [--workers W] [--ranks-per-worker 1] [--hybrid-ranks 1] [--mode mpi|hybrid|both] [--scaling strong|weak] [--counts 1,2,...] [--check] [--plot FILE.svg]",
    );
    let pus = myriad::topology::Topology::detect()
        .map(|t| t.pus().len())
        .unwrap_or(1)
        .max(1);
    let n: usize = arg("--n").unwrap_or(2048);
    let iters: usize = arg("--iters").unwrap_or(100);
    let workers: usize = arg("--workers").unwrap_or(pus);
    let ranks_per_worker: usize = arg("--ranks-per-worker").unwrap_or(1);
    let hybrid_ranks: usize = arg("--hybrid-ranks").unwrap_or(1);
    let scaling: Option<String> = arg("--scaling");
    let plot_to = plot::plot_path();
    if plot_to.is_some() && scaling.is_none() {
        eprintln!("--plot: draws a scaling curve, give --scaling strong or weak");
        std::process::exit(2);
    }
    let mut series: Vec<Series> = Vec::new();
    let check = std::env::args().any(|a| a == "--check");
    let modes = match arg::<String>("--mode").as_deref().unwrap_or("both") {
        "mpi" => vec![Mode::Mpi],
        "hybrid" => vec![Mode::Hybrid],
        "both" => vec![Mode::Mpi, Mode::Hybrid],
        other => {
            eprintln!("--mode: expected mpi, hybrid or both, not {other:?}");
            std::process::exit(2)
        }
    };
    if n < 4 {
        eprintln!("--n must be at least 4");
        std::process::exit(2);
    }
    let ranks_for = |mode: Mode, w: usize| match mode {
        Mode::Mpi => w * ranks_per_worker,
        Mode::Hybrid => hybrid_ranks,
    };
    println!(
        "{:<7} {:>5} {:>7} {:>11} {:>16} {:>13} {:>10}",
        "mode", "ranks", "workers", "n", "time_per_iter_ms", "comm_fraction", "efficiency"
    );
    let mut failed = false;
    match scaling.as_deref() {
        None => {
            for &mode in &modes {
                let o = run(mode, ranks_for(mode, workers), workers, n, n, iters);
                print_row(mode, &o, None);
                if check {
                    failed |= !checks_out(&o, iters);
                }
            }
        }
        Some(kind @ ("strong" | "weak")) => {
            let counts: Vec<usize> = list("--counts").unwrap_or_else(|| {
                let mut c = vec![1];
                while c.last().unwrap() * 2 <= pus {
                    c.push(c.last().unwrap() * 2);
                }
                c
            });
            for &mode in &modes {
                let mut t1 = None;
                let mut efficiency = Series::new(format!("E, {}", mode.name()));
                let mut comm = Series::new(format!("communication fraction, {}", mode.name()));
                for &w in &counts {
                    // Weak scaling: the rows (the decomposed dimension) grow
                    // with the workers, so each worker keeps n×n cells.
                    let rows = if kind == "weak" { n * w } else { n };
                    let o = run(mode, ranks_for(mode, w), w, rows, n, iters);
                    let t1 = *t1.get_or_insert(o.time_per_iter);
                    print_row(mode, &o, Some(t1 / o.time_per_iter));
                    efficiency.points.push((w as f64, t1 / o.time_per_iter));
                    comm.points.push((w as f64, o.comm_fraction));
                    if check {
                        failed |= !checks_out(&o, iters);
                    }
                }
                series.push(efficiency);
                series.push(comm);
            }
            if let Some(path) = &plot_to {
                let mut ideal = Series::new("ideal E = 1");
                ideal.points = counts.iter().map(|&w| (w as f64, 1.0)).collect();
                series.push(ideal);
                plot::save(
                    path,
                    &format!("Jacobi {n}x{n}, {kind} scaling"),
                    Axis::linear("workers"),
                    Axis::linear("efficiency E = T1/Tp; communication fraction"),
                    &series,
                );
            }
        }
        Some(other) => {
            eprintln!("--scaling: expected strong or weak, not {other:?}");
            std::process::exit(2)
        }
    }
    if failed {
        std::process::exit(1);
    }
}

/// Compares a run's checksum with the serial solve (`--check`).
fn checks_out(o: &Outcome, iters: usize) -> bool {
    let expected = serial_checksum(o.rows, o.cols, iters);
    let ok = (o.checksum - expected).abs() <= 1e-9 * expected.abs().max(1.0);
    println!(
        "check: {} ranks, {}x{}: checksum {:.12} vs serial {:.12}: {}",
        o.ranks,
        o.rows,
        o.cols,
        o.checksum,
        expected,
        if ok { "ok" } else { "MISMATCH" }
    );
    ok
}
