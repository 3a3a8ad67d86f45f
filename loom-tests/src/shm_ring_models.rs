//! Models of the shared-memory ring between processes
//! (`src/transport/shm/ring.rs`, compiled here as it is): a producer
//! pushes bytes through a ring smaller than the message, in chunks, a
//! consumer takes them; each sleeps when it cannot go on (the consumer on
//! an empty ring, the producer on a full one) on a doorbell the other
//! rings only when it sees the sleeper's flag. loom reports a lost wake-up
//! as a deadlock (both asleep), and a read of bytes not yet written (or
//! overwritten) as a data race on the ring's cells; the model asserts the
//! bytes arrive in order.
//!
//! The chunks' length words are loom atomics beside the byte cells (in
//! the segment they are the same memory): a stale length from an earlier
//! lap stays in its word here, where the segment would hold payload bytes
//! over it, so a consumer that took a stale length for a new one would
//! read the wrong bytes and fail the model.

use loom::sync::{Arc, Condvar, Mutex};
use loom::thread;

use crate::shm_ring::{Bytes, Consumer, Control, Line, Pair, Producer};
use crate::sync::{AtomicU64, UnsafeCell};

/// The ring's data, one loom cell per byte, its length words, one atomic
/// per 8 bytes, and where its chunks start (8, or more as the segment's
/// cache lines).
struct Cells(Vec<UnsafeCell<u8>>, Vec<AtomicU64>, usize);

// SAFETY: every access goes through loom's cells and atomics, which check
// them.
unsafe impl Bytes for Cells {
    fn capacity(&self) -> usize {
        self.0.len()
    }

    fn align(&self) -> usize {
        self.2
    }

    fn word(&self, at: usize) -> &AtomicU64 {
        assert_eq!(at % 8, 0);
        &self.1[at / 8]
    }

    unsafe fn put(&self, at: usize, src: *const u8, len: usize) {
        for i in 0..len {
            // SAFETY: `src` has `len` readable bytes (the caller's contract).
            let byte = unsafe { *src.add(i) };
            // SAFETY: loom checks the access.
            self.0[at + i].with_mut(|p| unsafe { *p = byte });
        }
    }

    unsafe fn get(&self, at: usize, dst: *mut u8, len: usize) {
        for i in 0..len {
            // SAFETY: loom checks the access.
            let byte = self.0[at + i].with(|p| unsafe { *p });
            // SAFETY: `dst` has `len` writable bytes (the caller's contract).
            unsafe { *dst.add(i) = byte };
        }
    }
}

/// An eventfd: a counter and a sleeper.
#[derive(Default)]
struct Doorbell {
    rung: Mutex<bool>,
    cv: Condvar,
}

impl Doorbell {
    fn ring(&self) {
        *self.rung.lock().unwrap() = true;
        self.cv.notify_one();
    }

    fn sleep(&self) {
        let mut rung = self.rung.lock().unwrap();
        while !*rung {
            rung = self.cv.wait(rung).unwrap();
        }
        *rung = false;
    }
}

struct Shared {
    control: Control,
    cells: Cells,
    consumer_bell: Doorbell,
    producer_bell: Doorbell,
}

/// `message` through a ring of `capacity` bytes whose chunks start on
/// multiples of `align`, written `piece` bytes at a time at most, read
/// `read` bytes at a time.
fn model(capacity: usize, align: usize, message: &'static [u8], piece: usize, read: usize) {
    loom::model(move || {
        let shared = Arc::new(Shared {
            control: Control {
                head: Line(AtomicU64::new(0)),
                sleep: Line(AtomicU64::new(0)),
                producer: Pair(AtomicU64::new(0), AtomicU64::new(0)),
                consumer: Pair(AtomicU64::new(0), AtomicU64::new(0)),
            },
            cells: Cells(
                (0..capacity).map(|_| UnsafeCell::new(0)).collect(),
                // Every length word but the first holds a stale length, as
                // after earlier laps: only the zeroed word ahead of each
                // chunk may say "nothing yet".
                (0..capacity / 8)
                    .map(|i| AtomicU64::new(if i == 0 { 0 } else { 8 }))
                    .collect(),
                align,
            ),
            consumer_bell: Doorbell::default(),
            producer_bell: Doorbell::default(),
        });
        let s = shared.clone();
        let producer = thread::spawn(move || {
            let p = Producer {
                control: &s.control,
                bytes: &s.cells,
            };
            let mut sent = 0;
            while sent < message.len() {
                let len = piece.min(message.len() - sent);
                // SAFETY: the rest of `message` is readable; one producer.
                let (n, sleeping) = unsafe { p.write(message[sent..].as_ptr(), len) };
                if sleeping {
                    s.consumer_bell.ring();
                }
                sent += n;
                if n == 0 && !p.want_room() {
                    s.producer_bell.sleep();
                }
            }
        });
        let c = Consumer {
            control: &shared.control,
            bytes: &shared.cells,
        };
        let mut got = Vec::new();
        while got.len() < message.len() {
            let mut buf = vec![0u8; read];
            // SAFETY: `buf` is writable; one consumer.
            let (n, waiting) = unsafe { c.read(buf.as_mut_ptr(), buf.len()) }.unwrap();
            if waiting {
                shared.producer_bell.ring();
            }
            got.extend_from_slice(&buf[..n]);
            if n == 0 {
                if c.sleep() {
                    shared.consumer_bell.sleep();
                }
                c.awake();
            }
        }
        assert_eq!(got, message);
        producer.join().unwrap();
    });
}

/// 10 bytes through a ring of 24 (chunks of 8 at most): the producer
/// fills it and waits for room, the second chunk wraps; the consumer
/// reads the first in two pieces, finds the ring empty and sleeps.
#[test]
fn bytes_cross_a_small_ring_in_order_without_a_lost_wake_up() {
    model(24, 8, b"abcdefghij", usize::MAX, 4);
}

/// Chunks of 1 byte (16 in the ring each) through a ring of 24: the
/// second waits for the first to be read and wraps; the consumer, which
/// reads on past each chunk, must take the zeroed word ahead, never a
/// stale length, for "nothing yet".
#[test]
fn small_chunks_lap_the_ring_without_a_stale_length() {
    model(24, 8, b"ab", 1, 4);
}

/// One byte, the consumer's sleep racing the producer's only write.
#[test]
fn a_consumer_going_to_sleep_sees_the_byte_or_is_woken() {
    model(24, 8, b"x", usize::MAX, 4);
}

/// Chunks on 16-byte steps (as the segment's cache lines), through a ring
/// of 48, 12 bytes at a time, read 16 at a time: the first chunk takes
/// two steps, the producer waits for room, the second chunk's 9 bytes
/// wrap at the ring's end; the consumer must find the zeroed length word at the next aligned
/// step, not a stale one in between.
#[test]
fn aligned_chunks_cross_a_small_ring_in_order() {
    model(48, 16, b"abcdefghijklmnopqrstu", 12, 16);
}

/// 1-byte chunks on 16-byte steps through a ring of 32: each takes a
/// whole step, the second waits for the first to be read and its next
/// length word laps the ring.
#[test]
fn aligned_small_chunks_lap_the_ring_without_a_stale_length() {
    model(32, 16, b"ab", 1, 4);
}
