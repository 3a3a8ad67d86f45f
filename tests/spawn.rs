//! Growing and shrinking a running job: spawning ranks as coroutines
//! (`Communicator::spawn_ranks`), the children's `parent()`, merging both
//! sides, nested spawns, retiring ranks (`Communicator::shrink`), and the
//! bad input of issue 13 (limits, stack budget, retiring a root, a
//! spawned rank that panics or waits forever).

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use myriad::collective::SystemOperation;
use myriad::topology::MergeOrder;
use myriad::traits::*;
use myriad::{ArgError, ResourceError};
use myriad::{Error, Runtime, StackGuard};

fn sum(comm: &impl Communicator, x: i64) -> i64 {
    let mut total = 0;
    comm.all_reduce_into(&x, &mut total, SystemOperation::sum());
    total
}

/// 4 parents spawn 3 children; both sides merge (parents low) and run an
/// all-reduce, a barrier and point-to-point between a parent and a child;
/// the children report over a duplicate of the inter-communicator.
/// Fails if the merged order is not parents then children, if a child's
/// world or parent() is wrong, or if a message goes astray.
#[test]
fn spawned_children_merge_with_their_parents() {
    let out = myriad::run(4, |universe| {
        let world = universe.world();
        assert!(world.parent().is_none(), "started ranks have no parent");
        assert!(universe.parent().is_none());
        let inter = world
            .spawn_ranks(3, |child| {
                let world = child.world();
                assert_eq!(world.size(), 3, "the children's own world");
                let parent = child.parent().expect("a spawned rank has a parent");
                assert_eq!(parent.remote_size(), 4);
                assert_eq!(parent.rank(), world.rank());
                assert!(world.parent().is_some(), "the trait method agrees");
                // Children's world works on its own.
                assert_eq!(sum(&world, 1), 3);
                let merged = parent.merge(MergeOrder::High);
                assert_eq!(merged.size(), 7);
                assert_eq!(merged.rank(), 4 + world.rank());
                assert_eq!(sum(&merged, merged.rank() as i64), 21);
                merged.barrier();
                // Child 0 (merged rank 4) answers parent 1.
                if world.rank() == 0 {
                    let (x, status) = merged.process_at_rank(1).receive::<i64>();
                    assert_eq!(status.source_rank(), 1);
                    merged.process_at_rank(1).send(&(x * 10));
                }
                // And every child reports to parent 0 over a duplicate of
                // the inter-communicator.
                let dup = parent.duplicate();
                dup.process_at_rank(0).send(&(world.rank() as i64 + 100));
            })
            .unwrap();
        assert_eq!((inter.size(), inter.remote_size()), (4, 3));
        let merged = inter.merge(MergeOrder::Low);
        assert_eq!((merged.size(), merged.rank()), (7, world.rank()));
        assert_eq!(sum(&merged, merged.rank() as i64), 21);
        merged.barrier();
        let mut got = 0;
        if world.rank() == 1 {
            merged.process_at_rank(4).send(&7i64);
            got = merged.process_at_rank(4).receive::<i64>().0;
        }
        let dup = inter.duplicate();
        let mut reports = Vec::new();
        if world.rank() == 0 {
            for _ in 0..3 {
                reports.push(dup.any_process().receive::<i64>().0);
            }
            reports.sort();
        }
        (got, reports)
    })
    .unwrap();
    assert_eq!(out.len(), 4, "run returns the started ranks' results");
    assert_eq!(out[1].0, 70);
    assert_eq!(out[0].1, [100, 101, 102]);
}

/// The root may be any rank, and only its arguments count: rank 2 spawns
/// 2 children; the other ranks pass 99 and a closure that would fail.
/// Fails if a non-root's size or closure were used.
#[test]
fn only_the_roots_arguments_count() {
    let ran = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&ran);
    myriad::run(3, move |universe| {
        let world = universe.world();
        let inter = if world.rank() == 2 {
            let ran = Arc::clone(&seen);
            world.spawn_ranks_from(2, 2, move |child| {
                ran.fetch_add(1, Ordering::SeqCst);
                child.parent().unwrap().merge(MergeOrder::High).barrier();
            })
        } else {
            world.spawn_ranks_from(2, 99, |_| panic!("not the root's closure"))
        }
        .unwrap();
        assert_eq!(inter.remote_size(), 2);
        inter.merge(MergeOrder::Low).barrier();
    })
    .unwrap();
    assert_eq!(ran.load(Ordering::SeqCst), 2);
}

