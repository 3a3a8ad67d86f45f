//! Redistributing block-distributed data when a job is resized from NS
//! "source" ranks to NT "target" ranks (seed 000: MaM, the malleability
//! module of Proteo).
//!
//! ```
//! use myriad::malleable::{Method, Plan, Strategy};
//! use myriad::traits::*;
//!
//! // 10 elements on 2 sources go to 3 targets, inside one job of 3 ranks.
//! let got = myriad::run(3, |universe| {
//!     let world = universe.world();
//!     let rank = world.rank() as usize;
//!     let plan = Plan::block(10, 2, 3).unwrap();
//!     let mut src: Vec<u64> = if rank < 2 {
//!         plan.source_block(rank).map(|i| i as u64).collect()
//!     } else {
//!         Vec::new()
//!     };
//!     let mut dst = vec![0u64; plan.target_block(rank).len()];
//!     // Blocking: the data has moved when it returns (variable data).
//!     plan.redistribute(&world, Method::RmaLockAll, &mut src, &mut dst).unwrap();
//!     // In the background: the rank iterates while it moves (constant data).
//!     let comm = world.duplicate();
//!     let mut again = vec![0u64; dst.len()];
//!     let iterations = plan
//!         .redistribute_in_background(&comm, Method::RmaLockAll, Strategy::WaitTargets,
//!             &mut src, &mut again, |flight| {
//!                 let mut n = 0;
//!                 while !flight.test().unwrap() {
//!                     n += 1; // one iteration of the application
//!                 }
//!                 n
//!             })
//!         .unwrap();
//!     assert_eq!(again, dst);
//!     let _ = iterations;
//!     dst
//! })
//! .unwrap();
//! assert_eq!(got, vec![vec![0, 1, 2, 3], vec![4, 5, 6], vec![7, 8, 9]]);
//! ```
//!
//! ## Design
//!
//! * **One communicator, MaM's convention.** The redistribution runs on
//!   one communicator whose ranks `0..NS` are the sources and `0..NT` the
//!   targets (after the Merge method, the merged communicator; a rank may
//!   be both). Ranks beyond both take part in the collectives with nothing
//!   to move.
//! * **Plans** ([`Plan`]): both sides' block boundaries. [`Plan::block`]
//!   is MaM's even distribution ([`block_range`]); [`Plan::from_blocks`]
//!   takes any block sizes whose totals agree. [`Plan::receive`] is the
//!   seed's Algorithm 1 for one target: per source the count and the
//!   displacement in the target's block, the first and last source, and
//!   the first index inside the first source's window (every later source
//!   is read from its start, by the nature of block distributions);
//!   [`Plan::send`] is the mirror for a source.
//! * **Constant and variable data** are the same plan applied to different
//!   buffers: variable data (changed by every iteration) moves with
//!   [`Plan::redistribute`] at every resize, blocking; constant data may
//!   move with [`Plan::redistribute_in_background`] while the rank
//!   iterates.
//! * **Methods** ([`Method`]): COL (`all_to_all_varcount_into`, zero counts
//!   for ranks that are not sources or not targets), RMA1 (a window over
//!   each source's block, pure targets expose an empty one; each target
//!   takes a shared `NOCHECK` lock per source it reads, gets, then unlocks)
//!   and RMA2 (one `lock_all` epoch). A window here is a few pointers per
//!   rank and its creation waits for nobody, the cost seed 000 found
//!   dominating on MPICH.
//! * **Strategies** ([`Strategy`]): Blocking; Non-blocking (the immediate
//!   all-to-all, or `rget`s completed by `test_all`); Wait Targets (the
//!   reads, then an immediate barrier that ranks with nothing to read enter
//!   at once; everyone tests it between iterations, and windows are freed
//!   only after it completes); Threading (a helper runs the
//!   blocking form: a user-level thread of the rank on its worker, see
//!   `helper.rs`, not an OS thread). The rank's iterations are a closure given an
//!   [`InFlight`] handle (`test`/`wait`, or `test_bounded`: at most so
//!   many bytes of reads per test, so a test adds bounded copy work to an
//!   iteration; in one process a get is a CPU copy, not a NIC's); the operations' state stays in
//!   the call's frame, so the window's borrow of the source block and the
//!   requests' borrow of the target block end only after the last peer
//!   access, with no copy of either.
//! * **Errors**: a plan whose sides do not hold the same total
//!   ([`ArgError::PlanSizes`](crate::ArgError::PlanSizes)), a
//!   communicator smaller than a side (`PlanRanks`), a buffer shorter than
//!   the rank's block (`RedistributionBuffer`), the Threading strategy
//!   without [`Threading::Multiple`](crate::Threading) (`Unsupported`).

mod helper;
mod plan;
mod redistribute;

pub use plan::{block_range, Plan, SourcePlan, TargetPlan};
pub use redistribute::{InFlight, Method, Strategy};
