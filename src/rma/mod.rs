//! One-sided communication (RMA): the shared state of a window and the
//! protocols of its epochs (layer L4; the public API is `crate::window`,
//! L5).
//!
//! ## A window is a few pointers per rank
//!
//! In one process every rank's memory is addressable by every other, so a
//! window is one [`WinShared`] that all its ranks hold (`Arc`): per rank a
//! [`Segment`] (base address, length, displacement unit) and the state of
//! its synchronisation (lock word, accumulate lock, post/complete counts,
//! parked waiters), plus a barrier for `fence` and `free`. Creation is one
//! collective call of the communicator (kind `window_create`, ordered and
//! checked with its other collectives): the ranks meet in the call's round
//! (`coll/round.rs`), the first to arrive makes the `WinShared` and leaves
//! it in the round (`Round::attachment`), every rank takes its `Arc`,
//! publishes its own segment (Release) and returns without waiting for the
//! others. An origin that reaches a segment not yet published parks until
//! its owner publishes it (`region_ready`; the publisher wakes the
//! segment's waiters), which MPI allows: window creation is collective, not
//! synchronising. So creation is cheaper than a barrier, and creation +
//! free (whose barrier is needed: see below) costs about one barrier plus
//! one allocation: no exchange of addresses by messages, no registration.
//!
//! Windows over communicators whose ranks span processes are refused with
//! [`Error::Unsupported`] until the transport exists. The design stays open
//! for it: an operation names its target by rank and displacement, never by
//! address, and goes through [`WinShared`]'s functions, which would send
//! the operation as a frame that the target process's progress applies to
//! the segment (passive target), instead of copying.
//!
//! ## Who touches a segment, and until when
//!
//! An origin reaches a target's memory only inside an operation, between
//! entering and leaving the segment's [`Gate`](access::Gate) (`access.rs`):
//! a copy or an accumulate that never blocks. The owner lends its memory
//! from creation until it frees the window: `free` is collective (a
//! barrier of the window: every rank has closed its epochs, so nobody
//! accesses any more), and then closes its gate. A rank that unwinds (a
//! panic, or a failed job's teardown) closes its gate and waits for the
//! accesses in progress before its memory goes away; later accesses get
//! [`RmaError::TargetGone`]. The window API (`window/`) makes sure every
//! window is freed or closed this way: windows over a borrowed buffer only
//! live inside a closure that frees them, and allocated ones own their
//! memory (forgetting one leaks it, never frees it under a peer).
//!
//! ## Synchronisation
//!
//! * Passive target: each segment's lock word ([`LockWord`]): shared holders
//!   counted in the low bits, an exclusive holder as the top bit (its rank
//!   kept beside it for deadlock reports). A refused locker registers on
//!   the segment's waiter list, tries again, then parks; an unlock wakes the
//!   list (register, re-check, park: no lost wake-up, as in `round.rs`).
//!   The target takes no part: an origin completes its whole epoch while
//!   the target computes. `lock_all` does not take a shared lock on each
//!   segment (O(ranks) atomics per epoch): it is one window-wide count
//!   ([`LockAll`]), and an exclusive locker, after taking its segment's
//!   word, announces itself in a window-wide count and waits until no
//!   `lock_all` epoch is open; a `lock_all` that sees an exclusive locker
//!   backs off and waits for the exclusive locks to end. Shared locks of
//!   one rank and `lock_all` never conflict, so they need not meet.
//! * Fence and free: the window's [`Barrier`] (generation counting, one
//!   list of parked ranks).
//! * Post/start/complete/wait: per target, the number of exposure epochs it
//!   posted and of completes it received. An origin's `start` waits until
//!   each target posted more epochs than the origin started with it before
//!   (the origin counts those itself); `complete` adds one to each target's
//!   completes; a target's `wait` waits until its completes reach the sum of
//!   its posts' group sizes.
//! * Accumulates: one lock per segment ([`Segment::acc`]) held for the
//!   whole read-modify-write of an operation, so accumulates to one
//!   location are atomic with respect to each other, element by element
//!   (base value by base value through a target datatype: `target.rs`
//!   gathers the target's runs, the operation combines the packed values,
//!   the runs are written back, all under the lock).
//!
//! ## Target datatypes
//!
//! An operation with a target datatype (`*_placed`) names `count`
//! elements of a type map at a displacement ([`Placed`]); `target.rs`
//! checks their span against the segment and their base values against
//! the window's element type ([`Elements`]), and `for_runs` walks their
//! data runs in type-map order, each copied by `access.rs` like a simple
//! put or get. The origin side arrives packed (the window layer packs it,
//! or passes a contiguous buffer as it is).
//!
//! ## Memory ordering
//!
//! Operations complete when they return (the origin copied), so data is
//! visible to whoever synchronises with the origin afterwards: unlock
//! (Release on the lock word) before the next lock (Acquire), every
//! arrival at a barrier (AcqRel) before the waiters' Acquire of the
//! generation, `complete` (Release) before `wait` (Acquire), and `post`
//! (Release) before `start` (Acquire). `flush` has nothing to wait for in
//! one process; it is a fence for the memory of shared windows that ranks
//! also load and store directly.

