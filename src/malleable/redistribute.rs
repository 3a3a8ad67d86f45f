//! Running a [`Plan`]: the methods (COL, RMA1, RMA2) under each strategy
//! (Blocking, Non-blocking, Wait Targets, Threading).
//!
//! Every background strategy has the same shape: start the operations,
//! run the caller's `work` with an [`InFlight`] handle whose `test`/`wait`
//! advance them, then finish what `work` left unfinished and free the
//! window. The operations' state lives in this call's frame (the window
//! borrows the source block, the requests borrow the target block), so no
//! buffer can go away while a peer still reads or writes it.

use std::cell::Cell;
use std::collections::VecDeque;

use crate::collective::CommunicatorCollectives;
use crate::communicator::Communicator;
use crate::datatype::{Equivalence, Partition, PartitionMut};
use crate::error::{ArgError, CountError, Error};
use crate::request::{self, Request};
use crate::sched::Threading;
use crate::window::{Epoch, LockAssert, LockType, Window, WindowCreation};
use crate::{Count, Rank};

use super::helper;
use super::plan::{Plan, TargetPlan};

/// How the data moves (seed 000's methods).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    /// COL: one `all_to_all_varcount` over the communicator, zero counts
    /// for ranks that are not sources or not targets.
    Collective,
    /// RMA1: windows over the source blocks; each target opens one shared
    /// `NOCHECK` lock per source it reads, gets, then unlocks them all.
    RmaLock,
    /// RMA2: windows over the source blocks; each target opens one
    /// `lock_all` (`NOCHECK`) epoch, gets, `unlock_all`.
    RmaLockAll,
}

impl Method {
    /// Every method, in the seed's order.
    pub const ALL: [Method; 3] = [Method::Collective, Method::RmaLock, Method::RmaLockAll];

    /// The seed's name: `COL`, `RMA1`, `RMA2`.
    pub fn name(self) -> &'static str {
        match self {
            Method::Collective => "COL",
            Method::RmaLock => "RMA1",
            Method::RmaLockAll => "RMA2",
        }
    }
}

/// When the data moves relative to the rank's own work (seed 000's
/// strategies).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Strategy {
    /// Everything completes before `work` runs.
    Blocking,
    /// Immediate operations (`immediate_all_to_all_varcount_into`, or
    /// `rget`s inside the epochs), tested by [`InFlight::test`]; the
    /// window's free at the end is collective and blocking.
    NonBlocking,
    /// MaM's Wait Targets: targets read (`rget`s, or the immediate
    /// all-to-all), test them all, then enter an immediate barrier; ranks
    /// with nothing to read enter it at once. Every rank keeps iterating,
    /// testing the barrier; the epochs close and the window is freed only
    /// after it completes, so nobody blocks in the free.
    WaitTargets,
    /// A helper thread runs the blocking redistribution while `work` runs
    /// on the rank: a user-level thread of the rank (a task on its worker,
    /// as MPC runs threads; an OS thread when the caller is one itself);
    /// needs [`Threading::Multiple`].
    Threading,
}

impl Strategy {
    /// Every strategy.
    pub const ALL: [Strategy; 4] = [
        Strategy::Blocking,
        Strategy::NonBlocking,
        Strategy::WaitTargets,
        Strategy::Threading,
    ];

    /// A short name: `B`, `NB`, `WT`, `T` (the seed's abbreviations).
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Blocking => "B",
            Strategy::NonBlocking => "NB",
            Strategy::WaitTargets => "WT",
            Strategy::Threading => "T",
        }
    }
}

/// How far one call on an [`InFlight`] may advance the redistribution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Advance {
    /// Block until it is complete for this rank.
    Wait,
    /// Do not block; issue at most this many bytes of this rank's reads.
    Test(usize),
}

/// How far the redistribution is, as one rank sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Progress {
    /// This rank's own part is still in flight.
    Pending,
    /// This rank's own part is complete, but not yet every rank's: under
    /// Wait Targets, it has entered the barrier, which has not completed.
    Mine,
    /// Complete for this rank.
    Done,
}

impl Progress {
    /// After a test of the Wait Targets barrier (or where there is none):
    /// the rank's own part is complete either way.
    fn of_barrier(done: bool) -> Progress {
        if done {
            Progress::Done
        } else {
            Progress::Mine
        }
    }
}

