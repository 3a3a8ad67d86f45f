//! Reduce, all-reduce and reduce-scatter algorithms.
//!
//! * `shm`: with a commutative operation every rank folds its contribution
//!   into the round's accumulator as it arrives (under the accumulator's
//!   lock), so the work is spread over the ranks and a rank's buffer is free
//!   again at once; once everyone arrived, every rank (or the root) copies
//!   the result out. With a non-commutative operation ranks publish their
//!   buffers and the last to arrive reduces them in rank order, in the
//!   round's one turn, which the others wait out.
//! * `linear` (reduce): the root receives every contribution and reduces in
//!   rank order.
//! * `binomial` (reduce): a binomial tree; for a non-commutative operation the
//!   tree is rooted at rank 0 (where it preserves rank order) and the result
//!   then sent to the root.
//! * `recursive_doubling` (all-reduce): log2 p exchange steps (MPICH's
//!   handling of a non-power-of-two p: the first ranks pair up first).
//! * `reduce_broadcast` (all-reduce): binomial reduce to rank 0, then
//!   binomial broadcast.
//! * `reduce_scatter` (reduce-scatter-block): reduce to rank 0, then scatter.

use super::doubling::Doubling;
use super::exchange::Exchange;
use super::op::{self, OpRef};
use super::operand::{combine, copy_same, Scratch};
use super::round::{Accumulator, Failed, Readers, Round};
use super::{bcast, Algorithm, Call};
use crate::datatype::copy::Layout;
use crate::error::{CountError, Error, TypeError};
use crate::sync::spin::SpinLock;
use crate::Rank;

/// Checks the operation and the buffers of a reduction. (Inlined: the
/// usual case, a predefined operation on one base type with buffers of
/// one type by address, takes a few comparisons; the rest is out of line.)
#[inline]
pub(crate) fn check(
    call: &Call<'_>,
    op: &OpRef<'_>,
    send: &Layout,
    recv: Option<&Layout>,
) -> Result<(), Error> {
    if let (OpRef::System(system), [run]) = (op, send.ty.map().signature()) {
        let fits = match recv {
            None => true,
            Some(recv) => std::ptr::eq(recv.ty.map(), send.ty.map()) && recv.count >= send.count,
        };
        if fits && system.supports(run.kind) {
            return Ok(());
        }
    }
    check_fully(call, op, send, recv)
}

/// [`check`] in full.
#[inline(never)]
fn check_fully(
    call: &Call<'_>,
    op: &OpRef<'_>,
    send: &Layout,
    recv: Option<&Layout>,
) -> Result<(), Error> {
    op::check_supported(op, send.ty.map())?;
    if let Some(recv) = recv {
        let (s, r) = (send.ty.map(), recv.ty.map());
        if !std::ptr::eq(s, r) && s != r {
            return Err(Error::Type(TypeError::ReduceBuffers {
                op: call.kind.name(),
                send: s.name().into(),
                recv: r.name().into(),
            }));
        }
        if recv.count < send.count {
            return Err(Error::Count(CountError::ReduceCount {
                op: call.kind.name(),
                holds: recv.count,
                reduced: send.count,
            }));
        }
    }
    Ok(())
}

/// Reduces `send` of every rank into `recv` at `root` (`None`: all ranks).
#[inline]
pub(crate) fn reduce(
    call: &Call<'_>,
    root: Option<Rank>,
    op: &OpRef<'_>,
    commutative: bool,
    send: &Layout,
    recv: Option<&Layout>,
) -> Result<(), Error> {
    if call.size() == 1 {
        if let Some(recv) = recv {
            copy_same(send, recv);
        }
        return Ok(());
    }
    match (call.algorithm, root) {
        (Algorithm::SharedMemory, _) => shm(call, op, commutative, send, recv),
        _ => not_shared(call, root, op, commutative, send, recv),
    }
}