pub(crate) mod access;
mod target;

pub(crate) use target::{Elements, Placed};

use std::sync::atomic::{
    fence, AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering,
};
use std::sync::Arc;

use crate::coll::check::Signature;
use crate::coll::op::{apply, check_supported, OpRef};
use crate::coll::{Algorithm, Collective, CommCore};
use crate::datatype::TypeMap;
use crate::error::{Error, RmaError};
use crate::sched::{self, shared_copy, RankCtx, WaitInfo, WaitOp};
use crate::sync::spin::SpinLock;
use crate::Rank;
use access::Gate;

/// How a window's memory was made; every rank must create the same kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum WinKind {
    /// Over a buffer the user lends (`MPI_Win_create`).
    Created = 0,
    /// Allocated by the runtime (`MPI_Win_allocate`).
    Allocated = 1,
    /// Allocated, and peers may load and store directly
    /// (`MPI_Win_allocate_shared`).
    Shared = 2,
}

/// One rank's memory in a window, as the creating rank described it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Region {
    pub(crate) base: *mut u8,
    pub(crate) bytes: usize,
    pub(crate) unit: usize,
}

/// The window's element type, as operations pass it: its map and what the
/// placement check needs of it (computed once per window handle).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Element<'a> {
    pub(crate) map: &'a TypeMap,
    pub(crate) elements: &'a Elements,
}

/// The error of a base value that would not land on the window
/// elements' own (`Elements::check`'s `Err`).
#[cold]
fn misplaced(
    op: &'static str,
    target: Rank,
    map: &TypeMap,
    element: Element<'_>,
    (_, kind, byte): (usize, crate::datatype::BaseKind, i128),
) -> Error {
    Error::Rma(RmaError::Misplaced {
        op,
        target,
        kind,
        byte: saturate(byte),
        datatype: map.name().to_string(),
        element: element.map.name().to_string(),
    })
}

/// `x` as an `i64`, saturated (bytes of errors).
fn saturate(x: i128) -> i64 {
    i64::try_from(x).unwrap_or(if x < 0 { i64::MIN } else { i64::MAX })
}

/// Calls `f(run, packed, len)` for each data run of `at`'s elements whose
/// buffer address is `addr`, in type-map order: `run` its address, `len`
/// its bytes, `packed` the bytes of the runs before it.
fn for_runs(addr: *mut u8, at: Placed<'_>, mut f: impl FnMut(*mut u8, usize, usize)) {
    let map = at.map;
    let first = addr.wrapping_offset(map.lb());
    if map.is_contiguous() {
        if at.count > 0 {
            f(first, 0, at.count * map.size());
        }
        return;
    }
    let mut packed = 0;
    for e in 0..at.count {
        let element = first.wrapping_add(e * map.extent());
        for s in map.segments() {
            f(element.wrapping_add(s.offset), packed, s.len);
            packed += s.len;
        }
    }
}

/// Numbers windows for deadlock reports (process-wide, in creation order).
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// The state of one window that all its ranks share.
#[derive(Debug)]
pub(crate) struct WinShared {
    id: u64,
    kind: WinKind,
    segments: Box<[Segment]>,
    barrier: Barrier,
    all: Padded<LockAll>,
}

/// The window-wide side of passive-target locks: `lock_all` epochs are
/// one count here instead of a shared lock on every segment, and
/// exclusive lockers announce themselves here so that `lock_all` can see
/// them without looking at every segment. An exclusive locker first takes
/// the segment's lock word, then adds itself to `exclusive` and waits
/// until `shared` is zero; a `lock_all` adds itself to `shared` and
/// proceeds only if `exclusive` is zero, else backs off and waits. Both
/// counts are SeqCst: of an exclusive locker and a `lock_all` that race,
/// at least one sees the other.
#[derive(Debug, Default)]
struct LockAll {
    /// Open `lock_all` epochs.
    shared: AtomicU32,
    /// Exclusive locks held or being taken, on any rank.
    exclusive: AtomicU32,
    /// Ranks waiting for either count to drop to zero.
    waiters: SpinLock<Vec<u32>>,
}

/// One rank's part of a window: its memory and the state of the epochs
/// that target it. On its own cache lines: origins of different targets
/// do not share lines.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct Segment {
    base: AtomicPtr<u8>,
    bytes: AtomicUsize,
    unit: AtomicUsize,
    /// Set (Release) once the owner wrote the three fields above.
    published: AtomicBool,
    gate: Gate,
    lock: LockWord,
    /// Held for the whole read-modify-write of an accumulate.
    acc: SpinLock<()>,
    /// Exposure epochs this rank posted.
    posts: AtomicU32,
    /// Origins that completed an access epoch on this rank.
    completes: AtomicU32,
    /// Parked ranks waiting for this segment's lock, posts or completes.
    waiters: SpinLock<Vec<u32>>,
}

/// A lock request's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LockKind {
    Shared,
    Exclusive,
}

