//! Latency of each collective at several sizes, on `--ranks N` ranks.
//!
//! ```text
//! cargo run --release --example coll_bench -- --ranks 256 [--sizes 8,1024] [--collectives barrier,all_reduce]
//! ```
//!
//! Prints `collective bytes ranks latency_us loop_us` rows: bytes per
//! rank (per pair for the all-to-alls); `latency_us` = median over
//! repetitions of the slowest rank's time of one call, each call after a
//! barrier (the method of the MPI figures in the README); `loop_us` = the
//! same number of calls back to back, from a barrier to the end of the
//! last rank's last call, divided by their number (OSU's loop average,
//! taken over the whole job: a root or contributor that returns at once
//! cannot make it look fast, nor can ranks that the scheduler runs one
//! loop after another, each starting its own clock late). Sizes whose buffers would exceed `--budget-mib` (default
//! 4096) in total are skipped with a comment. Algorithms follow the
//! selector or `MYRIAD_COLL_<COLLECTIVE>`.
//!
//! `--algorithms` checks the selector instead: for each collective and size
//! it times every algorithm the collective has and the selector's choice
//! (`auto`), in one run (`--rounds R` times over, alternating, keeping each
//! one's best median; default 3), printing `collective bytes ranks
//! latency_us algorithm` rows and, per case, the selector's time over the
//! best one's;
//! the last line gives the worst ratio (`selector: cases=... worst_ratio=...`).
//!
//! `--plot FILE.svg` draws latency against bytes (log–log), one line per
//! collective (with `--algorithms`, per collective and algorithm); the
//! barrier, which carries no data, is left out.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use myriad::collective::{Algorithm, Collective, SystemOperation};
use myriad::datatype::{Partition, PartitionMut};
use myriad::topology::SimpleCommunicator;
use myriad::traits::*;
use myriad::Count;

mod common;
use common::plot::{self, Axis, Series};
use common::{arg, list, median};

const COLLECTIVES: &[&str] = &[
    "barrier",
    "broadcast",
    "reduce",
    "all_reduce",
    "gather",
    "gather_varcount",
    "all_gather",
    "all_to_all",
    "all_to_all_varcount",
    "scan",
];

/// Bytes all ranks together allocate for `name` at `bytes` per rank (pair).
fn footprint(name: &str, bytes: usize, n: usize) -> usize {
    match name {
        "barrier" => 0,
        "broadcast" => n * bytes,
        "gather" | "gather_varcount" => 2 * n * bytes,
        "all_gather" => n * bytes + n * n * bytes,
        "all_to_all" | "all_to_all_varcount" => 2 * n * n * bytes,
        _ => 2 * n * bytes,
    }
}

/// Runs one call of `name` with `elems` u64 per rank (pair).
fn run_once(world: &SimpleCommunicator, name: &str, elems: usize, b: &mut Buffers) {
    let n = world.size() as usize;
    let root = world.process_at_rank(0);
    let is_root = world.rank() == 0;
    match name {
        "barrier" => world.barrier(),
        "broadcast" => root.broadcast_into(&mut b.send[..elems]),
        "reduce" => {
            if is_root {
                root.reduce_into_root(
                    &b.send[..elems],
                    &mut b.recv[..elems],
                    SystemOperation::sum(),
                )
            } else {
                root.reduce_into(&b.send[..elems], SystemOperation::sum())
            }
        }
        "all_reduce" => world.all_reduce_into(
            &b.send[..elems],
            &mut b.recv[..elems],
            SystemOperation::sum(),
        ),
        "scan" => world.scan_into(
            &b.send[..elems],
            &mut b.recv[..elems],
            SystemOperation::sum(),
        ),
        "gather" => {
            if is_root {
                root.gather_into_root(&b.send[..elems], &mut b.recv[..n * elems])
            } else {
                root.gather_into(&b.send[..elems])
            }
        }
        "gather_varcount" => {
            if is_root {
                let mut part = PartitionMut::new(&mut b.recv[..n * elems], b.counts, b.displs);
                root.gather_varcount_into_root(&b.send[..elems], &mut part)
            } else if b.known_counts {
                root.gather_varcount_into_known(&b.send[..elems], b.counts, b.displs)
            } else {
                root.gather_varcount_into(&b.send[..elems])
            }
        }
        "all_gather" => world.all_gather_into(&b.send[..elems], &mut b.recv[..n * elems]),
        "all_to_all" => world.all_to_all_into(&b.send[..n * elems], &mut b.recv[..n * elems]),
        "all_to_all_varcount" => {
            let send = Partition::new(&b.send[..n * elems], b.counts, b.displs);
            let mut recv = PartitionMut::new(&mut b.recv[..n * elems], b.counts, b.displs);
            world.all_to_all_varcount_into(&send, &mut recv)
        }
        other => panic!("unknown collective {other}"),
    }
}

