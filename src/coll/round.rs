//! Rounds: where the ranks of an in-process communicator meet for one
//! collective call (the scheduler-managed shared-memory path).
//!
//! Call number `seq` of a communicator has one [`Round`], created by the
//! first rank to arrive and removed by the last to leave (found by sequence
//! number in a ring, `ring.rs`, which may keep it to reset for a later call
//! once nobody holds it). Ranks publish
//! their buffers, count their arrival, and park until the round reaches the
//! state they need (everyone arrived, the root arrived, every access done);
//! whoever brings the round to that state wakes the waiters. Data moves
//! once, straight between the ranks' buffers.
//!
//! ## Who may touch another rank's buffers
//!
//! A rank lends its buffers to the round with [`Round::publish`]: it
//! deposits a value describing them (a [`Publish`] type: a layout, a
//! partition, ...) for the others, runs its part of the algorithm, and
//! returns only when no other rank can touch them any more. Another rank
//! reaches a deposit only through an [`Access`], its turn in the round's
//! [`Gate`] (protocol and memory ordering in `published.rs`): taking the
//! turn fails once an owner has closed the round, and an owner leaves
//! either when every turn is over or, on any other way out (its wait failed
//! because the job is failing, a panic, an unwind at teardown), after
//! closing the round and waiting for the turns in progress. Accesses are
//! copies and reductions that never block (a turn never spans a park; user
//! operations may not call MPI, as MPI requires), so that wait is short,
//! and it spins: it must also work where parking is impossible (unwinding),
//! and at teardown, where only OS threads can still be inside a turn.
//!
//! Every rank of a round runs the same algorithm (the round's signature
//! check compares kind and algorithm even with checking off), so the ranks
//! agree on the round's number of turns ([`Readers`]) and on what each
//! deposit holds (also checked, by [`Publish::KIND`]).
//!
//! ## Waiting without losing a wake-up
//!
//! A waiter adds its slot to `waiters` and then re-checks its condition
//! before parking; a waker makes the condition true and then takes the whole
//! list under the same lock. Either the waker's take comes after the
//! waiter's registration (the waiter is woken), or before it, and then the
//! lock orders the condition's update before the waiter's re-check.
//!
//! ## Where a rank's time goes (barrier, 2026-12-02, `main` 6c34d34)
//!
//! Per rank and call: ~820 instructions (callgrind, `coll_count barrier`
//! 100 − 0 calls, 1,024 ranks, 2 workers), 1-worker CPU time 300 ns at
//! 1,024 ranks, 590 at 16,384, 830–870 at 131,072–262,144 (`perf stat`
//! task-clock): the cost grows with the ranks' footprint, not the code.
//! cachegrind (65,536 ranks, 1 worker): ~29 L1 and ~7 last-level data
//! misses per rank and call, most on the rank's own stack frames (blocking
//! call, `barrier`, `wait`, `park`, the switch). With 2 workers (perf
//! cpu-clock), the arrival's `fetch_add` takes ~8 % of the samples, idle
//! polling ~30–35 %. What did not pay: counting arrivals per worker and
//! adding them once per worker (the first deferring rank waits for idle
//! time to add the rest) cut that 8 % but delays that rank: a broadcast's
//! root left the barrier last (256 ranks: 3–5 → 47–71 µs), and a rank that
//! yields in a loop would keep the worker from ever being idle; a plain
//! load and store for the sequence number, and prefetching 1.5 KiB of the
//! next rank's stack before resuming it, changed 1-worker CPU time by less
//! than the noise (±2 %). Prefetching those lines once the page was walked
//! a resume earlier (`worker::Worker::prefetch_next`, queues of 4,096 ranks
//! or more) did pay at a million ranks: 1-worker user time per barrier
//! −21 %, per all-reduce −28 % (startup subtracted). No `Error` (~112
//! bytes) held in the frames a rank parks under ([`Failed`], `blocking` in
//! `collective/mod.rs`): stack from coroutine root to park 1,424 → 1,136 B
//! (barrier), 2,304 → 2,048 (all-reduce); misses per rank and call (65,536
//! ranks) L1 27.5 → 21.6, last-level 6.4 → 5.1; time at a million ranks
//! within the noise once the worker's prefetch window followed (−2–3 %).
//!
//! Per function (2026-12-03, callgrind, `coll_count` 100 − 0 calls, 1,024
//! ranks, 1 worker; inlined code counted where it lands): barrier 746 →
//! 704 instructions per rank and call, all-reduce (8 B) 1,288 → 1,135,
//! broadcast 695 → 637. Barrier now: `collective::begin_boxed` (the whole
//! begin: caller, sequence number, selection, the call written once) 119,
//! `Rounds::join` (the worker's last round, the signature check) 68,
//! `barrier::barrier` (arrive, leave) 66, `Round::wait` 71, the API's
//! `barrier` 25; the scheduler 325 (`worker::run` 107, `park` 83,
//! `Worker::resume` 64, `prefetch_next` 33, `unpark_many` 33) and the
//! example's loop 27. The
//! all-reduce adds `shm_commutative` 185, `reduce::shm` 87,
//! `reduce_body` 70, `all_reduce_into` 68, `op::apply` and
//! `apply_values` 75, `type_hash` 24. What paid: the ring lookup out of
//! line so that the usual join inlines (−39), the usual reduction check
//! (a predefined operation, one base type, one type map by address) and
//! `Shape::fits` by address inlined (−89). What did not: `begin_as`
//! merely inlined into `begin` (no frame merged) cost +24 until
//! `begin_boxed` called it itself (then −1 on the two frames).
//!
//! All-reduce of 8 B (2026-12-04, same count, `coll_count all_reduce N
//! 1024 1`; barrier 633 counted so on `main` 6600496, all-reduce 1,064):
//! 1,064 → 815. Now `reduce_body` 263 (the shared-memory reduction and
//! `Rounds::join` inlined into it), `all_reduce_into` 79, `begin_boxed`
//! 119, `Round::wait` 110 (`Call::wait_info` inlined), the scheduler 206
//! (`run` 140, `prefetch_next` 33, `unpark_many` 33), the example's loop
//! 33. What paid: `op::apply`'s usual case (a predefined operation,
//! contiguous elements of one run) inlined, one value without
//! `apply_values`' loop, a one-run `type_hash` inlined, a contiguous
//! `span` without walking segments (−70); the reduction's result held as a
//! one-word [`Failed`] across `Rounds::leave` instead of a 120-byte
//! `Result` copied whole, the receive layout by reference (−32); folding
//! into and copying out of the accumulator by address, no layout built and
//! dropped (−26); `shm` and `shm_commutative` inlined into `reduce_body`,
//! two frames fewer on the parked stack (−25); `supports` as a table bit,
//! `admit` and `fold` inlined (−44); no drop glue for a wake-up's `Ok` in
//! `wait`, the worker's partial looked up once (−15); the result read
//! without its lock once the round is ready (`SpinLock::get_frozen`, −13);
//! one 8-byte sum inline (−7); a type handle as an address and an optional
//! `Arc` (−6); `Call::wait_info` inlined (−11). What did not:
//! `reduce_body` as `#[inline(always)]` (+10: `reduce` and `blocking` went
//! out of line instead). Time (`coll_bench --ranks 1024 --sizes 8`, 2
//! workers, 6 alternating runs each, 04:08 UTC, load 3.5): all-reduce
//! 81.0–97.7 µs (median 82.6) → 62.0–75.9 (median 68.9), barrier in both
//! 53–65: the 60 µs goal not yet met.
//!
//! 2026-12-04 (same count, `main` 76bd004 as the base: barrier 633,
//! all-reduce 1,064): the ranks a round's last arrival woke resume in a
//! row, the worker's resume loop taking the run queue's head itself when
//! the loop would pick it anyway (`Worker::run_hand_offs`, no hand-off, no
//! remote wake-up, no timer) instead of a round through the run loop's
//! checks per rank: barrier 633 → 589, all-reduce 1,064 → 1,020
//! (`worker::run` 5.01 → 3.01 M of the barrier's 66.5 M). The wakes were
//! already batched (one `unpark_on` post per other worker, one
//! `schedule_batch` extend on the caller's).
//!
//! 2026-12-04 (same count, `main` a979448 as the base: all-reduce 764,
//! barrier 583): one frame from the API's function to the park. The
//! blocking call's steps were four frames (the API's with `blocking`,
//! `begin_boxed`, the body, `Round::wait`), each with its prologue and
//! epilogue, the body's `Result<(), Error>` returned through memory and
//! the `Call` returned in a `Result` built in `begin_boxed`'s frame and
//! copied twice. Now `blocking` builds the `Call` from three words that
//! `begin_boxed` settles (764 -> 743), `wait` is inlined into the waits a
//! barrier and an all-reduce park in (-> 733), the bodies (`reduce_body`,
//! `barrier::barrier`, with `Rounds::join`) into the API's function (->
//! 678), and `begin_boxed` too (-> 631); `Worker::prefetch_next` inlined
//! (-> 618). Barrier 583 -> 443, broadcast 588 -> 523, reduce 530 -> 438.
//! The one frame is larger (all-reduce 768 bytes, the error paths' room
//! among them) but the stack from the API's function to the park shorter
//! (the three frames parked there took 992), and L1 misses fell (cachegrind, 16,384
//! ranks, 10 calls: 27.2 -> 21.8 a rank and call). `wake_all` wakes the
//! other workers' waiters before the caller's: the other worker starts on
//! its own while the caller requeues its. Time (`coll_bench --ranks 1024
//! --sizes 8`, 2 workers, 20 rounds alternating with the base's build,
//! 06:37-06:39 UTC, load 0.5-1.1): in the fast state all-reduce
//! 63.1-66.2 µs (median 63.8) -> 55.1-74.2 (median 57.2), barrier
//! 54.3-59.0 (55.2) -> 44.3-54.0 (45.3); in the slow state all-reduce
//! 131.5 -> 113.9, barrier 106.7 -> 92.4 (medians). 1-worker CPU time of
//! 2,000 calls (`perf stat -e task-clock`, 6 alternating rounds):
//! all-reduce 164.8-170.8 ms -> 129.7-134.6, barrier 136.1-144.1 ->
//! 104.1-113.4. What did not pay: `arrived` on a line of its own, away
//! from `root_ready` and `size` (barrier slower in 9 of 10 rounds: its
//! wait reads `arrived` and `size`, then two lines; all-reduce the same).
//!
//! 2026-12-04 (`main` b2c1ebd as the base, a slower state of the VM: 1,024
//! ranks on 1 worker cost ~185 ns a rank and barrier, against ~52 in the
//! morning's): arrivals counted by worker (`census.rs`). With 2 workers the
//! arrival's `fetch_add` and the waits' loads of `arrived` took ~25 % of
//! the barrier's samples (perf, cpu-clock): the line crossed cores at most
//! arrivals. Unlike the deferred count that did not pay (above), no rank
//! waits to add: the last of a worker's ranks, known from the census, adds
//! them all. `coll_bench --ranks 1024 --sizes 8`, 6 alternating pairs
//! (16:44 UTC): barrier 95–157 µs (median ~127) against 144–190 (~172),
//! all-reduce 129–180 (~146) against 167–211 (~186), faster in 6 of 6
//! pairs each; 1-worker CPU time (`coll_count ... 2000 1024 1`, 4 pairs)
//! barrier 173–189 ns a rank against 181–202, all-reduce 185–196 against
//! 213–223; broadcast at 256 ranks and oversubscribed runs unchanged.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU8, Ordering};
use std::sync::Arc;

