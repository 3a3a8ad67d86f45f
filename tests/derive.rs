//! `#[derive(Equivalence)]` through myriad's public API: the type maps it
//! builds, and derived structs crossing ranks (signature matching included).

use std::mem::{offset_of, size_of};

use myriad::datatype::{BaseKind, Run, Segment, TypeMap};
use myriad::traits::*;

/// The type map of `T`, through the same trait bound user code writes (the
/// derive and the trait share the name `Equivalence` in `myriad::traits`).
fn map<T: Equivalence>() -> TypeMap {
    T::equivalent_datatype().type_map().clone()
}

fn run(kind: BaseKind, count: usize) -> Run {
    Run { kind, count }
}

fn seg(offset: usize, len: usize) -> Segment {
    Segment { offset, len }
}

#[derive(Equivalence, Debug, Clone, Copy, PartialEq)]
#[repr(C)]
struct Padded {
    a: u8,
    b: u32,
    c: u16,
}

#[derive(Equivalence, Debug, Clone, Copy, PartialEq)]
#[repr(C)]
struct Vec3 {
    x: f64,
    y: f64,
    z: f64,
}

#[derive(Equivalence, Debug, Clone, Copy, PartialEq)]
struct Pair(u8, u32);

#[derive(Equivalence, Debug, Clone, Copy, PartialEq)]
struct Unit;

#[derive(Equivalence, Debug, Clone, Copy, PartialEq)]
struct Empty {}

#[derive(Equivalence, Debug, Clone, Copy, PartialEq)]
struct Outer {
    head: Padded,
    tail: [Vec3; 2],
    flag: bool,
}

#[derive(Equivalence, Debug, Clone, Copy, PartialEq)]
#[repr(C)]
struct Mixed {
    pair: (u8, f64),
    grid: [[u16; 2]; 3],
}

#[derive(Equivalence, Debug, Clone, Copy, PartialEq)]
struct Wrapper<T> {
    tag: u16,
    value: T,
}

#[derive(Equivalence, Debug, Clone, Copy, PartialEq)]
struct Block<const N: usize> {
    data: [i32; N],
}

#[derive(Equivalence, Debug, Clone, Copy, PartialEq)]
#[repr(C, packed)]
struct Packed {
    a: u8,
    b: u64,
}

#[test]
fn repr_c_with_padding() {
    let m = map::<Padded>();
    assert_eq!(size_of::<Padded>(), 12);
    assert_eq!(m.size(), 1 + 4 + 2);
    assert_eq!(m.extent(), 12);
    assert!(!m.is_contiguous());
    assert_eq!(m.segments(), &[seg(0, 1), seg(4, 6)]);
    assert_eq!(
        m.signature(),
        &[
            run(BaseKind::U8, 1),
            run(BaseKind::U32, 1),
            run(BaseKind::U16, 1)
        ]
    );
    assert!(m.name().ends_with("Padded"), "{}", m.name());
}

#[test]
fn contiguous_struct_is_one_run() {
    let m = map::<Vec3>();
    assert_eq!((m.size(), m.extent()), (24, 24));
    assert!(m.is_contiguous());
    assert_eq!(m.segments(), &[seg(0, 24)]);
    assert_eq!(m.signature(), &[run(BaseKind::F64, 3)]);
}

#[test]
fn tuple_struct_keeps_declaration_order() {
    // Rust may reorder the fields in memory; the signature follows the
    // declaration and the segments follow the signature.
    let m = map::<Pair>();
    assert_eq!(m.size(), 5);
    assert_eq!(m.extent(), size_of::<Pair>());
    assert_eq!(
        m.signature(),
        &[run(BaseKind::U8, 1), run(BaseKind::U32, 1)]
    );
    assert_eq!(
        m.segments(),
        &[seg(offset_of!(Pair, 0), 1), seg(offset_of!(Pair, 1), 4)]
    );
}

#[test]
fn unit_and_empty_structs_carry_no_data() {
    for m in [map::<Unit>(), map::<Empty>()] {
        assert_eq!((m.size(), m.extent()), (0, 0));
        assert!(m.segments().is_empty());
        assert!(m.signature().is_empty());
    }
}

