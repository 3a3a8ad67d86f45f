//! Every rank needs the same large read-only table: with HLS the process
//! builds it once and every rank reads that copy, where MPI processes (or
//! per-rank copies) would each hold their own.
//!
//! ```text
//! cargo run --release --example hls_table -- --ranks 10000 --table-mib 64
//! ```
//!
//! Flags: `--ranks N` (default 10000), `--table-mib M` (default 64),
//! `--level process|numa|worker` (default process: one copy per process).
//! The first rank of each group to arrive at `single` builds its group's
//! table while the others park; then every rank checksums entries of the
//! table and checks them. The example prints the process RSS before the
//! job and at a barrier where every rank holds the table, next to what
//! per-rank copies would need (computed, not allocated). The last line is
//! `hls_table: ranks=N table_mib=M rss_mib=... init_s=...`: the RSS at the
//! barrier, and the wall time from the first rank entering `single` to the
//! last one leaving it.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

use common::{arg, rss_bytes};
use myriad::hls::{Hls, HlsLevel};
use myriad::traits::*;

static PROCESS_TABLE: Hls<Vec<u64>> = Hls::new(HlsLevel::Process);
static NUMA_TABLE: Hls<Vec<u64>> = Hls::new(HlsLevel::Numa);
static WORKER_TABLE: Hls<Vec<u64>> = Hls::new(HlsLevel::Worker);

/// Entries read (and checked) by each rank.
const READS: u64 = 64;

/// Entry `i` of the table (cheap to recompute, so reads can be checked).
fn entry(i: u64) -> u64 {
    i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (i >> 7)
}

/// Nanoseconds since the start of the program.
fn now_ns() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn main() {
    common::usage("hls_table [--ranks 10000] [--table-mib 64] [--level process|numa|worker]");
    let ranks: usize = arg("--ranks").unwrap_or(10_000);
    let table_mib: u64 = arg("--table-mib").unwrap_or(64);
    let level = arg::<String>("--level").unwrap_or_else(|| "process".into());
    let table: &'static Hls<Vec<u64>> = match level.as_str() {
        "process" => &PROCESS_TABLE,
        "numa" => &NUMA_TABLE,
        "worker" => &WORKER_TABLE,
        other => {
            eprintln!("--level: expected process, numa or worker, not {other:?}");
            std::process::exit(2);
        }
    };
    let len = table_mib * 1024 * 1024 / 8;
    if len == 0 {
        eprintln!("--table-mib must be at least 1");
        std::process::exit(2);
    }

    now_ns();
    let rss_before = rss_bytes();
    let first_enter = AtomicU64::new(u64::MAX);
    let last_leave = AtomicU64::new(0);
    let rss_at_barrier = AtomicU64::new(0);
    let builds = AtomicU64::new(0);
    let build_ns = AtomicU64::new(0);
    let groups = AtomicU64::new(0);

    let checksums = myriad::Runtime::from_env()
        .ranks(ranks)
        .run(|universe| {
            let world = universe.world();
            let rank = world.rank() as u64;

            first_enter.fetch_min(now_ns(), Ordering::Relaxed);
            table.single(|_| {
                builds.fetch_add(1, Ordering::Relaxed);
                let start = now_ns();
                let t: Vec<u64> = (0..len).map(entry).collect();
                build_ns.fetch_max(now_ns() - start, Ordering::Relaxed);
                t
            });
            last_leave.fetch_max(now_ns(), Ordering::Relaxed);

            // A real use: read entries spread over the table, check them.
            let sum = table.with(|t| {
                (0..READS)
                    .map(|k| {
                        let i = (rank * 7919 + k * 104_729) % len;
                        assert_eq!(t[i as usize], entry(i), "rank {rank} entry {i}");
                        t[i as usize]
                    })
                    .fold(0u64, u64::wrapping_add)
            });

            // Every rank holds the table here: measure.
            world.barrier();
            if rank == 0 {
                rss_at_barrier.store(rss_bytes(), Ordering::Relaxed);
                groups.store(table.group().size() as u64, Ordering::Relaxed);
            }
            world.barrier();
            sum
        })
        .unwrap_or_else(|err| {
            eprintln!("hls_table: {err}");
            std::process::exit(1);
        });

    let expected = |rank: u64| {
        (0..READS)
            .map(|k| entry((rank * 7919 + k * 104_729) % len))
            .fold(0u64, u64::wrapping_add)
    };
    assert!(
        checksums
            .iter()
            .enumerate()
            .all(|(r, &s)| s == expected(r as u64)),
        "every rank read the right entries"
    );

    let n = checksums.len() as u64;
    let builds = builds.load(Ordering::Relaxed);
    let table_bytes = len * 8;
    let rss_after = rss_at_barrier.load(Ordering::Relaxed);
    let growth = rss_after.saturating_sub(rss_before);
    let init_s = last_leave
        .load(Ordering::Relaxed)
        .saturating_sub(first_enter.load(Ordering::Relaxed)) as f64
        / 1e9;
    // What the same job would need with one copy per rank: the tables, plus
    // what the ranks cost besides the table (measured growth minus ours).
    let rank_overhead = growth.saturating_sub(builds * table_bytes);
    let per_rank_copies = rss_before + n * table_bytes + rank_overhead;

    println!(
        "{n} ranks; a {table_mib} MiB table per {level} group (rank 0's group: {} ranks); \
         built {builds} time(s), {:.3} s per build (slowest)",
        groups.load(Ordering::Relaxed),
        build_ns.load(Ordering::Relaxed) as f64 / 1e9
    );
    println!("{:<34} {:>10} {:>16}", "", "tables", "process RSS");
    println!(
        "{:<34} {:>10} {:>12.1} MiB",
        "before the job",
        0,
        mib(rss_before)
    );
    println!(
        "{:<34} {:>10} {:>12.1} MiB",
        format!("HLS, one per {level} (measured)"),
        builds,
        mib(rss_after)
    );
    println!(
        "{:<34} {:>10} {:>12.1} MiB",
        "per-rank copies (computed)",
        n,
        mib(per_rank_copies)
    );
    println!(
        "memory saved: {:.1} MiB ({:.0}x less); ranks besides the table: {:.1} KiB each",
        mib(per_rank_copies.saturating_sub(rss_after)),
        per_rank_copies as f64 / rss_after.max(1) as f64,
        rank_overhead as f64 / n as f64 / 1024.0
    );
    println!(
        "hls_table: ranks={n} table_mib={table_mib} rss_mib={:.1} init_s={init_s:.3}",
        mib(rss_after)
    );
}