use super::census::{self, Census};
use super::op::{self, OpRef};
use super::operand::AlignedBytes;
use super::parts::Parts;
use super::published::Gate;
use super::Call;
use crate::datatype::copy::{self, Layout};
use crate::datatype::TypeHandle;
use crate::error::Error;
use crate::sched;
use crate::sync::spin::SpinLock;

/// A value a rank may publish into a round ([`Round::publish`]) for the
/// other ranks to read through an [`Access`].
///
/// # Safety
///
/// [`KIND`](Self::KIND) must differ between implementors, and a shared
/// reference to the value (and to its [`table`](Self::table)) may be used
/// from the other ranks' threads for as long as its owner stays in the
/// round: its raw pointers, if any, describe buffers whose accesses the
/// round's protocol orders (this is what the raw pointers' missing `Sync`
/// would otherwise forbid).
pub(crate) unsafe trait Publish: 'static {
    /// Tells deposits of different types apart.
    const KIND: u8;
    /// What the readers look up most, one entry per rank say.
    type Entry: Copy + 'static;
    /// Entries whose address the deposit keeps next to the value's, so that
    /// a reader finds its entry without first reading the value (one cache
    /// miss per entry instead of two: see `alltoall.rs`).
    fn table(&self) -> &[Self::Entry] {
        &[]
    }
}

// SAFETY: a layout is an address, a count and a type handle (`Sync`); the
// readers read those and access the memory only under a turn. Kind 1.
unsafe impl Publish for Layout {
    const KIND: u8 = 1;
    type Entry = ();
}

// SAFETY: a layout and plain tables, as above. Kind 2.
unsafe impl Publish for Parts {
    const KIND: u8 = 2;
    type Entry = ();
}

// SAFETY: addresses of the owner's send parts, counts, type map addresses
// (compared, never dereferenced) and a type handle, as above. Kind 3.
unsafe impl Publish for super::alltoall::Outbox {
    const KIND: u8 = 3;
    type Entry = super::alltoall::Slot;
    fn table(&self) -> &[super::alltoall::Slot] {
        self.slots()
    }
}

// SAFETY: two layouts, as above. Kind 4.
unsafe impl Publish for super::scan::Operands {
    const KIND: u8 = 4;
    type Entry = ();
}

/// What one rank deposits: the address of a value it publishes, its kind,
/// and the address and length of its table. Written once per round, by
/// [`Round::publish`] only.
#[derive(Debug, Default)]
pub(crate) struct Deposit {
    value: AtomicPtr<()>,
    table: AtomicPtr<()>,
    len: AtomicU32,
    kind: AtomicU8,
}

impl Deposit {
    fn set<D: Publish>(&self, value: &D) {
        let table = value.table();
        self.kind.store(D::KIND, Ordering::Relaxed);
        self.table
            .store(table.as_ptr() as *mut (), Ordering::Relaxed);
        self.len.store(
            u32::try_from(table.len()).expect("a table of at most one entry per rank"),
            Ordering::Relaxed,
        );
        // Release: the value, its table and the fields above are visible to
        // whoever sees the address.
        self.value
            .store(value as *const D as *mut (), Ordering::Release);
    }

    /// The value's address, if one of type `D` is deposited.
    fn get<D: Publish>(&self) -> Option<NonNull<D>> {
        let value = NonNull::new(self.value.load(Ordering::Acquire))?;
        (self.kind.load(Ordering::Relaxed) == D::KIND).then(|| value.cast())
    }

    /// The table's address and length (after a `get` that saw the value).
    fn table<D: Publish>(&self) -> (*const D::Entry, usize) {
        (
            self.table.load(Ordering::Relaxed) as *const D::Entry,
            self.len.load(Ordering::Relaxed) as usize,
        )
    }
}

/// Which ranks access the published buffers of a round, each once: the
/// round's turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Readers {
    /// Every rank but the root (broadcast, gather, scatter).
    NonRoots,
    /// Every rank (all-to-all, scan).
    Every,
    /// One rank (the rank-order reduction's reducer).
    One,
}

impl Readers {
    fn turns(self, size: u32) -> u32 {
        match self {
            Readers::NonRoots => size.saturating_sub(1),
            Readers::Every => size,
            Readers::One => 1,
        }
    }
}

/// A buffer's type and count without its address: what the readers of data
/// staged in the round compare their buffers with.
#[derive(Debug, Clone)]
pub(crate) struct Shape {
    pub(crate) count: usize,
    pub(crate) ty: TypeHandle,
}

impl Shape {
    /// Whether `layout` has this type (by address, else by type map) and
    /// count. (The usual case, one type by address, inlined; the type maps'
    /// comparison out of line.)
    #[inline(always)]
    pub(crate) fn fits(&self, layout: &Layout) -> bool {
        let (a, b) = (self.ty.map(), layout.ty.map());
        self.count == layout.count && (std::ptr::eq(a, b) || same_map(a, b))
    }

