//! The per-thread cache: for each size class, the slab being allocated from, the slabs with
//! free blocks, and the full ones.
//!
//! ## Fast paths
//! - alloc: pop the current slab's local free list (or bump pointer). No atomic operation.
//! - free by the owner: push onto the slab's local free list. No atomic operation.
//! - free by another thread: one CAS push onto the slab's [`RemoteFreeList`], no lock.
//!
//! ## Slow path (current slab exhausted)
//! Collect the current slab's remote frees; else take a slab from the partial list; else sweep
//! the full list for slabs that received remote frees; else get a slab from the node pool of
//! the CPU the thread runs on now (adopting an orphan, or carving a new one). At most one empty
//! slab per class is kept as a spare; the others go back to their node pool.
//!
//! ## Thread-local storage and thread exit
//! The cache lives in a `thread_local!` with a `const` initialiser and no destructor, so
//! reaching it is a plain TLS address computation and it stays accessible until the thread is
//! gone. A second, zero-sized thread-local `Guard` has the destructor: it is touched once when
//! the cache starts, and at thread exit it returns the cache — empty slabs to their node pool,
//! slabs with live blocks parked as orphans for other threads to adopt. The state byte then
//! says `DEAD`, and any allocation later in the thread's teardown (other TLS destructors) is
//! served by one shared fallback cache under a mutex; frees from such a thread are remote
//! pushes. If registering the destructor itself allocates (platforms without
//! `__cxa_thread_atexit_impl`), the re-entrant call sees `STARTING` and uses the fallback too.
//!
//! ## Identity
//! A cache is named in slab descriptors (`Slab::owner`) by a serial drawn from one
//! process-wide counter when it starts, never by its address: the TLS block of an exited
//! thread is reused by a later thread, and in a child process glibc hands the cached stacks of
//! the parent's other threads (which do not exist in the child, and never tore their caches
//! down) to the child's new threads, at the same addresses. A serial is never given twice:
//! the counter only grows, and a child inherits its value, so its threads get serials above
//! every owner recorded in the slabs it inherited. The fallback cache has the fixed serial
//! [`FALLBACK_ID`]; 0 means "no owner" (an orphan slab, a cache not started yet).
//!
//! The cache registry (for the statistics) links caches through their own memory; in a child
//! the entries of the parent's other threads are dropped at once (`fork_child`), before any
//! new thread can overwrite them.
//!
//! [`RemoteFreeList`]: crate::remote::RemoteFreeList

use core::cell::{Cell, UnsafeCell};
use core::ptr::{self, NonNull};
use std::sync::Mutex;

use crate::arena::Arena;
use crate::global::Global;
use crate::node::node_of_arena;
use crate::size_class::{CLASSES, CLASS_SIZE};
use crate::slab::{Slab, SlabList, IN_FULL, IN_NONE, IN_PARTIAL};
use crate::sync::{lock, AtomicU64, AtomicUsize, Locked, Ordering};

const UNINIT: u8 = 0;
const STARTING: u8 = 1;
const LIVE: u8 = 2;
const DEAD: u8 = 3;

/// Empty slabs kept per class.
const SPARE_SLABS: u32 = 1;

/// The owner id of no cache (orphan slabs; a thread's cache before it starts).
pub(crate) const NO_OWNER: usize = 0;
/// The owner id of the shared fallback cache.
const FALLBACK_ID: usize = 1;
/// The next thread cache's owner id (see "Identity" in the module docs). A 64-bit counter
/// does not wrap in practice (one new thread per nanosecond for 584 years).
static NEXT_ID: AtomicUsize = AtomicUsize::new(FALLBACK_ID + 1);

#[derive(Debug)]
struct ClassCache {
    current: *mut Slab,
    partial: SlabList,
    full: SlabList,
    empties: u32,
}

impl ClassCache {
    const fn new() -> Self {
        ClassCache {
            current: ptr::null_mut(),
            partial: SlabList::new(IN_PARTIAL),
            full: SlabList::new(IN_FULL),
            empties: 0,
        }
    }
}

/// A cache of slabs per size class, owned by one thread (or, for the fallback cache, by
/// whoever holds its mutex).
#[derive(Debug)]
pub(crate) struct ThreadCache {
    /// The owner id of this cache in slab descriptors ([`NO_OWNER`] until it starts).
    id: usize,
    classes: [ClassCache; CLASSES],
    /// Bytes of small blocks allocated minus freed through this cache (wrapping; one writer).
    small_bytes: AtomicU64,
    registered: bool,
    reg_next: *mut ThreadCache,
    reg_prev: *mut ThreadCache,
}

