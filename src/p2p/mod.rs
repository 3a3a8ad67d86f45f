//! Point-to-point messaging inside one process: protocols on top of the
//! matching engine ([`mailbox`]).
//!
//! ## One copy per message
//!
//! * **Receive already posted**: the sender copies straight into the
//!   receive buffer and completes the receive (one copy).
//! * **No receive yet, small message** (≤ the eager limit, or a buffered
//!   send): the sender packs the data into an eager buffer from the job's pool
//!   and is done; the receiver unpacks it later (two copies, but the sender
//!   never waits, as MPI's standard mode allows).
//! * **No receive yet, large message** (or a synchronous send): the sender
//!   queues a descriptor of its own buffer and waits; the receiver copies
//!   straight out of it and completes the send (rendezvous, one copy).
//!
//! ## Who owns what
//!
//! A queued descriptor (posted receive or rendezvous send) points into the
//! memory of a waiting rank: its buffer and its [`Completion`]. The waiting
//! rank keeps both alive until the completion is done, or until it withdraws
//! the descriptor from the mailbox under the lock (cancel, or unwinding during
//! an abort). A descriptor is *claimed* by removing it from the queue under
//! the same lock; the claimer then copies and completes without parking, so a
//! waiter that cannot find its descriptor only has to wait for `DONE`.
//! Matched probes are the one exception (they hold a rendezvous message
//! between the probe and the receive) and mark it `HELD`. Once the job
//! aborts, claims are refused, and a sender may give up a message still
//! held; [`claim`] states the whole protocol.
//!
//! The engine never asks where the peer runs: a remote transport will queue
//! the same [`mailbox::Unexpected`] entries and complete the same
//! [`Completion`]s.

pub(crate) mod claim;
pub(crate) mod completion;
pub(crate) mod eager;
pub(crate) mod mailbox;
mod status;

use std::panic::Location;

use completion::{Completion, Fault, Outcome};
use eager::EagerPool;
use mailbox::{Envelope, Mailbox, MatchSpec, Payload, Posted, Unexpected};
pub use status::Status;

use crate::comm::CommCore;
use crate::datatype::copy::{self, Layout};
use crate::datatype::signature_mismatch;
use crate::error::Error;
use crate::runtime::job::Job;
use crate::sched::{self, RankCtx, WaitInfo, WaitOp};
use crate::{Rank, Tag, ANY_SOURCE, ANY_TAG, TAG_UB};

/// Point-to-point state of a job.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) mailboxes: Box<[Mailbox]>,
    pub(crate) eager: EagerPool,
    pub(crate) eager_limit: usize,
}

impl Shared {
    pub(crate) fn new(ranks: usize, eager_limit: usize) -> Shared {
        Shared {
            mailboxes: (0..ranks).map(|_| Mailbox::default()).collect(),
            eager: EagerPool::new(),
            eager_limit: eager_limit.min(EagerPool::MAX_CLASS),
        }
    }
}

/// The MPI send modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SendMode {
    /// `MPI_Send`: eager when small, rendezvous when large.
    Standard,
    /// `MPI_Ssend`: completes only once matched.
    Synchronous,
    /// `MPI_Bsend`: always copies, never waits.
    Buffered,
}

/// How an operation started.
#[derive(Debug)]
pub(crate) enum Started {
    /// Already complete (eager send, or message already there).
    Done(Outcome),
    /// A descriptor is queued; wait for the completion.
    Pending,
}

/// Checks a destination rank and a send tag.
pub(crate) fn check_send(
    comm: &CommCore,
    op: &'static str,
    dest: Rank,
    tag: Tag,
) -> Result<(), Error> {
    if dest < 0 || dest >= comm.size() {
        return Err(Error::Rank {
            op,
            rank: dest,
            size: comm.size(),
        });
    }
    if !(0..=TAG_UB).contains(&tag) {
        return Err(Error::Tag { op, tag });
    }
    Ok(())
}

