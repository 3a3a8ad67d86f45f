//! The M:N scheduler: ranks are coroutines, workers are kernel threads.
//!
//! * [`rank`]: a rank's shared slot and the running rank's context;
//! * [`park`]: how a rank waits without losing a wake-up;
//! * [`idle`]: how a worker with nothing to do sleeps and is woken;
//! * [`worker`]: the worker loop (run queue, inbox, stealing unstarted ranks,
//!   timers, teardown);
//! * [`stack`] and [`guard`]: rank stacks and what happens on overflow;
//! * [`deadlock`]: the report when every rank waits forever.
//!
//! A rank runs on one worker from its first resume to its end (it is
//! *pinned*): its stack may hold values that are not `Send`. Ranks that have
//! not started are just numbers in crossbeam deques, stolen by idle workers
//! only to even the workers' counts (a collective waits for the busiest).
//! A rank that waits parks and is requeued only when woken; a worker with
//! nothing to run spins briefly, then sleeps until work arrives. A rank that
//! unwinds from a panic never suspends (a panic in progress belongs to the
//! worker thread, not to the coroutine): its waits fail at once instead
//! (see `unwinding`).

pub(crate) mod deadlock;
pub(crate) mod guard;
pub(crate) mod idle;
pub(crate) mod join;
mod level;
pub(crate) mod locals;
pub(crate) mod micro;
mod pace;
pub(crate) mod park;
pub(crate) mod rank;
pub(crate) mod shared_copy;
pub(crate) mod slots;
pub(crate) mod stack;
pub(crate) mod task;
pub(crate) mod thread;
pub(crate) mod worker;

use std::panic::Location;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

pub use level::Threading;
pub(crate) use rank::{RankCtx, WaitInfo, WaitOp};

use crate::error::{CommError, Error};
use crate::identity::{LocalIndex, WorldRank};
use crate::trace::Tracer;
use rank::Suspend;

/// Scheduler state of one job, shared by its workers.
///
/// Its fields are private to `sched` (whose child modules run the
/// protocols on them: park slots, run queues, sleep, deadlock checks); the
/// layers above take the steps they need through methods
/// ([`worker_count`](Self::worker_count),
/// [`external_started`](Self::external_started), ...).
#[derive(Debug)]
pub(crate) struct Scheduler {
    /// Park slots: this process's ranks first (by local index), then tasks.
    slots: slots::Slots,
    workers: Box<[worker::WorkerShared]>,
    sleep: idle::Sleep,
    /// Where the next spawned rank is dealt: spawned ranks go round the
    /// workers' `spawned` queues from here (`spawn_ranks`).
    deal: AtomicUsize,
    /// Ranks not started yet (in the workers' deques and `spawned` queues).
    unstarted: AtomicUsize,
    /// Ranks and tasks not finished yet.
    live: AtomicUsize,
    /// Pending `sleep` timers.
    timers: AtomicUsize,
    /// Threads outside the scheduler that may complete operations
    /// (transports, OS threads of `Threading::Multiple` ranks).
    external: AtomicUsize,
    aborting: AtomicBool,
    /// Only the job's one worker thread touches the ranks' park states and
    /// mailboxes: the job has one worker, no transport, no OS thread
    /// acting for a rank and no rank at a thread level that would let one. Set by that worker before it starts a rank
    /// ([`set_solo`](Self::set_solo)); cleared for good by the rank that
    /// starts the first OS thread, before the thread exists
    /// ([`external_started`](Self::external_started)), so whatever the
    /// worker did alone happens before anything the thread does. While it
    /// holds, a rank parks, wakes a rank and locks a mailbox with plain
    /// loads and stores instead of read-modify-writes
    /// (`ParkState::try_park_alone`, `Mailbox::lock_alone`): the four a
    /// message of a 1-worker job paid were ~12 % of its time.
    solo: AtomicBool,
    /// Workers that left their loop: they resume no rank any more.
    stopped: AtomicUsize,
    /// The error that ended the job, and whether it is only a consequence
    /// of another failure.
    failure: Mutex<Option<(Error, bool)>>,
    /// Micro-tasks of hybrid parallel regions.
    micro: micro::MicroQueue,
    /// OS threads acting for ranks.
    threads: thread::Threads,
    /// The thread level of ranks that did not ask for one.
    threading: Threading,
    /// Names communicators (by context id) in deadlock reports.
    namer: Namer,
    /// The job's recording, when it traces or profiles (`crate::trace`),
    /// installed before the workers start.
    tracer: OnceLock<Arc<Tracer>>,
}

