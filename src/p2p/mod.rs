//! Point-to-point messaging: protocols on top of the matching engine
//! ([`mailbox`]), inside one process and, through a transport, with the
//! ranks of other processes ([`remote`]).
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
//! (Messages to other processes take one copy more on each side: packed
//! into a frame, unpacked from it; see [`remote`].)
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
//! ## Endpoints and routes
//!
//! Nothing here knows communicators. An operation runs on an [`Endpoint`]
//! (the process's [`Node`]: the scheduler and the mailboxes, which the
//! job's communicator layer provides, `comm::JobCore`; and the calling
//! rank's world rank)
//! and names its peer by a [`Route`] (context, the sender's rank as
//! receivers see it, the destination's world rank) or, for a receive, by a
//! [`MatchSpec`]; the communicator layer builds both
//! (`CommCore::endpoint`, `CommCore::route`) and checks ranks and tags
//! before, so its errors name communicator ranks and sizes.
//!
//! ## Other processes
//!
//! A route's destination world rank resolves to a [`Destination`] through
//! the job's [`Processes`] (which process hosts which world ranks): a local
//! mailbox, at the rank's local index (a subtraction and a comparison; one
//! process numbers its ranks as the world does), or, out of line, another
//! process, which the job's transport reaches ([`remote`]: frames, an
//! announcement and a pull of the data for large and synchronous
//! messages). A message reaching a mailbox goes through [`arrive`] (or its
//! remote twin), which takes the first matching posted receive or queues
//! the message as unexpected, whatever its sender: a local sender's
//! buffer, or a frame ([`Payload::Remote`]). Completions may then come
//! later, from the transport's progress; those that wait for another
//! process are entries [`settle`] can forget (`remote::Remote::forget`).

pub(crate) mod claim;
pub(crate) mod completion;
pub(crate) mod eager;
pub(crate) mod mailbox;
pub(crate) mod pollers;
pub(crate) mod remote;
mod status;

use std::panic::Location;
use std::sync::Arc;

use completion::{Completion, Fault, Outcome, Waiting};
use eager::EagerPool;
pub use status::Status;

pub(crate) use mailbox::MatchSpec;
use mailbox::{Claim, Envelope, Mailbox, MailboxGuard, Payload, Posted, Unexpected};

use crate::datatype::bulk;
use crate::datatype::copy::{self, Layout};
use crate::datatype::signature_mismatch;
use crate::error::{CommError, Error, TypeError};
use crate::grow::GrowTable;
use crate::identity::{LocalIndex, ProcessId, Processes, WorldRank};
use crate::sched::{self, shared_copy, RankCtx, Scheduler, WaitInfo, WaitOp};
use crate::trace;
use crate::transport::Transport;
use crate::{Rank, Tag};
use remote::Remote;

/// Point-to-point state of a process.
#[derive(Debug)]
pub(crate) struct Shared {
    /// The mailboxes of this process's ranks, by local index (spawned
    /// ranks append theirs: [`Shared::grow`]).
    pub(crate) mailboxes: GrowTable<Mailbox>,
    pub(crate) eager: EagerPool,
    pub(crate) eager_limit: usize,
    /// Which process hosts which world ranks (routes resolve by it).
    processes: Processes,
    /// Frames to and from the other processes, in a job of several.
    remote: Option<Remote>,
}

impl Shared {
    /// The state of this process of `processes`: one mailbox per local
    /// rank; `transport` reaches the other processes (none in a job of one).
    pub(crate) fn new(
        processes: Processes,
        eager_limit: usize,
        transport: Option<Arc<dyn Transport>>,
    ) -> Shared {
        Shared {
            mailboxes: GrowTable::new(crate::grow::populated(
                (0..processes.local_count()).map(|_| Mailbox::default()),
            )),
            eager: EagerPool::new(),
            eager_limit: eager_limit.min(EagerPool::MAX_CLASS),
            processes,
            remote: transport.map(Remote::new),
        }
    }

    /// Appends the mailboxes of `n` ranks spawned into this process;
    /// returns their local indices.
    pub(crate) fn grow(&self, n: usize) -> std::ops::Range<usize> {
        self.mailboxes.append(n, |_| Mailbox::default())
    }

    /// The cross-process state, in a job with a transport.
    #[inline]
    pub(crate) fn remote(&self) -> Option<&Remote> {
        self.remote.as_ref()
    }

    /// Which process hosts which world ranks.
    pub(crate) fn processes(&self) -> &Processes {
        &self.processes
    }

    /// Where messages to world rank `world` go: a subtraction and a
    /// comparison for a rank of this process; the process hosting it
    /// otherwise (out of line).
    ///
    /// # Panics
    ///
    /// If another process hosts `world` and the job has no transport (no
    /// [`Route`] names such a rank: the communicators of a job of one
    /// process hold its own world ranks only).
    #[inline]
    fn destination(&self, world: WorldRank) -> Destination {
        match self.processes.local(world) {
            Some(index) => Destination::Local(index),
            None => self.elsewhere(world),
        }
    }

    #[cold]
    #[inline(never)]
    fn elsewhere(&self, world: WorldRank) -> Destination {
        if self.remote.is_none() {
            no_transport(&self.processes, world)
        }
        Destination::Remote(self.processes.process_of(world))
    }
}

/// A route to a world rank of another process, which nothing can reach
/// before a transport exists (see [`Shared::destination`]).
#[cold]
#[inline(never)]
fn no_transport(processes: &Processes, world: WorldRank) -> ! {
    let (process, _) = processes.locate(world);
    panic!(
        "world rank {world} lives in process {process} of {}, and this build has no \
         transport to reach another process (process {} sends only to its own ranks)",
        processes.count(),
        processes.this()
    )
}

/// What the ranks of a process share for point-to-point: the scheduler (to
/// wake and park) and the mailboxes. The job's `comm::JobCore` implements
/// it; `p2p` never names it, and an endpoint reaches both through one
/// pointer, as that struct's fields.
pub(crate) trait Node {
    fn sched(&self) -> &Scheduler;
    fn p2p(&self) -> &Shared;
}

/// What one rank's point-to-point operations run on: the process's
/// [`Node`] and the rank's world rank (whose mailbox, at its local index,
/// its receives use).
/// Two words, passed in registers, built per call from the communicator
/// handle (`CommCore::endpoint`).
pub(crate) struct Endpoint<'a, N: ?Sized> {
    pub(crate) node: &'a N,
    /// The calling rank's world rank.
    pub(crate) world: WorldRank,
}

