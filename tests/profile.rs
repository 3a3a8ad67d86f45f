//! `MYRIAD_PROFILE`: the table's counts match a program with known calls,
//! the per-rank lines and summaries are there, the profile goes to a file
//! or standard error, and a bad value is an error naming the variable.

mod common;

use myriad::traits::*;

/// Per rank: 3 sends of 8 B to the next rank, 3 receives from the previous
/// one, 2 barriers, 1 all-reduce of 8 B.
fn program(universe: myriad::environment::Universe) {
    let world = universe.world();
    let (rank, size) = (world.rank(), world.size());
    for i in 0..3u64 {
        world.process_at_rank((rank + 1) % size).send(&i);
    }
    for _ in 0..3 {
        let _ = world
            .process_at_rank((rank + size - 1) % size)
            .receive::<u64>();
    }
    world.barrier();
    world.barrier();
    let mut sum = 0u64;
    world.all_reduce_into(&1u64, &mut sum, myriad::collective::SystemOperation::sum());
}

/// The table's row of `op`: calls, bytes, total ms, avg µs, max µs.
fn row(text: &str, op: &str) -> Vec<f64> {
    text.lines()
        .find(|l| l.split_whitespace().nth(1) == Some(op))
        .unwrap_or_else(|| panic!("no {op} row in\n{text}"))
        .split_whitespace()
        .skip(2)
        .map(|v| v.trim_matches(|c| c == '(' || c == ')'))
        .filter(|v| !v.is_empty())
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{v:?} in the {op} row of\n{text}"))
        })
        .collect()
}

fn check(text: &str, ranks: usize) {
    assert!(text.contains(&format!("profile: {ranks} ranks")), "{text}");
    let n = ranks as f64;
    assert_eq!(row(text, "send")[..2], [3.0 * n, 24.0 * n], "{text}");
    assert_eq!(row(text, "receive")[..2], [3.0 * n, 24.0 * n], "{text}");
    assert_eq!(row(text, "barrier")[0], 2.0 * n, "{text}");
    assert_eq!(row(text, "all_reduce")[..2], [n, 8.0 * n], "{text}");
    for op in ["send", "receive", "barrier", "all_reduce"] {
        let r = row(text, op);
        assert!(
            r[2] >= 0.0 && r[4] * 1e-3 <= r[2] + 1e-3,
            "{op}: max within total: {text}"
        );
    }
    assert!(text.contains("most waiting (parked): rank "), "{text}");
    for summary in ["compute", "mpi", "wait", "life"] {
        assert_eq!(row(text, summary).len(), 5, "{summary}: {text}");
    }
}

