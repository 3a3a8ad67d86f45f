//! The remote-free list: how a block freed by a thread that does not own its slab gets back to
//! the owner without a lock.
//!
//! ## Protocol
//! - Any thread may [`push`](RemoteFreeList::push) a block: it writes the current head into the
//!   block's `next` field, then publishes the block with a compare-and-swap on the head
//!   (`Release` on success, so the `next` write happens-before any reader of the new head).
//! - The owner takes the whole list at once with [`take_all`](RemoteFreeList::take_all): a
//!   `swap(null, Acquire)`, which synchronises with every push it observes, so walking the
//!   `next` fields afterwards reads initialised values.
//! - There is no pop-one operation, so there is no ABA problem: a push's CAS succeeds only if
//!   the head is still the value it linked to, and then that link is correct whatever happened
//!   to the list in between (emptied by `take_all` and refilled with the same block included).
//! - Pushes are lock-free (a failed CAS means another push or a take succeeded); `take_all` is
//!   wait-free.
//!
//! The block lives in the freed memory itself: [`Block`] is one pointer wide, and every size
//! class is at least 16 bytes. The loom model of this list is
//! `loom-tests/tests/alloc_remote_free.rs`.

use core::ptr::{self, NonNull};

use crate::sync::{AtomicPtr, Ordering, UnsafeCell};

/// A free block, overlaid on the first bytes of freed memory.
#[derive(Debug)]
#[repr(C)]
pub struct Block {
    next: UnsafeCell<*mut Block>,
}

impl Block {
    /// A detached block (used by tests and models; the allocator overlays blocks on freed
    /// memory instead of constructing them).
    pub fn new() -> Self {
        Block {
            next: UnsafeCell::new(ptr::null_mut()),
        }
    }

    /// The block after `this` in its list (null at the end).
    ///
    /// # Safety
    /// `this` must point to a block whose `next` field was written by [`Block::set_next`] (or
    /// [`RemoteFreeList::push`]) and whose write happens-before this read.
    #[inline(always)]
    pub unsafe fn next(this: NonNull<Block>) -> *mut Block {
        // SAFETY: the caller guarantees `this` is valid and its `next` was initialised.
        unsafe { (*this.as_ptr()).next.with(|p| *p) }
    }

    /// Links `this` to `next`.
    ///
    /// # Safety
    /// `this` must point to at least one pointer's worth of writable memory, aligned for a
    /// pointer, that no other thread accesses concurrently.
    #[inline(always)]
    pub unsafe fn set_next(this: NonNull<Block>, next: *mut Block) {
        // SAFETY: the caller guarantees exclusive access to valid, aligned memory; the stored
        // value is a raw pointer, so overwriting uninitialised bytes drops nothing.
        unsafe { (*this.as_ptr()).next.with_mut(|p| p.write(next)) }
    }
}

impl Default for Block {
    fn default() -> Self {
        Self::new()
    }
}

/// A multi-producer list of freed blocks that its owner takes all at once.
#[derive(Debug)]
pub struct RemoteFreeList {
    head: AtomicPtr<Block>,
}

impl RemoteFreeList {
    /// An empty list.
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        RemoteFreeList {
            head: AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// An empty list.
    #[cfg(loom)]
    pub fn new() -> Self {
        RemoteFreeList {
            head: AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// Pushes `block`; callable from any thread.
    ///
    /// # Safety
    /// `block` must be valid for writing one pointer, owned by the caller (freed by it, not in
    /// any other list), and must stay valid until the owner has taken and consumed it.
    #[inline]
    pub unsafe fn push(&self, block: NonNull<Block>) {
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            // SAFETY: the caller owns `block` until the CAS below publishes it.
            unsafe { Block::set_next(block, head) };
            match self.head.compare_exchange_weak(
                head,
                block.as_ptr(),
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(current) => head = current,
            }
        }
    }

    /// Takes every block pushed so far, as a null-terminated chain linked through
    /// [`Block::next`]; the caller now owns them all.
    #[inline]
    pub fn take_all(&self) -> *mut Block {
        // Fast exit without a write when there is nothing to take.
        if self.head.load(Ordering::Relaxed).is_null() {
            return ptr::null_mut();
        }
        self.head.swap(ptr::null_mut(), Ordering::Acquire)
    }

    /// Whether the list looked empty (a hint: a push may land right after).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.head.load(Ordering::Relaxed).is_null()
    }
}

#[cfg(not(loom))]
impl Default for RemoteFreeList {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(loom)]
impl Default for RemoteFreeList {
    fn default() -> Self {
        Self::new()
    }
}
