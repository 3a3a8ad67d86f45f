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
//! | `session.rs` | the PMI connection kept for the job's life: allgather (put, fence, get of every process's key, chunked at the value limit), barrier, finalize |
//! | `bootstrap.rs` | the job's shape agreed across processes: the rank blocks, the build id, the job secret, the local process index |
//! | `server.rs` | a PMI-1 server (the built-in launcher's, and the tests') |
//! | `launcher.rs` | the built-in launcher: `--processes N` re-executes the program N times and forwards the exit status as `mpiexec` does |
//!
//! ## What a job does with it
//!
//! [`join`] runs when a job starts (`runtime/run.rs`):
//! * with `--processes N` (and no launcher variables) it becomes the
//!   built-in launcher and never returns: the process exits with the job's
//!   status (`launcher.rs`);
//! * without launcher variables it does nothing (no connection, no cost
//!   beyond reading a few variables once);
//! * under a launcher's job of one process it starts PMI, finalizes it (so
//!   the launcher sees a clean exit) and lets the job run in this process,
//!   as without a launcher; later jobs of the process do the same without
//!   talking to the launcher again;
//! * under a launcher's job of several processes it starts PMI, agrees on
//!   the job's shape with the other processes (`bootstrap.rs`) and returns
//!   the [`Bootstrap`], whose session stays open for the job. PMI starts
//!   once per process, so a process of a multi-process launch runs one
//!   job: a later one is [`Error::Unsupported`].
//!
//! Until the transport joins the processes into one job, `run_job` ends a
//! multi-process job with [`unsupported`] (which finalizes the session).

mod bootstrap;
mod env;
mod launcher;
mod pmi;
mod server;
mod session;
mod wire;

use std::sync::Mutex;
use std::time::Duration;

pub(crate) use bootstrap::{Bootstrap, Shape};
pub(crate) use session::Session;

use crate::error::Error;
use crate::transport::mesh::Mesh;

/// What a job asks of the launch layer (from its configuration).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Request {
    /// The world's shape.
    pub(crate) shape: Shape,
    /// `--processes N` / `MYRIAD_PROCESSES`: be the built-in launcher.
    pub(crate) processes: Option<u32>,
}

/// Joins the launcher's job: `Ok(None)` if this process runs the job alone
/// (no launcher, or a launcher's job of one process), the bootstrap of a
/// job of several processes otherwise. With `request.processes`, becomes
/// the built-in launcher and exits the process with the job's status.
pub(crate) fn join(request: &Request) -> Result<Option<Bootstrap>, Error> {
    /// The answer for the process's later jobs, once the first has joined.
    static LATER: Mutex<Option<Result<(), Error>>> = Mutex::new(None);
    let var = |name: &str| std::env::var(name).ok();
    if let Some(n) = request.processes {
        if env::detect(&var).map_err(Error::Launch)?.is_some() {
            return Err(Error::config(
                "--processes/MYRIAD_PROCESSES starts processes itself, but a launcher \
                 (mpiexec, srun) already started this one: give one or the other",
            ));
        }
        launcher::run_and_exit(n);
    }
    let mut later = LATER.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(answer) = &*later {
        return answer.clone().map(|()| None);
    }
    let joined = join_with(&var, pmi::DEFAULT_TIMEOUT, &request.shape);
    *later = Some(match &joined {
        Ok(None) => Ok(()),
        Ok(Some(b)) => Err(Error::unsupported(format!(
            "{} started this program as {} processes, and each runs one job: PMI ended with \
             the first job of this process (process {})",
            b.launcher, b.processes, b.process
        ))),
        Err(e) => Err(e.clone()),
    });
    joined
}

/// [`join`] with the environment read through `var`, waiting at most
/// `timeout` for each reply (the built-in launcher aside).
fn join_with(
    var: &dyn Fn(&str) -> Option<String>,
    timeout: Duration,
    shape: &Shape,
) -> Result<Option<Bootstrap>, Error> {
    let Some(found) = env::detect(var).map_err(Error::Launch)? else {
        return Ok(None);
    };
    let stream = found.open(timeout).map_err(Error::Launch)?;
    let client = pmi::Client::init(stream, &found.start, timeout).map_err(Error::Launch)?;
    if client.size() == 1 {
        client.finalize().map_err(Error::Launch)?;
        return Ok(None);
    }
    let launcher = if var("MYRIAD_LAUNCHER").as_deref() == Some("processes") {
        "myriad --processes"
    } else {
        found.launcher
    };
    Bootstrap::exchange(Session::new(client), shape, launcher, var).map(Some)
}

/// Connects this process with every other process of the job (the mesh,
/// `transport/mesh.rs`): listens on this process's address
/// (`MYRIAD_TCP_ADDRESS`, ...) and exchanges addresses through the
/// session's allgather, all within `timeout`.
pub(crate) fn mesh(bootstrap: &mut Bootstrap, timeout: Duration) -> Result<Mesh, Error> {
    let ip = crate::transport::mesh::listen_ip()?;
    let session = &mut bootstrap.session;
    Mesh::establish(
        bootstrap.process,
        bootstrap.processes,
        &bootstrap.credentials,
        ip,
        &mut |address| session.allgather("mesh", address).map_err(Error::Launch),
        timeout,
    )
}

/// Ends a multi-process job until the transport can run it: builds the
/// mesh (so every multi-process launch exercises it), finalizes the
/// session (the launcher sees an orderly end) and returns the error every
/// process reports.
pub(crate) fn unsupported(mut bootstrap: Bootstrap) -> Error {
    if let Err(e) = mesh(&mut bootstrap, crate::transport::mesh::DEFAULT_TIMEOUT) {
        let _ = bootstrap.session.finalize();
        return e;
    }
    let error = Error::unsupported(format!(
        "multi-process jobs need the transport (issue 9): {} started this program as {} \
         processes (this is process {}, hosting {} of {} ranks), and myriad cannot join them \
         into one job yet; start it once, without the launcher, and give the rank count with \
         --ranks N or MYRIAD_RANKS",
        bootstrap.launcher,
        bootstrap.processes,
        bootstrap.process,
        bootstrap.blocks[bootstrap.process as usize],
        bootstrap.blocks.iter().map(|&b| u64::from(b)).sum::<u64>(),
    ));
    match bootstrap.session.finalize() {
        Ok(()) => error,
        Err(e) => Error::Launch(e),
    }
}

#[cfg(test)]
mod tests;
