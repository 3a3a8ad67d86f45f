//! An arena: one 64 MiB aligned mapping of a node pool, managed as runs of 4 KiB pages.
//!
//! ## Layout
//! The arena starts with its metadata: this header, a [`PageEntry`] per page and a [`Slab`]
//! descriptor per page (used only at the first page of a slab). The metadata is reserved
//! virtually for every page but costs memory only where it is touched. After it come the pages
//! handed out as large blocks and as slabs. Because arenas are aligned to their size, the arena
//! of any pointer is `ptr & !(ARENA_SIZE - 1)`.
//!
//! ## Spans
//! Pages form consecutive *spans*: free, a large block, or a slab. Every span keeps its head
//! and tail [`PageEntry`] up to date (length, state, start), so freeing a span can look at the
//! tail of the span before it and the head of the span after it and coalesce with free
//! neighbours in O(1). Free spans are kept in 56 size bins (exact up to 8 pages, then four bins
//! per doubling) as doubly linked lists through their head entries, with a bit mask of the
//! non-empty bins; allocation is first fit in the request's bin, then the head of the next
//! non-empty bin (good fit: within 19% of the request).
//!
//! ## Dirty pages
//! A bitmap marks free pages that were handed out before and may still be resident
//! ("dirty"): reusing them costs no page fault and no zeroing. Freed spans are marked dirty;
//! pages handed out are cleared; [`Arena::purge`] returns dirty pages to the kernel with
//! `madvise(MADV_DONTNEED)` and clears them. The node pool purges when its dirty total exceeds
//! its share of `MYRIAD_ALLOC_KEEP`.
//!
//! ## Concurrency
//! Everything except the slab descriptors is touched only under the owning node pool's lock.
//! The `start` field of a slab's page entries is written under that lock before any block of
//! the slab exists and is only read afterwards (by `dealloc` on any thread), until the slab is
//! released, which happens only once all its blocks are free.

use core::ptr::{self, NonNull};

use crate::os::{self, PAGE};
use crate::slab::Slab;

/// Size and alignment of an arena.
pub(crate) const ARENA_SIZE: usize = 64 << 20;
/// Pages per arena (metadata included).
pub(crate) const ARENA_PAGES: usize = ARENA_SIZE / PAGE;
const BINS: usize = 56;
const NIL: u32 = u32::MAX;

const FREE: u32 = 1;
const LARGE: u32 = 2;
const SLAB: u32 = 3;

/// Metadata of one page; meaningful at the head and tail of each span (and, for slabs, the
/// `start` of every page).
#[derive(Debug)]
#[repr(C)]
struct PageEntry {
    len: u32,
    start: u32,
    next: u32,
    prev: u32,
    state: u32,
}

const ENTRIES_OFFSET: usize = core::mem::size_of::<Arena>().next_multiple_of(64);
const SLABS_OFFSET: usize =
    (ENTRIES_OFFSET + ARENA_PAGES * core::mem::size_of::<PageEntry>()).next_multiple_of(64);
const HEADER_BYTES: usize =
    (SLABS_OFFSET + ARENA_PAGES * core::mem::size_of::<Slab>()).next_multiple_of(PAGE);
/// First page available for spans.
pub(crate) const FIRST_PAGE: usize = HEADER_BYTES / PAGE;
/// Pages available for spans in one arena.
pub(crate) const USABLE_PAGES: usize = ARENA_PAGES - FIRST_PAGE;

/// The header of an arena (at its first byte).
#[derive(Debug)]
#[repr(C)]
pub(crate) struct Arena {
    /// The mapping's base, with the provenance of the whole mapping.
    base: *mut u8,
    /// The node pool this arena belongs to.
    pub(crate) node: usize,
    /// Next arena of the same node pool.
    pub(crate) next: *mut Arena,
    /// Whether the arena holds slabs (else large blocks): long-lived slabs kept apart from
    /// large blocks of varying sizes fragment the large blocks' space less.
    pub(crate) for_slabs: bool,
    /// Free pages (dirty or not).
    pub(crate) free_pages: usize,
    /// Free pages marked dirty.
    pub(crate) dirty_pages: usize,
    bin_mask: u64,
    bins: [u32; BINS],
    dirty: [u64; ARENA_PAGES / 64],
}

