//! Type maps: what the bytes of a value are, for copying and for checking
//! MPI type signatures.
//!
//! A [`TypeMap`] describes one element: the byte runs that hold data
//! (`segments`, in type-map order, which need not be address order; padding
//! and holes are in no segment), the element's bounds (`lb`, `extent`: element
//! `i` of a buffer at `p` spans `p + lb + i * extent ..`, and its segments are
//! offsets from that lower bound), and its *type signature*: the sequence of
//! base types, run-length encoded. Two buffers may exchange a message when the
//! message's signature is a prefix of the receive buffer's (MPI's
//! type-matching rule); a struct may thus be received as another struct or as
//! an array with the same base types.
//!
//! Keeping segment offsets relative to the lower bound means `count` elements
//! always live in the `count * extent` bytes that start at the first element's
//! lower bound: code that allocates scratch space for a layout, or slices it
//! by elements, never needs to know about `lb`. Only the step from a user's
//! buffer pointer to that first lower bound does (`copy::Layout::of`).
//!
//! A map also records an *alignment* ([`TypeMap::align`]): `align_of` of the
//! Rust type it describes. Scratch space for elements is allocated with it,
//! so that a user operation can view scratch elements as `&[T]`, and it
//! tells apart types whose bytes look alike but whose places in memory do
//! not (`f64` and a `#[repr(packed)]` wrapper of one).

use std::borrow::Cow;
use std::fmt;

use crate::error::ViewProblem;

/// The base types of MPI type signatures. (Their declaration order is their
/// wire code between processes, `transport::frame`: new kinds go last.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BaseKind {
    /// `bool` (one byte, 0 or 1).
    Bool,
    /// `i8`.
    I8,
    /// `u8`.
    U8,
    /// `i16`.
    I16,
    /// `u16`.
    U16,
    /// `i32`.
    I32,
    /// `u32`.
    U32,
    /// `i64` (and `isize` on 64-bit targets).
    I64,
    /// `u64` (and `usize` on 64-bit targets).
    U64,
    /// `f32`.
    F32,
    /// `f64`.
    F64,
    /// A complex number of two `f32`s, real part first
    /// (`num_complex::Complex<f32>`, feature `complex`; `MPI_C_FLOAT_COMPLEX`).
    C32,
    /// A complex number of two `f64`s, real part first
    /// (`num_complex::Complex<f64>`, feature `complex`; `MPI_C_DOUBLE_COMPLEX`).
    C64,
}

impl BaseKind {
    /// Every base kind, in declaration order (tables indexed by kind are
    /// built from it: `coll::op`'s supported operations). A kind's place
    /// here is also its wire code between processes (`transport::frame`):
    /// new kinds go last.
    pub(crate) const ALL: [BaseKind; 13] = {
        const ALL: [BaseKind; 13] = [
            BaseKind::Bool,
            BaseKind::I8,
            BaseKind::U8,
            BaseKind::I16,
            BaseKind::U16,
            BaseKind::I32,
            BaseKind::U32,
            BaseKind::I64,
            BaseKind::U64,
            BaseKind::F32,
            BaseKind::F64,
            BaseKind::C32,
            BaseKind::C64,
        ];
        // A kind added to the enum fails this match until it is listed
        // above (and the array's length raised).
        const fn listed(kind: BaseKind) -> bool {
            match kind {
                BaseKind::Bool
                | BaseKind::I8
                | BaseKind::U8
                | BaseKind::I16
                | BaseKind::U16
                | BaseKind::I32
                | BaseKind::U32
                | BaseKind::I64
                | BaseKind::U64
                | BaseKind::F32
                | BaseKind::F64
                | BaseKind::C32
                | BaseKind::C64 => true,
            }
        }
        let mut i = 0;
        while i < ALL.len() {
            assert!(listed(ALL[i]) && ALL[i] as usize == i);
            i += 1;
        }
        ALL
    };

