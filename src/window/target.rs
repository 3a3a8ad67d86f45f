//! Target views: the target side of an operation as a count and a
//! datatype at a displacement (MPI's `target_disp`, `target_count`,
//! `target_datatype`), as a [`View`](crate::datatype::View) describes an
//! origin buffer; and how the origin's data meets it.
//!
//! ## Design
//!
//! The origin buffer is any [`Buffer`](crate::datatype::Buffer) (a slice, a
//! view, a user datatype); its type signature must equal the target's, as
//! MPI requires, checked with the receive's checker
//! ([`check_signatures`]). The origin data is then packed (or used in
//! place when contiguous) and the window layer (`rma/target.rs`) scatters
//! it into, or gathers it from, the target's data runs. A target view
//! borrows its datatype only for the call: nothing about it outlives the
//! operation, so building one is safe; what it may address is checked at
//! the target (inside the segment, on the window elements' base values of
//! the same type).

use crate::datatype::copy::{self, Layout};
use crate::datatype::{signature_mismatch, Datatype, TypeMap};
use crate::error::{CountError, Error, RmaError};
use crate::rma::Placed;
use crate::Count;

/// Where an operation lands at its target: `count` elements of
/// `datatype` whose buffer address is displacement `disp` of the target's
/// segment (in the target's displacement unit). Element `i` starts at the
/// datatype's lower bound plus `i` extents from there, as in MPI.
///
/// ```
/// use myriad::datatype::UserDatatype;
/// use myriad::traits::*;
/// use myriad::window::{Epoch, LockType, TargetView, WindowCreation};
///
/// let out = myriad::run(2, |universe| {
///     let world = universe.world();
///     // A 3×3 matrix of f64 per rank; column 1 is elements 1, 4, 7.
///     let win = world.allocate_window::<f64>(9).unwrap();
///     let column = UserDatatype::vector(3, 1, 3, &f64::equivalent_datatype());
///     if world.rank() == 0 {
///         let lock = win.lock(1, LockType::Exclusive).unwrap();
///         lock.put_typed(1, &TargetView::new(1, &column), &[1.0, 2.0, 3.0][..])
///             .unwrap();
///     }
///     win.fence().unwrap().end().unwrap();
///     let mut mine = [0.0; 9];
///     win.lock(world.rank(), LockType::Shared).unwrap()
///         .get(world.rank(), 0, &mut mine).unwrap();
///     mine
/// })
/// .unwrap();
/// assert_eq!(out[1], [0.0, 1.0, 0.0, 0.0, 2.0, 0.0, 0.0, 3.0, 0.0]);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct TargetView<'d, D: Datatype> {
    disp: usize,
    count: Count,
    datatype: &'d D,
}

impl<'d, D: Datatype> TargetView<'d, D> {
    /// `count` elements of `datatype` at displacement `disp`. A negative
    /// count is an error (`MPI_ERR_COUNT`) when the view is used.
    pub fn with_count_and_datatype(disp: usize, count: Count, datatype: &'d D) -> Self {
        TargetView {
            disp,
            count,
            datatype,
        }
    }

    /// One element of `datatype` at displacement `disp` (a count of 1: the
    /// usual form when the datatype describes the whole target layout).
    pub fn new(disp: usize, datatype: &'d D) -> Self {
        Self::with_count_and_datatype(disp, 1, datatype)
    }

    /// The displacement.
    pub fn disp(&self) -> usize {
        self.disp
    }

    /// The count.
    pub fn count(&self) -> Count {
        self.count
    }

    /// As the window layer takes it; a negative count is refused.
    pub(super) fn placed(&self, op: &'static str) -> Result<Placed<'_>, Error> {
        let count = usize::try_from(self.count).map_err(|_| {
            Error::Count(CountError::NegativeCount {
                op,
                count: self.count,
            })
        })?;
        Ok(Placed {
            disp: self.disp,
            count,
            map: self.datatype.type_map(),
        })
    }
}

/// Checks that `origin_count` elements of `origin` and `at`'s elements have
/// the same type signature (the same base values in the same order).
pub(super) fn check_signatures(
    op: &'static str,
    origin: &TypeMap,
    origin_count: usize,
    at: Placed<'_>,
) -> Result<(), Error> {
    let mismatch = |index| {
        Error::Rma(RmaError::SignatureMismatch {
            op,
            origin: format!("{origin_count} × {}", origin.name()),
            target: format!("{} × {}", at.count, at.map.name()),
            index,
        })
    };
    let values = |map: &TypeMap, count: usize| -> u128 {
        map.signature()
            .iter()
            .map(|r| r.count as u128)
            .sum::<u128>()
            * count as u128
    };
    if values(origin, origin_count) != values(at.map, at.count) {
        return Err(mismatch(None));
    }
    if let Some((index, _, _)) = signature_mismatch(origin, origin_count, at.map) {
        return Err(mismatch(Some(index)));
    }
    Ok(())
}

/// The origin's data packed: in place when its layout is contiguous,
/// else copied run by run into a buffer of its own.
pub(super) enum Packed {
    InPlace(*const u8),
    Copied(Vec<u8>),
}

impl Packed {
    /// Packs `src`.
    ///
    /// # Safety
    ///
    /// `src` valid for reads of its layout while the result is used.
    pub(super) unsafe fn of(src: &Layout) -> Packed {
        if src.ty.map().is_contiguous() {
            return Packed::InPlace(src.base);
        }
        let mut out = vec![0u8; src.bytes()];
        // SAFETY: `out` holds `src.bytes()` bytes; `src` is the caller's.
        unsafe { copy::pack(src, out.as_mut_ptr()) };
        Packed::Copied(out)
    }

    pub(super) fn as_ptr(&self) -> *const u8 {
        match self {
            Packed::InPlace(p) => *p,
            Packed::Copied(v) => v.as_ptr(),
        }
    }
}

/// Where packed data for a destination layout goes: straight into it when
/// contiguous, else into scratch that [`Unpacked::finish`] spreads out.
pub(super) struct Unpacked<'l> {
    dst: &'l Layout,
    scratch: Vec<u8>,
}

impl<'l> Unpacked<'l> {
    pub(super) fn new(dst: &'l Layout) -> Unpacked<'l> {
        let scratch = match dst.ty.map().is_contiguous() {
            true => Vec::new(),
            false => vec![0u8; dst.bytes()],
        };
        Unpacked { dst, scratch }
    }

    /// Where the packed bytes are to be written.
    pub(super) fn as_mut_ptr(&mut self) -> *mut u8 {
        match self.dst.ty.map().is_contiguous() {
            true => self.dst.base as *mut u8,
            false => self.scratch.as_mut_ptr(),
        }
    }

    /// Spreads scratch out into the destination's layout.
    ///
    /// # Safety
    ///
    /// The destination layout valid for writes, not overlapping the
    /// scratch (it is ours).
    pub(super) unsafe fn finish(self) {
        if !self.dst.ty.map().is_contiguous() {
            // SAFETY: the scratch holds the layout's bytes; the caller's
            // contract for the destination.
            unsafe { copy::unpack(self.scratch.as_ptr(), self.scratch.len(), self.dst) };
        }
    }
}
