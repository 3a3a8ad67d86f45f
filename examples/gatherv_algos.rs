//! Gatherv: linear vs seed 002's binomial tree (conservative and aggressive
//! levels) and the shared-memory path, at 8 B and 8 KiB per rank, for
//! N = 2 … `--max-ranks` ranks (default 32,768).
//!
//! ```text
//! cargo run --release --example gatherv_algos -- [--max-ranks 4096] [--bytes 8,8192] [--plot FILE.svg]
//! ```
//!
//! `--plot` draws seed 002's figure: time against the number of ranks, one
//! line per algorithm and size (log–log).
//!
//! Prints `algorithm bytes_per_rank ranks time_us root_peers root_tmp_bytes
//! root_peer_processes` rows: the median of the slowest rank's time, the
//! distinct peers the root received from (in the last binomial or linear
//! Gatherv it ran as root: among the leaders for `hier`), its peak
//! temporary-buffer bytes, and the distinct other processes the root
//! exchanged messages with in one call (counted from the traffic,
//! `take_collective_peer_processes`; 0 in one process). `--layout
//! reversed` stores the blocks in reverse rank order in the root's buffer
//! (every message chain is then non-continuous).
//!
//! Across processes, one job of `--ranks N` (the built-in launcher or
//! `mpiexec`); `shm` is left out there (it needs every rank in one
//! process), `hier` is in:
//!
//! ```text
//! cargo run --release --example gatherv_algos -- --ranks 64 --processes 8 [--bytes 8]
//! ```

use std::time::Instant;

use myriad::collective::{last_root_stats, Algorithm, Collective, RootStats, SystemOperation};
use myriad::datatype::PartitionMut;
use myriad::traits::*;
use myriad::Count;

mod common;
use common::plot::{self, Axis, Series};
use common::{arg, list, median};

const HEADER: &str =
    "# algorithm bytes_per_rank ranks time_us root_peers root_tmp_bytes root_peer_processes";

/// One row: algorithm, time (µs), the root's statistics, the processes it
/// exchanged messages with.
type Row = (Algorithm, f64, RootStats, usize);

fn print_rows(rows: &[Row], bytes: usize, n: usize) {
    for (alg, t, stats, processes) in rows {
        println!(
            "{} {bytes} {n} {t:.3} {} {} {processes}",
            alg.name(),
            stats.peers,
            stats.tmp_bytes
        );
    }
}

/// The displacements of `n` blocks of `elems` elements, in rank order or
/// reversed.
fn layout(n: usize, elems: usize, reversed: bool) -> Vec<Count> {
    (0..n)
        .map(|r| {
            let slot = if reversed { n - 1 - r } else { r };
            (slot * elems) as Count
        })
        .collect()
}

/// Times every Gatherv algorithm `world` can run (rows at rank 0).
fn measure(
    world: &impl Communicator,
    elems: usize,
    counts: &[Count],
    displs: &[Count],
    target_s: f64,
) -> Vec<Row> {
    let n = world.size() as usize;
    let root = world.process_at_rank(0);
    let mine = vec![world.rank() as u64; elems];
    let mut all = if world.rank() == 0 {
        vec![0u64; n * elems]
    } else {
        Vec::new()
    };
    let mut rows = Vec::new();
    for &alg in Collective::GatherVarcount.algorithms() {
        // `shm` needs every rank in one process: refused (on every rank
        // alike) across processes.
        if world
            .set_collective_algorithm(Collective::GatherVarcount, alg)
            .is_err()
        {
            continue;
        }
        let mut call = || {
            if world.rank() == 0 {
                let mut part = PartitionMut::new(&mut all[..], counts, displs);
                root.gather_varcount_into_root(&mine[..], &mut part);
            } else if alg == Algorithm::BinomialAggressive {
                root.gather_varcount_into_known(&mine[..], counts, displs);
            } else {
                root.gather_varcount_into(&mine[..]);
            }
        };
        world.barrier();
        call();
        world.barrier();
        let t = Instant::now();
        call();
        let one = t.elapsed().as_secs_f64();
        let mut slowest = 0.0f64;
        world.all_reduce_into(&one, &mut slowest, SystemOperation::max());
        let reps = ((target_s / slowest.max(1e-7)) as usize).clamp(3, 200);
        let mut times = vec![0.0f64; reps];
        for t in times.iter_mut() {
            world.barrier();
            let start = Instant::now();
            call();
            *t = start.elapsed().as_secs_f64();
        }
        let stats = last_root_stats();
        // One more call, its traffic alone.
        world.barrier();
        world.take_collective_peer_processes();
        call();
        let processes = world.take_collective_peer_processes().len();
        let mut maxima = vec![0.0f64; reps];
        world.all_reduce_into(&times[..], &mut maxima[..], SystemOperation::max());
        if world.rank() == 0 {
            for (r, &at) in displs.iter().enumerate().take(n) {
                let at = at as usize;
                assert!(
                    all[at..at + elems].iter().all(|&x| x == r as u64),
                    "{alg}: block {r}"
                );
            }
            rows.push((alg, median(&mut maxima) * 1e6, stats, processes));
        }
    }
    rows
}

