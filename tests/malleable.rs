//! The redistribution library (`myriad::malleable`, issue 13 part 2).
//!
//! * `plans_match_brute_force`, `uneven_blocks_match_brute_force`: every
//!   count, displacement, first/last source and first index of Algorithm 1
//!   (and the sources' mirror) against a reference that assigns each
//!   global index to its source and target one by one; fails on any
//!   off-by-one in the block bounds, the first index or the displacements.
//! * `every_method_and_strategy_moves_the_data`: each element's value is
//!   its global index; after every method × strategy, each target's block
//!   holds exactly its indices (and nothing past its block is written);
//!   expansion and shrink at (2→5), (5→2), (6→3), (3→6), (20→40), (40→20)
//!   and totals smaller than the ranks; fails if any element is missing,
//!   misplaced or duplicated, or if a background strategy returns before
//!   its data arrived.
//! * `background_work_runs_and_tests`: `work` runs and its tests advance
//!   the redistribution.
//! * `wait_targets_holds_sources_until_targets_read`: a source with nothing
//!   to read is not done before the targets entered the barrier.
//! * `own_part_completes_before_the_whole_under_wait_targets`: a
//!   source with nothing to read has its own part complete (in the
//!   barrier) before the whole; a target with unissued reads has neither.
//! * `background_strategies_let_the_rank_work_first`: Threading and the
//!   immediate collective let `work` run before the data moved (Blocking
//!   deadlocks in the same program, and so would Threading run inline:
//!   checked by making it so).
//! * `cg_emulator_result_does_not_depend_on_the_resize`: the SAM emulator
//!   of `examples/malleable_cg.rs` (`examples/common/sam.rs`, included
//!   here) grown 3→5 and shrunk 5→2 mid-run with several method ×
//!   strategy pairs ends with the `r·r` of the same number of CG
//!   iterations without a resize, and its element checks pass; fails if
//!   the variable data (CG's vectors) or the scalars reach the targets
//!   wrong, or the sources' iterations during the background
//!   redistribution diverge.
//! * `bounded_tests_read_in_pieces`: RMA1/RMA2 under NB and WT with
//!   `test_bounded(b)`: every element exact, no test issued more than `b`
//!   bytes, every byte of the rank's block issued once, and a rank that
//!   is a source and a target needed at least `len / b` tests; fails if
//!   the bound is ignored or a piece is lost or read twice.
//! * `a_zero_budget_issues_no_reads`: `test_bounded(0)` (the CG
//!   emulator's second look at a Wait Targets barrier) issues nothing and
//!   reports not done on every rank with data to read, then bounded tests
//!   complete it; fails if a zero budget still reads an element.
//! * `a_peer_that_stops_testing_does_not_hang`: one rank tests one piece
//!   and stops (its `work` returns), only-targets loop on
//!   `yield_when_idle`: the call completes with the data exact.
//! * `idle_yield_runs_after_the_other_ranks`: on one worker, a rank that
//!   yields until idle runs again only after a rank that keeps yielding
//!   finished; fails if it is requeued like `yield_now`.
//! * bad input: sizes that do not add up, a communicator too small,
//!   buffers too small, Threading without `Threading::Multiple`: each a
//!   clear error on every rank, no hang.

#[path = "../examples/common/sam.rs"]
mod sam;

use myriad::malleable::{block_range, InFlight, Method, Plan, Strategy};
use myriad::topology::Process;
use myriad::traits::*;
use myriad::{ArgError, Error, Runtime, Threading};

