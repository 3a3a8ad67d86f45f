//! What may cross ranks: [`Equivalence`] types, datatypes and buffers, shaped
//! like rsmpi's `mpi::datatype`.
//!
//! A value may be sent when its type implements [`Equivalence`]: the type
//! names a [`Datatype`] whose [`TypeMap`] lists the bytes that hold data and
//! the type signature (sequence of base types). Primitives, arrays and tuples
//! of them implement it here; structs get it from `#[derive(Equivalence)]`.
//! Buffers ([`Buffer`], [`BufferMut`]) are a value, a slice or a `Vec` of such
//! a type, or a [`View`]/[`MutView`]: any memory described by a count and a
//! [`UserDatatype`], or a type-erased [`DynBuffer`]/[`DynBufferMut`].
//!
//! Inside one process data is copied once, by type map: contiguous data takes
//! a single `memcpy`, other layouts are copied run by run, never through the
//! padding bytes. Receiving checks the type signature (MPI's type-matching
//! rule), so a value can only be received as a type with the same sequence of
//! base types: this is what makes it sound to receive bytes into a `bool` or
//! a struct.
//!
//! # The type-map model
//!
//! MPI describes a datatype by its *type map*: the ordered list of
//! `(byte displacement, base type)` pairs of one element. myriad stores it
//! run-length encoded as a [`TypeMap`]:
//!
//! * the **signature**: the base types in type-map order ([`Run`]s), which
//!   is all that type matching looks at;
//! * the **segments**: the byte runs that hold those values, in the same
//!   order (not sorted by address: `indexed(&[1, 1], &[3, 0], ..)` reads its
//!   second value first), merged where they touch;
//! * the **bounds**: `lb` (lower bound), `extent` and `ub = lb + extent`.
//!   Element `i` of a buffer at address `p` starts at `p + lb + i * extent`,
//!   and the segment offsets count from that start (never negative: no data
//!   before the lower bound), so `count` elements lie in the `count *
//!   extent` bytes after the first element's lower bound, or further for a
//!   type resized to a smaller extent ([`UserDatatype::create_resized`]),
//!   whose data reaches beyond its upper bound;
//! * the **alignment** (not an MPI notion): `align_of` of the Rust type the
//!   map describes, which scratch space for its elements gets, so that a
//!   user operation can view them as `&[T]`.
//!
//! For the types of Rust values `lb = 0`, `extent = size_of::<T>()` and
//! the alignment `align_of::<T>()`.
//! For derived types built with [`UserDatatype`]'s constructors the MPI
//! rules apply: every block of `n > 0` copies of an old type at byte
//! displacement `d` spans `d + old.lb .. d + old.lb + n * old.extent`; `lb`
//! is the smallest block start and `ub` the largest block end, so `lb` may
//! be positive (a leading hole) and the type may have holes inside; blocks
//! of length 0 are ignored, and a type without blocks has `lb = ub = 0`.
//! [`UserDatatype::structured`] alone then rounds the extent up to the
//! largest alignment of its base types (MPI's "epsilon"), so a type that
//! describes a Rust struct field by field gets the struct's size as its
//! extent. A derived type's alignment is the largest of its old types' that
//! divides its extent. [`UserDatatype::create_resized`] sets `lb` and the
//! extent explicitly (MPI's `MPI_Type_create_resized`; the old `MPI_LB` /
//! `MPI_UB` markers are gone from MPI 3), and
//! [`UserDatatype::subarray`] / [`UserDatatype::darray`] describe parts of
//! multi-dimensional arrays in C or Fortran [`Order`].
//!
//! Negative displacements and strides **work** when building types: offsets
//! may be negative, and such a type may be nested at a displacement that
//! makes them positive. A buffer, however, starts at its own address:
//! [`View::with_count_and_datatype`] panics with an `Error::Arg` message when
//! the datatype has data before the buffer's start (or beyond its end).
//!
//! ```
//! use myriad::datatype::UserDatatype;
//! use myriad::traits::*;
//!
//! // Two blocks of two doubles, three doubles apart: x x _ x x
//! let t = UserDatatype::vector(2, 2, 3, &f64::equivalent_datatype());
//! let map = t.type_map();
//! assert_eq!((map.size(), map.lb(), map.extent()), (32, 0, 40));
//! assert!(!map.is_contiguous());
//!
//! // Blocks at element 4 and element 1: lb = 4 bytes, type-map order kept.
//! let t = UserDatatype::indexed(&[2, 1], &[4, 1], &i32::equivalent_datatype());
//! assert_eq!((t.type_map().lb(), t.type_map().extent()), (4, 20));
//! ```
//!
//! # Moving data laid out by a datatype
//!
//! * [`View`] / [`MutView`] pair a buffer with a count and any datatype and
//!   can be sent, received, broadcast, ... like a slice;
//! * [`pack`], [`pack_into`], [`pack_size`] and [`unpack_into`] (rsmpi's
//!   `Communicator::pack*`) convert between a buffer and its data bytes in
//!   type-map order, without padding.
//!
//! A message can be received into any buffer with the same signature: a
//! `vector` view of a matrix column into a contiguous `Vec<f64>`, an
//! `indexed` selection into a struct.
mod array;
mod buffer;
pub(crate) mod bulk;
pub(crate) mod copy;
mod derived;
mod dynbuf;
mod pack;
mod partition;
mod typemap;
mod user;
mod view;

