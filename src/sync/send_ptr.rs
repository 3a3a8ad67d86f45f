//! [`SendPtr`]: a shared reference whose lifetime a protocol, not the
//! borrow checker, guarantees, carried to another thread.
//!
//! Parallel regions and scoped threads hand their helpers a pointer to state
//! on the waiting rank's stack; the rank does not return (nor unwind past
//! that state) before every helper has signalled that it is done. Raw
//! pointers are not `Send`, and casting them to `usize` to get past that
//! loses the type and says nothing about why it is sound; this type keeps
//! the type and puts the one obligation on [`SendPtr::get`].

use std::fmt;

/// A `*const T` that may cross threads when `T: Sync` (what crosses is, in
/// effect, a `&T`). Dereferencing it is unsafe: the caller vouches that the
/// pointee is still alive.
pub(crate) struct SendPtr<T: ?Sized>(*const T);

// SAFETY: a `SendPtr` is only ever turned into a `&T` (never `&mut T`), and
// sharing `&T` across threads is what `T: Sync` allows; whether the pointee
// is alive is `get`'s contract.
unsafe impl<T: ?Sized + Sync> Send for SendPtr<T> {}
// SAFETY: as above; `&SendPtr<T>` only lets another thread copy the pointer.
unsafe impl<T: ?Sized + Sync> Sync for SendPtr<T> {}

impl<T: ?Sized> SendPtr<T> {
    /// Remembers where `value` is.
    #[inline]
    pub(crate) fn new(value: &T) -> Self {
        SendPtr(value)
    }

    /// The pointee, for a lifetime the caller chooses.
    ///
    /// # Safety
    ///
    /// The pointee must be alive, and not mutably borrowed, for all of `'a`.
    #[inline]
    pub(crate) unsafe fn get<'a>(self) -> &'a T {
        // SAFETY: the caller guarantees the pointee lives for 'a; the
        // pointer came from a reference, so it is aligned and non-null.
        unsafe { &*self.0 }
    }
}

impl<T: ?Sized> Clone for SendPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T: ?Sized> Copy for SendPtr<T> {}

impl<T: ?Sized> fmt::Debug for SendPtr<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("SendPtr")
            .field(&self.0.cast::<()>())
            .finish()
    }
}