#[test]
fn the_profile_counts_the_calls_of_a_known_program() {
    let path = std::env::temp_dir().join(format!("myriad-{}-profile.txt", std::process::id()));
    myriad::Runtime::builder()
        .ranks(4)
        .workers(2)
        .profile_to(&path)
        .run(program)
        .expect("job");
    let text = std::fs::read_to_string(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    check(&text, 4);
    let per_rank = text.lines().filter(|l| l.contains(" life_ms ")).count();
    assert_eq!(per_rank, 4, "{text}");
}

#[test]
fn a_large_job_is_summarised() {
    let path =
        std::env::temp_dir().join(format!("myriad-{}-profile-large.txt", std::process::id()));
    myriad::Runtime::builder()
        .ranks(64)
        .workers(2)
        .profile_to(&path)
        .run(program)
        .expect("job");
    let text = std::fs::read_to_string(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    check(&text, 64);
    assert!(
        !text.contains(" life_ms "),
        "no per-rank lines for 64 ranks: {text}"
    );
}

#[test]
fn myriad_profile_prints_on_standard_error() {
    let Some(stderr) = common::in_child(
        "myriad_profile_prints_on_standard_error",
        &[("MYRIAD_PROFILE", "1")],
        || {
            myriad::Runtime::builder()
                .ranks(3)
                .run(program)
                .expect("job");
        },
    ) else {
        return;
    };
    check(&stderr, 3);
}

#[test]
fn no_profile_unless_asked() {
    let Some(stderr) = common::in_child("no_profile_unless_asked", &[], || {
        myriad::Runtime::builder()
            .ranks(2)
            .run(program)
            .expect("job");
    }) else {
        return;
    };
    assert!(!stderr.contains("profile"), "{stderr}");
}

#[test]
fn a_bad_profile_value_names_the_variable() {
    let Some(_) = common::in_child(
        "a_bad_profile_value_names_the_variable",
        &[("MYRIAD_PROFILE", "sometimes")],
        || {
            let err = myriad::Runtime::builder()
                .ranks(2)
                .run(|_| ())
                .expect_err("a bad MYRIAD_PROFILE must fail the job");
            assert!(err.to_string().contains("MYRIAD_PROFILE"), "{err}");
        },
    ) else {
        return;
    };
}

/// Per rank (an even number n of ranks), target t = the next rank: a
/// window of 4 `u64` created; a fence epoch (2 fences) with a put of 16 B
/// and a get of 8 B; an exclusive lock on t with an accumulate of 8 B, a
/// fetch_and_op, a compare_and_swap, a get_accumulate of 16 B and a flush;
/// a lock_all epoch with an rput, an rget and an raccumulate of 8 B each
/// and a flush_all; even ranks post to the next rank and wait, odd ranks
/// start to the previous one, put 8 B and complete; the window freed.
fn rma_program(universe: myriad::environment::Universe) {
    use myriad::collective::SystemOperation;
    use myriad::window::{Epoch, LockType, WindowCreation};
    let world = universe.world();
    let (rank, size) = (world.rank(), world.size());
    let t = (rank + 1) % size;
    let win = world.allocate_window::<u64>(4).unwrap();
    let fence = win.fence().unwrap();
    fence.put(t, 0, &[1, 2]).unwrap();
    let mut one = [0u64];
    fence.get(t, 2, &mut one).unwrap();
    fence.end().unwrap();
    let lock = win.lock(t, LockType::Exclusive).unwrap();
    lock.accumulate(t, 0, &[1], SystemOperation::sum()).unwrap();
    lock.fetch_and_op(t, 1, 1, SystemOperation::sum()).unwrap();
    lock.compare_and_swap(t, 2, 0, 9).unwrap();
    let mut two = [0u64; 2];
    lock.get_accumulate(t, 0, &[1, 1], &mut two, SystemOperation::sum())
        .unwrap();
    lock.flush();
    lock.unlock();
    let all = win.lock_all().unwrap();
    let data = [5u64];
    let mut out = [0u64];
    myriad::request::scope(|scope| {
        all.rput(scope, t, 3, &data).unwrap().wait();
        all.rget(scope, t, 3, &mut out).unwrap().wait();
        all.raccumulate(scope, t, 3, &data, SystemOperation::sum())
            .unwrap()
            .wait();
    });
    all.flush_all();
    all.unlock_all();
    if rank % 2 == 0 {
        win.post(&[rank + 1]).unwrap().wait().unwrap();
    } else {
        let access = win.start(&[rank - 1]).unwrap();
        access.put(rank - 1, 0, &[7]).unwrap();
        access.complete();
    }
    win.free().unwrap();
}

#[test]
fn the_profile_counts_rma_calls() {
    let path = std::env::temp_dir().join(format!("myriad-{}-profile-rma.txt", std::process::id()));
    let n = 4.0;
    myriad::Runtime::builder()
        .ranks(4)
        .workers(2)
        .profile_to(&path)
        .run(rma_program)
        .expect("job");
    let text = std::fs::read_to_string(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    // (operation, calls, bytes): calls made inside another (the
    // get_accumulate of a fetch_and_op, the put of an rput) are part of it.
    let expected = [
        ("win_create", n, 32.0 * n),
        ("win_fence", 2.0 * n, 0.0),
        ("put", n + n / 2.0, 16.0 * n + 8.0 * n / 2.0),
        ("get", n, 8.0 * n),
        ("accumulate", n, 8.0 * n),
        ("fetch_and_op", n, 8.0 * n),
        ("compare_and_swap", n, 8.0 * n),
        ("get_accumulate", n, 16.0 * n),
        ("win_lock", n, 0.0),
        ("win_flush", n, 0.0),
        ("win_unlock", n, 0.0),
        ("win_lock_all", n, 0.0),
        ("rput", n, 8.0 * n),
        ("rget", n, 8.0 * n),
        ("raccumulate", n, 8.0 * n),
        ("win_flush_all", n, 0.0),
        ("win_unlock_all", n, 0.0),
        ("win_post", n / 2.0, 0.0),
        ("win_wait", n / 2.0, 0.0),
        ("win_start", n / 2.0, 0.0),
        ("win_complete", n / 2.0, 0.0),
        ("win_free", n, 0.0),
    ];
    for (op, calls, bytes) in expected {
        assert_eq!(row(&text, op)[..2], [calls, bytes], "{op}: {text}");
    }
}