impl<N: ?Sized> Clone for Endpoint<'_, N> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<N: ?Sized> Copy for Endpoint<'_, N> {}

impl<'a, N: Node> Endpoint<'a, N> {
    #[inline]
    fn sched(self) -> &'a Scheduler {
        self.node.sched()
    }

    #[inline]
    fn p2p(self) -> &'a Shared {
        self.node.p2p()
    }

    /// Where messages to world rank `world` go. The transport issue
    /// resolves world ranks of other processes to `Remote` here.
    #[inline]
    fn destination(self, world: WorldRank) -> Destination {
        self.p2p().destination(world)
    }

    /// The mailbox of local destination `index`.
    #[inline]
    fn mailbox(self, index: LocalIndex) -> &'a Mailbox {
        &self.p2p().mailboxes[index.get() as usize]
    }

    /// The mailbox of world rank `world`, a rank of this process (one a
    /// queued descriptor of this process sits in).
    #[inline]
    fn mailbox_of(self, world: WorldRank) -> &'a Mailbox {
        match self.destination(world) {
            Destination::Local(index) => self.mailbox(index),
            Destination::Remote(process) => not_here(world, process),
        }
    }

    /// The calling rank's own mailbox, where its receives match.
    #[inline]
    fn own_mailbox(self) -> &'a Mailbox {
        self.mailbox_of(self.world)
    }

    #[inline]
    fn is_aborting(self) -> bool {
        self.sched().is_aborting()
    }

    /// Locks `mailbox` for the calling rank: without a read-modify-write
    /// while the job is in solo mode (`Scheduler::is_solo`).
    #[inline(always)]
    fn lock(self, mailbox: &'a Mailbox) -> MailboxGuard<'a> {
        if self.sched().is_solo() {
            // SAFETY: solo mode holds, so this thread is the job's one
            // worker (endpoints are used by the ranks it runs) and no other
            // thread touches mailboxes until a rank of it ends the mode.
            unsafe { mailbox.lock_alone() }
        } else {
            mailbox.lock()
        }
    }
}

/// Where a send goes, without a communicator: the context, the sender as
/// its receivers see it (its rank in the communicator), and the
/// destination (its rank in the communicator, named by deadlock reports,
/// and its world rank, which routes the message). Built by
/// `CommCore::route` after the communicator checked the rank.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Route {
    pub(crate) context: u64,
    pub(crate) source: Rank,
    pub(crate) dest: Rank,
    pub(crate) dest_world: WorldRank,
}

/// Where a destination world rank lives ([`Shared::destination`]).
#[derive(Debug, Clone, Copy)]
enum Destination {
    /// The mailbox of this local index in this process.
    Local(LocalIndex),
    /// A rank of this other process: a send there becomes a frame
    /// ([`remote`]).
    Remote(ProcessId),
}

/// A queued descriptor's mailbox is always in this process.
#[cold]
#[inline(never)]
fn not_here(world: WorldRank, process: ProcessId) -> ! {
    panic!("world rank {world} has no mailbox in this process: it lives in process {process}")
}

/// A message of this process as it reaches a mailbox ([`arrive`]); frames
/// from other processes arrive through `remote`'s twin of it.
#[derive(Debug)]
pub(crate) enum Arrival<'s, C> {
    /// In the sender's buffer, in this process: copied straight into a
    /// posted receive, else packed into an eager buffer or queued as a
    /// rendezvous descriptor (the sender then waits on the completion
    /// `completion` gives, called only then).
    Local {
        src: &'s Layout,
        mode: SendMode,
        completion: C,
    },
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

/// Starts a send of `src` along `route` (in the communicator's
/// point-to-point context, or its collective one). If it returns
/// `Pending`, `completion` (owned by the caller, waking the caller's slot)
/// is referenced by a queued descriptor and must stay alive, with `src`,
/// until it is done or withdrawn.
///
/// `#[inline(always)]`, as [`start_receive`]: what is left of it once a
/// posted receive is matched is a few dozen instructions, and as a call it
/// cost a prologue, an epilogue and the move of its result (callgrind).
#[inline(always)]
pub(crate) fn start_send(
    ep: Endpoint<'_, impl Node>,
    route: Route,
    tag: Tag,
    src: &Layout,
    mode: SendMode,
    completion: &Completion,
) -> Started {
    let flow = match ep.sched().tracer() {
        None => 0,
        Some(_) => sched::trace_flow_out(),
    };
    if send_to(ep, route, tag, src, mode, || completion, flow) {
        Started::Done(Outcome {
            bytes: src.bytes(),
            ..Outcome::default()
        })
    } else {
        Started::Pending
    }
}

/// [`start_send`] answering only whether the send is done (`false`:
/// pending). The blocking send uses it: it has no use for the `Outcome`,
/// which, returned through `Started`, was built and stored on every
/// message (callgrind).
///
/// `completion` gives the completion a pending send waits on: called only
/// when the send is not done at once (a rendezvous queued, a message to
/// another process), so that the blocking send, which makes its completion
/// there, makes none for a message delivered or packed at once (6
/// instructions a message, callgrind).
#[inline(always)]
fn send_to<'c>(
    ep: Endpoint<'_, impl Node>,
    route: Route,
    tag: Tag,
    src: &Layout,
    mode: SendMode,
    completion: impl FnOnce() -> &'c Completion,
    flow: u64,
) -> bool {
    let env = Envelope {
        context: route.context,
        source: route.source,
        tag,
        flow,
    };
    match ep.destination(route.dest_world) {
        Destination::Local(index) => {
            let arrival = Arrival::Local {
                src,
                mode,
                completion,
            };
            arrive(ep, ep.mailbox(index), env, arrival)
        }
        Destination::Remote(process) => matches!(
            remote::send(
                ep.node,
                process,
                env,
                route.dest_world,
                src,
                mode,
                completion()
            ),
            Started::Done(_)
        ),
    }
}