impl ThreadCache {
    const fn new(id: usize) -> Self {
        ThreadCache {
            id,
            classes: [const { ClassCache::new() }; CLASSES],
            small_bytes: AtomicU64::new(0),
            registered: false,
            reg_next: ptr::null_mut(),
            reg_prev: ptr::null_mut(),
        }
    }

    /// The owner id of this cache in slab descriptors.
    #[inline(always)]
    fn id(&self) -> usize {
        self.id
    }

    #[inline(always)]
    fn count(&self, delta: u64) {
        let c = &self.small_bytes;
        c.store(
            c.load(Ordering::Relaxed).wrapping_add(delta),
            Ordering::Relaxed,
        );
    }

    #[inline(always)]
    fn alloc(&mut self, class: usize) -> *mut u8 {
        debug_assert!(class < CLASSES);
        // SAFETY: size classes are below CLASSES by construction (`size_class`).
        let slab = unsafe { self.classes.get_unchecked(class) }.current;
        // SAFETY: the current slab is owned by this cache.
        if let Some(slab) = unsafe { slab.as_ref() } {
            let p = slab.pop(CLASS_SIZE[class]);
            if !p.is_null() {
                self.count(CLASS_SIZE[class] as u64);
                return p;
            }
        }
        self.alloc_slow(class)
    }

    #[cold]
    fn alloc_slow(&mut self, class: usize) -> *mut u8 {
        let size = CLASS_SIZE[class];
        let p = self.refill(class);
        if p.is_null() {
            return p;
        }
        self.count(size as u64);
        p
    }

    /// Finds a slab with a free block for `class`, makes it current and pops from it.
    fn refill(&mut self, class: usize) -> *mut u8 {
        let size = CLASS_SIZE[class];
        let id = self.id();
        let cc = &mut self.classes[class];
        // SAFETY: every slab reached here is owned by this cache (current, partial and full
        // lists are ours; the pool's slab is handed to us with our id as owner).
        unsafe {
            if let Some(cur) = cc.current.as_ref() {
                cur.collect_remote();
                let p = cur.pop(size);
                if !p.is_null() {
                    return p;
                }
                cc.full.push(cc.current);
                cc.current = ptr::null_mut();
            }
            loop {
                let s = cc.partial.pop();
                let Some(sl) = s.as_ref() else { break };
                if sl.used() == 0 {
                    cc.empties -= 1;
                }
                sl.collect_remote();
                if sl.has_free() {
                    cc.current = s;
                    return sl.pop(size);
                }
                cc.full.push(s);
            }
            // Sweep the full slabs for blocks freed by other threads.
            let mut s = cc.full.head;
            while let Some(sl) = s.as_ref() {
                let next = sl.next.get();
                if !sl.remote.is_empty() {
                    sl.collect_remote();
                    cc.full.remove(s);
                    if cc.current.is_null() {
                        cc.current = s;
                    } else {
                        keep_or_release(cc, s);
                    }
                }
                s = next;
            }
            if let Some(cur) = cc.current.as_ref() {
                return cur.pop(size);
            }
            let s = Global::get().current_pool().alloc_slab(class, id);
            let Some(sl) = s.as_ref() else {
                return ptr::null_mut();
            };
            cc.current = s;
            let p = sl.pop(size);
            if p.is_null() {
                // An adopted orphan that had only remote frees pending: collected already.
                sl.collect_remote();
                return sl.pop(size);
            }
            p
        }
    }

    /// Frees a block of `class` in `slab`: locally if this cache owns the slab, else as a
    /// remote free.
    ///
    /// # Safety
    /// `ptr` must be a live block of class `class` in `slab`.
    #[inline(always)]
    unsafe fn free(&mut self, ptr: NonNull<u8>, slab: *mut Slab) {
        // SAFETY: the caller guarantees `slab` is the live slab of `ptr`.
        let sl = unsafe { &*slab };
        let class = sl.class();
        debug_assert!(class < CLASSES);
        // SAFETY: a slab's class is a size-class index, below CLASSES (`Slab::init`).
        let size = unsafe { *CLASS_SIZE.get_unchecked(class) };
        self.count((size as u64).wrapping_neg());
        if sl.is_owned_by(self.id()) {
            // SAFETY: we own the slab and the block is live.
            let used = unsafe { sl.push_local(ptr) };
            // The current slab (in no list) needs nothing more; a full slab becomes partial,
            // an empty partial one may be released.
            let list = sl.list.get();
            if list != IN_NONE && (used == 0 || list == IN_FULL) {
                self.after_local_free(slab, class);
            }
        } else {
            // SAFETY: the block is live and now ours to hand back.
            unsafe { sl.remote.push(ptr.cast()) };
        }
    }

