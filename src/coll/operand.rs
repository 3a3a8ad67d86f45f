//! A reduction's operands on one rank: scratch buffers for them, copies and
//! applications of the operation. Reduce and scan share these; they differ
//! in which operands they combine, not in how.

use std::ops::Deref;

use super::op::{self, OpRef};
use crate::datatype::copy::{self, Layout};

/// Aligned scratch space for the elements of a layout, described by a
/// layout of its own (what it derefs to).
#[derive(Debug)]
pub(crate) struct Scratch {
    /// Storage aligned for any primitive, which `layout` points into (a
    /// vector's heap buffer stays put when the vector moves).
    _data: Vec<u128>,
    layout: Layout,
}

impl Scratch {
    /// Room for the elements of `like`, described with its type and count.
    pub(crate) fn like(like: &Layout) -> Scratch {
        let bytes = like.count * like.ty.map().extent();
        let mut data = vec![0; bytes.div_ceil(16)];
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