/// A message `env` reaches `mailbox`: it takes the first matching posted
/// receive (and is delivered into it), or is queued as unexpected (and the
/// mailbox's probers are woken). `true` if the send is done (`false`: it
/// waits for its rendezvous). The one way into a mailbox, for local
/// senders now and for a transport's arrivals later, so matching order,
/// wildcards and probes do not depend on where the sender runs.
///
/// `#[inline]`, with [`deliver`] and [`transfer`]: on the path of every
/// send, where each call boundary costs a prologue and an epilogue of
/// spilled registers (~17 instructions each, callgrind). Its only
/// caller is [`start_send`].
#[inline(always)]
pub(crate) fn arrive<'c>(
    ep: Endpoint<'_, impl Node>,
    mailbox: &Mailbox,
    env: Envelope,
    msg: Arrival<'_, impl FnOnce() -> &'c Completion>,
) -> bool {
    let Arrival::Local {
        src,
        mode,
        completion,
    } = msg;
    let mut queues = ep.lock(mailbox);
    // Matched in place (`&`): bound by value, the claimed descriptor was
    // copied once more on the stack (callgrind).
    match &queues.claim(&env, Some(src), || ep.is_aborting()) {
        Claim::Delivered => true,
        Claim::Posted(posted) => {
            drop(queues);
            deliver(ep, &env, src, &posted.dst, posted.completion);
            true
        }
        Claim::None => queue_unexpected(ep, queues, env, src, mode, completion),
    }
}

/// The second half of [`arrive`]: no posted receive matched, so the
/// message is queued as unexpected (packed into an eager buffer, or as a
/// rendezvous descriptor of `src`) and the mailbox's probers are woken;
/// `true` if the send is done (eager).
/// Out of line: it keeps `arrive` (and the sends it is inlined into)
/// small on the path of a receive already posted.
#[inline(never)]
fn queue_unexpected<'c>(
    ep: Endpoint<'_, impl Node>,
    mut queues: MailboxGuard<'_>,
    env: Envelope,
    src: &Layout,
    mode: SendMode,
    completion: impl FnOnce() -> &'c Completion,
) -> bool {
    let bytes = src.bytes();
    let eager = match mode {
        SendMode::Buffered => true,
        SendMode::Standard => bytes <= ep.p2p().eager_limit,
        SendMode::Synchronous => false,
    };
    let payload = if eager {
        let buf = ep.p2p().eager.take(bytes, |out| {
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
            completion: completion(),
        }
    };
    queues.unexpected.push_back(Unexpected { env, payload });
    let probers = queues.take_probers();
    drop(queues);
    for slot in probers {
        sched::unpark(ep.sched(), slot);
    }
    eager
}

/// Copies a message into the buffer `dst` of a claimed posted receive and
/// completes the receive's `completion`. (`#[inline(always)]`: its one
/// caller is [`arrive`].)
#[inline(always)]
fn deliver(
    ep: Endpoint<'_, impl Node>,
    env: &Envelope,
    src: &Layout,
    dst: &Layout,
    completion: *const Completion,
) {
    let outcome = transfer(ep, env, src, dst);
    // SAFETY: the receiver keeps its completion alive until it is done; we
    // claimed the descriptor, so we are its only completer. A receiver
    // spinning on its completion needs no wake-up (`completion`'s docs).
    if let Some(waiter) = unsafe { (*completion).finish(outcome) } {
        sched::unpark(ep.sched(), waiter);
    }
}

/// Checks signatures and sizes and copies `src` into `dst`.
/// `#[inline(always)]`: with the small copy inlined, LLVM moved it out of
/// line from [`deliver`] (+16 instructions a message, callgrind).
/// Two layouts of one type map (the common case: one type on both sides)
/// need no signature check, and copy with one test of contiguity
/// ([`copy::copy_one_type`]); two maps are compared out of line
/// ([`transfer_mixed`]).
#[inline(always)]
fn transfer(ep: Endpoint<'_, impl Node>, env: &Envelope, src: &Layout, dst: &Layout) -> Outcome {
    if std::ptr::eq(src.ty.map(), dst.ty.map()) {
        transfer_body(ep, env, src, dst, true)
    } else {
        transfer_mixed(ep, env, src, dst)
    }
}

/// [`transfer`] between layouts of two type maps.
#[inline(never)]
fn transfer_mixed(
    ep: Endpoint<'_, impl Node>,
    env: &Envelope,
    src: &Layout,
    dst: &Layout,
) -> Outcome {
    transfer_body(ep, env, src, dst, false)
}

/// The body of [`transfer`]; `same_map`: `src` and `dst` have one type map.
#[inline(always)]
fn transfer_body(
    ep: Endpoint<'_, impl Node>,
    env: &Envelope,
    src: &Layout,
    dst: &Layout,
    same_map: bool,
) -> Outcome {
    let bytes = src.bytes();
    let mut outcome = Outcome {
        source: env.source,
        tag: env.tag,
        bytes,
        flow: env.flow,
        ..Outcome::default()
    };
    if !same_map {
        if let Some(fault) = type_fault(src, dst) {
            outcome.fault = Some(fault);
            return outcome;
        }
    }
    let capacity = dst.bytes();
    // Both at least `SHARED_COPY.from`: one test of what the copy takes.
    let copied = bytes.min(capacity);
    if copied >= SHARED_COPY.from {
        transfer_large(ep, src, dst);
    } else if same_map {
        // SAFETY: both buffers are kept alive by their (waiting) owners, see
        // the module docs; they belong to different operations so do not
        // overlap; one type map on both sides, and at most the bytes of
        // each.
        unsafe { copy::copy_one_type(src, dst, copied) };
    } else {
        // SAFETY: as above (the signatures match, `type_fault`).
        unsafe { copy::copy(src, dst) };
    }
    if bytes > capacity {
        return truncated(outcome, capacity);
    }
    outcome
}

/// `outcome` of a message truncated to `buffer` bytes. Out of line: set
/// in place, the fault's variant made every delivery copy its undefined
/// bytes into the completion (4 instructions a message, callgrind).
#[cold]
#[inline(never)]
fn truncated(outcome: Outcome, buffer: usize) -> Outcome {
    Outcome {
        fault: Some(Fault::Truncated { buffer }),
        ..outcome
    }
}

/// How a large message's copy is shared with idle workers
/// (`sched::shared_copy`): from 1 MiB (~34 µs of copy here; a helper starts
/// in a few), in 256 KiB pieces. On 2 workers: 1 MiB one-way 34 -> 27 µs,
/// 16 MiB 2.1 -> 1.3 ms.
const SHARED_COPY: shared_copy::Cut = shared_copy::Cut {
    from: 1 << 20,
    piece: 256 << 10,
};

/// `memcpy` for `sched::shared_copy`'s pieces.
///
/// # Safety
///
/// As `ptr::copy_nonoverlapping(src, dst, len)`.
unsafe fn memcpy(dst: *mut u8, src: *const u8, len: usize) {
    // SAFETY: the caller's contract.
    unsafe { std::ptr::copy_nonoverlapping(src, dst, len) }
}

/// The copy of [`transfer`] for large messages: shared with idle workers
/// where both buffers are contiguous (`sched::shared_copy`). Out of line:
/// it keeps the path of small messages short.
#[inline(never)]
fn transfer_large(ep: Endpoint<'_, impl Node>, src: &Layout, dst: &Layout) {
    match (src.as_bytes(), dst.as_bytes()) {
        (Some(from), Some(to)) => {
            let len = from.count.min(to.count);
            // A copy larger than half the last-level cache stores around
            // it, in every piece (`datatype::bulk`).
            let piece_copy = if len >= bulk::streaming_from() {
                bulk::copy_streaming
            } else {
                memcpy
            };
            // SAFETY: as in `transfer`: both buffers live, `len` bytes in
            // each, not overlapping, and no one else writes them meanwhile.
            unsafe {
                shared_copy::copy(
                    ep.sched(),
                    ep.world,
                    SHARED_COPY,
                    to.base as *mut u8,
                    from.base,
                    len,
                    piece_copy,
                )
            };
        }
        // SAFETY: as in `transfer`.
        _ => unsafe {
            copy::copy(src, dst);
        },
    }
}

/// Whether `src`'s signature does not match `dst`'s. `#[inline(always)]`
/// for the common case, one type on both sides: left to LLVM, the whole
/// check became a call on every message (+15 instructions a one-way
/// message, callgrind); the comparison of two types is out of line.
#[inline(always)]
fn type_fault(src: &Layout, dst: &Layout) -> Option<Fault> {
    if src.count == 0 || std::ptr::eq(src.ty.map(), dst.ty.map()) {
        return None;
    }
    signature_fault(src, dst)
}

/// [`type_fault`] of two different types.
#[cold]
#[inline(never)]
fn signature_fault(src: &Layout, dst: &Layout) -> Option<Fault> {
    signature_mismatch(src.ty.map(), src.count, dst.ty.map()).map(|(index, sent, expected)| {
        Fault::Type {
            index,
            sent,
            expected,
        }
    })
}

/// Receives a claimed unexpected message into `dst`.
#[inline(never)]
fn consume(ep: Endpoint<'_, impl Node>, msg: Unexpected, dst: &Layout) -> Outcome {
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
                flow: msg.env.flow,
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
            ep.p2p().eager.give(buf);
            outcome
        }
        Payload::Remote(remote) => remote::receive(ep.node, &msg.env, *remote, dst),
        Payload::Rendezvous { src, completion } => {
            let outcome = transfer(ep, &msg.env, &src, dst);
            let sent = Outcome {
                bytes: src.bytes(),
                ..Outcome::default()
            };
            // SAFETY: the sender waits on its completion until done; we
            // claimed its descriptor.
            if let Some(waiter) = unsafe { (*completion).finish(sent) } {
                sched::unpark(ep.sched(), waiter);
            }
            outcome
        }
    }
}