    #[cold]
    fn after_local_free(&mut self, slab: *mut Slab, class: usize) {
        let cc = &mut self.classes[class];
        if slab == cc.current {
            return;
        }
        // SAFETY: the slab is owned by this cache and sits in one of its lists.
        unsafe {
            let sl = &*slab;
            match sl.list.get() {
                IN_FULL => {
                    cc.full.remove(slab);
                    if sl.used() == 0 {
                        keep_or_release(cc, slab);
                    } else {
                        cc.partial.push(slab);
                    }
                }
                IN_PARTIAL if sl.used() == 0 => {
                    cc.partial.remove(slab);
                    keep_or_release(cc, slab);
                }
                _ => {}
            }
        }
    }

    /// Gives every slab back: empty ones to their node pool, others as orphans.
    fn teardown(&mut self) {
        for cc in self.classes.iter_mut() {
            let current = core::mem::replace(&mut cc.current, ptr::null_mut());
            // SAFETY: all slabs reached are owned by this cache; lists are emptied as we go.
            unsafe {
                give_back(current);
                loop {
                    let s = cc.partial.pop();
                    if s.is_null() {
                        break;
                    }
                    give_back(s);
                }
                loop {
                    let s = cc.full.pop();
                    if s.is_null() {
                        break;
                    }
                    give_back(s);
                }
            }
            cc.empties = 0;
        }
    }
}

/// Keeps an empty slab as the class's spare, or gives it back to its node pool.
///
/// # Safety
/// `slab` must be owned by the cache of `cc`, and in no list.
unsafe fn keep_or_release(cc: &mut ClassCache, slab: *mut Slab) {
    // SAFETY: forwarded from the caller.
    unsafe {
        let sl = &*slab;
        if sl.used() == 0 {
            if cc.empties < SPARE_SLABS {
                cc.empties += 1;
                cc.partial.push(slab);
            } else {
                Global::get()
                    .pool(node_of_arena(slab.cast()))
                    .release_slab(slab);
            }
        } else {
            cc.partial.push(slab);
        }
    }
}

/// Returns an owned slab at thread exit.
///
/// # Safety
/// `slab` must be null or owned by the exiting cache and in no list.
unsafe fn give_back(slab: *mut Slab) {
    // SAFETY: forwarded from the caller.
    unsafe {
        let Some(sl) = slab.as_ref() else { return };
        debug_assert_eq!(sl.list.get(), IN_NONE);
        sl.collect_remote();
        let pool = Global::get().pool(node_of_arena(slab.cast()));
        if sl.used() == 0 {
            pool.release_slab(slab);
        } else {
            pool.abandon_slab(slab);
        }
    }
}

struct Local {
    state: Cell<u8>,
    cache: UnsafeCell<ThreadCache>,
}

/// Zero-sized; its destructor returns the thread's cache.
struct Guard;

impl Drop for Guard {
    fn drop(&mut self) {
        LOCAL.with(|l| {
            if l.state.get() == LIVE {
                l.state.set(DEAD);
                // SAFETY: the state is no longer LIVE, so no other path borrows the cache.
                let cache = unsafe { &mut *l.cache.get() };
                cache.teardown();
                unregister(cache);
            }
        });
    }
}

thread_local! {
    static LOCAL: Local = const {
        Local { state: Cell::new(UNINIT), cache: UnsafeCell::new(ThreadCache::new(NO_OWNER)) }
    };
    static GUARD: Guard = const { Guard };
}

/// The cache used when a thread has none (before it starts, after it exited).
struct Fallback(UnsafeCell<ThreadCache>);
// SAFETY: the cache is only used under the FALLBACK mutex.
unsafe impl Send for Fallback {}

static FALLBACK: Mutex<Fallback> =
    Mutex::new(Fallback(UnsafeCell::new(ThreadCache::new(FALLBACK_ID))));

/// Small in-use bytes of caches that are gone, plus frees made without a cache.
static RETIRED_SMALL: AtomicU64 = AtomicU64::new(0);

