//! One error type with MPI's error classes.
//!
//! Operations that rsmpi makes infallible (it aborts on MPI errors) panic in
//! myriad with the `Display` of one of these errors, so the job fails with a
//! message naming the rank, the operation and the values involved; the
//! `try_*` variants return them instead. [`crate::Runtime::run`] returns the
//! error that ended a job.

use std::fmt;

use crate::{Rank, Tag};

mod arg;
mod collective;
mod comm;
mod count;
mod resources;
mod types;

pub use arg::{ArgError, ViewProblem};
pub use collective::CollectiveError;
pub use comm::CommError;
pub use count::CountError;
pub use resources::ResourceError;
pub use types::TypeError;

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
    Count(CountError),
    /// Message and receive buffer have different type signatures
    /// (`MPI_ERR_TYPE`).
    Type(TypeError),
    /// A communicator used where it is not valid (`MPI_ERR_COMM`).
    Comm(CommError),
    /// An argument that is not valid (`MPI_ERR_ARG`).
    Arg(ArgError),
    /// Something myriad does not implement yet (`MPI_ERR_UNSUPPORTED_OPERATION`).
    Unsupported {
        /// What is not supported.
        what: String,
    },
    /// Ranks of a communicator called different collectives, or the same one
    /// with different roots, sizes or algorithms.
    Collective(CollectiveError),
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
    Resources(ResourceError),
    /// Invalid configuration (builder, environment variable or flag).
    Config {
        /// What is wrong, naming the knob and the valid values.
        message: String,
    },
    /// The operation was interrupted because the job is being aborted.
    Aborted,
}

/// The MPI error class of an [`Error`] (`MPI_ERR_TRUNCATE`, ...), as
/// `MPI_Error_class` gives it; `Display` prints the class's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorClass {
    /// `MPI_ERR_TRUNCATE`: a message longer than its receive buffer.
    Truncate,
    /// `MPI_ERR_RANK`: a rank outside the communicator.
    Rank,
    /// `MPI_ERR_TAG`: a tag outside `0..=TAG_UB`.
    Tag,
    /// `MPI_ERR_ROOT`: a root outside the communicator.
    Root,
    /// `MPI_ERR_COUNT`: a count or buffer size that does not fit.
    Count,
    /// `MPI_ERR_TYPE`: type signatures that differ.
    Type,
    /// `MPI_ERR_COMM`: a communicator used where it is not valid.
    Comm,
    /// `MPI_ERR_ARG`: an argument that is not valid.
    Arg,
    /// `MPI_ERR_UNSUPPORTED_OPERATION`: not implemented by myriad yet.
    Unsupported,
    /// `MPI_ERR_OTHER`: ranks called different collectives (or the same
    /// one differently).
    CollectiveMismatch,
    /// `MPI_ERR_OTHER`: every rank waits and nothing can wake them.
    Deadlock,
    /// `MPI_ERR_OTHER`: a rank panicked.
    Panic,
    /// `MPI_ERR_NO_MEM`: a resource the job needs is missing.
    NoMem,
    /// `MPI_ERR_ARG`: invalid configuration (builder, variable or flag).
    Config,
    /// `MPI_ERR_OTHER`: the job was aborted.
    Aborted,
}

impl ErrorClass {
    /// The class's name as MPI spells it, with what myriad means by it where
    /// MPI lumps several cases into one class (`MPI_ERR_OTHER (deadlock)`).
    pub fn name(self) -> &'static str {
        match self {
            ErrorClass::Truncate => "MPI_ERR_TRUNCATE",
            ErrorClass::Rank => "MPI_ERR_RANK",
            ErrorClass::Tag => "MPI_ERR_TAG",
            ErrorClass::Root => "MPI_ERR_ROOT",
            ErrorClass::Count => "MPI_ERR_COUNT",
            ErrorClass::Type => "MPI_ERR_TYPE",
            ErrorClass::Comm => "MPI_ERR_COMM",
            ErrorClass::Arg => "MPI_ERR_ARG",
            ErrorClass::Unsupported => "MPI_ERR_UNSUPPORTED_OPERATION",
            ErrorClass::CollectiveMismatch => "MPI_ERR_OTHER (collective mismatch)",
            ErrorClass::Deadlock => "MPI_ERR_OTHER (deadlock)",
            ErrorClass::Panic => "MPI_ERR_OTHER (rank panicked)",
            ErrorClass::NoMem => "MPI_ERR_NO_MEM",
            ErrorClass::Config => "MPI_ERR_ARG (configuration)",
            ErrorClass::Aborted => "MPI_ERR_OTHER (aborted)",
        }
    }
}

impl fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Error {
    /// The MPI error class (`MPI_Error_class`).
    ///
    /// ```
    /// use myriad::{Error, ErrorClass};
    ///
    /// let err = Error::Tag { op: "send", tag: -5 };
    /// assert_eq!(err.class(), ErrorClass::Tag);
    /// assert_eq!(err.class().to_string(), "MPI_ERR_TAG");
    /// ```
    pub fn class(&self) -> ErrorClass {
        match self {
            Error::Truncate { .. } => ErrorClass::Truncate,
            Error::Rank { .. } => ErrorClass::Rank,
            Error::Tag { .. } => ErrorClass::Tag,
            Error::Root { .. } => ErrorClass::Root,
            Error::Count { .. } => ErrorClass::Count,
            Error::Type { .. } => ErrorClass::Type,
            Error::Comm { .. } => ErrorClass::Comm,
            Error::Arg { .. } => ErrorClass::Arg,
            Error::Unsupported { .. } => ErrorClass::Unsupported,
            Error::Collective { .. } => ErrorClass::CollectiveMismatch,
            Error::Deadlock { .. } => ErrorClass::Deadlock,
            Error::Panic { .. } => ErrorClass::Panic,
            Error::Resources { .. } => ErrorClass::NoMem,
            Error::Config { .. } => ErrorClass::Config,
            Error::Aborted => ErrorClass::Aborted,
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
            Error::Count(kind) => kind.fmt(f),
            Error::Type(kind) => kind.fmt(f),
            Error::Comm(kind) => kind.fmt(f),
            Error::Arg(kind) => kind.fmt(f),
            Error::Collective(kind) => kind.fmt(f),
            Error::Unsupported { what } => write!(f, "not supported by myriad yet: {what}"),
            Error::Deadlock { report } => write!(f, "deadlock: {report}"),
            Error::Panic { rank, message } => write!(f, "rank {rank} panicked: {message}"),
            Error::Resources(kind) => write!(f, "out of resources: {kind}"),
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
