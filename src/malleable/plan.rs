//! Block-distribution plans: who sends which elements to whom when data
//! block-distributed over NS sources is redistributed over NT targets
//! (seed 000's Algorithm 1).
//!
//! A plan is the two sides' block boundaries (prefix sums); each target's
//! [`TargetPlan`] and each source's [`SourcePlan`] are intersections of one
//! block with the blocks of the other side, whose first and last are found
//! by binary search: a rank's plan costs O(NS + NT) to build (its count
//! vectors) and O(log) to locate.

use std::ops::Range;

use crate::error::{ArgError, Error};

/// The block of `parts` that `id` holds when `total` elements are
/// block-distributed (MaM's `Block_id`): every part gets `total / parts`
/// elements and the first `total % parts` parts one more, in rank order.
///
/// ```
/// use myriad::malleable::block_range;
/// assert_eq!(block_range(10, 3, 0), 0..4);
/// assert_eq!(block_range(10, 3, 1), 4..7);
/// assert_eq!(block_range(10, 3, 2), 7..10);
/// assert_eq!(block_range(2, 3, 2), 2..2);
/// ```
///
/// # Panics
///
/// If `parts` is 0 or `id >= parts`.
pub fn block_range(total: usize, parts: usize, id: usize) -> Range<usize> {
    assert!(id < parts, "block_range: part {id} of {parts}");
    let (base, extra) = (total / parts, total % parts);
    let start = id * base + id.min(extra);
    start..start + base + usize::from(id < extra)
}

/// How `total` elements, held in contiguous blocks by sources `0..NS` in
/// rank order, move to contiguous blocks of targets `0..NT` (MaM's
/// convention: one communicator whose first NS ranks are the sources and
/// first NT ranks the targets; a rank may be both).
///
/// The same plan serves every buffer distributed the same way: MaM's
/// *constant* data (redistributed once, possibly in the background) and
/// its *variable* data (redistributed, blocking, at every resize) are the
/// same plan applied to different buffers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Start of each source block, and the total at the end (NS + 1).
    source_starts: Vec<usize>,
    /// Start of each target block, and the total at the end (NT + 1).
    target_starts: Vec<usize>,
}

impl Plan {
    /// The even block distribution of [`block_range`] on both sides.
    /// `sources` and `targets` must be at least 1.
    pub fn block(total: usize, sources: usize, targets: usize) -> Result<Plan, Error> {
        let sizes =
            |n: usize| -> Vec<usize> { (0..n).map(|i| block_range(total, n, i).len()).collect() };
        Plan::from_blocks(&sizes(sources), &sizes(targets))
    }

    /// Blocks of any sizes: source `i` holds `sources[i]` elements, target
    /// `j` will hold `targets[j]`. The two sides must hold the same total
    /// and each have at least one rank ([`ArgError::PlanSizes`]).
    pub fn from_blocks(sources: &[usize], targets: &[usize]) -> Result<Plan, Error> {
        let starts = |sizes: &[usize]| -> Option<Vec<usize>> {
            let mut at = 0usize;
            let mut out = Vec::with_capacity(sizes.len() + 1);
            out.push(0);
            for &s in sizes {
                at = at.checked_add(s)?;
                out.push(at);
            }
            Some(out)
        };
        let bad = || {
            Error::Arg(ArgError::PlanSizes {
                sources: sources.to_vec(),
                targets: targets.to_vec(),
            })
        };
        if sources.is_empty() || targets.is_empty() {
            return Err(bad());
        }
        let (Some(source_starts), Some(target_starts)) = (starts(sources), starts(targets)) else {
            return Err(bad());
        };
        if source_starts.last() != target_starts.last() {
            return Err(bad());
        }
        Ok(Plan {
            source_starts,
            target_starts,
        })
    }

    /// Elements redistributed.
    pub fn total(&self) -> usize {
        *self.source_starts.last().expect("a plan has a total")
    }

    /// Number of sources (NS).
    pub fn sources(&self) -> usize {
        self.source_starts.len() - 1
    }

    /// Number of targets (NT).
    pub fn targets(&self) -> usize {
        self.target_starts.len() - 1
    }

    /// The global indices source `s` holds.
    ///
    /// # Panics
    ///
    /// If `s` is not a source.
    pub fn source_block(&self, s: usize) -> Range<usize> {
        self.source_starts[s]..self.source_starts[s + 1]
    }