/// Checks a source rank (or `ANY_SOURCE`) and a receive tag (or `ANY_TAG`).
pub(crate) fn check_receive(
    comm: &CommCore,
    op: &'static str,
    source: Rank,
    tag: Tag,
) -> Result<(), Error> {
    if source != ANY_SOURCE && (source < 0 || source >= comm.size()) {
        return Err(Error::Rank {
            op,
            rank: source,
            size: comm.size(),
        });
    }
    if tag != ANY_TAG && !(0..=TAG_UB).contains(&tag) {
        return Err(Error::Tag { op, tag });
    }
    Ok(())
}

/// Starts a send of `src` to `dest` in context `context` (the
/// communicator's point-to-point context, or its collective one). If it
/// returns `Pending`, `completion` (owned by the caller, waking the caller's
/// slot) is referenced by a queued descriptor and must stay alive, with
/// `src`, until it is done or withdrawn.
pub(crate) fn start_send(
    comm: &CommCore,
    context: u32,
    dest: Rank,
    tag: Tag,
    src: &Layout,
    mode: SendMode,
    completion: &Completion,
) -> Started {
    let job = comm.job();
    let env = Envelope {
        context,
        source: comm.rank(),
        tag,
    };
    let dest_world = comm.world_rank(dest);
    let mailbox = &job.p2p.mailboxes[dest_world as usize];
    let mut queues = mailbox.lock();
    if let Some(posted) = queues.take_posted(&env, || job.sched.is_aborting()) {
        drop(queues);
        let bytes = src.bytes();
        deliver(job, &env, src, posted);
        return Started::Done(Outcome {
            bytes,
            ..Outcome::default()
        });
    }
    let bytes = src.bytes();
    let eager = match mode {
        SendMode::Buffered => true,
        SendMode::Standard => bytes <= job.p2p.eager_limit,
        SendMode::Synchronous => false,
    };
    let payload = if eager {
        let buf = job.p2p.eager.take(bytes, |out| {
            // SAFETY: `src` is valid for reads (the caller's buffer) and the
            // pool hands out `bytes` writable bytes.
            unsafe { copy::pack(src, out) }
        });
        Payload::Eager {
            buf,
            ty: src.ty.clone(),
            count: src.count,
        }
    } else {
        Payload::Rendezvous {
            src: src.clone(),
            completion,
        }
    };
    queues.unexpected.push_back(Unexpected { env, payload });
    let probers = queues.take_probers();
    drop(queues);
    for slot in probers {
        sched::unpark(&job.sched, slot);
    }
    if eager {
        Started::Done(Outcome {
            bytes,
            ..Outcome::default()
        })
    } else {
        Started::Pending
    }
}

/// Copies a message into a claimed posted receive and completes it.
fn deliver(job: &Job, env: &Envelope, src: &Layout, posted: Posted) {
    let outcome = transfer(env, src, &posted.dst);
    // SAFETY: the receiver keeps its completion alive until it is done; we
    // claimed the descriptor, so we are its only completer. Read the waiter
    // before completing: the receiver may return right after.
    let waiter = unsafe { (*posted.completion).waiter() };
    // SAFETY: as above.
    unsafe { (*posted.completion).complete(outcome) };
    sched::unpark(&job.sched, waiter);
}

/// Checks signatures and sizes and copies `src` into `dst`.
fn transfer(env: &Envelope, src: &Layout, dst: &Layout) -> Outcome {
    let bytes = src.bytes();
    let mut outcome = Outcome {
        source: env.source,
        tag: env.tag,
        bytes,
        ..Outcome::default()
    };
    if let Some(fault) = type_fault(src, dst) {
        outcome.fault = Some(fault);
        return outcome;
    }
    // SAFETY: both buffers are kept alive by their (waiting) owners, see the
    // module docs; they belong to different operations so do not overlap.
    unsafe { copy::copy(src, dst) };
    let capacity = dst.bytes();
    if bytes > capacity {
        outcome.fault = Some(Fault::Truncated { buffer: capacity });
    }
    outcome
}

