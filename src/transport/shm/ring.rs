//! A single-producer single-consumer byte ring, and its wake-up protocol.
//!
//! The ring lives in shared memory: its [`Control`] (two cache lines, the
//! consumer's `head` and the producer's `tail`, byte positions that only
//! grow) and its data ([`Bytes`]) are in the receiver's segment, written by
//! one sender process and read by the receiver. Bytes leave in the order
//! they were written, so frames of one pair stay FIFO.
//!
//! ## Design note: no lost wake-up without a fence
//!
//! A receiver that goes to sleep must not miss bytes written while it was
//! deciding to sleep, and a producer must not pay a system call per
//! message while the receiver is awake. Each flag shares its atomic word
//! with the position the other side moves: the consumer's "sleeping" is
//! the top bit of `tail`, the producer's "waiting for room" the top bit of
//! `head`. Setting a flag (`fetch_or`) and publishing a position
//! (`fetch_add`) are read-modify-writes of the same word, so one comes
//! first in its modification order: either the consumer's `fetch_or` sees
//! the new tail (and does not sleep), or the producer's `fetch_add` sees
//! the flag (and wakes the consumer). Likewise for room. The model in
//! `loom-tests/src/shm_ring_models.rs` checks this very file.

use crate::sync::{AtomicU64, Ordering};

/// The consumer sleeps (top bit of `tail`).
pub(crate) const SLEEPING: u64 = 1 << 63;
/// The producer waits for room (top bit of `head`).
pub(crate) const WAITING: u64 = 1 << 63;
/// The position bits of `head` and `tail`.
const POSITION: u64 = !(1 << 63);

/// One atomic word on its own cache line.
#[repr(C, align(64))]
#[derive(Debug)]
pub(crate) struct Line(pub(crate) AtomicU64);

/// The ring's positions: bytes read so far (`head`) and written so far
/// (`tail`), each with the other side's flag in its top bit.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct Control {
    pub(crate) tail: Line,
    pub(crate) head: Line,
}

/// The ring's data area.
///
/// # Safety
///
/// An implementation copies exactly the bytes asked; the ring protocol
/// guarantees that the producer writes only bytes the consumer is done
/// with and the consumer reads only bytes the producer published.
pub(crate) unsafe trait Bytes {
    /// Bytes in the ring.
    fn capacity(&self) -> usize;

    /// Copies `len` bytes from `src` to offset `at` (`at + len` at most the
    /// capacity).
    ///
    /// # Safety
    ///
    /// `src` is valid for reads of `len` bytes; no one else accesses those
    /// bytes of the ring meanwhile.
    unsafe fn put(&self, at: usize, src: *const u8, len: usize);

    /// Copies `len` bytes from offset `at` to `dst`.
    ///
    /// # Safety
    ///
    /// `dst` is valid for writes of `len` bytes; no one writes those bytes
    /// of the ring meanwhile.
    unsafe fn get(&self, at: usize, dst: *mut u8, len: usize);
}

/// The producer's side of a ring (one thread at a time).
#[derive(Debug)]
pub(crate) struct Producer<'a, B> {
    pub(crate) control: &'a Control,
    pub(crate) bytes: &'a B,
}

/// The consumer's side of a ring (one thread at a time).
#[derive(Debug)]
pub(crate) struct Consumer<'a, B> {
    pub(crate) control: &'a Control,
    pub(crate) bytes: &'a B,
}

/// Copies `len` bytes between a linear buffer and the ring from ring
/// position `pos`, in at most two pieces (the ring wraps).
fn pieces(capacity: usize, pos: u64, len: usize) -> [(usize, usize, usize); 2] {
    let at = (pos % capacity as u64) as usize;
    let first = len.min(capacity - at);
    [(at, 0, first), (0, first, len - first)]
}

