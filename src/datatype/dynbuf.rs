//! Type-erased buffers (rsmpi's `DynBuffer` / `DynBufferMut`): a length, a
//! datatype and an address, the MPI analogue of `&dyn Any` over `&[T]`.
//!
//! A [`UserOperation`](crate::collective::UserOperation) receives its two
//! operands as these; programs may also build them from slices
//! ([`DynBuffer::new`]) and send, receive or reduce through them, since they
//! are [`Buffer`]s (and [`DynBufferMut`] a [`BufferMut`]).

use std::ffi::c_void;

use super::buffer::count_of;
use super::{AsDatatype, Buffer, BufferMut, Collection, Pointer, PointerMut};
use super::{Datatype, DatatypeRef, Equivalence, TypeMap};
use crate::Count;

/// A read-only type-erased buffer: `len` elements of a datatype at an
/// address (rsmpi's `DynBuffer`).
///
/// Unlike rsmpi's it is neither `Send` nor `Sync` (the elements' type is
/// not known, so neither is whether they may be shared across threads).
#[derive(Debug, Clone, Copy)]
pub struct DynBuffer<'a> {
    ptr: *const u8,
    len: usize,
    datatype: DatatypeRef<'a>,
}

/// A writable type-erased buffer (rsmpi's `DynBufferMut`).
#[derive(Debug)]
pub struct DynBufferMut<'a> {
    ptr: *mut u8,
    len: usize,
    datatype: DatatypeRef<'a>,
}

/// Whether elements of `map` are `T`s: `T`'s own map, or one with the same
/// layout, signature and alignment (a `#[repr(packed)]` wrapper of an `f64`
/// has `f64`'s layout and signature but not its alignment).
fn same_type<T: Equivalence>(map: &TypeMap) -> bool {
    let dt = T::equivalent_datatype();
    let theirs = dt.type_map();
    std::ptr::eq(theirs, map)
        || (theirs.extent() == map.extent()
            && theirs.align() == map.align()
            && theirs.segments() == map.segments()
            && theirs.signature() == map.signature()
            && std::mem::size_of::<T>() == map.extent())
}

/// Whether `ptr` may start a `&[T]`: not null and aligned for `T`. Checked
/// on every downcast, whatever the type map says: a buffer's elements may
/// be `T`s at an address no `T` can have (a datatype view of bytes at an
/// odd offset). Runtime scratch is allocated aligned for its type map, so
/// this holds for it.
fn fits<T>(ptr: *const u8) -> bool {
    !ptr.is_null() && ptr.cast::<T>().is_aligned()
}

/// Checks `from_raw`'s arguments that can be checked.
#[track_caller]
fn checked_len(null: bool, len: Count) -> usize {
    assert!(!null, "DynBuffer::from_raw: the pointer is null");
    usize::try_from(len).unwrap_or_else(|_| panic!("DynBuffer::from_raw: negative length {len}"))
}

/// What both buffers offer alike (they differ only in mutability).
macro_rules! common_methods {
    ($buffer:ident) => {
        impl<'a> $buffer<'a> {
            /// Number of elements.
            pub fn len(&self) -> usize {
                self.len
            }

            /// Whether there are no elements.
            pub fn is_empty(&self) -> bool {
                self.len == 0
            }

            /// Whether the elements are `T`s: the same layout, type signature
            /// and alignment as `T`'s datatype.
            pub fn is<T: Equivalence>(&self) -> bool {
                same_type::<T>(self.datatype.type_map())
            }

            /// The address of the first element.
            pub fn as_ptr(&self) -> *const c_void {
                self.ptr as *const c_void
            }
        }

        // SAFETY: `len` elements of `datatype` at `ptr`, valid for reads for
        // 'a (`new` borrows a slice; `from_raw`'s caller promises it).
        unsafe impl Collection for $buffer<'_> {
            fn count(&self) -> Count {
                count_of(self.len)
            }
        }

        // SAFETY: as above.
        unsafe impl Pointer for $buffer<'_> {
            fn pointer(&self) -> *const c_void {
                self.ptr as *const c_void
            }
        }

        impl<'a> AsDatatype for $buffer<'a> {
            type Out = DatatypeRef<'a>;
            fn as_datatype(&self) -> DatatypeRef<'a> {
                self.datatype
            }
        }

        // SAFETY: pointer, count and datatype describe the borrowed elements.
        unsafe impl Buffer for $buffer<'_> {}
    };
}

common_methods!(DynBuffer);
common_methods!(DynBufferMut);