/// The reference: owner of each global index, then counts per (target,
/// source), displacements as the number of the target's elements that
/// come from earlier sources, and the non-empty sources' range.
// Indices name ranks on both sides here: loops over them read best.
#[allow(clippy::needless_range_loop)]
fn check_plan(plan: &Plan, source_sizes: &[usize], target_sizes: &[usize]) {
    let owner = |sizes: &[usize], i: usize| {
        let mut at = 0;
        for (r, &s) in sizes.iter().enumerate() {
            if i < at + s {
                return r;
            }
            at += s;
        }
        unreachable!("index {i} past the total")
    };
    let total: usize = source_sizes.iter().sum();
    let (ns, nt) = (source_sizes.len(), target_sizes.len());
    assert_eq!(plan.total(), total);
    let mut counts = vec![vec![0usize; ns]; nt];
    for i in 0..total {
        counts[owner(target_sizes, i)][owner(source_sizes, i)] += 1;
    }
    let start_of = |sizes: &[usize], r: usize| sizes[..r].iter().sum::<usize>();
    for t in 0..nt {
        let block = plan.target_block(t);
        assert_eq!(block.start, start_of(target_sizes, t));
        assert_eq!(block.len(), target_sizes[t]);
        let r = plan.receive(t);
        assert_eq!(r.counts(), &counts[t][..], "counts of target {t}");
        let displs: Vec<usize> = (0..=ns)
            .map(|s| counts[t][..s].iter().sum::<usize>())
            .collect();
        assert_eq!(r.displs(), &displs[..], "displs of target {t}");
        let used: Vec<usize> = (0..ns).filter(|&s| counts[t][s] > 0).collect();
        match (used.first(), used.last()) {
            (Some(&first), Some(&last)) => {
                assert_eq!(r.sources(), first..last + 1, "sources of target {t}");
                assert_eq!(r.first_index(), block.start - start_of(source_sizes, first));
            }
            _ => assert!(r.sources().is_empty(), "target {t} reads nothing"),
        }
        // The pieces tile the target's block in order.
        let mut at = 0;
        for (s, from, range) in r.pieces() {
            assert_eq!(range.start, at);
            assert_eq!(
                start_of(source_sizes, s) + from,
                block.start + range.start,
                "piece from source {s} of target {t}"
            );
            at = range.end;
        }
        assert_eq!(at, block.len());
    }
    for s in 0..ns {
        let send = plan.send(s);
        let col: Vec<usize> = (0..nt).map(|t| counts[t][s]).collect();
        assert_eq!(send.counts(), &col[..], "send counts of source {s}");
        let displs: Vec<usize> = (0..=nt).map(|t| col[..t].iter().sum::<usize>()).collect();
        assert_eq!(send.displs(), &displs[..], "send displs of source {s}");
    }
}

#[test]
fn plans_match_brute_force() {
    for total in [0, 1, 2, 3, 5, 7, 10, 16, 17, 41, 100] {
        for ns in 1..=9 {
            for nt in 1..=9 {
                let plan = Plan::block(total, ns, nt).unwrap();
                let sizes = |n| {
                    (0..n)
                        .map(|i| block_range(total, n, i).len())
                        .collect::<Vec<_>>()
                };
                let (s, t) = (sizes(ns), sizes(nt));
                // MaM's Block_id: sizes differ by at most one, larger first.
                assert!(s.windows(2).all(|w| w[0] >= w[1] && w[0] - w[1] <= 1));
                check_plan(&plan, &s, &t);
            }
        }
    }
    // The seed's sizes.
    for ns in [20, 40, 80, 160] {
        for nt in [20, 40, 80, 160] {
            let total = 10_007;
            let plan = Plan::block(total, ns, nt).unwrap();
            let sizes = |n| {
                (0..n)
                    .map(|i| block_range(total, n, i).len())
                    .collect::<Vec<_>>()
            };
            check_plan(&plan, &sizes(ns), &sizes(nt));
        }
    }
}

#[test]
fn uneven_blocks_match_brute_force() {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n) as usize
    };
    for _ in 0..300 {
        let ns = 1 + next(8);
        let nt = 1 + next(8);
        // Zero-sized blocks included.
        let s: Vec<usize> = (0..ns).map(|_| next(6)).collect();
        let total: usize = s.iter().sum();
        let mut t = vec![0; nt];
        for _ in 0..total {
            t[next(nt as u64)] += 1;
        }
        let plan = Plan::from_blocks(&s, &t).unwrap();
        check_plan(&plan, &s, &t);
    }
}

const SENTINEL: u64 = u64::MAX;

