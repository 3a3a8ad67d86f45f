//! # myriad: a thread-based MPI runtime
//!
//! Every MPI rank is a coroutine, scheduled M:N on a few kernel threads (one
//! per processing unit, bound to it), so one process holds thousands to
//! millions of ranks. A rank that waits parks and costs no CPU; ranks of one
//! process exchange messages with a single copy. The API mirrors rsmpi (the
//! `mpi` crate): an rsmpi program ports by renaming the dependency
//! (`mpi = { package = "myriad" }`) and changing its entry point.
//!
//! ```
//! use myriad::traits::*;
//!
//! let results = myriad::run(4, |universe| {
//!     let world = universe.world();
//!     let (rank, size) = (world.rank(), world.size());
//!     // Pass a token around the ring.
//!     let next = world.process_at_rank((rank + 1) % size);
//!     let prev = world.process_at_rank((rank + size - 1) % size);
//!     if rank == 0 {
//!         next.send(&1u64);
//!         let (token, _) = prev.receive::<u64>();
//!         token
//!     } else {
//!         let (token, _) = prev.receive::<u64>();
//!         next.send(&(token + 1));
//!         token
//!     }
//! })
//! .expect("job failed");
//! assert_eq!(results, vec![4, 1, 2, 3]);
//! ```
//!
//! ## Entry points
//!
//! * [`run`]`(n, |universe| ...)`: runs a job from ordinary code (also inside
//!   a plain `#[test]`; several jobs may run at once) and returns the ranks'
//!   results, or the [`Error`] that ended the job.
//! * [`Runtime`]: the same with settings (ranks, workers, stack size,
//!   binding); `Runtime::from_env()` also reads `--ranks N`.
//! * [`launch`]`(rank_main)`: for ported rsmpi programs, whose per-rank code
//!   calls [`initialize`] itself.
//!
//! ## Failures
//!
//! A rank that panics ends the job: [`run`] returns [`Error::Panic`] naming
//! the rank and its message. When every rank waits and nothing can wake them,
//! the job fails with [`Error::Deadlock`], listing what each rank waits for
//! and where. Invalid ranks, tags and buffers are errors that name the
//! values. Operations that rsmpi makes infallible panic with these errors;
//! the `try_*` variants return them.
//!
//! A rank never waits while it unwinds from a panic (a destructor calling
//! MPI during the unwind): a blocking call that would have to wait fails at
//! once with an error saying so, after withdrawing what it queued;
//! [`yield_now`] and [`sleep`] then yield or sleep the thread. Destructors
//! that communicate should use the `try_*` forms: a panic inside a
//! destructor during an unwind aborts the process. A request must be
//! completed by the rank that started it: waiting for it elsewhere (another
//! rank, a parallel region) is an error that withdraws the operation, or
//! fails the job when its peer may still be using its buffer.
//!
//! ## One caveat of thread-based MPI
//!
//! Ranks share the process: a plain `static` (or `std::thread_local!`,
//! shared by the ranks of one worker) is shared by ranks, where separate MPI
//! processes would each have their own copy.
//! Declare per-rank state with [`rank_local!`] instead, and data the ranks
//! of a process, NUMA node or worker should share on purpose with
//! [`hls::Hls`] (see [`hls`]).

/// `eprintln!` in one `write` (for a line shorter than a pipe's atomic
/// 4 KiB): the processes of a job share their standard error, and
/// `eprintln!` writes a line in pieces, between which another process's
/// line can land.
macro_rules! say {
    ($($arg:tt)*) => {{
        let mut line = format!($($arg)*);
        line.push('\n');
        let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
    }};
}

mod coll;
pub mod collective;
mod comm;
mod communicator;
pub mod datatype;
pub mod environment;
mod error;
pub mod ffi;
mod grow;
mod hardware;
pub mod hls;
pub mod hybrid;
mod identity;
mod launch;
pub mod malleable;
mod p2p;
pub mod point_to_point;
pub mod request;
mod rma;
mod runtime;
mod sched;
mod sync;
mod sys;
pub mod thread;
pub mod topology;
mod trace;
mod transport;
pub mod window;

/// Attributes cached on communicators (rsmpi's `mpi::attribute`).
pub mod attribute {
    pub use crate::communicator::attribute::*;
}

pub use environment::{
    initialize, initialize_with_threading, is_finalized, is_initialized, time, time_resolution,
    Threading, Universe,
};
pub use error::{
    ArgError, CollectiveError, CommError, CountError, Error, ErrorClass, GraphProblem, LaunchError,
    ResourceError, RmaError, TypeError, ViewProblem,
};
pub use hybrid::parallel_for;
/// `#[myriad::main]`: the entry point of a ported rsmpi program.
pub use myriad_macros::main;
/// `#[derive(Equivalence)]` for structs whose fields are all `Equivalence`.
pub use myriad_macros::Equivalence;
pub use runtime::{launch, run, Runtime, StackGuard};
pub use sched::{sleep, yield_now, yield_when_idle};
pub use trace::merge::{merge_traces, MergeSummary};

/// The errors of rsmpi's process-spawning calls (rsmpi's `MpiError`). No
/// myriad call returns it (myriad jobs spawn no processes); it exists so
/// that ported signatures such as `fn main() -> Result<(), mpi::MpiError>`
/// compile.
#[derive(Debug)]
pub enum MpiError {
    /// `spawn` started fewer processes than asked (started, asked).
    Spawn(Rank, Rank),
    /// A spawn argument held a NUL byte.
    StringNul(std::ffi::NulError),
}

impl std::fmt::Display for MpiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MpiError::Spawn(started, asked) => {
                write!(f, "spawned {started} of {asked} processes")
            }
            MpiError::StringNul(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for MpiError {}

/// A rank in a communicator (MPI's `int`, as in rsmpi).
pub type Rank = i32;
/// A message tag.
pub type Tag = i32;
/// A count of elements.
pub type Count = i32;
/// A byte displacement.
pub type Address = isize;

/// Matches messages from any source (`MPI_ANY_SOURCE`).
pub const ANY_SOURCE: Rank = -1;
/// Matches messages with any tag (`MPI_ANY_TAG`).
pub const ANY_TAG: Tag = -1;
/// The largest valid tag (`MPI_TAG_UB`).
pub const TAG_UB: Tag = i32::MAX;
/// `MPI_UNDEFINED`.
pub const UNDEFINED: i32 = -32766;

/// The traits needed to call MPI methods: `use myriad::traits::*;`.
pub mod traits {
    pub use crate::collective::{CommunicatorCollectives, Operation, Root};
    pub use crate::comm::Group;
    pub use crate::communicator::{AnyCommunicator, AsCommunicator, CommAttribute, Communicator};
    pub use crate::datatype::{
        AsDatatype, Buffer, BufferMut, Collection, Datatype, Equivalence, Partitioned,
        PartitionedBuffer, PartitionedBufferMut, Pointer, PointerMut, UncommittedDatatype,
    };
    pub use crate::point_to_point::{Destination, MatchedReceiveVec, Source};
    pub use myriad_macros::Equivalence;
}

#[doc(hidden)]
pub mod __private {
    pub use crate::coll::{CommCore, State};
    pub use crate::comm::Core;
    pub use crate::communicator::AsCore;
    pub use crate::datatype::cached_type_map;
}
