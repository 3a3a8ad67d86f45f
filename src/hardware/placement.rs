//! Where workers go and which ranks they start with.
//!
//! # Workers on PUs (`MYRIAD_MAP_BY`)
//!
//! [`place_workers`] works like `mpirun --map-by`. Every policy is an order of the PUs, and
//! worker `i` gets the `i`-th PU of that order:
//!
//! - [`Level::Core`] (the default): round-robin over cores, so that every core gets a worker
//!   before any core gets a second one (SMT siblings last).
//! - [`Level::Numa`], [`Level::Package`]: round-robin over NUMA nodes (packages): worker 0 on
//!   node 0, worker 1 on node 1, ... Each takes the next unused PU of its node, again one per
//!   core before siblings. A node whose PUs are used up is skipped.
//! - [`Level::Pu`]: PUs in topology order, siblings next to each other.
//!
//! With more workers than PUs the order starts over: PUs are oversubscribed, several workers
//! share one, evenly.
//!
//! # Ranks on workers (`MYRIAD_RANK_ORDER`)
//!
//! [`RankAssignment`] says which ranks each worker starts with: [`RankOrder::Block`] gives
//! each worker a contiguous range of near-equal size (neighbouring ranks share a worker and
//! its caches), [`RankOrder::Cyclic`] deals ranks out like cards (rank `r` on worker
//! `r % workers`). It is arithmetic only: O(1) memory whatever the number of ranks.

use std::fmt;
use std::iter::StepBy;
use std::ops::Range;
use std::str::FromStr;

use super::{Level, Pu, Topology, TopologyError};

/// The PU chosen for one worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkerPlacement {
    /// The worker's index, `0..workers`.
    pub worker: usize,
    /// The PU it runs on (and is bound to, when binding is on and real).
    pub pu: Pu,
}

/// Chooses a PU for each of `workers` workers, spreading them over the objects of `map_by`
/// as described in the [module docs](crate::topology).
///
/// ```
/// use myriad::topology::{place_workers, Level, Topology};
///
/// // 2 cores of 2 PUs: the first two workers get one PU of each core.
/// let topo = Topology::synthetic("core:2 pu:2")?;
/// let pus: Vec<usize> = place_workers(&topo, 4, Level::Core)?
///     .iter()
///     .map(|p| p.pu.os_index)
///     .collect();
/// assert_eq!(pus, [0, 2, 1, 3]);
/// # Ok::<(), myriad::topology::TopologyError>(())
/// ```
///
/// # Errors
///
/// `workers` is 0, or the topology has no `map_by` level; the message lists the levels it
/// has.
pub fn place_workers(
    topo: &Topology,
    workers: usize,
    map_by: Level,
) -> Result<Vec<WorkerPlacement>, TopologyError> {
    if workers == 0 {
        return Err(TopologyError::new(
            "cannot place 0 workers; at least one is needed",
        ));
    }
    if topo.count(map_by) == 0 {
        return Err(TopologyError::new(format!(
            "cannot map workers by {map_by}: the topology ({topo}) has no {map_by} level; \
             levels present: {}",
            topo.levels_list()
        )));
    }
    let order = pu_order(topo, map_by);
    Ok((0..workers)
        .map(|worker| WorkerPlacement {
            worker,
            pu: order[worker % order.len()],
        })
        .collect())
}

