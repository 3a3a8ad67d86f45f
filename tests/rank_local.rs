//! `rank_local!`: one value per rank, however many ranks share a worker;
//! lazy creation, drop at rank end (also when the job fails), and clear
//! failures where no rank runs.

use std::cell::{Cell, RefCell};
use std::panic;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use myriad::hls::AccessError;
use myriad::traits::*;
use myriad::{Error, Runtime};

/// The message of a caught panic.
fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        String::new()
    }
}

myriad::rank_local! {
    /// Steps counted by each rank.
    static STEPS: Cell<u64> = Cell::new(0);
    /// What each rank wrote, in order.
    static TRAIL: RefCell<Vec<i32>> = RefCell::new(Vec::new());
}

#[test]
fn every_rank_sees_only_its_own_values_across_switches() {
    let ranks = 1000;
    let results = Runtime::builder()
        .ranks(ranks)
        .workers(2)
        .run(|universe| {
            let world = universe.world();
            let rank = world.rank();
            for step in 0..6 {
                STEPS.set(STEPS.get() + rank as u64);
                TRAIL.with_borrow_mut(|t| t.push(rank));
                // Other ranks of the worker run in between.
                if step == 3 {
                    world.barrier();
                } else {
                    myriad::yield_now();
                }
            }
            (STEPS.get(), TRAIL.take())
        })
        .unwrap();
    for (rank, (steps, trail)) in results.into_iter().enumerate() {
        assert_eq!(steps, 6 * rank as u64, "rank {rank}");
        assert_eq!(trail, vec![rank as i32; 6], "rank {rank}");
    }
}

static LAZY_INITS: AtomicUsize = AtomicUsize::new(0);

myriad::rank_local! {
    static LAZY: u64 = {
        LAZY_INITS.fetch_add(1, Ordering::SeqCst);
        42
    };
}

#[test]
fn values_are_created_only_for_ranks_that_access_them() {
    let values = Runtime::builder()
        .ranks(100)
        .workers(2)
        .run(|universe| {
            let rank = universe.world().rank();
            if rank % 3 == 0 {
                // Twice: created once.
                LAZY.with(|v| *v) + LAZY.with(|v| *v)
            } else {
                0
            }
        })
        .unwrap();
    assert_eq!(LAZY_INITS.load(Ordering::SeqCst), 34);
    assert!(values
        .iter()
        .enumerate()
        .all(|(r, &v)| v == if r % 3 == 0 { 84 } else { 0 }));
}

myriad::rank_local! {
    static NEVER_INIT: Cell<u32> = panic!("the initialiser must not run");
    static NEVER_INIT_REF: RefCell<String> = panic!("the initialiser must not run");
}

#[test]
fn set_does_not_run_the_initialiser() {
    let out = myriad::run(3, |universe| {
        let rank = universe.world().rank() as u32;
        NEVER_INIT.set(rank);
        NEVER_INIT.set(NEVER_INIT.get() + 1);
        NEVER_INIT_REF.set(format!("r{rank}"));
        let old = NEVER_INIT.replace(7);
        (
            old,
            NEVER_INIT.get(),
            NEVER_INIT_REF.with_borrow(|s| s.clone()),
        )
    })
    .unwrap();
    for (rank, (old, now, name)) in out.into_iter().enumerate() {
        assert_eq!(old, rank as u32 + 1);
        assert_eq!(now, 7);
        assert_eq!(name, format!("r{rank}"));
    }
}

/// Counts its drops, and records what it saw of the rank-locals while
/// being dropped.
struct Tracked {
    drops: &'static AtomicUsize,
    seen: &'static Mutex<Vec<String>>,
    probe: fn() -> String,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
        let seen = (self.probe)();
        self.seen.lock().unwrap().push(seen);
    }
}

static END_DROPS: AtomicUsize = AtomicUsize::new(0);
static END_SEEN: Mutex<Vec<String>> = Mutex::new(Vec::new());