/// Counts and displacements of the varcount calls, by block size.
type Table = (&'static [Count], &'static [Count]);

struct Buffers<'t> {
    send: Vec<u64>,
    recv: Vec<u64>,
    /// The varcount calls' counts and displacements, one table shared by
    /// every rank (a table per rank would cost ranks² memory).
    counts: &'t [Count],
    displs: &'t [Count],
    /// Every rank passes the counts (`gather_varcount_into_known`), as the
    /// `binomial_aggressive` Gatherv needs.
    known_counts: bool,
}

/// Two figures for one collective call, in seconds, with about `target_s`
/// of repetitions each:
///
/// * the median over repetitions of the slowest rank's time of one call,
///   every call preceded by a barrier (the `latency_us` column). Under M:N
///   scheduling the slowest rank's time also holds the two clock reads of
///   every rank its worker runs meanwhile (~51 ns a pair on the README's
///   VM: ~26 µs with 512 ranks a worker), which processes that have a core
///   each do not serialize;
/// * if `loop_too`, OSU's loop average over the whole job: one barrier,
///   `reps` calls back to back on every rank, and the span from the first
///   rank's start to the last rank's end divided by `reps` (the `loop_us`
///   column). Neither a rank that only contributes (a reduce's non-root, a
///   broadcast's root) and returns at once, nor ranks that a worker runs
///   one whole loop after another (each would start its own clock late and
///   find its data ready), can make it look fast.
fn measure(
    world: &SimpleCommunicator,
    name: &str,
    elems: usize,
    b: &mut Buffers,
    target_s: f64,
    loop_too: bool,
) -> (f64, Option<f64>) {
    // Warm up, then size the repetitions to about `target_s`.
    for _ in 0..2 {
        run_once(world, name, elems, b);
    }
    world.barrier();
    let t = Instant::now();
    run_once(world, name, elems, b);
    let one = t.elapsed().as_secs_f64();
    let mut slowest = 0.0f64;
    world.all_reduce_into(&one, &mut slowest, SystemOperation::max());
    let reps = ((target_s / slowest.max(1e-7)) as usize).clamp(3, 1000);
    let mut times = vec![0.0f64; reps];
    for t in times.iter_mut() {
        world.barrier();
        let start = Instant::now();
        run_once(world, name, elems, b);
        *t = start.elapsed().as_secs_f64();
    }
    let mut maxima = vec![0.0f64; reps];
    world.all_reduce_into(&times[..], &mut maxima[..], SystemOperation::max());
    let latency = median(&mut maxima);
    if !loop_too {
        return (latency, None);
    }
    // Back to back: from the first rank's start to the last rank's end,
    // on the clock every rank (and process) of the host shares. Each
    // rank's own loop time would flatter M:N scheduling: a rank resumed
    // after others ran their whole loops starts its clock late and finds
    // its data ready.
    world.barrier();
    let start = unix_ns();
    for _ in 0..reps {
        run_once(world, name, elems, b);
    }
    let end = unix_ns();
    let (mut first, mut last) = (0u64, 0u64);
    world.all_reduce_into(&start, &mut first, SystemOperation::min());
    world.all_reduce_into(&end, &mut last, SystemOperation::max());
    (
        latency,
        Some(last.saturating_sub(first) as f64 * 1e-9 / reps as f64),
    )
}

