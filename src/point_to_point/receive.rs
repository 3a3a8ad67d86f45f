//! Receives and probes: [`Source`] and its blocking, immediate and matched forms.

use super::*;
use crate::communicator::AsCommunicator;

/// Where messages come from: a [`Process`] or [`AnyProcess`] (rsmpi's
/// `Source`).
pub trait Source: AsCore + AsCommunicator {
    /// The source's rank, or `ANY_SOURCE`.
    fn source_rank(&self) -> Rank;

    /// Receives one value with any tag (`MPI_Recv`).
    ///
    /// # Panics
    ///
    /// If the message is not exactly one `Msg` (count or type mismatch).
    #[track_caller]
    fn receive<Msg: Equivalence>(&self) -> (Msg, Status) {
        self.receive_with_tag(ANY_TAG)
    }

    /// Receives one value with `tag`.
    #[track_caller]
    fn receive_with_tag<Msg: Equivalence>(&self, tag: Tag) -> (Msg, Status) {
        self.try_receive_with_tag(tag).or_raise()
    }

    /// Like [`receive_with_tag`](Self::receive_with_tag), returning errors.
    #[track_caller]
    fn try_receive_with_tag<Msg: Equivalence>(&self, tag: Tag) -> Result<(Msg, Status), Error> {
        let site = Location::caller();
        let mut value = MaybeUninit::<Msg>::uninit();
        let layout = Layout {
            base: value.as_mut_ptr() as *const u8,
            count: 1,
            ty: Msg::equivalent_datatype().handle(),
        };
        let core = self.core();
        let status = blocking::receive(core, self.source_rank(), tag, &layout, site)?;
        check_one::<Msg>(core, &status, layout.bytes())?;
        // SAFETY: the message matched `Msg`'s type signature and filled all
        // of its data bytes (checked above); padding may stay uninitialised.
        Ok((unsafe { value.assume_init() }, status))
    }

    /// Receives into `buf` with any tag (`MPI_Recv`).
    ///
    /// # Panics
    ///
    /// If the message is longer than `buf` (truncation) or of another type.
    // `#[inline(always)]`, as the two below: a rank that waits here
    // switches away from its caller's frame (`p2p::receive`).
    #[inline(always)]
    #[track_caller]
    fn receive_into<Buf: BufferMut + ?Sized>(&self, buf: &mut Buf) -> Status {
        self.receive_into_with_tag(buf, ANY_TAG)
    }

    /// Receives into `buf` with `tag`.
    #[inline(always)]
    #[track_caller]
    fn receive_into_with_tag<Buf: BufferMut + ?Sized>(&self, buf: &mut Buf, tag: Tag) -> Status {
        self.try_receive_into_with_tag(buf, tag).or_raise()
    }

    /// Like [`receive_into_with_tag`](Self::receive_into_with_tag),
    /// returning errors (truncation: the part that fits was copied).
    #[inline(always)]
    #[track_caller]
    fn try_receive_into_with_tag<Buf: BufferMut + ?Sized>(
        &self,
        buf: &mut Buf,
        tag: Tag,
    ) -> Result<Status, Error> {
        let (core, source, site) = (self.core(), self.source_rank(), Location::caller());
        match without_drop(recv_layout(buf)) {
            Ok(layout) => blocking::receive(core, source, tag, &layout, site),
            // A user datatype's layout: out of line.
            Err(layout) => blocking::receive_out_of_line(core, source, tag, &layout, site),
        }
    }

    /// Receives a message of any length into a new `Vec`, with any tag.
    #[track_caller]
    fn receive_vec<Msg: Equivalence>(&self) -> (Vec<Msg>, Status) {
        self.receive_vec_with_tag(ANY_TAG)
    }

    /// Receives a message of any length into a new `Vec`, with `tag`.
    #[track_caller]
    fn receive_vec_with_tag<Msg: Equivalence>(&self, tag: Tag) -> (Vec<Msg>, Status) {
        self.matched_probe_with_tag(tag).matched_receive_vec()
    }

    /// Waits for a message with any tag and returns its status without
    /// receiving it (`MPI_Probe`).
    #[track_caller]
    fn probe(&self) -> Status {
        self.probe_with_tag(ANY_TAG)
    }

    /// Probe for a message with `tag`.
    #[track_caller]
    fn probe_with_tag(&self, tag: Tag) -> Status {
        blocking::probe(
            self.core(),
            self.source_rank(),
            tag,
            true,
            Location::caller(),
        )
        .or_raise()
        .expect("a blocking probe returns a status")
    }

    /// The status of a waiting message with any tag, if there is one
    /// (`MPI_Iprobe`; yields to other ranks when there is none).
    #[track_caller]
    fn immediate_probe(&self) -> Option<Status> {
        self.immediate_probe_with_tag(ANY_TAG)
    }