    /// Size in bytes.
    pub const fn size(self) -> usize {
        match self {
            BaseKind::Bool | BaseKind::I8 | BaseKind::U8 => 1,
            BaseKind::I16 | BaseKind::U16 => 2,
            BaseKind::I32 | BaseKind::U32 | BaseKind::F32 => 4,
            BaseKind::I64 | BaseKind::U64 | BaseKind::F64 | BaseKind::C32 => 8,
            BaseKind::C64 => 16,
        }
    }

    /// Alignment in bytes of the Rust type (used for the padding MPI adds at
    /// the end of `structured` types).
    pub const fn align(self) -> usize {
        match self {
            BaseKind::Bool | BaseKind::I8 | BaseKind::U8 => 1,
            BaseKind::I16 | BaseKind::U16 => std::mem::align_of::<u16>(),
            BaseKind::I32 | BaseKind::U32 => std::mem::align_of::<u32>(),
            BaseKind::F32 | BaseKind::C32 => std::mem::align_of::<f32>(),
            BaseKind::I64 | BaseKind::U64 => std::mem::align_of::<u64>(),
            BaseKind::F64 | BaseKind::C64 => std::mem::align_of::<f64>(),
        }
    }

    /// The Rust name of the base type.
    pub const fn name(self) -> &'static str {
        match self {
            BaseKind::Bool => "bool",
            BaseKind::I8 => "i8",
            BaseKind::U8 => "u8",
            BaseKind::I16 => "i16",
            BaseKind::U16 => "u16",
            BaseKind::I32 => "i32",
            BaseKind::U32 => "u32",
            BaseKind::I64 => "i64",
            BaseKind::U64 => "u64",
            BaseKind::F32 => "f32",
            BaseKind::F64 => "f64",
            BaseKind::C32 => "Complex<f32>",
            BaseKind::C64 => "Complex<f64>",
        }
    }
}

/// A contiguous run of data bytes inside one element.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// Offset from the element's lower bound ([`TypeMap::lb`]; for the types
    /// of Rust values the lower bound is 0, the value's address).
    pub offset: usize,
    /// Length in bytes.
    pub len: usize,
}

/// `count` consecutive base values of one kind in a type signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    /// The base type.
    pub kind: BaseKind,
    /// How many in a row.
    pub count: usize,
}

/// The layout and type signature of one element of a datatype.
#[derive(Clone, PartialEq, Eq)]
pub struct TypeMap {
    name: Cow<'static, str>,
    size: usize,
    lb: isize,
    extent: usize,
    segments: Cow<'static, [Segment]>,
    signature: Cow<'static, [Run]>,
    contiguous: bool,
    align: usize,
}

impl fmt::Debug for TypeMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TypeMap")
            .field("name", &self.name)
            .field("size", &self.size)
            .field("lb", &self.lb)
            .field("extent", &self.extent)
            .field("align", &self.align)
            .field("contiguous", &self.contiguous)
            .finish()
    }
}

impl TypeMap {
    /// The map of a primitive (used for the built-in `static`s).
    pub(crate) const fn primitive(
        name: &'static str,
        segments: &'static [Segment],
        signature: &'static [Run],
    ) -> TypeMap {
        let kind = signature[0].kind;
        TypeMap {
            name: Cow::Borrowed(name),
            size: kind.size(),
            lb: 0,
            extent: kind.size(),
            segments: Cow::Borrowed(segments),
            signature: Cow::Borrowed(signature),
            contiguous: true,
            align: kind.align(),
        }
    }

    /// A map from its parts: segments relative to `lb`, in type-map order;
    /// `align` a power of two dividing `extent` (or any, for extent 0).
    pub(super) fn from_parts(
        name: String,
        lb: isize,
        extent: usize,
        segments: Vec<Segment>,
        signature: Vec<Run>,
        align: usize,
    ) -> TypeMap {
        debug_assert!(align.is_power_of_two() && extent % align == 0);
        let size = segments.iter().map(|s| s.len).sum();
        let contiguous = segments.len() == 1 && segments[0].offset == 0 && size == extent;
        TypeMap {
            name: name.into(),
            size,
            lb,
            extent,
            segments: Cow::Owned(segments),
            signature: Cow::Owned(signature),
            contiguous,
            align,
        }
    }

