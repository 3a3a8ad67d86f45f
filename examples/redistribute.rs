//! Seed 000's data redistribution: `--mib` MiB of `u64` block-distributed
//! over NS sources move to NT targets, with every method (COL, RMA1, RMA2)
//! under every strategy (B, NB, WT, T), in one job of max(NS, NT) ranks per
//! pair.
//!
//! ```text
//! cargo run --release --example redistribute -- [--pairs 20:40,40:20] [--mib 64] [--repeat 1]
//! ```
//!
//! One row per case: `ns nt method strategy redist_ms iters`. `redist_ms`
//! is the slowest rank's time from a barrier to the end of its call
//! (window freed, data in place), the median over `--repeat` runs;
//! `iters` the most iterations a rank ran while a background strategy was
//! in flight (each iteration sums a 32 KiB vector and tests the
//! redistribution). Every target checks its block (each element's value
//! is its global index); a wrong element exits with status 1.

use std::time::Instant;

use myriad::collective::SystemOperation;
use myriad::malleable::{Method, Plan, Strategy};
use myriad::traits::*;
use myriad::{Runtime, Threading};

mod common;
use common::{arg, list, median};

fn main() {
    common::usage("redistribute [--pairs 20:40,40:20] [--mib 64] [--repeat 1]");
    let mib: usize = arg("--mib").unwrap_or(64);
    let repeat: usize = arg("--repeat").unwrap_or(1).max(1);
    let pairs: Vec<(usize, usize)> = match list::<String>("--pairs") {
        Some(raw) => raw
            .iter()
            .map(|p| {
                let (a, b) = p.split_once(':').unwrap_or_else(|| {
                    eprintln!("--pairs: expected NS:NT, got {p:?}");
                    std::process::exit(2)
                });
                (a.parse().expect("NS"), b.parse().expect("NT"))
            })
            .collect(),
        None => {
            let sizes = [20, 40, 80, 160];
            sizes
                .iter()
                .flat_map(|&a| sizes.iter().filter(move |&&b| b != a).map(move |&b| (a, b)))
                .collect()
        }
    };
    let total = mib * (1 << 20) / std::mem::size_of::<u64>();
    println!("# {total} u64 elements ({mib} MiB), median of {repeat}");
    println!("ns nt method strategy redist_ms iters");
    let mut wrong = false;
    for (ns, nt) in pairs {
        let rows = Runtime::builder()
            .ranks(ns.max(nt))
            .threading(Threading::Multiple)
            .run(move |universe| pair(&universe.world(), total, ns, nt, repeat))
            .expect("job");
        for (method, strategy, ms, iters, ok) in &rows[0] {
            println!("{ns} {nt} {method} {strategy} {ms:.3} {iters}");
            wrong |= !ok;
        }
    }
    if wrong {
        eprintln!("redistribute: a target's data was wrong");
        std::process::exit(1);
    }
}

type Row = (&'static str, &'static str, f64, u64, bool);

/// Every method × strategy for one pair, on this rank; rank 0's rows carry
/// the slowest rank's figures.
fn pair(world: &impl Communicator, total: usize, ns: usize, nt: usize, repeat: usize) -> Vec<Row> {
    let rank = world.rank() as usize;
    let plan = Plan::block(total, ns, nt).unwrap();
    let comm = world.duplicate();
    let mut src: Vec<u64> = if rank < ns {
        plan.source_block(rank).map(|i| i as u64).collect()
    } else {
        Vec::new()
    };
    let block = if rank < nt {
        plan.target_block(rank)
    } else {
        0..0
    };
    let mut dst = vec![0u64; block.len()];
    let scratch: Vec<f64> = (0..4096).map(|i| i as f64).collect();
    let mut rows = Vec::new();
    for method in Method::ALL {
        for strategy in Strategy::ALL {
            let mut times = Vec::with_capacity(repeat);
            let mut iters_max = 0u64;
            let mut ok = true;
            for _ in 0..repeat {
                dst.fill(u64::MAX);
                world.barrier();
                let start = Instant::now();
                let iters = plan
                    .redistribute_in_background(
                        &comm,
                        method,
                        strategy,
                        &mut src,
                        &mut dst,
                        |flight| {
                            let mut n = 0u64;
                            let mut acc = 0.0;
                            while !flight.test().unwrap() {
                                acc += scratch.iter().sum::<f64>();
                                n += 1;
                            }
                            std::hint::black_box(acc);
                            n
                        },
                    )
                    .unwrap();
                let mine = start.elapsed().as_secs_f64() * 1e3;
                let mut slowest = 0.0f64;
                world.all_reduce_into(&mine, &mut slowest, SystemOperation::max());
                let mut most = 0u64;
                world.all_reduce_into(&iters, &mut most, SystemOperation::max());
                times.push(slowest);
                iters_max = iters_max.max(most);
                ok &= dst.iter().copied().eq(block.clone().map(|i| i as u64));
            }
            let mut all_ok = 0u8;
            world.all_reduce_into(&u8::from(ok), &mut all_ok, SystemOperation::min());
            rows.push((
                method.name(),
                strategy.name(),
                median(&mut times),
                iters_max,
                all_ok == 1,
            ));
        }
    }
    rows
}
