//! The copy engine: moves message data between typed memory, once.
//!
//! Every in-process message goes through one of three functions: [`copy`]
//! (sender's memory straight into the receiver's: posted receives and
//! rendezvous), [`pack`] (into an eager buffer) and [`unpack`] (out of it).
//! Contiguous layouts take one `memcpy`; others are walked run by run, so
//! padding bytes are never read or written.

use std::ptr;

use super::{Segment, TypeHandle, TypeMap};

/// `count` elements of a datatype, the first one's lower bound at `base`.
///
/// `base` is not the buffer's address when the type's lower bound is not 0:
/// it is the address plus `lb` (see [`Layout::at`]), so element `i`'s
/// segments are at `base + i * extent + offset` and the whole layout lies in
/// `base .. base + span(count)` (`count * extent`, or more for a type whose
/// data reaches beyond its upper bound: [`TypeMap::span`]). Scratch space of
/// `span(count)` bytes therefore holds any layout, with `base` at its start.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    pub(crate) base: *const u8,
    pub(crate) count: usize,
    pub(crate) ty: TypeHandle,
}

impl Layout {
    /// The layout of a readable buffer.
    pub(crate) fn of<B: super::Buffer + ?Sized>(buf: &B) -> Layout {
        Layout::at(
            buf.pointer() as *const u8,
            buf.count() as usize,
            super::Datatype::handle(&buf.as_datatype()),
        )
    }

    /// The layout of a writable buffer.
    pub(crate) fn of_mut<B: super::BufferMut + ?Sized>(buf: &mut B) -> Layout {
        Layout::at(
            buf.pointer_mut() as *const u8,
            buf.count() as usize,
            super::Datatype::handle(&buf.as_datatype()),
        )
    }

    /// `count` elements of `ty` in a buffer at MPI address `address` (what
    /// `Pointer::pointer` returns): applies the type's lower bound. Use this,
    /// not a `Layout { base: address, .. }` literal, for user buffers.
    #[inline]
    pub(crate) fn at(address: *const u8, count: usize, ty: TypeHandle) -> Layout {
        Layout {
            base: address.wrapping_offset(ty.map().lb()),
            count,
            ty,
        }
    }

    /// `count` elements of this layout's type from element `first` on.
    pub(crate) fn slice(&self, first: usize, count: usize) -> Layout {
        Layout {
            base: self.base.wrapping_add(first * self.ty.map().extent()),
            count,
            ty: self.ty.clone(),
        }
    }

    /// The same memory as raw bytes, if the type is contiguous (so it can be
    /// cut at any byte).
    pub(crate) fn as_bytes(&self) -> Option<Layout> {
        use super::{Datatype, Equivalence};
        self.ty.map().is_contiguous().then(|| Layout {
            base: self.base,
            count: self.bytes(),
            ty: u8::equivalent_datatype().handle(),
        })
    }

    /// An empty layout (zero-byte messages).
    pub(crate) fn empty() -> Layout {
        use super::{Datatype, Equivalence};
        Layout {
            base: std::ptr::NonNull::<u8>::dangling().as_ptr(),
            count: 0,
            ty: u8::equivalent_datatype().handle(),
        }
    }

    /// Bytes of data (no padding).
    #[inline]
    pub(crate) fn bytes(&self) -> usize {
        self.count * self.ty.map().size()
    }
}

/// Walks the data runs of a layout.
struct Cursor<'a> {
    base: *const u8,
    map: &'a TypeMap,
    count: usize,
    elem: usize,
    seg: usize,
    used: usize,
}

impl<'a> Cursor<'a> {
    fn new(layout: &'a Layout) -> Self {
        Cursor {
            base: layout.base,
            map: layout.ty.map(),
            count: layout.count,
            elem: 0,
            seg: 0,
            used: 0,
        }
    }

    /// The next run of at most `max` bytes.
    fn next(&mut self, max: usize) -> Option<(*const u8, usize)> {
        let segments: &[Segment] = self.map.segments();
        if self.elem >= self.count || segments.is_empty() {
            return None;
        }
        let seg = segments[self.seg];
        let len = (seg.len - self.used).min(max);
        // Pointer arithmetic only; the caller dereferences.
        let at = self
            .base
            .wrapping_add(self.elem * self.map.extent() + seg.offset + self.used);
        self.used += len;
        if self.used == seg.len {
            self.used = 0;
            self.seg += 1;
            if self.seg == segments.len() {
                self.seg = 0;
                self.elem += 1;
            }
        }
        Some((at, len))
    }
}

/// Copies the data of `src` into `dst`, as much as fits; returns the bytes
/// copied.
///
/// # Safety
///
/// `src` must be valid for reads and `dst` for writes of their layouts, and
/// the two must not overlap.
#[inline]
pub(crate) unsafe fn copy(src: &Layout, dst: &Layout) -> usize {
    let total = src.bytes().min(dst.bytes());
    if src.ty.map().is_contiguous() && dst.ty.map().is_contiguous() {
        // SAFETY: both layouts are `total` contiguous bytes at least (the
        // caller's contract), and do not overlap.
        unsafe { copy_bytes(src.base, dst.base as *mut u8, total) };
        return total;
    }
    // SAFETY: the caller's contract.
    unsafe { copy_runs(src, dst, total) }
}

