//! A reduction's operands on one rank: scratch buffers for them, copies and
//! applications of the operation. Reduce and scan share these; they differ
//! in which operands they combine, not in how.

use std::ops::Deref;

use super::op::{self, OpRef};
use crate::datatype::copy::{self, Layout};

/// Zeroed heap bytes whose start is aligned to a power of two known only at
/// run time: the storage of a `Vec<T>` for the type a type map describes
/// ([`TypeMap::align`](crate::datatype::TypeMap::align)), so that a user
/// operation can view the elements as `&[T]`.
///
/// A `Vec<u128>` (aligned to 16 on x86-64, as `malloc` is) with `align -
/// align_of::<u128>()` bytes of slack when the alignment is larger, the
/// start moved up to the first aligned byte: no `unsafe`, `calloc`'s lazily
/// zeroed pages for large buffers, and for the alignments of primitives no
/// slack at all. The heap buffer stays put when the value moves.
#[derive(Debug)]
pub(crate) struct AlignedBytes {
    data: Vec<u128>,
    /// Bytes from the vector's start to the aligned start.
    offset: usize,
    /// Usable bytes from the aligned start.
    len: usize,
    align: usize,
}

impl Default for AlignedBytes {
    fn default() -> Self {
        AlignedBytes::zeroed(0, 1)
    }
}

impl AlignedBytes {
    const UNIT: usize = std::mem::size_of::<u128>();

    /// `len` zeroed bytes starting at a multiple of `align` (a power of two).
    pub(crate) fn zeroed(len: usize, align: usize) -> AlignedBytes {
        debug_assert!(align.is_power_of_two());
        let slack = align.saturating_sub(std::mem::align_of::<u128>());
        let data = vec![0u128; (len + slack).div_ceil(Self::UNIT)];
        let offset = (data.as_ptr() as usize).wrapping_neg() & (align - 1);
        debug_assert!(offset <= slack);
        AlignedBytes {
            data,
            offset,
            len,
            align,
        }
    }

    /// Usable bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The alignment of the start.
    pub(crate) fn align(&self) -> usize {
        self.align
    }

    /// The aligned start, for reads.
    pub(crate) fn as_ptr(&self) -> *const u8 {
        (self.data.as_ptr() as *const u8).wrapping_add(self.offset)
    }

    /// The aligned start.
    pub(crate) fn as_mut_ptr(&mut self) -> *mut u8 {
        (self.data.as_mut_ptr() as *mut u8).wrapping_add(self.offset)
    }
}

/// Aligned scratch space for the elements of a layout, described by a
/// layout of its own (what it derefs to).
#[derive(Debug)]
pub(crate) struct Scratch {
    /// Storage aligned for the layout's type, which `layout` points into.
    _data: AlignedBytes,
    layout: Layout,
}

impl Scratch {
    /// Room for the elements of `like`, described with its type and count,
    /// aligned for its type (a user operation views them as `&[T]`).
    pub(crate) fn like(like: &Layout) -> Scratch {
        let map = like.ty.map();
        let mut data = AlignedBytes::zeroed(map.span(like.count), map.align());
        let layout = Layout {
            base: data.as_mut_ptr() as *const u8,
            count: like.count,
            ty: like.ty.clone(),
        };
        Scratch {
            _data: data,
            layout,
        }
    }
}

impl Deref for Scratch {
    type Target = Layout;

    fn deref(&self) -> &Layout {
        &self.layout
    }
}

/// Copies `src` into `dst` (same type and count: a reduction's operands).
pub(crate) fn copy_same(src: &Layout, dst: &Layout) {
    // SAFETY: the callers pass valid, distinct buffers of one type.
    unsafe { copy::copy(src, dst) };
}

/// `inout = input op inout` on two layouts of the same type and count.
pub(crate) fn combine(op: &OpRef<'_>, input: &Layout, inout: &Layout) {
    // SAFETY: the callers pass valid, aligned, distinct buffers of one type
    // and count; the operation was checked for the type (`reduce::check`).
    unsafe {
        op::apply(
            op,
            input.ty.map(),
            input.base,
            inout.base as *mut u8,
            input.count,
        )
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_bytes_start_aligned_and_are_zero() {
        for align in [1, 8, 16, 32, 64, 4096] {
            for len in [0, 1, 31, 32, 100] {
                let mut bytes = AlignedBytes::zeroed(len, align);
                let start = bytes.as_mut_ptr();
                assert_eq!(start as usize % align, 0, "{len} bytes at {align}");
                assert!(!start.is_null());
                assert_eq!((bytes.len(), bytes.align()), (len, align));
                // SAFETY: `len` bytes from the start are in the allocation.
                let all = unsafe { std::slice::from_raw_parts(start, len) };
                assert!(all.iter().all(|&b| b == 0));
            }
        }
    }
}
