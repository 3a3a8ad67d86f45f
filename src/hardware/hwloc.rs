//! The topology from hwloc, through the `hwlocality` crate (cargo feature `hwloc`).
//!
//! hwloc reads its own environment (`HWLOC_SYNTHETIC`, `HWLOC_XMLFILE`, `HWLOC_THISSYSTEM`,
//! ...). Its root object's `Backend` info tells whether it discovered this machine (`Linux`)
//! or was handed a description: only a discovered topology is restricted to the process's
//! affinity mask (hwloc itself only removes what the cgroup forbids), and only it, or a
//! description that hwloc treats as this system and whose PUs all exist here, binds for real.

use hwlocality::object::depth::Depth;
use hwlocality::object::types::ObjectType;
use hwlocality::object::TopologyObject;

use super::{bind, RawPu, Topology, TopologyError, TopologySource};

/// Reads the topology through hwloc.
pub(super) fn read() -> Result<Topology, TopologyError> {
    let topo = hwlocality::Topology::new()
        .map_err(|e| TopologyError::new(format!("hwloc could not build the topology: {e}")))?;
    let backend = topo
        .root_object()
        .info("Backend")
        .map(|b| b.to_string_lossy().into_owned())
        .unwrap_or_default();
    let discovered = topo.is_this_system() && backend == "Linux";
    let allowed = bind::allowed_cpus().ok();

    let nodes: Vec<&TopologyObject> = topo.objects_at_depth(Depth::NUMANode).collect();
    let has_cores = topo.objects_with_type(ObjectType::Core).len() > 0;
    let has_packages = topo.objects_with_type(ObjectType::Package).len() > 0;

    let mut raw = Vec::new();
    for pu in topo.objects_with_type(ObjectType::PU) {
        let Some(os_index) = pu.os_index() else {
            continue;
        };
        if discovered && allowed.as_ref().is_some_and(|a| !a.contains(&os_index)) {
            continue;
        }
        let ancestor = |ty| {
            pu.first_ancestor_with_type(ty)
                .map(|o| o.logical_index() as u64)
        };
        // NUMA nodes hang off the tree as memory children: find the one whose cpuset holds
        // this PU. A PU under none (should not happen) counts as under the first.
        let numa = nodes
            .iter()
            .find(|n| n.cpuset().is_some_and(|set| set.is_set(os_index)))
            .map_or(0, |n| n.logical_index() as u64);
        raw.push(RawPu {
            os_index,
            package: if has_packages {
                Some(ancestor(ObjectType::Package).unwrap_or(0))
            } else {
                None
            },
            numa,
            core: if has_cores {
                // A PU outside any core (mixed trees) is its own core.
                Some(ancestor(ObjectType::Core).map_or((1, os_index as u64), |c| (0, c)))
            } else {
                None
            },
        });
    }

    let binds_for_real = discovered
        || (topo.is_this_system()
            && allowed
                .as_ref()
                .is_some_and(|a| raw.iter().all(|p| a.contains(&p.os_index))));
    let description = match topo.root_object().info("SyntheticDescription") {
        Some(desc) => format!("hwloc synthetic {:?}", desc.to_string_lossy()),
        None if backend.is_empty() => "hwloc".to_owned(),
        None => format!("hwloc ({backend})"),
    };
    Topology::from_raw(&raw, TopologySource::Hwloc, binds_for_real, description)
}
