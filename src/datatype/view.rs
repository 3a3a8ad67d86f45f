//! Views (rsmpi's `View` and `MutView`): a buffer read or written through a
//! count and an arbitrary datatype, so any layout a [`UserDatatype`]
//! describes can be sent, received, broadcast or packed.
//!
//! A view's address is its underlying buffer's; element `i` of the view
//! starts at `address + lb + i * extent` of its datatype, as in MPI.
//! Building a view is `unsafe`, as in rsmpi: the caller promises that the
//! datatype selects only initialised data bytes of the buffer (no padding)
//! and, for [`MutView`], that any values matching the datatype's signature
//! may be written there. What can be checked is checked, and a violation
//! panics with an `Error::Arg` message: the count is not negative, the
//! datatype has no data before its lower bound (data past its upper bound
//! is allowed: a type resized to a smaller extent), and `count` elements
//! stay inside the buffer (not before its address, not past its last data
//! byte).
//!
//! [`UserDatatype`]: super::UserDatatype

use std::ffi::c_void;
use std::fmt;

use super::{AsDatatype, Buffer, BufferMut, Collection, Datatype, Pointer, PointerMut, TypeMap};
use crate::error::{raise, ArgError, ViewProblem};
use crate::{Count, Error};

/// A read-only buffer with a user-specified count and datatype (rsmpi's
/// `View`).
///
/// ```
/// use myriad::datatype::{UserDatatype, View};
/// use myriad::traits::*;
///
/// let data: Vec<f64> = (0..6).map(f64::from).collect();
/// // x x _ x x _ : elements 0, 1, 3, 4.
/// let t = UserDatatype::vector(2, 2, 3, &f64::equivalent_datatype());
/// // SAFETY: the vector type selects four initialised f64 of `data`.
/// let view = unsafe { View::with_count_and_datatype(&data[..], 1, &t) };
/// let bytes = myriad::datatype::pack(&view);
/// let mut picked = [0.0f64; 4];
/// // SAFETY: `bytes` holds four f64 packed from `view`.
/// unsafe { myriad::datatype::unpack_into(&bytes, &mut picked[..], 0) };
/// assert_eq!(picked, [0.0, 1.0, 3.0, 4.0]);
/// ```
pub struct View<'d, 'b, D, B: ?Sized>
where
    D: 'd + Datatype,
    B: 'b + Buffer,
{
    datatype: &'d D,
    count: Count,
    buffer: &'b B,
}

impl<'d, 'b, D, B: ?Sized> View<'d, 'b, D, B>
where
    D: 'd + Datatype,
    B: 'b + Buffer,
{
    /// A view of `buffer` as `count` elements of `datatype`.
    ///
    /// myriad asks for a [`Buffer`] where rsmpi asks for a `Pointer`, so that
    /// the view can be checked against the buffer's size.
    ///
    /// # Safety
    ///
    /// `datatype` must select only initialised bytes of `buffer` (no padding
    /// inside its elements), for all `count` elements.
    ///
    /// # Panics
    ///
    /// If `count` is negative, the datatype has data before its lower
    /// bound, or `count` elements reach before the buffer's address or past
    /// its end.
    #[track_caller]
    pub unsafe fn with_count_and_datatype(
        buffer: &'b B,
        count: Count,
        datatype: &'d D,
    ) -> View<'d, 'b, D, B> {
        check(
            "View",
            datatype.type_map(),
            count,
            buffer.as_datatype().type_map(),
            buffer.count(),
        );
        View {
            datatype,
            count,
            buffer,
        }
    }
}

impl<D: Datatype, B: Buffer + ?Sized> fmt::Debug for View<'_, '_, D, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("View")
            .field("count", &self.count)
            .field("datatype", self.datatype.type_map())
            .field("address", &self.buffer.pointer())
            .finish()
    }
}

impl<'d, D: Datatype, B: Buffer + ?Sized> AsDatatype for View<'d, '_, D, B> {
    type Out = &'d D;
    fn as_datatype(&self) -> &'d D {
        self.datatype
    }
}

// SAFETY: the count the view was built with, checked against the buffer.
unsafe impl<D: Datatype, B: Buffer + ?Sized> Collection for View<'_, '_, D, B> {
    fn count(&self) -> Count {
        self.count
    }
}

// SAFETY: the underlying buffer's address, valid for reads of the buffer,
// which holds the view's elements (checked at construction).
unsafe impl<D: Datatype, B: Buffer + ?Sized> Pointer for View<'_, '_, D, B> {
    fn pointer(&self) -> *const c_void {
        self.buffer.pointer()
    }
}

// SAFETY: `count` elements of the datatype lie inside the borrowed buffer
// (checked at construction) and select initialised bytes (the constructor's
// contract).
unsafe impl<D: Datatype, B: Buffer + ?Sized> Buffer for View<'_, '_, D, B> {}

