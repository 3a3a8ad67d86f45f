//! Threading's helper in `myriad::malleable` is a user-level thread of
//! the rank, not an OS thread (issue 13, part 2).
//!
//! In a binary of its own: the check counts the process's threads, and
//! tests running beside it in one process start runtimes (and their
//! worker threads) of their own, which made it fail 2 runs in 8 when it
//! lived in `tests/malleable.rs`.

use myriad::malleable::{Method, Plan, Strategy};
use myriad::traits::*;
use myriad::{Runtime, Threading};

/// Threading's helper is a user-level thread of the rank (a task on its
/// worker), not an OS thread: on one worker, with every rank's `work`
/// computing and testing, the redistribution completes (the helpers run
/// when the ranks' tests yield) and no OS thread is created for it (the
/// process's thread count is the same during `work` as before). Fails if
/// the helper needs a thread of its own, or never runs while the ranks
/// test.
#[test]
fn threading_helper_runs_on_the_ranks_worker() {
    fn threads() -> usize {
        std::fs::read_dir("/proc/self/task").map_or(0, |d| d.count())
    }
    for method in Method::ALL {
        let out = Runtime::builder()
            .ranks(3)
            .workers(1)
            .threading(Threading::Multiple)
            .run(move |universe| {
                let world = universe.world();
                let comm = world.duplicate();
                let rank = world.rank() as usize;
                let plan = Plan::block(30, 3, 2).unwrap();
                let mut src: Vec<u32> = plan.source_block(rank).map(|i| i as u32).collect();
                let mut dst = vec![0u32; if rank < 2 { 15 } else { 0 }];
                let before = threads();
                let (tests, during) = plan
                    .redistribute_in_background(
                        &comm,
                        method,
                        Strategy::Threading,
                        &mut src,
                        &mut dst,
                        |flight| {
                            let mut during = 0;
                            while !flight.test().unwrap() {
                                during = during.max(threads());
                            }
                            (flight.tests(), during)
                        },
                    )
                    .unwrap();
                (dst, tests, before, during)
            })
            .unwrap();
        for (rank, (dst, tests, before, during)) in out.iter().enumerate() {
            let want: Vec<u32> = if rank < 2 {
                (rank as u32 * 15..rank as u32 * 15 + 15).collect()
            } else {
                Vec::new()
            };
            assert_eq!(dst, &want, "{} rank {rank}", method.name());
            assert!(*tests >= 1, "{} rank {rank}: no test", method.name());
            assert!(
                *during <= *before,
                "{} rank {rank}: {during} threads during the redistribution, {before} before",
                method.name()
            );
        }
    }
}
