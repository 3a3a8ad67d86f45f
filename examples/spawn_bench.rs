//! Growing and shrinking a running job: how long spawning ranks as
//! coroutines, merging them with their parents, and retiring them take.
//!
//! A job of `--from` ranks (default 20) repeats, `--repeat` times (default
//! 7): spawn `--to - --from` ranks (default 140), merge parents and
//! children into one communicator, retire the children. Rank 0 times each
//! step between barriers of the parents:
//!
//! * `spawn`: `spawn_ranks` returns at rank 0 (the children are queued,
//!   the parents' side of the inter-communicator exists);
//! * `spawn_merge`: spawn, then `merge` returns (every child has started
//!   and joined the merged communicator);
//! * `retire`: `shrink` of the merged communicator, the children retiring,
//!   returns at rank 0 (the survivors have their communicator).
//!
//! One row per operation: `operation ranks_from ranks_to latency_us`
//! (the median) then `min max` over the repetitions.
//!
//! ```text
//! cargo run --release --example spawn_bench -- --from 20 --to 160 --repeat 7
//! ```

mod common;

use std::time::Instant;

use myriad::topology::MergeOrder;
use myriad::traits::*;

fn main() {
    common::usage("spawn_bench [--from 20] [--to 160] [--repeat 7]");
    let from: usize = common::arg("--from").unwrap_or(20);
    let to: usize = common::arg("--to").unwrap_or(160);
    let repeat: usize = common::arg("--repeat").unwrap_or(7).max(1);
    assert!(to > from, "--to must exceed --from");
    let times = myriad::Runtime::builder()
        .ranks(from)
        .run(move |universe| {
            let world = universe.world();
            let mut rows: Vec<[f64; 3]> = Vec::new();
            // One untimed round first: the stacks and tables warm up.
            for round in 0..=repeat {
                world.barrier();
                let start = Instant::now();
                let inter = world
                    .spawn_ranks(to - from, |child| {
                        let merged = child.parent().unwrap().merge(MergeOrder::High);
                        assert!(merged.shrink(false).unwrap().is_none());
                    })
                    .unwrap();
                let spawned = start.elapsed();
                let merged = inter.merge(MergeOrder::Low);
                let joined = start.elapsed();
                assert_eq!(merged.size() as usize, to);
                world.barrier();
                let start = Instant::now();
                let survivors = merged.shrink(true).unwrap().unwrap();
                let retired = start.elapsed();
                assert_eq!(survivors.size() as usize, from);
                if round > 0 {
                    rows.push([
                        spawned.as_secs_f64() * 1e6,
                        joined.as_secs_f64() * 1e6,
                        retired.as_secs_f64() * 1e6,
                    ]);
                }
            }
            rows
        })
        .expect("the job runs");
    let rows = &times[0];
    println!("operation ranks_from ranks_to latency_us min max");
    for (i, name) in ["spawn", "spawn_merge", "retire"].iter().enumerate() {
        let mut values: Vec<f64> = rows.iter().map(|r| r[i]).collect();
        let median = common::median(&mut values);
        let (min, max) = (values[0], values[values.len() - 1]);
        let (a, b) = if *name == "retire" {
            (to, from)
        } else {
            (from, to)
        };
        println!("{name} {a} {b} {median:.1} {min:.1} {max:.1}");
    }
}
