//! Bootstrap under existing launchers (layer L6): the PMI client that lets
//! a process started by MPICH's `mpiexec` (Hydra) or `srun --mpi=pmi2`
//! learn its place in the launcher's job and exchange keys with the other
//! processes.
//!
//! | file | question it answers |
//! |---|---|
//! | `env.rs` | which launcher started this process (its variables), and opening the connection to its PMI server (`PMI_FD` or `PMI_PORT`) |
//! | `wire.rs` | the bytes: PMI-1 lines, PMI-2 frames, replies as maps |
//! | `pmi.rs` | the client: start-up, put, fence, get, barrier, finalize, abort; limits and timeouts |
//!
//! ## What a job does with it today
//!
//! [`join`] runs once per process, when the first job starts
//! (`runtime/run.rs`). Without launcher variables it does nothing (no
//! connection, no cost beyond reading a few variables once). Under a
//! launcher it starts PMI, then:
//! * with one process, finalizes PMI (so the launcher sees a clean exit)
//!   and lets the job run in this process, as without a launcher;
//! * with several, finalizes PMI and fails every process with
//!   [`Error::Unsupported`]: joining processes into one job needs the
//!   transport (issue 9), and running the whole job in each process — what
//!   a program did before — is never what the user meant.
//!
//! The result is kept: later jobs of the process get the same answer
//! without talking to the launcher again (PMI starts once per process).

mod env;
mod pmi;
mod wire;

use std::sync::OnceLock;
use std::time::Duration;

use crate::error::Error;

/// This process's place in a launcher's job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Joined {
    /// The process's index in the launcher's job.
    pub(crate) rank: u32,
    /// The launcher's process count.
    pub(crate) size: u32,
}

/// Joins the launcher's job, once per process: `Ok` if this process may run
/// a job on its own (no launcher, or a launcher's job of one process).
pub(crate) fn join() -> Result<(), Error> {
    static JOINED: OnceLock<Result<Option<Joined>, Error>> = OnceLock::new();
    JOINED
        .get_or_init(|| join_with(&|name| std::env::var(name).ok(), pmi::DEFAULT_TIMEOUT))
        .clone()
        .map(|_| ())
}

/// [`join`] with the environment read through `var`, waiting at most
/// `timeout` for each reply.
fn join_with(
    var: &dyn Fn(&str) -> Option<String>,
    timeout: Duration,
) -> Result<Option<Joined>, Error> {
    let Some(found) = env::detect(var).map_err(Error::Launch)? else {
        return Ok(None);
    };
    let stream = found.open(timeout).map_err(Error::Launch)?;
    let client = pmi::Client::init(stream, &found.start, timeout).map_err(Error::Launch)?;
    let joined = Joined {
        rank: client.rank(),
        size: client.size(),
    };
    let finalized = client.finalize().map_err(Error::Launch);
    if joined.size > 1 {
        return Err(Error::unsupported(format!(
            "multi-process jobs need the transport (issue 9): {} started this program as {} \
             processes (this is process {}), and myriad cannot join them into one job yet; \
             start it once, without the launcher, and give the rank count with --ranks N or \
             MYRIAD_RANKS",
            found.launcher, joined.size, joined.rank
        )));
    }
    finalized?;
    Ok(Some(joined))
}

#[cfg(test)]
mod tests;
