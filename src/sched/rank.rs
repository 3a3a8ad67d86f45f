//! A rank as the scheduler sees it: the park slot every thread may touch
//! ([`Slot`]) and the context of the coroutine that runs right now
//! ([`RankCtx`]).
//!
//! Every coroutine that can wait has a slot: each rank of this process has
//! one (slot id = its local index, `crate::identity`), and auxiliary coroutines acting for a rank (the tasks that
//! run immediate collectives) get one from `sched::slots` for their life.
//! The slot is the only per-rank state that exists for a rank that has not
//! started: a million slots must stay small. The context lives on the
//! coroutine's own stack and is reachable through a thread-local pointer that
//! the worker swaps at every switch; it is how the MPI layer knows which rank
//! is calling, and which slot to wake when an operation completes. The
//! pointer is never handed out as a `&'static`: [`with_current`] lends the
//! context to a closure for one call (see there why it cannot dangle, and
//! why the closure cannot keep it).

use std::cell::Cell;
use std::panic::Location;
use std::ptr;
use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, Ordering};

use corosensei::Yielder;

use super::park::ParkState;
use super::{Scheduler, Threading};
use crate::identity::{LocalIndex, WorldRank};
use crate::{Rank, Tag};

/// What a suspended rank tells its worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Suspend {
    /// The rank parked: do not requeue it until it is unparked.
    Parked,
    /// The rank yielded: requeue it at the back of the run queue.
    Yielded,
    /// The rank yielded until its worker has nothing else to run
    /// ([`crate::sched::yield_when_idle`]).
    WhenIdle,
}

/// Lifecycle of a rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Life {
    NotStarted = 0,
    Running = 1,
    Finished = 2,
}

/// What a parked rank waits for, for deadlock reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum WaitOp {
    None = 0,
    Receive,
    Send,
    SynchronousSend,
    Probe,
    Wait,
    WaitAny,
    WaitAll,
    Barrier,
    Collective,
    Sleep,
    Other,
    /// A one-sided lock on a window's rank (`WaitInfo` fields reused:
    /// `peer` the target rank, `tag` the exclusive holder's rank or minus
    /// the count of shared holders, `comm` the window's number).
    RmaLock,
}

impl WaitOp {
    fn from_u8(v: u8) -> WaitOp {
        use WaitOp::*;
        [
            None,
            Receive,
            Send,
            SynchronousSend,
            Probe,
            Wait,
            WaitAny,
            WaitAll,
            Barrier,
            Collective,
            Sleep,
            Other,
            RmaLock,
        ]
        .get(v as usize)
        .copied()
        .unwrap_or(Other)
    }

    pub(crate) fn describe(self) -> &'static str {
        self.label()
    }

    /// [`describe`](Self::describe) as a [`Label`] (one word: a trace's
    /// park slices keep it).
    pub(crate) fn label(self) -> Label {
        match self {
            WaitOp::None => &"running",
            WaitOp::Receive => &"receive",
            WaitOp::Send => &"send (waiting for a matching receive)",
            WaitOp::SynchronousSend => &"synchronous send",
            WaitOp::Probe => &"probe",
            WaitOp::Wait => &"wait on a request",
            WaitOp::WaitAny => &"wait_any",
            WaitOp::WaitAll => &"wait_all",
            WaitOp::Barrier => &"barrier",
            WaitOp::Collective => &"collective",
            WaitOp::Sleep => &"sleep",
            WaitOp::Other => &"wait",
            WaitOp::RmaLock => &"RMA lock",
        }
    }
}

/// A name the layer above gives a wait (a collective's name), shown in
/// deadlock reports as `<label> (<op>)`.
///
/// A reference to a `&'static str` rather than the `&str` itself: one word,
/// so that a [`Slot`] keeps it in one atomic pointer (a million slots must
/// stay small). Write it as `&"name"` (a promoted constant).
pub(crate) type Label = &'static &'static str;

