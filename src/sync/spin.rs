//! A small spin lock for critical sections of a few dozen instructions.
//!
//! The mailbox queues are locked for a push, a pop or a short scan, never
//! across a park or a copy of message data. For sections that short a
//! `std::sync::Mutex` costs more than the work: its unlock is a
//! read-modify-write (to find sleepers) and its guard checks for poisoning.
//! This lock is one atomic bit test-and-set to take and a plain `Release`
//! store to give back.
//!
//! Its holder may keep *flags* in the lock word beside the lock bit
//! ([`SpinGuard::set_flags`]), which any thread can read without the lock
//! ([`SpinLock::flags`]): a mailbox says there that a message waits in it
//! for its owner (`p2p::mailbox`), who then spins on the one line the
//! sender wrote.
//!
//! A waiter spins on a plain load (no cache-line ping-pong) and, if the holder
//! is slow (its thread was preempted), yields its thread after a while
//! instead of burning the core. Code holding the lock must never park or
//! suspend its rank: the holder would then wait for a rank that cannot run.

use std::ops::{Deref, DerefMut};

use super::{spin_loop, AtomicU32, Ordering, UnsafeCell};

/// Spins before yielding the thread.
const SPINS: u32 = 64;

/// The lock bit of the lock word; the other bits are the holder's flags.
const LOCKED: u32 = 1;

/// A mutual-exclusion lock that spins.
#[derive(Debug)]
pub(crate) struct SpinLock<T> {
    /// [`LOCKED`] and the flags.
    word: AtomicU32,
    value: UnsafeCell<T>,
}

// SAFETY: the lock gives one thread at a time access to `value`, which may
// move between threads (`T: Send`).
unsafe impl<T: Send> Sync for SpinLock<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for SpinLock<T> {}

impl<T: Default> Default for SpinLock<T> {
    fn default() -> Self {
        SpinLock::new(T::default())
    }
}

impl<T> SpinLock<T> {
    /// An unlocked lock holding `value`.
    pub(crate) fn new(value: T) -> Self {
        SpinLock {
            word: AtomicU32::new(0),
            value: UnsafeCell::new(value),
        }
    }

    /// Takes the lock, spinning (then yielding) while another thread has it.
    #[inline]
    pub(crate) fn lock(&self) -> SpinGuard<'_, T> {
        match self.try_lock() {
            Some(guard) => guard,
            None => {
                self.lock_slow();
                self.guard()
            }
        }
    }

    /// Takes the lock with a load and a store, no read-modify-write, for a
    /// caller that is the only thread using it (a job's one worker in solo
    /// mode, `Scheduler::is_solo`).
    ///
    /// # Panics
    ///
    /// If the lock is held (by this thread, then: a holder takes it again).
    ///
    /// # Safety
    ///
    /// No other thread may use the lock until the guard is dropped, and
    /// whatever another thread did with it before happens before this call.
    #[inline]
    pub(crate) unsafe fn lock_alone(&self) -> SpinGuard<'_, T> {
        let word = self.word.load(Ordering::Relaxed);
        if word & LOCKED != 0 {
            held_twice();
        }
        self.word.store(word | LOCKED, Ordering::Relaxed);
        SpinGuard {
            lock: self,
            flags: word,
        }
    }

    /// The value, read without taking the lock, by a caller that knows
    /// it no longer changes (many threads at once: `T: Sync`).
    ///
    /// # Safety
    ///
    /// While the reference lives nobody may take the lock (a guard is a
    /// `&mut`) or otherwise write the value, and every earlier write of it
    /// happens before this call.
    #[inline]
    pub(crate) unsafe fn get_frozen(&self) -> &T
    where
        T: Sync,
    {
        // SAFETY: the caller's contract: no writer and no guard while the
        // shared reference lives, earlier writes visible.
        self.value.with(|v| unsafe { &*v })
    }

    /// The guard of the lock just taken, with the flags it found.
    #[inline(always)]
    fn guard(&self) -> SpinGuard<'_, T> {
        // The holder's own line, just written: no other thread writes the
        // word until the unlock.
        let flags = self.word.load(Ordering::Relaxed) & !LOCKED;
        SpinGuard { lock: self, flags }
    }

    /// The flags, read without the lock (`Relaxed`: a reader that acts on
    /// them takes the lock, which orders what the holder that set them
    /// wrote before it).
    #[inline]
    pub(crate) fn flags(&self) -> u32 {
        self.word.load(Ordering::Relaxed) & !LOCKED
    }

    #[cold]
    fn lock_slow(&self) {
        let mut spins = 0;
        loop {
            // Wait on a plain load: no cache-line transfer while it is held.
            while self.word.load(Ordering::Relaxed) & LOCKED != 0 {
                if spins < SPINS {
                    spins += 1;
                    spin_loop();
                } else {
                    yield_thread();
                }
            }
            if let Some(guard) = self.try_lock() {
                std::mem::forget(guard);
                return;
            }
        }
    }

    /// Takes the lock if it is free.
    #[inline]
    pub(crate) fn try_lock(&self) -> Option<SpinGuard<'_, T>> {
        // Not `bool::then_some`: it would build (and drop, unlocking!) a
        // guard even when the lock was not taken.
        // `fetch_or` of one bit, its other bits unused: `lock bts` on x86.
        if self.word.fetch_or(LOCKED, Ordering::Acquire) & LOCKED != 0 {
            None
        } else {
            Some(self.guard())
        }
    }
}

