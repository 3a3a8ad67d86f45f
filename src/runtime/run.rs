//! Running a job (layer L6): `run_job` is the whole life of a job:
//!
//! 1. discover the topology and place one worker per processing unit;
//! 2. map a stack pool (checking the mapping budget when guard pages split
//!    mappings) and give each worker its block of unstarted ranks;
//! 3. run the workers on scoped threads until every rank finished or the job
//!    failed (the workers unwind what is left, see `sched::worker`);
//! 4. return the ranks' results, or the error that ended the job.
//!
//! The job the ranks share is `job.rs` (layer L5).
//!
//! A job of several processes ([`run_job_in`] with a [`Joined`]) runs the
//! same way in each process, on the ranks its [`Processes`] places there,
//! plus a progress thread that blocks in the transport's wait and hands
//! arrivals to the ranks when no worker is idle to poll; when its ranks
//! are done the process tells the others (goodbye, or the error that ended
//! its job) and closes the transport. The progress thread also runs the
//! termination-detection wave (`p2p::remote::Remote::detect`) that reports
//! a deadlock across processes. [`run_joined`] runs several such
//! processes as threads of this one, joined by the loopback transport.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use crossbeam_deque::Worker as Deque;

use super::config::Config;
use super::job::{Job, JobGrowth};
use crate::environment::Universe;
use crate::error::{Error, ResourceError};
use crate::hardware::{self, RankAssignment, Topology};
use crate::identity::{LocalIndex, ProcessId, Processes};
use crate::sched;
use crate::sched::stack::StackPool;
use crate::sched::worker::{self, WorkerArgs, WorkerShared};
use crate::transport::loopback::Loopback;
use crate::transport::tcp::{self, TcpTransport};
use crate::transport::Transport;

/// The longest the progress thread blocks in the transport's wait.
const POLL: Duration = Duration::from_millis(100);

/// The longest the progress thread stands aside for polling workers before
/// it looks again: how late it notices that they went back to computing.
const ASIDE: Duration = Duration::from_millis(1);

/// One result slot per rank of this process (by local index), each written
/// once by its rank.
struct Results<T> {
    slots: Box<[UnsafeCell<Option<T>>]>,
}

// SAFETY: each slot is written by exactly one rank (its own) and read only
// after all workers are joined; `T: Send` lets values cross threads.
unsafe impl<T: Send> Sync for Results<T> {}

impl<T> Results<T> {
    fn new(n: usize) -> Self {
        Results {
            slots: crate::grow::populated((0..n).map(|_| UnsafeCell::new(None))),
        }
    }

    /// # Safety
    ///
    /// Only the rank of local index `rank` calls this, once.
    unsafe fn set(&self, rank: LocalIndex, value: T) {
        // SAFETY: the caller is the slot's only writer.
        unsafe { *self.slots[rank.get() as usize].get() = Some(value) };
    }

    fn into_vec(self) -> Vec<T> {
        self.slots
            .into_vec()
            .into_iter()
            .map(|slot| slot.into_inner().expect("every rank returned"))
            .collect()
    }
}

/// Runs `f` on `config.ranks` ranks and returns their results in rank order
/// (the ranks of this process by local index: one process hosts them all,
/// in world rank order).
pub(crate) fn run_job<T, F>(config: &Config, f: F) -> Result<Vec<T>, Error>
where
    T: Send,
    F: Fn(Universe) -> T + Sync,
{
    // Under a launcher (or as the built-in one, which never returns).
    let Some(mut bootstrap) = crate::launch::join(&config.launch)? else {
        return run_job_in(config, None, f);
    };
    // One process of several: connect, run this process's ranks, then meet
    // the others at the launcher's barrier and finalize.
    let joined = match crate::launch::connect(&mut bootstrap) {
        Ok((transport, host)) => Joined {
            processes: bootstrap.processes_map(),
            transport,
            host_share: Some(host),
        },
        Err(error) => return Err(crate::launch::abandon(bootstrap, error)),
    };
    match run_job_in(config, Some(joined), f) {
        Ok(values) => crate::launch::finish(bootstrap).map(|()| values),
        Err(error) => Err(crate::launch::abandon(bootstrap, error)),
    }
}

