//! Bounds and array datatypes: `MPI_Type_create_resized`,
//! `MPI_Type_create_subarray` and `MPI_Type_create_darray` (MPI 3.1 §4.1.3,
//! §4.1.4, §4.1.7), as type-map algebra and as [`UserDatatype`]
//! constructors (rsmpi 0.8 has none of them).
//!
//! ## Design
//!
//! A resized type keeps its old type's data and signature and takes the
//! given `lb` and extent. Its data may reach beyond the new upper bound (the
//! usual trick: a column type resized to one element, so that consecutive
//! elements of a scatter start one column apart); a buffer's reach and
//! scratch space follow the data, not `count * extent` ([`TypeMap::span`]).
//! Data *before* the new lower bound cannot be represented (segment offsets
//! count from `lb`) and is `Error::Unsupported`.
//!
//! A subarray and a darray are both "the elements of an n-dimensional array
//! whose index along each dimension lies in given runs": a subarray one run
//! per dimension, a darray the runs a block, cyclic or undistributed
//! distribution gives this process. Both are built by [`array`]: every run
//! along the fastest-varying dimension is one block of the old type at its
//! displacement in the whole array, blocks in array-storage order (which is
//! the type-map order MPI's nested construction gives), then resized to
//! `lb = 0` and the whole array's extent, so consecutive elements are
//! consecutive whole arrays. A Fortran-order array is a C-order array with
//! its dimensions reversed.
//!
//! The darray's process grid is row-major whatever the array's order (MPI's
//! rule), and its defaults follow MPI: a block distribution's default block
//! is `ceil(gsize / psize)`, a cyclic distribution's 1.

use super::derived::Builder;
use super::typemap::dividing;
use super::user::{UncommittedDatatype, UncommittedUserDatatype, UserDatatype};
use super::{Segment, TypeMap};
use crate::error::{ArgError, OrRaise};
use crate::{Address, Count, Error};

/// The storage order of a multi-dimensional array (`MPI_ORDER_C`,
/// `MPI_ORDER_FORTRAN`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Order {
    /// Row-major: the last dimension varies fastest.
    C,
    /// Column-major: the first dimension varies fastest.
    Fortran,
}

/// How one dimension of a distributed array is spread over the process
/// grid's dimension of the same index (`MPI_DISTRIBUTE_*`; `None` in a
/// block size means `MPI_DISTRIBUTE_DFLT_DARG`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Distribution {
    /// Contiguous blocks, one per process, of the given size (default:
    /// `ceil(gsize / psize)`); the blocks must cover the dimension.
    Block(Option<Count>),
    /// Blocks of the given size (default 1) dealt out round-robin.
    Cyclic(Option<Count>),
    /// Not distributed: every process has the whole dimension (its process
    /// grid dimension must be 1).
    None,
}

impl Distribution {
    fn name(self) -> &'static str {
        match self {
            Distribution::Block(_) => "block",
            Distribution::Cyclic(_) => "cyclic",
            Distribution::None => "none",
        }
    }
}

/// `old` with lower bound `lb` and extent `extent` bytes
/// (`MPI_Type_create_resized`).
pub(crate) fn resized(old: &TypeMap, lb: Address, extent: Address) -> Result<TypeMap, Error> {
    let name = format!("resized({}, lb {lb}, extent {extent})", old.name());
    resized_as(old, lb, extent, name)
}

/// [`resized`], named `name`.
fn resized_as(old: &TypeMap, lb: Address, extent: Address, name: String) -> Result<TypeMap, Error> {
    const OP: &str = "create_resized";
    let extent = usize::try_from(extent)
        .ok()
        .filter(|&e| e <= isize::MAX as usize)
        .ok_or(Error::Arg(ArgError::NegativeExtent { extent }))?;
    if lb.checked_add_unsigned(extent).is_none() {
        return Err(Error::Arg(ArgError::DatatypeOverflow { constructor: OP }));
    }
    // Segment offsets count from the lower bound: they move by the shift.
    let shift = old.lb() as i128 - lb as i128;
    let mut segments = Vec::with_capacity(old.segments().len());
    for seg in old.segments() {
        let offset = usize::try_from(shift + seg.offset as i128).map_err(|_| {
            Error::unsupported(format!(
                "UserDatatype::create_resized: `{}` has data at byte {}, before the new lower \
                 bound {lb} (myriad's type maps hold no data before their lower bound)",
                old.name(),
                old.lb() as i128 + seg.offset as i128
            ))
        })?;
        segments.push(Segment {
            offset,
            len: seg.len,
        });
    }
    Ok(TypeMap::from_parts(
        name,
        lb,
        extent,
        segments,
        old.signature().to_vec(),
        dividing(old.align(), extent),
    ))
}

