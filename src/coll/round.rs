//! Rounds: where the ranks of an in-process communicator meet for one
//! collective call (the scheduler-managed shared-memory path).
//!
//! Call number `seq` of a communicator has one [`Round`], created by the
//! first rank to arrive and dropped by the last to leave. Ranks deposit the
//! addresses of their buffers, count their arrival, and park until the round
//! reaches the state they need (everyone arrived, the root arrived, every
//! copy done); whoever brings the round to that state wakes the waiters.
//! Data moves once, straight between the ranks' buffers. A rank's buffers
//! stay valid while it is in the round, and a rank only leaves once no other
//! rank can still read or write them (the algorithms' second phase).
//!
//! ## Waiting without losing a wake-up
//!
//! A waiter adds its slot to `waiters` and then re-checks its condition
//! before parking; a waker makes the condition true and then takes the whole
//! list under the same lock. Either the waker's take comes after the
//! waiter's registration (the waiter is woken), or before it, and then the
//! lock orders the condition's update before the waiter's re-check.

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;

use super::operand::AlignedBytes;
use super::Call;
use crate::datatype::copy::Layout;
use crate::error::Error;
use crate::sched;
use crate::sync::spin::SpinLock;

/// What one rank deposits: addresses and a count, published by its arrival.
#[derive(Debug, Default)]
pub(crate) struct Deposit {
    pub(crate) send: AtomicUsize,
    pub(crate) recv: AtomicUsize,
    pub(crate) count: AtomicUsize,
}

impl Deposit {
    pub(crate) fn set(&self, send: *const u8, recv: *mut u8, count: usize) {
        self.send.store(send as usize, Ordering::Relaxed);
        self.recv.store(recv as usize, Ordering::Relaxed);
        self.count.store(count, Ordering::Relaxed);
    }

    pub(crate) fn send(&self) -> *const u8 {
        self.send.load(Ordering::Relaxed) as *const u8
    }

    pub(crate) fn recv(&self) -> *mut u8 {
        self.recv.load(Ordering::Relaxed) as *mut u8
    }

    pub(crate) fn count(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }
}

/// One collective call of one communicator, shared by its ranks.
#[derive(Debug)]
pub(crate) struct Round {
    pub(crate) size: u32,
    /// Ranks that arrived (deposited).
    pub(crate) arrived: AtomicU32,
    /// Ranks done with the first phase (e.g. their copies).
    pub(crate) done: AtomicU32,
    /// A flag set by the root (1 once its deposit is published).
    pub(crate) root_ready: AtomicU32,
    left: AtomicU32,
    /// Parked slots, one list per worker: a rank registers on its own
    /// worker's list (no cache line crosses cores) and a waker requeues each
    /// worker's waiters in one batch.
    waiters: Box<[Padded<SpinLock<Vec<u32>>>]>,
    /// Per-worker partial results of a commutative reduction.
    pub(crate) partials: Box<[Padded<SpinLock<Accumulator>>]>,
    /// The first caller's signature, for the collective check.
    first: std::sync::OnceLock<(
        super::check::Signature,
        crate::Rank,
        &'static std::panic::Location<'static>,
    )>,
    /// Per-rank deposits (empty for collectives that need none).
    pub(crate) deposits: Box<[Deposit]>,
    /// A shared buffer (a partition, a reduction's accumulator) and the
    /// number of contributions in it, under its lock.
    pub(crate) shared: SpinLock<Vec<u8>>,
    pub(crate) acc: SpinLock<Accumulator>,
    /// The root's buffer (broadcast, gather, scatter, reduce).
    pub(crate) root: SpinLock<Option<Shared<Layout>>>,
    /// Communicator creation: the ranks' requests and the communicators
    /// made for them (protocol in `comm/split.rs`).
    pub(crate) comm_create: SpinLock<crate::comm::split::Meeting>,
}

