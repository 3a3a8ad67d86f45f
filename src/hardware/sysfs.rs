//! The topology of this machine from Linux sysfs, needing no C library.
//!
//! For each CPU in the affinity mask it reads `cpu/cpuN/topology/physical_package_id`,
//! `die_id` and `core_id`, and it maps CPUs to NUMA nodes with `node/nodeN/cpulist`. Any of
//! these may be missing (containers that hide `/sys`, architectures that report -1): then the
//! CPU is in package 0, in the lowest NUMA node, and its own core.

use std::collections::HashMap;
use std::fs;
use std::path::Path;

use super::{bind, RawPu, Topology, TopologyError, TopologySource};

/// Reads the topology under `root` (normally `/sys/devices/system`), restricted to the
/// process's affinity mask.
pub(super) fn read(root: &Path) -> Result<Topology, TopologyError> {
    let allowed = match bind::allowed_cpus() {
        Ok(cpus) => cpus,
        Err(err) => fs::read_to_string(root.join("cpu/online"))
            .ok()
            .and_then(|s| parse_cpulist(&s))
            .or_else(|| {
                std::thread::available_parallelism()
                    .ok()
                    .map(|n| (0..n.get()).collect())
            })
            .ok_or_else(|| {
                TopologyError::new(format!(
                    "cannot tell which CPUs this process may use: sched_getaffinity failed \
                     ({err}), and neither {} nor the standard library knows",
                    root.join("cpu/online").display()
                ))
            })?,
    };
    from_tree(root, &allowed)
}

/// Builds the topology of the CPUs `allowed` from the sysfs tree under `root`.
fn from_tree(root: &Path, allowed: &[usize]) -> Result<Topology, TopologyError> {
    let node_of = numa_nodes(root);
    let default_node = node_of.values().copied().min().unwrap_or(0);

    struct Cpu {
        os_index: usize,
        package: u64,
        numa: u64,
        core: (u64, u64),
    }
    let mut cpus: Vec<Cpu> = allowed
        .iter()
        .map(|&cpu| {
            let dir = root.join(format!("cpu/cpu{cpu}/topology"));
            let package = read_id(&dir.join("physical_package_id")).unwrap_or(0);
            let die = read_id(&dir.join("die_id")).unwrap_or(0);
            // core_id is unique within a die at most; a missing one makes the CPU its own
            // core (key outside the range of real package ids).
            let core = match read_id(&dir.join("core_id")) {
                Some(core_id) => ((package << 32) | die, core_id),
                None => (u64::MAX, cpu as u64),
            };
            Cpu {
                os_index: cpu,
                package,
                numa: node_of.get(&cpu).copied().unwrap_or(default_node),
                core,
            }
        })
        .collect();

    // Topology order: package, NUMA node, core (by its first CPU), CPU.
    let mut first_cpu_of_core: HashMap<(u64, u64), usize> = HashMap::new();
    for c in &cpus {
        let first = first_cpu_of_core.entry(c.core).or_insert(c.os_index);
        *first = (*first).min(c.os_index);
    }
    cpus.sort_by_key(|c| (c.package, c.numa, first_cpu_of_core[&c.core], c.os_index));

    let raw: Vec<RawPu> = cpus
        .iter()
        .map(|c| RawPu {
            os_index: c.os_index,
            package: Some(c.package),
            numa: c.numa,
            core: Some(c.core),
        })
        .collect();
    Topology::from_raw(&raw, TopologySource::Sysfs, true, "sysfs".to_owned())
}

/// CPU → NUMA node id, from `node/nodeN/cpulist`; empty when the directory is missing.
fn numa_nodes(root: &Path) -> HashMap<usize, u64> {
    let mut node_of = HashMap::new();
    let Ok(entries) = fs::read_dir(root.join("node")) else {
        return node_of;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(node) = name
            .to_str()
            .and_then(|n| n.strip_prefix("node"))
            .and_then(|n| n.parse::<u64>().ok())
        else {
            continue;
        };
        let cpus = fs::read_to_string(entry.path().join("cpulist"))
            .ok()
            .and_then(|s| parse_cpulist(&s))
            .unwrap_or_default();
        for cpu in cpus {
            node_of.entry(cpu).or_insert(node);
        }
    }
    node_of
}

/// A non-negative id from a sysfs file; `None` if missing, garbage or negative (-1 means
/// unknown).
fn read_id(path: &Path) -> Option<u64> {
    fs::read_to_string(path).ok()?.trim().parse::<u64>().ok()
}

