//! # myriad-alloc
//!
//! A hierarchical, NUMA-aware memory allocator for thread-heavy programs (thousands of MPI
//! ranks as threads in one process), after the MPC allocator: freed pages stay mapped and are
//! reused inside the process instead of being returned to the kernel and faulted (and zeroed)
//! in again.
//!
//! ```no_run
//! #[global_allocator]
//! static ALLOC: myriad_alloc::MyriadAlloc = myriad_alloc::MyriadAlloc;
//!
//! fn main() {
//!     let v = vec![0u8; 1 << 20];
//!     drop(v);
//!     println!("{}", myriad_alloc::stats());
//! }
//! ```
//!
//! ## Layers, one module each
//! - `os`: the OS memory source, the only caller of `mmap`, `munmap`, `madvise`, `mremap` and
//!   `mbind` (raw system call: no libnuma, no C library beyond libc).
//! - `topology`: CPU → NUMA node map from sysfs (or `MYRIAD_ALLOC_NODES`), current node from
//!   `sched_getcpu`.
//! - `arena`: 64 MiB aligned mappings managed as page spans with coalescing and a dirty-page
//!   bitmap.
//! - `node`: one pool per NUMA node (its arenas, bound with `mbind`), large blocks, slabs,
//!   orphaned slabs, a small huge-mapping cache, and the `MYRIAD_ALLOC_KEEP` purge policy.
//! - `slab` + `remote`: slabs of one size class, with the lock-free remote-free list.
//! - `cache`: per-thread caches of slabs per size class; thread exit returns them.
//! - `stats`: [`stats()`] and its `Display`.
//!
//! Requests up to 16 KiB (alignment up to 4 KiB) are small blocks from size classes; up to
//! 16 MiB (alignment up to 2 MiB) they are page runs from the node pool of the CPU the thread
//! runs on; above, they are direct mappings (resized in place with `mremap`).
//!
//! ## Configuration
//! | variable | default | meaning |
//! |---|---|---|
//! | `MYRIAD_ALLOC_KEEP` | min(1 GiB, physical memory / 8) | freed memory kept resident for reuse, whole process (split evenly between nodes); beyond it freed pages go back to the kernel (`madvise(MADV_DONTNEED)`). Suffixes K, M, G, T. `0` returns everything at once. |
//! | `MYRIAD_ALLOC_NODES` | machine (sysfs) | synthetic topology: a node count `N` (CPU `c` on node `c % N`) or CPU lists per node separated by `;`, e.g. `0;1` |
//! | `MYRIAD_ALLOC_BIND` | on when more than one node | `0`/`1`: bind each node pool's memory to its node with `mbind(MPOL_PREFERRED)` |
//! | `MYRIAD_ALLOC_HUGEPAGES` | off | `1`: ask for transparent huge pages on arenas and huge blocks (`madvise(MADV_HUGEPAGE)`); far fewer faults, coarser memory granularity |
//!
//! The environment is read once, at the first allocation, with `getenv` (no allocation).
//! The crate's `README.md` has the design notes, what was verified on which hardware, and the
//! benchmark.
//!
//! ## Guarantees
//! - Out of memory returns null; nothing inside the allocator aborts or panics.
//! - Nothing allocates through the allocator while one of its locks is held.
//! - `realloc` stays in place when the size class is unchanged, when a page run shrinks, or
//!   when the pages after a page run are free; huge blocks grow with `mremap`.
//! - Zero-size requests (not allowed by `GlobalAlloc`, but harmless here) get a 16-byte block.

#![cfg_attr(loom, allow(dead_code, unused_imports))]

pub mod remote;
mod sync;

#[cfg(not(loom))]
mod arena;
#[cfg(not(loom))]
mod cache;
#[cfg(not(loom))]
mod config;
#[cfg(not(loom))]
mod global;
#[cfg(not(loom))]
mod node;
#[cfg(not(loom))]
mod os;
#[cfg(not(loom))]
mod size_class;
#[cfg(not(loom))]
mod slab;
#[cfg(not(loom))]
mod stats;
#[cfg(not(loom))]
mod topology;

#[cfg(not(loom))]
pub use alloc_impl::MyriadAlloc;
#[cfg(not(loom))]
pub use stats::{stats, NodeStats, OsCalls, Stats};
#[cfg(not(loom))]
pub use topology::{Topology, MAX_CPUS, MAX_NODES};

