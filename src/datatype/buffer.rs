//! Buffers: the memory an operation reads or writes, as rsmpi's traits.
//!
//! A buffer is a pointer, a count of elements and a datatype. A single
//! [`Equivalence`] value is a buffer of one element (an array `[T; N]` is one
//! element of an array type, whose signature is `N` times `T`'s); a slice or a
//! `Vec` is a buffer of `len()` elements.

use std::ffi::c_void;

use super::{Datatype, Equivalence};
use crate::Count;

/// Something with a number of elements.
///
/// # Safety
///
/// `count` must be the number of elements reachable from the buffer's pointer.
pub unsafe trait Collection {
    /// Number of elements.
    fn count(&self) -> Count;
}

/// Something with a read-only address.
///
/// # Safety
///
/// The pointer must be valid for reads of the whole buffer.
pub unsafe trait Pointer {
    /// The address of the first element.
    fn pointer(&self) -> *const c_void;
}

/// Something with a writable address.
///
/// # Safety
///
/// The pointer must be valid for writes of the whole buffer.
pub unsafe trait PointerMut {
    /// The address of the first element.
    fn pointer_mut(&mut self) -> *mut c_void;
}

/// Something whose elements have a datatype.
pub trait AsDatatype {
    /// The datatype handle.
    type Out: Datatype;
    /// The datatype of one element.
    fn as_datatype(&self) -> Self::Out;
}

/// A readable buffer.
///
/// # Safety
///
/// Pointer, count and datatype must describe memory owned or borrowed by the
/// buffer, valid for reads of `count` elements of the datatype.
pub unsafe trait Buffer: Pointer + Collection + AsDatatype {}

/// A writable buffer.
///
/// # Safety
///
/// Pointer, count and datatype must describe memory owned or borrowed by the
/// buffer, valid for writes of `count` elements of the datatype, and any data
/// matching the datatype's signature written there must leave valid values.
pub unsafe trait BufferMut: PointerMut + Collection + AsDatatype {}

// SAFETY: one value of `T` is one element.
unsafe impl<T: Equivalence> Collection for T {
    fn count(&self) -> Count {
        1
    }
}

// SAFETY: the address of the value, valid for reads of one `T`.
unsafe impl<T: Equivalence> Pointer for T {
    fn pointer(&self) -> *const c_void {
        self as *const T as *const c_void
    }
}

// SAFETY: the address of the value, valid for writes of one `T`.
unsafe impl<T: Equivalence> PointerMut for T {
    fn pointer_mut(&mut self) -> *mut c_void {
        self as *mut T as *mut c_void
    }
}

impl<T: Equivalence> AsDatatype for T {
    type Out = <T as Equivalence>::Out;
    fn as_datatype(&self) -> Self::Out {
        T::equivalent_datatype()
    }
}

// SAFETY: pointer, count and datatype describe the value itself.
unsafe impl<T: Equivalence> Buffer for T {}
// SAFETY: as above; `Equivalence` promises that signature-matching data is
// valid.
unsafe impl<T: Equivalence> BufferMut for T {}

// SAFETY: a slice has `len()` elements.
unsafe impl<T: Equivalence> Collection for [T] {
    fn count(&self) -> Count {
        count_of(self.len())
    }
}

// SAFETY: the slice's data pointer.
unsafe impl<T: Equivalence> Pointer for [T] {
    fn pointer(&self) -> *const c_void {
        self.as_ptr() as *const c_void
    }
}

// SAFETY: the slice's data pointer.
unsafe impl<T: Equivalence> PointerMut for [T] {
    fn pointer_mut(&mut self) -> *mut c_void {
        self.as_mut_ptr() as *mut c_void
    }
}

impl<T: Equivalence> AsDatatype for [T] {
    type Out = <T as Equivalence>::Out;
    fn as_datatype(&self) -> Self::Out {
        T::equivalent_datatype()
    }
}

// SAFETY: the slice's elements.
unsafe impl<T: Equivalence> Buffer for [T] {}
// SAFETY: the slice's elements.
unsafe impl<T: Equivalence> BufferMut for [T] {}

// SAFETY: a `Vec` has `len()` elements.
unsafe impl<T: Equivalence> Collection for Vec<T> {
    fn count(&self) -> Count {
        count_of(self.len())
    }
}

// SAFETY: the vector's data pointer.
unsafe impl<T: Equivalence> Pointer for Vec<T> {
    fn pointer(&self) -> *const c_void {
        self.as_ptr() as *const c_void
    }
}

// SAFETY: the vector's data pointer.
unsafe impl<T: Equivalence> PointerMut for Vec<T> {
    fn pointer_mut(&mut self) -> *mut c_void {
        self.as_mut_ptr() as *mut c_void
    }
}

impl<T: Equivalence> AsDatatype for Vec<T> {
    type Out = <T as Equivalence>::Out;
    fn as_datatype(&self) -> Self::Out {
        T::equivalent_datatype()
    }
}

// SAFETY: the vector's initialised elements.
unsafe impl<T: Equivalence> Buffer for Vec<T> {}
// SAFETY: the vector's initialised elements.
unsafe impl<T: Equivalence> BufferMut for Vec<T> {}

#[inline]
pub(super) fn count_of(len: usize) -> Count {
    if len <= Count::MAX as usize {
        return len as Count;
    }
    count_overflow(len)
}

#[cold]
fn count_overflow(len: usize) -> Count {
    Count::try_from(len).unwrap_or_else(|_| {
        crate::error::raise(crate::Error::Count(
            crate::error::CountError::BufferTooLarge { len },
        ))
    })
}