/// Runs every method × strategy for `ns → nt` with `total` elements in a
/// job of max(ns, nt) ranks; each rank checks its target block.
fn moves(total: usize, ns: usize, nt: usize) {
    let ranks = ns.max(nt);
    let results = Runtime::builder()
        .ranks(ranks)
        .threading(Threading::Multiple)
        .run(move |universe| {
            let world = universe.world();
            let rank = world.rank() as usize;
            let plan = Plan::block(total, ns, nt).unwrap();
            let comm = world.duplicate();
            let mut src: Vec<u64> = if rank < ns {
                plan.source_block(rank).map(|i| i as u64).collect()
            } else {
                Vec::new()
            };
            let want: Vec<u64> = if rank < nt {
                plan.target_block(rank).map(|i| i as u64).collect()
            } else {
                Vec::new()
            };
            let mut failures = Vec::new();
            for method in Method::ALL {
                for strategy in Strategy::ALL {
                    // One spare element past the block: must stay untouched.
                    let mut dst = vec![SENTINEL; want.len() + 1];
                    let label = format!("{} {} rank {rank}", method.name(), strategy.name());
                    let seen = plan
                        .redistribute_in_background(
                            &comm,
                            method,
                            strategy,
                            &mut src,
                            &mut dst,
                            |flight| {
                                while !flight.test().unwrap() {}
                                flight.is_done()
                            },
                        )
                        .unwrap();
                    if !seen {
                        failures.push(format!("{label}: work returned before completion"));
                    }
                    if dst[..want.len()] != want[..] || dst[want.len()] != SENTINEL {
                        failures.push(format!("{label}: got {:?}", &dst[..dst.len().min(12)]));
                    }
                }
                let mut dst = vec![SENTINEL; want.len() + 1];
                plan.redistribute(&comm, method, &mut src, &mut dst)
                    .unwrap();
                if dst[..want.len()] != want[..] || dst[want.len()] != SENTINEL {
                    failures.push(format!("{} blocking rank {rank}", method.name()));
                }
            }
            // The sources' data is untouched.
            if rank < ns {
                assert!(src
                    .iter()
                    .copied()
                    .eq(plan.source_block(rank).map(|i| i as u64)));
            }
            failures
        })
        .unwrap();
    let failures: Vec<String> = results.into_iter().flatten().collect();
    assert!(failures.is_empty(), "{ns}→{nt} of {total}: {failures:#?}");
}

#[test]
fn every_method_and_strategy_moves_the_data() {
    for (ns, nt) in [(2, 5), (5, 2), (6, 3), (3, 6), (4, 4)] {
        for total in [0, 3, 1000, 1009] {
            moves(total, ns, nt);
        }
    }
}

#[test]
fn every_method_and_strategy_moves_the_data_20_40() {
    moves(100_003, 20, 40);
    moves(100_003, 40, 20);
    moves(30, 40, 20); // fewer elements than ranks
}

#[test]
fn background_work_runs_and_tests() {
    let out = Runtime::builder()
        .ranks(4)
        .threading(Threading::Multiple)
        .run(|universe| {
            let world = universe.world();
            let rank = world.rank() as usize;
            let plan = Plan::block(40, 2, 4).unwrap();
            let mut src: Vec<u32> = if rank < 2 {
                plan.source_block(rank).map(|i| i as u32).collect()
            } else {
                Vec::new()
            };
            let mut dst = vec![0u32; 10];
            let mut ran = 0;
            let tests = plan
                .redistribute_in_background(
                    &world,
                    Method::RmaLock,
                    Strategy::WaitTargets,
                    &mut src,
                    &mut dst,
                    |flight| {
                        ran += 1;
                        while !flight.test().unwrap() {}
                        flight.tests()
                    },
                )
                .unwrap();
            (ran, tests, dst)
        })
        .unwrap();
    for (rank, (ran, tests, dst)) in out.into_iter().enumerate() {
        assert_eq!(ran, 1);
        assert!(tests >= 1, "rank {rank} tested {tests} times");
        let want: Vec<u32> = (rank as u32 * 10..rank as u32 * 10 + 10).collect();
        assert_eq!(dst, want);
    }
}

