//! Requests of immediate (non-blocking) operations, shaped like rsmpi's
//! `mpi::request`.
//!
//! An immediate operation borrows its buffer for a lifetime `'a` and returns a
//! [`Request`] registered with a [`Scope`] that lasts no longer than `'a`.
//! The request must be completed ([`Request::wait`], [`Request::test`],
//! [`wait_any`]) or wrapped in a [`WaitGuard`] / [`CancelGuard`]; dropping an
//! unfinished request panics, after making sure no other rank can still touch
//! its buffer. A [`LocalScope`] that ends with requests still registered
//! (they were leaked with `mem::forget`) aborts the process, as in rsmpi: the
//! buffers they borrow are about to go away while a peer may still write into
//! them.
//!
//! Testing a request that is not complete yields to the scheduler, so polling
//! loops (`while let Err(r) = req.test() { ... }`) let the peer rank run.
//!
//! [`multiple_scope`] gives a scope and a [`RequestCollection`] that
//! completes many requests together (`wait_any`, `wait_some`, `wait_all`
//! and their test forms); it owns the requests added to it and settles
//! those still pending when dropped, as a dropped request does.

use std::cell::Cell;
use std::fmt;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::panic::Location;
use std::ptr;

use crate::coll::CommCore;
use crate::error::{Error, OrRaise};
use crate::p2p::completion::{Completion, Outcome};
use crate::p2p::{self, Queued, Status};
use crate::sched::{self, WaitInfo, WaitOp};
use crate::{Rank, Tag};

/// The state of an immediate operation (internal).
pub(crate) enum Op {
    /// Completed when it started.
    Done(Result<Status, Error>),
    /// A descriptor is queued in a mailbox, or a task runs the operation.
    Pending(Pending),
}

/// A started immediate operation whose peer (the rank that will match its
/// queued descriptor, or the task running its collective) holds pointers to
/// its [`Completion`] and its buffer until the completion is done or the
/// descriptor is withdrawn.
///
/// Dropping it *settles* it ([`PendingOp::settle`]) before the box is freed,
/// on every path: a wait that fails (wrong caller, abort, unwinding), a
/// request dropped unfinished, a guard, an unwind through any of them. Only
/// [`PendingOp::into_op`] makes one, once the descriptor is queued.
pub(crate) struct Pending(Box<PendingOp>);

impl std::ops::Deref for Pending {
    type Target = PendingOp;

    fn deref(&self) -> &PendingOp {
        &self.0
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.0.settle();
    }
}

/// A queued immediate operation and the completion its peer will signal.
pub(crate) struct PendingOp {
    pub(crate) comm: CommCore,
    pub(crate) queued: Queued,
    pub(crate) completion: Completion,
    pub(crate) kind: Kind,
}

/// What the pending operation is.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Kind {
    Send {
        dest: Rank,
        tag: Tag,
    },
    Receive {
        source: Rank,
        tag: Tag,
    },
    /// An immediate collective, run by a task.
    Collective,
}

impl PendingOp {
    /// A pending operation of `comm` whose completion wakes slot `waiter`
    /// (the calling rank's or task's).
    pub(crate) fn new(comm: &CommCore, waiter: u32, queued: Queued, kind: Kind) -> Box<PendingOp> {
        Box::new(PendingOp {
            comm: comm.clone(),
            queued,
            completion: Completion::new(waiter),
            kind,
        })
    }

    /// The operation's descriptor is queued (or its task spawned): from now
    /// on a peer may touch it, and dropping it settles it.
    pub(crate) fn into_op(self: Box<Self>) -> Op {
        Op::Pending(Pending(self))
    }

    fn result(&self) -> Result<Status, Error> {
        let outcome = self.completion.outcome();
        match self.kind {
            Kind::Receive { .. } => p2p::receive_result(self.comm.rank(), outcome),
            Kind::Send { dest, tag } => Ok(send_status(dest, tag, outcome)),
            Kind::Collective => Ok(Status::new(self.comm.rank(), 0, 0)),
        }
    }

