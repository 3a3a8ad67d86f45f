//! The synchronisation facade: every atomic, mutex and cell the runtime's
//! lock-free protocols use comes from here, so that `--cfg loom` swaps them all
//! at once (the pattern of tokio's `loom/` and crossbeam's `primitive`).
//!
//! The protocol modules (`sched::park`, `sched::idle`, `p2p::completion`,
//! `coll::published`, [`spin`]) depend on nothing but this module, which is what lets
//! `loom-tests` compile them on their own with loom's types.

#[cfg(not(loom))]
mod send_ptr;
pub(crate) mod spin;

#[cfg(not(loom))]
pub(crate) use send_ptr::SendPtr;

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{
    AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};
#[cfg(not(loom))]
#[allow(unused_imports)]
pub(crate) use std::sync::{Arc, Mutex, MutexGuard};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{
    AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};
#[cfg(loom)]
#[allow(unused_imports)]
pub(crate) use loom::sync::{Arc, Mutex, MutexGuard};

/// An `UnsafeCell` whose accesses go through closures, so loom can check them.
#[derive(Debug)]
pub(crate) struct UnsafeCell<T>(
    #[cfg(not(loom))] std::cell::UnsafeCell<T>,
    #[cfg(loom)] loom::cell::UnsafeCell<T>,
);

impl<T> UnsafeCell<T> {
    #[cfg(not(loom))]
    pub(crate) const fn new(value: T) -> Self {
        Self(std::cell::UnsafeCell::new(value))
    }

    #[cfg(loom)]
    pub(crate) fn new(value: T) -> Self {
        Self(loom::cell::UnsafeCell::new(value))
    }

    /// Reads through a shared pointer.
    #[inline]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        #[cfg(not(loom))]
        return f(self.0.get());
        #[cfg(loom)]
        return self.0.with(f);
    }

    /// Writes through a mutable pointer.
    #[inline]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        #[cfg(not(loom))]
        return f(self.0.get());
        #[cfg(loom)]
        return self.0.with_mut(f);
    }
}

/// Tells the CPU (or loom) that this thread is spinning.
#[inline]
#[allow(dead_code)]
pub(crate) fn spin_loop() {
    #[cfg(not(loom))]
    std::hint::spin_loop();
    #[cfg(loom)]
    loom::thread::yield_now();
}
