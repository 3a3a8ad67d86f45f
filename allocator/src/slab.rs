//! A slab: a run of pages cut into blocks of one size class, owned by one thread cache.
//!
//! ## Who touches what
//! - `remote` is the lock-free [`RemoteFreeList`]: any thread pushes blocks it frees when it is
//!   not the owner.
//! - `owner` is the id of the owning thread cache (a serial never given twice, see
//!   `cache`), or 0 while the slab is an orphan parked in its node pool (its owner thread
//!   exited with blocks still live). Only the
//!   owner changes it away from its own id (when abandoning the slab), and only an adopter
//!   holding the node lock changes it from 0, so a thread that reads its own id is the owner;
//!   any other reader just pushes to `remote`, which is correct whoever owns the slab.
//! - Every other field (behind `Cell`) is touched only by the current owner, or under the node
//!   lock while the slab is an orphan; except `class` and `pages`, which are written once when
//!   the slab is created (before any of its blocks exists) and only read afterwards, by any
//!   thread freeing one of its blocks.
//! - `used` counts blocks handed out and not yet seen back by the owner (locally freed or
//!   collected from `remote`). When it reaches 0 no block can still be pending in a remote free
//!   (that block would be counted), so the slab may be released to its node pool.
//!
//! Blocks are carved lazily with a bump pointer, so a new slab faults in only the pages that
//! blocks are actually handed out from.

use core::cell::Cell;
use core::ptr::{self, NonNull};

use crate::arena::Arena;
use crate::os::PAGE;
use crate::remote::{Block, RemoteFreeList};
use crate::size_class::CLASS_SIZE;
use crate::sync::{AtomicUsize, Ordering};

/// Which list of its owner a slab sits in.
pub(crate) const IN_NONE: u8 = 0;
pub(crate) const IN_PARTIAL: u8 = 1;
pub(crate) const IN_FULL: u8 = 2;
pub(crate) const IN_ORPHANS: u8 = 3;

/// The descriptor of a slab (in its arena's metadata area, one cache line).
#[derive(Debug)]
#[repr(C, align(64))]
pub(crate) struct Slab {
    pub(crate) remote: RemoteFreeList,
    pub(crate) owner: AtomicUsize,
    free: Cell<*mut Block>,
    bump: Cell<*mut u8>,
    end: Cell<*mut u8>,
    pub(crate) next: Cell<*mut Slab>,
    pub(crate) prev: Cell<*mut Slab>,
    used: Cell<u32>,
    class: Cell<u8>,
    pub(crate) list: Cell<u8>,
    pages: Cell<u16>,
}

impl Slab {
    /// Initialises the descriptor `slab` for a fresh slab of `pages` pages of class `class`
    /// at `start`, owned by `owner`.
    ///
    /// # Safety
    /// `slab` must be the descriptor of the slab span at `start`, which nothing else uses.
    pub(crate) unsafe fn init(
        slab: *mut Slab,
        start: *mut u8,
        pages: usize,
        class: usize,
        owner: usize,
    ) {
        let size = CLASS_SIZE[class];
        let capacity = pages * PAGE / size;
        // SAFETY: the caller guarantees `slab` is ours; the metadata area is mapped.
        unsafe {
            slab.write(Slab {
                remote: RemoteFreeList::new(),
                owner: AtomicUsize::new(owner),
                free: Cell::new(ptr::null_mut()),
                bump: Cell::new(start),
                end: Cell::new(start.wrapping_add(capacity * size)),
                next: Cell::new(ptr::null_mut()),
                prev: Cell::new(ptr::null_mut()),
                used: Cell::new(0),
                class: Cell::new(class as u8),
                list: Cell::new(IN_NONE),
                pages: Cell::new(pages as u16),
            })
        };
    }

    /// Hands out a block, or null if the slab has none free locally.
    #[inline(always)]
    pub(crate) fn pop(&self, size: usize) -> *mut u8 {
        let free = self.free.get();
        if let Some(block) = NonNull::new(free) {
            // SAFETY: blocks in the local free list were linked by the owner (us).
            self.free.set(unsafe { Block::next(block) });
            self.used.set(self.used.get() + 1);
            return free.cast();
        }
        let bump = self.bump.get();
        if bump < self.end.get() {
            self.bump.set(bump.wrapping_add(size));
            self.used.set(self.used.get() + 1);
            return bump;
        }
        ptr::null_mut()
    }

