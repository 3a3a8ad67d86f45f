//! The hardware topology (layer L0, crate-private): the machine model, its sources (sysfs,
//! hwloc, synthetic descriptions), worker placement and binding. Its public items are
//! re-exported by `crate::topology`, whose docs describe the model, the sources and the
//! synthetic syntax.

use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::str::FromStr;

pub mod bind;
#[cfg(feature = "hwloc")]
mod hwloc;
pub mod placement;
pub mod report;
mod synthetic;
mod sysfs;

pub use bind::{allowed_cpus, bind_current_thread, current_cpu};
pub(crate) use placement::place_workers_in_share;
pub use placement::{place_workers, RankAssignment, RankOrder, WorkerPlacement};
pub use report::binding_report;

/// One processing unit (hardware thread) of the [`Topology`].
///
/// `core`, `numa` and `package` are logical ids: dense, starting at 0, in topology order (see
/// the [module docs](crate::topology)). They are not the firmware's `core_id` or `physical_package_id`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Pu {
    /// Operating-system index of the PU: the CPU number `sched_setaffinity` and
    /// `sched_getcpu` use.
    pub os_index: usize,
    /// Logical id of the core this PU belongs to.
    pub core: usize,
    /// Logical id of the NUMA node this PU belongs to.
    pub numa: usize,
    /// Logical id of the package (socket) this PU belongs to.
    pub package: usize,
}

impl Pu {
    /// The logical id of this PU's object at `level`; for [`Level::Pu`], the operating-system
    /// index.
    pub fn id(&self, level: Level) -> usize {
        match level {
            Level::Package => self.package,
            Level::Numa => self.numa,
            Level::Core => self.core,
            Level::Pu => self.os_index,
        }
    }
}

/// A level of the machine tree, from the outermost to the innermost.
///
/// Parses from the names `mpirun --map-by` and hwloc use (case-insensitive): `package`
/// (or `socket`, `pack`), `numa` (or `node`, `numanode`), `core`, `pu` (or `hwthread`,
/// `thread`). Displays as `package`, `numa`, `core`, `pu`.
///
/// ```
/// use myriad::topology::Level;
///
/// assert_eq!("socket".parse::<Level>()?, Level::Package);
/// assert_eq!(Level::Numa.to_string(), "numa");
/// assert!("l3".parse::<Level>().is_err());
/// # Ok::<(), myriad::topology::TopologyError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Level {
    /// A package (socket): one physical processor chip.
    Package,
    /// A NUMA node: PUs sharing the nearest memory.
    Numa,
    /// A core: PUs sharing one execution core (SMT siblings).
    Core,
    /// A processing unit: one hardware thread.
    Pu,
}

impl Level {
    /// All levels, outermost first.
    pub const ALL: [Level; 4] = [Level::Package, Level::Numa, Level::Core, Level::Pu];

    fn index(self) -> usize {
        self as usize
    }

    /// The level's name as it is displayed and parsed.
    pub fn name(self) -> &'static str {
        match self {
            Level::Package => "package",
            Level::Numa => "numa",
            Level::Core => "core",
            Level::Pu => "pu",
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Level {
    type Err = TopologyError;

    fn from_str(s: &str) -> Result<Level, TopologyError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "package" | "socket" | "pack" => Ok(Level::Package),
            "numa" | "node" | "numanode" => Ok(Level::Numa),
            "core" => Ok(Level::Core),
            "pu" | "hwthread" | "thread" => Ok(Level::Pu),
            _ => Err(TopologyError::new(format!(
                "unknown topology level {s:?}; expected one of package, numa, core, pu"
            ))),
        }
    }
}

/// Where a [`Topology`] came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TopologySource {
    /// Linux sysfs (`/sys/devices/system/{cpu,node}`) and `sched_getaffinity`.
    Sysfs,
    /// A synthetic description parsed by [`Topology::synthetic`].
    Synthetic,
    /// hwloc, through the `hwlocality` crate (cargo feature `hwloc`).
    Hwloc,
}

