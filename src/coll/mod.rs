//! Collective operations: the machinery every collective shares.
//!
//! A collective call ([`begin`]) takes the communicator's next collective
//! sequence number for the calling rank, checks its [`check::Signature`]
//! against the other ranks' (the mismatch checker), and resolves the
//! algorithm (explicit choice, then `MYRIAD_COLL_<COLLECTIVE>`, then the
//! selector). Then one of two kinds of algorithm runs:
//!
//! * **message-based** ones (linear, binomial tree, symmetric broadcast,
//!   binomial Gatherv with message chains, ring, recursive doubling,
//!   pairwise exchange, ...) exchange point-to-point messages in the
//!   communicator's collective context, tagged with the sequence number, so
//!   they work on any communicator, also across processes ([`exchange`]);
//! * the **shared-memory** path, for ranks that share the process: ranks meet
//!   in a [`round::Round`], publish their buffers' addresses, copy or reduce
//!   straight between buffers, and park until the round is where they need
//!   it;
//! * the **hierarchical** ones (`hier`), for communicators spanning
//!   processes: a shared-memory step among each process's members, a
//!   message-based step among one leader per process, a shared-memory
//!   step back (`hier.rs`).
//!
//! Immediate collectives run the same algorithms on a task
//! (`sched::task`) with the sequence number taken at the call, so several
//! may be outstanding on one communicator.
//!
//! ## Buffers
//!
//! Algorithms see memory as [`Layout`]s (address, count, type) and copy,
//! pack and reduce through safe functions ([`copy_checked`],
//! [`pack_to`], [`unpack_from`], `operand::copy_same`, `operand::combine`,
//! `exchange::Exchange`) on this invariant: *a layout an algorithm uses is
//! valid for what it does with it while it does it*. The call's own buffers
//! are, for the whole call (the API builds their layouts from the caller's
//! borrows, receive buffers from exclusive ones); scratch is while the
//! algorithm holds it; another rank's buffers are only reached through a
//! deposit of a shared-memory round, which hands them out for the lifetime
//! of a turn ([`round::Access`]) whose end the owner waits for, whatever
//! happens (`round.rs`, `published.rs`). The unsafe code that relies on the
//! invariant sits in those few functions.

use crate::datatype::copy::Layout;

pub(crate) mod allgather;
pub(crate) mod alltoall;
pub(crate) mod barrier;
pub(crate) mod bcast;
mod census;
pub(crate) mod check;
pub(crate) mod create;
mod doubling;
pub(crate) mod exchange;
pub(crate) mod gather;
mod hier;
pub(crate) mod op;
mod operand;
pub(crate) mod parts;
pub(crate) mod published;
pub(crate) mod reduce;
pub(crate) mod ring;
pub(crate) mod round;
pub(crate) mod scan;
pub(crate) mod scatter;
mod select;

use std::panic::Location;
use std::sync::atomic::{AtomicU32, Ordering};

pub(crate) use select::{env_defaults, Selection};
pub use select::{Algorithm, Collective};

use crate::comm::Core;
use crate::error::{Error, TypeError};
use crate::sched::{RankCtx, WaitInfo, WaitOp};
use check::{Checker, Signature};

/// The collective kinds, for signatures and algorithm selection.
pub(crate) type Kind = Collective;

/// One rank's handle to a communicator, as the layers above see it: the
/// communicator core (layer L3) with this layer's state of the communicator
/// in the same allocation as the core's shared state (`CommShared::ext`),
/// so reaching it costs what reaching the group does.
pub type CommCore = Core<State>;

/// Collective state of one communicator (internal; public only because
/// [`CommCore`] names it).
#[doc(hidden)]
#[derive(Debug)]
pub struct State {
    /// Next sequence number of each rank (only that rank touches its entry).
    seq: Box<[AtomicU32]>,
    pub(crate) checker: Checker,
    pub(crate) rounds: round::Rounds,
    pub(crate) selection: Selection,
    /// `split_by_subgroup(_with_tag)` calls in progress, and how many of
    /// each key completed (`create.rs`).
    pub(crate) group_meetings: create::GroupMeetings,
    /// The local part and the leaders that hierarchical collectives run
    /// on, made on the first such call (`hier.rs`).
    pub(crate) tiers: std::sync::OnceLock<Result<hier::Tiers, Error>>,
    /// On the leaders of a communicator: the parent's rank of each rank
    /// (what errors and checked signatures name).
    pub(crate) parent_ranks: Option<Box<[crate::Rank]>>,
    /// The processes each rank of this process exchanged collective
    /// messages with (`exchange.rs`), shared with the tiers.
    pub(crate) traffic: std::sync::Arc<exchange::Traffic>,
}

impl State {
    /// The sequence number the next collective of communicator rank `rank`
    /// gets (what a creation derives context pairs from before it starts).
    pub(crate) fn next_seq(&self, rank: crate::Rank) -> u32 {
        self.seq[rank as usize].load(Ordering::Relaxed)
    }