/// Parses the kernel's list format, `0-3,8,10-11` (empty means no CPU). `None` on garbage.
fn parse_cpulist(s: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((lo, hi)) => {
                let (lo, hi): (usize, usize) = (lo.parse().ok()?, hi.parse().ok()?);
                if hi < lo || hi - lo > 1 << 20 {
                    return None;
                }
                cpus.extend(lo..=hi);
            }
            None => cpus.push(part.parse().ok()?),
        }
    }
    Some(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hardware::Level;
    use std::path::PathBuf;

    /// A scratch sysfs tree, removed on drop.
    struct FakeSys(PathBuf);

    impl FakeSys {
        fn new(name: &str) -> FakeSys {
            let dir = std::env::temp_dir().join(format!(
                "myriad-topo-{}-{name}-{:?}",
                std::process::id(),
                std::thread::current().id()
            ));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).unwrap();
            FakeSys(dir)
        }

        fn write(&self, rel: &str, contents: &str) {
            let path = self.0.join(rel);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, contents).unwrap();
        }

        /// CPU `cpu` in package `pkg` with core id `core`.
        fn cpu(&self, cpu: usize, pkg: i64, core: i64) {
            self.write(
                &format!("cpu/cpu{cpu}/topology/physical_package_id"),
                &format!("{pkg}\n"),
            );
            self.write(
                &format!("cpu/cpu{cpu}/topology/core_id"),
                &format!("{core}\n"),
            );
        }
    }

    impl Drop for FakeSys {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn ids(t: &Topology) -> Vec<(usize, usize, usize, usize)> {
        t.pus()
            .iter()
            .map(|p| (p.os_index, p.package, p.numa, p.core))
            .collect()
    }

    #[test]
    fn cpulists_parse() {
        assert_eq!(
            parse_cpulist("0-3,8,10-11\n"),
            Some(vec![0, 1, 2, 3, 8, 10, 11])
        );
        assert_eq!(parse_cpulist("\n"), Some(vec![]));
        assert_eq!(parse_cpulist("5"), Some(vec![5]));
        assert_eq!(parse_cpulist("3-1"), None);
        assert_eq!(parse_cpulist("a-b"), None);
    }

    #[test]
    fn two_sockets_with_smt_siblings_numbered_apart() {
        // Linux numbers the second hardware threads after all first ones: CPUs 0-3 are the
        // first threads of cores 0,1 (package 0) and 0,1 (package 1); 4-7 their siblings.
        let sys = FakeSys::new("smt");
        for cpu in 0..8 {
            sys.cpu(cpu, (cpu as i64 % 4) / 2, cpu as i64 % 2);
        }
        sys.write("node/node0/cpulist", "0-1,4-5\n");
        sys.write("node/node1/cpulist", "2-3,6-7\n");
        sys.write("node/possible", "0-1\n");
        let t = from_tree(&sys.0, &(0..8).collect::<Vec<_>>()).unwrap();
        assert_eq!(
            ids(&t),
            [
                (0, 0, 0, 0),
                (4, 0, 0, 0),
                (1, 0, 0, 1),
                (5, 0, 0, 1),
                (2, 1, 1, 2),
                (6, 1, 1, 2),
                (3, 1, 1, 3),
                (7, 1, 1, 3),
            ]
        );
        assert_eq!(t.levels(), Level::ALL);
        assert!(t.binds_for_real());
        assert_eq!(t.source(), TopologySource::Sysfs);
    }

    #[test]
    fn only_allowed_cpus_are_modelled() {
        let sys = FakeSys::new("allowed");
        for cpu in 0..8 {
            sys.cpu(cpu, (cpu as i64 % 4) / 2, cpu as i64 % 2);
        }
        let t = from_tree(&sys.0, &[2, 6, 7]).unwrap();
        assert_eq!(ids(&t), [(2, 0, 0, 0), (6, 0, 0, 0), (7, 0, 0, 1)]);
        assert_eq!(t.count(Level::Package), 1);
    }

    #[test]
    fn missing_files_fall_back_to_one_package_one_node_core_per_pu() {
        let sys = FakeSys::new("empty");
        let t = from_tree(&sys.0, &[0, 1, 2]).unwrap();
        assert_eq!(ids(&t), [(0, 0, 0, 0), (1, 0, 0, 1), (2, 0, 0, 2)]);
        assert_eq!(t.levels(), Level::ALL);
    }

    #[test]
    fn unknown_package_and_cpus_outside_any_node() {
        let sys = FakeSys::new("odd");
        sys.cpu(0, -1, 0);
        sys.cpu(1, -1, 1);
        sys.write("cpu/cpu2/topology/core_id", "garbage");
        sys.write("node/node3/cpulist", "1\n");
        sys.write("node/node5/cpulist", "\n");
        let t = from_tree(&sys.0, &[0, 1, 2]).unwrap();
        // CPUs 0 and 2 are in no node's list: they go to the lowest node seen, node 3.
        assert_eq!(t.count(Level::Numa), 1);
        assert_eq!(t.count(Level::Package), 1);
        assert_eq!(t.count(Level::Core), 3);
    }

    #[test]
    fn no_allowed_cpu_is_an_error() {
        let sys = FakeSys::new("none");
        assert!(from_tree(&sys.0, &[]).is_err());
    }

    #[test]
    fn this_machine() {
        let t = read(Path::new("/sys/devices/system")).unwrap();
        let allowed = bind::allowed_cpus().unwrap();
        let mut seen: Vec<usize> = t.pus().iter().map(|p| p.os_index).collect();
        seen.sort_unstable();
        assert_eq!(seen, allowed);
    }
}
