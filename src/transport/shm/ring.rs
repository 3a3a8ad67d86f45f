//! A single-producer single-consumer byte ring, and its wake-up protocol.
//!
//! The ring lives in shared memory: its [`Control`] and its data
//! ([`Bytes`]) are in the receiver's segment, written by one sender process
//! and read by the receiver. Bytes leave in the order they were written, so
//! frames of one pair stay FIFO.
//!
//! ## Chunks: the reader polls the data itself
//!
//! Each write is a chunk: an 8-byte length word, then the bytes, padded
//! to the area's [alignment](Bytes::align) (8, or a cache line in shared
//! memory: a small chunk then sits on one line, not across two). The producer writes the bytes, zeroes the length word of the
//! *next* chunk, and publishes the chunk by storing its length last
//! (Release). The consumer polls the length word at its position: 0 is
//! nothing yet, anything else a whole chunk whose bytes are there
//! (Acquire). A small message is then one cache line (or two) that moves
//! from the producer to the consumer, as MPICH's cells: no shared `tail`
//! that both sides write and read per message. The zeroed word ahead is
//! why a stale length from an earlier lap is never taken for a new one.
//!
//! The consumer publishes how far it read (`head`) after each read; the
//! producer reads it only when its last look leaves too little room.
//!
//! ## Design note: no lost wake-up without a fence
//!
//! A receiver that goes to sleep must not miss a chunk published while it
//! was deciding to sleep, and a producer must not pay a system call per
//! message while the receiver is awake. Both sides read-modify-write one
//! word, `sleep`: the producer after each chunk (`fetch_add(0)`, a locked
//! instruction on a line only it touches while the consumer is awake), the
//! consumer to set its "sleeping" flag. The two are ordered in the word's
//! modification order: either the consumer's `fetch_or` comes later and
//! synchronizes with the producer's (Release/Acquire), so it sees the
//! chunk and does not sleep, or the producer's comes later and sees the
//! flag (and wakes the consumer). For room, the producer's "waiting" flag
//! is the top bit of `head`, which the consumer moves with a `fetch_add`:
//! either it sees the flag, or the producer's `fetch_or` sees the room.
//! The model in `loom-tests/src/shm_ring_models.rs` checks this very file.

use crate::sync::{AtomicU64, Ordering};

/// The consumer sleeps (the `sleep` word).
pub(crate) const SLEEPING: u64 = 1;
/// The producer waits for room (top bit of `head`).
pub(crate) const WAITING: u64 = 1 << 63;
/// The position bits of `head`.
const POSITION: u64 = !(1 << 63);
/// Bytes of a chunk's length word (and the alignment of chunks).
const WORD: usize = 8;

/// One atomic word on its own cache line.
#[repr(C, align(64))]
#[derive(Debug)]
pub(crate) struct Line(pub(crate) AtomicU64);

/// Two atomic words on their own cache line.
#[repr(C, align(64))]
#[derive(Debug)]
pub(crate) struct Pair(pub(crate) AtomicU64, pub(crate) AtomicU64);

/// The ring's shared words, each group on its own cache line.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct Control {
    /// Bytes the consumer is done with (the position of the chunk it
    /// reads), with the producer's [`WAITING`] flag in its top bit.
    pub(crate) head: Line,
    /// The consumer's [`SLEEPING`] flag.
    pub(crate) sleep: Line,
    /// The producer's own: where its next chunk goes, and `head` as it
    /// last read it.
    pub(crate) producer: Pair,
    /// The consumer's own: bytes already read of the chunk at `head`.
    pub(crate) consumer: Pair,
}

/// The ring's data area.
///
/// # Safety
///
/// An implementation copies exactly the bytes asked,
/// [`offset`](Bytes::offset) is the position modulo the capacity, and
/// [`word`](Bytes::word) is the 8 bytes at that offset (the same memory
/// `put` and `get` reach); the ring protocol guarantees that the producer
/// writes only bytes the consumer is done with and the consumer reads only
/// bytes the producer published.
pub(crate) unsafe trait Bytes {
    /// Bytes in the ring (a multiple of 8).
    fn capacity(&self) -> usize;

