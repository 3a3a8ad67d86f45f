//! All-gather algorithms.

use super::gather::Parts;
use super::Call;
use crate::datatype::copy::Layout;
use crate::error::Error;

/// Every rank gets every rank's `send`, block by block in rank order.
pub(crate) fn allgather(call: &Call<'_>, send: &Layout, recv: &Layout) -> Result<(), Error> {
    let _ = (call, send, recv);
    Err(Error::unsupported("all_gather"))
}

/// Every rank gets every rank's `send` in its part of `recv`.
pub(crate) fn allgatherv(call: &Call<'_>, send: &Layout, recv: &Parts) -> Result<(), Error> {
    let _ = (call, send, recv);
    Err(Error::unsupported("all_gather_varcount"))
}