    /// Takes back a block freed by the owner; returns the new `used` count.
    ///
    /// # Safety
    /// `block` must be a block of this slab handed out by [`Slab::pop`] and not freed since.
    #[inline(always)]
    pub(crate) unsafe fn push_local(&self, block: NonNull<u8>) -> u32 {
        let block = block.cast::<Block>();
        // SAFETY: the block is ours again and at least 16 bytes, aligned to 16.
        unsafe { Block::set_next(block, self.free.get()) };
        self.free.set(block.as_ptr());
        let used = self.used.get() - 1;
        self.used.set(used);
        used
    }

    /// Moves every remotely freed block into the local free list; returns how many.
    pub(crate) fn collect_remote(&self) -> u32 {
        let first = self.remote.take_all();
        let Some(first) = NonNull::new(first) else {
            return 0;
        };
        let mut count = 1;
        let mut last = first;
        // SAFETY: `take_all` synchronised with every push of the chain, so each `next` is
        // initialised; the chain is null-terminated and now ours.
        unsafe {
            while let Some(next) = NonNull::new(Block::next(last)) {
                last = next;
                count += 1;
            }
            Block::set_next(last, self.free.get());
        }
        self.free.set(first.as_ptr());
        self.used.set(self.used.get() - count);
        count
    }

    /// Whether a [`Slab::pop`] would succeed.
    pub(crate) fn has_free(&self) -> bool {
        !self.free.get().is_null() || self.bump.get() < self.end.get()
    }

    /// Blocks handed out and not seen back.
    pub(crate) fn used(&self) -> u32 {
        self.used.get()
    }

    /// The size class.
    pub(crate) fn class(&self) -> usize {
        usize::from(self.class.get())
    }

    /// Pages of the slab.
    pub(crate) fn pages(&self) -> usize {
        usize::from(self.pages.get())
    }

    /// The arena and first page of the slab.
    pub(crate) fn location(this: *const Slab) -> (*mut Arena, usize) {
        (Arena::of(this.cast()), Arena::slab_page(this))
    }

    /// Whether the calling cache `id` owns the slab.
    #[inline(always)]
    pub(crate) fn is_owned_by(&self, id: usize) -> bool {
        self.owner.load(Ordering::Relaxed) == id
    }

    /// Sets the owner (see the module docs for who may).
    pub(crate) fn set_owner(&self, id: usize) {
        self.owner.store(id, Ordering::Relaxed);
    }
}

/// A doubly linked list of slabs through their `next` / `prev` fields.
#[derive(Debug)]
pub(crate) struct SlabList {
    pub(crate) head: *mut Slab,
    tag: u8,
}

impl SlabList {
    /// An empty list whose members carry `tag` in their `list` field.
    pub(crate) const fn new(tag: u8) -> Self {
        SlabList {
            head: ptr::null_mut(),
            tag,
        }
    }

    /// Pushes `slab` at the front.
    ///
    /// # Safety
    /// `slab` must be a live descriptor in no list, accessible to the caller.
    pub(crate) unsafe fn push(&mut self, slab: *mut Slab) {
        // SAFETY: the caller guarantees access to `slab` and to the list members.
        unsafe {
            let s = &*slab;
            s.prev.set(ptr::null_mut());
            s.next.set(self.head);
            s.list.set(self.tag);
            if let Some(head) = self.head.as_ref() {
                head.prev.set(slab);
            }
        }
        self.head = slab;
    }

    /// Unlinks `slab`, which must be in this list.
    ///
    /// # Safety
    /// `slab` must be a member of this list.
    pub(crate) unsafe fn remove(&mut self, slab: *mut Slab) {
        // SAFETY: the caller guarantees `slab` and its neighbours are members of this list.
        unsafe {
            let s = &*slab;
            debug_assert_eq!(s.list.get(), self.tag);
            let (next, prev) = (s.next.get(), s.prev.get());
            if let Some(prev) = prev.as_ref() {
                prev.next.set(next);
            } else {
                self.head = next;
            }
            if let Some(next) = next.as_ref() {
                next.prev.set(prev);
            }
            s.list.set(IN_NONE);
        }
    }

    /// Pops the front slab, or null.
    ///
    /// # Safety
    /// The list's members must be accessible to the caller.
    pub(crate) unsafe fn pop(&mut self) -> *mut Slab {
        let head = self.head;
        if !head.is_null() {
            // SAFETY: `head` is a member.
            unsafe { self.remove(head) };
        }
        head
    }
}
