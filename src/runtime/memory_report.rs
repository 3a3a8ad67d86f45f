//! The memory report (`MYRIAD_REPORT_MEMORY=1`): where a job's memory went,
//! printed on stderr when the job ends.
//!
//! Design note: everything is read once, after the workers have been joined,
//! from state the runtime keeps anyway (mailboxes, the eager pool, the `Hls`
//! store), plus one figure recorded while the job runs: each rank's touched
//! stack, measured by the stack pool with `mincore` when the rank finishes
//! (`sched/stack.rs`). With the knob off nothing is recorded: the only cost
//! is one branch per finished rank.
//!
//! The output is lines of `key=value` fields after the prefix
//! `[myriad] memory` (the README's "Memory report" documents them); up to
//! [`PER_RANK_LINES`] ranks get one `rank=` line each, larger jobs a
//! `summary` line per owner (min / median / max and the ranks holding the
//! extremes). `rank_local!` values are counted (number and `size_of` bytes)
//! by the rank's table when created, and handed to the pool when the rank's
//! body returns, before they are destroyed. The `total` line adds up the per-rank figures and the shared
//! owners; its `accounted` field is their sum, next to the process's RSS.

use std::fmt::Write as _;

use crate::p2p::mailbox::{Mailbox, Posted, Unexpected};
use crate::runtime::config::AllocatorStatistics;
use crate::runtime::job::Job;
use crate::sched::stack::{Footprint, StackPool};

/// Prints the report of `job` (workers stopped) on stderr, with the
/// program's allocator figures if it gave a way to read them.
pub(crate) fn print(job: &Job, pool: &StackPool, allocator: Option<AllocatorStatistics>) {
    let footprints = pool.footprints().unwrap_or_default();
    let mut report = MemoryReport::collect(job, &footprints, pool.stack_size());
    report.allocator = allocator.map(|read| read());
    eprint!("{}", report.render());
}

/// Jobs of at most this many ranks get one line per rank.
pub(crate) const PER_RANK_LINES: usize = 64;

/// One rank's memory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct RankMemory {
    /// World rank.
    rank: u32,
    /// Stack bytes the rank touched (high-water mark).
    stack: usize,
    /// `rank_local!` values the rank created, and their inline bytes.
    locals: usize,
    locals_bytes: usize,
    /// The mailbox and its queues' capacity.
    mailbox: usize,
    /// Messages still unreceived when the job ended, and their data bytes.
    unexpected: usize,
    unexpected_bytes: usize,
}

/// Everything the report prints.
#[derive(Debug, Clone, Default)]
pub(crate) struct MemoryReport {
    ranks: Vec<RankMemory>,
    /// Usable bytes per stack (what each rank may touch).
    stack_size: usize,
    eager_buffers: usize,
    eager_bytes: usize,
    hls_values: usize,
    hls_bytes: usize,
    rss: Option<u64>,
    rss_peak: Option<u64>,
    /// This process and the job's process count, in a job of several.
    process: Option<(u32, u32)>,
    /// The program's allocator figures (`Runtime::allocator_statistics`).
    allocator: Option<Vec<(&'static str, u64)>>,
}

impl MemoryReport {
    /// Reads the report of `job`, whose workers have stopped; `footprints`
    /// are what each local rank touched and created (from the stack pool).
    pub(crate) fn collect(job: &Job, footprints: &[Footprint], stack_size: usize) -> MemoryReport {
        let p2p = job.p2p();
        let ranks = job
            .processes()
            .local_ranks()
            .zip(p2p.mailboxes.iter())
            .enumerate()
            .map(|(local, (world, mailbox))| {
                let (mailbox, unexpected, unexpected_bytes) = mailbox_memory(mailbox);
                let footprint = footprints.get(local).copied().unwrap_or_default();
                RankMemory {
                    rank: world.get(),
                    stack: footprint.stack,
                    locals: footprint.locals,
                    locals_bytes: footprint.locals_bytes,
                    mailbox,
                    unexpected,
                    unexpected_bytes,
                }
            })
            .collect();
        let (eager_buffers, eager_bytes) = p2p.eager.idle();
        let (hls_values, hls_bytes) = job.hls().footprint();
        let (rss, rss_peak) = process_rss();
        let processes = job.processes();
        let process = (processes.count() > 1).then(|| (processes.this().get(), processes.count()));
        MemoryReport {
            ranks,
            stack_size,
            eager_buffers,
            eager_bytes,
            hls_values,
            hls_bytes,
            rss,
            rss_peak,
            process,
            allocator: None,
        }
    }

