//! Broadcast algorithms.
//!
//! * `shm`: the root publishes its buffer; every other rank copies from it
//!   as soon as it is published, in its turn of the round (copies run in
//!   parallel on all workers), and the last copier wakes the root, which may
//!   then return. Up to [`STAGED_BYTES`] the root copies its data into the
//!   round instead and returns at once.
//! * `linear`: the root sends to every rank.
//! * `binomial`: a binomial tree rooted at the root (⌈log2 p⌉ steps).
//! * `symmetric`: seed 001's algorithm: the root cuts the message into p
//!   pieces and sends piece i to rank i; then every rank sends its piece to
//!   every other rank (scatter + allgather). Total time ≈ 2·t0 + n·td,
//!   independent of p for large messages; a tree is better for small ones.

use super::exchange::Exchange;
use super::parts::piece;
use super::round::{Readers, Shape};
use super::{check_transfer, copy_checked, pack_to, unpack_from, Algorithm, Call};
use crate::datatype::copy::Layout;
use crate::error::Error;

/// Runs a broadcast of `buf` from `root`.
pub(crate) fn broadcast(call: &Call<'_>, root: i32, buf: &Layout) -> Result<(), Error> {
    if call.size() == 1 {
        return Ok(());
    }
    match call.algorithm {
        Algorithm::Linear => linear(call, root, buf),
        Algorithm::Binomial => binomial(call, root, buf),
        Algorithm::Symmetric => symmetric(call, root, buf),
        Algorithm::Hierarchical => super::hier::broadcast(call, root, buf),
        _ => shm(call, root, buf),
    }
}

/// Largest broadcast (in data bytes) whose root stages the data in the
/// round and returns at once, instead of waiting for every rank to copy out
/// of its buffer: one more copy of a few bytes saves the root a park and a
/// wake-up, and the job the wait for the slowest reader.
const STAGED_BYTES: usize = 4096;

fn shm(call: &Call<'_>, root: i32, buf: &Layout) -> Result<(), Error> {
    let rounds = &call.comm.coll().rounds;
    let round = rounds.join_published(call, Readers::NonRoots)?;
    let result = if call.rank() == root {
        if buf.bytes() <= STAGED_BYTES {
            // The readers take the type and count from the shape, the data
            // from the round: nobody touches our buffer.
            round.stage(call, Shape::of(buf), |staged| {
                staged.resize(buf.bytes(), 0);
                pack_to(buf, staged);
            });
            Ok(())
        } else {
            // Returns once every other rank has copied out of our buffer.
            round.publish(call, root as usize, buf, || {
                round.set_ready(call);
                Ok(())
            })
        }
    } else {
        round.wait_ready(call).map_err(Error::from).and_then(|()| {
            if round.is_staged() {
                let (shape, staged) = round.staged();
                check_transfer(call, root, &shape.unplaced(), buf)?;
                unpack_from(staged, buf);
                return Ok(());
            }
            let turn = round.enter(call)?;
            copy_checked(call, root, turn.deposit::<Layout>(root as usize), buf)
        })
    };
    rounds.leave(call, round);
    result
}

fn linear(call: &Call<'_>, root: i32, buf: &Layout) -> Result<(), Error> {
    let mut ex = Exchange::new(call);
    if call.rank() == root {
        for r in (0..call.size()).filter(|&r| r != root) {
            ex.send(r, buf);
        }
    } else {
        ex.recv(root, buf)?;
    }
    ex.wait()
}

/// Relative rank: the root is 0.
fn relative(call: &Call<'_>, root: i32) -> i32 {
    (call.rank() - root).rem_euclid(call.size())
}

fn absolute(call: &Call<'_>, root: i32, relative: i32) -> i32 {
    (relative + root) % call.size()
}

fn binomial(call: &Call<'_>, root: i32, buf: &Layout) -> Result<(), Error> {
    let (size, vr) = (call.size(), relative(call, root));
    // Receive from the parent: the rank that differs in the lowest set bit.
    let mut mask = 1;
    while mask < size {
        if vr & mask != 0 {
            let mut ex = Exchange::new(call);
            ex.recv(absolute(call, root, vr - mask), buf)?;
            ex.wait()?;
            break;
        }
        mask <<= 1;
    }
    // Send to the children, largest subtree first.
    mask >>= 1;
    let mut ex = Exchange::new(call);
    while mask > 0 {
        if vr + mask < size {
            ex.send(absolute(call, root, vr + mask), buf);
        }
        mask >>= 1;
    }
    ex.wait()
}

fn symmetric(call: &Call<'_>, root: i32, buf: &Layout) -> Result<(), Error> {
    let (rank, size) = (call.rank(), call.size());
    // Cut contiguous data at byte boundaries, other data at elements.
    let whole = buf.as_bytes().unwrap_or_else(|| buf.clone());
    let p = size as usize;
    let part = |i: i32| {
        let (start, len) = piece(whole.count, p, i as usize);
        whole.slice(start, len)
    };
    // Scatter: piece i goes from the root to rank i.
    let mut ex = Exchange::new(call);
    if rank == root {
        for r in (0..size).filter(|&r| r != root) {
            ex.send(r, &part(r));
        }
    } else {
        ex.recv(root, &part(rank))?;
    }
    ex.wait()?;
    // Allgather: every rank sends its piece to every other rank.
    let mut ex = Exchange::new(call);
    if rank != root {
        // The root already has every piece; the others need everyone's.
        for r in (0..size).filter(|&r| r != rank) {
            ex.recv(r, &part(r))?;
        }
    }
    if rank == root {
        // The root's own piece never left it: send it to everyone.
        for r in (0..size).filter(|&r| r != root) {
            ex.send(r, &part(root));
        }
    } else {
        for r in (0..size).filter(|&r| r != rank && r != root) {
            ex.send(r, &part(rank));
        }
    }
    ex.wait()
}
