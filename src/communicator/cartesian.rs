//! Cartesian topologies (MPI §7.5, rsmpi's `CartesianCommunicator`).
//!
//! A Cartesian communicator is a communicator whose ranks are the points of
//! a grid, numbered row-major (the last dimension varies fastest), with
//! wrap-around along its periodic dimensions. The grid itself is a small
//! immutable [`Grid`] that each rank's handle keeps (`Arc`); creating one is
//! a split of the parent (the ranks in the grid keep their order; myriad
//! has no placement to improve, so `reorder` changes nothing), in which the
//! last rank to arrive also checks that every rank passed the same grid.
//! Coordinates, ranks and shifts are then local arithmetic.

use std::panic::Location;
use std::sync::Arc;

use super::{AsCore, Attributes, Communicator, SimpleCommunicator};
use crate::coll::create::{self, Agree, Ask, Creation};
use crate::coll::CommCore;
use crate::comm::grid::Grid;
use crate::comm::topo::Topo;
use crate::error::{raise, ArgError, Error, OrRaise};
use crate::{Count, Rank};

/// Creates a Cartesian communicator (collective over `core`).
pub(crate) fn create(
    core: &CommCore,
    dims: &[Count],
    periods: &[bool],
    site: &'static Location<'static>,
) -> Result<Option<CartesianCommunicator>, Error> {
    let grid = Arc::new(Grid::new(
        "create_cartesian_communicator",
        dims,
        periods,
        core.size(),
    )?);
    let color = (core.rank() < grid.points()).then_some(0);
    let ask = Ask::new(Creation::Cartesian, color, core.rank()).agreeing(Agree::Grid(grid.clone()));
    Ok(
        create::create(core, ask, site)?.map(|new| CartesianCommunicator {
            comm: SimpleCommunicator::from_core(new),
            grid,
        }),
    )
}

/// The layout of a Cartesian communicator, seen by one rank
/// ([`CartesianCommunicator::get_layout`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CartesianLayout {
    /// Extent of each dimension.
    pub dims: Vec<Count>,
    /// Whether each dimension wraps around.
    pub periods: Vec<bool>,
    /// The calling rank's coordinates.
    pub coords: Vec<Count>,
}

/// A communicator whose ranks form a grid (rsmpi's `CartesianCommunicator`,
/// from [`Communicator::create_cartesian_communicator`]). It is a
/// communicator: point-to-point and collectives work on it.
///
/// ```
/// use myriad::traits::*;
///
/// let neighbours = myriad::run(6, |universe| {
///     let world = universe.world();
///     // 2 rows × 3 columns, the columns wrap around.
///     let grid = world
///         .create_cartesian_communicator(&[2, 3], &[false, true], false)
///         .unwrap();
///     let layout = grid.get_layout();
///     (layout.coords, grid.shift(0, 1), grid.shift(1, 1))
/// })
/// .unwrap();
/// // Rank 2 is at row 0, column 2: nobody above, rank 5 below; ranks 1 and 0 beside it.
/// assert_eq!(neighbours[2], (vec![0, 2], (None, Some(5)), (Some(1), Some(0))));
/// ```
#[derive(Debug, Clone)]
pub struct CartesianCommunicator {
    comm: SimpleCommunicator,
    grid: Arc<Grid>,
}

impl CartesianCommunicator {
    /// The Cartesian handle of a communicator whose topology is `grid`.
    pub(super) fn from_parts(comm: SimpleCommunicator, grid: Arc<Grid>) -> CartesianCommunicator {
        CartesianCommunicator { comm, grid }
    }

    /// Number of dimensions of the grid.
    pub fn num_dimensions(&self) -> Count {
        self.grid.dims.len() as Count
    }

    /// The grid and the calling rank's coordinates (`MPI_Cart_get`).
    pub fn get_layout(&self) -> CartesianLayout {
        CartesianLayout {
            dims: self.grid.dims.to_vec(),
            periods: self.grid.periods.to_vec(),
            coords: self.rank_to_coordinates(self.rank()),
        }
    }

    /// [`get_layout`](Self::get_layout) into slices of length
    /// [`num_dimensions`](Self::num_dimensions).
    ///
    /// # Panics
    ///
    /// If a slice has another length.
    #[track_caller]
    pub fn get_layout_into(&self, dims: &mut [Count], periods: &mut [bool], coords: &mut [Count]) {
        let n = self.grid.dims.len();
        if dims.len() != n || periods.len() != n || coords.len() != n {
            raise(Error::Arg(ArgError::LayoutLengths {
                dimensions: n,
                dims: dims.len(),
                periods: periods.len(),
                coords: coords.len(),
            }));
        }
        dims.copy_from_slice(&self.grid.dims);
        periods.copy_from_slice(&self.grid.periods);
        self.rank_to_coordinates_into(self.rank(), coords);
    }

