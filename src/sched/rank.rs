//! A rank as the scheduler sees it: the park slot every thread may touch
//! ([`Slot`]) and the context of the coroutine that runs right now
//! ([`RankCtx`]).
//!
//! Every coroutine that can wait has a slot: each rank has one (slot id =
//! world rank), and auxiliary coroutines acting for a rank (the tasks that
//! run immediate collectives) get one from `sched::slots` for their life.
//! The slot is the only per-rank state that exists for a rank that has not
//! started: a million slots must stay small. The context lives on the
//! coroutine's own stack and is reachable through a thread-local pointer that
//! the worker swaps at every switch; it is how the MPI layer knows which rank
//! is calling, and which slot to wake when an operation completes.

use std::cell::Cell;
use std::panic::Location;
use std::ptr;
use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, Ordering};

use corosensei::Yielder;

use super::park::ParkState;
use super::{Scheduler, Threading};
use crate::{Rank, Tag};

/// What a suspended rank tells its worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Suspend {
    /// The rank parked: do not requeue it until it is unparked.
    Parked,
    /// The rank yielded: requeue it at the back of the run queue.
    Yielded,
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
        ]
        .get(v as usize)
        .copied()
        .unwrap_or(Other)
    }

    pub(crate) fn describe(self) -> &'static str {
        match self {
            WaitOp::None => "running",
            WaitOp::Receive => "receive",
            WaitOp::Send => "send (waiting for a matching receive)",
            WaitOp::SynchronousSend => "synchronous send",
            WaitOp::Probe => "probe",
            WaitOp::Wait => "wait on a request",
            WaitOp::WaitAny => "wait_any",
            WaitOp::WaitAll => "wait_all",
            WaitOp::Barrier => "barrier",
            WaitOp::Collective => "collective",
            WaitOp::Sleep => "sleep",
            WaitOp::Other => "wait",
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
    pub(crate) fn new(rank: u32) -> Slot {
        Slot {
            park: ParkState::new(),
            rank: AtomicU32::new(rank),
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
    pub(crate) fn rank(&self) -> u32 {
        self.rank.load(Ordering::Relaxed)
    }

    /// Prepares a recycled slot for a new task acting for `rank`.
    pub(crate) fn reuse(&self, rank: u32) {
        self.rank.store(rank, Ordering::Relaxed);
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
    /// The world rank it acts for.
    pub(crate) rank: u32,
    /// Its park slot (the rank itself, or a task's own slot).
    pub(crate) slot: u32,
    /// The worker it is pinned to.
    pub(crate) worker: u32,
    pub(crate) yielder: *const Yielder<(), Suspend>,
    /// `initialize()` was called (or the universe was handed to the body).
    pub(crate) initialized: Cell<bool>,
    /// The rank's `rank_local!` values (refusing every access in contexts
    /// that are not a rank's own: tasks, OS threads).
    pub(crate) locals: super::locals::RankLocals,
}

impl std::fmt::Debug for RankCtx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RankCtx")
            .field("rank", &self.rank)
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

    /// Suspends the rank, returning control to its worker. (An OS thread's
    /// context only yields its thread: its waits go through
    /// `sched::thread::park_once`.)
    #[inline]
    pub(crate) fn suspend(&self, why: Suspend) {
        if self.is_thread() {
            debug_assert_eq!(
                why,
                Suspend::Yielded,
                "thread contexts park in sched::thread"
            );
            std::thread::yield_now();
            return;
        }
        // SAFETY: the yielder belongs to the coroutine running this rank,
        // which is the code calling us (contexts are only reachable while
        // their rank runs).
        let yielder = unsafe { &*self.yielder };
        yielder.suspend(why);
    }
}

thread_local! {
    static CURRENT: Cell<*const RankCtx> = const { Cell::new(ptr::null()) };
}

/// The context of the rank running on this thread, if any.
#[inline]
pub(crate) fn current() -> Option<&'static RankCtx> {
    let ctx = CURRENT.with(|c| c.get());
    // SAFETY: the pointer is set by the worker (or the rank itself) to a
    // context that lives on the running rank's stack, and cleared when the
    // rank suspends or ends; a rank never runs on another thread, so the
    // reference cannot outlive the rank while the rank uses it. The 'static
    // is a lie confined to this crate: callers never store it.
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

    #[test]
    fn a_slot_keeps_the_label_of_a_wait() {
        let slot = Slot::new(0);
        let site = Location::caller();
        let mut info = WaitInfo::simple(WaitOp::Collective, site);
        info.label = Some(&"barrier");
        slot.set_wait(&info);
        assert_eq!(slot.wait().unwrap().label, Some(&"barrier"));
        slot.set_wait(&WaitInfo::simple(WaitOp::Receive, site));
        assert_eq!(slot.wait().unwrap().label, None);
    }
}
