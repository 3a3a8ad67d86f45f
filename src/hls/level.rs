//! Levels of the hierarchy, the groups of ranks at each level, and the
//! level barrier.
//!
//! A rank's group at a level follows from the job's *initial static
//! assignment* of ranks to workers (`RankAssignment`) and the placement of
//! workers on the machine: the worker group is the rank's assigned worker,
//! the NUMA group the NUMA node of that worker's processing unit, and so on.
//! Idle workers may steal ranks that have not started, so a rank may run on
//! another worker than its group's; grouping by the assignment keeps groups
//! deterministic and their sizes known before any rank runs (a barrier needs
//! them).

use std::fmt;
use std::panic::Location;
use std::sync::atomic::{AtomicU64, Ordering};

use super::AccessError;
use crate::error::OrRaise;
use crate::hardware::{RankAssignment, WorkerPlacement};
use crate::identity::LocalIndex;
use crate::runtime::job::Job;
use crate::sched::{self, RankCtx, WaitInfo, WaitOp};
use crate::sync::spin::SpinLock;

/// A level of the machine whose ranks share [`Hls`](super::Hls) values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HlsLevel {
    /// Every rank of the process (MPC's `node`): one group.
    Process,
    /// The ranks whose workers sit on one package (socket).
    Package,
    /// The ranks whose workers sit on one NUMA node.
    Numa,
    /// The ranks assigned to one worker (MPC's `core`).
    Worker,
}

impl HlsLevel {
    /// Every level, widest first.
    pub const ALL: [HlsLevel; 4] = [
        HlsLevel::Process,
        HlsLevel::Package,
        HlsLevel::Numa,
        HlsLevel::Worker,
    ];

    /// The level's name, as in messages.
    pub fn name(self) -> &'static str {
        match self {
            HlsLevel::Process => "process",
            HlsLevel::Package => "package",
            HlsLevel::Numa => "numa",
            HlsLevel::Worker => "worker",
        }
    }

    fn index(self) -> usize {
        self as usize
    }

    /// The calling rank's group at this level.
    ///
    /// # Panics
    ///
    /// Outside of any rank, in a task acting for one, or in a rank spawned
    /// while the job runs (groups are fixed at start).
    #[track_caller]
    pub fn group(self) -> HlsGroup {
        with_own_rank(|ctx| Job::of(ctx).hls().layout.group(self, ctx.local))
            .or_raise_access("HLS group")
    }

    /// Waits until every rank of the calling rank's group at this level
    /// has called `barrier` (the `n`-th call of each rank of a group meets
    /// the `n`-th of the others). The rank parks meanwhile.
    ///
    /// ```
    /// use myriad::hls::HlsLevel;
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    ///
    /// let arrived = AtomicUsize::new(0);
    /// let seen = myriad::Runtime::builder().ranks(6).workers(2).run(|_| {
    ///     arrived.fetch_add(1, Ordering::SeqCst);
    ///     HlsLevel::Process.barrier();
    ///     arrived.load(Ordering::SeqCst)
    /// }).unwrap();
    /// assert_eq!(seen, [6; 6]);
    /// ```
    ///
    /// # Panics
    ///
    /// Outside of any rank, or in a task acting for one.
    #[track_caller]
    pub fn barrier(self) {
        let site = Location::caller();
        with_own_rank(|ctx| {
            let hls = Job::of(ctx).hls();
            let group = hls.layout.group(self, ctx.local);
            hls.barriers[self.index()][group.index].wait(ctx, group.size, site);
        })
        .or_raise_access("HLS barrier");
    }
}

impl fmt::Display for HlsLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The group of ranks of one level that a rank belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HlsGroup {
    level: HlsLevel,
    index: usize,
    size: usize,
}

impl HlsGroup {
    /// The level.
    pub fn level(&self) -> HlsLevel {
        self.level
    }

    /// The group's index among the groups of its level (dense, from 0: the
    /// worker index for [`HlsLevel::Worker`], the rank of the NUMA node
    /// among the NUMA nodes that have workers for [`HlsLevel::Numa`]).
    pub fn index(&self) -> usize {
        self.index
    }

    /// Number of ranks in the group.
    pub fn size(&self) -> usize {
        self.size
    }
}

/// Runs `f` with the calling rank's own context (not a task's or an OS
/// thread's), lent for the call only (`sched::rank::with_current`).
pub(crate) fn with_own_rank<R>(f: impl FnOnce(&RankCtx) -> R) -> Result<R, AccessError> {
    sched::rank::with_current(|ctx| {
        let ctx = ctx.ok_or(AccessError::OutsideRank)?;
        match ctx.locals.refusal() {
            // A rank that is ending still has its groups.
            None | Some(AccessError::Destroyed) => Ok(f(ctx)),
            Some(refusal) => Err(refusal),
        }
    })
}

