//! A test of this binary run as a job of the built-in launcher: the test
//! process re-runs itself as the launcher (`MYRIAD_PROCESSES`), which
//! re-runs it as each process; `MYRIAD_TEST_LAUNCH` names the test in
//! both, so the test's body knows which part it plays.

use std::process::{Command, ExitStatus, Stdio};
use std::time::Duration;

/// Set in the launcher and its processes to the name of the launched test.
pub(crate) const LAUNCH: &str = "MYRIAD_TEST_LAUNCH";

/// Runs test `test` of this binary as the built-in launcher of `processes`
/// processes, with `envs` set and `removed` unset (and the world-size
/// variables always unset): the launcher's exit status, standard output
/// and standard error. A launcher still running after `limit` is killed
/// and the test fails: a test of "no hang" must not hang.
pub(crate) fn launch(
    test: &str,
    processes: u32,
    envs: &[(&str, &str)],
    removed: &[&str],
    limit: Duration,
) -> (ExitStatus, String, String) {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(LAUNCH, test)
        .env("MYRIAD_PROCESSES", processes.to_string())
        .env_remove("MYRIAD_RANKS")
        .env_remove("MYRIAD_RANKS_PER_PROCESS");
    for name in removed {
        command.env_remove(name);
    }
    let child = command
        .envs(envs.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(limit) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            // SAFETY: signalling a process has no memory effects; the
            // launcher is not reaped yet (its waiter thread still waits).
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("{test}: the launcher did not end within {limit:?} (hang)");
        }
    };
    (
        out.status,
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
