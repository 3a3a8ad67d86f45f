//! The worker loop: one kernel thread that runs ranks.
//!
//! A worker owns the coroutines of the ranks it started and runs, in order
//! of preference:
//!
//! 1. the rank the running rank woke last on this worker (`next`), then
//!    ranks woken from other threads through its inbox, then its local run
//!    queue (ranks woken in batches by ranks of the same worker, and at its
//!    front those it unparked for other threads); after [`HANDOFFS`] ranks
//!    in a row from the first two, the queue's head gets a turn;
//! 2. ranks whose `sleep` timer expired;
//! 3. a rank that has not started yet: from its own deque, else from its
//!    queue of spawned ranks (`Scheduler::spawn_ranks` deals them round
//!    the workers; nobody else takes them), else stolen from another
//!    worker's deque (crossbeam-deque), only as many as even the two
//!    workers' ranks (`WorkerShared::spare_for`);
//!
//! and otherwise spins briefly, then announces sleep and parks (`idle`).
//! Before that, a rank about to park while its worker has nothing else to
//! run spins on its own park state for a moment ([`spin_before_park`]), so
//! that a reply from a rank of another worker reaches it without a requeue.
//!
//! ## Ending a job
//!
//! A job ends when its last rank finishes or when it fails (a rank panics, a
//! deadlock is found). On failure:
//!
//! 1. every worker stops resuming ranks, then all workers meet at a barrier:
//!    no rank code runs any more, and no rank is half-way through copying
//!    into another rank's buffer (a claimer copies and completes without
//!    suspending, so a claim made before the abort is finished by then);
//! 2. each worker drops its suspended coroutines, which unwinds their
//!    stacks, **tasks before ranks**. A task (an immediate collective) acts
//!    for a rank of the same worker: its posted receives and rendezvous
//!    sends point into that rank's buffers, and only its own unwinding
//!    withdraws them (or waits for the claimer copying right now). Unwound
//!    first, the rank would free those buffers while they are still
//!    reachable from a mailbox. Tasks not started yet are dropped first too.
//!
//! Destructors that run during the unwinding may call MPI (a guard flushing
//! a last message). Once the job aborts no party claims a descriptor that
//! points into another party's memory (`p2p::claim`): such calls go on as
//! if the peer had not come yet (and fail where they would wait), and a
//! descriptor leaves its mailbox only by its owner's withdrawal. Workers unwind in parallel; what one worker's unwinding frees
//! is reachable from another worker only through such descriptors.

use std::cell::{Cell, RefCell};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::panic::{self, AssertUnwindSafe};
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, OnceLock};
use std::thread::Thread;
use std::time::Instant;

use corosensei::{Coroutine, CoroutineResult, Yielder};
use crossbeam_deque::{Injector, Steal, Stealer, Worker as Deque};

use super::deadlock;
use super::guard::AltStack;
use super::locals::RankLocals;
use super::rank::{self, RankCtx, Suspend};
use super::stack::{PooledStack, StackPool};
use super::task::Spawn;
use super::{Host, Scheduler};
use crate::error::{Error, ResourceError};
use crate::identity::{LocalIndex, WorldRank};
use crate::sync::spin::SpinLock;
use crate::trace::Tracer;

/// What a rank runs: the job's body, called with the rank's world rank and
/// local index. The layer that owns the job builds it (it makes the rank's
/// `Universe`, keeps its result): the scheduler knows nothing of either.
pub(crate) type Body<'a> = dyn Fn(WorldRank, LocalIndex) + Sync + 'a;

/// The part of a worker other threads touch. Aligned to 128 bytes (two
/// cache lines, what adjacent-line prefetch pairs): a worker bumps its
/// `hosted` at every rank start and polls its `pending` in every loop,
/// which must not share a line with the neighbouring worker's.
#[derive(Debug)]
#[repr(align(128))]
pub(crate) struct WorkerShared {
    /// Ranks woken by other threads. A spin lock: it is held for a push or
    /// a drain, and its release is a plain store, not an RMW.
    inbox: SpinLock<Vec<u32>>,
    /// Slots another thread asks this worker to unpark (`unpark_on`).
    unparks: SpinLock<Vec<u32>>,
    /// Entries of `inbox` and `unparks`.
    pending: AtomicUsize,
    stealer: Stealer<u32>,
    /// Ranks spawned while the job runs, dealt to this worker and not
    /// started yet (by local index; any thread may push, unlike the deque).
    ///
    /// Only this worker takes them, one at a time (none reach its deque,
    /// where others steal): a started rank stays on its worker for good,
    /// and whoever is idle when a job grows is not who should run half of
    /// it. A worker busy with ranks of its own starts them a little later
    /// instead (a probe: 20 parents busy 100 µs each after
    /// spawning 140: 0:140 or 2:138 per worker taking from one shared
    /// queue, 27:113 to 38:102 with thieves taking half once the owner
    /// took some, 70:70 now).
    pub(crate) spawned: Injector<u32>,
    thread: OnceLock<Thread>,
    /// Ranks this worker started.
    pub(crate) hosted: AtomicUsize,
    /// Of those, ranks that ended (written by this worker only).
    ended: AtomicUsize,
}

impl WorkerShared {
    /// How many of `self`'s unstarted ranks `thief` may take: half the
    /// difference between the two workers' ranks, running (started, not
    /// ended) or waiting to start, so that a theft evens them and never
    /// tips them the other way.
    ///
    /// A started rank stays on its worker for good, so the counts at the
    /// end of the start are those of every later call: a collective waits
    /// for the worker with the most ranks. Stealing half of a slower
    /// worker's queue instead, as first written, left 1,024 ranks on 2
    /// workers at 768:256, 735:289, 642:382, 612:412 or 591:433 in 5 runs
    /// of 8 (the first worker up starts ranks while the other still wakes,
    /// or takes page faults). A worker that started its share waits for
    /// the others to start theirs rather than take them; one whose ranks
    /// ended (a job of short ranks that never wait for each other) takes
    /// from the others. The rule covers the two cases stealing made
    /// exceptions for: a worker's last unstarted rank (small jobs keep
    /// their placement), and a worker that has started none (its thread
    /// still waking from the start barrier: 255:1 at 256 ranks, load 4).
    fn spare_for(&self, thief: &WorkerShared) -> usize {
        let theirs = self.running() + self.stealer.len();
        let mine = thief.running() + thief.stealer.len();
        theirs.saturating_sub(mine) / 2
    }

    /// Ranks started here and not ended (as of two relaxed loads: a guide
    /// for stealing, off by the ranks starting or ending meanwhile).
    fn running(&self) -> usize {
        let ended = self.ended.load(Ordering::Relaxed);
        self.hosted.load(Ordering::Relaxed).saturating_sub(ended)
    }

    pub(crate) fn new(stealer: Stealer<u32>) -> WorkerShared {
        WorkerShared {
            inbox: SpinLock::new(Vec::new()),
            unparks: SpinLock::new(Vec::new()),
            pending: AtomicUsize::new(0),
            stealer,
            spawned: Injector::new(),
            thread: OnceLock::new(),
            hosted: AtomicUsize::new(0),
            ended: AtomicUsize::new(0),
        }
    }

    /// Whether wake-ups wait in this worker's inbox or unpark list (a
    /// `SeqCst` load, as the deadlock check's other reads). The slots of
    /// its unpark list are still parked until it drains them.
    pub(crate) fn has_pending(&self) -> bool {
        self.pending.load(Ordering::SeqCst) > 0
    }