/// Describes what a rank is about to wait for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WaitInfo {
    pub(crate) op: WaitOp,
    /// What the wait is for, in the words of the layer that waits (`None`:
    /// the operation alone describes it).
    pub(crate) label: Option<Label>,
    /// Peer rank in `comm`, `ANY_SOURCE`, or `-2` for none.
    pub(crate) peer: Rank,
    /// Tag, `ANY_TAG`, or `i32::MIN` for none.
    pub(crate) tag: Tag,
    /// Context id of the communicator (`u64::MAX`: none).
    pub(crate) comm: u64,
    pub(crate) site: &'static Location<'static>,
}

impl WaitInfo {
    pub(crate) const NO_PEER: Rank = -2;
    pub(crate) const NO_TAG: Tag = i32::MIN;

    /// A wait with no peer, tag or communicator.
    pub(crate) fn simple(op: WaitOp, site: &'static Location<'static>) -> WaitInfo {
        WaitInfo {
            op,
            label: None,
            peer: Self::NO_PEER,
            tag: Self::NO_TAG,
            comm: u64::MAX,
            site,
        }
    }
}

/// Park state of one waiting party (a rank or a task), shared by all threads
/// of the job.
#[derive(Debug)]
pub(crate) struct Slot {
    pub(crate) park: ParkState,
    /// The world rank this party acts for (itself, for a rank).
    rank: AtomicU32,
    /// `worker << 32 | task index` once started.
    home: AtomicU64,
    life: AtomicU8,
    /// A rank's thread level: 0 for the job's default, else level + 1.
    threading: AtomicU8,
    wait_op: AtomicU8,
    wait_label: AtomicPtr<&'static str>,
    wait_peer: AtomicI32,
    wait_tag: AtomicI32,
    wait_comm: AtomicU64,
    wait_site: AtomicPtr<Location<'static>>,
}