#[test]
fn sizes_that_do_not_add_up_are_refused() {
    let err = Plan::from_blocks(&[3, 4], &[8]).unwrap_err();
    assert!(
        matches!(&err, Error::Arg(ArgError::PlanSizes { sources, targets })
            if sources == &[3, 4] && targets == &[8]),
        "{err:?}"
    );
    assert!(err
        .to_string()
        .contains("hold 7 elements but the 1 target blocks hold 8"));
    assert!(matches!(
        Plan::from_blocks(&[], &[0]),
        Err(Error::Arg(ArgError::PlanSizes { .. }))
    ));
    assert!(matches!(
        Plan::block(10, 0, 3),
        Err(Error::Arg(ArgError::PlanSizes { .. }))
    ));
    assert!(Plan::from_blocks(&[usize::MAX, 1], &[1]).is_err());
}

#[test]
fn bad_buffers_and_communicators_are_errors_on_every_rank() {
    let out = Runtime::builder()
        .ranks(3)
        .threading(Threading::Multiple)
        .run(|universe| {
            let world = universe.world();
            let rank = world.rank() as usize;
            let mut errors = Vec::new();
            // A plan wider than the communicator.
            let wide = Plan::block(12, 4, 2).unwrap();
            let (mut src, mut dst) = (vec![0u8; 3], vec![0u8; 6]);
            errors.push(wide.redistribute(&world, Method::Collective, &mut src, &mut dst));
            // Buffers too small: every rank's target buffer is one short.
            let plan = Plan::block(12, 3, 3).unwrap();
            let mut src = vec![0u8; 4];
            let mut short = vec![0u8; 3];
            for method in Method::ALL {
                errors.push(plan.redistribute(&world, method, &mut src, &mut short));
                errors.push(plan.redistribute_in_background(
                    &world,
                    method,
                    Strategy::WaitTargets,
                    &mut src,
                    &mut short,
                    |_| (),
                ));
            }
            // Source buffer too small.
            let mut tiny = vec![0u8; 2];
            let mut dst = vec![0u8; 4];
            errors.push(plan.redistribute(&world, Method::RmaLockAll, &mut tiny, &mut dst));
            (rank, errors)
        })
        .unwrap();
    for (rank, errors) in out {
        assert!(
            matches!(
                &errors[0],
                Err(Error::Arg(ArgError::PlanRanks {
                    sources: 4,
                    targets: 2,
                    size: 3
                }))
            ),
            "{:?}",
            errors[0]
        );
        for e in &errors[1..7] {
            assert!(
                matches!(e, Err(Error::Arg(ArgError::RedistributionBuffer { role: "target", needed: 4, len: 3, rank: r })) if *r as usize == rank),
                "{e:?}"
            );
        }
        assert!(
            matches!(
                &errors[7],
                Err(Error::Arg(ArgError::RedistributionBuffer {
                    role: "source",
                    needed: 4,
                    len: 2,
                    ..
                }))
            ),
            "{:?}",
            errors[7]
        );
    }
}

#[test]
fn threading_needs_thread_multiple() {
    let out = myriad::run(2, |universe| {
        let world = universe.world();
        let plan = Plan::block(4, 2, 2).unwrap();
        let (mut src, mut dst) = (vec![0i32; 2], vec![0i32; 2]);
        plan.redistribute_in_background(
            &world,
            Method::Collective,
            Strategy::Threading,
            &mut src,
            &mut dst,
            |_| (),
        )
    })
    .unwrap();
    for r in out {
        match r {
            Err(Error::Unsupported { what }) => assert!(what.contains("Threading::Multiple")),
            other => panic!("expected Unsupported, got {other:?}"),
        }
    }
}

