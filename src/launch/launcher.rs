//! The built-in launcher (`--processes N`, `MYRIAD_PROCESSES=N`): a job of
//! several processes on this host without MPICH.
//!
//! The program re-executes itself ([`Plan::from_command_line`]:
//! `/proc/self/exe`, the same arguments without `--processes N`) `N` times
//! and serves PMI-1 to the children itself (`server.rs`), each over its own
//! socket pair whose child end is the child's `PMI_FD` (with `PMI_RANK`,
//! `PMI_SIZE`, `MPI_LOCALRANKID` and `MPI_LOCALNRANKS`, as Hydra sets them;
//! `MYRIAD_PROCESSES` is removed, so a child never launches again). The
//! children inherit standard output and error, as under `mpiexec` without
//! labels; standard input goes to process 0 only. The launcher itself
//! never runs ranks.
//!
//! ## Exit status, as `mpiexec`'s
//!
//! * every child exits 0 after finalizing PMI: 0;
//! * a child exits non-zero, dies by a signal, or exits without finalizing
//!   PMI (the others would wait for it forever): the others get
//!   [`Plan::grace`] to end on their own, then `SIGKILL`; the launcher
//!   reports that child and exits with its code (128 + the signal for a
//!   signal, 1 for a missing finalize);
//! * a child sends PMI `abort`: the others are killed at once, the
//!   aborting one after the grace; the status is the abort's exit code
//!   (1 if it gave 0).
//!
//! Children die with the launcher (`PR_SET_PDEATHSIG`), so killing the
//! launcher never leaves ranks behind.
//!
//! With the `ofi` feature the children also get
//! `FI_OFI_RXM_ENABLE_PASSTHRU=1` unless the launcher's environment sets
//! it ([`child_defaults`]): libfabric's `ofi_rxm` then hands RDM endpoints
//! straight to the `tcp` provider's own, which is quicker for
//! `MYRIAD_TRANSPORT=ofi` over it. libfabric reads the variable from the
//! environment, which a library must not set once threads run, so the
//! launcher, which starts the processes, is where it can be given.

use std::ffi::OsString;
use std::fmt;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use super::server::{Event, Server};
use crate::error::LaunchError;

/// How long the other children may take to end after one failed.
pub(crate) const DEFAULT_GRACE: Duration = Duration::from_secs(2);

/// What to launch.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// The program (this one: `/proc/self/exe`).
    pub(crate) program: PathBuf,
    /// Its arguments.
    pub(crate) args: Vec<OsString>,
    /// Variables to set in every child (besides PMI's).
    pub(crate) envs: Vec<(OsString, OsString)>,
    /// How many processes.
    pub(crate) processes: u32,
    /// How long the others may take to end after a failure.
    pub(crate) grace: Duration,
}

/// How a launched job ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Every process exited 0 after finalizing PMI.
    Success,
    /// The first process to fail, and how.
    Failed {
        /// The process.
        process: u32,
        /// How it ended.
        how: Failure,
    },
}

/// How a process failed the job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Failure {
    /// It exited with a non-zero code.
    Exited(i32),
    /// A signal killed it.
    Signaled(i32),
    /// It exited 0 without finalizing PMI.
    NoFinalize,
    /// It asked PMI to abort the job.
    Aborted {
        /// The exit code it asked for.
        code: i32,
        /// Its message.
        message: String,
    },
}

impl Outcome {
    /// The launcher's exit status for this outcome.
    pub(crate) fn exit_code(&self) -> i32 {
        match self {
            Outcome::Success => 0,
            Outcome::Failed { how, .. } => match how {
                Failure::Exited(code) => *code,
                Failure::Signaled(signal) => 128 + signal,
                Failure::NoFinalize => 1,
                Failure::Aborted { code, .. } => (*code).max(1),
            },
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Success => f.write_str("every process exited 0"),
            Outcome::Failed { process, how } => match how {
                Failure::Exited(code) => {
                    write!(f, "process {process} exited with status {code}")
                }
                Failure::Signaled(signal) => {
                    write!(f, "process {process} was killed by signal {signal}")
                }
                Failure::NoFinalize => write!(
                    f,
                    "process {process} exited without finalizing PMI (did it return before \
                     its job ended?)"
                ),
                Failure::Aborted { code, message } => write!(
                    f,
                    "process {process} aborted the job with exit code {code}: {message}"
                ),
            },
        }
    }
}

impl Plan {
    /// This program, started as it was (`/proc/self/exe`, its arguments
    /// without `--processes N`), `processes` times.
    pub(crate) fn from_command_line(processes: u32) -> Result<Plan, LaunchError> {
        let program = std::env::current_exe().map_err(|e| LaunchError::Io {
            command: "find this program (/proc/self/exe) to start its processes".to_string(),
            reason: e.to_string(),
        })?;
        Ok(Plan {
            program,
            args: without_processes_flag(std::env::args_os().skip(1)),
            envs: child_defaults(&|name| std::env::var_os(name)),
            processes,
            grace: DEFAULT_GRACE,
        })
    }