/// A child spawns grandchildren, which see the child's world as their
/// parent; the grandchildren's sum travels back to the first parents.
/// Fails if nested groups mix up their worlds or parents.
#[test]
fn nested_spawns_have_their_own_parents() {
    let out = myriad::run(2, |universe| {
        let world = universe.world();
        let inter = world
            .spawn_ranks(3, |child| {
                let world = child.world();
                let grand = world
                    .spawn_ranks(2, |grandchild| {
                        let parent = grandchild.parent().unwrap();
                        assert_eq!(parent.remote_size(), 3, "the children are the parents");
                        assert_eq!(grandchild.world().size(), 2);
                        let merged = parent.merge(MergeOrder::High);
                        assert_eq!(merged.size(), 5);
                        sum(&merged, 1000);
                    })
                    .unwrap();
                let merged = grand.merge(MergeOrder::Low);
                let total = sum(&merged, 1000);
                // Child 0 reports the total to the first parents' rank 0.
                if world.rank() == 0 {
                    child.parent().unwrap().process_at_rank(0).send(&total);
                }
            })
            .unwrap();
        if world.rank() == 0 {
            inter.any_process().receive::<i64>().0
        } else {
            0
        }
    })
    .unwrap();
    assert_eq!(out[0], 5000);
}

/// 6 ranks; the odd ones retire; the survivors run collectives on the new
/// communicator while the retired ones return. Fails if the survivors'
/// order or size is wrong or a retired rank gets a communicator.
#[test]
fn retired_ranks_finish_and_survivors_go_on() {
    let out = myriad::run(6, |universe| {
        let world = universe.world();
        let keep = world.rank() % 2 == 0;
        let survivors = world.shrink(keep).unwrap();
        match survivors {
            None => {
                assert!(!keep);
                None
            }
            Some(comm) => {
                assert_eq!(comm.size(), 3);
                assert_eq!(comm.rank(), world.rank() / 2);
                comm.barrier();
                Some(sum(&comm, world.rank() as i64))
            }
        }
    })
    .unwrap();
    assert_eq!(out, [Some(6), None, Some(6), None, Some(6), None]);
}

/// Grow then shrink back: 2 ranks spawn 6, merge, then the children retire
/// and the parents keep a communicator of 2. Fails if the merged
/// communicator cannot be shrunk by the ranks spawned into it.
#[test]
fn spawned_ranks_can_retire_again() {
    let out = myriad::run(2, |universe| {
        let world = universe.world();
        let inter = world
            .spawn_ranks(6, |child| {
                let merged = child.parent().unwrap().merge(MergeOrder::High);
                assert!(merged.shrink(false).unwrap().is_none());
            })
            .unwrap();
        let merged = inter.merge(MergeOrder::Low);
        let back = merged.shrink(true).unwrap().unwrap();
        (back.size(), sum(&back, 1))
    })
    .unwrap();
    assert_eq!(out, [(2, 2), (2, 2)]);
}

/// Rank 0 starts an immediate reduce to itself on a duplicate of the world
/// and does not wait; all ranks shrink the world with rank 0 retiring:
/// every rank gets the error naming rank 0, nothing is split, and the job
/// goes on (the reduce completes). Fails if the retirement of a root with a
/// pending collective went through.
#[test]
fn retiring_the_root_of_a_pending_collective_is_an_error() {
    let out = myriad::run(3, |universe| {
        let world = universe.world();
        let dup = world.duplicate();
        let x = world.rank() as i64 + 1;
        let mut total = 0i64;
        let err = myriad::request::scope(|scope| {
            let request = (world.rank() == 0).then(|| {
                dup.process_at_rank(0).immediate_reduce_into_root(
                    scope,
                    &x,
                    &mut total,
                    SystemOperation::sum(),
                )
            });
            let err = world.shrink(world.rank() != 0).unwrap_err();
            if world.rank() != 0 {
                dup.process_at_rank(0)
                    .reduce_into(&x, SystemOperation::sum());
            }
            if let Some(request) = request {
                request.wait();
            }
            err
        });
        // After the reduce completed, retiring rank 0 is fine.
        let again = world.shrink(world.rank() != 0).unwrap();
        (err, total, again.map(|c| c.size()))
    })
    .unwrap();
    for (rank, (err, _, _)) in out.iter().enumerate() {
        match err {
            Error::Arg(ArgError::RetiringRoot { roots, .. }) => {
                assert_eq!(roots, &[(0, 1)], "rank {rank}")
            }
            other => panic!("rank {rank}: {other}"),
        }
        assert!(err.to_string().contains("rank 0 (1)"), "{err}");
    }
    assert_eq!(out[0].1, 6);
    assert_eq!(out[0].2, None);
    assert_eq!(out[1].2, Some(2));
}