/// Two ranks redistribute a block of 8 elements from both (sources) into
/// rank 0 (the one target) with `method` and `strategy`; `work` runs on
/// each rank while it is in flight, with the rank, its peer and the
/// flight. Returns per rank what `work` returned and the rank's target
/// buffer.
fn eight_to_one<T: Send>(
    method: Method,
    strategy: Strategy,
    work: impl Fn(usize, &Process<'_>, &mut InFlight<'_>) -> T + Sync,
) -> Vec<(T, Vec<u16>)> {
    myriad::run(2, |universe| {
        let world = universe.world();
        let comm = world.duplicate();
        let rank = world.rank() as usize;
        let plan = Plan::block(8, 2, 1).unwrap();
        let mut src: Vec<u16> = plan.source_block(rank).map(|i| i as u16).collect();
        let mut dst = vec![0u16; if rank == 0 { 8 } else { 0 }];
        let peer = world.process_at_rank(1 - rank as i32);
        let done = plan
            .redistribute_in_background(&comm, method, strategy, &mut src, &mut dst, |flight| {
                work(rank, &peer, flight)
            })
            .unwrap();
        (done, dst)
    })
    .unwrap()
}

/// Wait Targets: a rank with nothing to read is not done until every
/// target has read and entered the barrier. Rank 1 (a source only) tests
/// once and tells rank 0 (source and target) what it saw; rank 0 enters
/// the barrier only in its first test, after hearing from rank 1, so rank
/// 1's first test must say "not done" under Wait Targets (and "done" under
/// Non-blocking RMA, which has no barrier). Fails if the barrier is skipped
/// or entered before the reads.
#[test]
fn wait_targets_holds_sources_until_targets_read() {
    for method in Method::ALL {
        for strategy in [Strategy::WaitTargets, Strategy::NonBlocking] {
            let out = eight_to_one(method, strategy, |rank, peer, flight| {
                if rank == 1 {
                    let first = flight.test().unwrap();
                    peer.send(&u8::from(first));
                    flight.wait().unwrap();
                    first
                } else {
                    let (_, _) = peer.receive::<u8>();
                    flight.wait().unwrap();
                    true
                }
            });
            assert_eq!(out[0].1, (0..8).collect::<Vec<u16>>());
            let expect_done = strategy == Strategy::NonBlocking && method != Method::Collective;
            if strategy == Strategy::WaitTargets || expect_done {
                assert_eq!(
                    out[1].0,
                    expect_done,
                    "{} {}: the source's first test",
                    method.name(),
                    strategy.name()
                );
            }
        }
    }
}

/// `InFlight::is_mine_done`, which lets the CG emulator skip a second
/// agreement per iteration: under Wait Targets rank 1 (a source with
/// nothing to read) has its own part complete at its first test (it
/// entered the barrier) while the whole is not (rank 0 has not read);
/// rank 0, a target whose reads are not issued yet (`test_bounded(0)`),
/// has neither; after `wait` both have both. Under Non-blocking the two
/// agree. Fails if the own-part flag runs ahead of a target's reads or
/// lags a source's barrier. The RMA methods only: the immediate
/// all-to-all's progress at a first test is the runtime's choice.
#[test]
fn own_part_completes_before_the_whole_under_wait_targets() {
    for method in [Method::RmaLock, Method::RmaLockAll] {
        for strategy in [Strategy::WaitTargets, Strategy::NonBlocking] {
            let out = eight_to_one(method, strategy, |rank, peer, flight| {
                let first = if rank == 1 {
                    flight.test().unwrap();
                    let first = (flight.is_done(), flight.is_mine_done());
                    peer.send(&0u8);
                    first
                } else {
                    let (_, _) = peer.receive::<u8>();
                    flight.test_bounded(0).unwrap();
                    (flight.is_done(), flight.is_mine_done())
                };
                flight.wait().unwrap();
                (first, (flight.is_done(), flight.is_mine_done()))
            })
            .into_iter()
            .map(|(seen, _)| seen)
            .collect::<Vec<_>>();
            let what = format!("{} {}", method.name(), strategy.name());
            let wt = strategy == Strategy::WaitTargets;
            assert_eq!(out[1].0, (!wt, true), "{what}: the source's first test");
            assert_eq!(
                out[0].0,
                (false, false),
                "{what}: the target before its reads"
            );
            assert_eq!(out[0].1, (true, true), "{what}: the target after wait");
            assert_eq!(out[1].1, (true, true), "{what}: the source after wait");
        }
    }
}

