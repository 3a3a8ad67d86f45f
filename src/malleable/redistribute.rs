//! Running a [`Plan`]: the methods (COL, RMA1, RMA2) under each strategy
//! (Blocking, Non-blocking, Wait Targets, Threading).
//!
//! Every background strategy has the same shape: start the operations,
//! run the caller's `work` with an [`InFlight`] handle whose `test`/`wait`
//! advance them, then finish what `work` left unfinished and free the
//! window. The operations' state lives in this call's frame (the window
//! borrows the source block, the requests borrow the target block), so no
//! buffer can go away while a peer still reads or writes it.

use crate::collective::CommunicatorCollectives;
use crate::communicator::Communicator;
use crate::datatype::{Equivalence, Partition, PartitionMut};
use crate::environment::threading_support;
use crate::error::{ArgError, CountError, Error};
use crate::request::{self, Request};
use crate::sched::Threading;
use crate::window::{Epoch, LockAssert, LockType, Window, WindowCreation};
use crate::{Count, Rank};

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
    /// A helper OS thread runs the blocking redistribution while `work`
    /// runs on the rank ([`crate::thread::scope`]); needs
    /// [`Threading::Multiple`].
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

/// A redistribution in progress, as the rank's `work` sees it: call
/// [`test`](Self::test) between iterations until it says done, or
/// [`wait`](Self::wait).
pub struct InFlight<'s> {
    step: &'s mut dyn FnMut(bool) -> Result<bool, Error>,
    done: bool,
    tests: usize,
}

impl std::fmt::Debug for InFlight<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InFlight")
            .field("done", &self.done)
            .field("tests", &self.tests)
            .finish()
    }
}

impl<'s> InFlight<'s> {
    fn new(step: &'s mut dyn FnMut(bool) -> Result<bool, Error>) -> Self {
        InFlight {
            step,
            done: false,
            tests: 0,
        }
    }

    /// Advances the redistribution without blocking (`MPI_Test*`): whether
    /// it is complete for this rank (its data arrived, and under Wait
    /// Targets every rank's did, so its window may go). A rank that is
    /// only a target has no iterations to overlap: its first test completes
    /// its part (MaM's flow).
    pub fn test(&mut self) -> Result<bool, Error> {
        if !self.done {
            self.tests += 1;
            self.done = (self.step)(false)?;
        }
        Ok(self.done)
    }

    /// Blocks until the redistribution is complete for this rank.
    pub fn wait(&mut self) -> Result<(), Error> {
        if !self.done {
            self.done = (self.step)(true)?;
            debug_assert!(self.done, "a blocking step completes");
        }
        Ok(())
    }

    /// Whether a test or wait saw it complete.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Tests so far that advanced it (iterations it overlapped).
    pub fn tests(&self) -> usize {
        self.tests
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
                let mut step = |_| Ok(true);
                let mut flight = InFlight::new(&mut step);
                flight.done = true;
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
        if threading_support() != Threading::Multiple {
            return Err(Error::unsupported(
                "the Threading redistribution strategy without Threading::Multiple \
                 (its helper thread calls MPI while the rank does)",
            ));
        }
        crate::thread::scope(|s| {
            let mut helper = Some(s.spawn(move || self.redistribute(comm, method, src, dst)));
            let mut step = |block: bool| -> Result<bool, Error> {
                let Some(h) = helper.as_ref() else {
                    return Ok(true);
                };
                if !block && !h.is_finished() {
                    crate::sched::yield_now();
                    return Ok(false);
                }
                match helper.take().expect("checked above").join() {
                    Ok(result) => result.map(|()| true),
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
        let mut step = |block: bool| -> Result<bool, Error> {
            if let Some(r) = exchange.take() {
                if block {
                    r.wait();
                } else {
                    match r.test() {
                        Ok(_) => {}
                        Err(r) => {
                            exchange = Some(r);
                            return Ok(false);
                        }
                    }
                }
                if !wait_targets {
                    return Ok(true);
                }
                barrier = Some(comm.immediate_barrier());
            }
            test_barrier(&mut barrier, block)
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

/// RMA1 or RMA2 under Non-blocking or Wait Targets.
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
    let is_source = role.rank < role.plan.sources();
    let exposed = &mut src[..role.source_len];
    comm.with_window(exposed, |win| -> Result<R, Error> {
        let Some(receive) = &role.receive else {
            // Nothing to read: under Wait Targets, say so at once and keep
            // iterating until every target has read.
            let mut barrier = wait_targets.then(|| comm.immediate_barrier());
            let mut step = |block| test_barrier(&mut barrier, block);
            let mut flight = InFlight::new(&mut step);
            let out = work(&mut flight);
            flight.wait()?;
            return Ok(out);
        };
        if wait_targets && !is_source {
            // Only a target: no iterations to overlap, so it reads
            // blocking, then enters the barrier and waits (seed 000's
            // Figure 4), all in its first test.
            let mut pending = Some(dst);
            let mut step = |_block| -> Result<bool, Error> {
                if let Some(dst) = pending.take() {
                    read_blocking(win, method, receive, dst)?;
                    comm.immediate_barrier().wait();
                }
                Ok(true)
            };
            let mut flight = InFlight::new(&mut step);
            let out = work(&mut flight);
            flight.wait()?;
            return Ok(out);
        }
        let pieces = split_pieces(dst, receive);
        let all = match method {
            Method::RmaLockAll => Some(win.lock_all_with(LockAssert::NoCheck)?),
            _ => None,
        };
        let mut locks = Vec::new();
        if all.is_none() {
            for (source, _, _) in &pieces {
                locks.push(win.lock_with(
                    *source as Rank,
                    LockType::Shared,
                    LockAssert::NoCheck,
                )?);
            }
        }
        let out = request::multiple_scope(pieces.len(), |scope, reads| -> Result<R, Error> {
            for (i, (source, from, piece)) in pieces.into_iter().enumerate() {
                let read = match &all {
                    Some(all) => all.rget(scope, source as Rank, from, piece)?,
                    None => locks[i].rget(scope, source as Rank, from, piece)?,
                };
                reads.add(read);
            }
            let mut barrier: Option<Request<'static, ()>> = None;
            let mut read_all = false;
            let mut done = Vec::new();
            let mut step = |block: bool| -> Result<bool, Error> {
                if !read_all {
                    if block {
                        reads.wait_all(&mut done);
                    } else if !reads.test_all(&mut done) {
                        return Ok(false);
                    }
                    read_all = true;
                    if !wait_targets {
                        return Ok(true);
                    }
                    barrier = Some(comm.immediate_barrier());
                }
                test_barrier(&mut barrier, block)
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
