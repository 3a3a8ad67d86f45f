//! The hardware topology module through its public API: synthetic machines, placement,
//! rank assignment, the binding report, and real binding on fake NUMA nodes.
//!
//! Tests that need environment variables (`HWLOC_SYNTHETIC`, `HWLOC_THISSYSTEM`) set them in
//! a child process: this binary re-runs itself with the variables and a filter naming the
//! test, because the environment is process-global and tests run in parallel.

use myriad::topology::{
    allowed_cpus, bind_current_thread, binding_report, current_cpu, place_workers, Level,
    RankAssignment, RankOrder, Topology, TopologySource,
};

mod common;

/// Runs `body` in a child process of this test binary with `envs` set (and hwloc's other
/// variables cleared); `name` must be the calling test's function name.
fn in_child(name: &str, envs: &[(&str, &str)], body: impl FnOnce()) {
    common::in_child(name, envs, body);
}

/// One parsed line of the binding report.
#[derive(Debug, PartialEq)]
struct Line {
    worker: usize,
    bound: bool,
    pu: usize,
    core: usize,
    numa: usize,
    package: usize,
    ranks: usize,
}

fn parse_report(report: &str) -> Vec<Line> {
    report
        .lines()
        .map(|line| {
            let rest = line.strip_prefix("[myriad] worker ").expect(line);
            let nums: Vec<usize> = rest
                .split(|c: char| !c.is_ascii_digit())
                .filter(|s| !s.is_empty())
                .map(|s| s.parse().unwrap())
                .collect();
            assert_eq!(nums.len(), 6, "{line}");
            Line {
                worker: nums[0],
                bound: rest.contains(" bound to PU "),
                pu: nums[1],
                core: nums[2],
                numa: nums[3],
                package: nums[4],
                ranks: nums[5],
            }
        })
        .collect()
}

#[test]
fn synthetic_machine_counts_and_levels() {
    let t = Topology::synthetic("package:2 numa:2 core:4 pu:2").unwrap();
    assert_eq!(t.source(), TopologySource::Synthetic);
    let counts: Vec<usize> = Level::ALL.iter().map(|&l| t.count(l)).collect();
    assert_eq!(counts, [2, 4, 16, 32]);
    assert_eq!(t.pus().len(), 32);
    assert_eq!(t.levels(), Level::ALL);
    assert_eq!(
        t.to_string(),
        "synthetic \"package:2 numa:2 core:4 pu:2\": 2 packages, 4 NUMA nodes, 16 cores, 32 PUs"
    );
}

#[test]
fn synthetic_errors_are_sentences() {
    for (desc, needle) in [
        ("numa:2 widget:2 pu:1", "unknown level \"widget\""),
        ("numa:0 pu:1", "count 0"),
        ("numa:2 core:1", "end with the pu level"),
        ("%%%", "level:count"),
    ] {
        let e = Topology::synthetic(desc).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains(needle), "{desc}: {msg}");
        let _: &dyn std::error::Error = &e;
    }
}

#[test]
fn placement_by_each_level_on_a_two_socket_machine() {
    let t = Topology::synthetic("package:2 numa:2 core:4 pu:2").unwrap();
    let by = |level: &str, n| -> Vec<usize> {
        place_workers(&t, n, level.parse().unwrap())
            .unwrap()
            .iter()
            .map(|p| p.pu.os_index)
            .collect()
    };
    assert_eq!(by("core", 4), [0, 2, 4, 6]);
    assert_eq!(by("numa", 4), [0, 8, 16, 24]);
    assert_eq!(by("socket", 4), [0, 16, 2, 18]);
    assert_eq!(by("hwthread", 4), [0, 1, 2, 3]);
    // Oversubscribed: 40 workers on 32 PUs, the first 8 PUs get two.
    let over = by("core", 40);
    assert_eq!(over[32..], over[..8]);
}

