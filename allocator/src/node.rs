//! A NUMA node pool: the arenas bound to one node, the large blocks and slabs carved from
//! them, the slabs orphaned by exited threads, and a small cache of huge mappings.
//!
//! ## Locking
//! One mutex per node (`std::sync::Mutex`, a futex: it never allocates). Everything under it
//! is bounded work plus at most a few system calls (`mmap` of a new arena, `mbind`,
//! `madvise` when purging, `munmap` of an idle arena or an evicted huge mapping). Nothing under
//! the lock allocates through the allocator.
//!
//! ## Keeping freed memory
//! Freed pages stay mapped and dirty (already faulted in), and are handed out again first.
//! The pool's share of `MYRIAD_ALLOC_KEEP` bounds the dirty free pages plus the cached huge
//! mappings; past it, [`NodePool`] purges: `madvise(MADV_DONTNEED)` on the largest free spans
//! until three quarters of the bound remain, then unmaps arenas left entirely free (keeping
//! one), and releases orphaned slabs whose blocks have all come back.

use core::ptr;
use std::sync::Mutex;

use crate::arena::{Arena, ARENA_SIZE};
use crate::os::{self, PAGE};
use crate::size_class::{slab_pages, CLASSES};
use crate::slab::{Slab, SlabList, IN_ORPHANS};
use crate::sync::{lock, AtomicU64, Locked, Ordering};

const HUGE_CACHE: usize = 8;

/// Figures of one node pool, updated under its lock and readable without it.
#[derive(Debug)]
pub(crate) struct NodeCounters {
    pub(crate) mapped: AtomicU64,
    pub(crate) large_in_use: AtomicU64,
    pub(crate) large_peak: AtomicU64,
    pub(crate) slab_bytes: AtomicU64,
    pub(crate) kept: AtomicU64,
    pub(crate) arenas: AtomicU64,
    pub(crate) large_allocs: AtomicU64,
    pub(crate) slabs_created: AtomicU64,
    pub(crate) slabs_adopted: AtomicU64,
    pub(crate) purged: AtomicU64,
    pub(crate) bind_failures: AtomicU64,
}

impl NodeCounters {
    const fn new() -> Self {
        NodeCounters {
            mapped: AtomicU64::new(0),
            large_in_use: AtomicU64::new(0),
            large_peak: AtomicU64::new(0),
            slab_bytes: AtomicU64::new(0),
            kept: AtomicU64::new(0),
            arenas: AtomicU64::new(0),
            large_allocs: AtomicU64::new(0),
            slabs_created: AtomicU64::new(0),
            slabs_adopted: AtomicU64::new(0),
            purged: AtomicU64::new(0),
            bind_failures: AtomicU64::new(0),
        }
    }
}

fn add(c: &AtomicU64, v: usize) {
    c.fetch_add(v as u64, Ordering::Relaxed);
}

fn sub(c: &AtomicU64, v: usize) {
    c.fetch_sub(v as u64, Ordering::Relaxed);
}

struct NodeState {
    id: usize,
    bind: bool,
    hugepages: bool,
    keep_bytes: usize,
    arenas: *mut Arena,
    dirty_pages: usize,
    huge: [(usize, usize); HUGE_CACHE],
    huge_bytes: usize,
    orphans: [SlabList; CLASSES],
}

// SAFETY: the raw pointers lead to arenas and slab descriptors in our own mappings; they are
// only followed under the node lock (or by the owner of a slab, per the slab protocol).
unsafe impl Send for NodeState {}

/// The pool of one NUMA node.
#[derive(Debug)]
pub(crate) struct NodePool {
    state: Mutex<NodeState>,
    /// The lock held across `fork()` (see [`crate::global`]).
    fork_guard: core::cell::UnsafeCell<Option<Locked<'static, NodeState>>>,
    pub(crate) counters: NodeCounters,
}

// SAFETY: `state` is a mutex and `counters` are atomics; `fork_guard` is touched only by the
// thread calling `fork()`, inside the `pthread_atfork` handlers, which run one at a time.
unsafe impl Sync for NodePool {}

