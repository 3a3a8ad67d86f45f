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
