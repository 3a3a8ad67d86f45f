//! User datatypes (rsmpi's `UserDatatype`, `UncommittedUserDatatype`,
//! `UncommittedDatatype`, `UncommittedDatatypeRef`): derived datatypes built
//! at run time from other datatypes.
//!
//! The constructors mirror MPI's (`MPI_Type_contiguous`, `MPI_Type_vector`,
//! ...) with rsmpi's names and argument orders; the type-map rules are in
//! `derived.rs` and the [module docs](super#the-type-map-model). In MPI a
//! type must be committed before it is used for communication; in myriad
//! building the type map *is* the commit, so [`UncommittedUserDatatype`] is
//! a thin wrapper whose [`commit`](UncommittedUserDatatype::commit) just
//! hands the map to a [`UserDatatype`]. Both flavours can be nested in
//! further constructors.
//!
//! Constructors panic with the `Display` of an [`Error`] on bad arguments, as
//! rsmpi's abort; the `try_*` forms on [`UserDatatype`] return it instead.

use std::sync::Arc;

use super::derived;
use super::{Datatype, DatatypeRef, RefMap, TypeHandle, TypeMap};
use crate::error::OrRaise;
use crate::{Address, Count, Error};

/// A datatype that can be used to build other datatypes: every datatype,
/// committed or not (rsmpi's `UncommittedDatatype`).
pub trait UncommittedDatatype {
    /// What [`dup`](Self::dup) returns: a [`UserDatatype`] for committed
    /// types, an [`UncommittedUserDatatype`] for uncommitted ones.
    type DuplicatedDatatype;

    /// The type map (internal; use [`Datatype::type_map`] on committed types).
    #[doc(hidden)]
    fn uncommitted_type_map(&self) -> &TypeMap;

    /// A new datatype with the same type map (`MPI_Type_dup`).
    ///
    /// ```
    /// use myriad::datatype::UncommittedDatatype;
    /// use myriad::traits::*;
    ///
    /// let ints = i32::equivalent_datatype().dup();
    /// assert_eq!(ints.type_map().signature(), i32::equivalent_datatype().type_map().signature());
    /// ```
    fn dup(&self) -> Self::DuplicatedDatatype;
}

impl<D: UncommittedDatatype + ?Sized> UncommittedDatatype for &D {
    type DuplicatedDatatype = D::DuplicatedDatatype;

    fn uncommitted_type_map(&self) -> &TypeMap {
        (**self).uncommitted_type_map()
    }

    fn dup(&self) -> Self::DuplicatedDatatype {
        (**self).dup()
    }
}

impl UncommittedDatatype for DatatypeRef<'_> {
    type DuplicatedDatatype = UserDatatype;

    fn uncommitted_type_map(&self) -> &TypeMap {
        self.type_map()
    }

    fn dup(&self) -> UserDatatype {
        match self.map {
            RefMap::Static(map) | RefMap::Borrowed(map) => UserDatatype::from_type_map(map.clone()),
            RefMap::Shared(map) => UserDatatype {
                map: Arc::clone(map),
            },
        }
    }
}

/// A datatype built at run time (rsmpi's `UserDatatype`): committed, owned,
/// cheap to clone, `Send + Sync`.
///
/// ```
/// use myriad::datatype::{UserDatatype, View};
/// use myriad::traits::*;
///
/// // The second column of a 3 x 4 row-major matrix.
/// let column = UserDatatype::vector(3, 1, 4, &f64::equivalent_datatype());
/// let matrix: Vec<f64> = (0..12).map(f64::from).collect();
/// // SAFETY: the vector type selects elements 1, 5 and 9 of `matrix`.
/// let view = unsafe { View::with_count_and_datatype(&matrix[1..], 1, &column) };
/// assert_eq!(myriad::datatype::pack(&view).len(), 3 * 8);
/// ```
#[derive(Debug, Clone)]
pub struct UserDatatype {
    map: Arc<TypeMap>,
}

