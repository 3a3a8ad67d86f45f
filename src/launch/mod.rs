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
//! | `pmix.rs` | the PMIx client (feature `pmix`, libpmix): the same operations under Open MPI's `mpirun` and `srun --mpi=pmix` |
//! | `session.rs` | the PMI or PMIx connection kept for the job's life: allgather (put, fence, get of every process's key, chunked at the value limit), barrier, finalize |
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
//! `run_job` then joins the processes into one job: [`connect`] (each
//! process's share of its host, the mesh, the TCP transport over it), the
//! job, and [`finish`] (the launcher's barrier, finalize) or, when the job
//! failed, [`abandon`] (finalize, no barrier: a peer may be gone).

mod bootstrap;
mod env;
mod launcher;
mod pmi;
#[cfg(feature = "pmix")]
mod pmix;
mod server;
mod session;
mod wire;

use std::sync::{Arc, Mutex};
use std::time::Duration;

pub(crate) use bootstrap::{Bootstrap, Shape};
pub(crate) use session::Session;

use crate::error::Error;
use crate::transport::choice::Choice;
use crate::transport::mesh::Mesh;
use crate::transport::Transport;

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
    let found = match env::detect(var).map_err(Error::Launch)? {
        None => return Ok(None),
        Some(env::Found::Pmi(found)) => found,
        #[cfg(feature = "pmix")]
        Some(env::Found::Pmix(found)) => {
            let client = pmix::Client::init(timeout).map_err(Error::Launch)?;
            if client.size() == 1 {
                client.finalize().map_err(Error::Launch)?;
                return Ok(None);
            }
            let session = Session::over(session::Kvs::Pmix(client));
            return Bootstrap::exchange(session, shape, found.launcher, var).map(Some);
        }
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

/// This process's index among the job's processes on its host, and their
/// count.
pub(crate) type HostShare = (u32, u32);

/// The host name this process publishes (processes with one name share
/// shared memory, `split_shared` parts and a host level of hierarchical
/// collectives): `MYRIAD_HOST` if set, else the machine's name.
///
/// `MYRIAD_HOST` emulates several hosts on one machine (tests, benchmarks):
/// one name for this process, or a comma-separated list with one name per
/// process of the job (process `p` takes the `p`-th), which is how the
/// processes of one launch (all with the same environment) get different
/// hosts, e.g. `MYRIAD_HOST=a,a,b,b` with `--processes 4`.
pub(crate) fn host_name(
    var: &dyn Fn(&str) -> Option<String>,
    process: u32,
    processes: u32,
) -> Result<String, Error> {
    let Some(value) = var("MYRIAD_HOST") else {
        return crate::environment::processor_name();
    };
    let names: Vec<&str> = value.split(',').map(str::trim).collect();
    let name = match names.len() {
        1 => names[0],
        n if n == processes as usize => names[process as usize],
        n => {
            return Err(Error::config(format!(
                "MYRIAD_HOST={value:?} lists {n} hosts for a job of {processes} processes: \
                 give one name, or one per process"
            )))
        }
    };
    if name.is_empty() {
        return Err(Error::config(format!(
            "MYRIAD_HOST={value:?} gives process {process} an empty host name"
        )));
    }
    Ok(name.to_string())
}

/// Joins this process to the others of a job of several: the transport
/// `MYRIAD_TRANSPORT` chooses (`transport/choice.rs`) over the mesh, and
/// this process's share of its host (its index among the job's processes
/// on this host, and their count, from the host names every process
/// publishes).
pub(crate) fn connect(bootstrap: &mut Bootstrap) -> Result<(Arc<dyn Transport>, HostShare), Error> {
    let choice = Choice::from_env(&|name| std::env::var(name).ok())?;
    let host = host_name(
        &|name| std::env::var(name).ok(),
        bootstrap.process,
        bootstrap.processes,
    )?;
    let hosts = bootstrap
        .session
        .allgather("host", &host)
        .map_err(Error::Launch)?;
    bootstrap.hosts = Some(hosts.clone());
    // The processing units are the machine's: with emulated hosts
    // (`MYRIAD_HOST`), the share comes from the machines' own names.
    let machines = if std::env::var_os("MYRIAD_HOST").is_some() {
        let machine = crate::environment::processor_name()?;
        bootstrap
            .session
            .allgather("machine", &machine)
            .map_err(Error::Launch)?
    } else {
        hosts.clone()
    };
    let this = bootstrap.process as usize;
    let mine = &machines[this];
    let share = (
        machines[..this].iter().filter(|h| *h == mine).count() as u32,
        machines.iter().filter(|h| *h == mine).count() as u32,
    );
    crate::transport::route::check_one_host(choice, &hosts)?;
    let missing: Option<&str> = match choice {
        Choice::Auto | Choice::Tcp | Choice::Shm => None,
        #[cfg(feature = "ofi")]
        Choice::Ofi => None,
        #[cfg(not(feature = "ofi"))]
        Choice::Ofi => Some("libfabric is not built in (it needs the `ofi` cargo feature)"),
    };
    if let Some(why) = missing {
        return Err(Error::unsupported(format!(
            "MYRIAD_TRANSPORT={}: {why}; use MYRIAD_TRANSPORT=tcp or auto",
            choice.name()
        )));
    }
    // Without the `ofi` feature neither is changed below.
    #[cfg_attr(not(feature = "ofi"), allow(unused_mut))]
    let mut mesh = mesh(bootstrap, crate::transport::mesh::DEFAULT_TIMEOUT)?;
    // libfabric for every peer (`ofi`), or for the peers shared memory
    // does not reach (`auto` with a fabric).
    #[cfg_attr(not(feature = "ofi"), allow(unused_mut))]
    let mut network: Option<Box<dyn crate::transport::route::Network>> = None;
    #[cfg(feature = "ofi")]
    if let Some((opened, names)) = ofi(bootstrap, choice)? {
        let this = crate::identity::ProcessId::new(bootstrap.process);
        let streams = std::mem::take(&mut mesh.streams);
        let ofi = opened.join(this, streams, &names)?;
        if choice == Choice::Ofi {
            return Ok((Arc::new(ofi), share));
        }
        network = Some(Box::new(ofi));
    }
    let session = &mut bootstrap.session;
    let transport = crate::transport::route::connect(
        choice,
        bootstrap.process,
        &hosts,
        mesh.streams,
        network,
        &|name| std::env::var(name).ok(),
        &mut |name, value| session.allgather(name, value).map_err(Error::Launch),
    )?;
    Ok((transport, share))
}

/// The libfabric endpoint of this process, its name exchanged, when
/// `choice` is `ofi`, or `auto` and every process has a fabric provider
/// (`transport/ofi/`); `None` for TCP. Every process publishes its name or
/// why it has none, so all fail together (naming the first that failed)
/// rather than some waiting for the others.
#[cfg(feature = "ofi")]
fn ofi(
    bootstrap: &mut Bootstrap,
    choice: Choice,
) -> Result<Option<(crate::transport::ofi::Opened, Vec<String>)>, Error> {
    use crate::transport::ofi::{fabric_provider, OfiTransport};
    let session = &mut bootstrap.session;
    if choice == Choice::Auto {
        let up = fabric_provider().is_some();
        let all = session
            .allgather("ofi-up", if up { "1" } else { "0" })
            .map_err(Error::Launch)?;
        if all.iter().any(|v| v != "1") {
            return Ok(None);
        }
    } else if choice != Choice::Ofi {
        return Ok(None);
    }
    let opened = OfiTransport::open();
    let mine = match &opened {
        Ok(o) => o.name_hex(),
        Err(_) => "-".to_string(),
    };
    let names = session.allgather("ofi", &mine).map_err(Error::Launch)?;
    let opened = opened?;
    if let Some(p) = names.iter().position(|n| n == "-") {
        return Err(Error::config(format!(
            "MYRIAD_TRANSPORT=ofi: process {p} could not open a libfabric endpoint (its own \
             error says why)"
        )));
    }
    Ok(Some((opened, names)))
}

/// Ends this process's part in a job that ran to its end: meets the other
/// processes at the launcher's barrier (so none finalizes while another
/// may still need the key-value space), then finalizes.
pub(crate) fn finish(mut bootstrap: Bootstrap) -> Result<(), Error> {
    bootstrap.session.barrier().map_err(Error::Launch)?;
    bootstrap.session.finalize().map_err(Error::Launch)
}

/// Ends this process's part in a job that failed with `error`: finalizes
/// without the barrier (another process may be gone; the transport already
/// told the others why the job ended) and returns `error`.
pub(crate) fn abandon(bootstrap: Bootstrap, error: Error) -> Error {
    let _ = bootstrap.session.finalize();
    error
}

#[cfg(test)]
mod tests;