/// One advance's outcome, and the bytes of this rank's reads issued by
/// this call.
type Stepped = Result<(Progress, usize), Error>;

/// A redistribution in progress, as the rank's `work` sees it: call
/// [`test`](Self::test) (or [`test_bounded`](Self::test_bounded)) between
/// iterations until it says done, or [`wait`](Self::wait).
pub struct InFlight<'s> {
    step: &'s mut dyn FnMut(Advance) -> Stepped,
    done: bool,
    mine: bool,
    tests: usize,
    read: usize,
    most: usize,
}

impl std::fmt::Debug for InFlight<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InFlight")
            .field("done", &self.done)
            .field("tests", &self.tests)
            .field("read", &self.read)
            .finish()
    }
}

impl<'s> InFlight<'s> {
    fn new(step: &'s mut dyn FnMut(Advance) -> Stepped) -> Self {
        InFlight {
            step,
            done: false,
            mine: false,
            tests: 0,
            read: 0,
            most: 0,
        }
    }

    fn advance(&mut self, how: Advance) -> Result<bool, Error> {
        if !self.done {
            let (progress, bytes) = (self.step)(how)?;
            self.done = progress == Progress::Done;
            self.mine = progress != Progress::Pending;
            self.read += bytes;
            self.most = self.most.max(bytes);
        }
        Ok(self.done)
    }

    /// Advances the redistribution without blocking (`MPI_Test*`): whether
    /// it is complete for this rank (its data arrived, and under Wait
    /// Targets every rank's did, so its window may go). A rank that is
    /// only a target has no iterations to overlap: under Wait Targets its
    /// first test completes its part (MaM's flow).
    pub fn test(&mut self) -> Result<bool, Error> {
        self.test_bounded(usize::MAX)
    }

    /// [`test`](Self::test), issuing at most `bytes` bytes of this rank's
    /// reads (at least one element, so it always progresses; `0` issues
    /// none and only tests what was issued, a second look at a Wait
    /// Targets barrier that adds no copy to the iteration): the RMA
    /// methods under Non-blocking and Wait Targets read in pieces, so the
    /// copy work a test adds to an iteration is bounded (in one process a
    /// get is a CPU copy, which InfiniBand's NIC would do without the
    /// CPU). Under Wait Targets a rank that is only a target enters the
    /// barrier and waits for it in the test that issues its last read.
    /// The collective method and the Blocking and Threading strategies
    /// have no pieces: there it is `test`.
    pub fn test_bounded(&mut self, bytes: usize) -> Result<bool, Error> {
        if !self.done {
            self.tests += 1;
        }
        self.advance(Advance::Test(bytes))
    }

    /// Blocks until the redistribution is complete for this rank.
    pub fn wait(&mut self) -> Result<(), Error> {
        let done = self.advance(Advance::Wait)?;
        debug_assert!(done, "a blocking step completes");
        Ok(())
    }

    /// Whether a test or wait saw it complete.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Whether a test or wait saw this rank's own part complete: its
    /// reads landed or its data was exchanged, and under Wait Targets it
    /// entered the barrier (which completes once every rank has). Ranks
    /// that agree on their tests can tell from it when one more test
    /// (`test_bounded(0)`) is worth making before they iterate again:
    /// only once every rank's part is complete can the whole be.
    pub fn is_mine_done(&self) -> bool {
        self.mine || self.done
    }

    /// Tests so far that advanced it (iterations it overlapped).
    pub fn tests(&self) -> usize {
        self.tests
    }

    /// Bytes of this rank's reads issued so far by its tests and waits,
    /// and the most one call issued (RMA methods under Non-blocking and
    /// Wait Targets; 0 otherwise).
    pub fn read_bytes(&self) -> (usize, usize) {
        (self.read, self.most)
    }
}

/// This rank's role in a plan, with its buffers checked.
struct Role<'p> {
    rank: usize,
    /// Elements of this rank's source block (0 if not a source).
    source_len: usize,
    /// This rank's reads, if it is a target.
    receive: Option<TargetPlan>,
    plan: &'p Plan,
}