/// Bin of a span of `n` pages: exact up to 8, then four bins per doubling.
fn bin_of(n: usize) -> usize {
    debug_assert!(n >= 1);
    if n <= 8 {
        n - 1
    } else {
        let lg = (usize::BITS - 1 - n.leading_zeros()) as usize;
        8 + (lg - 3) * 4 + ((n >> (lg - 2)) & 3)
    }
}

impl Arena {
    /// Maps a new arena for `node` (unbound; the pool binds it). `None` if the kernel refuses.
    pub(crate) fn create(node: usize) -> Option<NonNull<Arena>> {
        let base = os::map(ARENA_SIZE, ARENA_SIZE)?;
        let arena = base.cast::<Arena>();
        // SAFETY: the mapping is fresh, zeroed, aligned and large enough for the header.
        unsafe {
            arena.as_ptr().write(Arena {
                base: base.as_ptr(),
                node,
                next: ptr::null_mut(),
                for_slabs: false,
                free_pages: 0,
                dirty_pages: 0,
                bin_mask: 0,
                bins: [NIL; BINS],
                dirty: [0; ARENA_PAGES / 64],
            });
            let a = &mut *arena.as_ptr();
            a.insert_free(FIRST_PAGE, USABLE_PAGES);
            a.free_pages = USABLE_PAGES;
        }
        Some(arena)
    }

    /// The arena holding `ptr` (any pointer into a span of an arena).
    #[inline(always)]
    pub(crate) fn of(ptr: *const u8) -> *mut Arena {
        ((ptr as usize) & !(ARENA_SIZE - 1)) as *mut Arena
    }

    /// The base address of the arena.
    pub(crate) fn base(&self) -> *mut u8 {
        self.base
    }

    /// Address of page `page`.
    #[inline(always)]
    pub(crate) fn page_ptr(&self, page: usize) -> *mut u8 {
        self.base.wrapping_add(page * PAGE)
    }

    /// Page index of `ptr`, which must lie in this arena.
    #[inline(always)]
    pub(crate) fn page_of(&self, ptr: *const u8) -> usize {
        (ptr as usize - self.base as usize) / PAGE
    }

    fn entry(&self, page: usize) -> *mut PageEntry {
        debug_assert!(page < ARENA_PAGES);
        self.base
            .wrapping_add(ENTRIES_OFFSET + page * core::mem::size_of::<PageEntry>())
            .cast()
    }

    /// The descriptor of the slab starting at page `page`.
    #[inline(always)]
    pub(crate) fn slab_at(base: *mut u8, page: usize) -> *mut Slab {
        base.wrapping_add(SLABS_OFFSET + page * core::mem::size_of::<Slab>())
            .cast()
    }

    /// The page index of the slab descriptor `slab` (inverse of [`Arena::slab_at`]).
    pub(crate) fn slab_page(slab: *const Slab) -> usize {
        let off = (slab as usize) & (ARENA_SIZE - 1);
        (off - SLABS_OFFSET) / core::mem::size_of::<Slab>()
    }

    /// The slab descriptor of a block inside a slab of some arena.
    ///
    /// # Safety
    /// `ptr` must point into a live slab handed out by a node pool.
    #[inline(always)]
    pub(crate) unsafe fn slab_of_block(ptr: *const u8) -> *mut Slab {
        let base = (ptr as usize) & !(ARENA_SIZE - 1);
        let page = ((ptr as usize) - base) / PAGE;
        let entry =
            (base + ENTRIES_OFFSET + page * core::mem::size_of::<PageEntry>()) as *const PageEntry;
        // SAFETY: the caller guarantees `ptr` is in a live slab, whose page entries were
        // initialised when the slab was created and are not written while it lives.
        let start = unsafe { (*entry).start } as usize;
        Self::slab_at(base as *mut u8, start)
    }

    fn set_span(&mut self, start: usize, len: usize, state: u32) {
        let head = self.entry(start);
        let tail = self.entry(start + len - 1);
        // SAFETY: both entries lie in this arena's metadata, which is only written under the
        // node lock the caller holds (we have `&mut self`).
        unsafe {
            (*head).len = len as u32;
            (*head).start = start as u32;
            (*head).state = state;
            (*tail).len = len as u32;
            (*tail).start = start as u32;
            (*tail).state = state;
        }
    }