    /// Builds the map of a structure (or tuple, or array) from its fields:
    /// `(offset, field map, repeat)` in declaration order, `repeat` for array
    /// fields (elements at the field map's extent), and the structure's size.
    /// The structure's lower bound is 0 (its address) and its extent the
    /// given size, as for any Rust value; a field's data sits at `offset`
    /// plus the field map's own lower bound. Its alignment is the largest
    /// of the fields' that divides the extent (a Rust struct's, without
    /// `#[repr(align)]` or `#[repr(packed)]`; set it with
    /// [`with_align`](Self::with_align) when the struct has one of those, as
    /// `#[derive(Equivalence)]` does).
    ///
    /// # Panics
    ///
    /// If a field's data would start before the structure (a field map with
    /// a negative lower bound at a small offset).
    pub fn structure(
        name: impl Into<Cow<'static, str>>,
        fields: &[(usize, &TypeMap, usize)],
        extent: usize,
    ) -> TypeMap {
        let mut segments: Vec<Segment> = Vec::new();
        let mut signature: Vec<Run> = Vec::new();
        // A zero-length array field still aligns the struct, as in Rust.
        let align = dividing(fields.iter().map(|f| f.1.align).max().unwrap_or(1), extent);
        for &(offset, field, repeat) in fields {
            if repeat == 0 {
                continue;
            }
            let offset = offset.checked_add_signed(field.lb).unwrap_or_else(|| {
                panic!(
                    "TypeMap::structure: field `{}` at offset {offset} has lower bound {}, \
                     so its data would start before the structure",
                    field.name, field.lb
                )
            });
            if field.contiguous {
                push_segment(&mut segments, offset, field.extent * repeat);
            } else {
                for i in 0..repeat {
                    let base = offset + i * field.extent;
                    for seg in field.segments.iter() {
                        push_segment(&mut segments, base + seg.offset, seg.len);
                    }
                }
            }
            if let [run] = &field.signature[..] {
                push_run(&mut signature, run.kind, run.count * repeat);
            } else {
                for _ in 0..repeat {
                    for run in field.signature.iter() {
                        push_run(&mut signature, run.kind, run.count);
                    }
                }
            }
        }
        let size = segments.iter().map(|s| s.len).sum();
        let contiguous = segments.len() == 1 && segments[0].offset == 0 && size == extent;
        TypeMap {
            name: name.into(),
            size,
            lb: 0,
            extent,
            segments: Cow::Owned(segments),
            signature: Cow::Owned(signature),
            contiguous,
            align: 1,
        }
        .with_align(align)
    }

    /// The same map with alignment `align`: `align_of` of the Rust type it
    /// describes, for a struct with `#[repr(align(N))]` or
    /// `#[repr(packed)]` (`#[derive(Equivalence)]` passes
    /// `align_of::<Self>()`).
    ///
    /// ```
    /// use myriad::datatype::TypeMap;
    /// use myriad::traits::*;
    ///
    /// #[repr(C, align(32))]
    /// struct Wide(f64);
    /// let f64s = f64::equivalent_datatype();
    /// let map = TypeMap::structure("Wide", &[(0, f64s.type_map(), 1)], 32).with_align(32);
    /// assert_eq!(map.align(), std::mem::align_of::<Wide>());
    /// ```
    ///
    /// # Panics
    ///
    /// If `align` is not a power of two dividing the extent (or the extent
    /// is 0): elements follow each other at the extent, so every one of
    /// them must be aligned when the first is.
    #[track_caller]
    pub fn with_align(mut self, align: usize) -> TypeMap {
        assert!(
            align.is_power_of_two() && self.extent % align == 0,
            "TypeMap::with_align: the alignment of `{}` must be a power of two dividing its \
             extent {}, not {align}",
            self.name,
            self.extent
        );
        self.align = align;
        self
    }

    /// `count` elements of `elem` back to back (an array type).
    pub fn array(elem: &TypeMap, count: usize) -> TypeMap {
        TypeMap::structure(
            format!("[{}; {count}]", elem.name),
            &[(0, elem, count)],
            elem.extent * count,
        )
    }