/// `--ranks N`: one job (across processes under a launcher).
fn one_job(sizes: &[usize], reversed: bool, target_s: f64) {
    let result = myriad::Runtime::from_env().run(|universe| {
        let world = universe.world();
        let n = world.size() as usize;
        let mut out = Vec::new();
        for &bytes in sizes {
            let elems = (bytes / 8).max(1);
            let counts = vec![elems as Count; n];
            let displs = layout(n, elems, reversed);
            out.push((bytes, measure(&world, elems, &counts, &displs, target_s)));
        }
        (universe.process_count(), n, out)
    });
    match result {
        Ok(ranks) => {
            let Some((processes, n, out)) = ranks.into_iter().next() else {
                return;
            };
            // Rank 0's rows, printed by its process alone.
            if out.iter().all(|(_, rows)| rows.is_empty()) {
                return;
            }
            println!("{HEADER} (processes={processes})");
            for (bytes, rows) in &out {
                print_rows(rows, *bytes, n);
            }
        }
        Err(err) => {
            eprintln!("gatherv_algos: {err}");
            std::process::exit(1)
        }
    }
}

fn main() {
    common::usage(
        "gatherv_algos [--max-ranks 32768] [--bytes 8,8192] [--layout reversed] [--seconds 0.3] [--plot FILE.svg] | gatherv_algos --ranks R --processes P [--bytes 8]",
    );
    let max_ranks: usize = arg("--max-ranks").unwrap_or(32_768);
    let sizes: Vec<usize> = list("--bytes").unwrap_or_else(|| vec![8, 8192]);
    let reversed = arg::<String>("--layout").as_deref() == Some("reversed");
    let target_s: f64 = arg("--seconds").unwrap_or(0.3);
    if arg::<usize>("--ranks").is_some() {
        return one_job(&sizes, reversed, target_s);
    }
    println!("{HEADER}");
    let plot_to = plot::plot_path();
    let mut series: Vec<Series> = Vec::new();
    let mut n = 2;
    let mut speedups = Vec::new();
    while n <= max_ranks {
        for &bytes in &sizes {
            let elems = (bytes / 8).max(1);
            let counts = vec![elems as Count; n];
            let displs = layout(n, elems, reversed);
            let rows = myriad::run(n, |universe| {
                measure(&universe.world(), elems, &counts, &displs, target_s)
            })
            .unwrap_or_else(|err| {
                eprintln!("gatherv_algos: {err}");
                std::process::exit(1)
            });
            let rows = &rows[0];
            print_rows(rows, bytes, n);
            for (alg, t, _, _) in rows {
                let name = format!("{} {bytes} B", alg.name());
                let at = match series.iter().position(|s| s.name == name) {
                    Some(at) => at,
                    None => {
                        series.push(Series::new(name));
                        series.len() - 1
                    }
                };
                series[at].points.push((n as f64, *t));
            }
            let time = |a: Algorithm| rows.iter().find(|r| r.0 == a).map(|r| r.1);
            if let (Some(l), Some(b)) =
                (time(Algorithm::Linear), time(Algorithm::BinomialAggressive))
            {
                speedups.push((n, bytes, l / b));
            }
        }
        n *= 2;
    }
    if let Some(path) = &plot_to {
        plot::save(
            path,
            "Gatherv: linear vs binomial (conservative, aggressive) vs shared memory",
            Axis::log("ranks"),
            Axis::log("time (µs, slowest rank, median)"),
            &series,
        );
    }
    let summary: Vec<String> = speedups
        .iter()
        .filter(|(n, _, _)| n.is_power_of_two() && *n >= 1024)
        .map(|(n, b, s)| format!("{n}x{b}B:{s:.1}"))
        .collect();
    println!(
        "gatherv_algos: linear_over_binomial_aggressive {}",
        if summary.is_empty() {
            "(run up to >= 1024 ranks)".to_string()
        } else {
            summary.join(" ")
        }
    );
}
