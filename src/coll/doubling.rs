//! Recursive doubling on any number of ranks, as MPICH handles a p that is
//! not a power of two: with p' the largest power of two not above p and
//! rem = p − p', the first 2·rem ranks pair up. The even rank of each pair
//! hands its data to the odd one, which takes part in the log2 p' doubling
//! steps for both (as virtual rank `rank / 2`; a rank past the pairs is
//! virtual rank `rank − rem`) and hands the result back at the end. The
//! all-gather and the all-reduce differ only in what they exchange.

use super::exchange::Exchange;
use super::Call;
use crate::datatype::copy::Layout;
use crate::error::Error;
use crate::Rank;

/// The shape of a recursive doubling on `p` ranks.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Doubling {
    /// The largest power of two not above p: the virtual ranks.
    pub(crate) pof2: Rank,
    /// p − pof2: the number of pairs.
    pub(crate) rem: Rank,
}

impl Doubling {
    pub(crate) fn new(p: Rank) -> Doubling {
        let pof2 = 1 << (31 - (p as u32).leading_zeros());
        Doubling {
            pof2,
            rem: p - pof2,
        }
    }

    /// Whether `rank` is one of a pair.
    pub(crate) fn paired(&self, rank: Rank) -> bool {
        rank < 2 * self.rem
    }

    /// The real rank that speaks for virtual rank `v`.
    pub(crate) fn real(&self, v: Rank) -> Rank {
        if v < self.rem {
            2 * v + 1
        } else {
            v + self.rem
        }
    }

    /// The last step: the odd rank of each pair hands `result` back to the
    /// even one.
    pub(crate) fn hand_back(&self, call: &Call<'_>, result: &Layout) -> Result<(), Error> {
        let rank = call.rank();
        if self.paired(rank) {
            let mut ex = Exchange::new(call);
            if rank % 2 == 1 {
                ex.send(rank - 1, result);
            } else {
                ex.recv(rank + 1, result)?;
            }
            ex.wait()?;
        }
        Ok(())
    }
}