/// [`place_workers`] for process `index` of `count` processes of one job on
/// this host: the process takes an equal contiguous part of the PUs (in
/// topology order, so its PUs are neighbours), or one PU shared
/// round-robin when there are more processes than PUs, and maps its
/// workers by `map_by` inside that part. Without a worker count, one worker
/// per PU of the part. The processes of a host so bind disjoint sets: two
/// workers bound to one PU, each spinning while the other's process waits,
/// cost a 1 B message between them 10× its time.
pub(crate) fn place_workers_in_share(
    topo: &Topology,
    workers: Option<usize>,
    map_by: Level,
    index: u32,
    count: u32,
) -> Result<Vec<WorkerPlacement>, TopologyError> {
    let pus = topo.pus();
    if pus.is_empty() || count == 0 || index >= count {
        return Err(TopologyError::new(format!(
            "cannot give process {index} of {count} on this host a share of {} PUs",
            pus.len()
        )));
    }
    let (n, k, i) = (pus.len(), count as usize, index as usize);
    let share: Vec<usize> = if k <= n {
        pus[i * n / k..(i + 1) * n / k]
            .iter()
            .map(|pu| pu.os_index)
            .collect()
    } else {
        vec![pus[i % n].os_index]
    };
    let placements = place_workers(topo, workers.unwrap_or(share.len()).max(1), map_by)?;
    let order: Vec<Pu> = pu_order(topo, map_by)
        .into_iter()
        .filter(|pu| share.contains(&pu.os_index))
        .collect();
    Ok(placements
        .into_iter()
        .map(|p| WorkerPlacement {
            worker: p.worker,
            pu: order[p.worker % order.len()],
        })
        .collect())
}

/// All PUs of `topo`, in the order workers take them when mapping by `map_by`.
fn pu_order(topo: &Topology, map_by: Level) -> Vec<Pu> {
    match map_by {
        Level::Pu => topo.pus().to_vec(),
        Level::Core => spread_over_cores(topo.pus()),
        Level::Numa | Level::Package => {
            let groups = group_by(topo.pus(), |p| p.id(map_by));
            interleave(groups.iter().map(|g| spread_over_cores(g)).collect())
        }
    }
}

/// `pus` with one PU of every core before the second PU of any core.
fn spread_over_cores(pus: &[Pu]) -> Vec<Pu> {
    interleave(group_by(pus, |p| p.core))
}

/// Splits `pus` into groups of equal `key`, groups in order of first appearance, PUs in
/// their order.
fn group_by(pus: &[Pu], key: impl Fn(&Pu) -> usize) -> Vec<Vec<Pu>> {
    let mut groups: Vec<Vec<Pu>> = Vec::new();
    let mut index_of = std::collections::HashMap::new();
    for pu in pus {
        let i = *index_of.entry(key(pu)).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[i].push(*pu);
    }
    groups
}

/// Round-robin over `groups`: the first of each, then the second of each, ...; groups that
/// run out are skipped.
fn interleave(groups: Vec<Vec<Pu>>) -> Vec<Pu> {
    let total = groups.iter().map(Vec::len).sum();
    let longest = groups.iter().map(Vec::len).max().unwrap_or(0);
    let mut out = Vec::with_capacity(total);
    for round in 0..longest {
        out.extend(groups.iter().filter_map(|g| g.get(round)));
    }
    out
}

/// How ranks are dealt to workers at start (`MYRIAD_RANK_ORDER`).
///
/// Parses from `block` and `cyclic` (case-insensitive); displays the same way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum RankOrder {
    /// Contiguous ranges of near-equal size: worker 0 gets ranks `0..k`, worker 1 the next
    /// ones, ... (the first `ranks % workers` workers get one more).
    #[default]
    Block,
    /// Rank `r` on worker `r % workers`.
    Cyclic,
}

impl fmt::Display for RankOrder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RankOrder::Block => "block",
            RankOrder::Cyclic => "cyclic",
        })
    }
}

impl FromStr for RankOrder {
    type Err = TopologyError;

    fn from_str(s: &str) -> Result<RankOrder, TopologyError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "block" => Ok(RankOrder::Block),
            "cyclic" => Ok(RankOrder::Cyclic),
            _ => Err(TopologyError::new(format!(
                "unknown rank order {s:?}; expected block or cyclic"
            ))),
        }
    }
}