/// Allocations served by the fallback cache (threads without a live cache).
pub(crate) static FALLBACK_ALLOCS: AtomicU64 = AtomicU64::new(0);

struct Registry {
    head: *mut ThreadCache,
}
// SAFETY: the list is only followed under the REGISTRY mutex; members unlink themselves
// (under it) before their memory goes away.
unsafe impl Send for Registry {}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    head: ptr::null_mut(),
});

/// The fallback and registry locks held across `fork()` (see [`crate::global`]).
struct ForkGuards {
    fallback: UnsafeCell<Option<Locked<'static, Fallback>>>,
    registry: UnsafeCell<Option<Locked<'static, Registry>>>,
}

// SAFETY: touched only by the forking thread inside the `pthread_atfork` handlers, which run
// one at a time.
unsafe impl Sync for ForkGuards {}

static FORK_GUARDS: ForkGuards = ForkGuards {
    fallback: UnsafeCell::new(None),
    registry: UnsafeCell::new(None),
};

/// `pthread_atfork` prepare, first step: the fallback cache's lock (taken before node locks
/// elsewhere too).
pub(crate) fn fork_lock_fallback() {
    let guard = lock(&FALLBACK);
    // SAFETY: see `ForkGuards`.
    unsafe { *FORK_GUARDS.fallback.get() = Some(guard) };
}

/// `pthread_atfork` prepare, last step: the registry lock.
pub(crate) fn fork_lock_registry() {
    let guard = lock(&REGISTRY);
    // SAFETY: see `ForkGuards`.
    unsafe { *FORK_GUARDS.registry.get() = Some(guard) };
}

/// `pthread_atfork` parent and child: releases both locks.
pub(crate) fn fork_unlock() {
    // SAFETY: see `ForkGuards`; dropping the guards unlocks.
    unsafe {
        drop((*FORK_GUARDS.registry.get()).take());
        drop((*FORK_GUARDS.fallback.get()).take());
    }
}

/// `pthread_atfork` child, while the locks of the prepare handler are still held: drops from
/// the registry the caches of the parent's other threads, which do not exist here.
///
/// Their memory (the TLS of their stacks) is still mapped now, but glibc hands those stacks to
/// the child's next threads, whose new caches would be overwritten in place while still
/// linked (a cycle the statistics would follow forever). Their small in-use bytes move to
/// [`RETIRED_SMALL`]: the blocks stay allocated in the child. Their slabs are left as they
/// are, owned by serials no thread of the child will have; their blocks can be freed (as
/// remote frees) but are not handed out again here.
pub(crate) fn fork_child() {
    // SAFETY: the prepare handler stored both guards, and only this thread exists now.
    let (registry, fallback) = unsafe {
        (
            (*FORK_GUARDS.registry.get()).as_mut(),
            (*FORK_GUARDS.fallback.get()).as_ref(),
        )
    };
    let (Some(r), Some(fallback)) = (registry, fallback) else {
        return;
    };
    let own = LOCAL.with(|l| {
        if l.state.get() == LIVE {
            l.cache.get()
        } else {
            ptr::null_mut()
        }
    });
    let fallback = fallback.0.get();
    let mut kept = [ptr::null_mut::<ThreadCache>(); 2];
    let mut c = r.head;
    // SAFETY: registered caches are mapped (this is before any thread of the child exists);
    // we hold the registry lock.
    while let Some(cache) = unsafe { c.as_ref() } {
        let next = cache.reg_next;
        if c == own {
            kept[0] = c;
        } else if c == fallback {
            kept[1] = c;
        } else {
            let bytes = cache.small_bytes.load(Ordering::Relaxed);
            RETIRED_SMALL.fetch_add(bytes, Ordering::Relaxed);
        }
        c = next;
    }
    r.head = ptr::null_mut();
    for c in kept.into_iter().filter(|c| !c.is_null()) {
        // SAFETY: `c` is this thread's cache or the fallback one (whose lock we hold), both
        // live; we hold the registry lock.
        unsafe {
            (*c).reg_prev = ptr::null_mut();
            (*c).reg_next = r.head;
            if let Some(head) = r.head.as_mut() {
                head.reg_prev = c;
            }
        }
        r.head = c;
    }
}

fn register(cache: &mut ThreadCache) {
    let mut r = lock(&REGISTRY);
    cache.registered = true;
    cache.reg_prev = ptr::null_mut();
    cache.reg_next = r.head;
    // SAFETY: members are live (they unlink before going away); we hold the lock.
    if let Some(head) = unsafe { r.head.as_mut() } {
        head.reg_prev = cache;
    }
    r.head = cache;
}