    fn insert_free(&mut self, start: usize, len: usize) {
        self.set_span(start, len, FREE);
        let bin = bin_of(len);
        let head = self.bins[bin];
        let e = self.entry(start);
        // SAFETY: entries of this arena, under the node lock.
        unsafe {
            (*e).next = head;
            (*e).prev = NIL;
            if head != NIL {
                (*self.entry(head as usize)).prev = start as u32;
            }
        }
        self.bins[bin] = start as u32;
        self.bin_mask |= 1 << bin;
    }

    fn remove_free(&mut self, start: usize) {
        let e = self.entry(start);
        // SAFETY: entries of this arena, under the node lock; `start` heads a free span.
        unsafe {
            let (next, prev, len) = ((*e).next, (*e).prev, (*e).len as usize);
            if prev != NIL {
                (*self.entry(prev as usize)).next = next;
            } else {
                let bin = bin_of(len);
                self.bins[bin] = next;
                if next == NIL {
                    self.bin_mask &= !(1 << bin);
                }
            }
            if next != NIL {
                (*self.entry(next as usize)).prev = prev;
            }
        }
    }

    fn state(&self, page: usize) -> (u32, usize, usize) {
        // SAFETY: an entry of this arena, under the node lock.
        unsafe {
            let e = &*self.entry(page);
            (e.state, e.start as usize, e.len as usize)
        }
    }

    /// Takes the free span at `start` (of at least `n` pages) and returns its first `n` pages
    /// as a span of `state`.
    fn take(&mut self, start: usize, n: usize, state: u32) -> usize {
        let (_, _, len) = self.state(start);
        self.remove_free(start);
        if len > n {
            self.insert_free(start + n, len - n);
        }
        self.set_span(start, n, state);
        self.dirty_pages -= self.clear_dirty(start, n);
        self.free_pages -= n;
        start
    }

    fn find(&self, n: usize) -> Option<usize> {
        let bin = bin_of(n);
        let mut cur = self.bins[bin];
        let mut scanned = 0;
        while cur != NIL && scanned < 32 {
            // SAFETY: an entry of this arena, under the node lock.
            let e = unsafe { &*self.entry(cur as usize) };
            if e.len as usize >= n {
                return Some(cur as usize);
            }
            cur = e.next;
            scanned += 1;
        }
        let above = if bin + 1 >= 64 {
            0
        } else {
            self.bin_mask & !((1u64 << (bin + 1)) - 1)
        };
        if above == 0 {
            return None;
        }
        Some(self.bins[above.trailing_zeros() as usize] as usize)
    }

    /// The free span an allocation of `n` pages aligned to `align_pages` would use, and
    /// whether the pages it would hand out are all dirty (reusable without a page fault), and
    /// the span's length.
    pub(crate) fn candidate(&self, n: usize, align_pages: usize) -> Option<(usize, bool, usize)> {
        let padded = n + align_pages.max(1) - 1;
        if n == 0 || padded > self.free_pages {
            return None;
        }
        let start = self.find(padded)?;
        let (_, _, len) = self.state(start);
        Some((
            start,
            align_pages <= 1 && self.count_dirty(start, n) == n,
            len,
        ))
    }

    /// Allocates `n` pages aligned to `align_pages` pages (a power of two) as a large block
    /// from the free span at `span` (found by [`Arena::candidate`]); returns the first page.
    pub(crate) fn alloc_large(&mut self, span: usize, n: usize, align_pages: usize) -> usize {
        self.alloc_span(span, n, align_pages, LARGE)
    }

    /// Allocates `n` pages for a slab from the free span at `span` (found by
    /// [`Arena::candidate`]), and points every page's entry at the first page.
    pub(crate) fn alloc_slab(&mut self, span: usize, n: usize) -> usize {
        let start = self.alloc_span(span, n, 1, SLAB);
        for page in start..start + n {
            // SAFETY: entries of this arena, under the node lock; no block of the slab exists
            // yet, so no `dealloc` reads them concurrently.
            unsafe { (*self.entry(page)).start = start as u32 };
        }
        start
    }

