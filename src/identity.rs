//! Rank identity: which process hosts which world rank.
//!
//! A *world rank* ([`WorldRank`]) names a rank of the whole job; it is what
//! communicators store and what users and reports see. A *local index*
//! ([`LocalIndex`]) numbers the ranks of this process: the scheduler's slot,
//! the mailbox, the eager pool's users, the `rank_local!` tables and the
//! result of `run` are indexed by it. [`Processes`] says where world ranks
//! live: each process hosts one contiguous block of world ranks, in process
//! order, so a world rank is (process, local index) and the local index is
//! its offset in its process's block.
//!
//! One process (every job today: nothing launches a second one yet) hosts
//! world ranks `0..n` at local indices `0..n`: the numbering is the one the
//! runtime always had. Mapping a world rank to a local index of this process
//! is a subtraction and a comparison ([`Processes::local`]), which is what
//! point-to-point does on every send. A job of one process may grow: ranks
//! spawned while it runs take the next world ranks, at the same local
//! indices, up to the room [`Processes::with_room`] leaves (the job's rank
//! limit); the comparison is against that room.
//!
//! In a job of several hosts it also says which host runs each process
//! (numbered by first appearance in process order, from the host names the
//! processes exchange at start): what `split_shared` and the host level of
//! hierarchical collectives group by.
//!
//! A layer-0 module: the scheduler uses the two index types only (it knows
//! local indices, and the world rank each acts for to name it in reports);
//! `p2p` routes by the layout; communicators derive their locality from it
//! (`comm::locality`).

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

/// A rank of the whole job (a rank of the world communicator).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct WorldRank(u32);

impl WorldRank {
    #[inline]
    pub(crate) const fn new(rank: u32) -> WorldRank {
        WorldRank(rank)
    }

    #[inline]
    pub(crate) const fn get(self) -> u32 {
        self.0
    }

    /// As an MPI rank (of the world communicator), for errors and reports.
    #[inline]
    pub(crate) const fn as_rank(self) -> crate::Rank {
        self.0 as crate::Rank
    }
}

impl fmt::Display for WorldRank {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A rank's index among the ranks of this process: its scheduler slot id,
/// its mailbox and its result index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct LocalIndex(u32);

impl LocalIndex {
    #[inline]
    pub(crate) const fn new(index: u32) -> LocalIndex {
        LocalIndex(index)
    }

    #[inline]
    pub(crate) const fn get(self) -> u32 {
        self.0
    }