/// The NUMA node the calling thread runs on, as the allocator sees it (synthetic topologies
/// included).
#[cfg(not(loom))]
pub fn current_node() -> usize {
    global::Global::get().topology().current_node()
}

#[cfg(not(loom))]
mod alloc_impl {
    use core::alloc::{GlobalAlloc, Layout};
    use core::ptr::{self, NonNull};

    use crate::arena::USABLE_PAGES;
    use crate::cache;
    use crate::global::Global;
    use crate::node::{self, node_of_arena};
    use crate::os::PAGE;
    use crate::size_class::{class_for, class_of, SMALL_MAX};
    use crate::stats::HUGE_IN_USE;
    use crate::sync::Ordering;

    /// Largest page run served from node pools (16 MiB).
    const LARGE_MAX_PAGES: usize = 4096;
    /// Largest alignment of a page run (2 MiB); above, a direct mapping.
    const LARGE_ALIGN_MAX: usize = 2 << 20;
    const _: () = assert!(LARGE_MAX_PAGES + LARGE_ALIGN_MAX / PAGE <= USABLE_PAGES);

    /// The allocator; install it with `#[global_allocator]`, or call it directly.
    ///
    /// ```
    /// use std::alloc::{GlobalAlloc, Layout};
    /// let a = myriad_alloc::MyriadAlloc;
    /// let layout = Layout::from_size_align(100, 8).unwrap();
    /// unsafe {
    ///     let p = a.alloc(layout);
    ///     assert!(!p.is_null());
    ///     p.write_bytes(7, 100);
    ///     a.dealloc(p, layout);
    /// }
    /// ```
    #[derive(Debug, Clone, Copy, Default)]
    pub struct MyriadAlloc;