impl<B: Bytes> Producer<'_, B> {
    /// Writes as much of `src` (`len` bytes) as there is room for; returns
    /// how many bytes it wrote and whether the consumer sleeps (then the
    /// caller wakes it).
    ///
    /// # Safety
    ///
    /// `src` is valid for reads of `len` bytes; this is the ring's only
    /// producer.
    pub(crate) unsafe fn write(&self, src: *const u8, len: usize) -> (usize, bool) {
        let capacity = self.bytes.capacity();
        let tail = self.control.tail.0.load(Ordering::Relaxed) & POSITION;
        // Acquire: the consumer's reads of the bytes we overwrite are done.
        let head = self.control.head.0.load(Ordering::Acquire) & POSITION;
        let free = capacity.saturating_sub(tail.wrapping_sub(head) as usize);
        let n = free.min(len);
        if n == 0 {
            return (0, false);
        }
        for (at, from, count) in pieces(capacity, tail, n) {
            if count > 0 {
                // SAFETY: `from + count` ≤ `n` ≤ `len` bytes of `src`; the
                // ring bytes from `tail` on for `n` ≤ `free` are the
                // producer's alone until published below.
                unsafe { self.bytes.put(at, src.add(from), count) };
            }
        }
        // Release: the bytes are there before the consumer sees the tail.
        let before = self.control.tail.0.fetch_add(n as u64, Ordering::Release);
        (n, before & SLEEPING != 0)
    }

    /// There is no room: tells the consumer to wake this side when it
    /// frees some. Returns `true` if room appeared meanwhile (write again
    /// instead of waiting).
    pub(crate) fn want_room(&self) -> bool {
        let tail = self.control.tail.0.load(Ordering::Relaxed) & POSITION;
        let head = self.control.head.0.fetch_or(WAITING, Ordering::AcqRel) & POSITION;
        (tail.wrapping_sub(head) as usize) < self.bytes.capacity()
    }
}

/// Bytes a ring holds that its consumer can read, or an error if the
/// positions are impossible (the shared memory was scribbled on).
fn readable(tail: u64, head: u64, capacity: usize) -> Result<usize, &'static str> {
    let n = (tail & POSITION).wrapping_sub(head & POSITION);
    if n > capacity as u64 {
        return Err("the shared ring's positions are corrupt");
    }
    Ok(n as usize)
}

impl<B: Bytes> Consumer<'_, B> {
    /// Bytes ready to read.
    pub(crate) fn available(&self) -> Result<usize, &'static str> {
        let tail = self.control.tail.0.load(Ordering::Acquire);
        let head = self.control.head.0.load(Ordering::Relaxed);
        readable(tail, head, self.bytes.capacity())
    }

    /// Reads up to `len` bytes into `dst`; returns how many it read and
    /// whether the producer waits for room (then the caller wakes it).
    ///
    /// # Safety
    ///
    /// `dst` is valid for writes of `len` bytes; this is the ring's only
    /// consumer.
    pub(crate) unsafe fn read(
        &self,
        dst: *mut u8,
        len: usize,
    ) -> Result<(usize, bool), &'static str> {
        let capacity = self.bytes.capacity();
        // Acquire: the bytes up to the tail are there.
        let tail = self.control.tail.0.load(Ordering::Acquire);
        let head = self.control.head.0.load(Ordering::Relaxed) & POSITION;
        let n = readable(tail, head, capacity)?.min(len);
        if n == 0 {
            return Ok((0, false));
        }
        for (at, to, count) in pieces(capacity, head, n) {
            if count > 0 {
                // SAFETY: `to + count` ≤ `n` ≤ `len` bytes of `dst`; the ring
                // bytes from `head` on for `n` were published by the
                // producer, which does not write them until `head` passes.
                unsafe { self.bytes.get(at, dst.add(to), count) };
            }
        }
        // Release: our reads are done before the producer reuses the room.
        let before = self.control.head.0.fetch_add(n as u64, Ordering::Release);
        let waiting = before & WAITING != 0;
        if waiting {
            self.control.head.0.fetch_and(!WAITING, Ordering::Relaxed);
        }
        Ok((n, waiting))
    }

    /// About to sleep: sets the sleeping flag. Returns `false` if bytes
    /// arrived (do not sleep; call [`awake`](Self::awake) all the same).
    pub(crate) fn sleep(&self) -> bool {
        let tail = self.control.tail.0.fetch_or(SLEEPING, Ordering::AcqRel);
        let head = self.control.head.0.load(Ordering::Relaxed);
        (tail & POSITION) == (head & POSITION)
    }

    /// Awake again: producers need not wake this side.
    pub(crate) fn awake(&self) {
        self.control.tail.0.fetch_and(!SLEEPING, Ordering::Relaxed);
    }
}