use std::any::TypeId;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock, RwLock};

pub use array::{Distribution, Order};
pub use buffer::{AsDatatype, Buffer, BufferMut, Collection, Pointer, PointerMut};
pub use dynbuf::{DynBuffer, DynBufferMut};
pub use pack::{pack, pack_into, pack_size, try_pack_into, try_unpack_into, unpack_into};
pub use partition::{
    Partition, PartitionMut, Partitioned, PartitionedBuffer, PartitionedBufferMut,
};
pub(crate) use typemap::{runs_mismatch, signature_mismatch};
pub use typemap::{BaseKind, Run, Segment, TypeMap};
pub use user::{
    address_of, UncommittedDatatype, UncommittedDatatypeRef, UncommittedUserDatatype, UserDatatype,
};
pub use view::{MutView, View};

/// A type whose values can be sent and received as an MPI datatype.
///
/// # Safety
///
/// The type map returned by `equivalent_datatype` must describe `Self`
/// exactly: its lower bound is 0 and its extent `size_of::<Self>()`, its
/// segments cover every byte that is not padding, and any sequence of base
/// values matching its signature, written into those bytes, is a valid
/// `Self` (so no references, no niches
/// such as `NonZero`, enums or `char`). Values are copied bitwise to other
/// ranks, which run on other threads, so the type must be safe to send there
/// (what `Send` promises). `#[derive(Equivalence)]` checks all of this field
/// by field.
///
/// The map's [alignment](TypeMap::align) should be `align_of::<Self>()`
/// (`TypeMap::structure` finds a struct's from its fields; a
/// `#[repr(align(N))]` or `#[repr(packed)]` struct sets it with
/// [`TypeMap::with_align`], as the derive does). Soundness does not rest on
/// it: a reduction's scratch space is allocated with it, and a user
/// operation's `DynBuffer::downcast` to
/// `&[Self]` checks the address it gets, so a wrong alignment makes that
/// downcast give `None`, nothing worse.
pub unsafe trait Equivalence {
    /// The datatype handle.
    type Out: Datatype;
    /// The datatype equivalent to `Self`.
    fn equivalent_datatype() -> Self::Out;
}