/// Starts a receive into `dst` of a message matching `spec`, in the
/// calling rank's mailbox. If it returns `Pending`, `completion` and `dst`
/// must stay alive until the completion is done or withdrawn.
/// `#[inline(always)]` as [`start_send`]; a message already there is
/// received out of line ([`consume`]).
#[inline(always)]
pub(crate) fn start_receive(
    ep: Endpoint<'_, impl Node>,
    spec: MatchSpec,
    dst: &Layout,
    completion: &Completion,
) -> Started {
    start_receive_as(ep, spec, dst, completion, false)
}

/// [`start_receive`]; `resident`: the receive is its owner's blocking
/// receive, which takes a message delivered into its mailbox's line while
/// it waits ([`wait_resident`]).
#[inline(always)]
fn start_receive_as(
    ep: Endpoint<'_, impl Node>,
    spec: MatchSpec,
    dst: &Layout,
    completion: &Completion,
    resident: bool,
) -> Started {
    let mut queues = ep.lock(ep.own_mailbox());
    if let Some(msg) = queues.take_unexpected(&spec, || ep.is_aborting()) {
        drop(queues);
        if let Payload::Remote(remote) = &msg.payload {
            if remote.is_announced() {
                return pull(ep, msg, dst, completion);
            }
        }
        return Started::Done(consume(ep, msg, dst));
    }
    queues.post(
        Posted {
            spec,
            dst: dst.clone(),
            completion,
        },
        resident,
    );
    Started::Pending
}

/// A receive took a message another process announced: its data is
/// asked for, and completes `completion` when it arrives.
#[cold]
#[inline(never)]
fn pull(
    ep: Endpoint<'_, impl Node>,
    msg: Unexpected,
    dst: &Layout,
    completion: &Completion,
) -> Started {
    let Payload::Remote(remote) = msg.payload else {
        unreachable!("only messages of other processes are announced")
    };
    remote::pull(ep.node, msg.env, *remote, dst, completion);
    Started::Pending
}

/// Turns the outcome of a receive by `rank` (the receiver's rank in the
/// communicator, named by the errors) into a status or the error it
/// carries.
pub(crate) fn receive_result(rank: Rank, outcome: Outcome) -> Result<Status, Error> {
    status_of(rank, &outcome)
}

/// [`receive_result`] of an outcome left where it is: the blocking
/// receive reads a parked receive's outcome in its completion.
#[inline(always)]
fn status_of(rank: Rank, outcome: &Outcome) -> Result<Status, Error> {
    status_traced(rank, outcome, true)
}

/// [`status_of`] by a receiver traced (`traced`: its flow recorded) or
/// not (`false`, known to the blocking receive: the flow's test, 3
/// instructions a message, folds away; an untraced receiver records
/// nothing of a traced sender's flow anyway: `sched::trace_flow_in`).
#[inline(always)]
fn status_traced(rank: Rank, outcome: &Outcome, traced: bool) -> Result<Status, Error> {
    if traced && outcome.flow != 0 {
        sched::trace_flow_in(outcome.flow);
    }
    if outcome.cancelled {
        return Ok(Status::cancelled());
    }
    match outcome.fault {
        None => Ok(Status::new(outcome.source, outcome.tag, outcome.bytes)),
        Some(fault) => Err(fault_error(rank, outcome, fault)),
    }
}

/// The error of a receive whose outcome carries a fault; out of line:
/// [`status_of`] is inlined into every blocking receive.
#[cold]
#[inline(never)]
fn fault_error(rank: Rank, outcome: &Outcome, fault: Fault) -> Error {
    match fault {
        Fault::Truncated { buffer } => Error::Truncate {
            rank,
            source: outcome.source,
            tag: outcome.tag,
            message_bytes: outcome.bytes,
            buffer_bytes: buffer,
        },
        Fault::Type {
            index,
            sent,
            expected,
        } => Error::Type(TypeError::MessageSignature {
            rank,
            source: outcome.source,
            tag: outcome.tag,
            index,
            sent: sent.name(),
            expected: expected.name(),
        }),
    }
}