    /// Where a layout is served from; a pure function of `(size, align)`, so `dealloc` and
    /// `realloc` recompute it from the layout.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Kind {
        Small(usize),
        Large(usize),
        Huge(usize),
    }

    #[inline(always)]
    fn kind(size: usize, align: usize) -> Kind {
        if let Some(class) = class_for(size, align) {
            return Kind::Small(class);
        }
        let pages = size.div_ceil(PAGE).max(1);
        if pages <= LARGE_MAX_PAGES && align <= LARGE_ALIGN_MAX {
            Kind::Large(pages)
        } else {
            Kind::Huge(pages * PAGE)
        }
    }

    fn alloc_large(pages: usize, align: usize) -> *mut u8 {
        Global::get()
            .current_pool()
            .alloc_large(pages, (align / PAGE).max(1))
    }

    /// # Safety
    /// `ptr` must be a live large block of `pages` pages.
    unsafe fn free_large(ptr: *mut u8, pages: usize) {
        // SAFETY: forwarded from the caller; the arena's pool owns the block.
        unsafe {
            Global::get()
                .pool(node_of_arena(ptr))
                .free_large(ptr, pages)
        }
    }

    fn alloc_huge(bytes: usize, align: usize) -> *mut u8 {
        let p = Global::get().current_pool().alloc_huge(bytes, align);
        if !p.is_null() {
            HUGE_IN_USE.fetch_add(bytes as u64, Ordering::Relaxed);
        }
        p
    }

    /// # Safety
    /// `ptr` must be a live huge block of `bytes` bytes.
    unsafe fn free_huge(ptr: *mut u8, bytes: usize) {
        HUGE_IN_USE.fetch_sub(bytes as u64, Ordering::Relaxed);
        // SAFETY: forwarded from the caller; the block goes back to the pool that mapped it
        // (bound to that pool's node), not to the freeing thread's.
        unsafe {
            Global::get()
                .pool(node::huge_node(ptr))
                .free_huge(ptr, bytes)
        }
    }

    #[cold]
    #[inline(never)]
    fn alloc_slow(layout: Layout) -> *mut u8 {
        match kind(layout.size(), layout.align()) {
            Kind::Small(class) => cache::alloc(class),
            Kind::Large(pages) => alloc_large(pages, layout.align()),
            Kind::Huge(bytes) => alloc_huge(bytes, layout.align()),
        }
    }

    /// # Safety
    /// `p` must be a live block allocated with `layout`.
    #[inline(never)]
    unsafe fn dealloc_slow(p: NonNull<u8>, layout: Layout) {
        match kind(layout.size(), layout.align()) {
            // SAFETY: the caller guarantees `p` came from `alloc` with `layout`.
            Kind::Small(_) => unsafe { cache::free(p) },
            // SAFETY: as above.
            Kind::Large(pages) => unsafe { free_large(p.as_ptr(), pages) },
            // SAFETY: as above.
            Kind::Huge(bytes) => unsafe { free_huge(p.as_ptr(), bytes) },
        }
    }

    // SAFETY: blocks are distinct live regions of at least the layout's size, aligned to its
    // alignment (size classes are multiples of the alignment, page runs and mappings are
    // aligned explicitly); `dealloc`/`realloc` recompute the same `Kind` from the same layout.
    unsafe impl GlobalAlloc for MyriadAlloc {
        #[inline]
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            crate::sync::assert_unlocked();
            // Fast path: small sizes with ordinary alignment; everything else (including the
            // thread cache's own slow path) is an out-of-line call, so this part needs no
            // stack frame.
            if layout.size() <= SMALL_MAX && layout.align() <= 16 {
                return cache::alloc(class_of(layout.size()));
            }
            alloc_slow(layout)
        }

        #[inline]
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            crate::sync::assert_unlocked();
            let Some(p) = NonNull::new(ptr) else { return };
            // Fast path: the common small layouts need no class computation (the slab knows
            // its class).
            if layout.size() <= SMALL_MAX && layout.align() <= 16 {
                // SAFETY: the caller guarantees `ptr` came from `alloc` with `layout`, which
                // is a small block for these sizes and alignments.
                return unsafe { cache::free(p) };
            }
            // SAFETY: forwarded from the caller.
            unsafe { dealloc_slow(p, layout) }
        }

        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            crate::sync::assert_unlocked();
            let align = layout.align();
            match (kind(layout.size(), align), kind(new_size, align)) {
                (Kind::Small(a), Kind::Small(b)) if a == b => return ptr,
                (Kind::Large(a), Kind::Large(b)) => {
                    let pool = Global::get().pool(node_of_arena(ptr));
                    if b == a {
                        return ptr;
                    }
                    if b < a {
                        // SAFETY: `ptr` is a live large block of `a` pages (caller).
                        unsafe { pool.shrink_large(ptr, a, b) };
                        return ptr;
                    }
                    // SAFETY: as above.
                    if unsafe { pool.grow_large(ptr, a, b) } {
                        return ptr;
                    }
                }
                (Kind::Huge(a), Kind::Huge(b)) if align <= PAGE => {
                    if a == b {
                        return ptr;
                    }
                    // SAFETY: `ptr` is a live huge block of `a` bytes (caller), page-aligned.
                    if let Some(p) = unsafe { node::remap_huge(ptr, a, b) } {
                        if b > a {
                            HUGE_IN_USE.fetch_add((b - a) as u64, Ordering::Relaxed);
                        } else {
                            HUGE_IN_USE.fetch_sub((a - b) as u64, Ordering::Relaxed);
                        }
                        return p.as_ptr();
                    }
                }
                _ => {}
            }
            let Ok(new_layout) = Layout::from_size_align(new_size, align) else {
                return ptr::null_mut();
            };
            // SAFETY: `new_layout` is valid; the caller guarantees `new_size` is non-zero.
            let new = unsafe { self.alloc(new_layout) };
            if !new.is_null() {
                // SAFETY: both blocks are live, distinct, and at least this long.
                unsafe {
                    ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                    self.dealloc(ptr, layout);
                }
            }
            new
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn kinds() {
            assert_eq!(kind(0, 1), Kind::Small(0));
            assert_eq!(kind(16 << 10, 8), Kind::Small(35));
            assert_eq!(kind((16 << 10) + 1, 8), Kind::Large(5));
            assert_eq!(kind(8, 8192), Kind::Large(1));
            assert_eq!(kind(16 << 20, 8), Kind::Large(4096));
            assert_eq!(kind((16 << 20) + 1, 8), Kind::Huge((16 << 20) + PAGE));
            assert_eq!(kind(4096, 4 << 20), Kind::Huge(4096));
        }
    }
}