impl Slot {
    pub(crate) fn new(rank: WorldRank) -> Slot {
        Slot {
            park: ParkState::new(),
            rank: AtomicU32::new(rank.get()),
            home: AtomicU64::new(u64::MAX),
            life: AtomicU8::new(Life::NotStarted as u8),
            threading: AtomicU8::new(0),
            wait_op: AtomicU8::new(WaitOp::None as u8),
            wait_label: AtomicPtr::new(ptr::null_mut()),
            wait_peer: AtomicI32::new(0),
            wait_tag: AtomicI32::new(0),
            wait_comm: AtomicU64::new(0),
            wait_site: AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// The world rank this party acts for.
    pub(crate) fn rank(&self) -> WorldRank {
        WorldRank::new(self.rank.load(Ordering::Relaxed))
    }

    /// Prepares a recycled slot for a new task acting for `rank`.
    pub(crate) fn reuse(&self, rank: WorldRank) {
        self.rank.store(rank.get(), Ordering::Relaxed);
        self.wait_site.store(ptr::null_mut(), Ordering::Relaxed);
        self.park.resumed();
        self.life.store(Life::NotStarted as u8, Ordering::Release);
    }

    /// Records where the rank lives; called by its worker before its first
    /// resume, so before anyone can see it parked.
    pub(crate) fn set_home(&self, worker: usize, task: usize) {
        self.home
            .store(((worker as u64) << 32) | task as u64, Ordering::Release);
        self.life.store(Life::Running as u8, Ordering::Release);
    }

    /// `(worker, task index)` of a started rank.
    #[inline]
    pub(crate) fn home(&self) -> (usize, usize) {
        let home = self.home.load(Ordering::Acquire);
        debug_assert_ne!(home, u64::MAX, "unpark of a rank that never started");
        ((home >> 32) as usize, (home & 0xffff_ffff) as usize)
    }

    /// The thread level the rank asked for, if it did.
    pub(crate) fn threading(&self) -> Option<Threading> {
        match self.threading.load(Ordering::Acquire) {
            0 => None,
            v => Some(Threading::ALL[(v - 1) as usize]),
        }
    }

    /// Records the thread level the rank was given.
    pub(crate) fn set_threading(&self, level: Threading) {
        self.threading.store(level as u8 + 1, Ordering::Release);
    }

    pub(crate) fn set_finished(&self) {
        self.life.store(Life::Finished as u8, Ordering::Release);
    }

    pub(crate) fn life(&self) -> Life {
        match self.life.load(Ordering::Acquire) {
            0 => Life::NotStarted,
            1 => Life::Running,
            _ => Life::Finished,
        }
    }

    /// Records what the rank waits for (read only by deadlock reports, when
    /// every rank is parked; relaxed stores are enough since the park CAS
    /// that follows publishes them).
    #[inline]
    pub(crate) fn set_wait(&self, info: &WaitInfo) {
        self.wait_op.store(info.op as u8, Ordering::Relaxed);
        let label = info.label.map_or(ptr::null(), |l| l as *const &'static str);
        self.wait_label.store(label.cast_mut(), Ordering::Relaxed);
        self.wait_peer.store(info.peer, Ordering::Relaxed);
        self.wait_tag.store(info.tag, Ordering::Relaxed);
        self.wait_comm.store(info.comm, Ordering::Relaxed);
        self.wait_site.store(
            info.site as *const Location<'static> as *mut Location<'static>,
            Ordering::Relaxed,
        );
    }

    pub(crate) fn wait(&self) -> Option<WaitInfo> {
        let site = self.wait_site.load(Ordering::Acquire);
        if site.is_null() {
            return None;
        }
        Some(WaitInfo {
            op: WaitOp::from_u8(self.wait_op.load(Ordering::Relaxed)),
            // SAFETY: only null or `Label`s (`&'static &'static str`) are
            // stored.
            label: unsafe { self.wait_label.load(Ordering::Relaxed).as_ref() },
            peer: self.wait_peer.load(Ordering::Relaxed),
            tag: self.wait_tag.load(Ordering::Relaxed),
            comm: self.wait_comm.load(Ordering::Relaxed),
            // SAFETY: only `&'static Location` values are stored.
            site: unsafe { &*site },
        })
    }
}

/// The context of the coroutine running on this thread; lives on its stack.
pub(crate) struct RankCtx {
    /// The scheduler of the rank's job.
    pub(super) sched: *const Scheduler,
    /// The job as the layer that owns it sees it, opaque here: the address
    /// its owner gave when it started the workers (`WorkerArgs::host`) or
    /// created the thread context (`thread::context`). Only that owner
    /// (`runtime::job`) turns it back into its type; every context of a
    /// process has a host of the same type.
    pub(super) host: *const (),
    /// The world rank it acts for (what reports and the API name).
    pub(crate) rank: WorldRank,
    /// The local index of the rank it acts for (its rank's slot, mailbox,
    /// `rank_local!` table and place in the job's groups of ranks).
    pub(crate) local: LocalIndex,
    /// Its park slot (the rank's own, `local.slot()`, or a task's or OS
    /// thread's).
    pub(crate) slot: u32,
    /// That slot, `sched.slots.get(slot)`, looked up once: every park
    /// reads it ([`RankCtx::park_slot`]; the lookup, a bounds check and an
    /// index, cost 6 instructions a park, callgrind).
    pub(super) park_slot: *const Slot,
    /// The worker it is pinned to.
    pub(crate) worker: u32,
    /// Its waits may spin before they park (its worker's
    /// `WorkerLocal::spin_in_rank`; never in an OS thread's context): a
    /// blocking call then waits on a completion its completer need not
    /// wake (`p2p::completion`).
    pub(crate) spins: bool,
    pub(crate) yielder: *const Yielder<(), Suspend>,
    /// `initialize()` was called (or the universe was handed to the body).
    pub(crate) initialized: Cell<bool>,
    /// About where its stack ended when it last parked (0: not yet): its
    /// worker prefetches the frames above before resuming it, when many
    /// ranks are queued (`worker::Worker::prefetch_next`).
    pub(crate) parked_at: Cell<usize>,
    /// The rank's `rank_local!` values (refusing every access in contexts
    /// that are not a rank's own: tasks, OS threads).
    pub(crate) locals: super::locals::RankLocals,
    /// What this party records when the job traces or profiles it
    /// (`crate::trace`); `None` otherwise, and in OS threads' contexts.
    pub(crate) recorder: Option<Box<crate::trace::Recorder>>,
}

impl std::fmt::Debug for RankCtx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RankCtx")
            .field("rank", &self.rank)
            .field("local", &self.local)
            .field("slot", &self.slot)
            .finish()
    }
}

impl RankCtx {
    /// The scheduler of the rank's job.
    #[inline]
    pub(crate) fn sched(&self) -> &Scheduler {
        // SAFETY: the scheduler lives in its job (in the part the
        // communicators hold), which outlives every rank context: workers,
        // which own the ranks, are joined before the job's last `Arc` can
        // drop in `run`; a thread context is used only by a caller that
        // keeps the scheduler alive (`thread::context`).
        unsafe { &*self.sched }
    }