/// Which queue a pending descriptor sits in. A send to another process
/// that waits (`Send` of a world rank there) or a receive that matched an
/// announced message waits in `remote`'s tables instead: not withdrawable,
/// forgotten by [`settle`].
#[derive(Debug, Clone, Copy)]
pub(crate) enum Queued {
    /// A posted receive in the mailbox of this world rank (of this
    /// process).
    Receive(WorldRank),
    /// A rendezvous send in the mailbox of this world rank (of this
    /// process).
    Send(WorldRank),
    /// Not in a queue: a task (an immediate collective) completes it.
    Task,
}

/// Withdraws a pending descriptor; `true` if it was still queued (then
/// nobody will complete it).
pub(crate) fn withdraw(
    ep: Endpoint<'_, impl Node>,
    queued: Queued,
    completion: &Completion,
) -> bool {
    match queued {
        Queued::Receive(owner) => ep.mailbox_of(owner).lock().withdraw_posted(completion),
        Queued::Send(dest) => match ep.destination(dest) {
            Destination::Local(index) => ep.mailbox(index).lock().withdraw_rendezvous(completion),
            // Its data has left: only the acknowledgement is awaited.
            Destination::Remote(_) => false,
        },
        Queued::Task => false,
    }
}

/// Keeps a blocking operation's descriptor from outliving the operation:
/// if the rank unwinds while waiting (job abort), the guard withdraws it, or
/// waits for the claimer that is copying right now.
pub(crate) struct PendingGuard<'a, N: Node> {
    ep: Endpoint<'a, N>,
    queued: Queued,
    completion: &'a Completion,
}

impl<'a, N: Node> PendingGuard<'a, N> {
    pub(crate) fn new(ep: Endpoint<'a, N>, queued: Queued, completion: &'a Completion) -> Self {
        PendingGuard {
            ep,
            queued,
            completion,
        }
    }

    /// Waits for completion (parking the rank) and returns the outcome.
    /// `#[inline]`: it is the wait of every blocking call, and LLVM moved
    /// it out of line (+30 instructions a message) when `outcome` grew a
    /// check.
    #[inline]
    pub(crate) fn wait(self, ctx: &RankCtx, info: &WaitInfo) -> Result<Outcome, Error> {
        wait_for(ctx, info, self.completion)?;
        let outcome = self.completion.outcome();
        std::mem::forget(self);
        Ok(outcome)
    }
}

/// The [`PendingGuard`] of the blocking receive, whose descriptor is a
/// posted receive in the caller's own mailbox (`ep.world`): it keeps no
/// [`Queued`], two stores fewer a receive (callgrind).
struct ReceiveGuard<'a, N: Node> {
    ep: Endpoint<'a, N>,
    completion: &'a Completion,
}

impl<N: Node> ReceiveGuard<'_, N> {
    /// Waits for completion (parking the rank), for a caller that then
    /// reads the outcome in place ([`Completion::outcome_ref_done`]).
    /// `#[inline(always)]`: see [`receive`].
    #[inline(always)]
    fn wait_done(self, ctx: &RankCtx, info: &WaitInfo) -> Result<(), Error> {
        wait_for(ctx, info, self.completion)?;
        std::mem::forget(self);
        Ok(())
    }
}

impl<N: Node> Drop for ReceiveGuard<'_, N> {
    fn drop(&mut self) {
        settle(self.ep, Queued::Receive(self.ep.world), self.completion);
    }
}

/// The completion of a blocking call by the party of `ctx`: one its
/// completer need not wake while the party spins on it
/// ([`Completion::spinning`]), when the party spins before it parks.
#[inline]
fn blocking_completion(ctx: &RankCtx) -> Completion {
    Completion::spinning(ctx.slot, ctx.spins)
}

/// Waits (the party of `ctx`) until `completion` is done: as any wait when
/// its completer always wakes it; else spinning on it first, then
/// announcing the park (`completion`'s docs). `Ok` only once it saw
/// `DONE` with `Acquire` ordering or stronger ([`receive`] relies on it).
///
/// `#[inline(always)]`, with the park of the woken wait inlined into it
/// (`sched::park_once_inline`): the blocking receive then switches to its
/// worker from its own frame. Per one-way message of a 1-worker ping-pong
/// (callgrind): 20 instructions fewer. The park inlined alone did not pay:
/// LLVM then moved this function out of line (+24).
#[inline(always)]
fn wait_for(ctx: &RankCtx, info: &WaitInfo, completion: &Completion) -> Result<(), Error> {
    match completion.waiting() {
        Waiting::Done => Ok(()),
        Waiting::Woken => {
            while {
                sched::park_once_inline(ctx, info)?;
                !completion.is_done()
            } {}
            Ok(())
        }
        // A copy on its path (see `sched::park_once_inline`'s body).
        Waiting::Spinning => wait_spinning(ctx, &{ *info }, completion),
    }
}

/// [`wait_for`] of a spinning completion not done at the first look.
/// Out of line: it spins for microseconds anyway.
#[inline(never)]
fn wait_spinning(ctx: &RankCtx, info: &WaitInfo, completion: &Completion) -> Result<(), Error> {
    sched::spin(ctx, || completion.is_done());
    while completion.announce_park() {
        sched::park_after_spin(ctx, info)?;
    }
    Ok(())
}

/// The wait of a resident blocking receive ([`start_receive_as`]): spins
/// until a sender delivered its message into the mailbox's line or
/// completed its completion; then takes the delivery (copied into `dst`:
/// its status), or, if none came, withdraws the receive from resident
/// delivery and waits on its completion as [`wait_spinning`] (`None`: the
/// completion is done). Out of line: it spins anyway.
#[inline(never)]
fn wait_resident(
    ep: Endpoint<'_, impl Node>,
    ctx: &RankCtx,
    info: &WaitInfo,
    dst: &Layout,
    completion: &Completion,
) -> Result<Option<Status>, Error> {
    let mailbox = ep.own_mailbox();
    // Polls spaced: this line is the one the sender locks and writes.
    sched::spin_spaced(ctx, || mailbox.has_delivery() || completion.is_done());
    if !completion.is_done() {
        let mut queues = ep.lock(mailbox);
        if let Some(delivery) = queues.take_delivery(completion) {
            drop(queues);
            let bytes = delivery.bytes as usize;
            // SAFETY: `dst` is this rank's buffer, writable and contiguous
            // for at least `bytes` (the sender checked: one contiguous type
            // map on both sides, `bytes <= dst.bytes()`).
            unsafe { copy::copy_bytes(delivery.data.as_ptr(), dst.base as *mut u8, bytes) };
            return Ok(Some(Status::new(delivery.source, delivery.tag, bytes)));
        }
    }
    while completion.announce_park() {
        sched::park_after_spin(ctx, info)?;
    }
    Ok(None)
}

