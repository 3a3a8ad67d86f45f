//! How a collective's buffers are cut into per-rank parts.
//!
//! Gather(v), scatter(v), all-gather(v) and all-to-all(v) all address a
//! buffer rank by rank: a [`Parts`] is that buffer with its partition (the
//! user's counts and displacements, or equal blocks), and a [`Table`] is the
//! partition alone, as every rank of a binomial Gatherv knows it. They live
//! here, with [`packed`] (the type temporary buffers hold), the check that
//! counts mean the same on both sides ([`check_elements`]) and [`piece`]
//! (near-equal pieces of a buffer), so that every algorithm reads parts the
//! same way instead of keeping its own copy.

use super::Call;
use crate::datatype::copy::Layout;
use crate::datatype::{Datatype, TypeHandle, TypeMap, UserDatatype};
use crate::error::{CountError, Error, TypeError};
use crate::{Count, Rank};

/// A buffer and its partition into one part per rank (the root's buffer of
/// a Gather(v) or Scatter(v), either buffer of an all-gather or all-to-all).
#[derive(Debug, Clone)]
pub(crate) struct Parts {
    pub(crate) buf: Layout,
    /// Per-rank counts and displacements; empty when `uniform`.
    pub(crate) counts: Vec<usize>,
    pub(crate) displs: Vec<usize>,
    /// Every rank has this many elements, rank r's at `r * count`.
    pub(crate) uniform: Option<usize>,
}

impl Parts {
    /// Checks a partition against `size` ranks and a buffer of `total`
    /// elements: one count and displacement per rank, parts in range and,
    /// for a receive buffer, not overlapping.
    pub(crate) fn new(
        op: &'static str,
        buf: Layout,
        counts: &[Count],
        displs: &[Count],
        total: Count,
        size: i32,
        receive: bool,
    ) -> Result<Parts, Error> {
        let size = size as usize;
        if counts.len() != size || displs.len() != size {
            return Err(Error::Count(CountError::PartitionLength {
                op,
                counts: counts.len(),
                displs: displs.len(),
                size,
            }));
        }
        // One tight pass; the message is built out of line, so that the
        // loop keeps its values in registers.
        let out_of_range =
            |(&c, &d): (&Count, &Count)| c < 0 || d < 0 || d as i64 + c as i64 > total as i64;
        if let Some(r) = counts.iter().zip(displs).position(out_of_range) {
            return Err(out_of_range_slow(op, r, counts[r], displs[r], total));
        }
        if receive {
            check_disjoint(op, counts, displs)?;
        }
        Ok(Parts {
            buf,
            counts: counts.iter().map(|&c| c as usize).collect(),
            displs: displs.iter().map(|&d| d as usize).collect(),
            uniform: None,
        })
    }

    /// Equal blocks of `count` elements, rank by rank, in the root's buffer,
    /// which must hold them all.
    pub(crate) fn uniform(
        op: &'static str,
        buf: Layout,
        count: usize,
        size: i32,
    ) -> Result<Parts, Error> {
        let needed = count * size as usize;
        if buf.count < needed {
            return Err(Error::Count(CountError::RootBufferTooSmall {
                op,
                holds: buf.count,
                ranks: size as usize,
                block: count,
            }));
        }
        Ok(Parts::blocks(buf, count))
    }

    /// Equal blocks of `count` elements, rank by rank, in a buffer the
    /// caller has checked holds them all.
    pub(crate) fn blocks(buf: Layout, count: usize) -> Parts {
        Parts {
            buf,
            counts: Vec::new(),
            displs: Vec::new(),
            uniform: Some(count),
        }
    }

    /// Equal blocks of `block` elements, one per rank, in this rank's
    /// receive buffer `recv` (all-gather, all-to-all), which must hold them
    /// all.
    pub(crate) fn receive_blocks(
        call: &Call<'_>,
        recv: &Layout,
        block: usize,
    ) -> Result<Parts, Error> {
        let n = call.size() as usize;
        if recv.count < n * block {
            return Err(Error::Count(CountError::ReceiveBufferTooSmall {
                op: call.kind.name(),
                rank: call.rank(),
                holds: recv.count,
                ranks: n,
                block,
            }));
        }
        Ok(Parts::blocks(recv.clone(), block))
    }

    /// The partition alone.
    pub(crate) fn table(&self) -> Table<'_> {
        match self.uniform {
            Some(c) => Table::Uniform(c),
            None => Table::Given(&self.counts, &self.displs),
        }
    }

    /// The part of `rank`.
    pub(crate) fn part(&self, rank: usize) -> Layout {
        let t = self.table();
        self.buf.slice(t.displ(rank), t.count(rank))
    }
}

