//! Collective operations, shaped like rsmpi's `mpi::collective`.
//!
//! Collectives that have no root are methods of every communicator
//! ([`CommunicatorCollectives`]); rooted ones are methods of the root
//! process ([`Root`]): `world.process_at_rank(0).broadcast_into(&mut buf)` on
//! every rank, `gather_into_root` on the root and `gather_into` elsewhere.
//! Every blocking collective has an `immediate_*` form returning a
//! [`Request`]; several may be outstanding on one communicator.
//!
//! Each collective call is checked against the other ranks' (same
//! operation, root, sizes and algorithm); a mismatch fails the job with both
//! calls and their call sites instead of hanging. Algorithms are chosen per
//! call by the selector, per communicator with
//! [`CommunicatorCollectives::set_collective_algorithm`], or per process
//! with `MYRIAD_COLL_<COLLECTIVE>=<algorithm>` (see [`Collective`] and
//! [`Algorithm`]).
//!
//! As in rsmpi, failures panic (the job then fails with the message); the
//! message names the rank, the operation and the values.

//!
//! | file | what it holds |
//! |---|---|
//! | `mod.rs` | a call's life shared by all collectives: blocking and immediate runs, operation bodies, partition checks |
//! | `all.rs` | [`CommunicatorCollectives`]: barrier, all-gather(v), all-to-all(v), all-reduce, reduce-scatter, scans |
//! | `rooted.rs` | [`Root`]: broadcast, gather(v), scatter(v), reduce |

use std::panic::Location;

mod all;
mod rooted;

pub use all::CommunicatorCollectives;
pub use rooted::Root;

#[cfg(feature = "stats")]
pub use crate::coll::gather::{last_root_stats, RootStats};
pub use crate::coll::op::{
    reduce_local_into, Operation, SystemOperation, UnsafeUserFunction, UnsafeUserOperation,
    UserOperation,
};
pub use crate::coll::{Algorithm, Collective};
/// The operands of a [`UserOperation`] (defined in [`crate::datatype`], as in rsmpi).
pub use crate::datatype::{DynBuffer, DynBufferMut};

use crate::coll::check::Signature;
use crate::coll::parts::Parts;
use crate::coll::CommCore;
use crate::coll::{self, Call};
use crate::communicator::{AsCore, Communicator, Process};
use crate::datatype::copy::Layout;
use crate::datatype::{Buffer, BufferMut, Partitioned, PartitionedBuffer, PartitionedBufferMut};
use crate::error::{Error, OrRaise};
use crate::p2p::completion::{Completion, Outcome};
use crate::p2p::Queued;
use crate::request::{Kind as RequestKind, PendingOp, Request, Scope, StaticScope};
use crate::runtime::job::PendingRoot;
use crate::sched::{self, task};
use crate::{Count, Rank};

/// Runs a blocking collective: begins the call, runs `body`.
///
/// This frame stays on the rank's stack while the rank parks in `body`,
/// and each of its lines is a cache miss when a rank of a million resumes
/// (`coll/round.rs`, "Where a rank's time goes"): it holds the call and
/// little else. The begin's `Result` (an `Error` is over 100 bytes) and a
/// traced call's span live in frames of their own, out of line. (Inlined
/// into the API's function, where the signature was built: out of line,
/// it copied the signature once more.)
#[inline(always)]
fn blocking(
    core: &CommCore,
    signature: Signature,
    site: &'static Location<'static>,
    body: impl FnOnce(&Call<'_>) -> Result<(), Error>,
) -> Result<(), Error> {
    // The call is built here, once, from what `begin_boxed` settled (two
    // words back in registers): a whole `Call` returned in a `Result` was
    // built in the callee's frame and copied, field by field, twice
    // (~30 instructions a call).
    let mut signature = signature;
    match begin_boxed(core, &mut signature, site) {
        Ok(Begun {
            ctx,
            seq,
            algorithm,
        }) => {
            // Field by field, not `Call::settled`: through it LLVM wrote
            // the call with 3 more instructions an all-reduce (callgrind,
            // `coll_count all_reduce 100 1024 1`: 614.2 -> 617.2 a rank and
            // call; the barrier's unchanged).
            let call = Call {
                comm: core,
                ctx,
                seq,
                kind: signature.kind,
                algorithm,
                site,
                signature,
            };
            if call.ctx.recorder().is_some() {
                traced(&call, body)
            } else {
                body(&call)
            }
        }
        Err(err) => Err(*err),
    }
}

/// What [`begin_boxed`] settles for a blocking call.
struct Begun<'a> {
    ctx: &'a sched::rank::RankCtx,
    seq: u32,
    algorithm: Algorithm,
}

/// [`coll::begin`] with its error boxed, for [`blocking`]: the caller's
/// context, the call's sequence number and algorithm (also written into
/// `signature`), or the error, in two words. (Inlined into the blocking
/// call's frame since its body is too: out of line, its prologue, epilogue
/// and `Result` cost ~45 instructions a call; the frame grows by its error
/// paths' room, yet a 16,384-rank all-reduce misses L1 less, cachegrind:
/// 24.9 -> 21.8 misses a rank and call.)
#[inline(always)]
fn begin_boxed<'a>(
    core: &'a CommCore,
    signature: &mut Signature,
    site: &'static Location<'static>,
) -> Result<Begun<'a>, Box<Error>> {
    let ctx = core.caller().map_err(Box::new)?;
    let (seq, algorithm) =
        coll::begin_settle(core, signature, Algorithm::Auto, site).map_err(Box::new)?;
    Ok(Begun {
        ctx,
        seq,
        algorithm,
    })
}

