//! One error type with MPI's error classes.
//!
//! Operations that rsmpi makes infallible (it aborts on MPI errors) panic in
//! myriad with the `Display` of one of these errors, so the job fails with a
//! message naming the rank, the operation and the values involved; the
//! `try_*` variants return them instead. [`crate::Runtime::run`] returns the
//! error that ended a job.
//!
//! An [`Error`] variant is an MPI error class; where a class covers several
//! situations, the variant holds a kind that names the situation and keeps
//! its values as fields (as `std::io::ErrorKind` does for I/O errors, but
//! with the data): [`CountError`], [`TypeError`], [`CommError`],
//! [`ArgError`] (with [`ViewProblem`] and [`GraphProblem`]), [`CollectiveError`],
//! [`ResourceError`], [`LaunchError`] and [`RmaError`], one file each in `error/`. A kind's `Display` is the
//! message; programs match on the kind, not on the text. The kinds hold plain
//! values (`&'static str` operation names, ranks, counts, datatype names as
//! `String`, call sites as `&'static Location`), so this module stays at the
//! bottom layer and imports nothing above the crate root's number types.

use std::fmt;

use crate::{Rank, Tag};

mod arg;
mod collective;
mod comm;
mod count;
mod launch;
mod resources;
mod rma;
mod types;

pub use arg::{ArgError, GraphProblem, ViewProblem};
pub use collective::CollectiveError;
pub use comm::CommError;
pub use count::CountError;
pub(crate) use launch::shorten;
pub use launch::LaunchError;
pub use resources::ResourceError;
pub use rma::RmaError;
pub use types::TypeError;

/// Everything that can go wrong in myriad, by MPI error class.
///
/// Match on the class, and on the kind inside it for the values involved:
///
/// ```
/// use myriad::traits::*;
/// use myriad::{Error, TypeError};
///
/// let out = myriad::run(2, |universe| {
///     let world = universe.world();
///     if world.rank() == 0 {
///         world.process_at_rank(1).send_with_tag(&1.5f64, 7);
///         None
///     } else {
///         Some(world.process_at_rank(0).try_receive_with_tag::<i64>(7))
///     }
/// })
/// .unwrap();
/// match &out[1] {
///     Some(Err(Error::Type(TypeError::MessageSignature {
///         source,
///         tag,
///         sent,
///         expected,
///         ..
///     }))) => {
///         assert_eq!((*source, *tag), (0, 7));
///         assert_eq!((*sent, *expected), ("f64", "i64"));
///     }
///     other => panic!("expected a type error, got {other:?}"),
/// }
/// let err = out[1].as_ref().unwrap().as_ref().unwrap_err();
/// assert!(err.to_string().starts_with("type mismatch: rank 1 received a message from rank 0"));
/// ```
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
    /// The launcher that started this process (`mpiexec`, `srun`) left an
    /// environment or gave replies myriad cannot use.
    Launch(LaunchError),
    /// Invalid configuration (builder, environment variable or flag).
    Config {
        /// What is wrong, naming the knob and the valid values.
        message: String,
    },
    /// The operation was interrupted because the job is being aborted.
    Aborted,
    /// A one-sided operation or synchronisation used the wrong way.
    Rma(RmaError),
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
    /// `MPI_ERR_OTHER`: the launcher's environment or its PMI failed.
    Launch,
    /// `MPI_ERR_ARG`: invalid configuration (builder, variable or flag).
    Config,
    /// `MPI_ERR_OTHER`: the job was aborted.
    Aborted,
    /// `MPI_ERR_RMA_RANGE`: a one-sided access outside the target's window.
    RmaRange,
    /// `MPI_ERR_RMA_SYNC`: a one-sided call outside or across epochs.
    RmaSync,
    /// `MPI_ERR_WIN`: a window that cannot be used that way.
    Win,
    /// `MPI_ERR_OP`: an operation that cannot be used there (a user
    /// operation in a one-sided accumulate).
    Op,
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
            ErrorClass::Launch => "MPI_ERR_OTHER (launcher)",
            ErrorClass::Config => "MPI_ERR_ARG (configuration)",
            ErrorClass::Aborted => "MPI_ERR_OTHER (aborted)",
            ErrorClass::RmaRange => "MPI_ERR_RMA_RANGE",
            ErrorClass::RmaSync => "MPI_ERR_RMA_SYNC",
            ErrorClass::Win => "MPI_ERR_WIN",
            ErrorClass::Op => "MPI_ERR_OP",
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
            Error::Count(_) => ErrorClass::Count,
            Error::Type(_) => ErrorClass::Type,
            Error::Comm(_) => ErrorClass::Comm,
            Error::Arg(_) => ErrorClass::Arg,
            Error::Unsupported { .. } => ErrorClass::Unsupported,
            Error::Collective(_) => ErrorClass::CollectiveMismatch,
            Error::Deadlock { .. } => ErrorClass::Deadlock,
            Error::Panic { .. } => ErrorClass::Panic,
            Error::Resources(_) => ErrorClass::NoMem,
            Error::Launch(_) => ErrorClass::Launch,
            Error::Config { .. } => ErrorClass::Config,
            Error::Aborted => ErrorClass::Aborted,
            Error::Rma(kind) if kind.is_range() => ErrorClass::RmaRange,
            Error::Rma(kind) if kind.is_type() => ErrorClass::Type,
            Error::Rma(kind) if kind.is_sync() => ErrorClass::RmaSync,
            Error::Rma(kind) if kind.is_op() => ErrorClass::Op,
            Error::Rma(_) => ErrorClass::Win,
        }
    }

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
            Error::Launch(kind) => write!(f, "launcher: {kind}"),
            Error::Config { message } => write!(f, "invalid configuration: {message}"),
            Error::Aborted => f.write_str("the job was aborted"),
            Error::Rma(kind) => kind.fmt(f),
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