/// The algorithms other than `shm`, out of line: their locals would widen
/// the frame of every shared-memory call, whose stack lines are cold each
/// time a rank runs again among thousands (`barrier.rs`).
#[inline(never)]
fn not_shared(
    call: &Call<'_>,
    root: Option<Rank>,
    op: &OpRef<'_>,
    commutative: bool,
    send: &Layout,
    recv: Option<&Layout>,
) -> Result<(), Error> {
    let rank = call.rank();
    match (call.algorithm, root) {
        (Algorithm::Hierarchical, _) => {
            super::hier::reduce(call, root, op, commutative, send, recv)
        }
        (Algorithm::Linear, Some(root)) => linear(call, root, op, send, recv),
        (Algorithm::Binomial, Some(root)) => binomial(call, root, op, commutative, send, recv),
        (Algorithm::RecursiveDoubling, None) => {
            recursive_doubling(call, op, commutative, send, recv.expect("all-reduce"))
        }
        (Algorithm::ReduceBroadcast, None) => {
            let recv = recv.expect("all-reduce");
            let tree = Call {
                algorithm: Algorithm::Binomial,
                ..*call
            };
            binomial(&tree, 0, op, commutative, send, (rank == 0).then_some(recv))?;
            bcast::broadcast(&tree, 0, &recv.slice(0, send.count))
        }
        _ => shm(call, op, commutative, send, recv),
    }
}

#[inline]
fn shm(
    call: &Call<'_>,
    op: &OpRef<'_>,
    commutative: bool,
    send: &Layout,
    recv: Option<&Layout>,
) -> Result<(), Error> {
    let rounds = &call.comm.coll().rounds;
    let round = if commutative {
        rounds.join_checked(call)?
    } else {
        rounds.join_published(call, Readers::One)?
    };
    // A one-word error until the round is left (an `Error` would be
    // copied whole, Ok or not, from one frame's room to the next).
    let result = if commutative {
        shm_commutative(call, &round, op, send, recv, None)
    } else {
        shm_in_order(call, &round, op, send, recv)
    };
    rounds.leave(call, round);
    Ok(result?)
}

/// Folds `send` into this worker's partial result; the last rank to arrive
/// combines the workers' partials into `round.acc` and wakes everyone. Then
/// `recv` gets the result (or block `block.0` of `block.1` elements of it;
/// without a block, `send.count` elements: `recv` may hold more).
#[inline]
fn shm_commutative(
    call: &Call<'_>,
    round: &Round,
    op: &OpRef<'_>,
    send: &Layout,
    recv: Option<&Layout>,
    block: Option<(usize, usize)>,
) -> Result<(), Failed> {
    let bytes = send.ty.map().span(send.count);
    let own = round.own_partial(call);
    fold(own, op, send, bytes);
    if round.arrive(call) {
        complete(call, round, op, send, bytes);
    }
    let Some(recv) = recv else {
        // A contributor that gets no result is done: its data is in.
        return Ok(());
    };
    round.wait_ready(call)?;
    let total = match bytes <= SPREAD_BYTES {
        // A copy on this worker's line (`complete`).
        true => own,
        false => round.result(),
    };
    // SAFETY: once the round is ready nothing writes either: every rank
    // arrived, so every fold is done, and the last arrival's `complete`
    // wrote the result and the partials' copies before `set_ready`, whose
    // release `wait_ready` acquired; the next writer resets the round,
    // which takes it whole (`&mut`), once nobody holds it. Readers (every
    // rank here, after `wait_ready`) only read, without the lock.
    let total = unsafe { total.get_frozen() };
    if !total.all_like(send) {
        return Err(contributions_differ(call, send).into());
    }
    match block {
        // The copy stops at the shorter of the two: `send.count` elements.
        None => total.copy_to(send, recv),
        Some((index, len)) => copy_same(&total.layout(send).slice(index * len, len), recv),
    }
    Ok(())
}

/// The last arrival's part of [`shm_commutative`]: combines the workers'
/// partials into the round's result and wakes everyone (out of line: one
/// rank per call runs it, the others' frames need no room for it).
#[inline(never)]
fn complete(call: &Call<'_>, round: &Round, op: &OpRef<'_>, send: &Layout, bytes: usize) {
    {
        let mut total = round.result().lock();
        total.start(send, bytes);
        let dst = total.layout(send);
        for part in round.partials() {
            let part = part.lock();
            if part.contributions() == 0 {
                continue;
            }
            // Every partial was laid out like its first contribution.
            if !part.all_like(send) {
                total.mark_mismatched();
                continue;
            }
            let src = part.layout(send);
            if total.contributions() == 0 {
                copy_same(&src, &dst);
            } else {
                combine(op, &src, &dst);
            }
            total.count(part.contributions());
        }
        // Each worker's ranks read their copy: a lock on their own line
        // each, instead of one every rank of every worker takes in turn.
        if bytes <= SPREAD_BYTES {
            for part in round.partials() {
                part.lock().copy_from(&mut total, send, bytes);
            }
        }
    }
    // The result is in: `root_ready` doubles as "result ready".
    round.set_ready(call);
}