/// The job as the layer that owns it (`runtime::job`) hands it to OS threads
/// acting for its ranks (`thread::context`): the scheduler keeps it by a
/// `Weak` and needs only its scheduler. (Rank coroutines get the host as a
/// plain address, `worker::WorkerArgs::host`.)
pub(crate) trait Host: Send + Sync + 'static {
    /// The job's scheduler.
    fn scheduler(&self) -> &Scheduler;

    /// Hands what arrived from other processes to the job's ranks (waking
    /// those it completes); `true` if anything arrived. Idle workers call
    /// it between ranks (collaborative polling); a job of one process has
    /// nothing to poll.
    fn progress(&self) -> bool {
        false
    }

    /// Whether [`progress`](Self::progress) has a transport to poll (the
    /// job has other processes).
    fn polls(&self) -> bool {
        false
    }

    /// An idle worker starts (`true`) or stops polling through
    /// [`progress`](Self::progress) in a loop; `to_sleep` when it stops to
    /// sleep. A progress thread stands aside while workers poll.
    fn polling(&self, _polling: bool, _to_sleep: bool) {}

    /// A transfer with another process is under way (see
    /// `Transport::busy`): an idle worker polls on instead of sleeping.
    fn transfer_under_way(&self) -> bool {
        false
    }

    /// A copy between processes that wants every CPU is under way (see
    /// `Transport::copy_under_way`): an idle worker does not poll on for
    /// messages that may come, it leaves the CPU to the copy.
    fn copy_under_way(&self) -> bool {
        false
    }
}

/// How the layer that owns the communicators names one by its context id
/// (the scheduler knows only the number a wait records).
pub(crate) struct Namer(Box<dyn Fn(u64) -> String + Send + Sync>);

impl std::fmt::Debug for Namer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Namer")
    }
}

impl Scheduler {
    /// The scheduler of this process's ranks: `ranks` gives the world rank
    /// of each, by local index (the scheduler runs local indices and names
    /// world ranks in reports).
    pub(crate) fn new(
        ranks: impl ExactSizeIterator<Item = WorldRank>,
        workers: Box<[worker::WorkerShared]>,
        threading: Threading,
        namer: impl Fn(u64) -> String + Send + Sync + 'static,
    ) -> Scheduler {
        let count = workers.len();
        let ranks_here = ranks.len();
        Scheduler {
            slots: slots::Slots::new(ranks),
            workers,
            sleep: idle::Sleep::new(count),
            deal: AtomicUsize::new(0),
            unstarted: AtomicUsize::new(ranks_here),
            live: AtomicUsize::new(ranks_here),
            timers: AtomicUsize::new(0),
            external: AtomicUsize::new(0),
            aborting: AtomicBool::new(false),
            solo: AtomicBool::new(false),
            stopped: AtomicUsize::new(0),
            failure: Mutex::new(None),
            micro: micro::MicroQueue::default(),
            threads: thread::Threads::default(),
            threading,
            namer: Namer(Box::new(namer)),
            tracer: OnceLock::new(),
        }
    }

    /// Makes the job record what `tracer` asks (before its workers start;
    /// a second call is ignored).
    pub(crate) fn install_tracer(&self, tracer: Arc<Tracer>) {
        let _ = self.tracer.set(tracer);
    }

    /// The job's recording, if it traces or profiles.
    #[inline]
    pub(crate) fn tracer(&self) -> Option<&Arc<Tracer>> {
        self.tracer.get()
    }