impl UserDatatype {
    /// A datatype with the given type map.
    pub fn from_type_map(map: TypeMap) -> Self {
        UserDatatype { map: Arc::new(map) }
    }

    /// `count` copies of `oldtype` back to back (`MPI_Type_contiguous`).
    ///
    /// ```
    /// use myriad::datatype::UserDatatype;
    /// use myriad::traits::*;
    ///
    /// let t = UserDatatype::contiguous(3, &f64::equivalent_datatype());
    /// assert_eq!((t.type_map().size(), t.type_map().extent()), (24, 24));
    /// assert!(t.type_map().is_contiguous());
    /// ```
    #[track_caller]
    pub fn contiguous<D>(count: Count, oldtype: &D) -> UserDatatype
    where
        D: UncommittedDatatype + ?Sized,
    {
        Self::try_contiguous(count, oldtype).or_raise()
    }

    /// Like [`contiguous`](Self::contiguous), returning errors (a negative
    /// count is `Error::Count`).
    pub fn try_contiguous<D>(count: Count, oldtype: &D) -> Result<UserDatatype, Error>
    where
        D: UncommittedDatatype + ?Sized,
    {
        derived::contiguous(count, oldtype.uncommitted_type_map()).map(Self::from_type_map)
    }

    /// `count` blocks of `blocklength` copies of `oldtype`, the starts of
    /// consecutive blocks `stride` elements of `oldtype` apart
    /// (`MPI_Type_vector`). The extent runs from the first block's start to
    /// the last block's end, so consecutive elements of a buffer of this type
    /// are *not* `stride * count` apart; a negative stride places blocks
    /// before the origin (`lb < 0`).
    ///
    /// ```
    /// use myriad::datatype::UserDatatype;
    /// use myriad::traits::*;
    ///
    /// // x x _ x x
    /// let t = UserDatatype::vector(2, 2, 3, &f64::equivalent_datatype());
    /// assert_eq!((t.type_map().size(), t.type_map().extent()), (32, 40));
    /// ```
    #[track_caller]
    pub fn vector<D>(count: Count, blocklength: Count, stride: Count, oldtype: &D) -> UserDatatype
    where
        D: UncommittedDatatype + ?Sized,
    {
        Self::try_vector(count, blocklength, stride, oldtype).or_raise()
    }

    /// Like [`vector`](Self::vector), returning errors.
    pub fn try_vector<D>(
        count: Count,
        blocklength: Count,
        stride: Count,
        oldtype: &D,
    ) -> Result<UserDatatype, Error>
    where
        D: UncommittedDatatype + ?Sized,
    {
        derived::vector(count, blocklength, stride, oldtype.uncommitted_type_map())
            .map(Self::from_type_map)
    }

    /// Like [`vector`](Self::vector) with `stride` in bytes
    /// (`MPI_Type_create_hvector`).
    ///
    /// ```
    /// use myriad::datatype::UserDatatype;
    /// use myriad::traits::*;
    ///
    /// // One i32 out of every 6 bytes, three times: 0..4, 6..10, 12..16.
    /// let t = UserDatatype::heterogeneous_vector(3, 1, 6, &i32::equivalent_datatype());
    /// assert_eq!((t.type_map().size(), t.type_map().extent()), (12, 16));
    /// ```
    #[track_caller]
    pub fn heterogeneous_vector<D>(
        count: Count,
        blocklength: Count,
        stride: Address,
        oldtype: &D,
    ) -> UserDatatype
    where
        D: UncommittedDatatype + ?Sized,
    {
        Self::try_heterogeneous_vector(count, blocklength, stride, oldtype).or_raise()
    }

    /// Like [`heterogeneous_vector`](Self::heterogeneous_vector), returning
    /// errors.
    pub fn try_heterogeneous_vector<D>(
        count: Count,
        blocklength: Count,
        stride: Address,
        oldtype: &D,
    ) -> Result<UserDatatype, Error>
    where
        D: UncommittedDatatype + ?Sized,
    {
        derived::heterogeneous_vector(count, blocklength, stride, oldtype.uncommitted_type_map())
            .map(Self::from_type_map)
    }