/// Which ranks each worker starts with: `ranks` ranks over `workers` workers in a
/// [`RankOrder`]. Pure arithmetic, O(1) memory, nothing allocated per rank.
///
/// ```
/// use myriad::topology::{RankAssignment, RankOrder};
///
/// let block = RankAssignment::new(10, 4, RankOrder::Block);
/// assert_eq!(block.ranks_of(0).collect::<Vec<_>>(), [0, 1, 2]);
/// assert_eq!(block.ranks_of(3).collect::<Vec<_>>(), [8, 9]);
/// assert_eq!(block.worker_of(7), 2);
///
/// let cyclic = RankAssignment::new(10, 4, RankOrder::Cyclic);
/// assert_eq!(cyclic.ranks_of(1).collect::<Vec<_>>(), [1, 5, 9]);
/// assert_eq!(cyclic.worker_of(7), 3);
/// assert_eq!(cyclic.counts(), [3, 3, 2, 2]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RankAssignment {
    ranks: usize,
    workers: usize,
    order: RankOrder,
}

impl RankAssignment {
    /// The assignment of ranks `0..ranks` to workers `0..workers`.
    ///
    /// # Panics
    ///
    /// If `workers` is 0.
    pub fn new(ranks: usize, workers: usize, order: RankOrder) -> RankAssignment {
        assert!(workers > 0, "cannot assign {ranks} ranks to 0 workers");
        RankAssignment {
            ranks,
            workers,
            order,
        }
    }

    /// Number of ranks.
    pub fn ranks(&self) -> usize {
        self.ranks
    }

    /// Number of workers.
    pub fn workers(&self) -> usize {
        self.workers
    }

    /// The order.
    pub fn order(&self) -> RankOrder {
        self.order
    }

    /// The ranks of `worker`, ascending. Empty for a worker beyond `workers` or without
    /// ranks (more workers than ranks).
    pub fn ranks_of(&self, worker: usize) -> StepBy<Range<usize>> {
        if worker >= self.workers {
            return (0..0).step_by(1);
        }
        match self.order {
            RankOrder::Block => self.block_range(worker).step_by(1),
            RankOrder::Cyclic => (worker.min(self.ranks)..self.ranks).step_by(self.workers),
        }
    }

    /// How many ranks `worker` starts with.
    pub fn count(&self, worker: usize) -> usize {
        self.ranks_of(worker).len()
    }

    /// The rank count of every worker (one entry per worker).
    pub fn counts(&self) -> Vec<usize> {
        (0..self.workers).map(|w| self.count(w)).collect()
    }

    /// The worker that starts `rank`.
    ///
    /// # Panics
    ///
    /// If `rank >= ranks`.
    pub fn worker_of(&self, rank: usize) -> usize {
        assert!(
            rank < self.ranks,
            "rank {rank} out of range: there are {} ranks",
            self.ranks
        );
        match self.order {
            RankOrder::Cyclic => rank % self.workers,
            RankOrder::Block => {
                let (small, big_workers) = (self.ranks / self.workers, self.ranks % self.workers);
                let in_big = big_workers * (small + 1);
                if rank < in_big {
                    rank / (small + 1)
                } else {
                    // Here small > 0: ranks past the big blocks exist only if small ones do.
                    big_workers + (rank - in_big) / small
                }
            }
        }
    }