    /// The wait's slice in a trace and entry in the profile (`crate::trace`).
    #[inline]
    fn trace<'c>(&self, ctx: &'c crate::sched::RankCtx) -> Option<crate::trace::Span<'c>> {
        let (peer, tag) = match self.kind {
            Kind::Send { dest, tag } => (dest, tag),
            Kind::Receive { source, tag } => (source, tag),
            Kind::Collective => (crate::trace::NO_PEER, crate::trace::NO_TAG),
        };
        crate::trace::span(ctx.recorder(), crate::trace::Op::Wait, peer, tag, 0)
    }

    fn wait_info(&self, site: &'static Location<'static>) -> WaitInfo {
        let (op, peer, tag) = match self.kind {
            Kind::Send { dest, tag } => (WaitOp::Wait, dest, tag),
            Kind::Receive { source, tag } => (WaitOp::Wait, source, tag),
            Kind::Collective => (WaitOp::Wait, WaitInfo::NO_PEER, WaitInfo::NO_TAG),
        };
        WaitInfo {
            op,
            label: None,
            peer,
            tag,
            comm: self.comm.p2p_context(),
            site,
        }
    }

    /// Withdraws the descriptor if it is still queued and completes it as
    /// cancelled; `true` if it did.
    fn cancel(&self) -> bool {
        if self.completion.is_done() {
            return false;
        }
        if p2p::withdraw(self.comm.endpoint(), self.queued, &self.completion) {
            // SAFETY: the descriptor was withdrawn under the mailbox lock, so
            // nobody else can complete it.
            unsafe {
                self.completion.complete(Outcome {
                    cancelled: true,
                    ..Outcome::default()
                })
            };
            true
        } else {
            false
        }
    }

    /// Makes sure no peer refers to this operation any more: it is done,
    /// or withdraws its descriptor, or waits for the peer that claimed it.
    ///
    /// Only the rank that started the operation is woken by its completion,
    /// and only when it may suspend (it is not unwinding) does it park for
    /// it. Anyone else (another rank the request was handed to through a
    /// thread-local, a micro-task of a parallel region, a rank unwinding or
    /// unwound by a failing job) settles without parking (`p2p::settle`),
    /// which fails the job rather than free what a long claimer (a task, a
    /// matched probe) may still touch.
    fn settle(&self) {
        if self.completion.is_done() {
            return;
        }
        let ep = self.comm.endpoint();
        let owner = self
            .comm
            .caller()
            .ok()
            .filter(|_| !std::thread::panicking());
        if let Some(ctx) = owner {
            if p2p::withdraw(ep, self.queued, &self.completion) {
                return;
            }
            /// Settles without parking if the parking wait ends early: the
            /// job fails (an error), or tears the rank down (an unwind).
            struct Otherwise<'a>(&'a PendingOp);
            impl Drop for Otherwise<'_> {
                fn drop(&mut self) {
                    let p = self.0;
                    p2p::settle(p.comm.endpoint(), p.queued, &p.completion);
                }
            }
            let _otherwise = Otherwise(self);
            let info = self.wait_info(Location::caller());
            let _ = sched::wait_until(ctx, &info, || self.completion.is_done());
            return;
        }
        p2p::settle(ep, self.queued, &self.completion);
    }
}

pub(crate) fn send_status(dest: Rank, tag: Tag, outcome: Outcome) -> Status {
    if outcome.cancelled {
        Status::cancelled()
    } else {
        Status::new(dest, tag, outcome.bytes)
    }
}

impl Op {
    fn is_complete(&self) -> bool {
        match self {
            Op::Done(_) => true,
            Op::Pending(p) => p.completion.is_done(),
        }
    }

    fn wait(self, site: &'static Location<'static>) -> Result<Status, Error> {
        match self {
            Op::Done(result) => result,
            Op::Pending(p) => {
                // On an error `p` is dropped, which settles it.
                let ctx = p.comm.caller()?;
                let mut span = p.trace(ctx);
                let info = p.wait_info(site);
                sched::wait_until(ctx, &info, || p.completion.is_done())?;
                if let Some(span) = &mut span {
                    span.set_bytes(p.completion.outcome().bytes);
                }
                p.result()
            }
        }
    }
}

/// A request for an immediate operation whose buffer, of type `D`, is
/// borrowed for `'a` (rsmpi's `Request`).
///
/// # Panics
///
/// Dropping a request that was not completed panics (after withdrawing or
/// finishing the operation, so the buffer is safe).
#[must_use = "a request must be completed with wait, test or a guard"]
pub struct Request<'a, D: ?Sized, S: Scope<'a> = StaticScope> {
    op: ManuallyDrop<Op>,
    data: *const D,
    scope: S,
    phantom: PhantomData<Cell<&'a ()>>,
}

