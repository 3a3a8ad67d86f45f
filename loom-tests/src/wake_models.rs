//! A model of a collective's wake-up crossing workers, end to end: a rank
//! waits in a round (`Round::wait`: register on its worker's waiter list,
//! re-check, park), the last arrival, on the other worker, wakes it through
//! that worker (`Round::wake_all` handing the list to `sched::unpark_on`),
//! and both workers go to sleep and wake as the worker loop does
//! (`sched::idle`'s announce, last look, claim and cancel), the last one to
//! sleep running the deadlock check (`sched::deadlock::check_stable`).
//!
//! The park states and the sleep announcements are the runtime's own
//! (`ParkState`, `Sleep`, `SpinLock`); the worker loop, the queues and the
//! check are written out here, step for step (they live in modules loom
//! cannot compile: `worker.rs`, `deadlock.rs`). Each worker is a loom
//! thread that runs its rank inline (a rank is a coroutine on its worker's
//! thread), and parks the thread when it sleeps: a lost wake-up leaves
//! both threads parked, which loom reports.
//!
//! The scenario: rank A (worker 1) waits for round 1; rank B (worker 0) is
//! its last arrival, hands A's wake-up to worker 1, then waits for round 2;
//! A, once woken, arrives last at round 2 and wakes B directly (a requeue
//! through worker 0's inbox). The job is never deadlocked, so the check
//! must never report; the check without the queues (what it was before)
//! does, in the window in which worker 1 announced sleep and its last look
//! found A's wake-up but it has not cancelled yet.

use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;

use crate::idle::Sleep;
use crate::park::ParkState;
use crate::sync::spin::SpinLock;

/// The slots: rank A on worker 1, rank B on worker 0.
const A: usize = 0;
const B: usize = 1;

/// What the two workers share.
struct Job {
    sleep: Sleep,
    park: [ParkState; 2],
    /// Per worker: slots to unpark itself (`WorkerShared::unparks`), and
    /// slots already unparked, to run (`WorkerShared::inbox`).
    unparks: [SpinLock<Vec<usize>>; 2],
    inbox: [SpinLock<Vec<usize>>; 2],
    /// Per worker: entries of both lists (`WorkerShared::pending`).
    pending: [AtomicUsize; 2],
    /// Round 1's waiters on worker 1 (`OnWorker::waiters`).
    waiters: SpinLock<Vec<usize>>,
    /// Round 1 and round 2 complete (`Round::root_ready`).
    ready: [AtomicBool; 2],
    /// Ranks not through (`Scheduler::live`), and which (by slot: the
    /// slot's `Life::Finished`).
    live: AtomicUsize,
    through: [AtomicBool; 2],
    /// The job failed: the check reported (`Scheduler::aborting`).
    reported: AtomicBool,
    /// The check reads the workers' queues (the fix).
    fixed: bool,
    /// Each worker's thread, set by itself before it first announces
    /// sleep: a waker that claims the announcement finds it set.
    threads: [std::sync::OnceLock<thread::Thread>; 2],
}

impl Job {
    fn new(fixed: bool) -> Job {
        Job {
            sleep: Sleep::new(2),
            park: [ParkState::new(), ParkState::new()],
            unparks: [SpinLock::new(Vec::new()), SpinLock::new(Vec::new())],
            inbox: [SpinLock::new(Vec::new()), SpinLock::new(Vec::new())],
            pending: [AtomicUsize::new(0), AtomicUsize::new(0)],
            waiters: SpinLock::new(Vec::new()),
            ready: [AtomicBool::new(false), AtomicBool::new(false)],
            live: AtomicUsize::new(2),
            through: [AtomicBool::new(false), AtomicBool::new(false)],
            reported: AtomicBool::new(false),
            fixed,
            threads: [std::sync::OnceLock::new(), std::sync::OnceLock::new()],
        }
    }

    /// Wakes `worker` if it announced sleep (`Sleep::claim`).
    fn claim(&self, worker: usize) {
        if self.sleep.claim(worker) {
            self.threads[worker]
                .get()
                .expect("set before the announcement")
                .unpark();
        }
    }

    /// `Scheduler::wake_all`: the job ended or failed.
    fn wake_all(&self) {
        (0..2).for_each(|w| self.claim(w));
    }

    /// `worker::post`: append, count pending, wake the worker if it sleeps.
    fn post(&self, worker: usize, list: &SpinLock<Vec<usize>>, slot: usize) {
        list.lock().push(slot);
        self.pending[worker].fetch_add(1, Ordering::SeqCst);
        self.claim(worker);
    }

    /// `deadlock::check_stable` as the last worker to sleep calls it:
    /// `true` if it reports.
    fn check(&self) -> bool {
        let queued = || self.pending.iter().any(|p| p.load(Ordering::SeqCst) > 0);
        if self.fixed && queued() {
            return false;
        }
        // `deadlock::check`: every live rank parked.
        if (0..2)
            .any(|slot| !self.through[slot].load(Ordering::Acquire) && !self.park[slot].is_parked())
        {
            return false;
        }
        !self.fixed || (!queued() && self.sleep.all_asleep())
    }
}

