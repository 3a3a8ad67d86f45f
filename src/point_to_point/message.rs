//! Matched probes' messages: [`Message`] and [`MatchedReceiveVec`].

use super::*;
use crate::error::CountError;

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
    pub(super) fn new(core: &CommCore, matched: Matched) -> (Message, Status) {
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
        let status = blocking::receive_matched(&core, matched, &layout)
            .and_then(|status| check_one::<Msg>(&core, &status, layout.bytes()).map(|_| status))
            .or_raise();
        // SAFETY: as in `Source::try_receive_with_tag`.
        (unsafe { value.assume_init() }, status)
    }

    /// Receives the message into `buf`.
    #[track_caller]
    pub fn matched_receive_into<Buf: BufferMut + ?Sized>(self, buf: &mut Buf) -> Status {
        let (core, matched) = self.take();
        blocking::receive_matched(&core, matched, &recv_layout(buf)).or_raise()
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
        let result = blocking::receive_matched(&core, matched, &recv_layout(buf));
        Request::new(Op::Done(result), buf as *const Buf, scope)
    }
}

impl Drop for Message {
    fn drop(&mut self) {
        if let Some(matched) = self.matched.take() {
            p2p::drop_matched(self.core.endpoint(), matched);
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
            p2p::drop_matched(core.endpoint(), matched);
            raise(Error::Count(CountError::NotWholeElements {
                rank: core.rank(),
                bytes: status.bytes(),
                source: status.source_rank(),
                tag: status.tag(),
                type_name: std::any::type_name::<Msg>(),
                size,
            }));
        }
        let mut vec: Vec<Msg> = Vec::with_capacity(count);
        let layout = Layout {
            base: vec.as_mut_ptr() as *const u8,
            count,
            ty: Msg::equivalent_datatype().handle(),
        };
        let status = blocking::receive_matched(&core, matched, &layout).or_raise();
        // SAFETY: the message filled the data bytes of `count` elements of
        // `Msg` (its length is `count * size` and its signature matched).
        unsafe { vec.set_len(count) };
        (vec, status)
    }
}