impl<'a, D: ?Sized, S: Scope<'a>> fmt::Debug for Request<'a, D, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Request")
            .field("complete", &self.op.is_complete())
            .finish()
    }
}

impl<'a, D: ?Sized, S: Scope<'a>> Request<'a, D, S> {
    /// Registers a new request with `scope`.
    pub(crate) fn new(op: Op, data: *const D, scope: S) -> Self {
        scope.register();
        Request {
            op: ManuallyDrop::new(op),
            data,
            scope,
            phantom: PhantomData,
        }
    }

    /// Takes the request apart without running its destructor.
    fn into_parts(self) -> (Op, *const D, S) {
        let mut this = ManuallyDrop::new(self);
        // SAFETY: `this` is never used again and its destructor never runs,
        // so each field is moved out exactly once.
        let op = unsafe { ManuallyDrop::take(&mut this.op) };
        // SAFETY: as above.
        let scope = unsafe { ptr::read(&this.scope) };
        // SAFETY: the request leaves its scope as its operation is finished
        // by the caller (wait) or was already.
        unsafe { scope.unregister() };
        (op, this.data, scope)
    }

    /// Whether the operation has completed (no yield, no status).
    pub fn is_complete(&self) -> bool {
        self.op.is_complete()
    }

    /// Waits for the operation to finish and returns its status.
    ///
    /// # Panics
    ///
    /// If the operation failed (truncation, type mismatch), with the error.
    #[track_caller]
    pub fn wait(self) -> Status {
        let site = Location::caller();
        let (op, _, _) = self.into_parts();
        op.wait(site).or_raise()
    }

    /// Like [`wait`](Self::wait), returning errors (a myriad extension).
    #[track_caller]
    pub fn try_wait(self) -> Result<Status, Error> {
        let site = Location::caller();
        let (op, _, _) = self.into_parts();
        op.wait(site)
    }

    /// Waits for the operation to finish, ignoring the status.
    #[track_caller]
    pub fn wait_without_status(self) {
        let _ = self.wait();
    }

    /// Waits for the operation to finish and returns the buffer.
    #[track_caller]
    pub fn wait_for_data(self) -> &'a D {
        let site = Location::caller();
        let (op, data, _) = self.into_parts();
        op.wait(site).or_raise();
        // SAFETY: `data` came from a `&'a D` or `&'a mut D`; the operation
        // is over, so nothing else accesses it any more.
        unsafe { &*data }
    }

    /// The status if the operation has finished, else the request back
    /// (after yielding to the other ranks of this worker).
    #[track_caller]
    pub fn test(self) -> Result<Status, Self> {
        if !self.op.is_complete() {
            sched::yield_now();
            if !self.op.is_complete() {
                return Err(self);
            }
        }
        Ok(self.wait())
    }

    /// Like [`test`](Self::test), also returning the buffer.
    #[track_caller]
    pub fn test_with_data(self) -> Result<(Status, &'a D), Self> {
        if !self.op.is_complete() {
            sched::yield_now();
            if !self.op.is_complete() {
                return Err(self);
            }
        }
        let data = self.data;
        let status = self.wait();
        // SAFETY: as in `wait_for_data`.
        Ok((status, unsafe { &*data }))
    }

    /// Asks for the operation to be cancelled (`MPI_Cancel`). A receive not
    /// yet matched, or a send still waiting for its receive, is cancelled:
    /// its status then says [`Status::is_cancelled`]. An operation already
    /// matched completes normally. Complete the request afterwards as usual.
    pub fn cancel(&self) {
        if let Op::Pending(p) = &*self.op {
            p.cancel();
        }
    }

    /// Moves the request to a shorter scope.
    pub fn shrink_scope_to<'b, S2>(self, scope: S2) -> Request<'b, D, S2>
    where
        'a: 'b,
        S2: Scope<'b>,
    {
        let (op, data, _) = self.into_parts();
        Request::new(op, data, scope)
    }
}

