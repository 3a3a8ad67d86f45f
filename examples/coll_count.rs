//! A fixed number of calls of one collective at 8 B, for counting
//! instructions per rank and call with callgrind (no timing, no output).
//!
//! ```text
//! cargo build --release --example coll_count
//! valgrind --tool=callgrind target/release/examples/coll_count all_reduce 100 256
//! valgrind --tool=callgrind target/release/examples/coll_count all_reduce 0 256
//! ```
//!
//! Arguments: `<collective> <calls> <ranks> [workers]` (collectives:
//! `barrier`, `broadcast`, `reduce`, `all_reduce`, `gather`, `scatter`,
//! `scan`, `all_gather`); 2 workers unless given. Instructions per rank and
//! call = (Ir(calls = 100) − Ir(calls = 0)) / (100 × ranks): the difference
//! removes start-up and teardown.
//!
//! With 1 worker, the process's CPU time (`perf stat -e task-clock
//! coll_count barrier 2000 1024 1`) is the ranks' own work, misses and
//! locked instructions included, without idle polling; other processes
//! preempting it change it little, unlike the wall time of a 2-worker run
//! on a busy machine: CPU time / (calls × ranks) is the cost per rank and
//! call that callgrind's count does not see.

use myriad::collective::SystemOperation;
use myriad::traits::*;

const COLLECTIVES: &[&str] = &[
    "barrier",
    "broadcast",
    "reduce",
    "all_reduce",
    "gather",
    "scatter",
    "scan",
    "all_gather",
];

fn usage() -> ! {
    eprintln!(
        "usage: coll_count <collective> <calls> <ranks> [workers]\ncollectives: {}",
        COLLECTIVES.join(", ")
    );
    std::process::exit(2);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if !(4..=5).contains(&args.len()) || !COLLECTIVES.contains(&args[1].as_str()) {
        usage();
    }
    let which = args[1].clone();
    let (Ok(calls), Ok(ranks)) = (args[2].parse::<usize>(), args[3].parse::<usize>()) else {
        usage()
    };
    let Ok(workers) = args.get(4).map_or(Ok(2), |w| w.parse::<usize>()) else {
        usage()
    };
    myriad::Runtime::builder()
        .ranks(ranks)
        .workers(workers)
        .run(move |universe| {
            let world = universe.world();
            let size = world.size() as usize;
            let is_root = world.rank() == 0;
            let root = world.process_at_rank(0);
            let x = world.rank() as u64;
            let mut all = vec![0u64; if is_root { size } else { 0 }];
            // Only all-gather needs a buffer of the world's size: one per rank
            // would be quadratic at a million ranks.
            let mut everyone = vec![0u64; if which == "all_gather" { size } else { 0 }];
            let send = vec![1u64; if is_root { size } else { 0 }];
            let mut y = 0u64;
            for _ in 0..calls {
                match which.as_str() {
                    "barrier" => world.barrier(),
                    "broadcast" => root.broadcast_into(&mut y),
                    "reduce" if is_root => {
                        root.reduce_into_root(&x, &mut y, SystemOperation::sum())
                    }
                    "reduce" => root.reduce_into(&x, SystemOperation::sum()),
                    "all_reduce" => world.all_reduce_into(&x, &mut y, SystemOperation::sum()),
                    "gather" if is_root => root.gather_into_root(&x, &mut all[..]),
                    "gather" => root.gather_into(&x),
                    "scatter" if is_root => root.scatter_into_root(&send[..], &mut y),
                    "scatter" => root.scatter_into(&mut y),
                    "scan" => world.scan_into(&x, &mut y, SystemOperation::sum()),
                    "all_gather" => world.all_gather_into(&x, &mut everyone[..]),
                    _ => unreachable!("checked above"),
                }
            }
        })
        .expect("the job runs");
}
