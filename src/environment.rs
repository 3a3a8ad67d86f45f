//! The environment of a rank: its [`Universe`], initialisation, thread levels
//! and timers, shaped like rsmpi's `mpi::environment`.

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use crate::communicator::{InterCommunicator, SimpleCommunicator};
use crate::error::{raise, CommError, Error};
use crate::identity::WorldRank;
use crate::runtime::job::{Job, SpawnedGroup};
use crate::sched;
use crate::Rank;

pub use crate::sched::Threading;

/// A rank's handle on the MPI environment (rsmpi's `Universe`). Every rank
/// has its own; dropping it is `MPI_Finalize` for that rank (nothing to do in
/// one process).
#[derive(Debug)]
pub struct Universe {
    job: Arc<Job>,
    rank: WorldRank,
    buffer_size: usize,
    /// The group of a spawned rank: its world and parents.
    spawned: Option<Arc<SpawnedGroup>>,
}

impl Universe {
    pub(crate) fn new(job: Arc<Job>, rank: WorldRank) -> Universe {
        Universe {
            job,
            rank,
            buffer_size: 0,
            spawned: None,
        }
    }

    /// The universe of a rank spawned while the job runs
    /// ([`Communicator::spawn_ranks`](crate::traits::Communicator::spawn_ranks)).
    pub(crate) fn spawned(job: Arc<Job>, rank: WorldRank, group: Arc<SpawnedGroup>) -> Universe {
        Universe {
            job,
            rank,
            buffer_size: 0,
            spawned: Some(group),
        }
    }

    /// The world communicator: every rank of the job, or, for a rank
    /// spawned while the job runs, every rank spawned with it by the same
    /// call (`MPI_COMM_WORLD` of the spawned job, in which it has rank
    /// `world rank - first spawned world rank`).
    pub fn world(&self) -> SimpleCommunicator {
        match &self.spawned {
            None => SimpleCommunicator::from_core(self.job.world(self.rank)),
            Some(group) => SimpleCommunicator::from_core(crate::coll::CommCore::new(
                Arc::clone(self.job.core()),
                Arc::clone(&group.world),
                (self.rank.get() - group.first) as Rank,
            )),
        }
    }

    /// The inter-communicator to the parents of a spawned rank
    /// (`MPI_Comm_get_parent`): its local group is the ranks spawned with
    /// it, its remote group the parent communicator's ranks. `None` for
    /// the ranks the job started with. The same as
    /// [`Communicator::parent`](crate::traits::Communicator::parent).
    pub fn parent(&self) -> Option<InterCommunicator> {
        let group = self.spawned.as_ref()?;
        Some(InterCommunicator::from_core(crate::coll::CommCore::new(
            Arc::clone(self.job.core()),
            Arc::clone(&group.parent),
            (self.rank.get() - group.first) as Rank,
        )))
    }

    /// `MPI_UNIVERSE_SIZE`: the most ranks the job may have
    /// ([`Runtime::max_ranks`](crate::Runtime::max_ranks)) when it was
    /// set, else the ranks the job started with (spawning beyond them
    /// works up to the stack budget).
    pub fn size(&self) -> Option<usize> {
        Some(self.job.universe_size() as usize)
    }

    /// The processes of the job (1 unless a launcher started several: then
    /// each hosts a contiguous block of world ranks, in process order; a
    /// myriad extension).
    pub fn process_count(&self) -> usize {
        self.job.processes().count() as usize
    }

    /// This process's index among the job's processes, `0..process_count()`
    /// (a myriad extension).
    pub fn process_index(&self) -> usize {
        self.job.processes().this().get() as usize
    }

    /// The world ranks this process hosts: `run` returns their results, in
    /// this order (the first is the offset of the process's block; a
    /// myriad extension).
    pub fn process_ranks(&self) -> std::ops::Range<Rank> {
        let block = self.job.processes().block(self.job.processes().this());
        block.start as Rank..block.end as Rank
    }

    /// `MPI_APPNUM`: myriad runs one application per job.
    pub fn appnum(&self) -> Option<isize> {
        Some(0)
    }

    /// Size of the buffered-send buffer. Buffered sends in myriad need no
    /// attached buffer (they copy to the heap); the value is only recorded.
    pub fn buffer_size(&self) -> usize {
        self.buffer_size
    }

    /// Records a buffered-send buffer size (see [`buffer_size`](Self::buffer_size)).
    pub fn set_buffer_size(&mut self, size: usize) {
        self.buffer_size = size;
    }

