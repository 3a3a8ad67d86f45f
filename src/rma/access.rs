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
//! not vectorised: a 1 MiB copy costs about what a word loop costs). A get
//! of at least [`STREAM_BYTES`] whose two sides are aligned alike stores
//! into the origin's buffer with non-temporal stores on x86-64
//! ([`load_streaming`]): the loads stay atomic, the stores are to
//! memory only the caller touches, and skipping the read-for-ownership of
//! the destination lines is what `memcpy` gains on large copies. Two
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

/// [`load`] for a get's data, which the origin keeps rather than
/// re-reads at once (an accumulate's scratch uses [`load`]): from
/// [`STREAM_BYTES`] on, with the two sides aligned alike, the whole words
/// go through [`load_words_streaming`].
///
/// # Safety
///
/// As [`load`].
#[inline]
pub(crate) unsafe fn load_streaming(dst: *mut u8, src: *const u8, len: usize) {
    let head = src.align_offset(WORD).min(len);
    let words = (len - head) / WORD;
    if words * WORD < STREAM_BYTES || dst.wrapping_add(head).align_offset(WORD) != 0 {
        // SAFETY: the caller's contract.
        unsafe { load(dst, src, len) };
        return;
    }
    let body = words * WORD;
    // SAFETY: the head, the words and the tail partition the two ranges
    // (the caller's contract); `src + head` and `dst + head` are
    // word-aligned.
    unsafe {
        load(dst, src, head);
        load_words_streaming(dst.add(head), src.add(head), words);
        load(
            dst.add(head + body),
            src.add(head + body),
            len - head - body,
        );
    }
}

/// Copies from this many bytes on ([`load_streaming`]) go through
/// [`load_words_streaming`]: a copy that large is mostly a trip to memory,
/// where skipping the destination's read-for-ownership pays; below it the
/// data is likely cached and a streaming store would evict it.
pub(crate) const STREAM_BYTES: usize = 256 << 10;

/// Copies `words` whole words of window memory at `src` into the caller's
/// memory at `dst`, both word-aligned: relaxed atomic loads (plain moves),
/// eight to a 64-byte line, and non-temporal stores (`movnti`), which
/// write whole lines without reading them first: on a copy out of cache
/// this matches `memcpy` (measured on the 2-core VM, 0.4 to 3 MiB pieces
/// of a 256 MiB region: 4.0 GB/s against 3.7 for `memcpy` and 3.1 for the
/// word loop). The stores are the caller's memory, which nobody else
/// accesses, so they need not be atomic; a closing `sfence` orders them
/// before whatever the caller does next (the epoch's Release that makes
/// the data visible to others).
///
/// # Safety
///
/// `src` valid for reads and `dst` for writes of `words * WORD` bytes, both
/// word-aligned; `src` is window memory under its gate, `dst` nobody else's.
#[cfg(target_arch = "x86_64")]
#[inline(never)]
unsafe fn load_words_streaming(dst: *mut u8, src: *const u8, words: usize) {
    use std::arch::x86_64::{_mm_sfence, _mm_stream_si64};
    let (dst, src) = (dst as *mut i64, src as *const usize);
    let mut k = 0;
    while k + 8 <= words {
        for j in k..k + 8 {
            // SAFETY: word `j < words` of both ranges, aligned (the
            // caller's contract); the load is atomic (window memory may be
            // written by a racing origin), the store is to the caller's
            // own memory.
            unsafe {
                let word = AtomicUsize::from_ptr(src.add(j) as *mut usize).load(Ordering::Relaxed);
                _mm_stream_si64(dst.add(j), word as i64);
            }
        }
        k += 8;
    }
    while k < words {
        // SAFETY: as above.
        unsafe {
            let word = AtomicUsize::from_ptr(src.add(k) as *mut usize).load(Ordering::Relaxed);
            _mm_stream_si64(dst.add(k), word as i64);
        }
        k += 1;
    }
    // Non-temporal stores are weakly ordered: fence them before the
    // caller's next (release) store.
    // SAFETY: SSE is part of the x86-64 baseline.
    unsafe { _mm_sfence() };
}

/// Elsewhere, the word loop.
///
/// # Safety
///
/// As the x86-64 version.
#[cfg(not(target_arch = "x86_64"))]
unsafe fn load_words_streaming(dst: *mut u8, src: *const u8, words: usize) {
    for j in 0..words {
        // SAFETY: word `j < words` of both aligned ranges.
        unsafe {
            let word =
                AtomicUsize::from_ptr(src.add(j * WORD) as *mut usize).load(Ordering::Relaxed);
            (dst.add(j * WORD) as *mut usize).write(word);
        }
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
    fn streaming_copies_keep_unaligned_heads_and_tails() {
        // Lengths around the streaming threshold, from every source and
        // destination offset: the head and tail bytes, the streamed words
        // and the words after them all land, nothing around them moves.
        // Word-backed buffers: equal offsets take the streamed path after
        // the head, different ones (mod a word) the word loop.
        let n = STREAM_BYTES + 4 * WORD + 64;
        let words: Vec<u64> = (0..(n + 2 * WORD) as u64 / 8)
            .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15))
            .collect();
        // SAFETY: a `u64` slice seen as its bytes.
        let window = unsafe { std::slice::from_raw_parts(words.as_ptr() as *const u8, n) };
        for len in [STREAM_BYTES - 1, STREAM_BYTES, STREAM_BYTES + 9, n - WORD] {
            for src_off in [0, 1, 3, WORD - 1] {
                for dst_off in [0, 1, 3, 5, WORD - 1] {
                    let mut out = vec![!0u64; (len + 2 * WORD) / 8 + 1];
                    let bytes = out.len() * 8;
                    let out_ptr = out.as_mut_ptr() as *mut u8;
                    // SAFETY: both ranges are inside their vectors.
                    unsafe {
                        load_streaming(out_ptr.add(dst_off), window.as_ptr().add(src_off), len)
                    };
                    // SAFETY: as above, read back as bytes.
                    let out = unsafe { std::slice::from_raw_parts(out_ptr, bytes) };
                    assert!(
                        out[dst_off..dst_off + len] == window[src_off..src_off + len],
                        "len {len}, offsets {src_off}/{dst_off}"
                    );
                    assert!(out[..dst_off].iter().all(|&b| b == 0xFF));
                    assert!(out[dst_off + len..].iter().all(|&b| b == 0xFF));
                }
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
