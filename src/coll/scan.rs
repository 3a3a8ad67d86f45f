//! Inclusive and exclusive scan algorithms.
//!
//! Rank r gets `x0 op x1 op ... op xr` (inclusive) or `x0 op ... op x(r-1)`
//! (exclusive; rank 0's receive buffer is left as it is). Operands are
//! always combined in rank order, so non-commutative operations are safe
//! everywhere; `op::apply` computes `inout = input op inout`, so the lower
//! ranks' operand is always the input.
//!
//! * `shm`: every rank deposits the addresses of its send and receive
//!   layouts and counts its arrival. The elements are then cut into chunks
//!   (at least [`CHUNK_BYTES`] each, at most one per rank), and each chunk is
//!   scanned by one rank, spread over the communicator, straight into every
//!   rank's receive buffer: `recv0 = x0`, `recv_r = recv_(r−1) op x_r`
//!   (exclusive: `recv1 = x0`, `recv_r = recv_(r−1) op x_(r−1)`). Each
//!   element is combined p − 1 times in all, the minimum, and large
//!   messages are scanned in parallel. A rank counts itself done and leaves
//!   only when every rank is done (others read its send buffer and write
//!   its receive buffer until then).
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
use super::round::Round;
use super::{Algorithm, Call};
use crate::datatype::copy::Layout;
use crate::error::Error;

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

fn shm(
    call: &Call<'_>,
    op: &OpRef<'_>,
    send: &Layout,
    recv: &Layout,
    exclusive: bool,
) -> Result<(), Error> {
    let rounds = &call.comm.shared().coll.rounds;
    let round = rounds.join_checked(call, true)?;
    let (rank, n) = (call.rank() as usize, round.size as usize);
    // Publish our layouts, not just the data's address: they carry the
    // type, and live in our frame, which stays put until every rank is done.
    round.deposits[rank].set(
        send as *const Layout as *const u8,
        recv as *const Layout as *mut u8,
        send.count,
    );
    let scanned = round.arrive_and_wait(call).and_then(|()| {
        // Our own operand must agree with rank 0's (every chunk's scanner
        // checks them all before combining anything).
        agree(call, &round, rank)?;
        let bytes = send.count * send.ty.map().size();
        let chunks = (bytes / CHUNK_BYTES).clamp(1, n).min(send.count);
        // Chunk k is scanned by rank k·n/chunks: spread over the ranks, and
        // so over the workers, which hold ranks in blocks.
        match (0..chunks).find(|&k| k * n / chunks == rank) {
            Some(k) => {
                (0..n).try_for_each(|r| agree(call, &round, r))?;
                let (start, len) = piece(send.count, chunks, k);
                scan_chunk(op, &round, start, len, exclusive);
                Ok(())
            }
            None => Ok(()),
        }
    });
    // Done (even after an error): others may still read our send buffer or
    // write our receive buffer, so wait for them all before leaving.
    let done = round.finish_and_wait(call);
    rounds.leave(call, round);
    scanned.and(done)
}

/// The operand of rank `r` must have rank 0's count and type map, so that
/// chunks line up and `op::apply` may combine them.
fn agree(call: &Call<'_>, round: &Round, r: usize) -> Result<(), Error> {
    // SAFETY: [1] every rank deposited before counting its arrival (AcqRel),
    // and the caller saw all arrivals (Acquire); [2] depositors stay in the
    // round, their frames intact, until every rank is done.
    let (theirs, first) = unsafe {
        (
            &*(round.deposits[r].send() as *const Layout),
            &*(round.deposits[0].send() as *const Layout),
        )
    };
    let (a, b) = (first.ty.map(), theirs.ty.map());
    let (mine, first_count) = (round.deposits[r].count(), round.deposits[0].count());
    if mine != first_count {
        return Err(Error::Count {
            message: format!(
                "{}: rank {r} contributes {mine} elements but rank 0 contributes {first_count}",
                call.kind
            ),
        });
    }
    if !std::ptr::eq(a, b) && a != b {
        return Err(Error::Type {
            message: format!(
                "{}: rank {r} contributes {} but rank 0 contributes {}; a scan needs one type",
                call.kind,
                b.name(),
                a.name()
            ),
        });
    }
    Ok(())
}

/// Scans elements `[start, start + len)` through every rank, in rank order.
fn scan_chunk(op: &OpRef<'_>, round: &Round, start: usize, len: usize, exclusive: bool) {
    let at = |r: usize| {
        // SAFETY: as in `agree`: published layouts of ranks still in the
        // round, which stays so until we count ourselves done.
        let (send, recv) = unsafe {
            (
                &*(round.deposits[r].send() as *const Layout),
                &*(round.deposits[r].recv() as *const Layout),
            )
        };
        (send.slice(start, len), recv.slice(start, len))
    };
    let n = round.size as usize;
    // Inclusive: recv_r = recv_(r-1) op x_r; exclusive: recv_r =
    // recv_(r-1) op x_(r-1), from recv_1 = x0. Only this rank touches these
    // elements of any buffer (chunks are disjoint); the owners are parked
    // until every chunk is done. Types and counts agree (`agree`).
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
