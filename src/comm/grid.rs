//! Cartesian grids: the extents and periodicity of a Cartesian
//! communicator's dimensions, and the arithmetic between ranks and
//! coordinates (row-major, the last dimension varying fastest). The API
//! over it is `communicator/cartesian.rs` (layer L5).

use std::fmt;

use crate::error::{ArgError, Error};
use crate::{Count, Rank};

/// A grid: extents and periodicity of each dimension.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Grid {
    pub(crate) dims: Box<[Count]>,
    pub(crate) periods: Box<[bool]>,
}

impl Grid {
    /// Checks a grid for a communicator of `size` ranks.
    pub(crate) fn new(
        op: &'static str,
        dims: &[Count],
        periods: &[bool],
        size: Rank,
    ) -> Result<Grid, Error> {
        if dims.len() != periods.len() {
            return Err(Error::Arg(ArgError::DimsPeriodsLength {
                op,
                dims: dims.len(),
                periods: periods.len(),
            }));
        }
        if let Some((i, d)) = dims.iter().enumerate().find(|(_, &d)| d <= 0) {
            return Err(Error::Arg(ArgError::EmptyDimension {
                op,
                index: i,
                extent: *d,
            }));
        }
        let points = dims
            .iter()
            .try_fold(1 as Count, |p, &d| p.checked_mul(d))
            .filter(|&p| p <= size);
        if points.is_none() {
            return Err(Error::Arg(ArgError::GridTooLarge {
                op,
                dims: dims.to_vec(),
                size,
            }));
        }
        Ok(Grid {
            dims: dims.into(),
            periods: periods.into(),
        })
    }

    /// Number of points (ranks) of the grid.
    pub(crate) fn points(&self) -> Rank {
        self.dims.iter().product()
    }

    pub(crate) fn coordinates_into(&self, rank: Rank, coords: &mut [Count]) {
        let mut rest = rank;
        for (c, &d) in coords.iter_mut().zip(self.dims.iter()).rev() {
            *c = rest % d;
            rest /= d;
        }
    }

    /// The rank at `coords` (wrapped along periodic dimensions), or the
    /// first offending dimension.
    pub(crate) fn rank_at(&self, coords: impl Iterator<Item = Count>) -> Result<Rank, usize> {
        let mut rank: Rank = 0;
        for (i, c) in coords.enumerate() {
            let d = self.dims[i];
            let c = if self.periods[i] {
                c.rem_euclid(d)
            } else if (0..d).contains(&c) {
                c
            } else {
                return Err(i);
            };
            rank = rank * d + c;
        }
        Ok(rank)
    }
}

impl fmt::Display for Grid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "dims {:?} periods {:?}", self.dims, self.periods)
    }
}