    /// Where chunks start: a multiple of 8 that divides the capacity
    /// (shared memory aligns them on cache lines, so that a small chunk,
    /// its length word included, is one line that moves between cores).
    #[inline]
    fn align(&self) -> usize {
        WORD
    }

    /// The offset of ring position `pos`: `pos` modulo the capacity. An
    /// area whose capacity is a power of two masks instead (a division
    /// costs a dozen cycles or more, and a message takes several).
    #[inline]
    fn offset(&self, pos: u64) -> usize {
        (pos % self.capacity() as u64) as usize
    }

    /// A hint that the length word at offset `at` is read soon (no effect
    /// by default).
    #[inline]
    fn prefetch(&self, at: usize) {
        let _ = at;
    }

    /// The length word at offset `at` (a multiple of 8, below the capacity).
    fn word(&self, at: usize) -> &AtomicU64;

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

    /// The `len` bytes at offset `at` in place, where the ring can lend
    /// them (shared memory can; the loom model's cells cannot: `None`).
    ///
    /// # Safety
    ///
    /// No one writes those bytes while the slice lives.
    unsafe fn slice(&self, at: usize, len: usize) -> Option<&[u8]> {
        let _ = (at, len);
        None
    }
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
fn pieces<B: Bytes>(bytes: &B, pos: u64, len: usize) -> [(usize, usize, usize); 2] {
    let at = bytes.offset(pos);
    let first = len.min(bytes.capacity() - at);
    [(at, 0, first), (0, first, len - first)]
}

/// How far a chunk of `n` bytes moves the position: its length word and
/// its bytes, padded to the area's alignment.
fn advance<B: Bytes>(bytes: &B, n: usize) -> u64 {
    (WORD + n).next_multiple_of(bytes.align()) as u64
}

/// The most bytes a chunk may carry in an empty ring: the chunk and the
/// next one's zeroed length word (a whole aligned step) fit.
fn largest<B: Bytes>(bytes: &B) -> usize {
    bytes.capacity().saturating_sub(bytes.align() + WORD)
}

impl<B: Bytes> Producer<'_, B> {
    /// Bytes of payload a chunk at `tail` may carry if the consumer is at
    /// `head`.
    fn room(&self, tail: u64, head: u64) -> usize {
        let used = tail.wrapping_sub(head) as usize;
        let free = self.bytes.capacity().saturating_sub(used);
        // Positions move in aligned steps, so `free` is a multiple of the
        // alignment: a chunk of `free - align - WORD` bytes ends one step
        // short of the head, room for the next chunk's length word.
        let align = self.bytes.align();
        if free < align + 2 * WORD {
            0
        } else {
            (free - align - WORD) & !(WORD - 1)
        }
    }

    /// Writes as much of `src` (`len` bytes) as there is room for, as one
    /// chunk; returns how many bytes it wrote and whether the consumer
    /// sleeps (then the caller wakes it).
    ///
    /// # Safety
    ///
    /// `src` is valid for reads of `len` bytes; this is the ring's only
    /// producer.
    pub(crate) unsafe fn write(&self, src: *const u8, len: usize) -> (usize, bool) {
        // SAFETY: the caller's contract.
        unsafe { self.write_parts(&[(src, len)]) }
    }

