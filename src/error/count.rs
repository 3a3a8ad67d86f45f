//! [`CountError`]: counts and buffer sizes that do not fit (`MPI_ERR_COUNT`).

use std::fmt;

use crate::{Count, Rank, Tag};

/// A count or buffer size that does not fit (`MPI_ERR_COUNT`): what
/// happened, with the values involved. `Display` gives the sentence that
/// [`Error`](super::Error)'s `Display` prints.
///
/// `op` fields name the operation as the user called it (`gather`,
/// `pack_size`, ...); counts are in elements of the buffer's datatype unless
/// the field says bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CountError {
    // Varcount partitions: one count and displacement per rank.
    /// Counts or displacements of a varcount collective are not one per
    /// rank.
    PartitionLength {
        /// The operation.
        op: &'static str,
        /// Entries in the counts.
        counts: usize,
        /// Entries in the displacements.
        displs: usize,
        /// Ranks in the communicator.
        size: usize,
    },
    /// A rank's part of a varcount buffer has a negative count or
    /// displacement.
    NegativePart {
        /// The operation.
        op: &'static str,
        /// The rank whose part it is.
        rank: Rank,
        /// Its count.
        count: Count,
        /// Its displacement.
        displ: Count,
    },
    /// A rank's part of a varcount buffer ends after the buffer.
    PartOutOfRange {
        /// The operation.
        op: &'static str,
        /// The rank whose part it is.
        rank: Rank,
        /// Its count.
        count: Count,
        /// Its displacement.
        displ: Count,
        /// Elements in the buffer.
        total: Count,
    },
    /// The parts of two ranks overlap in a receive buffer.
    PartsOverlap {
        /// The operation.
        op: &'static str,
        /// The two ranks, the one whose part comes first in the buffer
        /// first.
        ranks: (Rank, Rank),
        /// The overlap: first element.
        start: usize,
        /// The overlap: end (exclusive).
        end: usize,
    },

    // Equal blocks, one per rank, in one buffer.
    /// The root's buffer cannot hold one block per rank (gather, scatter).
    RootBufferTooSmall {
        /// The operation.
        op: &'static str,
        /// Elements the buffer holds.
        holds: usize,
        /// Ranks in the communicator.
        ranks: usize,
        /// Elements per block.
        block: usize,
    },
    /// A rank's receive buffer cannot hold one block per rank (all-gather,
    /// all-to-all).
    ReceiveBufferTooSmall {
        /// The operation.
        op: &'static str,
        /// The rank.
        rank: Rank,
        /// Elements the buffer holds.
        holds: usize,
        /// Ranks in the communicator.
        ranks: usize,
        /// Elements per block.
        block: usize,
    },
    /// The send buffer cannot hold one block per rank
    /// (`reduce_scatter_block`).
    SendBufferTooSmall {
        /// The operation.
        op: &'static str,
        /// Elements the buffer holds.
        holds: usize,
        /// Ranks in the communicator.
        ranks: usize,
        /// Elements per block.
        block: usize,
    },
    /// A rank's send buffer does not split into one equal block per rank
    /// (all-to-all).
    UnevenBlocks {
        /// The operation.
        op: &'static str,
        /// The rank.
        rank: Rank,
        /// Elements the buffer holds.
        holds: usize,
        /// Ranks in the communicator.
        ranks: usize,
    },

    // Ranks that disagree on counts.
    /// A rank sends another count than the root expects from it (gather).
    SentToRoot {
        /// The operation.
        op: &'static str,
        /// The sending rank.
        rank: Rank,
        /// Elements it sends.
        sent: usize,
        /// Elements the root expects from it.
        expected: usize,
    },
    /// A rank expects another count than the root sends it (scatter).
    SentByRoot {
        /// The operation.
        op: &'static str,
        /// The receiving rank.
        rank: Rank,
        /// Elements it receives.
        receives: usize,
        /// Elements the root sends it.
        sent: usize,
    },
    /// A rank sends another count to a rank than that rank expects from it
    /// (all-to-all).
    SentToRank {
        /// The operation.
        op: &'static str,
        /// The sending rank.
        from: Rank,
        /// The receiving rank.
        to: Rank,
        /// Elements sent.
        sent: usize,
        /// Elements the receiver expects.
        expected: usize,
    },
    /// A rank sends another count than another rank's layout expects from
    /// it (all-gather).
    ExpectedByRank {
        /// The operation.
        op: &'static str,
        /// The sending rank.
        rank: Rank,
        /// Elements it sends.
        sent: usize,
        /// The rank whose layout is used.
        by: Rank,
        /// Elements that layout expects.
        expected: usize,
    },
    /// A rank sends another count than its own part of its receive buffer
    /// holds (all-gather).
    OwnPart {
        /// The operation.
        op: &'static str,
        /// The rank.
        rank: Rank,
        /// Elements it sends.
        sent: usize,
        /// Elements its own part holds.
        own: usize,
    },
    /// Two ranks disagree on the count of a third (all-gather).
    CountsDisagree {
        /// The operation.
        op: &'static str,
        /// The two ranks.
        ranks: (Rank, Rank),
        /// The rank whose count they disagree on.
        of: Rank,
        /// The count each of them has for it, in the order of `ranks`.
        counts: (usize, usize),
    },
    /// A rank's part for another rank differs from rank 0's (all-gather).
    PartDiffersFromRankZero {
        /// The operation.
        op: &'static str,
        /// The rank.
        rank: Rank,
        /// The rank whose part it is.
        of: Rank,
        /// Elements in this rank's part.
        count: usize,
        /// Elements in rank 0's part.
        first: usize,
    },
    /// A rank contributes another count than rank 0 (scan).
    ContributionDiffers {
        /// The operation.
        op: &'static str,
        /// The rank.
        rank: Rank,
        /// Elements it contributes.
        count: usize,
        /// Elements rank 0 contributes.
        first: usize,
    },
    /// A rank received another number of bytes than it expected from a
    /// peer (the ranks disagree on counts).
    ReceivedBytes {
        /// The operation.
        op: &'static str,
        /// The receiving rank.
        rank: Rank,
        /// The sending rank.
        source: Rank,
        /// Bytes expected.
        expected: usize,
        /// Bytes received.
        received: usize,
    },

    // Reductions.
    /// The receive buffer of a reduction holds another count than is
    /// reduced.
    ReduceCount {
        /// The operation.
        op: &'static str,
        /// Elements the receive buffer holds.
        holds: usize,
        /// Elements reduced.
        reduced: usize,
    },
    /// `reduce_local_into`'s buffers hold different counts.
    ReduceLocalCount {
        /// Elements of the input buffer.
        input: usize,
        /// Elements of the input-output buffer.
        inout: usize,
    },

    // Sizes beyond MPI's count type, negative counts, packing.
    /// A buffer has more elements than [`Count`] can count.
    BufferTooLarge {
        /// Elements in the buffer.
        len: usize,
    },
    /// Packed data has more bytes than [`Count`] can count.
    PackedTooLarge {
        /// The operation.
        op: &'static str,
        /// Bytes of packed data.
        bytes: usize,
    },
    /// A negative count.
    NegativeCount {
        /// The operation.
        op: &'static str,
        /// The count.
        count: Count,
    },
    /// Packed data does not fit into the buffer after a position.
    PackBufferTooSmall {
        /// The operation.
        op: &'static str,
        /// Bytes of data.
        bytes: usize,
        /// Position (bytes) where they start.
        position: usize,
        /// Which buffer: `"output"` (pack) or `"input"` (unpack).
        buffer: &'static str,
        /// Bytes the buffer holds.
        len: usize,
    },
    /// A derived datatype's constructor got a negative count or length.
    NegativeInDatatype {
        /// The constructor (`contiguous`, `vector`, ...).
        constructor: &'static str,
        /// Which argument (`count`, `blocklength`, ...).
        what: &'static str,
        /// Its value.
        value: Count,
    },

    // Point-to-point messages received as Rust values.
    /// A message's bytes are not a whole number of elements of the type it
    /// is received as.
    NotWholeElements {
        /// The receiving rank.
        rank: Rank,
        /// Bytes in the message.
        bytes: usize,
        /// The sending rank.
        source: Rank,
        /// The message's tag.
        tag: Tag,
        /// The Rust type received.
        type_name: &'static str,
        /// Bytes per element of that type.
        size: usize,
    },
    /// A message received as one value has another size than the value.
    NotOneValue {
        /// The receiving rank.
        rank: Rank,
        /// The Rust type received.
        type_name: &'static str,
        /// Bytes of that type.
        size: usize,
        /// The sending rank.
        source: Rank,
        /// The message's tag.
        tag: Tag,
        /// Bytes in the message.
        bytes: usize,
    },
}