/// Runs of indices `(start, len)` along one dimension, increasing.
type Runs = Vec<(usize, usize)>;

/// The elements of a C-order array of `sizes` (fastest last) whose index
/// along dimension `d` lies in `runs[d]`, in storage order, with `lb = 0`
/// and the whole array's extent.
fn array(
    op: &'static str,
    name: String,
    sizes: &[usize],
    runs: &[Runs],
    old: &TypeMap,
) -> Result<TypeMap, Error> {
    let overflow = || Error::Arg(ArgError::DatatypeOverflow { constructor: op });
    let elements = sizes
        .iter()
        .try_fold(1usize, |n, &s| n.checked_mul(s))
        .ok_or_else(overflow)?;
    let whole = elements.checked_mul(old.extent()).ok_or_else(overflow)?;
    let whole = Address::try_from(whole).map_err(|_| overflow())?;
    // Strides in elements: dimension d advances by stride[d].
    let mut strides = vec![1usize; sizes.len()];
    for d in (0..sizes.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * sizes[d + 1];
    }
    let last = sizes.len() - 1;
    let mut b = Builder::new(op);
    let extent = old.extent() as i128;
    // Odometer over the outer dimensions' indices (every index of every
    // run, the innermost outer dimension fastest); the last dimension's runs
    // are the blocks.
    let outer: Vec<Vec<usize>> = runs[..last]
        .iter()
        .map(|rs| rs.iter().flat_map(|&(s, n)| s..s + n).collect())
        .collect();
    let mut at = vec![0usize; last];
    let mut more = outer.iter().all(|ix| !ix.is_empty());
    while more {
        let base: usize = (0..last).map(|d| outer[d][at[d]] * strides[d]).sum();
        for &(start, len) in &runs[last] {
            b.block((base + start) as i128 * extent, len, old)?;
        }
        more = false;
        for d in (0..last).rev() {
            at[d] += 1;
            if at[d] < outer[d].len() {
                more = true;
                break;
            }
            at[d] = 0;
        }
    }
    let map = b.finish(name.clone(), false)?;
    resized_as(&map, 0, whole, name)
}

/// Checks that the slices of a constructor have `n` entries each.
fn lengths(op: &'static str, n: usize, slices: &[(&'static str, usize)]) -> Result<(), Error> {
    if n == 0 {
        return Err(Error::Arg(ArgError::NoDimensions { constructor: op }));
    }
    for &(what, len) in slices {
        if len != n {
            return Err(Error::Arg(ArgError::DimensionLists {
                constructor: op,
                dims: n,
                what,
                len,
            }));
        }
    }
    Ok(())
}

/// In C order (fastest last): the slice as given, or reversed.
fn c_order<T: Copy>(order: Order, xs: &[T]) -> Vec<T> {
    match order {
        Order::C => xs.to_vec(),
        Order::Fortran => xs.iter().rev().copied().collect(),
    }
}

/// The `subsizes` block starting at `starts` of an array of `sizes`
/// (`MPI_Type_create_subarray`).
pub(crate) fn subarray(
    sizes: &[Count],
    subsizes: &[Count],
    starts: &[Count],
    order: Order,
    old: &TypeMap,
) -> Result<TypeMap, Error> {
    const OP: &str = "subarray";
    lengths(
        OP,
        sizes.len(),
        &[("subsizes", subsizes.len()), ("starts", starts.len())],
    )?;
    for d in 0..sizes.len() {
        let (size, sub, start) = (sizes[d], subsizes[d], starts[d]);
        if size < 1 || sub < 1 || sub > size || start < 0 || start > size - sub {
            return Err(Error::Arg(ArgError::SubarrayDimension {
                dim: d,
                size,
                subsize: sub,
                start,
            }));
        }
    }
    let sizes_c: Vec<usize> = c_order(order, sizes).iter().map(|&s| s as usize).collect();
    let runs: Vec<Runs> = c_order(order, starts)
        .iter()
        .zip(c_order(order, subsizes))
        .map(|(&s, n)| vec![(s as usize, n as usize)])
        .collect();
    let name = format!(
        "subarray({subsizes:?} at {starts:?} of {sizes:?}, {order:?} order, {})",
        old.name()
    );
    array(OP, name, &sizes_c, &runs, old)
}