    /// The report's lines.
    pub(crate) fn render(&self) -> String {
        let mut out = String::new();
        let opt = |v: Option<u64>| v.map_or("unknown".to_string(), |v| v.to_string());
        let _ = write!(
            out,
            "[myriad] memory ranks={} stack_size={} rss={} rss_peak={}",
            self.ranks.len(),
            self.stack_size,
            opt(self.rss),
            opt(self.rss_peak)
        );
        match self.process {
            Some((this, count)) => {
                let _ = writeln!(out, " process={this} processes={count}");
            }
            None => out.push('\n'),
        }
        if self.ranks.len() <= PER_RANK_LINES {
            for r in &self.ranks {
                let _ = writeln!(
                    out,
                    "[myriad] memory rank={} stack={} mailbox={} unexpected={} unexpected_bytes={} \
                     locals={} locals_bytes={}",
                    r.rank,
                    r.stack,
                    r.mailbox,
                    r.unexpected,
                    r.unexpected_bytes,
                    r.locals,
                    r.locals_bytes
                );
            }
        } else {
            let owners: [(&str, Field); 4] = [
                ("stack", |r| r.stack),
                ("mailbox", |r| r.mailbox),
                ("unexpected_bytes", |r| r.unexpected_bytes),
                ("locals_bytes", |r| r.locals_bytes),
            ];
            for (owner, field) in owners {
                let s = summarise(&self.ranks, field);
                let _ = writeln!(
                    out,
                    "[myriad] memory summary owner={owner} min={} median={} max={} min_rank={} max_rank={}",
                    s.min, s.median, s.max, s.min_rank, s.max_rank
                );
            }
        }
        let stack: usize = self.ranks.iter().map(|r| r.stack).sum();
        let mailbox: usize = self.ranks.iter().map(|r| r.mailbox).sum();
        let unexpected: usize = self.ranks.iter().map(|r| r.unexpected).sum();
        let unexpected_bytes: usize = self.ranks.iter().map(|r| r.unexpected_bytes).sum();
        let locals: usize = self.ranks.iter().map(|r| r.locals).sum();
        let locals_bytes: usize = self.ranks.iter().map(|r| r.locals_bytes).sum();
        let accounted =
            stack + mailbox + unexpected_bytes + locals_bytes + self.eager_bytes + self.hls_bytes;
        let _ = writeln!(
            out,
            "[myriad] memory total stack={stack} mailbox={mailbox} unexpected={unexpected} \
             unexpected_bytes={unexpected_bytes} locals={locals} locals_bytes={locals_bytes} \
             eager_buffers={} eager_bytes={} hls_values={} hls_bytes={} accounted={accounted} rss={}",
            self.eager_buffers,
            self.eager_bytes,
            self.hls_values,
            self.hls_bytes,
            opt(self.rss)
        );
        if let Some(figures) = &self.allocator {
            let fields: Vec<String> = figures
                .iter()
                .map(|(name, value)| format!("{}={value}", field_name(name)))
                .collect();
            let _ = writeln!(out, "[myriad] memory allocator {}", fields.join(" "));
        }
        out
    }
}

/// A name given by the program, made a field name: no spaces or `=`.
fn field_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_whitespace() || c == '=' {
                '_'
            } else {
                c
            }
        })
        .collect()
}

/// Reads one owner's figure of a rank.
type Field = fn(&RankMemory) -> usize;

/// Min / median / max of one owner over the ranks, and who holds the extremes.
#[derive(Debug, PartialEq, Eq)]
struct Summary {
    min: usize,
    median: usize,
    max: usize,
    min_rank: u32,
    max_rank: u32,
}

fn summarise(ranks: &[RankMemory], field: Field) -> Summary {
    let mut values: Vec<(usize, u32)> = ranks.iter().map(|r| (field(r), r.rank)).collect();
    values.sort_unstable();
    let (min, min_rank) = values.first().copied().unwrap_or_default();
    let (max, max_rank) = values.last().copied().unwrap_or_default();
    let median = values.get(values.len() / 2).map_or(0, |v| v.0);
    Summary {
        min,
        median,
        max,
        min_rank,
        max_rank,
    }
}

/// A mailbox's bytes (itself and its queues' capacity), and the unexpected
/// messages it still holds with their data bytes.
fn mailbox_memory(mailbox: &Mailbox) -> (usize, usize, usize) {
    let queues = mailbox.lock();
    let bytes = std::mem::size_of::<Mailbox>()
        + queues.posted.capacity() * std::mem::size_of::<Posted>()
        + queues.unexpected.capacity() * std::mem::size_of::<Unexpected>()
        + queues.probers.capacity() * std::mem::size_of::<u32>();
    let data = queues.unexpected.iter().map(Unexpected::bytes).sum();
    (bytes, queues.unexpected.len(), data)
}

/// The process's resident set and its peak (`VmRSS`, `VmHWM`), in bytes.
fn process_rss() -> (Option<u64>, Option<u64>) {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return (None, None);
    };
    let field = |name: &str| {
        status.lines().find_map(|line| {
            let kib = line.strip_prefix(name)?.trim().strip_suffix("kB")?;
            kib.trim().parse::<u64>().ok().map(|k| k * 1024)
        })
    };
    (field("VmRSS:"), field("VmHWM:"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(stacks: &[usize]) -> MemoryReport {
        MemoryReport {
            ranks: stacks
                .iter()
                .enumerate()
                .map(|(i, &stack)| RankMemory {
                    rank: i as u32,
                    stack,
                    mailbox: 100,
                    ..RankMemory::default()
                })
                .collect(),
            eager_bytes: 7,
            hls_bytes: 3,
            ..MemoryReport::default()
        }
    }

    #[test]
    fn small_jobs_get_a_line_per_rank_and_totals_add_up() {
        let text = report(&[4096, 8192]).render();
        assert!(text.contains("[myriad] memory rank=1 stack=8192 mailbox=100 "));
        assert!(text.contains(" stack=12288 mailbox=200 "));
        assert!(text.contains(&format!(" accounted={} ", 12288 + 200 + 7 + 3)));
    }

    #[test]
    fn large_jobs_are_summarised_with_their_extreme_ranks() {
        let mut stacks = vec![4096; PER_RANK_LINES + 1];
        stacks[5] = 1 << 20;
        stacks[9] = 0;
        let text = report(&stacks).render();
        assert!(!text.contains(" rank="), "{text}");
        assert!(text
            .contains("summary owner=stack min=0 median=4096 max=1048576 min_rank=9 max_rank=5"));
    }
}
