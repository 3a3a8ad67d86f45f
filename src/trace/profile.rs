//! The profile at exit (`MYRIAD_PROFILE`): per operation calls, bytes,
//! total and longest time, as mpiP prints them; the ranks that waited most;
//! compute against MPI time per rank, summarised for large jobs.
//!
//! Each party counts into its own [`RankProfile`] (no shared writes); the
//! job's owner adds them up once every worker is done ([`report`]). A
//! task's counts (an immediate collective) go to the rank it acts for, but
//! not its time: it ran beside the rank.

use std::fmt::Write;

use super::{Op, PartyLog};

/// One operation's figures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Stat {
    pub(crate) calls: u64,
    pub(crate) bytes: u64,
    pub(crate) total_ns: u64,
    pub(crate) max_ns: u64,
}

impl Stat {
    fn add(&mut self, other: &Stat) {
        self.calls += other.calls;
        self.bytes += other.bytes;
        self.total_ns += other.total_ns;
        self.max_ns = self.max_ns.max(other.max_ns);
    }
}

/// What one party counted.
#[derive(Debug, Clone, Default)]
pub(crate) struct RankProfile {
    /// Operations by name, in the order first called (a handful).
    ops: Vec<(&'static str, Stat)>,
    /// Time in operations called by the user's code (outermost ones), ns.
    pub(crate) mpi_ns: u64,
    /// Time parked (waiting to be woken), ns.
    pub(crate) wait_ns: u64,
}

impl RankProfile {
    /// Counts an operation that took `dur` ns at nesting depth `depth`:
    /// operations in the table are the user's calls (depth 0; a
    /// collective's inner messages are part of it), parks add to the
    /// waiting time at any depth.
    pub(crate) fn record(&mut self, op: Op, bytes: u64, dur: u64, depth: u8) {
        if let Op::Park { .. } = op {
            self.wait_ns += dur;
            return;
        }
        if depth != 0 {
            return;
        }
        self.mpi_ns += dur;
        let name = op.name();
        let stat = match self.ops.iter_mut().find(|(n, _)| *n == name) {
            Some((_, stat)) => stat,
            None => {
                self.ops.push((name, Stat::default()));
                &mut self.ops.last_mut().expect("just pushed").1
            }
        };
        stat.calls += 1;
        stat.bytes += bytes;
        stat.total_ns += dur;
        stat.max_ns = stat.max_ns.max(dur);
    }

    /// Turns clock ticks into nanoseconds (`scale` ns per tick).
    pub(crate) fn rescale(&mut self, scale: f64) {
        let ns = |ticks: &mut u64| *ticks = (*ticks as f64 * scale) as u64;
        ns(&mut self.mpi_ns);
        ns(&mut self.wait_ns);
        for (_, stat) in &mut self.ops {
            ns(&mut stat.total_ns);
            ns(&mut stat.max_ns);
        }
    }