    /// [`write`](Self::write) of the bytes of `parts` (pointer, length)
    /// one after the other, as one chunk: a frame's header and its payload
    /// from where they are, without first copying them into one buffer.
    ///
    /// # Safety
    ///
    /// Each part is valid for reads of its length; this is the ring's
    /// only producer.
    pub(crate) unsafe fn write_parts(&self, parts: &[(*const u8, usize)]) -> (usize, bool) {
        let len: usize = parts.iter().map(|&(_, n)| n).sum();
        if len == 0 {
            return (0, false);
        }
        let mine = &self.control.producer;
        let tail = mine.0.load(Ordering::Relaxed);
        let mut head = mine.1.load(Ordering::Relaxed);
        let mut room = self.room(tail, head);
        if room < len {
            // Acquire: the consumer's reads of the bytes we overwrite are done.
            head = self.control.head.0.load(Ordering::Acquire) & POSITION;
            mine.1.store(head, Ordering::Relaxed);
            room = self.room(tail, head);
        }
        let n = room.min(len);
        if n == 0 {
            return (0, false);
        }
        let first = self.bytes.offset(tail + WORD as u64);
        if n == len && first + n <= self.bytes.capacity() {
            // The common case, a whole chunk that does not wrap: each part
            // where it goes, without cutting it at the ring's end.
            let mut to = first;
            for &(src, part) in parts {
                if part > 0 {
                    // SAFETY: `src` is readable for `part` bytes (the
                    // caller's contract); the chunk's ring bytes (`n` ≤
                    // `room`, below the capacity) are the producer's alone
                    // until published below.
                    unsafe { self.bytes.put(to, src, part) };
                    to += part;
                }
            }
        } else {
            // SAFETY: the parts are readable (the caller's contract); the
            // `n` ≤ `room` bytes after the length word are the producer's.
            unsafe { self.write_cut(parts, tail + WORD as u64, n) };
        }
        let next = tail + advance(self.bytes, n);
        // The next chunk's length word (room checked): 0 until it is there.
        self.bytes
            .word(self.bytes.offset(next))
            .store(0, Ordering::Relaxed);
        // Release: the bytes (and the zero ahead) are there before the
        // consumer sees the length.
        self.bytes
            .word(self.bytes.offset(tail))
            .store(n as u64, Ordering::Release);
        mine.0.store(next, Ordering::Relaxed);
        // The other half of the consumer's `sleep` (see the module docs).
        let flags = self.control.sleep.0.fetch_add(0, Ordering::AcqRel);
        (n, flags & SLEEPING != 0)
    }

    /// Copies the first `n` bytes of `parts` to the ring from position
    /// `at`, cut where the ring wraps.
    ///
    /// # Safety
    ///
    /// As [`write_parts`](Self::write_parts); the `n` bytes from `at` are
    /// room the producer owns.
    unsafe fn write_cut(&self, parts: &[(*const u8, usize)], mut at: u64, n: usize) {
        let mut left = n;
        for &(src, part) in parts {
            let take = part.min(left);
            for (to, from, count) in pieces(self.bytes, at, take) {
                if count > 0 {
                    // SAFETY: `from + count` ≤ `take` ≤ the part's length;
                    // the ring bytes of this chunk (`n` ≤ `room`) are the
                    // producer's alone until `write_parts` publishes them.
                    unsafe { self.bytes.put(to, src.add(from), count) };
                }
            }
            at += take as u64;
            left -= take;
            if left == 0 {
                break;
            }
        }
    }

    /// There is no room: tells the consumer to wake this side when it
    /// frees some. Returns `true` if room appeared meanwhile (write again
    /// instead of waiting).
    pub(crate) fn want_room(&self) -> bool {
        let mine = &self.control.producer;
        let tail = mine.0.load(Ordering::Relaxed);
        let head = self.control.head.0.fetch_or(WAITING, Ordering::AcqRel) & POSITION;
        mine.1.store(head, Ordering::Relaxed);
        self.room(tail, head) > 0
    }
}