    pub(crate) fn unpark(&self) {
        if let Some(thread) = self.thread.get() {
            thread.unpark();
        }
    }
}

/// The part of a worker only its own thread (and the ranks it runs) touch.
struct WorkerLocal {
    /// The scheduler of the worker's job (identifies it).
    sched: *const Scheduler,
    index: usize,
    ready: RefCell<VecDeque<u32>>,
    /// The rank the running rank woke last on this worker: it runs before
    /// the run queue (Go's `runnext`, see [`schedule`]).
    next: Cell<Option<u32>>,
    /// Ranks woken by other threads (drained from the inbox): they run
    /// before the queue, after `next`.
    woken: RefCell<VecDeque<u32>>,
    /// Ranks run from `next` or `woken` in a row (bounded by [`HANDOFFS`]).
    handoffs: Cell<u32>,
    timers: RefCell<BinaryHeap<Reverse<(Instant, u32)>>>,
    /// A rank yielded since the last look at unstarted ranks.
    yielded: Cell<bool>,
    /// Ranks that yielded until the worker has nothing else to run
    /// (`Suspend::WhenIdle`): they run after every other rank.
    idle: RefCell<VecDeque<u32>>,
    /// Tasks spawned by ranks of this worker, not started yet.
    spawned: RefCell<Vec<Spawn>>,
    /// A rank about to park may spin first ([`spin_before_park`]): the
    /// job's workers have a CPU each ([`spin_while_busy`]), or (one
    /// worker) the job has a transport, which the spin then polls.
    spin_in_rank: bool,
    /// Idle workers may take a share of a rank's work ([`spin_while_busy`]:
    /// several workers, each with a CPU of its own).
    helped: bool,
    /// The job, whose transport a spinning rank polls, when it has one.
    polls: Option<*const dyn Host>,
}

/// Ranks run in a row from `WorkerLocal::next` and `woken` before the head
/// of the run queue gets its turn: two ranks that keep waking each other
/// must not starve the others of their worker (one of those may be what
/// they wait for, through a flag they poll).
const HANDOFFS: u32 = 64;

impl WorkerLocal {
    /// Worker `index` of `sched` with empty queues, neither spinning in its
    /// ranks nor helped, polling no transport.
    fn new(sched: *const Scheduler, index: usize) -> WorkerLocal {
        WorkerLocal {
            sched,
            index,
            ready: RefCell::new(VecDeque::new()),
            next: Cell::new(None),
            woken: RefCell::new(VecDeque::new()),
            handoffs: Cell::new(0),
            timers: RefCell::new(BinaryHeap::new()),
            yielded: Cell::new(false),
            idle: RefCell::new(VecDeque::new()),
            spawned: RefCell::new(Vec::new()),
            spin_in_rank: false,
            helped: false,
            polls: None,
        }
    }

    /// Makes `task` the next to run; a previous one goes to the back of the
    /// queue. `#[inline]`: it is the whole requeue of a same-worker wake-up.
    #[inline]
    fn hand_off(&self, task: u32) {
        if let Some(previous) = self.next.replace(Some(task)) {
            self.ready.borrow_mut().push_back(previous);
        }
    }

    /// The next rank to run: the hand-off, else one woken by another thread,
    /// else the head of the queue. After [`HANDOFFS`] from the first two in a
    /// row, the queue's head runs once. The woken ones keep their place: a
    /// batch of them (the readers of a broadcast) behind the queue would
    /// wait for all of it, and each of them runs once per wake-up, so they
    /// cannot keep the queue waiting longer than a chain of hand-offs can.
    fn pop_ready(&self) -> Option<u32> {
        if self.handoffs.get() >= HANDOFFS {
            self.handoffs.set(0);
            if let Some(task) = self.ready.borrow_mut().pop_front() {
                return Some(task);
            }
        }
        let first = self
            .next
            .take()
            .or_else(|| self.woken.borrow_mut().pop_front());
        match first {
            Some(task) => {
                self.handoffs.set(self.handoffs.get() + 1);
                Some(task)
            }
            None => {
                self.handoffs.set(0);
                self.ready.borrow_mut().pop_front()
            }
        }
    }

    /// The rank the rank that just parked handed the worker to, if the
    /// bound of [`HANDOFFS`] in a row allows (else [`pop_ready`] gives the
    /// queue its turn).
    ///
    /// [`pop_ready`]: Self::pop_ready
    #[inline]
    fn take_hand_off(&self) -> Option<u32> {
        let handoffs = self.handoffs.get();
        if handoffs >= HANDOFFS {
            return None;
        }
        let task = self.next.take()?;
        self.handoffs.set(handoffs + 1);
        Some(task)
    }

    /// The head of the run queue, for the resume loop
    /// (`Worker::run_hand_offs`) when [`pop_ready`](Self::pop_ready) would
    /// return it too and the run loop has nothing to do first: no
    /// hand-off pending, no rank woken by another thread, no timer armed.
    #[inline]
    fn take_queued(&self) -> Option<u32> {
        if self.next.get().is_some()
            || !self.woken.borrow().is_empty()
            || !self.timers.borrow().is_empty()
        {
            return None;
        }
        self.handoffs.set(0);
        self.ready.borrow_mut().pop_front()
    }

    /// Whether this worker has something to do besides the running rank:
    /// queued or woken ranks, timers, spawned tasks or micro-tasks, ranks
    /// not started yet, or the job aborts. Loads of lines that change
    /// rarely (its own inbox count, the job's counters).
    fn has_other_work(&self, sched: &Scheduler) -> bool {
        self.has_ready()
            || sched.workers[self.index].pending.load(Ordering::Relaxed) > 0
            || !self.timers.borrow().is_empty()
            || !self.spawned.borrow().is_empty()
            || !sched.micro.is_empty()
            || sched.unstarted.load(Ordering::Relaxed) > 0
            || sched.is_aborting()
    }

    /// Whether ranks of this worker spawned tasks not started yet, for the
    /// hand-off loop (`Worker::run_hand_offs`), between two resumes: the
    /// vector's length, without the `RefCell`'s borrow (a check and an
    /// update of its flag, ~4 instructions a hand-off, callgrind).
    #[inline]
    fn has_spawned(&self) -> bool {
        // SAFETY: only this worker's thread touches `spawned`, and no
        // borrow of it is alive between two resumes: its borrows
        // (`push_spawn`, the run loop's take) end within their statements,
        // and no rank runs while the worker loop does.
        unsafe { !(*self.spawned.as_ptr()).is_empty() }
    }

    /// Whether a rank is queued to run (those waiting for idle time
    /// included: a rank about to park lets them run instead of spinning).
    fn has_ready(&self) -> bool {
        self.next.get().is_some()
            || !self.woken.borrow().is_empty()
            || !self.ready.borrow().is_empty()
            || !self.idle.borrow().is_empty()
    }
}

thread_local! {
    static WORKER: Cell<*const WorkerLocal> = const { Cell::new(ptr::null()) };
}

/// Whether the calling thread is a worker of some job.
pub(crate) fn on_worker_thread() -> bool {
    !WORKER.with(|w| w.get()).is_null()
}

