//! Inclusive and exclusive scan algorithms.
//!
//! Rank r gets `x0 op x1 op ... op xr` (inclusive) or `x0 op ... op x(r-1)`
//! (exclusive; rank 0's receive buffer is left as it is). Operands are
//! always combined in rank order, so non-commutative operations are safe
//! everywhere; `op::apply` computes `inout = input op inout`, so the lower
//! ranks' operand is always the input.
//!
//! * `shm`: every rank publishes its send and receive layouts and counts
//!   its arrival; each then takes its turn of the round. The elements are then cut into chunks
//!   (at least [`CHUNK_BYTES`] each, at most one per rank), and each chunk is
//!   scanned by one rank, spread over the communicator, straight into every
//!   rank's receive buffer: `recv0 = x0`, `recv_r = recv_(r−1) op x_r`
//!   (exclusive: `recv1 = x0`, `recv_r = recv_(r−1) op x_(r−1)`). Each
//!   element is combined p − 1 times in all, the minimum, and large
//!   messages are scanned in parallel. A rank leaves only when every rank's
//!   turn is over (others read its send buffer and write its receive buffer
//!   until then).
//! * `linear`: a chain: rank r receives the prefix of ranks 0..r from r − 1,
//!   combines its own operand, and sends the result on to r + 1 (p − 1
//!   sequential steps, one message each; Open MPI's basic scan).
//! * `recursive_doubling`: ⌈log2 p⌉ steps (MPICH's scan and exscan); at the
//!   step of distance d rank r swaps with r xor d the reduction of its group
//!   of d ranks and folds the partner's into its own group's (on the correct
//!   side, so rank order holds) and, if the partner is lower, into its
//!   result.

use super::exchange::Exchange;
use super::op::OpRef;
use super::operand::{combine, copy_same, Scratch};
use super::parts::piece;
use super::round::{Access, Readers};
use super::{Algorithm, Call};
use crate::datatype::copy::Layout;
use crate::error::{CountError, Error, TypeError};
use crate::Rank;

/// The least data one rank scans in the shared-memory algorithm: below it,
/// the cost of waking ranks for a chunk exceeds the work saved.
const CHUNK_BYTES: usize = 4096;

/// Rank r gets `x0 op ... op xr` (inclusive) or `x0 op ... op x(r-1)`
/// (exclusive; rank 0's `recv` is left as it is).
pub(crate) fn scan(
    call: &Call<'_>,
    op: &OpRef<'_>,
    commutative: bool,
    send: &Layout,
    recv: &Layout,
    exclusive: bool,
) -> Result<(), Error> {
    // `reduce::check` made sure `recv` holds `send`'s type and count.
    let recv = recv.slice(0, send.count);
    if call.size() == 1 {
        if !exclusive {
            copy_same(send, &recv);
        }
        return Ok(());
    }
    match call.algorithm {
        Algorithm::Linear => linear(call, op, send, &recv, exclusive),
        Algorithm::RecursiveDoubling => {
            recursive_doubling(call, op, commutative, send, &recv, exclusive)
        }
        _ => shm(call, op, send, &recv, exclusive),
    }
}

fn linear(
    call: &Call<'_>,
    op: &OpRef<'_>,
    send: &Layout,
    recv: &Layout,
    exclusive: bool,
) -> Result<(), Error> {
    let (rank, n) = (call.rank(), call.size());
    let tmp = Scratch::like(send);
    let mut ex = Exchange::new(call);
    if exclusive {
        // recv = prefix of 0..rank; pass prefix op x_rank on.
        if rank == 0 {
            ex.send(1, send);
            return ex.wait();
        }
        ex.recv(rank - 1, recv)?;
        ex.wait()?;
        if rank < n - 1 {
            copy_same(send, &tmp);
            combine(op, recv, &tmp);
            ex.send(rank + 1, &tmp);
        }
    } else {
        copy_same(send, recv);
        if rank > 0 {
            ex.recv(rank - 1, &tmp)?;
            ex.wait()?;
            combine(op, &tmp, recv);
        }
        if rank < n - 1 {
            ex.send(rank + 1, recv);
        }
    }
    ex.wait()
}