    /// The contiguous type with the same signature and size as `map` (its
    /// data packed, no padding).
    pub fn packed(map: &TypeMap) -> TypeMap {
        TypeMap {
            name: Cow::Owned(format!("packed {}", map.name)),
            size: map.size,
            lb: 0,
            extent: map.size,
            segments: Cow::Owned(vec![Segment {
                offset: 0,
                len: map.size,
            }]),
            signature: map.signature.clone(),
            contiguous: true,
            // Base values at any byte offset.
            align: 1,
        }
    }

    /// The type's name (for error messages).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Bytes of data in one element (no padding).
    pub fn size(&self) -> usize {
        self.size
    }

    /// Distance in bytes between consecutive elements: `ub - lb` (MPI's
    /// extent).
    pub fn extent(&self) -> usize {
        self.extent
    }

    /// The alignment elements are laid out for, in bytes: `align_of` of the
    /// Rust type the map describes; for derived datatypes the largest
    /// alignment of the types they are built from that divides the extent.
    /// Scratch space for elements is allocated with it. It promises nothing
    /// about a user's buffer (a [`View`](super::View) may start at any
    /// address), so code that views elements as `&[T]` checks the address
    /// too.
    pub fn align(&self) -> usize {
        self.align
    }

    /// Lower bound: where an element starts relative to the buffer address,
    /// in bytes (MPI's `lb`). 0 for the types of Rust values; for derived
    /// datatypes the smallest displacement of any block (so a type whose
    /// first block is displaced by 16 bytes has `lb == 16`, and may be
    /// negative when a displacement is).
    pub fn lb(&self) -> isize {
        self.lb
    }

    /// Upper bound: `lb + extent` (MPI's `ub`).
    pub fn ub(&self) -> isize {
        self.lb.wrapping_add_unsigned(self.extent)
    }

    /// The data bytes' own bounds relative to the buffer address, without
    /// the holes at either end that `lb`/`ub` may include: `(true_lb,
    /// true_extent)` as `MPI_Type_get_true_extent` reports them; `(lb, 0)`
    /// for a type without data.
    pub fn true_extent(&self) -> (isize, usize) {
        let first = self.segments.iter().map(|s| s.offset).min();
        let end = self.segments.iter().map(|s| s.offset + s.len).max();
        match (first, end) {
            (Some(first), Some(end)) => (self.lb.wrapping_add_unsigned(first), end - first),
            _ => (self.lb, 0),
        }
    }

    /// Bytes from the first element's lower bound to the end of the data of
    /// `count` elements: `count * extent`, or more when the data reaches
    /// beyond the upper bound (a type resized to a smaller extent). What
    /// scratch space for `count` elements needs.
    #[inline]
    pub(crate) fn span(&self, count: usize) -> usize {
        if self.contiguous {
            // One segment filling the extent: the data ends at the extent.
            return count * self.extent;
        }
        if count == 0 {
            return 0;
        }
        let data_end = self
            .segments
            .iter()
            .map(|s| s.offset + s.len)
            .max()
            .unwrap_or(0);
        (count - 1) * self.extent + self.extent.max(data_end)
    }

    /// How many bytes from a buffer's address `count` elements reach: the
    /// memory a buffer must own for them. Errors when data of the first
    /// element lies before the address (a negative true lower bound) or the
    /// size overflows.
    pub(crate) fn reach(&self, count: usize) -> Result<usize, ViewProblem> {
        if count == 0 || self.size == 0 {
            return Ok(0);
        }
        let (true_lb, true_extent) = self.true_extent();
        if true_lb < 0 {
            return Err(ViewProblem::BeforeStart {
                datatype: self.name.to_string(),
                byte: true_lb,
            });
        }
        let end = (count as u128 - 1) * self.extent as u128 + true_lb as u128 + true_extent as u128;
        usize::try_from(end)
            .ok()
            .filter(|&end| end <= isize::MAX as usize)
            .ok_or_else(|| ViewProblem::TooLarge {
                count,
                datatype: self.name.to_string(),
            })
    }