/// Requeues a woken rank living at `(worker, task)` of `sched`.
///
/// On its own worker the woken rank runs next, before the run queue (Go's
/// `runnext`): the waker is usually about to wait for it (a message and its
/// reply, a root's data and the readers of it), and a rank that has just
/// been given what it waited for should not queue behind ranks that the
/// same worker woke earlier and that will only start waiting. A batch of
/// wake-ups ([`schedule_batch`], of more than one rank) goes to the back of
/// the queue in order. Ranks woken from another thread run before the queue
/// too (`WorkerLocal::woken`): what their waker published is fresh, while
/// the queue may hold ranks released together by a barrier, which have yet
/// to start waiting.
#[inline]
pub(crate) fn schedule(sched: &Scheduler, (worker, task): (usize, usize)) {
    let local = WORKER.with(|w| w.get());
    // SAFETY: the pointer is set by `run` for the life of the worker loop on
    // this thread and cleared before the `WorkerLocal` is dropped.
    if let Some(local) = unsafe { local.as_ref() } {
        if ptr::eq(local.sched, sched) && local.index == worker {
            local.hand_off(task as u32);
            return;
        }
    }
    schedule_remote(sched, worker, task);
}

/// [`schedule`] for a rank of another worker: through that worker's inbox,
/// waking it if it sleeps. Out of line, so that the same-worker path stays
/// small enough to inline into every waker.
#[inline(never)]
fn schedule_remote(sched: &Scheduler, worker: usize, task: usize) {
    let shared = &sched.workers[worker];
    shared.inbox.lock().push(task as u32);
    shared.pending.fetch_add(1, Ordering::SeqCst);
    if sched.sleep.claim(worker) {
        shared.unpark();
    }
}

/// Lets the rank running on this thread spin for a while (at most
/// [`SPIN_PARK`]) before it parks on `park`, until a wake-up is pending
/// ([`ParkState::is_notified`]): only while its worker has nothing else to
/// run and the job's workers have a CPU each (else the spin takes a CPU
/// from a worker with work). The caller then parks as usual
/// (`ParkState::try_park`, which fails at once if the wake-up came).
///
/// Why: a rank woken from another worker while parked costs the waker an
/// inbox push and a sleep-flag claim, and the rank's worker a drain and
/// two coroutine switches (lines that bounce between the workers: most of
/// a 1 B one-way time across workers). Woken while it spins, it costs the
/// waker one swap on the line the spinner reads — what MPI's processes pay
/// for their shared-memory flags. The worker's own idle poll (`spin`)
/// takes over after the park.
///
/// In a job of several processes (with at most one worker per CPU, one
/// worker included) the spin also polls the transport, counted among the
/// pollers (`Host::polling`) so that the progress thread stands aside: a
/// reply from another process is then handed over by the rank that waits
/// for it, without a park, a switch to the worker and back (1 B one-way
/// between 2 processes of 1 worker: batch medians 0.81-0.86 → 0.60-0.66
/// µs with the progress thread's change in `p2p/pollers.rs`, 0.71-0.80
/// with that alone).
///
/// `#[inline]`: with one worker (and no other process), or more workers
/// than CPUs, it is one thread-local load and a test on every park.
///
/// [`ParkState::is_notified`]: super::park::ParkState::is_notified
#[inline]
pub(crate) fn spin_before_park(sched: &Scheduler, park: &super::park::ParkState) {
    spin_until(sched, || park.is_notified());
}

/// Lets the rank running on this thread spin until `done()` holds, on the
/// terms of [`spin_before_park`] (at most [`SPIN_PARK`], while its worker
/// has nothing else to run, and only if the job's workers have a CPU
/// each): for a wait on a flag that its setter writes without waking the
/// rank (a blocking call's completion, `p2p::completion`). `done` should
/// load one line that only the wake-up writes.
#[inline]
pub(crate) fn spin_until(sched: &Scheduler, done: impl FnMut() -> bool) {
    spin_until_spaced(sched, 1, done);
}

/// [`spin_until`] with `pauses` `pause`s between two looks at `done`
/// (`sched::spin_spaced`), but for a worker that polls a transport as it
/// spins: then one, for the transport's sake (a reply from another process
/// waits for the next look: 2 processes, 1 B one-way 0.46 → 0.63 µs with
/// looks ~100 ns apart).
#[inline]
pub(crate) fn spin_until_spaced(sched: &Scheduler, pauses: u32, done: impl FnMut() -> bool) {
    let local = WORKER.with(|w| w.get());
    // SAFETY: as in `schedule`.
    if let Some(local) = unsafe { local.as_ref() } {
        if local.spin_in_rank {
            spin_in_rank(local, sched, pauses, done);
        }
    }
}

/// The spin of [`spin_until_spaced`].
#[inline(never)]
fn spin_in_rank(
    local: &WorkerLocal,
    sched: &Scheduler,
    pauses: u32,
    mut done: impl FnMut() -> bool,
) {
    if !ptr::eq(local.sched, sched) || local.has_other_work(sched) {
        return;
    }
    // SAFETY: the job outlives its workers' loops, which run its ranks.
    let polls = local.polls.map(|host| unsafe { &*host });
    if let Some(host) = polls {
        host.polling(true, false);
    }
    // The `pause`s a look waits for on top of the loop's one.
    let extra = if polls.is_some() {
        0
    } else {
        pauses.saturating_sub(1)
    };
    let start = Instant::now();
    let mut looks = 0u32;
    while !{
        for _ in 0..extra {
            std::hint::spin_loop();
        }
        done()
    } {
        std::hint::spin_loop();
        if let Some(host) = polls {
            // Arrivals from other processes: the reply this rank waits for
            // is handed over now, not after a park and a switch.
            host.progress();
        }
        looks = looks.wrapping_add(1);
        // The other sources, and the clock, every few looks: `done` reads
        // the line a wake-up writes.
        if looks % 16 == 0 && (local.has_other_work(sched) || start.elapsed() >= SPIN_PARK) {
            break;
        }
    }
    if let Some(host) = polls {
        host.polling(false, false);
    }
}

/// Whether the calling thread is a worker of `sched` whose idle fellows may
/// take a share of its work (micro-tasks) to run beside it: the job has
/// several workers, each with a CPU of its own. Elsewhere (one worker,
/// oversubscribed, not a worker) a shared piece would wait for a CPU.
pub(crate) fn idle_workers_help(sched: &Scheduler) -> bool {
    let local = WORKER.with(|w| w.get());
    // SAFETY: as in `schedule`.
    unsafe { local.as_ref() }.is_some_and(|local| ptr::eq(local.sched, sched) && local.helped)
}

/// Requeues woken tasks `tasks` of worker `worker`: one push to the local
/// run queue, or one inbox lock and one wake-up for another worker. One
/// task alone is a hand-off on the local worker (see [`schedule`]).
pub(crate) fn schedule_batch(sched: &Scheduler, worker: usize, tasks: &[u32]) {
    requeue(sched, worker, tasks, true);
}

/// [`schedule_batch`] for the rest of a batch whose start was requeued
/// already: to the back of the local queue after it, even one task alone.
pub(crate) fn schedule_rest(sched: &Scheduler, worker: usize, tasks: &[u32]) {
    requeue(sched, worker, tasks, false);
}

/// The body of [`schedule_batch`] (`hand_off`: a task alone runs next).
fn requeue(sched: &Scheduler, worker: usize, tasks: &[u32], hand_off: bool) {
    if tasks.is_empty() {
        return;
    }
    let local = WORKER.with(|w| w.get());
    // SAFETY: as in `schedule`.
    if let Some(local) = unsafe { local.as_ref() } {
        if ptr::eq(local.sched, sched) && local.index == worker {
            match tasks {
                [task] if hand_off => local.hand_off(*task),
                _ => local.ready.borrow_mut().extend(tasks.iter().copied()),
            }
            return;
        }
    }
    let shared = &sched.workers[worker];
    post(sched, worker, &shared.inbox, tasks);
}