    /// Block `i` is `blocklengths[i]` copies of `oldtype` displaced by
    /// `displacements[i]` elements of `oldtype` (`MPI_Type_indexed`). Blocks
    /// keep their order in the type map, whatever their addresses.
    ///
    /// ```
    /// use myriad::datatype::UserDatatype;
    /// use myriad::traits::*;
    ///
    /// // Elements 4, 5 then 1 of an i32 array: lb 4 bytes, ub 24 bytes.
    /// let t = UserDatatype::indexed(&[2, 1], &[4, 1], &i32::equivalent_datatype());
    /// let map = t.type_map();
    /// assert_eq!((map.size(), map.lb(), map.extent()), (12, 4, 20));
    /// ```
    #[track_caller]
    pub fn indexed<D>(blocklengths: &[Count], displacements: &[Count], oldtype: &D) -> UserDatatype
    where
        D: UncommittedDatatype + ?Sized,
    {
        Self::try_indexed(blocklengths, displacements, oldtype).or_raise()
    }

    /// Like [`indexed`](Self::indexed), returning errors (slices of
    /// different lengths are `Error::Arg`).
    pub fn try_indexed<D>(
        blocklengths: &[Count],
        displacements: &[Count],
        oldtype: &D,
    ) -> Result<UserDatatype, Error>
    where
        D: UncommittedDatatype + ?Sized,
    {
        derived::indexed(blocklengths, displacements, oldtype.uncommitted_type_map())
            .map(Self::from_type_map)
    }

    /// Like [`indexed`](Self::indexed) with displacements in bytes
    /// (`MPI_Type_create_hindexed`).
    ///
    /// ```
    /// use myriad::datatype::UserDatatype;
    /// use myriad::traits::*;
    ///
    /// let t = UserDatatype::heterogeneous_indexed(&[1, 2], &[16, 0], &i32::equivalent_datatype());
    /// assert_eq!((t.type_map().size(), t.type_map().extent()), (12, 20));
    /// ```
    #[track_caller]
    pub fn heterogeneous_indexed<D>(
        blocklengths: &[Count],
        displacements: &[Address],
        oldtype: &D,
    ) -> UserDatatype
    where
        D: UncommittedDatatype + ?Sized,
    {
        Self::try_heterogeneous_indexed(blocklengths, displacements, oldtype).or_raise()
    }

    /// Like [`heterogeneous_indexed`](Self::heterogeneous_indexed), returning
    /// errors.
    pub fn try_heterogeneous_indexed<D>(
        blocklengths: &[Count],
        displacements: &[Address],
        oldtype: &D,
    ) -> Result<UserDatatype, Error>
    where
        D: UncommittedDatatype + ?Sized,
    {
        derived::heterogeneous_indexed(blocklengths, displacements, oldtype.uncommitted_type_map())
            .map(Self::from_type_map)
    }

    /// Blocks of `blocklength` copies of `oldtype` at `displacements[i]`
    /// elements of `oldtype` (`MPI_Type_create_indexed_block`).
    ///
    /// ```
    /// use myriad::datatype::UserDatatype;
    /// use myriad::traits::*;
    ///
    /// let t = UserDatatype::indexed_block(2, &[0, 5], &i32::equivalent_datatype());
    /// assert_eq!((t.type_map().size(), t.type_map().extent()), (16, 28));
    /// ```
    #[track_caller]
    pub fn indexed_block<D>(
        blocklength: Count,
        displacements: &[Count],
        oldtype: &D,
    ) -> UserDatatype
    where
        D: UncommittedDatatype + ?Sized,
    {
        Self::try_indexed_block(blocklength, displacements, oldtype).or_raise()
    }

    /// Like [`indexed_block`](Self::indexed_block), returning errors.
    pub fn try_indexed_block<D>(
        blocklength: Count,
        displacements: &[Count],
        oldtype: &D,
    ) -> Result<UserDatatype, Error>
    where
        D: UncommittedDatatype + ?Sized,
    {
        derived::indexed_block(blocklength, displacements, oldtype.uncommitted_type_map())
            .map(Self::from_type_map)
    }