/// A writable buffer with a user-specified count and datatype (rsmpi's
/// `MutView`).
///
/// ```
/// use myriad::datatype::{MutView, UserDatatype};
/// use myriad::traits::*;
///
/// let mut grid = [0i32; 6];
/// // Elements 5 and 0, in that order.
/// let t = UserDatatype::indexed(&[1, 1], &[5, 0], &i32::equivalent_datatype());
/// let bytes = myriad::datatype::pack(&[7i32, 9][..]);
/// {
///     // SAFETY: the type selects two i32 of `grid`; any i32 is valid.
///     let mut view = unsafe { MutView::with_count_and_datatype(&mut grid[..], 1, &t) };
///     // SAFETY: `bytes` holds two packed i32.
///     unsafe { myriad::datatype::unpack_into(&bytes, &mut view, 0) };
/// }
/// assert_eq!(grid, [9, 0, 0, 0, 0, 7]);
/// ```
pub struct MutView<'d, 'b, D, B: ?Sized>
where
    D: 'd + Datatype,
    B: 'b + BufferMut,
{
    datatype: &'d D,
    count: Count,
    buffer: &'b mut B,
}

impl<'d, 'b, D, B: ?Sized> MutView<'d, 'b, D, B>
where
    D: 'd + Datatype,
    B: 'b + BufferMut,
{
    /// A writable view of `buffer` as `count` elements of `datatype`.
    ///
    /// myriad asks for a [`BufferMut`] where rsmpi asks for a `PointerMut`,
    /// so that the view can be checked against the buffer's size.
    ///
    /// # Safety
    ///
    /// `datatype` must select only data bytes of `buffer` (no padding inside
    /// its elements), for all `count` elements, and any values that match
    /// the datatype's type signature, written there, must leave the buffer's
    /// elements valid (true when the selected bytes are whole fields of the
    /// same base types).
    ///
    /// # Panics
    ///
    /// If `count` is negative, the datatype has data before its lower
    /// bound, or `count` elements reach before the buffer's address or past
    /// its end.
    #[track_caller]
    pub unsafe fn with_count_and_datatype(
        buffer: &'b mut B,
        count: Count,
        datatype: &'d D,
    ) -> MutView<'d, 'b, D, B> {
        check(
            "MutView",
            datatype.type_map(),
            count,
            buffer.as_datatype().type_map(),
            buffer.count(),
        );
        MutView {
            datatype,
            count,
            buffer,
        }
    }
}

impl<D: Datatype, B: BufferMut + ?Sized> fmt::Debug for MutView<'_, '_, D, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MutView")
            .field("count", &self.count)
            .field("datatype", self.datatype.type_map())
            .finish_non_exhaustive()
    }
}

impl<'d, D: Datatype, B: BufferMut + ?Sized> AsDatatype for MutView<'d, '_, D, B> {
    type Out = &'d D;
    fn as_datatype(&self) -> &'d D {
        self.datatype
    }
}

// SAFETY: the count the view was built with, checked against the buffer.
unsafe impl<D: Datatype, B: BufferMut + ?Sized> Collection for MutView<'_, '_, D, B> {
    fn count(&self) -> Count {
        self.count
    }
}

// SAFETY: the underlying buffer's address, valid for writes of the buffer,
// which holds the view's elements (checked at construction).
unsafe impl<D: Datatype, B: BufferMut + ?Sized> PointerMut for MutView<'_, '_, D, B> {
    fn pointer_mut(&mut self) -> *mut c_void {
        self.buffer.pointer_mut()
    }
}

// SAFETY: `count` elements of the datatype lie inside the exclusively
// borrowed buffer (checked at construction); signature-matching data leaves
// valid values (the constructor's contract).
unsafe impl<D: Datatype, B: BufferMut + ?Sized> BufferMut for MutView<'_, '_, D, B> {}

/// Checks a view against its buffer; panics with an `Error::Arg` message.
#[track_caller]
fn check(kind: &'static str, map: &TypeMap, count: Count, buffer: &TypeMap, buffer_count: Count) {
    if let Err(problem) = fits(map, count, buffer, buffer_count) {
        raise(Error::Arg(ArgError::View {
            view: kind,
            problem,
        }))
    }
}

fn fits(
    map: &TypeMap,
    count: Count,
    buffer: &TypeMap,
    buffer_count: Count,
) -> Result<(), ViewProblem> {
    let count = usize::try_from(count).map_err(|_| ViewProblem::NegativeCount { count })?;
    if map.size() > 0 {
        let (true_lb, true_extent) = map.true_extent();
        // Data beyond the upper bound is fine (a type resized to a smaller
        // extent: elements interleave); `reach` counts it.
        let _ = true_extent;
        if true_lb < map.lb() {
            return Err(ViewProblem::OutsideBounds {
                datatype: map.name().into(),
                lb: map.lb(),
                ub: map.ub(),
            });
        }
    }
    let need = map.reach(count)?;
    let have = buffer.reach(usize::try_from(buffer_count).unwrap_or(0))?;
    if need > have {
        return Err(ViewProblem::TooSmall {
            count,
            datatype: map.name().into(),
            lb: map.lb(),
            extent: map.extent(),
            need,
            buffer_count,
            buffer: buffer.name().into(),
            have,
        });
    }
    Ok(())
}