impl<B: Bytes> Consumer<'_, B> {
    /// The length of the chunk at `head`, 0 if none is there yet, or an
    /// error if it is impossible (the shared memory was scribbled on).
    fn chunk(&self, head: u64) -> Result<usize, &'static str> {
        // Acquire: the chunk's bytes are there.
        let len = self
            .bytes
            .word(self.bytes.offset(head))
            .load(Ordering::Acquire);
        if len > largest(self.bytes) as u64 {
            return Err("the shared ring's chunk lengths are corrupt");
        }
        Ok(len as usize)
    }

    /// Bytes ready to read (at least; those of the chunk under way).
    pub(crate) fn available(&self) -> Result<usize, &'static str> {
        let head = self.control.head.0.load(Ordering::Relaxed) & POSITION;
        let done = self.control.consumer.0.load(Ordering::Relaxed) as usize;
        let len = self.chunk(head)?;
        if done > len || (done > 0 && done == len) {
            return Err("the shared ring's positions are corrupt");
        }
        Ok(len - done)
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
        let start = self.control.head.0.load(Ordering::Relaxed) & POSITION;
        let mut head = start;
        let mut done = self.control.consumer.0.load(Ordering::Relaxed) as usize;
        let mut got = 0;
        while got < len {
            let chunk = self.chunk(head)?;
            if chunk == 0 {
                break;
            }
            if done >= chunk {
                return Err("the shared ring's positions are corrupt");
            }
            let n = (chunk - done).min(len - got);
            for (at, to, count) in pieces(self.bytes, head + (WORD + done) as u64, n) {
                if count > 0 {
                    // SAFETY: `got + to + count` ≤ `len` bytes of `dst`; the
                    // chunk's bytes were published by the producer, which
                    // does not write them until `head` passes them.
                    unsafe { self.bytes.get(at, dst.add(got + to), count) };
                }
            }
            got += n;
            done += n;
            if done == chunk {
                head += advance(self.bytes, chunk);
                done = 0;
            }
        }
        self.control
            .consumer
            .0
            .store(done as u64, Ordering::Relaxed);
        if head == start {
            return Ok((got, false));
        }
        Ok((got, self.release(head - start)))
    }

    /// Hands the chunk at `head` to `take` in place, if none of it was
    /// read yet and it does not wrap (and the ring can lend its bytes):
    /// if `take` keeps it (`Some`), the chunk is done with, as if
    /// [`read`](Self::read) had copied it out. Returns what `take` made
    /// and whether the producer waits for room (then the caller wakes
    /// it); `None`: nothing taken (read it instead).
    ///
    /// Why: a small frame decodes straight from the ring, without a copy
    /// into a buffer first and the bookkeeping of a partial read.
    ///
    /// # Safety
    ///
    /// This is the ring's only consumer.
    pub(crate) unsafe fn take_whole<R>(
        &self,
        take: impl FnOnce(&[u8]) -> Option<R>,
    ) -> Result<Option<(R, bool)>, &'static str> {
        let capacity = self.bytes.capacity();
        let head = self.control.head.0.load(Ordering::Relaxed) & POSITION;
        if self.control.consumer.0.load(Ordering::Relaxed) != 0 {
            return Ok(None);
        }
        let len = self.chunk(head)?;
        let at = self.bytes.offset(head) + WORD;
        if len == 0 || at + len > capacity {
            return Ok(None);
        }
        // The next chunk's length word, which the caller looks at next: on
        // a line of its own (chunks on lines), last written by the
        // producer, a miss that would come after `take` (the hand-over of
        // this one) where it can come beside it.
        let next = advance(self.bytes, len);
        self.bytes.prefetch(self.bytes.offset(head + next));
        // SAFETY: the chunk's bytes were published by the producer (the
        // Acquire load in `chunk`), which does not write them until `head`
        // passes them, below, after the slice is gone.
        let Some(taken) = (unsafe { self.bytes.slice(at, len) }).and_then(take) else {
            return Ok(None);
        };
        Ok(Some((taken, self.release(next))))
    }

    /// Moves `head` on by `by` bytes read; returns whether the producer
    /// waits for room.
    fn release(&self, by: u64) -> bool {
        // Release: our reads are done before the producer reuses the room.
        let before = self.control.head.0.fetch_add(by, Ordering::Release);
        let waiting = before & WAITING != 0;
        if waiting {
            self.control.head.0.fetch_and(!WAITING, Ordering::Relaxed);
        }
        waiting
    }

    /// About to sleep: sets the sleeping flag. Returns `false` if bytes
    /// arrived (do not sleep; call [`awake`](Self::awake) all the same).
    pub(crate) fn sleep(&self) -> bool {
        self.control.sleep.0.fetch_or(SLEEPING, Ordering::AcqRel);
        matches!(self.available(), Ok(0))
    }

    /// Awake again: producers need not wake this side.
    pub(crate) fn awake(&self) {
        self.control.sleep.0.fetch_and(!SLEEPING, Ordering::Relaxed);
    }

    /// Whether the sleeping flag is set (tests).
    #[cfg(test)]
    pub(crate) fn asleep(&self) -> bool {
        self.control.sleep.0.load(Ordering::SeqCst) & SLEEPING != 0
    }
}