    /// Block order: the first `ranks % workers` workers get one rank more.
    fn block_range(&self, worker: usize) -> Range<usize> {
        let (small, big_workers) = (self.ranks / self.workers, self.ranks % self.workers);
        let start = worker * small + worker.min(big_workers);
        let len = small + usize::from(worker < big_workers);
        start..start + len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(topo: &Topology, workers: usize, by: Level) -> Vec<usize> {
        place_workers(topo, workers, by)
            .unwrap()
            .iter()
            .map(|p| p.pu.os_index)
            .collect()
    }

    fn share(topo: &Topology, workers: Option<usize>, index: u32, count: u32) -> Vec<usize> {
        place_workers_in_share(topo, workers, Level::Core, index, count)
            .unwrap()
            .iter()
            .map(|p| p.pu.os_index)
            .collect()
    }

    #[test]
    fn processes_of_a_host_take_disjoint_shares() {
        let t = Topology::synthetic("core:4 pu:2").unwrap();
        // Two processes: 4 PUs each, one worker per PU by default, cores
        // before siblings inside the share.
        let a = share(&t, None, 0, 2);
        let b = share(&t, None, 1, 2);
        assert_eq!(a.len(), 4);
        assert_eq!(b.len(), 4);
        assert!(a.iter().all(|pu| !b.contains(pu)), "{a:?} {b:?}");
        // A given worker count oversubscribes the share, never leaves it.
        let c = share(&t, Some(6), 1, 2);
        assert_eq!(c.len(), 6);
        assert!(c.iter().all(|pu| b.contains(pu)), "{c:?} {b:?}");
        // More processes than PUs: one PU each, round-robin.
        let two = Topology::synthetic("core:2 pu:1").unwrap();
        assert_eq!(
            (0..4).map(|i| share(&two, None, i, 4)).collect::<Vec<_>>(),
            [vec![0], vec![1], vec![0], vec![1]]
        );
        assert!(place_workers_in_share(&two, None, Level::Core, 4, 4).is_err());
    }

    #[test]
    fn map_by_numa_alternates_nodes() {
        let t = Topology::synthetic("numa:2 core:1 pu:1").unwrap();
        let p = place_workers(&t, 2, Level::Numa).unwrap();
        assert_eq!(
            p.iter().map(|p| (p.worker, p.pu.numa)).collect::<Vec<_>>(),
            [(0, 0), (1, 1)]
        );
        assert_eq!(os(&t, 2, Level::Core), [0, 1]);
        assert_eq!(os(&t, 2, Level::Pu), [0, 1]);
    }

    #[test]
    fn map_by_core_puts_siblings_last() {
        let t = Topology::synthetic("package:2 numa:2 core:4 pu:2").unwrap();
        let p = place_workers(&t, 32, Level::Core).unwrap();
        let cores: Vec<usize> = p[..16].iter().map(|p| p.pu.core).collect();
        assert_eq!(
            cores,
            (0..16).collect::<Vec<_>>(),
            "one worker per core first"
        );
        assert!(p[..16].iter().all(|p| p.pu.os_index % 2 == 0));
        assert!(p[16..].iter().all(|p| p.pu.os_index % 2 == 1));
        assert_eq!(p[16].pu.core, 0);
        let mut all = os(&t, 32, Level::Core);
        all.sort_unstable();
        assert_eq!(all, (0..32).collect::<Vec<_>>(), "every PU exactly once");
    }

    #[test]
    fn map_by_numa_and_package_round_robin() {
        let t = Topology::synthetic("package:2 numa:2 core:4 pu:2").unwrap();
        let p = place_workers(&t, 8, Level::Numa).unwrap();
        let nodes: Vec<usize> = p.iter().map(|p| p.pu.numa).collect();
        assert_eq!(nodes, [0, 1, 2, 3, 0, 1, 2, 3]);
        // Within a node, the next unused core, not the sibling.
        assert_eq!(os(&t, 8, Level::Numa), [0, 8, 16, 24, 2, 10, 18, 26]);
        let p = place_workers(&t, 4, Level::Package).unwrap();
        let pk: Vec<usize> = p.iter().map(|p| p.pu.package).collect();
        assert_eq!(pk, [0, 1, 0, 1]);
        assert_eq!(os(&t, 4, Level::Package), [0, 16, 2, 18]);
        assert_eq!(os(&t, 4, Level::Pu), [0, 1, 2, 3]);
    }

    #[test]
    fn oversubscription_wraps_around_evenly() {
        let t = Topology::synthetic("numa:2 core:1 pu:1").unwrap();
        let p = place_workers(&t, 5, Level::Core).unwrap();
        assert_eq!(
            p.iter().map(|p| p.pu.os_index).collect::<Vec<_>>(),
            [0, 1, 0, 1, 0]
        );
        assert_eq!(p[4].worker, 4);
    }

    #[test]
    fn uneven_nodes_skip_exhausted_ones() {
        let t = Topology::from_raw(
            &[(0, 0), (1, 0), (2, 0), (3, 1)].map(|(os, node)| super::super::RawPu {
                os_index: os,
                package: Some(0),
                numa: node,
                core: Some((0, os as u64)),
            }),
            super::super::TopologySource::Sysfs,
            true,
            "test".into(),
        )
        .unwrap();
        assert_eq!(os(&t, 4, Level::Numa), [0, 3, 1, 2]);
    }

    #[test]
    fn missing_level_and_zero_workers_are_errors() {
        let t = Topology::synthetic("numa:2 core:1 pu:1").unwrap();
        let e = place_workers(&t, 2, Level::Package)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no package level"), "{e}");
        assert!(e.contains("levels present: numa, core, pu"), "{e}");
        let t = Topology::synthetic("pack:2 pu:2").unwrap();
        let e = place_workers(&t, 2, Level::Core).unwrap_err().to_string();
        assert!(e.contains("levels present: package, numa, pu"), "{e}");
        assert!(place_workers(&t, 0, Level::Pu).is_err());
    }

    #[test]
    fn rank_order_parses() {
        assert_eq!("block".parse::<RankOrder>().unwrap(), RankOrder::Block);
        assert_eq!("Cyclic".parse::<RankOrder>().unwrap(), RankOrder::Cyclic);
        let e = "round".parse::<RankOrder>().unwrap_err().to_string();
        assert!(e.contains("\"round\"") && e.contains("block or cyclic"));
        assert_eq!(RankOrder::default(), RankOrder::Block);
    }

    #[test]
    fn assignments_cover_every_rank_once_and_agree_with_worker_of() {
        for ranks in [0, 1, 2, 3, 7, 10, 64, 101] {
            for workers in [1, 2, 3, 4, 7, 64, 200] {
                for order in [RankOrder::Block, RankOrder::Cyclic] {
                    let a = RankAssignment::new(ranks, workers, order);
                    let mut seen = vec![false; ranks];
                    for w in 0..workers {
                        for r in a.ranks_of(w) {
                            assert!(!seen[r], "{ranks} {workers} {order}: rank {r} twice");
                            seen[r] = true;
                            assert_eq!(a.worker_of(r), w, "{ranks} {workers} {order}");
                        }
                    }
                    assert!(seen.iter().all(|&s| s), "{ranks} {workers} {order}");
                    let counts = a.counts();
                    assert_eq!(counts.iter().sum::<usize>(), ranks);
                    let (lo, hi) = (counts.iter().min(), counts.iter().max());
                    assert!(hi.unwrap() - lo.unwrap() <= 1, "near-equal sizes");
                    assert_eq!(a.ranks_of(workers).len(), 0);
                }
            }
        }
    }

    #[test]
    fn block_is_contiguous() {
        let a = RankAssignment::new(10, 4, RankOrder::Block);
        let ranges: Vec<Vec<usize>> = (0..4).map(|w| a.ranks_of(w).collect()).collect();
        assert_eq!(
            ranges,
            [vec![0, 1, 2], vec![3, 4, 5], vec![6, 7], vec![8, 9]]
        );
    }

    #[test]
    fn a_million_ranks_is_arithmetic() {
        let a = RankAssignment::new(1_000_000, 3, RankOrder::Block);
        assert_eq!(a.counts(), [333_334, 333_333, 333_333]);
        assert_eq!(a.worker_of(999_999), 2);
        assert_eq!(a.ranks_of(1).next(), Some(333_334));
        let c = RankAssignment::new(1_000_000, 3, RankOrder::Cyclic);
        assert_eq!(c.ranks_of(2).next_back(), Some(999_998));
        assert_eq!(c.worker_of(999_999), 0);
    }

    #[test]
    #[should_panic(expected = "0 workers")]
    fn zero_workers_panics() {
        let _ = RankAssignment::new(5, 0, RankOrder::Block);
    }
}
