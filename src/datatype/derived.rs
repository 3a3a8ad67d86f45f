//! MPI's derived-datatype constructors (`MPI_Type_contiguous`, `_vector`,
//! `_create_hvector`, `_indexed`, `_create_hindexed`, `_create_indexed_block`,
//! `_create_hindexed_block`, `_create_struct`) as type-map algebra.
//!
//! Every constructor is a list of *blocks*: `count` copies of an old type,
//! back to back at the old type's extent, starting `disp` bytes from the new
//! type's origin (the buffer address). The new type map is the blocks' type
//! maps concatenated in block order (MPI's type-map order: not sorted by
//! address), and its bounds follow MPI:
//!
//! * a block of `n > 0` copies of `old` at `disp` spans
//!   `disp + old.lb .. disp + old.lb + n * old.extent`;
//! * `lb` is the smallest block start, `ub` the largest block end, `extent =
//!   ub - lb`; blocks of length 0 do not count, and a type without blocks has
//!   `lb = ub = 0`;
//! * `structured` alone then rounds the extent up to a multiple of the
//!   largest alignment of its base types (MPI's "epsilon", as MPICH and Open
//!   MPI apply it to `MPI_Type_create_struct`), so that a type describing a
//!   Rust struct gets `size_of` as its extent;
//! * the alignment ([`TypeMap::align`], not an MPI notion) is the largest
//!   alignment of the old types of non-empty blocks that divides the extent,
//!   so that a type describing a Rust struct gets its `align_of` too.
//!
//! Negative strides and displacements are accepted: they give negative
//! offsets, which are fine inside a type that is nested at a larger
//! displacement. A buffer cannot start before its own address, though: a
//! [`View`](super::View) whose datatype has data before the buffer's start is
//! rejected when it is built.
//!
//! Negative counts and block lengths, mismatched slice lengths and bounds
//! that overflow are `Error::Count`/`Error::Arg`; maps with more than
//! [`MAX_RUNS`] separate data runs or signature runs are refused with
//! `Error::Unsupported` (maps are stored flattened, one entry per run).

use super::typemap::{dividing, push_run};
use super::{Run, Segment, TypeMap};
use crate::error::{ArgError, CountError};
use crate::{Address, Count, Error};

/// Largest number of data runs (or signature runs) in one derived type map.
pub(crate) const MAX_RUNS: usize = 1 << 24;

/// `count` copies of `old` back to back (`MPI_Type_contiguous`).
pub(crate) fn contiguous(count: Count, old: &TypeMap) -> Result<TypeMap, Error> {
    const OP: &str = "contiguous";
    let count = non_negative(OP, "count", count)?;
    let mut b = Builder::new(OP);
    b.block(0, count, old)?;
    b.finish(format!("contiguous({count}, {})", old.name()), false)
}

/// `count` blocks of `blocklength` copies of `old`, block `i` starting
/// `i * stride` elements of `old` from the origin (`MPI_Type_vector`).
pub(crate) fn vector(
    count: Count,
    blocklength: Count,
    stride: Count,
    old: &TypeMap,
) -> Result<TypeMap, Error> {
    const OP: &str = "vector";
    let n = non_negative(OP, "count", count)?;
    let len = non_negative(OP, "blocklength", blocklength)?;
    let step = i128::from(stride) * old.extent() as i128;
    let mut b = Builder::new(OP);
    for i in 0..n {
        b.block(i as i128 * step, len, old)?;
    }
    b.finish(
        format!("vector({count}, {blocklength}, {stride}, {})", old.name()),
        false,
    )
}

/// As [`vector`] with the stride in bytes (`MPI_Type_create_hvector`).
pub(crate) fn heterogeneous_vector(
    count: Count,
    blocklength: Count,
    stride: Address,
    old: &TypeMap,
) -> Result<TypeMap, Error> {
    const OP: &str = "heterogeneous_vector";
    let n = non_negative(OP, "count", count)?;
    let len = non_negative(OP, "blocklength", blocklength)?;
    let mut b = Builder::new(OP);
    for i in 0..n {
        b.block(i as i128 * stride as i128, len, old)?;
    }
    b.finish(
        format!(
            "heterogeneous_vector({count}, {blocklength}, {stride} bytes, {})",
            old.name()
        ),
        false,
    )
}

