//! [`TypeError`]: type signatures that differ (`MPI_ERR_TYPE`).

use std::fmt;

use crate::{Rank, Tag};

/// Data and buffer whose type signatures differ, or an operation that is
/// not defined for a type (`MPI_ERR_TYPE`): what happened, with the values
/// involved. `Display` gives the sentence that [`Error`](super::Error)'s
/// `Display` prints.
///
/// Datatypes are named as their type maps name them (`f64`, a derived
/// type's description); base types by their Rust names (`sent`,
/// `expected`); `index` is the position in the type signature (in base
/// values) where two signatures first differ.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TypeError {
    /// A point-to-point message's type signature differs from the receive
    /// buffer's; nothing was copied.
    MessageSignature {
        /// The receiving rank.
        rank: Rank,
        /// The sending rank.
        source: Rank,
        /// The message's tag.
        tag: Tag,
        /// Where the signatures differ.
        index: usize,
        /// The base type sent there.
        sent: &'static str,
        /// The base type the buffer has there.
        expected: &'static str,
    },
    /// Data a rank got from another in a collective has another type
    /// signature than its buffer.
    ReceivedSignature {
        /// The operation.
        op: &'static str,
        /// The receiving rank.
        rank: Rank,
        /// The rank the data came from.
        source: Rank,
        /// Where the signatures differ.
        index: usize,
        /// The base type sent there.
        sent: &'static str,
        /// The base type the buffer has there.
        expected: &'static str,
    },
    /// A rank sends data of another type signature than another rank
    /// (all-gather into a shared layout).
    SendSignatures {
        /// The operation.
        op: &'static str,
        /// The rank.
        rank: Rank,
        /// Its send datatype.
        datatype: String,
        /// The rank it is compared with.
        by: Rank,
        /// That rank's send datatype.
        by_datatype: String,
        /// Where the signatures differ.
        index: usize,
        /// The base type of `rank` there.
        sent: &'static str,
        /// The base type of `by` there.
        expected: &'static str,
    },
    /// The root of a gather receives elements with another data size than
    /// it sends (counts are in elements of both).
    GatherRootElementSizes {
        /// The operation.
        op: &'static str,
        /// The send datatype.
        send: String,
        /// Its bytes of data per element.
        send_bytes: usize,
        /// The receive datatype.
        recv: String,
        /// Its bytes of data per element.
        recv_bytes: usize,
    },
    /// The root of a scatter sends elements with another data size than
    /// it receives (counts are in elements of both).
    ScatterRootElementSizes {
        /// The operation.
        op: &'static str,
        /// The send datatype.
        send: String,
        /// Its bytes of data per element.
        send_bytes: usize,
        /// The receive datatype.
        recv: String,
        /// Its bytes of data per element.
        recv_bytes: usize,
    },
    /// A rank sends elements with another data size than it receives
    /// (all-gather, all-to-all: counts are in elements of both).
    ElementSizes {
        /// The operation.
        op: &'static str,
        /// The rank.
        rank: Rank,
        /// The send datatype.
        send: String,
        /// Its bytes of data per element.
        send_bytes: usize,
        /// The receive datatype.
        recv: String,
        /// Its bytes of data per element.
        recv_bytes: usize,
    },
    /// A reduction's send and receive buffers have different types.
    ReduceBuffers {
        /// The operation.
        op: &'static str,
        /// The send datatype.
        send: String,
        /// The receive datatype.
        recv: String,
    },
    /// Two ranks contribute different types or counts to a reduction.
    ReduceOperands {
        /// The operation.
        op: &'static str,
        /// The two ranks.
        ranks: (Rank, Rank),
        /// Their counts, in the order of `ranks`.
        counts: (usize, usize),
        /// Their datatypes, in the order of `ranks`.
        datatypes: (String, String),
    },
    /// The ranks' contributions to a reduction differ in type or count;
    /// found where only this rank's is known.
    ReduceContributions {
        /// The operation.
        op: &'static str,
        /// The rank.
        rank: Rank,
        /// Its count.
        count: usize,
        /// Its datatype.
        datatype: String,
    },
    /// A rank contributes another type than rank 0 to a scan.
    ScanOperands {
        /// The operation.
        op: &'static str,
        /// The rank.
        rank: Rank,
        /// Its datatype.
        datatype: String,
        /// Rank 0's datatype.
        first: String,
    },
    /// `reduce_local_into`'s buffers have different types.
    ReduceLocalTypes {
        /// The input buffer's datatype.
        input: String,
        /// The input-output buffer's datatype.
        inout: String,
    },
    /// A predefined operation is not defined for a base type of the data.
    OpNotDefined {
        /// The operation (`sum`, `logical_and`, ...).
        op: &'static str,
        /// The base type.
        base: &'static str,
        /// The datatype that holds it.
        datatype: String,
    },
}

