//! [`ReceiveFuture`]: one value received into a heap cell that the future
//! owns (rsmpi's `immediate_receive`), so no request scope is needed.

use super::*;

use std::fmt;

use crate::request::StaticScope;

/// A receive of one `T` in progress, started by
/// [`Source::immediate_receive`] (rsmpi's `ReceiveFuture`).
///
/// The value lands in a heap cell the future owns; the cell stays put when
/// the future moves. Complete it with [`get`](Self::get) or
/// `r#try`.
///
/// # Panics
///
/// Dropping a future that was not completed panics, like dropping a
/// [`Request`]: the receive is withdrawn (or finished) first, so the cell
/// is never written after it is freed.
#[must_use = "a receive future must be completed with get or try"]
pub struct ReceiveFuture<T> {
    // Declared before `value`: dropped first, settling the receive before
    // the cell it writes to is freed.
    request: Request<'static, T, StaticScope>,
    value: Box<MaybeUninit<T>>,
    /// What a message of one `T` holds: the receiving rank (for the size
    /// error) and the data bytes of one `T`.
    expect: (Rank, usize),
}

impl<T> fmt::Debug for ReceiveFuture<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReceiveFuture")
            .field("complete", &self.request.is_complete())
            .finish()
    }
}

impl<T: Equivalence> ReceiveFuture<T> {
    /// A future whose receive `start` begins into the new cell's layout.
    pub(super) fn start(rank: Rank, start: impl FnOnce(&Layout) -> Op) -> ReceiveFuture<T> {
        let mut value = Box::new(MaybeUninit::<T>::uninit());
        let layout = Layout {
            base: value.as_mut_ptr() as *const u8,
            count: 1,
            ty: T::equivalent_datatype().handle(),
        };
        let op = start(&layout);
        let data = value.as_ptr();
        ReceiveFuture {
            request: Request::new(op, data, StaticScope),
            value,
            expect: (rank, layout.bytes()),
        }
    }

    /// Waits for the value and returns it with the message's status.
    ///
    /// # Panics
    ///
    /// If the message was not exactly one `T` (the message names both
    /// sizes), or the receive failed.
    #[track_caller]
    pub fn get(self) -> (T, Status) {
        self.try_get().or_raise()
    }

    /// Like [`get`](Self::get), returning errors (a myriad extension).
    #[track_caller]
    pub fn try_get(self) -> Result<(T, Status), Error> {
        let ReceiveFuture {
            request,
            value,
            expect,
        } = self;
        let status = request.try_wait()?;
        Self::finish(*value, expect, status)
    }

    /// The value and status if the message has arrived, else the future
    /// back (after yielding to the other ranks of this worker).
    ///
    /// # Panics
    ///
    /// As [`get`](Self::get), once the message has arrived.
    #[track_caller]
    #[allow(clippy::result_large_err)] // rsmpi's signature: the future comes back by value
    pub fn r#try(self) -> Result<(T, Status), Self> {
        let ReceiveFuture {
            request,
            value,
            expect,
        } = self;
        match request.test() {
            Ok(status) => Ok(Self::finish(*value, expect, status).or_raise()),
            Err(request) => Err(ReceiveFuture {
                request,
                value,
                expect,
            }),
        }
    }

    fn finish(
        value: MaybeUninit<T>,
        (rank, bytes): (Rank, usize),
        status: Status,
    ) -> Result<(T, Status), Error> {
        check_one_at::<T>(rank, &status, bytes)?;
        // SAFETY: the receive is over and matched `T`'s type signature with
        // exactly one value's bytes (checked above), so the data bytes are
        // written; padding may stay uninitialised, as in `receive`.
        Ok((unsafe { value.assume_init() }, status))
    }
}
