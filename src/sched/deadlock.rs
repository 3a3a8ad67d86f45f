//! Deadlock detection: when every rank waits and nothing can wake them.
//!
//! The sleep protocol (`idle`) tells the last worker to go idle that no
//! worker runs a rank. If, in addition, no rank waits for a timer, no thread
//! outside the scheduler can complete anything, no rank is left to start
//! and no wake-up waits in a worker's queues, then every live rank is
//! parked for good. [`check`] confirms it rank by
//! rank (a safety net against counting mistakes) and writes the report: for
//! each waiting rank, the operation, peer, tag, communicator and the user's
//! call site (`#[track_caller]`).
//!
//! A job of several processes counts its transport as an external waker
//! (a peer may still send), so the check above never runs there while a
//! peer is open. [`quiescent`] is the same check minus that waker: this
//! process is idle until a frame arrives. `p2p::remote`'s termination
//! wave asks it in every process and reports a deadlock once every process
//! is idle and no frame is in flight.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::Ordering;

use super::rank::{Life, WaitInfo, WaitOp};
use super::Scheduler;
use crate::identity::WorldRank;
use crate::{ANY_SOURCE, ANY_TAG};

/// At most this many ranks are listed one by one; the rest are summarised.
const LISTED: usize = 16;

/// [`check`], confirmed: `None` if a wake-up waits in a worker's queues
/// before or after the slots are read, if a worker stopped counting as a
/// sleeper meanwhile, or if an OS thread acting for a rank parked (and so
/// possibly woke someone) meanwhile.
///
/// The caller saw every worker counted asleep, but a worker counts from
/// its announcement on, also while its last look finds work and it is
/// about to cancel (`idle`): wake-ups handed to it to deliver itself
/// (`sched::unpark_on`) leave their slots parked until it drains them, so
/// the slots alone would read "blocked". Once its queues are empty it
/// cancels before it unparks them, and the sleepers read after the slots
/// tell.
pub(crate) fn check_stable(sched: &Scheduler) -> Option<String> {
    let epoch = sched.threads.epoch();
    if queued_wakes(sched) {
        return None;
    }
    let report = check(sched)?;
    (!queued_wakes(sched) && sched.sleep.all_asleep() && sched.threads.epoch() == epoch)
        .then_some(report)
}

/// Whether a wake-up waits in some worker's inbox or unpark list.
fn queued_wakes(sched: &Scheduler) -> bool {
    sched.workers.iter().any(|w| w.has_pending())
}

/// This process's report if it is idle apart from `wakers` external
/// wakers (the transport): every worker asleep, no timer, no micro-task,
/// no other external waker, and every live rank, task and OS thread acting
/// for a rank parked (confirmed as [`check_stable`] does). `whose` names
/// the ranks' owner in the report ("process 1"). Until a frame arrives
/// nothing in the process can change this.
pub(crate) fn quiescent(sched: &Scheduler, wakers: usize, whose: &str) -> Option<String> {
    if !idle(sched, wakers) {
        return None;
    }
    let epoch = sched.threads.epoch();
    let report = check_of(sched, whose)?;
    (idle(sched, wakers) && sched.threads.epoch() == epoch).then_some(report)
}

/// The cheap half of [`quiescent`] (a few loads, no rank visited):
/// every worker asleep, no timer, no micro-task, no external waker but
/// `wakers`, no wake-up queued for a worker (see [`check_stable`]).
/// `false` means the process is not idle now.
pub(crate) fn idle(sched: &Scheduler, wakers: usize) -> bool {
    !sched.is_aborting()
        && sched.sleep.all_asleep()
        && sched.timers.load(Ordering::SeqCst) == 0
        && sched.external.load(Ordering::SeqCst) == wakers
        && sched.micro.is_empty()
        && !queued_wakes(sched)
}

/// The deadlock report if every live rank of the job is parked, else `None`.
pub(crate) fn check(sched: &Scheduler) -> Option<String> {
    check_of(sched, "the job")
}