    /// Data runs of one element, offsets from its lower bound.
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// Run-length encoded type signature of one element.
    pub fn signature(&self) -> &[Run] {
        &self.signature
    }

    /// Whether an element is one run of data filling its extent, so that
    /// `count` elements are `count * extent` contiguous bytes.
    pub fn is_contiguous(&self) -> bool {
        self.contiguous
    }

    /// The single base type of the signature, if it has only one.
    pub fn uniform_kind(&self) -> Option<BaseKind> {
        let first = self.signature.first()?.kind;
        self.signature
            .iter()
            .all(|r| r.kind == first)
            .then_some(first)
    }
}

/// The largest power of two that is at most `align` (a power of two) and
/// divides `extent` (`align` itself for extent 0): the alignment every
/// element keeps when elements follow each other at the extent.
pub(super) fn dividing(align: usize, extent: usize) -> usize {
    match extent {
        0 => align,
        _ => align.min(1 << extent.trailing_zeros()),
    }
}

fn push_segment(segments: &mut Vec<Segment>, offset: usize, len: usize) {
    if len == 0 {
        return;
    }
    if let Some(last) = segments.last_mut() {
        if last.offset + last.len == offset {
            last.len += len;
            return;
        }
    }
    segments.push(Segment { offset, len });
}

pub(super) fn push_run(signature: &mut Vec<Run>, kind: BaseKind, count: usize) {
    if count == 0 {
        return;
    }
    if let Some(last) = signature.last_mut() {
        if last.kind == kind {
            last.count += count;
            return;
        }
    }
    signature.push(Run { kind, count });
}

/// Whether a message of `send_count` elements of `send` matches a receive
/// buffer of type `recv`: the message's base-type sequence must equal the
/// receive type's sequence over the same number of base values (the receive
/// count only bounds the length, which truncation checks separately).
/// Returns the first mismatch as `(index of base value, sent kind, expected kind)`.
#[inline]
pub(crate) fn signature_mismatch(
    send: &TypeMap,
    send_count: usize,
    recv: &TypeMap,
) -> Option<(usize, BaseKind, BaseKind)> {
    // The common case: the same type on both sides.
    if std::ptr::eq(send, recv) {
        return None;
    }
    signature_mismatch_slow(send, send_count, recv)
}

#[cold]
fn signature_mismatch_slow(
    send: &TypeMap,
    send_count: usize,
    recv: &TypeMap,
) -> Option<(usize, BaseKind, BaseKind)> {
    runs_mismatch(&send.signature, send_count, &recv.signature)
}

/// [`signature_mismatch`] for a sent signature given as its runs (a
/// message from another process carries its element's runs).
pub(crate) fn runs_mismatch(
    send: &[Run],
    send_count: usize,
    recv: &[Run],
) -> Option<(usize, BaseKind, BaseKind)> {
    if send == recv {
        return None;
    }
    let uniform = |runs: &[Run]| {
        let first = runs.first()?.kind;
        runs.iter().all(|r| r.kind == first).then_some(first)
    };
    if let (Some(a), Some(b)) = (uniform(send), uniform(recv)) {
        return (a != b).then_some((0, a, b));
    }
    if recv.is_empty() {
        // Nothing to compare with (a receive type without data).
        return None;
    }
    // General case: walk both streams run by run, the receive type repeating
    // as often as needed.
    let total: usize = send.iter().map(|r| r.count).sum::<usize>() * send_count;
    let mut sent = Stream::new(send);
    let mut expected = Stream::new(recv);
    let mut index = 0;
    while index < total {
        let (a, na) = sent.peek();
        let (b, nb) = expected.peek();
        if a != b {
            return Some((index, a, b));
        }
        let n = na.min(nb).min(total - index);
        sent.advance(n);
        expected.advance(n);
        index += n;
    }
    None
}

/// An endless stream of base kinds repeating a signature.
struct Stream<'a> {
    runs: &'a [Run],
    at: usize,
    used: usize,
}