/// How this process takes part in a job of several processes.
#[derive(Debug)]
pub(crate) struct Joined {
    /// Which process hosts which world ranks, and which one this is.
    pub(crate) processes: Processes,
    /// Frames to and from the other processes (its `this()` and process
    /// count must be those of `processes`).
    pub(crate) transport: Arc<dyn Transport>,
    /// This process's index among the job's processes on this host, and
    /// their count: its workers take that share of the host's processing
    /// units (`None`: no binding, as for processes that are threads of one
    /// program).
    pub(crate) host_share: Option<(u32, u32)>,
}

/// Runs `f` on the ranks of this process and returns their results by
/// local index (world ranks `processes.block(this)`, in order).
///
/// Without `joined`: one process hosting `config.ranks` ranks, no
/// transport (exactly [`run_job`]'s path after the launcher check). With
/// it: the world size and this process's ranks come from
/// `joined.processes` (`config.ranks` is not used), and the transport
/// joins this job to the others.
pub(crate) fn run_job_in<T, F>(
    config: &Config,
    joined: Option<Joined>,
    f: F,
) -> Result<Vec<T>, Error>
where
    T: Send,
    F: Fn(Universe) -> T + Sync,
{
    super::panic_hook::install();
    crate::coll::env_defaults()?;
    let (processes, transport) = match joined {
        None => (Processes::single(config.ranks as u32), None),
        Some(Joined {
            processes,
            transport,
            host_share,
        }) => {
            if transport.this() != processes.this() || transport.processes() != processes.count() {
                return Err(Error::config(format!(
                    "the transport is process {} of {}, the layout process {} of {}",
                    transport.this(),
                    transport.processes(),
                    processes.this(),
                    processes.count()
                )));
            }
            (processes, Some((transport, host_share)))
        }
    };
    let (transport, host_share) = transport.unzip();
    let ranks = processes.local_count() as usize;
    let topo = Topology::detect().map_err(|e| Error::config(e.to_string()))?;
    let placements = match host_share.flatten() {
        // A process of several on this host: its share of the PUs.
        Some((index, count)) => hardware::place_workers_in_share(
            &topo,
            config.workers_given.then_some(config.workers),
            config.map_by,
            index,
            count,
        ),
        None => hardware::place_workers(&topo, config.workers, config.map_by),
    }
    .map_err(|e| Error::config(format!("placing workers by {}: {e}", config.map_by)))?;
    let binds = config.bind && topo.binds_for_real();
    let workers = placements.len();
    let own_cpus = own_cpus(&placements, binds, host_share.flatten().map(|(_, n)| n));

    let mut pool = StackPool::new(config.stack_size, ranks, config.guard).map_err(|e| {
        Error::Resources(ResourceError::StackPool {
            reason: e.to_string(),
        })
    })?;
    pool.check_map_budget(ranks).map_err(Error::Resources)?;
    pool.color_stacks(ranks, workers);
    // A job of one process may grow to `max_ranks` (`Job::spawn`).
    let max_ranks = config
        .max_ranks
        .unwrap_or_else(|| pool.budget().max_stacks())
        .max(ranks);
    let processes = if processes.count() == 1 {
        processes.with_room(max_ranks as u32)
    } else {
        processes
    };
    if config.report_memory {
        pool.record_touched(ranks);
    }

    let assignment = RankAssignment::new(ranks, workers, config.rank_order);
    let deques: Vec<Deque<u32>> = (0..workers).map(|_| Deque::new_fifo()).collect();
    for (w, deque) in deques.iter().enumerate() {
        for rank in assignment.ranks_of(w) {
            deque.push(rank as u32);
        }
    }
    let shared: Box<[WorkerShared]> = deques
        .iter()
        .map(|d| WorkerShared::new(d.stealer()))
        .collect();
    let job = Job::new(
        &processes,
        shared,
        &placements,
        assignment,
        config.threading,
        config.eager_limit,
        config.check_collectives,
        transport.clone(),
        JobGrowth {
            max_ranks,
            universe_size: config.max_ranks.unwrap_or(processes.world_size() as usize) as u32,
            budget: pool.budget(),
        },
    );
    if config.trace.any() {
        let tracer = Arc::new(crate::trace::Tracer::new(
            config.trace.clone(),
            workers,
            processes.this().get(),
            processes.count(),
        ));
        let core = Arc::downgrade(&job);
        tracer.set_eager_probe(move || core.upgrade().map_or(0, |job| job.p2p().eager.idle().1));
        job.sched().install_tracer(tracer);
    }
    // While a peer may still send, no local deadlock is reported.
    if let Some(remote) = job.remote() {
        remote.count_as_waker(job.sched());
    }
    if config.report_bindings {
        // One write for the whole report (`say!`).
        let report = hardware::binding_report(&placements, &assignment.counts(), binds);
        say!(
            "[myriad] {topo}; stack guards: {:?}\n{}",
            pool.mode(),
            report.trim_end()
        );
    }

    let results = Results::new(ranks);
    let body = |rank, local: LocalIndex| {
        sched::rank::with_current(|ctx| {
            if let Some(ctx) = ctx {
                ctx.initialized.set(true);
            }
        });
        // Ranks spawned while the job runs come after the started ones and
        // run their own closure; `run` returns the started ranks' results.
        if local.get() as usize >= ranks {
            job.run_spawned(rank, local);
            return;
        }
        let universe = Universe::new(Arc::clone(&job), rank);
        let value = f(universe);
        // SAFETY: the body runs once per rank, on that rank.
        unsafe { results.set(local, value) };
    };
    let start = Barrier::new(workers);
    let exit = Barrier::new(workers);
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let mut handles = Vec::with_capacity(workers);
        for (index, deque) in deques.into_iter().enumerate() {
            let args = WorkerArgs {
                sched: job.sched(),
                host: &*job,
                index,
                deque,
                body: &body,
                pool: &pool,
                bind_to: binds.then_some(placements[index].pu.os_index),
                own_cpus,
                start: &start,
                exit: &exit,
            };
            let thread = std::thread::Builder::new()
                .name(format!("myriad-w{index}"))
                .spawn_scoped(scope, move || worker::run(args));
            let err = match thread {
                Ok(handle) => {
                    handles.push(handle);
                    continue;
                }
                Err(err) => err,
            };
            {
                // The workers already started wait for all at their exit
                // barrier: stand in for the missing ones.
                job.sched()
                    .fail(Error::Resources(ResourceError::WorkerThread {
                        index,
                        reason: err.to_string(),
                    }));
                for _ in index..workers {
                    let (start, exit) = (&start, &exit);
                    scope.spawn(move || {
                        start.wait();
                        exit.wait();
                    });
                }
                break;
            }
        }
        // The progress thread: arrivals while every worker runs a rank.
        let progress = transport.as_ref().map(|transport| {
            let (job, stop) = (&job, &stop);
            std::thread::Builder::new()
                .name("myriad-progress".into())
                .spawn_scoped(scope, move || {
                    let mut timeout = POLL;
                    let pollers = job.remote().map(|remote| remote.pollers());
                    while !stop.load(Ordering::Acquire) {
                        // Idle workers poll: waking for every arrival would
                        // only preempt them (`p2p/pollers.rs`).
                        if pollers.is_some_and(|p| p.stand_aside(ASIDE)) {
                            continue;
                        }
                        transport.wait(Some(timeout));
                        sched::Host::progress(&**job);
                        // The termination wave, while this process idles.
                        timeout = job
                            .remote()
                            .and_then(|remote| remote.detect(job.sched()))
                            .map_or(POLL, |next| next.min(POLL));
                    }
                })
        });
        for handle in handles {
            let _ = handle.join();
        }
        stop.store(true, Ordering::Release);
        if let Some(transport) = &transport {
            transport.wake();
        }
        if let Some(remote) = job.remote() {
            remote.pollers().release();
        }
        if let Some(Err(err)) = progress {
            job.sched()
                .fail(Error::Resources(ResourceError::WorkerThread {
                    index: workers,
                    reason: format!("the progress thread: {err}"),
                }));
        }
    });
    // Threads still acting for ranks get errors from now on.
    job.sched().end_threads();
    if config.report_bindings {
        let hosted: Vec<String> = job
            .sched()
            .ranks_per_worker()
            .iter()
            .enumerate()
            .map(|(i, n)| format!("worker {i}: {n}"))
            .collect();
        say!("[myriad] ranks run per worker: {}", hosted.join(", "));
    }
    if config.report_memory {
        super::memory_report::print(&job, &pool, config.allocator_statistics);
    }
    // The workers are joined: no stack is in use. A big pool unmaps on a
    // thread of its own while the rest of the job is taken down.
    drop(pool);
    if let Some(tracer) = job.sched().tracer() {
        tracer.finish();
    }
    let failure = job.sched().take_failure();
    if let Some(remote) = job.remote() {
        remote.finish(job.sched(), failure.as_ref());
    }
    if let Some(error) = failure {
        return Err(error);
    }
    Ok(results.into_vec())
}

