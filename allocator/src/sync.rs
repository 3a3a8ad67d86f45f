//! The synchronisation facade: every atomic and cell of the lock-free parts comes from here, so
//! that the loom build (`RUSTFLAGS="--cfg loom"`) swaps them all at once.
//!
//! [`UnsafeCell`] wraps the cell so that every access goes through `with` / `with_mut`; under
//! loom those calls are tracked and a data race between them fails the model.

#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{AtomicPtr, Ordering};
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicPtr, Ordering};

#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{AtomicU64, AtomicUsize};

/// A cell whose accesses are checked by loom in the loom build.
#[cfg(not(loom))]
#[derive(Debug)]
#[repr(transparent)]
pub(crate) struct UnsafeCell<T>(core::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    /// A cell holding `value`.
    pub(crate) const fn new(value: T) -> Self {
        UnsafeCell(core::cell::UnsafeCell::new(value))
    }

    /// Reads through the cell.
    #[inline(always)]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    /// Writes through the cell.
    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;

#[cfg(not(loom))]
pub(crate) use locked::{assert_unlocked, lock, Locked};

/// The allocator's mutexes, taken through [`lock`]: poisoning is ignored (nothing panics under
/// them), and debug builds count the locks each thread holds so that [`assert_unlocked`] can
/// check, at every entry into the allocator, that it is not re-entered while one of its own
/// locks is held (which would deadlock or corrupt state).
#[cfg(not(loom))]
mod locked {
    use core::ops::{Deref, DerefMut};
    use std::sync::{Mutex, MutexGuard};

    #[cfg(debug_assertions)]
    std::thread_local! {
        static HELD: core::cell::Cell<u32> = const { core::cell::Cell::new(0) };
    }

    /// A held lock of the allocator.
    #[derive(Debug)]
    pub(crate) struct Locked<'a, T>(MutexGuard<'a, T>);

    /// Locks `m`.
    pub(crate) fn lock<T>(m: &Mutex<T>) -> Locked<'_, T> {
        let guard = m.lock().unwrap_or_else(|e| e.into_inner());
        #[cfg(debug_assertions)]
        HELD.with(|h| h.set(h.get() + 1));
        Locked(guard)
    }

    impl<T> Drop for Locked<'_, T> {
        fn drop(&mut self) {
            #[cfg(debug_assertions)]
            HELD.with(|h| h.set(h.get() - 1));
        }
    }

    impl<T> Deref for Locked<'_, T> {
        type Target = T;
        fn deref(&self) -> &T {
            &self.0
        }
    }

    impl<T> DerefMut for Locked<'_, T> {
        fn deref_mut(&mut self) -> &mut T {
            &mut self.0
        }
    }

    /// Debug builds: aborts with a message if the calling thread holds one of the allocator's
    /// locks (the allocator was re-entered from inside itself). Release builds: nothing.
    #[inline(always)]
    pub(crate) fn assert_unlocked() {
        #[cfg(debug_assertions)]
        if HELD.with(|h| h.get()) != 0 {
            reentered();
        }
    }

    #[cfg(debug_assertions)]
    #[cold]
    fn reentered() -> ! {
        let msg = b"myriad-alloc: allocator re-entered while holding one of its locks\n";
        // SAFETY: writes a static buffer to stderr, then aborts; neither allocates (a panic
        // would allocate, re-entering the allocator again).
        unsafe {
            libc::write(2, msg.as_ptr().cast(), msg.len());
            libc::abort()
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn reentry_under_a_lock_aborts_in_debug_builds() {
        if cfg!(not(debug_assertions)) {
            return;
        }
        if std::env::var_os("MYRIAD_ALLOC_REENTRY_CHILD").is_some() {
            let m = std::sync::Mutex::new(());
            let _held = lock(&m);
            assert_unlocked(); // aborts the child
            return;
        }
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "sync::tests::reentry_under_a_lock_aborts_in_debug_builds",
                "--nocapture",
            ])
            .env("MYRIAD_ALLOC_REENTRY_CHILD", "1")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "the child did not abort");
        assert!(stderr.contains("re-entered"), "{stderr}");
        // Without a held lock the check passes.
        assert_unlocked();
    }
}