    pub(crate) fn of(layout: &Layout) -> Shape {
        Shape {
            count: layout.count,
            ty: layout.ty.clone(),
        }
    }

    /// A layout of this shape at no real address, for checks that read
    /// only the type and count (never for a copy).
    pub(crate) fn unplaced(&self) -> Layout {
        Layout {
            base: NonNull::<u8>::dangling().as_ptr(),
            count: self.count,
            ty: self.ty.clone(),
        }
    }
}

/// Whether two type maps at different addresses are equal.
#[inline(never)]
fn same_map(a: &crate::datatype::TypeMap, b: &crate::datatype::TypeMap) -> bool {
    a == b
}

/// One collective call of one communicator, shared by its ranks.
///
/// The algorithms take the protocol's steps through its methods (arrive,
/// publish and enter, set and wait for the root, stage, fold into a
/// partial ...); its fields are its own. (`comm_create` is still used by
/// `comm/split.rs` directly, while communicator creation moves into
/// `coll`.)
#[derive(Debug)]
pub(crate) struct Round {
    size: u32,
    /// Ranks that arrived (deposited).
    arrived: AtomicU32,
    /// A flag set by the root (1 once its deposit is published, 2 once its
    /// data is staged in [`shared`](Self::shared)).
    root_ready: AtomicU32,
    left: AtomicU32,
    /// Per worker: its parked slots and its ranks' joins and leaves.
    workers: Box<[Padded<OnWorker>]>,
    /// Per-worker partial results of a commutative reduction.
    partials: Box<[Padded<SpinLock<Accumulator>>]>,
    /// The first caller's signature, for the collective check.
    first: std::sync::OnceLock<(
        super::check::Signature,
        crate::Rank,
        &'static std::panic::Location<'static>,
    )>,
    /// The turns of the ranks that access published buffers.
    gate: Padded<Gate>,
    /// Per-rank deposits, made by the first rank that touches them: a
    /// round where nobody publishes (a barrier, a staged broadcast) never
    /// writes the `size` entries. A broadcast's root that runs calls ahead
    /// of its readers makes each call's round: with the entries made
    /// eagerly, 6 KiB of cold lines at 256 ranks cost it 2–5 µs per call
    /// and the back-to-back loop followed it.
    deposits: std::sync::OnceLock<Box<[Deposit]>>,
    /// A buffer of the round's own (an all-gather's blocks).
    shared: SpinLock<Vec<u8>>,
    /// The data a broadcast's root staged, and its shape: written once,
    /// then only read, so its readers take no lock (two spin locks on
    /// lines every reader of both workers wrote, per reader and call).
    staged: std::sync::OnceLock<(Shape, Vec<u8>)>,
    /// A reduction's result.
    acc: SpinLock<Accumulator>,
    /// The shape of the data in [`shared`](Self::shared).
    root: SpinLock<Option<Shape>>,
    /// Communicator creation: the ranks' requests and the communicators
    /// made for them (protocol in `create.rs`).
    pub(crate) comm_create: SpinLock<super::create::Meeting>,
    /// What the ranks of a call build together and each take a handle to,
    /// made by the first to arrive (`attachment`): a window's shared state
    /// (`rma`), which this layer stores without knowing.
    attached: SpinLock<Option<Arc<dyn std::any::Any + Send + Sync>>>,
}

/// What a round keeps per worker, on lines of their own: only that worker's
/// thread writes them but for the list, which a waker on another thread
/// takes once per wake-up.
#[derive(Debug, Default)]
struct OnWorker {
    /// Parked slots: a rank registers on its own worker's list (no cache
    /// line crosses cores) and a waker requeues each worker's waiters in
    /// one batch.
    waiters: SpinLock<Vec<u32>>,
    /// Ranks of this worker that joined the round since its leaves were
    /// last counted in [`Round::left`] (`Rounds::leave`).
    joined: AtomicU32,
    /// How many of those left.
    left: AtomicU32,
    /// Arrivals of the ranks pinned to this worker (`census.rs`).
    arrived: AtomicU32,
    /// How many of the communicator's ranks are pinned to this worker, if
    /// the round counts arrivals by worker (the communicator's
    /// [`Census`]); written only while the round is not shared (made or
    /// reset).
    expected: Option<u32>,
}

impl OnWorker {
    /// Counts a join by a rank of this worker (its thread only: a plain
    /// load and store, no read-modify-write).
    #[inline]
    fn count_join(&self) {
        let joined = self.joined.load(Ordering::Relaxed);
        self.joined.store(joined + 1, Ordering::Relaxed);
    }
}

/// A rank's turn to access the buffers other ranks published into a round
/// ([`Round::enter`]): while it lives, their owners stay in the round, so
/// the deposits it hands out, and the buffers they describe, stay valid.
/// Dropping it ends the turn.
#[derive(Debug)]
pub(crate) struct Access<'r> {
    round: &'r Round,
    call: &'r Call<'r>,
}

impl Access<'_> {
    /// The value rank `rank` published.
    ///
    /// # Panics
    ///
    /// If rank `rank` published nothing of type `D` in this round (the
    /// algorithm reads a deposit its protocol does not make).
    pub(crate) fn deposit<D: Publish>(&self, rank: usize) -> &D {
        let value = self.round.deposits()[rank]
            .get::<D>()
            .expect("a deposit the round's algorithm makes before any turn");
        // SAFETY: [1] only `Round::publish` sets a deposit, to a reference
        // it holds until it returns, and it returns only once every turn is
        // over or, after closing the gate, every turn in progress is: not
        // while this turn lasts (`published.rs`), and the returned
        // reference borrows this turn; [2] a rank publishes once per round,
        // and after its `publish` returns no turn can start, so the address
        // is its current one; [3] Release/Acquire on the address make the
        // value visible; [4] sharing `&D` with this thread is allowed by
        // `Publish`.
        unsafe { value.as_ref() }
    }

    /// The table of the value rank `rank` published
    /// ([`Publish::table`]), read without reading the value.
    ///
    /// # Panics
    ///
    /// As [`deposit`](Self::deposit).
    pub(crate) fn table<D: Publish>(&self, rank: usize) -> &[D::Entry] {
        let deposit = &self.round.deposits()[rank];
        deposit
            .get::<D>()
            .expect("a deposit the round's algorithm makes before any turn");
        let (entries, len) = deposit.table::<D>();
        // SAFETY: the table is `value.table()` of the value `get` saw (set
        // before the address, with Release, which `get` read with
        // Acquire); it is borrowed from that value, which stays valid
        // while this turn lasts, as in `deposit`.
        unsafe { std::slice::from_raw_parts(entries, len) }
    }
}

impl Drop for Access<'_> {
    fn drop(&mut self) {
        #[cfg(test)]
        tests::on_leave();
        if self.round.gate.leave() {
            self.round.wake_all(self.call);
        }
    }
}

/// A reduction's running result: raw elements of the operands' type, in
/// storage aligned for that type (user operations downcast it to `&[T]`).
///
/// Contributions are admitted ([`start`](Self::start),
/// [`admit`](Self::admit)), reduced into [`layout`](Self::layout) by the
/// caller, then counted ([`count`](Self::count)); one of another type or
/// count than the first is left out and marks the result
/// ([`all_like`](Self::all_like) then fails).
#[derive(Debug, Default)]
pub(crate) struct Accumulator {
    data: AlignedBytes,
    /// Contributions reduced into it so far.
    contributions: u32,
    /// The type and count of the first one, which every other must have.
    shape: Option<Shape>,
    /// A contribution had another type or count (and was left out).
    mismatched: bool,
}

impl Accumulator {
    /// Contributions reduced into it so far.
    #[inline]
    pub(crate) fn contributions(&self) -> u32 {
        self.contributions
    }

    /// Forgets every contribution (keeping the storage): as new.
    fn clear(&mut self) {
        self.contributions = 0;
        self.shape = None;
        self.mismatched = false;
    }

    /// Counts `n` more contributions, reduced into it by the caller.
    #[inline]
    pub(crate) fn count(&mut self, n: u32) {
        self.contributions += n;
    }

