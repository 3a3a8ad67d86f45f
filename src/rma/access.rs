//! How an origin touches a target's window memory: copies that race
//! without undefined behaviour, and the gate that lets a failing owner
//! take its memory back.
//!
//! ## Copies
//!
//! Several origins may access one target's segment at once (shared locks,
//! `lock_all`, fence epochs), and MPI calls conflicting accesses erroneous
//! but not undefined: the program gets some value. In Rust a data race on
//! plain memory is undefined behaviour, so every access to window memory
//! goes through relaxed atomic loads and stores: machine words where the
//! window address is word-aligned, single bytes at the unaligned head and
//! tail. On x86-64 and aarch64 those compile to plain moves (the copy is
//! not vectorised: a 1 MiB copy costs about what a word loop costs). Two
//! racing accesses that split one word differently (one by bytes, the other
//! whole) are mixed-size atomics, which Rust's model leaves unspecified;
//! this only happens in programs MPI calls erroneous (conflicting
//! accesses in one epoch), and the hardware makes each byte some written
//! value.
//!
//! The origin's own buffer is the caller's (borrowed exclusively or
//! shared, as the operation needs), so it is read or written plainly.
//!
//! ## The gate
//!
//! Each segment has a [`Gate`]: an origin enters before it touches the
//! segment and leaves after (a copy or an accumulate, which never blocks),
//! and the owner closes it before its memory goes away (free, or an
//! unwinding rank) and waits for the accesses in progress. After the close
//! no access starts: an origin that finds the gate closed gets an error
//! and touches nothing. This is what keeps a rank that panics, or is
//! unwound when a job fails, from leaving a peer writing into its dead
//! stack.
//!
//! ## Memory ordering
//!
//! `enter` is Acquire and `leave` Release on the gate's word, so the
//! owner's drain (Acquire) sees every access that ended. Visibility between
//! origins and targets is the epochs' business (locks, barriers and counters
//! in `mod.rs` are Release/Acquire pairs); the copies themselves are Relaxed.

use std::sync::atomic::{AtomicU32, AtomicU8, AtomicUsize, Ordering};

const WORD: usize = std::mem::size_of::<usize>();
const CLOSED: u32 = 1 << 31;

/// Accesses in progress to one segment, and whether it is closed.
#[derive(Debug, Default)]
pub(crate) struct Gate(AtomicU32);

impl Gate {
    /// Starts an access; `false` (nothing held) if the owner closed the gate.
    #[inline]
    pub(crate) fn enter(&self) -> bool {
        if self.0.fetch_add(1, Ordering::Acquire) & CLOSED == 0 {
            return true;
        }
        self.0.fetch_sub(1, Ordering::Release);
        false
    }

    /// Ends an access started by a successful [`enter`](Self::enter).
    #[inline]
    pub(crate) fn leave(&self) {
        self.0.fetch_sub(1, Ordering::Release);
    }

    /// Refuses every later access and waits (spinning: accesses never
    /// block, and this must also work while unwinding) for those in
    /// progress.
    pub(crate) fn close_and_drain(&self) {
        self.0.fetch_or(CLOSED, Ordering::AcqRel);
        while self.0.load(Ordering::Acquire) & !CLOSED != 0 {
            std::hint::spin_loop();
        }
    }
}