    /// The rank at `coords` (`MPI_Cart_rank`); coordinates along periodic
    /// dimensions wrap around.
    ///
    /// # Panics
    ///
    /// If `coords` has the wrong length, or a coordinate along a
    /// non-periodic dimension is outside it.
    #[track_caller]
    pub fn coordinates_to_rank(&self, coords: &[Count]) -> Rank {
        self.check_len("coordinates_to_rank", "coordinates", coords.len());
        match self.grid.rank_at(coords.iter().copied()) {
            Ok(rank) => rank,
            Err(i) => raise(Error::Arg(ArgError::CoordinateOutside {
                coords: coords.to_vec(),
                dimension: i,
                coordinate: coords[i],
                extent: self.grid.dims[i],
            })),
        }
    }

    /// The coordinates of `rank` (`MPI_Cart_coords`).
    ///
    /// # Panics
    ///
    /// If `rank` is not in the communicator.
    #[track_caller]
    pub fn rank_to_coordinates(&self, rank: Rank) -> Vec<Count> {
        let mut coords = vec![0; self.grid.dims.len()];
        self.rank_to_coordinates_into(rank, &mut coords);
        coords
    }

    /// [`rank_to_coordinates`](Self::rank_to_coordinates) into a slice.
    ///
    /// # Panics
    ///
    /// If `rank` is not in the communicator or `coords` has the wrong
    /// length.
    #[track_caller]
    pub fn rank_to_coordinates_into(&self, rank: Rank, coords: &mut [Count]) {
        self.core()
            .check_rank("rank_to_coordinates", rank)
            .or_raise();
        self.check_len("rank_to_coordinates_into", "coords", coords.len());
        self.grid.coordinates_into(rank, coords);
    }

    /// The ranks `displacement` steps before and after the calling rank
    /// along `dimension` (`MPI_Cart_shift`): `(source, destination)` of a
    /// shift. `None` (`MPI_PROC_NULL`) past the edge of a non-periodic
    /// dimension.
    ///
    /// # Panics
    ///
    /// If `dimension` is not a dimension of the grid.
    #[track_caller]
    pub fn shift(&self, dimension: Count, displacement: Count) -> (Option<Rank>, Option<Rank>) {
        let n = self.grid.dims.len();
        if dimension < 0 || dimension as usize >= n {
            raise(Error::Arg(ArgError::NoSuchDimension {
                dimension,
                dimensions: n,
            }));
        }
        let me = self.rank_to_coordinates(self.rank());
        let at = |delta: Count| {
            let coords = me.iter().enumerate().map(|(i, &c)| {
                if i == dimension as usize {
                    c.saturating_add(delta)
                } else {
                    c
                }
            });
            self.grid.rank_at(coords).ok()
        };
        (at(displacement.saturating_neg()), at(displacement))
    }

    /// Splits the grid into sub-grids that keep the dimensions where
    /// `retain` is true (`MPI_Cart_sub`): the calling rank gets the one
    /// through its own point. Collective.
    ///
    /// # Panics
    ///
    /// If `retain` does not have one entry per dimension.
    #[track_caller]
    pub fn subgroup(&self, retain: &[bool]) -> CartesianCommunicator {
        self.check_len("subgroup", "retain", retain.len());
        let me = self.rank_to_coordinates(self.rank());
        let (mut color, mut dims, mut periods) = (0, Vec::new(), Vec::new());
        for (i, &keep) in retain.iter().enumerate() {
            if keep {
                dims.push(self.grid.dims[i]);
                periods.push(self.grid.periods[i]);
            } else {
                color = color * self.grid.dims[i] + me[i];
            }
        }
        let grid = Arc::new(Grid {
            dims: dims.into(),
            periods: periods.into(),
        });
        // Keyed by the old rank: within a sub-grid, the old row-major order
        // is the sub-grid's row-major order.
        let ask = Ask::new(Creation::CartesianSub, Some(color), self.rank())
            .agreeing(Agree::Retain(retain.into()));
        let new = create::create(self.core(), ask, Location::caller())
            .or_raise()
            .expect("every rank is in a sub-grid");
        // Every rank of the sub-grid computed the same grid.
        let _ = new
            .shared()
            .topology
            .get_or_init(|| Topo::Cartesian(Arc::clone(&grid)));
        CartesianCommunicator {
            comm: SimpleCommunicator::from_core(new),
            grid,
        }
    }

    /// [`get_layout_into`](Self::get_layout_into) (rsmpi's unchecked form;
    /// myriad checks anyway, it costs nothing next to a call).
    ///
    /// # Safety
    ///
    /// None needed: the checks stay (rsmpi's contract, slices of length
    /// [`num_dimensions`](Self::num_dimensions), is checked and panics).
    #[track_caller]
    pub unsafe fn get_layout_into_unchecked(
        &self,
        dims: &mut [Count],
        periods: &mut [bool],
        coords: &mut [Count],
    ) {
        self.get_layout_into(dims, periods, coords)
    }