/// [`check`], naming the ranks' owner `whose`.
fn check_of(sched: &Scheduler, whose: &str) -> Option<String> {
    let slots = &sched.slots;
    let mut waiting: Vec<Waiting> = Vec::new();
    for slot in slots.rank_slots() {
        match slot.life() {
            Life::NotStarted => return None,
            Life::Finished => {}
            Life::Running => {
                if !slot.park.is_parked() {
                    return None;
                }
                waiting.push(Waiting {
                    rank: slot.rank(),
                    party: Party::Rank,
                    info: slot.wait(),
                });
            }
        }
    }
    let ranks_waiting = waiting.len();
    for (_, slot) in slots.task_slots() {
        if !slot.park.is_parked() {
            return None;
        }
        let party = if slot.home().0 == super::thread::HOME {
            Party::Thread
        } else {
            Party::Task
        };
        waiting.push(Waiting {
            rank: slot.rank(),
            party,
            info: slot.wait(),
        });
    }
    if waiting.is_empty() {
        return None;
    }
    Some(report(sched, &waiting, ranks_waiting, whose))
}

/// Who waits for a rank.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Party {
    /// The rank itself.
    Rank,
    /// A task running an immediate operation of the rank.
    Task,
    /// An OS thread calling MPI as the rank.
    Thread,
}

/// A parked party: a rank, or a task or thread acting for it.
struct Waiting {
    rank: WorldRank,
    party: Party,
    info: Option<WaitInfo>,
}

impl Waiting {
    fn who(&self) -> String {
        match self.party {
            Party::Rank => format!("rank {}", self.rank),
            Party::Task => format!("rank {} (immediate operation)", self.rank),
            Party::Thread => format!("rank {} (an OS thread of it)", self.rank),
        }
    }
}

