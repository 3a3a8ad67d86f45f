//! Broadcast algorithms.
//!
//! * `shm`: the root publishes its buffer; every other rank copies from it
//!   as soon as it is published (copies run in parallel on all workers) and
//!   the last copier wakes the root, which may then return.
//! * `linear`: the root sends to every rank.
//! * `binomial`: a binomial tree rooted at the root (⌈log2 p⌉ steps).
//! * `symmetric`: seed 001's algorithm: the root cuts the message into p
//!   pieces and sends piece i to rank i; then every rank sends its piece to
//!   every other rank (scatter + allgather). Total time ≈ 2·t0 + n·td,
//!   independent of p for large messages; a tree is better for small ones.

use super::exchange::Exchange;
use super::parts::piece;
use super::round::Shared;
use super::{check_transfer, copy_checked, Algorithm, Call};
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
        _ => shm(call, root, buf),
    }
}

/// Largest broadcast (in data bytes) whose root stages the data in the
/// round and returns at once, instead of waiting for every rank to copy out
/// of its buffer: one more copy of a few bytes saves the root a park and a
/// wake-up, and the job the wait for the slowest reader.
const STAGED_BYTES: usize = 4096;

fn shm(call: &Call<'_>, root: i32, buf: &Layout) -> Result<(), Error> {
    let rounds = &call.comm.shared().coll.rounds;
    let round = rounds.join_checked(call, false)?;
    let result = if call.rank() == root {
        *round.root.lock() = Some(Shared(buf.clone()));
        if buf.bytes() <= STAGED_BYTES {
            {
                let mut staged = round.shared.lock();
                staged.resize(buf.bytes(), 0);
                // SAFETY: `buf` is the root's valid buffer; `staged` holds
                // its data bytes.
                unsafe { crate::datatype::copy::pack(buf, staged.as_mut_ptr()) };
            }
            // The readers use the published layout for its type and count
            // only, never its address.
            round.publish_staged(call);
            Ok(())
        } else {
            round.publish(call);
            // Wait until every other rank has copied out of our buffer.
            round.wait_released(call)
        }
    } else {
        let copied = round.wait_published(call).and_then(|()| {
            let src = round.root.lock().clone().expect("the root published").0;
            if round.is_staged() {
                check_transfer(call, root, &src, buf)?;
                let staged = round.shared.lock();
                // SAFETY: the staged bytes are `src`'s data, whose signature
                // matches `buf`'s and which fits in it (checked).
                unsafe { crate::datatype::copy::unpack(staged.as_ptr(), staged.len(), buf) };
                return Ok(());
            }
            // SAFETY: the root stays in the round until every copy is
            // done; our buffer is ours.
            unsafe { copy_checked(call, root, &src, buf) }
        });
        // Count the copy even if it failed, so the root is released.
        round.release_root(call);
        copied
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
