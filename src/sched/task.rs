//! Tasks: coroutines that act for a rank without being one.
//!
//! An immediate collective runs the same algorithm as the blocking one, on a
//! task: a coroutine started on the calling rank's worker, with the rank's
//! identity (its sends and receives are the rank's) but a park slot of its
//! own, so it can wait while the rank goes on. The request of the immediate
//! operation completes when the task's body returns.
//!
//! A task counts as live for the job (the job ends when ranks *and* tasks
//! have finished) and as a waiting party for deadlock detection.

use std::sync::atomic::Ordering;

use super::rank::RankCtx;
use super::worker;
use crate::error::Error;
use crate::identity::{LocalIndex, WorldRank};

/// A task waiting for its worker to start it.
pub(crate) struct Spawn {
    pub(crate) slot: u32,
    /// The world rank it acts for, and that rank's local index.
    pub(crate) rank: WorldRank,
    pub(crate) local: LocalIndex,
    pub(crate) body: Box<dyn FnOnce()>,
}

impl std::fmt::Debug for Spawn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spawn")
            .field("slot", &self.slot)
            .field("rank", &self.rank)
            .finish()
    }
}

/// Starts `body` as a task acting for the calling rank, on its worker. The
/// task runs once the rank suspends (waits or yields).
///
/// # Safety
///
/// Everything `body` borrows must stay alive until it has returned: the
/// caller must wait for it (for instance through a completion the body
/// signals last) before those borrows end, also when unwinding.
pub(crate) unsafe fn spawn<'a>(ctx: &RankCtx, body: Box<dyn FnOnce() + 'a>) -> Result<(), Error> {
    if ctx.is_thread() {
        return Err(Error::Unsupported {
            what: "immediate collectives from an OS thread acting for a rank (start them \
                   from the rank itself, or use the blocking form)"
                .into(),
        });
    }
    let sched = ctx.sched();
    let slot = sched.slots.allocate(ctx.rank)?;
    sched.live.fetch_add(1, Ordering::SeqCst);
    // SAFETY: the caller guarantees the borrows outlive the body's run; the
    // worker runs it to completion (or unwinds it at teardown) before the
    // job, and with it every rank's stack, goes away.
    let body: Box<dyn FnOnce() + 'static> =
        unsafe { std::mem::transmute::<Box<dyn FnOnce() + 'a>, Box<dyn FnOnce()>>(body) };
    worker::push_spawn(Spawn {
        slot,
        rank: ctx.rank,
        local: ctx.local,
        body,
    });
    Ok(())
}
