//! A fixed number of calls of one collective at 8 B, for counting
//! instructions per rank and call with callgrind (no timing, no output).
//!
//! ```text
//! cargo build --release --example coll_count
//! valgrind --tool=callgrind target/release/examples/coll_count all_reduce 100 256
//! valgrind --tool=callgrind target/release/examples/coll_count all_reduce 0 256
//! ```
//!
//! Arguments: `<collective> <calls> <ranks>` (collectives: `barrier`,
//! `broadcast`, `reduce`, `all_reduce`, `gather`, `scatter`, `scan`,
//! `all_gather`); 2 workers. Instructions per rank and call =
//! (Ir(calls = 100) − Ir(calls = 0)) / (100 × ranks): the difference
//! removes start-up and teardown.

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
        "usage: coll_count <collective> <calls> <ranks>\ncollectives: {}",
        COLLECTIVES.join(", ")
    );
    std::process::exit(2);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 || !COLLECTIVES.contains(&args[1].as_str()) {
        usage();
    }
    let which = args[1].clone();
    let (Ok(calls), Ok(ranks)) = (args[2].parse::<usize>(), args[3].parse::<usize>()) else {
        usage()
    };
    myriad::Runtime::builder()
        .ranks(ranks)
        .workers(2)
        .run(move |universe| {
            let world = universe.world();
            let size = world.size() as usize;
            let is_root = world.rank() == 0;
            let root = world.process_at_rank(0);
            let x = world.rank() as u64;
            let mut all = vec![0u64; if is_root { size } else { 0 }];
            let mut everyone = vec![0u64; size];
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
