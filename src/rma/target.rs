//! Target-side datatypes: where the data of an operation lands in the
//! target's segment when the target is described by a count and a datatype
//! (`MPI_Put`'s `target_count`/`target_datatype`), and the checks that keep
//! such an access inside the segment and on the window's own elements.
//!
//! ## Design
//!
//! The origin side is always packed first (its data runs, in type-map
//! order: the sequence of base values the type signature describes), so
//! the target side only moves runs between that packed stream and window
//! memory: element `e` of the target type, data run `s`, lands at byte
//! `disp * unit + lb + e * extent + s.offset` of the segment, in type-map
//! order. Every run goes through `access.rs`'s relaxed-atomic copies, so
//! racing origins stay defined behaviour whatever the layout.
//!
//! Two checks come before any byte moves:
//!
//! * **Span** ([`span`]): the lowest and highest data byte of all `count`
//!   elements (a negative lower bound included) must lie inside the
//!   segment (`MPI_ERR_RMA_RANGE`), so no run is checked one by one.
//! * **Placement** ([`Elements::check`]): a window is typed (`Window<T>`),
//!   and its memory is the owner's `[T]`. Each base value the target type
//!   addresses must coincide with a base value of the same kind of the
//!   window's element (at `byte % size_of::<T>()`). Otherwise a put could
//!   write a byte of a `u32` over a `bool` field (undefined behaviour when
//!   the owner reads it) or over a struct's padding. For a window of one
//!   base kind without padding (every primitive, arrays of them) this is
//!   a check of a few offsets modulo the kind's size, per datatype
//!   segment, not per element; other element types walk the target's base
//!   values run by run against the element's sorted value runs.
//!
//! MPI itself knows no window element type; a program that addresses the
//! window as MPI does (displacements and datatypes that follow the memory
//! it exposed) passes both checks.

use crate::datatype::{BaseKind, TypeMap};

/// `count` elements of `map` whose buffer address is displacement `disp`
/// (in the target's unit) of a target's segment.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Placed<'a> {
    pub(crate) disp: usize,
    pub(crate) count: usize,
    pub(crate) map: &'a TypeMap,
}

/// One pass over a type map's data segments: where its data starts and
/// ends (offsets from the lower bound) and the OR of the segments'
/// offsets (whose low bits say their common alignment). A datatype may
/// have many segments (a vector of single values has one per value), so
/// the checks of an operation read them once.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scan {
    first: usize,
    end: usize,
    offsets: usize,
}

impl Scan {
    pub(crate) fn of(map: &TypeMap) -> Scan {
        let mut scan = Scan {
            first: usize::MAX,
            end: 0,
            offsets: 0,
        };
        for s in map.segments() {
            scan.first = scan.first.min(s.offset);
            scan.end = scan.end.max(s.offset + s.len);
            scan.offsets |= s.offset;
        }
        scan
    }
}

/// The bytes `[start, end)` of the segment that `count` elements of `map`
/// (`scan` its [`Scan`]) at byte `offset` touch (data bytes only: holes at
/// either end of the type are not accessed). Empty for no data.
pub(crate) fn span(offset: usize, map: &TypeMap, count: usize, scan: &Scan) -> (i128, i128) {
    if count == 0 || map.size() == 0 {
        return (offset as i128, offset as i128);
    }
    let start = offset as i128 + map.lb() as i128 + scan.first as i128;
    let end = start + (count as i128 - 1) * map.extent() as i128 + (scan.end - scan.first) as i128;
    (start, end)
}

/// `count` base values of `kind` from byte `offset` of an element (from its
/// lower bound), in one data run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ValueRun {
    offset: usize,
    kind: BaseKind,
    count: usize,
}

impl ValueRun {
    fn end(&self) -> usize {
        self.offset + self.count * self.kind.size()
    }
}

/// One element's base values as runs, in type-map order: the signature's
/// runs laid over the data segments (a base value never straddles two).
fn value_runs(map: &TypeMap) -> Vec<ValueRun> {
    let mut out = Vec::new();
    let mut segments = map.segments().iter().copied();
    let mut seg = segments.next();
    let mut used = 0;
    for run in map.signature() {
        let size = run.kind.size();
        let mut left = run.count;
        while left > 0 {
            let Some(s) = seg else {
                return out;
            };
            let fit = ((s.len - used) / size).min(left);
            if fit > 0 {
                out.push(ValueRun {
                    offset: s.offset + used,
                    kind: run.kind,
                    count: fit,
                });
            }
            used += fit * size;
            left -= fit;
            if used == s.len || fit == 0 {
                seg = segments.next();
                used = 0;
            }
        }
    }
    out
}

