//! Runs `examples/ported.rs` (an rsmpi program ported with `#[myriad::main]`)
//! as a program, as a user would: `MYRIAD_RANKS=3`, then checks its output
//! and exit status, including a `main` that returns `Err`.
//!
//! `cargo test` builds the examples next to the test binaries
//! (`target/<profile>/examples/`); when the example was not built (e.g.
//! `cargo test --test ported_example` alone), the test prints a note and
//! passes.

use std::path::PathBuf;
use std::process::{Command, Output};

/// The built example, if `cargo test` built it.
fn example() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    // target/<profile>/deps/ported_example-<hash> -> target/<profile>/examples/ported
    let profile_dir = exe.parent()?.parent()?;
    let path = profile_dir
        .join("examples")
        .join(format!("ported{}", std::env::consts::EXE_SUFFIX));
    if path.is_file() {
        Some(path)
    } else {
        eprintln!(
            "note: {} is not built (run the whole `cargo test`); skipping",
            path.display()
        );
        None
    }
}

fn run(path: &PathBuf, args: &[&str]) -> Output {
    Command::new(path)
        .args(args)
        .env("MYRIAD_RANKS", "3")
        .env_remove("MYRIAD_WORKERS")
        .output()
        .expect("cannot start the example")
}

#[test]
fn ported_program_runs_on_three_ranks() {
    let Some(path) = example() else { return };
    let out = run(&path, &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "status {}\n{stdout}\n{stderr}",
        out.status
    );
    let mut lines: Vec<&str> = stdout.lines().collect();
    lines.sort_unstable();
    assert_eq!(
        lines,
        [
            "rank 0 sent 42 to 2 ranks",
            "rank 1 received 42 from rank 0",
            "rank 2 received 42 from rank 0",
        ],
        "stderr:\n{stderr}"
    );

    // `--ranks` on the command line wins over MYRIAD_RANKS.
    let out = run(&path, &["--ranks", "2", "--number", "7"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "status {}\n{stdout}\n{stderr}",
        out.status
    );
    let mut lines: Vec<&str> = stdout.lines().collect();
    lines.sort_unstable();
    assert_eq!(
        lines,
        ["rank 0 sent 7 to 1 ranks", "rank 1 received 7 from rank 0"]
    );
}

#[test]
fn err_from_main_fails_the_job() {
    let Some(path) = example() else { return };
    let out = run(&path, &["--number", "not-a-number"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr:\n{stderr}");
    assert!(
        stderr.contains("main returned an error") && stderr.contains("InvalidDigit"),
        "stderr:\n{stderr}"
    );
    assert!(out.stdout.is_empty());
}