    /// Detaches the buffered-send buffer (a no-op, see
    /// [`buffer_size`](Self::buffer_size)).
    pub fn detach_buffer(&mut self) {
        self.buffer_size = 0;
    }

    /// Disconnects from the parent job (`MPI_Comm_disconnect` of the
    /// parent): a no-op, spawned ranks share the job of their parents
    /// (nothing to disconnect; [`parent`](Self::parent) still answers).
    pub fn disconnect_parent(&mut self) {}
}

/// Initialises MPI for the calling rank and returns its [`Universe`]; `None`
/// if the rank already initialised (rsmpi's `initialize`). Equivalent to
/// `initialize_with_threading(Threading::Single)`.
///
/// # Panics
///
/// Outside of any rank: start ranks with [`crate::run`], [`crate::launch`]
/// or [`crate::Runtime`].
#[track_caller]
pub fn initialize() -> Option<Universe> {
    initialize_with_threading(Threading::Single).map(|(universe, _)| universe)
}

/// Initialises MPI for the calling rank asking for thread level `threading`;
/// returns the universe and the level actually provided, or `None` if
/// already initialised.
///
/// myriad provides every level, so the level provided is the one asked
/// for. With [`Threading::Serialized`] or [`Threading::Multiple`], OS
/// threads the rank spawns may call MPI through the rank's communicators:
/// their blocking calls park the OS thread, not a worker (join such threads
/// with [`crate::thread::spawn`]'s handle, which parks the rank, rather than
/// blocking the worker in `std::thread::JoinHandle::join`). At the lower
/// levels such calls fail with an error naming the level. A plain
/// `std::thread` becomes a party of the job at its first MPI call; if every
/// rank waits for it before that call, the job is reported deadlocked.
/// Threads from [`crate::thread::spawn`] count from their start.
#[track_caller]
pub fn initialize_with_threading(threading: Threading) -> Option<(Universe, Threading)> {
    let first = sched::rank::with_current(|ctx| {
        let ctx = ctx?;
        if ctx.initialized.replace(true) {
            return Some(None);
        }
        let job = Job::arc_of(ctx);
        job.sched().set_threading_of(ctx.local, threading);
        Some(Some((Universe::new(job, ctx.rank), threading)))
    });
    let Some(first) = first else {
        raise(Error::Comm(CommError::InitializeOutsideRank));
    };
    first
}

/// The thread level of the calling rank (`MPI_Query_thread`); `Single`
/// outside any rank.
pub fn threading_support() -> Threading {
    sched::rank::with_current(|ctx| {
        ctx.map_or(Threading::Single, |ctx| ctx.sched().threading_of(ctx.local))
    })
}

/// Number of worker threads of the calling rank's job (0 outside any rank;
/// a myriad extension).
pub fn worker_count() -> usize {
    sched::rank::with_current(|ctx| ctx.map_or(0, |ctx| ctx.sched().worker_count()))
}

/// Whether the calling rank has initialised MPI.
pub fn is_initialized() -> bool {
    sched::rank::with_current(|ctx| ctx.is_some_and(|ctx| ctx.initialized.get()))
}

/// Whether the calling rank has finalised MPI (`MPI_Finalized`): always
/// `false`. Dropping a myriad `Universe` does not finalise anything (a
/// rank's communicators work until it returns, and the job ends with its
/// last rank), so there is no finalised state to observe.
pub fn is_finalized() -> bool {
    false
}

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// Seconds since an arbitrary moment of this process (`MPI_Wtime`).
pub fn time() -> f64 {
    epoch().elapsed().as_secs_f64()
}

/// Resolution of [`time`] in seconds (`MPI_Wtick`).
pub fn time_resolution() -> f64 {
    1e-9
}

/// The MPI standard version the API follows: 3.1.
pub fn version() -> (i32, i32) {
    (3, 1)
}

/// A description of this library.
pub fn library_version() -> Result<String, Error> {
    Ok(format!("myriad {}", env!("CARGO_PKG_VERSION")))
}

/// The host name (`MPI_Get_processor_name`).
pub fn processor_name() -> Result<String, Error> {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most `buf.len()` bytes into `buf`.
    let ret = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if ret != 0 {
        return Ok("localhost".to_string());
    }
    let len = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    Ok(String::from_utf8_lossy(&buf[..len]).into_owned())
}
