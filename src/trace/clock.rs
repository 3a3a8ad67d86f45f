//! The trace's clock: the CPU's time-stamp counter where the kernel itself
//! keeps time with it (reading it costs a third of `clock_gettime` on this
//! VM, and a ping-pong reads the clock six times per message), else
//! `Instant`. Readings are ticks since the job started; [`Clock::scale`]
//! turns them into nanoseconds once, when the trace is written, from the
//! ticks and the `Instant` time elapsed over the whole job.

use std::time::Instant;

/// A job's clock.
#[derive(Debug)]
pub(crate) struct Clock {
    epoch: Instant,
    /// The counter at `epoch`, when the counter is used.
    tsc: Option<u64>,
}

impl Clock {
    /// A clock starting now.
    pub(crate) fn new() -> Clock {
        let tsc = tsc_usable().then(read_tsc);
        Clock {
            epoch: Instant::now(),
            tsc,
        }
    }

    /// Ticks since the clock started.
    #[inline]
    pub(crate) fn now(&self) -> u64 {
        match self.tsc {
            Some(start) => read_tsc().saturating_sub(start),
            None => self.epoch.elapsed().as_nanos() as u64,
        }
    }

    /// An estimate of ticks per nanosecond, for turning a trace window
    /// into ticks when the job starts: measured over the clock's first
    /// 2 ms (waiting for them if they have not passed; only a job with a
    /// window asks).
    pub(crate) fn ticks_per_ns(&self) -> f64 {
        if self.tsc.is_none() {
            return 1.0;
        }
        while self.epoch.elapsed() < std::time::Duration::from_millis(2) {
            std::hint::spin_loop();
        }
        1.0 / self.scale()
    }

    /// Nanoseconds per tick, measured from the clock's start to now.
    pub(crate) fn scale(&self) -> f64 {
        let Some(start) = self.tsc else {
            return 1.0;
        };
        let ns = self.epoch.elapsed().as_nanos() as f64;
        let ticks = read_tsc().saturating_sub(start) as f64;
        if ticks <= 0.0 || ns <= 0.0 {
            1.0
        } else {
            ns / ticks
        }
    }
}

/// Whether the time-stamp counter is the kernel's clock source (then it is
/// constant-rate and synchronised across CPUs, or the kernel would not use
/// it).
fn tsc_usable() -> bool {
    cfg!(target_arch = "x86_64")
        && std::fs::read_to_string(
            "/sys/devices/system/clocksource/clocksource0/current_clocksource",
        )
        .is_ok_and(|s| s.trim() == "tsc")
}

#[inline]
fn read_tsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `rdtsc` reads a counter; it has no preconditions on x86_64.
    #[allow(unused_unsafe)]
    unsafe {
        core::arch::x86_64::_rdtsc()
    }
    #[cfg(not(target_arch = "x86_64"))]
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_grow_and_scale_to_about_the_elapsed_time() {
        let clock = Clock::new();
        let a = clock.now();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let b = clock.now();
        assert!(b > a);
        let ns = (b - a) as f64 * clock.scale();
        assert!((15e6..2e9).contains(&ns), "{ns} ns for a 20 ms sleep");
    }
}