#[test]
fn nested_structs_concatenate_signatures() {
    let m = map::<Outer>();
    assert_eq!(m.size(), 7 + 48 + 1);
    assert_eq!(m.extent(), size_of::<Outer>());
    assert_eq!(
        m.signature(),
        &[
            run(BaseKind::U8, 1),
            run(BaseKind::U32, 1),
            run(BaseKind::U16, 1),
            run(BaseKind::F64, 6),
            run(BaseKind::Bool, 1),
        ]
    );
    // Every data byte lies inside the struct, and padding is excluded.
    let head = offset_of!(Outer, head);
    assert!(m.segments().contains(&seg(head, 1)));
    assert!(m.segments().contains(&seg(head + 4, 6)));
    assert!(m
        .segments()
        .iter()
        .all(|s| s.offset + s.len <= size_of::<Outer>()));
}

#[test]
fn array_and_tuple_fields() {
    let m = map::<Mixed>();
    assert_eq!(m.size(), 1 + 8 + 12);
    assert_eq!(m.extent(), size_of::<Mixed>());
    assert_eq!(
        m.signature(),
        &[
            run(BaseKind::U8, 1),
            run(BaseKind::F64, 1),
            run(BaseKind::U16, 6)
        ]
    );
    // The grid's 12 bytes are one piece of data (possibly merged with the
    // tuple's last field, when that ends where the grid starts).
    let grid = offset_of!(Mixed, grid);
    assert!(m
        .segments()
        .iter()
        .any(|s| s.offset <= grid && grid + 12 <= s.offset + s.len));
}

#[test]
fn generic_structs_get_one_map_per_instantiation() {
    let f = map::<Wrapper<f32>>();
    let bytes = map::<Wrapper<[u8; 3]>>();
    let nested = map::<Wrapper<Padded>>();
    assert_eq!(f.size(), 6);
    assert_eq!(bytes.size(), 5);
    assert_eq!(nested.size(), 9);
    assert_eq!(
        bytes.signature(),
        &[run(BaseKind::U16, 1), run(BaseKind::U8, 3)]
    );
    assert_ne!(f.signature(), bytes.signature());
    assert_eq!(map::<Block<2>>().size(), 8);
    assert_eq!(map::<Block<5>>().size(), 20);
    assert!(map::<Block<5>>().is_contiguous());
    assert_eq!(map::<Block<0>>().size(), 0);
}

#[test]
fn maps_are_built_once() {
    let a = Padded::equivalent_datatype();
    let b = Padded::equivalent_datatype();
    assert!(std::ptr::eq(a.type_map(), b.type_map()));
    let a = Wrapper::<u8>::equivalent_datatype();
    let b = Wrapper::<u8>::equivalent_datatype();
    assert!(std::ptr::eq(a.type_map(), b.type_map()));
}

#[test]
fn packed_structs_use_real_offsets() {
    let m = map::<Packed>();
    assert_eq!((m.size(), m.extent()), (9, 9));
    assert!(m.is_contiguous());
    assert_eq!(
        m.signature(),
        &[run(BaseKind::U8, 1), run(BaseKind::U64, 1)]
    );
}

mod crate_paths {
    //! `#[mpi(crate = ...)]` / `#[myriad(crate = ...)]` and the derive by its
    //! full path.
    use myriad as alias;

    #[derive(myriad::Equivalence)]
    #[mpi(crate = "::myriad")]
    pub(super) struct ByMpiAttr(pub(super) i8);

    #[derive(myriad::Equivalence)]
    #[myriad(crate = "alias")]
    pub(super) struct ByMyriadAttr {
        pub(super) x: u64,
    }
}

#[test]
fn crate_path_attributes() {
    assert_eq!(
        map::<crate_paths::ByMpiAttr>().signature(),
        &[run(BaseKind::I8, 1)]
    );
    assert_eq!(
        map::<crate_paths::ByMyriadAttr>().signature(),
        &[run(BaseKind::U64, 1)]
    );
}