    /// [`coordinates_to_rank`](Self::coordinates_to_rank) (rsmpi's
    /// unchecked form; checked here).
    ///
    /// # Safety
    ///
    /// None needed: the arguments are checked as by the safe form.
    #[track_caller]
    pub unsafe fn coordinates_to_rank_unchecked(&self, coords: &[Count]) -> Rank {
        self.coordinates_to_rank(coords)
    }

    /// [`rank_to_coordinates_into`](Self::rank_to_coordinates_into) (rsmpi's
    /// unchecked form; checked here).
    ///
    /// # Safety
    ///
    /// None needed: the arguments are checked as by the safe form.
    #[track_caller]
    pub unsafe fn rank_to_coordinates_into_unchecked(&self, rank: Rank, coords: &mut [Count]) {
        self.rank_to_coordinates_into(rank, coords)
    }

    /// [`shift`](Self::shift) (rsmpi's unchecked form; checked here).
    ///
    /// # Safety
    ///
    /// None needed: the arguments are checked as by the safe form.
    #[track_caller]
    pub unsafe fn shift_unchecked(
        &self,
        dimension: Count,
        displacement: Count,
    ) -> (Option<Rank>, Option<Rank>) {
        self.shift(dimension, displacement)
    }

    /// [`subgroup`](Self::subgroup) (rsmpi's unchecked form; checked here).
    ///
    /// # Safety
    ///
    /// None needed: the arguments are checked as by the safe form.
    #[track_caller]
    pub unsafe fn subgroup_unchecked(&self, retain: &[bool]) -> CartesianCommunicator {
        self.subgroup(retain)
    }

    #[track_caller]
    fn check_len(&self, op: &'static str, what: &'static str, len: usize) {
        let n = self.grid.dims.len();
        if len != n {
            raise(Error::Arg(ArgError::GridLength {
                op,
                what,
                len,
                dimensions: n,
            }));
        }
    }
}

impl AsCore for CartesianCommunicator {
    fn core(&self) -> &CommCore {
        self.comm.core()
    }

    fn attributes(&self) -> Option<&Attributes> {
        self.comm.attributes()
    }

    fn attributes_mut(&mut self) -> Option<&mut Attributes> {
        self.comm.attributes_mut()
    }
}

impl Communicator for CartesianCommunicator {}

impl From<CartesianCommunicator> for SimpleCommunicator {
    fn from(cart: CartesianCommunicator) -> SimpleCommunicator {
        cart.comm
    }
}

/// Fills the zero entries of `dims` so that the product of all entries is
/// `nnodes`, as balanced as possible and in non-increasing order
/// (`MPI_Dims_create`); positive entries are kept.
///
/// ```
/// let mut dims = [0, 0];
/// myriad::topology::dims_create(12, &mut dims);
/// assert_eq!(dims, [4, 3]);
/// let mut dims = [0, 3, 0];
/// myriad::topology::dims_create(24, &mut dims);
/// assert_eq!(dims, [4, 3, 2]);
/// ```
///
/// # Panics
///
/// If an entry is negative, or `nnodes` is not a multiple of the product
/// of the positive entries (exactly that product if none is zero).
#[track_caller]
pub fn dims_create(nnodes: Count, dims: &mut [Count]) {
    if nnodes <= 0 {
        let dims = dims.to_vec();
        raise(Error::Arg(ArgError::DimsCreateNodes { nnodes, dims }));
    }
    if dims.iter().any(|&d| d < 0) {
        let dims = dims.to_vec();
        raise(Error::Arg(ArgError::DimsCreateNegative { nnodes, dims }));
    }
    let fixed: i64 = dims.iter().filter(|&&d| d > 0).map(|&d| d as i64).product();
    let free: Vec<usize> = (0..dims.len()).filter(|&i| dims[i] == 0).collect();
    if nnodes as i64 % fixed != 0 || (free.is_empty() && fixed != nnodes as i64) {
        let dims = dims.to_vec();
        raise(Error::Arg(ArgError::DimsCreateNotMultiple {
            nnodes,
            dims,
            fixed,
        }));
    }
    if free.is_empty() {
        return;
    }
    // Prime factors, largest first, each to the free entry with the
    // smallest product so far.
    let mut rest = nnodes as i64 / fixed;
    let mut primes = Vec::new();
    let mut p: i64 = 2;
    while p * p <= rest {
        while rest % p == 0 {
            primes.push(p);
            rest /= p;
        }
        p += 1;
    }
    if rest > 1 {
        primes.push(rest);
    }
    let mut filled = vec![1 as Count; free.len()];
    for &p in primes.iter().rev() {
        let smallest = (0..filled.len())
            .min_by_key(|&i| filled[i])
            .expect("at least one free entry");
        filled[smallest] *= p as Count;
    }
    filled.sort_unstable_by(|a, b| b.cmp(a));
    for (i, value) in free.into_iter().zip(filled) {
        dims[i] = value;
    }
}