    /// Prepares it, before any contribution, for `bytes` bytes of
    /// contributions shaped like `like`.
    #[inline(never)]
    pub(crate) fn start(&mut self, like: &Layout, bytes: usize) {
        self.reserve(bytes, like.ty.map().align());
        self.shape = Some(Shape::of(like));
    }

    /// Admits a contribution like `like` (of `bytes` bytes): `Some(true)`
    /// for the first ([`start`](Self::start)s it: copy it in),
    /// `Some(false)` for a later one of the first's shape (combine it),
    /// `None` for one of another shape, which is left out and marks the
    /// result.
    #[inline]
    pub(crate) fn admit(&mut self, like: &Layout, bytes: usize) -> Option<bool> {
        let first = self.contributions == 0;
        if first {
            self.start(like, bytes);
        } else if !self.shape.as_ref().is_some_and(|s| s.fits(like)) {
            self.mismatched = true;
            return None;
        }
        Some(first)
    }

    /// Reduces the contribution `send` into it: copies it if it is the
    /// `first` ([`admit`](Self::admit)), else combines it with `op`. (A
    /// contiguous type by address, without a layout of the accumulator.)
    #[inline]
    pub(crate) fn fold_in(&mut self, op: &OpRef<'_>, send: &Layout, first: bool) {
        let (dst, map) = (self.ptr(), send.ty.map());
        if !first {
            // SAFETY: the accumulator holds `send.count` elements of its
            // type (started for the shape `send` fits, `admit`), apart
            // from `send`; the operation was checked for the type
            // (`reduce::check`).
            unsafe { op::apply(op, map, send.base, dst, send.count) };
        } else if map.is_contiguous() {
            // SAFETY: as above: room for `send.bytes()` bytes at `dst`.
            unsafe { copy::copy_bytes(send.base, dst, send.bytes()) };
        } else {
            super::operand::copy_same(send, &self.layout(send));
        }
    }

    /// Copies the result, `like.count` elements of `like`'s type, into
    /// `recv` (of that type, holding at least as many).
    #[inline]
    pub(crate) fn copy_to(&self, like: &Layout, recv: &Layout) {
        if like.ty.map().is_contiguous() && recv.ty.map().is_contiguous() {
            let n = like.bytes().min(recv.bytes());
            // SAFETY: the accumulator holds `like.bytes()` bytes of data
            // (started for `like`'s shape, `all_like`); `recv` is a
            // writable buffer of `recv.bytes()` bytes, apart from it.
            unsafe { copy::copy_bytes(self.data.as_ptr(), recv.base as *mut u8, n) };
        } else {
            super::operand::copy_same(&self.layout(like), recv);
        }
    }

    /// Makes it a copy of the completed result `total`, laid out like
    /// `like` in `bytes` bytes (as `total` was started): what the ranks of
    /// one worker then read, on their worker's line.
    pub(crate) fn copy_from(&mut self, total: &mut Accumulator, like: &Layout, bytes: usize) {
        self.clear();
        self.start(like, bytes);
        super::operand::copy_same(&total.layout(like), &self.layout(like));
        self.contributions = total.contributions;
        self.mismatched = total.mismatched;
    }

    /// Marks the result: a contribution was left out.
    pub(crate) fn mark_mismatched(&mut self) {
        self.mismatched = true;
    }

    /// Whether no contribution was left out and the first was like
    /// `like`.
    #[inline]
    pub(crate) fn all_like(&self, like: &Layout) -> bool {
        !self.mismatched && self.shape.as_ref().is_some_and(|s| s.fits(like))
    }

    /// Makes room for `bytes` bytes aligned to `align` (the operands' type
    /// map's), before the first contribution: what was there is not kept.
    pub(crate) fn reserve(&mut self, bytes: usize, align: usize) {
        debug_assert_eq!(self.contributions, 0, "reserved after a contribution");
        if self.data.len() < bytes || self.data.align() < align {
            self.data = AlignedBytes::zeroed(bytes, align);
        }
    }

    pub(crate) fn ptr(&mut self) -> *mut u8 {
        self.data.as_mut_ptr()
    }

    /// The accumulated elements, described with the type and count of
    /// `like` (an operand).
    pub(crate) fn layout(&self, like: &Layout) -> Layout {
        Layout {
            base: self.data.as_ptr(),
            ..like.clone()
        }
    }
}

/// Waiters of another worker that [`Round::wake_all`] wakes itself; more
/// are woken by their worker.
const DIRECT_WAKES: usize = 4;

