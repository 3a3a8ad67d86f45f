//! How far apart a spinning rank polls a line that another core must lock
//! and write before the poll can succeed.
//!
//! A blocking receive whose message is delivered into its mailbox's line
//! (`p2p::mailbox::Delivery`) spins on that line's lock word. Each poll is
//! a read of a line the sender holds while it matches and writes: a read in
//! the middle takes the line away from it (measured with `lfence; rdtsc`
//! on the development VM's Xeon: the sender's first read of the line after
//! its lock 48 → 202 cycles when the receiver polled at every `pause`), and
//! the sender then waits for it again before its writes and its unlock
//! are seen. Polled about every 100 ns, the line stays with the sender for
//! its few dozen instructions: 2-worker 1 B one-way 0.26-0.32 µs at every
//! `pause` (~12-16 ns there) against 0.15-0.22 µs polled every 70-140 ns
//! (`pingpong --workers 2`, 2026-12-04, 4 rounds of a sweep).
//!
//! `pause` lasts from a few to ~140 cycles depending on the CPU, so the
//! interval is set in time: the number of `pause`s is measured once per
//! process, on first use.

use std::sync::OnceLock;
use std::time::Instant;

/// The interval between two polls.
const INTERVAL_NS: f64 = 100.0;

/// `pause`s timed to calibrate, in each of three tries (the fastest wins:
/// a try preempted reads long).
const CALIBRATION_PAUSES: u32 = 500;

/// The `pause`s that make up [`INTERVAL_NS`] (at least one).
pub(crate) fn pauses_per_poll() -> u32 {
    static PAUSES: OnceLock<u32> = OnceLock::new();
    *PAUSES.get_or_init(calibrate)
}

fn calibrate() -> u32 {
    let fastest = (0..3)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..CALIBRATION_PAUSES {
                std::hint::spin_loop();
            }
            start.elapsed().as_nanos() as f64 / f64::from(CALIBRATION_PAUSES)
        })
        .fold(f64::INFINITY, f64::min);
    pauses_for(fastest)
}

/// The `pause`s of one interval when one lasts `pause_ns`.
fn pauses_for(pause_ns: f64) -> u32 {
    if pause_ns.is_nan() || pause_ns <= 0.0 {
        return 1;
    }
    (INTERVAL_NS / pause_ns).ceil().clamp(1.0, 256.0) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interval_is_a_whole_number_of_pauses_within_bounds() {
        assert_eq!(pauses_for(12.5), 8);
        assert_eq!(pauses_for(16.0), 7);
        assert_eq!(pauses_for(140.0), 1, "a pause longer than the interval");
        assert_eq!(pauses_for(0.1), 256, "a pause that costs nothing");
        assert_eq!(pauses_for(0.0), 1);
        assert_eq!(pauses_for(f64::NAN), 1);
        let measured = pauses_per_poll();
        assert!((1..=256).contains(&measured), "{measured}");
        assert_eq!(pauses_per_poll(), measured, "measured once");
    }
}
