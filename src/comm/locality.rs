//! Where a communicator's members live: its members in this process, one
//! leader per process, how many processes it spans, and (on a job of
//! several hosts) which host each of those processes runs on.
//!
//! Computed once, when the communicator's shared state is created, from its
//! member list and the job's [`Processes`]: a pure function of both, so
//! every member computes the same leaders and process count (the local
//! members differ by process, by definition). The selector reads
//! [`Locality::is_all_local`]: round-based shared-memory algorithms need
//! every member in this process.
//!
//! The leader of a process is its member of lowest communicator rank; the
//! leaders are listed by process. A hierarchical collective (`coll/hier.rs`)
//! runs a shared-memory step among each process's members and a
//! message-based step among the leaders; it keeps rank order, and finds
//! each process's data in one block, where the communicator is *blocked*
//! ([`Locality::is_blocked`]: each process's members are consecutive
//! ranks, the processes in rank order).
//!
//! On a job whose processes run on several hosts ([`Processes::host_of`]),
//! the leaders group by host ([`HostLevel`]): the *peers* of a process are
//! the leaders of the processes of its host, the *head* of a host is its
//! first process's leader (the host's lowest rank on a blocked
//! communicator); hierarchical collectives add a step among the heads.
//! Computed alike by every process from the same tables, so no process
//! asks another. A communicator whose processes all run on one host has no
//! host level (and costs nothing more).
//!
//! Cost: O(1) for any communicator of a one-process job (all its members
//! are local; no table), O(processes) for `Members::World` (the world's
//! blocks, no table of a million ranks), O(size · log processes) for a
//! member table of a job of several processes.

use std::ops::Range;

use super::Members;
use crate::identity::{ProcessId, Processes, WorldRank};
use crate::Rank;

/// The locality of one communicator, as this process sees it.
#[derive(Debug, Clone)]
pub(crate) struct Locality {
    /// The members in this process, by communicator rank, ascending.
    local: Local,
    /// `(process, leader)` of every process with members, by process.
    leaders: Box<[(ProcessId, Rank)]>,
    /// Every member lives in this process.
    all_local: bool,
    /// Each process's members are one run of consecutive ranks, the runs
    /// in process order (the world, and most splits): a hierarchical
    /// collective then keeps rank order and each process's data is one
    /// block of a gathered buffer.
    blocked: bool,
    /// Members in all.
    size: Rank,
    /// The leaders grouped by host, where the processes with members run on
    /// several hosts.
    hosts: Option<Box<HostLevel>>,
}

/// The leaders of a communicator grouped by host (module docs).
#[derive(Debug, Clone)]
pub(crate) struct HostLevel {
    /// For each leader (by position in `Locality::leaders`): its host's
    /// position among the hosts with members (hosts in job order).
    host_position: Box<[u32]>,
    /// For each host with members: the position of its head (its first
    /// process's leader) among the leaders.
    heads: Box<[usize]>,
    /// The positions among the leaders of the processes on this process's
    /// host, ascending (empty if this process has no members).
    peers: Box<[usize]>,
    /// The hosts along the leaders never go back: each host's processes
    /// are consecutive among the leaders, so (on a blocked communicator)
    /// its members are consecutive ranks and a reduction by host keeps rank
    /// order.
    blocked: bool,
}

impl HostLevel {
    /// The host level of `leaders` in job `processes` (`None`: one host).
    fn new(leaders: &[(ProcessId, Rank)], processes: &Processes) -> Option<Box<HostLevel>> {
        if processes.host_count() == 1 {
            return None;
        }
        let host_of: Vec<u32> = leaders.iter().map(|&(p, _)| processes.host_of(p)).collect();
        let mut hosts: Vec<u32> = host_of.clone();
        hosts.sort_unstable();
        hosts.dedup();
        if hosts.len() < 2 {
            return None;
        }
        let host_position: Box<[u32]> = host_of
            .iter()
            .map(|h| hosts.binary_search(h).expect("listed") as u32)
            .collect();
        let mut heads = vec![usize::MAX; hosts.len()];
        for (i, &h) in host_position.iter().enumerate() {
            let head = &mut heads[h as usize];
            if *head == usize::MAX {
                *head = i;
            }
        }
        let this = processes.this();
        let peers = match leaders.binary_search_by_key(&this, |&(p, _)| p) {
            Ok(me) => (0..leaders.len())
                .filter(|&i| host_position[i] == host_position[me])
                .collect(),
            Err(_) => Box::default(),
        };
        let blocked = host_position.windows(2).all(|w| w[0] <= w[1]);
        Some(Box::new(HostLevel {
            host_position,
            heads: heads.into(),
            peers,
            blocked,
        }))
    }

    /// Hosts with members.
    #[cfg(test)]
    pub(crate) fn hosts(&self) -> usize {
        self.heads.len()
    }