/// Has worker `worker` unpark `slots` itself (`sched::unpark_on`): one
/// inbox lock and at most one wake-up for the caller.
pub(crate) fn unpark_on(sched: &Scheduler, worker: usize, slots: &[u32]) {
    if slots.is_empty() {
        return;
    }
    post(sched, worker, &sched.workers[worker].unparks, slots);
}

/// Appends `items` to `queue`, one of worker `worker`'s inboxes, counts
/// them pending and wakes the worker if it sleeps (the claim protocol the
/// loom models check).
fn post(sched: &Scheduler, worker: usize, queue: &SpinLock<Vec<u32>>, items: &[u32]) {
    let shared = &sched.workers[worker];
    queue.lock().extend_from_slice(items);
    shared.pending.fetch_add(items.len(), Ordering::SeqCst);
    if sched.sleep.claim(worker) {
        shared.unpark();
    }
}

/// Queues a task spawned by the rank running on this thread.
pub(crate) fn push_spawn(spawn: Spawn) {
    let local = WORKER.with(|w| w.get());
    // SAFETY: as in `schedule`; a running rank is always on a worker thread.
    let local = unsafe { local.as_ref() }.expect("a rank runs on a worker thread");
    local.spawned.borrow_mut().push(spawn);
}

/// Arms a timer that wakes slot `slot`, running on this thread.
pub(crate) fn add_timer(sched: &Scheduler, slot: u32, deadline: Instant) {
    let local = WORKER.with(|w| w.get());
    // SAFETY: as in `schedule`; a running rank is always on a worker thread.
    let local = unsafe { local.as_ref() }.expect("a rank runs on a worker thread");
    debug_assert!(ptr::eq(local.sched, sched));
    sched.timers.fetch_add(1, Ordering::SeqCst);
    local.timers.borrow_mut().push(Reverse((deadline, slot)));
}

/// Bytes of a parked rank's stack above the mark of its park (the frames
/// it returns through when resumed, up to its blocking call) that
/// [`Worker::prefetch_next`] loads before resuming it. (2,048, to cover an
/// all-reduce's deeper frames, was slower: a million-rank all-reduce
/// 294–297 ms against 284–288, barrier 254 against 241–255, 2 pairs.)
const STACK_ABOVE: usize = 1280;

/// Bytes below that mark (the suspend's and the switch's frames, and those
/// of the calls a collective makes before and after it parks, which reach
/// deeper than the park since its frames shrank: with 256, a million-rank
/// barrier's 1-worker user time rose from ~4.3 to ~5.3 s for 9 calls).
const STACK_BELOW: usize = 512;

/// Queued ranks from which [`Worker::prefetch_next`] loads stack lines:
/// below, the queued ranks' frames (~1.5 KiB each) fit in the core's
/// caches, and the prefetches only add instructions (a 256-rank
/// broadcast's latency went from 2.2 to 2.9–3.6 µs with them).
const DEEP_QUEUE: usize = 4096;

/// How long an idle worker polls before it sleeps.
const SPIN: std::time::Duration = std::time::Duration::from_micros(50);

/// How long a rank spins before it parks ([`spin_before_park`]): a reply
/// from a rank of another worker that runs comes within a few
/// microseconds; the worker's idle poll takes over after it.
const SPIN_PARK: std::time::Duration = std::time::Duration::from_micros(20);

/// How long it polls on while a transfer with another process is under way
/// (its next chunk comes sooner than a sleeping worker would wake): longer
/// than a 16 MiB message takes over TCP loopback here (~5 ms), as MPI's
/// processes poll for as long as they wait.
const SPIN_TRANSFER: std::time::Duration = std::time::Duration::from_millis(20);

/// How long an idle worker polls on while another worker is busy (it may
/// publish work any moment, and waking this one would cost more than the
/// poll), or, in a job of several processes, while it has a CPU of its own
/// (a peer process may send any moment): well above a wake-up here
/// (~50-500 µs), short enough that a worker beside one that computes for
/// long soon sleeps.
///
/// Between processes: a worker that slept after [`SPIN`] when its peer
/// process was preempted for a few tens of microseconds (a tick, a kernel
/// thread) had to be woken through the progress thread and the doorbell,
/// which preempted a polling worker in turn. In a 1 B ping-pong between
/// 2 processes of 1 worker (1.3 s), the workers were off their CPUs 320
/// ms (1,100 sleeps, 2,700 preemptions), 20 ms with this poll and the
/// progress thread's doubling pause (`p2p/pollers.rs`). Not while a copy
/// that wants every CPU is under way (`Host::copy_under_way`: a peer
/// reads 16 MiB this process lent, with a helper thread): polling on then
/// made a 16 MiB ping-pong 1.6× slower.
const SPIN_BUSY: std::time::Duration = std::time::Duration::from_millis(1);

/// Involuntary context switches of the calling thread so far (`None` if
/// the kernel does not say): one system call, made once per [`SPIN`] of an
/// extended poll.
fn preemptions() -> Option<libc::c_long> {
    /// `<linux/resource.h>` (the libc crate names it for uclibc only).
    const RUSAGE_THREAD: libc::c_int = 1;
    // SAFETY: getrusage only writes the struct it is given, which is a plain
    // C struct for which all zeroes is a valid value.
    let (rc, usage) = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        let rc = libc::getrusage(RUSAGE_THREAD, &mut usage);
        (rc, usage)
    };
    (rc == 0).then_some(usage.ru_nivcsw)
}

/// Whether idle workers of a job with `workers` workers may poll on while
/// another is busy: only with more than one worker, each with a CPU of its
/// own ([`WorkerArgs::own_cpus`]). Otherwise a poller takes the CPU that a
/// busy worker needs.
fn spin_while_busy(workers: usize, own_cpus: bool) -> bool {
    workers > 1 && own_cpus
}

type RankCoroutine = Coroutine<(), Suspend, (), PooledStack>;

struct Task {
    co: RankCoroutine,
    /// The world rank it acts for.
    rank: WorldRank,
    /// Its park slot (the local index's for a rank).
    slot: u32,
    ctx: *const RankCtx,
    /// About where its stack ended when it last parked (0: not known), for
    /// [`Worker::prefetch_next`]: copied from its context while that is
    /// warm, so the prefetch reads no cold line of its own.
    parked_at: usize,
}

/// What a worker starts: a rank (by local index), or a task acting for one.
enum Start {
    Rank(LocalIndex),
    Task(Spawn),
}

/// Everything a worker thread needs.
pub(crate) struct WorkerArgs<'a> {
    /// The job's scheduler.
    pub(crate) sched: &'a Scheduler,
    /// The job as its owner sees it: its address is the `RankCtx::host` of
    /// every rank the worker starts. The owner keeps it alive until the
    /// workers are joined.
    pub(crate) host: &'a dyn Host,
    pub(crate) index: usize,
    /// Its unstarted ranks, by local index.
    pub(crate) deque: Deque<u32>,
    pub(crate) body: &'a Body<'a>,
    pub(crate) pool: &'a StackPool,
    pub(crate) bind_to: Option<usize>,
    /// Each worker of the job has a CPU that no other worker on this host
    /// uses, neither of this process nor of the job's other processes here:
    /// only then may an idle worker or a waiting rank spin (on a shared CPU
    /// the spinner holds off the very thread it waits for: two workers of
    /// one process bound to one PU ping-ponged at ~870 µs a message).
    pub(crate) own_cpus: bool,
    /// Every worker is up before any starts a rank (so no worker steals
    /// the ranks of one that is still starting).
    pub(crate) start: &'a Barrier,
    pub(crate) exit: &'a Barrier,
}