/// Block `i`: `blocklengths[i]` copies of `old` at `displacements[i]`
/// elements of `old` (`MPI_Type_indexed`).
pub(crate) fn indexed(
    blocklengths: &[Count],
    displacements: &[Count],
    old: &TypeMap,
) -> Result<TypeMap, Error> {
    const OP: &str = "indexed";
    same_len(OP, blocklengths.len(), "displacements", displacements.len())?;
    let mut b = Builder::new(OP);
    for (&len, &disp) in blocklengths.iter().zip(displacements) {
        let len = non_negative(OP, "blocklength", len)?;
        b.block(i128::from(disp) * old.extent() as i128, len, old)?;
    }
    b.finish(
        format!("indexed({} blocks of {})", blocklengths.len(), old.name()),
        false,
    )
}

/// As [`indexed`] with displacements in bytes (`MPI_Type_create_hindexed`).
pub(crate) fn heterogeneous_indexed(
    blocklengths: &[Count],
    displacements: &[Address],
    old: &TypeMap,
) -> Result<TypeMap, Error> {
    const OP: &str = "heterogeneous_indexed";
    same_len(OP, blocklengths.len(), "displacements", displacements.len())?;
    let mut b = Builder::new(OP);
    for (&len, &disp) in blocklengths.iter().zip(displacements) {
        let len = non_negative(OP, "blocklength", len)?;
        b.block(disp as i128, len, old)?;
    }
    b.finish(
        format!(
            "heterogeneous_indexed({} blocks of {})",
            blocklengths.len(),
            old.name()
        ),
        false,
    )
}

/// Blocks of `blocklength` copies of `old` at `displacements[i]` elements of
/// `old` (`MPI_Type_create_indexed_block`).
pub(crate) fn indexed_block(
    blocklength: Count,
    displacements: &[Count],
    old: &TypeMap,
) -> Result<TypeMap, Error> {
    const OP: &str = "indexed_block";
    let len = non_negative(OP, "blocklength", blocklength)?;
    let mut b = Builder::new(OP);
    for &disp in displacements {
        b.block(i128::from(disp) * old.extent() as i128, len, old)?;
    }
    b.finish(
        format!(
            "indexed_block({} blocks of {blocklength} {})",
            displacements.len(),
            old.name()
        ),
        false,
    )
}

/// As [`indexed_block`] with displacements in bytes
/// (`MPI_Type_create_hindexed_block`).
pub(crate) fn heterogeneous_indexed_block(
    blocklength: Count,
    displacements: &[Address],
    old: &TypeMap,
) -> Result<TypeMap, Error> {
    const OP: &str = "heterogeneous_indexed_block";
    let len = non_negative(OP, "blocklength", blocklength)?;
    let mut b = Builder::new(OP);
    for &disp in displacements {
        b.block(disp as i128, len, old)?;
    }
    b.finish(
        format!(
            "heterogeneous_indexed_block({} blocks of {blocklength} {})",
            displacements.len(),
            old.name()
        ),
        false,
    )
}

/// Block `i`: `blocklengths[i]` copies of `types[i]` at `displacements[i]`
/// bytes (`MPI_Type_create_struct`); the extent is padded to the largest
/// alignment of the base types.
pub(crate) fn structured(
    blocklengths: &[Count],
    displacements: &[Address],
    types: &[&TypeMap],
) -> Result<TypeMap, Error> {
    const OP: &str = "structured";
    same_len(OP, blocklengths.len(), "displacements", displacements.len())?;
    same_len(OP, blocklengths.len(), "types", types.len())?;
    let mut b = Builder::new(OP);
    for ((&len, &disp), old) in blocklengths.iter().zip(displacements).zip(types) {
        let len = non_negative(OP, "blocklength", len)?;
        b.block(disp as i128, len, old)?;
    }
    let names: Vec<&str> = types.iter().map(|t| t.name()).collect();
    b.finish(format!("structured({})", names.join(", ")), true)
}

fn non_negative(op: &'static str, what: &'static str, value: Count) -> Result<usize, Error> {
    usize::try_from(value).map_err(|_| {
        Error::Count(CountError::NegativeInDatatype {
            constructor: op,
            what,
            value,
        })
    })
}

fn same_len(op: &'static str, blocks: usize, what: &'static str, len: usize) -> Result<(), Error> {
    if blocks == len {
        return Ok(());
    }
    Err(Error::Arg(ArgError::BlockListLength {
        constructor: op,
        blocks,
        what,
        len,
    }))
}

/// Accumulates blocks into a type map.
pub(super) struct Builder {
    op: &'static str,
    /// Data runs: start relative to the origin, length.
    segments: Vec<(isize, usize)>,
    signature: Vec<Run>,
    /// `(lb, ub)` of the blocks so far.
    bounds: Option<(i128, i128)>,
    /// The largest alignment of the blocks' old types so far.
    align: usize,
}