#[cold]
#[inline(never)]
fn held_twice() -> ! {
    panic!("a spin lock taken alone is held already")
}

fn yield_thread() {
    #[cfg(not(loom))]
    std::thread::yield_now();
    #[cfg(loom)]
    loom::thread::yield_now();
}

/// Access to the value of a held [`SpinLock`]; unlocks when dropped.
#[derive(Debug)]
pub(crate) struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
    /// The flags the unlock stores.
    flags: u32,
}

impl<T> SpinGuard<'_, T> {
    /// The flags of the lock word, as this holder left them so far.
    #[inline]
    pub(crate) fn flags(&self) -> u32 {
        self.flags
    }

    /// Sets the flags of the lock word (bits other than the lowest, which
    /// is the lock's). They are stored by the unlock, in its one store: set
    /// while the lock is held, a reader spinning on them would see them,
    /// take the line, and find the lock still held, the line then going
    /// back to the holder for its unlock and to the reader once more (two
    /// transfers between cores more a message).
    #[inline]
    pub(crate) fn set_flags(&mut self, flags: u32) {
        debug_assert_eq!(flags & LOCKED, 0, "the lowest bit is the lock's");
        self.flags = flags;
    }
}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: the guard proves the lock is held by this thread, so no
        // other reference to the value exists.
        self.lock.value.with(|v| unsafe { &*v })
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; `&mut self` makes this the only access.
        self.lock.value.with_mut(|v| unsafe { &mut *v })
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        // A release store. In C11 it cannot come between a holder's taking
        // swap and a failed swap that read it (read-modify-writes are atomic
        // in the total modification order), but loom 0.7 keeps that order
        // partial and would let a later swap read the failed swap's `true`;
        // its model therefore unlocks with a swap.
        #[cfg(not(loom))]
        self.lock.word.store(self.flags, Ordering::Release);
        #[cfg(loom)]
        self.lock.word.swap(self.flags, Ordering::Release);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_lock_taken_alone_locks_and_unlocks() {
        let lock = SpinLock::new(1);
        {
            // SAFETY: the test's thread is the only one using the lock.
            let mut guard = unsafe { lock.lock_alone() };
            *guard += 1;
            assert!(lock.try_lock().is_none(), "held");
        }
        assert_eq!(*lock.lock(), 2);
    }

    #[test]
    fn flags_outlive_their_holder_and_the_next() {
        let lock = SpinLock::new(());
        assert_eq!(lock.flags(), 0);
        {
            let mut guard = lock.lock();
            guard.set_flags(6);
            assert_eq!(guard.flags(), 6);
            assert_eq!(lock.flags(), 0, "stored by the unlock");
            assert!(lock.try_lock().is_none(), "held");
        }
        assert_eq!(lock.flags(), 6, "published by the unlock");
        drop(lock.lock());
        assert_eq!(lock.flags(), 6, "kept by the next holder");
        // SAFETY: the test's thread is the only one using the lock.
        let mut guard = unsafe { lock.lock_alone() };
        assert_eq!(guard.flags(), 6);
        guard.set_flags(0);
        drop(guard);
        assert_eq!(lock.flags(), 0);
        assert!(lock.try_lock().is_some(), "unlocked");
    }

    #[test]
    #[should_panic(expected = "held already")]
    fn a_lock_taken_alone_twice_panics() {
        let lock = SpinLock::new(());
        let _first = lock.lock();
        // SAFETY: the test's thread is the only one using the lock.
        let _second = unsafe { lock.lock_alone() };
    }
}