impl<'p> Role<'p> {
    fn of<T, C: Communicator + ?Sized>(
        plan: &'p Plan,
        comm: &C,
        src: &[T],
        dst: &[T],
    ) -> Result<Role<'p>, Error> {
        let size = comm.size();
        if (size as usize) < plan.sources().max(plan.targets()) {
            return Err(Error::Arg(ArgError::PlanRanks {
                sources: plan.sources(),
                targets: plan.targets(),
                size,
            }));
        }
        let rank = comm.rank() as usize;
        let source_len = if rank < plan.sources() {
            plan.source_block(rank).len()
        } else {
            0
        };
        let target_len = if rank < plan.targets() {
            plan.target_block(rank).len()
        } else {
            0
        };
        let check = |role: &'static str, needed: usize, len: usize| {
            if len < needed {
                Err(Error::Arg(ArgError::RedistributionBuffer {
                    role,
                    rank: rank as Rank,
                    needed,
                    len,
                }))
            } else {
                Ok(())
            }
        };
        check("source", source_len, src.len())?;
        check("target", target_len, dst.len())?;
        Ok(Role {
            rank,
            source_len,
            receive: (rank < plan.targets()).then(|| plan.receive(rank)),
            plan,
        })
    }

    /// The collective method's parts over a communicator of `size` ranks:
    /// its counts and displacements are `Count`s, so a plan whose total
    /// does not fit one is an error (the RMA methods have no such limit).
    fn parts(&self, size: usize) -> Result<[Vec<Count>; 4], Error> {
        if Count::try_from(self.plan.total()).is_err() {
            return Err(Error::Count(CountError::BufferTooLarge {
                len: self.plan.total(),
            }));
        }
        let (mut sc, mut sd, mut rc, mut rd) =
            (vec![0; size], vec![0; size], vec![0; size], vec![0; size]);
        // The casts are checked: every count and displacement is at most
        // the plan's total, which fits a `Count`.
        if self.rank < self.plan.sources() {
            let send = self.plan.send(self.rank);
            for t in send.targets() {
                sc[t] = send.counts()[t] as Count;
                sd[t] = send.displs()[t] as Count;
            }
        }
        if let Some(receive) = &self.receive {
            for s in receive.sources() {
                rc[s] = receive.counts()[s] as Count;
                rd[s] = receive.displs()[s] as Count;
            }
        }
        Ok([sc, sd, rc, rd])
    }
}

/// Splits `dst` into the disjoint pieces each read lands in, in order.
fn split_pieces<'d, T>(
    mut dst: &'d mut [T],
    receive: &TargetPlan,
) -> Vec<(usize, usize, &'d mut [T])> {
    let mut out = Vec::new();
    let mut at = 0;
    for (source, from, range) in receive.pieces() {
        let rest = std::mem::take(&mut dst);
        let (_, rest) = rest.split_at_mut(range.start - at);
        let (piece, rest) = rest.split_at_mut(range.len());
        dst = rest;
        at = range.end;
        out.push((source, from, piece));
    }
    out
}

/// Blocking reads of `receive` through `win` (RMA1 or RMA2).
fn read_blocking<T: Equivalence + Copy>(
    win: &Window<'_, T>,
    method: Method,
    receive: &TargetPlan,
    dst: &mut [T],
) -> Result<(), Error> {
    let pieces = split_pieces(dst, receive);
    match method {
        Method::RmaLock => {
            let mut locks = Vec::with_capacity(pieces.len());
            for (source, from, piece) in pieces {
                let lock = win.lock_with(source as Rank, LockType::Shared, LockAssert::NoCheck)?;
                lock.get(source as Rank, from, piece)?;
                locks.push(lock);
            }
            drop(locks); // the unlocks
        }
        Method::RmaLockAll => {
            let all = win.lock_all_with(LockAssert::NoCheck)?;
            for (source, from, piece) in pieces {
                all.get(source as Rank, from, piece)?;
            }
            all.unlock_all();
        }
        Method::Collective => unreachable!("not an RMA method"),
    }
    Ok(())
}