/// A background strategy lets the rank work before the data has moved:
/// rank 0's `work` sends the message rank 1 waits for before it joins the
/// redistribution. Under Threading (every method) and the immediate
/// collective (COL under Non-blocking and Wait Targets) this completes;
/// under Blocking rank 0 waits in the redistribution for rank 1, which
/// waits for the message: the job must fail with a deadlock report (which
/// also shows the test can fail). RMA under Non-blocking or Wait Targets is
/// not asserted: creating the window is collective, as `MPI_Win_create` is.
#[test]
fn background_strategies_let_the_rank_work_first() {
    let cases = [
        (Method::Collective, Strategy::NonBlocking, true),
        (Method::Collective, Strategy::WaitTargets, true),
        (Method::Collective, Strategy::Threading, true),
        (Method::RmaLock, Strategy::Threading, true),
        (Method::RmaLockAll, Strategy::Threading, true),
        (Method::Collective, Strategy::Blocking, false),
        (Method::RmaLockAll, Strategy::Blocking, false),
    ];
    for (method, strategy, completes) in cases {
        let result = Runtime::builder()
            .ranks(2)
            .threading(Threading::Multiple)
            .run(move |universe| {
                let world = universe.world();
                let comm = world.duplicate();
                let rank = world.rank();
                let plan = Plan::block(8, 2, 2).unwrap();
                let mut src: Vec<i64> =
                    plan.source_block(rank as usize).map(|i| i as i64).collect();
                let mut dst = vec![-1i64; 4];
                if rank == 1 {
                    let (_, _) = world.process_at_rank(0).receive::<u8>();
                }
                plan.redistribute_in_background(
                    &comm,
                    method,
                    strategy,
                    &mut src,
                    &mut dst,
                    |flight| {
                        if rank == 0 {
                            world.process_at_rank(1).send(&1u8);
                        }
                        flight.wait().unwrap();
                    },
                )
                .unwrap();
                dst
            });
        let label = format!("{} {}", method.name(), strategy.name());
        if completes {
            let out = result.unwrap_or_else(|e| panic!("{label}: {e}"));
            assert_eq!(out, vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]], "{label}");
        } else {
            assert!(
                matches!(result, Err(Error::Deadlock { .. })),
                "{label}: expected a deadlock, got {result:?}"
            );
        }
    }
}

#[test]
fn cg_emulator_result_does_not_depend_on_the_resize() {
    let setup = sam::Setup {
        n: 1000,
        band: 3,
        payload: 777,
        iters: 3,
        piece: usize::MAX,
    };
    let cases = [
        (3, 5, Method::Collective, Strategy::Blocking),
        (3, 5, Method::RmaLockAll, Strategy::WaitTargets),
        (3, 5, Method::RmaLock, Strategy::Threading),
        (5, 2, Method::Collective, Strategy::WaitTargets),
        (5, 2, Method::RmaLockAll, Strategy::NonBlocking),
        (5, 2, Method::RmaLock, Strategy::Blocking),
    ];
    for (ns, nt, method, strategy) in cases {
        let what = format!("{ns}->{nt} {}-{}", method.name(), strategy.name());
        let f = sam::case(setup, ns, nt, method, strategy).expect(&what);
        assert!(f.ok, "{what}: an element was misplaced");
        // Warm-up and timed iterations before, after (T_it(NS) twice,
        // around the background phase) and on the targets (T_it(NT)),
        // plus those during.
        assert_eq!(
            f.done,
            3 * (setup.iters as u64 + 1) + f.iters_during,
            "{what}"
        );
        let want = sam::reference(setup.n, setup.band, ns, f.done);
        assert!(
            (f.rr - want).abs() <= 1e-9 * want.abs(),
            "{what}: r.r {} after {} iterations, {want} without the resize",
            f.rr,
            f.done
        );
    }
}