impl fmt::Display for TopologySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TopologySource::Sysfs => "sysfs",
            TopologySource::Synthetic => "synthetic",
            TopologySource::Hwloc => "hwloc",
        })
    }
}

/// Why a topology could not be built, a description not parsed, or a placement not made.
///
/// Displays as a sentence naming the values involved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopologyError {
    message: String,
}

impl TopologyError {
    pub(crate) fn new(message: impl Into<String>) -> TopologyError {
        TopologyError {
            message: message.into(),
        }
    }

    /// The message, as displayed.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for TopologyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for TopologyError {}

/// The machine as far as this process is concerned: the PUs it may use, grouped into cores,
/// NUMA nodes and packages. See the [module docs](crate::topology) for the model and the sources.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    /// In topology order; never empty.
    pus: Vec<Pu>,
    /// Number of distinct objects per level, indexed by `Level::index`; 0 when absent.
    counts: [usize; 4],
    source: TopologySource,
    binds_for_real: bool,
    /// What was read: the synthetic description, or the source's name.
    description: String,
}

/// A PU as a source reads it: the operating-system index and, for each of package, NUMA
/// node and core, any key that is equal for PUs of the same object (`None` when the level is
/// absent). [`Topology::from_raw`] turns the keys into dense logical ids.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RawPu {
    pub(crate) os_index: usize,
    pub(crate) package: Option<u64>,
    pub(crate) numa: u64,
    pub(crate) core: Option<(u64, u64)>,
}

impl Topology {
    /// The topology this process should use: `HWLOC_SYNTHETIC` if set, else hwloc (with the
    /// `hwloc` feature), else sysfs. See the [module docs](crate::topology#sources).
    ///
    /// # Errors
    ///
    /// An invalid `HWLOC_SYNTHETIC` description, or no source that works.
    pub fn detect() -> Result<Topology, TopologyError> {
        if let Some(desc) = std::env::var_os("HWLOC_SYNTHETIC").filter(|d| !d.is_empty()) {
            let desc = desc.to_str().ok_or_else(|| {
                TopologyError::new(format!("HWLOC_SYNTHETIC={desc:?} is not valid UTF-8"))
            })?;
            return Topology::synthetic(desc)
                .map_err(|e| TopologyError::new(format!("HWLOC_SYNTHETIC: {e}")));
        }
        #[cfg(feature = "hwloc")]
        {
            match Topology::from_hwloc() {
                Ok(topo) => Ok(topo),
                Err(hwloc_err) => Topology::from_sysfs().map_err(|sysfs_err| {
                    TopologyError::new(format!(
                        "no topology source works: {hwloc_err}; and {sysfs_err}"
                    ))
                }),
            }
        }
        #[cfg(not(feature = "hwloc"))]
        {
            Topology::from_sysfs()
        }
    }

    /// The topology of this machine from Linux sysfs, restricted to the PUs in this
    /// process's affinity mask (`sched_getaffinity`).
    ///
    /// Reads `/sys/devices/system/cpu/cpuN/topology/{physical_package_id,die_id,core_id}`
    /// and `/sys/devices/system/node/nodeN/cpulist`. Missing files mean one package, one NUMA
    /// node, one core per PU respectively. Binds for real.
    ///
    /// # Errors
    ///
    /// Only if not even the list of usable CPUs can be found.
    pub fn from_sysfs() -> Result<Topology, TopologyError> {
        sysfs::read(std::path::Path::new("/sys/devices/system"))
    }

    /// A topology from a synthetic description such as `"package:2 numa:2 core:4 pu:2"`; see
    /// the [module docs](crate::topology#synthetic-topologies) for the syntax.
    ///
    /// It binds for real only when `HWLOC_THISSYSTEM=1` and every PU index is in this
    /// process's affinity mask.
    ///
    /// # Errors
    ///
    /// Unknown level names, zero or non-numeric counts, a level given twice or out of order,
    /// no `pu` level at the end, or more than 2^20 PUs, each named in the message.
    pub fn synthetic(desc: &str) -> Result<Topology, TopologyError> {
        let this_system = std::env::var("HWLOC_THISSYSTEM")
            .ok()
            .and_then(|v| v.trim().parse::<i64>().ok())
            .is_some_and(|v| v != 0);
        let mut topo = synthetic::parse(desc)?;
        topo.binds_for_real = this_system && topo.all_pus_allowed();
        Ok(topo)
    }

