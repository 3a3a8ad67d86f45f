//! The shared-memory barrier: a counter and a list of parked ranks.
//!
//! Ranks of a communicator that share the process do not need messages to
//! synchronise: each arrival increments a counter under a lock and parks; the
//! last one bumps the generation and wakes everyone. A rank leaves when the
//! generation it arrived in is over, so a fast rank may enter the next
//! barrier before slow ones have left this one.

use std::panic::Location;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::comm::CommCore;
use crate::error::Error;
use crate::sched::{self, WaitInfo, WaitOp};

/// Barrier state of one communicator.
#[derive(Debug, Default)]
pub(crate) struct Barrier {
    state: Mutex<State>,
    generation: AtomicU64,
}

#[derive(Debug, Default)]
struct State {
    arrived: u32,
    /// World ranks parked in the current generation.
    waiters: Vec<u32>,
}

impl Barrier {
    pub(crate) fn new() -> Barrier {
        Barrier::default()
    }

    /// Waits until every rank of `comm` has arrived.
    pub(crate) fn wait(
        &self,
        comm: &CommCore,
        site: &'static Location<'static>,
    ) -> Result<(), Error> {
        let ctx = comm.caller()?;
        let size = comm.size() as u32;
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let generation = self.generation.load(Ordering::Relaxed);
        state.arrived += 1;
        if state.arrived == size {
            state.arrived = 0;
            let waiters = std::mem::take(&mut state.waiters);
            self.generation.store(generation + 1, Ordering::Release);
            drop(state);
            let job = comm.job();
            for rank in waiters {
                sched::unpark(job, rank);
            }
            return Ok(());
        }
        state.waiters.push(comm.world());
        drop(state);
        let info = WaitInfo {
            op: WaitOp::Barrier,
            peer: WaitInfo::NO_PEER,
            tag: WaitInfo::NO_TAG,
            comm: comm.p2p_context() + 1,
            site,
        };
        sched::wait_until(ctx, &info, || {
            self.generation.load(Ordering::Acquire) != generation
        })
    }
}