    /// Adds `n` ranks to the running job, the rank of local index `i`
    /// acting for world rank `world(i)`, and queues them for the workers;
    /// returns their local indices. The caller made room for them first
    /// (their mailboxes, `p2p::Shared::grow`) and recorded what they run:
    /// a worker may start them as soon as this returns.
    ///
    /// They count as live and unstarted before any worker can see them, so
    /// neither the end of the job nor a deadlock check passes them by (the
    /// caller is a live rank or acts for one: the job has not ended).
    pub(crate) fn spawn_ranks(
        &self,
        n: usize,
        world: impl Fn(usize) -> WorldRank,
    ) -> std::ops::Range<usize> {
        let locals = self.slots.grow(n, world);
        self.live.fetch_add(n, Ordering::SeqCst);
        self.unstarted.fetch_add(n, Ordering::SeqCst);
        // Dealt round the workers, as `RankOrder::Cyclic` deals a job's
        // first ranks (why: `WorkerShared::spawned`).
        let workers = self.workers.len();
        let first = self.deal.fetch_add(n, Ordering::Relaxed);
        for (k, local) in locals.clone().enumerate() {
            self.workers[(first + k) % workers]
                .spawned
                .push(local as u32);
        }
        self.wake_all();
        locals
    }

    /// Ranks of this process so far: started with the job, then spawned.
    pub(crate) fn rank_count(&self) -> usize {
        self.slots.ranks()
    }

    /// How many workers have nothing to run right now (a hint): those a
    /// queued micro-task would find at once.
    pub(crate) fn idle_workers(&self) -> usize {
        self.sleep.idle()
    }

    /// Number of worker threads of the job.
    #[inline]
    pub(crate) fn worker_count(&self) -> usize {
        self.workers.len()
    }

    /// How many ranks each worker has run so far (for the binding report).
    pub(crate) fn ranks_per_worker(&self) -> Vec<usize> {
        self.workers
            .iter()
            .map(|w| w.hosted.load(Ordering::Relaxed))
            .collect()
    }

    /// The world rank that the party parked on slot `slot` acts for.
    #[inline]
    pub(crate) fn rank_of_slot(&self, slot: u32) -> WorldRank {
        self.slots.get(slot).rank()
    }

    /// Records the thread level rank `rank` was given
    /// (`initialize_with_threading`).
    ///
    /// A level at which OS threads may call MPI ends the job's
    /// [`solo`](Self::is_solo) mode first: such a thread may be a plain
    /// `std::thread` that nobody counted, and it reads the level (acquire)
    /// after this store of it (release), so it sees the mode ended.
    pub(crate) fn set_threading_of(&self, rank: LocalIndex, level: Threading) {
        if level >= Threading::Serialized {
            self.solo.store(false, Ordering::Relaxed);
        }
        self.slots.get(rank.slot()).set_threading(level);
    }

    /// Queues micro-tasks of a parallel region for any worker to run, and
    /// wakes sleeping workers for them.
    #[inline]
    pub(crate) fn push_micro(&self, tasks: impl IntoIterator<Item = micro::MicroTask>) {
        self.micro.push(self, tasks);
    }

    /// Takes a queued micro-task, if any (to run it).
    #[inline]
    pub(crate) fn pop_micro(&self) -> Option<micro::MicroTask> {
        self.micro.pop()
    }

    /// Counts a thread outside the scheduler that may complete operations
    /// (an OS thread of a rank, a transport), before it starts: while it is
    /// counted no deadlock is reported. `SeqCst`, as the deadlock check's
    /// reads of the count.
    ///
    /// Ends the job's [`solo`](Self::is_solo) mode: call it on the thread
    /// that will start the counted thread (a rank's worker, or a thread
    /// already counted), before the thread starts.
    pub(crate) fn external_started(&self) {
        debug_assert!(!self.is_solo() || worker::on_worker_thread());
        self.solo.store(false, Ordering::Relaxed);
        self.external.fetch_add(1, Ordering::SeqCst);
    }

    /// The counted thread will complete nothing more (after it woke
    /// whoever waits for it).
    pub(crate) fn external_ended(&self) {
        self.external.fetch_sub(1, Ordering::SeqCst);
    }

    /// Every rank has finished: calls of OS threads still acting for ranks
    /// fail from now on (`thread::Threads::end`).
    pub(crate) fn end_threads(&self) {
        self.threads.end();
    }

    /// The name of the communicator with context id `context`, for reports.
    pub(crate) fn comm_name(&self, context: u64) -> String {
        (self.namer.0)(context)
    }

    /// The thread level of the rank of local index `rank`: the one it
    /// asked for, else the job's default.
    pub(crate) fn threading_of(&self, rank: LocalIndex) -> Threading {
        self.slots
            .get(rank.slot())
            .threading()
            .unwrap_or(self.threading)
    }