/// Process `rank`'s part of an array of `gsizes` distributed over a
/// row-major process grid of `psizes` (`MPI_Type_create_darray`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn darray(
    size: Count,
    rank: Count,
    gsizes: &[Count],
    distribs: &[Distribution],
    psizes: &[Count],
    order: Order,
    old: &TypeMap,
) -> Result<TypeMap, Error> {
    const OP: &str = "darray";
    let n = gsizes.len();
    lengths(
        OP,
        n,
        &[("distribs", distribs.len()), ("psizes", psizes.len())],
    )?;
    let procs = psizes
        .iter()
        .try_fold(1i64, |p, &s| (s >= 1).then(|| p.saturating_mul(s.into())));
    if procs != Some(i64::from(size)) || rank < 0 || rank >= size {
        return Err(Error::Arg(ArgError::DarrayGrid {
            size,
            rank,
            psizes: psizes.to_vec(),
        }));
    }
    // The process's coordinates in the row-major grid.
    let mut coords = vec![0usize; n];
    let mut left = rank as usize;
    for d in (0..n).rev() {
        coords[d] = left % psizes[d] as usize;
        left /= psizes[d] as usize;
    }
    let mut runs = Vec::with_capacity(n);
    for d in 0..n {
        let (g, p, c) = (gsizes[d], psizes[d], coords[d]);
        let bad = |darg: Count| {
            Error::Arg(ArgError::DarrayDimension {
                dim: d,
                gsize: g,
                distribution: distribs[d].name(),
                darg,
                psize: p,
            })
        };
        if g < 1 {
            return Err(bad(0));
        }
        let (g, p) = (g as usize, p as usize);
        runs.push(match distribs[d] {
            Distribution::None if p == 1 => vec![(0, g)],
            Distribution::None => return Err(bad(0)),
            Distribution::Block(darg) => {
                let block = match darg {
                    None => g.div_ceil(p),
                    Some(b) if b >= 1 && (b as usize).saturating_mul(p) >= g => b as usize,
                    Some(b) => return Err(bad(b)),
                };
                let start = (c * block).min(g);
                vec![(start, block.min(g - start))]
            }
            Distribution::Cyclic(darg) => {
                let block = match darg {
                    None => 1,
                    Some(b) if b >= 1 => b as usize,
                    Some(b) => return Err(bad(b)),
                };
                (c * block..g)
                    .step_by(block * p)
                    .map(|s| (s, block.min(g - s)))
                    .collect()
            }
        });
    }
    let runs = match order {
        Order::C => runs,
        Order::Fortran => runs.into_iter().rev().collect(),
    };
    let sizes_c: Vec<usize> = c_order(order, gsizes).iter().map(|&s| s as usize).collect();
    let name = format!(
        "darray(rank {rank} of {psizes:?}, {gsizes:?}, {order:?} order, {})",
        old.name()
    );
    array(OP, name, &sizes_c, &runs, old)
}

impl UserDatatype {
    /// `oldtype` with lower bound `lb` and extent `extent` in bytes
    /// (`MPI_Type_create_resized`): consecutive elements start `extent`
    /// bytes apart. The data may reach beyond the new upper bound (elements
    /// then interleave), not before the new lower bound.
    ///
    /// ```
    /// use myriad::datatype::UserDatatype;
    /// use myriad::traits::*;
    ///
    /// // A column of a 3x3 matrix of f64, resized to one f64: element i of
    /// // a buffer of these is column i.
    /// let column = UserDatatype::vector(3, 1, 3, &f64::equivalent_datatype());
    /// let column = UserDatatype::create_resized(&column, 0, 8);
    /// assert_eq!((column.type_map().size(), column.type_map().extent()), (24, 8));
    /// ```
    ///
    /// # Panics
    ///
    /// If `extent` is negative, or data would lie before `lb`.
    #[track_caller]
    pub fn create_resized<D>(oldtype: &D, lb: Address, extent: Address) -> UserDatatype
    where
        D: UncommittedDatatype + ?Sized,
    {
        Self::try_create_resized(oldtype, lb, extent).or_raise()
    }

    /// Like [`create_resized`](Self::create_resized), returning errors.
    pub fn try_create_resized<D>(
        oldtype: &D,
        lb: Address,
        extent: Address,
    ) -> Result<UserDatatype, Error>
    where
        D: UncommittedDatatype + ?Sized,
    {
        resized(oldtype.uncommitted_type_map(), lb, extent).map(Self::from_type_map)
    }

    /// The `subsizes` block at `starts` of an array of `sizes` elements of
    /// `oldtype` stored in `order` (`MPI_Type_create_subarray`). Its lower
    /// bound is 0 and its extent the whole array's.
    ///
    /// ```
    /// use myriad::datatype::{Order, UserDatatype};
    /// use myriad::traits::*;
    ///
    /// // The middle 2x2 of a 4x4 array of i32 (row-major): elements 5, 6, 9, 10.
    /// let t = UserDatatype::subarray(&[4, 4], &[2, 2], &[1, 1], Order::C, &i32::equivalent_datatype());
    /// assert_eq!((t.type_map().size(), t.type_map().extent()), (16, 64));
    /// ```
    ///
    /// # Panics
    ///
    /// If the slices differ in length or are empty, or a dimension has
    /// `size < 1`, `subsize` outside `1..=size` or `start` outside
    /// `0..=size - subsize`.
    #[track_caller]
    pub fn subarray<D>(
        sizes: &[Count],
        subsizes: &[Count],
        starts: &[Count],
        order: Order,
        oldtype: &D,
    ) -> UserDatatype
    where
        D: UncommittedDatatype + ?Sized,
    {
        Self::try_subarray(sizes, subsizes, starts, order, oldtype).or_raise()
    }