/// Nanoseconds since the Unix epoch: a clock that the ranks of every
/// process on the host read alike.
fn unix_ns() -> u64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH);
    since.map_or(0, |d| d.as_nanos() as u64)
}

fn main() {
    common::usage(
        "coll_bench --ranks R [--workers W] [--sizes 8,1024,8192,65536,1048576] [--collectives barrier,broadcast,...] [--seconds 0.2] [--rounds 3] [--budget-mib 4096] [--algorithms] [--plot FILE.svg]",
    );
    let sizes: Vec<usize> = list("--sizes").unwrap_or_else(|| vec![8, 1024, 8192, 65536, 1 << 20]);
    let chosen: Vec<String> = list("--collectives")
        .unwrap_or_else(|| COLLECTIVES.iter().map(|s| s.to_string()).collect());
    let budget = arg::<usize>("--budget-mib").unwrap_or(4096) << 20;
    let target_s: f64 = arg("--seconds").unwrap_or(0.2);
    let compare = std::env::args().any(|a| a == "--algorithms");
    let rounds: usize = arg("--rounds").unwrap_or(3);
    let plot_to = plot::plot_path();
    for c in &chosen {
        if !COLLECTIVES.contains(&c.as_str()) {
            eprintln!(
                "coll_bench: unknown collective {c}; known: {}",
                COLLECTIVES.join(", ")
            );
            std::process::exit(2);
        }
    }
    // One table of counts and displacements per block size, for all ranks
    // (leaked: they live as long as the program).
    let tables: Mutex<HashMap<usize, Table>> = Mutex::new(HashMap::new());
    let rows = myriad::Runtime::from_env().run(|universe| {
        let world = universe.world();
        let n = world.size() as usize;
        let mut rows = Vec::new();
        let (mut cases, mut worst) = (0usize, (0.0f64, String::new()));
        for name in &chosen {
            // A barrier carries no data: one row.
            let sizes = if name == "barrier" {
                &[0][..]
            } else {
                &sizes[..]
            };
            for &bytes in sizes {
                if footprint(name, bytes, n) > budget {
                    rows.push(format!(
                        "# skipped {name} {bytes}: needs {} MiB (--budget-mib)",
                        footprint(name, bytes, n) >> 20
                    ));
                    continue;
                }
                let elems = (bytes / 8).max(1);
                let root = world.rank() == 0;
                let (send_len, recv_len) = match name.as_str() {
                    "gather" | "gather_varcount" => (elems, if root { n * elems } else { 0 }),
                    "all_gather" => (elems, n * elems),
                    "all_to_all" | "all_to_all_varcount" => (n * elems, n * elems),
                    _ => (elems, elems),
                };
                let (counts, displs) = tables
                    .lock()
                    .unwrap()
                    .entry(elems)
                    .or_insert_with(|| {
                        let counts: &'static [Count] = vec![elems as Count; n].leak();
                        let displs: &'static [Count] = (0..n)
                            .map(|r| (r * elems) as Count)
                            .collect::<Vec<_>>()
                            .leak();
                        (counts, displs)
                    })
                    .to_owned();
                let mut b = Buffers {
                    send: vec![world.rank() as u64 + 1; send_len],
                    recv: vec![0; recv_len],
                    counts,
                    displs,
                    known_counts: false,
                };
                let shown = if name == "barrier" { 0 } else { elems * 8 };
                if !compare {
                    let (t, back_to_back) = measure(&world, name, elems, &mut b, target_s, true);
                    let back_to_back = back_to_back.expect("asked for");
                    if world.rank() == 0 {
                        rows.push(format!(
                            "{name} {shown} {n} {:.3} {:.3}",
                            t * 1e6,
                            back_to_back * 1e6
                        ));
                    }
                    continue;
                }
                let collective: Collective = name.parse().expect("a known collective");
                // Every algorithm, then the selector's choice, `rounds` times
                // over, alternating, keeping each one's best median: noise
                // on a shared machine then hits all of them alike.
                let algorithms: Vec<Algorithm> = collective
                    .algorithms()
                    .iter()
                    .copied()
                    .chain([Algorithm::Auto])
                    .collect();
                let mut times = vec![f64::INFINITY; algorithms.len()];
                for _ in 0..rounds {
                    for (t, &algorithm) in times.iter_mut().zip(&algorithms) {
                        world
                            .set_collective_algorithm(collective, algorithm)
                            .expect("an algorithm of the collective");
                        b.known_counts = algorithm == Algorithm::BinomialAggressive;
                        *t = t.min(measure(&world, name, elems, &mut b, target_s, false).0);
                    }
                }
                // The aggressive Gatherv is for calls that pass the counts
                // everywhere, which a plain call does not: it is shown, not
                // a candidate for the plain call.
                let (best, best_alg) = algorithms
                    .iter()
                    .zip(&times)
                    .filter(|(a, _)| !matches!(a, Algorithm::Auto | Algorithm::BinomialAggressive))
                    .map(|(&a, &t)| (t, a))
                    .fold((f64::INFINITY, Algorithm::Auto), |m, x| {
                        if x.0 < m.0 {
                            x
                        } else {
                            m
                        }
                    });
                let ratio = times[times.len() - 1] / best;
                if world.rank() == 0 {
                    for (a, t) in algorithms.iter().zip(&times) {
                        rows.push(format!("{name} {shown} {n} {:.3} {a}", t * 1e6));
                    }
                    rows.push(format!(
                        "# {name} {shown}: auto/best = {ratio:.2} (best: {best_alg})"
                    ));
                }
                if ratio > worst.0 {
                    worst = (ratio, format!("{name} {shown} (best {best_alg})"));
                }
                cases += 1;
            }
        }
        if compare && world.rank() == 0 {
            rows.push(format!(
                "selector: cases={cases} worst_ratio={:.2} worst_case={}",
                worst.0, worst.1
            ));
        }
        rows
    });
    match rows {
        Ok(rows) => {
            if compare {
                println!("# collective bytes ranks latency_us algorithm");
            } else {
                println!("# collective bytes ranks latency_us loop_us");
            }
            for row in &rows[0] {
                println!("{row}");
            }
            if let Some(path) = &plot_to {
                plot_rows(path, &rows[0], compare);
            }
        }
        Err(err) => {
            eprintln!("coll_bench: {err}");
            std::process::exit(1);
        }
    }
}

