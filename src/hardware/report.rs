//! The binding report (`MYRIAD_REPORT_BINDINGS=1`), in the spirit of
//! `mpirun --report-bindings`: one line per worker saying where it runs and how many ranks it
//! starts with.
//!
//! The format is stable; tests and scripts parse it:
//!
//! ```text
//! [myriad] worker 0 bound to PU 0 (core 0, numa 0, package 0): 50000 ranks
//! [myriad] worker 1 bound to PU 1 (core 1, numa 0, package 0): 1 rank
//! [myriad] worker 2 not bound, placed on PU 0 (core 0, numa 0, package 0): 0 ranks
//! ```
//!
//! Ids in parentheses are logical ([`Pu`](super::Pu)); the PU number is the operating-system
//! index. `not bound` is printed when binding is off or would not be real
//! ([`Topology::binds_for_real`](super::Topology::binds_for_real)).

use std::fmt::Write;

use super::WorkerPlacement;

/// The report for `placements`, one line per placement, each ending in a newline.
/// `ranks_per_worker[i]` is the rank count of `placements[i]` (0 if the slice is shorter);
/// `bound` says whether the workers were really bound.
///
/// ```
/// use myriad::topology::{binding_report, place_workers, Level, Topology};
///
/// let topo = Topology::synthetic("numa:2 core:1 pu:1")?;
/// let placements = place_workers(&topo, 2, Level::Numa)?;
/// let report = binding_report(&placements, &[3, 1], true);
/// assert_eq!(
///     report,
///     "[myriad] worker 0 bound to PU 0 (core 0, numa 0, package 0): 3 ranks\n\
///      [myriad] worker 1 bound to PU 1 (core 1, numa 1, package 0): 1 rank\n"
/// );
/// # Ok::<(), myriad::topology::TopologyError>(())
/// ```
pub fn binding_report(
    placements: &[WorkerPlacement],
    ranks_per_worker: &[usize],
    bound: bool,
) -> String {
    let mut out = String::new();
    for (i, p) in placements.iter().enumerate() {
        let ranks = ranks_per_worker.get(i).copied().unwrap_or(0);
        let how = if bound {
            "bound to"
        } else {
            "not bound, placed on"
        };
        let unit = if ranks == 1 { "rank" } else { "ranks" };
        // Writing to a String cannot fail.
        let _ = writeln!(
            out,
            "[myriad] worker {} {how} PU {} (core {}, numa {}, package {}): {ranks} {unit}",
            p.worker, p.pu.os_index, p.pu.core, p.pu.numa, p.pu.package
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hardware::{place_workers, Level, Topology};

    #[test]
    fn one_line_per_worker() {
        let t = Topology::synthetic("package:2 numa:2 core:4 pu:2").unwrap();
        let p = place_workers(&t, 3, Level::Package).unwrap();
        let r = binding_report(&p, &[50_000, 50_000], false);
        assert_eq!(
            r,
            "[myriad] worker 0 not bound, placed on PU 0 (core 0, numa 0, package 0): 50000 ranks\n\
             [myriad] worker 1 not bound, placed on PU 16 (core 8, numa 2, package 1): 50000 ranks\n\
             [myriad] worker 2 not bound, placed on PU 2 (core 1, numa 0, package 0): 0 ranks\n"
        );
        assert_eq!(binding_report(&[], &[], true), "");
    }
}