    /// Whether the calling thread is the only one that touches the job's
    /// park states and mailboxes (see the field `solo`). Only the job's
    /// worker and the ranks it runs may rely on a `true`: they are that
    /// thread. One relaxed load of a line that changes at most once.
    #[inline]
    pub(crate) fn is_solo(&self) -> bool {
        self.solo.load(Ordering::Relaxed)
    }

    /// The job's one worker, about to start ranks, enters solo mode if it
    /// may: the job has no transport (`polls`), no counted thread, and its
    /// thread level lets no OS thread call MPI (at `Serialized` and above
    /// any `std::thread` of a rank may, without being counted first).
    fn set_solo(&self, polls: bool) {
        let alone = self.workers.len() == 1
            && !polls
            && self.threading < Threading::Serialized
            && self.external.load(Ordering::SeqCst) == 0
            && worker::on_worker_thread();
        self.solo.store(alone, Ordering::Relaxed);
    }

    /// Whether the job is being torn down.
    #[inline]
    pub(crate) fn is_aborting(&self) -> bool {
        self.aborting.load(Ordering::Acquire)
    }

    /// Called by a worker when it leaves its loop and resumes no rank any
    /// more.
    pub(crate) fn worker_stopped(&self) {
        self.stopped.fetch_add(1, Ordering::Release);
    }

    /// Once the job aborts, waits (without parking) until every other worker
    /// has left its loop. From then on no rank code runs elsewhere, so no
    /// claim made before the abort is half-way through its copy (a claimer
    /// copies and completes without suspending), and claims after the abort
    /// are refused (`p2p::claim`). For a party that must free memory a
    /// descriptor it cannot withdraw points into while the job is still
    /// running elsewhere: a rank unwinding past its own running task.
    /// OS threads acting for ranks (`Threading::Multiple`) are not counted.
    #[cold]
    pub(crate) fn wait_for_other_workers_to_stop(&self) {
        debug_assert!(self.is_aborting());
        let others = if worker::on_worker_thread() {
            self.workers.len() - 1
        } else {
            self.workers.len()
        };
        while self.stopped.load(Ordering::Acquire) < others {
            std::thread::yield_now();
        }
    }

    /// Ends the job with `error` (the first error wins, but over a
    /// consequence: see [`fail_as_consequence`](Self::fail_as_consequence))
    /// and wakes every worker so that it stops.
    pub(crate) fn fail(&self, error: Error) {
        self.record_failure(error, false);
    }

    /// Ends the job with `error`, which follows from another party's failure
    /// (a waiter that found an `Hls` generation poisoned by a panicking
    /// rank): if the cause fails the job too, even later, the job reports
    /// the cause.
    pub(crate) fn fail_as_consequence(&self, error: Error) {
        self.record_failure(error, true);
    }

    fn record_failure(&self, error: Error, consequence: bool) {
        {
            let mut failure = self.failure.lock().unwrap_or_else(|e| e.into_inner());
            match &*failure {
                Some((_, false)) => {}
                Some((_, true)) if consequence => {}
                _ => *failure = Some((error, consequence)),
            }
        }
        self.aborting.store(true, Ordering::SeqCst);
        self.wake_all();
        self.threads.wake_all();
    }

    /// The error that ended the job, if any.
    pub(crate) fn take_failure(&self) -> Option<Error> {
        self.failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .map(|(error, _)| error)
    }

    /// Wakes every sleeping worker (job finished or aborting).
    pub(crate) fn wake_all(&self) {
        for (i, worker) in self.workers.iter().enumerate() {
            if self.sleep.claim(i) {
                worker.unpark();
            }
        }
    }
}

/// Parks the calling rank once: returns after it was woken, or at once if a
/// wake-up was pending. Callers loop, re-checking their condition.
///
/// A rank that unwinds from a panic never suspends (see [`unwinding`]): the
/// call fails at once instead.
#[inline]
pub(crate) fn park_once(ctx: &RankCtx, info: &WaitInfo) -> Result<(), Error> {
    park(ctx, info, true)
}

/// [`park_once`] for a rank that spun already ([`spin`]): it parks at
/// once.
pub(crate) fn park_after_spin(ctx: &RankCtx, info: &WaitInfo) -> Result<(), Error> {
    park(ctx, info, false)
}

