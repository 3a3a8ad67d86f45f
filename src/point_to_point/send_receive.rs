//! Send and receive in one call (`MPI_Sendrecv`, `MPI_Sendrecv_replace`).

use super::*;

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
    core.check_receive("send_receive", from, receivetag)?;
    let completion = Completion::new(ctx.slot);
    let spec = core.accept(core.p2p_context(), from, receivetag);
    let outcome = match p2p::start_receive(core.endpoint(), spec, dst, &completion) {
        Started::Done(outcome) => {
            blocking::send(
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
                PendingGuard::new(core.endpoint(), Queued::Receive(core.world()), &completion);
            blocking::send(
                destination.core(),
                destination.destination_rank(),
                sendtag,
                src,
                SendMode::Standard,
                site,
            )?;
            let info = WaitInfo {
                op: WaitOp::Receive,
                label: None,
                peer: from,
                tag: receivetag,
                comm: core.p2p_context(),
                site,
            };
            guard.wait(ctx, &info)?
        }
    };
    p2p::receive_result(core.rank(), outcome)
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
