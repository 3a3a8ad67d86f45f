//! One error type with MPI's error classes.
//!
//! Operations that rsmpi makes infallible (it aborts on MPI errors) panic in
//! myriad with the `Display` of one of these errors, so the job fails with a
//! message naming the rank, the operation and the values involved; the
//! `try_*` variants return them instead. [`crate::Runtime::run`] returns the
//! error that ended a job.

use std::fmt;

use crate::{Rank, Tag};

/// Everything that can go wrong in myriad, by MPI error class.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// A message was longer than the receive buffer (`MPI_ERR_TRUNCATE`).
    /// The part that fits was copied; nothing was silently cut.
    Truncate {
        /// Receiving rank.
        rank: Rank,
        /// Rank that sent the message.
        source: Rank,
        /// Tag of the message.
        tag: Tag,
        /// Bytes in the message.
        message_bytes: usize,
        /// Bytes the receive buffer can hold.
        buffer_bytes: usize,
    },
    /// A rank outside the communicator (`MPI_ERR_RANK`).
    Rank {
        /// The operation.
        op: &'static str,
        /// The offending rank.
        rank: Rank,
        /// Size of the communicator.
        size: Rank,
    },
    /// A tag outside `0..=TAG_UB` (`MPI_ERR_TAG`).
    Tag {
        /// The operation.
        op: &'static str,
        /// The offending tag.
        tag: Tag,
    },
    /// A root outside the communicator (`MPI_ERR_ROOT`).
    Root {
        /// The operation.
        op: &'static str,
        /// The offending root.
        root: Rank,
        /// Size of the communicator.
        size: Rank,
    },
    /// A count or buffer size that does not fit (`MPI_ERR_COUNT`).
    Count {
        /// What is wrong, as a sentence.
        message: String,
    },
    /// Message and receive buffer have different type signatures
    /// (`MPI_ERR_TYPE`).
    Type {
        /// What is wrong, as a sentence.
        message: String,
    },
    /// A communicator used where it is not valid (`MPI_ERR_COMM`).
    Comm {
        /// What is wrong, as a sentence.
        message: String,
    },
    /// An argument that is not valid (`MPI_ERR_ARG`).
    Arg {
        /// What is wrong, as a sentence.
        message: String,
    },
    /// Something myriad does not implement yet (`MPI_ERR_UNSUPPORTED_OPERATION`).
    Unsupported {
        /// What is not supported.
        what: String,
    },
    /// Ranks of a communicator called different collectives, or the same one
    /// with different roots, sizes or algorithms.
    Collective {
        /// Both calls, with their ranks and call sites.
        message: String,
    },
    /// Every rank of the job waits and nothing can wake them.
    Deadlock {
        /// One line per waiting rank: operation, peer, tag, communicator and
        /// call site.
        report: String,
    },
    /// A rank panicked; the job was aborted.
    Panic {
        /// The rank (in the world communicator).
        rank: Rank,
        /// The panic message, with its location when known.
        message: String,
    },
    /// The job could not get a resource it needs (memory, threads, stack
    /// mappings).
    Resources {
        /// What is missing and what to do about it.
        message: String,
    },
    /// Invalid configuration (builder, environment variable or flag).
    Config {
        /// What is wrong, naming the knob and the valid values.
        message: String,
    },
    /// The operation was interrupted because the job is being aborted.
    Aborted,
}

impl Error {
    /// The MPI error class name (`MPI_ERR_TRUNCATE`, ...).
    pub fn class(&self) -> &'static str {
        match self {
            Error::Truncate { .. } => "MPI_ERR_TRUNCATE",
            Error::Rank { .. } => "MPI_ERR_RANK",
            Error::Tag { .. } => "MPI_ERR_TAG",
            Error::Root { .. } => "MPI_ERR_ROOT",
            Error::Count { .. } => "MPI_ERR_COUNT",
            Error::Type { .. } => "MPI_ERR_TYPE",
            Error::Comm { .. } => "MPI_ERR_COMM",
            Error::Arg { .. } => "MPI_ERR_ARG",
            Error::Unsupported { .. } => "MPI_ERR_UNSUPPORTED_OPERATION",
            Error::Collective { .. } => "MPI_ERR_OTHER (collective mismatch)",
            Error::Deadlock { .. } => "MPI_ERR_OTHER (deadlock)",
            Error::Panic { .. } => "MPI_ERR_OTHER (rank panicked)",
            Error::Resources { .. } => "MPI_ERR_NO_MEM",
            Error::Config { .. } => "MPI_ERR_ARG (configuration)",
            Error::Aborted => "MPI_ERR_OTHER (aborted)",
        }
    }

    #[allow(dead_code)]
    pub(crate) fn unsupported(what: impl Into<String>) -> Error {
        Error::Unsupported { what: what.into() }
    }

    pub(crate) fn config(message: impl Into<String>) -> Error {
        Error::Config {
            message: message.into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Truncate {
                rank,
                source,
                tag,
                message_bytes,
                buffer_bytes,
            } => write!(
                f,
                "message truncated: rank {rank} received {message_bytes} bytes from rank \
                 {source} (tag {tag}) into a buffer of {buffer_bytes} bytes"
            ),
            Error::Rank { op, rank, size } => write!(
                f,
                "{op}: rank {rank} is not in the communicator (valid ranks are 0..{size})"
            ),
            Error::Tag { op, tag } => write!(
                f,
                "{op}: tag {tag} is not valid (tags are 0..={})",
                crate::TAG_UB
            ),
            Error::Root { op, root, size } => write!(
                f,
                "{op}: root {root} is not in the communicator (valid ranks are 0..{size})"
            ),
            Error::Count { message }
            | Error::Type { message }
            | Error::Comm { message }
            | Error::Arg { message }
            | Error::Collective { message } => f.write_str(message),
            Error::Unsupported { what } => write!(f, "not supported by myriad yet: {what}"),
            Error::Deadlock { report } => write!(f, "deadlock: {report}"),
            Error::Panic { rank, message } => write!(f, "rank {rank} panicked: {message}"),
            Error::Resources { message } => write!(f, "out of resources: {message}"),
            Error::Config { message } => write!(f, "invalid configuration: {message}"),
            Error::Aborted => f.write_str("the job was aborted"),
        }
    }
}

impl std::error::Error for Error {}

/// Panics with `error`, attributing the panic to the user's call site.
#[track_caller]
#[cold]
pub(crate) fn raise(error: Error) -> ! {
    panic!("{error}")
}

/// `Result::unwrap` that panics with the error's message at the user's call
/// site (closures break `#[track_caller]` chains; this does not).
pub(crate) trait OrRaise<T> {
    fn or_raise(self) -> T;
}

impl<T> OrRaise<T> for Result<T, Error> {
    #[track_caller]
    #[inline]
    fn or_raise(self) -> T {
        match self {
            Ok(value) => value,
            Err(error) => raise(error),
        }
    }
}
