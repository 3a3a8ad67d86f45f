//! Bad configuration is an error that says what is wrong, never silently
//! ignored: a `MYRIAD_COLL_<NAME>` variable whose NAME is no collective, and
//! an invalid variable that a flag or the builder overrides. (Command-line
//! flags are checked in `ported_example.rs`, which runs a program.)
//!
//! Environment variables are process-global: each case runs in a child
//! process of this test binary (`common::in_child`).

use myriad::{Error, Runtime};

mod common;
use common::in_child;

/// The error a one-rank job fails with.
fn job_error() -> String {
    let err = Runtime::builder()
        .ranks(2)
        .workers(1)
        .run(|_| ())
        .expect_err("the job should not start");
    assert!(matches!(err, Error::Config { .. }), "{err}");
    err.to_string()
}

#[test]
fn a_misspelled_collective_variable_is_an_error_naming_the_collectives() {
    let name = "a_misspelled_collective_variable_is_an_error_naming_the_collectives";
    in_child(name, &[("MYRIAD_COLL_BRODCAST", "linear")], || {
        let text = job_error();
        assert!(text.contains("MYRIAD_COLL_BRODCAST"), "{text}");
        // Every collective's variable is named.
        for var in [
            "MYRIAD_COLL_BARRIER",
            "MYRIAD_COLL_BROADCAST",
            "MYRIAD_COLL_GATHER_VARCOUNT",
            "MYRIAD_COLL_EXCLUSIVE_SCAN",
        ] {
            assert!(text.contains(var), "{var} missing: {text}");
        }
    });
}

#[test]
fn a_collective_variable_in_the_wrong_case_is_an_error() {
    // Variable names are case-sensitive: this one would be ignored.
    let name = "a_collective_variable_in_the_wrong_case_is_an_error";
    in_child(name, &[("MYRIAD_COLL_Broadcast", "linear")], || {
        let text = job_error();
        assert!(
            text.contains("MYRIAD_COLL_Broadcast") && text.contains("MYRIAD_COLL_BROADCAST"),
            "{text}"
        );
    });
}

#[test]
fn collective_variables_that_exist_still_work() {
    let name = "collective_variables_that_exist_still_work";
    in_child(
        name,
        &[
            ("MYRIAD_COLL_BROADCAST", "linear"),
            ("MYRIAD_COLL_ALL_TO_ALL_VARCOUNT", "pairwise"),
            // Empty is unset, for every variable.
            ("MYRIAD_COLL_SCAN", ""),
        ],
        || {
            let out = myriad::run(3, |universe| {
                use myriad::traits::*;
                let world = universe.world();
                let mut x = world.rank();
                world.process_at_rank(0).broadcast_into(&mut x);
                x
            })
            .unwrap();
            assert_eq!(out, vec![0, 0, 0]);
        },
    );
}

#[test]
fn a_negative_rank_count_is_an_error_even_when_the_builder_sets_one() {
    let name = "a_negative_rank_count_is_an_error_even_when_the_builder_sets_one";
    in_child(name, &[("MYRIAD_RANKS", "-3")], || {
        let text = job_error();
        assert!(
            text.contains("MYRIAD_RANKS") && text.contains("-3"),
            "{text}"
        );
    });
}

/// A value for every variable the builder can override, each invalid.
const OVERRIDDEN: &[(&str, &str)] = &[
    ("MYRIAD_WORKERS", "0"),
    ("MYRIAD_STACK_SIZE", "12Q"),
    ("MYRIAD_BIND", "maybe"),
    ("MYRIAD_REPORT_BINDINGS", "loud"),
    ("MYRIAD_EAGER_LIMIT", "1 parsec"),
    ("MYRIAD_STACK_GUARD", "fence"),
    ("MYRIAD_CHECK_COLLECTIVES", "sometimes"),
    ("MYRIAD_THREADING", "many"),
    ("MYRIAD_MAP_BY", "galaxy"),
    ("MYRIAD_RANK_ORDER", "random"),
];

#[test]
fn every_overridden_variable_is_still_checked() {
    let name = "every_overridden_variable_is_still_checked";
    for &case in OVERRIDDEN {
        in_child(name, &[case], || {
            let (var, _) = OVERRIDDEN
                .iter()
                .find(|(var, value)| std::env::var(var).as_deref() == Ok(*value))
                .expect("one variable under test");
            // The builder sets every knob.
            let err = Runtime::builder()
                .ranks(1)
                .workers(1)
                .stack_size(64 * 1024)
                .bind(false)
                .report_bindings(false)
                .eager_limit(1024)
                .stack_guard(myriad::StackGuard::Auto)
                .check_collectives(true)
                .threading(myriad::Threading::Single)
                .map_by(myriad::topology::Level::Core)
                .rank_order(myriad::topology::RankOrder::Block)
                .run(|_| ())
                .expect_err("the job should not start");
            let text = err.to_string();
            assert!(text.contains(var), "{var}: {text}");
        });
    }
}
