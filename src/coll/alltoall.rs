//! All-to-all algorithms.

use super::gather::Parts;
use super::Call;
use crate::datatype::copy::Layout;
use crate::error::Error;

/// Block `j` of rank `i`'s `send` goes to block `i` of rank `j`'s `recv`.
pub(crate) fn alltoall(call: &Call<'_>, send: &Layout, recv: &Layout) -> Result<(), Error> {
    let _ = (call, send, recv);
    Err(Error::unsupported("all_to_all"))
}

/// Part `j` of rank `i`'s `send` goes to part `i` of rank `j`'s `recv`.
pub(crate) fn alltoallv(call: &Call<'_>, send: &Parts, recv: &Parts) -> Result<(), Error> {
    let _ = (call, send, recv);
    Err(Error::unsupported("all_to_all_varcount"))
}