impl<'a, D: ?Sized, S: Scope<'a>> Drop for Request<'a, D, S> {
    fn drop(&mut self) {
        // SAFETY: the destructor runs once and the op is not used after.
        let op = unsafe { ManuallyDrop::take(&mut self.op) };
        // Settles a pending operation.
        drop(op);
        // SAFETY: the operation is over (settled by the drop above).
        unsafe { self.scope.unregister() };
        if !std::thread::panicking() {
            panic!(
                "a request was dropped without being completed: call wait or test, or \
                 wrap it in a WaitGuard or CancelGuard"
            );
        }
    }
}

/// Waits for one of `requests` to complete, removes it from the vector and
/// returns its index and status; `None` if the vector is empty.
#[track_caller]
pub fn wait_any<'a, D: ?Sized, S: Scope<'a>>(
    requests: &mut Vec<Request<'a, D, S>>,
) -> Option<(usize, Status)> {
    let site = Location::caller();
    if requests.is_empty() {
        return None;
    }
    loop {
        if let Some(i) = requests.iter().position(|r| r.op.is_complete()) {
            let request = requests.remove(i);
            let (op, _, _) = request.into_parts();
            let status = op.wait(site).or_raise();
            return Some((i, status));
        }
        park_for_any(requests.iter().map(|r| &*r.op), site).or_raise();
    }
}

/// Parks the calling rank once while waiting for any of `ops` (none of them
/// complete yet): every pending operation wakes the rank that started it
/// when it completes. Fails if a pending operation belongs to another rank
/// (which would never wake this one), before parking.
fn park_for_any<'o>(
    ops: impl Iterator<Item = &'o Op>,
    site: &'static Location<'static>,
) -> Result<(), Error> {
    let mut ctx = None;
    for op in ops {
        if let Op::Pending(p) = op {
            let caller = p.comm.caller()?;
            ctx.get_or_insert(caller);
        }
    }
    let Some(ctx) = ctx else {
        // Nothing pending: whatever completed is to be picked up at once.
        return Ok(());
    };
    let info = WaitInfo {
        op: WaitOp::WaitAny,
        label: None,
        peer: WaitInfo::NO_PEER,
        tag: WaitInfo::NO_TAG,
        comm: u64::MAX,
        site,
    };
    sched::park_once(ctx, &info)
}

/// Waits for all of `requests` and returns their statuses in order (a myriad
/// extension; `MPI_Waitall`).
#[track_caller]
pub fn wait_all<'a, D: ?Sized, S: Scope<'a>>(requests: Vec<Request<'a, D, S>>) -> Vec<Status> {
    requests.into_iter().map(|r| r.wait()).collect()
}

/// Registration of requests (rsmpi's `Scope`). An implementation detail.
///
/// # Safety
///
/// Do not implement: `unregister` must only be called for requests that
/// were registered and whose operations are over.
pub unsafe trait Scope<'a> {
    /// Registers a request.
    fn register(&self);
    /// Unregisters a request.
    ///
    /// # Safety
    ///
    /// The request's operation must be over.
    unsafe fn unregister(&self);
}

/// The scope of requests whose buffers are `'static`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct StaticScope;

// SAFETY: 'static buffers outlive any request.
unsafe impl Scope<'static> for StaticScope {
    fn register(&self) {}
    unsafe fn unregister(&self) {}
}

/// A scope for requests with borrowed buffers; see [`scope`].
#[derive(Debug)]
pub struct LocalScope<'a> {
    num_requests: Cell<usize>,
    phantom: PhantomData<Cell<&'a ()>>,
}

impl Drop for LocalScope<'_> {
    fn drop(&mut self) {
        if self.num_requests.get() != 0 {
            abort_on_unhandled_request();
        }
    }
}

#[cold]
fn abort_on_unhandled_request() -> ! {
    say!(
        "myriad: a request scope ended with requests still registered (leaked with \
         mem::forget?); their buffers may still be written by other ranks, aborting"
    );
    std::process::abort();
}

// SAFETY: counts registrations; `LocalScope`'s destructor aborts if any
// remain.
unsafe impl<'a> Scope<'a> for &LocalScope<'a> {
    fn register(&self) {
        self.num_requests.set(self.num_requests.get() + 1);
    }

    unsafe fn unregister(&self) {
        let n = self.num_requests.get();
        debug_assert!(n > 0, "unregister without register");
        self.num_requests.set(n.saturating_sub(1));
    }
}