/// Whether each of this process's workers (`placements`, bound to their PU
/// if `binds`) has a CPU that no other worker on this host uses, where
/// `host_processes` of the job's processes share this host
/// ([`WorkerArgs::own_cpus`]). Bound: the workers' PUs are distinct and the
/// host's processes got disjoint shares (no more processes than PUs).
/// Unbound: all the host's workers (as many per process as here) fit the
/// CPUs this process may use.
fn own_cpus(
    placements: &[hardware::WorkerPlacement],
    binds: bool,
    host_processes: Option<u32>,
) -> bool {
    let processes = host_processes.unwrap_or(1).max(1) as usize;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if binds {
        let mut pus: Vec<usize> = placements.iter().map(|p| p.pu.os_index).collect();
        pus.sort_unstable();
        pus.dedup();
        pus.len() == placements.len() && processes <= cpus
    } else {
        placements.len() * processes <= cpus
    }
}

/// Runs one job of `ranks.len()` processes, process `p` hosting
/// `ranks[p]` ranks, as threads of this process joined by the loopback
/// transport; returns each process's result (its ranks' results by local
/// index, or the error that ended its job).
pub(crate) fn run_joined<T, F>(config: &Config, ranks: &[usize], f: F) -> Vec<Result<Vec<T>, Error>>
where
    T: Send,
    F: Fn(Universe) -> T + Sync,
{
    let transports: Vec<Arc<dyn Transport>> = Loopback::join(ranks.len() as u32)
        .into_iter()
        .map(|t| t as Arc<dyn Transport>)
        .collect();
    run_processes(config, ranks, transports, f)
}