/// A segment's passive-target lock: shared holders counted in the low
/// bits, an exclusive holder as [`LockWord::WRITER`].
#[derive(Debug)]
pub(crate) struct LockWord {
    state: AtomicU32,
    /// The exclusive holder's rank (-1: none), for deadlock reports.
    holder: AtomicI32,
}

impl Default for LockWord {
    fn default() -> LockWord {
        LockWord {
            state: AtomicU32::new(0),
            holder: AtomicI32::new(-1),
        }
    }
}

impl LockWord {
    const WRITER: u32 = 1 << 31;

    fn try_lock(&self, kind: LockKind, rank: Rank) -> bool {
        match kind {
            LockKind::Exclusive => {
                let won = self
                    .state
                    .compare_exchange(0, Self::WRITER, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok();
                if won {
                    self.holder.store(rank, Ordering::Relaxed);
                }
                won
            }
            LockKind::Shared => {
                let mut s = self.state.load(Ordering::Relaxed);
                loop {
                    if s & Self::WRITER != 0 {
                        return false;
                    }
                    match self.state.compare_exchange_weak(
                        s,
                        s + 1,
                        Ordering::Acquire,
                        Ordering::Relaxed,
                    ) {
                        Ok(_) => return true,
                        Err(now) => s = now,
                    }
                }
            }
        }
    }

    /// Releases; `true` if the lock became free (waiters may proceed).
    fn unlock(&self, kind: LockKind) -> bool {
        match kind {
            LockKind::Exclusive => {
                self.holder.store(-1, Ordering::Relaxed);
                self.state.store(0, Ordering::Release);
                true
            }
            LockKind::Shared => self.state.fetch_sub(1, Ordering::Release) == 1,
        }
    }

    /// The exclusive holder's rank, if an exclusive lock is held.
    fn writer(&self) -> Option<i32> {
        let s = self.state.load(Ordering::Relaxed);
        (s & Self::WRITER != 0).then(|| self.holder.load(Ordering::Relaxed))
    }

    /// Who holds it, as `WaitOp::RmaLock`'s `tag` says: the exclusive
    /// holder's rank, or minus the number of shared holders.
    fn holder(&self) -> i32 {
        let s = self.state.load(Ordering::Relaxed);
        if s & Self::WRITER != 0 {
            self.holder.load(Ordering::Relaxed)
        } else {
            -(s as i32)
        }
    }
}

/// A barrier of the window's ranks (`fence`, `free`): generation counting,
/// parked ranks listed per worker (no lock shared by all workers, one
/// batch of wake-ups per worker).
#[derive(Debug)]
struct Barrier {
    arrived: AtomicU32,
    generation: AtomicU32,
    waiters: Box<[Padded<SpinLock<Vec<u32>>>]>,
}

/// A value on its own cache lines.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Padded<T>(T);

/// Where a window call comes from, for waits and errors.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Caller<'a> {
    pub(crate) comm: &'a CommCore,
    pub(crate) ctx: &'a RankCtx,
    pub(crate) site: &'static std::panic::Location<'static>,
}

impl Caller<'_> {
    fn rank(&self) -> Rank {
        self.comm.rank()
    }
}

/// Registers the caller on `list`, re-checks `ready`, parks; until `ready`.
fn wait_on(
    list: &SpinLock<Vec<u32>>,
    caller: &Caller<'_>,
    info: impl Fn() -> WaitInfo,
    ready: impl Fn() -> bool,
) -> Result<(), Error> {
    loop {
        if ready() {
            return Ok(());
        }
        list.lock().push(caller.ctx.slot);
        if ready() {
            return Ok(());
        }
        sched::park_once(caller.ctx, &info())?;
    }
}

/// Wakes every rank parked on `list` (after making a condition true).
fn wake(list: &SpinLock<Vec<u32>>, comm: &CommCore) {
    let waiters = {
        let mut list = list.lock();
        if list.is_empty() {
            return;
        }
        std::mem::take(&mut *list)
    };
    sched::unpark_many(comm.job().sched(), &waiters);
}