/// Lets the rank of `ctx` spin until `done()` holds, briefly, while its
/// worker has nothing else to run (`worker::spin_until`; nothing at all
/// when the rank may not spin, [`RankCtx::spins`]), before it parks.
#[inline]
pub(crate) fn spin(ctx: &RankCtx, done: impl FnMut() -> bool) {
    if ctx.spins {
        worker::spin_until(ctx.sched(), done);
    }
}

/// [`spin`] polling `done` about every 100 ns (`pace`), for a flag in a
/// line its setter locks and writes first: polled at every `pause`, the
/// line is taken from the setter in the middle of its writes. (At every
/// `pause` still where the spin also polls a transport.)
pub(crate) fn spin_spaced(ctx: &RankCtx, done: impl FnMut() -> bool) {
    if ctx.spins {
        worker::spin_until_spaced(ctx.sched(), pace::pauses_per_poll(), done);
    }
}

/// [`park_once`] inlined into its caller: for the wait of the blocking
/// point-to-point calls (`p2p::wait_for`), where the call to [`park`]
/// cost its prologue, epilogue and a `Result` returned through memory,
/// and one more return right after the switch back to the rank (see
/// `worker::Worker::resume`).
#[inline(always)]
pub(crate) fn park_once_inline(ctx: &RankCtx, info: &WaitInfo) -> Result<(), Error> {
    park_body(ctx, info, true)
}

/// [`park_once`], spinning on the park state first if `spin`.
#[inline]
fn park(ctx: &RankCtx, info: &WaitInfo, spin: bool) -> Result<(), Error> {
    park_body(ctx, info, spin)
}

/// The body of [`park`].
#[inline(always)]
fn park_body(ctx: &RankCtx, info: &WaitInfo, spin: bool) -> Result<(), Error> {
    // The out-of-line paths get the fields they read, or a copy of
    // `info` made on their path (`&{ *info }`): a blocking call's
    // `WaitInfo`, whose address escaped to them, was written to its stack
    // on every wait, before its fields were stored into the slot
    // (callgrind).
    let Some(yielder) = ctx.coroutine() else {
        return thread::park_once(ctx, &{ *info });
    };
    if std::thread::panicking() {
        return Err(unwinding(ctx, info.op, info.site));
    }
    let sched = ctx.sched();
    if sched.is_aborting() {
        return aborted(ctx);
    }
    let slot = ctx.park_slot();
    slot.set_wait(info);
    // Briefly, while its worker has nothing else to run: a wake-up from
    // another worker then costs no switch and no requeue (`worker.rs`).
    // `ctx.spins` first: a rank that may not spin (one worker, no
    // transport) skips the worker's thread-local.
    if spin && ctx.spins {
        worker::spin_before_park(sched, &slot.park);
    }
    let parked = if sched.is_solo() {
        slot.park.try_park_alone()
    } else {
        slot.park.try_park()
    };
    if parked {
        // Where its stack ends, about: its worker prefetches the frames
        // above it before resuming it (`Worker::prefetch_next`).
        // (The address of a local, without `black_box`: forcing the byte
        // into memory and reading its address back cost 4 instructions a
        // park, callgrind.)
        let marker = 0u8;
        ctx.parked_at.set(&marker as *const u8 as usize);
        // The park's span out of line: an untraced park then stores and
        // drops no empty span (callgrind).
        match ctx.recorder() {
            None => yielder.suspend(Suspend::Parked),
            Some(rec) => suspend_traced(rec, &{ *info }, yielder),
        }
        // No `resumed()`: the unparker took the slot back to `RUNNING`, or
        // left a notification that the next `try_park` consumes (`park.rs`).
        if sched.is_aborting() {
            return aborted(ctx);
        }
    }
    Ok(())
}

/// Suspends a parked rank whose recorder is `rec`, in the span of its
/// park.
#[cold]
#[inline(never)]
fn suspend_traced(
    rec: &crate::trace::Recorder,
    info: &WaitInfo,
    yielder: &corosensei::Yielder<(), Suspend>,
) {
    let _span = rec.park(
        info.op.label(),
        info.label.unwrap_or(&""),
        info.peer,
        info.tag,
    );
    yielder.suspend(Suspend::Parked);
}

