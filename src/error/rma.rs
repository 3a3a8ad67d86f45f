//! [`RmaError`]: one-sided communication (windows, epochs, operations)
//! used the wrong way.

use std::fmt;

use crate::datatype::BaseKind;
use crate::Rank;

/// A one-sided operation or synchronisation call that cannot be done:
/// which call, on which target, with the values involved. `Display` gives
/// the sentence that [`Error`](super::Error)'s `Display` prints; the MPI
/// class (`MPI_ERR_RMA_RANGE`, `MPI_ERR_RMA_SYNC`, `MPI_ERR_WIN`) follows
/// from the kind.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RmaError {
    /// The access reaches past the end of the target's window segment
    /// (displacement × displacement unit + size beyond its length).
    OutOfRange {
        /// The operation (`put`, `get`, ...).
        op: &'static str,
        /// The target rank.
        target: Rank,
        /// Where the access starts in the target's segment, in bytes.
        offset: usize,
        /// Its size in bytes.
        bytes: usize,
        /// The length of the target's segment in bytes.
        segment: usize,
    },
    /// The target is not part of the epoch the operation was issued in
    /// (a rank outside the group of `start`).
    NotInEpoch {
        /// The operation.
        op: &'static str,
        /// The target rank.
        target: Rank,
        /// The epoch (`start`, ...).
        epoch: &'static str,
    },
    /// An epoch was opened while an incompatible one is open on this rank
    /// (a `lock` inside a `fence` epoch, the same target locked twice, ...).
    NestedEpoch {
        /// The call that would open the epoch.
        call: &'static str,
        /// What is open already.
        open: String,
    },
    /// A window was freed while this rank still had an epoch open on it
    /// (a guard was leaked with `mem::forget`); the window is freed anyway.
    EpochOpen {
        /// What was open.
        open: String,
    },
    /// The target rank's window memory is gone: that rank failed (panicked
    /// or was unwound) and released its segment; nothing was accessed.
    TargetGone {
        /// The operation.
        op: &'static str,
        /// The target rank.
        target: Rank,
    },
    /// `shared_query` on a window that was not allocated as a shared one.
    NotShared,
    /// Origin data whose type signature is not the window element type's,
    /// repeated (`MPI_ERR_TYPE`).
    TypeMismatch {
        /// The operation.
        op: &'static str,
        /// The origin datatype's name.
        datatype: String,
        /// The window element type's name.
        element: String,
        /// Where the signatures first differ (in base values), or `None`
        /// when they agree but the origin data ends inside an element.
        index: Option<usize>,
    },
    /// A displacement unit of zero.
    ZeroUnit,
    /// The data of a target datatype (`count` elements at the
    /// displacement) reaches outside the target's window segment: bytes
    /// `start..end` (counted from the segment's start; a negative start is
    /// before it; saturated at the `i64` range), for a segment of `segment`
    /// bytes (`MPI_ERR_RMA_RANGE`).
    TargetOutOfRange {
        /// The operation.
        op: &'static str,
        /// The target rank.
        target: Rank,
        /// The target datatype's name.
        datatype: String,
        /// The target count.
        count: usize,
        /// The first data byte the access would touch.
        start: i64,
        /// One past the last.
        end: i64,
        /// The length of the target's segment in bytes.
        segment: usize,
    },
    /// A base value the target side addresses does not lie on a base value
    /// of the same type of the window's elements (a window is the owner's
    /// typed memory: a `u32`'s byte over a `bool`, or an `f64` across two
    /// fields, is refused; `MPI_ERR_TYPE`).
    Misplaced {
        /// The operation.
        op: &'static str,
        /// The target rank.
        target: Rank,
        /// The type of the first misplaced base value.
        kind: BaseKind,
        /// The byte of the target's segment it would land on.
        byte: i64,
        /// The target datatype's name (the element type's for a contiguous
        /// access at a displacement inside an element).
        datatype: String,
        /// The window element type's name.
        element: String,
    },
    /// The origin's and the target's type signatures differ
    /// (`MPI_ERR_TYPE`): both named with their counts.
    SignatureMismatch {
        /// The operation.
        op: &'static str,
        /// The origin's count and datatype (`3 × i32`).
        origin: String,
        /// The target's count and datatype.
        target: String,
        /// Where the signatures first differ (in base values), or `None`
        /// when they agree but hold different numbers of base values.
        index: Option<usize>,
    },
    /// A user-defined operation in an accumulate: MPI allows only the
    /// predefined operations there (`MPI_ERR_OP`).
    UserOperation {
        /// The operation (`accumulate`, ...).
        op: &'static str,
    },
}