    /// The rank's park slot id (the scheduler numbers the ranks' slots by
    /// local index, tasks' slots above them).
    #[inline]
    pub(crate) const fn slot(self) -> u32 {
        self.0
    }
}

impl fmt::Display for LocalIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A process of the job, `0..processes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct ProcessId(u32);

impl ProcessId {
    #[inline]
    pub(crate) const fn new(process: u32) -> ProcessId {
        ProcessId(process)
    }

    #[inline]
    pub(crate) const fn get(self) -> u32 {
        self.0
    }
}

impl fmt::Display for ProcessId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Where the world ranks of a job live, as this process sees it: process
/// `p` hosts the block `starts[p]..starts[p + 1]`, and this process is one
/// of them. The same in every process but for [`this`](Self::this).
#[derive(Debug, Clone)]
pub(crate) struct Processes {
    /// Block boundaries, `processes + 1` of them: `0`, ..., the world size.
    starts: Arc<[u32]>,
    this: ProcessId,
    /// This process's block (kept apart: the hot path reads two words).
    first: u32,
    count: u32,
    /// Local indices `0..bound` are this process's: its block, and in a job
    /// of one process the room for ranks spawned later ([`with_room`]).
    ///
    /// [`with_room`]: Self::with_room
    bound: u32,
    /// The host of each process (`0..hosts`, numbered by first appearance
    /// in process order), where processes run on several hosts
    /// ([`with_hosts`](Self::with_hosts)); `None`: all on one host.
    hosts: Option<Arc<[u32]>>,
}

impl Processes {
    /// A job of one process hosting world ranks `0..ranks` (every job today).
    pub(crate) fn single(ranks: u32) -> Processes {
        Processes::from_blocks(&[ranks], ProcessId(0))
    }

    /// A job whose process `p` hosts `sizes[p]` world ranks, blocks in
    /// process order, seen from process `this`.
    ///
    /// # Panics
    ///
    /// If there is no process `this`, or the world has more than `u32::MAX`
    /// ranks.
    pub(crate) fn from_blocks(sizes: &[u32], this: ProcessId) -> Processes {
        assert!(
            (this.0 as usize) < sizes.len(),
            "process {this} of a job of {} processes",
            sizes.len()
        );
        let mut starts = Vec::with_capacity(sizes.len() + 1);
        let mut next = 0u32;
        starts.push(0);
        for &size in sizes {
            next = next
                .checked_add(size)
                .expect("a world of at most u32::MAX ranks");
            starts.push(next);
        }
        let p = this.0 as usize;
        let (first, count) = (starts[p], starts[p + 1] - starts[p]);
        Processes {
            starts: starts.into(),
            this,
            first,
            count,
            bound: count,
            hosts: None,
        }
    }

    /// The same layout, process `p` running on the host named `names[p]`
    /// (any labels: equal labels are one host). All on one host keeps no
    /// table.
    ///
    /// # Panics
    ///
    /// If `names` does not have one entry per process.
    pub(crate) fn with_hosts<H: Eq + std::hash::Hash>(mut self, names: &[H]) -> Processes {
        assert_eq!(names.len(), self.count() as usize, "one host per process");
        let mut numbers: std::collections::HashMap<&H, u32> = std::collections::HashMap::new();
        let hosts: Vec<u32> = names
            .iter()
            .map(|name| {
                let next = numbers.len() as u32;
                *numbers.entry(name).or_insert(next)
            })
            .collect();
        self.hosts = (numbers.len() > 1).then(|| hosts.into());
        self
    }

    /// Hosts the job runs on.
    pub(crate) fn host_count(&self) -> u32 {
        self.hosts
            .as_ref()
            .map_or(1, |h| h.iter().max().map_or(1, |&m| m + 1))
    }

    /// The host of `process` (`0..host_count()`, numbered by first
    /// appearance in process order).
    #[inline]
    pub(crate) fn host_of(&self, process: ProcessId) -> u32 {
        self.hosts.as_ref().map_or(0, |h| h[process.0 as usize])
    }

    /// The same layout of one process, where world ranks up to `room`
    /// (excluded) may be spawned while the job runs: [`local`](Self::local)
    /// maps them to local indices, as it maps the block (world rank =
    /// local index in a job of one process). The block, the world size and
    /// [`local_count`](Self::local_count) stay those of the ranks started.
    ///
    /// # Panics
    ///
    /// If the job has several processes (spawning is one process's).
    pub(crate) fn with_room(mut self, room: u32) -> Processes {
        assert_eq!(self.count(), 1, "spawning is for a job of one process");
        self.bound = room.max(self.count);
        self
    }

    /// Ranks in the whole job.
    pub(crate) fn world_size(&self) -> u32 {
        *self.starts.last().expect("at least one boundary")
    }

    /// Processes in the job.
    pub(crate) fn count(&self) -> u32 {
        (self.starts.len() - 1) as u32
    }

    /// This process.
    pub(crate) fn this(&self) -> ProcessId {
        self.this
    }

    /// Ranks of this process started with the job.
    #[inline]
    pub(crate) fn local_count(&self) -> u32 {
        self.count
    }

    /// The local index of world rank `world` if this process hosts it: a
    /// subtraction and one comparison.
    #[inline]
    pub(crate) fn local(&self, world: WorldRank) -> Option<LocalIndex> {
        let index = world.0.wrapping_sub(self.first);
        (index < self.bound).then_some(LocalIndex(index))
    }

    /// The world ranks of this process, by local index.
    pub(crate) fn local_ranks(&self) -> impl ExactSizeIterator<Item = WorldRank> {
        (self.first..self.first + self.count).map(WorldRank)
    }

    /// The world ranks process `process` hosts.
    pub(crate) fn block(&self, process: ProcessId) -> Range<u32> {
        let p = process.0 as usize;
        self.starts[p]..self.starts[p + 1]
    }

    /// The process hosting `world` (a binary search over the blocks).
    ///
    /// # Panics
    ///
    /// If `world` is not a rank of the job.
    pub(crate) fn process_of(&self, world: WorldRank) -> ProcessId {
        assert!(
            world.0 < self.world_size(),
            "world rank {world} of a job of {} ranks",
            self.world_size()
        );
        // The last boundary `<= world` starts its block (empty blocks share
        // their boundary with the next one).
        let p = self.starts.partition_point(|&s| s <= world.0) - 1;
        ProcessId(p as u32)
    }

    /// `(process, local index)` of `world`.
    pub(crate) fn locate(&self, world: WorldRank) -> (ProcessId, LocalIndex) {
        let process = self.process_of(world);
        let start = self.starts[process.0 as usize];
        (process, LocalIndex(world.0 - start))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_process_keeps_the_world_numbering() {
        let p = Processes::single(5);
        assert_eq!((p.count(), p.world_size(), p.local_count()), (1, 5, 5));
        for w in 0..5 {
            assert_eq!(p.local(WorldRank(w)), Some(LocalIndex(w)));
            assert_eq!(p.locate(WorldRank(w)), (ProcessId(0), LocalIndex(w)));
        }
        assert_eq!(p.local(WorldRank(5)), None);
        assert_eq!((p.host_count(), p.host_of(ProcessId(0))), (1, 0));
        assert_eq!(
            p.local_ranks().collect::<Vec<_>>(),
            (0..5).map(WorldRank).collect::<Vec<_>>()
        );
    }

    #[test]
    fn blocks_split_the_world_by_process() {
        // Three processes hosting 3, 0 and 2 ranks, seen from the last.
        let p = Processes::from_blocks(&[3, 0, 2], ProcessId(2));
        assert_eq!((p.count(), p.world_size(), p.local_count()), (3, 5, 2));
        assert_eq!(p.local(WorldRank(2)), None, "process 0's last rank");
        assert_eq!(p.local(WorldRank(3)), Some(LocalIndex(0)));
        assert_eq!(p.local(WorldRank(4)), Some(LocalIndex(1)));
        assert_eq!(p.local(WorldRank(5)), None, "past the world");
        let located: Vec<(u32, u32)> = (0..5)
            .map(|w| p.locate(WorldRank(w)))
            .map(|(p, l)| (p.0, l.0))
            .collect();
        assert_eq!(located, [(0, 0), (0, 1), (0, 2), (2, 0), (2, 1)]);
        assert_eq!(p.block(ProcessId(1)), 3..3);
        assert_eq!(
            p.local_ranks().collect::<Vec<_>>(),
            [WorldRank(3), WorldRank(4)]
        );
    }

    #[test]
    fn hosts_are_numbered_by_first_appearance() {
        let p =
            Processes::from_blocks(&[1, 1, 1, 1], ProcessId(2)).with_hosts(&["b", "b", "a", "b"]);
        assert_eq!(p.host_count(), 2);
        let hosts: Vec<u32> = (0..4).map(|q| p.host_of(ProcessId(q))).collect();
        assert_eq!(hosts, [0, 0, 1, 0]);
        // One host: no table.
        let p = Processes::from_blocks(&[1, 1], ProcessId(0)).with_hosts(&[7, 7]);
        assert!(p.hosts.is_none() && p.host_count() == 1);
    }
}