    /// The global indices target `t` will hold.
    ///
    /// # Panics
    ///
    /// If `t` is not a target.
    pub fn target_block(&self, t: usize) -> Range<usize> {
        self.target_starts[t]..self.target_starts[t + 1]
    }

    /// What target `t` reads from each source (Algorithm 1).
    ///
    /// # Panics
    ///
    /// If `t` is not a target.
    pub fn receive(&self, t: usize) -> TargetPlan {
        let block = self.target_block(t);
        let (counts, displs, sources, first_index) = intersect(&block, &self.source_starts);
        TargetPlan {
            counts,
            displs,
            sources,
            first_index,
        }
    }

    /// What source `s` gives each target (the mirror of
    /// [`receive`](Self::receive), which the collective method needs).
    ///
    /// # Panics
    ///
    /// If `s` is not a source.
    pub fn send(&self, s: usize) -> SourcePlan {
        let block = self.source_block(s);
        let (counts, displs, targets, first_index) = intersect(&block, &self.target_starts);
        SourcePlan {
            counts,
            displs,
            targets,
            first_index,
        }
    }
}

/// Intersects `block` with every block of `starts`: counts per block,
/// displacements inside `block` (exclusive prefix sums of the counts, one
/// more entry: the end), the blocks from the first to the last non-empty
/// intersection, and the index of `block`'s start inside the first of them.
fn intersect(
    block: &Range<usize>,
    starts: &[usize],
) -> (Vec<usize>, Vec<usize>, Range<usize>, usize) {
    let n = starts.len() - 1;
    let mut counts = vec![0; n];
    let mut displs = vec![0; n + 1];
    if block.is_empty() {
        return (counts, displs, 0..0, 0);
    }
    // The first block ending after `block.start` (empty blocks end where
    // they start, so they are skipped); the last one starting before
    // `block.end`.
    let first = starts[1..].partition_point(|&end| end <= block.start);
    let last = starts[..n].partition_point(|&start| start < block.end);
    for i in first..last {
        let (lo, hi) = (starts[i].max(block.start), starts[i + 1].min(block.end));
        counts[i] = hi - lo;
        displs[i] = lo - block.start;
    }
    for d in &mut displs[last..] {
        *d = block.len();
    }
    (counts, displs, first..last, block.start - starts[first])
}

/// What one target reads (Algorithm 1 of seed 000): per source, how many
/// elements and where they land in the target's block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetPlan {
    counts: Vec<usize>,
    displs: Vec<usize>,
    sources: Range<usize>,
    first_index: usize,
}

impl TargetPlan {
    /// Elements read from each source (NS entries; 0 outside
    /// [`sources`](Self::sources)).
    pub fn counts(&self) -> &[usize] {
        &self.counts
    }

    /// Where each source's elements land in the target's block (NS + 1
    /// entries, the last one the block's length).
    pub fn displs(&self) -> &[usize] {
        &self.displs
    }

    /// The sources read, `first_source..last_source + 1` (empty for an
    /// empty block).
    pub fn sources(&self) -> Range<usize> {
        self.sources.clone()
    }

    /// Index, inside the first source's block (its window), of the first
    /// element read; every later source is read from its start.
    pub fn first_index(&self) -> usize {
        self.first_index
    }

    /// Each read: (source, index in its block, range in the target's
    /// block).
    pub fn pieces(&self) -> impl Iterator<Item = (usize, usize, Range<usize>)> + '_ {
        let first = self.sources.start;
        self.sources
            .clone()
            .filter(|&s| self.counts[s] > 0)
            .map(move |s| {
                let from = if s == first { self.first_index } else { 0 };
                (s, from, self.displs[s]..self.displs[s] + self.counts[s])
            })
    }
}

/// What one source gives: per target, how many elements from where in the
/// source's block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourcePlan {
    counts: Vec<usize>,
    displs: Vec<usize>,
    targets: Range<usize>,
    first_index: usize,
}

impl SourcePlan {
    /// Elements given to each target (NT entries).
    pub fn counts(&self) -> &[usize] {
        &self.counts
    }

    /// Where each target's elements start in the source's block (NT + 1
    /// entries, the last one the block's length).
    pub fn displs(&self) -> &[usize] {
        &self.displs
    }

    /// The targets served (empty for an empty block).
    pub fn targets(&self) -> Range<usize> {
        self.targets.clone()
    }

    /// Index, inside the first target's block, where this source's
    /// elements land.
    pub fn first_index(&self) -> usize {
        self.first_index
    }
}