/// Runs `body` inside the call's trace span (a traced rank).
#[cold]
#[inline(never)]
fn traced(call: &Call<'_>, body: impl FnOnce(&Call<'_>) -> Result<(), Error>) -> Result<(), Error> {
    let _span = call.trace();
    body(call)
}

/// Runs a blocking rooted collective: checks the root (errors name `op`),
/// then as [`blocking`]. (Inlined: out of line, as the compiler chose for
/// some builds, it cost a broadcast 21 instructions per rank and call.)
#[inline]
fn blocking_rooted(
    core: &CommCore,
    op: &'static str,
    root: Rank,
    signature: Signature,
    site: &'static Location<'static>,
    body: impl FnOnce(&Call<'_>) -> Result<(), Error>,
) -> Result<(), Error> {
    coll::check_root(core, op, root)?;
    blocking(core, signature, site, body)
}

/// Starts an immediate collective: begins the call now (its sequence number
/// fixes its place among the communicator's collectives) and runs `body` on
/// a task; the request completes when the body returns.
#[track_caller]
fn immediate<'a, D: ?Sized, Sc: Scope<'a>>(
    core: &CommCore,
    mut signature: Signature,
    data: *const D,
    scope: Sc,
    body: impl FnOnce(&Call<'_>) -> Result<(), Error> + 'a,
) -> Request<'a, D, Sc> {
    let site = Location::caller();
    let ctx = core.caller().or_raise();
    let is_root = signature.root == Some(core.rank());
    let (seq, algorithm, signature) = {
        let call = coll::begin_as(core, ctx, &mut signature, Algorithm::Auto, site).or_raise();
        (call.seq, call.algorithm, call.signature)
    };
    let pending = PendingOp::new(core, ctx.slot, Queued::Task, RequestKind::Collective);
    let completion: *const Completion = &pending.completion;
    let comm = core.clone();
    // A rank must not retire while it is the root of this call (`shrink`).
    let root = is_root.then(|| PendingRoot::enter(ctx));
    let run = move || {
        sched::rank::with_current(|ctx| {
            let ctx = ctx.expect("a task runs on a worker");
            let call = Call::settled(&comm, ctx, seq, algorithm, site, signature);
            let _span = call.trace();
            // A failure fails the job (the task panics with the error).
            body(&call).or_raise();
        });
        drop(root);
        // SAFETY: the request keeps the completion alive until it is done
        // (dropping it early settles it: its rank waits for this task, and
        // where it cannot wait the job fails and this task never resumes);
        // read the waiter first.
        let waiter = unsafe { (*completion).waiter() };
        // SAFETY: this task is the completion's only completer.
        unsafe { (*completion).complete(Outcome::default()) };
        sched::unpark(comm.job().sched(), waiter);
    };
    // SAFETY: the task borrows buffers for 'a; the request, registered in a
    // scope of 'a, completes (or its drop waits) only once the task's body
    // has returned.
    unsafe { task::spawn(ctx, Box::new(run)) }.or_raise();
    Request::new(pending.into_op(), data, scope)
}

fn bytes_of(layout: &Layout) -> Option<usize> {
    Some(layout.bytes())
}

/// The body of a reduction, blocking or immediate: checks the operation
/// and the buffers, then reduces to `root` (`None`: to every rank).
#[inline(always)]
fn reduce_body<O: Operation + ?Sized>(
    call: &Call<'_>,
    root: Option<Rank>,
    op: &O,
    send: &Layout,
    recv: Option<&Layout>,
) -> Result<(), Error> {
    let (opref, commutative) = (op.op(), op.is_commutative());
    coll::reduce::check(call, &opref, send, recv)?;
    coll::reduce::reduce(call, root, &opref, commutative, send, recv)
}

/// The body of a reduce-scatter-block, blocking or immediate.
fn reduce_scatter_block_body<O: Operation + ?Sized>(
    call: &Call<'_>,
    op: &O,
    send: &Layout,
    recv: &Layout,
) -> Result<(), Error> {
    let opref = op.op();
    coll::reduce::check(call, &opref, send, None)?;
    coll::reduce::reduce_scatter_block(call, &opref, send, recv)
}

/// The body of an inclusive or exclusive scan (`kind`), blocking or
/// immediate.
fn scan_body<O: Operation + ?Sized>(
    call: &Call<'_>,
    kind: Collective,
    op: &O,
    send: &Layout,
    recv: &Layout,
) -> Result<(), Error> {
    let (opref, commutative) = (op.op(), op.is_commutative());
    coll::reduce::check(call, &opref, send, Some(recv))?;
    let exclusive = kind == Collective::ExclusiveScan;
    coll::scan::scan(call, &opref, commutative, send, recv, exclusive)
}

fn parts_of<P: Partitioned + ?Sized>(
    op: &'static str,
    core: &CommCore,
    buf: Layout,
    p: &P,
    total: Count,
    receive: bool,
) -> Result<Parts, Error> {
    Parts::new(op, buf, p.counts(), p.displs(), total, core.size(), receive)
}

fn send_parts<B: PartitionedBuffer + ?Sized>(
    op: &'static str,
    core: &CommCore,
    buf: &B,
) -> Result<Parts, Error> {
    let layout = Layout::at(
        buf.pointer() as *const u8,
        buf.total_count() as usize,
        crate::datatype::Datatype::handle(&buf.as_datatype()),
    );
    parts_of(op, core, layout, buf, buf.total_count(), false)
}

fn recv_parts<B: PartitionedBufferMut + ?Sized>(
    op: &'static str,
    core: &CommCore,
    buf: &mut B,
) -> Result<Parts, Error> {
    let total = buf.total_count();
    let layout = Layout::at(
        buf.pointer_mut() as *const u8,
        total as usize,
        crate::datatype::Datatype::handle(&buf.as_datatype()),
    );
    parts_of(op, core, layout, &*buf, total, true)
}