    /// Its park slot (that of [`slot`](Self::slot)).
    #[inline]
    pub(crate) fn park_slot(&self) -> &Slot {
        // SAFETY: `park_slot` is `sched.slots.get(self.slot)`, taken when
        // the context was made: a slot never moves (the ranks' table grows
        // without moving an entry, `crate::grow`; task slots live in boxed
        // segments never freed before the table) and lives as long as the
        // scheduler, which outlives the context (see `sched`); the slot id
        // stays this context's for the context's life (a task's slot is
        // released only once its task ended).
        unsafe { &*self.park_slot }
    }

    /// The party's recorder, if the job traces or profiles it: what every
    /// tracing hook checks (one load, one branch when `None`).
    #[inline(always)]
    pub(crate) fn recorder(&self) -> Option<&crate::trace::Recorder> {
        self.recorder.as_deref()
    }

    /// The host pointer its job's owner gave (see the field); for that
    /// owner to recover its job, and for anyone to compare.
    #[inline]
    pub(crate) fn host(&self) -> *const () {
        self.host
    }

    /// Whether this is the context of an OS thread acting for the rank
    /// (`sched::thread`), which has no coroutine to suspend.
    #[inline]
    pub(crate) fn is_thread(&self) -> bool {
        self.yielder.is_null()
    }

    /// The yielder of the rank's coroutine, to suspend it with; `None` for
    /// an OS thread's context ([`is_thread`](Self::is_thread)). For a
    /// caller that checks once and suspends later (the park: testing the
    /// pointer again cost 2 instructions a park, callgrind).
    #[inline]
    pub(crate) fn coroutine(&self) -> Option<&Yielder<(), Suspend>> {
        // SAFETY: a non-null yielder belongs to the coroutine running this
        // rank, which is the code calling us (contexts are only reachable
        // while their rank runs).
        unsafe { self.yielder.as_ref() }
    }

