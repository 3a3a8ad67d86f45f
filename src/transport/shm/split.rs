//! A large copy between two processes shared by both: the receiver reads
//! pieces of the sender's buffer with `process_vm_readv` while the sender
//! writes other pieces into the receiver's with `process_vm_writev`.
//!
//! ## Why the sender
//!
//! On this 2-vCPU host one `process_vm_readv` of 16 MiB took 1.4–1.9 ms;
//! the receiver reading half while the sender wrote the other half took
//! 0.9–0.97 ms, where two threads of the receiver reading halves (the
//! sender asleep) took 1.0–2.0 ms, median 1.9 (`benches/cma_split.c`, its
//! mode 1 with a sleeping sender). The sender's rank waits for the data to
//! be read anyway: its process's core is the one to use.
//!
//! ## Protocol
//!
//! Each inbound ring of a receiver's segment has a [`Split`] line beside
//! its control, which the receiver owns and the ring's sender may join:
//!
//! 1. the receiver numbers the copy (`generation`, never 0), zeroes
//!    `copied`, and publishes `claim = generation << 40` (offset 0), then
//!    asks the sender with a record through its ring;
//! 2. both take pieces by compare-and-swap on `claim` (a piece is
//!    [`PIECE`] bytes at the offset in the low 40 bits), only while its
//!    generation is the one they copy for, and add what each piece copied
//!    to `copied` after copying it;
//! 3. the sender flags `busy = generation` *before* each claim and clears
//!    it after its piece (both `SeqCst`, as the receiver's last claim and
//!    its reads of `busy`): a receiver that has seen every piece claimed
//!    and `busy` clear knows the sender copies nothing more for this copy;
//! 4. the receiver then has the whole buffer if `copied` is the length;
//!    otherwise a piece of the sender's failed, and it reads the whole
//!    buffer again itself (the same bytes).
//!
//! A sender that never answers (asleep, a ring full, a job ending) costs
//! nothing: the receiver claims every piece. A sender that dies with
//! `busy` set is seen by its process being gone (the receiver's wait
//! checks it), and the copy fails as a read from a lost peer does.

use crate::sync::{AtomicU64, Ordering};

/// Bytes of one piece: whoever finishes first waits for at most one piece
/// of the other (~30–100 µs here).
pub(crate) const PIECE: u64 = 256 * 1024;
/// Bits of `claim` that hold the offset (a payload is below 2^40 bytes).
const OFFSET_BITS: u32 = 40;
const OFFSET_MASK: u64 = (1 << OFFSET_BITS) - 1;
/// Generations wrap within the 24 bits above the offset.
const GENERATIONS: u64 = 1 << (64 - OFFSET_BITS);

/// The shared words of one inbound ring's split copies, on a cache line
/// of their own in the receiver's segment (zero at first).
#[repr(C, align(64))]
#[derive(Debug, Default)]
pub(crate) struct Split {
    /// The generation (high 24 bits) and the next offset to claim.
    claim: AtomicU64,
    /// Bytes copied so far for the current generation.
    copied: AtomicU64,
    /// The sender's generation while it may hold a piece, else 0.
    busy: AtomicU64,
}

/// Takes the next piece of copy `generation` of `len` bytes: its offset
/// and length, or `None` when every piece is taken or the copy is over.
fn claim(split: &Split, generation: u64, len: u64) -> Option<(u64, u64)> {
    let mut now = split.claim.load(Ordering::SeqCst);
    loop {
        let at = now & OFFSET_MASK;
        if now >> OFFSET_BITS != generation || at >= len {
            return None;
        }
        let n = PIECE.min(len - at);
        match split
            .claim
            .compare_exchange(now, now + n, Ordering::SeqCst, Ordering::SeqCst)
        {
            Ok(_) => return Some((at, n)),
            Err(seen) => now = seen,
        }
    }
}

/// The receiver's side: one copy of `len` bytes (below 2^40), the pieces
/// copied with `read(offset, n)`.
pub(crate) struct Receiver<'a> {
    split: &'a Split,
    generation: u64,
    len: u64,
}

