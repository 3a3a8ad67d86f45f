//! Partitioned buffers for the varcount collectives (rsmpi's `Partition`
//! and `PartitionMut`): a buffer with one count and one displacement (both
//! in elements) per rank.

use std::borrow::Borrow;
use std::ffi::c_void;

use super::{AsDatatype, Buffer, BufferMut, Pointer, PointerMut};
use crate::Count;

/// Counts and displacements of a partitioned buffer.
pub trait Partitioned {
    /// Elements per rank.
    fn counts(&self) -> &[Count];
    /// Offset of each rank's part, in elements.
    fn displs(&self) -> &[Count];
}

/// A readable partitioned buffer.
///
/// # Safety
///
/// `total_count` must be the number of elements of the datatype
/// ([`AsDatatype::as_datatype`]) that are valid for reads from
/// [`Pointer::pointer`], for as long as the value is borrowed. The
/// collectives check every rank's part (its count and displacement) against
/// it and then read the parts without further checks, so a total larger
/// than the buffer lets them read past its end. (rsmpi's trait is unsafe for
/// the same reason.)
///
/// ```
/// use std::ffi::c_void;
/// use myriad::datatype::SystemDatatype;
/// use myriad::traits::*;
/// use myriad::Count;
///
/// /// One rank's part: the whole vector.
/// struct Parts(Vec<u8>, [Count; 1], [Count; 1]);
/// impl Partitioned for Parts {
///     fn counts(&self) -> &[Count] { &self.1 }
///     fn displs(&self) -> &[Count] { &self.2 }
/// }
/// // SAFETY: the vector's elements, valid for reads.
/// unsafe impl Pointer for Parts {
///     fn pointer(&self) -> *const c_void { self.0.as_ptr().cast() }
/// }
/// impl AsDatatype for Parts {
///     type Out = SystemDatatype;
///     fn as_datatype(&self) -> SystemDatatype { u8::equivalent_datatype() }
/// }
/// // SAFETY: the vector holds `len()` bytes, all readable from `pointer`.
/// unsafe impl PartitionedBuffer for Parts {
///     fn total_count(&self) -> Count { self.0.len() as Count }
/// }
///
/// let got = myriad::run(1, |universe| {
///     let world = universe.world();
///     let mut got = [0u8; 3];
///     let mut recv = myriad::datatype::PartitionMut::new(&mut got[..], [3], [0]);
///     world.all_to_all_varcount_into(&Parts(vec![7; 3], [3], [0]), &mut recv);
///     got
/// });
/// assert_eq!(got.unwrap(), vec![[7; 3]]);
/// ```
///
/// Without `unsafe` the impl does not compile:
///
/// ```compile_fail,E0200
/// use std::ffi::c_void;
/// use myriad::datatype::SystemDatatype;
/// use myriad::traits::*;
/// use myriad::Count;
///
/// struct Parts(Vec<u8>, [Count; 1], [Count; 1]);
/// impl Partitioned for Parts {
///     fn counts(&self) -> &[Count] { &self.1 }
///     fn displs(&self) -> &[Count] { &self.2 }
/// }
/// // SAFETY: the vector's elements.
/// unsafe impl Pointer for Parts {
///     fn pointer(&self) -> *const c_void { self.0.as_ptr().cast() }
/// }
/// impl AsDatatype for Parts {
///     type Out = SystemDatatype;
///     fn as_datatype(&self) -> SystemDatatype { u8::equivalent_datatype() }
/// }
/// impl PartitionedBuffer for Parts {
///     fn total_count(&self) -> Count { self.0.len() as Count }
/// }
/// ```
pub unsafe trait PartitionedBuffer: Partitioned + Pointer + AsDatatype {
    /// Elements in the whole underlying buffer (to check the partition).
    fn total_count(&self) -> Count;
}

/// A writable partitioned buffer.
///
/// # Safety
///
/// `total_count` must be the number of elements of the datatype
/// ([`AsDatatype::as_datatype`]) that are valid for writes from
/// [`PointerMut::pointer_mut`], for as long as the value is borrowed, and
/// any data matching the datatype's signature written there must leave
/// valid values (as for [`BufferMut`]). The collectives check every rank's
/// part against the total and then write the parts without further checks,
/// so a total larger than the buffer lets them write past its end.
///
/// ```
/// use std::ffi::c_void;
/// use myriad::datatype::SystemDatatype;
/// use myriad::traits::*;
/// use myriad::Count;
///
/// /// One rank's part: the whole vector.
/// struct Parts(Vec<u8>, [Count; 1], [Count; 1]);
/// impl Partitioned for Parts {
///     fn counts(&self) -> &[Count] { &self.1 }
///     fn displs(&self) -> &[Count] { &self.2 }
/// }
/// // SAFETY: the vector's elements, valid for writes.
/// unsafe impl PointerMut for Parts {
///     fn pointer_mut(&mut self) -> *mut c_void { self.0.as_mut_ptr().cast() }
/// }
/// impl AsDatatype for Parts {
///     type Out = SystemDatatype;
///     fn as_datatype(&self) -> SystemDatatype { u8::equivalent_datatype() }
/// }
/// // SAFETY: the vector holds `len()` bytes, all writable from
/// // `pointer_mut`, and any byte is a valid `u8`.
/// unsafe impl PartitionedBufferMut for Parts {
///     fn total_count(&self) -> Count { self.0.len() as Count }
/// }
///
/// let got = myriad::run(1, |universe| {
///     let mut parts = Parts(vec![0; 3], [3], [0]);
///     universe.world().all_gather_varcount_into(&[7u8; 3][..], &mut parts);
///     parts.0
/// });
/// assert_eq!(got.unwrap(), vec![vec![7; 3]]);
/// ```
///
/// Without `unsafe` the impl does not compile:
///
/// ```compile_fail,E0200
/// use std::ffi::c_void;
/// use myriad::datatype::SystemDatatype;
/// use myriad::traits::*;
/// use myriad::Count;
///
/// struct Parts(Vec<u8>, [Count; 1], [Count; 1]);
/// impl Partitioned for Parts {
///     fn counts(&self) -> &[Count] { &self.1 }
///     fn displs(&self) -> &[Count] { &self.2 }
/// }
/// // SAFETY: the vector's elements.
/// unsafe impl PointerMut for Parts {
///     fn pointer_mut(&mut self) -> *mut c_void { self.0.as_mut_ptr().cast() }
/// }
/// impl AsDatatype for Parts {
///     type Out = SystemDatatype;
///     fn as_datatype(&self) -> SystemDatatype { u8::equivalent_datatype() }
/// }
/// impl PartitionedBufferMut for Parts {
///     fn total_count(&self) -> Count { self.0.len() as Count }
/// }
/// ```
pub unsafe trait PartitionedBufferMut: Partitioned + PointerMut + AsDatatype {
    /// Elements in the whole underlying buffer (to check the partition).
    fn total_count(&self) -> Count;
}