    /// The position of the host of the leader at position `leader` among
    /// the hosts with members.
    pub(crate) fn host_position(&self, leader: usize) -> usize {
        self.host_position[leader] as usize
    }

    /// The positions among the leaders of each host's head, by host.
    pub(crate) fn heads(&self) -> &[usize] {
        &self.heads
    }

    /// The positions among the leaders of the processes on this process's
    /// host, ascending.
    pub(crate) fn peers(&self) -> &[usize] {
        &self.peers
    }

    /// The position of leader `leader` among this host's peers, if it runs
    /// on this host.
    pub(crate) fn peer_index(&self, leader: usize) -> Option<usize> {
        self.peers.binary_search(&leader).ok()
    }

    /// Whether each host's processes are consecutive among the leaders
    /// (see the field).
    pub(crate) fn is_blocked(&self) -> bool {
        self.blocked
    }
}

/// The communicator ranks of the members in this process.
#[derive(Debug, Clone)]
enum Local {
    /// A range of ranks (all of them, in a one-process job).
    Range(Range<Rank>),
    /// A list, ascending.
    List(Box<[Rank]>),
}

impl Locality {
    /// The locality of a communicator of `members` in the job `processes`.
    pub(crate) fn new(members: &Members, processes: &Processes) -> Locality {
        let size = members.size() as Rank;
        if processes.count() == 1 {
            // Every member is local; rank 0 leads (an empty communicator
            // has no process and no leader).
            let leaders = if size > 0 {
                vec![(processes.this(), 0)].into()
            } else {
                Box::default()
            };
            return Locality {
                local: Local::Range(0..size),
                leaders,
                all_local: true,
                blocked: true,
                size,
                hosts: None,
            };
        }
        match members {
            // World ranks `0..n` in order: each process's block, cut at `n`.
            Members::World(n) => {
                let n = *n;
                let cut = |r: Range<u32>| r.start.min(n)..r.end.min(n);
                let here = cut(processes.block(processes.this()));
                let leaders = (0..processes.count())
                    .map(ProcessId::new)
                    .filter_map(|p| {
                        let block = cut(processes.block(p));
                        (!block.is_empty()).then_some((p, block.start as Rank))
                    })
                    .collect();
                let leaders: Box<[(ProcessId, Rank)]> = leaders;
                Locality {
                    all_local: here.len() == n as usize,
                    local: Local::Range(here.start as Rank..here.end as Rank),
                    hosts: HostLevel::new(&leaders, processes),
                    leaders,
                    blocked: true,
                    size,
                }
            }
            Members::Ranks(table) => {
                let this = processes.this();
                let mut local = Vec::new();
                let mut leaders: Vec<(ProcessId, Rank)> = Vec::new();
                let mut blocked = true;
                let mut previous = None;
                for (rank, &world) in table.iter().enumerate() {
                    let process = processes.process_of(WorldRank::new(world));
                    if process == this {
                        local.push(rank as Rank);
                    }
                    // Blocked: the processes along the ranks never go back.
                    blocked &= previous.is_none_or(|p| p <= process);
                    previous = Some(process);
                    // Ranks ascend: the first member seen of a process leads.
                    if let Err(i) = leaders.binary_search_by_key(&process, |&(p, _)| p) {
                        leaders.insert(i, (process, rank as Rank));
                    }
                }
                Locality {
                    all_local: local.len() == table.len(),
                    local: Local::List(local.into()),
                    hosts: HostLevel::new(&leaders, processes),
                    leaders: leaders.into(),
                    blocked,
                    size,
                }
            }
        }
    }

    /// Whether every member lives in this process (round-based
    /// shared-memory algorithms need it).
    #[inline]
    pub(crate) fn is_all_local(&self) -> bool {
        self.all_local
    }

    /// Processes with members.
    pub(crate) fn processes(&self) -> usize {
        self.leaders.len()
    }

    /// How many members live in this process.
    pub(crate) fn local_count(&self) -> usize {
        match &self.local {
            Local::Range(r) => r.len(),
            Local::List(l) => l.len(),
        }
    }

    /// Whether each process's members are consecutive ranks, processes in
    /// rank order (see the field).
    pub(crate) fn is_blocked(&self) -> bool {
        self.blocked
    }

    /// The ranks of the members of the `i`-th process with members (in
    /// process order), on a [`blocked`](Self::is_blocked) communicator.
    pub(crate) fn block(&self, i: usize) -> Range<Rank> {
        debug_assert!(self.blocked);
        let start = self.leaders[i].1;
        let end = self.leaders.get(i + 1).map_or(self.size, |&(_, r)| r);
        start..end
    }