impl RmaError {
    /// Whether it is a range error (`MPI_ERR_RMA_RANGE`).
    pub(crate) fn is_range(&self) -> bool {
        matches!(
            self,
            RmaError::OutOfRange { .. } | RmaError::TargetOutOfRange { .. }
        )
    }

    /// Whether it is a type error (`MPI_ERR_TYPE`).
    pub(crate) fn is_type(&self) -> bool {
        matches!(
            self,
            RmaError::TypeMismatch { .. }
                | RmaError::Misplaced { .. }
                | RmaError::SignatureMismatch { .. }
        )
    }

    /// Whether it is an operation error (`MPI_ERR_OP`).
    pub(crate) fn is_op(&self) -> bool {
        matches!(self, RmaError::UserOperation { .. })
    }

    /// Whether it is a synchronisation error (`MPI_ERR_RMA_SYNC`).
    pub(crate) fn is_sync(&self) -> bool {
        matches!(
            self,
            RmaError::NotInEpoch { .. } | RmaError::NestedEpoch { .. } | RmaError::EpochOpen { .. }
        )
    }
}

impl fmt::Display for RmaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RmaError::OutOfRange {
                op,
                target,
                offset,
                bytes,
                segment,
            } => write!(
                f,
                "{op}: {bytes} bytes at byte {offset} of rank {target}'s window reach past its \
                 end ({segment} bytes)"
            ),
            RmaError::NotInEpoch { op, target, epoch } => write!(
                f,
                "{op}: rank {target} is not a target of the open {epoch} epoch"
            ),
            RmaError::NestedEpoch { call, open } => write!(
                f,
                "{call}: cannot open an epoch while {open} is open on this window"
            ),
            RmaError::EpochOpen { open } => write!(
                f,
                "window freed with {open} still open (a leaked epoch guard)"
            ),
            RmaError::TargetGone { op, target } => write!(
                f,
                "{op}: rank {target} failed and released its window memory; nothing was accessed"
            ),
            RmaError::TypeMismatch {
                op,
                datatype,
                element,
                index: Some(index),
            } => write!(
                f,
                "{op}: origin data of type {datatype} does not match the window's elements of \
                 type {element} (their type signatures differ at base value {index})"
            ),
            RmaError::TypeMismatch {
                op,
                datatype,
                element,
                index: None,
            } => write!(
                f,
                "{op}: origin data of type {datatype} is not a whole number of the window's \
                 elements of type {element}"
            ),
            RmaError::NotShared => {
                f.write_str("shared_query: the window was not allocated as a shared window")
            }
            RmaError::ZeroUnit => f.write_str("a window's displacement unit must not be zero"),
            RmaError::TargetOutOfRange {
                op,
                target,
                datatype,
                count,
                start,
                end,
                segment,
            } => write!(
                f,
                "{op}: {count} elements of the target datatype {datatype} touch bytes \
                 {start}..{end} of rank {target}'s window, outside its {segment} bytes"
            ),
            RmaError::Misplaced {
                op,
                target,
                kind,
                byte,
                datatype,
                element,
            } => write!(
                f,
                "{op}: {datatype} has a base value (a {kind}) that would land at byte {byte} of \
                 rank {target}'s window, which is not the start of a {kind} of its elements of \
                 type {element}",
                kind = kind.name()
            ),
            RmaError::SignatureMismatch {
                op,
                origin,
                target,
                index: Some(index),
            } => write!(
                f,
                "{op}: the origin's {origin} and the target's {target} have different type \
                 signatures (they differ at base value {index})"
            ),
            RmaError::SignatureMismatch {
                op,
                origin,
                target,
                index: None,
            } => write!(
                f,
                "{op}: the origin's {origin} and the target's {target} hold different numbers \
                 of base values"
            ),
            RmaError::UserOperation { op } => write!(
                f,
                "{op}: user-defined operations are not allowed in one-sided accumulates (MPI \
                 allows only the predefined operations there)"
            ),
        }
    }
}
