//! Point-to-point communication, shaped like rsmpi's `mpi::point_to_point`.
//!
//! Sends go through a [`Destination`] (`world.process_at_rank(r)`), receives
//! through a [`Source`] (`world.process_at_rank(r)` or `world.any_process()`).
//! Plain sends use tag 0; plain receives and probes accept any tag.
//!
//! As in rsmpi, failures panic (the job then fails with the message, naming
//! the rank and values involved); the `try_*` methods return
//! [`crate::Error`] instead.
//!
//! | file | what it holds |
//! |---|---|
//! | `send.rs` | [`Destination`]: standard, buffered and synchronous sends, blocking and immediate |
//! | `receive.rs` | [`Source`]: receives, probes, matched probes, immediate receives |
//! | `future.rs` | [`ReceiveFuture`]: one value received into the heap by `immediate_receive` |
//! | `message.rs` | [`Message`] (a matched probe's message) and [`MatchedReceiveVec`] |
//! | `send_receive.rs` | `send_receive*` (`MPI_Sendrecv`, `MPI_Sendrecv_replace`) |

use std::mem::MaybeUninit;
use std::panic::Location;

use crate::coll::CommCore;
use crate::communicator::{AnyProcess, AsCore, Process};
use crate::datatype::copy::Layout;
use crate::datatype::{Buffer, BufferMut, Datatype, Equivalence};
use crate::error::{raise, CountError, Error, OrRaise};
use crate::p2p::completion::Completion;
use crate::p2p::{self, Matched, PendingGuard, Queued, SendMode, Started};
use crate::request::{self, Kind, Op, PendingOp, Request, Scope};
use crate::sched::{WaitInfo, WaitOp};
use crate::{Rank, Tag, ANY_SOURCE, ANY_TAG};

mod blocking;
mod future;
mod message;
mod receive;
mod send;
mod send_receive;

pub use crate::p2p::Status;
pub use future::ReceiveFuture;
pub use message::{MatchedReceiveVec, Message};
pub use receive::Source;
pub use send::Destination;
pub use send_receive::{
    send_receive, send_receive_into, send_receive_into_with_tags, send_receive_replace_into,
    send_receive_replace_into_with_tags, send_receive_with_tags,
};

fn send_layout<B: Buffer + ?Sized>(buf: &B) -> Layout {
    Layout::of(buf)
}

/// `layout`, if it owns nothing (its type is static: built-in types and
/// their `Equivalence`s), as a value with no drop; else (a user datatype's
/// shared map) `layout` itself, to be dropped as usual.
///
/// For the blocking send and receive, inlined into their callers: they
/// lend the layout to `p2p`, whose out-of-line paths take its address, so
/// LLVM tested at its drop whether it held a reference count, though
/// `Layout::of` of a built-in type stored `None` there (3 to 4
/// instructions a call, 1-worker ping-pong, callgrind). Tested here, before
/// the address escapes, the test folds away. Forgetting the layout then
/// leaks nothing: a static handle owns nothing.
#[inline(always)]
fn without_drop(layout: Layout) -> Result<std::mem::ManuallyDrop<Layout>, Layout> {
    if layout.ty.is_counted() {
        Err(layout)
    } else {
        Ok(std::mem::ManuallyDrop::new(layout))
    }
}

fn recv_layout<B: BufferMut + ?Sized>(buf: &mut B) -> Layout {
    Layout::of_mut(buf)
}

/// Checks that a message received as one `Msg` had exactly its size.
fn check_one<Msg: Equivalence>(core: &CommCore, status: &Status, want: usize) -> Result<(), Error> {
    check_one_at::<Msg>(core.rank(), status, want)
}

/// [`check_one`] for receiving rank `rank`.
fn check_one_at<Msg: Equivalence>(rank: Rank, status: &Status, want: usize) -> Result<(), Error> {
    if status.bytes() != want {
        return Err(Error::Count(CountError::NotOneValue {
            rank,
            type_name: std::any::type_name::<Msg>(),
            size: want,
            source: status.source_rank(),
            tag: status.tag(),
            bytes: status.bytes(),
        }));
    }
    Ok(())
}