/// Runs `f` with a scope for requests whose buffers live outside the call.
///
/// ```
/// use myriad::traits::*;
///
/// myriad::run(2, |universe| {
///     let world = universe.world();
///     let other = 1 - world.rank();
///     let send = [world.rank(); 4];
///     let mut recv = [0i32; 4];
///     myriad::request::scope(|scope| {
///         let r = world.process_at_rank(other).immediate_receive_into(scope, &mut recv);
///         let s = world.process_at_rank(other).immediate_send(scope, &send);
///         s.wait();
///         r.wait();
///     });
///     assert_eq!(recv, [other; 4]);
/// })
/// .unwrap();
/// ```
pub fn scope<'a, F, R>(f: F) -> R
where
    F: FnOnce(&LocalScope<'a>) -> R,
{
    f(&LocalScope {
        num_requests: Cell::new(0),
        phantom: PhantomData,
    })
}

/// Waits for its request when dropped (rsmpi's `WaitGuard`).
#[derive(Debug)]
pub struct WaitGuard<'a, D: ?Sized, S: Scope<'a> = StaticScope>(Option<Request<'a, D, S>>);

impl<'a, D: ?Sized, S: Scope<'a>> Drop for WaitGuard<'a, D, S> {
    fn drop(&mut self) {
        if let Some(request) = self.0.take() {
            if std::thread::panicking() {
                // Settle (dropping the operation) without raising a second
                // panic.
                drop(request.into_parts());
            } else {
                request.wait();
            }
        }
    }
}

impl<'a, D: ?Sized, S: Scope<'a>> From<Request<'a, D, S>> for WaitGuard<'a, D, S> {
    fn from(request: Request<'a, D, S>) -> Self {
        WaitGuard(Some(request))
    }
}

impl<'a, D: ?Sized, S: Scope<'a>> From<WaitGuard<'a, D, S>> for Request<'a, D, S> {
    fn from(mut guard: WaitGuard<'a, D, S>) -> Self {
        guard
            .0
            .take()
            .expect("a WaitGuard always holds its request")
    }
}

impl<'a, D: ?Sized, S: Scope<'a>> WaitGuard<'a, D, S> {
    fn cancel(&self) {
        if let Some(request) = &self.0 {
            request.cancel();
        }
    }
}

/// Cancels its request, then waits for it, when dropped (rsmpi's
/// `CancelGuard`).
#[derive(Debug)]
pub struct CancelGuard<'a, D: ?Sized, S: Scope<'a> = StaticScope>(Option<WaitGuard<'a, D, S>>);

impl<'a, D: ?Sized, S: Scope<'a>> Drop for CancelGuard<'a, D, S> {
    fn drop(&mut self) {
        if let Some(guard) = self.0.take() {
            guard.cancel();
        }
    }
}

impl<'a, D: ?Sized, S: Scope<'a>> From<Request<'a, D, S>> for CancelGuard<'a, D, S> {
    fn from(request: Request<'a, D, S>) -> Self {
        CancelGuard(Some(WaitGuard::from(request)))
    }
}

impl<'a, D: ?Sized, S: Scope<'a>> From<WaitGuard<'a, D, S>> for CancelGuard<'a, D, S> {
    fn from(guard: WaitGuard<'a, D, S>) -> Self {
        CancelGuard(Some(guard))
    }
}

impl<'a, D: ?Sized, S: Scope<'a>> From<CancelGuard<'a, D, S>> for WaitGuard<'a, D, S> {
    fn from(mut guard: CancelGuard<'a, D, S>) -> Self {
        guard
            .0
            .take()
            .expect("a CancelGuard always holds its request")
    }
}

