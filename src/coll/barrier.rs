//! Barrier algorithms.
//!
//! * `shm`: ranks meet in the call's round; the last to arrive wakes the
//!   others. One count per rank on its worker's line (`census.rs`) and one
//!   wake-up each.
//! * `dissemination`: ⌈log2 p⌉ steps; at step k rank r notifies
//!   r + 2^k and waits for r − 2^k (zero-byte messages).
//! * `linear`: everyone notifies rank 0, which then releases everyone.
//!
//! The shared-memory path is the one that runs with thousands of ranks per
//! worker: each rank's stack lines fall out of the cache between two of
//! its calls, so every line its frames touch costs a miss. The other
//! algorithms live in functions of their own, off that path, so that their
//! locals do not widen its frame.

use super::exchange::Exchange;
use super::{Algorithm, Call};
use crate::datatype::copy::Layout;
use crate::error::Error;

/// Runs a barrier call. (Inlined: into the blocking barrier's frame, one
/// prologue, epilogue and `Result` through memory fewer.)
#[inline(always)]
pub(crate) fn barrier(call: &Call<'_>) -> Result<(), Error> {
    if call.size() == 1 {
        return Ok(());
    }
    match call.algorithm {
        Algorithm::Hierarchical | Algorithm::Dissemination | Algorithm::Linear => not_shared(call),
        _ => shm(call),
    }
}

/// The algorithms other than `shm`.
#[inline(never)]
fn not_shared(call: &Call<'_>) -> Result<(), Error> {
    let (rank, size) = (call.rank(), call.size());
    let empty = Layout::empty();
    match call.algorithm {
        Algorithm::Hierarchical => super::hier::barrier(call),
        Algorithm::Dissemination => {
            let mut step = 1;
            while step < size {
                let mut ex = Exchange::new(call);
                ex.recv((rank - step).rem_euclid(size), &empty)?;
                ex.send((rank + step) % size, &empty);
                ex.wait()?;
                step *= 2;
            }
            Ok(())
        }
        Algorithm::Linear => {
            let mut ex = Exchange::new(call);
            if rank == 0 {
                for r in 1..size {
                    ex.recv(r, &empty)?;
                }
                ex.wait()?;
                for r in 1..size {
                    ex.send(r, &empty);
                }
            } else {
                ex.send(0, &empty);
                ex.recv(0, &empty)?;
            }
            ex.wait()
        }
        _ => unreachable!("`barrier` sends only these here"),
    }
}

#[inline]
fn shm(call: &Call<'_>) -> Result<(), Error> {
    let rounds = &call.comm.coll().rounds;
    let round = rounds.join_checked(call)?;
    // One word held across the leave (the error, if any, is boxed).
    let result = round.arrive_and_wait(call);
    rounds.leave(call, round);
    Ok(result?)
}
