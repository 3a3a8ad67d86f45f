//! The blocking operations as a communicator handle runs them: it checks
//! the caller, then the ranks and tag (so errors name communicator ranks
//! and sizes), and hands `p2p` its endpoint and a route or a match
//! specification.

use super::*;

/// Blocking send to `dest` in the point-to-point context, out of line:
/// for the send modes other than the standard blocking send's, and
/// `send_receive` (see [`send_inline`]).
#[inline(never)]
pub(super) fn send(
    core: &CommCore,
    dest: Rank,
    tag: Tag,
    src: &Layout,
    mode: SendMode,
    site: &'static Location<'static>,
) -> Result<(), Error> {
    send_inline(core, dest, tag, src, mode, site)
}

/// [`send`] inlined into the caller's code: the standard blocking send
/// (`Destination::send`). As a call, it cost a prologue and an epilogue
/// of six saved registers, the spills of its arguments and their set-up
/// at the call site (1-worker ping-pong, 1 B: see `p2p::send`). A send
/// that must wait (rendezvous, synchronous) waits out of line.
#[inline(always)]
pub(super) fn send_inline(
    core: &CommCore,
    dest: Rank,
    tag: Tag,
    src: &Layout,
    mode: SendMode,
    site: &'static Location<'static>,
) -> Result<(), Error> {
    let ctx = core.caller()?;
    if !core.send_ok(dest, tag) {
        send_error(core, dest, tag, mode)?;
    }
    let route = core.route(core.p2p_context(), dest);
    p2p::send(core.endpoint(), ctx, route, tag, src, mode, site)
}

/// The error of a send to `dest` with `tag` that [`CommCore::send_ok`]
/// refused, naming the operation `mode` makes; out of line so that the
/// send path does not pick the name on every call.
#[cold]
#[inline(never)]
fn send_error(core: &CommCore, dest: Rank, tag: Tag, mode: SendMode) -> Result<(), Error> {
    let op = match mode {
        SendMode::Synchronous => "synchronous_send",
        SendMode::Buffered => "buffered_send",
        SendMode::Standard => "send",
    };
    core.check_send(op, dest, tag)
}

/// Blocking receive from `source` (or `ANY_SOURCE`) in the point-to-point
/// context. `#[inline(always)]`, into the caller's code: see
/// `p2p::receive`.
#[inline(always)]
pub(super) fn receive(
    core: &CommCore,
    source: Rank,
    tag: Tag,
    dst: &Layout,
    site: &'static Location<'static>,
) -> Result<Status, Error> {
    let ctx = core.caller()?;
    if !core.receive_ok(source, tag) {
        receive_error(core, source, tag)?;
    }
    let spec = core.accept(core.p2p_context(), source, tag);
    p2p::receive(core.endpoint(), ctx, core.rank(), spec, dst, site)
}

/// [`receive`] as a call: for layouts that own a reference count (user
/// datatypes), which the blocking receive does not inline.
#[inline(never)]
pub(super) fn receive_out_of_line(
    core: &CommCore,
    source: Rank,
    tag: Tag,
    dst: &Layout,
    site: &'static Location<'static>,
) -> Result<Status, Error> {
    receive(core, source, tag, dst, site)
}

/// The error of a receive that [`CommCore::receive_ok`] refused; out of
/// line, as [`send_error`].
#[cold]
#[inline(never)]
fn receive_error(core: &CommCore, source: Rank, tag: Tag) -> Result<(), Error> {
    core.check_receive("receive", source, tag)
}

/// Probe (`blocking`) or immediate probe.
pub(super) fn probe(
    core: &CommCore,
    source: Rank,
    tag: Tag,
    blocking: bool,
    site: &'static Location<'static>,
) -> Result<Option<Status>, Error> {
    let ctx = core.caller()?;
    core.check_receive("probe", source, tag)?;
    let spec = core.accept(core.p2p_context(), source, tag);
    p2p::probe(core.endpoint(), ctx, spec, blocking, site)
}

/// Matched probe (`blocking`) or immediate matched probe.
pub(super) fn matched_probe(
    core: &CommCore,
    source: Rank,
    tag: Tag,
    blocking: bool,
    site: &'static Location<'static>,
) -> Result<Option<Matched>, Error> {
    let ctx = core.caller()?;
    core.check_receive("matched_probe", source, tag)?;
    let spec = core.accept(core.p2p_context(), source, tag);
    p2p::matched_probe(core.endpoint(), ctx, spec, blocking, site)
}

/// Receives a matched message into `dst`.
#[track_caller]
pub(super) fn receive_matched(
    core: &CommCore,
    matched: Matched,
    dst: &Layout,
) -> Result<Status, Error> {
    let site = std::panic::Location::caller();
    let ctx = core.caller()?;
    p2p::receive_matched(core.endpoint(), ctx, core.rank(), matched, dst, site)
}