    /// Immediate probe with `tag`.
    #[track_caller]
    fn immediate_probe_with_tag(&self, tag: Tag) -> Option<Status> {
        blocking::probe(
            self.core(),
            self.source_rank(),
            tag,
            false,
            Location::caller(),
        )
        .or_raise()
    }

    /// Waits for a message with any tag and takes it off the queue: only the
    /// returned [`Message`] can receive it (`MPI_Mprobe`).
    #[track_caller]
    fn matched_probe(&self) -> (Message, Status) {
        self.matched_probe_with_tag(ANY_TAG)
    }

    /// Matched probe with `tag`.
    #[track_caller]
    fn matched_probe_with_tag(&self, tag: Tag) -> (Message, Status) {
        let core = self.core();
        let matched =
            blocking::matched_probe(core, self.source_rank(), tag, true, Location::caller())
                .or_raise()
                .expect("a blocking matched probe returns a message");
        Message::new(core, matched)
    }

    /// Matched probe that does not wait (`MPI_Improbe`).
    #[track_caller]
    fn immediate_matched_probe(&self) -> Option<(Message, Status)> {
        self.immediate_matched_probe_with_tag(ANY_TAG)
    }

    /// Immediate matched probe with `tag`.
    #[track_caller]
    fn immediate_matched_probe_with_tag(&self, tag: Tag) -> Option<(Message, Status)> {
        let core = self.core();
        blocking::matched_probe(core, self.source_rank(), tag, false, Location::caller())
            .or_raise()
            .map(|matched| Message::new(core, matched))
    }

    /// Starts a receive into `buf` with any tag (`MPI_Irecv`).
    #[track_caller]
    fn immediate_receive_into<'a, Sc, Buf>(
        &self,
        scope: Sc,
        buf: &'a mut Buf,
    ) -> Request<'a, Buf, Sc>
    where
        Buf: 'a + BufferMut + ?Sized,
        Sc: Scope<'a>,
    {
        self.immediate_receive_into_with_tag(scope, buf, ANY_TAG)
    }

    /// Starts a receive into `buf` with `tag`.
    #[track_caller]
    fn immediate_receive_into_with_tag<'a, Sc, Buf>(
        &self,
        scope: Sc,
        buf: &'a mut Buf,
        tag: Tag,
    ) -> Request<'a, Buf, Sc>
    where
        Buf: 'a + BufferMut + ?Sized,
        Sc: Scope<'a>,
    {
        let layout = recv_layout(buf);
        let op = start_receive(
            self.core(),
            "immediate_receive_into",
            self.source_rank(),
            tag,
            &layout,
        );
        Request::new(op, buf as *const Buf, scope)
    }

    /// Starts receiving one value with any tag into a heap cell
    /// (rsmpi's `immediate_receive`): no scope is needed, the returned
    /// [`ReceiveFuture`] owns the cell.
    #[track_caller]
    fn immediate_receive<Msg: Equivalence>(&self) -> ReceiveFuture<Msg> {
        self.immediate_receive_with_tag(ANY_TAG)
    }

    /// Starts receiving one value with `tag` (see
    /// [`immediate_receive`](Self::immediate_receive)).
    ///
    /// # Panics
    ///
    /// On a bad source rank or tag (as every receive); a message of another
    /// size than one `Msg` fails [`ReceiveFuture::get`] instead.
    #[track_caller]
    fn immediate_receive_with_tag<Msg: Equivalence>(&self, tag: Tag) -> ReceiveFuture<Msg> {
        let core = self.core();
        ReceiveFuture::start(core.rank(), |layout| {
            start_receive(core, "immediate_receive", self.source_rank(), tag, layout)
        })
    }
}

/// Starts a receive into `layout` for an immediate receive `name` of the
/// calling rank (panics on a bad source or tag, or outside the rank).
#[track_caller]
fn start_receive(
    core: &CommCore,
    name: &'static str,
    source: Rank,
    tag: Tag,
    layout: &Layout,
) -> Op {
    let ctx = core
        .caller()
        .and_then(|ctx| core.check_receive(name, source, tag).map(|_| ctx))
        .or_raise();
    let pending = PendingOp::new(
        core,
        ctx.slot,
        Queued::Receive(core.world()),
        Kind::Receive { source, tag },
    );
    let spec = core.accept(core.p2p_context(), source, tag);
    match p2p::start_receive(core.endpoint(), spec, layout, &pending.completion) {
        Started::Done(outcome) => Op::Done(p2p::receive_result(core.rank(), outcome)),
        Started::Pending => pending.into_op(),
    }
}

impl Source for Process<'_> {
    fn source_rank(&self) -> Rank {
        self.rank
    }
}

impl Source for AnyProcess<'_> {
    fn source_rank(&self) -> Rank {
        ANY_SOURCE
    }
}
