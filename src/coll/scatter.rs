//! Scatter and Scatterv algorithms.

use super::gather::Parts;
use super::Call;
use crate::datatype::copy::Layout;
use crate::error::Error;
use crate::Rank;

/// Scatters `n` blocks of `recv.count` elements of `send` (at the root).
pub(crate) fn scatter(
    call: &Call<'_>,
    root: Rank,
    send: Option<&Layout>,
    recv: &Layout,
) -> Result<(), Error> {
    let _ = (call, root, send, recv);
    Err(Error::unsupported("scatter"))
}

/// Scatters the parts of `send` (at the root).
pub(crate) fn scatterv(
    call: &Call<'_>,
    root: Rank,
    send: Option<&Parts>,
    recv: &Layout,
) -> Result<(), Error> {
    let _ = (call, root, send, recv);
    Err(Error::unsupported("scatter_varcount"))
}