thread_local! {
    /// The last panic of a rank on this thread, recorded by the panic hook.
    static LAST_PANIC: RefCell<Option<RecordedPanic>> = const { RefCell::new(None) };
    /// The next panic on this thread follows from another failure
    /// ([`panic_as_consequence`]).
    static NEXT_IS_CONSEQUENCE: Cell<bool> = const { Cell::new(false) };
}

/// A rank's panic as the hook saw it.
struct RecordedPanic {
    message: String,
    /// Raised by [`panic_as_consequence`].
    consequence: bool,
}

/// Records the panic message of the running rank (called by the hook).
pub(crate) fn record_panic(message: String) {
    let consequence = NEXT_IS_CONSEQUENCE.with(|c| c.replace(false));
    LAST_PANIC.with(|p| {
        *p.borrow_mut() = Some(RecordedPanic {
            message,
            consequence,
        })
    });
}

/// The message of the panic this thread is unwinding from, if a rank's
/// panic was recorded and not yet taken (a rank that must fail the job while
/// it unwinds reports its own panic, not the consequence).
pub(crate) fn recorded_panic() -> Option<String> {
    LAST_PANIC.with(|p| p.borrow().as_ref().map(|r| r.message.clone()))
}

/// Panics with `message` (an ordinary `String` payload, so user code that
/// catches it sees nothing special), marked as following from another
/// party's failure: a job that fails with it reports the cause instead when
/// the cause fails the job too (`Scheduler::fail_as_consequence`).
#[cold]
#[track_caller]
pub(crate) fn panic_as_consequence(message: String) -> ! {
    NEXT_IS_CONSEQUENCE.with(|c| c.set(true));
    panic!("{message}")
}

/// The message of the panic a rank or task just ended with, and whether it
/// was a consequence.
fn take_panic(payload: &(dyn std::any::Any + Send)) -> (String, bool) {
    NEXT_IS_CONSEQUENCE.with(|c| c.set(false));
    match LAST_PANIC.with(|p| p.borrow_mut().take()) {
        Some(RecordedPanic {
            message,
            consequence,
        }) => (message, consequence),
        None => (payload_message(payload), false),
    }
}

/// Runs a worker until its job ends.
pub(crate) fn run(args: WorkerArgs<'_>) {
    let WorkerArgs {
        sched,
        host,
        index,
        deque,
        body,
        pool,
        bind_to,
        own_cpus,
        start,
        exit,
    } = args;
    let _altstack = AltStack::ensure();
    let spin_while_busy = spin_while_busy(sched.workers.len(), own_cpus);
    let polls = host.polls() && own_cpus;
    if let Some(cpu) = bind_to {
        if let Err(err) = crate::hardware::bind_current_thread(cpu) {
            say!("myriad: worker {index} could not bind to PU {cpu}: {err}; running unbound");
        }
    }
    let _ = sched.workers[index].thread.set(std::thread::current());
    let local = WorkerLocal {
        spin_in_rank: spin_while_busy || polls,
        helped: spin_while_busy,
        polls: polls.then_some(host as *const dyn Host),
        ..WorkerLocal::new(sched, index)
    };
    WORKER.with(|w| w.set(&local));
    // Before any rank starts (the barrier orders it before every worker's
    // first resume).
    sched.set_solo(host.polls());
    start.wait();
    let mut worker = Worker {
        sched,
        hooks: host,
        host: (host as *const dyn Host).cast(),
        local: &local,
        deque,
        body,
        pool,
        tasks: Vec::new(),
        free: Vec::new(),
        stacks: Vec::new(),
        tracer: sched.tracer().cloned(),
        spin_while_busy,
        unparks: Vec::new(),
        unparked: Vec::new(),
    };
    worker.run_loop();
    sched.worker_stopped();
    // Every worker stops resuming ranks before anyone unwinds one.
    exit.wait();
    worker.teardown();
    WORKER.with(|w| w.set(ptr::null()));
}

struct Worker<'a> {
    sched: &'a Scheduler,
    /// The job, for its transport's progress.
    hooks: &'a dyn Host,
    host: *const (),
    local: &'a WorkerLocal,
    deque: Deque<u32>,
    body: &'a Body<'a>,
    pool: &'a StackPool,
    tasks: Vec<Option<Task>>,
    free: Vec<u32>,
    stacks: Vec<PooledStack>,
    /// The job's recording, if it traces or profiles.
    tracer: Option<Arc<Tracer>>,
    /// Poll on while another worker is busy ([`spin_while_busy`]).
    spin_while_busy: bool,
    /// The slots of `WorkerShared::unparks` being unparked (kept: its
    /// buffer serves every drain).
    unparks: Vec<u32>,
    /// The tasks of this worker those unparks woke (kept, as `unparks`).
    unparked: Vec<u32>,
}