    /// Like [`indexed_block`](Self::indexed_block) with displacements in
    /// bytes (`MPI_Type_create_hindexed_block`).
    ///
    /// ```
    /// use myriad::datatype::UserDatatype;
    /// use myriad::traits::*;
    ///
    /// let t = UserDatatype::heterogeneous_indexed_block(1, &[10, 2], &i32::equivalent_datatype());
    /// assert_eq!((t.type_map().lb(), t.type_map().extent()), (2, 12));
    /// ```
    #[track_caller]
    pub fn heterogeneous_indexed_block<D>(
        blocklength: Count,
        displacements: &[Address],
        oldtype: &D,
    ) -> UserDatatype
    where
        D: UncommittedDatatype + ?Sized,
    {
        Self::try_heterogeneous_indexed_block(blocklength, displacements, oldtype).or_raise()
    }

    /// Like [`heterogeneous_indexed_block`](Self::heterogeneous_indexed_block),
    /// returning errors.
    pub fn try_heterogeneous_indexed_block<D>(
        blocklength: Count,
        displacements: &[Address],
        oldtype: &D,
    ) -> Result<UserDatatype, Error>
    where
        D: UncommittedDatatype + ?Sized,
    {
        derived::heterogeneous_indexed_block(
            blocklength,
            displacements,
            oldtype.uncommitted_type_map(),
        )
        .map(Self::from_type_map)
    }

    /// Block `i` is `blocklengths[i]` copies of `types[i]` at
    /// `displacements[i]` bytes (`MPI_Type_create_struct`). The extent is
    /// rounded up to the largest alignment of the base types, as MPI does, so
    /// describing a Rust struct field by field (with `offset_of!`) gives its
    /// `size_of` as the extent.
    ///
    /// ```
    /// use myriad::datatype::UserDatatype;
    /// use myriad::traits::*;
    /// use myriad::Address;
    ///
    /// struct Pair {
    ///     x: f64,
    ///     tag: u8,
    /// }
    /// let t = UserDatatype::structured(
    ///     &[1, 1],
    ///     &[
    ///         std::mem::offset_of!(Pair, x) as Address,
    ///         std::mem::offset_of!(Pair, tag) as Address,
    ///     ],
    ///     &[f64::equivalent_datatype(), u8::equivalent_datatype()],
    /// );
    /// assert_eq!(t.type_map().size(), 9);
    /// assert_eq!(t.type_map().extent(), std::mem::size_of::<Pair>());
    /// ```
    #[track_caller]
    pub fn structured<D>(
        blocklengths: &[Count],
        displacements: &[Address],
        types: &[D],
    ) -> UserDatatype
    where
        D: UncommittedDatatype,
    {
        Self::try_structured(blocklengths, displacements, types).or_raise()
    }

    /// Like [`structured`](Self::structured), returning errors.
    pub fn try_structured<D>(
        blocklengths: &[Count],
        displacements: &[Address],
        types: &[D],
    ) -> Result<UserDatatype, Error>
    where
        D: UncommittedDatatype,
    {
        let maps: Vec<&TypeMap> = types.iter().map(|t| t.uncommitted_type_map()).collect();
        derived::structured(blocklengths, displacements, &maps).map(Self::from_type_map)
    }

    /// A borrowed handle to this datatype (rsmpi's `UserDatatype::as_ref`).
    #[allow(clippy::should_implement_trait)]
    pub fn as_ref(&self) -> DatatypeRef<'_> {
        DatatypeRef::shared(&self.map)
    }
}

// SAFETY: the map is shared and immutable; the handle is another reference
// count of it.
unsafe impl Datatype for UserDatatype {
    fn type_map(&self) -> &TypeMap {
        &self.map
    }

    fn handle(&self) -> TypeHandle {
        TypeHandle::shared(Arc::clone(&self.map))
    }
}