/// The error for the part of rank `r`, which is negative or out of range.
#[cold]
fn out_of_range_slow(op: &'static str, r: usize, c: Count, d: Count, total: Count) -> Error {
    let (rank, count, displ) = (r as Rank, c, d);
    Error::Count(if c < 0 || d < 0 {
        CountError::NegativePart {
            op,
            rank,
            count,
            displ,
        }
    } else {
        CountError::PartOutOfRange {
            op,
            rank,
            count,
            displ,
            total,
        }
    })
}

/// A non-empty part: displacement, count and rank. Ranks differ, so a set
/// of spans has one sorted order.
type Span = (usize, usize, usize);

/// Checks that the non-empty parts of a receive buffer do not overlap,
/// naming the first overlapping neighbours in displacement order. Counts
/// and displacements are ≥ 0 and in range (checked by the caller).
// Out of line: inlined into `Parts::new`, its loop kept its state on the
// stack, which cost more than the call.
#[inline(never)]
fn check_disjoint(op: &'static str, counts: &[Count], displs: &[Count]) -> Result<(), Error> {
    // Parts laid out rank by rank, the usual case, are sorted already, and
    // then it suffices that no part starts before its predecessor ends: one
    // pass, without collecting and sorting p spans on every call. The order compared is the spans' own:
    // (displacement, count) as one key (both fit in 32 bits), then the rank,
    // which only grows. Anything else, an overlap included, takes the slow
    // way, which finds the pair to report.
    let (mut prev_key, mut prev_end, mut fine) = (0u64, 0usize, true);
    for (&c, &d) in counts.iter().zip(displs).filter(|&(&c, _)| c > 0) {
        let key = (d as u64) << 32 | c as u64;
        fine &= key >= prev_key && prev_end <= d as usize;
        (prev_key, prev_end) = (key, d as usize + c as usize);
    }
    if fine {
        return Ok(());
    }
    check_disjoint_slow(op, counts, displs)
}

/// [`check_disjoint`] for parts out of order or overlapping: sorts them.
#[cold]
fn check_disjoint_slow(op: &'static str, counts: &[Count], displs: &[Count]) -> Result<(), Error> {
    let mut spans: Vec<Span> = (0..counts.len())
        .filter(|&r| counts[r] > 0)
        .map(|r| (displs[r] as usize, counts[r] as usize, r))
        .collect();
    spans.sort_unstable();
    match spans.windows(2).find(|w| w[0].0 + w[0].1 > w[1].0) {
        Some(w) => Err(overlap_error(op, w[0], w[1])),
        None => Ok(()),
    }
}

fn overlap_error(op: &'static str, (d0, c0, r0): Span, (d1, _, r1): Span) -> Error {
    Error::Count(CountError::PartsOverlap {
        op,
        ranks: (r0 as Rank, r1 as Rank),
        start: d1,
        end: d0 + c0,
    })
}

/// Counts and displacements (in elements, by absolute rank): a table, or
/// uniform blocks (Gather, all-gather, all-to-all).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Table<'a> {
    Uniform(usize),
    Given(&'a [usize], &'a [usize]),
}

impl Table<'_> {
    /// The count of `rank`'s part.
    #[inline]
    pub(crate) fn count(&self, rank: usize) -> usize {
        match self {
            Table::Uniform(c) => *c,
            Table::Given(counts, _) => counts[rank],
        }
    }

    /// The displacement of `rank`'s part.
    #[inline]
    pub(crate) fn displ(&self, rank: usize) -> usize {
        match self {
            Table::Uniform(c) => rank * c,
            Table::Given(_, displs) => displs[rank],
        }
    }
}

/// Piece `i` of `p` near-equal pieces of `n` units: `(start, len)`; the
/// first `n % p` pieces have one unit more (a broadcast's pieces, a scan's
/// chunks).
pub(crate) fn piece(n: usize, p: usize, i: usize) -> (usize, usize) {
    let (base, extra) = (n / p, n % p);
    (i * base + i.min(extra), base + usize::from(i < extra))
}

/// Whose buffers [`check_elements`] compares, for its message.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Sides {
    /// The root of a gather: its send buffer and everyone's receive buffer.
    GatherRoot,
    /// The root of a scatter: everyone's send buffer and its receive buffer.
    ScatterRoot,
    /// A rank that sends and receives (all-gather, all-to-all).
    EveryRank,
}

