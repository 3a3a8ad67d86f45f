//! Per-rank and per-level storage: [`rank_local!`](crate::rank_local)
//! (MPC's extended TLS) and [`Hls`] (MPC's hierarchical local storage).
//!
//! ## Globals are shared by ranks
//!
//! myriad's ranks are coroutines in one process, many per worker thread.
//! A plain `static` is therefore shared by every rank of the process, and a
//! `std::thread_local!` by every rank that runs on the same worker, where
//! separate MPI processes would each have their own copy. Code that keeps a
//! counter, a cache or a scratch buffer in a global silently mixes the
//! ranks' data:
//!
//! ```
//! use std::cell::Cell;
//!
//! thread_local! {
//!     // Wrong for ranks: one value per worker thread.
//!     static PER_THREAD: Cell<u64> = const { Cell::new(0) };
//! }
//! myriad::rank_local! {
//!     // Right: one value per rank.
//!     static PER_RANK: Cell<u64> = Cell::new(0);
//! }
//!
//! // Two ranks on one worker each count their own three steps.
//! let counts = myriad::Runtime::builder()
//!     .ranks(2)
//!     .workers(1)
//!     .run(|_| {
//!         for _ in 0..3 {
//!             PER_THREAD.set(PER_THREAD.get() + 1);
//!             PER_RANK.set(PER_RANK.get() + 1);
//!             myriad::yield_now(); // the other rank runs here
//!         }
//!         (PER_THREAD.get(), PER_RANK.get())
//!     })
//!     .unwrap();
//! // Each rank sees only its own steps through `rank_local!`...
//! assert_eq!(counts[0].1, 3);
//! assert_eq!(counts[1].1, 3);
//! // ...but the thread-local counted both ranks' steps: the rank that
//! // finished last read 6.
//! assert_eq!(counts[0].0.max(counts[1].0), 6);
//! ```
//!
//! Declare per-rank state with [`rank_local!`](crate::rank_local) (the
//! syntax of `thread_local!`). Keep atomics and locks in `static`s only for
//! data that really is per process, and say so.
//!
//! ## `rank_local!`: one value per rank
//!
//! A [`RankLocalKey`] finds the calling rank through the scheduler's
//! current-rank pointer (swapped at every coroutine switch), then the value
//! in the rank's own table: about as cheap as a `thread_local!` access (see
//! `benches/rank_local.rs`). Values are created on a rank's first access
//! and dropped when the rank's closure returns, on the rank, with its
//! context still current (so destructors may still call MPI); when the job
//! fails they are dropped as the ranks are unwound.
//!
//! Where there is no value ([`AccessError`]): outside of any rank (a plain
//! thread; a closure of [`parallel_for`](crate::parallel_for) or
//! [`hybrid::scope`](crate::hybrid::scope), which runs outside of any rank
//! wherever it runs), in a task acting for a rank (a user-defined operation
//! of an immediate collective: tasks may outlive their rank's values), and
//! in the destructor of a rank-local value for values already dropped.
//! `with` panics there, `try_with` returns the error. A user-defined
//! reduction operation runs on whichever rank or task combines the operands,
//! so it should not read rank-local values at all.
//!
//! ## `Hls`: one value per group of ranks
//!
//! The opposite need: a large read-only table that every rank uses should
//! exist once per process (or NUMA node, or worker), not once per rank. An
//! [`Hls`] static has one value per group of its [`HlsLevel`];
//! [`Hls::single`] builds or updates it on one rank while the others of the
//! group wait (parked, not spinning), [`Hls::with`] reads it without a lock,
//! and [`HlsLevel::barrier`] synchronises a group.
//!
//! A rank's group is fixed by the job's initial assignment of ranks to
//! workers (`MYRIAD_RANK_ORDER`) and the placement of the workers
//! (`MYRIAD_MAP_BY`, `MYRIAD_WORKERS`): the worker group is the rank's
//! *assigned* worker, even if an idle worker stole the rank before it
//! started. Group sizes are known before any rank runs.

mod level;
mod local;
mod shared;
mod store;

pub use crate::sched::locals::AccessError;
pub use level::{HlsGroup, HlsLevel};
pub use local::RankLocalKey;
pub use shared::Hls;
pub(crate) use store::JobHls;
