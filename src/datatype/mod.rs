//! What may cross ranks: [`Equivalence`] types, datatypes and buffers, shaped
//! like rsmpi's `mpi::datatype`.
//!
//! A value may be sent when its type implements [`Equivalence`]: the type
//! names a [`Datatype`] whose [`TypeMap`] lists the bytes that hold data and
//! the type signature (sequence of base types). Primitives, arrays and tuples
//! of them implement it here; structs get it from `#[derive(Equivalence)]`.
//! Buffers ([`Buffer`], [`BufferMut`]) are a value, a slice or a `Vec` of such
//! a type.
//!
//! Inside one process data is copied once, by type map: contiguous data takes
//! a single `memcpy`, other layouts are copied run by run, never through the
//! padding bytes. Receiving checks the type signature (MPI's type-matching
//! rule), so a value can only be received as a type with the same sequence of
//! base types: this is what makes it sound to receive bytes into a `bool` or
//! a struct.

mod buffer;
pub(crate) mod copy;
mod partition;
mod typemap;

use std::any::TypeId;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock, RwLock};

pub use buffer::{AsDatatype, Buffer, BufferMut, Collection, Pointer, PointerMut};
pub use partition::{
    Partition, PartitionMut, Partitioned, PartitionedBuffer, PartitionedBufferMut,
};
pub(crate) use typemap::signature_mismatch;
pub use typemap::{BaseKind, Run, Segment, TypeMap};

/// A type whose values can be sent and received as an MPI datatype.
///
/// # Safety
///
/// The type map returned by `equivalent_datatype` must describe `Self`
/// exactly: its extent is `size_of::<Self>()`, its segments cover every byte
/// that is not padding, and any sequence of base values matching its signature,
/// written into those bytes, is a valid `Self` (so no references, no niches
/// such as `NonZero`, enums or `char`). Values are copied bitwise to other
/// ranks, which run on other threads, so the type must be safe to send there
/// (what `Send` promises). `#[derive(Equivalence)]` checks all of this field
/// by field.
pub unsafe trait Equivalence {
    /// The datatype handle.
    type Out: Datatype;
    /// The datatype equivalent to `Self`.
    fn equivalent_datatype() -> Self::Out;
}

/// A handle to a committed datatype: something that has a [`TypeMap`].
///
/// # Safety
///
/// `type_map` must return the same map for the life of the handle, and
/// `handle` a handle to that same map.
pub unsafe trait Datatype {
    /// The type map of one element.
    fn type_map(&self) -> &TypeMap;
    /// An owned handle to the type map, for messages that outlive the borrow.
    #[doc(hidden)]
    fn handle(&self) -> TypeHandle;
}

/// An owned, cheaply clonable reference to a type map (internal).
#[doc(hidden)]
#[derive(Debug, Clone)]
pub struct TypeHandle(Handle);

#[derive(Debug, Clone)]
enum Handle {
    Static(&'static TypeMap),
    Shared(Arc<TypeMap>),
}

impl TypeHandle {
    #[inline]
    pub(crate) fn map(&self) -> &TypeMap {
        match &self.0 {
            Handle::Static(map) => map,
            Handle::Shared(map) => map,
        }
    }
}

/// A borrowed datatype handle (rsmpi's `DatatypeRef`).
#[derive(Debug, Clone, Copy)]
pub struct DatatypeRef<'a> {
    map: &'a TypeMap,
}

/// The datatype of a built-in type (rsmpi's `SystemDatatype`).
pub type SystemDatatype = DatatypeRef<'static>;

impl DatatypeRef<'static> {
    /// A handle to a type map that lives for the whole program.
    pub const fn from_static(map: &'static TypeMap) -> Self {
        DatatypeRef { map }
    }
}

// SAFETY: the map is borrowed for the handle's life and never changes.
unsafe impl Datatype for DatatypeRef<'static> {
    #[inline]
    fn type_map(&self) -> &TypeMap {
        self.map
    }

    #[inline]
    fn handle(&self) -> TypeHandle {
        TypeHandle(Handle::Static(self.map))
    }
}

/// A datatype built at run time (rsmpi's `UserDatatype`); cheap to clone.
#[derive(Debug, Clone)]
pub struct UserDatatype {
    map: Arc<TypeMap>,
}

impl UserDatatype {
    /// A datatype with the given type map.
    pub fn from_type_map(map: TypeMap) -> Self {
        UserDatatype { map: Arc::new(map) }
    }
}

// SAFETY: the map is shared and immutable.
unsafe impl Datatype for UserDatatype {
    fn type_map(&self) -> &TypeMap {
        &self.map
    }

    fn handle(&self) -> TypeHandle {
        TypeHandle(Handle::Shared(Arc::clone(&self.map)))
    }
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
    let map: &'static TypeMap = Box::leak(Box::new(build()));
    registry
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .entry(id)
        .or_insert(map)
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