/// Largest result (in bytes) that the last arrival copies into each
/// worker's partial for the worker's ranks to read: beyond it, the copies
/// would cost the last arrival more than the readers' shared lock costs.
const SPREAD_BYTES: usize = 4096;

/// Contributions of another type or count than the first were left out
/// (with the collective check off, nothing else compares them).
#[cold]
fn contributions_differ(call: &Call<'_>, send: &Layout) -> Error {
    Error::Type(TypeError::ReduceContributions {
        op: call.kind.name(),
        rank: call.rank(),
        count: send.count,
        datatype: send.ty.map().name().into(),
    })
}

/// Reduces `send` into `part`: the first contribution is copied; one of
/// another type or count is left out and marks the partial.
#[inline]
fn fold(part: &SpinLock<Accumulator>, op: &OpRef<'_>, send: &Layout, bytes: usize) {
    let mut acc = part.lock();
    let Some(first) = acc.admit(send, bytes) else {
        return;
    };
    acc.fold_in(op, send, first);
    acc.count(1);
}

/// Non-commutative: ranks publish their buffers, the last to arrive reduces
/// them in rank order. (Out of line: its locals stay out of the frame of
/// the commutative path.)
#[inline(never)]
fn shm_in_order(
    call: &Call<'_>,
    round: &Round,
    op: &OpRef<'_>,
    send: &Layout,
    recv: Option<&Layout>,
) -> Result<(), Failed> {
    let n = round.size() as usize;
    // Returns once the reducer is done with every buffer.
    round.publish(call, call.rank() as usize, send, || {
        if !round.arrive(call) {
            return Ok(());
        }
        let turn = round.enter(call)?;
        let operand = |r: usize| {
            let theirs = turn.deposit::<Layout>(r);
            let (a, b) = (send.ty.map(), theirs.ty.map());
            if theirs.count != send.count || !std::ptr::eq(a, b) && a != b {
                return Err(Error::Type(TypeError::ReduceOperands {
                    op: call.kind.name(),
                    ranks: (r as Rank, call.rank()),
                    counts: (theirs.count, send.count),
                    datatypes: (b.name().into(), a.name().into()),
                }));
            }
            Ok(theirs)
        };
        let mut acc = round.result().lock();
        acc.reserve(send.ty.map().span(send.count), send.ty.map().align());
        let dst = acc.layout(send);
        copy_same(operand(n - 1)?, &dst);
        for r in (0..n - 1).rev() {
            combine(op, operand(r)?, &dst);
        }
        acc.count(round.size());
        Ok(())
    })?;
    let acc = round.result().lock();
    if acc.contributions() != round.size() {
        // The reducer found an operand that differs (and names it).
        return Err(contributions_differ(call, send).into());
    }
    if let Some(recv) = recv {
        let src = acc.layout(send);
        copy_same(&src, &recv.slice(0, send.count));
    }
    Ok(())
}

fn linear(
    call: &Call<'_>,
    root: Rank,
    op: &OpRef<'_>,
    send: &Layout,
    recv: Option<&Layout>,
) -> Result<(), Error> {
    let rank = call.rank();
    let mut ex = Exchange::new(call);
    if rank != root {
        ex.send(root, send);
        return ex.wait();
    }
    let n = call.size() as usize;
    let operands: Vec<Scratch> = (0..n).map(|_| Scratch::like(send)).collect();
    for r in (0..n).filter(|&r| r != rank as usize) {
        ex.recv(r as Rank, &operands[r])?;
    }
    ex.wait()?;
    // In rank order: acc = x(n-1); acc = x(i) op acc.
    let recv = recv
        .expect("the root has a receive buffer")
        .slice(0, send.count);
    let operand = |r: usize| {
        if r == rank as usize {
            send.clone()
        } else {
            (*operands[r]).clone()
        }
    };
    copy_same(&operand(n - 1), &recv);
    for r in (0..n - 1).rev() {
        combine(op, &operand(r), &recv);
    }
    Ok(())
}

