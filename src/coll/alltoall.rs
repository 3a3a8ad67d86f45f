//! All-to-all algorithms.
//!
//! An all-to-all is an all-to-allv whose partitions are `p` equal blocks,
//! rank by rank, on both sides: the send buffer is cut into `p` blocks of
//! `send.count / p` elements (it must divide) and the receive buffer must
//! hold as many. Counts are in elements of both types, which must have the
//! same data size. Part `j` of rank `i`'s send buffer goes to part `i` of
//! rank `j`'s receive buffer; rank `i` copies its own part locally.
//!
//! * `shm`: every rank publishes an outbox (the address, count and type of
//!   each of its send parts, by destination) and counts its arrival; once
//!   everyone arrived, each rank takes its turn of the round and copies its
//!   part of every rank's send buffer straight into its own receive buffer
//!   (it only ever writes its own memory; it starts with the rank after it
//!   and goes round, so that the ranks do not all read one buffer at once).
//!   A slot puts what a reader needs in one cache line, and the round's
//!   deposit points at the slots directly: with p² small parts, misses on
//!   the senders' count and displacement arrays, or on their outboxes,
//!   would cost more than the copies. A rank leaves only when every rank's turn is
//!   over, since until then others may still read its send buffer.
//! * `linear`: every rank posts its p − 1 receives, then its p − 1 sends
//!   (to r + 1, r + 2, ... so the ranks do not all send to rank 0 first), and
//!   waits for them all: one step, p·(p − 1) messages in flight.
//! * `pairwise`: p − 1 steps; at step k rank r sends to r + k and receives
//!   from r − k, so each rank has one message in each direction at a time
//!   (works for any p).

use super::exchange::Exchange;
use super::parts::{check_elements, Parts, Sides};
use super::round::Readers;
use super::{copy_checked, Algorithm, Call};
use crate::datatype::copy::Layout;
use crate::datatype::{TypeHandle, TypeMap};
use crate::error::{CountError, Error};
use crate::Rank;

/// Block `j` of rank `i`'s `send` goes to block `i` of rank `j`'s `recv`.
pub(crate) fn alltoall(call: &Call<'_>, send: &Layout, recv: &Layout) -> Result<(), Error> {
    let (rank, n) = (call.rank(), call.size() as usize);
    check_elements(call, send, recv, Sides::EveryRank)?;
    if send.count % n != 0 {
        return Err(Error::Count(CountError::UnevenBlocks {
            op: call.kind.name(),
            rank,
            holds: send.count,
            ranks: n,
        }));
    }
    let block = send.count / n;
    let recv = Parts::receive_blocks(call, recv, block)?;
    run(call, &Parts::blocks(send.clone(), block), &recv)
}

/// Part `j` of rank `i`'s `send` goes to part `i` of rank `j`'s `recv`.
pub(crate) fn alltoallv(call: &Call<'_>, send: &Parts, recv: &Parts) -> Result<(), Error> {
    check_elements(call, &send.buf, &recv.buf, Sides::EveryRank)?;
    run(call, send, recv)
}

fn run(call: &Call<'_>, send: &Parts, recv: &Parts) -> Result<(), Error> {
    match call.algorithm {
        Algorithm::Linear => linear(call, send, recv),
        Algorithm::Pairwise => pairwise(call, send, recv),
        _ => shm(call, send, recv),
    }
}

fn count_mismatch(call: &Call<'_>, from: usize, sent: usize, expected: usize) -> Error {
    Error::Count(CountError::SentToRank {
        op: call.kind.name(),
        from: from as Rank,
        to: call.rank(),
        sent,
        expected,
    })
}

/// The rank's own part, copied locally.
fn own(call: &Call<'_>, send: &Parts, recv: &Parts) -> Result<(), Error> {
    let rank = call.rank() as usize;
    let (src, dst) = (send.part(rank), recv.part(rank));
    if src.count != dst.count {
        return Err(count_mismatch(call, rank, src.count, dst.count));
    }
    // Our own buffers, distinct.
    copy_checked(call, call.rank(), &src, &dst)
}

/// Where one part of a rank's send buffer is, for the rank it goes to.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Slot {
    base: *const u8,
    count: usize,
    /// The sender's type map (compared by address only).
    map: *const TypeMap,
}

/// What a rank publishes in a shared-memory all-to-all: a slot per
/// destination rank (its table, which the deposit points to directly), and
/// its send type.
#[derive(Debug)]
pub(crate) struct Outbox {
    slots: Vec<Slot>,
    ty: TypeHandle,
}

impl Outbox {
    pub(crate) fn slots(&self) -> &[Slot] {
        &self.slots
    }
}

fn shm(call: &Call<'_>, send: &Parts, recv: &Parts) -> Result<(), Error> {
    let rounds = &call.comm.coll().rounds;
    let round = rounds.join_published(call, Readers::Every)?;
    let (rank, n) = (call.rank() as usize, round.size() as usize);
    let map: *const TypeMap = send.buf.ty.map();
    let outbox = Outbox {
        slots: (0..n)
            .map(|to| {
                let part = send.part(to);
                Slot {
                    base: part.base,
                    count: part.count,
                    map,
                }
            })
            .collect(),
        ty: send.buf.ty.clone(),
    };
    // Returns once every rank's turn is over (even after an error).
    let copied = round.publish(call, rank, &outbox, || {
        round.arrive_and_wait(call)?;
        let turn = round.enter(call)?;
        own(call, send, recv)?;
        let ours = recv.buf.ty.map();
        for k in 1..n {
            let from = (rank + k) % n;
            // Our slot, found through the deposit (one line) without
            // reading the outbox (another).
            let slot = turn.table::<Outbox>(from)[rank];
            let dst = recv.part(from);
            if slot.count != dst.count {
                return Err(count_mismatch(call, from, slot.count, dst.count));
            }
            let src = Layout {
                base: slot.base,
                count: slot.count,
                // The same type as ours: describe the part with our handle.
                ty: if std::ptr::eq(slot.map, ours) {
                    recv.buf.ty.clone()
                } else {
                    turn.deposit::<Outbox>(from).ty.clone()
                },
            };
            // We write only our own receive buffer, whose parts do not
            // overlap (checked by `Parts::new`) and which no send buffer
            // overlaps.
            copy_checked(call, from as Rank, &src, &dst)?;
        }
        Ok(())
    });
    rounds.leave(call, round);
    copied
}

fn linear(call: &Call<'_>, send: &Parts, recv: &Parts) -> Result<(), Error> {
    let (rank, size) = (call.rank(), call.size());
    let mut ex = Exchange::new(call);
    for k in 1..size {
        let from = (rank + size - k) % size;
        ex.recv(from, &recv.part(from as usize))?;
    }
    for k in 1..size {
        let to = (rank + k) % size;
        ex.send(to, &send.part(to as usize));
    }
    let own = own(call, send, recv);
    own.and(ex.wait())
}

fn pairwise(call: &Call<'_>, send: &Parts, recv: &Parts) -> Result<(), Error> {
    let (rank, size) = (call.rank(), call.size());
    own(call, send, recv)?;
    for k in 1..size {
        let (to, from) = ((rank + k) % size, (rank + size - k) % size);
        let mut ex = Exchange::new(call);
        ex.recv(from, &recv.part(from as usize))?;
        ex.send(to, &send.part(to as usize));
        ex.wait()?;
    }
    Ok(())
}