impl core::fmt::Debug for NodeState {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("NodeState")
            .field("id", &self.id)
            .field("dirty_pages", &self.dirty_pages)
            .field("huge_bytes", &self.huge_bytes)
            .finish_non_exhaustive()
    }
}

impl NodePool {
    /// An unconfigured pool.
    pub(crate) const fn new() -> Self {
        NodePool {
            state: Mutex::new(NodeState {
                id: 0,
                bind: false,
                hugepages: false,
                keep_bytes: 0,
                arenas: ptr::null_mut(),
                dirty_pages: 0,
                huge: [(0, 0); HUGE_CACHE],
                huge_bytes: 0,
                orphans: [const { SlabList::new(IN_ORPHANS) }; CLASSES],
            }),
            fork_guard: core::cell::UnsafeCell::new(None),
            counters: NodeCounters::new(),
        }
    }

    /// Takes the pool's lock and keeps it until [`NodePool::fork_unlock`] (`pthread_atfork`
    /// prepare handler).
    pub(crate) fn fork_lock(&'static self) {
        let guard = self.lock();
        // SAFETY: only the forking thread, in the atfork handlers, touches `fork_guard`.
        unsafe { *self.fork_guard.get() = Some(guard) };
    }

    /// Releases the lock taken by [`NodePool::fork_lock`] (parent and child handlers).
    pub(crate) fn fork_unlock(&self) {
        // SAFETY: as in `fork_lock`; dropping the guard unlocks.
        drop(unsafe { (*self.fork_guard.get()).take() });
    }

    /// Sets the pool's node id, binding and huge-page policies and share of
    /// `MYRIAD_ALLOC_KEEP`.
    pub(crate) fn configure(&self, id: usize, bind: bool, hugepages: bool, keep_bytes: usize) {
        let mut s = self.lock();
        s.id = id;
        s.bind = bind;
        s.hugepages = hugepages;
        s.keep_bytes = keep_bytes;
    }