    /// Calls of operation `name` counted.
    #[cfg(test)]
    pub(crate) fn calls(&self, name: &str) -> u64 {
        self.ops
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(0, |(_, s)| s.calls)
    }
}

/// One rank's totals.
#[derive(Debug, Clone, Copy)]
struct RankTotals {
    rank: u32,
    life_ns: u64,
    mpi_ns: u64,
    wait_ns: u64,
}

impl RankTotals {
    fn compute_ns(&self) -> u64 {
        self.life_ns.saturating_sub(self.mpi_ns)
    }
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// The profile's text, from every party's log of this process (`end`:
/// the job's wall time in ns).
pub(crate) fn report(logs: &[PartyLog], end: u64, process: u32, processes: u32) -> String {
    let mut ops: Vec<(&'static str, Stat)> = Vec::new();
    let mut ranks: Vec<RankTotals> = Vec::new();
    let mut tasks = 0usize;
    for log in logs {
        let Some(profile) = &log.profile else {
            continue;
        };
        for (name, stat) in &profile.ops {
            match ops.iter_mut().find(|(n, _)| n == name) {
                Some((_, total)) => total.add(stat),
                None => ops.push((name, *stat)),
            }
        }
        if log.task {
            tasks += 1;
            continue;
        }
        ranks.push(RankTotals {
            rank: log.rank,
            life_ns: log.end.saturating_sub(log.start),
            mpi_ns: profile.mpi_ns,
            wait_ns: profile.wait_ns,
        });
    }
    ranks.sort_by_key(|r| r.rank);
    let mut out = String::new();
    let of = if processes > 1 {
        format!(" (process {process} of {processes})")
    } else {
        String::new()
    };
    let life: u64 = ranks.iter().map(|r| r.life_ns).sum();
    let mpi: u64 = ranks.iter().map(|r| r.mpi_ns).sum();
    let _ = writeln!(
        out,
        "[myriad] profile{of}: {} ranks, {tasks} tasks, wall {:.3} ms, MPI {:.1}% of rank time",
        ranks.len(),
        ms(end),
        if life == 0 {
            0.0
        } else {
            100.0 * mpi as f64 / life as f64
        }
    );
    let _ = writeln!(
        out,
        "[myriad] {:<20} {:>12} {:>14} {:>12} {:>12} {:>12}",
        "operation", "calls", "bytes", "total_ms", "avg_us", "max_us"
    );
    ops.sort_by(|a, b| b.1.total_ns.cmp(&a.1.total_ns).then(a.0.cmp(b.0)));
    for (name, s) in &ops {
        let _ = writeln!(
            out,
            "[myriad] {:<20} {:>12} {:>14} {:>12.3} {:>12.3} {:>12.3}",
            name,
            s.calls,
            s.bytes,
            ms(s.total_ns),
            s.total_ns as f64 / 1e3 / s.calls.max(1) as f64,
            s.max_ns as f64 / 1e3
        );
    }
    let mut waiting = ranks.clone();
    waiting.sort_by(|a, b| b.wait_ns.cmp(&a.wait_ns).then(a.rank.cmp(&b.rank)));
    let shown: Vec<String> = waiting
        .iter()
        .take(5)
        .map(|r| format!("rank {} {:.3} ms", r.rank, ms(r.wait_ns)))
        .collect();
    let _ = writeln!(out, "[myriad] most waiting (parked): {}", shown.join(", "));
    if ranks.len() <= 16 {
        for r in &ranks {
            let _ = writeln!(
                out,
                "[myriad] rank {:<8} life_ms {:>10.3} compute_ms {:>10.3} mpi_ms {:>10.3} wait_ms {:>10.3}",
                r.rank,
                ms(r.life_ns),
                ms(r.compute_ns()),
                ms(r.mpi_ns),
                ms(r.wait_ns)
            );
        }
    }
    if !ranks.is_empty() {
        let _ = writeln!(
            out,
            "[myriad] per rank (ms)        {:>22} {:>22} {:>22}",
            "min (rank)", "median", "max (rank)"
        );
        type Figure = fn(&RankTotals) -> u64;
        let summary: [(&str, Figure); 4] = [
            ("compute", RankTotals::compute_ns),
            ("mpi", |r| r.mpi_ns),
            ("wait", |r| r.wait_ns),
            ("life", |r| r.life_ns),
        ];
        for (name, value) in summary {
            let mut sorted: Vec<(u64, u32)> = ranks.iter().map(|r| (value(r), r.rank)).collect();
            sorted.sort_unstable();
            let (min, max) = (sorted[0], sorted[sorted.len() - 1]);
            let median = sorted[sorted.len() / 2].0;
            let _ = writeln!(
                out,
                "[myriad] {:<20} {:>12.3} ({:>7}) {:>22.3} {:>12.3} ({:>7})",
                name,
                ms(min.0),
                min.1,
                ms(median),
                ms(max.0),
                max.1
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(rank: u32, task: bool, profile: RankProfile) -> PartyLog {
        PartyLog {
            rank,
            tid: rank as u64,
            worker: 0,
            task,
            start: 0,
            end: 1_000_000,
            events: Default::default(),
            profile: Some(Box::new(profile)),
        }
    }

    #[test]
    fn the_table_adds_up_ranks_and_tasks() {
        let mut a = RankProfile::default();
        a.record(Op::Send, 8, 1000, 0);
        a.record(Op::Send, 8, 3000, 0);
        a.record(Op::Receive, 8, 500, 1); // inside another call: not counted
        a.record(
            Op::Park {
                what: &"receive",
                label: &"",
            },
            0,
            700,
            1,
        );
        let mut t = RankProfile::default();
        t.record(
            Op::Collective {
                kind: &"barrier",
                algorithm: &"shm",
            },
            0,
            100,
            0,
        );
        let text = report(&[log(0, false, a), log(0, true, t)], 2_000_000, 0, 1);
        let row = |name: &str| {
            text.lines()
                .find(|l| l.split_whitespace().nth(1) == Some(name))
                .unwrap_or_else(|| panic!("{name}: {text}"))
                .split_whitespace()
                .skip(2)
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        assert_eq!(row("send")[..2], ["2", "16"]);
        assert_eq!(row("send")[4], "3.000", "max µs: {text}");
        assert_eq!(row("barrier")[0], "1");
        assert!(!text.contains(" receive "), "{text}");
        assert!(text.contains("1 ranks, 1 tasks"), "{text}");
        assert!(text.contains("rank 0 0.001 ms"), "{text}");
    }
}
