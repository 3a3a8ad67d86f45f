//! Large copies shared with idle workers.
//!
//! In one process a message's rendezvous and an RMA get are one CPU copy,
//! made by the rank that matches or reads. Its peers often wait meanwhile
//! (the other side of a ping-pong; the sources of a redistribution that
//! shrinks to a few ranks, all on one worker), so on a job whose workers
//! have a CPU each, other workers idle while one core's `memcpy` bandwidth
//! bounds the copy. A copy of at least [`Cut::from`] bytes is cut into
//! pieces that idle workers claim (micro-tasks) while the rank claims them
//! too; only idle workers are asked, since a busy one would make the rank
//! wait for its piece.
//!
//! The rank never parks (a get holds its target's gate): once no piece is
//! left to claim it spins for the pieces helpers are copying, one each at
//! most. The pieces live behind an `Arc`: a helper that runs after every
//! piece was claimed finds none and touches no buffer, and the rank returns
//! only once every claimed piece is copied.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::micro::MicroTask;
use super::Scheduler;
use crate::identity::WorldRank;

/// How a caller cuts its copies: from which size, in pieces of which size.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cut {
    /// Copies at least this long are shared.
    pub(crate) from: usize,
    /// Bytes of one piece: much more than claiming it and waking a worker
    /// cost, small enough that the rank's last wait for a helper is short.
    pub(crate) piece: usize,
}

/// A copy of `len` bytes from `src` to `dst`, for pieces (the caller's own
/// kind: `memcpy`, or a streaming copy out of a window).
pub(crate) type CopyFn = unsafe fn(dst: *mut u8, src: *const u8, len: usize);

/// One shared copy: who claims the next piece, and how many are done.
struct Pieces {
    dst: *mut u8,
    src: *const u8,
    len: usize,
    piece: usize,
    count: usize,
    copy: CopyFn,
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
            let at = i * self.piece;
            let n = self.piece.min(self.len - at);
            // SAFETY: piece `i` is this thread's alone (claimed once), inside
            // both buffers (`at + n` ≤ `len`); `copy`'s caller keeps them
            // valid and not overlapping until `done` reaches `count`, which
            // it cannot before this piece is counted below.
            unsafe { (self.copy)(self.dst.add(at), self.src.add(at), n) };
            // Release: the piece's bytes are there before it counts as done.
            self.done.fetch_add(1, Ordering::Release);
        }
    }
}

/// Copies `len` bytes from `src` to `dst` with `copy`, sharing the copy
/// with idle workers of `sched` where it is at least `cut.from` bytes, the
/// caller is a worker of `sched` whose fellows have a CPU each
/// (`worker::idle_workers_help`) and some are idle; else one `copy` on
/// this thread. `rank` is the caller's (micro-tasks name one).
///
/// # Safety
///
/// As `copy(dst, src, len)`: `src` readable and `dst` writable for `len`
/// bytes, not overlapping, and nothing else writes either until this
/// returns.
pub(crate) unsafe fn copy(
    sched: &Scheduler,
    rank: WorldRank,
    cut: Cut,
    dst: *mut u8,
    src: *const u8,
    len: usize,
    copy: CopyFn,
) {
    let count = len.div_ceil(cut.piece.max(1));
    let helpers = if len < cut.from || count < 2 || !super::worker::idle_workers_help(sched) {
        0
    } else {
        sched.idle_workers().min(count - 1)
    };
    if helpers == 0 {
        // SAFETY: the caller's contract.
        unsafe { copy(dst, src, len) };
        return;
    }
    let pieces = Arc::new(Pieces {
        dst,
        src,
        len,
        piece: cut.piece,
        count,
        copy,
        next: AtomicUsize::new(0),
        done: AtomicUsize::new(0),
    });
    sched.push_micro((0..helpers).map(|_| {
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
            // A helper's thread was preempted mid-piece: let it run.
            std::thread::yield_now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// # Safety
    ///
    /// As `ptr::copy_nonoverlapping`.
    unsafe fn memcpy(dst: *mut u8, src: *const u8, len: usize) {
        // SAFETY: the caller's contract.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, len) }
    }

    /// Pieces claimed by several threads cover the buffer exactly once, and
    /// a claim after the end copies nothing.
    #[test]
    fn pieces_cover_the_copy_once_whoever_claims_them() {
        let piece = 64 << 10;
        let len = 5 * piece + 12_345;
        let src: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        let mut dst = vec![0u8; len];
        let pieces = Pieces {
            dst: dst.as_mut_ptr(),
            src: src.as_ptr(),
            len,
            piece,
            count: len.div_ceil(piece),
            copy: memcpy,
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