/// Counts are in elements of both the send and the receive type, so both
/// must have the same data size per element.
pub(crate) fn check_elements(
    call: &Call<'_>,
    send: &Layout,
    recv: &Layout,
    sides: Sides,
) -> Result<(), Error> {
    let (s, r) = (send.ty.map().size(), recv.ty.map().size());
    if s == r {
        return Ok(());
    }
    let (op, send, recv) = (call.kind.name(), send.ty.map().name(), recv.ty.map().name());
    let (send, recv, send_bytes, recv_bytes) = (send.into(), recv.into(), s, r);
    Err(Error::Type(match sides {
        Sides::GatherRoot => TypeError::GatherRootElementSizes {
            op,
            send,
            send_bytes,
            recv,
            recv_bytes,
        },
        Sides::ScatterRoot => TypeError::ScatterRootElementSizes {
            op,
            send,
            send_bytes,
            recv,
            recv_bytes,
        },
        Sides::EveryRank => TypeError::ElementSizes {
            op,
            rank: call.rank(),
            send,
            send_bytes,
            recv,
            recv_bytes,
        },
    }))
}

/// The packed (contiguous) type with the signature of `ty`: what temporary
/// buffers and the round's own buffers hold, without the gaps of `ty`.
pub(crate) fn packed(ty: &TypeHandle) -> TypeHandle {
    if ty.map().is_contiguous() {
        ty.clone()
    } else {
        UserDatatype::from_type_map(TypeMap::packed(ty.map())).handle()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The check as it was before the in-order fast path: always sort.
    fn sorted_reference(counts: &[Count], displs: &[Count]) -> Result<(), String> {
        let mut spans: Vec<Span> = (0..counts.len())
            .filter(|&r| counts[r] > 0)
            .map(|r| (displs[r] as usize, counts[r] as usize, r))
            .collect();
        spans.sort_unstable();
        for w in spans.windows(2) {
            if w[0].0 + w[0].1 > w[1].0 {
                return Err(overlap_error("op", w[0], w[1]).to_string());
            }
        }
        Ok(())
    }

    #[test]
    fn disjoint_check_names_the_same_pair_with_or_without_sorting() {
        // A small deterministic generator: in order, shuffled, overlapping,
        // empty and repeated parts.
        let mut seed = 0x9e37_79b9_u32;
        let mut next = |m: u32| {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            (seed % m) as Count
        };
        for case in 0..2000 {
            let n = 1 + (case % 9) as usize;
            let counts: Vec<Count> = (0..n).map(|_| next(4)).collect();
            let displs: Vec<Count> = if case % 3 == 0 {
                // Rank by rank, sometimes with overlaps.
                let mut at = 0;
                counts
                    .iter()
                    .map(|&c| {
                        let d = (at - next(2)).max(0);
                        at = d + c;
                        d
                    })
                    .collect()
            } else {
                (0..n).map(|_| next(12)).collect()
            };
            let got = check_disjoint("op", &counts, &displs).map_err(|e| e.to_string());
            assert_eq!(
                got,
                sorted_reference(&counts, &displs),
                "counts {counts:?} displs {displs:?}"
            );
        }
    }

    #[test]
    fn pieces_cover_the_units() {
        for (n, p) in [(10, 3), (3, 3), (3, 5), (0, 4), (16, 4), (4096, 7), (1, 1)] {
            let mut next = 0;
            for i in 0..p {
                let (start, len) = piece(n, p, i);
                assert_eq!(start, next);
                assert!(len == n / p || len == n / p + 1);
                next += len;
            }
            assert_eq!(next, n);
        }
    }

    #[test]
    fn bad_parts_name_the_first_bad_rank() {
        let new = |counts: &[Count], displs: &[Count]| {
            Parts::new("op", Layout::empty(), counts, displs, 6, 3, true)
                .map(|_| ())
                .map_err(|e| e.to_string())
        };
        assert_eq!(new(&[2, 2, 2], &[0, 2, 4]), Ok(()));
        let err = new(&[2, 2, 2], &[0, 5, -1]).unwrap_err();
        assert!(err.contains("op: the part of rank 1 (count 2 at displacement 5) ends after the buffer's 6 elements"), "{err}");
        let err = new(&[2, -2, 2], &[0, 9, 4]).unwrap_err();
        assert!(
            err.contains("op: rank 1 has count -2 and displacement 9; both must be ≥ 0"),
            "{err}"
        );
        let err = new(&[2, 2, 2], &[0, 1, 4]).unwrap_err();
        assert!(
            err.contains(
                "op: the parts of ranks 0 and 1 overlap in the receive buffer (elements 1..2)"
            ),
            "{err}"
        );
        let err = new(&[2, 2], &[0, 2]).unwrap_err();
        assert!(
            err.contains("op: 2 counts and 2 displacements for a communicator of 3 ranks"),
            "{err}"
        );
    }
}
