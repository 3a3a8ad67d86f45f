//! Per-rank storage: [`rank_local!`](crate::rank_local) (MPC's extended
//! TLS).
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
//! `with` panics there, `try_with` returns the error.

mod local;
pub(crate) mod table;

pub use local::{AccessError, RankLocalKey};
pub(crate) use table::RankLocals;
