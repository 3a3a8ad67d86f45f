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