    /// Starts the processes, serves them PMI until all have ended, and
    /// says how the job ended.
    pub(crate) fn run(&self) -> Result<Outcome, LaunchError> {
        let n = self.processes;
        let kvsname = format!("myriad_{}_{n}", std::process::id());
        let mut children: Vec<Child> = Vec::with_capacity(n as usize);
        let mut conns = Vec::with_capacity(n as usize);
        for i in 0..n {
            let started =
                UnixStream::pair()
                    .map_err(|e| spawn_error(i, &e))
                    .and_then(|(ours, theirs)| {
                        let child = self.spawn(i, theirs.as_raw_fd())?;
                        // `theirs` closes here: the child has its copy.
                        Ok((ours, child))
                    });
            match started {
                Ok((ours, child)) => {
                    conns.push(ours);
                    children.push(child);
                }
                Err(e) => {
                    for mut c in children {
                        let _ = c.kill();
                        let _ = c.wait();
                    }
                    return Err(e);
                }
            }
        }
        let (tx, rx) = mpsc::channel();
        let server = match Server::start(conns, kvsname, tx) {
            Ok(s) => s,
            Err(e) => {
                for mut c in children {
                    let _ = c.kill();
                    let _ = c.wait();
                }
                return Err(LaunchError::Io {
                    command: "serve PMI to the processes".to_string(),
                    reason: e.to_string(),
                });
            }
        };
        let outcome = supervise(&mut children, &server, &rx, self.grace);
        // Every child has exited: their connections are closed, so the
        // server's threads end.
        server.join();
        Ok(outcome)
    }

    fn spawn(&self, i: u32, fd: RawFd) -> Result<Child, LaunchError> {
        let mut cmd = Command::new(&self.program);
        if i > 0 {
            // As `mpiexec`: standard input goes to process 0 only.
            cmd.stdin(std::process::Stdio::null());
        }
        cmd.args(&self.args)
            .env_remove("MYRIAD_PROCESSES")
            .envs(self.envs.iter().map(|(k, v)| (k, v)))
            .env("PMI_FD", fd.to_string())
            .env("PMI_RANK", i.to_string())
            .env("PMI_SIZE", self.processes.to_string())
            .env("MPI_LOCALRANKID", i.to_string())
            .env("MPI_LOCALNRANKS", self.processes.to_string())
            .env("MYRIAD_LAUNCHER", "processes");
        // SAFETY: between fork and exec the closure calls only
        // async-signal-safe functions (`fcntl`, `prctl`, `getppid`) on
        // values copied before the fork.
        unsafe {
            cmd.pre_exec(move || {
                // The child keeps its end across exec (Rust opens every
                // descriptor close-on-exec).
                if libc::fcntl(fd, libc::F_SETFD, 0) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                // The child dies with the launcher.
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
                Ok(())
            });
        }
        cmd.spawn().map_err(|e| spawn_error(i, &e))
    }
}

/// Variables set in every child unless `var` (the launcher's environment)
/// has them: with the `ofi` feature, `FI_OFI_RXM_ENABLE_PASSTHRU=1` (see
/// the module docs); a value the user set, `0` included, is kept.
pub(crate) fn child_defaults(var: &dyn Fn(&str) -> Option<OsString>) -> Vec<(OsString, OsString)> {
    let defaults: &[(&str, &str)] = if cfg!(feature = "ofi") {
        &[("FI_OFI_RXM_ENABLE_PASSTHRU", "1")]
    } else {
        &[]
    };
    defaults
        .iter()
        .filter(|(name, _)| var(name).is_none())
        .map(|(name, value)| (OsString::from(name), OsString::from(value)))
        .collect()
}

fn spawn_error(i: u32, e: &std::io::Error) -> LaunchError {
    LaunchError::Io {
        command: format!("start process {i}"),
        reason: e.to_string(),
    }
}

