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
/// Implementing it takes an `unsafe impl` (the collectives trust
/// `total_count`):
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
pub trait PartitionedBuffer: Partitioned + Pointer + AsDatatype {
    /// Elements in the whole underlying buffer (to check the partition).
    fn total_count(&self) -> Count;
}

/// A writable partitioned buffer.
///
/// Implementing it takes an `unsafe impl` (the collectives trust
/// `total_count`):
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
pub trait PartitionedBufferMut: Partitioned + PointerMut + AsDatatype {
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

impl<B, C, D> PartitionedBuffer for Partition<'_, B, C, D>
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

impl<B, C, D> PartitionedBufferMut for PartitionMut<'_, B, C, D>
where
    B: BufferMut + ?Sized,
    C: Borrow<[Count]>,
    D: Borrow<[Count]>,
{
    fn total_count(&self) -> Count {
        self.buf.count()
    }
}