/// A handle to a committed datatype: something that has a [`TypeMap`].
///
/// Every committed datatype may also be used to build others (rsmpi's
/// `Datatype: UncommittedDatatype`).
///
/// # Safety
///
/// `type_map` must return the same map for the life of the handle, and
/// `handle` a handle to that same map.
pub unsafe trait Datatype: UncommittedDatatype {
    /// The type map of one element.
    fn type_map(&self) -> &TypeMap;
    /// An owned handle to the type map, for messages that outlive the borrow.
    #[doc(hidden)]
    fn handle(&self) -> TypeHandle;
}

/// An owned, cheaply clonable reference to a type map (internal).
///
/// The map's address, and the reference count that keeps a shared map
/// alive (none for a static one): [`map`](Self::map) is one load, not a
/// choice between two kinds of handle (that choice cost ~11 instructions
/// per all-reduce, the handle being read several times a call).
#[doc(hidden)]
#[derive(Clone)]
pub struct TypeHandle {
    /// A static map, or the one `keep` holds.
    map: std::ptr::NonNull<TypeMap>,
    keep: Option<Arc<TypeMap>>,
}

// SAFETY: the handle shares an immutable `TypeMap` (`Send + Sync`), by a
// static reference or an `Arc`: what `&'static TypeMap` and `Arc<TypeMap>`
// may do across threads, the raw address may too.
unsafe impl Send for TypeHandle {}
// SAFETY: as above.
unsafe impl Sync for TypeHandle {}

impl std::fmt::Debug for TypeHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("TypeHandle").field(self.map()).finish()
    }
}

impl TypeHandle {
    fn shared(map: Arc<TypeMap>) -> TypeHandle {
        TypeHandle {
            map: std::ptr::NonNull::from(&*map),
            keep: Some(map),
        }
    }

    fn of_static(map: &'static TypeMap) -> TypeHandle {
        TypeHandle {
            map: std::ptr::NonNull::from(map),
            keep: None,
        }
    }

    /// Whether the handle holds a reference count (a shared map), which its
    /// drop releases; `false` for a static map, whose handle owns nothing.
    #[inline]
    pub(crate) fn is_counted(&self) -> bool {
        self.keep.is_some()
    }

    /// The map, if it is static.
    fn as_static(&self) -> Option<&'static TypeMap> {
        // SAFETY: without a reference count the address is a static map's
        // (`of_static`).
        self.keep
            .is_none()
            .then(|| unsafe { &*self.map.as_ptr().cast_const() })
    }

    #[inline]
    pub(crate) fn map(&self) -> &TypeMap {
        // SAFETY: the address is a static map's, or the map in `keep`'s
        // allocation, which lives as long as the handle holds `keep`.
        unsafe { self.map.as_ref() }
    }
}

/// A borrowed datatype handle (rsmpi's `DatatypeRef`): the datatype of a
/// built-in type, or [`UserDatatype::as_ref`].
#[derive(Debug, Clone, Copy)]
pub struct DatatypeRef<'a> {
    map: RefMap<'a>,
}

#[derive(Debug, Clone, Copy)]
enum RefMap<'a> {
    Static(&'static TypeMap),
    Shared(&'a Arc<TypeMap>),
    /// A map borrowed from elsewhere (a reduction's operands): an owned
    /// handle to it copies the map.
    Borrowed(&'a TypeMap),
}

/// The datatype of a built-in type (rsmpi's `SystemDatatype`).
pub type SystemDatatype = DatatypeRef<'static>;

impl DatatypeRef<'static> {
    /// A handle to a type map that lives for the whole program.
    pub const fn from_static(map: &'static TypeMap) -> Self {
        DatatypeRef {
            map: RefMap::Static(map),
        }
    }
}

impl<'a> DatatypeRef<'a> {
    /// A handle borrowing a user datatype's shared map.
    fn shared(map: &'a Arc<TypeMap>) -> Self {
        DatatypeRef {
            map: RefMap::Shared(map),
        }
    }

    /// A handle borrowing `map` (owned handles taken from it copy the map).
    pub(crate) fn borrowed(map: &'a TypeMap) -> Self {
        DatatypeRef {
            map: RefMap::Borrowed(map),
        }
    }

    /// A handle to the map of `datatype`, which may be a temporary: the
    /// built-in and derived types' maps are static already; any other map
    /// is interned, so each distinct map is kept once for the program.
    pub(crate) fn owned_by<D: Datatype>(datatype: D) -> DatatypeRef<'static> {
        let handle = datatype.handle();
        match handle.as_static() {
            Some(map) => DatatypeRef::from_static(map),
            None => DatatypeRef::from_static(interned(handle.map())),
        }
    }
}