/// A reduction's running result: raw elements of the operands' type, in
/// storage aligned for that type (user operations downcast it to `&[T]`).
#[derive(Debug, Default)]
pub(crate) struct Accumulator {
    data: AlignedBytes,
    /// Contributions reduced into it so far.
    pub(crate) contributions: u32,
}

impl Accumulator {
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
    pub(crate) fn layout(&mut self, like: &Layout) -> Layout {
        Layout {
            base: self.ptr(),
            ..like.clone()
        }
    }
}

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

/// A layout published to the other ranks of a round.
#[derive(Debug, Clone)]
pub(crate) struct Shared<T>(pub(crate) T);

// SAFETY: a published layout points into the buffer of a rank that stays in
// the round (parked) until every reader is done with it (module docs).
unsafe impl<T> Send for Shared<T> {}

impl Round {
    fn new(size: u32, workers: usize, deposits: bool) -> Round {
        Round {
            size,
            arrived: AtomicU32::new(0),
            done: AtomicU32::new(0),
            root_ready: AtomicU32::new(0),
            left: AtomicU32::new(0),
            waiters: (0..workers).map(|_| Padded::default()).collect(),
            partials: (0..workers).map(|_| Padded::default()).collect(),
            first: std::sync::OnceLock::new(),
            deposits: if deposits {
                (0..size).map(|_| Deposit::default()).collect()
            } else {
                Box::new([])
            },
            shared: SpinLock::new(Vec::new()),
            acc: SpinLock::new(Accumulator::default()),
            root: SpinLock::new(None),
            comm_create: SpinLock::new(Default::default()),
        }
    }

    /// Counts an arrival (after this rank's deposit); `true` for the last.
    pub(crate) fn arrive(&self) -> bool {
        self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.size
    }

    /// Counts a rank done with the first phase; `true` for the last.
    pub(crate) fn finish(&self) -> bool {
        self.done.fetch_add(1, Ordering::AcqRel) + 1 == self.size
    }

    pub(crate) fn all_arrived(&self) -> bool {
        self.arrived.load(Ordering::Acquire) == self.size
    }

    pub(crate) fn all_done(&self) -> bool {
        self.done.load(Ordering::Acquire) == self.size
    }

    /// Counts this rank's arrival (after its deposit) and waits until every
    /// rank has arrived; the last to arrive wakes the others.
    pub(crate) fn arrive_and_wait(&self, call: &Call<'_>) -> Result<(), Error> {
        if self.arrive() {
            self.wake_all(call);
            return Ok(());
        }
        self.wait(call, || self.all_arrived())
    }

    /// Counts this rank done (after an error too) and waits until every rank
    /// is; the last wakes the others. For ranks whose buffers the others may
    /// read or write until then.
    pub(crate) fn finish_and_wait(&self, call: &Call<'_>) -> Result<(), Error> {
        if self.finish() {
            self.wake_all(call);
            return Ok(());
        }
        self.wait(call, || self.all_done())
    }

    /// Sets `root_ready` (Release) once the root's deposit (or a result) is
    /// published, and wakes the ranks waiting for it.
    pub(crate) fn publish(&self, call: &Call<'_>) {
        self.root_ready.store(1, Ordering::Release);
        self.wake_all(call);
    }

    /// [`publish`](Self::publish) for a root that staged its data in
    /// [`shared`](Self::shared) rather than leaving its buffer to be read:
    /// it does not wait for the readers.
    pub(crate) fn publish_staged(&self, call: &Call<'_>) {
        self.root_ready.store(2, Ordering::Release);
        self.wake_all(call);
    }

    /// Whether the root staged its data (after [`wait_published`](Self::wait_published)).
    pub(crate) fn is_staged(&self) -> bool {
        self.root_ready.load(Ordering::Acquire) == 2
    }

    /// Waits until [`publish`](Self::publish) or
    /// [`publish_staged`](Self::publish_staged); what was published before
    /// it is visible after.
    pub(crate) fn wait_published(&self, call: &Call<'_>) -> Result<(), Error> {
        self.wait(call, || self.root_ready.load(Ordering::Acquire) != 0)
    }

