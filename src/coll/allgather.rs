//! All-gather algorithms.
//!
//! An all-gather is an all-gatherv whose partition is `p` blocks of the send
//! count, rank by rank; both share `shm`, `ring` and `gather_broadcast`.
//! Counts are in elements of the send and receive types, which must have
//! the same data size.
//!
//! * `shm`: the first rank to arrive lays out a buffer of the round from
//!   its partition (the parts packed one after the other, in rank order,
//!   as its send type packs, behind a header of offsets); every rank checks
//!   its block's count and type signature against that layout, packs it
//!   into its slot, counts its arrival and is then done with its send
//!   buffer. Once everyone arrived, each rank checks its partition against
//!   the layout and unpacks the buffer into its parts: one copy when they
//!   are in rank order without gaps (all-gather), one per rank otherwise.
//!   A rank leaves right after: the data lives in the round, not in other
//!   ranks' buffers, so no second phase is needed. Reading one packed
//!   buffer instead of p send buffers keeps small all-gathers from paying
//!   a cache miss per rank pair (at 256 ranks, 8 bytes: ~4× faster).
//! * `ring`: p − 1 steps; at step k rank r sends the block of rank r − k to
//!   r + 1 and receives that of rank r − k − 1 from r − 1, straight into
//!   its receive buffer (bandwidth-optimal: each block crosses each link
//!   once).
//! * `recursive_doubling` (all-gather): ⌈log2 p⌉ steps; at the step of
//!   distance d rank r swaps with r xor d the blocks of its group of d
//!   ranks, which are adjacent in the receive buffer. For p not a power of
//!   two (MPICH's treatment of the remainder), with p' the largest power of
//!   two below p and m = p − p', the first 2m ranks pair up: even rank 2i
//!   hands its block to 2i + 1, which takes part for both (their blocks are
//!   adjacent, so groups stay contiguous), and gets the whole result back at
//!   the end.
//! * `gather_broadcast`: a binomial gather to rank 0, then a binomial
//!   broadcast. For all-gatherv, whose parts may leave gaps that must not
//!   be written, rank 0 gathers into a packed buffer (seed 002's aggressive
//!   level: every rank knows the counts), which is broadcast and unpacked
//!   into each rank's parts. Rank 0 first broadcasts its counts and every
//!   rank checks its own against them: tables that disagree would make the
//!   gather's message chains disagree.

use super::doubling::Doubling;
use super::exchange::Exchange;
use super::gather;
use super::parts::{check_elements, packed, Parts, Sides};
use super::round::{Round, Shape};
use super::{bcast, copy_checked, Algorithm, Call};
use crate::datatype::copy::Layout;
use crate::datatype::{Datatype, Equivalence};
use crate::error::{CountError, Error, TypeError};
use crate::Rank;

/// Every rank gets every rank's `send`, block by block in rank order.
pub(crate) fn allgather(call: &Call<'_>, send: &Layout, recv: &Layout) -> Result<(), Error> {
    check_elements(call, send, recv, Sides::EveryRank)?;
    if call.algorithm == Algorithm::Hierarchical {
        return super::hier::allgather(call, send, recv);
    }
    let n = call.size() as usize;
    let block = send.count;
    let parts = Parts::receive_blocks(call, recv, block)?;
    match call.algorithm {
        Algorithm::Ring => ring(call, send, &parts),
        Algorithm::RecursiveDoubling => recursive_doubling(call, send, recv, block),
        Algorithm::GatherBroadcast => {
            let tree = Call {
                algorithm: Algorithm::Binomial,
                ..*call
            };
            let rank = call.rank();
            gather::gather(&tree, 0, send, (rank == 0).then_some(recv))?;
            bcast::broadcast(&tree, 0, &recv.slice(0, n * block))
        }
        _ => shm(call, send, &parts),
    }
}

/// Every rank gets every rank's `send` in its part of `recv`.
pub(crate) fn allgatherv(call: &Call<'_>, send: &Layout, recv: &Parts) -> Result<(), Error> {
    check_elements(call, send, &recv.buf, Sides::EveryRank)?;
    let own = recv.part(call.rank() as usize).count;
    if send.count != own {
        return Err(Error::Count(CountError::OwnPart {
            op: call.kind.name(),
            rank: call.rank(),
            sent: send.count,
            own,
        }));
    }
    match call.algorithm {
        Algorithm::Ring => ring(call, send, recv),
        Algorithm::GatherBroadcast => gather_broadcast_v(call, send, recv),
        _ => shm(call, send, recv),
    }
}

/// Bytes before the data in the round's buffer: the rank that laid it out,
/// then the `p + 1` packed offsets of the parts, in elements.
fn header_bytes(n: usize) -> usize {
    (n + 2) * std::mem::size_of::<u64>()
}

