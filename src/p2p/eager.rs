//! Eager buffers: where a small message waits for its receive.
//!
//! A message that finds no posted receive and is small enough (the eager
//! limit) is copied into an eager buffer so the sender can go on. Tiny
//! messages fit inline in the queue entry; the others take a buffer from the
//! job's pool, shared by all ranks of the process, and the receiver gives it
//! back after unpacking. Buffers above the largest size class (buffered sends
//! of large messages) come straight from the heap.

use crossbeam_deque::{Injector, Steal};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Messages up to this many bytes are stored inside the queue entry.
const INLINE: usize = 32;
/// Pool size classes, in bytes.
const CLASSES: [usize; 5] = [256, 1024, 4096, 16 * 1024, 64 * 1024];
/// At most this many idle buffers are kept per class.
const KEEP: usize = 1024;

/// A message's packed bytes.
#[derive(Debug)]
pub(crate) enum EagerBuf {
    Inline {
        len: u8,
        bytes: [u8; INLINE],
    },
    Pooled {
        class: u8,
        len: usize,
        buf: Box<[u8]>,
    },
    Heap(Box<[u8]>),
}

impl EagerBuf {
    pub(crate) fn as_ptr(&self) -> *const u8 {
        match self {
            EagerBuf::Inline { bytes, .. } => bytes.as_ptr(),
            EagerBuf::Pooled { buf, .. } | EagerBuf::Heap(buf) => buf.as_ptr(),
        }
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            EagerBuf::Inline { len, .. } => *len as usize,
            EagerBuf::Pooled { len, .. } => *len,
            EagerBuf::Heap(buf) => buf.len(),
        }
    }
}

/// The job's pool of eager buffers.
#[derive(Debug)]
pub(crate) struct EagerPool {
    classes: [Class; CLASSES.len()],
}

#[derive(Debug, Default)]
struct Class {
    free: Injector<Box<[u8]>>,
    idle: AtomicUsize,
}

impl EagerPool {
    pub(crate) fn new() -> EagerPool {
        EagerPool {
            classes: Default::default(),
        }
    }

    /// A buffer of `len` bytes, filled by `fill` (which must write all of
    /// them).
    pub(crate) fn take(&self, len: usize, fill: impl FnOnce(*mut u8)) -> EagerBuf {
        if len <= INLINE {
            let mut bytes = [0u8; INLINE];
            fill(bytes.as_mut_ptr());
            return EagerBuf::Inline {
                len: len as u8,
                bytes,
            };
        }
        match CLASSES.iter().position(|&c| len <= c) {
            Some(class) => {
                let mut buf = self.pop(class);
                fill(buf.as_mut_ptr());
                EagerBuf::Pooled {
                    class: class as u8,
                    len,
                    buf,
                }
            }
            None => {
                let mut buf = vec![0u8; len].into_boxed_slice();
                fill(buf.as_mut_ptr());
                EagerBuf::Heap(buf)
            }
        }
    }

    /// Gives a buffer back once its message has been received.
    pub(crate) fn give(&self, buf: EagerBuf) {
        if let EagerBuf::Pooled { class, buf, .. } = buf {
            let class = &self.classes[class as usize];
            if class.idle.load(Ordering::Relaxed) < KEEP {
                class.idle.fetch_add(1, Ordering::Relaxed);
                class.free.push(buf);
            }
        }
    }

    fn pop(&self, class: usize) -> Box<[u8]> {
        let slot = &self.classes[class];
        loop {
            match slot.free.steal() {
                Steal::Success(buf) => {
                    slot.idle.fetch_sub(1, Ordering::Relaxed);
                    return buf;
                }
                Steal::Retry => continue,
                Steal::Empty => return vec![0u8; CLASSES[class]].into_boxed_slice(),
            }
        }
    }

    /// The buffers the pool keeps for reuse, and their bytes (the memory
    /// report; racy while messages flow, exact once the job has ended).
    pub(crate) fn idle(&self) -> (usize, usize) {
        self.classes
            .iter()
            .zip(CLASSES)
            .map(|(class, size)| {
                let n = class.idle.load(Ordering::Relaxed);
                (n, n * size)
            })
            .fold((0, 0), |(n, b), (cn, cb)| (n + cn, b + cb))
    }

    /// The largest message the pool serves (the cap of the eager limit).
    pub(crate) const MAX_CLASS: usize = CLASSES[CLASSES.len() - 1];
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_recycled() {
        let pool = EagerPool::new();
        let a = pool.take(100, |p| {
            // SAFETY: the pool hands out at least `len` writable bytes.
            unsafe { std::ptr::write_bytes(p, 7, 100) }
        });
        assert_eq!(a.len(), 100);
        // SAFETY: `a` holds 100 initialised bytes.
        assert_eq!(unsafe { *a.as_ptr().add(99) }, 7);
        let ptr = a.as_ptr();
        pool.give(a);
        let b = pool.take(200, |_| {});
        assert_eq!(b.as_ptr(), ptr);
        let tiny = pool.take(3, |p| {
            // SAFETY: as above.
            unsafe { std::ptr::write_bytes(p, 1, 3) }
        });
        assert!(matches!(tiny, EagerBuf::Inline { len: 3, .. }));
    }
}