    pub(crate) fn new(size: usize, check: bool, selection: Selection) -> State {
        State {
            seq: (0..size).map(|_| AtomicU32::new(0)).collect(),
            checker: Checker::new(check),
            rounds: round::Rounds::default(),
            selection,
            group_meetings: create::GroupMeetings::default(),
            tiers: std::sync::OnceLock::new(),
            parent_ranks: None,
            traffic: std::sync::Arc::default(),
        }
    }

    /// The number of the parent's call that call `seq` of this
    /// communicator is a step of (its own number if it is no tier).
    pub(crate) fn reported_seq(&self, seq: u32) -> u32 {
        match &self.parent_ranks {
            Some(_) => seq / hier::STEPS,
            None => seq,
        }
    }

    /// The rank of the communicator this one is a tier of (or its own)
    /// that communicator rank `rank` stands for.
    pub(crate) fn reported_rank(&self, rank: crate::Rank) -> crate::Rank {
        match &self.parent_ranks {
            Some(ranks) => ranks[rank as usize],
            None => rank,
        }
    }
}

impl CommCore {
    /// The communicator's collective state.
    #[inline]
    pub(crate) fn coll(&self) -> &State {
        &self.shared().ext
    }
}

/// One rank's collective call in progress.
#[derive(Debug)]
pub(crate) struct Call<'a> {
    pub(crate) comm: &'a CommCore,
    pub(crate) ctx: &'a RankCtx,
    pub(crate) seq: u32,
    pub(crate) kind: Kind,
    pub(crate) algorithm: Algorithm,
    pub(crate) site: &'static Location<'static>,
    /// This rank's signature of the call.
    pub(crate) signature: Signature,
}

impl<'a> Call<'a> {
    /// The call `signature` describes, once [`begin_settle`] gave it its
    /// sequence number and algorithm (its kind is the signature's).
    #[inline(always)]
    pub(crate) fn settled(
        comm: &'a CommCore,
        ctx: &'a RankCtx,
        seq: u32,
        algorithm: Algorithm,
        site: &'static Location<'static>,
        signature: Signature,
    ) -> Call<'a> {
        Call {
            comm,
            ctx,
            seq,
            kind: signature.kind,
            algorithm,
            site,
            signature,
        }
    }

    /// The tag of this call's messages in the collective context.
    pub(crate) fn tag(&self) -> i32 {
        (self.seq & 0x7fff_ffff) as i32
    }

    /// The collective context of the communicator.
    pub(crate) fn context(&self) -> u64 {
        self.comm.p2p_context() + 1
    }

    pub(crate) fn rank(&self) -> i32 {
        self.comm.rank()
    }

    pub(crate) fn size(&self) -> i32 {
        self.comm.size()
    }

    /// The call's slice in a trace and entry in the profile (`None` when
    /// the job records neither): kind, algorithm and bytes, recorded when
    /// the returned span drops.
    #[inline]
    pub(crate) fn trace(&self) -> Option<crate::trace::Span<'a>> {
        let rec = self.ctx.recorder()?;
        let op = crate::trace::Op::Collective {
            kind: self.kind.label(),
            algorithm: self.algorithm.label(),
        };
        let bytes = self.signature.bytes.unwrap_or(0);
        Some(rec.span(op, crate::trace::NO_PEER, crate::trace::NO_TAG, bytes))
    }

    #[inline]
    pub(crate) fn wait_info(&self) -> WaitInfo {
        WaitInfo {
            op: WaitOp::Collective,
            label: Some(self.kind.label()),
            peer: WaitInfo::NO_PEER,
            tag: WaitInfo::NO_TAG,
            comm: self.context(),
            site: self.site,
        }
    }
}

/// Starts collective call of kind `signature.kind` by the calling rank:
/// sequence number, signature check, algorithm.
#[inline]
pub(crate) fn begin<'a>(
    comm: &'a CommCore,
    mut signature: Signature,
    requested: Algorithm,
    site: &'static Location<'static>,
) -> Result<Call<'a>, Error> {
    let ctx = comm.caller()?;
    begin_as(comm, ctx, &mut signature, requested, site)
}

/// The error of a collective called on an inter-communicator.
#[cold]
fn inter_collective(comm: &CommCore, kind: Collective) -> Error {
    Error::unsupported(format!(
        "{} on an inter-communicator ({}): inter-communicator collectives are not \
         implemented; merge it (InterCommunicator::merge) and call it there",
        kind.name(),
        comm.name()
    ))
}

/// [`begin`] for a known caller context. (The blocking entry,
/// `collective::begin_boxed`, calls [`begin_settle`] and builds the call in
/// its caller's frame itself.)
#[inline(always)]
pub(crate) fn begin_as<'a>(
    comm: &'a CommCore,
    ctx: &'a RankCtx,
    signature: &mut Signature,
    requested: Algorithm,
    site: &'static Location<'static>,
) -> Result<Call<'a>, Error> {
    let (seq, algorithm) = begin_settle(comm, signature, requested, site)?;
    Ok(Call::settled(comm, ctx, seq, algorithm, site, *signature))
}