/// Waits for every child, ending the job at the first failure; returns the
/// first failure (or success).
fn supervise(
    children: &mut [Child],
    server: &Server,
    events: &mpsc::Receiver<Event>,
    grace: Duration,
) -> Outcome {
    let n = children.len();
    let mut exited: Vec<Option<ExitStatus>> = vec![None; n];
    let mut first: Option<Outcome> = None;
    // When the survivors of a failure get killed.
    let mut kill_at: Option<Instant> = None;
    let mut killed = false;
    // Children are polled when the server reports a closed connection,
    // and every few milliseconds (a child can exit with its connection
    // kept open by a grandchild).
    const POLL: Duration = Duration::from_millis(20);
    while exited.iter().any(Option::is_none) {
        let wait = match kill_at {
            Some(at) => at.saturating_duration_since(Instant::now()).min(POLL),
            None => POLL,
        };
        match events.recv_timeout(wait) {
            Ok(Event::Abort {
                process,
                code,
                message,
            }) => {
                say!(
                    "myriad launcher: process {process} aborted the job (exit code {code}): \
                     {message}"
                );
                if first.is_none() {
                    first = Some(Outcome::Failed {
                        process,
                        how: Failure::Aborted { code, message },
                    });
                }
                for (i, c) in children.iter_mut().enumerate() {
                    if i as u32 != process && exited[i].is_none() {
                        let _ = c.kill();
                    }
                }
                kill_at.get_or_insert_with(|| Instant::now() + grace);
            }
            Ok(Event::Closed { .. }) | Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => std::thread::sleep(wait),
        }
        for (i, c) in children.iter_mut().enumerate() {
            if exited[i].is_some() {
                continue;
            }
            let Ok(Some(status)) = c.try_wait() else {
                continue;
            };
            exited[i] = Some(status);
            let how = match (status.code(), status.signal()) {
                (Some(0), _) if server.finalized(i as u32) => continue,
                (Some(0), _) => Failure::NoFinalize,
                (Some(code), _) => Failure::Exited(code),
                (None, Some(signal)) => Failure::Signaled(signal),
                (None, None) => Failure::Exited(1),
            };
            if first.is_none() && !killed {
                first = Some(Outcome::Failed {
                    process: i as u32,
                    how,
                });
                kill_at = Some(Instant::now() + grace);
            }
        }
        if let Some(at) = kill_at {
            if !killed && Instant::now() >= at {
                killed = true;
                for (i, c) in children.iter_mut().enumerate() {
                    if exited[i].is_none() {
                        let _ = c.kill();
                    }
                }
            }
        }
    }
    let outcome = first.unwrap_or(Outcome::Success);
    if outcome != Outcome::Success {
        let others = exited
            .iter()
            .filter(|s| s.is_some_and(|s| !s.success()))
            .count();
        say!(
            "myriad launcher: {outcome}; {} of the {n} processes failed or were ended",
            others
        );
    }
    outcome
}

/// `args` without `--processes N` or `--processes=N` (before a lone `--`).
pub(crate) fn without_processes_flag(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut out = Vec::new();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        if arg == "--" {
            out.push(arg);
            out.extend(args);
            break;
        }
        if arg == "--processes" {
            args.next();
            continue;
        }
        if arg.to_str().is_some_and(|a| a.starts_with("--processes=")) {
            continue;
        }
        out.push(arg);
    }
    out
}

/// Runs this program as a job of `processes` processes and exits with the
/// job's status: what `run` does in the launcher process.
pub(crate) fn run_and_exit(processes: u32) -> ! {
    let result = Plan::from_command_line(processes).and_then(|plan| plan.run());
    match result {
        Ok(outcome) => std::process::exit(outcome.exit_code()),
        Err(e) => {
            say!("myriad: job failed: launcher: {e}");
            std::process::exit(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_processes_flag_is_removed_from_the_childrens_arguments() {
        assert_eq!(
            without_processes_flag(os(&["--ranks", "8", "--processes", "4", "-v"])),
            os(&["--ranks", "8", "-v"])
        );
        assert_eq!(
            without_processes_flag(os(&["--processes=4", "x", "--", "--processes", "2"])),
            os(&["x", "--", "--processes", "2"])
        );
    }

    /// With `ofi`, rxm's passthru unless the user set the variable (to
    /// anything, `0` included); without it, nothing.
    #[test]
    fn children_get_rxm_passthru_unless_the_user_chose() {
        let unset = child_defaults(&|_| None);
        let chosen = child_defaults(&|name| {
            (name == "FI_OFI_RXM_ENABLE_PASSTHRU").then(|| OsString::from("0"))
        });
        assert!(chosen.is_empty(), "{chosen:?}");
        if cfg!(feature = "ofi") {
            assert_eq!(unset, [("FI_OFI_RXM_ENABLE_PASSTHRU".into(), "1".into())]);
        } else {
            assert!(unset.is_empty(), "{unset:?}");
        }
    }

    #[test]
    fn exit_codes_follow_mpiexec() {
        let failed = |how| Outcome::Failed { process: 2, how };
        assert_eq!(Outcome::Success.exit_code(), 0);
        assert_eq!(failed(Failure::Exited(7)).exit_code(), 7);
        assert_eq!(failed(Failure::Signaled(9)).exit_code(), 137);
        assert_eq!(failed(Failure::NoFinalize).exit_code(), 1);
        let abort = |code| {
            failed(Failure::Aborted {
                code,
                message: "bye".into(),
            })
        };
        assert_eq!(abort(5).exit_code(), 5);
        assert_eq!(abort(0).exit_code(), 1);
        assert_eq!(
            failed(Failure::Exited(7)).to_string(),
            "process 2 exited with status 7"
        );
    }
}