impl Worker<'_> {
    fn run_loop(&mut self) {
        let sched = self.sched;
        let shared = &sched.workers[self.local.index];
        loop {
            if sched.is_aborting() {
                return;
            }
            // Remote wake-ups and timers first: ranks that keep yielding
            // must not starve them.
            if shared.pending.load(Ordering::Relaxed) > 0 {
                self.drain_inbox();
            }
            if !self.local.timers.borrow().is_empty() {
                self.fire_timers();
            }
            // Micro-tasks of parallel regions (short: they never park).
            if let Some(task) = sched.micro.pop() {
                run_micro(sched, task);
                continue;
            }
            // Tasks spawned by the ranks of this worker.
            if !self.local.spawned.borrow().is_empty() {
                let spawned = std::mem::take(&mut *self.local.spawned.borrow_mut());
                for spawn in spawned {
                    self.start(Start::Task(spawn));
                }
                continue;
            }
            // After a yield, give a rank that has not started a chance: the
            // yielding rank may be waiting for it.
            if self.local.yielded.replace(false) {
                if let Some(rank) = self.find_unstarted() {
                    self.start(Start::Rank(LocalIndex::new(rank)));
                    continue;
                }
            }
            let next = self.local.pop_ready();
            if let Some(task) = next {
                self.run_hand_offs(task);
                continue;
            }
            if let Some(rank) = self.find_unstarted() {
                self.start(Start::Rank(LocalIndex::new(rank)));
                continue;
            }
            // Nothing else to run: a rank waiting for idle time.
            let idle = self.local.idle.borrow_mut().pop_front();
            if let Some(task) = idle {
                self.run_hand_offs(task);
                continue;
            }
            if sched.live.load(Ordering::SeqCst) == 0 {
                return;
            }
            // Messages from other processes may wake ranks.
            if self.hooks.progress() {
                continue;
            }
            if self.spin() {
                continue;
            }
            self.sleep();
        }
    }

    fn drain_inbox(&mut self) {
        let shared = &self.sched.workers[self.local.index];
        // Drained in place: the inbox keeps its buffer, so a wake-up from
        // another thread allocates nothing (a taken `Vec` would be allocated
        // by the waker's thread and freed by this one, every time).
        // The newest wake-ups first, in their order: a rank whose data just
        // came (a root's broadcast) runs before ranks an earlier wake-up
        // released (a barrier), which have yet to start waiting.
        let mut woken = self.local.woken.borrow_mut();
        let before = woken.len();
        for task in shared.inbox.lock().drain(..).rev() {
            woken.push_front(task);
        }
        shared
            .pending
            .fetch_sub(woken.len() - before, Ordering::SeqCst);
        drop(woken);
        // Slots to unpark, copied out (the list keeps its buffer, as the
        // inbox does) and unparked here, where their lines live. The ranks
        // woken go to the front of the queue, in order: it may hold ranks
        // an earlier wake-up released (a barrier), yet to start waiting,
        // while these got what they waited for (a root's data). Behind it,
        // the readers of a broadcast that parked before its root came
        // waited for all of it (256 ranks: 30–70 µs in a quarter to half of
        // the calls). In the queue, not among the inbox's wake-ups
        // (`woken`), they resume in a row with the next one prefetched
        // (`run_hand_offs`, `prefetch_next`), as ranks a local wake-up
        // queued do: a million ranks released by a barrier would each take
        // a round through the run loop otherwise.
        let mut slots = std::mem::take(&mut self.unparks);
        slots.extend(shared.unparks.lock().drain(..));
        if !slots.is_empty() {
            shared.pending.fetch_sub(slots.len(), Ordering::SeqCst);
            let mut own = std::mem::take(&mut self.unparked);
            super::unpark_many_into(self.sched, self.local.index, &slots, &mut own);
            let mut ready = self.local.ready.borrow_mut();
            for &task in own.iter().rev() {
                ready.push_front(task);
            }
            own.clear();
            self.unparked = own;
            slots.clear();
        }
        self.unparks = slots;
    }

    /// Wakes the ranks whose timers expired; `true` if any did.
    fn fire_timers(&mut self) -> bool {
        let mut fired = false;
        let now = Instant::now();
        loop {
            let due = {
                let mut timers = self.local.timers.borrow_mut();
                match timers.peek() {
                    Some(Reverse((deadline, _))) if *deadline <= now => timers.pop(),
                    _ => None,
                }
            };
            let Some(Reverse((_, slot))) = due else {
                return fired;
            };
            fired = true;
            let sched = self.sched;
            super::unpark(sched, slot);
            sched.timers.fetch_sub(1, Ordering::SeqCst);
        }
    }

    fn next_timer(&self) -> Option<Instant> {
        self.local.timers.borrow().peek().map(|Reverse((d, _))| *d)
    }

    fn find_unstarted(&mut self) -> Option<u32> {
        let sched = self.sched;
        if sched.unstarted.load(Ordering::Acquire) == 0 {
            return None;
        }
        let rank = self
            .deque
            .pop()
            .or_else(|| loop {
                // Spawned ranks dealt to this worker, one at a time: in
                // its deque others could steal them.
                match sched.workers[self.local.index].spawned.steal() {
                    Steal::Success(rank) => return Some(rank),
                    Steal::Retry => continue,
                    Steal::Empty => break None,
                }
            })
            .or_else(|| {
                let workers = &sched.workers;
                let n = workers.len();
                loop {
                    let mut retry = false;
                    for k in 1..n {
                        let victim = &workers[(self.local.index + k) % n];
                        // Only to even the two workers' ranks (`spare_for`).
                        let spare = victim.spare_for(&workers[self.local.index]);
                        if spare == 0 {
                            continue;
                        }
                        match victim
                            .stealer
                            .steal_batch_with_limit_and_pop(&self.deque, spare)
                        {
                            Steal::Success(rank) => return Some(rank),
                            Steal::Retry => retry = true,
                            Steal::Empty => {}
                        }
                    }
                    if !retry {
                        return None;
                    }
                }
            })?;
        sched.unstarted.fetch_sub(1, Ordering::AcqRel);
        Some(rank)
    }

    /// Starts a rank or a task on this worker: from now on it lives here.
    fn start(&mut self, what: Start) {
        let sched = self.sched;
        let (rank, local, slot) = match &what {
            Start::Rank(local) => (sched.slots.get(local.slot()).rank(), *local, local.slot()),
            Start::Task(spawn) => (spawn.rank, spawn.local, spawn.slot),
        };
        if self.stacks.is_empty() {
            // While many ranks wait to start, a batch of stacks (cheaper
            // per stack, see `stack.rs`), this worker's share at most.
            let want = sched.unstarted.load(Ordering::Relaxed) / sched.workers.len() + 1;
            if let Err(err) = self.pool.allocate_batch(want, &mut self.stacks) {
                sched.fail(Error::Resources(ResourceError::Stack {
                    rank: rank.as_rank(),
                    size: self.pool.stack_size(),
                    reason: err.to_string(),
                }));
                return;
            }
        }
        let stack = self.stacks.pop().expect("a batch holds a stack");
        let index = match self.free.pop() {
            Some(index) => index,
            None => {
                self.tasks.push(None);
                (self.tasks.len() - 1) as u32
            }
        };
        let park_slot = sched.slots.get(slot);
        park_slot.set_home(self.local.index, index as usize);
        let park_slot: *const super::rank::Slot = park_slot;
        if let Start::Rank(_) = what {
            sched.workers[self.local.index]
                .hosted
                .fetch_add(1, Ordering::Relaxed);
        }
        let body = self.body;
        let (sched_ptr, host) = (self.sched as *const Scheduler, self.host);
        let pool = self.pool;
        let worker = self.local.index as u32;
        let spins = self.local.spin_in_rank;
        let recorder = self.tracer.as_ref().and_then(|tracer| {
            tracer.recorder(rank.get(), worker, slot, matches!(what, Start::Task(_)))
        });
        let entry = move |yielder: &Yielder<(), Suspend>, ()| {
            let ctx = RankCtx {
                sched: sched_ptr,
                host,
                rank,
                local,
                slot,
                park_slot,
                worker,
                spins,
                yielder,
                initialized: Cell::new(matches!(what, Start::Task(_))),
                parked_at: Cell::new(0),
                locals: match what {
                    Start::Rank(_) => RankLocals::new(),
                    Start::Task(_) => RankLocals::for_task(rank.get()),
                },
                recorder,
            };
            rank::set_current(&ctx);
            // Drops the rank's `rank_local!` values when the body returns or
            // unwinds (job failure), while `ctx` is still current.
            let _locals = ctx.locals.destroy_on_exit();
            match what {
                Start::Rank(local) => {
                    body(rank, local);
                    pool.note_locals(local.slot(), ctx.locals.footprint());
                }
                Start::Task(spawn) => (spawn.body)(),
            }
        };
        // SAFETY: the coroutine borrows `body`, the scheduler and the host
        // (the job), which outlive every coroutine: the worker drops all of them (teardown) before
        // returning, and `run_job` keeps both alive until the workers are
        // joined. The stack comes from the pool, which outlives the workers.
        let co = unsafe { Coroutine::with_stack_unchecked(stack, entry) };
        self.tasks[index as usize] = Some(Task {
            co,
            rank,
            slot,
            ctx: ptr::null(),
            parked_at: 0,
        });
        self.prefetch_next();
        self.resume(index);
    }

    /// Resumes `task`; then, for as long as each rank that parks has just
    /// handed the worker to a rank it woke (`WorkerLocal::next`), resumes
    /// that one straight away: the directed hand-off of a message and its
    /// reply, without a round through the loop's other sources (timers,
    /// stealing). Back to the loop after [`HANDOFFS`] in a row (the queue's
    /// turn), or when it has something else to run first: the abort, a
    /// wake-up from another thread, a spawned task or a micro-task.
    /// Without a hand-off, the queue's head next, when the loop would take
    /// it too ([`WorkerLocal::take_queued`]): the 1,023 ranks a 1,024-rank
    /// barrier's last arrival woke, 44 instructions fewer a rank and call
    /// (callgrind, 1 worker).
    ///
    /// Only the first resume prefetches the queue's head
    /// ([`prefetch_next`](Self::prefetch_next)): a hand-off runs a rank
    /// chosen after that one parks, and the head waits for the end of the
    /// chain (~8 instructions a message of a 1-worker ping-pong, callgrind).
    ///
    /// One loop for a traced job and one for the others: the test of the
    /// tracer made once, not at every resume (3 instructions a message).
    fn run_hand_offs(&mut self, task: u32) {
        if self.tracer.is_some() {
            self.run_hand_offs_as::<true>(task);
        } else {
            self.run_hand_offs_as::<false>(task);
        }
    }

    /// [`run_hand_offs`](Self::run_hand_offs) with a tracer (`TRACED`) or
    /// without one.
    #[inline(always)]
    fn run_hand_offs_as<const TRACED: bool>(&mut self, mut task: u32) {
        let sched = self.sched;
        let shared = &sched.workers[self.local.index];
        self.prefetch_next();
        while self.resume_as::<TRACED>(task) {
            if sched.is_aborting()
                || shared.pending.load(Ordering::Relaxed) > 0
                || self.local.has_spawned()
                || !sched.micro.is_empty()
            {
                return;
            }
            if let Some(next) = self.local.take_hand_off() {
                task = next;
                continue;
            }
            // No hand-off: the queue's head, straight away, if the loop
            // would pick it anyway (nothing woken by another thread, no
            // timer): the ranks a collective's last arrival woke resume in
            // a row, without a round through the loop per rank.
            match self.local.take_queued() {
                Some(next) => {
                    task = next;
                    self.prefetch_next();
                }
                None => return,
            }
        }
    }

    /// Resumes the rank or task at `index` until it suspends or ends;
    /// `true` if it parked.
    ///
    /// `#[inline(always)]` (into the hand-off loop): its call cost a
    /// prologue and an epilogue around the switch, 30 instructions a
    /// one-way message of a 1-worker ping-pong (callgrind), and a return
    /// right after the switch back from the rank, which the CPU's return
    /// predictor, filled by the rank's calls, likely gets wrong. With the
    /// park inlined into the blocking wait too (`sched::park_once_inline`),
    /// the ping-pong lost 10 % of its instructions (678.8 -> 611.8 a
    /// one-way message) and 22 % of its time (medians of 15 alternating
    /// runs, 1 B, 0.0697 -> 0.0541 µs).
    #[inline(always)]
    fn resume(&mut self, index: u32) -> bool {
        self.resume_as::<true>(index)
    }

    /// [`resume`](Self::resume), sampling the run queue for the tracer if
    /// `TRACED` and the job has one (`false`: it has none).
    #[inline(always)]
    fn resume_as<const TRACED: bool>(&mut self, index: u32) -> bool {
        let Some(task) = self.tasks[index as usize].as_mut() else {
            return false; // a stale wake-up of a finished rank
        };
        if TRACED {
            if let Some(tracer) = &self.tracer {
                tracer.sample(self.local.index, self.local.ready.borrow().len());
            }
        }
        // The rank's context pointer is what `rank::with_current`, the panic
        // hook and the overflow handler read while it runs.
        rank::set_current(task.ctx);
        let result = panic::catch_unwind(AssertUnwindSafe(|| task.co.resume(())));
        task.ctx = rank::set_current(ptr::null());
        match result {
            Ok(CoroutineResult::Yield(Suspend::Parked)) => {
                // SAFETY: the rank parked, so its context is alive on its
                // suspended stack, and its line is warm: the rank just
                // wrote the mark (`sched::park`).
                task.parked_at = unsafe { (*task.ctx).parked_at.get() };
                return true;
            }
            Ok(CoroutineResult::Yield(Suspend::Yielded)) => {
                self.local.ready.borrow_mut().push_back(index);
                self.local.yielded.set(true);
            }
            Ok(CoroutineResult::Yield(Suspend::WhenIdle)) => {
                self.local.idle.borrow_mut().push_back(index);
            }
            Ok(CoroutineResult::Return(())) => self.finish(index),
            Err(payload) => {
                let (message, consequence) = take_panic(&*payload);
                let error = Error::Panic {
                    rank: task.rank.as_rank(),
                    message,
                };
                if consequence {
                    self.sched.fail_as_consequence(error);
                } else {
                    self.sched.fail(error);
                }
                self.finish(index);
            }
        }
        false
    }

    /// Starts loading the stacks of the ranks to resume after this one:
    /// after a collective wakes many ranks, each resume lands on a stack
    /// page not touched since its rank parked (a TLB and cache miss, ~12% of
    /// a million-rank `hello`). Its context sits near the top of its stack,
    /// on the page its saved frames usually share.
    ///
    /// With a deep queue ([`DEEP_QUEUE`]), two ranks ahead, the context of
    /// the queue's second rank: the
    /// prefetch that misses the TLB walks the page tables for its stack
    /// page. One ahead, the lines of the first rank's stack around where it
    /// parked ([`STACK_BELOW`], [`STACK_ABOVE`]): the frames it returns
    /// through when it resumes, each return of which would otherwise wait
    /// for its line (a mispredicted return after the switch: one miss after
    /// another). Its page was walked for the previous resume (the likely
    /// reason why both on the next rank, as tried before, did not pay: the
    /// line prefetches then wait behind, or are dropped during, the page
    /// walk). A million-rank barrier on 1 worker, user time of 9 calls:
    /// 3.97–4.42 s against 4.53–5.03 s (startup ~0.84 s of it).
    /// Otherwise the context of the queue's head only. (Inlined always:
    /// out of line, its call, prologue and the `RefCell`'s borrow cost a
    /// 1,024-rank all-reduce or barrier 13 instructions a rank and call,
    /// callgrind, 1 worker; a 1-worker 1 B one-way 478.8 -> 479.7.)
    #[inline(always)]
    fn prefetch_next(&self) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            let ready = self.local.ready.borrow();
            let task = |k: usize| {
                ready
                    .get(k)
                    .and_then(|&next| self.tasks.get(next as usize))
                    .and_then(Option::as_ref)
            };
            if ready.len() < DEEP_QUEUE {
                if let Some(task) = task(0) {
                    // SAFETY: a prefetch is a hint: it never faults,
                    // whatever the address.
                    unsafe { _mm_prefetch::<_MM_HINT_T0>(task.ctx.cast()) };
                }
                return;
            }
            if let Some(task) = task(1) {
                // SAFETY: as above.
                unsafe { _mm_prefetch::<_MM_HINT_T0>(task.ctx.cast()) };
            }
            if let Some(task) = task(0) {
                if task.parked_at != 0 {
                    let low = task.parked_at.saturating_sub(STACK_BELOW) & !63;
                    let high = task.parked_at.saturating_add(STACK_ABOVE);
                    for line in (low..high).step_by(64) {
                        // SAFETY: as above.
                        unsafe { _mm_prefetch::<_MM_HINT_T0>(line as *const i8) };
                    }
                }
            }
        }
    }

    fn finish(&mut self, index: u32) {
        let task = self.tasks[index as usize]
            .take()
            .expect("a finished rank has a task");
        let sched = self.sched;
        let slots = &sched.slots;
        if super::slots::Slots::is_rank(task.slot) {
            let slot = slots.get(task.slot);
            slot.set_finished();
            slot.park.resumed();
            sched.workers[self.local.index]
                .ended
                .fetch_add(1, Ordering::Relaxed);
        } else {
            slots.release(task.slot);
        }
        let stack = task.co.into_stack();
        self.pool.note_finished(&stack, task.slot);
        self.stacks.push(stack);
        self.free.push(index);
        if sched.live.fetch_sub(1, Ordering::SeqCst) == 1 {
            sched.wake_all();
        }
    }

    fn has_work(&self) -> bool {
        let sched = self.sched;
        sched.is_aborting()
            || self.local.has_ready()
            || sched.workers[self.local.index]
                .pending
                .load(Ordering::SeqCst)
                > 0
            || self.next_timer().is_some_and(|d| d <= Instant::now())
            || !self.deque.is_empty()
            || !sched.micro.is_empty()
            || !sched.workers[self.local.index].spawned.is_empty()
            || self.stealable()
            || sched.live.load(Ordering::SeqCst) == 0
    }

    /// Polls for work for a little while before sleeping: waking a sleeping
    /// thread costs tens of microseconds on a VM, a message from another
    /// worker usually arrives sooner. Polls on (up to [`SPIN_BUSY`]) while
    /// another worker is busy, if the workers have a CPU each (see
    /// `sched::idle`), or in a job of several processes if this worker
    /// polls the transport on a CPU of its own and no copy wants the CPUs,
    /// as long as this thread is not preempted meanwhile (other processes
    /// want the CPU). Returns `true` if work appeared.
    fn spin(&self) -> bool {
        let sleep = &self.sched.sleep;
        let me = self.local.index;
        let start = Instant::now();
        let mut deadline = start + SPIN;
        // Preemptions of this thread when the poll was last extended.
        let mut extended: Option<Option<libc::c_long>> = None;
        sleep.set_polling(me, true);
        self.hooks.polling(true, false);
        let mut looks = 0u32;
        let found = loop {
            // One pause per look: PAUSE costs ~60 cycles on recent AMD cores.
            std::hint::spin_loop();
            if self.has_work() || self.hooks.progress() {
                break true;
            }
            // The clock every few looks: a read of it costs as much as a
            // look (a sixth of an idle poll's time went to it), and each
            // look's length adds to the time to find a message.
            looks = looks.wrapping_add(1);
            if looks % 8 != 0 {
                continue;
            }
            let now = Instant::now();
            if now >= deadline {
                let since = now - start;
                if since < SPIN_TRANSFER && self.hooks.transfer_under_way() {
                    deadline = now + SPIN;
                    continue;
                }
                // Another worker that is busy may publish work any moment;
                // in a job of several processes (this worker polling the
                // transport on a CPU of its own), a peer process may send.
                let awaited = (self.spin_while_busy && sleep.others_busy(me))
                    || (self.local.polls.is_some() && !self.hooks.copy_under_way());
                if since < SPIN_BUSY && awaited {
                    // Only while this thread has its CPU to itself: once it
                    // was preempted since the last look, the machine is
                    // oversubscribed (other processes) and the poll would
                    // take the CPU a busy worker waits for.
                    let switches = preemptions();
                    if extended.is_none() || extended == Some(switches) {
                        extended = Some(switches);
                        deadline = now + SPIN;
                        continue;
                    }
                }
                break false;
            }
        };
        sleep.set_polling(me, false);
        self.hooks.polling(false, !found);
        found
    }

    /// Whether another worker has unstarted ranks to spare
    /// ([`WorkerShared::spare_for`] this one).
    fn stealable(&self) -> bool {
        let sched = self.sched;
        let me = &sched.workers[self.local.index];
        sched.unstarted.load(Ordering::SeqCst) > 0
            && sched
                .workers
                .iter()
                .enumerate()
                .any(|(i, w)| i != self.local.index && w.spare_for(me) > 0)
    }

    fn sleep(&mut self) {
        let sched = self.sched;
        let sleep = &sched.sleep;
        let announcement = sleep.announce(self.local.index);
        if self.has_work() {
            sleep.cancel(announcement);
            return;
        }
        if announcement.sleepers == sleep.workers()
            && sched.timers.load(Ordering::SeqCst) == 0
            && sched.external.load(Ordering::SeqCst) == 0
        {
            if let Some(report) = deadlock::check_stable(sched) {
                sleep.cancel(announcement);
                sched.fail(Error::Deadlock { report });
                return;
            }
        }
        match self.next_timer() {
            Some(deadline) => {
                let now = Instant::now();
                if deadline > now {
                    std::thread::park_timeout(deadline - now);
                }
            }
            None => std::thread::park(),
        }
        sleep.cancel(announcement);
    }

    /// Drops the coroutines that did not finish (the job failed), unwinding
    /// their stacks with their own context installed: first everything that
    /// acts for a rank, then the ranks (see "Ending a job" in the module
    /// docs).
    fn teardown(&mut self) {
        // Tasks not started yet: their bodies borrow their rank's buffers.
        drop(std::mem::take(&mut *self.local.spawned.borrow_mut()));
        let (ranks, tasks): (Vec<Task>, Vec<Task>) = self
            .tasks
            .drain(..)
            .flatten()
            .partition(|task| super::slots::Slots::is_rank(task.slot));
        for task in tasks.into_iter().chain(ranks) {
            rank::set_current(task.ctx);
            let Task { co, .. } = task;
            let _ = panic::catch_unwind(AssertUnwindSafe(move || drop(co)));
            rank::set_current(ptr::null());
        }
        self.pool.release_all(self.stacks.drain(..));
    }
}

