//! Starting jobs: the [`Runtime`] builder, [`run`] and [`launch`].
//!
//! A job is a set of ranks running one closure each, on worker threads that
//! exist for the job's duration. Several jobs may run at once in one process
//! (for instance in parallel `#[test]`s); they share nothing.

pub(crate) mod config;
pub(crate) mod job;
mod memory_report;
pub(crate) mod panic_hook;
mod run;

use config::{parse_bool, parse_count, parse_guard, parse_size, var, Config, Flags};

use crate::environment::{Threading, Universe};
use crate::error::Error;
use crate::hardware::{Level, RankOrder};
use crate::sched::stack::GuardMode;
use crate::trace::{ProfileTo, RankSet};
use std::path::PathBuf;

/// Configures and runs jobs.
///
/// Each setting is taken from, in order: the builder method, the
/// command-line flag (only with [`Runtime::from_env`]), the `MYRIAD_*`
/// environment variable, the default. A variable that is set must be valid
/// even when the builder or a flag overrides it. See the README's
/// configuration table.
///
/// ```
/// let sums = myriad::Runtime::builder()
///     .ranks(4)
///     .workers(2)
///     .run(|universe| {
///         use myriad::traits::*;
///         let world = universe.world();
///         world.rank() * 10
///     })
///     .expect("job failed");
/// assert_eq!(sums, vec![0, 10, 20, 30]);
/// ```
#[derive(Debug, Clone, Default)]
pub struct Runtime {
    ranks: Option<usize>,
    workers: Option<usize>,
    stack_size: Option<usize>,
    bind: Option<bool>,
    report_bindings: Option<bool>,
    report_memory: Option<bool>,
    allocator_statistics: Option<config::AllocatorStatistics>,
    eager_limit: Option<usize>,
    stack_guard: Option<Option<GuardMode>>,
    check_collectives: Option<bool>,
    threading: Option<Threading>,
    map_by: Option<Level>,
    rank_order: Option<RankOrder>,
    trace: Option<PathBuf>,
    trace_ranks: Option<RankSet>,
    trace_max_bytes: Option<usize>,
    trace_window: Option<std::ops::Range<std::time::Duration>>,
    profile: Option<Option<ProfileTo>>,
    max_ranks: Option<usize>,
    flags: Flags,
}

/// How rank stacks get their guard pages (see [`Runtime::stack_guard`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StackGuard {
    /// `madvise(MADV_GUARD_INSTALL)` when the kernel has it, else `mprotect`.
    Auto,
    /// Page-table guard markers (Linux ≥ 6.13): no extra memory mappings.
    Madvise,
    /// `mprotect`: two memory mappings per stack (`vm.max_map_count` bounds
    /// the number of ranks).
    Mprotect,
}

impl Runtime {
    /// A runtime with nothing set: environment variables and defaults apply.
    pub fn builder() -> Runtime {
        Runtime::default()
    }

    /// Like [`builder`](Self::builder), and also reads `--ranks N` and
    /// `--workers N` (or `--ranks=N`) from the command line.
    ///
    /// The other arguments are the program's and left alone, except a slip
    /// of myriad's two flags (`--rank`, `--Workers`, `-ranks`, `--rnaks`):
    /// that, and a flag without its value, make [`run`](Self::run) fail
    /// with a configuration error naming the flag. Arguments after a lone
    /// `--` are never read: a program with a flag such as `--rank` of its
    /// own takes it there.
    pub fn from_env() -> Runtime {
        Runtime {
            flags: Flags::parse(
                std::env::args_os()
                    .skip(1)
                    .map(|a| a.to_string_lossy().into_owned()),
            ),
            ..Runtime::default()
        }
    }

    /// Number of ranks (`MYRIAD_RANKS`; default: the processing units this
    /// process may use).
    pub fn ranks(mut self, ranks: usize) -> Self {
        self.ranks = Some(ranks);
        self
    }