impl<N: Node> Drop for PendingGuard<'_, N> {
    fn drop(&mut self) {
        settle(self.ep, self.queued, self.completion);
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
/// An operation waiting for another process is forgotten instead
/// (nobody completes it then).
pub(crate) fn settle(ep: Endpoint<'_, impl Node>, queued: Queued, completion: &Completion) {
    if completion.is_done() || withdraw(ep, queued, completion) {
        return;
    } // An operation waiting for another process (an acknowledgement, a
      // clear-to-send, an announced message's data) may wait for ever:
      // forget it (nobody completes it then), unless its answer is being
      // handled right now (which completes it without parking).
    if let Some(remote) = ep.p2p().remote() {
        if remote.forget(completion) {
            return;
        }
    }
    // Claimed: the claimer copies and completes without parking, except for
    // a matched probe holding the message, and a task running a collective.
    let long = matches!(queued, Queued::Task);
    while !completion.is_done() {
        if long || completion.is_held() {
            if !ep.is_aborting() {
                ep.sched().fail(unsettled(ep, long, completion));
            }
            // Aborting now. A task's descriptors point into this rank's
            // buffers and only its own unwinding (in teardown, before the
            // rank's: `sched::worker`) withdraws them; claims are refused
            // from now on, and once the other workers stopped no claim made
            // before is still copying. A held message is given up only if
            // its holder has not started receiving it (else the holder
            // finishes its copy: keep waiting).
            if long {
                ep.sched().wait_for_other_workers_to_stop();
                return;
            }
            if completion.is_held() && abandon_held(ep, queued, completion) {
                return;
            }
        }
        std::thread::yield_now();
    }
}

/// Gives up a rendezvous message still held by a matched probe, once the
/// job aborts: `true` if it did (see [`claim::abandon_held`]).
#[cold]
fn abandon_held(ep: Endpoint<'_, impl Node>, queued: Queued, completion: &Completion) -> bool {
    match queued {
        Queued::Send(dest) => {
            let _queues = ep.mailbox_of(dest).lock();
            claim::abandon_held(completion, ep.is_aborting())
        }
        Queued::Receive(_) | Queued::Task => false,
    }
}

/// The error of a pending operation given up where it could not be waited
/// for while a long claimer still holds it (see [`settle`]): the rank's own
/// panic when it is unwinding from one, else what happened.
#[cold]
fn unsettled(ep: Endpoint<'_, impl Node>, task: bool, completion: &Completion) -> Error {
    let rank = ep.sched().rank_of_slot(completion.waiter());
    if std::thread::panicking() {
        if let Some(message) = crate::sched::worker::recorded_panic() {
            return Error::Panic {
                rank: rank.as_rank(),
                message,
            };
        }
    }
    let rank = rank.as_rank();
    Error::Comm(if task {
        CommError::TaskAbandoned { rank }
    } else {
        CommError::SendAbandoned { rank }
    })
}

/// Blocking send along `route` by the rank of `ctx` (the communicator layer
/// checked that it is the caller, and the destination and tag).
///
/// `#[inline(always)]`: this is the body of every blocking send; whether
/// LLVM inlines it into its caller otherwise depends on how unrelated code
/// splits into codegen units (a change in `coll` once moved it out of line
/// and cost the 1-worker ping-pong 10 %). With the standard blocking send
/// inlined down to the user's call (`point_to_point::blocking::send_inline`)
/// and the wait of a rendezvous out of line ([`send_wait`]), 1-worker
/// ping-pong, 1 B: 570.3 -> 537.8 instructions a one-way message
/// (callgrind).
#[inline(always)]
pub(crate) fn send(
    ep: Endpoint<'_, impl Node>,
    ctx: &RankCtx,
    route: Route,
    tag: Tag,
    src: &Layout,
    mode: SendMode,
    site: &'static Location<'static>,
) -> Result<(), Error> {
    // One test of the recorder: the untraced send then has no span to
    // store and drop, nor a second test for the flow (callgrind).
    match ctx.recorder() {
        None => send_body(ep, ctx, route, tag, src, mode, site, 0),
        Some(_) => send_traced(ep, ctx, route, tag, src, mode, site),
    }
}

/// [`send`] by a traced rank: its span, and the flow its message carries.
#[cold]
#[inline(never)]
fn send_traced(
    ep: Endpoint<'_, impl Node>,
    ctx: &RankCtx,
    route: Route,
    tag: Tag,
    src: &Layout,
    mode: SendMode,
    site: &'static Location<'static>,
) -> Result<(), Error> {
    let _span = trace::span(
        ctx.recorder(),
        trace::Op::Send,
        route.dest,
        tag,
        src.bytes(),
    );
    let flow = sched::trace_flow_out();
    send_body(ep, ctx, route, tag, src, mode, site, flow)
}

/// The body of [`send`], the message carrying `flow` (0: untraced).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn send_body(
    ep: Endpoint<'_, impl Node>,
    ctx: &RankCtx,
    route: Route,
    tag: Tag,
    src: &Layout,
    mode: SendMode,
    site: &'static Location<'static>,
    flow: u64,
) -> Result<(), Error> {
    // Made only if the send waits (`send_to`).
    let mut completion = None;
    let slot = &mut completion;
    let make = move || {
        let slot = slot; // Moved: `FnOnce`, lending `completion` for good.
        &*slot.insert(blocking_completion(ctx))
    };
    match send_to(ep, route, tag, src, mode, make, flow) {
        true => Ok(()),
        false => send_wait(ep, ctx, &{ route }, tag, mode, site, &completion),
    }
}