/// `or_raise` for access errors of HLS operations.
pub(crate) trait OrRaiseAccess<T> {
    fn or_raise_access(self, what: &str) -> T;
}

impl<T> OrRaiseAccess<T> for Result<T, AccessError> {
    #[track_caller]
    fn or_raise_access(self, what: &str) -> T {
        match self {
            Ok(v) => v,
            Err(err) => panic!("{what}: {err}"),
        }
    }
}

/// How the ranks of a job divide into groups at every level.
#[derive(Debug)]
pub(crate) struct Layout {
    assignment: RankAssignment,
    /// Per level: the group of each worker.
    worker_group: [Box<[u32]>; 4],
    /// Per level: the rank count of each group.
    sizes: [Box<[usize]>; 4],
}

impl Layout {
    pub(crate) fn new(placements: &[WorkerPlacement], assignment: RankAssignment) -> Layout {
        let workers = assignment.workers();
        let counts = assignment.counts();
        let by = |key: &dyn Fn(usize) -> usize| -> (Box<[u32]>, Box<[usize]>) {
            // Dense group ids in order of the key (NUMA node, package).
            let mut keys: Vec<usize> = (0..workers).map(key).collect();
            keys.sort_unstable();
            keys.dedup();
            let groups: Box<[u32]> = (0..workers)
                .map(|w| keys.binary_search(&key(w)).expect("key listed") as u32)
                .collect();
            let mut sizes = vec![0; keys.len()];
            for (w, &g) in groups.iter().enumerate() {
                sizes[g as usize] += counts[w];
            }
            (groups, sizes.into_boxed_slice())
        };
        let pu = |w: usize| placements.get(w).map(|p| p.pu);
        let process = by(&|_| 0);
        let package = by(&|w| pu(w).map_or(0, |pu| pu.package));
        let numa = by(&|w| pu(w).map_or(0, |pu| pu.numa));
        let worker = by(&|w| w);
        Layout {
            assignment,
            worker_group: [process.0, package.0, numa.0, worker.0],
            sizes: [process.1, package.1, numa.1, worker.1],
        }
    }

    /// The number of groups at `level`.
    pub(crate) fn groups(&self, level: HlsLevel) -> usize {
        self.sizes[level.index()].len()
    }

    /// The rank count of group `index` of `level`.
    pub(crate) fn group_size(&self, level: HlsLevel, index: usize) -> usize {
        self.sizes[level.index()][index]
    }

    /// The group of the rank of local index `rank` at `level`.
    pub(crate) fn group(&self, level: HlsLevel, rank: LocalIndex) -> HlsGroup {
        assert!(
            (rank.get() as usize) < self.assignment.ranks(),
            "HLS groups are made of the ranks the job started with ({}): the rank of local \
             index {rank} was spawned while the job ran and belongs to none",
            self.assignment.ranks()
        );
        let worker = self.assignment.worker_of(rank.get() as usize);
        let index = self.worker_group[level.index()][worker] as usize;
        HlsGroup {
            level,
            index,
            size: self.sizes[level.index()][index],
        }
    }
}

/// A barrier of one group, reusable: arrivals are counted under a lock, and
/// the last one bumps the epoch and wakes the others.
///
/// No wake-up is lost: a waiter registers its slot and reads the epoch
/// under the lock, then parks until the epoch moves; the last arrival moves
/// it and takes the waiter list under the same lock (the pattern of
/// `coll::round`).
#[derive(Debug, Default)]
pub(crate) struct GroupBarrier {
    epoch: AtomicU64,
    synced: SpinLock<BarrierSynced>,
}

#[derive(Debug, Default)]
struct BarrierSynced {
    arrived: usize,
    waiters: Vec<u32>,
}

impl GroupBarrier {
    pub(crate) fn wait(&self, ctx: &RankCtx, size: usize, site: &'static Location<'static>) {
        let job = Job::of(ctx);
        let mut synced = self.synced.lock();
        synced.arrived += 1;
        if synced.arrived >= size {
            synced.arrived = 0;
            let waiters = std::mem::take(&mut synced.waiters);
            // Changed only under the lock.
            self.epoch.fetch_add(1, Ordering::Release);
            drop(synced);
            sched::unpark_many(job.sched(), &waiters);
            return;
        }
        let epoch = self.epoch.load(Ordering::Relaxed);
        synced.waiters.push(ctx.slot);
        drop(synced);
        let info = WaitInfo::simple(WaitOp::Barrier, site);
        sched::wait_until(ctx, &info, || self.epoch.load(Ordering::Acquire) != epoch).or_raise();
    }
}