impl UncommittedDatatype for UserDatatype {
    type DuplicatedDatatype = UserDatatype;

    fn uncommitted_type_map(&self) -> &TypeMap {
        &self.map
    }

    /// Another handle to the same (immutable) type map.
    fn dup(&self) -> UserDatatype {
        self.clone()
    }
}

impl<'a> From<&'a UserDatatype> for DatatypeRef<'a> {
    fn from(datatype: &'a UserDatatype) -> Self {
        datatype.as_ref()
    }
}

impl<'a> From<&'a UserDatatype> for UncommittedDatatypeRef<'a> {
    fn from(datatype: &'a UserDatatype) -> Self {
        UncommittedDatatypeRef { map: &datatype.map }
    }
}

/// A datatype under construction (rsmpi's `UncommittedUserDatatype`): can be
/// nested in other constructors, and [`commit`](Self::commit)ted to be used
/// for communication. Committing costs nothing in myriad.
///
/// ```
/// use myriad::datatype::{UncommittedUserDatatype, UserDatatype};
/// use myriad::traits::*;
///
/// let row = UncommittedUserDatatype::contiguous(4, &i32::equivalent_datatype());
/// let rows = UserDatatype::vector(2, 1, 2, &row.as_ref());
/// assert_eq!(rows.type_map().size(), 32);
/// let row: UserDatatype = row.commit();
/// assert_eq!(row.type_map().extent(), 16);
/// ```
#[derive(Debug, Clone)]
pub struct UncommittedUserDatatype {
    map: TypeMap,
}

impl UncommittedUserDatatype {
    /// As [`UserDatatype::contiguous`].
    #[track_caller]
    pub fn contiguous<D>(count: Count, oldtype: &D) -> Self
    where
        D: UncommittedDatatype + ?Sized,
    {
        Self::from(UserDatatype::try_contiguous(count, oldtype).or_raise())
    }

    /// As [`UserDatatype::vector`].
    #[track_caller]
    pub fn vector<D>(count: Count, blocklength: Count, stride: Count, oldtype: &D) -> Self
    where
        D: UncommittedDatatype + ?Sized,
    {
        Self::from(UserDatatype::try_vector(count, blocklength, stride, oldtype).or_raise())
    }

    /// As [`UserDatatype::heterogeneous_vector`].
    #[track_caller]
    pub fn heterogeneous_vector<D>(
        count: Count,
        blocklength: Count,
        stride: Address,
        oldtype: &D,
    ) -> Self
    where
        D: UncommittedDatatype + ?Sized,
    {
        Self::from(
            UserDatatype::try_heterogeneous_vector(count, blocklength, stride, oldtype).or_raise(),
        )
    }

    /// As [`UserDatatype::indexed`].
    #[track_caller]
    pub fn indexed<D>(blocklengths: &[Count], displacements: &[Count], oldtype: &D) -> Self
    where
        D: UncommittedDatatype + ?Sized,
    {
        Self::from(UserDatatype::try_indexed(blocklengths, displacements, oldtype).or_raise())
    }

    /// As [`UserDatatype::heterogeneous_indexed`].
    #[track_caller]
    pub fn heterogeneous_indexed<D>(
        blocklengths: &[Count],
        displacements: &[Address],
        oldtype: &D,
    ) -> Self
    where
        D: UncommittedDatatype + ?Sized,
    {
        Self::from(
            UserDatatype::try_heterogeneous_indexed(blocklengths, displacements, oldtype)
                .or_raise(),
        )
    }

    /// As [`UserDatatype::indexed_block`].
    #[track_caller]
    pub fn indexed_block<D>(blocklength: Count, displacements: &[Count], oldtype: &D) -> Self
    where
        D: UncommittedDatatype + ?Sized,
    {
        Self::from(UserDatatype::try_indexed_block(blocklength, displacements, oldtype).or_raise())
    }