/// Sends `value` from rank 0 and receives it as `R` on rank 1.
fn send_and_receive<S, R>(value: S) -> R
where
    S: Equivalence + Sync,
    R: Equivalence + Send,
{
    let mut out = myriad::run(2, |universe| {
        let world = universe.world();
        if world.rank() == 0 {
            world.process_at_rank(1).send(&value);
            None
        } else {
            Some(world.process_at_rank(0).receive::<R>().0)
        }
    })
    .expect("job failed");
    out.pop().flatten().expect("rank 1 received nothing")
}

#[test]
fn send_derived_structs() {
    let padded = Padded {
        a: 1,
        b: 0xdead_beef,
        c: 7,
    };
    assert_eq!(send_and_receive::<_, Padded>(padded), padded);

    let outer = Outer {
        head: padded,
        tail: [
            Vec3 {
                x: 1.0,
                y: 2.0,
                z: 3.0,
            },
            Vec3 {
                x: -1.0,
                y: -2.0,
                z: -3.0,
            },
        ],
        flag: true,
    };
    assert_eq!(send_and_receive::<_, Outer>(outer), outer);

    let mixed = Mixed {
        pair: (9, 0.5),
        grid: [[1, 2], [3, 4], [5, 6]],
    };
    assert_eq!(send_and_receive::<_, Mixed>(mixed), mixed);

    let wrapped = Wrapper {
        tag: 3,
        value: padded,
    };
    assert_eq!(send_and_receive::<_, Wrapper<Padded>>(wrapped), wrapped);

    let packed = Packed {
        a: 5,
        b: u64::MAX - 1,
    };
    assert_eq!(send_and_receive::<_, Packed>(packed), packed);

    assert_eq!(send_and_receive::<_, Unit>(Unit), Unit);
}

#[test]
fn send_a_vec_of_structs() {
    let values: Vec<Padded> = (0..100u32)
        .map(|i| Padded {
            a: i as u8,
            b: i * 1000,
            c: (i * 3) as u16,
        })
        .collect();
    let out = myriad::run(2, |universe| {
        let world = universe.world();
        if world.rank() == 0 {
            world.process_at_rank(1).send(&values[..]);
            Vec::new()
        } else {
            let (got, status) = world.process_at_rank(0).receive_vec::<Padded>();
            assert_eq!(status.bytes(), 100 * 7);
            got
        }
    })
    .expect("job failed");
    assert_eq!(out[1], values);
}

#[derive(Equivalence, Debug, Clone, Copy, PartialEq)]
struct A {
    x: u8,
    y: u32,
}

#[derive(Equivalence, Debug, Clone, Copy, PartialEq)]
#[repr(C)]
struct B(u8, u32);

#[derive(Equivalence, Debug, Clone, Copy, PartialEq)]
struct C {
    y: u32,
    x: u8,
}

#[test]
fn same_signature_other_layout() {
    let a = A {
        x: 200,
        y: 123_456_789,
    };
    assert_eq!(send_and_receive::<_, B>(a), B(200, 123_456_789));
    assert_eq!(send_and_receive::<_, (u8, u32)>(a), (200, 123_456_789));
    assert_eq!(send_and_receive::<_, A>(B(1, 2)), A { x: 1, y: 2 });
}

#[test]
fn other_signature_is_a_type_error() {
    let out = myriad::run(2, |universe| {
        let world = universe.world();
        if world.rank() == 0 {
            world.process_at_rank(1).send_with_tag(&A { x: 1, y: 2 }, 7);
            None
        } else {
            Some(
                world
                    .process_at_rank(0)
                    .try_receive_with_tag::<C>(7)
                    .map(|(c, _)| c),
            )
        }
    })
    .expect("job failed");
    match &out[1] {
        Some(Err(myriad::Error::Type(myriad::TypeError::MessageSignature {
            rank: 1,
            source: 0,
            tag: 7,
            ..
        }))) => {}
        other => panic!("expected a type error, got {other:?}"),
    }
}
