//! Large copies shared with idle workers.
//!
//! A rendezvous message between ranks of one process is one copy, made by
//! whichever side matches it (`p2p::transfer`). At 16 MiB that copy is the
//! whole cost, and one core's `memcpy` bandwidth is its bound; MPI's
//! processes copy twice, but their two copies overlap on two cores. The
//! other side of the message waits meanwhile, so on a job whose workers
//! have a CPU each its worker is idle: the copy is cut into pieces that
//! idle workers claim (micro-tasks) while the rank copies too.
//!
//! The pieces live behind an `Arc`: a helper that runs after the copy is
//! over claims no piece and touches no buffer, and the rank returns only
//! once every piece claimed is copied.

use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::identity::WorldRank;
use crate::sched::micro::MicroTask;
use crate::sched::{self, Scheduler};

/// Copies at least this large are shared: a MiB takes ~34 µs here, a
/// helper's start a few (1 MiB one-way on 2 workers 34 -> 27 µs, 16 MiB
/// 2.1 -> 1.3 ms).
pub(crate) const SHARED_COPY: usize = 1 << 20;

/// Bytes of one piece: small enough that two workers end close together,
/// large enough that claiming one is noise.
const PIECE: usize = 256 << 10;

/// One shared copy: who claims the next piece, and how many are done.
struct Pieces {
    src: *const u8,
    dst: *mut u8,
    len: usize,
    count: usize,
    /// The next piece to claim (may run past `count`: nothing left).
    next: AtomicUsize,
    /// Pieces copied.
    done: AtomicUsize,
}

// SAFETY: the pointers are dereferenced only for a piece claimed before the
// copy is over, while the owner of both buffers waits in `copy` (see
// `Pieces::work`); the counters are atomics.
unsafe impl Send for Pieces {}
// SAFETY: as above.
unsafe impl Sync for Pieces {}

impl Pieces {
    /// Claims and copies pieces until none is left.
    fn work(&self) {
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            if i >= self.count {
                return;
            }
            let at = i * PIECE;
            let n = PIECE.min(self.len - at);
            // SAFETY: piece `i` is this thread's alone (claimed once), inside
            // both buffers (`at + n` ≤ `len`); `copy`'s caller keeps them
            // valid and not overlapping until `done` reaches `count`, which
            // it cannot before this piece is counted below.
            unsafe { ptr::copy_nonoverlapping(self.src.add(at), self.dst.add(at), n) };
            // Release: the piece's bytes are there before it counts as done.
            self.done.fetch_add(1, Ordering::Release);
        }
    }
}

/// Copies `len` bytes from `src` to `dst`, sharing the copy with idle
/// workers of `sched` where they can run beside the caller
/// (`sched::worker::idle_workers_help`) and it is at least [`SHARED_COPY`];
/// else one `memcpy`. `rank` is the caller's (micro-tasks name one).
///
/// # Safety
///
/// As `ptr::copy_nonoverlapping(src, dst, len)`: `src` readable and `dst`
/// writable for `len` bytes, not overlapping, and nothing else writes
/// either until this returns.
pub(crate) unsafe fn copy(
    sched: &Scheduler,
    rank: WorldRank,
    src: *const u8,
    dst: *mut u8,
    len: usize,
) {
    let helpers = sched.worker_count().saturating_sub(1);
    if len < SHARED_COPY || helpers == 0 || !sched::worker::idle_workers_help(sched) {
        // SAFETY: the caller's contract.
        unsafe { ptr::copy_nonoverlapping(src, dst, len) };
        return;
    }
    let pieces = Arc::new(Pieces {
        src,
        dst,
        len,
        count: len.div_ceil(PIECE),
        next: AtomicUsize::new(0),
        done: AtomicUsize::new(0),
    });
    sched.push_micro((0..helpers.min(pieces.count - 1)).map(|_| {
        let pieces = Arc::clone(&pieces);
        MicroTask {
            rank,
            run: Box::new(move || pieces.work()),
        }
    }));
    pieces.work();
    // The pieces helpers claimed and still copy: a piece's time at most.
    let mut spins = 0u32;
    // Acquire: their bytes are there.
    while pieces.done.load(Ordering::Acquire) < pieces.count {
        spins += 1;
        if spins < 1 << 12 {
            std::hint::spin_loop();
        } else {
            // Its worker was preempted: let it run.
            std::thread::yield_now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pieces claimed by several threads cover the buffer exactly once, and
    /// a claim after the end copies nothing.
    #[test]
    fn pieces_cover_the_copy_once_whoever_claims_them() {
        let len = 5 * PIECE + 12_345;
        let src: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        let mut dst = vec![0u8; len];
        let pieces = Pieces {
            src: src.as_ptr(),
            dst: dst.as_mut_ptr(),
            len,
            count: len.div_ceil(PIECE),
            next: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
        };
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| pieces.work());
            }
        });
        assert_eq!(pieces.done.load(Ordering::Acquire), pieces.count);
        pieces.work();
        assert_eq!(pieces.done.load(Ordering::Acquire), pieces.count);
        assert!(dst == src);
    }
}