/// Creates a window over `region` (this rank's memory): a collective call
/// of `comm`, which every rank makes with the same `kind`.
pub(crate) fn create(
    comm: &CommCore,
    region: Region,
    kind: WinKind,
    site: &'static std::panic::Location<'static>,
) -> Result<Arc<WinShared>, Error> {
    if region.unit == 0 {
        return Err(Error::Rma(RmaError::ZeroUnit));
    }
    let locality = &comm.shared().locality;
    if !locality.is_all_local() {
        return Err(Error::unsupported(format!(
            "windows over a communicator whose ranks span {} processes (communicator {}): \
             one-sided communication between processes needs the transport",
            locality.processes(),
            comm.name()
        )));
    }
    // The kind rides in the signature's root: a rank that creates another
    // kind of window is a collective mismatch.
    let signature = Signature::new(Collective::WindowCreate, Some(kind as Rank), None);
    let call = crate::coll::begin(comm, signature, Algorithm::Auto, site)?;
    let rounds = &comm.coll().rounds;
    let round = rounds.join_checked(&call)?;
    let size = comm.size() as usize;
    let shared = round.attachment(|| {
        let workers = comm.job().sched().worker_count().max(1);
        Arc::new(WinShared {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            kind,
            segments: (0..size).map(|_| Segment::default()).collect(),
            barrier: Barrier {
                arrived: AtomicU32::new(0),
                generation: AtomicU32::new(0),
                waiters: (0..workers).map(|_| Padded::default()).collect(),
            },
            all: Padded::default(),
        })
    });
    let Some(shared) = shared else {
        rounds.leave(&call, round);
        unreachable!("the round's check lets only window creations share a round");
    };
    let own = &shared.segments[comm.rank() as usize];
    own.base.store(region.base, Ordering::Relaxed);
    own.bytes.store(region.bytes, Ordering::Relaxed);
    own.unit.store(region.unit, Ordering::Relaxed);
    // Release: whoever sees the flag (Acquire) sees the fields.
    own.published.store(true, Ordering::Release);
    wake(&own.waiters, comm);
    // Nobody waits here for the others: an origin that reaches a segment
    // not yet published waits for it then (`region_ready`). The round
    // stays until every rank has taken the window from it.
    rounds.leave(&call, round);
    Ok(shared)
}

/// How a large get is shared with idle workers (`sched::shared_copy`): a
/// shrink to 20 ranks has every target on one worker (block placement), so
/// RMA2's gets ran on one CPU while COL's senders spread their copies
/// (`redistribute --mib 64` 160:20, RMA2 Blocking 8.9-9.2 -> 6.7-6.8 ms).
const SHARED_GET: shared_copy::Cut = shared_copy::Cut {
    from: 256 << 10,
    piece: 64 << 10,
};

impl WinShared {
    /// The window's number (deadlock reports, errors).
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    pub(crate) fn kind(&self) -> WinKind {
        self.kind
    }

    pub(crate) fn size(&self) -> Rank {
        self.segments.len() as Rank
    }

    /// Rank `rank`'s region, once it is published (`rank` checked by the
    /// caller).
    fn region(&self, rank: Rank) -> Option<Region> {
        let s = &self.segments[rank as usize];
        if !s.published.load(Ordering::Acquire) {
            return None;
        }
        Some(Region {
            base: s.base.load(Ordering::Relaxed),
            bytes: s.bytes.load(Ordering::Relaxed),
            unit: s.unit.load(Ordering::Relaxed),
        })
    }

    /// Rank `rank`'s region, waiting (parked) until that rank has made its
    /// part of the window: creation does not wait for the other ranks.
    #[inline]
    pub(crate) fn region_ready(&self, comm: &CommCore, rank: Rank) -> Result<Region, Error> {
        match self.region(rank) {
            Some(region) => Ok(region),
            None => self.region_slow(comm, rank),
        }
    }

    #[cold]
    fn region_slow(&self, comm: &CommCore, rank: Rank) -> Result<Region, Error> {
        let caller = Caller {
            comm,
            ctx: comm.caller()?,
            site: std::panic::Location::caller(),
        };
        let seg = &self.segments[rank as usize];
        let info = || WaitInfo {
            op: WaitOp::Other,
            label: Some(&"window access (waiting for the target to create its part)"),
            peer: rank,
            tag: WaitInfo::NO_TAG,
            comm: comm.p2p_context(),
            site: caller.site,
        };
        wait_on(&seg.waiters, &caller, info, || {
            seg.published.load(Ordering::Acquire)
        })?;
        Ok(self.region(rank).expect("published"))
    }

    /// Checks `target` against the window's ranks.
    pub(crate) fn check_rank(&self, op: &'static str, target: Rank) -> Result<(), Error> {
        if (0..self.size()).contains(&target) {
            Ok(())
        } else {
            Err(Error::Rank {
                op,
                rank: target,
                size: self.size(),
            })
        }
    }

    /// The address of `bytes` bytes (whole elements of the window's type)
    /// at displacement `disp` of `target`'s segment, checked to lie inside
    /// it, and on its elements' base values when `disp` falls inside an
    /// element.
    #[inline(always)]
    fn locate(
        &self,
        comm: &CommCore,
        op: &'static str,
        target: Rank,
        disp: usize,
        bytes: usize,
        element: Element<'_>,
    ) -> Result<*mut u8, Error> {
        self.check_rank(op, target)?;
        let region = self.region_ready(comm, target)?;
        let offset = disp.checked_mul(region.unit);
        match offset {
            Some(offset)
                if offset
                    .checked_add(bytes)
                    .is_some_and(|end| end <= region.bytes) =>
            {
                element
                    .elements
                    .check_own(offset, bytes)
                    .map_err(|miss| misplaced(op, target, element.map, element, miss))?;
                Ok(region.base.wrapping_add(offset))
            }
            _ => Err(Error::Rma(RmaError::OutOfRange {
                op,
                target,
                offset: offset.unwrap_or(usize::MAX),
                bytes,
                segment: region.bytes,
            })),
        }
    }