/// A value on its own cache lines (no false sharing between workers).
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct Padded<T>(pub(crate) T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl Round {
    fn new(size: u32, census: Option<&[u32]>, workers: usize, readers: Option<Readers>) -> Round {
        Round {
            size,
            arrived: AtomicU32::new(0),
            root_ready: AtomicU32::new(0),
            left: AtomicU32::new(0),
            workers: (0..workers)
                .map(|w| {
                    Padded(OnWorker {
                        expected: census.map(|c| c[w]),
                        ..Default::default()
                    })
                })
                .collect(),
            partials: (0..workers).map(|_| Padded::default()).collect(),
            first: std::sync::OnceLock::new(),
            // No readers: no turn is ever granted.
            gate: Padded(Gate::new(readers.map_or(0, |r| r.turns(size)))),
            deposits: std::sync::OnceLock::new(),
            shared: SpinLock::new(Vec::new()),
            staged: std::sync::OnceLock::new(),
            acc: SpinLock::new(Accumulator::default()),
            root: SpinLock::new(None),
            comm_create: SpinLock::new(Default::default()),
            attached: SpinLock::new(None),
        }
    }

    /// Makes a finished round, which nobody else holds, into a new one
    /// for `size` ranks (keeping its allocations): to its users the same as
    /// [`Round::new`]. `false`, changing nothing, if it was made for
    /// another size or worker count.
    fn reset(
        &mut self,
        size: u32,
        census: Option<&[u32]>,
        workers: usize,
        readers: Option<Readers>,
    ) -> bool {
        if self.size != size || self.workers.len() != workers {
            return false;
        }
        *self.arrived.get_mut() = 0;
        *self.root_ready.get_mut() = 0;
        *self.left.get_mut() = 0;
        for (w, on) in self.workers.iter_mut().enumerate() {
            // A waiter that found its condition true after registering
            // left its slot here: it must not be woken by a later call.
            on.0.waiters.lock().clear();
            *on.0.joined.get_mut() = 0;
            *on.0.left.get_mut() = 0;
            *on.0.arrived.get_mut() = 0;
            on.0.expected = census.map(|c| c[w]);
        }
        for partial in self.partials.iter() {
            partial.lock().clear();
        }
        self.first = std::sync::OnceLock::new();
        self.gate = Padded(Gate::new(readers.map_or(0, |r| r.turns(size))));
        // Kept if made (for the same size), but empty: no stale address
        // survives.
        if let Some(deposits) = self.deposits.get_mut() {
            deposits.iter_mut().for_each(|d| *d = Deposit::default());
        }
        self.shared.lock().clear();
        self.staged = std::sync::OnceLock::new();
        self.acc.lock().clear();
        *self.root.lock() = None;
        *self.comm_create.lock() = Default::default();
        *self.attached.lock() = None;
        true
    }

    /// The per-rank deposits, made on first use.
    #[inline]
    fn deposits(&self) -> &[Deposit] {
        self.deposits
            .get_or_init(|| (0..self.size).map(|_| Deposit::default()).collect())
    }

    /// Number of ranks that take part.
    #[inline]
    pub(crate) fn size(&self) -> u32 {
        self.size
    }

    /// The partial result of the caller's worker, into which a commutative
    /// reduction folds the contributions of that worker's ranks.
    #[inline]
    pub(crate) fn own_partial(&self, call: &Call<'_>) -> &SpinLock<Accumulator> {
        &self.partials[call.ctx.worker as usize]
    }

    /// Every worker's partial result, for the last arrival to combine.
    pub(crate) fn partials(&self) -> impl Iterator<Item = &SpinLock<Accumulator>> {
        self.partials.iter().map(|p| &p.0)
    }

    /// A reduction's result: written by the rank that completes it (the
    /// last arrival, or the reducer) before it marks the round ready or
    /// ends its turns, read by the others after.
    #[inline]
    pub(crate) fn result(&self) -> &SpinLock<Accumulator> {
        &self.acc
    }

    /// The root stages its data in the round's own buffer (`fill` writes
    /// it, as data of shape `shape`) and wakes the readers: it does not
    /// wait for them, and they never touch its buffer.
    pub(crate) fn stage(&self, call: &Call<'_>, shape: Shape, fill: impl FnOnce(&mut Vec<u8>)) {
        let mut data = Vec::new();
        fill(&mut data);
        let staged = self.staged.set((shape, data));
        debug_assert!(staged.is_ok(), "a round staged twice");
        self.set_staged(call);
    }

    /// The data the root staged and its shape (once
    /// [`is_staged`](Self::is_staged)).
    pub(crate) fn staged(&self) -> (&Shape, &[u8]) {
        let (shape, data) = self.staged.get().expect("the root staged");
        (shape, data)
    }

    /// The round's own buffer, laid out once by the first caller (`lay_out`
    /// fills it and returns the shape of its data) and never resized after:
    /// its address, valid while the round lives, and the data's shape, the
    /// same for every caller.
    pub(crate) fn own_buffer(
        &self,
        lay_out: impl FnOnce(&mut Vec<u8>) -> Shape,
    ) -> (*mut u8, Shape) {
        let mut shared = self.shared.lock();
        if shared.is_empty() {
            let shape = lay_out(&mut shared);
            *self.root.lock() = Some(shape);
        }
        // Never resized again: the address stays valid while the round lives.
        let base = shared.as_mut_ptr();
        drop(shared);
        let reference = self.root.lock().clone().expect("laid out");
        (base, reference)
    }

    /// The value the ranks of this call share: made by `make` for the
    /// first rank to ask, the same `Arc` for every other. `None` if the
    /// round holds a value of another type (a rank called another
    /// collective; the round's check catches that before).
    pub(crate) fn attachment<A: std::any::Any + Send + Sync>(
        &self,
        make: impl FnOnce() -> Arc<A>,
    ) -> Option<Arc<A>> {
        let mut attached = self.attached.lock();
        let value = attached.get_or_insert_with(|| make());
        Arc::clone(value).downcast::<A>().ok()
    }

    /// Counts the caller's arrival (after its deposit) by worker
    /// (`census.rs`); `true` for the last. The last arrival of a round made
    /// without a census takes it from the round's tallies.
    #[inline]
    pub(crate) fn arrive(&self, call: &Call<'_>) -> bool {
        let on = &self.workers[call.ctx.worker as usize];
        let last = census::arrive(&self.arrived, self.size, &on.arrived, on.expected);
        if last && on.expected.is_none() {
            self.take_census(call);
        }
        last
    }

    /// Records the round's tallies as the communicator's census (the last
    /// arrival of a round without one: every rank of the communicator
    /// counted on the worker it is pinned to, and the arrivals' additions
    /// to `arrived` released those counts to this one).
    #[cold]
    fn take_census(&self, call: &Call<'_>) {
        let tally = self
            .workers
            .iter()
            .map(|on| on.arrived.load(Ordering::Relaxed));
        call.comm.coll().rounds.census.record(tally.collect());
    }

    #[inline]
    pub(crate) fn all_arrived(&self) -> bool {
        self.arrived.load(Ordering::Acquire) == self.size
    }

    /// Counts this rank's arrival (after its deposit) and waits until every
    /// rank has arrived; the last to arrive wakes the others. (Inlined: one
    /// frame less between a rank's call and its park, `barrier.rs`.)
    #[inline]
    pub(crate) fn arrive_and_wait(&self, call: &Call<'_>) -> Result<(), Failed> {
        if self.arrive(call) {
            self.wake_all(call);
            return Ok(());
        }
        self.wait_inline(call, || self.all_arrived())
    }

    /// Publishes `value` as rank `rank`'s deposit, runs `body` (this rank's
    /// part of the algorithm) and waits until every turn of the round is
    /// over: no other rank can touch `value` or the buffers it describes
    /// after this returns. On every other way out (`body` or the wait fails
    /// or unwinds, also at teardown) it closes the round to turns not yet
    /// taken and spins until those in progress are over. `body`'s error
    /// comes first, then the wait's.
    pub(crate) fn publish<D: Publish, R>(
        &self,
        call: &Call<'_>,
        rank: usize,
        value: &D,
        body: impl FnOnce() -> Result<R, Error>,
    ) -> Result<R, Error> {
        /// Closes and drains the gate unless every turn is over.
        struct Settle<'g> {
            gate: &'g Gate,
            finished: bool,
        }
        impl Drop for Settle<'_> {
            fn drop(&mut self) {
                if !self.finished {
                    self.gate.close_and_drain();
                }
            }
        }
        self.deposits()[rank].set(value);
        let mut settle = Settle {
            gate: &self.gate,
            finished: false,
        };
        let out = body();
        let waited = self.wait(call, || self.gate.finished());
        settle.finished = waited.is_ok();
        drop(settle);
        out.and_then(|r| waited.map(|()| r).map_err(Error::from))
    }

    /// Takes this rank's turn to access the deposits of the round. Refused
    /// once an owner has closed the round: its wait failed or it unwinds, so
    /// the job is failing; the refused rank then touches nothing and waits
    /// for that failure to end its own wait (its error is the job's, not a
    /// new one).
    pub(crate) fn enter<'r>(&'r self, call: &'r Call<'_>) -> Result<Access<'r>, Error> {
        if self.gate.enter() {
            #[cfg(test)]
            tests::on_turn();
            return Ok(Access { round: self, call });
        }
        Err(self.refused(call))
    }

    #[cold]
    fn refused(&self, call: &Call<'_>) -> Error {
        match self.wait(call, || false) {
            Err(err) => err.into(),
            Ok(()) => unreachable!("a wait for nothing ends only when it fails"),
        }
    }

    /// Sets `root_ready` (Release) once the root's deposit (or a result) is
    /// in place, and wakes the ranks waiting for it.
    pub(crate) fn set_ready(&self, call: &Call<'_>) {
        self.root_ready.store(1, Ordering::Release);
        self.wake_all(call);
    }

    /// [`set_ready`](Self::set_ready) for a root that staged its data in
    /// [`shared`](Self::shared) rather than leaving its buffer to be read:
    /// it does not wait for the readers.
    pub(crate) fn set_staged(&self, call: &Call<'_>) {
        self.root_ready.store(2, Ordering::Release);
        self.wake_all(call);
    }

    /// Whether the root staged its data (after [`wait_ready`](Self::wait_ready)).
    pub(crate) fn is_staged(&self) -> bool {
        self.root_ready.load(Ordering::Acquire) == 2
    }

    /// Waits until [`set_ready`](Self::set_ready) or
    /// [`set_staged`](Self::set_staged); what was written before it is
    /// visible after.
    #[inline]
    pub(crate) fn wait_ready(&self, call: &Call<'_>) -> Result<(), Failed> {
        self.wait_inline(call, || self.root_ready.load(Ordering::Acquire) != 0)
    }

    /// Parks the caller until `ready()` holds.
    pub(crate) fn wait(&self, call: &Call<'_>, ready: impl Fn() -> bool) -> Result<(), Failed> {
        self.wait_inline(call, ready)
    }

    /// [`wait`](Self::wait) inlined into its caller.
    #[inline(always)]
    fn wait_inline(&self, call: &Call<'_>, ready: impl Fn() -> bool) -> Result<(), Failed> {
        let info = call.wait_info();
        loop {
            if ready() {
                return Ok(());
            }
            self.workers[call.ctx.worker as usize]
                .waiters
                .lock()
                .push(call.ctx.slot);
            if ready() {
                return Ok(());
            }
            let mut parked = sched::park_once(call.ctx, &info);
            if parked.is_err() {
                return Err(Failed::take(&mut parked));
            }
            // `Ok(())`: nothing to drop (the compiler called the `Error`'s
            // drop glue for it on every wake-up, 10 instructions).
            std::mem::forget(parked);
        }
    }

    /// Wakes every waiter (after making a condition true): those of the
    /// caller's worker here, those of each other worker, if more than
    /// [`DIRECT_WAKES`], by that worker (`sched::unpark_on`: the caller's
    /// time goes to one push per worker, not to a park state and a home per
    /// waiter on another core's lines, which cross to the caller's core and
    /// back).
    ///
    /// The other workers' waiters first, the caller's own last: another
    /// worker, idle since its ranks parked, starts requeueing and running
    /// its own while the caller requeues its (at 1,024 ranks on 2 workers,
    /// ~500 unparks, some 2 µs, that the other worker waited out before).
    pub(crate) fn wake_all(&self, call: &Call<'_>) {
        let sched = call.comm.job().sched();
        let mine = (!call.ctx.is_thread()).then_some(call.ctx.worker as usize);
        let n = self.workers.len();
        // From the worker after the caller's round to the caller's.
        let first = mine.map_or(0, |w| w + 1);
        for worker in (first..first + n).map(|w| w % n) {
            let list = &self.workers[worker].waiters;
            let mut waiters = {
                let mut list = list.lock();
                if list.is_empty() {
                    continue;
                }
                std::mem::take(&mut *list)
            };
            // A few waiters of another worker are woken here: one may be
            // spinning before it parks (`sched::park_once`), and sees its
            // wake-up at once instead of after a park and a requeue.
            if mine == Some(worker) || waiters.len() <= DIRECT_WAKES {
                sched::unpark_many(sched, &waiters);
            } else {
                sched::unpark_on(sched, worker, &waiters);
            }
            // Give the storage back for the next waiters (of this round or,
            // once it is reused, of a later call), unless others came.
            waiters.clear();
            let mut list = list.lock();
            if list.is_empty() && list.capacity() < waiters.capacity() {
                *list = waiters;
            }
        }
    }

    /// Whether the call agrees with the round's first signature (the
    /// first rank records its own): [`check`](Self::check) without the
    /// error.
    #[inline]
    fn agrees(&self, call: &Call<'_>) -> bool {
        let first = self
            .first
            .get_or_init(|| (call.signature, call.rank(), call.site));
        if call.comm.coll().checker.enabled() {
            super::check::agree(&first.0, &call.signature)
        } else {
            super::check::same_protocol(&first.0, &call.signature)
        }
    }

    /// The collective check, in the round: the first rank records its
    /// signature, the others compare with it (read-only).
    pub(crate) fn check(&self, call: &Call<'_>) -> Result<(), Error> {
        let first = self
            .first
            .get_or_init(|| (call.signature, call.rank(), call.site));
        let agree = if call.comm.coll().checker.enabled() {
            super::check::agree(&first.0, &call.signature)
        } else {
            super::check::same_protocol(&first.0, &call.signature)
        };
        if agree {
            return Ok(());
        }
        let mine = (call.signature, call.rank(), call.site);
        Err(super::check::mismatch(call.seq, first, &mine))
    }
}