/// [`copy`] of `total` bytes between two layouts of one type map, whose
/// sizes the caller knows already (`p2p`'s delivery of a message of the
/// receive's own type): one test of contiguity, no second computation of
/// the sizes (~5 instructions a message of a 1-worker ping-pong,
/// callgrind).
///
/// # Safety
///
/// As [`copy`]; `src` and `dst` have the same type map, and `total` is at
/// most both layouts' sizes.
#[inline(always)]
pub(crate) unsafe fn copy_one_type(src: &Layout, dst: &Layout, total: usize) {
    debug_assert!(ptr::eq(src.ty.map(), dst.ty.map()));
    debug_assert!(total <= src.bytes() && total <= dst.bytes());
    if src.ty.map().is_contiguous() {
        // SAFETY: one contiguous map on both sides, `total` bytes within
        // both, not overlapping (the caller's contract).
        unsafe { copy_bytes(src.base, dst.base as *mut u8, total) };
    } else {
        // SAFETY: the caller's contract.
        unsafe { copy_runs(src, dst, total) };
    }
}

/// Copies `n` contiguous bytes (the data of a contiguous layout).
///
/// # Safety
///
/// `src` readable and `dst` writable for `n` bytes, not overlapping.
#[inline(always)]
pub(crate) unsafe fn copy_bytes(src: *const u8, dst: *mut u8, n: usize) {
    // SAFETY: the caller's contract.
    unsafe {
        if n <= 16 {
            // A 1-byte message's call to libc's `memcpy` (through the
            // PLT) cost ~20 instructions (callgrind, `pingpong --sizes 1`).
            copy_small(src, dst, n);
        } else {
            ptr::copy_nonoverlapping(src, dst, n);
        }
    }
}

/// Copies `n` ≤ 16 bytes with at most two (overlapping) loads and stores
/// of the widest size that fits, as `memcpy` does for small sizes.
///
/// # Safety
///
/// `src` readable and `dst` writable for `n` bytes, not overlapping.
#[inline(always)]
unsafe fn copy_small(src: *const u8, dst: *mut u8, n: usize) {
    use std::ptr::{read_unaligned as get, write_unaligned as put};
    debug_assert!(n <= 16);
    // SAFETY: (all four arms) each access lies in `0..n` of its buffer (the
    // second one ends at `n`, the first starts at 0, and `n` is at least
    // the access's width in its arm); unaligned accesses are allowed.
    unsafe {
        if n >= 8 {
            let (a, b) = (get(src as *const u64), get(src.add(n - 8) as *const u64));
            put(dst as *mut u64, a);
            put(dst.add(n - 8) as *mut u64, b);
        } else if n >= 4 {
            let (a, b) = (get(src as *const u32), get(src.add(n - 4) as *const u32));
            put(dst as *mut u32, a);
            put(dst.add(n - 4) as *mut u32, b);
        } else if n >= 2 {
            let (a, b) = (get(src as *const u16), get(src.add(n - 2) as *const u16));
            put(dst as *mut u16, a);
            put(dst.add(n - 2) as *mut u16, b);
        } else if n == 1 {
            *dst = *src;
        }
    }
}

/// The general case of [`copy`]: walk both layouts run by run.
///
/// # Safety
///
/// As [`copy`]; `total` is at most both layouts' sizes.
#[cold]
unsafe fn copy_runs(src: &Layout, dst: &Layout, total: usize) -> usize {
    let mut from = Cursor::new(src);
    let mut to = Cursor::new(dst);
    let mut done = 0;
    while done < total {
        let Some((d, dlen)) = to.next(total - done) else {
            break;
        };
        let mut filled = 0;
        while filled < dlen {
            let Some((s, slen)) = from.next(dlen - filled) else {
                return done + filled;
            };
            // SAFETY: both runs lie inside their layouts (cursor invariant).
            unsafe { ptr::copy_nonoverlapping(s, (d as *mut u8).add(filled), slen) };
            filled += slen;
        }
        done += dlen;
    }
    done
}

/// Packs the data of `src` into `out`, which must hold `src.bytes()` bytes.
///
/// # Safety
///
/// `src` must be valid for reads of its layout and `out` for writes of
/// `src.bytes()` bytes.
pub(crate) unsafe fn pack(src: &Layout, out: *mut u8) {
    let total = src.bytes();
    if src.ty.map().is_contiguous() {
        // SAFETY: the caller's contract.
        unsafe { ptr::copy_nonoverlapping(src.base, out, total) };
        return;
    }
    let mut from = Cursor::new(src);
    let mut done = 0;
    while let Some((s, len)) = from.next(usize::MAX) {
        // SAFETY: the run lies inside `src`; `out` holds all runs.
        unsafe { ptr::copy_nonoverlapping(s, out.add(done), len) };
        done += len;
    }
}