/// Runs `f` with a scope and a [`RequestCollection`] for completing many
/// requests together (rsmpi's `multiple_scope`); `reserve` is the number
/// of requests expected.
///
/// Requests of the scope (or of any scope whose buffers live for `'a`) are
/// [`add`](RequestCollection::add)ed to the collection, which then owns
/// them. When `f` returns, a collection with requests still incomplete
/// settles them as a dropped [`Request`] does (withdrawn, or finished, so
/// that no rank touches their buffers any more) and then panics.
///
/// ```
/// use myriad::traits::*;
///
/// myriad::run(3, |universe| {
///     let world = universe.world();
///     let (rank, size) = (world.rank(), world.size());
///     let mut got = vec![0i32; size as usize];
///     myriad::request::multiple_scope(2 * size as usize, |scope, coll| {
///         for (peer, slot) in got.iter_mut().enumerate() {
///             let peer = world.process_at_rank(peer as i32);
///             coll.add(peer.immediate_receive_into(scope, slot));
///         }
///         for peer in 0..size {
///             coll.add(world.process_at_rank(peer).immediate_send(scope, &rank));
///         }
///         let mut done = Vec::new();
///         coll.wait_all(&mut done);
///         assert_eq!(done.len(), 2 * size as usize);
///     });
///     assert_eq!(got, (0..size).collect::<Vec<_>>());
/// })
/// .unwrap();
/// ```
pub fn multiple_scope<'a, F, R, D>(reserve: usize, f: F) -> R
where
    D: 'a + ?Sized,
    F: FnOnce(&LocalScope<'a>, &mut RequestCollection<'a, D>) -> R,
{
    let scope = LocalScope {
        num_requests: Cell::new(0),
        phantom: PhantomData,
    };
    // Dropped before the scope (its requests left the scope when added).
    let mut collection = RequestCollection::new(reserve);
    f(&scope, &mut collection)
}

/// A request of a [`RequestCollection`]: its operation and its buffer.
struct Entry<D: ?Sized> {
    /// Dropping it settles a pending operation.
    op: Op,
    data: *const D,
}

/// Requests completed together (rsmpi's `RequestCollection`; see
/// [`multiple_scope`]): `MPI_Waitany`, `MPI_Waitsome`, `MPI_Waitall` and
/// their `MPI_Test*` forms.
///
/// Each request keeps the index [`add`](Self::add) returned. A completed
/// request is handed out once, as `(index, status, buffer)`, and is no
/// longer [`incomplete`](Self::incomplete); later calls skip it.
///
/// # Panics
///
/// The waits and tests panic with the error of a failed operation
/// (truncation, type mismatch), as [`Request::wait`] does, and the waits
/// panic if a pending request belongs to another rank (it could never wake
/// this one). Dropping a collection with incomplete requests panics, after
/// settling them.
pub struct RequestCollection<'a, D: ?Sized> {
    entries: Vec<Option<Entry<D>>>,
    incomplete: usize,
    phantom: PhantomData<Cell<&'a ()>>,
}

impl<D: ?Sized> fmt::Debug for RequestCollection<'_, D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RequestCollection")
            .field("requests", &self.entries.len())
            .field("incomplete", &self.incomplete)
            .finish()
    }
}

/// A completed request of a collection: its index, status and buffer.
type Completed<'a, D> = (usize, Status, &'a D);

impl<'a, D: ?Sized> RequestCollection<'a, D> {
    fn new(reserve: usize) -> Self {
        RequestCollection {
            entries: Vec::with_capacity(reserve),
            incomplete: 0,
            phantom: PhantomData,
        }
    }

    /// The number of requests not yet handed out as completed.
    pub fn incomplete(&self) -> usize {
        self.incomplete
    }

    /// Adds a request and returns its index. The request leaves its scope:
    /// the collection completes it (or settles it when dropped).
    pub fn add<S>(&mut self, request: Request<'a, D, S>) -> usize
    where
        S: Scope<'a>,
    {
        let (op, data, _) = request.into_parts();
        self.entries.push(Some(Entry { op, data }));
        self.incomplete += 1;
        self.entries.len() - 1
    }

    /// Whether request `i` is still held and its operation has completed.
    fn is_ready(&self, i: usize) -> bool {
        matches!(&self.entries[i], Some(e) if e.op.is_complete())
    }

    /// The first held request whose operation has completed.
    fn first_ready(&self) -> Option<usize> {
        (0..self.entries.len()).find(|&i| self.is_ready(i))
    }

    /// Hands out request `i`: its index, status and buffer.
    #[track_caller]
    fn finish(&mut self, i: usize, site: &'static Location<'static>) -> Completed<'a, D> {
        let entry = self.entries[i].take().expect("a held request");
        self.incomplete -= 1;
        let status = entry.op.wait(site).or_raise();
        // SAFETY: `data` came from a `&'a D` or `&'a mut D` of the request;
        // its operation is over, so nothing else accesses it any more.
        (i, status, unsafe { &*entry.data })
    }