/// A rank as its worker runs it: `true` once it is through, `false` when
/// it parked (suspended until its worker resumes it).
type Rank = fn(&Job) -> bool;

/// Rank A on worker 1: waits for round 1 (`Round::wait`: register, look
/// again, park; resumed, it starts over), then arrives last at round 2 and
/// wakes B, on worker 0, directly (`sched::unpark`: a requeue through
/// worker 0's inbox).
fn rank_a(job: &Job) -> bool {
    loop {
        if job.ready[0].load(Ordering::Acquire) {
            break;
        }
        job.waiters.lock().push(A);
        if job.ready[0].load(Ordering::Acquire) {
            break;
        }
        if job.park[A].try_park() {
            return false;
        }
    }
    job.ready[1].store(true, Ordering::Release);
    if job.park[B].unpark() {
        job.post(0, &job.inbox[0], B);
    }
    true
}

/// Rank B on worker 0: the last arrival of round 1, it wakes round 1's
/// waiters of worker 1 through that worker (`Round::wake_all` with more
/// than `DIRECT_WAKES` of them: `sched::unpark_on`), then waits for round 2.
fn rank_b(job: &Job) -> bool {
    if !job.ready[0].load(Ordering::Relaxed) {
        job.ready[0].store(true, Ordering::Release);
        let waiters = std::mem::take(&mut *job.waiters.lock());
        for slot in waiters {
            job.post(1, &job.unparks[1], slot);
        }
    }
    while !job.ready[1].load(Ordering::Acquire) {
        if job.park[B].try_park() {
            return false;
        }
    }
    true
}

/// A worker's loop (`Worker::run_loop`, `drain_inbox`, `finish`, `sleep`)
/// with one rank, which starts runnable.
fn worker(job: &Job, me: usize, rank: Rank) {
    let _ = job.threads[me].set(thread::current());
    let mut runnable = true;
    loop {
        if job.reported.load(Ordering::SeqCst) {
            return; // the job failed
        }
        if job.pending[me].load(Ordering::SeqCst) > 0 {
            let inbox = std::mem::take(&mut *job.inbox[me].lock());
            job.pending[me].fetch_sub(inbox.len(), Ordering::SeqCst);
            runnable |= !inbox.is_empty();
            let unparks = std::mem::take(&mut *job.unparks[me].lock());
            job.pending[me].fetch_sub(unparks.len(), Ordering::SeqCst);
            for slot in unparks {
                // `unpark_many` on the slot's own worker: a local requeue.
                runnable |= job.park[slot].unpark();
            }
        }
        if runnable {
            runnable = false;
            // Worker 1 runs A (slot 0), worker 0 runs B (slot 1).
            if rank(job) {
                job.through[1 - me].store(true, Ordering::Release);
                if job.live.fetch_sub(1, Ordering::SeqCst) == 1 {
                    job.wake_all();
                }
            }
            continue;
        }
        if job.live.load(Ordering::SeqCst) == 0 {
            return; // the job ended
        }
        let announcement = job.sleep.announce(me);
        // The last look (`Worker::has_work`).
        if job.pending[me].load(Ordering::SeqCst) > 0
            || job.live.load(Ordering::SeqCst) == 0
            || job.reported.load(Ordering::SeqCst)
        {
            job.sleep.cancel(announcement);
            continue;
        }
        if announcement.sleepers == 2 && job.check() {
            job.sleep.cancel(announcement);
            job.reported.store(true, Ordering::SeqCst);
            job.wake_all();
            return;
        }
        thread::park();
        job.sleep.cancel(announcement);
    }
}

fn wake_model(fixed: bool) {
    let mut builder = loom::model::Builder::new();
    // Three preemptions unless `LOOM_MAX_PREEMPTIONS` says otherwise (the
    // false report needs one: worker 1 between its last look and its
    // cancel).
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(3);
    }
    builder.check(move || {
        let job = Arc::new(Job::new(fixed));
        let spawn = |me: usize, rank: Rank| {
            let job = job.clone();
            thread::spawn(move || worker(&job, me, rank))
        };
        let one = spawn(1, rank_a);
        let zero = spawn(0, rank_b);
        one.join().unwrap();
        zero.join().unwrap();
        assert!(
            !job.reported.load(Ordering::SeqCst),
            "a false deadlock report"
        );
        assert!(job.ready[1].load(Ordering::SeqCst), "both rounds complete");
    });
}

/// The check reads the workers' queued wake-ups before and after the
/// slots, and the sleepers after: no false report, no lost wake-up.
#[test]
fn a_wake_up_handed_to_a_worker_is_never_lost_nor_reported_as_a_deadlock() {
    wake_model(true);
}

/// Without the queues, the check reports the rank whose wake-up waits in
/// worker 1's unpark list as deadlocked (the model catches it).
#[test]
#[should_panic(expected = "a false deadlock report")]
fn the_model_catches_a_check_that_ignores_queued_wake_ups() {
    wake_model(false);
}