/// Unpacks `len` packed bytes into `dst`, as much as fits; returns the bytes
/// written.
///
/// # Safety
///
/// `bytes` must be valid for reads of `len` bytes and `dst` for writes of its
/// layout.
pub(crate) unsafe fn unpack(bytes: *const u8, len: usize, dst: &Layout) -> usize {
    let total = len.min(dst.bytes());
    if dst.ty.map().is_contiguous() {
        // SAFETY: the caller's contract.
        unsafe { ptr::copy_nonoverlapping(bytes, dst.base as *mut u8, total) };
        return total;
    }
    let mut to = Cursor::new(dst);
    let mut done = 0;
    while done < total {
        let Some((d, dlen)) = to.next(total - done) else {
            break;
        };
        // SAFETY: the run lies inside `dst`; `bytes` holds `total`.
        unsafe { ptr::copy_nonoverlapping(bytes.add(done), d as *mut u8, dlen) };
        done += dlen;
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datatype::{Datatype, Equivalence};

    fn layout<T: Equivalence>(v: &[T]) -> Layout {
        Layout {
            base: v.as_ptr() as *const u8,
            count: v.len(),
            ty: T::equivalent_datatype().handle(),
        }
    }

    #[test]
    fn copies_between_padded_and_packed_layouts() {
        let src: Vec<(u8, u32)> = vec![(1, 10), (2, 20), (3, 30)];
        let mut packed = vec![0u8; 15];
        // SAFETY: `packed` holds the 15 data bytes of three (u8, u32).
        unsafe { pack(&layout(&src), packed.as_mut_ptr()) };
        let mut dst: Vec<(u8, u32)> = vec![(0, 0); 3];
        let dl = layout(&dst);
        // SAFETY: `dst` holds three elements.
        let n = unsafe { unpack(packed.as_ptr(), packed.len(), &dl) };
        assert_eq!(n, 15);
        assert_eq!(dst, src);
        dst.iter_mut().for_each(|v| *v = (0, 0));
        // SAFETY: disjoint vectors of the same layout.
        let n = unsafe { copy(&layout(&src), &layout(&dst)) };
        assert_eq!(n, 15);
        assert_eq!(dst, src);
    }

    #[test]
    fn copy_stops_at_the_smaller_side() {
        let src = [1u32, 2, 3, 4];
        let mut dst = [0u32; 2];
        let dl = Layout {
            base: dst.as_mut_ptr() as *const u8,
            count: 2,
            ty: u32::equivalent_datatype().handle(),
        };
        // SAFETY: disjoint arrays, lengths as described.
        let n = unsafe { copy(&layout(&src), &dl) };
        assert_eq!(n, 8);
        assert_eq!(dst, [1, 2]);
    }

    fn layout_mut<T: Equivalence>(v: &mut [T]) -> Layout {
        Layout {
            base: v.as_mut_ptr() as *const u8,
            count: v.len(),
            ty: T::equivalent_datatype().handle(),
        }
    }

    #[test]
    fn layouts_start_at_the_lower_bound() {
        use crate::datatype::UserDatatype;
        let f64t = f64::equivalent_datatype();
        let src = [0.0f64, 1.0, 2.0, 3.0, 4.0];
        let mut dst = [0.0f64; 2];
        // Elements 2 and 3: lb 16, contiguous after it (the memcpy path).
        let dense = UserDatatype::indexed(&[2], &[2], &f64t);
        assert!(dense.type_map().is_contiguous());
        let from = Layout::at(src.as_ptr() as *const u8, 1, dense.handle());
        // SAFETY: the type reaches 32 of `src`'s 40 bytes; `dst` holds 2.
        let n = unsafe { copy(&from, &layout_mut(&mut dst)) };
        assert_eq!((n, dst), (16, [2.0, 3.0]));
        // Elements 3 then 1: lb 8, walked run by run, in type-map order.
        let sparse = UserDatatype::indexed(&[1, 1], &[3, 1], &f64t);
        let from = Layout::at(src.as_ptr() as *const u8, 1, sparse.handle());
        // SAFETY: as above.
        let n = unsafe { copy(&from, &layout_mut(&mut dst)) };
        assert_eq!((n, dst), (16, [3.0, 1.0]));
        // And back, into a buffer laid out by the same type.
        let mut back = [9.0f64; 5];
        let to = Layout::at(back.as_mut_ptr().cast_const().cast(), 1, sparse.handle());
        // SAFETY: `back` has `src`'s size; `dst` holds 2 values.
        let n = unsafe { copy(&layout(&dst), &to) };
        assert_eq!((n, back), (16, [9.0, 1.0, 9.0, 3.0, 9.0]));
    }

    #[test]
    fn small_copies_move_exactly_their_bytes() {
        for n in 0..=16 {
            let src: Vec<u8> = (1..=16).collect();
            let mut dst = [0u8; 18];
            // SAFETY: `src` has 16 readable bytes, `dst[1..]` 17 writable
            // ones, and `n` ≤ 16; they do not overlap.
            unsafe { copy_small(src.as_ptr(), dst[1..].as_mut_ptr(), n) };
            let mut want = [0u8; 18];
            want[1..=n].copy_from_slice(&src[..n]);
            assert_eq!(dst, want, "{n} bytes");
        }
    }
}