    /// The topology as hwloc sees it (cargo feature `hwloc`).
    ///
    /// hwloc honours its own environment variables (`HWLOC_SYNTHETIC` with its full syntax,
    /// `HWLOC_XMLFILE`, `HWLOC_THISSYSTEM`, ...). When hwloc discovered this machine, the PUs
    /// are restricted to the process's affinity mask and binding is real; when the topology
    /// was described to it, binding is real only if hwloc treats it as this system and every
    /// PU index is in the affinity mask.
    ///
    /// # Errors
    ///
    /// hwloc failed to build the topology, or it has no PU this process may use.
    #[cfg(feature = "hwloc")]
    pub fn from_hwloc() -> Result<Topology, TopologyError> {
        hwloc::read()
    }

    /// Builds the model from PUs listed in topology order, assigning logical ids to keys by
    /// first appearance.
    pub(crate) fn from_raw(
        raw: &[RawPu],
        source: TopologySource,
        binds_for_real: bool,
        description: String,
    ) -> Result<Topology, TopologyError> {
        if raw.is_empty() {
            return Err(TopologyError::new(format!(
                "the {source} topology has no processing unit this process may use"
            )));
        }
        fn dense<K: Eq + Hash>(map: &mut HashMap<K, usize>, key: K) -> usize {
            let next = map.len();
            *map.entry(key).or_insert(next)
        }
        let (mut packages, mut nodes, mut cores) = (HashMap::new(), HashMap::new(), HashMap::new());
        let mut pus = Vec::with_capacity(raw.len());
        for (i, r) in raw.iter().enumerate() {
            let package = r.package.map_or(0, |k| dense(&mut packages, k));
            let numa = dense(&mut nodes, r.numa);
            let core = match r.core {
                Some(k) => dense(&mut cores, k),
                None => i,
            };
            pus.push(Pu {
                os_index: r.os_index,
                core,
                numa,
                package,
            });
        }
        let counts = [packages.len(), nodes.len(), cores.len(), pus.len()];
        Ok(Topology {
            pus,
            counts,
            source,
            binds_for_real,
            description,
        })
    }

    /// The PUs this process may use, in topology order (package, NUMA node, core, PU).
    /// Never empty.
    pub fn pus(&self) -> &[Pu] {
        &self.pus
    }

    /// The number of objects at `level` holding at least one usable PU; 0 if the level is
    /// absent.
    pub fn count(&self, level: Level) -> usize {
        self.counts[level.index()]
    }

    /// The levels present in this topology, outermost first.
    pub fn levels(&self) -> Vec<Level> {
        Level::ALL
            .into_iter()
            .filter(|&l| self.count(l) > 0)
            .collect()
    }

    /// Whether binding a thread to a PU of this topology pins it to that CPU of this machine.
    ///
    /// True for sysfs, and for hwloc when it discovered this machine; for synthetic
    /// descriptions see [`Topology::synthetic`]. When false, the runtime should not bind.
    pub fn binds_for_real(&self) -> bool {
        self.binds_for_real
    }

    /// Where this topology came from.
    pub fn source(&self) -> TopologySource {
        self.source
    }

    /// What the source read: the synthetic description, or a short name of the source.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The levels present, as a comma-separated list for messages.
    pub(crate) fn levels_list(&self) -> String {
        let names: Vec<&str> = self.levels().into_iter().map(Level::name).collect();
        names.join(", ")
    }

    /// Whether every PU's index is in this process's affinity mask.
    fn all_pus_allowed(&self) -> bool {
        match bind::allowed_cpus() {
            Ok(allowed) => self.pus.iter().all(|p| allowed.contains(&p.os_index)),
            Err(_) => false,
        }
    }
}

