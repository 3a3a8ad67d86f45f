//! Ping-pong between two ranks: latency and bandwidth from 1 B to 16 MiB
//! (×16 steps, as in seed 003's table), then the Hockney fit T(m) = α + β·m.
//!
//! ```text
//! cargo run --release --example pingpong -- [--workers 1|2] [--iters N] [--sizes 1,65536] [--processes 2] [--transport tcp|shm|ofi|auto] [--ranks R] [--plot FILE.svg]
//! ```
//!
//! `--ranks R` (default 2) starts R ranks of which ranks 0 and 1 ping-pong
//! and the others only meet them at the barriers: with `--processes 2
//! --ranks 4` ranks 0 and 1 share the first process, which measures a
//! same-process pair inside a job of several processes.
//!
//! With `--processes 2` (or under `mpiexec -n 2`) the two ranks live in two
//! processes and the messages cross the transport `MYRIAD_TRANSPORT` picks
//! (`auto`: shared memory on one host; `tcp`, `shm`; `--transport T` sets
//! it for every process); the process of rank 0
//! prints. `--plot` draws seed 003's figure: one-way time against message
//! size (log–log), measured and the fitted α + β·m.
//!
//! Prints `bytes latency_us MB/s` rows (one-way time, half a round trip),
//! the fitted α (µs) and β (µs per MiB), and a plain `memcpy` of 16 MiB for
//! comparison (a message inside one process is copied once), between
//! buffers already touched, as the ping-pong's are.

use std::time::Instant;

use myriad::traits::*;

mod common;
use common::plot::{self, Axis, Series};
use common::{arg, list};

