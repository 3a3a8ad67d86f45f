//! The Threading strategy's helper: a user-level thread of the rank.
//!
//! MaM's Threading strategy has a helper thread run the blocking
//! redistribution while the rank computes. In a thread-based MPI the
//! threads a rank starts are user-level threads on the runtime's own
//! scheduler (MPC runs pthreads and OpenMP threads M:N beside its ranks),
//! so the helper here is a *task* (`sched::task`): a coroutine with the
//! rank's identity and a park slot of its own, started on the rank's
//! worker, exactly what runs an immediate collective. What
//! `MPI_THREAD_MULTIPLE` gives a helper thread it has: its MPI calls act
//! for the rank, they may block (it parks, the rank goes on) while the
//! rank calls MPI on other communicators, and either side's progress never
//! waits for the other's compute. What it lacks is preemption: it runs when
//! its worker is free (the rank parks in a collective, tests, or yields),
//! which on a machine whose cores the ranks already fill is when an OS
//! thread would get a core too, without the kernel's wake-ups and context
//! switches (measured: `examples/malleable_cg`, strategy T).
//!
//! The helper's run is a request: waiting for it parks the rank, and
//! dropping it unfinished settles it like an immediate collective's, so the
//! buffers the helper borrows outlive its run on every path.

use std::cell::Cell;

use crate::coll::CommCore;
use crate::error::Error;
use crate::p2p::completion::{Completion, Outcome};
use crate::p2p::Queued;
use crate::request::{Kind as RequestKind, PendingOp, Request, Scope};
use crate::sched::{self, task};

/// The helper's result, set once when its body returns.
pub(super) type Slot = Cell<Option<Result<(), Error>>>;

/// Starts `body` on a helper task acting for the calling rank of `core`;
/// the request completes when it returned, and its result is in `out`
/// then. Errors: the caller is an OS thread acting for a rank (it has no
/// worker to start a task on), or the job's slots are exhausted.
pub(super) fn start<'a, Sc: Scope<'a>>(
    core: &CommCore,
    scope: Sc,
    out: &'a Slot,
    body: impl FnOnce() -> Result<(), Error> + 'a,
) -> Result<Request<'a, (), Sc>, Error> {
    let ctx = core.caller()?;
    let pending = PendingOp::new(core, ctx.slot, Queued::Task, RequestKind::Collective);
    let completion: *const Completion = &pending.completion;
    let sched_of = core.clone();
    let run = move || {
        out.set(Some(body()));
        // SAFETY: the request keeps the completion alive until it is done
        // (dropping it early settles it: its rank waits for this task, and
        // where it cannot wait the job fails and this task never resumes);
        // read the waiter first.
        let waiter = unsafe { (*completion).waiter() };
        // SAFETY: this task is the completion's only completer.
        unsafe { (*completion).complete(Outcome::default()) };
        sched::unpark(sched_of.job().sched(), waiter);
    };
    // SAFETY: the task borrows `out` and what `body` borrows for 'a; the
    // request, registered in a scope of 'a, completes (or its drop waits)
    // only once the task's body has returned.
    unsafe { task::spawn(ctx, Box::new(run)) }?;
    Ok(Request::new(pending.into_op(), &(), scope))
}

/// Takes the helper's result once its request completed (the body set
/// it before completing the request).
pub(super) fn result(out: &Slot) -> Result<(), Error> {
    out.take()
        .expect("the helper sets its result before its request completes")
}