myriad::rank_local! {
    static END_RANK: Cell<i32> = Cell::new(-1);
    /// Created after END_RANK: dropped before it, so it still sees it.
    static END_SECOND: Tracked = Tracked {
        drops: &END_DROPS,
        seen: &END_SEEN,
        probe: || format!("second:{:?}", END_RANK.try_with(Cell::get)),
    };
    /// Created first and dropped last: END_SECOND is gone by then.
    static END_FIRST: Tracked = Tracked {
        drops: &END_DROPS,
        seen: &END_SEEN,
        probe: || format!("first:{:?}", END_SECOND.try_with(|_| ())),
    };
}

#[test]
fn values_are_dropped_on_their_rank_when_it_ends() {
    let ranks = 50;
    let drops_at_barrier = Runtime::builder()
        .ranks(ranks)
        .workers(2)
        .run(|universe| {
            let world = universe.world();
            END_FIRST.with(|_| ());
            END_RANK.set(world.rank());
            END_SECOND.with(|_| ());
            // No rank has ended before every rank arrived here.
            let drops = END_DROPS.load(Ordering::SeqCst);
            world.barrier();
            drops
        })
        .unwrap();
    // Nothing was dropped while the ranks ran...
    assert!(drops_at_barrier.iter().all(|&d| d == 0));
    // ...and everything when the ranks ended.
    assert_eq!(END_DROPS.load(Ordering::SeqCst), 2 * ranks);
    let seen = END_SEEN.lock().unwrap();
    let mut second: Vec<String> = seen
        .iter()
        .filter(|s| s.starts_with("second"))
        .cloned()
        .collect();
    second.sort();
    let mut expected: Vec<String> = (0..ranks as i32)
        .map(|r| format!("second:Ok({r})"))
        .collect();
    expected.sort();
    // Each destructor ran on its own rank (it read its rank's END_RANK).
    assert_eq!(second, expected);
    // A destructor touching a value already dropped gets the error.
    let first: Vec<&String> = seen.iter().filter(|s| s.starts_with("first")).collect();
    assert_eq!(first.len(), ranks);
    assert!(
        first.iter().all(|s| *s == "first:Err(Destroyed)"),
        "{first:?}"
    );
}

static FAIL_DROPS: AtomicUsize = AtomicUsize::new(0);
static FAIL_SEEN: Mutex<Vec<String>> = Mutex::new(Vec::new());

myriad::rank_local! {
    static FAIL_VALUE: Tracked = Tracked {
        drops: &FAIL_DROPS,
        seen: &FAIL_SEEN,
        probe: String::new,
    };
}

#[test]
fn values_are_dropped_when_the_job_fails() {
    let ranks = 20;
    let err = Runtime::builder()
        .ranks(ranks)
        .workers(2)
        .run(|universe| {
            let world = universe.world();
            FAIL_VALUE.with(|_| ());
            world.barrier();
            if world.rank() == 3 {
                panic!("rank 3 gives up");
            }
            // Everyone else waits forever: unwound by the failing job.
            world.any_process().receive::<u64>();
        })
        .unwrap_err();
    match err {
        Error::Panic { rank, message } => {
            assert_eq!(rank, 3);
            assert!(message.contains("rank 3 gives up"), "{message}");
        }
        other => panic!("unexpected error {other}"),
    }
    assert_eq!(FAIL_DROPS.load(Ordering::SeqCst), ranks);
}

#[test]
fn access_outside_of_any_rank_fails_clearly() {
    assert_eq!(STEPS.try_with(Cell::get), Err(AccessError::OutsideRank));
    let payload = panic::catch_unwind(|| STEPS.get()).unwrap_err();
    let message = panic_message(payload);
    assert!(message.contains("outside of any rank"), "{message}");
    assert!(message.contains("STEPS"), "{message}");
    // From a plain OS thread of a rank, too.
    let out = myriad::run(1, |_| {
        std::thread::spawn(|| STEPS.try_with(Cell::get))
            .join()
            .unwrap()
    })
    .unwrap();
    assert_eq!(out, [Err(AccessError::OutsideRank)]);
}