impl fmt::Display for CountError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CountError::PartitionLength {
                op,
                counts,
                displs,
                size,
            } => write!(
                f,
                "{op}: {counts} counts and {displs} displacements for a communicator of {size} \
                 ranks"
            ),
            CountError::NegativePart {
                op,
                rank,
                count,
                displ,
            } => write!(
                f,
                "{op}: rank {rank} has count {count} and displacement {displ}; both must be ≥ 0"
            ),
            CountError::PartOutOfRange {
                op,
                rank,
                count,
                displ,
                total,
            } => write!(
                f,
                "{op}: the part of rank {rank} (count {count} at displacement {displ}) ends \
                 after the buffer's {total} elements"
            ),
            CountError::PartsOverlap {
                op,
                ranks: (r0, r1),
                start,
                end,
            } => write!(
                f,
                "{op}: the parts of ranks {r0} and {r1} overlap in the receive buffer \
                 (elements {start}..{end})"
            ),
            CountError::RootBufferTooSmall {
                op,
                holds,
                ranks,
                block,
            } => write!(
                f,
                "{op}: the root's buffer holds {holds} elements but {ranks} ranks × {block} \
                 elements need {}",
                ranks * block
            ),
            CountError::ReceiveBufferTooSmall {
                op,
                rank,
                holds,
                ranks,
                block,
            } => write!(
                f,
                "{op}: the receive buffer of rank {rank} holds {holds} elements but {ranks} \
                 ranks × {block} elements need {}",
                ranks * block
            ),
            CountError::SendBufferTooSmall {
                op,
                holds,
                ranks,
                block,
            } => write!(
                f,
                "{op}: the send buffer holds {holds} elements but {ranks} ranks × {block} need {}",
                ranks * block
            ),
            CountError::UnevenBlocks {
                op,
                rank,
                holds,
                ranks,
            } => write!(
                f,
                "{op}: the send buffer of rank {rank} holds {holds} elements, which do not \
                 split into {ranks} equal blocks"
            ),
            CountError::SentToRoot {
                op,
                rank,
                sent,
                expected,
            } => write!(
                f,
                "{op}: rank {rank} sends {sent} elements but the root expects {expected} from it"
            ),
            CountError::SentByRoot {
                op,
                rank,
                receives,
                sent,
            } => write!(
                f,
                "{op}: rank {rank} receives {receives} elements but the root sends it {sent}"
            ),
            CountError::SentToRank {
                op,
                from,
                to,
                sent,
                expected,
            } => write!(
                f,
                "{op}: rank {from} sends {sent} elements to rank {to} but it expects {expected} \
                 from it"
            ),
            CountError::ExpectedByRank {
                op,
                rank,
                sent,
                by,
                expected,
            } => write!(
                f,
                "{op}: rank {rank} sends {sent} elements but rank {by} expects {expected} from it"
            ),
            CountError::OwnPart {
                op,
                rank,
                sent,
                own,
            } => write!(
                f,
                "{op}: rank {rank} sends {sent} elements but its own part of the receive buffer \
                 holds {own}"
            ),
            CountError::CountsDisagree {
                op,
                ranks: (r0, r1),
                of,
                counts: (c0, c1),
            } => write!(
                f,
                "{op}: ranks {r0} and {r1} disagree on the count of rank {of}: {c0} and {c1} \
                 elements"
            ),
            CountError::PartDiffersFromRankZero {
                op,
                rank,
                of,
                count,
                first,
            } => write!(
                f,
                "{op}: rank {rank}'s part for rank {of} holds {count} elements but rank 0's \
                 holds {first}"
            ),
            CountError::ContributionDiffers {
                op,
                rank,
                count,
                first,
            } => write!(
                f,
                "{op}: rank {rank} contributes {count} elements but rank 0 contributes {first}"
            ),
            CountError::ReceivedBytes {
                op,
                rank,
                source,
                expected,
                received,
            } => write!(
                f,
                "{op}: rank {rank} expected {expected} bytes from rank {source} but received \
                 {received}; the ranks disagree on counts"
            ),
            CountError::ReduceCount { op, holds, reduced } => write!(
                f,
                "{op}: the receive buffer holds {holds} elements but {reduced} are reduced"
            ),
            CountError::ReduceLocalCount { input, inout } => write!(
                f,
                "reduce_local_into: the buffers have {input} and {inout} elements"
            ),
            CountError::BufferTooLarge { len } => write!(
                f,
                "a buffer of {len} elements is larger than MPI's count type allows ({})",
                Count::MAX
            ),
            CountError::PackedTooLarge { op, bytes } => write!(
                f,
                "{op}: {bytes} packed bytes are more than MPI's count type allows ({})",
                Count::MAX
            ),
            CountError::NegativeCount { op, count } => {
                write!(f, "{op}: count {count} is negative")
            }
            CountError::PackBufferTooSmall {
                op,
                bytes,
                position,
                buffer,
                len,
            } => write!(
                f,
                "{op}: {bytes} bytes of data at position {position} need {} bytes, but the \
                 {buffer} buffer holds {len}",
                position.saturating_add(*bytes)
            ),
            CountError::NegativeInDatatype {
                constructor,
                what,
                value,
            } => write!(
                f,
                "UserDatatype::{constructor}: {what} is {value}; it must not be negative"
            ),
            CountError::NotWholeElements {
                rank,
                bytes,
                source,
                tag,
                type_name,
                size,
            } => write!(
                f,
                "rank {rank} received {bytes} bytes from rank {source} (tag {tag}), which is not \
                 a whole number of {type_name} ({size} bytes each)"
            ),
            CountError::NotOneValue {
                rank,
                type_name,
                size,
                source,
                tag,
                bytes,
            } => write!(
                f,
                "rank {rank} expected one value of type {type_name} ({size} bytes) from rank \
                 {source} (tag {tag}), but the message has {bytes} bytes; use receive_vec or \
                 receive_into for other sizes"
            ),
        }
    }
}