    /// Runs `access` on `bytes` bytes at `disp` of `target`'s segment while
    /// holding the segment's gate.
    #[allow(clippy::too_many_arguments)]
    fn with_target<R>(
        &self,
        comm: &CommCore,
        op: &'static str,
        target: Rank,
        disp: usize,
        bytes: usize,
        element: Element<'_>,
        access: impl FnOnce(*mut u8) -> R,
    ) -> Result<R, Error> {
        let at = self.locate(comm, op, target, disp, bytes, element)?;
        self.through_gate(op, target, || access(at))
    }

    /// Runs `access` while holding `target`'s gate.
    fn through_gate<R>(
        &self,
        op: &'static str,
        target: Rank,
        access: impl FnOnce() -> R,
    ) -> Result<R, Error> {
        let gate = &self.segments[target as usize].gate;
        if !gate.enter() {
            return Err(Error::Rma(RmaError::TargetGone { op, target }));
        }
        let out = access();
        gate.leave();
        Ok(out)
    }

    /// The buffer address of a target datatype's elements in `target`'s
    /// segment: their data checked to lie inside it ([`target::span`]) and
    /// on the window elements' base values ([`Elements::check`]).
    fn locate_placed(
        &self,
        comm: &CommCore,
        op: &'static str,
        target: Rank,
        at: Placed<'_>,
        element: Element<'_>,
    ) -> Result<*mut u8, Error> {
        self.check_rank(op, target)?;
        let region = self.region_ready(comm, target)?;
        let out_of_range = |start: i128, end: i128| {
            Error::Rma(RmaError::TargetOutOfRange {
                op,
                target,
                datatype: at.map.name().to_string(),
                count: at.count,
                start: saturate(start),
                end: saturate(end),
                segment: region.bytes,
            })
        };
        let Some(offset) = at.disp.checked_mul(region.unit) else {
            let start = at.disp as i128 * region.unit as i128;
            return Err(out_of_range(start, start));
        };
        let scan = target::Scan::of(at.map);
        let (start, end) = target::span(offset, at.map, at.count, &scan);
        if start < 0 || end > region.bytes as i128 {
            return Err(out_of_range(start, end));
        }
        element
            .elements
            .check(offset, at.map, at.count, &scan)
            .map_err(|miss| misplaced(op, target, at.map, element, miss))?;
        Ok(region.base.wrapping_add(offset))
    }

    /// `MPI_Put` with a target datatype: the packed origin data at `src`
    /// (`at.count * at.map.size()` bytes, the signature's base values in
    /// order) goes to the data runs of `at` in `target`'s segment.
    ///
    /// # Safety
    ///
    /// `src` valid for reads of that many bytes that nobody writes
    /// meanwhile.
    pub(crate) unsafe fn put_placed(
        &self,
        comm: &CommCore,
        target: Rank,
        at: Placed<'_>,
        element: Element<'_>,
        src: *const u8,
    ) -> Result<(), Error> {
        let addr = self.locate_placed(comm, "put", target, at, element)?;
        self.through_gate("put", target, || {
            for_runs(addr, at, |run, packed, len| {
                // SAFETY: [1] `run` is `len` bytes inside the target's
                // segment (`locate_placed` checked the span of all runs),
                // valid while the gate is held; [2] `packed + len` is
                // within the caller's packed data (the runs' lengths sum
                // to its size).
                unsafe { access::store(run, src.add(packed), len) }
            })
        })
    }

    /// `MPI_Get` with a target datatype: the data runs of `at` in
    /// `target`'s segment, packed into `dst`.
    ///
    /// # Safety
    ///
    /// `dst` valid for writes of `at.count * at.map.size()` bytes that
    /// nobody else accesses.
    pub(crate) unsafe fn get_placed(
        &self,
        comm: &CommCore,
        target: Rank,
        at: Placed<'_>,
        element: Element<'_>,
        dst: *mut u8,
    ) -> Result<(), Error> {
        let addr = self.locate_placed(comm, "get", target, at, element)?;
        self.through_gate("get", target, || {
            for_runs(addr, at, |run, packed, len| {
                // SAFETY: as in `put_placed`, roles swapped.
                unsafe { access::load(dst.add(packed), run, len) }
            })
        })
    }

