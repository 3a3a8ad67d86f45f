//! Point-to-point communication, shaped like rsmpi's `mpi::point_to_point`.
//!
//! Sends go through a [`Destination`] (`world.process_at_rank(r)`), receives
//! through a [`Source`] (`world.process_at_rank(r)` or `world.any_process()`).
//! Plain sends use tag 0; plain receives and probes accept any tag.
//!
//! As in rsmpi, failures panic (the job then fails with the message, naming
//! the rank and values involved); the `try_*` methods return
//! [`crate::Error`] instead.

use std::mem::MaybeUninit;
use std::panic::Location;

use crate::comm::{AnyProcess, AsCore, CommCore, Process};
use crate::datatype::copy::Layout;
use crate::datatype::{Buffer, BufferMut, Datatype, Equivalence};
use crate::error::{raise, Error, OrRaise};
use crate::p2p::completion::Completion;
use crate::p2p::{self, Matched, PendingGuard, Queued, SendMode, Started};
use crate::request::{self, Kind, Op, PendingOp, Request, Scope};
use crate::sched::{WaitInfo, WaitOp};
use crate::{Rank, Tag, ANY_SOURCE, ANY_TAG};

pub use crate::p2p::Status;

fn send_layout<B: Buffer + ?Sized>(buf: &B) -> Layout {
    Layout::of(buf)
}

fn recv_layout<B: BufferMut + ?Sized>(buf: &mut B) -> Layout {
    Layout::of_mut(buf)
}

/// Where messages go: a [`Process`] (rsmpi's `Destination`).
pub trait Destination: AsCore {
    /// The destination's rank in its communicator.
    fn destination_rank(&self) -> Rank;

    /// Sends `buf` with tag 0 (`MPI_Send`). Returns once `buf` may be reused:
    /// at once for small messages (eager), when matched for large ones.
    #[track_caller]
    fn send<Buf: Buffer + ?Sized>(&self, buf: &Buf) {
        self.send_with_tag(buf, 0)
    }

    /// Sends `buf` with `tag`.
    #[track_caller]
    fn send_with_tag<Buf: Buffer + ?Sized>(&self, buf: &Buf, tag: Tag) {
        if let Err(err) = self.try_send_with_tag(buf, tag) {
            raise(err)
        }
    }