impl Plan {
    /// Redistributes `src` (this rank's source block, if it is a source)
    /// into `dst` (its target block, if it is a target) with `method`,
    /// blocking: collective over `comm`, whose ranks `0..NS` are the
    /// sources and `0..NT` the targets. Ranks that are neither take part
    /// too (they enter the collective or create an empty window). Used for
    /// MaM's variable data, at every resize.
    ///
    /// Errors: a communicator smaller than the plan's sides, `src` or `dst`
    /// shorter than this rank's blocks (each rank checks its own buffers:
    /// if only some ranks fail, the others wait in the collective and the
    /// job's deadlock report names them).
    pub fn redistribute<C, T>(
        &self,
        comm: &C,
        method: Method,
        src: &mut [T],
        dst: &mut [T],
    ) -> Result<(), Error>
    where
        C: Communicator + ?Sized,
        T: Equivalence + Copy,
    {
        let role = Role::of(self, comm, src, dst)?;
        match method {
            Method::Collective => {
                let [sc, sd, rc, rd] = role.parts(comm.size() as usize)?;
                let send = Partition::new(&src[..], sc, sd);
                let mut recv = PartitionMut::new(&mut dst[..], rc, rd);
                comm.all_to_all_varcount_into(&send, &mut recv);
                Ok(())
            }
            Method::RmaLock | Method::RmaLockAll => {
                let exposed = &mut src[..role.source_len];
                comm.with_window(exposed, |win| match &role.receive {
                    Some(receive) => read_blocking(win, method, receive, dst),
                    None => Ok(()),
                })?
            }
        }
    }