/// [`run_joined`] with process `p` on the emulated host `hosts[p]` (equal
/// values: one host): what `split_shared` and the host level of
/// hierarchical collectives see, as if the processes ran on those hosts.
pub(crate) fn run_joined_on_hosts<T, F>(
    config: &Config,
    ranks: &[usize],
    hosts: &[u32],
    f: F,
) -> Result<Vec<Result<Vec<T>, Error>>, Error>
where
    T: Send,
    F: Fn(Universe) -> T + Sync,
{
    if hosts.len() != ranks.len() {
        return Err(Error::config(format!(
            "{} hosts for a job of {} processes: give one host per process",
            hosts.len(),
            ranks.len()
        )));
    }
    let transports: Vec<Arc<dyn Transport>> = Loopback::join(ranks.len() as u32)
        .into_iter()
        .map(|t| t as Arc<dyn Transport>)
        .collect();
    Ok(run_processes_on(config, ranks, Some(hosts), transports, f))
}

/// [`run_joined`] over TCP streams connected through the loopback
/// interface.
pub(crate) fn run_joined_tcp<T, F>(
    config: &Config,
    ranks: &[usize],
    f: F,
) -> Result<Vec<Result<Vec<T>, Error>>, Error>
where
    T: Send,
    F: Fn(Universe) -> T + Sync,
{
    let mesh = tcp::loopback_mesh(ranks.len())
        .map_err(|e| Error::config(format!("connecting processes over TCP: {e}")))?;
    // `MYRIAD_TRANSPORT=ofi` reruns these jobs over libfabric, the streams
    // its control channel (as `launch::connect` does).
    #[cfg(feature = "ofi")]
    if crate::transport::choice::Choice::from_env(&|n| std::env::var(n).ok())?
        == crate::transport::choice::Choice::Ofi
    {
        let transports = crate::transport::ofi::join_in_process(mesh)?;
        return Ok(run_processes(config, ranks, transports, f));
    }
    let transports = mesh
        .into_iter()
        .enumerate()
        .map(|(p, streams)| {
            TcpTransport::new(ProcessId::new(p as u32), streams)
                .map(|t| Arc::new(t) as Arc<dyn Transport>)
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Error::config(format!("setting up the TCP transport: {e}")))?;
    Ok(run_processes(config, ranks, transports, f))
}

/// [`run_joined`] over shared memory (`transport/shm/`): each process
/// has its segment and rings, as processes of one host do.
pub(crate) fn run_joined_shm<T, F>(
    config: &Config,
    ranks: &[usize],
    f: F,
) -> Result<Vec<Result<Vec<T>, Error>>, Error>
where
    T: Send,
    F: Fn(Universe) -> T + Sync,
{
    let transports = crate::transport::route::joined_in_threads(ranks.len())?;
    Ok(run_processes(config, ranks, transports, f))
}

/// Runs one job of `transports.len()` processes as threads of this
/// process, process `p` hosting `ranks[p]` ranks and reaching the others
/// through `transports[p]`.
pub(crate) fn run_processes<T, F>(
    config: &Config,
    ranks: &[usize],
    transports: Vec<Arc<dyn Transport>>,
    f: F,
) -> Vec<Result<Vec<T>, Error>>
where
    T: Send,
    F: Fn(Universe) -> T + Sync,
{
    // Hosts a test emulates for jobs of this many processes
    // (`topology::emulate_hosts`), else one host.
    let emulated = crate::communicator::emulated_hosts(ranks.len());
    run_processes_on(config, ranks, emulated.as_deref(), transports, f)
}

/// [`run_processes`], process `p` on host `hosts[p]` (`None`: one host).
fn run_processes_on<T, F>(
    config: &Config,
    ranks: &[usize],
    hosts: Option<&[u32]>,
    transports: Vec<Arc<dyn Transport>>,
    f: F,
) -> Vec<Result<Vec<T>, Error>>
where
    T: Send,
    F: Fn(Universe) -> T + Sync,
{
    assert_eq!(ranks.len(), transports.len(), "one transport per process");
    let sizes: Vec<u32> = ranks.iter().map(|&n| n as u32).collect();
    // The processes share this program's processing units: each placing
    // its workers as if it had the machine to itself would bind them to
    // the same units, where a spinning worker of one process takes the
    // time of the other's.
    let config = &Config {
        bind: false,
        ..config.clone()
    };
    let f = &f;
    std::thread::scope(|scope| {
        let handles: Vec<_> = transports
            .into_iter()
            .enumerate()
            .map(|(p, transport)| {
                let mut processes = Processes::from_blocks(&sizes, ProcessId::new(p as u32));
                if let Some(hosts) = hosts {
                    processes = processes.with_hosts(hosts);
                }
                scope.spawn(move || {
                    let joined = Joined {
                        processes,
                        transport,
                        host_share: None,
                    };
                    run_job_in(config, Some(joined), f)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::CommError;
    use crate::runtime::Runtime;
    use crate::traits::*;

    /// Workers may spin only where each has a CPU of its own on the host:
    /// two workers of a process bound to one PU (a share of one PU, workers
    /// given) must not, nor processes that outnumber the CPUs.
    #[test]
    fn workers_spin_only_on_cpus_of_their_own() {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let on = |pus: &[usize]| -> Vec<hardware::WorkerPlacement> {
            pus.iter()
                .enumerate()
                .map(|(worker, &os_index)| hardware::WorkerPlacement {
                    worker,
                    pu: hardware::Pu {
                        os_index,
                        core: os_index,
                        numa: 0,
                        package: 0,
                    },
                })
                .collect()
        };
        assert!(own_cpus(&on(&[0]), true, None));
        assert!(
            !own_cpus(&on(&[0, 0]), true, Some(2)),
            "two workers on one PU"
        );
        assert!(
            !own_cpus(&on(&[0]), true, Some(cpus as u32 + 1)),
            "more processes than CPUs"
        );
        assert!(
            !own_cpus(&on(&[0, 1]), false, Some(cpus as u32)),
            "unbound, 2 per process"
        );
        if cpus >= 2 {
            assert!(own_cpus(&on(&[0, 1]), true, None));
            assert!(own_cpus(&on(&[1]), true, Some(2)));
        }
    }

    /// The mismatch checker of a communicator spanning processes forgets
    /// each call once this process's members have checked it: after six
    /// barriers on a world of 2 + 3 ranks, every process's map holds none
    /// of the first five (it kept every one when it waited for all five
    /// members).
    #[test]
    fn the_checker_forgets_calls_across_processes() {
        let config = Runtime::builder()
            .workers(2)
            .check_collectives(true)
            .config()
            .unwrap();
        let results = run_joined(&config, &[2, 3], |universe| {
            let world = universe.world();
            for _ in 0..6 {
                world.barrier();
            }
            (0..5)
                .filter(|&seq| {
                    crate::communicator::AsCore::core(&world)
                        .coll()
                        .checker
                        .first_of(seq)
                        .is_some()
                })
                .count()
        });
        for result in results {
            assert!(result.unwrap().iter().all(|&kept| kept == 0));
        }
    }

    /// Process 0 of a job of two runs one rank that waits for a message
    /// from process 1; `kill` ends process 1 without its goodbye. Process
    /// 0's job must fail naming process 1 and its world rank, not hang.
    fn lost_peer(transport: Arc<dyn Transport>, kill: impl FnOnce() + Send) -> Error {
        let config = Runtime::builder().workers(1).config().unwrap();
        let joined = Joined {
            processes: Processes::from_blocks(&[1, 1], ProcessId::new(0)),
            transport,
            host_share: None,
        };
        std::thread::scope(|s| {
            let job = s.spawn(|| {
                run_job_in(&config, Some(joined), |universe| {
                    universe.world().process_at_rank(1).receive::<u8>().0
                })
            });
            kill();
            job.join().unwrap().unwrap_err()
        })
    }

    fn assert_names_process_1(err: Error) {
        match &err {
            Error::Comm(CommError::ProcessLost {
                process: 1,
                first: 1,
                end: 2,
                ..
            }) => {}
            other => panic!("expected process 1 lost, got {other}"),
        }
        assert!(
            err.to_string()
                .starts_with("process 1 of the job (world ranks 1..2) was lost"),
            "{err}"
        );
    }

    #[test]
    fn a_severed_loopback_peer_fails_the_job_naming_it() {
        let mut transports = Loopback::join(2);
        let other = transports.pop().unwrap();
        let this = transports.pop().unwrap();
        assert_names_process_1(lost_peer(this, move || other.sever()));
    }

    #[test]
    fn a_dropped_tcp_connection_fails_the_job_naming_the_peer() {
        let mut mesh = tcp::loopback_mesh(2).unwrap();
        let other = mesh.pop().unwrap();
        let this = TcpTransport::new(ProcessId::new(0), mesh.pop().unwrap()).unwrap();
        assert_names_process_1(lost_peer(Arc::new(this), move || drop(other)));
    }

    /// A rank that keeps sending to a peer whose connection is gone (its
    /// sends fail) still ends with the loss, reported by the reading side.
    #[test]
    fn sends_to_a_dropped_tcp_peer_fail_the_job_naming_it() {
        let mut mesh = tcp::loopback_mesh(2).unwrap();
        let other = mesh.pop().unwrap();
        let this = TcpTransport::new(ProcessId::new(0), mesh.pop().unwrap()).unwrap();
        drop(other);
        let config = Runtime::builder().workers(1).config().unwrap();
        let joined = Joined {
            processes: Processes::from_blocks(&[1, 1], ProcessId::new(0)),
            transport: Arc::new(this),
            host_share: None,
        };
        let err = run_job_in(&config, Some(joined), |universe| {
            let world = universe.world();
            let peer = world.process_at_rank(1);
            for i in 0..1000u32 {
                peer.send(&i);
            }
            peer.send(&vec![0u8; 1 << 20][..]);
            peer.receive::<u8>().0
        })
        .unwrap_err();
        assert_names_process_1(err);
    }

    #[test]
    fn a_peer_sending_garbage_is_lost() {
        let mut mesh = tcp::loopback_mesh(2).unwrap();
        let mut other = mesh.pop().unwrap();
        let this = TcpTransport::new(ProcessId::new(0), mesh.pop().unwrap()).unwrap();
        let mut open = None;
        let err = lost_peer(Arc::new(this), || {
            let stream = other[0].as_mut().unwrap();
            std::io::Write::write_all(stream, b"GET / HTTP/1.1\r\n").unwrap();
            // Keep the stream open: the bytes, not the end, must fail it.
            open = Some(other);
        });
        drop(open);
        assert!(err.to_string().contains("a bad frame"), "{err}");
    }

    #[test]
    fn a_layout_that_disagrees_with_the_transport_is_refused() {
        let config = Runtime::builder().config().unwrap();
        let joined = Joined {
            processes: Processes::from_blocks(&[1, 1, 1], ProcessId::new(0)),
            transport: Loopback::join(2).swap_remove(0),
            host_share: None,
        };
        let err = run_job_in(&config, Some(joined), |_| ()).unwrap_err();
        assert!(err.to_string().contains("process 0 of 2"), "{err}");
    }
}