    /// Like [`send_with_tag`](Self::send_with_tag), returning errors (a
    /// myriad extension).
    #[track_caller]
    fn try_send_with_tag<Buf: Buffer + ?Sized>(&self, buf: &Buf, tag: Tag) -> Result<(), Error> {
        p2p::send(
            self.core(),
            self.destination_rank(),
            tag,
            &send_layout(buf),
            SendMode::Standard,
            Location::caller(),
        )
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
        if let Err(err) = p2p::send(self.core(), dest, tag, &layout, SendMode::Buffered, site) {
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
        if let Err(err) = p2p::send(self.core(), dest, tag, &layout, SendMode::Synchronous, site) {
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
        .and_then(|ctx| p2p::check_send(core, "immediate_send", rank, tag).map(|_| ctx))
        .or_raise();
    let layout = send_layout(buf);
    let pending = PendingOp::new(
        core,
        ctx.slot,
        Queued::Send(core.world_rank(rank)),
        Kind::Send { dest: rank, tag },
    );
    let context = core.p2p_context();
    let op = match p2p::start_send(core, context, rank, tag, &layout, mode, &pending.completion) {
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

/// Where messages come from: a [`Process`] or [`AnyProcess`] (rsmpi's
/// `Source`).
pub trait Source: AsCore {
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
        let status = p2p::receive(core, self.source_rank(), tag, &layout, site)?;
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
    #[track_caller]
    fn receive_into<Buf: BufferMut + ?Sized>(&self, buf: &mut Buf) -> Status {
        self.receive_into_with_tag(buf, ANY_TAG)
    }

    /// Receives into `buf` with `tag`.
    #[track_caller]
    fn receive_into_with_tag<Buf: BufferMut + ?Sized>(&self, buf: &mut Buf, tag: Tag) -> Status {
        self.try_receive_into_with_tag(buf, tag).or_raise()
    }

    /// Like [`receive_into_with_tag`](Self::receive_into_with_tag),
    /// returning errors (truncation: the part that fits was copied).
    #[track_caller]
    fn try_receive_into_with_tag<Buf: BufferMut + ?Sized>(
        &self,
        buf: &mut Buf,
        tag: Tag,
    ) -> Result<Status, Error> {
        let layout = recv_layout(buf);
        p2p::receive(
            self.core(),
            self.source_rank(),
            tag,
            &layout,
            Location::caller(),
        )
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
        p2p::probe(
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
        p2p::probe(
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
        let matched = p2p::matched_probe(core, self.source_rank(), tag, true, Location::caller())
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
        p2p::matched_probe(core, self.source_rank(), tag, false, Location::caller())
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
        let core = self.core();
        let source = self.source_rank();
        let ctx = core
            .caller()
            .and_then(|ctx| {
                p2p::check_receive(core, "immediate_receive_into", source, tag).map(|_| ctx)
            })
            .or_raise();
        let layout = recv_layout(buf);
        let pending = PendingOp::new(
            core,
            ctx.slot,
            Queued::Receive(core.world()),
            Kind::Receive { source, tag },
        );
        let context = core.p2p_context();
        let op = match p2p::start_receive(core, context, source, tag, &layout, &pending.completion)
        {
            Started::Done(outcome) => Op::Done(p2p::receive_result(core, outcome)),
            Started::Pending => pending.into_op(),
        };
        Request::new(op, buf as *const Buf, scope)
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

fn check_one<Msg: Equivalence>(core: &CommCore, status: &Status, want: usize) -> Result<(), Error> {
    if status.bytes() != want {
        return Err(Error::Count {
            message: format!(
                "rank {} expected one value of type {} ({want} bytes) from rank {} (tag {}), \
                 but the message has {} bytes; use receive_vec or receive_into for other sizes",
                core.rank(),
                std::any::type_name::<Msg>(),
                status.source_rank(),
                status.tag(),
                status.bytes()
            ),
        });
    }
    Ok(())
}

/// A message taken off the queue by a matched probe (rsmpi's `Message`):
/// receive it with one of its methods.
///
/// # Panics
///
/// Dropping a message without receiving it panics (a synchronous or large
/// sender would otherwise wait forever; it is released as cancelled).
#[derive(Debug)]
pub struct Message {
    core: CommCore,
    matched: Option<Matched>,
}

impl Message {
    fn new(core: &CommCore, matched: Matched) -> (Message, Status) {
        let status = matched.status();
        (
            Message {
                core: core.clone(),
                matched: Some(matched),
            },
            status,
        )
    }

    /// Always `false`: myriad has no `MPI_PROC_NULL` sources.
    pub fn is_no_proc(&self) -> bool {
        false
    }

    fn take(mut self) -> (CommCore, Matched) {
        let matched = self.matched.take().expect("a message is received once");
        (self.core.clone(), matched)
    }

    /// Receives the message as one value.
    #[track_caller]
    pub fn matched_receive<Msg: Equivalence>(self) -> (Msg, Status) {
        let (core, matched) = self.take();
        let mut value = MaybeUninit::<Msg>::uninit();
        let layout = Layout {
            base: value.as_mut_ptr() as *const u8,
            count: 1,
            ty: Msg::equivalent_datatype().handle(),
        };
        let status = p2p::receive_matched(&core, matched, &layout)
            .and_then(|status| check_one::<Msg>(&core, &status, layout.bytes()).map(|_| status))
            .or_raise();
        // SAFETY: as in `Source::try_receive_with_tag`.
        (unsafe { value.assume_init() }, status)
    }

    /// Receives the message into `buf`.
    #[track_caller]
    pub fn matched_receive_into<Buf: BufferMut + ?Sized>(self, buf: &mut Buf) -> Status {
        let (core, matched) = self.take();
        p2p::receive_matched(&core, matched, &recv_layout(buf)).or_raise()
    }

    /// Receives the message into `buf` as an immediate operation (the data
    /// is already here, so the request is complete at once).
    #[track_caller]
    pub fn immediate_matched_receive_into<'a, Sc, Buf>(
        self,
        scope: Sc,
        buf: &'a mut Buf,
    ) -> Request<'a, Buf, Sc>
    where
        Buf: 'a + BufferMut + ?Sized,
        Sc: Scope<'a>,
    {
        let (core, matched) = self.take();
        let result = p2p::receive_matched(&core, matched, &recv_layout(buf));
        Request::new(Op::Done(result), buf as *const Buf, scope)
    }
}

impl Drop for Message {
    fn drop(&mut self) {
        if let Some(matched) = self.matched.take() {
            p2p::drop_matched(self.core.job(), matched);
            if !std::thread::panicking() {
                panic!("a Message from a matched probe was dropped without being received");
            }
        }
    }
}

/// Receives a matched message into a new `Vec` (rsmpi's
/// `MatchedReceiveVec`, implemented for the pair a matched probe returns).
pub trait MatchedReceiveVec {
    /// Receives the message into a `Vec` of its length.
    fn matched_receive_vec<Msg: Equivalence>(self) -> (Vec<Msg>, Status);
}

impl MatchedReceiveVec for (Message, Status) {
    #[track_caller]
    fn matched_receive_vec<Msg: Equivalence>(self) -> (Vec<Msg>, Status) {
        let (message, status) = self;
        let (core, matched) = message.take();
        let size = Msg::equivalent_datatype().type_map().size();
        let count = status.bytes().checked_div(size).unwrap_or(0);
        if size != 0 && status.bytes() % size != 0 {
            p2p::drop_matched(core.job(), matched);
            raise(Error::Count {
                message: format!(
                    "rank {} received {} bytes from rank {} (tag {}), which is not a whole \
                     number of {} ({size} bytes each)",
                    core.rank(),
                    status.bytes(),
                    status.source_rank(),
                    status.tag(),
                    std::any::type_name::<Msg>()
                ),
            });
        }
        let mut vec: Vec<Msg> = Vec::with_capacity(count);
        let layout = Layout {
            base: vec.as_mut_ptr() as *const u8,
            count,
            ty: Msg::equivalent_datatype().handle(),
        };
        let status = p2p::receive_matched(&core, matched, &layout).or_raise();
        // SAFETY: the message filled the data bytes of `count` elements of
        // `Msg` (its length is `count * size` and its signature matched).
        unsafe { vec.set_len(count) };
        (vec, status)
    }
}

/// Sends `msg` to `destination` with `sendtag` while receiving into `buf`
/// from `source` with `receivetag` (`MPI_Sendrecv`); deadlock-free between
/// two ranks that exchange.
#[track_caller]
pub fn send_receive_into_with_tags<M, D, B, S>(
    msg: &M,
    destination: &D,
    sendtag: Tag,
    buf: &mut B,
    source: &S,
    receivetag: Tag,
) -> Status
where
    M: Buffer + ?Sized,
    D: Destination,
    B: BufferMut + ?Sized,
    S: Source,
{
    let site = Location::caller();
    let dst = recv_layout(buf);
    send_receive_layouts(
        &send_layout(msg),
        destination,
        sendtag,
        &dst,
        source,
        receivetag,
        site,
    )
    .or_raise()
}

fn send_receive_layouts<D, S>(
    src: &Layout,
    destination: &D,
    sendtag: Tag,
    dst: &Layout,
    source: &S,
    receivetag: Tag,
    site: &'static Location<'static>,
) -> Result<Status, Error>
where
    D: Destination + ?Sized,
    S: Source + ?Sized,
{
    let core = source.core();
    let ctx = core.caller()?;
    let from = source.source_rank();
    p2p::check_receive(core, "send_receive", from, receivetag)?;
    let completion = Completion::new(ctx.slot);
    let outcome =
        match p2p::start_receive(core, core.p2p_context(), from, receivetag, dst, &completion) {
            Started::Done(outcome) => {
                p2p::send(
                    destination.core(),
                    destination.destination_rank(),
                    sendtag,
                    src,
                    SendMode::Standard,
                    site,
                )?;
                outcome
            }
            Started::Pending => {
                let guard =
                    PendingGuard::new(core.job(), Queued::Receive(core.world()), &completion);
                p2p::send(
                    destination.core(),
                    destination.destination_rank(),
                    sendtag,
                    src,
                    SendMode::Standard,
                    site,
                )?;
                let info = WaitInfo {
                    op: WaitOp::Receive,
                    peer: from,
                    tag: receivetag,
                    comm: core.p2p_context(),
                    site,
                };
                guard.wait(ctx, &info)?
            }
        };
    p2p::receive_result(core, outcome)
}

/// [`send_receive_into_with_tags`] with send tag 0 and any receive tag.
#[track_caller]
pub fn send_receive_into<M, D, B, S>(msg: &M, destination: &D, buf: &mut B, source: &S) -> Status
where
    M: Buffer + ?Sized,
    D: Destination,
    B: BufferMut + ?Sized,
    S: Source,
{
    send_receive_into_with_tags(msg, destination, 0, buf, source, ANY_TAG)
}

/// Sends `msg` and receives one value (`MPI_Sendrecv`), with tags.
#[track_caller]
pub fn send_receive_with_tags<R, M, D, S>(
    msg: &M,
    destination: &D,
    sendtag: Tag,
    source: &S,
    receivetag: Tag,
) -> (R, Status)
where
    R: Equivalence,
    M: Buffer + ?Sized,
    D: Destination,
    S: Source,
{
    let site = Location::caller();
    let mut value = MaybeUninit::<R>::uninit();
    let dst = Layout {
        base: value.as_mut_ptr() as *const u8,
        count: 1,
        ty: R::equivalent_datatype().handle(),
    };
    let status = send_receive_layouts(
        &send_layout(msg),
        destination,
        sendtag,
        &dst,
        source,
        receivetag,
        site,
    )
    .and_then(|status| check_one::<R>(source.core(), &status, dst.bytes()).map(|_| status))
    .or_raise();
    // SAFETY: as in `Source::try_receive_with_tag`.
    (unsafe { value.assume_init() }, status)
}

/// [`send_receive_with_tags`] with send tag 0 and any receive tag.
#[track_caller]
pub fn send_receive<R, M, D, S>(msg: &M, destination: &D, source: &S) -> (R, Status)
where
    R: Equivalence,
    M: Buffer + ?Sized,
    D: Destination,
    S: Source,
{
    send_receive_with_tags(msg, destination, 0, source, ANY_TAG)
}

/// Sends the contents of `buf` and replaces them with the received message
/// (`MPI_Sendrecv_replace`), with tags.
#[track_caller]
pub fn send_receive_replace_into_with_tags<B, D, S>(
    buf: &mut B,
    destination: &D,
    sendtag: Tag,
    source: &S,
    receivetag: Tag,
) -> Status
where
    B: BufferMut + ?Sized,
    D: Destination,
    S: Source,
{
    let site = Location::caller();
    let dst = recv_layout(buf);
    // Send from a packed copy, so the receive may overwrite `buf`.
    let bytes = dst.bytes();
    let mut packed = vec![0u8; bytes];
    // SAFETY: `dst` describes `buf`, valid for reads; `packed` holds `bytes`.
    unsafe { crate::datatype::copy::pack(&dst, packed.as_mut_ptr()) };
    let src = Layout {
        base: packed.as_ptr(),
        count: dst.count,
        ty: packed_type(&dst),
    };
    send_receive_layouts(&src, destination, sendtag, &dst, source, receivetag, site).or_raise()
}

/// The contiguous type with the same signature as `layout`'s.
fn packed_type(layout: &Layout) -> crate::datatype::TypeHandle {
    let map = layout.ty.map();
    if map.is_contiguous() {
        return layout.ty.clone();
    }
    let packed = crate::datatype::TypeMap::packed(map);
    crate::datatype::UserDatatype::from_type_map(packed).handle()
}

/// [`send_receive_replace_into_with_tags`] with send tag 0 and any receive
/// tag.
#[track_caller]
pub fn send_receive_replace_into<B, D, S>(buf: &mut B, destination: &D, source: &S) -> Status
where
    B: BufferMut + ?Sized,
    D: Destination,
    S: Source,
{
    send_receive_replace_into_with_tags(buf, destination, 0, source, ANY_TAG)
}