/// Copies `len` bytes from the caller's memory at `src` into window memory
/// at `dst`.
///
/// # Safety
///
/// `src` valid for reads of `len` bytes that nobody writes meanwhile; `dst`
/// valid for `len` bytes of window memory that is only accessed through
/// this module's functions while the copy runs (the segment's gate is held).
#[inline]
pub(crate) unsafe fn store(dst: *mut u8, src: *const u8, len: usize) {
    if len == WORD && dst.align_offset(WORD) == 0 {
        // One aligned word (a run of a strided datatype, a `u64`): no
        // head or tail.
        // SAFETY: `dst` is word-aligned and the word is the caller's
        // window memory; the source word is read unaligned from the
        // caller's memory.
        unsafe {
            let word = std::ptr::read_unaligned(src as *const usize);
            AtomicUsize::from_ptr(dst as *mut usize).store(word, Ordering::Relaxed);
        }
        return;
    }
    let mut i = 0;
    let head = dst.align_offset(WORD).min(len);
    while i < head {
        // SAFETY: `i < len`: inside both ranges (the caller's contract);
        // a byte is always aligned for `AtomicU8`.
        unsafe { AtomicU8::from_ptr(dst.add(i)).store(*src.add(i), Ordering::Relaxed) };
        i += 1;
    }
    while i + WORD <= len {
        // SAFETY: [1] `dst + i` is word-aligned (past the head) and the word
        // lies inside the range; [2] the source word is read unaligned from
        // the caller's memory, which nobody writes meanwhile.
        unsafe {
            let word = std::ptr::read_unaligned(src.add(i) as *const usize);
            AtomicUsize::from_ptr(dst.add(i) as *mut usize).store(word, Ordering::Relaxed);
        }
        i += WORD;
    }
    while i < len {
        // SAFETY: as for the head.
        unsafe { AtomicU8::from_ptr(dst.add(i)).store(*src.add(i), Ordering::Relaxed) };
        i += 1;
    }
}

/// Copies `len` bytes of window memory at `src` into the caller's memory at
/// `dst`.
///
/// # Safety
///
/// As [`store`], with the roles swapped: `dst` is the caller's, valid for
/// writes of `len` bytes that nobody else accesses meanwhile.
#[inline]
pub(crate) unsafe fn load(dst: *mut u8, src: *const u8, len: usize) {
    if len == WORD && src.align_offset(WORD) == 0 {
        // SAFETY: as in `store`'s one-word case, roles swapped.
        unsafe {
            let word = AtomicUsize::from_ptr(src as *mut usize).load(Ordering::Relaxed);
            std::ptr::write_unaligned(dst as *mut usize, word);
        }
        return;
    }
    let mut i = 0;
    let head = src.align_offset(WORD).min(len);
    while i < head {
        // SAFETY: inside both ranges; bytes are aligned for `AtomicU8`.
        unsafe { *dst.add(i) = AtomicU8::from_ptr(src.add(i) as *mut u8).load(Ordering::Relaxed) };
        i += 1;
    }
    while i + WORD <= len {
        // SAFETY: `src + i` is word-aligned past the head and the word is in
        // range; the destination word is the caller's, written unaligned.
        unsafe {
            let word = AtomicUsize::from_ptr(src.add(i) as *mut usize).load(Ordering::Relaxed);
            std::ptr::write_unaligned(dst.add(i) as *mut usize, word);
        }
        i += WORD;
    }
    while i < len {
        // SAFETY: as for the head.
        unsafe { *dst.add(i) = AtomicU8::from_ptr(src.add(i) as *mut u8).load(Ordering::Relaxed) };
        i += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_round_trip_at_every_alignment_and_length() {
        let src: Vec<u8> = (0..64u8).collect();
        for offset in 0..WORD {
            for len in 0..40 {
                let mut window = vec![0u8; 64];
                // SAFETY: both ranges are inside their vectors.
                unsafe { store(window.as_mut_ptr().add(offset), src.as_ptr(), len) };
                assert_eq!(&window[offset..offset + len], &src[..len]);
                assert!(window[..offset].iter().all(|&b| b == 0));
                assert!(window[offset + len..].iter().all(|&b| b == 0));
                let mut back = vec![0u8; len];
                // SAFETY: as above.
                unsafe { load(back.as_mut_ptr(), window.as_ptr().add(offset), len) };
                assert_eq!(back, &src[..len]);
            }
        }
    }

    #[test]
    fn a_closed_gate_refuses_and_drains() {
        let gate = Gate::default();
        assert!(gate.enter());
        gate.leave();
        gate.close_and_drain();
        assert!(!gate.enter());
        // The refused access left nothing behind: draining again returns.
        gate.close_and_drain();
    }
}