/// `test_bounded` reads at most its budget per test, every element once.
#[test]
fn bounded_tests_read_in_pieces() {
    const BUDGET: usize = 40; // bytes: 5 u64, not a divisor of the pieces
    for method in [Method::RmaLock, Method::RmaLockAll] {
        for strategy in [Strategy::NonBlocking, Strategy::WaitTargets] {
            for (ns, nt) in [(2, 3), (3, 2), (4, 1)] {
                let total = 97;
                let out = myriad::run(ns.max(nt), move |universe| {
                    let world = universe.world();
                    let comm = world.duplicate();
                    let rank = world.rank() as usize;
                    let plan = Plan::block(total, ns, nt).unwrap();
                    let mut src: Vec<u64> = if rank < ns {
                        plan.source_block(rank).map(|i| i as u64).collect()
                    } else {
                        Vec::new()
                    };
                    let block = if rank < nt {
                        plan.target_block(rank)
                    } else {
                        0..0
                    };
                    let mut dst = vec![u64::MAX; block.len()];
                    let (tests, read) = plan
                        .redistribute_in_background(
                            &comm,
                            method,
                            strategy,
                            &mut src,
                            &mut dst,
                            |f| {
                                while !f.test_bounded(BUDGET).unwrap() {
                                    myriad::yield_when_idle();
                                }
                                (f.tests(), f.read_bytes())
                            },
                        )
                        .unwrap();
                    let exact = dst.iter().copied().eq(block.clone().map(|i| i as u64));
                    (rank, block.len(), exact, tests, read)
                })
                .unwrap();
                for (rank, len, exact, tests, (read, most)) in out {
                    let case = format!(
                        "{} {} {ns}->{nt} rank {rank}",
                        method.name(),
                        strategy.name()
                    );
                    assert!(exact, "{case}: data");
                    assert_eq!(read, len * 8, "{case}: bytes issued");
                    assert!(most <= BUDGET, "{case}: {most} bytes in one test");
                    if len > 0 {
                        assert!(tests >= (len * 8).div_ceil(BUDGET), "{case}: {tests} tests");
                    }
                }
            }
        }
    }
}

/// `test_bounded(0)` only tests: no read issued, not done while the rank
/// has data to read; the bounded tests after it read everything.
#[test]
fn a_zero_budget_issues_no_reads() {
    for method in [Method::RmaLock, Method::RmaLockAll] {
        for strategy in [Strategy::NonBlocking, Strategy::WaitTargets] {
            let (ns, nt) = (2, 3);
            let out = myriad::run(nt, move |universe| {
                let world = universe.world();
                let comm = world.duplicate();
                let rank = world.rank() as usize;
                let plan = Plan::block(60, ns, nt).unwrap();
                let mut src: Vec<u64> = if rank < ns {
                    plan.source_block(rank).map(|i| i as u64).collect()
                } else {
                    Vec::new()
                };
                let block = plan.target_block(rank);
                let mut dst = vec![u64::MAX; block.len()];
                let zero = plan
                    .redistribute_in_background(&comm, method, strategy, &mut src, &mut dst, |f| {
                        let mut zero = Vec::new();
                        for _ in 0..3 {
                            zero.push((f.test_bounded(0).unwrap(), f.read_bytes()));
                        }
                        while !f.test_bounded(16).unwrap() {
                            myriad::yield_when_idle();
                        }
                        zero
                    })
                    .unwrap();
                let exact = dst.iter().copied().eq(block.map(|i| i as u64));
                (exact, zero)
            })
            .unwrap();
            for (rank, (exact, zero)) in out.into_iter().enumerate() {
                let case = format!("{} {} rank {rank}", method.name(), strategy.name());
                assert!(exact, "{case}: data");
                assert!(
                    zero.iter().all(|&z| z == (false, (0, 0))),
                    "{case}: a zero budget gave {zero:?}"
                );
            }
        }
    }
}