/// Runs a micro-task on the worker's stack. A panic fails the job (the
/// region that queued it learns it from the abort) instead of unwinding the
/// worker.
fn run_micro(sched: &Scheduler, task: super::micro::MicroTask) {
    let (rank, run) = (task.rank, task.run);
    if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(run)) {
        let (message, _) = take_panic(&*payload);
        sched.fail(Error::Panic {
            rank: rank.as_rank(),
            message: format!("in a task of its parallel region: {message}"),
        });
    }
}

/// The message of a panic payload.
pub(crate) fn payload_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a non-string payload".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A worker's queues, without a job (`pop_ready` touches only these).
    fn local() -> WorkerLocal {
        WorkerLocal::new(ptr::null(), 0)
    }

    fn drain(local: &WorkerLocal) -> Vec<u32> {
        std::iter::from_fn(|| local.pop_ready()).collect()
    }

    /// Ranks woken from another thread keep their place before the run
    /// queue past the bound of hand-offs in a row: the queue's head gets a
    /// turn, then the woken ones go on (not behind the whole queue).
    #[test]
    fn woken_ranks_run_before_the_queue_past_the_bound() {
        let local = local();
        let woken = 1000..1000 + HANDOFFS + 3;
        local.woken.borrow_mut().extend(woken.clone());
        local.ready.borrow_mut().extend([1, 2]);
        let order = drain(&local);
        let mut expected: Vec<u32> = woken.clone().take(HANDOFFS as usize).collect();
        expected.push(1);
        expected.extend(woken.skip(HANDOFFS as usize));
        expected.push(2);
        assert_eq!(order, expected);
    }

    /// A chain of hand-offs (two ranks waking each other) lets the queue's
    /// head run every [`HANDOFFS`] resumes.
    #[test]
    fn hand_offs_in_a_row_give_the_queue_a_turn() {
        let local = local();
        local.ready.borrow_mut().extend([1, 2]);
        let mut order = Vec::new();
        for i in 0..2 * HANDOFFS + 2 {
            local.hand_off(100 + i % 2);
            order.push(local.pop_ready().unwrap());
        }
        let queued: Vec<usize> = (0..order.len()).filter(|&i| order[i] < 100).collect();
        assert_eq!(queued, [HANDOFFS as usize, 2 * HANDOFFS as usize + 1]);
    }
}
