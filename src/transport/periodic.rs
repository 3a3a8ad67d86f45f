//! A look that polls take at most once per period: what a transport does
//! for a source that only rarely has something (TCP beside shared memory,
//! libfabric's control streams), since each look is a system call that a
//! worker polling in a loop would otherwise make on every poll.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Whether the next look is due: at most once per `period`, the clock read
/// only every `every`th call (reading it is not free either).
///
/// Asked on every poll of a polling loop, so the common answer costs no
/// read-modify-write and no division: the call count is a plain load and
/// store (threads that count at once may lose a call, which only moves
/// the next clock reading by one), `every` a power of two.
#[derive(Debug)]
pub(crate) struct Periodic {
    /// `every` - 1, `every` a power of two.
    mask: u32,
    period_ns: u64,
    calls: AtomicU32,
    /// When a call last answered `true`, in nanoseconds since `start`.
    looked: AtomicU64,
    start: Instant,
}

impl Periodic {
    /// Due at most once per `period`, the clock read every `every`th call
    /// (`every` rounded up to a power of two; at least every call).
    pub(crate) fn new(every: u32, period: Duration) -> Periodic {
        Periodic {
            mask: every.max(1).next_power_of_two() - 1,
            period_ns: period.as_nanos().min(u64::MAX as u128) as u64,
            calls: AtomicU32::new(0),
            looked: AtomicU64::new(0),
            start: Instant::now(),
        }
    }

    /// Whether this call should look: `period` has passed since the last
    /// call that did (one caller wins when several ask at once).
    pub(crate) fn due(&self) -> bool {
        let calls = self.calls.load(Ordering::Relaxed);
        self.calls.store(calls.wrapping_add(1), Ordering::Relaxed);
        if calls & self.mask != 0 {
            return false;
        }
        let now = self.start.elapsed().as_nanos() as u64;
        let looked = self.looked.load(Ordering::Relaxed);
        now.saturating_sub(looked) >= self.period_ns
            && self
                .looked
                .compare_exchange(looked, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_once_per_period_and_only_on_every_nth_call() {
        let p = Periodic::new(4, Duration::from_millis(20));
        // Calls 0..8: the first period has not passed.
        assert!((0..8).all(|_| !p.due()));
        std::thread::sleep(Duration::from_millis(25));
        // Call 8 reads the clock (a 4th call) and looks; 9..16 are within
        // the period.
        assert!(p.due());
        assert!((9..16).all(|_| !p.due()), "one look per period");
        std::thread::sleep(Duration::from_millis(25));
        assert!(p.due(), "call 16 reads the clock: the period passed");
        std::thread::sleep(Duration::from_millis(25));
        // The period passed again, but calls 17..20 do not read the clock.
        assert!((17..20).all(|_| !p.due()), "off the every-4th calls");
        assert!(p.due(), "call 20 looks");
    }
}