/// The round's buffer, laid out by the first rank to arrive from its own
/// partition; returns its address and the packed type (and total count)
/// every contribution must have.
fn lay_out(call: &Call<'_>, round: &Round, send: &Layout, parts: &Parts) -> (*mut u8, Shape) {
    let n = round.size() as usize;
    round.own_buffer(|shared| {
        let mut words = Vec::with_capacity(n + 2);
        words.push(call.rank() as u64);
        let mut at = 0;
        words.push(0);
        let table = parts.table();
        for r in 0..n {
            at += table.count(r);
            words.push(at as u64);
        }
        let ty = packed(&send.ty);
        let total = header_bytes(n) + at * ty.map().size();
        shared.reserve_exact(total);
        words
            .iter()
            .for_each(|w| shared.extend_from_slice(&w.to_ne_bytes()));
        // Zeroed: a block whose rank failed its checks unpacks as zeros,
        // valid values of any base type.
        shared.resize(total, 0);
        Shape { count: at, ty }
    })
}

fn shm(call: &Call<'_>, send: &Layout, parts: &Parts) -> Result<(), Error> {
    let rounds = &call.comm.coll().rounds;
    let round = rounds.join_checked(call)?;
    let (rank, n) = (call.rank() as usize, round.size() as usize);
    let (base, reference) = lay_out(call, &round, send, parts);
    let word = |i: usize| {
        // SAFETY: the header holds n + 2 words, written before the buffer's
        // address was handed out (under the lock we took to get it) and
        // never again; unaligned, as a byte vector's storage may be.
        unsafe { (base as *const u64).add(i).read_unaligned() as usize }
    };
    let first = word(0);
    let offset = |r: usize| word(1 + r);
    let esize = reference.ty.map().size();
    let data = base.wrapping_add(header_bytes(n));
    let slot = |r: usize| Layout {
        base: data.wrapping_add(offset(r) * esize),
        count: offset(r + 1) - offset(r),
        ty: reference.ty.clone(),
    };

    // Our block goes into our slot, if it is what the layout expects.
    let mine = slot(rank);
    let packed = if send.count != mine.count {
        Err(Error::Count(CountError::ExpectedByRank {
            op: call.kind.name(),
            rank: rank as Rank,
            sent: send.count,
            by: first as Rank,
            expected: mine.count,
        }))
    } else if let Some((index, sent, expected)) =
        crate::datatype::signature_mismatch(send.ty.map(), send.count, reference.ty.map())
    {
        Err(Error::Type(TypeError::SendSignatures {
            op: call.kind.name(),
            rank: rank as Rank,
            datatype: send.ty.map().name().into(),
            by: first as Rank,
            by_datatype: reference.ty.map().name().into(),
            index,
            sent: sent.name(),
            expected: expected.name(),
        }))
    } else {
        // SAFETY: the slot holds `send.count` packed elements of our
        // signature, inside the round's buffer; no other rank writes it.
        unsafe { crate::datatype::copy::pack(send, mine.base as *mut u8) };
        Ok(())
    };
    let unpacked = round
        .arrive_and_wait(call)
        .map_err(Error::from)
        .and_then(|()| {
            // The parts must be the layout's; if they are also its order, with
            // no gaps (all-gather), one copy unpacks them all.
            let mut in_order = true;
            let table = parts.table();
            for r in 0..n {
                let (count, displ) = (table.count(r), table.displ(r));
                let theirs = offset(r + 1) - offset(r);
                if count != theirs {
                    return Err(Error::Count(CountError::CountsDisagree {
                        op: call.kind.name(),
                        ranks: (first as Rank, rank as Rank),
                        of: r as Rank,
                        counts: (theirs, count),
                    }));
                }
                in_order &= displ == offset(r);
            }
            // Every rank packed its slot before counting its arrival (AcqRel)
            // and we saw all arrivals (Acquire); nobody writes the buffer any
            // more, and it lives as long as the round, which we hold. We write
            // only our own receive buffer.
            let copy = |from: usize, src: &Layout, dst: &Layout| {
                copy_checked(call, from as Rank, src, dst)
            };
            if in_order {
                let all = Layout {
                    base: data,
                    count: offset(n),
                    ty: reference.ty.clone(),
                };
                return copy(first, &all, &parts.buf.slice(0, offset(n)));
            }
            (0..n).try_for_each(|r| copy(r, &slot(r), &parts.part(r)))
        });
    // Nobody reads our buffers: the data is in the round's own.
    rounds.leave(call, round);
    packed.and(unpacked)
}

