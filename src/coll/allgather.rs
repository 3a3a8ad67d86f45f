//! All-gather algorithms.
//!
//! An all-gather is an all-gatherv whose partition is `p` blocks of the send
//! count, rank by rank; both share `shm`, `ring` and `gather_broadcast`.
//! Counts are in elements of the send and receive types, which must have
//! the same data size.
//!
//! * `shm`: every rank deposits the addresses of its send layout and
//!   receive partition and counts its arrival; once everyone arrived, each
//!   rank copies every rank's send buffer straight into its own part for it
//!   (starting with its own and going round, so that the ranks do not all
//!   read the same buffer at once; copies run in parallel on all workers).
//!   A rank then counts itself done and leaves only when every rank is done,
//!   since until then others may still read its send buffer.
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

use super::exchange::Exchange;
use super::gather::{self, Parts};
use super::{bcast, copy_checked, Algorithm, Call};
use crate::datatype::copy::Layout;
use crate::datatype::{Datatype, Equivalence, TypeHandle, TypeMap, UserDatatype};
use crate::error::Error;
use crate::Rank;

/// Every rank gets every rank's `send`, block by block in rank order.
pub(crate) fn allgather(call: &Call<'_>, send: &Layout, recv: &Layout) -> Result<(), Error> {
    check_elements(call, send, recv)?;
    let n = call.size() as usize;
    let block = send.count;
    if recv.count < n * block {
        return Err(Error::Count {
            message: format!(
                "{}: the receive buffer of rank {} holds {} elements but {n} ranks × {block} \
                 elements need {}",
                call.kind,
                call.rank(),
                recv.count,
                n * block
            ),
        });
    }
    let parts = Parts {
        buf: recv.clone(),
        counts: Vec::new(),
        displs: Vec::new(),
        uniform: Some(block),
    };
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
    check_elements(call, send, &recv.buf)?;
    let own = recv.part(call.rank() as usize).count;
    if send.count != own {
        return Err(Error::Count {
            message: format!(
                "{}: rank {} sends {} elements but its own part of the receive buffer holds {own}",
                call.kind,
                call.rank(),
                send.count
            ),
        });
    }
    match call.algorithm {
        Algorithm::Ring => ring(call, send, recv),
        Algorithm::GatherBroadcast => gather_broadcast_v(call, send, recv),
        _ => shm(call, send, recv),
    }
}

/// Send and receive elements must have the same data size: counts are in
/// elements of both.
fn check_elements(call: &Call<'_>, send: &Layout, recv: &Layout) -> Result<(), Error> {
    let (s, r) = (send.ty.map().size(), recv.ty.map().size());
    if s != r {
        return Err(Error::Type {
            message: format!(
                "{}: rank {} sends {} ({s} bytes of data per element) but receives {} ({r} \
                 bytes); counts are in elements of both",
                call.kind,
                call.rank(),
                send.ty.map().name(),
                recv.ty.map().name()
            ),
        });
    }
    Ok(())
}

fn shm(call: &Call<'_>, send: &Layout, parts: &Parts) -> Result<(), Error> {
    let rounds = &call.comm.shared().coll.rounds;
    let round = rounds.join(call, true);
    let (rank, n) = (call.rank() as usize, round.size as usize);
    // Publish our descriptors, not just the data's address: they carry the
    // types and the partition, and live in our frame, which stays put until
    // every rank is done.
    round.deposits[rank].set(
        send as *const Layout as *const u8,
        parts as *const Parts as *mut u8,
        send.count,
    );
    if round.arrive() {
        round.wake_all(call);
    }
    let copied = round.wait(call, || round.all_arrived()).and_then(|()| {
        for k in 0..n {
            let from = (rank + k) % n;
            let deposit = &round.deposits[from];
            let dst = parts.part(from);
            if deposit.count() != dst.count {
                return Err(Error::Count {
                    message: format!(
                        "{}: rank {from} sends {} elements but rank {rank} expects {} from it",
                        call.kind,
                        deposit.count(),
                        dst.count
                    ),
                });
            }
            // SAFETY: [1] every rank deposited before counting its arrival
            // (AcqRel), and we saw all arrivals (Acquire); [2] the depositor
            // stays in the round, its frame and buffers intact, until every
            // rank is done; [3] we write only our own receive buffer, whose
            // parts do not overlap (checked by `Parts::new`) and which no
            // send buffer overlaps.
            unsafe {
                let src = &*(deposit.send() as *const Layout);
                copy_checked(call, from as Rank, src, &dst)?;
            }
        }
        Ok(())
    });
    // Done (even after an error): others may still read our send buffer,
    // so wait for them all before leaving.
    let done = if round.finish() {
        round.wake_all(call);
        Ok(())
    } else {
        round.wait(call, || round.all_done())
    };
    rounds.leave(call, round);
    copied.and(done)
}

fn ring(call: &Call<'_>, send: &Layout, parts: &Parts) -> Result<(), Error> {
    let (rank, size) = (call.rank(), call.size());
    // SAFETY: our own buffers, distinct.
    unsafe { copy_checked(call, rank, send, &parts.part(rank as usize))? };
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
    // SAFETY: our own buffers, distinct.
    unsafe { copy_checked(call, rank, send, &recv.slice(rank as usize * block, block))? };
    // The largest power of two not above n; the first 2·rem ranks pair up.
    let pof2 = 1 << (31 - (n as u32).leading_zeros());
    let rem = n - pof2;
    // The first real rank whose block virtual rank `v` holds.
    let first = |v: i32| if v < rem { 2 * v } else { v + rem };
    // The real rank that speaks for virtual rank `v`.
    let real = |v: i32| if v < rem { 2 * v + 1 } else { v + rem };
    // The blocks of virtual ranks [v, v + len): adjacent in the buffer.
    let group = |v: i32, len: i32| {
        let (a, b) = (first(v), first(v + len));
        recv.slice(a as usize * block, (b - a) as usize * block)
    };
    let virtual_rank = if rank < 2 * rem {
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
        while mask < pof2 {
            let partner = v ^ mask;
            let mut ex = Exchange::new(call);
            ex.recv(real(partner), &group(partner & !(mask - 1), mask))?;
            ex.send(real(partner), &group(v & !(mask - 1), mask));
            ex.wait()?;
            mask <<= 1;
        }
    }
    if rank < 2 * rem {
        let all = recv.slice(0, n as usize * block);
        let mut ex = Exchange::new(call);
        if rank % 2 == 1 {
            ex.send(rank - 1, &all);
        } else {
            ex.recv(rank + 1, &all)?;
        }
        ex.wait()?;
    }
    Ok(())
}

/// The packed (contiguous) type with the signature of `ty`.
fn packed(ty: &TypeHandle) -> TypeHandle {
    if ty.map().is_contiguous() {
        ty.clone()
    } else {
        UserDatatype::from_type_map(TypeMap::packed(ty.map())).handle()
    }
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
        return Err(Error::Count {
            message: format!(
                "{}: rank {rank}'s part for rank {r} holds {} elements but rank 0's holds {}",
                call.kind, counts[r], table[r]
            ),
        });
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
        // SAFETY: `tmp` is ours and distinct from the receive buffer.
        unsafe {
            copy_checked(
                call,
                r as Rank,
                &all.slice(displs[r], counts[r]),
                &parts.part(r),
            )?
        };
    }
    drop(tmp);
    Ok(())
}