/// The program-lifetime copy of a map equal to `map` (made on first use).
fn interned(map: &TypeMap) -> &'static TypeMap {
    static INTERNED: RwLock<Vec<&'static TypeMap>> = RwLock::new(Vec::new());
    let found = |maps: &[&'static TypeMap]| maps.iter().copied().find(|m| *m == map);
    if let Some(map) = found(&INTERNED.read().unwrap_or_else(|e| e.into_inner())) {
        return map;
    }
    let mut maps = INTERNED.write().unwrap_or_else(|e| e.into_inner());
    if let Some(map) = found(&maps) {
        return map;
    }
    let map: &'static TypeMap = Box::leak(Box::new(map.clone()));
    maps.push(map);
    map
}

// SAFETY: the map is borrowed for the handle's life and never changes; the
// owned handle refers to the same map (the static one, or another reference
// count of the shared one).
unsafe impl Datatype for DatatypeRef<'_> {
    #[inline]
    fn type_map(&self) -> &TypeMap {
        match self.map {
            RefMap::Static(map) => map,
            RefMap::Shared(map) => map,
            RefMap::Borrowed(map) => map,
        }
    }

    #[inline]
    fn handle(&self) -> TypeHandle {
        match self.map {
            RefMap::Static(map) => TypeHandle::of_static(map),
            RefMap::Shared(map) => TypeHandle::shared(Arc::clone(map)),
            RefMap::Borrowed(map) => borrowed_handle(map),
        }
    }
}

/// The handle of a borrowed map: a copy in its own `Arc`. Out of line and
/// cold, so that `handle` stays small enough to inline into every send and
/// receive (with the copy inline it was not, and the one-way ping-pong
/// paid a call per message).
#[cold]
#[inline(never)]
fn borrowed_handle(map: &TypeMap) -> TypeHandle {
    TypeHandle::shared(Arc::new(map.clone()))
}

// SAFETY: forwards to the referenced datatype.
unsafe impl<D: Datatype + ?Sized> Datatype for &D {
    fn type_map(&self) -> &TypeMap {
        (**self).type_map()
    }

    fn handle(&self) -> TypeHandle {
        (**self).handle()
    }
}

macro_rules! primitives {
    ($($t:ty => $kind:ident, $map:ident;)*) => {$(
        static $map: TypeMap = TypeMap::primitive(
            stringify!($t),
            &[Segment { offset: 0, len: std::mem::size_of::<$t>() }],
            &[Run { kind: BaseKind::$kind, count: 1 }],
        );

        // SAFETY: a primitive is one run of data filling its size; every bit
        // pattern of the base kind is a valid value (`bool` only receives
        // `bool` data, which the signature check enforces); primitives are
        // `Send`.
        unsafe impl Equivalence for $t {
            type Out = SystemDatatype;
            #[inline]
            fn equivalent_datatype() -> SystemDatatype {
                DatatypeRef::from_static(&$map)
            }
        }
    )*};
}

#[cfg(target_pointer_width = "64")]
primitives! {
    usize => U64, USIZE;
    isize => I64, ISIZE;
}
#[cfg(target_pointer_width = "32")]
primitives! {
    usize => U32, USIZE;
    isize => I32, ISIZE;
}