/// A read-only buffer cut into parts (rsmpi's `Partition`).
#[derive(Debug)]
pub struct Partition<'b, B: 'b + ?Sized, C, D> {
    buf: &'b B,
    counts: C,
    displs: D,
}

impl<'b, B, C, D> Partition<'b, B, C, D>
where
    B: 'b + Buffer + ?Sized,
    C: Borrow<[Count]>,
    D: Borrow<[Count]>,
{
    /// Parts of `buf`: rank `i` has `counts[i]` elements from `displs[i]`.
    /// The parts are checked when a collective uses them.
    pub fn new(buf: &'b B, counts: C, displs: D) -> Self {
        Partition {
            buf,
            counts,
            displs,
        }
    }
}

impl<B: ?Sized, C: Borrow<[Count]>, D: Borrow<[Count]>> Partitioned for Partition<'_, B, C, D> {
    fn counts(&self) -> &[Count] {
        self.counts.borrow()
    }
    fn displs(&self) -> &[Count] {
        self.displs.borrow()
    }
}

// SAFETY: forwards to the buffer.
unsafe impl<B: Buffer + ?Sized, C, D> Pointer for Partition<'_, B, C, D> {
    fn pointer(&self) -> *const c_void {
        self.buf.pointer()
    }
}

impl<B: Buffer + ?Sized, C, D> AsDatatype for Partition<'_, B, C, D> {
    type Out = B::Out;
    fn as_datatype(&self) -> Self::Out {
        self.buf.as_datatype()
    }
}

// SAFETY: the total is the wrapped buffer's own count, which `Buffer`
// promises is readable from its pointer (the one `pointer` forwards), in
// the buffer's datatype (the one `as_datatype` forwards); the buffer is
// borrowed for the partition's life.
unsafe impl<B, C, D> PartitionedBuffer for Partition<'_, B, C, D>
where
    B: Buffer + ?Sized,
    C: Borrow<[Count]>,
    D: Borrow<[Count]>,
{
    fn total_count(&self) -> Count {
        self.buf.count()
    }
}

/// A writable buffer cut into parts (rsmpi's `PartitionMut`).
#[derive(Debug)]
pub struct PartitionMut<'b, B: 'b + ?Sized, C, D> {
    buf: &'b mut B,
    counts: C,
    displs: D,
}

impl<'b, B, C, D> PartitionMut<'b, B, C, D>
where
    B: 'b + BufferMut + ?Sized,
    C: Borrow<[Count]>,
    D: Borrow<[Count]>,
{
    /// Parts of `buf`: rank `i` gets `counts[i]` elements at `displs[i]`.
    /// The parts are checked when a collective uses them (in range, not
    /// overlapping).
    pub fn new(buf: &'b mut B, counts: C, displs: D) -> Self {
        PartitionMut {
            buf,
            counts,
            displs,
        }
    }
}

impl<B: ?Sized, C: Borrow<[Count]>, D: Borrow<[Count]>> Partitioned for PartitionMut<'_, B, C, D> {
    fn counts(&self) -> &[Count] {
        self.counts.borrow()
    }
    fn displs(&self) -> &[Count] {
        self.displs.borrow()
    }
}

// SAFETY: forwards to the buffer.
unsafe impl<B: BufferMut + ?Sized, C, D> PointerMut for PartitionMut<'_, B, C, D> {
    fn pointer_mut(&mut self) -> *mut c_void {
        self.buf.pointer_mut()
    }
}

impl<B: BufferMut + ?Sized, C, D> AsDatatype for PartitionMut<'_, B, C, D> {
    type Out = B::Out;
    fn as_datatype(&self) -> Self::Out {
        self.buf.as_datatype()
    }
}

// SAFETY: the total is the wrapped buffer's own count, which `BufferMut`
// promises is writable from its pointer (the one `pointer_mut` forwards),
// in the buffer's datatype (the one `as_datatype` forwards), with valid
// values for any matching data; the buffer is borrowed mutably for the
// partition's life.
unsafe impl<B, C, D> PartitionedBufferMut for PartitionMut<'_, B, C, D>
where
    B: BufferMut + ?Sized,
    C: Borrow<[Count]>,
    D: Borrow<[Count]>,
{
    fn total_count(&self) -> Count {
        self.buf.count()
    }
}