    /// Like [`subarray`](Self::subarray), returning errors.
    pub fn try_subarray<D>(
        sizes: &[Count],
        subsizes: &[Count],
        starts: &[Count],
        order: Order,
        oldtype: &D,
    ) -> Result<UserDatatype, Error>
    where
        D: UncommittedDatatype + ?Sized,
    {
        subarray(
            sizes,
            subsizes,
            starts,
            order,
            oldtype.uncommitted_type_map(),
        )
        .map(Self::from_type_map)
    }

    /// The part of an array of `gsizes` elements of `oldtype` (stored in
    /// `order`) that process `rank` of `size` owns when dimension `d` is
    /// spread by `distribs[d]` over dimension `d` of a row-major grid of
    /// `psizes` processes (`MPI_Type_create_darray`). Its lower bound is 0
    /// and its extent the whole array's.
    ///
    /// ```
    /// use myriad::datatype::{Distribution, Order, UserDatatype};
    /// use myriad::traits::*;
    ///
    /// // 10 i32 dealt cyclically in blocks of 2 to 2 processes: rank 1 has
    /// // elements 2, 3, 6, 7.
    /// let t = UserDatatype::darray(
    ///     2, 1, &[10], &[Distribution::Cyclic(Some(2))], &[2], Order::C,
    ///     &i32::equivalent_datatype(),
    /// );
    /// assert_eq!((t.type_map().size(), t.type_map().extent()), (16, 40));
    /// ```
    ///
    /// # Panics
    ///
    /// If the slices differ in length or are empty, `psizes` does not
    /// multiply to `size`, `rank` is outside `0..size`, or a dimension's
    /// distribution does not fit (a block that does not cover the
    /// dimension, a block size below 1, an undistributed dimension over
    /// several processes).
    #[track_caller]
    #[allow(clippy::too_many_arguments)]
    pub fn darray<D>(
        size: Count,
        rank: Count,
        gsizes: &[Count],
        distribs: &[Distribution],
        psizes: &[Count],
        order: Order,
        oldtype: &D,
    ) -> UserDatatype
    where
        D: UncommittedDatatype + ?Sized,
    {
        Self::try_darray(size, rank, gsizes, distribs, psizes, order, oldtype).or_raise()
    }

    /// Like [`darray`](Self::darray), returning errors.
    #[allow(clippy::too_many_arguments)]
    pub fn try_darray<D>(
        size: Count,
        rank: Count,
        gsizes: &[Count],
        distribs: &[Distribution],
        psizes: &[Count],
        order: Order,
        oldtype: &D,
    ) -> Result<UserDatatype, Error>
    where
        D: UncommittedDatatype + ?Sized,
    {
        let old = oldtype.uncommitted_type_map();
        darray(size, rank, gsizes, distribs, psizes, order, old).map(Self::from_type_map)
    }
}

impl UncommittedUserDatatype {
    /// As [`UserDatatype::create_resized`].
    #[track_caller]
    pub fn create_resized<D>(oldtype: &D, lb: Address, extent: Address) -> Self
    where
        D: UncommittedDatatype + ?Sized,
    {
        Self::from(UserDatatype::try_create_resized(oldtype, lb, extent).or_raise())
    }

    /// As [`UserDatatype::subarray`].
    #[track_caller]
    pub fn subarray<D>(
        sizes: &[Count],
        subsizes: &[Count],
        starts: &[Count],
        order: Order,
        oldtype: &D,
    ) -> Self
    where
        D: UncommittedDatatype + ?Sized,
    {
        Self::from(UserDatatype::try_subarray(sizes, subsizes, starts, order, oldtype).or_raise())
    }

    /// As [`UserDatatype::darray`].
    #[track_caller]
    #[allow(clippy::too_many_arguments)]
    pub fn darray<D>(
        size: Count,
        rank: Count,
        gsizes: &[Count],
        distribs: &[Distribution],
        psizes: &[Count],
        order: Order,
        oldtype: &D,
    ) -> Self
    where
        D: UncommittedDatatype + ?Sized,
    {
        Self::from(
            UserDatatype::try_darray(size, rank, gsizes, distribs, psizes, order, oldtype)
                .or_raise(),
        )
    }
}