    /// The position of communicator rank `rank` among the members in this
    /// process, if it lives here.
    pub(crate) fn local_index(&self, rank: Rank) -> Option<Rank> {
        match &self.local {
            Local::Range(r) => r.contains(&rank).then(|| rank - r.start),
            Local::List(l) => l.binary_search(&rank).ok().map(|i| i as Rank),
        }
    }

    /// The position of `process` among the processes with members (its
    /// leader's rank among the leaders), if it has members.
    pub(crate) fn position_of(&self, process: ProcessId) -> Option<usize> {
        self.leaders
            .binary_search_by_key(&process, |&(p, _)| p)
            .ok()
    }

    /// The communicator ranks of the members in this process, ascending.
    pub(crate) fn local_ranks(&self) -> impl Iterator<Item = Rank> + '_ {
        let (range, list) = match &self.local {
            Local::Range(r) => (r.clone(), None),
            Local::List(l) => (0..l.len() as Rank, Some(l)),
        };
        range.map(move |i| list.map_or(i, |l| l[i as usize]))
    }

    /// `(process, leader)` of every process with members, by process.
    pub(crate) fn leaders(&self) -> &[(ProcessId, Rank)] {
        &self.leaders
    }

    /// The leaders grouped by host, if the processes with members run on
    /// several hosts.
    pub(crate) fn hosts(&self) -> Option<&HostLevel> {
        self.hosts.as_deref()
    }

    /// The leader of process `process`, if it has members.
    #[allow(dead_code)]
    pub(crate) fn leader_of(&self, process: ProcessId) -> Option<Rank> {
        self.leaders
            .binary_search_by_key(&process, |&(p, _)| p)
            .ok()
            .map(|i| self.leaders[i].1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(l: &Locality) -> Vec<Rank> {
        l.local_ranks().collect()
    }

    /// The locality of `members` from each process of a job of `blocks`.
    fn from_every_process(members: &Members, blocks: &[u32]) -> Vec<Locality> {
        (0..blocks.len() as u32)
            .map(|p| Locality::new(members, &Processes::from_blocks(blocks, ProcessId::new(p))))
            .collect()
    }

    #[test]
    fn one_process_is_all_local_without_a_table() {
        let processes = Processes::single(1_000_000);
        let l = Locality::new(&Members::World(1_000_000), &processes);
        assert!(l.is_all_local());
        assert!(matches!(l.local, Local::Range(ref r) if *r == (0..1_000_000)));
        assert_eq!(l.leaders(), [(ProcessId::new(0), 0)]);
        assert_eq!((l.processes(), l.local_count()), (1, 1_000_000));

        let l = Locality::new(&Members::from_vec(vec![7, 3, 5]), &processes);
        assert!(l.is_all_local());
        assert_eq!(all(&l), [0, 1, 2]);
        assert_eq!(l.leader_of(ProcessId::new(0)), Some(0));

        let l = Locality::new(&Members::World(0), &processes);
        assert!(l.is_all_local() && l.processes() == 0);
    }

    #[test]
    fn the_world_of_two_processes_splits_by_block() {
        // World ranks 0..3 in process 0, 3..5 in process 1.
        let [p0, p1] =
            <[Locality; 2]>::try_from(from_every_process(&Members::World(5), &[3, 2])).unwrap();
        assert_eq!(all(&p0), [0, 1, 2]);
        assert_eq!(all(&p1), [3, 4]);
        assert_eq!((p1.local_index(4), p1.local_index(2)), (Some(1), None));
        for l in [&p0, &p1] {
            assert!(!l.is_all_local() && l.is_blocked());
            assert_eq!([l.block(0), l.block(1)], [0..3, 3..5]);
            assert_eq!(l.processes(), 2);
            assert_eq!(
                l.leaders(),
                [(ProcessId::new(0), 0), (ProcessId::new(1), 3)]
            );
        }
        // A world prefix that ends inside process 0 is all local there, and
        // has no member in process 1.
        let [q0, q1] =
            <[Locality; 2]>::try_from(from_every_process(&Members::World(2), &[3, 2])).unwrap();
        assert!(q0.is_all_local() && q0.processes() == 1);
        assert_eq!(all(&q0), [0, 1]);
        assert_eq!(q1.local_count(), 0);
        assert!(!q1.is_all_local(), "no member here: not all local here");
        assert_eq!(q1.leaders(), [(ProcessId::new(0), 0)]);
    }

    #[test]
    fn a_member_table_gets_the_same_leaders_in_every_process() {
        // Three processes: world 0..2, 2..4, 4..6. Members in rank order:
        // world 5, 0, 4, 1, 3 (process 2, 0, 2, 0, 1).
        let members = Members::from_vec(vec![5, 0, 4, 1, 3]);
        let views = from_every_process(&members, &[2, 2, 2]);
        let expected = [
            (ProcessId::new(0), 1),
            (ProcessId::new(1), 4),
            (ProcessId::new(2), 0),
        ];
        for l in &views {
            assert_eq!(l.leaders(), expected, "computed alike by every process");
            assert_eq!(l.processes(), 3);
            assert!(!l.is_all_local());
        }
        assert_eq!(all(&views[0]), [1, 3]);
        assert_eq!(all(&views[1]), [4]);
        assert_eq!(all(&views[2]), [0, 2]);
        // Every member is local to exactly one process.
        let mut every: Vec<Rank> = views.iter().flat_map(all).collect();
        every.sort_unstable();
        assert_eq!(every, [0, 1, 2, 3, 4]);
        // The leader of a process is its lowest local rank.
        for (p, l) in views.iter().enumerate() {
            assert_eq!(
                l.leader_of(ProcessId::new(p as u32)),
                l.local_ranks().next()
            );
        }

        // Processes 2, 0, 2, 0, 1 along the ranks: not blocked.
        assert!(views.iter().all(|l| !l.is_blocked()));
        assert_eq!(views[2].local_index(2), Some(1));
        assert_eq!(views[2].local_index(1), None);
        assert_eq!(views[1].position_of(ProcessId::new(1)), Some(1));

        // Processes 0, 0, 1, 2, 2 along the ranks: blocked, and each
        // process's block is its ranks.
        let members = Members::from_vec(vec![1, 0, 3, 5, 4]);
        for l in from_every_process(&members, &[2, 2, 2]) {
            assert!(l.is_blocked());
            assert_eq!([l.block(0), l.block(1), l.block(2)], [0..2, 2..3, 3..5]);
        }

        // Members of one process only: all local there.
        let members = Members::from_vec(vec![3, 2]);
        let views = from_every_process(&members, &[2, 2, 2]);
        assert!(views[1].is_all_local());
        assert_eq!(all(&views[1]), [0, 1]);
        assert_eq!(views[1].leaders(), [(ProcessId::new(1), 0)]);
        assert!(!views[0].is_all_local());
    }

    /// The locality of `members` from each process of a job of `blocks` on
    /// `hosts` (by process).
    fn on_hosts(members: &Members, blocks: &[u32], hosts: &[u32]) -> Vec<Locality> {
        (0..blocks.len() as u32)
            .map(|p| {
                let processes = Processes::from_blocks(blocks, ProcessId::new(p)).with_hosts(hosts);
                Locality::new(members, &processes)
            })
            .collect()
    }

    #[test]
    fn the_leaders_group_by_host_alike_in_every_process() {
        // Four processes of two ranks; processes 0, 1, 3 on host "0", 2 on
        // host "1" (host numbers by first appearance: 0, 0, 1, 0).
        let views = on_hosts(&Members::World(8), &[2; 4], &[5, 5, 9, 5]);
        for (p, l) in views.iter().enumerate() {
            let h = l.hosts().expect("two hosts");
            assert_eq!(h.hosts(), 2);
            assert_eq!(h.heads(), [0, 2], "process {p}");
            let positions: Vec<usize> = (0..4).map(|i| h.host_position(i)).collect();
            assert_eq!(positions, [0, 0, 1, 0]);
            // Host 0's processes are not consecutive: not blocked by host.
            assert!(!h.is_blocked());
        }
        assert_eq!(views[1].hosts().unwrap().peers(), [0, 1, 3]);
        assert_eq!(views[2].hosts().unwrap().peers(), [2]);
        assert_eq!(views[3].hosts().unwrap().peer_index(3), Some(2));
        assert_eq!(views[3].hosts().unwrap().peer_index(2), None);

        // Consecutive hosts: blocked.
        for l in on_hosts(&Members::World(8), &[2; 4], &[0, 0, 1, 1]) {
            let h = l.hosts().unwrap();
            assert!(h.is_blocked());
            assert_eq!(h.heads(), [0, 2]);
        }

        // A member table on one host of two: no host level.
        let members = Members::from_vec(vec![0, 3, 2]);
        for l in on_hosts(&members, &[2; 4], &[0, 0, 1, 1]) {
            assert!(l.hosts().is_none());
        }
        // A job on one host: no host level either.
        for l in on_hosts(&Members::World(8), &[2; 4], &[3; 4]) {
            assert!(l.hosts().is_none());
        }
        // A process without members knows the grouping, has no peers.
        let members = Members::from_vec(vec![0, 6]);
        let views = on_hosts(&members, &[2; 4], &[0, 0, 1, 1]);
        assert_eq!(views[1].hosts().unwrap().peers(), [] as [usize; 0]);
        assert_eq!(views[3].hosts().unwrap().peers(), [1]);
        assert_eq!(views[3].hosts().unwrap().heads(), [0, 1]);
    }
}
