//! Helpers shared by the integration tests.

#![allow(dead_code)]

use std::process::Command;

#[macro_use]
pub(crate) mod joined;
pub(crate) mod launched;

/// Set in a child process to the name of the test it runs.
const CHILD: &str = "MYRIAD_TEST_CHILD";

/// Variables a child starts without unless the test sets them: the
/// environment of `cargo test` must not change what the child measures.
const CLEARED: &[&str] = &[
    "HWLOC_SYNTHETIC",
    "HWLOC_THISSYSTEM",
    "HWLOC_XMLFILE",
    "HWLOC_FSROOT",
    "MYRIAD_MAP_BY",
    "MYRIAD_RANK_ORDER",
    "MYRIAD_REPORT_BINDINGS",
    "MYRIAD_REPORT_MEMORY",
    "MYRIAD_WORKERS",
    "MYRIAD_RANKS",
];

/// Runs a test whose body needs environment variables (process-global, and
/// tests run in parallel threads). In the child (this binary re-run with a
/// filter naming the test `name`, the caller): runs `body` and returns
/// `None`. In the parent: runs the child with `envs` set, checks that its
/// one test passed, and returns the child's standard error.
pub(crate) fn in_child(name: &str, envs: &[(&str, &str)], body: impl FnOnce()) -> Option<String> {
    if std::env::var(CHILD).as_deref() == Ok(name) {
        body();
        return None;
    }
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, name);
    for var in CLEARED {
        cmd.env_remove(var);
    }
    cmd.envs(envs.iter().copied());
    let out = cmd.output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "child {name} with {envs:?} failed\n{stdout}\n{stderr}"
    );
    Some(stderr)
}

/// Runs `job` (a whole myriad job) on its own thread and returns its
/// output, failing the test with "`what`: ... (hang)" if it takes longer
/// than `limit`: a test of "no hang" must fail, not hang itself.
pub(crate) fn within_time_limit<T: Send + 'static>(
    what: &str,
    limit: std::time::Duration,
    job: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(job());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out,
        Err(_) => panic!(
            "{what}: the job did not finish within {} s (hang)",
            limit.as_secs()
        ),
    }
}

/// A buffer for a `StaticScope` receive. Its address stays in a static so
/// that LeakSanitizer does not report it once the request is gone.
pub(crate) fn leaked_buffer() -> &'static mut [u64; 4] {
    static KEPT: std::sync::Mutex<Vec<usize>> = std::sync::Mutex::new(Vec::new());
    let buffer = Box::leak(Box::new([0; 4]));
    KEPT.lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(buffer as *mut [u64; 4] as usize);
    buffer
}
