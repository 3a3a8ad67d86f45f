//! Sends: [`Destination`] and its blocking and immediate forms.

use super::*;
use crate::communicator::AsCommunicator;

/// Where messages go: a [`Process`] (rsmpi's `Destination`).
pub trait Destination: AsCore + AsCommunicator {
    /// The destination's rank in its communicator.
    fn destination_rank(&self) -> Rank;

    /// Sends `buf` with tag 0 (`MPI_Send`). Returns once `buf` may be reused:
    /// at once for small messages (eager), when matched for large ones.
    #[inline(always)]
    #[track_caller]
    fn send<Buf: Buffer + ?Sized>(&self, buf: &Buf) {
        self.send_with_tag(buf, 0)
    }

    /// Sends `buf` with `tag`.
    #[inline(always)]
    #[track_caller]
    fn send_with_tag<Buf: Buffer + ?Sized>(&self, buf: &Buf, tag: Tag) {
        if let Err(err) = self.try_send_with_tag(buf, tag) {
            raise(err)
        }
    }

    /// Like [`send_with_tag`](Self::send_with_tag), returning errors (a
    /// myriad extension).
    #[inline(always)]
    #[track_caller]
    fn try_send_with_tag<Buf: Buffer + ?Sized>(&self, buf: &Buf, tag: Tag) -> Result<(), Error> {
        let (core, dest, site) = (self.core(), self.destination_rank(), Location::caller());
        match without_drop(send_layout(buf)) {
            Ok(layout) => blocking::send_inline(core, dest, tag, &layout, SendMode::Standard, site),
            // A user datatype's layout: out of line (`blocking::send`).
            Err(layout) => blocking::send(core, dest, tag, &layout, SendMode::Standard, site),
        }
    }

    /// Sends `buf` with tag 0, copying it so the call never waits
    /// (`MPI_Bsend`; no attached buffer is needed).
    #[track_caller]
    fn buffered_send<Buf: Buffer + ?Sized>(&self, buf: &Buf) {
        self.buffered_send_with_tag(buf, 0)
    }

    /// Buffered send with `tag`.
    #[track_caller]
    fn buffered_send_with_tag<Buf: Buffer + ?Sized>(&self, buf: &Buf, tag: Tag) {
        let site = Location::caller();
        let layout = send_layout(buf);
        let dest = self.destination_rank();
        if let Err(err) = blocking::send(self.core(), dest, tag, &layout, SendMode::Buffered, site)
        {
            raise(err)
        }
    }

    /// Sends `buf` with tag 0 and returns only once a receive matched it
    /// (`MPI_Ssend`).
    #[track_caller]
    fn synchronous_send<Buf: Buffer + ?Sized>(&self, buf: &Buf) {
        self.synchronous_send_with_tag(buf, 0)
    }

    /// Synchronous send with `tag`.
    #[track_caller]
    fn synchronous_send_with_tag<Buf: Buffer + ?Sized>(&self, buf: &Buf, tag: Tag) {
        let site = Location::caller();
        let layout = send_layout(buf);
        let dest = self.destination_rank();
        if let Err(err) =
            blocking::send(self.core(), dest, tag, &layout, SendMode::Synchronous, site)
        {
            raise(err)
        }
    }

    /// Ready send (`MPI_Rsend`) with tag 0: like a standard send.
    ///
    /// # Safety
    ///
    /// MPI requires the matching receive to be posted already; myriad does
    /// not rely on it, but keeps rsmpi's signature.
    #[track_caller]
    unsafe fn ready_send<Buf: Buffer + ?Sized>(&self, buf: &Buf) {
        self.send_with_tag(buf, 0)
    }

    /// Ready send with `tag`.
    ///
    /// # Safety
    ///
    /// As [`ready_send`](Self::ready_send).
    #[track_caller]
    unsafe fn ready_send_with_tag<Buf: Buffer + ?Sized>(&self, buf: &Buf, tag: Tag) {
        self.send_with_tag(buf, tag)
    }