    /// A rank other than the root is done with the root's buffer (its copy
    /// succeeded or failed: either way the root must not wait for it); the
    /// last one wakes the root.
    pub(crate) fn release_root(&self, call: &Call<'_>) {
        if self.done.fetch_add(1, Ordering::AcqRel) + 2 == self.size {
            self.wake_all(call);
        }
    }

    /// The root waits until every other rank has released its buffer
    /// ([`release_root`](Self::release_root)).
    pub(crate) fn wait_released(&self, call: &Call<'_>) -> Result<(), Error> {
        self.wait(call, || self.done.load(Ordering::Acquire) == self.size - 1)
    }

    /// Parks the caller until `ready()` holds.
    pub(crate) fn wait(&self, call: &Call<'_>, ready: impl Fn() -> bool) -> Result<(), Error> {
        let info = call.wait_info();
        loop {
            if ready() {
                return Ok(());
            }
            self.waiters[call.ctx.worker as usize]
                .lock()
                .push(call.ctx.slot);
            if ready() {
                return Ok(());
            }
            sched::park_once(call.ctx, &info)?;
        }
    }

    /// Wakes every waiter (after making a condition true).
    pub(crate) fn wake_all(&self, call: &Call<'_>) {
        for list in self.waiters.iter() {
            let waiters = std::mem::take(&mut *list.lock());
            sched::unpark_many(call.comm.job(), &waiters);
        }
    }

    /// The collective check, in the round: the first rank records its
    /// signature, the others compare with it (read-only).
    pub(crate) fn check(&self, call: &Call<'_>) -> Result<(), Error> {
        let mine = (call.signature, call.rank(), call.site);
        let first = self.first.get_or_init(|| mine);
        let agree = if call.comm.shared().coll.checker.enabled() {
            super::check::agree(&first.0, &mine.0)
        } else {
            super::check::same_protocol(&first.0, &mine.0)
        };
        if agree {
            return Ok(());
        }
        Err(super::check::mismatch(call.seq, first, &mine))
    }
}

/// The rounds in progress of one communicator.
#[derive(Debug, Default)]
pub(crate) struct Rounds {
    active: SpinLock<super::check::SeqMap<Arc<Round>>>,
}

impl Rounds {
    /// The round of call `call.seq`, created by the first rank to ask, and
    /// whether this call created it.
    fn join_created(&self, call: &Call<'_>, deposits: bool) -> (Arc<Round>, bool) {
        let workers = call.comm.job().sched.workers.len();
        let mut active = self.active.lock();
        let mut created = false;
        let round = active.entry(call.seq).or_insert_with(|| {
            created = true;
            Arc::new(Round::new(call.comm.size() as u32, workers, deposits))
        });
        (Arc::clone(round), created)
    }

    /// Joins and checks the call's signature against the first caller's
    /// (for algorithms whose calls skip the communicator's checker).
    ///
    /// The rank that creates the round also looks at the communicator's
    /// checker, where calls of message-based algorithms are checked (see
    /// `Checker::check`): a different collective at the same sequence number
    /// is caught on whichever side comes second.
    pub(crate) fn join_checked(
        &self,
        call: &Call<'_>,
        deposits: bool,
    ) -> Result<Arc<Round>, Error> {
        let (round, created) = self.join_created(call, deposits);
        let mut checked = round.check(call);
        let checker = &call.comm.shared().coll.checker;
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
            return Err(err);
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
        let active = self.active.lock();
        active
            .get(&seq)
            .and_then(|round| round.first.get().copied())
    }

    /// Leaves a round; the last rank to leave removes it.
    pub(crate) fn leave(&self, call: &Call<'_>, round: Arc<Round>) {
        if round.left.fetch_add(1, Ordering::AcqRel) + 1 == round.size {
            self.active.lock().remove(&call.seq);
        }
    }
}