impl<'a> DynBuffer<'a> {
    /// A type-erased view of `buf`.
    pub fn new<T: Equivalence>(buf: &'a [T]) -> DynBuffer<'a> {
        DynBuffer {
            ptr: buf.as_ptr().cast(),
            len: buf.len(),
            datatype: DatatypeRef::owned_by(T::equivalent_datatype()),
        }
    }

    /// A buffer of `len` elements of `datatype` at `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` must point to `len` elements laid out as `datatype` describes,
    /// initialised and valid for reads, and not written, for `'a`.
    ///
    /// # Panics
    ///
    /// If `ptr` is null or `len` negative.
    #[track_caller]
    pub unsafe fn from_raw<T>(ptr: *const T, len: Count, datatype: DatatypeRef<'a>) -> Self {
        DynBuffer {
            len: checked_len(ptr.is_null(), len),
            ptr: ptr.cast(),
            datatype,
        }
    }

    /// A buffer over `len` elements of `map` at `ptr` (reductions' operands).
    ///
    /// # Safety
    ///
    /// As for [`from_raw`](Self::from_raw).
    pub(crate) unsafe fn from_map(ptr: *const u8, len: usize, map: &'a TypeMap) -> Self {
        DynBuffer {
            ptr,
            len,
            datatype: DatatypeRef::borrowed(map),
        }
    }

    /// The elements as `T`s, if they are ([`is`](Self::is)) and lie at an
    /// address aligned for `T`. The buffers of a reduction over `T`s always
    /// do; elements of a datatype [`View`](crate::datatype::View) that
    /// starts at an address `T` cannot have give `None`.
    pub fn downcast<T: Equivalence>(self) -> Option<&'a [T]> {
        if !self.is::<T>() || !fits::<T>(self.ptr) {
            return None;
        }
        // SAFETY: the buffer holds `len` elements of T's layout,
        // signature and size, initialised and valid as `T`s (`Equivalence`:
        // data matching the signature is a valid `T`), one `size_of::<T>()`
        // apart; the first is aligned for `T` (`fits`), so all are; it is
        // not written for 'a (`new`'s borrow, `from_raw`'s contract).
        Some(unsafe { std::slice::from_raw_parts(self.ptr as *const T, self.len) })
    }
}

impl<'a> DynBufferMut<'a> {
    /// A type-erased, writable view of `buf`.
    pub fn new<T: Equivalence>(buf: &'a mut [T]) -> DynBufferMut<'a> {
        DynBufferMut {
            ptr: buf.as_mut_ptr().cast(),
            len: buf.len(),
            datatype: DatatypeRef::owned_by(T::equivalent_datatype()),
        }
    }

    /// A writable buffer of `len` elements of `datatype` at `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` must point to `len` elements laid out as `datatype` describes,
    /// initialised, valid for reads and writes and accessed through nothing
    /// else for `'a`; any data matching the datatype's signature written
    /// there must leave valid values.
    ///
    /// # Panics
    ///
    /// If `ptr` is null or `len` negative.
    #[track_caller]
    pub unsafe fn from_raw<T>(ptr: *mut T, len: Count, datatype: DatatypeRef<'a>) -> Self {
        DynBufferMut {
            len: checked_len(ptr.is_null(), len),
            ptr: ptr.cast(),
            datatype,
        }
    }

    /// A writable buffer over `len` elements of `map` at `ptr`.
    ///
    /// # Safety
    ///
    /// As for [`from_raw`](Self::from_raw).
    pub(crate) unsafe fn from_map(ptr: *mut u8, len: usize, map: &'a TypeMap) -> Self {
        DynBufferMut {
            ptr,
            len,
            datatype: DatatypeRef::borrowed(map),
        }
    }

    /// The address of the first element, for writing.
    pub fn as_mut_ptr(&mut self) -> *mut c_void {
        self.ptr as *mut c_void
    }

    /// The elements as `T`s, if they are ([`is`](Self::is)) and lie at an
    /// address aligned for `T` (as for [`DynBuffer::downcast`]). Consumes
    /// the buffer, as rsmpi's does; [`reborrow_mut`](Self::reborrow_mut)
    /// first to try several types.
    pub fn downcast<T: Equivalence>(self) -> Option<&'a mut [T]> {
        if !self.is::<T>() || !fits::<T>(self.ptr) {
            return None;
        }
        // SAFETY: as in `DynBuffer::downcast`; the buffer is the only access
        // to the elements for 'a and is consumed here.
        Some(unsafe { std::slice::from_raw_parts_mut(self.ptr as *mut T, self.len) })
    }

    /// A read-only buffer over the same elements, for as long as `self` is
    /// borrowed.
    pub fn reborrow(&self) -> DynBuffer<'_> {
        DynBuffer {
            ptr: self.ptr,
            len: self.len,
            datatype: self.datatype,
        }
    }

    /// A writable buffer over the same elements, for as long as `self` is
    /// borrowed mutably.
    pub fn reborrow_mut(&mut self) -> DynBufferMut<'_> {
        DynBufferMut {
            ptr: self.ptr,
            len: self.len,
            datatype: self.datatype,
        }
    }

    /// The same elements, read-only, for the rest of `'a`.
    pub fn downgrade(self) -> DynBuffer<'a> {
        DynBuffer {
            ptr: self.ptr,
            len: self.len,
            datatype: self.datatype,
        }
    }
}

// SAFETY: the elements are valid for writes for 'a (`new` borrows them
// mutably; `from_raw`'s caller promises it).
unsafe impl PointerMut for DynBufferMut<'_> {
    fn pointer_mut(&mut self) -> *mut c_void {
        self.ptr as *mut c_void
    }
}

// SAFETY: as above; signature-matching data leaves valid values
// (`Equivalence` for `new`, `from_raw`'s contract otherwise).
unsafe impl BufferMut for DynBufferMut<'_> {}