    /// Starts a send of `buf` with tag 0 (`MPI_Isend`).
    #[track_caller]
    fn immediate_send<'a, Sc, Buf>(&self, scope: Sc, buf: &'a Buf) -> Request<'a, Buf, Sc>
    where
        Buf: 'a + Buffer + ?Sized,
        Sc: Scope<'a>,
    {
        self.immediate_send_with_tag(scope, buf, 0)
    }

    /// Starts a send of `buf` with `tag`.
    #[track_caller]
    fn immediate_send_with_tag<'a, Sc, Buf>(
        &self,
        scope: Sc,
        buf: &'a Buf,
        tag: Tag,
    ) -> Request<'a, Buf, Sc>
    where
        Buf: 'a + Buffer + ?Sized,
        Sc: Scope<'a>,
    {
        immediate_send(self, scope, buf, tag, SendMode::Standard)
    }

    /// Starts a buffered send of `buf` with tag 0 (`MPI_Ibsend`).
    #[track_caller]
    fn immediate_buffered_send<'a, Sc, Buf>(&self, scope: Sc, buf: &'a Buf) -> Request<'a, Buf, Sc>
    where
        Buf: 'a + Buffer + ?Sized,
        Sc: Scope<'a>,
    {
        self.immediate_buffered_send_with_tag(scope, buf, 0)
    }

    /// Starts a buffered send with `tag`.
    #[track_caller]
    fn immediate_buffered_send_with_tag<'a, Sc, Buf>(
        &self,
        scope: Sc,
        buf: &'a Buf,
        tag: Tag,
    ) -> Request<'a, Buf, Sc>
    where
        Buf: 'a + Buffer + ?Sized,
        Sc: Scope<'a>,
    {
        immediate_send(self, scope, buf, tag, SendMode::Buffered)
    }

    /// Starts a synchronous send of `buf` with tag 0 (`MPI_Issend`).
    #[track_caller]
    fn immediate_synchronous_send<'a, Sc, Buf>(
        &self,
        scope: Sc,
        buf: &'a Buf,
    ) -> Request<'a, Buf, Sc>
    where
        Buf: 'a + Buffer + ?Sized,
        Sc: Scope<'a>,
    {
        self.immediate_synchronous_send_with_tag(scope, buf, 0)
    }

    /// Starts a synchronous send with `tag`.
    #[track_caller]
    fn immediate_synchronous_send_with_tag<'a, Sc, Buf>(
        &self,
        scope: Sc,
        buf: &'a Buf,
        tag: Tag,
    ) -> Request<'a, Buf, Sc>
    where
        Buf: 'a + Buffer + ?Sized,
        Sc: Scope<'a>,
    {
        immediate_send(self, scope, buf, tag, SendMode::Synchronous)
    }

    /// Starts a ready send of `buf` with tag 0 (`MPI_Irsend`).
    ///
    /// # Safety
    ///
    /// As [`ready_send`](Self::ready_send).
    #[track_caller]
    unsafe fn immediate_ready_send<'a, Sc, Buf>(
        &self,
        scope: Sc,
        buf: &'a Buf,
    ) -> Request<'a, Buf, Sc>
    where
        Buf: 'a + Buffer + ?Sized,
        Sc: Scope<'a>,
    {
        immediate_send(self, scope, buf, 0, SendMode::Standard)
    }

    /// Starts a ready send with `tag`.
    ///
    /// # Safety
    ///
    /// As [`ready_send`](Self::ready_send).
    #[track_caller]
    unsafe fn immediate_ready_send_with_tag<'a, Sc, Buf>(
        &self,
        scope: Sc,
        buf: &'a Buf,
        tag: Tag,
    ) -> Request<'a, Buf, Sc>
    where
        Buf: 'a + Buffer + ?Sized,
        Sc: Scope<'a>,
    {
        immediate_send(self, scope, buf, tag, SendMode::Standard)
    }
}

#[track_caller]
fn immediate_send<'a, D, Sc, Buf>(
    dest: &D,
    scope: Sc,
    buf: &'a Buf,
    tag: Tag,
    mode: SendMode,
) -> Request<'a, Buf, Sc>
where
    D: Destination + ?Sized,
    Buf: 'a + Buffer + ?Sized,
    Sc: Scope<'a>,
{
    let core = dest.core();
    let rank = dest.destination_rank();
    let ctx = core
        .caller()
        .and_then(|ctx| core.check_send("immediate_send", rank, tag).map(|_| ctx))
        .or_raise();
    let layout = send_layout(buf);
    let route = core.route(core.p2p_context(), rank);
    let pending = PendingOp::new(
        core,
        ctx.slot,
        Queued::Send(route.dest_world),
        Kind::Send { dest: rank, tag },
    );
    let op = match p2p::start_send(
        core.endpoint(),
        route,
        tag,
        &layout,
        mode,
        &pending.completion,
    ) {
        Started::Done(outcome) => Op::Done(Ok(request::send_status(rank, tag, outcome))),
        Started::Pending => pending.into_op(),
    };
    Request::new(op, buf, scope)
}

impl Destination for Process<'_> {
    fn destination_rank(&self) -> Rank {
        self.rank
    }
}