impl<'a> Stream<'a> {
    fn new(runs: &'a [Run]) -> Self {
        Stream {
            runs,
            at: 0,
            used: 0,
        }
    }

    fn peek(&self) -> (BaseKind, usize) {
        let run = self.runs[self.at];
        (run.kind, run.count - self.used)
    }

    fn advance(&mut self, n: usize) {
        self.used += n;
        if self.used == self.runs[self.at].count {
            self.used = 0;
            self.at = (self.at + 1) % self.runs.len();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datatype::Datatype;
    use crate::datatype::Equivalence;

    fn map<T: Equivalence>() -> TypeMap {
        T::equivalent_datatype().type_map().clone()
    }

    #[test]
    fn structure_merges_runs_and_finds_padding() {
        #[repr(C)]
        struct S {
            a: u8,
            b: u32,
            c: [u32; 2],
        }
        let u8m = map::<u8>();
        let u32m = map::<u32>();
        let s = TypeMap::structure(
            "S",
            &[
                (std::mem::offset_of!(S, a), &u8m, 1),
                (std::mem::offset_of!(S, b), &u32m, 1),
                (std::mem::offset_of!(S, c), &u32m, 2),
            ],
            std::mem::size_of::<S>(),
        );
        assert_eq!(s.size(), 13);
        assert_eq!(s.extent(), 16);
        assert!(!s.is_contiguous());
        assert_eq!(
            s.segments(),
            &[
                Segment { offset: 0, len: 1 },
                Segment { offset: 4, len: 12 }
            ]
        );
        assert_eq!(
            s.signature(),
            &[
                Run {
                    kind: BaseKind::U8,
                    count: 1
                },
                Run {
                    kind: BaseKind::U32,
                    count: 3
                }
            ]
        );
    }

    #[test]
    fn structures_take_their_fields_alignment() {
        #[repr(C)]
        struct S {
            a: u8,
            b: u64,
        }
        let (u8m, u64m) = (map::<u8>(), map::<u64>());
        let fields = [(0, &u8m, 1), (std::mem::offset_of!(S, b), &u64m, 1)];
        let s = TypeMap::structure("S", &fields, std::mem::size_of::<S>());
        assert_eq!(s.align(), std::mem::align_of::<S>());
        // A packed layout: the largest alignment dividing the extent (9).
        assert_eq!(
            TypeMap::structure("P", &[(0, &u8m, 1), (1, &u64m, 1)], 9).align(),
            1
        );
        // A zero-length array field still aligns.
        assert_eq!(TypeMap::structure("Z", &[(0, &u64m, 0)], 0).align(), 8);
        assert_eq!(s.clone().with_align(16).align(), 16);
        assert_ne!(
            s.clone().with_align(16),
            s,
            "the alignment is part of the type"
        );
    }

    #[test]
    #[should_panic(expected = "must be a power of two dividing its extent 16, not 32")]
    fn alignments_must_divide_the_extent() {
        let s = TypeMap::structure("S", &[(0, &map::<u64>(), 2)], 16);
        let _ = s.with_align(32);
    }

    #[test]
    fn signatures_match_across_shapes() {
        let u32m = map::<u32>();
        let arr = TypeMap::array(&u32m, 3);
        assert!(arr.is_contiguous());
        assert_eq!(signature_mismatch(&arr, 2, &u32m), None);
        assert_eq!(signature_mismatch(&u32m, 6, &arr), None);
        let f32m = map::<f32>();
        assert_eq!(
            signature_mismatch(&u32m, 1, &f32m),
            Some((0, BaseKind::U32, BaseKind::F32))
        );
        let u8m = map::<u8>();
        let mixed = TypeMap::structure("M", &[(0, &u8m, 1), (4, &u32m, 1)], 8);
        let other = TypeMap::structure("N", &[(0, &u8m, 1), (1, &u32m, 1)], 5);
        assert_eq!(signature_mismatch(&mixed, 3, &other), None);
        let swapped = TypeMap::structure("W", &[(0, &u32m, 1), (4, &u8m, 1)], 8);
        assert!(signature_mismatch(&mixed, 1, &swapped).is_some());
    }
}