/// The wait of a blocking [`send`] whose message was queued as a
/// rendezvous (`completion` is in the destination's mailbox). Out of
/// line: `send` is inlined into the standard blocking send's callers,
/// and a 1 B send never waits.
#[inline(never)]
fn send_wait(
    ep: Endpoint<'_, impl Node>,
    ctx: &RankCtx,
    route: &Route,
    tag: Tag,
    mode: SendMode,
    site: &'static Location<'static>,
    completion: &Option<Completion>,
) -> Result<(), Error> {
    let completion = completion
        .as_ref()
        .expect("a pending send made its completion");
    let guard = PendingGuard::new(ep, Queued::Send(route.dest_world), completion);
    let info = WaitInfo {
        op: if mode == SendMode::Synchronous {
            WaitOp::SynchronousSend
        } else {
            WaitOp::Send
        },
        label: None,
        peer: route.dest,
        tag,
        comm: route.context,
        site,
    };
    guard.wait(ctx, &info)?;
    Ok(())
}

/// Blocking receive of a message matching `spec` by the rank of `ctx`,
/// whose rank in the communicator is `rank` (checked by the caller, as
/// `spec`).
///
/// `#[inline(always)]`, with its wait ([`ReceiveGuard::wait_done`],
/// `wait_for`, `sched::park_once_inline`) and the public blocking
/// receives above it (`point_to_point::blocking::receive`,
/// `Source::receive_into*`), down to the caller's code: a rank that parks
/// here switches to its worker from its caller's frame. Resumed, it then
/// returns through no frame of ours: each such return came right after a
/// switch, when the CPU's return predictor holds the other context's
/// calls (the worker's), and likely mispredicted, as did the rank's next
/// switch out. 1-worker ping-pong, 1 B: 611.8 -> 570.3 instructions a
/// one-way message (callgrind); 0.0541 -> 0.0390 µs (medians of 15
/// alternating runs). The price: ~2.7 KB of code per call site of a
/// blocking receive (`pingpong`: 6 KB for its two).
#[inline(always)]
pub(crate) fn receive(
    ep: Endpoint<'_, impl Node>,
    ctx: &RankCtx,
    rank: Rank,
    spec: MatchSpec,
    dst: &Layout,
    site: &'static Location<'static>,
) -> Result<Status, Error> {
    // One test of the recorder: the untraced receive then has no span to
    // store, update and drop (callgrind).
    match ctx.recorder() {
        None if !ctx.spins => receive_body(ep, ctx, rank, spec, dst, site, None, false),
        None => receive_resident(ep, ctx, rank, spec, dst, site),
        Some(_) => receive_traced(ep, ctx, rank, spec, dst, site),
    }
}

/// [`receive`] by a rank that spins before it parks (its workers have a
/// CPU each): its receive, posted first, takes a small message in its
/// mailbox's line ([`wait_resident`]). Out of line: the one-worker path
/// then tests nothing of it (5 instructions a message, callgrind), and
/// here a call is a few nanoseconds of a message's ~0.2 µs.
#[inline(never)]
fn receive_resident(
    ep: Endpoint<'_, impl Node>,
    ctx: &RankCtx,
    rank: Rank,
    spec: MatchSpec,
    dst: &Layout,
    site: &'static Location<'static>,
) -> Result<Status, Error> {
    receive_body(ep, ctx, rank, spec, dst, site, None, true)
}

/// [`receive`] by a traced rank, in its span.
#[cold]
#[inline(never)]
fn receive_traced(
    ep: Endpoint<'_, impl Node>,
    ctx: &RankCtx,
    rank: Rank,
    spec: MatchSpec,
    dst: &Layout,
    site: &'static Location<'static>,
) -> Result<Status, Error> {
    let span = trace::span(ctx.recorder(), trace::Op::Receive, spec.source, spec.tag, 0);
    receive_body(ep, ctx, rank, spec, dst, site, span, false)
}

/// The body of [`receive`], in `span` (`None`: untraced); `resident`:
/// the receive takes a small message in its mailbox's line (an untraced
/// rank that spins, [`receive_resident`]; a traced one always through its
/// completion, which carries the message's flow).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn receive_body<'a>(
    ep: Endpoint<'_, impl Node>,
    ctx: &'a RankCtx,
    rank: Rank,
    spec: MatchSpec,
    dst: &Layout,
    site: &'static Location<'static>,
    mut span: Option<trace::Span<'a>>,
    resident: bool,
) -> Result<Status, Error> {
    let completion = blocking_completion(ctx);
    match start_receive_as(ep, spec, dst, &completion, resident) {
        Started::Done(outcome) => {
            if let Some(span) = &mut span {
                span.set_bytes(outcome.bytes);
            }
            status_traced(rank, &outcome, span.is_some())
        }
        Started::Pending => {
            let guard = ReceiveGuard {
                ep,
                completion: &completion,
            };
            let info = WaitInfo {
                op: WaitOp::Receive,
                label: None,
                peer: spec.source,
                tag: spec.tag,
                comm: spec.context,
                site,
            };
            if resident {
                let delivered = wait_resident(ep, ctx, &info, dst, &completion)?;
                std::mem::forget(guard);
                if let Some(status) = delivered {
                    return Ok(status);
                }
            } else {
                guard.wait_done(ctx, &info)?;
            }
            // Read in place: a copy of the whole `Outcome` out of the
            // completion cost ~15 instructions a message (callgrind).
            // SAFETY: `wait_done` (or `wait_resident`, with no delivery)
            // returned `Ok`, so it saw the completion done with `Acquire`
            // (or `AcqRel`) ordering (`is_done`, `announce_park`).
            let outcome = unsafe { completion.outcome_ref_done() };
            if let Some(span) = &mut span {
                span.set_bytes(outcome.bytes);
            }
            status_traced(rank, outcome, span.is_some())
        }
    }
}

fn probe_status(msg: &Unexpected) -> Status {
    Status::new(msg.env.source, msg.env.tag, msg.bytes())
}

/// Probe: the status of the first matching message, waiting for one if
/// `blocking`; `None` if not blocking and there is none (after yielding, so
/// that polling loops let other ranks run).
pub(crate) fn probe(
    ep: Endpoint<'_, impl Node>,
    ctx: &RankCtx,
    spec: MatchSpec,
    blocking: bool,
    site: &'static Location<'static>,
) -> Result<Option<Status>, Error> {
    wait_for_message(ep, ctx, spec, blocking, site, |queues, spec| {
        queues.peek_unexpected(spec).map(probe_status)
    })
}

/// A message removed from the queue by a matched probe.
#[derive(Debug)]
pub(crate) struct Matched {
    msg: Unexpected,
    /// The mailbox it was queued in (its holder's), whose lock guards the
    /// hold (see [`claim`]).
    mailbox: WorldRank,
}

impl Matched {
    pub(crate) fn status(&self) -> Status {
        probe_status(&self.msg)
    }
}