/// Where a message leaving the running party starts its flow: the flow's
/// id (0 when the party is not traced), which rides in the message to its
/// receive. Called only when the job has a tracer.
#[cold]
#[inline(never)]
pub(crate) fn trace_flow_out() -> u64 {
    rank::with_current(|ctx| ctx.and_then(RankCtx::recorder).map_or(0, |r| r.flow_out()))
}

/// The running party received the message of flow `id` (non-zero: its
/// sender was traced).
#[cold]
#[inline(never)]
pub(crate) fn trace_flow_in(id: u64) {
    rank::with_current(|ctx| {
        if let Some(rec) = ctx.and_then(RankCtx::recorder) {
            rec.flow_in(id);
        }
    })
}

/// Parks the calling rank until `done()` holds.
#[inline]
pub(crate) fn wait_until(
    ctx: &RankCtx,
    info: &WaitInfo,
    mut done: impl FnMut() -> bool,
) -> Result<(), Error> {
    while !done() {
        park_once(ctx, info)?;
    }
    Ok(())
}

/// Waits until `done()` for a caller whose stack other threads borrow (the
/// helpers of a parallel region, the threads of a scope): parks `ctx` when
/// there is one and it may suspend; otherwise (no rank, unwinding, or
/// unwound while parked because the job failed) calls `idle` between looks.
/// It never returns, nor lets an unwind go on, before `done()`.
pub(crate) fn wait_fully(
    ctx: Option<&RankCtx>,
    site: &'static Location<'static>,
    done: impl Fn() -> bool,
    mut idle: impl FnMut(),
) {
    struct Finish<'a, D: Fn() -> bool, I: FnMut()>(&'a D, &'a mut I);
    impl<D: Fn() -> bool, I: FnMut()> Drop for Finish<'_, D, I> {
        fn drop(&mut self) {
            while !(self.0)() {
                (self.1)();
            }
        }
    }
    let _finish = Finish(&done, &mut idle);
    if let Some(ctx) = ctx.filter(|_| !std::thread::panicking()) {
        let info = WaitInfo::simple(WaitOp::Other, site);
        let _ = wait_until(ctx, &info, &done);
    }
}

/// The job is aborting: the rank is handed to its worker for good, which
/// unwinds it once every worker has stopped. (A rank that is unwinding
/// already never gets here: `park_once` refuses to suspend it.)
#[cold]
fn aborted(ctx: &RankCtx) -> Result<(), Error> {
    debug_assert!(!std::thread::panicking());
    loop {
        ctx.suspend(Suspend::Parked);
    }
}

/// Why a rank that unwinds from a panic must not wait, and what it does
/// instead.
///
/// Suspending a coroutine in the middle of its unwind would leave the panic
/// in progress on the worker *thread*: `std::thread::panicking()` and the
/// panic count are per thread, so every rank the worker resumes next would
/// believe it is panicking (destructors taking other paths, mutexes
/// poisoned by guards dropped in ordinary code, a second panic aborting the
/// process). So while a rank unwinds nothing suspends it:
///
/// * a blocking MPI call that would have to wait fails at once with this
///   error, after settling what it started (a queued receive or rendezvous
///   send is withdrawn; a claimed one is finished by its claimer without
///   waiting, see `p2p::settle`); one that completes without waiting (the
///   message is already there, an eager send) succeeds;
/// * [`yield_now`] yields the thread instead of the rank, and [`sleep`]
///   sleeps the thread (the worker's other ranks wait that long);
/// * waits that must not end early (parallel regions, thread scopes) run
///   their helpers or yield the thread until done (`wait_fully`).
///
/// The panicking forms of MPI calls raise this error as a panic, which Rust
/// turns into an abort of the process when it happens in a destructor
/// during unwinding: destructors that communicate should use the `try_`
/// forms.
#[cold]
fn unwinding(ctx: &RankCtx, op: WaitOp, site: &'static Location<'static>) -> Error {
    Error::Comm(CommError::WaitWhileUnwinding {
        rank: ctx.rank.as_rank(),
        op: op.describe(),
        site,
    })
}

