//! The hardware topology: which processing units this process may use, how they group into
//! cores, NUMA nodes and packages, where workers go, and how they are bound.
//!
//! Beware the name clash with rsmpi: there `topology` means communicator topologies
//! (cartesian, graph), and this module re-exports those too (`SimpleCommunicator`, `Color`,
//! `dims_create`, ...), so ported programs find them where rsmpi has them. Everything else
//! here is the machine, as hwloc sees it (kept crate-internally in the layer-0 `hardware`
//! module, below the communicators).
//!
//! # The model
//!
//! A [`Topology`] is a flat list of [`Pu`]s (processing units: hardware threads), in
//! *topology order* — depth first through package, NUMA node, core, PU, the order in which
//! hwloc numbers PUs logically. Each PU carries its operating-system index (what
//! `sched_setaffinity` takes) and the *logical* ids of its core, NUMA node and package: dense
//! numbers `0..count(level)` assigned in topology order, so that neighbours have neighbouring
//! ids whatever the firmware's numbering.
//!
//! Only the PUs this process may use are in the model (the `sched_getaffinity` mask when the
//! topology is the real machine), and a core, NUMA node or package exists only if it holds at
//! least one of them. So `taskset -c 2,3 prog` sees a machine of two PUs.
//!
//! A level may be *absent*: a synthetic description without a `package` level, or an hwloc
//! topology that has no core objects. [`Topology::levels`] lists the levels that are present,
//! [`Topology::count`] returns 0 for an absent one, and the ids of an absent level in each
//! [`Pu`] are filled as if every PU were its own core (for `core`) or as if there were one
//! object (for `package`), so code that only groups PUs keeps working. The NUMA and PU levels
//! are always present: every machine has memory somewhere (hwloc adds a NUMA node too).
//!
//! # Sources
//!
//! [`Topology::detect`] picks, in this order:
//!
//! 1. `HWLOC_SYNTHETIC` set and not empty: the built-in parser of the synthetic syntax below
//!    ([`TopologySource::Synthetic`]). The same string gives the same model with and without
//!    the `hwloc` feature.
//! 2. With the `hwloc` cargo feature: hwloc through the `hwlocality` crate
//!    ([`TopologySource::Hwloc`]; needs `libhwloc-dev`, `libudev-dev` and `pkg-config` to
//!    build). If hwloc fails, sysfs is tried before giving up.
//! 3. Otherwise Linux sysfs and `sched_getaffinity` ([`TopologySource::Sysfs`]): no C
//!    library needed. Missing files (containers, exotic architectures) degrade gracefully to
//!    one package, one NUMA node and one core per PU.
//!
//! # Synthetic topologies
//!
//! Tests of placement logic need machines this one is not. [`Topology::synthetic`] parses the
//! subset of hwloc's synthetic syntax that describes a symmetric tree, top level first:
//!
//! ```text
//! package:2 numa:2 core:4 pu:2     2 packages x 2 NUMA nodes x 4 cores x 2 PUs = 32 PUs
//! numa:2 core:1 pu:1               2 NUMA nodes of one single-threaded core each
//! ```
//!
//! - Each level is `name:count` with a count of at least 1; levels are separated by spaces.
//! - Names are case-insensitive: `package`, `pack` or `socket`; `numa`, `numanode` or `node`;
//!   `core`; `pu`. `die`, `group` and caches (`l1`..`l5`, optionally followed by `d`, `i` or
//!   `u` and by `cache`, as in `l3`, `L2Cache`, `l1d`) are accepted and multiply the counts
//!   below them, but are not modelled.
//! - The description ends with the `pu` level, as hwloc requires. Other levels are optional;
//!   each may appear once; `package` comes before `core`, and `numa` before `pu`.
//! - PU operating-system indexes are `0..n` in order, as hwloc numbers synthetic PUs.
//! - hwloc's attributes in parentheses (`(memory=...)`, `(indexes=...)`) and attached memory
//!   (`[numa]`) are not supported by this parser; with the `hwloc` feature,
//!   `Topology::from_hwloc` accepts the full syntax.
//!
//! A synthetic topology describes a machine that is not this one, so binding to it would be
//! meaningless: [`Topology::binds_for_real`] is false, unless `HWLOC_THISSYSTEM=1` (as for
//! hwloc) *and* every PU index exists in this process's affinity mask. On a 2-CPU machine,
//! `HWLOC_THISSYSTEM=1 HWLOC_SYNTHETIC="numa:2 core:1 pu:1"` therefore fakes two NUMA nodes
//! while binding workers to the two real CPUs.
//!
//! # Placement, binding, report
//!
//! [`place_workers`] decides which PU each worker gets (`--map-by core|numa|package|pu`),
//! [`RankAssignment`] which ranks each worker starts with (`block` or `cyclic`),
//! [`bind_current_thread`] pins the calling thread, and [`binding_report`] prints the result
//! like `mpirun --report-bindings`.
//!
//! ```
//! use myriad::topology::{place_workers, Level, Topology};
//!
//! let topo = Topology::synthetic("package:2 numa:2 core:4 pu:2")?;
//! assert_eq!(topo.count(Level::Core), 16);
//! let placements = place_workers(&topo, 4, Level::Numa)?;
//! let nodes: Vec<usize> = placements.iter().map(|p| p.pu.numa).collect();
//! assert_eq!(nodes, [0, 1, 2, 3]);
//! # Ok::<(), myriad::topology::TopologyError>(())
//! ```

pub use crate::comm::{Group, GroupRelation, SystemGroup, UserGroup};
#[doc(hidden)]
pub use crate::communicator::emulate_hosts;
pub use crate::communicator::{
    dims_create, AnyCommunicator, AnyProcess, CartesianCommunicator, CartesianLayout, Color,
    Communicator, CommunicatorRelation, CommunicatorTopology, DistributedGraphCommunicator,
    DistributedGraphNeighbors, GraphCommunicator, GraphLayout, InterCommunicator, IntoTopology,
    Key, MergeOrder, Process, SimpleCommunicator,
};
pub use crate::hardware::*;
pub use crate::Rank;