impl<'a> Receiver<'a> {
    /// Publishes a new copy of `len` bytes on `split` (whose receiver this
    /// process is; one copy at a time per split): the generation to name in
    /// the request to the sender.
    pub(crate) fn start(split: &'a Split, len: u64) -> Receiver<'a> {
        assert!(len <= OFFSET_MASK, "a split copy of {len} bytes");
        let last = split.claim.load(Ordering::Relaxed) >> OFFSET_BITS;
        let generation = match (last + 1) % GENERATIONS {
            0 => 1,
            g => g,
        };
        split.copied.store(0, Ordering::Relaxed);
        // SeqCst: after `copied` is zero, as the sender's claims see it.
        split
            .claim
            .store(generation << OFFSET_BITS, Ordering::SeqCst);
        Receiver {
            split,
            generation,
            len,
        }
    }

    /// The copy's generation (for the request record).
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// Copies pieces with `read` until none is left to claim, then waits
    /// (calling `alive` now and then, which says whether the sender's
    /// process is still there) until the sender holds none; returns whether
    /// every byte was copied by one side or the other. An error of `read`
    /// ends the copy: it stops the sender's claims and, once the sender
    /// holds no piece, is returned.
    pub(crate) fn copy(
        self,
        mut read: impl FnMut(u64, u64) -> Result<(), String>,
        mut alive: impl FnMut() -> bool,
    ) -> Result<bool, String> {
        let mut result = Ok(());
        while let Some((at, n)) = claim(self.split, self.generation, self.len) {
            if let Err(why) = read(at, n) {
                result = Err(why);
                break;
            }
            self.split.copied.fetch_add(n, Ordering::SeqCst);
        }
        // Nothing more to claim, for either side (after an error too).
        self.split.claim.store(
            (self.generation << OFFSET_BITS) | OFFSET_MASK,
            Ordering::SeqCst,
        );
        let mut spins = 0u32;
        while self.split.busy.load(Ordering::SeqCst) == self.generation {
            spins = spins.wrapping_add(1);
            if spins % 1024 == 0 {
                if !alive() {
                    return Err("its process ended during the copy".into());
                }
                #[cfg(not(loom))]
                std::thread::yield_now();
            }
            crate::sync::spin_loop();
        }
        result?;
        Ok(self.split.copied.load(Ordering::SeqCst) == self.len)
    }
}

/// The sender's side: joins copy `generation` of `len` bytes on `split`
/// (in the receiver's segment) with `write(offset, n)` until no piece is
/// left; stops at the first failed piece (the receiver then copies
/// everything again). Returns the bytes this side copied.
pub(crate) fn help(
    split: &Split,
    generation: u64,
    len: u64,
    mut write: impl FnMut(u64, u64) -> bool,
) -> u64 {
    if generation == 0 || generation >= GENERATIONS || len > OFFSET_MASK {
        return 0;
    }
    let mut mine = 0;
    loop {
        // Flagged before the claim: a receiver that sees it clear after
        // its last claim knows no piece of ours is under way.
        split.busy.store(generation, Ordering::SeqCst);
        let Some((at, n)) = claim(split, generation, len) else {
            split.busy.store(0, Ordering::SeqCst);
            return mine;
        };
        let ok = write(at, n);
        if ok {
            split.copied.fetch_add(n, Ordering::SeqCst);
            mine += n;
        }
        split.busy.store(0, Ordering::SeqCst);
        if !ok {
            return mine;
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    /// Marks each byte of a `len`-byte copy once per copier; fails if a
    /// byte is copied twice or never, whichever side runs.
    #[test]
    fn every_piece_is_copied_once_by_one_side() {
        for len in [1, PIECE - 1, PIECE, 10 * PIECE + 17] {
            let split = Arc::new(Split::default());
            let marks: Arc<Vec<std::sync::atomic::AtomicU8>> =
                Arc::new((0..len).map(|_| Default::default()).collect());
            let receiver = Receiver::start(&split, len);
            let generation = receiver.generation();
            let started = Arc::new(AtomicBool::new(false));
            let helper = {
                let (split, marks, started) = (split.clone(), marks.clone(), started.clone());
                std::thread::spawn(move || {
                    started.store(true, std::sync::atomic::Ordering::SeqCst);
                    help(&split, generation, len, |at, n| {
                        for i in at..at + n {
                            marks[i as usize].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                        true
                    })
                })
            };
            while !started.load(std::sync::atomic::Ordering::SeqCst) {}
            let whole = receiver
                .copy(
                    |at, n| {
                        for i in at..at + n {
                            marks[i as usize].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                        Ok(())
                    },
                    || true,
                )
                .unwrap();
            let theirs = helper.join().unwrap();
            assert!(whole, "{len} bytes");
            assert!(theirs <= len);
            assert!(marks
                .iter()
                .all(|m| m.load(std::sync::atomic::Ordering::Relaxed) == 1));
        }
    }

    /// A sender's failed piece leaves `copied` short: the receiver is told
    /// to copy again. A stale request (an older generation) copies nothing.
    #[test]
    fn a_failed_or_stale_help_leaves_the_copy_to_the_receiver() {
        let split = Split::default();
        let len = 4 * PIECE;
        let receiver = Receiver::start(&split, len);
        let generation = receiver.generation();
        let theirs = help(&split, generation, len, |_, _| false);
        assert_eq!(theirs, 0);
        assert!(!receiver.copy(|_, _| Ok(()), || true).unwrap());
        let next = Receiver::start(&split, len);
        assert_ne!(next.generation(), generation);
        assert_eq!(help(&split, generation, len, |_, _| true), 0, "stale");
        assert!(next.copy(|_, _| Ok(()), || true).unwrap());
        assert_eq!(help(&split, 0, len, |_, _| true), 0);
    }

    /// A receiver whose read fails stops the sender's claims and returns
    /// the error; a sender gone while flagged busy ends the wait.
    #[test]
    fn a_failed_read_or_a_dead_sender_ends_the_copy() {
        let split = Split::default();
        let receiver = Receiver::start(&split, 8 * PIECE);
        let generation = receiver.generation();
        let err = receiver.copy(|_, _| Err("gone".into()), || true);
        assert_eq!(err.unwrap_err(), "gone");
        assert_eq!(help(&split, generation, 8 * PIECE, |_, _| true), 0);

        let receiver = Receiver::start(&split, 8 * PIECE);
        // A sender that claimed and died: busy stays set.
        split.busy.store(receiver.generation(), Ordering::SeqCst);
        let err = receiver.copy(|_, _| Ok(()), || false);
        assert!(err.unwrap_err().contains("ended"));
    }
}
