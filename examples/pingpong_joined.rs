//! Ping-pong between two ranks of two processes joined by a transport, both
//! processes running as threads of this one (`Runtime::run_joined`): what
//! the transport itself costs, without a launcher.
//!
//! ```text
//! cargo run --release --example pingpong_joined -- [--transport tcp|loopback] [--workers N] [--iters N]
//! ```
//!
//! Prints the `bytes latency_us MB/s` rows of `pingpong` (one-way time,
//! half a round trip). Both processes share this machine's cores, and each
//! has its own workers and progress thread.

use std::time::Instant;

use myriad::traits::*;

mod common;
use common::arg;

fn main() {
    common::usage("pingpong_joined [--transport tcp|loopback] [--workers N] [--iters N]");
    let workers: usize = arg("--workers").unwrap_or(1);
    let scale: f64 = arg("--iters").unwrap_or(1.0);
    let transport: String = arg("--transport").unwrap_or_else(|| "tcp".to_string());
    let sizes: Vec<usize> = (0..7).map(|i| 1usize << (4 * i)).collect(); // 1 B .. 16 MiB
    let body = |universe: myriad::environment::Universe| {
        let world = universe.world();
        let rank = world.rank();
        let peer = world.process_at_rank(1 - rank);
        let mut rows = Vec::new();
        for &bytes in &sizes {
            let mut buf = vec![rank as u8; bytes];
            let iters = ((20_000.0 * scale) as usize / (1 + bytes / 1024)).clamp(10, 200_000);
            let warmup = (iters / 10).max(5);
            let mut elapsed = 0.0;
            for phase in 0..2 {
                let n = if phase == 0 { warmup } else { iters };
                world.barrier();
                let start = Instant::now();
                for _ in 0..n {
                    if rank == 0 {
                        peer.send(&buf[..]);
                        peer.receive_into(&mut buf[..]);
                    } else {
                        peer.receive_into(&mut buf[..]);
                        peer.send(&buf[..]);
                    }
                }
                elapsed = start.elapsed().as_secs_f64();
            }
            rows.push((bytes, elapsed / iters as f64 / 2.0));
        }
        rows
    };
    let runtime = myriad::Runtime::builder().workers(workers);
    let results = match transport.as_str() {
        "tcp" => runtime.run_joined_tcp(&[1, 1], body),
        "loopback" => runtime.run_joined(&[1, 1], body),
        other => panic!("--transport {other}: tcp or loopback"),
    }
    .expect("the job starts");
    let rows = &results
        .into_iter()
        .next()
        .expect("process 0")
        .expect("ping-pong failed")[0];
    println!("# ping-pong, 2 processes ({transport}) of 1 rank, {workers} worker(s) each");
    println!("# bytes  latency_us  MB/s");
    for &(bytes, t) in rows {
        println!(
            "{bytes:>9}  {:>10.4}  {:>10.1}",
            t * 1e6,
            bytes as f64 / t / 1e6
        );
    }
}