    /// The accumulate family with a target datatype, under the target
    /// segment's accumulate lock: the data runs of `at` are packed into
    /// scratch, copied to `fetched` if given, combined with the packed
    /// `input` (`op: None`: replaced by it) if given, and written back.
    ///
    /// # Safety
    ///
    /// `input` valid for reads and `fetched` for writes of `at.count *
    /// at.map.size()` bytes, not window memory, nobody else writing them.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn accumulate_placed(
        &self,
        comm: &CommCore,
        name: &'static str,
        target: Rank,
        at: Placed<'_>,
        element: Element<'_>,
        op: Option<&OpRef<'_>>,
        input: Option<*const u8>,
        fetched: Option<*mut u8>,
    ) -> Result<(), Error> {
        if let Some(op) = op {
            check_supported(op, at.map)?;
        }
        let addr = self.locate_placed(comm, name, target, at, element)?;
        let bytes = at.count * at.map.size();
        let packed_map = TypeMap::packed(at.map);
        let mut tmp = vec![0u8; bytes];
        let seg = &self.segments[target as usize];
        self.through_gate(name, target, || {
            let _held = seg.acc.lock();
            let tmp = tmp.as_mut_ptr();
            for_runs(addr, at, |run, packed, len| {
                // SAFETY: as in `get_placed`, into our scratch.
                unsafe { access::load(tmp.add(packed), run, len) }
            });
            // SAFETY: [1] `tmp`, `fetched` and `input` hold `bytes` bytes
            // each, disjoint (the caller's contract, our scratch); [2] the
            // packed map has the target's signature, and `op` was checked
            // for it; `apply` reads and writes base values unaligned.
            unsafe {
                if let Some(fetched) = fetched {
                    std::ptr::copy_nonoverlapping(tmp, fetched, bytes);
                }
                let Some(input) = input else { return };
                let result = match op {
                    Some(op) => {
                        apply(op, &packed_map, input, tmp, at.count);
                        tmp.cast_const()
                    }
                    None => input,
                };
                for_runs(addr, at, |run, packed, len| {
                    // SAFETY: as in `put_placed`.
                    access::store(run, result.add(packed), len)
                });
            }
        })
    }

    /// Copies `bytes` bytes from `src` to displacement `disp` of `target`.
    ///
    /// # Safety
    ///
    /// `src` valid for reads of `bytes` bytes that nobody writes meanwhile.
    pub(crate) unsafe fn put(
        &self,
        comm: &CommCore,
        target: Rank,
        disp: usize,
        element: Element<'_>,
        src: *const u8,
        bytes: usize,
    ) -> Result<(), Error> {
        self.with_target(comm, "put", target, disp, bytes, element, |at| {
            // SAFETY: `at` is `bytes` bytes inside the target's segment
            // (`locate`), which stays valid while the gate is held (the
            // owner drains the gate before its memory goes); `src` is the
            // caller's contract.
            unsafe { access::store(at, src, bytes) }
        })
    }

    /// Copies `bytes` bytes from displacement `disp` of `target` to `dst`.
    ///
    /// # Safety
    ///
    /// `dst` valid for writes of `bytes` bytes that nobody else accesses.
    pub(crate) unsafe fn get(
        &self,
        comm: &CommCore,
        target: Rank,
        disp: usize,
        element: Element<'_>,
        dst: *mut u8,
        bytes: usize,
    ) -> Result<(), Error> {
        self.with_target(comm, "get", target, disp, bytes, element, |at| {
            let origin = if bytes >= SHARED_GET.from {
                sched::rank::with_current(|ctx| ctx.map(|ctx| ctx.rank))
            } else {
                None
            };
            match origin {
                // SAFETY: as in `put`, roles swapped; the gate is held
                // until the shared copy returns.
                Some(rank) => unsafe {
                    shared_copy::copy(
                        comm.job().sched(),
                        rank,
                        SHARED_GET,
                        dst,
                        at,
                        bytes,
                        access::load_streaming,
                    )
                },
                // SAFETY: as in `put`, roles swapped.
                None => unsafe { access::load_streaming(dst, at, bytes) },
            }
        })
    }

    /// The accumulate family: under the target segment's accumulate lock,
    /// copies the target's `count` elements (of `map`) at `disp` to
    /// `fetched` if given, then, if `input` is given, replaces them with
    /// `input op target` (`op: None`: with `input`, MPI_REPLACE), or, with
    /// `compare`, with `input` if they equal `compare` byte for byte.
    ///
    /// # Safety
    ///
    /// `input`, `compare` valid for reads and `fetched` for writes of
    /// `count` elements laid out as `map` (from its lower bound), none of
    /// them window memory, nobody else writing them meanwhile.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn accumulate(
        &self,
        comm: &CommCore,
        name: &'static str,
        target: Rank,
        disp: usize,
        element: Element<'_>,
        count: usize,
        op: Option<&OpRef<'_>>,
        input: Option<*const u8>,
        compare: Option<*const u8>,
        fetched: Option<*mut u8>,
    ) -> Result<(), Error> {
        let map = element.map;
        if let Some(op) = op {
            check_supported(op, map)?;
        }
        let bytes = count * map.extent();
        let seg = self.segments.get(target as usize);
        self.with_target(comm, name, target, disp, bytes, element, |at| {
            let seg = seg.expect("checked by locate");
            // Scratch for the target's elements, aligned for any base type
            // (on the stack for the small cases: fetch_and_op, a few values).
            let mut small = [0u64; 8];
            let mut large = Vec::new();
            let tmp = if bytes <= std::mem::size_of_val(&small) {
                small.as_mut_ptr() as *mut u8
            } else {
                large.resize(bytes.div_ceil(8), 0u64);
                large.as_mut_ptr() as *mut u8
            };
            let _held = seg.acc.lock();
            // SAFETY: [1] `at` is `bytes` bytes of the target's segment,
            // valid under the gate (as in `put`); [2] `tmp` is `bytes`
            // bytes of our scratch; [3] `input`, `compare` and `fetched`
            // are the caller's, `count` elements of `map` each, none
            // overlapping the scratch; [4] `op` was checked for `map`.
            unsafe {
                access::load(tmp, at, bytes);
                if let Some(fetched) = fetched {
                    std::ptr::copy_nonoverlapping(tmp, fetched, bytes);
                }
                let Some(input) = input else { return };
                if let Some(compare) = compare {
                    let old = std::slice::from_raw_parts(tmp, bytes);
                    if old == std::slice::from_raw_parts(compare, bytes) {
                        access::store(at, input, bytes);
                    }
                    return;
                }
                match op {
                    Some(op) => {
                        let lb = map.lb();
                        apply(
                            op,
                            map,
                            input.wrapping_offset(lb),
                            tmp.wrapping_offset(lb),
                            count,
                        );
                        access::store(at, tmp, bytes);
                    }
                    None => access::store(at, input, bytes),
                }
            }
        })
    }

    /// Takes `target`'s lock for the caller, parking while it is refused.
    /// An exclusive lock also waits until no `lock_all` epoch is open
    /// (those hold a shared lock on every rank: [`LockAll`]).
    pub(crate) fn lock(
        &self,
        caller: &Caller<'_>,
        target: Rank,
        kind: LockKind,
    ) -> Result<(), Error> {
        let seg = &self.segments[target as usize];
        if !seg.lock.try_lock(kind, caller.rank()) {
            return self.lock_contended(caller, target, kind);
        }
        match kind {
            LockKind::Shared => Ok(()),
            LockKind::Exclusive => self.announce_exclusive(caller, target),
        }
    }

    #[cold]
    fn lock_contended(
        &self,
        caller: &Caller<'_>,
        target: Rank,
        kind: LockKind,
    ) -> Result<(), Error> {
        self.lock_slow(caller, target, kind)?;
        match kind {
            LockKind::Shared => Ok(()),
            LockKind::Exclusive => self.announce_exclusive(caller, target),
        }
    }

    /// The window-wide step of an exclusive lock, once its segment's word
    /// is held: counted, then waits for open `lock_all` epochs.
    fn announce_exclusive(&self, caller: &Caller<'_>, target: Rank) -> Result<(), Error> {
        let all = &self.all.0;
        all.exclusive.fetch_add(1, Ordering::SeqCst);
        if all.shared.load(Ordering::SeqCst) != 0 {
            if let Err(err) = self.wait_for_lock_alls(caller, target) {
                self.unlock(caller.comm, target, LockKind::Exclusive);
                return Err(err);
            }
        }
        Ok(())
    }

    #[cold]
    fn lock_slow(&self, caller: &Caller<'_>, target: Rank, kind: LockKind) -> Result<(), Error> {
        let seg = &self.segments[target as usize];
        let info = || WaitInfo {
            op: WaitOp::RmaLock,
            label: Some(match kind {
                LockKind::Shared => &"shared lock",
                LockKind::Exclusive => &"exclusive lock",
            }),
            peer: target,
            tag: seg.lock.holder(),
            comm: self.id,
            site: caller.site,
        };
        wait_on(&seg.waiters, caller, info, || {
            seg.lock.try_lock(kind, caller.rank())
        })
    }

    /// An exclusive locker of `target` that holds the segment's lock word
    /// waits until every `lock_all` epoch has ended (new ones wait for it:
    /// they see its count).
    #[cold]
    fn wait_for_lock_alls(&self, caller: &Caller<'_>, target: Rank) -> Result<(), Error> {
        let all = &self.all.0;
        let info = || WaitInfo {
            op: WaitOp::RmaLock,
            label: Some(&"exclusive lock (behind lock_all epochs)"),
            peer: target,
            tag: -(all.shared.load(Ordering::Relaxed) as i32),
            comm: self.id,
            site: caller.site,
        };
        wait_on(&all.waiters, caller, info, || {
            all.shared.load(Ordering::SeqCst) == 0
        })
    }

    /// Releases `target`'s lock and wakes whoever waits for it.
    pub(crate) fn unlock(&self, comm: &CommCore, target: Rank, kind: LockKind) {
        let seg = &self.segments[target as usize];
        if seg.lock.unlock(kind) {
            wake(&seg.waiters, comm);
        }
        if kind == LockKind::Exclusive {
            self.unannounce_exclusive(comm);
        }
    }

    fn unannounce_exclusive(&self, comm: &CommCore) {
        if self.all.0.exclusive.fetch_sub(1, Ordering::SeqCst) == 1 {
            wake(&self.all.0.waiters, comm);
        }
    }

    /// `lock_all`: a shared lock on every rank, as one count of the window
    /// (O(1), not one lock per rank); waits while an exclusive lock is
    /// held or being taken on any rank.
    pub(crate) fn lock_all(&self, caller: &Caller<'_>) -> Result<(), Error> {
        let all = &self.all.0;
        loop {
            all.shared.fetch_add(1, Ordering::SeqCst);
            if all.exclusive.load(Ordering::SeqCst) == 0 {
                return Ok(());
            }
            // Back off (an exclusive locker may be waiting for the count
            // to drop), then wait for the exclusive locks to end.
            self.unlock_all(caller.comm);
            self.wait_for_exclusives(caller)?;
        }
    }

    #[cold]
    fn wait_for_exclusives(&self, caller: &Caller<'_>) -> Result<(), Error> {
        let all = &self.all.0;
        // For the report: one exclusively locked rank and its holder.
        let info = || {
            let held = self
                .segments
                .iter()
                .enumerate()
                .find_map(|(r, s)| Some((r as Rank, s.lock.writer()?)));
            let (peer, tag) = held.unwrap_or((0, 0));
            WaitInfo {
                op: WaitOp::RmaLock,
                label: Some(&"shared lock (lock_all)"),
                peer,
                tag,
                comm: self.id,
                site: caller.site,
            }
        };
        wait_on(&all.waiters, caller, info, || {
            all.exclusive.load(Ordering::SeqCst) == 0
        })
    }

    /// Ends a `lock_all` epoch.
    pub(crate) fn unlock_all(&self, comm: &CommCore) {
        let all = &self.all.0;
        if all.shared.fetch_sub(1, Ordering::SeqCst) == 1 {
            wake(&all.waiters, comm);
        }
    }

    /// The window's barrier (`fence`, `free`), as call `label`.
    pub(crate) fn barrier(
        &self,
        caller: &Caller<'_>,
        label: sched::rank::Label,
    ) -> Result<(), Error> {
        let b = &self.barrier;
        let generation = b.generation.load(Ordering::Acquire);
        if b.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.segments.len() as u32 {
            b.arrived.store(0, Ordering::Relaxed);
            b.generation
                .store(generation.wrapping_add(1), Ordering::Release);
            for list in b.waiters.iter() {
                wake(&list.0, caller.comm);
            }
            return Ok(());
        }
        let info = || WaitInfo {
            op: WaitOp::Collective,
            label: Some(label),
            peer: WaitInfo::NO_PEER,
            tag: WaitInfo::NO_TAG,
            comm: caller.comm.p2p_context(),
            site: caller.site,
        };
        let list = &b.waiters[caller.ctx.worker as usize % b.waiters.len()].0;
        wait_on(list, caller, info, || {
            b.generation.load(Ordering::Acquire) != generation
        })
    }

    /// `post`: opens an exposure epoch of the caller's segment.
    pub(crate) fn post(&self, caller: &Caller<'_>) {
        let seg = &self.segments[caller.rank() as usize];
        seg.posts.fetch_add(1, Ordering::Release);
        wake(&seg.waiters, caller.comm);
    }

    /// `start`: waits until `target` posted more exposure epochs than
    /// `used` (the epochs of it the caller started before).
    pub(crate) fn wait_posted(
        &self,
        caller: &Caller<'_>,
        target: Rank,
        used: u32,
    ) -> Result<(), Error> {
        let seg = &self.segments[target as usize];
        let info = || WaitInfo {
            op: WaitOp::Other,
            label: Some(&"start (waiting for the target's post)"),
            peer: target,
            tag: WaitInfo::NO_TAG,
            comm: caller.comm.p2p_context(),
            site: caller.site,
        };
        wait_on(&seg.waiters, caller, info, || {
            seg.posts.load(Ordering::Acquire) > used
        })
    }

    /// `complete`: tells `target` that the caller's access epoch is over.
    pub(crate) fn complete(&self, comm: &CommCore, target: Rank) {
        let seg = &self.segments[target as usize];
        seg.completes.fetch_add(1, Ordering::Release);
        wake(&seg.waiters, comm);
    }

    /// `wait`/`test`: whether the caller's segment received `expected`
    /// completes in all.
    pub(crate) fn completed(&self, rank: Rank, expected: u32) -> bool {
        self.segments[rank as usize]
            .completes
            .load(Ordering::Acquire)
            >= expected
    }

    /// `wait`: waits until the caller's segment received `expected`
    /// completes in all.
    pub(crate) fn wait_completes(&self, caller: &Caller<'_>, expected: u32) -> Result<(), Error> {
        let seg = &self.segments[caller.rank() as usize];
        let info = || WaitInfo {
            op: WaitOp::Other,
            label: Some(&"wait (for the origins' complete)"),
            peer: WaitInfo::NO_PEER,
            tag: WaitInfo::NO_TAG,
            comm: caller.comm.p2p_context(),
            site: caller.site,
        };
        wait_on(&seg.waiters, caller, info, || {
            self.completed(caller.rank(), expected)
        })
    }

    /// Closes rank `rank`'s segment to accesses and waits for those in
    /// progress: its memory may go after this.
    pub(crate) fn close(&self, rank: Rank) {
        self.segments[rank as usize].gate.close_and_drain();
    }

    /// `sync` and `flush`: orders the caller's memory accesses (direct
    /// loads and stores of shared windows) with the others'.
    pub(crate) fn sync(&self) {
        fence(Ordering::SeqCst);
    }
}