#[cfg(test)]
mod tests {
    use std::panic::Location;

    use super::*;

    /// The kinds print the sentences the `format!`s at the construction
    /// sites printed before the kinds existed (copied from them, with the
    /// values filled in), so messages, and the tests and programs that
    /// read them, stay as they were.
    #[test]
    fn kinds_print_the_messages_of_before() {
        let cases: Vec<(Error, &str)> = vec![
            (
                Error::Count(CountError::PartitionLength {
                    op: "gather_varcount_into_known",
                    counts: 3,
                    displs: 4,
                    size: 4,
                }),
                "gather_varcount_into_known: 3 counts and 4 displacements for a communicator \
                 of 4 ranks",
            ),
            (
                Error::Count(CountError::RootBufferTooSmall {
                    op: "gather",
                    holds: 5,
                    ranks: 3,
                    block: 2,
                }),
                "gather: the root's buffer holds 5 elements but 3 ranks × 2 elements need 6",
            ),
            (
                Error::Count(CountError::SendBufferTooSmall {
                    op: "reduce_scatter_block",
                    holds: 5,
                    ranks: 3,
                    block: 2,
                }),
                "reduce_scatter_block: the send buffer holds 5 elements but 3 ranks × 2 need 6",
            ),
            (
                Error::Count(CountError::PackBufferTooSmall {
                    op: "pack_into",
                    bytes: 8,
                    position: 4,
                    buffer: "output",
                    len: 10,
                }),
                "pack_into: 8 bytes of data at position 4 need 12 bytes, but the output buffer \
                 holds 10",
            ),
            (
                Error::Count(CountError::BufferTooLarge { len: 1 << 31 }),
                "a buffer of 2147483648 elements is larger than MPI's count type allows \
                 (2147483647)",
            ),
            (
                Error::Type(TypeError::MessageSignature {
                    rank: 1,
                    source: 0,
                    tag: 7,
                    index: 0,
                    sent: "f64",
                    expected: "i64",
                }),
                "type mismatch: rank 1 received a message from rank 0 (tag 7) whose type \
                 signature differs from the receive buffer's at base value 0 (sent f64, \
                 expected i64); nothing was copied",
            ),
            (
                Error::Type(TypeError::ElementSizes {
                    op: "all_to_all",
                    rank: 2,
                    send: "u32".into(),
                    send_bytes: 4,
                    recv: "u64".into(),
                    recv_bytes: 8,
                }),
                "all_to_all: rank 2 sends u32 (4 bytes of data per element) but receives u64 \
                 (8 bytes); counts are in elements of both",
            ),
            (
                Error::Comm(CommError::ForeignHandle { rank: 1, owner: 0 }),
                "rank 1 used a communicator handle that belongs to rank 0; handles must stay \
                 with the rank that created them",
            ),
            (
                Error::Comm(CommError::TaskAbandoned { rank: 3 }),
                "rank 3 gave up an immediate collective whose task is still running: its \
                 request was dropped or waited for where it cannot wait (while unwinding from \
                 a panic, or outside of rank 3), and its buffer must not be freed while the \
                 other side may still use it, so the job is aborted",
            ),
            (
                Error::Arg(ArgError::NoSuchAlgorithm {
                    collective: "barrier",
                    algorithm: "ring",
                    valid: vec!["shm", "linear"],
                }),
                "barrier has no algorithm ring; its algorithms are: auto, shm, linear",
            ),
            (
                Error::Arg(ArgError::View {
                    view: "MutView",
                    problem: ViewProblem::TooSmall {
                        count: 3,
                        datatype: "f64".into(),
                        lb: 0,
                        extent: 8,
                        need: 24,
                        buffer_count: 2,
                        buffer: "f64".into(),
                        have: 16,
                    },
                }),
                "MutView::with_count_and_datatype: 3 element(s) of datatype `f64` (lb 0, \
                 extent 8) reach 24 bytes from the buffer's address, but the buffer (2 x \
                 `f64`) holds 16",
            ),
            (
                Error::Arg(ArgError::GridTooLarge {
                    op: "create_cartesian_communicator",
                    dims: vec![2, 3],
                    size: 4,
                }),
                "create_cartesian_communicator: a grid of dims [2, 3] needs 6 ranks but the \
                 communicator has 4",
            ),
            (
                Error::Arg(ArgError::DimsCreateNotMultiple {
                    nnodes: 10,
                    dims: vec![0, 3],
                    fixed: 3,
                }),
                "dims_create(10, [0, 3]): 10 is not a multiple of the fixed entries' product 3",
            ),
            (
                Error::Resources(ResourceError::Tasks { max: 4096 }),
                "out of resources: more than 4096 tasks (immediate collectives) are alive at \
                 once",
            ),
        ];
        for (error, message) in cases {
            assert_eq!(error.to_string(), message, "{error:?}");
        }
    }

