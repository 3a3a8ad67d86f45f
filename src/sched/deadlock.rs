//! Deadlock detection: when every rank waits and nothing can wake them.
//!
//! The sleep protocol (`idle`) tells the last worker to go idle that no
//! worker runs a rank. If, in addition, no rank waits for a timer, no thread
//! outside the scheduler can complete anything and no rank is left to start,
//! then every live rank is parked for good. [`check`] confirms it rank by
//! rank (a safety net against counting mistakes) and writes the report: for
//! each waiting rank, the operation, peer, tag, communicator and the user's
//! call site (`#[track_caller]`).

use std::collections::BTreeMap;
use std::fmt::Write;

use super::rank::{Life, WaitInfo, WaitOp};
use crate::runtime::job::Job;
use crate::{ANY_SOURCE, ANY_TAG};

/// At most this many ranks are listed one by one; the rest are summarised.
const LISTED: usize = 16;

/// The deadlock report if every live rank of `job` is parked, else `None`.
pub(crate) fn check(job: &Job) -> Option<String> {
    let mut waiting: Vec<(u32, Option<WaitInfo>)> = Vec::new();
    for (rank, slot) in job.sched.ranks.iter().enumerate() {
        match slot.life() {
            Life::NotStarted => return None,
            Life::Finished => {}
            Life::Running => {
                if !slot.park.is_parked() {
                    return None;
                }
                waiting.push((rank as u32, slot.wait()));
            }
        }
    }
    if waiting.is_empty() {
        return None;
    }
    Some(report(job, &waiting))
}

fn report(job: &Job, waiting: &[(u32, Option<WaitInfo>)]) -> String {
    let finished = job.sched.ranks.len() - waiting.len();
    let mut out = format!(
        "all {} live ranks of the job are blocked and nothing can wake them ({} ranks finished):",
        waiting.len(),
        finished
    );
    for (rank, info) in waiting.iter().take(LISTED) {
        let _ = write!(out, "\n  rank {rank}: {}", describe(job, info.as_ref()));
    }
    if waiting.len() > LISTED {
        // Group the rest by what they wait for, most common first.
        let mut groups: BTreeMap<String, (usize, u32)> = BTreeMap::new();
        for (rank, info) in &waiting[LISTED..] {
            let entry = groups
                .entry(describe(job, info.as_ref()))
                .or_insert((0, *rank));
            entry.0 += 1;
        }
        let mut groups: Vec<_> = groups.into_iter().collect();
        groups.sort_by_key(|group| std::cmp::Reverse(group.1 .0));
        let _ = write!(out, "\n  ... and {} more:", waiting.len() - LISTED);
        for (what, (count, first)) in groups {
            let _ = write!(out, "\n  {count} ranks (first: rank {first}): {what}");
        }
    }
    out
}

fn describe(job: &Job, info: Option<&WaitInfo>) -> String {
    let Some(info) = info else {
        return "parked (no operation recorded)".to_string();
    };
    let mut s = info.op.describe().to_string();
    if info.peer != WaitInfo::NO_PEER {
        let peer = if info.peer == ANY_SOURCE {
            "any source".to_string()
        } else {
            format!("rank {}", info.peer)
        };
        let dir = match info.op {
            WaitOp::Send | WaitOp::SynchronousSend => "to",
            _ => "from",
        };
        let _ = write!(s, " {dir} {peer}");
    }
    if info.tag != WaitInfo::NO_TAG {
        if info.tag == ANY_TAG {
            s.push_str(", any tag");
        } else {
            let _ = write!(s, ", tag {}", info.tag);
        }
    }
    if info.comm != u32::MAX {
        let _ = write!(s, ", on communicator {}", job.comm_name(info.comm));
    }
    let _ = write!(
        s,
        ", at {}:{}:{}",
        info.site.file(),
        info.site.line(),
        info.site.column()
    );
    s
}
