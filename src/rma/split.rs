//! Large gets copied by the idle workers too: in one process a get is a CPU copy
//! made by the origin's worker, and a resize that shrinks to a few ranks
//! has its targets on few workers (ranks are dealt to workers by block:
//! the 20 targets of 160 -> 20 all live on worker 0), so the copy that
//! `all_to_all_varcount` spreads over its senders' workers ran on one CPU
//! while the other idled in the window's free. A get of at least
//! [`SPLIT_BYTES`] is cut into [`PIECE_BYTES`] pieces when some worker is
//! idle: micro-tasks let idle workers claim pieces while the origin claims
//! them too.
//!
//! The origin never parks (an access holds the target's gate and must not
//! block): once no piece is left to claim it spins for the pieces other
//! workers are copying, at most one piece each. A helper that runs after
//! every piece was claimed finds none and only drops its `Arc`: the
//! buffers are touched only inside a claimed piece, and the origin
//! returns only after every claimed piece is done.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::identity::WorldRank;
use crate::sched::micro::MicroTask;
use crate::sched::Scheduler;

use super::access;

/// Gets from this size on are split (four pieces at least: the origin's
/// wait for the last helper's piece is a fraction of the copy).
pub(crate) const SPLIT_BYTES: usize = 4 * PIECE_BYTES;

/// The size of one piece: large enough that a piece costs much more than
/// claiming it and waking a worker, small enough that the origin's last
/// wait for a helper's piece is short.
const PIECE_BYTES: usize = 64 << 10;

/// One split copy, shared by the origin and its helpers.
struct SplitCopy {
    dst: *mut u8,
    src: *const u8,
    len: usize,
    pieces: usize,
    /// The next piece to claim.
    next: AtomicUsize,
    /// Pieces copied.
    done: AtomicUsize,
}

// SAFETY: the pointers are only dereferenced inside a claimed piece (each
// piece claimed once, by the atomic `next`), while the origin waits for
// every claimed piece (`done`) before its borrows of both ranges end.
unsafe impl Send for SplitCopy {}
// SAFETY: as above.
unsafe impl Sync for SplitCopy {}

impl SplitCopy {
    /// Claims and copies pieces until none is left.
    fn work(&self) {
        loop {
            let k = self.next.fetch_add(1, Ordering::Relaxed);
            if k >= self.pieces {
                return;
            }
            let at = k * PIECE_BYTES;
            let len = PIECE_BYTES.min(self.len - at);
            // SAFETY: piece `k` is inside both ranges and claimed by us
            // alone; the origin holds the target's gate and its borrow of
            // `dst` until `done` counts this piece (the `Release` below,
            // after the streaming copy's closing fence).
            unsafe { access::load_streaming(self.dst.add(at), self.src.add(at), len) };
            self.done.fetch_add(1, Ordering::Release);
        }
    }
}

/// Copies `len` bytes of window memory at `src` to `dst` like
/// [`access::load_streaming`], on this thread and on whichever workers of
/// `sched` are free to help, if `len` is at least [`SPLIT_BYTES`] and the
/// some worker is idle.
///
/// # Safety
///
/// As [`access::load_streaming`]: `src` window memory under its gate, `dst`
/// nobody else's, both valid for `len` bytes until this returns.
pub(crate) unsafe fn load(
    sched: &Scheduler,
    rank: WorldRank,
    dst: *mut u8,
    src: *const u8,
    len: usize,
) {
    // Only idle workers help: where every worker has ranks to run (targets
    // spread over them), pieces add the origin's wait for a busy helper's
    // piece and nothing else (redistribute 160:20 with cyclic placement,
    // RMA2 B 5.8 -> 6.4 ms when every worker was asked).
    let idle = if len < SPLIT_BYTES {
        0
    } else {
        sched.idle_workers()
    };
    if idle == 0 {
        // SAFETY: the caller's contract.
        unsafe { access::load_streaming(dst, src, len) };
        return;
    }
    let pieces = len.div_ceil(PIECE_BYTES);
    let copy = Arc::new(SplitCopy {
        dst,
        src,
        len,
        pieces,
        next: AtomicUsize::new(0),
        done: AtomicUsize::new(0),
    });
    let helpers = idle.min(pieces - 1);
    sched.push_micro((0..helpers).map(|_| {
        let copy = Arc::clone(&copy);
        MicroTask {
            rank,
            run: Box::new(move || copy.work()),
        }
    }));
    copy.work();
    let mut spins = 0u32;
    while copy.done.load(Ordering::Acquire) < pieces {
        spins += 1;
        if spins < 1 << 12 {
            std::hint::spin_loop();
        } else {
            // A helper's thread was preempted mid-piece (a shared host).
            std::thread::yield_now();
        }
    }
}