    /// Call sites print as `file:line:column`, as the messages spelled them
    /// out before.
    #[test]
    fn call_sites_print_as_file_line_column() {
        let (a, b) = (Location::caller(), Location::caller());
        let error = Error::Collective(CollectiveError::Mismatch {
            seq: 4,
            ranks: (0, 1),
            calls: ("barrier".into(), "broadcast from root 0".into()),
            sites: (a, b),
        });
        assert_eq!(
            error.to_string(),
            format!(
                "collective mismatch on call 4 of the communicator: rank 0 called barrier at \
                 {}:{}:{}, but rank 1 called broadcast from root 0 at {}:{}:{}",
                a.file(),
                a.line(),
                a.column(),
                b.file(),
                b.line(),
                b.column()
            )
        );
    }

    #[test]
    fn every_kind_keeps_its_class() {
        let kinds = [
            (
                Error::Count(CountError::NegativeCount {
                    op: "pack_size",
                    count: -1,
                }),
                ErrorClass::Count,
            ),
            (
                Error::Type(TypeError::ReduceLocalTypes {
                    input: "f64".into(),
                    inout: "i32".into(),
                }),
                ErrorClass::Type,
            ),
            (Error::Comm(CommError::RankFinished), ErrorClass::Comm),
            (
                Error::Arg(ArgError::NegativeColor { value: -2 }),
                ErrorClass::Arg,
            ),
            (
                Error::Resources(ResourceError::Tasks { max: 1 }),
                ErrorClass::NoMem,
            ),
        ];
        for (error, class) in kinds {
            assert_eq!(error.class(), class, "{error}");
        }
    }
}