/// Wakes the party parked on slot `slot` of `sched` (a rank: its local
/// index) after making its condition true.
///
/// `#[inline(always)]`: every message completes a receive with it, and
/// as a call it cost a prologue and an epilogue as long as its body
/// (callgrind); the requeue of a rank of another worker or of an OS
/// thread is out of line (`worker::schedule`, `thread::wake`).
#[inline(always)]
pub(crate) fn unpark(sched: &Scheduler, slot: u32) {
    let slot_id = slot;
    let slot = sched.slots.get(slot);
    let woken = if sched.is_solo() {
        slot.park.unpark_alone()
    } else {
        slot.park.unpark()
    };
    if woken {
        let home = slot.home();
        if home.0 == thread::HOME {
            thread::wake(sched, slot_id);
        } else {
            worker::schedule(sched, home);
        }
    }
}

/// Wakes every slot of `slots` (see [`unpark`]), requeueing the woken ones
/// in batches per worker (slots of one worker in a row cost one push).
///
/// Batches are gathered in a small array on the stack, not a `Vec`: the
/// wake-ups of a collective's last arrival allocated and grew one (seven
/// `realloc`s for 130 ranks) while the other worker did the same, and the
/// two met on glibc's arena lock, which sleeps in the kernel (a broadcast's
/// readers at 256 ranks waited 5–30 µs for their worker to requeue them).
pub(crate) fn unpark_many(sched: &Scheduler, slots: &[u32]) {
    let mut batch = [0u32; BATCH];
    let mut len = 0;
    let mut batch_worker = usize::MAX;
    // Whether part of this worker's batch was requeued already (the rest
    // follows it, even one task alone, which would otherwise run next).
    let mut split = false;
    let flush = |worker: usize, tasks: &[u32], split: bool| match split {
        false => worker::schedule_batch(sched, worker, tasks),
        true => worker::schedule_rest(sched, worker, tasks),
    };
    for &id in slots {
        let Some((worker, task)) = unpark_one(sched, id) else {
            continue;
        };
        if worker != batch_worker {
            if len > 0 {
                flush(batch_worker, &batch[..len], split);
            }
            (len, split, batch_worker) = (0, false, worker);
        } else if len == BATCH {
            flush(batch_worker, &batch[..len], split);
            (len, split) = (0, true);
        }
        batch[len] = task;
        len += 1;
    }
    if len > 0 {
        flush(batch_worker, &batch[..len], split);
    }
}

/// Slots [`unpark_many`] requeues in one push at most.
const BATCH: usize = 32;

/// [`unpark_many`] for worker `worker` unparking the slots another thread
/// asked it to (`unpark_on`): the woken parties that live on `worker` are
/// appended to `own`, in order, for the caller to requeue (at the front of
/// its run queue); any other is requeued as [`unpark`] does.
pub(crate) fn unpark_many_into(
    sched: &Scheduler,
    worker: usize,
    slots: &[u32],
    own: &mut Vec<u32>,
) {
    for &id in slots {
        match unpark_one(sched, id) {
            Some((home, task)) if home == worker => own.push(task),
            Some((home, task)) => worker::schedule_batch(sched, home, &[task]),
            None => {}
        }
    }
}

/// Unparks slot `id`: the `(worker, task)` to requeue if it was parked on a
/// worker; a woken OS thread is woken here.
#[inline(always)]
fn unpark_one(sched: &Scheduler, id: u32) -> Option<(usize, u32)> {
    let slot = sched.slots.get(id);
    if !slot.park.unpark() {
        return None;
    }
    let (worker, task) = slot.home();
    if worker == thread::HOME {
        thread::wake(sched, id);
        return None;
    }
    Some((worker, task as u32))
}

/// Wakes every slot of `slots`, parties that wait on worker `worker`
/// (ranks and tasks it runs, OS threads that registered there), as
/// [`unpark_many`] does, but on that worker's thread: the caller pays one
/// push, and the parties' lines (park state, home) stay on the worker's
/// core instead of crossing to the caller's and back. The worker unparks
/// them when it next looks at its inbox, before it may sleep.
pub(crate) fn unpark_on(sched: &Scheduler, worker: usize, slots: &[u32]) {
    worker::unpark_on(sched, worker, slots);
}

