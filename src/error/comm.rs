//! [`CommError`]: a communicator or MPI call used where it is not valid
//! (`MPI_ERR_COMM`).

use std::fmt;
use std::panic::Location;

use crate::Rank;

/// A communicator, or MPI as a whole, used where it is not valid
/// (`MPI_ERR_COMM`): who called from where. `Display` gives the sentence
/// that [`Error`](super::Error)'s `Display` prints.
///
/// Ranks are world ranks (the rank a communicator handle belongs to, the
/// rank that used it).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CommError {
    /// `myriad::initialize()` was called outside of any rank.
    InitializeOutsideRank,
    /// `SimpleCommunicator::world()` was called outside of any rank.
    WorldOutsideRank,
    /// A rank used a communicator handle that belongs to another rank.
    ForeignHandle {
        /// The rank that used it.
        rank: Rank,
        /// The rank it belongs to.
        owner: Rank,
    },
    /// A rank of one job used a communicator of another job.
    OtherJob {
        /// The rank that used it.
        rank: Rank,
        /// The rank the communicator belongs to, in its own job.
        owner: Rank,
    },
    /// A new communicator's derived context ids are those of a live
    /// communicator (a collision of the derivation's hash, not a program
    /// error): refused rather than mixing the two communicators' messages.
    ContextCollision {
        /// The communicator being created.
        name: String,
        /// Its point-to-point context id (collectives use the next one).
        context: u64,
        /// The live communicator that holds them.
        holder: String,
    },
    /// A worker thread outside of any rank (a micro-task of a parallel
    /// region) called MPI on a rank's communicator.
    FromWorkerThread {
        /// The rank the communicator belongs to.
        owner: Rank,
    },
    /// An OS thread called MPI on a rank's communicator, but the rank's
    /// thread level is below `Serialized`.
    ThreadLevel {
        /// The rank the communicator belongs to.
        owner: Rank,
        /// Its thread level (`Single`, `Funneled`).
        level: String,
    },
    /// An OS thread called MPI for a rank that has already finished.
    RankFinished,
    /// A rank called `Communicator::abort`.
    Abort {
        /// Its rank in the communicator.
        rank: Rank,
        /// The communicator.
        comm: String,
        /// The error code it passed.
        errorcode: i32,
    },
    /// A rank called a blocking operation that would have to wait while
    /// the rank unwinds from a panic.
    WaitWhileUnwinding {
        /// The rank.
        rank: Rank,
        /// The operation (`receive`, `wait on a request`, ...).
        op: &'static str,
        /// Where it was called.
        site: &'static Location<'static>,
    },
    /// An immediate collective's request was given up (dropped, or waited
    /// for where it cannot wait) while its task still ran; the job is
    /// aborted.
    TaskAbandoned {
        /// The rank.
        rank: Rank,
    },
    /// A send's request was given up (dropped, or waited for where it cannot
    /// wait) while a matched probe held its message; the job is aborted.
    SendAbandoned {
        /// The rank.
        rank: Rank,
    },
    /// Attributes were set on a handle that keeps none (a view of a
    /// communicator rather than the communicator handle itself).
    NoAttributes,
    /// The connection to another process of the job ended without its
    /// goodbye (the process died or the network failed); the job is
    /// aborted.
    ProcessLost {
        /// The lost process.
        process: u32,
        /// Its world ranks, `first..end`.
        first: Rank,
        /// One past its last world rank.
        end: Rank,
        /// What the transport saw.
        reason: String,
    },
    /// Another process of the job failed (not a rank's panic: a deadlock,
    /// resources, ...) and told this one; the job is aborted.
    ProcessFailed {
        /// The failed process.
        process: u32,
        /// Its job's error.
        message: String,
    },
}

impl fmt::Display for CommError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CommError::InitializeOutsideRank => f.write_str(
                "myriad::initialize() was called outside of any rank: start the ranks with \
                 myriad::run(n, |universe| ...), myriad::launch(rank_main) or Runtime::run, and \
                 call initialize() inside rank_main",
            ),
            CommError::WorldOutsideRank => {
                f.write_str("SimpleCommunicator::world() was called outside of any rank")
            }
            CommError::ForeignHandle { rank, owner } => write!(
                f,
                "rank {rank} used a communicator handle that belongs to rank {owner}; handles \
                 must stay with the rank that created them"
            ),
            CommError::OtherJob { rank, owner } => write!(
                f,
                "rank {rank} of one job used a communicator of another job (rank {owner})"
            ),
            CommError::ContextCollision {
                name,
                context,
                holder,
            } => write!(
                f,
                "could not create {name}: its context ids {context} and {} (derived from its \
                 parent's and the creating call) are those of the live communicator {holder}; \
                 this is a collision of the derivation's hash, not a program error",
                context + 1
            ),
            CommError::FromWorkerThread { owner } => write!(
                f,
                "an MPI operation on a communicator of rank {owner} was called outside of any \
                 rank, from a worker thread (a micro-task of a parallel region, which must not \
                 call blocking MPI operations)"
            ),
            CommError::ThreadLevel { owner, level } => write!(
                f,
                "an MPI operation on a communicator of rank {owner} was called outside of any \
                 rank, from an OS thread; the rank's thread level is {level}, so only the rank \
                 itself may call MPI. For threads of a rank to call MPI, ask for \
                 Threading::Multiple (or Serialized) with myriad::initialize_with_threading or \
                 Runtime::threading"
            ),
            CommError::Abort {
                rank,
                comm,
                errorcode,
            } => write!(
                f,
                "rank {rank} of {comm} called abort with error code {errorcode}"
            ),
            CommError::RankFinished => f.write_str(
                "an OS thread called MPI for a rank that has already finished; threads must be \
                 done with MPI before their rank returns",
            ),
            CommError::WaitWhileUnwinding { rank, op, site } => write!(
                f,
                "rank {rank} called a blocking operation ({op}, at {site}) that would have to \
                 wait while the rank unwinds from a panic; a rank cannot wait while it unwinds \
                 (it would suspend mid-unwind), so the call fails at once"
            ),
            CommError::ProcessLost {
                process,
                first,
                end,
                reason,
            } => write!(
                f,
                "process {process} of the job (world ranks {first}..{end}) was lost: {reason}"
            ),
            CommError::ProcessFailed { process, message } => {
                write!(f, "process {process} of the job failed: {message}")
            }
            CommError::TaskAbandoned { rank } => abandoned(
                f,
                *rank,
                "an immediate collective whose task is still running",
            ),
            CommError::SendAbandoned { rank } => {
                abandoned(f, *rank, "a send whose message a matched probe holds")
            }
            CommError::NoAttributes => f.write_str(
                "set_attr: this handle keeps no attributes; set them on the communicator handle \
                 itself",
            ),
        }
    }
}

fn abandoned(f: &mut fmt::Formatter<'_>, rank: Rank, what: &str) -> fmt::Result {
    write!(
        f,
        "rank {rank} gave up {what}: its request was dropped or waited for where it cannot wait \
         (while unwinding from a panic, or outside of rank {rank}), and its buffer must not be \
         freed while the other side may still use it, so the job is aborted"
    )
}