#[test]
fn placement_on_a_missing_level_lists_the_levels() {
    let t = Topology::synthetic("numa:2 core:1 pu:1").unwrap();
    let e = place_workers(&t, 2, Level::Package)
        .unwrap_err()
        .to_string();
    assert!(e.contains("no package level"), "{e}");
    assert!(e.contains("numa, core, pu"), "{e}");
}

#[test]
fn report_matches_placement_and_assignment() {
    let t = Topology::synthetic("numa:2 core:2 pu:2").unwrap();
    let placements = place_workers(&t, 4, Level::Numa).unwrap();
    let ranks = RankAssignment::new(100_001, 4, RankOrder::Block);
    let report = binding_report(&placements, &ranks.counts(), false);
    let lines = parse_report(&report);
    assert_eq!(lines.len(), 4);
    for (line, p) in lines.iter().zip(&placements) {
        assert_eq!(
            (line.worker, line.pu, line.core, line.numa, line.package),
            (p.worker, p.pu.os_index, p.pu.core, p.pu.numa, p.pu.package)
        );
        assert!(!line.bound);
    }
    assert_eq!(
        lines.iter().map(|l| l.ranks).collect::<Vec<_>>(),
        [25_001, 25_000, 25_000, 25_000]
    );
    assert_eq!(
        lines.iter().map(|l| l.numa).collect::<Vec<_>>(),
        [0, 1, 0, 1]
    );
}

#[test]
fn cyclic_and_block_orders() {
    let order: RankOrder = "cyclic".parse().unwrap();
    let a = RankAssignment::new(1_000_000, 2, order);
    assert_eq!(a.counts(), [500_000, 500_000]);
    assert_eq!(a.ranks_of(1).take(3).collect::<Vec<_>>(), [1, 3, 5]);
    let b = RankAssignment::new(1_000_000, 2, RankOrder::Block);
    assert_eq!(b.ranks_of(1).next(), Some(500_000));
    assert_eq!(b.worker_of(499_999), 0);
}

#[test]
fn sysfs_sees_the_affinity_mask() {
    let t = Topology::from_sysfs().unwrap();
    assert_eq!(t.source(), TopologySource::Sysfs);
    assert!(t.binds_for_real());
    let mut pus: Vec<usize> = t.pus().iter().map(|p| p.os_index).collect();
    pus.sort_unstable();
    assert_eq!(pus, allowed_cpus().unwrap());
    assert_eq!(t.levels(), Level::ALL);
}

/// Binds one thread per placement and checks where it runs.
fn bind_each_and_check(t: &Topology, map_by: Level) {
    for p in place_workers(t, t.pus().len(), map_by).unwrap() {
        std::thread::spawn(move || {
            bind_current_thread(p.pu.os_index).unwrap();
            assert_eq!(current_cpu(), Some(p.pu.os_index));
        })
        .join()
        .unwrap();
    }
}

#[test]
fn fake_numa_nodes_bind_for_real_with_thissystem() {
    in_child(
        "fake_numa_nodes_bind_for_real_with_thissystem",
        &[
            ("HWLOC_SYNTHETIC", "numa:2 core:1 pu:1"),
            ("HWLOC_THISSYSTEM", "1"),
        ],
        || {
            let t = Topology::detect().unwrap();
            assert_eq!(t.source(), TopologySource::Synthetic);
            assert_eq!(t.count(Level::Numa), 2);
            let allowed = allowed_cpus().unwrap();
            if !(allowed.contains(&0) && allowed.contains(&1)) {
                assert!(!t.binds_for_real(), "CPUs 0 and 1 are not both usable here");
                return;
            }
            assert!(t.binds_for_real());
            bind_each_and_check(&t, Level::Numa);
            let placements = place_workers(&t, 2, Level::Numa).unwrap();
            let lines = parse_report(&binding_report(&placements, &[1, 1], true));
            assert!(lines.iter().all(|l| l.bound));
            assert_eq!((lines[1].pu, lines[1].numa), (1, 1));
        },
    );
}