#[test]
fn parallel_regions_run_outside_of_any_rank() {
    let out = Runtime::builder()
        .ranks(2)
        .workers(2)
        .run(|_| {
            STEPS.set(5);
            let errors = Mutex::new(Vec::new());
            myriad::parallel_for(0..32, 1, |_| {
                errors.lock().unwrap().push(STEPS.try_with(Cell::get));
            });
            // The rank's own value is untouched.
            (errors.into_inner().unwrap(), STEPS.get())
        })
        .unwrap();
    for (errors, own) in out {
        assert_eq!(errors.len(), 32);
        assert!(errors.iter().all(|e| *e == Err(AccessError::OutsideRank)));
        assert_eq!(own, 5);
    }
    // `with` in a chunk panics, which fails the job with the message.
    let err = Runtime::builder()
        .ranks(1)
        .workers(2)
        .run(|_| {
            myriad::parallel_for(0..8, 1, |_| {
                STEPS.with(|_| ());
            });
        })
        .unwrap_err();
    assert!(err.to_string().contains("outside of any rank"), "{err}");
}

myriad::rank_local! {
    static SELF_INIT: u32 = SELF_INIT.with(|v| *v + 1);
}

#[test]
fn an_initialiser_that_touches_its_own_key_panics() {
    let err = myriad::run(1, |_| SELF_INIT.with(|v| *v)).unwrap_err();
    assert!(err.to_string().contains("being initialised"), "{err}");
    assert!(err.to_string().contains("SELF_INIT"), "{err}");
}

thread_local! {
    static PER_THREAD: Cell<u64> = const { Cell::new(0) };
}

myriad::rank_local! {
    static PER_RANK: Cell<u64> = Cell::new(0);
}

/// The caveat of thread-based MPI: a `thread_local!` is shared by the ranks
/// of a worker, a `rank_local!` is not.
#[test]
fn thread_local_is_shared_by_the_ranks_of_a_worker_rank_local_is_not() {
    let (ranks, steps) = (4, 10);
    let out = Runtime::builder()
        .ranks(ranks)
        .workers(1)
        .run(|_| {
            for _ in 0..steps {
                PER_THREAD.set(PER_THREAD.get() + 1);
                PER_RANK.set(PER_RANK.get() + 1);
                myriad::yield_now();
            }
            (PER_THREAD.get(), PER_RANK.get())
        })
        .unwrap();
    assert!(out.iter().all(|&(_, own)| own == steps));
    // The thread-local counted every rank's steps.
    let most = out.iter().map(|&(shared, _)| shared).max().unwrap();
    assert_eq!(most, ranks as u64 * steps);
}

/// A user-defined operation of an immediate collective runs in a task
/// acting for a rank: no rank-local values there.
#[test]
fn tasks_acting_for_a_rank_get_no_values() {
    use myriad::collective::UserOperation;
    let seen = Mutex::new(Vec::new());
    let op = UserOperation::commutative(|x, y| {
        seen.lock().unwrap().push(STEPS.try_with(Cell::get));
        let x: &[u64] = x.downcast().unwrap();
        for (y, x) in y.downcast::<u64>().unwrap().iter_mut().zip(x) {
            *y += x;
        }
    });
    let sums = Runtime::builder()
        .ranks(4)
        .workers(1)
        .run(|universe| {
            let world = universe.world();
            STEPS.set(1);
            let mine = world.rank() as u64;
            let mut sum = 0u64;
            myriad::request::scope(|scope| {
                world
                    .immediate_all_reduce_into(scope, &mine, &mut sum, &op)
                    .wait();
            });
            sum
        })
        .unwrap();
    assert_eq!(sums, [6; 4]);
    drop(op);
    let seen = seen.into_inner().unwrap();
    assert!(!seen.is_empty());
    assert!(
        seen.iter()
            .all(|e| matches!(e, Err(AccessError::Task { rank }) if (0..4).contains(rank))),
        "{seen:?}"
    );
}