impl fmt::Display for Topology {
    /// `synthetic "numa:2 core:1 pu:1": 1 package, 2 NUMA nodes, 2 cores, 2 PUs` — absent
    /// levels are left out.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.source {
            TopologySource::Synthetic => write!(f, "synthetic {:?}:", self.description)?,
            _ => write!(f, "{}:", self.description)?,
        }
        let mut first = true;
        for level in self.levels() {
            let n = self.count(level);
            let (one, many) = match level {
                Level::Package => ("package", "packages"),
                Level::Numa => ("NUMA node", "NUMA nodes"),
                Level::Core => ("core", "cores"),
                Level::Pu => ("PU", "PUs"),
            };
            let sep = if first { " " } else { ", " };
            first = false;
            write!(f, "{sep}{n} {}", if n == 1 { one } else { many })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn level_parses_aliases_and_displays_canonical_names() {
        for (s, l) in [
            ("package", Level::Package),
            ("Socket", Level::Package),
            ("numa", Level::Numa),
            ("NODE", Level::Numa),
            ("core", Level::Core),
            ("pu", Level::Pu),
            ("hwthread", Level::Pu),
        ] {
            assert_eq!(s.parse::<Level>().unwrap(), l, "{s}");
        }
        for l in Level::ALL {
            assert_eq!(l.to_string().parse::<Level>().unwrap(), l);
        }
        let err = "board".parse::<Level>().unwrap_err().to_string();
        assert!(err.contains("\"board\"") && err.contains("package, numa, core, pu"));
    }

    #[test]
    fn from_raw_assigns_dense_ids_by_first_appearance() {
        let raw = [
            RawPu {
                os_index: 7,
                package: Some(3),
                numa: 5,
                core: Some((3, 10)),
            },
            RawPu {
                os_index: 2,
                package: Some(3),
                numa: 5,
                core: Some((3, 10)),
            },
            RawPu {
                os_index: 4,
                package: Some(1),
                numa: 0,
                core: Some((1, 10)),
            },
        ];
        let t = Topology::from_raw(&raw, TopologySource::Sysfs, true, "test".into()).unwrap();
        let ids: Vec<_> = t
            .pus()
            .iter()
            .map(|p| (p.os_index, p.package, p.numa, p.core))
            .collect();
        assert_eq!(ids, [(7, 0, 0, 0), (2, 0, 0, 0), (4, 1, 1, 1)]);
        assert_eq!(
            (
                t.count(Level::Package),
                t.count(Level::Core),
                t.count(Level::Pu)
            ),
            (2, 2, 3)
        );
        assert_eq!(
            t.to_string(),
            "test: 2 packages, 2 NUMA nodes, 2 cores, 3 PUs"
        );
    }

    #[test]
    fn absent_levels_count_zero_and_are_not_listed() {
        let raw = [
            RawPu {
                os_index: 0,
                package: None,
                numa: 0,
                core: None,
            },
            RawPu {
                os_index: 1,
                package: None,
                numa: 0,
                core: None,
            },
        ];
        let t = Topology::from_raw(&raw, TopologySource::Hwloc, true, "hwloc".into()).unwrap();
        assert_eq!(t.levels(), [Level::Numa, Level::Pu]);
        assert_eq!(t.count(Level::Core), 0);
        assert_eq!(t.pus()[1].core, 1, "each PU stands for its own core");
        assert_eq!(t.pus()[1].package, 0);
    }

    #[test]
    fn empty_topology_is_an_error() {
        let err = Topology::from_raw(&[], TopologySource::Sysfs, true, "sysfs".into());
        assert!(err.unwrap_err().to_string().contains("no processing unit"));
    }

    #[test]
    fn detect_finds_at_least_one_pu() {
        let t = Topology::detect().unwrap();
        assert!(!t.pus().is_empty());
        assert!(t.count(Level::Numa) >= 1);
    }
}