fn type_fault(src: &Layout, dst: &Layout) -> Option<Fault> {
    if src.count == 0 {
        return None;
    }
    signature_mismatch(src.ty.map(), src.count, dst.ty.map()).map(|(index, sent, expected)| {
        Fault::Type {
            index,
            sent: sent.name(),
            expected: expected.name(),
        }
    })
}

/// Receives a claimed unexpected message into `dst`.
pub(crate) fn consume(job: &Job, msg: Unexpected, dst: &Layout) -> Outcome {
    match msg.payload {
        Payload::Eager { buf, ty, count } => {
            let src = Layout {
                base: buf.as_ptr(),
                count,
                ty,
            };
            let mut outcome = Outcome {
                source: msg.env.source,
                tag: msg.env.tag,
                bytes: buf.len(),
                ..Outcome::default()
            };
            if let Some(fault) = type_fault(&src, dst) {
                outcome.fault = Some(fault);
            } else {
                // SAFETY: the eager buffer holds `buf.len()` packed bytes; `dst`
                // is the caller's live receive buffer.
                unsafe { copy::unpack(buf.as_ptr(), buf.len(), dst) };
                if buf.len() > dst.bytes() {
                    outcome.fault = Some(Fault::Truncated {
                        buffer: dst.bytes(),
                    });
                }
            }
            job.p2p.eager.give(buf);
            outcome
        }
        Payload::Rendezvous { src, completion } => {
            let outcome = transfer(&msg.env, &src, dst);
            // SAFETY: the sender waits on its completion until done; we
            // claimed its descriptor. Read the waiter first (see `deliver`).
            let waiter = unsafe { (*completion).waiter() };
            let sent = Outcome {
                bytes: src.bytes(),
                ..Outcome::default()
            };
            // SAFETY: as above.
            unsafe { (*completion).complete(sent) };
            sched::unpark(&job.sched, waiter);
            outcome
        }
    }
}

/// Starts a receive into `dst` in context `context`. If it returns
/// `Pending`, `completion` and `dst` must stay alive until the completion is
/// done or withdrawn.
pub(crate) fn start_receive(
    comm: &CommCore,
    context: u32,
    source: Rank,
    tag: Tag,
    dst: &Layout,
    completion: &Completion,
) -> Started {
    let job = comm.job();
    let spec = MatchSpec {
        context,
        source,
        tag,
    };
    let mailbox = &job.p2p.mailboxes[comm.world() as usize];
    let mut queues = mailbox.lock();
    if let Some(msg) = queues.take_unexpected(&spec, || job.sched.is_aborting()) {
        drop(queues);
        return Started::Done(consume(job, msg, dst));
    }
    queues.posted.push_back(Posted {
        spec,
        dst: dst.clone(),
        completion,
    });
    Started::Pending
}

/// Turns a receive outcome into a status or the error it carries.
pub(crate) fn receive_result(comm: &CommCore, outcome: Outcome) -> Result<Status, Error> {
    if outcome.cancelled {
        return Ok(Status::cancelled());
    }
    match outcome.fault {
        None => Ok(Status::new(outcome.source, outcome.tag, outcome.bytes)),
        Some(Fault::Truncated { buffer }) => Err(Error::Truncate {
            rank: comm.rank(),
            source: outcome.source,
            tag: outcome.tag,
            message_bytes: outcome.bytes,
            buffer_bytes: buffer,
        }),
        Some(Fault::Type {
            index,
            sent,
            expected,
        }) => Err(Error::Type {
            message: format!(
                "type mismatch: rank {} received a message from rank {} (tag {}) whose \
                 type signature differs from the receive buffer's at base value {index} \
                 (sent {sent}, expected {expected}); nothing was copied",
                comm.rank(),
                outcome.source,
                outcome.tag
            ),
        }),
    }
}

/// Which queue a pending descriptor sits in.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Queued {
    /// A posted receive in the mailbox of this world rank.
    Receive(u32),
    /// A rendezvous send in the mailbox of this world rank.
    Send(u32),
    /// Not in a queue: a task (an immediate collective) completes it.
    Task,
}

