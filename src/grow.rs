//! Tables indexed by local index that grow while the job runs (spawned
//! ranks) without ever moving an entry.
//!
//! ## Design
//!
//! A job's per-rank tables (park slots, mailboxes) were boxed slices sized
//! at start, read on every message. A [`GrowTable`] keeps that slice for
//! the ranks the job started with: a lookup of such a rank is the same
//! bounds check and index as before, and only ranks appended later take
//! the out-of-line path. Appended entries live in chunks of geometrically
//! growing size (64, 128, 256, ...: 26 chunks hold more than four billion
//! entries), each allocated once, under a lock only appending takes, and
//! never moved or freed before the table, so a `&T` handed out stays valid
//! while other threads append. The published length is an atomic: an
//! entry is reachable once `append` returned (release/acquire on the
//! length), never half-built.

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

/// Entries in the first appended chunk; chunk `k` holds `BASE << k`.
const BASE: usize = 64;
/// Appended chunks at most (`BASE * (2^CHUNKS - 1)` appended entries).
const CHUNKS: usize = 26;

/// A table whose first entries are fixed at creation and that grows by
/// appending (see the module docs).
#[derive(Debug)]
pub(crate) struct GrowTable<T> {
    first: Box<[T]>,
    chunks: [OnceLock<Box<[T]>>; CHUNKS],
    /// Entries published (`first.len()` and the appended ones).
    len: AtomicUsize,
    /// Taken by `append` only.
    grow: Mutex<()>,
}

/// Tables at least this big are populated in one system call
/// ([`populated`]); smaller ones fault a page or two.
const POPULATE_FROM: usize = 1 << 20;

/// The boxed slice of `items`, its pages populated
/// (`MADV_POPULATE_WRITE`) before they are written: the per-rank tables of
/// a million-rank job span hundreds of MB, and one call for all their pages
/// costs less than a page fault each, on the serial path before the first
/// rank starts. Best effort: where the kernel refuses, the pages fault.
pub(crate) fn populated<T>(items: impl ExactSizeIterator<Item = T>) -> Box<[T]> {
    let n = items.len();
    let mut table: Vec<T> = Vec::with_capacity(n);
    let bytes = n * std::mem::size_of::<T>();
    if bytes >= POPULATE_FROM {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as usize;
        let start = (table.as_mut_ptr() as usize).next_multiple_of(page);
        let end = (table.as_mut_ptr() as usize + bytes) & !(page - 1);
        if end > start {
            // SAFETY: `[start, end)` is whole pages inside the vector's
            // allocation, which nothing reads or writes yet; populating
            // writes nothing visible (anonymous memory reads as before, zero
            // if never touched) and fails harmlessly (`EINVAL` on old
            // kernels).
            unsafe {
                libc::madvise(
                    start as *mut libc::c_void,
                    end - start,
                    libc::MADV_POPULATE_WRITE,
                )
            };
        }
    }
    table.extend(items);
    table.into_boxed_slice()
}

impl<T> GrowTable<T> {
    /// A table holding `first`.
    pub(crate) fn new(first: Box<[T]>) -> GrowTable<T> {
        GrowTable {
            len: AtomicUsize::new(first.len()),
            first,
            chunks: std::array::from_fn(|_| OnceLock::new()),
            grow: Mutex::new(()),
        }
    }

    /// The number of entries the table was created with.
    #[inline]
    pub(crate) fn initial(&self) -> usize {
        self.first.len()
    }

    /// The entries the table was created with (a plain slice: callers
    /// that tell their own kinds of index apart try it first).
    #[inline]
    pub(crate) fn initial_entries(&self) -> &[T] {
        &self.first
    }

    /// The number of entries published so far.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    /// Entry `index`, if published: an initial entry costs what indexing a
    /// boxed slice does.
    #[inline]
    pub(crate) fn get(&self, index: usize) -> Option<&T> {
        match self.first.get(index) {
            Some(entry) => Some(entry),
            None => self.appended(index),
        }
    }

    #[cold]
    #[inline(never)]
    fn appended(&self, index: usize) -> Option<&T> {
        if index >= self.len() {
            return None;
        }
        let (chunk, offset) = locate(index - self.first.len());
        self.chunks[chunk].get().map(|c| &c[offset])
    }

    /// Appends `n` entries, entry `i` (its index in the table) made by
    /// `make(i)`; returns their indices. Entries of a new chunk beyond
    /// those `n` are made too (they are published by later appends), so
    /// `make` may run for more indices than asked.
    ///
    /// # Panics
    ///
    /// If the table would hold more than about four billion appended
    /// entries (callers bound the ranks of a job far below that).
    pub(crate) fn append(&self, n: usize, mut make: impl FnMut(usize) -> T) -> Range<usize> {
        let _grow = self.grow.lock().unwrap_or_else(|e| e.into_inner());
        let start = self.len.load(Ordering::Relaxed);
        let end = start + n;
        let base = self.first.len();
        if end > base {
            let (last, _) = locate(end - 1 - base);
            let (first_chunk, _) = locate(start.max(base) - base);
            for chunk in first_chunk..=last {
                self.chunks[chunk].get_or_init(|| {
                    let from = base + BASE * ((1 << chunk) - 1);
                    (from..from + (BASE << chunk)).map(&mut make).collect()
                });
            }
        }
        self.len.store(end, Ordering::Release);
        start..end
    }

    /// The published entries, in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        (0..self.len()).filter_map(move |i| self.get(i))
    }
}

impl<T> std::ops::Index<usize> for GrowTable<T> {
    type Output = T;

    #[inline]
    fn index(&self, index: usize) -> &T {
        match self.get(index) {
            Some(entry) => entry,
            None => out_of_range(index, self.len()),
        }
    }
}

#[cold]
#[inline(never)]
fn out_of_range(index: usize, len: usize) -> ! {
    panic!("index {index} of a table of {len} entries")
}

/// `(chunk, offset)` of appended entry `j`: chunk `k` starts at
/// `BASE * (2^k - 1)`.
#[inline]
fn locate(j: usize) -> (usize, usize) {
    let q = j / BASE + 1;
    let chunk = (usize::BITS - 1 - q.leading_zeros()) as usize;
    (chunk, j - BASE * ((1 << chunk) - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appended_entries_keep_their_index_and_address() {
        let table = GrowTable::new((0..5).collect::<Vec<usize>>().into_boxed_slice());
        assert_eq!((table.initial(), table.len()), (5, 5));
        assert_eq!(table.get(5), None, "not appended yet");
        let first = table.append(3, |i| i);
        assert_eq!(first, 5..8);
        let at = table.get(7).unwrap() as *const usize;
        // Across chunk boundaries: 64 + 128 + part of 256.
        let more = table.append(300, |i| i);
        assert_eq!(more, 8..308);
        assert!(std::ptr::eq(at, table.get(7).unwrap()), "never moved");
        for i in 0..308 {
            assert_eq!(table[i], i);
        }
        assert_eq!(table.get(308), None);
        assert_eq!(table.iter().count(), 308);
    }

    #[test]
    fn chunks_tile_the_appended_indices() {
        let mut expected = (0, 0);
        for j in 0..10_000 {
            let (chunk, offset) = locate(j);
            assert_eq!((chunk, offset), expected, "entry {j}");
            expected = if offset + 1 == BASE << chunk {
                (chunk + 1, 0)
            } else {
                (chunk, offset + 1)
            };
        }
    }
}