/// A limit of 10 ranks: spawning 7 into a job of 4 fails at every parent
/// with the same error naming the limit; the job is intact (the parents go
/// on, a spawn within the limit still works). Fails if the spawn over the
/// limit grew the job or hung.
#[test]
fn spawning_beyond_the_limit_is_an_error_and_the_job_goes_on() {
    let out = Runtime::builder()
        .ranks(4)
        .max_ranks(10)
        .run(|universe| {
            let world = universe.world();
            assert_eq!(universe.size(), Some(10), "MPI_UNIVERSE_SIZE is the limit");
            let err = world
                .spawn_ranks(7, |_| unreachable!("never spawned"))
                .unwrap_err();
            assert_eq!(sum(&world, 1), 4, "the parents go on");
            let inter = world
                .spawn_ranks(6, |child| {
                    child.parent().unwrap().merge(MergeOrder::High).barrier();
                })
                .expect("within the limit");
            inter.merge(MergeOrder::Low).barrier();
            // Now at the limit: one more is refused.
            let full = world.spawn_ranks(1, |_| ()).unwrap_err();
            (err, full)
        })
        .unwrap();
    for (err, full) in &out {
        assert_eq!(
            err,
            &Error::Resources(ResourceError::RankLimit {
                asked: 7,
                ranks: 4,
                max: 10
            })
        );
        assert!(err.to_string().contains("MYRIAD_MAX_RANKS"), "{err}");
        assert!(matches!(
            full,
            Error::Resources(ResourceError::RankLimit { ranks: 10, .. })
        ));
    }
}

/// A limit below the ranks started is a configuration error.
#[test]
fn a_limit_below_the_started_ranks_is_refused() {
    let err = Runtime::builder()
        .ranks(4)
        .max_ranks(3)
        .run(|_| ())
        .unwrap_err();
    assert!(matches!(err, Error::Config { .. }), "{err}");
    assert!(err.to_string().contains("MYRIAD_MAX_RANKS=3"), "{err}");
}

/// With mprotect guard pages every stack costs two memory mappings: a
/// spawn of more stacks than `vm.max_map_count` allows fails with the
/// budget's error at every parent, before anything is created; the job
/// goes on. Fails if the spawn were attempted (it would fail mapping
/// stacks, failing the job) or the error did not name the sysctl.
#[test]
fn spawning_beyond_the_stack_budget_is_an_error() {
    let out = Runtime::builder()
        .ranks(2)
        .stack_guard(StackGuard::Mprotect)
        .max_ranks(1 << 30)
        .run(|universe| {
            let world = universe.world();
            let err = world.spawn_ranks(1 << 29, |_| ()).unwrap_err();
            world.barrier();
            err
        })
        .unwrap();
    for err in out {
        assert!(
            matches!(err, Error::Resources(ResourceError::MapCount { .. })),
            "{err}"
        );
        assert!(err.to_string().contains("vm.max_map_count"), "{err}");
    }
}

/// A spawned rank that panics fails the job, naming its world rank (4:
/// the first after the 4 started ranks) and its message.
#[test]
fn a_spawned_rank_that_panics_fails_the_job_naming_it() {
    let err = myriad::run(4, |universe| {
        let world = universe.world();
        let inter = world
            .spawn_ranks(2, |child| {
                if child.world().rank() == 0 {
                    panic!("child trouble");
                }
            })
            .unwrap();
        // The parents wait for a message that never comes.
        if world.rank() == 0 {
            inter.any_process().receive::<u8>();
        }
    })
    .unwrap_err();
    match &err {
        Error::Panic { rank, message } => {
            assert_eq!(*rank, 4);
            assert!(message.contains("child trouble"), "{message}");
        }
        other => panic!("expected the child's panic, got {other}"),
    }
}

/// A spawned rank that waits forever for a message is reported in the
/// deadlock report, with its wait, once every other rank finished. Fails
/// if the detector ignored the spawned rank (the job would hang: the
/// test harness times out) or did not name it.
#[test]
fn a_spawned_rank_waiting_forever_is_reported() {
    let err = myriad::run(2, |universe| {
        let world = universe.world();
        world
            .spawn_ranks(1, |child| {
                child.parent().unwrap().process_at_rank(1).receive::<u32>();
            })
            .unwrap();
    })
    .unwrap_err();
    let Error::Deadlock { report } = &err else {
        panic!("expected a deadlock, got {err}");
    };
    assert!(report.contains("rank 2:"), "{report}");
    assert!(report.contains("receive"), "{report}");
    assert!(report.contains("spawned from MPI_COMM_WORLD"), "{report}");
}