/// The rounds in progress of one communicator: a ring indexed by
/// sequence number, with a map for calls the ring cannot hold and spare
/// rounds to reuse (`ring.rs`).
#[derive(Debug, Default)]
pub(crate) struct Rounds {
    ring: super::ring::Ring<Round>,
    /// Per worker, the round its ranks joined last (made on the first
    /// join): the worker's other ranks find it there, without the ring's
    /// lock, whose line every worker's ranks would take in turn.
    last: std::sync::OnceLock<Box<[Padded<Last>]>>,
    /// Where the communicator's ranks are pinned: given to each round
    /// made once known ([`Round::arrive`]).
    census: Census,
}

/// The round of call `seq`, which a rank of one worker joined: set by that
/// worker's thread when one of its ranks finds the round in the ring,
/// cleared by the round's remover before the ring lets the round go
/// ([`Rounds::remove`]), so that the round it names is alive while it is
/// set. (Not cleared, a stale entry would still never be used for its
/// call, whose ranks have all joined, but for the call 2^32 later.)
#[derive(Debug, Default)]
struct Last {
    seq: AtomicU32,
    round: AtomicPtr<Round>,
}

/// Rounds of communicators larger than this are not kept for reuse: their
/// per-rank tables would stay allocated, and one allocation per call is
/// nothing when shared by so many ranks.
const KEEP_UP_TO: u32 = 4096;

/// A rank's place in the round of its call, from [`Rounds::join_checked`]
/// (or [`join_published`](Rounds::join_published)) to
/// [`Rounds::leave`], which takes it back: it reads as the [`Round`].
///
/// It holds the round's address, not a reference count (`ring.rs`): the
/// ring keeps the round until the last of its `size` ranks has counted its
/// leave (a rank on a worker may have it counted by the last of its
/// worker's ranks in the round, which leaves after it), and each rank
/// joins the round of a call once (one sequence
/// number per rank and call, `begin_as`) and leaves it at most once
/// ([`Rounds::leave`] consumes this). A place dropped without a leave (an
/// unwind, a job that fails) only keeps the round in the ring.
#[derive(Debug)]
pub(crate) struct Joined<'a> {
    round: NonNull<Round>,
    /// The rounds the round lives in: a place cannot outlive them.
    rounds: std::marker::PhantomData<&'a Rounds>,
}

/// Why a rank could not join its call's round ([`Rounds::join_checked`]) or
/// its wait failed ([`Round::wait`]): an [`Error`], boxed. The `Result`
/// then takes one word in the frames of the collective, which stay on the
/// rank's stack while the rank parks (an `Error` takes over 100 bytes: two
/// cache lines more to miss, and to copy, on each resume of a rank among a
/// million). `?` unboxes it.
#[derive(Debug)]
pub(crate) struct Failed(Box<Error>);

impl Failed {
    /// Boxes the error of `result` (out of line, by reference: the frame
    /// that holds `result` needs no second room for the error).
    #[cold]
    #[inline(never)]
    fn take(result: &mut Result<(), Error>) -> Failed {
        match std::mem::replace(result, Ok(())) {
            Err(err) => Failed(Box::new(err)),
            Ok(()) => unreachable!("`take` is called on an error"),
        }
    }
}

impl From<Error> for Failed {
    #[cold]
    fn from(err: Error) -> Failed {
        Failed(Box::new(err))
    }
}

impl From<Failed> for Error {
    #[cold]
    fn from(failed: Failed) -> Error {
        *failed.0
    }
}

impl std::ops::Deref for Joined<'_> {
    type Target = Round;

    #[inline]
    fn deref(&self) -> &Round {
        // SAFETY: the ring keeps the round alive and in place until its
        // last rank has counted its leave (`Rounds::leave`), and this
        // rank's leave consumes `self`, so it comes after every borrow this
        // returns; `'a` keeps the ring alive.
        unsafe { self.round.as_ref() }
    }
}

impl Rounds {
    /// The round of call `call.seq`, created by the first rank to ask, and
    /// whether this call created it. (Inlined: the common case, the round
    /// the worker's last rank found, takes a few loads; the ring is out of
    /// line.)
    #[inline]
    fn join_created(&self, call: &Call<'_>, readers: Option<Readers>) -> (Joined<'_>, bool) {
        // A rank on a worker: its worker's last round may be the one. (An
        // OS thread acting for a rank runs beside the worker: it takes the
        // ring's lock and counts its leave in the round directly.)
        let last = (!call.ctx.is_thread()).then(|| self.last_of(call));
        if let Some(last) = last {
            let round = last.round.load(Ordering::Relaxed);
            if let Some(round) = NonNull::new(round) {
                if last.seq.load(Ordering::Relaxed) == call.seq {
                    // Set, so the round of call `seq` is alive (`Last`),
                    // and it stays so until this rank's leave is counted:
                    // what `Joined` needs.
                    let place = Joined {
                        round,
                        rounds: std::marker::PhantomData,
                    };
                    place.workers[call.ctx.worker as usize].count_join();
                    return (place, false);
                }
            }
        }
        self.join_ring(call, readers, last)
    }