    /// As [`UserDatatype::heterogeneous_indexed_block`].
    #[track_caller]
    pub fn heterogeneous_indexed_block<D>(
        blocklength: Count,
        displacements: &[Address],
        oldtype: &D,
    ) -> Self
    where
        D: UncommittedDatatype + ?Sized,
    {
        Self::from(
            UserDatatype::try_heterogeneous_indexed_block(blocklength, displacements, oldtype)
                .or_raise(),
        )
    }

    /// As [`UserDatatype::structured`].
    #[track_caller]
    pub fn structured<D>(blocklengths: &[Count], displacements: &[Address], types: &[D]) -> Self
    where
        D: UncommittedDatatype,
    {
        Self::from(UserDatatype::try_structured(blocklengths, displacements, types).or_raise())
    }

    /// The committed datatype, ready for communication (`MPI_Type_commit`).
    pub fn commit(self) -> UserDatatype {
        UserDatatype::from_type_map(self.map)
    }

    /// A borrowed handle, to nest this type in other constructors.
    #[allow(clippy::should_implement_trait)]
    pub fn as_ref(&self) -> UncommittedDatatypeRef<'_> {
        UncommittedDatatypeRef { map: &self.map }
    }
}

impl From<UserDatatype> for UncommittedUserDatatype {
    fn from(datatype: UserDatatype) -> Self {
        let map = Arc::try_unwrap(datatype.map).unwrap_or_else(|map| (*map).clone());
        UncommittedUserDatatype { map }
    }
}

impl UncommittedDatatype for UncommittedUserDatatype {
    type DuplicatedDatatype = UncommittedUserDatatype;

    fn uncommitted_type_map(&self) -> &TypeMap {
        &self.map
    }

    fn dup(&self) -> UncommittedUserDatatype {
        self.clone()
    }
}

impl<'a> From<&'a UncommittedUserDatatype> for UncommittedDatatypeRef<'a> {
    fn from(datatype: &'a UncommittedUserDatatype) -> Self {
        datatype.as_ref()
    }
}

/// A borrowed handle to a datatype that may not be committed (rsmpi's
/// `UncommittedDatatypeRef`): what a slice of mixed types passed to
/// [`UserDatatype::structured`] is made of.
///
/// ```
/// use myriad::datatype::{UncommittedDatatypeRef, UncommittedUserDatatype, UserDatatype};
/// use myriad::traits::*;
///
/// let ints = UncommittedUserDatatype::contiguous(4, &i32::equivalent_datatype());
/// let t = UserDatatype::structured(
///     &[1, 1],
///     &[0, 16],
///     &[ints.as_ref(), UncommittedDatatypeRef::from(f64::equivalent_datatype())],
/// );
/// assert_eq!((t.type_map().size(), t.type_map().extent()), (24, 24));
/// ```
#[derive(Debug, Clone, Copy)]
pub struct UncommittedDatatypeRef<'a> {
    map: &'a TypeMap,
}

impl<'a> From<DatatypeRef<'a>> for UncommittedDatatypeRef<'a> {
    fn from(datatype: DatatypeRef<'a>) -> Self {
        let map = match datatype.map {
            RefMap::Static(map) | RefMap::Borrowed(map) => map,
            RefMap::Shared(map) => &**map,
        };
        UncommittedDatatypeRef { map }
    }
}

impl UncommittedDatatype for UncommittedDatatypeRef<'_> {
    type DuplicatedDatatype = UncommittedUserDatatype;

    fn uncommitted_type_map(&self) -> &TypeMap {
        self.map
    }

    fn dup(&self) -> UncommittedUserDatatype {
        UncommittedUserDatatype {
            map: self.map.clone(),
        }
    }
}

/// The address of `x`, for computing displacements of
/// [`UserDatatype::structured`] (`MPI_Get_address`).
///
/// ```
/// let pair = (1u8, 2.0f64);
/// let d = myriad::datatype::address_of(&pair.1) - myriad::datatype::address_of(&pair);
/// assert_eq!(d as usize, std::mem::offset_of!((u8, f64), 1));
/// ```
pub fn address_of<T>(x: &T) -> Address {
    x as *const T as Address
}