    /// Redistributes like [`redistribute`](Self::redistribute) while the
    /// rank runs `work`, which should call [`InFlight::test`] between its
    /// iterations (or [`InFlight::wait`]); what `work` leaves unfinished is
    /// completed before this returns, and the window (RMA methods) is
    /// freed then. Used for MaM's constant data.
    ///
    /// `comm` should carry nothing else while `work` runs (pass a
    /// duplicate of the application's communicator): the strategies start
    /// collectives on it (the all-to-all, the barrier, the window's free)
    /// at moments that differ from rank to rank. `src` is exposed or sent
    /// for the whole call, so `work` computes on other data.
    ///
    /// [`Strategy::Threading`] needs [`Threading::Multiple`] (else
    /// [`Error::Unsupported`]), `C: Sync` and `T: Send`, which every
    /// communicator and element type of myriad is.
    pub fn redistribute_in_background<C, T, R>(
        &self,
        comm: &C,
        method: Method,
        strategy: Strategy,
        src: &mut [T],
        dst: &mut [T],
        work: impl FnOnce(&mut InFlight<'_>) -> R,
    ) -> Result<R, Error>
    where
        C: Communicator + Sync + ?Sized,
        T: Equivalence + Copy + Send,
    {
        let role = Role::of(self, comm, src, dst)?;
        match (strategy, method) {
            (Strategy::Blocking, _) => {
                self.redistribute(comm, method, src, dst)?;
                let mut step = |_| Ok((Progress::Done, 0));
                let mut flight = InFlight::new(&mut step);
                flight.done = true;
                flight.mine = true;
                Ok(work(&mut flight))
            }
            (Strategy::Threading, _) => self.threaded(comm, method, src, dst, work),
            (_, Method::Collective) => collective_background(comm, &role, strategy, src, dst, work),
            (_, _) => rma_background(comm, &role, method, strategy, src, dst, work),
        }
    }

    fn threaded<C, T, R>(
        &self,
        comm: &C,
        method: Method,
        src: &mut [T],
        dst: &mut [T],
        work: impl FnOnce(&mut InFlight<'_>) -> R,
    ) -> Result<R, Error>
    where
        C: Communicator + Sync + ?Sized,
        T: Equivalence + Copy + Send,
    {
        let core = comm.core();
        // The level of the rank the caller acts for (`threading_support`
        // knows only ranks and tasks, not an OS thread of the rank).
        let ctx = core.caller()?;
        let thread = ctx.is_thread();
        if ctx.sched().threading_of(ctx.local) != Threading::Multiple {
            return Err(Error::unsupported(
                "the Threading redistribution strategy without Threading::Multiple \
                 (its helper thread calls MPI while the rank does)",
            ));
        }
        if thread {
            // An OS thread acting for a rank has no worker to start a task
            // on: its helper is an OS thread too.
            return self.threaded_on_os_thread(comm, method, src, dst, work);
        }
        let result: helper::Slot = Cell::new(None);
        request::scope(|scope| {
            let body = || self.redistribute(comm, method, src, dst);
            let mut run = Some(helper::start(core, scope, &result, body)?);
            let mut step = |how: Advance| -> Stepped {
                let Some(r) = run.take() else {
                    return Ok((Progress::Done, 0));
                };
                if how == Advance::Wait {
                    r.wait_without_status();
                } else if let Err(r) = r.test() {
                    // `test` yielded: the helper runs if it can.
                    run = Some(r);
                    return Ok((Progress::Pending, 0));
                }
                helper::result(&result).map(|()| (Progress::Done, 0))
            };
            let mut flight = InFlight::new(&mut step);
            let out = work(&mut flight);
            flight.wait()?;
            Ok(out)
        })
    }

    /// The Threading strategy for a caller that is itself an OS thread
    /// acting for a rank: the helper is an OS thread
    /// ([`crate::thread::scope`]).
    fn threaded_on_os_thread<C, T, R>(
        &self,
        comm: &C,
        method: Method,
        src: &mut [T],
        dst: &mut [T],
        work: impl FnOnce(&mut InFlight<'_>) -> R,
    ) -> Result<R, Error>
    where
        C: Communicator + Sync + ?Sized,
        T: Equivalence + Copy + Send,
    {
        crate::thread::scope(|s| {
            let mut helper = Some(s.spawn(move || self.redistribute(comm, method, src, dst)));
            let mut step = |how: Advance| -> Stepped {
                let Some(h) = helper.as_ref() else {
                    return Ok((Progress::Done, 0));
                };
                if how != Advance::Wait && !h.is_finished() {
                    crate::sched::yield_now();
                    return Ok((Progress::Pending, 0));
                }
                match helper.take().expect("checked above").join() {
                    Ok(result) => result.map(|()| (Progress::Done, 0)),
                    Err(panic) => std::panic::resume_unwind(panic),
                }
            };
            let mut flight = InFlight::new(&mut step);
            let out = work(&mut flight);
            flight.wait()?;
            Ok(out)
        })
    }
}

/// COL under Non-blocking or Wait Targets.
fn collective_background<C, T, R>(
    comm: &C,
    role: &Role<'_>,
    strategy: Strategy,
    src: &[T],
    dst: &mut [T],
    work: impl FnOnce(&mut InFlight<'_>) -> R,
) -> Result<R, Error>
where
    C: Communicator + ?Sized,
    T: Equivalence + Copy,
{
    let [sc, sd, rc, rd] = role.parts(comm.size() as usize)?;
    let send = Partition::new(src, sc, sd);
    let mut recv = PartitionMut::new(dst, rc, rd);
    request::scope(|scope| {
        let mut exchange = Some(comm.immediate_all_to_all_varcount_into(scope, &send, &mut recv));
        let mut barrier: Option<Request<'static, ()>> = None;
        let wait_targets = strategy == Strategy::WaitTargets;
        let mut step = |how: Advance| -> Stepped {
            let block = how == Advance::Wait;
            if let Some(r) = exchange.take() {
                if block {
                    r.wait();
                } else {
                    match r.test() {
                        Ok(_) => {}
                        Err(r) => {
                            exchange = Some(r);
                            return Ok((Progress::Pending, 0));
                        }
                    }
                }
                if !wait_targets {
                    return Ok((Progress::Done, 0));
                }
                barrier = Some(comm.immediate_barrier());
            }
            Ok((Progress::of_barrier(test_barrier(&mut barrier, block)?), 0))
        };
        let mut flight = InFlight::new(&mut step);
        let out = work(&mut flight);
        flight.wait()?;
        Ok(out)
    })
}

/// Tests (or waits for) the barrier in `slot`; true when it completed.
fn test_barrier(slot: &mut Option<Request<'static, ()>>, block: bool) -> Result<bool, Error> {
    let Some(r) = slot.take() else {
        return Ok(true);
    };
    if block {
        r.wait();
        return Ok(true);
    }
    match r.test() {
        Ok(_) => Ok(true),
        Err(r) => {
            *slot = Some(r);
            Ok(false)
        }
    }
}

/// This rank's reads not issued yet, in order: `(source, index in the
/// source's window, where they land)`.
struct Pending<'d, T> {
    queue: VecDeque<(usize, usize, &'d mut [T])>,
}

impl<'d, T> Pending<'d, T> {
    /// Hands `issue` the next reads, at most `bytes` bytes of them (at
    /// least one element unless `bytes` is 0), splitting a piece where the
    /// budget ends; returns the bytes issued.
    fn issue(
        &mut self,
        bytes: usize,
        mut issue: impl FnMut(usize, usize, &'d mut [T]) -> Result<(), Error>,
    ) -> Result<usize, Error> {
        if bytes == 0 {
            return Ok(0);
        }
        let size = std::mem::size_of::<T>();
        let mut budget = (bytes / size.max(1)).max(1);
        let mut issued = 0;
        while budget > 0 {
            let Some((source, from, piece)) = self.queue.pop_front() else {
                break;
            };
            let take = piece.len().min(budget);
            let (head, tail) = piece.split_at_mut(take);
            if !tail.is_empty() {
                self.queue.push_front((source, from + take, tail));
            }
            issue(source, from, head)?;
            budget -= take;
            issued += take;
        }
        Ok(issued * size)
    }

    fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

/// RMA1 or RMA2 under Non-blocking or Wait Targets: the epochs open at
/// the start, the reads are issued (`rget`) as the tests' budgets allow
/// and completed by `test_all`; under Wait Targets the immediate barrier
/// follows the last read (ranks with nothing to read enter it at once),
/// and the epochs close and the window goes only after it completed.
fn rma_background<C, T, R>(
    comm: &C,
    role: &Role<'_>,
    method: Method,
    strategy: Strategy,
    src: &mut [T],
    dst: &mut [T],
    work: impl FnOnce(&mut InFlight<'_>) -> R,
) -> Result<R, Error>
where
    C: Communicator + ?Sized,
    T: Equivalence + Copy,
{
    let wait_targets = strategy == Strategy::WaitTargets;
    // Only a target: no iterations to overlap, so once its reads are
    // issued it waits for the barrier (seed 000's Figure 4).
    let only_target = role.rank >= role.plan.sources();
    let exposed = &mut src[..role.source_len];
    comm.with_window(exposed, |win| -> Result<R, Error> {
        let Some(receive) = &role.receive else {
            // Nothing to read: under Wait Targets, say so at once and keep
            // iterating until every target has read.
            let mut barrier = wait_targets.then(|| comm.immediate_barrier());
            let mut step = |how| {
                let done = test_barrier(&mut barrier, how == Advance::Wait)?;
                Ok((Progress::of_barrier(done), 0))
            };
            let mut flight = InFlight::new(&mut step);
            let out = work(&mut flight);
            flight.wait()?;
            return Ok(out);
        };
        let mut pending = Pending {
            queue: split_pieces(dst, receive).into(),
        };
        let all = match method {
            Method::RmaLockAll => Some(win.lock_all_with(LockAssert::NoCheck)?),
            _ => None,
        };
        // RMA1: one lock per source, in the order of the reads.
        let mut locks = Vec::new();
        if all.is_none() {
            for s in receive.pieces().map(|(source, _, _)| source) {
                let lock = win.lock_with(s as Rank, LockType::Shared, LockAssert::NoCheck)?;
                locks.push((s, lock));
            }
        }
        let reserve = pending.queue.len();
        let out = request::multiple_scope(reserve, |scope, reads| -> Result<R, Error> {
            let mut barrier: Option<Request<'static, ()>> = None;
            let mut read_all = false;
            let mut done = Vec::new();
            let mut step = |how: Advance| -> Stepped {
                let block = how == Advance::Wait;
                let mut bytes = 0;
                if !read_all {
                    let budget = match how {
                        Advance::Wait => usize::MAX,
                        Advance::Test(b) => b,
                    };
                    bytes = pending.issue(budget, |source, from, piece| {
                        let read = match &all {
                            Some(all) => all.rget(scope, source as Rank, from, piece)?,
                            None => {
                                let at = locks.partition_point(|(s, _)| *s < source);
                                locks[at].1.rget(scope, source as Rank, from, piece)?
                            }
                        };
                        reads.add(read);
                        Ok(())
                    })?;
                    if !pending.is_empty() {
                        return Ok((Progress::Pending, bytes));
                    }
                    if block {
                        reads.wait_all(&mut done);
                    } else if !reads.test_all(&mut done) {
                        return Ok((Progress::Pending, bytes));
                    }
                    read_all = true;
                    if !wait_targets {
                        return Ok((Progress::Done, bytes));
                    }
                    barrier = Some(comm.immediate_barrier());
                }
                let block = block || only_target;
                Ok((
                    Progress::of_barrier(test_barrier(&mut barrier, block)?),
                    bytes,
                ))
            };
            let mut flight = InFlight::new(&mut step);
            let out = work(&mut flight);
            flight.wait()?;
            Ok(out)
        })?;
        drop(locks); // the unlocks, after the barrier under Wait Targets
        drop(all);
        Ok(out)
    })?
}