    fn alloc_span(&mut self, span: usize, n: usize, align_pages: usize, state: u32) -> usize {
        if align_pages <= 1 {
            return self.take(span, n, state);
        }
        let padded = n + align_pages - 1;
        let start = self.take(span, padded, state);
        let aligned = start.next_multiple_of(align_pages);
        let head = aligned - start;
        let tail = padded - head - n;
        // Mark all three pieces before freeing any, so that coalescing sees real span
        // boundaries instead of stale interior entries.
        self.set_span(aligned, n, state);
        if head > 0 {
            self.set_span(start, head, state);
        }
        if tail > 0 {
            self.set_span(aligned + n, tail, state);
        }
        if head > 0 {
            self.free(start, head);
        }
        if tail > 0 {
            self.free(aligned + n, tail);
        }
        aligned
    }

    /// Frees the span of `n` pages at `start` (a large block or a slab), marking it dirty and
    /// coalescing it with free neighbours.
    pub(crate) fn free(&mut self, start: usize, n: usize) {
        self.dirty_pages += n - self.count_dirty(start, n);
        self.set_dirty(start, n);
        self.free_pages += n;
        let (mut s, mut len) = (start, n);
        if s > FIRST_PAGE {
            let (state, prev_start, _) = self.state(s - 1);
            if state == FREE {
                let (_, _, prev_len) = self.state(prev_start);
                self.remove_free(prev_start);
                s = prev_start;
                len += prev_len;
            }
        }
        let end = start + n;
        if end < ARENA_PAGES {
            let (state, _, next_len) = self.state(end);
            if state == FREE {
                self.remove_free(end);
                len += next_len;
            }
        }
        self.insert_free(s, len);
    }

    /// Grows the large block of `n` pages at `start` to `new_n` pages if the pages after it
    /// are free; returns whether it did.
    pub(crate) fn grow(&mut self, start: usize, n: usize, new_n: usize) -> bool {
        let end = start + n;
        let extra = new_n - n;
        if end >= ARENA_PAGES {
            return false;
        }
        let (state, _, len) = self.state(end);
        if state != FREE || len < extra {
            return false;
        }
        self.remove_free(end);
        if len > extra {
            self.insert_free(end + extra, len - extra);
        }
        self.dirty_pages -= self.clear_dirty(end, extra);
        self.free_pages -= extra;
        self.set_span(start, new_n, LARGE);
        true
    }

    /// Shrinks the large block of `n` pages at `start` to `new_n` pages, freeing the tail.
    pub(crate) fn shrink(&mut self, start: usize, n: usize, new_n: usize) {
        debug_assert!(new_n >= 1 && new_n < n);
        self.set_span(start, new_n, LARGE);
        self.set_span(start + new_n, n - new_n, LARGE);
        self.free(start + new_n, n - new_n);
    }

    /// Whether every usable page is free.
    pub(crate) fn is_unused(&self) -> bool {
        self.free_pages == USABLE_PAGES
    }

    /// Returns dirty free pages to the kernel, largest spans first, until at most `target`
    /// dirty pages remain; returns how many pages were purged.
    pub(crate) fn purge(&mut self, target: usize) -> usize {
        let mut purged = 0;
        let mut mask = self.bin_mask;
        while self.dirty_pages > target && mask != 0 {
            let bin = 63 - mask.leading_zeros() as usize;
            mask &= !(1 << bin);
            let mut cur = self.bins[bin];
            while cur != NIL && self.dirty_pages > target {
                let (_, _, len) = self.state(cur as usize);
                let dirty = self.clear_dirty(cur as usize, len);
                if dirty > 0 {
                    // SAFETY: the span is free (no live data) and inside this arena's mapping.
                    unsafe { os::purge(self.page_ptr(cur as usize), len * PAGE) };
                    self.dirty_pages -= dirty;
                    purged += dirty;
                }
                // SAFETY: an entry of this arena, under the node lock.
                cur = unsafe { (*self.entry(cur as usize)).next };
            }
        }
        purged
    }

    fn count_dirty(&self, start: usize, n: usize) -> usize {
        let mut count = 0;
        for_each_word(start, n, |w, mask| {
            count += (self.dirty[w] & mask).count_ones() as usize;
        });
        count
    }

    fn set_dirty(&mut self, start: usize, n: usize) {
        let dirty = &mut self.dirty;
        for_each_word(start, n, |w, mask| dirty[w] |= mask);
    }