/// Lets the other ranks of this worker run, then continues.
///
/// Inside a rank this moves the rank to the back of its worker's run queue;
/// outside any rank it yields the thread. Use it in polling loops: a rank
/// that spins without calling MPI would keep its worker to itself. (MPI calls
/// that answer "not yet", such as `Request::test`, already yield.)
///
/// While the rank unwinds from a panic (in a destructor) it yields the
/// thread instead: a rank never suspends mid-unwind. A polling loop in a
/// destructor then waits for other workers only.
pub fn yield_now() {
    rank::with_current(|ctx| match ctx {
        Some(ctx) if !std::thread::panicking() => ctx.suspend(Suspend::Yielded),
        _ => std::thread::yield_now(),
    })
}

/// Lets every other runnable rank of this worker run first: the rank
/// continues when its worker would otherwise poll or sleep (it is parked
/// in a collective's wait, say). For background work that must not slow
/// the ranks that compute (MPC's collaborative polling: idle time
/// progresses pending copies). A rank that loops on it keeps its worker
/// awake. Outside any rank (or while unwinding) it yields the thread.
pub fn yield_when_idle() {
    rank::with_current(|ctx| match ctx {
        Some(ctx) if !std::thread::panicking() => ctx.suspend(Suspend::WhenIdle),
        _ => std::thread::yield_now(),
    })
}

/// Puts the calling rank to sleep for `duration` without blocking its
/// worker (other ranks run meanwhile). Outside any rank it sleeps the thread.
///
/// `std::thread::sleep` inside a rank would stop every rank of its worker.
/// That is what it does while the rank unwinds from a panic (in a
/// destructor), where a rank must never suspend.
#[track_caller]
pub fn sleep(duration: Duration) {
    let site = Location::caller();
    rank::with_current(|ctx| {
        let Some(ctx) = ctx.filter(|_| !std::thread::panicking()) else {
            std::thread::sleep(duration);
            return;
        };
        let deadline = Instant::now() + duration;
        let sched = ctx.sched();
        worker::add_timer(sched, ctx.slot, deadline);
        let info = WaitInfo::simple(WaitOp::Sleep, site);
        // An abort while sleeping never returns here.
        let _ = wait_until(ctx, &info, || Instant::now() >= deadline);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn panic_of(rank: i32) -> Error {
        Error::Panic {
            rank,
            message: format!("rank {rank}'s panic"),
        }
    }

    /// Spawned ranks go round the workers, each spawn going on where the
    /// last one stopped. Fails if the ranks of a spawn pile up on one
    /// worker.
    #[test]
    fn spawned_ranks_are_dealt_round_the_workers() {
        let workers = (0..3)
            .map(|_| {
                worker::WorkerShared::new(crossbeam_deque::Worker::<u32>::new_fifo().stealer())
            })
            .collect();
        let ranks = (0..2).map(WorldRank::new);
        let sched = Scheduler::new(ranks, workers, Threading::Single, |c| c.to_string());
        let first = sched.spawn_ranks(7, |i| WorldRank::new(i as u32));
        assert_eq!(first, 2..9);
        assert_eq!(sched.spawn_ranks(4, |i| WorldRank::new(i as u32)), 9..13);
        let queued = |w: usize| {
            let mut ranks = Vec::new();
            while let crossbeam_deque::Steal::Success(rank) = sched.workers[w].spawned.steal() {
                ranks.push(rank);
            }
            ranks
        };
        assert_eq!(queued(0), [2, 5, 8, 11]);
        assert_eq!(queued(1), [3, 6, 9, 12]);
        assert_eq!(queued(2), [4, 7, 10]);
        assert_eq!(sched.unstarted.load(Ordering::Relaxed), 2 + 11);
    }

    #[test]
    fn a_failure_replaces_a_consequence_but_not_another_failure() {
        let ranks = || (0..4).map(WorldRank::new);
        let sched = Scheduler::new(ranks(), Box::new([]), Threading::Single, |c| c.to_string());
        sched.fail_as_consequence(panic_of(1));
        sched.fail_as_consequence(panic_of(2));
        sched.fail(panic_of(0));
        sched.fail(panic_of(3));
        sched.fail_as_consequence(panic_of(2));
        assert!(sched.is_aborting());
        assert_eq!(sched.take_failure(), Some(panic_of(0)));

        let sched = Scheduler::new(ranks(), Box::new([]), Threading::Single, |c| c.to_string());
        sched.fail_as_consequence(panic_of(1));
        sched.fail_as_consequence(panic_of(2));
        assert_eq!(sched.take_failure(), Some(panic_of(1)));
    }
}