/// Matched probe: removes the first matching message from the queue.
pub(crate) fn matched_probe(
    ep: Endpoint<'_, impl Node>,
    ctx: &RankCtx,
    spec: MatchSpec,
    blocking: bool,
    site: &'static Location<'static>,
) -> Result<Option<Matched>, Error> {
    let taken = wait_for_message(ep, ctx, spec, blocking, site, |queues, spec| {
        let msg = queues.take_unexpected(spec, || ep.is_aborting())?;
        if let Payload::Rendezvous { completion, .. } = &msg.payload {
            // SAFETY: we claimed the message (under the lock we still
            // hold), so its sender waits on its completion until done.
            claim::hold(unsafe { &**completion });
        }
        Some(msg)
    })?;
    Ok(taken.map(|msg| Matched {
        msg,
        mailbox: ep.world,
    }))
}

/// The loop of the probes: `look` at the calling rank's unexpected messages
/// under its mailbox lock; if it finds nothing, park until a message
/// arrives (`blocking`) or yield and answer `None`.
fn wait_for_message<T>(
    ep: Endpoint<'_, impl Node>,
    ctx: &RankCtx,
    spec: MatchSpec,
    blocking: bool,
    site: &'static Location<'static>,
    mut look: impl FnMut(&mut mailbox::Queues, &MatchSpec) -> Option<T>,
) -> Result<Option<T>, Error> {
    let _span = trace::span(ctx.recorder(), trace::Op::Probe, spec.source, spec.tag, 0);
    let mailbox = ep.own_mailbox();
    let info = WaitInfo {
        op: WaitOp::Probe,
        label: None,
        peer: spec.source,
        tag: spec.tag,
        comm: spec.context,
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
fn take_held(ep: Endpoint<'_, impl Node>, matched: &Matched) -> bool {
    let Payload::Rendezvous { completion, .. } = matched.msg.payload else {
        return true;
    };
    let _queues = ep.mailbox_of(matched.mailbox).lock();
    // SAFETY: under the lock of the mailbox the message was queued in, with
    // the flag read under it; we hold the message (`matched_probe`).
    unsafe { claim::take_held(completion, ep.is_aborting()) }
}

/// Receives a matched message into `dst` (for the rank whose rank in the
/// communicator is `rank`; the caller checked it is the calling rank);
/// refused once the job aborts (its sender may have given it up).
///
/// A message another process announced is asked for here, and the call
/// waits for its data (parking the rank of `ctx`).
pub(crate) fn receive_matched(
    ep: Endpoint<'_, impl Node>,
    ctx: &RankCtx,
    rank: Rank,
    matched: Matched,
    dst: &Layout,
    site: &'static Location<'static>,
) -> Result<Status, Error> {
    if !take_held(ep, &matched) {
        return Err(Error::Aborted);
    }
    if let Payload::Remote(remote) = &matched.msg.payload {
        if remote.is_announced() {
            let completion = Completion::new(ctx.slot);
            let info = WaitInfo {
                op: WaitOp::Receive,
                label: None,
                peer: matched.msg.env.source,
                tag: matched.msg.env.tag,
                comm: matched.msg.env.context,
                site,
            };
            let _ = pull(ep, matched.msg, dst, &completion);
            let guard = PendingGuard::new(ep, Queued::Receive(ep.world), &completion);
            return receive_result(rank, guard.wait(ctx, &info)?);
        }
    }
    let outcome = consume(ep, matched.msg, dst);
    receive_result(rank, outcome)
}

/// Gives up a matched message without receiving it (a dropped `Message`):
/// a rendezvous sender is released with a cancelled status so it does not
/// wait forever; during an abort nothing is touched.
pub(crate) fn drop_matched(ep: Endpoint<'_, impl Node>, matched: Matched) {
    if !take_held(ep, &matched) {
        return;
    }
    match matched.msg.payload {
        Payload::Eager { buf, .. } => ep.p2p().eager.give(buf),
        Payload::Remote(remote) => remote::release(ep.node, *remote),
        Payload::Rendezvous { completion, .. } => {
            // SAFETY: the sender waits on its completion (we took the held
            // message above); we are the message's only completer.
            let wake = unsafe {
                (*completion).finish(Outcome {
                    cancelled: true,
                    ..Outcome::default()
                })
            };
            if let Some(waiter) = wake {
                sched::unpark(ep.sched(), waiter);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::ProcessId;

    fn index(d: Destination) -> u32 {
        match d {
            Destination::Local(index) => index.get(),
            Destination::Remote(p) => panic!("process {p}"),
        }
    }

    #[test]
    fn one_process_routes_a_world_rank_to_its_own_mailbox() {
        let shared = Shared::new(Processes::single(4), 1024, None);
        assert_eq!(shared.mailboxes.len(), 4);
        for w in 0..4 {
            assert_eq!(index(shared.destination(WorldRank::new(w))), w);
        }
    }

    #[test]
    fn a_process_routes_its_block_to_local_mailboxes() {
        // World ranks 0..3 in process 0, 3..5 in process 1; seen from 1.
        let shared = Shared::new(
            Processes::from_blocks(&[3, 2], ProcessId::new(1)),
            1024,
            None,
        );
        assert_eq!(shared.mailboxes.len(), 2, "one mailbox per local rank");
        assert_eq!(index(shared.destination(WorldRank::new(3))), 0);
        assert_eq!(index(shared.destination(WorldRank::new(4))), 1);
    }

    #[test]
    #[should_panic(
        expected = "world rank 1 lives in process 0 of 2, and this build has no \
                               transport to reach another process"
    )]
    fn a_world_rank_of_another_process_has_no_route_without_a_transport() {
        let shared = Shared::new(
            Processes::from_blocks(&[3, 2], ProcessId::new(1)),
            1024,
            None,
        );
        shared.destination(WorldRank::new(1));
    }

    #[test]
    fn with_a_transport_other_processes_ranks_route_to_their_process() {
        let transport = crate::transport::loopback::Loopback::join(3).swap_remove(1);
        let shared = Shared::new(
            Processes::from_blocks(&[3, 2, 4], ProcessId::new(1)),
            1024,
            Some(transport),
        );
        let route = |w| match shared.destination(WorldRank::new(w)) {
            Destination::Local(index) => format!("local {index}"),
            Destination::Remote(p) => format!("process {p}"),
        };
        let routes: Vec<String> = [0, 2, 3, 4, 5, 8].into_iter().map(route).collect();
        assert_eq!(
            routes,
            [
                "process 0",
                "process 0",
                "local 0",
                "local 1",
                "process 2",
                "process 2"
            ]
        );
    }
}