/// `--plot`: latency against bytes from the printed rows (`collective bytes
/// ranks latency_us loop_us|algorithm`), one series per collective (and
/// algorithm, with `--algorithms`).
fn plot_rows(path: &str, rows: &[String], compare: bool) {
    let mut series: Vec<Series> = Vec::new();
    let mut ranks = 0;
    for row in rows.iter().filter(|r| !r.starts_with('#')) {
        let f: Vec<&str> = row.split_whitespace().collect();
        let (Some(&name), Some(bytes), Some(n), Some(t)) = (
            f.first(),
            f.get(1).and_then(|v| v.parse::<f64>().ok()),
            f.get(2).and_then(|v| v.parse::<usize>().ok()),
            f.get(3).and_then(|v| v.parse::<f64>().ok()),
        ) else {
            continue; // the selector's summary line
        };
        if name == "barrier" {
            continue;
        }
        ranks = n;
        let key = match (compare, f.get(4)) {
            (true, Some(alg)) => format!("{name} {alg}"),
            _ => name.to_string(),
        };
        let at = match series.iter().position(|s| s.name == key) {
            Some(at) => at,
            None => {
                series.push(Series::new(key));
                series.len() - 1
            }
        };
        series[at].points.push((bytes, t));
    }
    plot::save(
        path,
        &format!("collectives, {ranks} ranks: latency"),
        Axis::log("bytes per rank"),
        Axis::log("latency (µs, slowest rank, median)"),
        &series,
    );
}
