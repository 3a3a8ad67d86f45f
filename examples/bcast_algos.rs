//! Time per broadcast for each algorithm and message size (seed 001's
//! experiment), on `--ranks N` ranks.
//!
//! ```text
//! cargo run --release --example bcast_algos -- --ranks 16 [--sizes 8,65536] [--plot FILE.svg]
//! ```
//!
//! `--plot` draws seed 001's figure: broadcast time against message size,
//! one line per algorithm (log–log).
//!
//! Prints `algorithm bytes ranks time_us root_peer_processes` rows (median
//! over repetitions of the slowest rank's time; the distinct other
//! processes the root exchanged messages with in one call, counted from the
//! traffic: 0 in one process), then where the symmetric algorithm
//! overtakes the binomial tree and their ratio at the largest size.
//!
//! Across processes (the built-in launcher or `mpiexec`), `shm` is left
//! out (it needs every rank in one process) and `hier` is in:
//!
//! ```text
//! cargo run --release --example bcast_algos -- --ranks 64 --processes 4 --sizes 8,65536
//! ```

use std::collections::BTreeMap;
use std::time::Instant;

use myriad::collective::{Collective, SystemOperation};
use myriad::traits::*;

mod common;
use common::plot::{self, Axis, Series};
use common::{arg, list, median};

fn main() {
    common::usage(
        "bcast_algos --ranks R [--processes P] [--sizes 8,65536] [--seconds 0.3] [--plot FILE.svg]",
    );
    let sizes: Vec<usize> = list("--sizes").unwrap_or_else(|| {
        (0..8).map(|i| 8usize << (3 * i)).collect() // 8 B .. 16 MiB, ×8
    });
    let target_s: f64 = arg("--seconds").unwrap_or(0.3);
    let plot_to = plot::plot_path();
    let algorithms = Collective::Broadcast.algorithms();
    let result = myriad::Runtime::from_env().run(|universe| {
        let world = universe.world();
        let n = world.size();
        let mut rows = Vec::new();
        for &bytes in &sizes {
            let mut buf = vec![world.rank() as u8; bytes];
            for &alg in algorithms {
                // `shm` needs every rank in one process: refused (on every
                // rank alike) across processes.
                if world
                    .set_collective_algorithm(Collective::Broadcast, alg)
                    .is_err()
                {
                    continue;
                }
                world.barrier();
                let root = world.process_at_rank(0);
                root.broadcast_into(&mut buf[..]);
                world.barrier();
                let t = Instant::now();
                root.broadcast_into(&mut buf[..]);
                let one = t.elapsed().as_secs_f64();
                let mut slowest = 0.0f64;
                world.all_reduce_into(&one, &mut slowest, SystemOperation::max());
                let reps = ((target_s / slowest.max(1e-7)) as usize).clamp(3, 500);
                let mut times = vec![0.0f64; reps];
                for t in times.iter_mut() {
                    world.barrier();
                    let start = Instant::now();
                    root.broadcast_into(&mut buf[..]);
                    *t = start.elapsed().as_secs_f64();
                }
                // One more call, its traffic alone.
                world.barrier();
                world.take_collective_peer_processes();
                root.broadcast_into(&mut buf[..]);
                let peers = world.take_collective_peer_processes().len();
                let mut maxima = vec![0.0f64; reps];
                world.all_reduce_into(&times[..], &mut maxima[..], SystemOperation::max());
                rows.push((alg, bytes, n, median(&mut maxima) * 1e6, peers));
            }
            assert!(
                buf.iter().all(|&b| b == 0),
                "every rank got the root's data"
            );
        }
        // Rank 0's rows, printed by its process alone.
        if world.rank() == 0 {
            rows
        } else {
            Vec::new()
        }
    });
    let rows = match result {
        Ok(rows) => rows.into_iter().next().unwrap_or_default(),
        Err(err) => {
            eprintln!("bcast_algos: {err}");
            std::process::exit(1);
        }
    };
    if rows.is_empty() {
        return;
    }
    println!("# algorithm bytes ranks time_us root_peer_processes");
    let mut by: BTreeMap<(usize, &str), f64> = BTreeMap::new();
    for &(alg, bytes, n, t, peers) in &rows {
        println!("{} {bytes} {n} {t:.3} {peers}", alg.name());
        by.insert((bytes, alg.name()), t);
    }
    if let Some(path) = &plot_to {
        let series: Vec<Series> = algorithms
            .iter()
            .map(|a| Series {
                name: a.name().to_string(),
                points: rows
                    .iter()
                    .filter(|r| r.0 == *a)
                    .map(|r| (r.1 as f64, r.3))
                    .collect(),
            })
            .collect();
        plot::save(
            path,
            &format!(
                "broadcast, {} ranks: time per algorithm",
                rows.first().map_or(0, |r| r.2)
            ),
            Axis::log("message size (bytes)"),
            Axis::log("time (µs, slowest rank, median)"),
            &series,
        );
    }
    // Where the symmetric algorithm overtakes the binomial tree for good.
    let mut overtakes = None;
    for &bytes in sizes.iter().rev() {
        match (by.get(&(bytes, "symmetric")), by.get(&(bytes, "binomial"))) {
            (Some(s), Some(b)) if s < b => overtakes = Some(bytes),
            _ => break,
        }
    }
    let largest = *sizes.last().unwrap_or(&0);
    let ratio = match (
        by.get(&(largest, "binomial")),
        by.get(&(largest, "symmetric")),
    ) {
        (Some(b), Some(s)) => b / s,
        _ => f64::NAN,
    };
    let best = |bytes: usize| {
        algorithms
            .iter()
            .filter_map(|a| by.get(&(bytes, a.name())).map(|t| (a.name(), *t)))
            .min_by(|x, y| x.1.total_cmp(&y.1))
            .map_or("-", |(name, _)| name)
    };
    println!(
        "bcast_algos: ranks={} symmetric_overtakes_binomial_at={} binomial_over_symmetric_at_{largest}={ratio:.2} best_small={} best_large={}",
        rows.first().map_or(0, |r| r.2),
        overtakes.map_or("never".to_string(), |b| format!("{b}B")),
        best(sizes[0]),
        best(largest),
    );
}
