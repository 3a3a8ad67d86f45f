//! Type maps: what the bytes of a value are, for copying and for checking
//! MPI type signatures.
//!
//! A [`TypeMap`] describes one element: the byte runs that hold data
//! (`segments`, in signature order; padding is not in any segment), the
//! element's `extent` (distance between consecutive elements of an array), and
//! its *type signature*: the sequence of base types, run-length encoded.
//! Two buffers may exchange a message when the message's signature is a prefix
//! of the receive buffer's (MPI's type-matching rule); a struct may thus be
//! received as another struct or as an array with the same base types.

use std::borrow::Cow;
use std::fmt;

/// The base types of MPI type signatures.
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
}

impl BaseKind {
    /// Size in bytes.
    pub const fn size(self) -> usize {
        match self {
            BaseKind::Bool | BaseKind::I8 | BaseKind::U8 => 1,
            BaseKind::I16 | BaseKind::U16 => 2,
            BaseKind::I32 | BaseKind::U32 | BaseKind::F32 => 4,
            BaseKind::I64 | BaseKind::U64 | BaseKind::F64 => 8,
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
        }
    }
}

/// A contiguous run of data bytes inside one element.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// Offset from the start of the element.
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
    extent: usize,
    segments: Cow<'static, [Segment]>,
    signature: Cow<'static, [Run]>,
    contiguous: bool,
}

impl fmt::Debug for TypeMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TypeMap")
            .field("name", &self.name)
            .field("size", &self.size)
            .field("extent", &self.extent)
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
        let size = signature[0].kind.size();
        TypeMap {
            name: Cow::Borrowed(name),
            size,
            extent: size,
            segments: Cow::Borrowed(segments),
            signature: Cow::Borrowed(signature),
            contiguous: true,
        }
    }

    /// Builds the map of a structure (or tuple, or array) from its fields:
    /// `(offset, field map, repeat)` in declaration order, `repeat` for array
    /// fields (elements at the field map's extent), and the structure's size.
    pub fn structure(
        name: impl Into<Cow<'static, str>>,
        fields: &[(usize, &TypeMap, usize)],
        extent: usize,
    ) -> TypeMap {
        let mut segments: Vec<Segment> = Vec::new();
        let mut signature: Vec<Run> = Vec::new();
        for &(offset, field, repeat) in fields {
            if repeat == 0 {
                continue;
            }
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
            extent,
            segments: Cow::Owned(segments),
            signature: Cow::Owned(signature),
            contiguous,
        }
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
            extent: map.size,
            segments: Cow::Owned(vec![Segment {
                offset: 0,
                len: map.size,
            }]),
            signature: map.signature.clone(),
            contiguous: true,
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

    /// Distance in bytes between consecutive elements.
    pub fn extent(&self) -> usize {
        self.extent
    }

    /// Data runs of one element.
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

fn push_run(signature: &mut Vec<Run>, kind: BaseKind, count: usize) {
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
    if send.signature == recv.signature {
        return None;
    }
    if let (Some(a), Some(b)) = (send.uniform_kind(), recv.uniform_kind()) {
        return (a != b).then_some((0, a, b));
    }
    // General case: walk both streams run by run, the receive type repeating
    // as often as needed.
    let total: usize = send.signature.iter().map(|r| r.count).sum::<usize>() * send_count;
    let mut sent = Stream::new(&send.signature);
    let mut expected = Stream::new(&recv.signature);
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
