//! `pack` and `unpack` (`MPI_Pack`, `MPI_Unpack`, `MPI_Pack_size`): a
//! buffer's data bytes in type-map order, without padding or holes.
//!
//! rsmpi has these as `Communicator` methods; myriad's format does not
//! depend on the communicator (every rank shares one address space and byte
//! order), so they are free functions here that the methods forward to. The
//! packed form of `count` elements of a datatype is exactly
//! `count * size` bytes: [`pack_size`] is exact, not an upper bound.
//!
//! Positions are byte offsets into the packed buffer, as in MPI: each call
//! starts at `position` and returns the position after what it wrote or
//! read, so several buffers can be packed one after the other.
//!
//! ```
//! use myriad::datatype::{pack_into, pack_size, unpack_into};
//! use myriad::traits::*;
//!
//! let ints = [3i32, 2, 1];
//! let flag = true;
//! let mut packed = vec![0u8; 13];
//! let at = pack_into(&ints[..], &mut packed, 0);
//! let at = pack_into(&flag, &mut packed, at);
//! assert_eq!(at, pack_size(3, &i32::equivalent_datatype()) + 1);
//!
//! let (mut back, mut b) = ([0i32; 3], false);
//! // SAFETY: `packed` holds three i32 then one bool, packed above.
//! let at = unsafe { unpack_into(&packed, &mut back[..], 0) };
//! // SAFETY: as above.
//! unsafe { unpack_into(&packed, &mut b, at) };
//! assert_eq!((back, b), ([3, 2, 1], true));
//! ```

use super::copy::{self, Layout};
use super::{Buffer, BufferMut, Datatype};
use crate::error::{ArgError, CountError, OrRaise};
use crate::{Count, Error};

/// Bytes needed to pack `incount` elements of `datatype` (`MPI_Pack_size`):
/// exactly `incount * size`.
///
/// # Panics
///
/// If `incount` is negative or the size does not fit a [`Count`].
#[track_caller]
pub fn pack_size<D: Datatype + ?Sized>(incount: Count, datatype: &D) -> Count {
    let size = datatype.type_map().size();
    usize::try_from(incount)
        .map_err(|_| {
            Error::Count(CountError::NegativeCount {
                op: "pack_size",
                count: incount,
            })
        })
        .and_then(|n| {
            n.checked_mul(size)
                .and_then(|b| Count::try_from(b).ok())
                .ok_or_else(|| too_large("pack_size", n.saturating_mul(size)))
        })
        .or_raise()
}

/// The data of `inbuf`, packed (`MPI_Pack` into a new vector).
///
/// ```
/// let packed = myriad::datatype::pack(&[(1u8, 2u32)][..]);
/// assert_eq!(packed.len(), 5); // no padding
/// ```
pub fn pack<B: Buffer + ?Sized>(inbuf: &B) -> Vec<u8> {
    let src = Layout::of(inbuf);
    let mut out = vec![0u8; src.bytes()];
    // SAFETY: [1] `src` describes `inbuf`, valid for reads (the `Buffer`
    // contract); [2] `out` holds `src.bytes()` bytes.
    unsafe { copy::pack(&src, out.as_mut_ptr()) };
    out
}

/// Packs `inbuf` into `outbuf` from byte `position` on, returning the
/// position after it (`MPI_Pack`).
///
/// # Panics
///
/// As [`try_pack_into`] fails.
#[track_caller]
pub fn pack_into<B: Buffer + ?Sized>(inbuf: &B, outbuf: &mut [u8], position: Count) -> Count {
    try_pack_into(inbuf, outbuf, position).or_raise()
}

/// Like [`pack_into`], returning errors: `Error::Arg` for a negative
/// position, `Error::Count` when the data does not fit after `position`.
/// Nothing is written on error.
pub fn try_pack_into<B: Buffer + ?Sized>(
    inbuf: &B,
    outbuf: &mut [u8],
    position: Count,
) -> Result<Count, Error> {
    let src = Layout::of(inbuf);
    let (at, end) = span("pack_into", position, src.bytes(), outbuf.len(), "output")?;
    // SAFETY: [1] `src` describes `inbuf`, valid for reads; [2] `outbuf`
    // holds `at..end`, `src.bytes()` bytes; [3] `outbuf` is exclusively
    // borrowed, so it does not overlap `inbuf`.
    unsafe { copy::pack(&src, outbuf.as_mut_ptr().add(at)) };
    Ok(end)
}

/// Unpacks data from `inbuf` at byte `position` into `outbuf`, returning
/// the position after it (`MPI_Unpack`). Exactly the data of `outbuf`'s
/// count and datatype is read.
///
/// # Safety
///
/// The bytes at `position` must be data with `outbuf`'s type signature (as
/// [`pack`] writes it for any buffer with that signature): packed bytes carry
/// no type, and arbitrary bytes are not valid for every type (`bool`).
///
/// # Panics
///
/// As [`try_unpack_into`] fails.
#[track_caller]
pub unsafe fn unpack_into<B: BufferMut + ?Sized>(
    inbuf: &[u8],
    outbuf: &mut B,
    position: Count,
) -> Count {
    // SAFETY: the caller's contract.
    unsafe { try_unpack_into(inbuf, outbuf, position) }.or_raise()
}

/// Like [`unpack_into`], returning errors: `Error::Arg` for a negative
/// position, `Error::Count` when `inbuf` holds fewer bytes after `position`
/// than `outbuf` needs. Nothing is written on error.
///
/// # Safety
///
/// As [`unpack_into`].
pub unsafe fn try_unpack_into<B: BufferMut + ?Sized>(
    inbuf: &[u8],
    outbuf: &mut B,
    position: Count,
) -> Result<Count, Error> {
    let dst = Layout::of_mut(outbuf);
    let need = dst.bytes();
    let (at, end) = span("unpack_into", position, need, inbuf.len(), "input")?;
    // SAFETY: [1] `inbuf` holds `at..end`, `need` bytes; [2] `dst` describes
    // `outbuf`, valid for writes (the `BufferMut` contract), exclusively
    // borrowed, so not overlapping `inbuf`; [3] the bytes match its
    // signature (the caller's contract).
    let written = unsafe { copy::unpack(inbuf.as_ptr().add(at), need, &dst) };
    debug_assert_eq!(written, need);
    Ok(end)
}

/// Checks `position .. position + bytes` against a buffer of `len` bytes.
fn span(
    op: &'static str,
    position: Count,
    bytes: usize,
    len: usize,
    which: &'static str,
) -> Result<(usize, Count), Error> {
    let at = usize::try_from(position)
        .map_err(|_| Error::Arg(ArgError::NegativePosition { op, position }))?;
    let end = at.saturating_add(bytes);
    if end > len {
        return Err(Error::Count(CountError::PackBufferTooSmall {
            op,
            bytes,
            position: at,
            buffer: which,
            len,
        }));
    }
    let end = Count::try_from(end).map_err(|_| too_large(op, end))?;
    Ok((at, end))
}

fn too_large(op: &'static str, bytes: usize) -> Error {
    Error::Count(CountError::PackedTooLarge { op, bytes })
}
