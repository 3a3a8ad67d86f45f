//! [`CollectiveError`]: ranks whose collective calls do not match.

use std::fmt;
use std::panic::Location;

use crate::Rank;

/// Ranks of a communicator called different collectives, or the same one
/// with different roots, sizes or algorithms: both calls, with their ranks
/// and call sites. `Display` gives the sentence that
/// [`Error`](super::Error)'s `Display` prints.
///
/// Pairs are in the order of `ranks`: the rank that called first (or the
/// lower rank), then the other.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CollectiveError {
    /// Call `seq` of a communicator differs between two ranks.
    Mismatch {
        /// The call's number on the communicator.
        seq: u32,
        /// The two ranks.
        ranks: (Rank, Rank),
        /// The calls, as the collective check describes them (operation,
        /// root, sizes, algorithm).
        calls: (String, String),
        /// Where each rank called.
        sites: (&'static Location<'static>, &'static Location<'static>),
    },
    /// Call `seq` of a communicator differs between two ranks of different
    /// processes, as the signature that travelled with a message showed
    /// (the sender's call site as text: a location of another process).
    MismatchAcrossProcesses {
        /// The call's number on the communicator.
        seq: u32,
        /// The sender, then the receiver that found the difference.
        ranks: (Rank, Rank),
        /// The calls, as the collective check describes them.
        calls: (String, String),
        /// Where each rank called (`file:line:column`).
        sites: (String, String),
    },
    /// Two ranks called different communicator creations at once.
    CreationMismatch {
        /// The parent communicator.
        comm: String,
        /// The two ranks.
        ranks: (Rank, Rank),
        /// The creating calls (`duplicate`, `split_by_color`, ...).
        calls: (&'static str, &'static str),
        /// Where each rank called.
        sites: (&'static Location<'static>, &'static Location<'static>),
    },
}

impl fmt::Display for CollectiveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CollectiveError::Mismatch {
                seq,
                ranks: (r0, r1),
                calls: (c0, c1),
                sites: (s0, s1),
            } => write!(
                f,
                "collective mismatch on call {seq} of the communicator: rank {r0} called {c0} at \
                 {s0}, but rank {r1} called {c1} at {s1}"
            ),
            CollectiveError::MismatchAcrossProcesses {
                seq,
                ranks: (r0, r1),
                calls: (c0, c1),
                sites: (s0, s1),
            } => write!(
                f,
                "collective mismatch on call {seq} of the communicator, across processes: rank \
                 {r0} called {c0} at {s0}, but rank {r1} called {c1} at {s1}"
            ),
            CollectiveError::CreationMismatch {
                comm,
                ranks: (r0, r1),
                calls: (c0, c1),
                sites: (s0, s1),
            } => write!(
                f,
                "communicator creation mismatch on {comm}: rank {r0} called {c0} at {s0}, but \
                 rank {r1} called {c1} at {s1}"
            ),
        }
    }
}