impl Builder {
    pub(super) fn new(op: &'static str) -> Self {
        Builder {
            op,
            segments: Vec::new(),
            signature: Vec::new(),
            bounds: None,
            align: 1,
        }
    }

    /// Appends `count` copies of `old` starting `disp` bytes from the origin.
    pub(super) fn block(&mut self, disp: i128, count: usize, old: &TypeMap) -> Result<(), Error> {
        if count == 0 {
            return Ok(());
        }
        self.align = self.align.max(old.align());
        let extent = old.extent() as i128;
        let first = disp + old.lb() as i128;
        let end = first + count as i128 * extent;
        self.bounds = Some(match self.bounds {
            None => (first, end),
            Some((lb, ub)) => (lb.min(first), ub.max(end)),
        });
        if old.is_contiguous() {
            let len = old
                .extent()
                .checked_mul(count)
                .ok_or_else(|| self.overflow())?;
            self.push_segment(first, len)?;
        } else if !old.segments().is_empty() {
            for j in 0..count {
                let base = first + j as i128 * extent;
                for seg in old.segments() {
                    self.push_segment(base + seg.offset as i128, seg.len)?;
                }
            }
        }
        match old.signature() {
            [] => {}
            [run] => {
                let n = run
                    .count
                    .checked_mul(count)
                    .ok_or_else(|| self.overflow())?;
                push_run(&mut self.signature, run.kind, n);
            }
            runs => {
                for _ in 0..count {
                    for run in runs {
                        push_run(&mut self.signature, run.kind, run.count);
                    }
                    if self.signature.len() > MAX_RUNS {
                        return Err(self.too_many());
                    }
                }
            }
        }
        Ok(())
    }

    fn push_segment(&mut self, start: i128, len: usize) -> Result<(), Error> {
        if len == 0 {
            return Ok(());
        }
        let start = isize::try_from(start).map_err(|_| self.overflow())?;
        if let Some(last) = self.segments.last_mut() {
            if last.0.checked_add_unsigned(last.1) == Some(start) {
                last.1 += len;
                return Ok(());
            }
        }
        if self.segments.len() == MAX_RUNS {
            return Err(self.too_many());
        }
        self.segments.push((start, len));
        Ok(())
    }

    pub(super) fn finish(self, name: String, pad: bool) -> Result<TypeMap, Error> {
        let (lb, mut ub) = self.bounds.unwrap_or((0, 0));
        if pad {
            let align = self
                .signature
                .iter()
                .map(|r| r.kind.align())
                .max()
                .unwrap_or(1) as i128;
            let rem = (ub - lb) % align;
            if rem != 0 {
                ub += align - rem;
            }
        }
        let lb_isize = isize::try_from(lb).map_err(|_| self.overflow())?;
        let extent = usize::try_from(ub - lb)
            .ok()
            .filter(|&e| e <= isize::MAX as usize)
            .ok_or_else(|| self.overflow())?;
        isize::try_from(ub).map_err(|_| self.overflow())?;
        let mut size: usize = 0;
        let mut segments = Vec::with_capacity(self.segments.len());
        for &(start, len) in &self.segments {
            // Every block's data lies within its bounds, so `start >= lb`.
            let offset = usize::try_from(start as i128 - lb).map_err(|_| self.overflow())?;
            size = size.checked_add(len).ok_or_else(|| self.overflow())?;
            segments.push(Segment { offset, len });
        }
        let align = dividing(self.align, extent);
        let map = TypeMap::from_parts(name, lb_isize, extent, segments, self.signature, align);
        debug_assert_eq!(
            map.size(),
            map.signature()
                .iter()
                .map(|r| r.count * r.kind.size())
                .sum::<usize>()
        );
        Ok(map)
    }

    fn overflow(&self) -> Error {
        Error::Arg(ArgError::DatatypeOverflow {
            constructor: self.op,
        })
    }

