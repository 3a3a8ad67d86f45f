//! How a collective's buffers are cut into per-rank parts.
//!
//! Gather(v), scatter(v), all-gather(v) and all-to-all(v) all address a
//! buffer rank by rank: a [`Parts`] is that buffer with its partition (the
//! user's counts and displacements, or equal blocks), and a [`Table`] is the
//! partition alone, as every rank of a binomial Gatherv knows it. They live
//! here, with [`packed`] (the type temporary buffers hold), so that every
//! algorithm reads parts the same way instead of keeping its own copy.

use crate::datatype::copy::Layout;
use crate::datatype::{Datatype, TypeHandle, TypeMap, UserDatatype};
use crate::error::Error;
use crate::Count;

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
            return Err(Error::Count {
                message: format!(
                    "{op}: {} counts and {} displacements for a communicator of {size} ranks",
                    counts.len(),
                    displs.len()
                ),
            });
        }
        let mut spans = Vec::with_capacity(size);
        for (r, (&c, &d)) in counts.iter().zip(displs).enumerate() {
            if c < 0 || d < 0 {
                return Err(Error::Count {
                    message: format!(
                        "{op}: rank {r} has count {c} and displacement {d}; both must be ≥ 0"
                    ),
                });
            }
            if d as i64 + c as i64 > total as i64 {
                return Err(Error::Count {
                    message: format!(
                        "{op}: the part of rank {r} (count {c} at displacement {d}) ends after \
                         the buffer's {total} elements"
                    ),
                });
            }
            if c > 0 {
                spans.push((d as usize, c as usize, r));
            }
        }
        if receive {
            spans.sort_unstable();
            for w in spans.windows(2) {
                let ((d0, c0, r0), (d1, _, r1)) = (w[0], w[1]);
                if d0 + c0 > d1 {
                    return Err(Error::Count {
                        message: format!(
                            "{op}: the parts of ranks {r0} and {r1} overlap in the receive \
                             buffer (elements {d1}..{})",
                            d0 + c0
                        ),
                    });
                }
            }
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
            return Err(Error::Count {
                message: format!(
                    "{op}: the root's buffer holds {} elements but {size} ranks × {count} elements need {needed}",
                    buf.count
                ),
            });
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

/// The packed (contiguous) type with the signature of `ty`: what temporary
/// buffers and the round's own buffers hold, without the gaps of `ty`.
pub(crate) fn packed(ty: &TypeHandle) -> TypeHandle {
    if ty.map().is_contiguous() {
        ty.clone()
    } else {
        UserDatatype::from_type_map(TypeMap::packed(ty.map())).handle()
    }
}