#[test]
fn synthetic_without_thissystem_does_not_bind() {
    in_child(
        "synthetic_without_thissystem_does_not_bind",
        &[("HWLOC_SYNTHETIC", "numa:2 core:1 pu:1")],
        || {
            let t = Topology::detect().unwrap();
            assert_eq!(t.count(Level::Numa), 2);
            assert!(!t.binds_for_real());
        },
    );
}

#[test]
fn synthetic_larger_than_the_machine_does_not_bind() {
    in_child(
        "synthetic_larger_than_the_machine_does_not_bind",
        &[
            ("HWLOC_SYNTHETIC", "numa:2 core:4096 pu:1"),
            ("HWLOC_THISSYSTEM", "1"),
        ],
        || {
            let t = Topology::detect().unwrap();
            assert_eq!(t.pus().len(), 8192);
            assert!(!t.binds_for_real(), "CPU 8191 does not exist here");
        },
    );
}

#[test]
fn invalid_hwloc_synthetic_is_reported() {
    in_child(
        "invalid_hwloc_synthetic_is_reported",
        &[("HWLOC_SYNTHETIC", "numa:2 core:x pu:1")],
        || {
            let e = Topology::detect().unwrap_err().to_string();
            assert!(e.starts_with("HWLOC_SYNTHETIC: "), "{e}");
            assert!(e.contains("\"x\""), "{e}");
        },
    );
}

#[cfg(feature = "hwloc")]
#[test]
fn hwloc_and_sysfs_agree_on_this_machine() {
    in_child("hwloc_and_sysfs_agree_on_this_machine", &[], || {
        let h = Topology::from_hwloc().unwrap();
        let s = Topology::from_sysfs().unwrap();
        assert_eq!(h.source(), TopologySource::Hwloc);
        assert!(h.binds_for_real());
        assert_eq!(h.pus().len(), s.pus().len());
        for level in Level::ALL {
            assert_eq!(h.count(level), s.count(level), "{level}");
        }
        // Same PUs, grouped into the same cores and NUMA nodes.
        let groups = |t: &Topology, level: Level| {
            let mut g: Vec<Vec<usize>> = vec![Vec::new(); t.count(level)];
            for p in t.pus() {
                g[p.id(level)].push(p.os_index);
            }
            for v in &mut g {
                v.sort_unstable();
            }
            g.sort();
            g
        };
        for level in [Level::Core, Level::Numa, Level::Package] {
            assert_eq!(groups(&h, level), groups(&s, level), "{level}");
        }
    });
}

#[cfg(feature = "hwloc")]
#[test]
fn hwloc_synthetic_thissystem_binds_for_real() {
    in_child(
        "hwloc_synthetic_thissystem_binds_for_real",
        &[
            ("HWLOC_SYNTHETIC", "numa:2 core:1 pu:1"),
            ("HWLOC_THISSYSTEM", "1"),
        ],
        || {
            let t = Topology::from_hwloc().unwrap();
            assert_eq!(t.source(), TopologySource::Hwloc);
            assert_eq!(t.count(Level::Numa), 2);
            assert_eq!(t.count(Level::Core), 2);
            // hwloc's synthetic topologies match the built-in parser's.
            let ours = Topology::synthetic("numa:2 core:1 pu:1").unwrap();
            assert_eq!(t.pus(), ours.pus());
            let allowed = allowed_cpus().unwrap();
            if !(allowed.contains(&0) && allowed.contains(&1)) {
                assert!(!t.binds_for_real());
                return;
            }
            assert!(t.binds_for_real());
            bind_each_and_check(&t, Level::Numa);
        },
    );
}

#[cfg(feature = "hwloc")]
#[test]
fn hwloc_synthetic_matches_the_builtin_parser() {
    in_child(
        "hwloc_synthetic_matches_the_builtin_parser",
        &[("HWLOC_SYNTHETIC", "pack:2 numa:2 l2:2 core:2 pu:2")],
        || {
            let h = Topology::from_hwloc().unwrap();
            let ours = Topology::synthetic("pack:2 numa:2 l2:2 core:2 pu:2").unwrap();
            assert_eq!(h.pus(), ours.pus());
            assert!(!h.binds_for_real(), "not this system");
        },
    );
}