    fn clear_dirty(&mut self, start: usize, n: usize) -> usize {
        let mut count = 0;
        let dirty = &mut self.dirty;
        for_each_word(start, n, |w, mask| {
            count += (dirty[w] & mask).count_ones() as usize;
            dirty[w] &= !mask;
        });
        count
    }
}

/// Calls `f(word, mask)` for the bitmap words covering bits `[start, start + n)`.
fn for_each_word(start: usize, n: usize, mut f: impl FnMut(usize, u64)) {
    let end = start + n;
    let mut bit = start;
    while bit < end {
        let w = bit / 64;
        let lo = bit % 64;
        let hi = (end - w * 64).min(64);
        let mask = if hi - lo == 64 {
            u64::MAX
        } else {
            ((1u64 << (hi - lo)) - 1) << lo
        };
        f(w, mask);
        bit = (w + 1) * 64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn large(a: &mut Arena, n: usize, align: usize) -> Option<usize> {
        let (span, _, _) = a.candidate(n, align)?;
        Some(a.alloc_large(span, n, align))
    }

    #[test]
    fn bins_are_monotonic_and_fit_the_mask() {
        let mut last = 0;
        for n in 1..=ARENA_PAGES {
            let b = bin_of(n);
            assert!(b >= last && b < BINS, "n {n}");
            last = b;
        }
    }

    #[test]
    fn header_fits_and_leaves_room_for_large_blocks() {
        const { assert!(FIRST_PAGE < ARENA_PAGES / 8) };
        const { assert!(USABLE_PAGES >= 4096 + 512) };
    }

    #[test]
    fn spans_split_coalesce_and_track_dirty_pages() {
        let arena = Arena::create(0).expect("map an arena");
        // SAFETY: a fresh arena owned by this test only.
        let a = unsafe { &mut *arena.as_ptr() };
        let x = large(a, 10, 1).unwrap();
        let y = large(a, 20, 1).unwrap();
        let z = large(a, 5, 1).unwrap();
        assert_eq!((x, y, z), (FIRST_PAGE, FIRST_PAGE + 10, FIRST_PAGE + 30));
        assert_eq!(a.free_pages, USABLE_PAGES - 35);
        a.free(y, 20);
        assert_eq!(a.dirty_pages, 20);
        // Reuse of the dirty hole: same place, dirty count drops.
        assert_eq!(a.candidate(15, 1), Some((y, true, 20)));
        assert_eq!(large(a, 15, 1), Some(y));
        assert_eq!(a.dirty_pages, 5);
        a.free(y, 15);
        a.free(x, 10);
        a.free(z, 5);
        assert!(a.is_unused());
        assert_eq!(a.dirty_pages, 35);
        // Everything coalesced back into one span.
        assert_eq!(a.state(FIRST_PAGE), (FREE, FIRST_PAGE, USABLE_PAGES));
        assert_eq!(a.purge(0), 35);
        assert_eq!(a.dirty_pages, 0);
        // SAFETY: nothing of the arena is in use.
        unsafe { os::unmap(a.base(), ARENA_SIZE) };
    }

    #[test]
    fn aligned_grow_and_shrink() {
        let arena = Arena::create(0).expect("map an arena");
        // SAFETY: a fresh arena owned by this test only.
        let a = unsafe { &mut *arena.as_ptr() };
        let _pad = large(a, 3, 1).unwrap();
        let p = large(a, 4, 16).unwrap();
        assert_eq!(p % 16, 0);
        assert!(a.grow(p, 4, 40));
        a.shrink(p, 40, 2);
        assert_eq!(a.state(p), (LARGE, p, 2));
        assert_eq!(a.free_pages, USABLE_PAGES - 5);
        let (span, _, _) = a.candidate(16, 1).unwrap();
        let s = a.alloc_slab(span, 16);
        let slab = Arena::slab_at(a.base(), s);
        assert_eq!(Arena::slab_page(slab), s);
        assert_eq!(
            // SAFETY: the pointer lies inside the slab just created.
            unsafe { Arena::slab_of_block(a.page_ptr(s + 7).wrapping_add(100)) },
            slab
        );
        // SAFETY: nothing of the arena is in use any more.
        unsafe { os::unmap(a.base(), ARENA_SIZE) };
    }
}