    fn too_many(&self) -> Error {
        Error::Unsupported {
            what: format!(
                "UserDatatype::{}: a datatype with more than {MAX_RUNS} separate data runs \
                 (myriad stores type maps flattened)",
                self.op
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datatype::{BaseKind, Datatype, Equivalence};

    fn map<T: Equivalence>() -> TypeMap {
        T::equivalent_datatype().type_map().clone()
    }
    fn f64m() -> &'static TypeMap {
        static MAP: std::sync::OnceLock<TypeMap> = std::sync::OnceLock::new();
        MAP.get_or_init(map::<f64>)
    }
    fn i32m() -> &'static TypeMap {
        static MAP: std::sync::OnceLock<TypeMap> = std::sync::OnceLock::new();
        MAP.get_or_init(map::<i32>)
    }
    fn seg(offset: usize, len: usize) -> Segment {
        Segment { offset, len }
    }
    fn run(kind: BaseKind, count: usize) -> Run {
        Run { kind, count }
    }

    #[test]
    fn contiguous_of_a_primitive_is_contiguous() {
        let t = contiguous(3, f64m()).unwrap();
        assert_eq!((t.size(), t.lb(), t.extent()), (24, 0, 24));
        assert!(t.is_contiguous());
        assert_eq!(t.signature(), &[run(BaseKind::F64, 3)]);
        let empty = contiguous(0, f64m()).unwrap();
        assert_eq!((empty.size(), empty.lb(), empty.extent()), (0, 0, 0));
        assert!(empty.signature().is_empty());
    }

    #[test]
    fn vector_leaves_holes_and_ends_at_the_last_block() {
        // 2 blocks of 2 doubles, 3 doubles apart: x x _ x x
        let t = vector(2, 2, 3, f64m()).unwrap();
        assert_eq!((t.size(), t.lb(), t.extent()), (32, 0, 40));
        assert!(!t.is_contiguous());
        assert_eq!(t.segments(), &[seg(0, 16), seg(24, 16)]);
        assert_eq!(t.signature(), &[run(BaseKind::F64, 4)]);
        // Stride equal to the block length is contiguous.
        let c = vector(4, 2, 2, i32m()).unwrap();
        assert!(c.is_contiguous());
        assert_eq!(c.extent(), 32);
    }

    #[test]
    fn negative_stride_moves_the_lower_bound() {
        // Blocks at 0 and -3 doubles: lb = -24, type-map order kept.
        let t = vector(2, 1, -3, f64m()).unwrap();
        assert_eq!((t.lb(), t.extent(), t.ub()), (-24, 32, 8));
        assert_eq!(t.segments(), &[seg(24, 8), seg(0, 8)]);
        assert_eq!(t.true_extent(), (-24, 32));
        assert!(t.reach(1).is_err());
    }

    #[test]
    fn heterogeneous_vector_strides_in_bytes() {
        let t = heterogeneous_vector(3, 1, 6, i32m()).unwrap();
        // Blocks at 0, 6, 12: 0..4, 6..10, 12..16.
        assert_eq!((t.size(), t.lb(), t.extent()), (12, 0, 16));
        assert_eq!(t.segments(), &[seg(0, 4), seg(6, 4), seg(12, 4)]);
    }

    #[test]
    fn indexed_keeps_type_map_order_and_a_positive_lower_bound() {
        let t = indexed(&[2, 1], &[4, 1], i32m()).unwrap();
        // Blocks [16, 24) then [4, 8): lb 4, ub 24.
        assert_eq!((t.size(), t.lb(), t.extent()), (12, 4, 20));
        assert_eq!(t.segments(), &[seg(12, 8), seg(0, 4)]);
        assert_eq!(t.true_extent(), (4, 20));
        assert_eq!(t.reach(1).unwrap(), 24);
        assert_eq!(t.reach(2).unwrap(), 44);
        // A single block displaced from the origin is contiguous after lb.
        let one = indexed(&[3], &[2], f64m()).unwrap();
        assert_eq!((one.lb(), one.extent()), (16, 24));
        assert!(one.is_contiguous());
    }

    #[test]
    fn zero_length_blocks_do_not_count_towards_bounds() {
        let t = indexed(&[0, 2], &[0, 3], i32m()).unwrap();
        assert_eq!((t.lb(), t.extent()), (12, 8));
        let h = heterogeneous_indexed(&[1, 0], &[8, 100], f64m()).unwrap();
        assert_eq!((h.lb(), h.extent()), (8, 8));
    }

    #[test]
    fn indexed_block_variants() {
        let t = indexed_block(2, &[0, 5], i32m()).unwrap();
        assert_eq!(t.segments(), &[seg(0, 8), seg(20, 8)]);
        assert_eq!(t.extent(), 28);
        let h = heterogeneous_indexed_block(1, &[10, 2], i32m()).unwrap();
        assert_eq!((h.lb(), h.extent()), (2, 12));
        assert_eq!(h.segments(), &[seg(8, 4), seg(0, 4)]);
    }

    #[test]
    fn structured_pads_the_extent_to_the_alignment() {
        // { f64 at 0, u8 at 8 }: data 9 bytes, extent 16 as in Rust.
        let u8m = map::<u8>();
        let t = structured(&[1, 1], &[0, 8], &[f64m(), &u8m]).unwrap();
        assert_eq!((t.size(), t.lb(), t.extent()), (9, 0, 16));
        assert_eq!(t.segments(), &[seg(0, 9)]);
        assert_eq!(
            t.signature(),
            &[run(BaseKind::F64, 1), run(BaseKind::U8, 1)]
        );
        // Reversed displacements: type-map order, not address order.
        let r = structured(&[1, 1, 1], &[8, 4, 0], &[i32m(), i32m(), i32m()]).unwrap();
        assert_eq!(r.segments(), &[seg(8, 4), seg(4, 4), seg(0, 4)]);
        assert_eq!(r.extent(), 12);
        assert!(!r.is_contiguous());
    }

    #[test]
    fn nested_types_use_the_old_types_bounds() {
        // An inner type with lb 4 placed at 8: data at 12.
        let inner = indexed(&[1], &[1], i32m()).unwrap();
        assert_eq!((inner.lb(), inner.extent()), (4, 4));
        let outer = heterogeneous_indexed(&[2], &[8], &inner).unwrap();
        assert_eq!((outer.lb(), outer.extent()), (12, 8));
        assert!(outer.is_contiguous());
        // A negative-lb inner type nested at a positive displacement.
        let neg = vector(2, 1, -1, i32m()).unwrap();
        assert_eq!((neg.lb(), neg.extent()), (-4, 8));
        let pos = structured(&[1], &[4], &[&neg]).unwrap();
        assert_eq!((pos.lb(), pos.extent()), (0, 8));
        assert_eq!(pos.segments(), &[seg(4, 4), seg(0, 4)]);
        assert_eq!(pos.reach(1).unwrap(), 8);
        // Vector of a padded struct: elements at the struct's extent.
        let u8m = map::<u8>();
        let s = structured(&[1, 1], &[0, 4], &[i32m(), &u8m]).unwrap();
        assert_eq!(s.extent(), 8);
        let v = contiguous(2, &s).unwrap();
        assert_eq!(v.segments(), &[seg(0, 5), seg(8, 5)]);
        assert_eq!((v.size(), v.extent()), (10, 16));
    }

    #[test]
    fn alignment_is_the_old_types_that_divides_the_extent() {
        // Doubles 8 apart: 8. Doubles 12 bytes apart: every other element
        // would be misaligned at 8, so 4.
        assert_eq!(vector(2, 2, 3, f64m()).unwrap().align(), 8);
        let odd = heterogeneous_indexed(&[1, 1], &[0, 12], f64m()).unwrap();
        assert_eq!((odd.extent(), odd.align()), (20, 4));
        // Blocks of length 0 do not count; no blocks at all: 1.
        let u8m = map::<u8>();
        let bytes = structured(&[2, 0], &[0, 8], &[&u8m, f64m()]).unwrap();
        assert_eq!(bytes.align(), 1);
        assert_eq!(contiguous(0, f64m()).unwrap().align(), 1);
        // Padded `structured` types keep the base types' alignment.
        let s = structured(&[1, 1], &[0, 8], &[f64m(), &u8m]).unwrap();
        assert_eq!((s.extent(), s.align()), (16, 8));
        // Packed data has none.
        assert_eq!(TypeMap::packed(&s).align(), 1);
    }

    #[test]
    fn bad_arguments_are_errors() {
        assert_eq!(
            contiguous(-1, f64m()).unwrap_err(),
            Error::Count(CountError::NegativeInDatatype {
                constructor: "contiguous",
                what: "count",
                value: -1
            })
        );
        assert_eq!(
            vector(1, -2, 1, f64m()).unwrap_err(),
            Error::Count(CountError::NegativeInDatatype {
                constructor: "vector",
                what: "blocklength",
                value: -2
            })
        );
        assert_eq!(
            indexed(&[1, 2], &[0], f64m()).unwrap_err(),
            Error::Arg(ArgError::BlockListLength {
                constructor: "indexed",
                blocks: 2,
                what: "displacements",
                len: 1
            })
        );
        assert_eq!(
            structured(&[1], &[0], &[]).unwrap_err(),
            Error::Arg(ArgError::BlockListLength {
                constructor: "structured",
                blocks: 1,
                what: "types",
                len: 0
            })
        );
        assert_eq!(
            heterogeneous_indexed(&[1, 1], &[0, isize::MAX], f64m()).unwrap_err(),
            Error::Arg(ArgError::DatatypeOverflow {
                constructor: "heterogeneous_indexed"
            })
        );
    }

    #[test]
    fn huge_maps_are_refused_not_allocated() {
        let padded = structured(&[1, 1], &[0, 4], &[i32m(), &map::<u8>()]).unwrap();
        let err = contiguous(Count::MAX, &padded).unwrap_err();
        assert!(matches!(err, Error::Unsupported { .. }), "{err:?}");
    }
}