fn recursive_doubling(
    call: &Call<'_>,
    op: &OpRef<'_>,
    commutative: bool,
    send: &Layout,
    recv: &Layout,
    exclusive: bool,
) -> Result<(), Error> {
    let (rank, n) = (call.rank(), call.size());
    // The reduction of this rank's group so far, and the partner's.
    let partial = Scratch::like(send);
    let tmp = Scratch::like(send);
    copy_same(send, &partial);
    if !exclusive {
        copy_same(send, recv);
    }
    // Exclusive: whether `recv` holds anything yet.
    let mut have = false;
    let mut mask = 1;
    while mask < n {
        let partner = rank ^ mask;
        if partner < n {
            let mut ex = Exchange::new(call);
            ex.recv(partner, &tmp)?;
            ex.send(partner, &partial);
            ex.wait()?;
            if partner < rank {
                // The partner's group comes first.
                combine(op, &tmp, &partial);
                if !exclusive || have {
                    combine(op, &tmp, recv);
                } else {
                    copy_same(&tmp, recv);
                    have = true;
                }
            } else if commutative {
                combine(op, &tmp, &partial);
            } else {
                // partial = partial op tmp, built in tmp.
                combine(op, &partial, &tmp);
                copy_same(&tmp, &partial);
            }
        }
        mask <<= 1;
    }
    Ok(())
}

/// What a rank publishes in a shared-memory scan: its operand and where its
/// result goes.
#[derive(Debug)]
pub(crate) struct Operands {
    send: Layout,
    recv: Layout,
}

fn shm(
    call: &Call<'_>,
    op: &OpRef<'_>,
    send: &Layout,
    recv: &Layout,
    exclusive: bool,
) -> Result<(), Error> {
    let rounds = &call.comm.coll().rounds;
    let round = rounds.join_published(call, Readers::Every)?;
    let (rank, n) = (call.rank() as usize, round.size() as usize);
    let operands = Operands {
        send: send.clone(),
        recv: recv.clone(),
    };
    // Returns once every rank's turn is over (even after an error): until
    // then others may read our send buffer or write our receive buffer.
    let scanned = round.publish(call, rank, &operands, || {
        round.arrive_and_wait(call)?;
        let turn = round.enter(call)?;
        // Our own operand must agree with rank 0's (every chunk's scanner
        // checks them all before combining anything).
        agree(call, &turn, rank)?;
        let bytes = send.count * send.ty.map().size();
        let chunks = (bytes / CHUNK_BYTES).clamp(1, n).min(send.count);
        // Chunk k is scanned by rank k·n/chunks: spread over the ranks, and
        // so over the workers, which hold ranks in blocks.
        if let Some(k) = (0..chunks).find(|&k| k * n / chunks == rank) {
            (0..n).try_for_each(|r| agree(call, &turn, r))?;
            let (start, len) = piece(send.count, chunks, k);
            scan_chunk(op, &turn, n, start, len, exclusive);
        }
        Ok(())
    });
    rounds.leave(call, round);
    scanned
}

/// The operand of rank `r` must have rank 0's count and type map, so that
/// chunks line up and `op::apply` may combine them.
fn agree(call: &Call<'_>, turn: &Access<'_>, r: usize) -> Result<(), Error> {
    let (theirs, first) = (
        &turn.deposit::<Operands>(r).send,
        &turn.deposit::<Operands>(0).send,
    );
    let (a, b) = (first.ty.map(), theirs.ty.map());
    let (mine, first_count) = (theirs.count, first.count);
    if mine != first_count {
        return Err(Error::Count(CountError::ContributionDiffers {
            op: call.kind.name(),
            rank: r as Rank,
            count: mine,
            first: first_count,
        }));
    }
    if !std::ptr::eq(a, b) && a != b {
        return Err(Error::Type(TypeError::ScanOperands {
            op: call.kind.name(),
            rank: r as Rank,
            datatype: b.name().into(),
            first: a.name().into(),
        }));
    }
    Ok(())
}

/// Scans elements `[start, start + len)` through every rank, in rank order.
fn scan_chunk(
    op: &OpRef<'_>,
    turn: &Access<'_>,
    n: usize,
    start: usize,
    len: usize,
    exclusive: bool,
) {
    let at = |r: usize| {
        let theirs = turn.deposit::<Operands>(r);
        (theirs.send.slice(start, len), theirs.recv.slice(start, len))
    };
    // Inclusive: recv_r = recv_(r-1) op x_r; exclusive: recv_r =
    // recv_(r-1) op x_(r-1), from recv_1 = x0. Only this rank touches these
    // elements of any buffer (chunks are disjoint); the owners stay in the
    // round until our turn is over. Types and counts agree (`agree`).
    let shift = usize::from(exclusive);
    let mut prev = at(shift).1;
    copy_same(&at(0).0, &prev);
    for r in 1 + shift..n {
        let recv = at(r).1;
        copy_same(&at(r - shift).0, &recv);
        combine(op, &prev, &recv);
        prev = recv;
    }
}