    /// [`join_created`](Self::join_created) through the ring: the first
    /// rank of each worker (or an OS thread) in the call.
    #[inline(never)]
    fn join_ring<'r>(
        &'r self,
        call: &Call<'_>,
        readers: Option<Readers>,
        last: Option<&Last>,
    ) -> (Joined<'r>, bool) {
        let size = call.comm.size() as u32;
        let joined = self.ring.join(call.seq, |spare| {
            let workers = call.comm.job().sched().worker_count();
            let census = self.census.of(workers);
            let reused = spare.and_then(|mut spare| {
                Arc::get_mut(&mut spare)
                    .is_some_and(|r| r.reset(size, census, workers, readers))
                    .then_some(spare)
            });
            let round =
                reused.unwrap_or_else(|| Arc::new(Round::new(size, census, workers, readers)));
            // The creator's signature is the round's first, before any
            // other rank can see the round: a rank of another collective
            // that asked first would pass its own check and use a round
            // shaped for the creator's (its deposits, say), and fail there.
            let _ = round.first.set((call.signature, call.rank(), call.site));
            round
        });
        let place = Joined {
            round: joined.round,
            rounds: std::marker::PhantomData,
        };
        if let Some(last) = last {
            place.workers[call.ctx.worker as usize].count_join();
            last.seq.store(call.seq, Ordering::Relaxed);
            last.round.store(joined.round.as_ptr(), Ordering::Relaxed);
        }
        (place, joined.created)
    }

    /// The caller's worker's [`Last`] (the caller runs on a worker).
    #[inline]
    fn last_of(&self, call: &Call<'_>) -> &Last {
        let last = self.last.get_or_init(|| {
            let workers = call.comm.job().sched().worker_count();
            (0..workers).map(|_| Padded::default()).collect()
        });
        &last[call.ctx.worker as usize]
    }

    /// Joins a round in which nobody publishes buffers, and checks the
    /// call's signature against the first caller's (for algorithms whose
    /// calls skip the communicator's checker).
    ///
    /// The rank that creates the round also looks at the communicator's
    /// checker, where calls of message-based algorithms are checked (see
    /// `Checker::check`): a different collective at the same sequence number
    /// is caught on whichever side comes second.
    #[inline(always)]
    pub(crate) fn join_checked(&self, call: &Call<'_>) -> Result<Joined<'_>, Failed> {
        self.join(call, None)
    }

    /// [`join_checked`](Self::join_checked) for a round whose ranks publish
    /// buffers that `readers` access.
    pub(crate) fn join_published(
        &self,
        call: &Call<'_>,
        readers: Readers,
    ) -> Result<Joined<'_>, Failed> {
        self.join(call, Some(readers))
    }

    #[inline(always)]
    fn join(&self, call: &Call<'_>, readers: Option<Readers>) -> Result<Joined<'_>, Failed> {
        let (round, created) = self.join_created(call, readers);
        let checker = &call.comm.coll().checker;
        // The common case, without building (or making room for) an error.
        if !(created && checker.enabled()) && round.agrees(call) {
            return Ok(round);
        }
        self.check_joined(call, round, created)
    }

    /// The check of a call that created its round with the checker on,
    /// or that disagrees with the round's first signature: the error
    /// leaves the round.
    #[cold]
    #[inline(never)]
    fn check_joined<'r>(
        &'r self,
        call: &Call<'_>,
        round: Joined<'r>,
        created: bool,
    ) -> Result<Joined<'r>, Failed> {
        let mut checked = round.check(call);
        let checker = &call.comm.coll().checker;
        if checked.is_ok() && created && checker.enabled() {
            if let Some(theirs) = checker.first_of(call.seq) {
                if !super::check::agree(&theirs.0, &call.signature) {
                    let mine = (call.signature, call.rank(), call.site);
                    checked = Err(super::check::mismatch(call.seq, &theirs, &mine));
                }
            }
        }
        if let Err(err) = checked {
            self.leave(call, round);
            return Err(Failed::from(err));
        }
        Ok(round)
    }

    /// The first signature of round `seq`, if it exists and has one.
    pub(crate) fn first_of(
        &self,
        seq: u32,
    ) -> Option<(
        super::check::Signature,
        crate::Rank,
        &'static std::panic::Location<'static>,
    )> {
        self.ring
            .with(seq, |round| round.first.get().copied())
            .flatten()
    }

    /// Leaves a round; the last rank to leave removes it.
    ///
    /// A rank on a worker counts its leave on its worker's line; the last
    /// of the worker's ranks in the round (as many left as joined) counts
    /// them all in the round's `left`, one read-modify-write per worker
    /// and call instead of one per rank on a line every worker takes. A
    /// rank of the worker that joins later (a broadcast's root may leave
    /// before the others join) starts a new count: every leave is counted
    /// in `left` once, by the last leaver of its worker's batch.
    #[inline]
    pub(crate) fn leave(&self, call: &Call<'_>, round: Joined<'_>) {
        let size = round.size;
        let address = round.round;
        let mut leaves = 1;
        if !call.ctx.is_thread() {
            let on = &round.workers[call.ctx.worker as usize];
            let left = on.left.load(Ordering::Relaxed) + 1;
            let joined = on.joined.load(Ordering::Relaxed);
            if left < joined {
                // Another rank of this worker is still in: it counts ours.
                on.left.store(left, Ordering::Relaxed);
                return;
            }
            debug_assert_eq!(left, joined, "a leave without its join");
            on.left.store(0, Ordering::Relaxed);
            on.joined.store(0, Ordering::Relaxed);
            leaves = left;
        }
        // SAFETY: the round is alive: the leaves counted below, this
        // rank's among them, are not counted yet (`Joined`). After the
        // count below it may be removed and reset or
        // freed by the last leaver at any moment, so nothing here touches
        // it again (the reference to `left` ends with the call, as in
        // `Arc`'s own release). AcqRel: every rank's use of the round
        // happens before the last leaver's removal, and so before a reset.
        let left = unsafe { address.as_ref() }
            .left
            .fetch_add(leaves, Ordering::AcqRel);
        debug_assert!(
            left + leaves <= size,
            "a round left more often than it has ranks"
        );
        if left + leaves == size {
            self.remove(call.seq, address, size);
        }
    }

    /// Removes the round of call `seq` (its last rank left).
    #[cold]
    fn remove(&self, seq: u32, round: NonNull<Round>, size: u32) {
        // No worker names it any more (`Last`): every rank of call `seq`
        // has joined, so none looks for it again, and a worker that has
        // since named another round keeps it (the exchange fails). Before
        // the ring lets it go, so before it can be reused for a later call.
        if let Some(last) = self.last.get() {
            for last in last.iter() {
                let _ = last.round.compare_exchange(
                    round.as_ptr(),
                    std::ptr::null_mut(),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
            }
        }
        self.ring.remove(seq, round, size <= KEEP_UP_TO);
    }
}

