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
//!
//! ## RMA1 and RMA2 in one process
//!
//! They cost the same here, within noise, and nothing in the seed's
//! methods separates them in one address space:
//!
//! * **The same copies.** Both read through the same `rget`s (a target's
//!   gets of 256 KiB or more shared with idle workers alike), completed by
//!   one `test_all` (or at issue, blocking): RMA1 does not wait per source.
//!   The only difference is the epochs, and with `NOCHECK` neither a lock
//!   nor `lock_all` touches a shared word: both are the origin's own
//!   bookkeeping (80 instructions per RMA1 unlock, callgrind). A target of
//!   160 -> 20 reads 8 sources, so RMA1 adds about a microsecond at most to
//!   a 4-8 ms redistribution. Without `NOCHECK` (`rma_bench`, 160 ranks,
//!   8 B, load 3): get 8-15 ns, lock + get + unlock 23-31 ns, `lock_all` +
//!   160 gets + `unlock_all` 1.3-2.1 us.
//! * **Whole jobs** (`malleable_cg --strategies WT --iters 1` under
//!   callgrind): 160 -> 20 RMA1 1,086 and 1,076 M instructions in two runs,
//!   RMA2 1,077 and 1,083 M; 20 -> 160 RMA1 821 M, RMA2 823 M: the
//!   difference is inside the run-to-run spread (spin loops).
//! * **Timings** (`malleable_cg --repeat 5`, medians of 5): RMA2-WT's total
//!   was below RMA1-WT's in 6 of 12 pairs on a quiet host (2026-12-03
//!   08:04), 7 of 12 at load 3.6 (09:06), 3 of 12 at load 4-6 (09:30, the
//!   `(spread)` line); their `redist_lo..redist_hi` ranges overlapped in
//!   12 of 12 every time, the medians 1-18 % apart
//!   (up to 40 % loaded) in both directions: a coin toss, as seed 000
//!   found on MPICH (totals within 0.4 s; it recommends RMA2 for its
//!   simplicity).
//! * **No iteration to quantize.** With unbounded tests every RMA case
//!   under Non-blocking and Wait Targets completes before the sources'
//!   first iteration (median `iters_during` 0 in all 48 such rows of the
//!   quiet run, 47 of 48 at load 3.6): the total is the copy of the
//!   constant data, the window's creation and free, and the variable
//!   data's blocking moves. Wait Targets adds the immediate barrier and
//!   one more agreement of the sources to Non-blocking, so RMA under Non-blocking (ours; the seed ran none) is
//!   at least as fast as RMA2-WT by construction, and four variants
//!   (RMA1/RMA2 x NB/WT) make the same copies: equal costs give RMA2-WT
//!   the lowest total in about 3 of 12 pairs against every variant and 6
//!   of 12 against the seed's (08:04, every variant: 1 and 6 of 12; 09:06,
//!   RMA1/RMA2 x NB/WT only: 3 and 7 of 12; 09:30, every variant: 0 and 3
//!   of 12, an RMA NB or WT variant lowest in 12 of 12, NB in 8).
//! * **Placement.** Spawned ranks go to whichever worker takes them from
//!   the scheduler's queue of spawned ranks: a grow from 20 to 160 ran
//!   12:148, 32:128, 150:10 ranks per worker from one run to the next, so
//!   most targets' copies share one core (partly helped by `shared_copy`),
//!   for every method alike. Taking them one at a time instead of in
//!   batches did not balance them (71:89, 150:10, 133:27, 134:26): a
//!   worker starts a child, which parks in `merge` at once, and takes the
//!   next before the other worker looks; dealing them to workers (as
//!   `RankOrder::Cyclic` deals the job's first ranks) should (untried:
//!   the scheduler is not this module's).
//!
//! What would separate them is a transport where an epoch costs a message
//! per target (between processes or nodes: a lock request, or the flush of
//! each unlock), which `lock_all` pays once; and the seed's ω, lower for
//! RMA2 with fewer epochs on MPICH, which epochs here do not change.

mod helper;
mod plan;
mod redistribute;

pub use plan::{block_range, Plan, SourcePlan, TargetPlan};
pub use redistribute::{InFlight, Method, Strategy};