/// The window's element type as the placement check needs it.
#[derive(Debug)]
pub(crate) struct Elements {
    /// Offsets with these bits clear are whole elements' starts, no check
    /// needed: the element's size minus one when it is a power of two, else
    /// all bits (only offset 0 passes without a look at the shape).
    mask: usize,
    shape: Shape,
}

/// The base values of the window's element type.
#[derive(Debug)]
enum Shape {
    /// Every byte is part of a base value of one kind (primitives, arrays
    /// of them, structs of one kind without padding).
    Uniform { kind: BaseKind },
    /// Anything else: its value runs sorted by offset, and its extent.
    General { runs: Vec<ValueRun>, extent: usize },
}

impl Elements {
    pub(crate) fn of(element: &TypeMap) -> Elements {
        match element.uniform_kind() {
            Some(kind) if element.is_contiguous() && element.lb() == 0 => Elements {
                mask: kind.size() - 1,
                shape: Shape::Uniform { kind },
            },
            _ => {
                let mut runs = value_runs(element);
                runs.sort_by_key(|r| r.offset);
                let extent = element.extent();
                Elements {
                    mask: match extent.is_power_of_two() {
                        true => extent - 1,
                        false => usize::MAX,
                    },
                    shape: Shape::General { runs, extent },
                }
            }
        }
    }

    /// Checks that `bytes` bytes of the window's own elements (a whole
    /// number) at byte `offset` lie on its elements' base values of the
    /// same kind: always true at a multiple of the element's size; else
    /// e.g. `[u32; 2]` elements may start at byte 4, `u32` ones not at
    /// byte 2. One mask test on the path of every simple `put` and `get`.
    #[inline(always)]
    pub(crate) fn check_own(
        &self,
        offset: usize,
        bytes: usize,
    ) -> Result<(), (usize, BaseKind, i128)> {
        if offset & self.mask == 0 {
            return Ok(());
        }
        self.check_own_slow(offset, bytes)
    }

    #[cold]
    fn check_own_slow(&self, offset: usize, bytes: usize) -> Result<(), (usize, BaseKind, i128)> {
        match &self.shape {
            Shape::Uniform { kind } => Err((0, *kind, offset as i128)),
            Shape::General { runs, extent } => {
                if *extent == 0 || offset % extent == 0 {
                    return Ok(());
                }
                let per = runs.iter().map(|r| r.count).sum();
                self.check_values(offset as i128, runs, per, *extent, bytes / extent)
            }
        }
    }

    /// Checks that every base value of `count` elements of `map` at byte
    /// `offset` of the segment (its buffer address; the span already
    /// checked, so every data byte is at a non-negative offset) lies on a
    /// base value of the same kind of the window's elements. `Err` gives
    /// the index of the first base value that does not, with its kind and
    /// byte.
    pub(crate) fn check(
        &self,
        offset: usize,
        map: &TypeMap,
        count: usize,
        scan: &Scan,
    ) -> Result<(), (usize, BaseKind, i128)> {
        if count == 0 || map.size() == 0 {
            return Ok(());
        }
        let base = offset as i128 + map.lb() as i128;
        let Shape::Uniform { kind } = &self.shape else {
            let mine = value_runs(map);
            let per = mine.iter().map(|r| r.count).sum();
            return self.check_values(base, &mine, per, map.extent(), count);
        };
        let size = kind.size() as i128;
        let fits = |at: i128| at.rem_euclid(size) == 0;
        match map.uniform_kind() {
            Some(k) if k == *kind => {}
            _ => return Err(first_other(map, *kind, base)),
        }
        let stride_ok = count == 1 || fits(map.extent() as i128);
        if fits(base) && stride_ok && fits(scan.offsets as i128) {
            return Ok(());
        }
        // Find the first misplaced value, for the error.
        let per = map.size() / kind.size();
        for e in 0..count {
            let el = base + (e * map.extent()) as i128;
            let mut index = e * per;
            for s in map.segments() {
                let at = el + s.offset as i128;
                if !fits(at) {
                    return Err((index, *kind, at));
                }
                index += s.len / kind.size();
            }
        }
        Ok(())
    }

    /// The general check: `count` elements, `stride` bytes apart from
    /// byte `base`, each with the value runs `mine` (`per` values).
    fn check_values(
        &self,
        base: i128,
        mine: &[ValueRun],
        per: usize,
        stride: usize,
        count: usize,
    ) -> Result<(), (usize, BaseKind, i128)> {
        let Shape::General { runs, extent } = &self.shape else {
            unreachable!("uniform elements are checked by offsets");
        };
        let extent = *extent as i128;
        for e in 0..count {
            let el = base + (e * stride) as i128;
            let mut index = e * per;
            for r in mine {
                let size = r.kind.size();
                let mut at = el + r.offset as i128;
                let mut left = r.count;
                while left > 0 {
                    let hit = (extent > 0)
                        .then(|| at.rem_euclid(extent) as usize)
                        .and_then(|q| {
                            let i = runs.partition_point(|w| w.offset <= q);
                            let w = runs[i.checked_sub(1)?];
                            let on = w.kind == r.kind && q < w.end() && (q - w.offset) % size == 0;
                            on.then_some((q, w))
                        });
                    let Some((q, w)) = hit else {
                        return Err((index, r.kind, at));
                    };
                    let n = left.min((w.end() - q) / size);
                    left -= n;
                    index += n;
                    at += (n * size) as i128;
                }
            }
        }
        Ok(())
    }
}