    /// Number of worker threads (`MYRIAD_WORKERS`; default: the processing
    /// units this process may use, never more than the ranks).
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = Some(workers);
        self
    }

    /// Usable stack bytes per rank (`MYRIAD_STACK_SIZE`; default 256 KiB).
    /// Only the pages a rank touches use memory.
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.stack_size = Some(bytes);
        self
    }

    /// Whether workers are bound to their processing unit (`MYRIAD_BIND`;
    /// default on).
    pub fn bind(mut self, bind: bool) -> Self {
        self.bind = Some(bind);
        self
    }

    /// Print where each worker is bound and how many ranks it hosts
    /// (`MYRIAD_REPORT_BINDINGS`; default off).
    pub fn report_bindings(mut self, report: bool) -> Self {
        self.report_bindings = Some(report);
        self
    }

    /// Print, when the job ends, where its memory went: each rank's touched
    /// stack, mailbox, unexpected messages and `rank_local!` values, the
    /// eager pool, `Hls` values,
    /// next to the process RSS (`MYRIAD_REPORT_MEMORY`; default off; the
    /// line format is in the README's "Memory report").
    pub fn report_memory(mut self, report: bool) -> Self {
        self.report_memory = Some(report);
        self
    }

    /// Figures of the program's global allocator for the memory report
    /// (`name`, bytes), read when the job ends: myriad does not choose the
    /// allocator, the program does. With `myriad-alloc`:
    /// `.allocator_statistics(|| { let s = myriad_alloc::stats();
    /// vec![("in_use", s.in_use), ("mapped", s.mapped)] })`.
    pub fn allocator_statistics(mut self, read: fn() -> Vec<(&'static str, u64)>) -> Self {
        self.allocator_statistics = Some(read);
        self
    }

    /// Largest message a standard send copies to a pooled buffer when no
    /// receive is posted yet; larger ones wait for the receive and are copied
    /// once (`MYRIAD_EAGER_LIMIT`; default 16 KiB, at most 64 KiB).
    pub fn eager_limit(mut self, bytes: usize) -> Self {
        self.eager_limit = Some(bytes);
        self
    }

    /// Whether collective calls are checked for mismatches across ranks
    /// (`MYRIAD_CHECK_COLLECTIVES`; default on).
    pub fn check_collectives(mut self, check: bool) -> Self {
        self.check_collectives = Some(check);
        self
    }

    /// How stack guard pages are installed (`MYRIAD_STACK_GUARD`; default
    /// auto).
    pub fn stack_guard(mut self, guard: StackGuard) -> Self {
        self.stack_guard = Some(match guard {
            StackGuard::Auto => None,
            StackGuard::Madvise => Some(GuardMode::Madvise),
            StackGuard::Mprotect => Some(GuardMode::Mprotect),
        });
        self
    }

    /// The thread level every rank starts with (`MYRIAD_THREADING`:
    /// `single`, `funneled`, `serialized` or `multiple`; default `single`).
    /// With `Serialized` or `Multiple`, OS threads a rank spawns may call MPI
    /// as that rank. A rank that calls
    /// [`initialize_with_threading`](crate::initialize_with_threading) gets
    /// the level it asks for instead.
    pub fn threading(mut self, threading: Threading) -> Self {
        self.threading = Some(threading);
        self
    }

    /// The topology level workers are spread over (`MYRIAD_MAP_BY`:
    /// `core` by default, `numa`, `package` or `pu`): consecutive workers go
    /// to different objects of that level, round-robin. A level the
    /// machine's topology does not have is an error that lists the levels it
    /// has.
    pub fn map_by(mut self, level: Level) -> Self {
        self.map_by = Some(level);
        self
    }

    /// How ranks are dealt to workers at start (`MYRIAD_RANK_ORDER`:
    /// `block` by default, or `cyclic`). Idle workers may still steal ranks
    /// that have not started.
    pub fn rank_order(mut self, order: RankOrder) -> Self {
        self.rank_order = Some(order);
        self
    }

    /// Write a timeline trace of the job to `path` when it ends
    /// (`MYRIAD_TRACE=path`; default none): Chrome trace-event JSON, which
    /// ui.perfetto.dev and `chrome://tracing` open. In a job of several
    /// processes each writes its own file, its index before the extension
    /// (`trace.json` → `trace.1.json`). See the README's "Tracing and
    /// profiling".
    pub fn trace(mut self, path: impl Into<PathBuf>) -> Self {
        self.trace = Some(path.into());
        self
    }

    /// Trace only these world ranks, inclusive ranges
    /// (`MYRIAD_TRACE_RANKS=0-63,100`; default all).
    pub fn trace_ranks(mut self, ranges: &[std::ops::RangeInclusive<u32>]) -> Self {
        self.trace_ranks = Some(RankSet::from_ranges(
            ranges.iter().map(|r| (*r.start(), *r.end())),
        ));
        self
    }

    /// Stop recording trace events past this many bytes (each worker its
    /// share), saying so in the file (`MYRIAD_TRACE_MAX_MB`, in MiB;
    /// default 512 MiB).
    pub fn trace_max_bytes(mut self, bytes: usize) -> Self {
        self.trace_max_bytes = Some(bytes);
        self
    }

    /// Trace only this time window since the job started
    /// (`MYRIAD_TRACE_WINDOW=100-250`, in milliseconds; default the whole
    /// job): events outside it are not recorded, slices crossing its edges
    /// are cut at them. An empty window is a configuration error.
    pub fn trace_window(mut self, window: std::ops::Range<std::time::Duration>) -> Self {
        self.trace_window = Some(window);
        self
    }

    /// Print a profile on standard error when the job ends
    /// (`MYRIAD_PROFILE=1`; default off): per operation calls, bytes, total
    /// and longest time, the ranks that waited most, compute against MPI
    /// time per rank.
    pub fn profile(mut self, on: bool) -> Self {
        self.profile = Some(on.then_some(ProfileTo::Stderr));
        self
    }

    /// Write the profile (see [`profile`](Self::profile)) to `path` instead
    /// (`MYRIAD_PROFILE=path`; numbered per process as for
    /// [`trace`](Self::trace)).
    pub fn profile_to(mut self, path: impl Into<PathBuf>) -> Self {
        self.profile = Some(Some(ProfileTo::File(path.into())));
        self
    }

    /// The most ranks the job ever has (`MYRIAD_MAX_RANKS`): the ranks
    /// started plus every rank spawned while it runs, finished ones
    /// included (their slots are kept). When set, also
    /// `MPI_UNIVERSE_SIZE`, which
    /// [`Universe::size`](crate::environment::Universe::size) returns.
    /// Default: as many rank stacks as 32 TiB of address space hold, at
    /// most 2^24, and never fewer than the ranks started. Spawning beyond
    /// it is an error that names it; with `mprotect` guard pages each spawn
    /// must also fit under `vm.max_map_count`.
    pub fn max_ranks(mut self, ranks: usize) -> Self {
        self.max_ranks = Some(ranks);
        self
    }

    /// Resolves every setting.
    ///
    /// A variable that is set must be valid even where a builder value or a
    /// flag overrides it (a mistake there would otherwise go unnoticed
    /// until the override is gone).
    pub(crate) fn config(&self) -> Result<Config, Error> {
        if let Some(message) = &self.flags.error {
            return Err(Error::config(message.clone()));
        }
        /// The variable `name`, parsed by `parse` if it is set.
        fn env<T>(
            name: &str,
            parse: impl FnOnce(&str, &str) -> Result<T, Error>,
        ) -> Result<Option<T>, Error> {
            var(name).map(|v| parse(name, &v)).transpose()
        }
        /// A variable of a type with a `FromStr` whose error names the
        /// valid values.
        fn parsed<T: std::str::FromStr>(name: &str, v: &str) -> Result<T, Error>
        where
            T::Err: std::fmt::Display,
        {
            v.parse::<T>()
                .map_err(|e| Error::config(format!("{name}: {e}")))
        }
        // Detected only if a default needs it.
        let detected = std::cell::OnceCell::new();
        let pus = || {
            *detected.get_or_init(|| {
                crate::hardware::Topology::detect()
                    .map(|t| t.pus().len())
                    .unwrap_or(1)
                    .max(1)
            })
        };
        let env_ranks = env("MYRIAD_RANKS", parse_count)?;
        let ranks = match (self.ranks, &self.flags.ranks) {
            (Some(n), _) => n,
            (None, Some(v)) => parse_count("--ranks", v)?,
            (None, None) => env_ranks.unwrap_or_else(pus),
        };
        if ranks == 0 {
            return Err(Error::config("a job needs at least one rank"));
        }
        if ranks > u32::MAX as usize / 2 {
            return Err(Error::config(format!(
                "{ranks} ranks is more than myriad supports"
            )));
        }
        let env_workers = env("MYRIAD_WORKERS", parse_count)?;
        let workers_given =
            self.workers.is_some() || self.flags.workers.is_some() || env_workers.is_some();
        let workers = match (self.workers, &self.flags.workers) {
            (Some(n), _) => n,
            (None, Some(v)) => parse_count("--workers", v)?,
            (None, None) => env_workers.unwrap_or_else(pus),
        };
        if workers == 0 {
            return Err(Error::config("a job needs at least one worker"));
        }
        let stack_size = pick(
            self.stack_size,
            env("MYRIAD_STACK_SIZE", parse_size)?,
            config::DEFAULT_STACK_SIZE,
        );
        let bind = pick(self.bind, env("MYRIAD_BIND", parse_bool)?, true);
        let report_bindings = pick(
            self.report_bindings,
            env("MYRIAD_REPORT_BINDINGS", parse_bool)?,
            false,
        );
        let report_memory = pick(
            self.report_memory,
            env("MYRIAD_REPORT_MEMORY", parse_bool)?,
            false,
        );
        let eager_limit = pick(
            self.eager_limit,
            env("MYRIAD_EAGER_LIMIT", parse_size)?,
            config::DEFAULT_EAGER_LIMIT,
        );
        let guard = pick(
            self.stack_guard,
            env("MYRIAD_STACK_GUARD", parse_guard)?,
            None,
        );
        let check_collectives = pick(
            self.check_collectives,
            env("MYRIAD_CHECK_COLLECTIVES", parse_bool)?,
            true,
        );
        let threading = pick(
            self.threading,
            env("MYRIAD_THREADING", parsed::<Threading>)?,
            Threading::Single,
        );
        let map_by = pick(
            self.map_by,
            env("MYRIAD_MAP_BY", parsed::<Level>)?,
            Level::Core,
        );
        let rank_order = pick(
            self.rank_order,
            env("MYRIAD_RANK_ORDER", parsed::<RankOrder>)?,
            RankOrder::Block,
        );
        let env_trace = var("MYRIAD_TRACE").map(PathBuf::from);
        if let Some(path) = &env_trace {
            config::check_output_dir("MYRIAD_TRACE", path)?;
        }
        if let Some(path) = &self.trace {
            config::check_output_dir("Runtime::trace", path)?;
        }
        let trace = crate::trace::Settings {
            trace: self.trace.clone().or(env_trace),
            ranks: pick(
                self.trace_ranks.clone().map(Some),
                env("MYRIAD_TRACE_RANKS", config::parse_ranks)?.map(Some),
                None,
            ),
            max_bytes: pick(
                self.trace_max_bytes,
                env("MYRIAD_TRACE_MAX_MB", config::parse_mib)?,
                crate::trace::DEFAULT_MAX_BYTES,
            ),
            window: pick(
                self.trace_window
                    .as_ref()
                    .map(config::window_of_range)
                    .transpose()?
                    .map(Some),
                env("MYRIAD_TRACE_WINDOW", config::parse_window)?.map(Some),
                None,
            ),
            profile: pick(
                self.profile.clone(),
                env("MYRIAD_PROFILE", config::parse_profile)?,
                None,
            ),
        };
        let max_ranks = match self.max_ranks {
            Some(n) => Some(n),
            None => env("MYRIAD_MAX_RANKS", parse_count)?,
        };
        if let Some(max) = max_ranks.filter(|&max| max < ranks) {
            return Err(Error::config(format!(
                "MYRIAD_MAX_RANKS={max} is fewer than the {ranks} ranks the job starts with"
            )));
        }
        if max_ranks.is_some_and(|max| max > u32::MAX as usize / 2) {
            return Err(Error::config(
                "MYRIAD_MAX_RANKS is more ranks than myriad supports (2^31 - 1)",
            ));
        }
        let ranks_given = self.ranks.is_some() || self.flags.ranks.is_some() || env_ranks.is_some();
        let launch = config::launch_request(&self.flags, ranks, ranks_given)?;
        Ok(Config {
            launch,
            ranks,
            threading,
            map_by,
            rank_order,
            max_ranks,
            // Not clamped to the rank count: workers without ranks of their
            // own still run the micro-tasks of parallel regions.
            workers,
            workers_given,
            check_collectives,
            stack_size,
            bind,
            report_bindings,
            report_memory,
            allocator_statistics: self.allocator_statistics,
            eager_limit,
            guard,
            trace,
        })
    }

    /// Runs `f` once per rank, each on its own coroutine, and returns the
    /// ranks' results in rank order. Blocks until every rank has finished.
    ///
    /// `f` may borrow from the caller (like `std::thread::scope`).
    ///
    /// With `--processes N` or `MYRIAD_PROCESSES=N` (the built-in launcher,
    /// see the README's "Launchers"), this process runs no ranks: `run`
    /// starts the program N times and **does not return**; it exits the
    /// process with the job's status, as `mpiexec` does.
    ///
    /// # Errors
    ///
    /// The configuration is invalid; a rank panicked (the error names it and
    /// carries its message); the ranks deadlocked (the error lists what each
    /// waits for and where); resources ran out; a launcher (`mpiexec`,
    /// `srun`) started this program as several processes, which myriad
    /// cannot join into one job yet ([`Error::Unsupported`]), or its
    /// variables or PMI replies are not usable ([`Error::Launch`]; see the
    /// README's "Launchers").
    pub fn run<T, F>(&self, f: F) -> Result<Vec<T>, Error>
    where
        T: Send,
        F: Fn(Universe) -> T + Sync,
    {
        let config = self.config()?;
        run::run_job(&config, f)
    }

    /// Runs one job of `ranks.len()` processes as threads of this process,
    /// process `p` hosting `ranks[p]` ranks (world ranks in process order),
    /// joined by the in-memory loopback transport; returns each process's
    /// result: its ranks' results in world rank order, or the error that
    /// ended its job. The builder's rank count is not used. For tests of
    /// cross-process behaviour without sockets or a launcher.
    ///
    /// # Errors
    ///
    /// The configuration is invalid.
    #[doc(hidden)]
    pub fn run_joined<T, F>(
        &self,
        ranks: &[usize],
        f: F,
    ) -> Result<Vec<Result<Vec<T>, Error>>, Error>
    where
        T: Send,
        F: Fn(Universe) -> T + Sync,
    {
        let config = self.config()?;
        Ok(run::run_joined(&config, ranks, f))
    }

    /// [`run_joined`](Self::run_joined) with process `p` on the emulated
    /// host `hosts[p]` (equal values: one host), as `split_shared` and the
    /// host level of hierarchical collectives see them.
    ///
    /// # Errors
    ///
    /// The configuration is invalid, or `hosts` does not have one entry per
    /// process.
    #[doc(hidden)]
    pub fn run_joined_on_hosts<T, F>(
        &self,
        ranks: &[usize],
        hosts: &[u32],
        f: F,
    ) -> Result<Vec<Result<Vec<T>, Error>>, Error>
    where
        T: Send,
        F: Fn(Universe) -> T + Sync,
    {
        let config = self.config()?;
        run::run_joined_on_hosts(&config, ranks, hosts, f)
    }

    /// [`run_joined`](Self::run_joined) over TCP: the processes are joined
    /// by connected TCP streams over the loopback interface.
    ///
    /// # Errors
    ///
    /// The configuration is invalid, or the streams could not be made.
    #[doc(hidden)]
    pub fn run_joined_tcp<T, F>(
        &self,
        ranks: &[usize],
        f: F,
    ) -> Result<Vec<Result<Vec<T>, Error>>, Error>
    where
        T: Send,
        F: Fn(Universe) -> T + Sync,
    {
        let config = self.config()?;
        run::run_joined_tcp(&config, ranks, f)
    }

    /// [`run_joined`](Self::run_joined) over shared memory: each process
    /// has its segment and rings, as the processes of one host
    /// (`MYRIAD_SHM_RING_BYTES` and `MYRIAD_SHM_CMA` apply).
    ///
    /// # Errors
    ///
    /// The configuration is invalid, or shared memory could not be set up.
    #[doc(hidden)]
    pub fn run_joined_shm<T, F>(
        &self,
        ranks: &[usize],
        f: F,
    ) -> Result<Vec<Result<Vec<T>, Error>>, Error>
    where
        T: Send,
        F: Fn(Universe) -> T + Sync,
    {
        let config = self.config()?;
        run::run_joined_shm(&config, ranks, f)
    }

    /// Runs `rank_main` once per rank, for programs ported from rsmpi, where
    /// each rank calls `mpi::initialize()` itself; exits the process with a
    /// message and status 1 if the job fails.
    pub fn launch<F>(&self, rank_main: F)
    where
        F: Fn() + Sync,
    {
        let result = self.config().and_then(|config| {
            run::run_job(&config, |universe| {
                // The rank initialises MPI itself: hand the universe back.
                drop(universe);
                crate::sched::rank::with_current(|ctx| {
                    if let Some(ctx) = ctx {
                        ctx.initialized.set(false);
                    }
                });
                rank_main()
            })
        });
        if let Err(error) = result {
            say!("myriad: job failed: {error}");
            std::process::exit(1);
        }
    }
}

/// The builder's value, else the variable's, else the default.
fn pick<T>(builder: Option<T>, env: Option<T>, default: T) -> T {
    builder.or(env).unwrap_or(default)
}

/// Runs `f` on `ranks` ranks and returns their results in rank order
/// (`Runtime::builder().ranks(ranks).run(f)`).
///
/// ```
/// use myriad::traits::*;
///
/// let ranks = myriad::run(3, |universe| universe.world().rank()).unwrap();
/// assert_eq!(ranks, vec![0, 1, 2]);
/// ```
pub fn run<T, F>(ranks: usize, f: F) -> Result<Vec<T>, Error>
where
    T: Send,
    F: Fn(Universe) -> T + Sync,
{
    Runtime::builder().ranks(ranks).run(f)
}

/// The entry point of a ported rsmpi program: `fn main() {
/// mpi::launch(rank_main) }`, where `rank_main` is the old `main` and calls
/// `mpi::initialize()`. The rank count comes from `--ranks N` or
/// `MYRIAD_RANKS`. Exits with status 1 and the job's error if it fails.
pub fn launch<F>(rank_main: F)
where
    F: Fn() + Sync,
{
    Runtime::from_env().launch(rank_main)
}