fn report(sched: &Scheduler, waiting: &[Waiting], ranks_waiting: usize, whose: &str) -> String {
    let finished = sched.slots.ranks() - ranks_waiting;
    let mut out = format!(
        "all {ranks_waiting} live ranks of {whose} are blocked and nothing can wake them ({finished} ranks finished):"
    );
    for w in waiting.iter().take(LISTED) {
        let _ = write!(out, "\n  {}: {}", w.who(), describe(sched, w.info.as_ref()));
    }
    if waiting.len() > LISTED {
        // Group the rest by what they wait for, most common first.
        let mut groups: BTreeMap<String, (usize, WorldRank)> = BTreeMap::new();
        for w in &waiting[LISTED..] {
            let entry = groups
                .entry(describe(sched, w.info.as_ref()))
                .or_insert((0, w.rank));
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

fn describe(sched: &Scheduler, info: Option<&WaitInfo>) -> String {
    let Some(info) = info else {
        return "parked (no operation recorded)".to_string();
    };
    if info.op == WaitOp::RmaLock {
        return describe_lock(info);
    }
    let mut s = match info.label {
        Some(label) => format!("{label} ({})", info.op.describe()),
        None => info.op.describe().to_string(),
    };
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
    if info.comm != u64::MAX {
        let _ = write!(s, ", on communicator {}", sched.comm_name(info.comm));
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

/// An RMA lock wait: "exclusive lock on rank 1 of window 3, held by rank
/// 0" (fields as `WaitOp::RmaLock` documents them).
fn describe_lock(info: &WaitInfo) -> String {
    let label = info.label.map_or("lock", |l| *l);
    let holder = match info.tag {
        q if q >= 0 => format!("held by rank {q}"),
        n => format!("held by {} ranks (shared)", -(n as i64)),
    };
    format!(
        "{label} on rank {} of window {}, {holder} ({}), at {}:{}:{}",
        info.peer,
        info.comm,
        info.op.describe(),
        info.site.file(),
        info.site.line(),
        info.site.column()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::Threading;
    use std::panic::Location;

    /// The report names the world ranks the parked slots act for, not their
    /// local indices (slot ids).
    #[test]
    fn the_report_names_world_ranks() {
        // A process hosting world ranks 5 and 6 at local indices 0 and 1.
        let ranks = (5..7).map(WorldRank::new);
        let sched = Scheduler::new(ranks, Box::new([]), Threading::Single, |c| c.to_string());
        let site = Location::caller();
        for id in 0..2 {
            let slot = sched.slots.get(id);
            slot.set_home(0, id as usize);
            slot.set_wait(&WaitInfo::simple(WaitOp::Barrier, site));
            assert!(slot.park.try_park());
        }
        let report = check(&sched).expect("every rank is parked");
        assert!(
            report.contains("\n  rank 5: barrier") && report.contains("\n  rank 6: barrier"),
            "{report}"
        );
    }

    /// A scheduler of two workers whose ranks (world ranks 0 and 1) started
    /// one on each worker and parked.
    fn two_parked_ranks_on_two_workers() -> Scheduler {
        let workers = (0..2)
            .map(|_| {
                super::super::worker::WorkerShared::new(
                    crossbeam_deque::Worker::<u32>::new_fifo().stealer(),
                )
            })
            .collect();
        let ranks = (0..2).map(WorldRank::new);
        let sched = Scheduler::new(ranks, workers, Threading::Single, |c| c.to_string());
        let site = Location::caller();
        for id in 0..2 {
            let slot = sched.slots.get(id);
            slot.set_home(id as usize, 0);
            slot.set_wait(&WaitInfo::simple(WaitOp::Collective, site));
            assert!(slot.park.try_park());
        }
        sched
    }

    /// A worker counts among the sleepers from its announcement on, also
    /// when its last look then finds work and it is about to cancel. The
    /// work `Round::wake_all` hands it (`unpark_on`) is a list of slots
    /// that stay parked until the worker unparks them itself, so while
    /// they wait in its queue the job is not deadlocked, though every
    /// worker is counted asleep and every slot reads parked: the false
    /// report of `malleable_cg` 160 -> 20 (all of one worker's ranks
    /// "blocked" in the all-reduce the other worker's ranks had left).
    #[test]
    fn no_report_while_a_worker_has_wake_ups_queued() {
        let sched = two_parked_ranks_on_two_workers();
        // Worker 0 (its rank completed a collective) hands worker 1 the
        // wake-up of rank 1; worker 1 is awake, nothing to claim.
        super::super::worker::unpark_on(&sched, 1, &[1]);
        // Worker 1 announces sleep (its last look will find the wake-up);
        // before it cancels, worker 0, whose rank parked again, announces
        // and is the last sleeper.
        let one = sched.sleep.announce(1);
        let zero = sched.sleep.announce(0);
        assert_eq!(zero.sleepers, 2);
        assert_eq!(check_stable(&sched), None, "a false deadlock report");
        sched.sleep.cancel(zero);
        sched.sleep.cancel(one);

        // Without the queued wake-up the same state is a deadlock.
        let sched = two_parked_ranks_on_two_workers();
        let one = sched.sleep.announce(1);
        let zero = sched.sleep.announce(0);
        let report = check_stable(&sched).expect("every rank is parked for good");
        assert!(report.contains("all 2 live ranks"), "{report}");
        sched.sleep.cancel(zero);
        sched.sleep.cancel(one);
    }

    /// A collective's wait reads as it did when the report looked its name
    /// up itself: `<name> (collective), on communicator <name>, at <site>`.
    #[test]
    fn a_labelled_wait_names_its_collective_and_communicator() {
        let sched = Scheduler::new(
            std::iter::once(WorldRank::new(0)),
            Box::new([]),
            Threading::Single,
            |c| format!("comm#{c}"),
        );
        let site = Location::caller();
        let info = WaitInfo {
            op: WaitOp::Collective,
            label: Some(&"all_reduce"),
            peer: WaitInfo::NO_PEER,
            tag: WaitInfo::NO_TAG,
            comm: 7,
            site,
        };
        assert_eq!(
            describe(&sched, Some(&info)),
            format!(
                "all_reduce (collective), on communicator comm#7, at {}:{}:{}",
                site.file(),
                site.line(),
                site.column()
            )
        );
        let info = WaitInfo {
            op: WaitOp::Receive,
            peer: 3,
            tag: 5,
            ..WaitInfo::simple(WaitOp::Receive, site)
        };
        assert!(describe(&sched, Some(&info)).starts_with("receive from rank 3, tag 5, at "));
        // RMA lock waits: the target, the window, the holder(s).
        let info = WaitInfo {
            op: WaitOp::RmaLock,
            label: Some(&"exclusive lock"),
            peer: 1,
            tag: 0,
            comm: 3,
            site,
        };
        assert!(describe(&sched, Some(&info))
            .starts_with("exclusive lock on rank 1 of window 3, held by rank 0 (RMA lock), at "));
        let info = WaitInfo { tag: -2, ..info };
        assert!(describe(&sched, Some(&info)).contains("held by 2 ranks (shared)"));
    }
}