/// A rank that stops testing after one piece (its `work` returns) still
/// completes, and so do the others, which keep testing.
#[test]
fn a_peer_that_stops_testing_does_not_hang() {
    for method in [Method::RmaLock, Method::RmaLockAll, Method::Collective] {
        for strategy in [Strategy::NonBlocking, Strategy::WaitTargets] {
            let (ns, nt) = (3, 5);
            let out = myriad::run(nt, move |universe| {
                let world = universe.world();
                let comm = world.duplicate();
                let rank = world.rank() as usize;
                let plan = Plan::block(1000, ns, nt).unwrap();
                let mut src: Vec<u32> = if rank < ns {
                    plan.source_block(rank).map(|i| i as u32).collect()
                } else {
                    Vec::new()
                };
                let block = plan.target_block(rank);
                let mut dst = vec![u32::MAX; block.len()];
                plan.redistribute_in_background(&comm, method, strategy, &mut src, &mut dst, |f| {
                    if rank == 0 {
                        f.test_bounded(16).unwrap();
                    } else {
                        while !f.test_bounded(16).unwrap() {
                            myriad::yield_when_idle();
                        }
                    }
                })
                .unwrap();
                dst.iter().copied().eq(block.map(|i| i as u32))
            })
            .unwrap();
            assert!(
                out.iter().all(|&ok| ok),
                "{} {}: {out:?}",
                method.name(),
                strategy.name()
            );
        }
    }
}

/// On one worker, a rank in `yield_when_idle` waits while another rank
/// is runnable (even one that keeps yielding).
#[test]
fn idle_yield_runs_after_the_other_ranks() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let steps = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&steps);
    let out = Runtime::builder()
        .ranks(2)
        .workers(1)
        .run(move |universe| {
            let world = universe.world();
            if world.rank() == 0 {
                myriad::yield_when_idle();
                seen.load(Ordering::SeqCst)
            } else {
                for _ in 0..50 {
                    seen.fetch_add(1, Ordering::SeqCst);
                    myriad::yield_now();
                }
                0
            }
        })
        .unwrap();
    assert_eq!(out[0], 50, "the idle rank ran before the busy one finished");
    let _ = steps;
}

/// Threading called from an OS thread acting for a rank (its helper is an
/// OS thread then: such a caller has no worker to start a task on) moves
/// the data too.
#[test]
fn threading_from_an_os_thread_of_the_rank() {
    let out = Runtime::builder()
        .ranks(2)
        .threading(Threading::Multiple)
        .run(|universe| {
            let world = universe.world();
            let comm = world.duplicate();
            let rank = world.rank() as usize;
            let plan = Plan::block(8, 2, 2).unwrap();
            let mut src: Vec<i64> = plan.source_block(rank).map(|i| i as i64).collect();
            let mut dst = vec![-1i64; 4];
            myriad::thread::scope(|s| {
                s.spawn(|| {
                    plan.redistribute_in_background(
                        &comm,
                        Method::RmaLockAll,
                        Strategy::Threading,
                        &mut src,
                        &mut dst,
                        |flight| flight.wait().unwrap(),
                    )
                    .unwrap()
                })
                .join()
                .unwrap()
            });
            dst
        })
        .unwrap();
    assert_eq!(out, vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]]);
}

/// A rank whose `work` panics while its Threading helper waits in the
/// redistribution for a peer (rank 1 joins only after a message rank 0
/// never sends): the job fails naming rank 0's panic, no hang, and the
/// helper never outlives the buffers it borrows (the unwinding rank
/// settles its request as an immediate collective's).
#[test]
fn a_panic_beside_the_threading_helper_fails_the_job() {
    for method in Method::ALL {
        let result = Runtime::builder()
            .ranks(2)
            .threading(Threading::Multiple)
            .run(move |universe| {
                let world = universe.world();
                let comm = world.duplicate();
                let rank = world.rank() as usize;
                let plan = Plan::block(8, 2, 2).unwrap();
                let mut src: Vec<i64> = plan.source_block(rank).map(|i| i as i64).collect();
                let mut dst = vec![-1i64; 4];
                if rank == 1 {
                    let (_, _) = world.process_at_rank(0).receive::<u8>();
                }
                plan.redistribute_in_background(
                    &comm,
                    method,
                    Strategy::Threading,
                    &mut src,
                    &mut dst,
                    |flight| {
                        let _ = flight.test();
                        panic!("work failed on purpose");
                    },
                )
                .unwrap();
            });
        match result {
            Err(Error::Panic { rank, message }) => {
                assert_eq!(rank, 0, "{}", method.name());
                assert!(
                    message.contains("on purpose"),
                    "{}: {message}",
                    method.name()
                );
            }
            other => panic!("{}: expected rank 0's panic, got {other:?}", method.name()),
        }
    }
}
