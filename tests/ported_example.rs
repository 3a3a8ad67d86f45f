//! Runs `examples/ported.rs` (an rsmpi program ported with `#[myriad::main]`)
//! as a program, as a user would: `MYRIAD_RANKS=3`, then checks its output
//! and exit status, including a `main` that returns `Err`.
//!
//! `cargo test` builds the examples next to the test binaries
//! (`target/<profile>/examples/`); the test also runs `cargo build
//! --example ported` itself (a no-op then), so that it runs the current
//! example when run alone (`cargo test --test ported_example`) and fails
//! if the example cannot be built.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The example, built by this test if `cargo test` did not build it (e.g.
/// `cargo test --test ported_example`) or built it earlier from older
/// sources: a test that cannot find the program fails, it never skips.
fn example() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(build)
}

/// Runs `cargo build --example ported` with this test's profile, target and
/// target directory, so that it reuses what `cargo test` built (a no-op
/// when the example is up to date), and returns the executable cargo
/// reports.
fn build() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    // <target dir>[/<target triple>]/<profile dir>/deps/ported_example-<hash>
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("a test binary lives in <profile>/deps");
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.current_dir(env!("CARGO_MANIFEST_DIR")).args([
        "build",
        "--example",
        "ported",
        "--message-format=json-render-diagnostics",
    ]);
    match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") => {}
        Some("release") => {
            cmd.arg("--release");
        }
        Some(other) => {
            cmd.args(["--profile", other]);
        }
        None => panic!("no profile directory above {}", exe.display()),
    }
    let up = profile_dir.parent().expect("a target directory");
    // Cargo marks a target directory with CACHEDIR.TAG (with `--target`,
    // maybe the triple's directory too): look for a triple first.
    let is_target_dir = |dir: &Path| dir.join("CACHEDIR.TAG").is_file();
    let triple = up
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| n.matches('-').count() >= 2);
    match (triple, up.parent()) {
        (Some(triple), Some(root)) if is_target_dir(root) => {
            cmd.arg("--target-dir").arg(root).args(["--target", triple]);
        }
        _ if is_target_dir(up) => {
            cmd.arg("--target-dir").arg(up);
        }
        // Cargo's own choice (CARGO_TARGET_DIR or the workspace's).
        _ => {}
    }
    let out = cmd.output().expect("cannot run cargo to build the example");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "`cargo build --example ported` failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    // The artifact message of the example names its executable.
    let path = stdout
        .lines()
        .filter(|l| {
            l.contains(r#""reason":"compiler-artifact""#) && l.contains(r#""kind":["example"]"#)
        })
        .filter(|l| l.contains(r#""name":"ported""#))
        .find_map(|l| {
            let rest = &l[l.find(r#""executable":""#)? + r#""executable":""#.len()..];
            Some(PathBuf::from(&rest[..rest.find('"')?]))
        })
        .unwrap_or_else(|| panic!("cargo did not report the example's executable:\n{stdout}"));
    assert!(path.is_file(), "{} is not a file", path.display());
    path
}

fn run(path: &Path, args: &[&str]) -> Output {
    run_with(path, args, "3")
}

/// Runs the example with `MYRIAD_RANKS=ranks`.
fn run_with(path: &Path, args: &[&str], ranks: &str) -> Output {
    Command::new(path)
        .args(args)
        .env("MYRIAD_RANKS", ranks)
        .env_remove("MYRIAD_WORKERS")
        .output()
        .expect("cannot start the example")
}

/// The job's lines, sorted (ranks print in any order).
fn sorted_lines(out: &Output) -> Vec<String> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "status {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let mut lines: Vec<String> = stdout.lines().map(str::to_string).collect();
    lines.sort_unstable();
    lines
}

/// Checks that the program failed before starting the job, with an error
/// containing every one of `words`.
fn assert_config_error(out: &Output, words: &[&str]) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr:\n{stderr}");
    assert!(
        stderr.contains("invalid configuration"),
        "stderr:\n{stderr}"
    );
    for word in words {
        assert!(stderr.contains(word), "{word:?} missing from:\n{stderr}");
    }
    assert!(out.stdout.is_empty(), "the job ran");
}

#[test]
fn ported_program_runs_on_three_ranks() {
    let path = example();
    let out = run(path, &[]);
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
    let out = run(path, &["--ranks", "2", "--number", "7"]);
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
    let out = run(example(), &["--number", "not-a-number"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr:\n{stderr}");
    assert!(
        stderr.contains("main returned an error") && stderr.contains("InvalidDigit"),
        "stderr:\n{stderr}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn a_misspelled_runtime_flag_is_an_error_naming_it() {
    let path = example();
    for (flag, meant) in [
        ("--rank", "--ranks"),
        ("--rnaks", "--ranks"),
        ("-ranks", "--ranks"),
        ("--Ranks", "--ranks"),
        ("--worker", "--workers"),
        ("--wokers", "--workers"),
    ] {
        let out = run(path, &[flag, "2"]);
        assert_config_error(&out, &[&format!("{flag:?}"), meant]);
        // Also as --flag=N.
        let out = run(path, &[&format!("{flag}=2")]);
        assert_config_error(&out, &[&format!("{flag:?}"), meant]);
    }
}

#[test]
fn a_runtime_flag_without_its_value_is_an_error() {
    let path = example();
    for flag in ["--ranks", "--workers"] {
        let out = run(path, &["--number", "7", flag]);
        assert_config_error(&out, &[flag, "value"]);
    }
}

#[test]
fn the_programs_own_flags_are_left_alone() {
    let path = example();
    // Flags that look like no runtime flag belong to the program, in any
    // order with the runtime's; after `--`, even those that do.
    let out = run(path, &["--number", "7", "--ranks", "2", "--max-ranks", "9"]);
    assert_eq!(
        sorted_lines(&out),
        ["rank 0 sent 7 to 1 ranks", "rank 1 received 7 from rank 0"]
    );
    let out = run(path, &["--ranks=2", "--", "--rank", "5", "--workers", "x"]);
    assert_eq!(
        sorted_lines(&out),
        [
            "rank 0 sent 42 to 1 ranks",
            "rank 1 received 42 from rank 0"
        ]
    );
}

#[test]
fn a_negative_rank_count_is_an_error_even_when_the_flag_sets_one() {
    let out = run_with(example(), &["--ranks", "2"], "-3");
    assert_config_error(&out, &["MYRIAD_RANKS", "-3"]);
}
