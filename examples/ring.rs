//! A token goes around all ranks `--laps` times; every rank adds its rank
//! number, and rank 0 checks the total.
//!
//! ```text
//! cargo run --release --example ring -- --ranks 10000 --laps 10
//! ```
//!
//! Across processes (`--processes N`, or under `mpiexec`) the process of
//! world rank 0 checks the token and prints.

use std::time::Instant;

use myriad::traits::*;

mod common;
use common::arg;

fn main() {
    common::usage("ring --ranks R [--workers W] [--processes P] [--laps 1]");
    let laps: u64 = arg("--laps").unwrap_or(1);
    let start = Instant::now();
    let result = myriad::Runtime::from_env().run(|universe| {
        let world = universe.world();
        let (rank, size) = (world.rank(), world.size());
        let next = world.process_at_rank((rank + 1) % size);
        let prev = world.process_at_rank((rank + size - 1) % size);
        let mut token = 0u64;
        for _ in 0..laps {
            if rank == 0 {
                next.send(&token);
                token = prev.receive::<u64>().0;
            } else {
                token = prev.receive::<u64>().0 + rank as u64;
                next.send(&token);
            }
        }
        (rank, size, token)
    });
    let results = result.unwrap_or_else(|err| {
        eprintln!("ring: {err}");
        std::process::exit(1);
    });
    // In a job of several processes, `run` returns this process's ranks:
    // the process of world rank 0 checks and prints.
    let Some(&(_, size, token)) = results.iter().find(|r| r.0 == 0) else {
        return;
    };
    let n = size as u64;
    let expected = laps * n * (n - 1) / 2;
    let wall = start.elapsed().as_secs_f64();
    let hops = laps * n;
    if token != expected {
        eprintln!("ring: token {token} != expected {expected}");
        std::process::exit(1);
    }
    println!(
        "ring: ranks={n} laps={laps} token={token} (verified) wall_s={wall:.3} hop_us={:.3}",
        wall / hops as f64 * 1e6
    );
}