    fn lock(&self) -> Locked<'_, NodeState> {
        lock(&self.state)
    }

    /// Runs `f` on arena `a`, keeping the node's dirty total in step.
    fn on_arena<R>(&self, s: &mut NodeState, a: *mut Arena, f: impl FnOnce(&mut Arena) -> R) -> R {
        // SAFETY: `a` is an arena of this node and we hold the node lock (`s`).
        let arena = unsafe { &mut *a };
        let before = arena.dirty_pages;
        let r = f(arena);
        let after = arena.dirty_pages;
        s.dirty_pages = s.dirty_pages + after - before;
        r
    }

    /// Finds `n` pages (aligned to `align_pages`) in an arena, mapping a new arena if needed;
    /// `slab` selects a slab span. Returns the arena and first page.
    fn alloc_span(
        &self,
        s: &mut NodeState,
        n: usize,
        align_pages: usize,
        slab: bool,
    ) -> Option<(*mut Arena, usize)> {
        let take = |span: usize| {
            move |a: &mut Arena| {
                if slab {
                    a.alloc_slab(span, n)
                } else {
                    a.alloc_large(span, n, align_pages)
                }
            }
        };
        // Best fit over the arenas of the right kind (slabs or large blocks), preferring spans
        // whose pages are all dirty (no page fault): ranked by (not all dirty, span length),
        // ties to the oldest arena.
        let mut best: Option<(bool, usize, *mut Arena, usize)> = None;
        let mut last: *mut Arena = ptr::null_mut();
        let mut a = s.arenas;
        while !a.is_null() {
            // SAFETY: arenas of the list are live; we hold the lock.
            let found = unsafe { ((*a).for_slabs == slab).then(|| (*a).candidate(n, align_pages)) };
            if let Some(Some((span, dirty, len))) = found {
                if best.is_none_or(|(bd, bl, _, _)| (!dirty, len) < (bd, bl)) {
                    best = Some((!dirty, len, a, span));
                }
            }
            last = a;
            // SAFETY: as above.
            a = unsafe { (*a).next };
        }
        if let Some((_, _, a, span)) = best {
            let page = self.on_arena(s, a, take(span));
            return Some((a, page));
        }
        let arena = Arena::create(s.id)?.as_ptr();
        // SAFETY: the arena is fresh and ours.
        unsafe { (*arena).for_slabs = slab };
        if s.bind && !os::bind(arena.cast(), ARENA_SIZE, s.id) {
            add(&self.counters.bind_failures, 1);
        }
        if s.hugepages {
            // SAFETY: the whole arena is our fresh mapping.
            unsafe { os::advise_hugepages(arena.cast(), ARENA_SIZE) };
        }
        // Append: older arenas, with more dirty pages, are searched first.
        // SAFETY: `last` is the live tail of the list (or the list is empty).
        match unsafe { last.as_mut() } {
            Some(tail) => tail.next = arena,
            None => s.arenas = arena,
        }
        add(&self.counters.mapped, ARENA_SIZE);
        add(&self.counters.arenas, 1);
        // SAFETY: the arena is fresh and ours.
        let (span, _, _) = unsafe { (*arena).candidate(n, align_pages) }?;
        let page = self.on_arena(s, arena, take(span));
        Some((arena, page))
    }

    fn publish_kept(&self, s: &NodeState) {
        self.counters.kept.store(
            (s.dirty_pages * PAGE + s.huge_bytes) as u64,
            Ordering::Relaxed,
        );
    }

    /// Allocates a large block of `pages` pages aligned to `align_pages` pages.
    pub(crate) fn alloc_large(&self, pages: usize, align_pages: usize) -> *mut u8 {
        let mut s = self.lock();
        let Some((a, page)) = self.alloc_span(&mut s, pages, align_pages, false) else {
            return ptr::null_mut();
        };
        self.publish_kept(&s);
        let now = self
            .counters
            .large_in_use
            .fetch_add((pages * PAGE) as u64, Ordering::Relaxed)
            + (pages * PAGE) as u64;
        self.counters.large_peak.fetch_max(now, Ordering::Relaxed);
        drop(s);
        add(&self.counters.large_allocs, 1);
        // SAFETY: `a` is a live arena.
        unsafe { (*a).page_ptr(page) }
    }

    /// Frees the large block of `pages` pages at `ptr` (this pool must own its arena).
    ///
    /// # Safety
    /// `ptr` must be a live large block of `pages` pages from this pool.
    pub(crate) unsafe fn free_large(&self, ptr: *mut u8, pages: usize) {
        let a = Arena::of(ptr);
        let mut s = self.lock();
        // SAFETY: the caller guarantees the block is ours and live.
        self.on_arena(&mut s, a, |arena| arena.free(arena.page_of(ptr), pages));
        sub(&self.counters.large_in_use, pages * PAGE);
        self.after_free(&mut s);
    }

    /// Grows the large block at `ptr` from `pages` to `new_pages` in place if possible.
    ///
    /// # Safety
    /// `ptr` must be a live large block of `pages` pages from this pool.
    pub(crate) unsafe fn grow_large(&self, ptr: *mut u8, pages: usize, new_pages: usize) -> bool {
        let a = Arena::of(ptr);
        let mut s = self.lock();
        let grown = self.on_arena(&mut s, a, |arena| {
            arena.grow(arena.page_of(ptr), pages, new_pages)
        });
        if grown {
            add(&self.counters.large_in_use, (new_pages - pages) * PAGE);
            self.publish_kept(&s);
        }
        grown
    }

    /// Shrinks the large block at `ptr` from `pages` to `new_pages`, freeing its tail.
    ///
    /// # Safety
    /// `ptr` must be a live large block of `pages` pages from this pool.
    pub(crate) unsafe fn shrink_large(&self, ptr: *mut u8, pages: usize, new_pages: usize) {
        let a = Arena::of(ptr);
        let mut s = self.lock();
        self.on_arena(&mut s, a, |arena| {
            arena.shrink(arena.page_of(ptr), pages, new_pages)
        });
        sub(&self.counters.large_in_use, (pages - new_pages) * PAGE);
        self.after_free(&mut s);
    }

    /// A slab of class `class` for the cache `owner`: an orphan of this node if one has free
    /// blocks, else a fresh one. Null when out of memory.
    pub(crate) fn alloc_slab(&self, class: usize, owner: usize) -> *mut Slab {
        let mut s = self.lock();
        // Adopt orphans first: their pages are already faulted in. Look at a bounded number;
        // full ones go back to the list afterwards.
        let mut full = SlabList::new(IN_ORPHANS);
        let mut adopted = ptr::null_mut();
        // SAFETY: orphans are descriptors of live slabs, accessed under the node lock.
        unsafe {
            for _ in 0..8 {
                let slab = s.orphans[class].pop();
                let Some(sl) = slab.as_ref() else { break };
                sl.collect_remote();
                if sl.used() == 0 {
                    self.release_slab_locked(&mut s, slab);
                } else if sl.has_free() {
                    sl.set_owner(owner);
                    add(&self.counters.slabs_adopted, 1);
                    adopted = slab;
                    break;
                } else {
                    full.push(slab);
                }
            }
            loop {
                let slab = full.pop();
                if slab.is_null() {
                    break;
                }
                s.orphans[class].push(slab);
            }
        }
        if !adopted.is_null() {
            return adopted;
        }
        let pages = slab_pages(class);
        let Some((a, page)) = self.alloc_span(&mut s, pages, 1, true) else {
            return ptr::null_mut();
        };
        self.publish_kept(&s);
        drop(s);
        add(&self.counters.slab_bytes, pages * PAGE);
        add(&self.counters.slabs_created, 1);
        // SAFETY: `a` is a live arena; the span at `page` was just allocated as a slab.
        unsafe {
            let base = (*a).base();
            let slab = Arena::slab_at(base, page);
            Slab::init(slab, (*a).page_ptr(page), pages, class, owner);
            slab
        }
    }

    /// Returns an empty slab's pages to the pool.
    ///
    /// # Safety
    /// `slab` must be a slab of this pool with no live block, in no list, that the caller
    /// owns.
    pub(crate) unsafe fn release_slab(&self, slab: *mut Slab) {
        let mut s = self.lock();
        // SAFETY: forwarded from the caller.
        unsafe { self.release_slab_locked(&mut s, slab) };
        self.after_free(&mut s);
    }

    unsafe fn release_slab_locked(&self, s: &mut NodeState, slab: *mut Slab) {
        let (a, page) = Slab::location(slab);
        // SAFETY: the caller guarantees the slab is ours and empty.
        let pages = unsafe { (*slab).pages() };
        self.on_arena(s, a, |arena| arena.free(page, pages));
        sub(&self.counters.slab_bytes, pages * PAGE);
    }

    /// Parks a slab whose owner thread is exiting with blocks still live.
    ///
    /// # Safety
    /// `slab` must be a slab of this pool owned by the caller and in no list.
    pub(crate) unsafe fn abandon_slab(&self, slab: *mut Slab) {
        let mut s = self.lock();
        // SAFETY: forwarded from the caller; from now on the slab is under the node lock.
        unsafe {
            let class = (*slab).class();
            (*slab).set_owner(crate::cache::NO_OWNER);
            s.orphans[class].push(slab);
        }
    }

    /// Maps (or reuses) a huge block of `bytes` (a multiple of the page size) aligned to
    /// `align`, with its header page (see [`HugeHeader`]) naming this pool.
    pub(crate) fn alloc_huge(&self, bytes: usize, align: usize) -> *mut u8 {
        let Some(total) = bytes.checked_add(HUGE_HEADER) else {
            return ptr::null_mut();
        };
        {
            let mut s = self.lock();
            let mut best: Option<usize> = None;
            for (i, &(p, len)) in s.huge.iter().enumerate() {
                let fits = p != 0
                    && len >= total
                    && (len - HUGE_HEADER) / 2 <= bytes
                    && (p + HUGE_HEADER) % align == 0;
                if fits && best.is_none_or(|b| s.huge[b].1 > len) {
                    best = Some(i);
                }
            }
            if let Some(i) = best {
                let (p, len) = s.huge[i];
                s.huge[i] = (0, 0);
                s.huge_bytes -= len;
                self.publish_kept(&s);
                drop(s);
                if len > total {
                    // SAFETY: the tail belongs to the cached mapping, which holds no data.
                    unsafe { os::unmap((p + total) as *mut u8, len - total) };
                }
                // The header already names this pool: only its own blocks are cached here.
                return (p + HUGE_HEADER) as *mut u8;
            }
        }
        let Some(base) = os::map_offset(total, align.max(PAGE), HUGE_HEADER) else {
            return ptr::null_mut();
        };
        let s = self.lock();
        if s.bind && !os::bind(base.as_ptr(), total, s.id) {
            add(&self.counters.bind_failures, 1);
        }
        if s.hugepages {
            // SAFETY: the whole range is our fresh mapping.
            unsafe { os::advise_hugepages(base.as_ptr(), total) };
        }
        // Written after binding, so the header page is placed on the node too.
        // SAFETY: the first page of our fresh mapping, page-aligned and unused.
        unsafe {
            base.as_ptr().cast::<HugeHeader>().write(HugeHeader {
                node: s.id,
                magic: HUGE_MAGIC,
            })
        };
        // SAFETY: the block starts one header page into the mapping of `total` bytes.
        unsafe { base.as_ptr().add(HUGE_HEADER) }
    }

    /// Takes back a huge block of this pool: cached for reuse within the keep bound, else
    /// unmapped.
    ///
    /// # Safety
    /// `ptr` must be a huge block of `bytes` bytes handed out by this pool (its header names
    /// this pool, see [`huge_node`]) and no longer used.
    pub(crate) unsafe fn free_huge(&self, ptr: *mut u8, bytes: usize) {
        let base = ptr as usize - HUGE_HEADER;
        let total = bytes + HUGE_HEADER;
        let mut s = self.lock();
        // SAFETY: `ptr` is a live huge block (caller).
        debug_assert_eq!(s.id, unsafe { huge_node(ptr) }, "freed into another pool");
        let mut evict: Option<(usize, usize)> = Some((base, total));
        if s.huge_bytes + s.dirty_pages * PAGE + total <= s.keep_bytes {
            if let Some(slot) = s.huge.iter().position(|&(p, _)| p == 0) {
                s.huge[slot] = (base, total);
                s.huge_bytes += total;
                evict = None;
            }
        }
        self.publish_kept(&s);
        drop(s);
        if let Some((p, len)) = evict {
            // SAFETY: the caller guarantees the block is a whole unused mapping of ours.
            unsafe { os::unmap(p as *mut u8, len) };
        }
    }

    fn after_free(&self, s: &mut NodeState) {
        if s.dirty_pages * PAGE + s.huge_bytes > s.keep_bytes {
            self.purge(s);
        }
        self.publish_kept(s);
    }

    #[cold]
    fn purge(&self, s: &mut NodeState) {
        let target = (s.keep_bytes / 4 * 3).saturating_sub(s.huge_bytes) / PAGE;
        let mut a = s.arenas;
        while !a.is_null() && s.dirty_pages > target {
            let excess = s.dirty_pages - target;
            let purged = self.on_arena(s, a, |arena| {
                let keep = arena.dirty_pages.saturating_sub(excess);
                arena.purge(keep)
            });
            add(&self.counters.purged, purged * PAGE);
            // SAFETY: arenas of the list are live; we hold the lock.
            a = unsafe { (*a).next };
        }
        // Release orphans whose blocks all came back.
        for class in 0..CLASSES {
            let mut cur = s.orphans[class].head;
            while !cur.is_null() {
                // SAFETY: orphans are live descriptors accessed under the node lock.
                let next = unsafe { (*cur).next.get() };
                // SAFETY: as above.
                let empty = unsafe {
                    (*cur).collect_remote();
                    (*cur).used() == 0
                };
                if empty {
                    // SAFETY: `cur` is a member of the list and has no live block.
                    unsafe {
                        s.orphans[class].remove(cur);
                        self.release_slab_locked(s, cur);
                    }
                }
                cur = next;
            }
        }
        self.unmap_idle_arenas(s);
    }

    /// Unmaps arenas with no page in use and no dirty page, keeping the first one.
    fn unmap_idle_arenas(&self, s: &mut NodeState) {
        if s.arenas.is_null() {
            return;
        }
        // SAFETY: arenas of the list are live; we hold the lock.
        unsafe {
            let mut prev = s.arenas;
            let mut cur = (*prev).next;
            while !cur.is_null() {
                let next = (*cur).next;
                if (*cur).is_unused() && (*cur).dirty_pages == 0 {
                    (*prev).next = next;
                    os::unmap((*cur).base(), ARENA_SIZE);
                    sub(&self.counters.mapped, ARENA_SIZE);
                    sub(&self.counters.arenas, 1);
                } else {
                    prev = cur;
                }
                cur = next;
            }
        }
    }
}