/// Withdraws a pending descriptor; `true` if it was still queued (then
/// nobody will complete it).
pub(crate) fn withdraw(job: &Job, queued: Queued, completion: &Completion) -> bool {
    match queued {
        Queued::Receive(owner) => job.p2p.mailboxes[owner as usize]
            .lock()
            .withdraw_posted(completion),
        Queued::Send(dest) => job.p2p.mailboxes[dest as usize]
            .lock()
            .withdraw_rendezvous(completion),
        Queued::Task => false,
    }
}

/// Keeps a blocking operation's descriptor from outliving the operation:
/// if the rank unwinds while waiting (job abort), the guard withdraws it, or
/// waits for the claimer that is copying right now.
pub(crate) struct PendingGuard<'a> {
    job: &'a Job,
    queued: Queued,
    completion: &'a Completion,
}

impl<'a> PendingGuard<'a> {
    pub(crate) fn new(job: &'a Job, queued: Queued, completion: &'a Completion) -> Self {
        PendingGuard {
            job,
            queued,
            completion,
        }
    }

    /// Waits for completion (parking the rank) and returns the outcome.
    pub(crate) fn wait(self, ctx: &RankCtx, info: &WaitInfo) -> Result<Outcome, Error> {
        sched::wait_until(ctx, info, || self.completion.is_done())?;
        let outcome = self.completion.outcome();
        std::mem::forget(self);
        Ok(outcome)
    }
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        settle(self.job, self.queued, self.completion);
    }
}

/// Makes sure no descriptor refers to `completion` any more, without
/// parking: withdraws it or waits until its claimer completed it (or, during
/// an abort, until nobody can touch it).
///
/// For callers that cannot park on `completion` (a rank unwinding, the job
/// aborting, code other than the owning rank). A claimer that may take long
/// (a matched probe holding the message, a task running a collective) may
/// need this very thread (a task always runs on its rank's worker), so it
/// is not waited for: the job fails, and once it aborts they run no more.
pub(crate) fn settle(job: &Job, queued: Queued, completion: &Completion) {
    if completion.is_done() || withdraw(job, queued, completion) {
        return;
    }
    // Claimed: the claimer copies and completes without parking, except for
    // a matched probe holding the message, and a task running a collective.
    let long = matches!(queued, Queued::Task);
    while !completion.is_done() {
        if long || completion.is_held() {
            if !job.sched.is_aborting() {
                job.sched.fail(unsettled(job, long, completion));
            }
            // Aborting now. A task's descriptors point into this rank's
            // buffers and only its own unwinding (in teardown, before the
            // rank's: `sched::worker`) withdraws them; claims are refused
            // from now on, and once the other workers stopped no claim made
            // before is still copying. A held message is given up only if
            // its holder has not started receiving it (else the holder
            // finishes its copy: keep waiting).
            if long {
                job.sched.wait_for_other_workers_to_stop();
                return;
            }
            if completion.is_held() && abandon_held(job, queued, completion) {
                return;
            }
        }
        std::thread::yield_now();
    }
}

/// Gives up a rendezvous message still held by a matched probe, once the
/// job aborts: `true` if it did (see [`claim::abandon_held`]).
#[cold]
fn abandon_held(job: &Job, queued: Queued, completion: &Completion) -> bool {
    match queued {
        Queued::Send(dest) => {
            let _queues = job.p2p.mailboxes[dest as usize].lock();
            claim::abandon_held(completion, job.sched.is_aborting())
        }
        Queued::Receive(_) | Queued::Task => false,
    }
}