/// Jobs whose owner's wait fails while a reader's turn has begun, for the
/// algorithms whose accesses run no user code (broadcast, gather): a hook
/// (`on_turn`, compiled into `Round::enter` for unit tests only) holds the
/// reader at the start of its turn, on the reader's own thread, until the
/// owner is back or a window has passed. Before the round had a gate the
/// owner came back while the reader was about to copy out of (broadcast) or
/// into (gather) its buffer; now it waits for the turn. The calls go through
/// the crate's own `Result`-returning entry points and the job fails without
/// a panic, so that no panic hook (backtraces are slow under
/// AddressSanitizer) lies on anyone's way.
#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::panic::Location;
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    use std::sync::Mutex;
    use std::time::{Duration, Instant};

    use crate::coll::check::Signature;
    use crate::coll::{self, Algorithm, Call, Collective};
    use crate::communicator::AsCore;
    use crate::datatype::copy::Layout;
    use crate::topology::SimpleCommunicator;
    use crate::traits::*;
    use crate::{Error, Runtime, Threading};

    thread_local! {
        static ON_TURN: Cell<Option<fn()>> = const { Cell::new(None) };
        static ON_LEAVE: Cell<Option<fn()>> = const { Cell::new(None) };
    }

    /// Called by `Round::enter` once a turn is granted.
    pub(super) fn on_turn() {
        if let Some(hook) = ON_TURN.with(Cell::get) {
            hook();
        }
    }

    /// Called when a turn ends, before the gate learns it: an owner that
    /// waits for the turn can only come back after this.
    pub(super) fn on_leave() {
        if let Some(hook) = ON_LEAVE.with(Cell::get) {
            hook();
        }
    }

    const WINDOW: Duration = Duration::from_millis(500);
    /// Elements of the buffers (more than a broadcast stages).
    const LEN: usize = 1024;
    const DATA: u64 = 0x5eed;
    const POISON: u64 = 0xdead;
    const FAILURE: &str = "rank 2 fails the job";

    struct Flags {
        inside: AtomicBool,
        left: AtomicBool,
        owner_back: AtomicBool,
        violations: Mutex<Vec<String>>,
    }

    impl Flags {
        const fn new() -> Flags {
            Flags {
                inside: AtomicBool::new(false),
                left: AtomicBool::new(false),
                owner_back: AtomicBool::new(false),
                violations: Mutex::new(Vec::new()),
            }
        }

        /// The hook: signal, then give the owner the window to come back.
        fn hold(&self) {
            self.inside.store(true, SeqCst);
            let deadline = Instant::now() + WINDOW;
            while !self.owner_back.load(SeqCst) && Instant::now() < deadline {
                std::thread::yield_now();
            }
        }

        fn violate(&self, what: impl Into<String>) {
            self.violations.lock().unwrap().push(what.into());
        }

        /// The owner is back from its call: the reader must not be in its
        /// turn. Then it reuses its buffer (poison) and lets it go.
        fn owner_back(&self, mut buffer: Vec<u64>) {
            if self.inside.load(SeqCst) && !self.left.load(SeqCst) {
                self.violate("the owner came back while a reader's turn was in progress");
            }
            buffer.fill(POISON);
            drop(buffer);
            self.owner_back.store(true, SeqCst);
        }

        fn check(&self, outcome: Result<Vec<()>, Error>) {
            let err = outcome.expect_err("the job must fail");
            assert!(err.to_string().contains(FAILURE), "{err}");
            assert!(self.inside.load(SeqCst), "the reader never had its turn");
            let violations = self.violations.lock().unwrap();
            assert!(violations.is_empty(), "{violations:#?}");
        }
    }

    /// Runs `body` as a shared-memory `kind` call of the calling rank (or
    /// OS thread) on `world`, rooted at rank 0.
    fn call(
        world: &SimpleCommunicator,
        kind: Collective,
        data: &Layout,
        body: impl FnOnce(&Call<'_>) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let signature = Signature::new(kind, Some(0), Some(data.bytes())).typed(data);
        let call = coll::begin(world.core(), signature, Algorithm::Auto, Location::caller())?;
        body(&call)
    }

    /// World ranks 0 (the root, whose OS thread owns the buffer) and 1 (the
    /// reader, whose OS thread runs `hook` when its turn starts and `leave`
    /// when it ends) run `root` and `reader`; rank 2 fails the job once the
    /// reader's turn has begun.
    fn job(
        flags: &'static Flags,
        hook: fn(),
        leave: fn(),
        collective: Collective,
        root: impl Fn(&SimpleCommunicator) -> Vec<u64> + Sync,
        reader: impl Fn(&SimpleCommunicator) + Sync,
    ) -> Result<Vec<()>, Error> {
        Runtime::builder()
            .ranks(3)
            .workers(2)
            .threading(Threading::Multiple)
            .check_collectives(false)
            .run(|universe| {
                let world = universe.world();
                world
                    .set_collective_algorithm(collective, Algorithm::SharedMemory)
                    .unwrap();
                match world.rank() {
                    0 => crate::thread::scope(|s| {
                        s.spawn(|| flags.owner_back(root(&world)));
                    }),
                    1 => crate::thread::scope(|s| {
                        s.spawn(|| {
                            ON_TURN.with(|h| h.set(Some(hook)));
                            ON_LEAVE.with(|h| h.set(Some(leave)));
                            reader(&world);
                        });
                    }),
                    _ => {
                        while !flags.inside.load(SeqCst) {
                            crate::yield_now();
                        }
                        crate::sched::rank::with_current(|ctx| {
                            ctx.expect("a rank").sched().fail(Error::Panic {
                                rank: 2,
                                message: FAILURE.into(),
                            })
                        });
                    }
                }
            })
    }

    #[test]
    fn a_broadcast_root_waits_for_the_reader_in_its_turn() {
        static FLAGS: Flags = Flags::new();
        FLAGS.check(job(
            &FLAGS,
            || FLAGS.hold(),
            || FLAGS.left.store(true, SeqCst),
            Collective::Broadcast,
            |world| {
                let mut buf = vec![DATA; LEN];
                let layout = Layout::of_mut(&mut buf[..]);
                let _ = call(world, Collective::Broadcast, &layout, |c| {
                    coll::bcast::broadcast(c, 0, &layout)
                });
                buf
            },
            |world| {
                let mut buf = vec![0u64; LEN];
                let layout = Layout::of_mut(&mut buf[..]);
                let _ = call(world, Collective::Broadcast, &layout, |c| {
                    coll::bcast::broadcast(c, 0, &layout)
                });
                // What it copied came from the root's call, not from after.
                if buf.contains(&POISON) {
                    FLAGS.violate("the reader copied what the root wrote after its call");
                }
            },
        ));
    }

    #[test]
    fn a_gather_root_waits_for_the_writer_in_its_turn() {
        static FLAGS: Flags = Flags::new();
        let send = vec![DATA; LEN];
        FLAGS.check(job(
            &FLAGS,
            || FLAGS.hold(),
            || FLAGS.left.store(true, SeqCst),
            Collective::Gather,
            |world| {
                let mut buf = vec![0u64; 3 * LEN];
                let (data, recv) = (Layout::of(&send[..]), Layout::of_mut(&mut buf[..]));
                let _ = call(world, Collective::Gather, &data, |c| {
                    coll::gather::gather(c, 0, &data, Some(&recv))
                });
                buf
            },
            |world| {
                let data = Layout::of(&send[..]);
                let _ = call(world, Collective::Gather, &data, |c| {
                    coll::gather::gather(c, 0, &data, None)
                });
            },
        ));
    }

    /// Every round of a job whose ranks leave in batches per worker is
    /// removed once its calls are over: staged broadcasts (the root leaves
    /// before the others join), barriers, all-reduces, immediate barriers
    /// (tasks) and then, for rank 0, blocking calls from an OS thread
    /// (which counts its leave in the round directly), on two workers; and
    /// the results are right.
    #[test]
    fn rounds_left_in_batches_per_worker_are_all_removed() {
        use crate::collective::SystemOperation;
        const CALLS: u64 = 200;
        let calls = |world: &SimpleCommunicator, immediate: bool| {
            let n = world.size() as u64;
            for i in 0..CALLS {
                let mut x = if world.rank() == 3 { i } else { u64::MAX };
                world.process_at_rank(3).broadcast_into(&mut x);
                assert_eq!(x, i);
                let mut sum = 0u64;
                world.all_reduce_into(&(world.rank() as u64 + i), &mut sum, SystemOperation::sum());
                assert_eq!(sum, n * (n - 1) / 2 + n * i);
                if i % 3 == 0 && immediate {
                    world.immediate_barrier().wait();
                } else {
                    world.barrier();
                }
            }
        };
        let left = Runtime::builder()
            .ranks(24)
            .workers(2)
            .threading(Threading::Multiple)
            .run(|universe| {
                let world = universe.world();
                calls(&world, true);
                // Immediate collectives start from a rank, not from its OS
                // thread: blocking ones only here.
                if world.rank() == 0 {
                    crate::thread::scope(|s| {
                        s.spawn(|| calls(&world, false));
                    });
                } else {
                    calls(&world, false);
                }
                world.barrier();
                if world.rank() != 0 {
                    return 0;
                }
                // The others leave the last barrier's round, then end.
                let rounds = &world.core().coll().rounds;
                let deadline = Instant::now() + Duration::from_secs(10);
                while rounds.ring.in_progress() > 0 && Instant::now() < deadline {
                    crate::yield_now();
                }
                rounds.ring.in_progress()
            })
            .unwrap();
        assert_eq!(left[0], 0, "rounds left in the ring");
    }
}