impl fmt::Display for TypeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TypeError::MessageSignature {
                rank,
                source,
                tag,
                index,
                sent,
                expected,
            } => write!(
                f,
                "type mismatch: rank {rank} received a message from rank {source} (tag {tag}) \
                 whose type signature differs from the receive buffer's at base value {index} \
                 (sent {sent}, expected {expected}); nothing was copied"
            ),
            TypeError::ReceivedSignature {
                op,
                rank,
                source,
                index,
                sent,
                expected,
            } => write!(
                f,
                "{op}: rank {rank} got data from rank {source} whose type signature differs \
                 from its buffer's at base value {index} (sent {sent}, expected {expected})"
            ),
            TypeError::SendSignatures {
                op,
                rank,
                datatype,
                by,
                by_datatype,
                index,
                sent,
                expected,
            } => write!(
                f,
                "{op}: rank {rank} sends {datatype} but rank {by} sends {by_datatype}: their \
                 type signatures differ at base value {index} ({sent} and {expected})"
            ),
            TypeError::GatherRootElementSizes {
                op,
                send,
                send_bytes,
                recv,
                recv_bytes,
            } => write!(
                f,
                "{op}: the root's receive type {recv} has {recv_bytes} bytes of data per \
                 element but its send type {send} has {send_bytes}; counts are in elements of \
                 both"
            ),
            TypeError::ScatterRootElementSizes {
                op,
                send,
                send_bytes,
                recv,
                recv_bytes,
            } => write!(
                f,
                "{op}: the root's send type {send} has {send_bytes} bytes of data per element \
                 but its receive type {recv} has {recv_bytes}; counts are in elements of both"
            ),
            TypeError::ElementSizes {
                op,
                rank,
                send,
                send_bytes,
                recv,
                recv_bytes,
            } => write!(
                f,
                "{op}: rank {rank} sends {send} ({send_bytes} bytes of data per element) but \
                 receives {recv} ({recv_bytes} bytes); counts are in elements of both"
            ),
            TypeError::ReduceBuffers { op, send, recv } => write!(
                f,
                "{op}: the send buffer holds {send} and the receive buffer {recv}; a reduction \
                 needs one type"
            ),
            TypeError::ReduceOperands {
                op,
                ranks: (r0, r1),
                counts: (c0, c1),
                datatypes: (t0, t1),
            } => write!(
                f,
                "{op}: rank {r0} contributes {c0} × {t0} but rank {r1} contributes {c1} × {t1}; \
                 a reduction needs one type and count"
            ),
            TypeError::ReduceContributions {
                op,
                rank,
                count,
                datatype,
            } => write!(
                f,
                "{op}: the ranks' contributions differ in type or count (rank {rank} \
                 contributes {count} × {datatype}); a reduction needs one type and count"
            ),
            TypeError::ScanOperands {
                op,
                rank,
                datatype,
                first,
            } => write!(
                f,
                "{op}: rank {rank} contributes {datatype} but rank 0 contributes {first}; a scan \
                 needs one type"
            ),
            TypeError::ReduceLocalTypes { input, inout } => write!(
                f,
                "reduce_local_into: the buffers have different types ({input} and {inout})"
            ),
            TypeError::OpNotDefined { op, base, datatype } => write!(
                f,
                "{op} is not defined for {base} (in the datatype {datatype}); MPI defines \
                 arithmetic operations on numbers (only sum and product on complex numbers), \
                 logical ones on integers and bool, bitwise ones on integers"
            ),
        }
    }
}