/// The error of a pending operation given up where it could not be waited
/// for while a long claimer still holds it (see [`settle`]): the rank's own
/// panic when it is unwinding from one, else what happened.
#[cold]
fn unsettled(job: &Job, task: bool, completion: &Completion) -> Error {
    let rank = job.sched.slots.get(completion.waiter()).rank();
    if std::thread::panicking() {
        if let Some(message) = crate::sched::worker::recorded_panic() {
            return Error::Panic {
                rank: rank as Rank,
                message,
            };
        }
    }
    let what = if task {
        "an immediate collective whose task is still running"
    } else {
        "a send whose message a matched probe holds"
    };
    Error::Comm {
        message: format!(
            "rank {rank} gave up {what}: its request was dropped or waited for where it \
             cannot wait (while unwinding from a panic, or outside of rank {rank}), and \
             its buffer must not be freed while the other side may still use it, so \
             the job is aborted"
        ),
    }
}

/// Blocking send.
pub(crate) fn send(
    comm: &CommCore,
    dest: Rank,
    tag: Tag,
    src: &Layout,
    mode: SendMode,
    site: &'static Location<'static>,
) -> Result<(), Error> {
    let op = match mode {
        SendMode::Synchronous => "synchronous_send",
        SendMode::Buffered => "buffered_send",
        SendMode::Standard => "send",
    };
    let ctx = comm.caller()?;
    check_send(comm, op, dest, tag)?;
    let completion = Completion::new(ctx.slot);
    match start_send(comm, comm.p2p_context(), dest, tag, src, mode, &completion) {
        Started::Done(_) => Ok(()),
        Started::Pending => {
            let job = comm.job();
            let guard = PendingGuard::new(job, Queued::Send(comm.world_rank(dest)), &completion);
            let info = WaitInfo {
                op: if mode == SendMode::Synchronous {
                    WaitOp::SynchronousSend
                } else {
                    WaitOp::Send
                },
                label: None,
                peer: dest,
                tag,
                comm: comm.p2p_context(),
                site,
            };
            guard.wait(ctx, &info)?;
            Ok(())
        }
    }
}

/// Blocking receive.
pub(crate) fn receive(
    comm: &CommCore,
    source: Rank,
    tag: Tag,
    dst: &Layout,
    site: &'static Location<'static>,
) -> Result<Status, Error> {
    let ctx = comm.caller()?;
    check_receive(comm, "receive", source, tag)?;
    let completion = Completion::new(ctx.slot);
    let outcome = match start_receive(comm, comm.p2p_context(), source, tag, dst, &completion) {
        Started::Done(outcome) => outcome,
        Started::Pending => {
            let job = comm.job();
            let guard = PendingGuard::new(job, Queued::Receive(comm.world()), &completion);
            let info = WaitInfo {
                op: WaitOp::Receive,
                label: None,
                peer: source,
                tag,
                comm: comm.p2p_context(),
                site,
            };
            guard.wait(ctx, &info)?
        }
    };
    receive_result(comm, outcome)
}

fn probe_status(msg: &Unexpected) -> Status {
    Status::new(msg.env.source, msg.env.tag, msg.bytes())
}

/// Probe: the status of the first matching message, waiting for one if
/// `blocking`; `None` if not blocking and there is none (after yielding, so
/// that polling loops let other ranks run).
pub(crate) fn probe(
    comm: &CommCore,
    source: Rank,
    tag: Tag,
    blocking: bool,
    site: &'static Location<'static>,
) -> Result<Option<Status>, Error> {
    wait_for_message(
        comm,
        "probe",
        source,
        tag,
        blocking,
        site,
        |queues, spec| queues.peek_unexpected(spec).map(probe_status),
    )
}

/// A message removed from the queue by a matched probe.
#[derive(Debug)]
pub(crate) struct Matched {
    msg: Unexpected,
    /// The mailbox it was queued in (its holder's), whose lock guards the
    /// hold (see [`claim`]).
    mailbox: u32,
}

impl Matched {
    pub(crate) fn status(&self) -> Status {
        probe_status(&self.msg)
    }
}