    /// Hands out every held request whose operation has completed, in
    /// index order, into `result` (cleared first).
    #[track_caller]
    fn finish_ready(
        &mut self,
        result: &mut Vec<Completed<'a, D>>,
        site: &'static Location<'static>,
    ) {
        result.clear();
        for i in 0..self.entries.len() {
            if self.is_ready(i) {
                result.push(self.finish(i, site));
            }
        }
    }

    /// Parks once while no held request has completed.
    #[track_caller]
    fn park(&self, site: &'static Location<'static>) {
        let ops = self.entries.iter().flatten().map(|e| &e.op);
        park_for_any(ops, site).or_raise();
    }

    /// Waits for one request to complete and returns its index, status and
    /// buffer; `None` if no request is incomplete (`MPI_Waitany`).
    #[track_caller]
    pub fn wait_any(&mut self) -> Option<(usize, Status, &'a D)> {
        let site = Location::caller();
        loop {
            if self.incomplete == 0 {
                return None;
            }
            if let Some(i) = self.first_ready() {
                return Some(self.finish(i, site));
            }
            self.park(site);
        }
    }

    /// Waits until at least one request completes and puts every completed
    /// one into `result` (cleared first; left empty if no request is
    /// incomplete) (`MPI_Waitsome`).
    #[track_caller]
    pub fn wait_some(&mut self, result: &mut Vec<(usize, Status, &'a D)>) {
        let site = Location::caller();
        result.clear();
        while self.incomplete > 0 && self.first_ready().is_none() {
            self.park(site);
        }
        self.finish_ready(result, site);
    }

    /// Waits for every request and puts those not handed out before into
    /// `result` (cleared first), in index order (`MPI_Waitall`).
    #[track_caller]
    pub fn wait_all(&mut self, result: &mut Vec<(usize, Status, &'a D)>) {
        let site = Location::caller();
        result.clear();
        result.reserve(self.incomplete);
        for i in 0..self.entries.len() {
            if self.entries[i].is_some() {
                // A blocking wait of the operation itself.
                result.push(self.finish(i, site));
            }
        }
    }

    /// The index, status and buffer of one completed request, if any
    /// (`MPI_Testany`). Never blocks; if none has completed it yields to the
    /// other ranks of this worker once and looks again, so polling loops let
    /// the peers run.
    #[track_caller]
    pub fn test_any(&mut self) -> Option<(usize, Status, &'a D)> {
        let site = Location::caller();
        if self.incomplete == 0 {
            return None;
        }
        let ready = self.first_ready().or_else(|| {
            sched::yield_now();
            self.first_ready()
        })?;
        Some(self.finish(ready, site))
    }

    /// Puts every completed request into `result` (cleared first), maybe
    /// none (`MPI_Testsome`). Never blocks; yields once as
    /// [`test_any`](Self::test_any) does if none has completed.
    #[track_caller]
    pub fn test_some(&mut self, result: &mut Vec<(usize, Status, &'a D)>) {
        let site = Location::caller();
        if self.incomplete > 0 && self.first_ready().is_none() {
            sched::yield_now();
        }
        self.finish_ready(result, site);
    }

    /// If every request has completed, puts those not handed out before
    /// into `result` (cleared first) and returns `true`; else hands out none
    /// and returns `false` (`MPI_Testall`). Never blocks; yields once as
    /// [`test_any`](Self::test_any) does if some have not completed.
    #[track_caller]
    pub fn test_all(&mut self, result: &mut Vec<(usize, Status, &'a D)>) -> bool {
        let site = Location::caller();
        result.clear();
        let all_done = |c: &Self| c.entries.iter().flatten().all(|e| e.op.is_complete());
        if !all_done(self) {
            sched::yield_now();
            if !all_done(self) {
                return false;
            }
        }
        self.finish_ready(result, site);
        true
    }
}

impl<D: ?Sized> Drop for RequestCollection<'_, D> {
    fn drop(&mut self) {
        let incomplete = self.incomplete;
        // Dropping each operation settles it, as a dropped `Request` does.
        self.entries.clear();
        self.incomplete = 0;
        if incomplete != 0 && !std::thread::panicking() {
            panic!(
                "a request collection was dropped with {incomplete} request(s) not completed: \
                 complete them with wait_all, wait_any, wait_some or the test forms"
            );
        }
    }
}