fn unregister(cache: &mut ThreadCache) {
    if !cache.registered {
        return;
    }
    let mut r = lock(&REGISTRY);
    // SAFETY: neighbours are live members; we hold the lock.
    unsafe {
        if let Some(prev) = cache.reg_prev.as_mut() {
            prev.reg_next = cache.reg_next;
        } else {
            r.head = cache.reg_next;
        }
        if let Some(next) = cache.reg_next.as_mut() {
            next.reg_prev = cache.reg_prev;
        }
    }
    cache.registered = false;
    let bytes = cache.small_bytes.load(Ordering::Relaxed);
    RETIRED_SMALL.fetch_add(bytes, Ordering::Relaxed);
}

/// Bytes of small blocks in use, summed over all caches.
pub(crate) fn small_in_use() -> u64 {
    let r = lock(&REGISTRY);
    let mut total = RETIRED_SMALL.load(Ordering::Relaxed);
    let mut c = r.head;
    // SAFETY: members are live while registered; we hold the lock.
    while let Some(cache) = unsafe { c.as_ref() } {
        total = total.wrapping_add(cache.small_bytes.load(Ordering::Relaxed));
        c = cache.reg_next;
    }
    total
}

/// The calling thread's `Local`. Taking the address in a trivial closure keeps
/// `LocalKey::with` small enough to inline (with the fast path inside the closure it was an
/// out-of-line call, about 3 ns of the alloc+free pair).
#[inline(always)]
fn local() -> *const Local {
    LOCAL.with(|l| l as *const Local)
}

/// Allocates a block of `class`.
#[inline(always)]
pub(crate) fn alloc(class: usize) -> *mut u8 {
    // SAFETY: the thread's own `Local`, which has no destructor and lives as long as the
    // thread; used only within this call.
    let l = unsafe { &*local() };
    if l.state.get() == LIVE {
        // SAFETY: LIVE means the cache is started and not torn down; allocation paths do
        // not re-enter the allocator, so this is the only borrow.
        return unsafe { &mut *l.cache.get() }.alloc(class);
    }
    alloc_cold(l, class)
}

#[cold]
fn alloc_cold(l: &Local, class: usize) -> *mut u8 {
    if l.state.get() == UNINIT {
        Global::get();
        l.state.set(STARTING);
        // Registers the guard's destructor (may allocate with the C library, or re-enter us,
        // in which case the nested call sees STARTING).
        GUARD.with(|_| ());
        // SAFETY: not LIVE yet, so nothing else borrows the cache.
        let cache = unsafe { &mut *l.cache.get() };
        // Relaxed: the counter only has to hand out distinct values.
        cache.id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        register(cache);
        l.state.set(LIVE);
        // SAFETY: LIVE, only borrow (as in `alloc`).
        return unsafe { &mut *l.cache.get() }.alloc(class);
    }
    FALLBACK_ALLOCS.fetch_add(1, Ordering::Relaxed);
    let guard = lock(&FALLBACK);
    // SAFETY: we hold the fallback mutex.
    let cache = unsafe { &mut *guard.0.get() };
    if !cache.registered {
        register(cache);
    }
    cache.alloc(class)
}

/// Frees a small block (its class is read from its slab).
///
/// # Safety
/// `ptr` must be a live small block from this allocator.
#[inline(always)]
pub(crate) unsafe fn free(ptr: NonNull<u8>) {
    // SAFETY: the caller guarantees `ptr` is a live small block.
    let slab = unsafe { Arena::slab_of_block(ptr.as_ptr()) };
    // SAFETY: as in `alloc`.
    let l = unsafe { &*local() };
    if l.state.get() == LIVE {
        // SAFETY: as in `alloc`; the block is live and in `slab`.
        unsafe { (*l.cache.get()).free(ptr, slab) };
    } else {
        free_cold(ptr, slab);
    }
}

#[cold]
fn free_cold(ptr: NonNull<u8>, slab: *mut Slab) {
    // SAFETY: the slab is live (it holds the live block `ptr`); its class is immutable.
    let class = unsafe { (*slab).class() };
    RETIRED_SMALL.fetch_sub(CLASS_SIZE[class] as u64, Ordering::Relaxed);
    // SAFETY: the block is live (caller of `free`); a remote push is valid whoever owns it.
    unsafe { (*slab).remote.push(ptr.cast()) };
}
