//! Waiting costs no CPU: ranks that wait park, workers sleep.
//!
//! The only test of this binary, so the process CPU time is the job's.

use std::time::{Duration, Instant};

use myriad::traits::*;

fn cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the zeroed struct we pass.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

#[test]
fn ranks_waiting_two_seconds_use_almost_no_cpu() {
    // Warm up (thread creation, page faults) outside the measurement.
    myriad::run(64, |universe| universe.world().barrier()).unwrap();
    let cpu_before = cpu_seconds();
    let start = Instant::now();
    myriad::run(64, |universe| {
        let world = universe.world();
        if world.rank() == 0 {
            myriad::sleep(Duration::from_secs(2));
            for r in 1..world.size() {
                world.process_at_rank(r).send(&1u8);
            }
        } else {
            let _ = world.process_at_rank(0).receive::<u8>();
        }
    })
    .unwrap();
    let wall = start.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu_before;
    assert!(wall >= 2.0, "the job waited {wall} s");
    assert!(cpu < 0.2, "waiting 2 s used {cpu:.3} s of CPU");
    println!("waiting {wall:.2} s used {cpu:.4} s of CPU");
}