/// The first base value of `map` (one element at `base`) whose kind is
/// not `kind`: its index, kind and byte.
fn first_other(map: &TypeMap, kind: BaseKind, base: i128) -> (usize, BaseKind, i128) {
    let mut index = 0;
    for r in value_runs(map) {
        if r.kind != kind {
            return (index, r.kind, base + r.offset as i128);
        }
        index += r.count;
    }
    (index, kind, base)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datatype::{Datatype, Equivalence, UserDatatype};

    fn map<T: Equivalence>() -> TypeMap {
        T::equivalent_datatype().type_map().clone()
    }

    #[test]
    fn spans_follow_the_data_not_the_bounds() {
        let f64t = f64::equivalent_datatype();
        // Elements 1 and 3 of four: data bytes 8..16 and 24..32.
        let v = UserDatatype::indexed(&[1, 1], &[1, 3], &f64t);
        assert_eq!(span(16, v.type_map(), 1, &Scan::of(v.type_map())), (24, 48));
        // A column of a 3×3 matrix, resized to one element: three columns.
        let col = UserDatatype::vector(3, 1, 3, &f64t);
        let col = UserDatatype::create_resized(&col, 0, 8);
        assert_eq!(
            span(0, col.type_map(), 3, &Scan::of(col.type_map())),
            (0, 72)
        );
        assert_eq!(
            span(0, col.type_map(), 0, &Scan::of(col.type_map())),
            (0, 0)
        );
    }

    #[test]
    fn placement_on_uniform_elements() {
        let f64s = Elements::of(&map::<f64>());
        let f64t = f64::equivalent_datatype();
        let col = UserDatatype::vector(3, 1, 3, &f64t);
        assert_eq!(
            f64s.check(8, col.type_map(), 2, &Scan::of(col.type_map())),
            Ok(())
        );
        // Byte 4 is inside an f64.
        assert_eq!(
            f64s.check(4, col.type_map(), 1, &Scan::of(col.type_map())),
            Err((0, BaseKind::F64, 4))
        );
        // A u32 is not an f64.
        let u32s = UserDatatype::contiguous(2, &u32::equivalent_datatype());
        assert_eq!(
            f64s.check(0, u32s.type_map(), 1, &Scan::of(u32s.type_map())),
            Err((0, BaseKind::U32, 0))
        );
        // A stride that is not a multiple of the element: the second value.
        let odd = UserDatatype::create_resized(&f64t, 0, 12);
        assert_eq!(
            f64s.check(0, odd.type_map(), 2, &Scan::of(odd.type_map())),
            Err((1, BaseKind::F64, 12))
        );
    }

    #[test]
    fn placement_on_struct_elements() {
        // A u8 at 0, padding 1..4, a u32 at 4; extent 8.
        let (u8m, u32m) = (map::<u8>(), map::<u32>());
        let pair = TypeMap::structure("S", &[(0, &u8m, 1), (4, &u32m, 1)], 8);
        let pairs = Elements::of(&pair);
        let u32t = u32::equivalent_datatype();
        // The u32 fields of three elements: a vector of stride 2 u32s.
        let fields = UserDatatype::vector(3, 1, 2, &u32t);
        assert_eq!(
            pairs.check(4, fields.type_map(), 1, &Scan::of(fields.type_map())),
            Ok(())
        );
        // Shifted onto the u8 and padding.
        assert_eq!(
            pairs.check(0, fields.type_map(), 1, &Scan::of(fields.type_map())),
            Err((0, BaseKind::U32, 0))
        );
        // bool windows refuse anything but bools.
        let boolm = map::<bool>();
        let bools = Elements::of(&TypeMap::structure("B", &[(0, &boolm, 1), (1, &u8m, 1)], 2));
        let u8t = u8::equivalent_datatype();
        assert_eq!(
            bools.check(0, u8t.type_map(), 1, &Scan::of(u8t.type_map())),
            Err((0, BaseKind::U8, 0))
        );
        assert_eq!(
            bools.check(1, u8t.type_map(), 1, &Scan::of(u8t.type_map())),
            Ok(())
        );
    }
}
