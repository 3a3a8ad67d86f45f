//! [`ResourceError`]: a resource the job needs and cannot get
//! (`MPI_ERR_NO_MEM`).

use std::fmt;

use crate::Rank;

/// A resource the job could not get (memory, threads, stack mappings): what
/// is missing and what to do about it. `Display` gives the part of
/// [`Error`](super::Error)'s message after `out of resources: `.
///
/// `reason` fields hold the operating system's error, as text.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ResourceError {
    /// The pool of rank stacks could not be set up.
    StackPool {
        /// The operating system's error.
        reason: String,
    },
    /// Guarded rank stacks need more memory mappings than the kernel allows
    /// (`vm.max_map_count`).
    MapCount {
        /// Rank stacks asked for.
        stacks: usize,
        /// Mappings they need, about.
        needed: usize,
        /// The kernel's limit.
        limit: usize,
        /// Mappings in use already.
        used: usize,
    },
    /// A worker thread could not be started.
    WorkerThread {
        /// The worker's index.
        index: usize,
        /// The operating system's error.
        reason: String,
    },
    /// A rank's stack could not be mapped.
    Stack {
        /// The rank (in the world communicator).
        rank: Rank,
        /// Bytes of the stack.
        size: usize,
        /// The operating system's error.
        reason: String,
    },
    /// More tasks (immediate collectives) are alive at once than the
    /// scheduler has slots for.
    Tasks {
        /// The most tasks alive at once.
        max: usize,
    },
    /// Spawning ranks would take the job beyond its rank limit
    /// (`MYRIAD_MAX_RANKS`, `MPI_UNIVERSE_SIZE`).
    RankLimit {
        /// Ranks asked for.
        asked: usize,
        /// Ranks the job has (started and spawned).
        ranks: usize,
        /// The limit.
        max: usize,
    },
}

impl fmt::Display for ResourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResourceError::StackPool { reason } => {
                write!(f, "could not set up rank stacks: {reason}")
            }
            ResourceError::MapCount {
                stacks,
                needed,
                limit,
                used,
            } => write!(
                f,
                "{stacks} guarded rank stacks need about {needed} memory mappings with mprotect \
                 guard pages (this kernel has no MADV_GUARD_INSTALL), but vm.max_map_count is \
                 {limit} and {used} are in use; raise the limit with `sudo sysctl -w \
                 vm.max_map_count={}`, run fewer ranks, or use Linux 6.13 or newer",
                (used + needed).next_power_of_two()
            ),
            ResourceError::RankLimit { asked, ranks, max } => write!(
                f,
                "spawning {asked} ranks would take the job from {ranks} to {} ranks, beyond its \
                 limit of {max} (MYRIAD_MAX_RANKS, Runtime::max_ranks; MPI_UNIVERSE_SIZE)",
                ranks + asked
            ),
            ResourceError::WorkerThread { index, reason } => {
                write!(f, "could not start worker thread {index}: {reason}")
            }
            ResourceError::Stack { rank, size, reason } => write!(
                f,
                "could not map a stack for rank {rank} ({size} bytes): {reason}"
            ),
            ResourceError::Tasks { max } => write!(
                f,
                "more than {max} tasks (immediate collectives) are alive at once"
            ),
        }
    }
}