primitives! {
    bool => Bool, BOOL;
    i8 => I8, I8_MAP;
    u8 => U8, U8_MAP;
    i16 => I16, I16_MAP;
    u16 => U16, U16_MAP;
    i32 => I32, I32_MAP;
    u32 => U32, U32_MAP;
    i64 => I64, I64_MAP;
    u64 => U64, U64_MAP;
    f32 => F32, F32_MAP;
    f64 => F64, F64_MAP;
}

// rsmpi's `complex` feature: complex numbers are base values of their own
// (reductions define sum and product on them, not max or bitwise ones).
#[cfg(feature = "complex")]
primitives! {
    num_complex::Complex<f32> => C32, C32_MAP;
    num_complex::Complex<f64> => C64, C64_MAP;
}

/// The type map of `T`, built once per type and kept for the life of the
/// program. Used for arrays, tuples and generic derived structs, which cannot
/// have a `static` of their own.
#[doc(hidden)]
pub fn cached_type_map<T: 'static>(build: impl FnOnce() -> TypeMap) -> &'static TypeMap {
    type Registry = RwLock<HashMap<TypeId, &'static TypeMap>>;
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    let registry = REGISTRY.get_or_init(Default::default);
    let id = TypeId::of::<T>();
    if let Some(map) = registry.read().unwrap_or_else(|e| e.into_inner()).get(&id) {
        return map;
    }
    // Built outside the lock (building may look up other types' maps); a
    // thread that lost the race to insert drops its copy instead of leaking it.
    let built = build();
    registry
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .entry(id)
        .or_insert_with(|| Box::leak(Box::new(built)))
}

// SAFETY: an array is `N` elements of `T` at `T`'s extent (its size), so the
// map built from `T`'s is exact; arrays of `Send` values are `Send`.
unsafe impl<T: Equivalence + 'static, const N: usize> Equivalence for [T; N] {
    type Out = SystemDatatype;
    fn equivalent_datatype() -> SystemDatatype {
        DatatypeRef::from_static(cached_type_map::<[T; N]>(|| {
            TypeMap::array(T::equivalent_datatype().type_map(), N)
        }))
    }
}

macro_rules! tuples {
    ($($name:ident : $idx:tt),+) => {
        // SAFETY: the map is built from each field's map at its real offset
        // (`offset_of!`), with the tuple's size as extent.
        unsafe impl<$($name: Equivalence + 'static),+> Equivalence for ($($name,)+) {
            type Out = SystemDatatype;
            fn equivalent_datatype() -> SystemDatatype {
                DatatypeRef::from_static(cached_type_map::<Self>(|| {
                    TypeMap::structure(
                        std::any::type_name::<Self>(),
                        &[$((
                            std::mem::offset_of!(Self, $idx),
                            $name::equivalent_datatype().type_map(),
                            1,
                        )),+],
                        std::mem::size_of::<Self>(),
                    )
                }))
            }
        }
    };
}

mod tuple_impls {
    use super::*;
    tuples!(A: 0);
    tuples!(A: 0, B: 1);
    tuples!(A: 0, B: 1, C: 2);
    tuples!(A: 0, B: 1, C: 2, D: 3);
    tuples!(A: 0, B: 1, C: 2, D: 3, E: 4);
    tuples!(A: 0, B: 1, C: 2, D: 3, E: 4, F: 5);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays_and_tuples_have_exact_maps() {
        let a = <[u16; 3]>::equivalent_datatype();
        assert_eq!(a.type_map().size(), 6);
        assert!(a.type_map().is_contiguous());
        let t = <(u8, f64)>::equivalent_datatype();
        assert_eq!(t.type_map().size(), 9);
        assert_eq!(t.type_map().extent(), 16);
        assert!(!t.type_map().is_contiguous());
        // Cached: the same map each time.
        assert!(std::ptr::eq(
            t.type_map(),
            <(u8, f64)>::equivalent_datatype().type_map()
        ));
    }
}