    /// Suspends the rank, returning control to its worker. (An OS thread's
    /// context only yields its thread: its waits go through
    /// `sched::thread::park_once`.)
    #[inline]
    pub(crate) fn suspend(&self, why: Suspend) {
        let Some(yielder) = self.coroutine() else {
            debug_assert_ne!(
                why,
                Suspend::Parked,
                "thread contexts park in sched::thread"
            );
            std::thread::yield_now();
            return;
        };
        yielder.suspend(why);
    }
}

thread_local! {
    static CURRENT: Cell<*const RankCtx> = const { Cell::new(ptr::null()) };
}

/// Runs `f` with the context of the rank running on this thread (`None`
/// outside any rank: a worker between ranks, a micro-task of a parallel
/// region, an OS thread). One thread-local read, no borrow flag.
///
/// # Why the reference cannot dangle
///
/// A context lives on its coroutine's stack, from the coroutine's first
/// resume to its end (or its unwinding at teardown). The thread-local
/// pointer is non-null only while that coroutine runs on this thread: the
/// coroutine sets it when it starts, the worker sets it just before each
/// resume (and before dropping a suspended coroutine at teardown, which
/// unwinds it) and clears it right after, running nothing else in between;
/// a rank clears it while it runs chunks of its own parallel region. So
/// when `f` is called, the context's coroutine is the code calling
/// `with_current` (or is interrupted by it: the overflow handler, the
/// panic hook), and it cannot end before `f` returns. If the rank parks
/// inside `f`, the reference stays its own context, which lives on.
///
/// `f` receives the reference for a lifetime of its own (the closure must
/// accept any lifetime), so it cannot store it anywhere that outlives the
/// call: not in a `static` or a thread-local, not in a value another rank
/// can reach, not in its result. Code that needs the context for a whole
/// operation passes it down (`fn op_in(ctx: &RankCtx, ..)`); what must
/// outlive the operation keeps the context's numbers (rank, slot) or an
/// `Arc` of its job, never the context. (A compile-time proof of the rule
/// is in the doc of [`current_unchecked`].)
#[inline]
pub(crate) fn with_current<R>(f: impl FnOnce(Option<&RankCtx>) -> R) -> R {
    // SAFETY: the reference is only lent to `f`, whose signature keeps it
    // from leaving the call; the context outlives the call (see above).
    f(unsafe { current_unchecked() })
}

/// The context of the rank running on this thread, for a lifetime the
/// caller chooses: the unchecked twin of [`with_current`], for accessors
/// that bind the lifetime to something the caller borrows (a communicator
/// handle checked to be the running rank's: `CommCore::caller`).
///
/// [`with_current`] lends the context to a closure that must accept any
/// lifetime, which is what keeps it from being stored:
///
/// ```compile_fail,E0521
/// use std::cell::Cell;
/// struct RankCtx;
/// fn with_current<R>(f: impl FnOnce(Option<&RankCtx>) -> R) -> R {
///     f(Some(&RankCtx))
/// }
/// thread_local! {
///     static KEPT: Cell<Option<&'static RankCtx>> = const { Cell::new(None) };
/// }
/// // error[E0521]: borrowed data escapes outside of closure
/// with_current(|ctx| KEPT.with(|k| k.set(ctx)));
/// ```
///
/// # Safety
///
/// The reference must not outlive the coroutine it belongs to: use it
/// within the call that got it, on the running rank's own stack, and
/// never store it in a `static`, a thread-local or anything another rank
/// can reach (see [`with_current`] for why it is valid until then).
#[inline]
pub(crate) unsafe fn current_unchecked<'a>() -> Option<&'a RankCtx> {
    let ctx = CURRENT.with(|c| c.get());
    // SAFETY: the pointer is null or points to the context of the
    // coroutine running on this thread (see `with_current`), alive as long
    // as the caller promises to use the reference.
    unsafe { ctx.as_ref() }
}

/// Sets the current rank context, returning the previous one.
#[inline]
pub(crate) fn set_current(ctx: *const RankCtx) -> *const RankCtx {
    CURRENT.with(|c| c.replace(ctx))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A million ranks have a million slots: 40 bytes before waits had
    /// labels, one word more with them.
    #[test]
    fn a_slot_stays_small() {
        assert!(
            std::mem::size_of::<Slot>() <= 48,
            "Slot is {} bytes",
            std::mem::size_of::<Slot>()
        );
    }

    /// `with_current` lends exactly the context installed on this thread,
    /// and nothing outside one. (That the closure cannot keep the
    /// reference is a compile-time property: see `current_unchecked`.)
    #[test]
    fn with_current_lends_the_installed_context_only() {
        assert!(with_current(|ctx| ctx.is_none()));
        let ranks = (0..2).map(WorldRank::new);
        let sched = Scheduler::new(ranks, Box::new([]), Threading::Single, |c| c.to_string());
        let ctx = RankCtx {
            sched: &sched,
            host: ptr::null(),
            rank: WorldRank::new(1),
            local: LocalIndex::new(1),
            slot: 1,
            park_slot: sched.slots.get(1),
            worker: 0,
            spins: false,
            yielder: ptr::null(),
            initialized: Cell::new(false),
            parked_at: Cell::new(0),
            locals: super::super::locals::RankLocals::for_thread(),
            recorder: None,
        };
        let previous = set_current(&ctx);
        assert_eq!(
            with_current(|c| c.map(|c| c as *const RankCtx)),
            Some(&ctx as *const _)
        );
        assert_eq!(set_current(previous), &ctx as *const RankCtx);
        assert!(with_current(|ctx| ctx.is_none()));
    }

    #[test]
    fn a_slot_keeps_the_label_of_a_wait() {
        let slot = Slot::new(WorldRank::new(0));
        let site = Location::caller();
        let mut info = WaitInfo::simple(WaitOp::Collective, site);
        info.label = Some(&"barrier");
        slot.set_wait(&info);
        assert_eq!(slot.wait().unwrap().label, Some(&"barrier"));
        slot.set_wait(&WaitInfo::simple(WaitOp::Receive, site));
        assert_eq!(slot.wait().unwrap().label, None);
    }
}
