//! Starting jobs: the [`Runtime`] builder, [`run`] and [`launch`].
//!
//! A job is a set of ranks running one closure each, on worker threads that
//! exist for the job's duration. Several jobs may run at once in one process
//! (for instance in parallel `#[test]`s); they share nothing.

pub(crate) mod config;
pub(crate) mod job;
pub(crate) mod panic_hook;

use config::{parse_bool, parse_count, parse_guard, parse_size, var, Config, Flags};

use crate::environment::{Threading, Universe};
use crate::error::Error;
use crate::sched::stack::GuardMode;
use crate::topology::{Level, RankOrder};

/// Configures and runs jobs.
///
/// Each setting is taken from, in order: the builder method, the
/// command-line flag (only with [`Runtime::from_env`]), the `MYRIAD_*`
/// environment variable, the default. See the README's configuration table.
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
    eager_limit: Option<usize>,
    stack_guard: Option<Option<GuardMode>>,
    check_collectives: Option<bool>,
    threading: Option<Threading>,
    map_by: Option<Level>,
    rank_order: Option<RankOrder>,
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
    /// `--workers N` from the command line (other arguments are ignored).
    pub fn from_env() -> Runtime {
        Runtime {
            flags: Flags::parse(std::env::args().skip(1)),
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

    /// Resolves every setting.
    pub(crate) fn config(&self) -> Result<Config, Error> {
        let pus = crate::topology::Topology::detect()
            .map(|t| t.pus().len())
            .unwrap_or(1)
            .max(1);
        let ranks = match (self.ranks, &self.flags.ranks, var("MYRIAD_RANKS")) {
            (Some(n), _, _) => n,
            (None, Some(v), _) => parse_count("--ranks", v)?,
            (None, None, Some(v)) => parse_count("MYRIAD_RANKS", &v)?,
            (None, None, None) => pus,
        };
        if ranks == 0 {
            return Err(Error::config("a job needs at least one rank"));
        }
        if ranks > u32::MAX as usize / 2 {
            return Err(Error::config(format!(
                "{ranks} ranks is more than myriad supports"
            )));
        }
        let workers = match (self.workers, &self.flags.workers, var("MYRIAD_WORKERS")) {
            (Some(n), _, _) => n,
            (None, Some(v), _) => parse_count("--workers", v)?,
            (None, None, Some(v)) => parse_count("MYRIAD_WORKERS", &v)?,
            (None, None, None) => pus,
        };
        if workers == 0 {
            return Err(Error::config("a job needs at least one worker"));
        }
        let stack_size = match (self.stack_size, var("MYRIAD_STACK_SIZE")) {
            (Some(n), _) => n,
            (None, Some(v)) => parse_size("MYRIAD_STACK_SIZE", &v)?,
            (None, None) => config::DEFAULT_STACK_SIZE,
        };
        let bind = match (self.bind, var("MYRIAD_BIND")) {
            (Some(b), _) => b,
            (None, Some(v)) => parse_bool("MYRIAD_BIND", &v)?,
            (None, None) => true,
        };
        let report_bindings = match (self.report_bindings, var("MYRIAD_REPORT_BINDINGS")) {
            (Some(b), _) => b,
            (None, Some(v)) => parse_bool("MYRIAD_REPORT_BINDINGS", &v)?,
            (None, None) => false,
        };
        let eager_limit = match (self.eager_limit, var("MYRIAD_EAGER_LIMIT")) {
            (Some(n), _) => n,
            (None, Some(v)) => parse_size("MYRIAD_EAGER_LIMIT", &v)?,
            (None, None) => config::DEFAULT_EAGER_LIMIT,
        };
        let guard = match (self.stack_guard, var("MYRIAD_STACK_GUARD")) {
            (Some(g), _) => g,
            (None, Some(v)) => parse_guard("MYRIAD_STACK_GUARD", &v)?,
            (None, None) => None,
        };
        let check_collectives = match (self.check_collectives, var("MYRIAD_CHECK_COLLECTIVES")) {
            (Some(b), _) => b,
            (None, Some(v)) => parse_bool("MYRIAD_CHECK_COLLECTIVES", &v)?,
            (None, None) => true,
        };
        let threading = match (self.threading, var("MYRIAD_THREADING")) {
            (Some(t), _) => t,
            (None, Some(v)) => v
                .parse::<Threading>()
                .map_err(|e| Error::config(format!("MYRIAD_THREADING: {e}")))?,
            (None, None) => Threading::Single,
        };
        let map_by = match (self.map_by, var("MYRIAD_MAP_BY")) {
            (Some(l), _) => l,
            (None, Some(v)) => v
                .parse::<Level>()
                .map_err(|e| Error::config(format!("MYRIAD_MAP_BY: {e}")))?,
            (None, None) => Level::Core,
        };
        let rank_order = match (self.rank_order, var("MYRIAD_RANK_ORDER")) {
            (Some(o), _) => o,
            (None, Some(v)) => v
                .parse::<RankOrder>()
                .map_err(|e| Error::config(format!("MYRIAD_RANK_ORDER: {e}")))?,
            (None, None) => RankOrder::Block,
        };
        Ok(Config {
            ranks,
            threading,
            map_by,
            rank_order,
            // Not clamped to the rank count: workers without ranks of their
            // own still run the micro-tasks of parallel regions.
            workers,
            check_collectives,
            stack_size,
            bind,
            report_bindings,
            eager_limit,
            guard,
        })
    }

    /// Runs `f` once per rank, each on its own coroutine, and returns the
    /// ranks' results in rank order. Blocks until every rank has finished.
    ///
    /// `f` may borrow from the caller (like `std::thread::scope`).
    ///
    /// # Errors
    ///
    /// The configuration is invalid; a rank panicked (the error names it and
    /// carries its message); the ranks deadlocked (the error lists what each
    /// waits for and where); resources ran out.
    pub fn run<T, F>(&self, f: F) -> Result<Vec<T>, Error>
    where
        T: Send,
        F: Fn(Universe) -> T + Sync,
    {
        let config = self.config()?;
        job::run_job(&config, f)
    }

    /// Runs `rank_main` once per rank, for programs ported from rsmpi, where
    /// each rank calls `mpi::initialize()` itself; exits the process with a
    /// message and status 1 if the job fails.
    pub fn launch<F>(&self, rank_main: F)
    where
        F: Fn() + Sync,
    {
        let result = self.config().and_then(|config| {
            job::run_job(&config, |universe| {
                // The rank initialises MPI itself: hand the universe back.
                drop(universe);
                if let Some(ctx) = crate::sched::rank::current() {
                    ctx.initialized.set(false);
                }
                rank_main()
            })
        });
        if let Err(error) = result {
            eprintln!("myriad: job failed: {error}");
            std::process::exit(1);
        }
    }
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