/// What [`begin_as`] settles for a call: its sequence number and
/// algorithm (written into `signature` too), after the checks. The caller
/// builds the [`Call`] itself, in place (`collective::blocking`: a `Call`
/// returned in a `Result` was built in the callee's frame and copied, field
/// by field, twice).
#[inline(always)]
pub(crate) fn begin_settle(
    comm: &CommCore,
    signature: &mut Signature,
    requested: Algorithm,
    site: &'static Location<'static>,
) -> Result<(u32, Algorithm), Error> {
    if comm.shared().is_inter() && signature.kind != Collective::CommCreate {
        return Err(inter_collective(comm, signature.kind));
    }
    let state = comm.coll();
    let seq = state.seq[comm.rank() as usize].fetch_add(1, Ordering::Relaxed);
    let algorithm = state.selection.resolve(
        signature.kind,
        requested,
        comm.size() as usize,
        signature.bytes,
        &comm.shared().locality,
        || comm.name(),
    )?;
    signature.algorithm = Some(algorithm);
    // Shared-memory calls meet in a round keyed by the sequence number and
    // are checked there (`Rounds::join_checked`), without the
    // communicator-wide lock; every shared-memory algorithm joins with a
    // check, so two different collectives at one sequence number always
    // meet in the same round and are caught.
    if algorithm != Algorithm::SharedMemory {
        check_in(comm, seq, signature, site)?;
    }
    Ok((seq, algorithm))
}

/// The communicator-wide check of a call of a message-based algorithm
/// (out of line: shared-memory calls, checked in their round, keep its
/// locals out of their frames).
#[inline(never)]
fn check_in(
    comm: &CommCore,
    seq: u32,
    signature: &Signature,
    site: &'static Location<'static>,
) -> Result<(), Error> {
    let state = comm.coll();
    // Only this process's members check in here: across processes a
    // call's entry is done when they have (counting every member would
    // leave it in the map for good).
    state.checker.check(
        seq,
        comm.shared().locality.local_count() as u32,
        comm.rank(),
        *signature,
        site,
        &state.rounds,
    )
}

/// Checks a root.
pub(crate) fn check_root(comm: &CommCore, op: &'static str, root: i32) -> Result<(), Error> {
    if root < 0 || root >= comm.size() {
        return Err(Error::Root {
            op,
            root,
            size: comm.size(),
        });
    }
    Ok(())
}

/// Copies `src` (the data of rank `from`) into `dst`, checking type
/// signatures and sizes like a receive does. The layouts must not overlap:
/// they are different ranks' buffers (a receive buffer is borrowed
/// exclusively), or distinct buffers of one rank.
pub(crate) fn copy_checked(
    call: &Call<'_>,
    from: i32,
    src: &Layout,
    dst: &Layout,
) -> Result<(), Error> {
    check_transfer(call, from, src, dst)?;
    // SAFETY: both layouts are valid (the module's buffer invariant) and do
    // not overlap (the caller's word, above).
    unsafe { crate::datatype::copy::copy(src, dst) };
    Ok(())
}

/// Packs the data of `src` into the start of `out`.
///
/// # Panics
///
/// If `out` is shorter than `src`'s data.
pub(crate) fn pack_to(src: &Layout, out: &mut [u8]) {
    assert!(out.len() >= src.bytes(), "packing into too small a buffer");
    // SAFETY: `src` is valid (the module's buffer invariant) and `out`
    // holds its data bytes (checked); a `&mut` slice overlaps nothing.
    unsafe { crate::datatype::copy::pack(src, out.as_mut_ptr()) };
}

/// Unpacks packed data into `dst`, as much as fits.
pub(crate) fn unpack_from(bytes: &[u8], dst: &Layout) {
    // SAFETY: `dst` is valid for writes (the module's buffer invariant) and
    // `bytes` for reads of its length; a shared slice is not `dst`, which
    // is exclusively ours to write.
    unsafe { crate::datatype::copy::unpack(bytes.as_ptr(), bytes.len(), dst) };
}

/// The checks of [`copy_checked`] (type signatures, size), without the
/// copy: `src` is only read for its type and count.
pub(crate) fn check_transfer(
    call: &Call<'_>,
    from: i32,
    src: &Layout,
    dst: &Layout,
) -> Result<(), Error> {
    if src.count > 0 {
        if let Some((index, sent, expected)) =
            crate::datatype::signature_mismatch(src.ty.map(), src.count, dst.ty.map())
        {
            return Err(Error::Type(TypeError::ReceivedSignature {
                op: call.kind.name(),
                rank: call.rank(),
                source: from,
                index,
                sent: sent.name(),
                expected: expected.name(),
            }));
        }
    }
    if src.bytes() > dst.bytes() {
        return Err(Error::Truncate {
            rank: call.rank(),
            source: from,
            tag: call.tag(),
            message_bytes: src.bytes(),
            buffer_bytes: dst.bytes(),
        });
    }
    Ok(())
}