fn ring(call: &Call<'_>, send: &Layout, parts: &Parts) -> Result<(), Error> {
    let (rank, size) = (call.rank(), call.size());
    // Our own buffers, distinct.
    copy_checked(call, rank, send, &parts.part(rank as usize))?;
    let (left, right) = ((rank + size - 1) % size, (rank + 1) % size);
    for k in 0..size - 1 {
        let out = (rank + size - k) % size;
        let into = (rank + 2 * size - k - 1) % size;
        let mut ex = Exchange::new(call);
        ex.recv(left, &parts.part(into as usize))?;
        ex.send(right, &parts.part(out as usize));
        ex.wait()?;
    }
    Ok(())
}

fn recursive_doubling(
    call: &Call<'_>,
    send: &Layout,
    recv: &Layout,
    block: usize,
) -> Result<(), Error> {
    let (rank, n) = (call.rank(), call.size());
    // Our own buffers, distinct.
    copy_checked(call, rank, send, &recv.slice(rank as usize * block, block))?;
    let doubling = Doubling::new(n);
    let rem = doubling.rem;
    // The first real rank whose block virtual rank `v` holds.
    let first = |v: i32| if v < rem { 2 * v } else { v + rem };
    // The blocks of virtual ranks [v, v + len): adjacent in the buffer.
    let group = |v: i32, len: i32| {
        let (a, b) = (first(v), first(v + len));
        recv.slice(a as usize * block, (b - a) as usize * block)
    };
    let virtual_rank = if doubling.paired(rank) {
        let mut ex = Exchange::new(call);
        if rank % 2 == 0 {
            ex.send(rank + 1, &recv.slice(rank as usize * block, block));
            ex.wait()?;
            None
        } else {
            ex.recv(rank - 1, &recv.slice((rank - 1) as usize * block, block))?;
            ex.wait()?;
            Some(rank / 2)
        }
    } else {
        Some(rank - rem)
    };
    if let Some(v) = virtual_rank {
        let mut mask = 1;
        while mask < doubling.pof2 {
            let partner = v ^ mask;
            let mut ex = Exchange::new(call);
            ex.recv(doubling.real(partner), &group(partner & !(mask - 1), mask))?;
            ex.send(doubling.real(partner), &group(v & !(mask - 1), mask));
            ex.wait()?;
            mask <<= 1;
        }
    }
    doubling.hand_back(call, &recv.slice(0, n as usize * block))
}

fn gather_broadcast_v(call: &Call<'_>, send: &Layout, parts: &Parts) -> Result<(), Error> {
    let n = call.size() as usize;
    let rank = call.rank() as usize;
    // The parts packed one after the other, in rank order.
    let counts: Vec<usize> = (0..n).map(|r| parts.part(r).count).collect();
    let displs: Vec<usize> = counts
        .iter()
        .scan(0, |at, &c| {
            let d = *at;
            *at += c;
            Some(d)
        })
        .collect();
    let tree = Call {
        algorithm: Algorithm::Binomial,
        ..*call
    };
    // Every rank's table must be rank 0's, or the gather's messages would
    // not line up: rank 0 broadcasts its counts and each rank compares.
    let mut table: Vec<u64> = counts.iter().map(|&c| c as u64).collect();
    let layout = Layout {
        base: table.as_mut_ptr() as *const u8,
        count: n,
        ty: u64::equivalent_datatype().handle(),
    };
    bcast::broadcast(&tree, 0, &layout)?;
    if let Some(r) = (0..n).find(|&r| table[r] != counts[r] as u64) {
        return Err(Error::Count(CountError::PartDiffersFromRankZero {
            op: call.kind.name(),
            rank: rank as Rank,
            of: r as Rank,
            count: counts[r],
            first: table[r] as usize,
        }));
    }
    let total: usize = counts.iter().sum();
    let elem = packed(&parts.buf.ty);
    let mut tmp = vec![0u8; total * elem.map().size()];
    let all = Layout {
        base: tmp.as_mut_ptr() as *const u8,
        count: total,
        ty: elem,
    };
    let gatherv = Call {
        algorithm: Algorithm::BinomialAggressive,
        ..*call
    };
    if rank == 0 {
        let root = Parts {
            buf: all.clone(),
            counts: counts.clone(),
            displs: displs.clone(),
            uniform: None,
        };
        gather::gatherv(&gatherv, 0, send, Some(&root), None)?;
    } else {
        gather::gatherv(&gatherv, 0, send, None, Some((&counts, &displs)))?;
    }
    bcast::broadcast(&tree, 0, &all)?;
    for r in 0..n {
        // `tmp` is ours and distinct from the receive buffer.
        copy_checked(
            call,
            r as Rank,
            &all.slice(displs[r], counts[r]),
            &parts.part(r),
        )?;
    }
    drop(tmp);
    Ok(())
}
