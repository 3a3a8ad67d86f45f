//! Inclusive and exclusive scan algorithms.

use super::op::OpRef;
use super::Call;
use crate::datatype::copy::Layout;
use crate::error::Error;

/// Rank r gets `x0 op ... op xr` (inclusive) or `x0 op ... op x(r-1)`
/// (exclusive; rank 0's `recv` is left as it is).
pub(crate) fn scan(
    call: &Call<'_>,
    op: &OpRef<'_>,
    commutative: bool,
    send: &Layout,
    recv: &Layout,
    exclusive: bool,
) -> Result<(), Error> {
    let _ = (call, op, commutative, send, recv, exclusive);
    Err(Error::unsupported("scan"))
}