/// Matched probe: removes the first matching message from the queue.
pub(crate) fn matched_probe(
    comm: &CommCore,
    source: Rank,
    tag: Tag,
    blocking: bool,
    site: &'static Location<'static>,
) -> Result<Option<Matched>, Error> {
    let job = comm.job();
    let taken = wait_for_message(
        comm,
        "matched_probe",
        source,
        tag,
        blocking,
        site,
        |queues, spec| {
            let msg = queues.take_unexpected(spec, || job.sched.is_aborting())?;
            if let Payload::Rendezvous { completion, .. } = &msg.payload {
                // SAFETY: we claimed the message (under the lock we still
                // hold), so its sender waits on its completion until done.
                claim::hold(unsafe { &**completion });
            }
            Some(msg)
        },
    )?;
    Ok(taken.map(|msg| Matched {
        msg,
        mailbox: comm.world(),
    }))
}

/// The loop of the probes: `look` at the calling rank's unexpected messages
/// under its mailbox lock; if it finds nothing, park until a message
/// arrives (`blocking`) or yield and answer `None`.
fn wait_for_message<T>(
    comm: &CommCore,
    op: &'static str,
    source: Rank,
    tag: Tag,
    blocking: bool,
    site: &'static Location<'static>,
    mut look: impl FnMut(&mut mailbox::Queues, &MatchSpec) -> Option<T>,
) -> Result<Option<T>, Error> {
    let ctx = comm.caller()?;
    check_receive(comm, op, source, tag)?;
    let spec = MatchSpec {
        context: comm.p2p_context(),
        source,
        tag,
    };
    let job = comm.job();
    let mailbox = &job.p2p.mailboxes[comm.world() as usize];
    let info = WaitInfo {
        op: WaitOp::Probe,
        label: None,
        peer: source,
        tag,
        comm: comm.p2p_context(),
        site,
    };
    loop {
        let mut queues = mailbox.lock();
        if let Some(found) = look(&mut queues, &spec) {
            return Ok(Some(found));
        }
        if !blocking {
            drop(queues);
            sched::yield_now();
            return Ok(None);
        }
        queues.add_prober(ctx.slot);
        drop(queues);
        sched::park_once(ctx, &info)?;
    }
}

/// Whether the holder of `matched` may still touch its sender's memory:
/// always for an eager message (its data is here), for a rendezvous one
/// only while the job is not aborting (see [`claim::take_held`]).
fn take_held(job: &Job, matched: &Matched) -> bool {
    let Payload::Rendezvous { completion, .. } = matched.msg.payload else {
        return true;
    };
    let _queues = job.p2p.mailboxes[matched.mailbox as usize].lock();
    // SAFETY: under the lock of the mailbox the message was queued in, with
    // the flag read under it; we hold the message (`matched_probe`).
    unsafe { claim::take_held(completion, job.sched.is_aborting()) }
}

/// Receives a matched message into `dst`; refused once the job aborts (its
/// sender may have given it up).
pub(crate) fn receive_matched(
    comm: &CommCore,
    matched: Matched,
    dst: &Layout,
) -> Result<Status, Error> {
    comm.caller()?;
    let job = comm.job();
    if !take_held(job, &matched) {
        return Err(Error::Aborted);
    }
    let outcome = consume(job, matched.msg, dst);
    receive_result(comm, outcome)
}

/// Gives up a matched message without receiving it (a dropped `Message`):
/// a rendezvous sender is released with a cancelled status so it does not
/// wait forever; during an abort nothing is touched.
pub(crate) fn drop_matched(job: &Job, matched: Matched) {
    if !take_held(job, &matched) {
        return;
    }
    match matched.msg.payload {
        Payload::Eager { buf, .. } => job.p2p.eager.give(buf),
        Payload::Rendezvous { completion, .. } => {
            // SAFETY: the sender waits on its completion (we took the held
            // message above); read the waiter before completing.
            let waiter = unsafe { (*completion).waiter() };
            // SAFETY: we are the message's only completer.
            unsafe {
                (*completion).complete(Outcome {
                    cancelled: true,
                    ..Outcome::default()
                })
            };
            sched::unpark(&job.sched, waiter);
        }
    }
}