fn binomial(
    call: &Call<'_>,
    root: Rank,
    op: &OpRef<'_>,
    commutative: bool,
    send: &Layout,
    recv: Option<&Layout>,
) -> Result<(), Error> {
    let n = call.size();
    let rank = call.rank();
    // Rank order is kept only by a tree rooted at 0.
    let tree_root = if commutative { root } else { 0 };
    let vr = (rank - tree_root).rem_euclid(n);
    let acc = Scratch::like(send);
    copy_same(send, &acc);
    let tmp = Scratch::like(send);
    let mut mask = 1;
    while mask < n {
        if vr & mask != 0 {
            let mut ex = Exchange::new(call);
            ex.send((vr - mask + tree_root) % n, &acc);
            ex.wait()?;
            break;
        }
        if vr + mask < n {
            let mut ex = Exchange::new(call);
            ex.recv((vr + mask + tree_root) % n, &tmp)?;
            ex.wait()?;
            // acc covers [vr, vr+mask), tmp [vr+mask, vr+2mask): acc op tmp.
            combine(op, &acc, &tmp);
            copy_same(&tmp, &acc);
        }
        mask <<= 1;
    }
    if rank == tree_root && tree_root == root {
        copy_same(
            &acc,
            &recv
                .expect("the root has a receive buffer")
                .slice(0, send.count),
        );
    } else if tree_root != root {
        let mut ex = Exchange::new(call);
        if rank == tree_root {
            ex.send(root, &acc);
        } else if rank == root {
            ex.recv(
                tree_root,
                &recv
                    .expect("the root has a receive buffer")
                    .slice(0, send.count),
            )?;
        }
        ex.wait()?;
    }
    Ok(())
}

fn recursive_doubling(
    call: &Call<'_>,
    op: &OpRef<'_>,
    commutative: bool,
    send: &Layout,
    recv: &Layout,
) -> Result<(), Error> {
    let n = call.size();
    let rank = call.rank();
    let recv = recv.slice(0, send.count);
    copy_same(send, &recv);
    let tmp = Scratch::like(send);
    let doubling = Doubling::new(n);
    let new_rank = if doubling.paired(rank) {
        let mut ex = Exchange::new(call);
        if rank % 2 == 0 {
            ex.send(rank + 1, &recv);
            ex.wait()?;
            -1
        } else {
            ex.recv(rank - 1, &tmp)?;
            ex.wait()?;
            // The even rank is lower: tmp op recv.
            combine(op, &tmp, &recv);
            rank / 2
        }
    } else {
        rank - doubling.rem
    };
    if new_rank >= 0 {
        let mut mask = 1;
        while mask < doubling.pof2 {
            let partner = doubling.real(new_rank ^ mask);
            let mut ex = Exchange::new(call);
            ex.recv(partner, &tmp)?;
            ex.send(partner, &recv);
            ex.wait()?;
            if commutative || partner < rank {
                combine(op, &tmp, &recv);
            } else {
                // recv op tmp, kept in recv.
                combine(op, &recv, &tmp);
                copy_same(&tmp, &recv);
            }
            mask <<= 1;
        }
    }
    doubling.hand_back(call, &recv)
}

/// Reduce-scatter with equal blocks: rank r gets block r of the reduction.
pub(crate) fn reduce_scatter_block(
    call: &Call<'_>,
    op: &OpRef<'_>,
    send: &Layout,
    recv: &Layout,
) -> Result<(), Error> {
    let n = call.size() as usize;
    let block = recv.count;
    if send.count != block * n {
        return Err(Error::Count(CountError::SendBufferTooSmall {
            op: "reduce_scatter_block",
            holds: send.count,
            ranks: n,
            block,
        }));
    }
    let rank = call.rank() as usize;
    match call.algorithm {
        Algorithm::ReduceScatter => {
            let tree = Call {
                algorithm: Algorithm::Binomial,
                ..*call
            };
            let all = Scratch::like(send);
            binomial(&tree, 0, op, true, send, (rank == 0).then_some(&*all))?;
            let mut ex = Exchange::new(call);
            if rank == 0 {
                for r in 1..n {
                    ex.send(r as Rank, &all.slice(r * block, block));
                }
                copy_same(&all.slice(0, block), recv);
            } else {
                ex.recv(0, recv)?;
            }
            ex.wait()
        }
        _ => {
            // The shared-memory all-reduce, then each rank takes its block.
            let rounds = &call.comm.coll().rounds;
            let round = rounds.join_checked(call)?;
            let result = shm_commutative(call, &round, op, send, Some(recv), Some((rank, block)));
            rounds.leave(call, round);
            Ok(result?)
        }
    }
}