/// HLS groups are fixed at start: a spawned rank asking for its group
/// fails the job with a message that says so (not an index out of range).
#[test]
fn a_spawned_rank_has_no_hls_group() {
    let err = myriad::run(2, |universe| {
        let world = universe.world();
        assert_eq!(myriad::hls::HlsLevel::Process.group().size(), 2);
        let inter = world
            .spawn_ranks(1, |child| {
                let _ = myriad::hls::HlsLevel::Process.group();
                child.parent().unwrap().merge(MergeOrder::High);
            })
            .unwrap();
        inter.merge(MergeOrder::Low);
    })
    .unwrap_err();
    match &err {
        Error::Panic { rank: 2, message } => {
            assert!(message.contains("spawned while the job ran"), "{message}")
        }
        other => panic!("expected rank 2's panic, got {other}"),
    }
}

/// Bad arguments: no ranks, a root out of range, an inter-communicator
/// as the parent, the rsmpi form that launches a program. Each is an
/// error and the job goes on.
#[test]
fn bad_spawns_are_errors() {
    let out = myriad::run(2, |universe| {
        let world = universe.world();
        let none = world.spawn_ranks(0, |_| ()).unwrap_err();
        let root = world.spawn_ranks_from(5, 1, |_| ()).unwrap_err();
        let inter = world
            .spawn_ranks(1, |child| {
                child.parent().unwrap().merge(MergeOrder::High);
            })
            .unwrap();
        let from_inter = inter.spawn_ranks(1, |_| ()).unwrap_err();
        let shrink_inter = inter.shrink(true).unwrap_err();
        inter.merge(MergeOrder::Low);
        let program = world
            .process_at_rank(0)
            .spawn(&Command::new("true"), 2)
            .unwrap_err();
        world.barrier();
        (none, root, from_inter, shrink_inter, program)
    })
    .unwrap();
    for (none, root, from_inter, shrink_inter, program) in out {
        assert!(
            matches!(none, Error::Arg(ArgError::NoRanksToSpawn { .. })),
            "{none}"
        );
        assert!(matches!(root, Error::Rank { .. }), "{root}");
        assert!(
            matches!(
                from_inter,
                Error::Arg(ArgError::WrongKindOfCommunicator { .. })
            ),
            "{from_inter}"
        );
        assert!(
            matches!(
                shrink_inter,
                Error::Arg(ArgError::WrongKindOfCommunicator { .. })
            ),
            "{shrink_inter}"
        );
        assert!(matches!(program, Error::Unsupported { .. }), "{program}");
        assert!(program.to_string().contains("spawn_ranks"), "{program}");
    }
}

/// A job of several processes cannot spawn: `Unsupported` at every rank,
/// and the job goes on.
#[test]
fn spawning_across_processes_is_unsupported() {
    let results = Runtime::builder()
        .workers(2)
        .run_joined(&[1, 2], |universe| {
            let world = universe.world();
            let err = world.spawn_ranks(1, |_| ()).unwrap_err();
            world.barrier();
            err
        })
        .unwrap();
    for result in results {
        for err in result.unwrap() {
            assert!(matches!(err, Error::Unsupported { .. }), "{err}");
        }
    }
}

/// Many small spawns from a job that keeps its ranks busy: 20 ranks grow
/// to 160 in 7 spawns of 20 and shrink back, checking the merged
/// collectives each time (a functional check of the grown tables: slot,
/// mailbox and chunk boundaries at 64, 192).
#[test]
fn twenty_grow_to_a_hundred_and_sixty_and_back() {
    let out = myriad::run(20, |universe| {
        let mut comm = universe.world();
        for _ in 0..7 {
            let inter = comm
                .spawn_ranks(20, |child| {
                    let merged = child.parent().unwrap().merge(MergeOrder::High);
                    let n = merged.size() as i64;
                    assert_eq!(sum(&merged, 1), n);
                    // Wait to be retired by the final shrink: first join
                    // every later spawn of the merged communicator.
                    let mut comm = merged;
                    loop {
                        if comm.size() == 160 {
                            break;
                        }
                        let inter = comm.spawn_ranks(20, |_| unreachable!()).unwrap();
                        comm = inter.merge(MergeOrder::Low);
                        assert_eq!(sum(&comm, 1), comm.size() as i64);
                    }
                    assert!(comm.shrink(false).unwrap().is_none());
                })
                .unwrap();
            comm = inter.merge(MergeOrder::Low);
            assert_eq!(sum(&comm, 1), comm.size() as i64);
        }
        assert_eq!(comm.size(), 160);
        let back = comm.shrink(true).unwrap().unwrap();
        (back.size(), sum(&back, 1))
    })
    .unwrap();
    assert!(out.iter().all(|&r| r == (20, 20)));
}