fn main() {
    common::usage(
        "pingpong [--workers 1|2] [--iters N] [--sizes 1,65536] [--processes 2] [--transport tcp|shm|ofi|auto] [--ranks R] [--plot FILE.svg]",
    );
    let scale: f64 = arg("--iters").unwrap_or(1.0);
    let plot_to = plot::plot_path();
    // 1 B .. 16 MiB unless `--sizes` chooses.
    let sizes: Vec<usize> =
        list("--sizes").unwrap_or_else(|| (0..7).map(|i| 1usize << (4 * i)).collect());
    // One worker unless `--workers` or MYRIAD_WORKERS says otherwise.
    // Before any thread starts; the built-in launcher's processes inherit it.
    if let Some(transport) = arg::<String>("--transport") {
        std::env::set_var("MYRIAD_TRANSPORT", transport);
    }
    let ranks: usize = arg("--ranks").unwrap_or(2);
    assert!(ranks >= 2, "--ranks must be at least 2");
    let mut runtime = myriad::Runtime::from_env().ranks(ranks);
    if arg::<usize>("--workers").is_none() && std::env::var_os("MYRIAD_WORKERS").is_none() {
        runtime = runtime.workers(1);
    }
    let results = runtime
        .run(|universe| {
            let world = universe.world();
            let processes = universe.process_count();
            let workers = myriad::environment::worker_count();
            let rank = world.rank();
            let peer = world.process_at_rank(1 - rank.min(1));
            let mut rows = Vec::new();
            for &bytes in &sizes {
                let mut buf = vec![rank as u8; bytes];
                // Fewer round trips for large messages.
                let iters =
                    ((200_000.0 * scale) as usize / (1 + bytes / 1024)).clamp(20, 2_000_000);
                let warmup = (iters / 10).max(5);
                let mut elapsed = 0.0;
                for phase in 0..2 {
                    let n = if phase == 0 { warmup } else { iters };
                    world.barrier();
                    let start = Instant::now();
                    for _ in 0..n {
                        if rank > 1 {
                            break;
                        }
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
                let one_way = elapsed / iters as f64 / 2.0;
                rows.push((bytes, one_way));
            }
            (rank, processes, workers, rows)
        })
        .expect("ping-pong failed");
    // The process of rank 0 prints (both ranks' processes return here).
    let Some((_, processes, workers, rows)) = results.iter().find(|r| r.0 == 0) else {
        return;
    };
    let across = if *processes > 1 {
        let transport = std::env::var("MYRIAD_TRANSPORT").unwrap_or_else(|_| "auto".into());
        format!(", {processes} processes (MYRIAD_TRANSPORT={transport})")
    } else {
        String::new()
    };
    let pair = if ranks > 2 {
        format!("ranks 0 and 1 of {ranks}")
    } else {
        "2 ranks".to_string()
    };
    println!("# ping-pong, {pair}, {workers} worker(s) per process{across}");
    println!("# bytes  latency_us  MB/s");
    for &(bytes, t) in rows {
        println!(
            "{bytes:>9}  {:>10.4}  {:>10.1}",
            t * 1e6,
            bytes as f64 / t / 1e6
        );
    }
    // Least-squares fit of T(m) = α + β·m.
    let n = rows.len() as f64;
    let (sx, sy) = rows
        .iter()
        .fold((0.0, 0.0), |(sx, sy), &(m, t)| (sx + m as f64, sy + t));
    let (mx, my) = (sx / n, sy / n);
    let (sxy, sxx) = rows.iter().fold((0.0, 0.0), |(sxy, sxx), &(m, t)| {
        let dx = m as f64 - mx;
        (sxy + dx * (t - my), sxx + dx * dx)
    });
    let beta = sxy / sxx;
    let alpha = my - beta * mx;
    // The small-message latency is a better α than the intercept of a fit
    // dominated by the 16 MiB point. One size (`--sizes`) fits no line.
    if sxx > 0.0 {
        println!(
            "# fit: alpha_us={:.4} beta_us_per_MiB={:.2} (bandwidth {:.0} MB/s); 1-byte latency {:.4} us",
            alpha * 1e6,
            beta * 1e6 * (1 << 20) as f64,
            1.0 / beta / 1e6,
            rows[0].1 * 1e6
        );
    }
    if let Some(path) = &plot_to {
        // Two models: the least-squares line (its intercept is dominated by
        // the large messages) and α = the 1-byte latency with the fitted β.
        let alpha1 = rows[0].1;
        let mut measured = Series::new("measured (one way)");
        let mut fit = Series::new(format!(
            "least squares: α = {:.2} µs, β = {:.0} µs/MiB",
            alpha * 1e6,
            beta * 1e6 * (1 << 20) as f64
        ));
        let mut small = Series::new(format!("α = 1 B latency ({:.3} µs), same β", alpha1 * 1e6));
        for &(bytes, t) in rows {
            let m = bytes as f64;
            measured.points.push((m, t * 1e6));
            fit.points.push((m, (alpha + beta * m) * 1e6));
            small.points.push((m, (alpha1 + beta * m) * 1e6));
        }
        plot::save(
            path,
            &format!("ping-pong, 2 ranks, {workers} worker(s): T(m) = α + β·m"),
            Axis::log("message size (bytes)"),
            Axis::log("one-way time (µs)"),
            &[measured, fit, small],
        );
    }
    // A plain memcpy of the largest size, for comparison.
    let big = *sizes.last().unwrap();
    let src = vec![1u8; big];
    let mut dst = vec![0u8; big];
    // One untimed copy first: a fresh allocation's pages are mapped on
    // first touch, and faulting them in (4,096 faults for 16 MiB) inside
    // the timed loop made memcpy look slower, and the ping-pong's share of
    // it higher, than they are. The ping-pong's buffers are warm too (its
    // first round trips are not timed either).
    dst.copy_from_slice(std::hint::black_box(&src));
    std::hint::black_box(&mut dst);
    let reps = 20;
    let start = Instant::now();
    for _ in 0..reps {
        dst.copy_from_slice(std::hint::black_box(&src));
        std::hint::black_box(&mut dst);
    }
    let t = start.elapsed().as_secs_f64() / reps as f64;
    let pp = rows.last().unwrap().1;
    println!(
        "# memcpy {big} B: {:.1} MB/s; ping-pong reaches {:.0}% of it",
        big as f64 / t / 1e6,
        100.0 * t / pp
    );
}
