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
use super::round::{Accumulator, Readers, Round, Shape};
use super::{bcast, Algorithm, Call};
use crate::datatype::copy::Layout;
use crate::error::Error;
use crate::sync::spin::SpinLock;
use crate::Rank;

/// Checks the operation and the buffers of a reduction.
pub(crate) fn check(
    call: &Call<'_>,
    op: &OpRef<'_>,
    send: &Layout,
    recv: Option<&Layout>,
) -> Result<(), Error> {
    op::check_supported(op, send.ty.map())?;
    if let Some(recv) = recv {
        let (s, r) = (send.ty.map(), recv.ty.map());
        if !std::ptr::eq(s, r) && s != r {
            return Err(Error::Type {
                message: format!(
                    "{}: the send buffer holds {} and the receive buffer {}; a reduction needs \
                     one type",
                    call.kind,
                    s.name(),
                    r.name()
                ),
            });
        }
        if recv.count < send.count {
            return Err(Error::Count {
                message: format!(
                    "{}: the receive buffer holds {} elements but {} are reduced",
                    call.kind, recv.count, send.count
                ),
            });
        }
    }
    Ok(())
}

/// Reduces `send` of every rank into `recv` at `root` (`None`: all ranks).
pub(crate) fn reduce(
    call: &Call<'_>,
    root: Option<Rank>,
    op: &OpRef<'_>,
    commutative: bool,
    send: &Layout,
    recv: Option<&Layout>,
) -> Result<(), Error> {
    let rank = call.rank();
    if call.size() == 1 {
        if let Some(recv) = recv {
            copy_same(send, recv);
        }
        return Ok(());
    }
    match (call.algorithm, root) {
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
    let result = if commutative {
        shm_commutative(
            call,
            &round,
            op,
            send,
            recv.map(|r| r.slice(0, send.count)),
            None,
        )
    } else {
        shm_in_order(call, &round, op, send, recv)
    };
    rounds.leave(call, round);
    result
}

/// Folds `send` into this worker's partial result; the last rank to arrive
/// combines the workers' partials into `round.acc` and wakes everyone. Then
/// `recv` gets the result (or block `block.0` of `block.1` elements of it).
fn shm_commutative(
    call: &Call<'_>,
    round: &Round,
    op: &OpRef<'_>,
    send: &Layout,
    recv: Option<Layout>,
    block: Option<(usize, usize)>,
) -> Result<(), Error> {
    let bytes = send.count * send.ty.map().extent();
    fold(&round.partials[call.ctx.worker as usize], op, send, bytes);
    if round.arrive() {
        {
            let mut total = round.acc.lock();
            total.reserve(bytes, send.ty.map().align());
            total.shape = Some(Shape::of(send));
            let dst = total.layout(send);
            for part in round.partials.iter() {
                let mut part = part.lock();
                if part.contributions == 0 {
                    continue;
                }
                // Every partial was laid out like its first contribution.
                if part.mismatched || !part.shape.as_ref().is_some_and(|s| s.fits(send)) {
                    total.mismatched = true;
                    continue;
                }
                let src = part.layout(send);
                if total.contributions == 0 {
                    copy_same(&src, &dst);
                } else {
                    combine(op, &src, &dst);
                }
                total.contributions += part.contributions;
            }
        }
        // The result is in: `root_ready` doubles as "result ready".
        round.set_ready(call);
    }
    let Some(recv) = recv else {
        // A contributor that gets no result is done: its data is in.
        return Ok(());
    };
    round.wait_ready(call)?;
    let mut total = round.acc.lock();
    if total.mismatched || !total.shape.as_ref().is_some_and(|s| s.fits(send)) {
        return Err(contributions_differ(call, send));
    }
    let src = total.layout(send);
    match block {
        None => copy_same(&src, &recv),
        Some((index, len)) => copy_same(&src.slice(index * len, len), &recv),
    }
    Ok(())
}

/// Contributions of another type or count than the first were left out
/// (with the collective check off, nothing else compares them).
#[cold]
fn contributions_differ(call: &Call<'_>, send: &Layout) -> Error {
    Error::Type {
        message: format!(
            "{}: the ranks' contributions differ in type or count (rank {} contributes {} × \
             {}); a reduction needs one type and count",
            call.kind,
            call.rank(),
            send.count,
            send.ty.map().name()
        ),
    }
}

/// Reduces `send` into `part`: the first contribution is copied; one of
/// another type or count is left out and marks the partial.
fn fold(part: &SpinLock<Accumulator>, op: &OpRef<'_>, send: &Layout, bytes: usize) {
    let mut acc = part.lock();
    let first = acc.contributions == 0;
    if first {
        acc.reserve(bytes, send.ty.map().align());
        acc.shape = Some(Shape::of(send));
    } else if !acc.shape.as_ref().is_some_and(|s| s.fits(send)) {
        acc.mismatched = true;
        return;
    }
    let target = acc.layout(send);
    if first {
        copy_same(send, &target);
    } else {
        combine(op, send, &target);
    }
    acc.contributions += 1;
}

/// Non-commutative: ranks publish their buffers, the last to arrive reduces
/// them in rank order.
fn shm_in_order(
    call: &Call<'_>,
    round: &Round,
    op: &OpRef<'_>,
    send: &Layout,
    recv: Option<&Layout>,
) -> Result<(), Error> {
    let n = round.size as usize;
    // Returns once the reducer is done with every buffer.
    round.publish(call, call.rank() as usize, send, || {
        if !round.arrive() {
            return Ok(());
        }
        let turn = round.enter(call)?;
        let operand = |r: usize| {
            let theirs = turn.deposit::<Layout>(r);
            let (a, b) = (send.ty.map(), theirs.ty.map());
            if theirs.count != send.count || !std::ptr::eq(a, b) && a != b {
                return Err(Error::Type {
                    message: format!(
                        "{}: rank {r} contributes {} × {} but rank {} contributes {} × {}; a \
                         reduction needs one type and count",
                        call.kind,
                        theirs.count,
                        b.name(),
                        call.rank(),
                        send.count,
                        a.name()
                    ),
                });
            }
            Ok(theirs)
        };
        let mut acc = round.acc.lock();
        acc.reserve(send.count * send.ty.map().extent(), send.ty.map().align());
        let dst = acc.layout(send);
        copy_same(operand(n - 1)?, &dst);
        for r in (0..n - 1).rev() {
            combine(op, operand(r)?, &dst);
        }
        acc.contributions = round.size;
        Ok(())
    })?;
    let mut acc = round.acc.lock();
    if acc.contributions != round.size {
        // The reducer found an operand that differs (and names it).
        return Err(contributions_differ(call, send));
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
        return Err(Error::Count {
            message: format!(
                "reduce_scatter_block: the send buffer holds {} elements but {n} ranks × {block} \
                 need {}",
                send.count,
                block * n
            ),
        });
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
            let result = shm_commutative(
                call,
                &round,
                op,
                send,
                Some(recv.clone()),
                Some((rank, block)),
            );
            rounds.leave(call, round);
            result
        }
    }
}