/// The page in front of every huge block (a direct mapping): the pool that mapped it, which
/// is the node its memory is bound to. A huge block is freed, and cached, there, whichever
/// thread frees it; only blocks of a pool are cached in it, so a reused block's header stays
/// right. `dealloc` finds small and large blocks from the layout and the address alone; a
/// huge block costs this one extra page (and its first fault) per mapping.
#[derive(Debug)]
#[repr(C)]
struct HugeHeader {
    node: usize,
    magic: usize,
}

/// Bytes of a huge mapping in front of the block.
const HUGE_HEADER: usize = PAGE;
/// Marks a header page (checked in debug builds).
const HUGE_MAGIC: usize = 0x6875_6765_6865_6164; // "hugehead"

/// The pool of the huge block at `ptr`.
///
/// # Safety
/// `ptr` must be a live huge block handed out by [`NodePool::alloc_huge`].
pub(crate) unsafe fn huge_node(ptr: *mut u8) -> usize {
    // SAFETY: a huge block is preceded by its header page, in the same mapping (caller).
    let header = unsafe { &*ptr.sub(HUGE_HEADER).cast::<HugeHeader>() };
    debug_assert_eq!(header.magic, HUGE_MAGIC, "not a huge block");
    header.node
}

/// Resizes the huge block at `ptr` from `bytes` to `new_bytes` (multiples of the page size)
/// with `mremap`, moving it if needed; its header page moves along. `None` if the kernel
/// refused (the block is untouched).
///
/// # Safety
/// `ptr` must be a live huge block of `bytes` bytes aligned to at most a page.
pub(crate) unsafe fn remap_huge(
    ptr: *mut u8,
    bytes: usize,
    new_bytes: usize,
) -> Option<core::ptr::NonNull<u8>> {
    // SAFETY: the block and its header page are exactly one mapping (caller).
    let base = unsafe {
        os::remap(
            ptr.sub(HUGE_HEADER),
            bytes + HUGE_HEADER,
            new_bytes.checked_add(HUGE_HEADER)?,
        )
    }?;
    // SAFETY: the block starts one header page into the moved mapping.
    core::ptr::NonNull::new(unsafe { base.as_ptr().add(HUGE_HEADER) })
}

/// The pool owning the arena of `ptr`.
pub(crate) fn node_of_arena(ptr: *const u8) -> usize {
    let a = Arena::of(ptr);
    // SAFETY: `ptr` is inside a live arena (caller's contract in every use), whose header
    // field `node` is written once at creation.
    unsafe { (*a).node }
}
