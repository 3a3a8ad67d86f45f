//! User datatypes, views and pack/unpack with MPI's type-map semantics, on
//! type maps and on whole jobs.

use std::mem::{offset_of, size_of};
use std::time::Duration;

use myriad::datatype::{
    self, MutView, UncommittedDatatype, UncommittedDatatypeRef, UncommittedUserDatatype,
    UserDatatype, View,
};
use myriad::traits::*;
use myriad::{Address, Error, Runtime, ANY_TAG};

fn f64t() -> myriad::datatype::SystemDatatype {
    f64::equivalent_datatype()
}

fn i32t() -> myriad::datatype::SystemDatatype {
    i32::equivalent_datatype()
}

/// `(size, lb, extent, contiguous, signature as (kind name, count))`.
fn shape(t: &UserDatatype) -> (usize, isize, usize, bool, Vec<(&'static str, usize)>) {
    let m = t.type_map();
    (
        m.size(),
        m.lb(),
        m.extent(),
        m.is_contiguous(),
        m.signature()
            .iter()
            .map(|r| (r.kind.name(), r.count))
            .collect(),
    )
}

// ---------------------------------------------------------------------------
// Type maps of each constructor

#[test]
fn type_maps_follow_mpi_bounds() {
    let cases: Vec<(&str, UserDatatype, _)> = vec![
        (
            "contiguous",
            UserDatatype::contiguous(3, &f64t()),
            (24, 0, 24, true, vec![("f64", 3)]),
        ),
        (
            "vector x x _ x x",
            UserDatatype::vector(2, 2, 3, &f64t()),
            (32, 0, 40, false, vec![("f64", 4)]),
        ),
        (
            "vector with stride = blocklength",
            UserDatatype::vector(3, 2, 2, &i32t()),
            (24, 0, 24, true, vec![("i32", 6)]),
        ),
        (
            "vector with a negative stride",
            UserDatatype::vector(3, 1, -2, &i32t()),
            (12, -16, 20, false, vec![("i32", 3)]),
        ),
        (
            "heterogeneous_vector",
            UserDatatype::heterogeneous_vector(2, 1, 12, &f64t()),
            (16, 0, 20, false, vec![("f64", 2)]),
        ),
        (
            "indexed",
            UserDatatype::indexed(&[2, 1], &[4, 1], &i32t()),
            (12, 4, 20, false, vec![("i32", 3)]),
        ),
        (
            "indexed, one block after a hole",
            UserDatatype::indexed(&[3], &[2], &f64t()),
            (24, 16, 24, true, vec![("f64", 3)]),
        ),
        (
            "heterogeneous_indexed",
            UserDatatype::heterogeneous_indexed(&[1, 2], &[16, 0], &i32t()),
            (12, 0, 20, false, vec![("i32", 3)]),
        ),
        (
            "indexed_block",
            UserDatatype::indexed_block(2, &[0, 5], &i32t()),
            (16, 0, 28, false, vec![("i32", 4)]),
        ),
        (
            "heterogeneous_indexed_block",
            UserDatatype::heterogeneous_indexed_block(1, &[10, 2], &i32t()),
            (8, 2, 12, false, vec![("i32", 2)]),
        ),
        (
            "structured padded to alignment",
            UserDatatype::structured(&[1, 1], &[0, 8], &[f64t(), u8::equivalent_datatype()]),
            (9, 0, 16, false, vec![("f64", 1), ("u8", 1)]),
        ),
        (
            "empty",
            UserDatatype::indexed(&[], &[], &f64t()),
            (0, 0, 0, false, vec![]),
        ),
    ];
    for (what, t, expected) in cases {
        assert_eq!(shape(&t), expected, "{what}");
    }
}

#[test]
fn segments_keep_type_map_order() {
    // Elements 5 then 0: the type map reads the later address first.
    let t = UserDatatype::indexed(&[1, 1], &[5, 0], &i32t());
    let offsets: Vec<usize> = t.type_map().segments().iter().map(|s| s.offset).collect();
    assert_eq!(offsets, vec![20, 0]);
    let (true_lb, true_extent) = t.type_map().true_extent();
    assert_eq!((true_lb, true_extent), (0, 24));
}

#[test]
fn nested_types_and_uncommitted_handles() {
    // rsmpi's complex_datatype example: nested uncommitted types in a struct.
    let t = complex_datatype();
    assert_eq!(t.type_map().size(), 1 + 16 + 9);
    assert_eq!(t.type_map().extent(), size_of::<ComplexDatatype>());
    assert_eq!(t.type_map().lb(), 0);

    // commit() and dup() keep the map; dup of a built-in is a user type.
    let row = UncommittedUserDatatype::vector(2, 1, 3, &i32t());
    let copy = row.dup();
    let committed = row.commit();
    assert_eq!(committed.type_map(), copy.commit().type_map());
    let ints = i32t().dup();
    assert_eq!(ints.type_map().signature(), i32t().type_map().signature());
    let again = committed.dup();
    assert_eq!(again.type_map(), committed.type_map());

    // Committed and uncommitted handles nest alike.
    let by_ref = UserDatatype::contiguous(2, &committed.as_ref());
    let by_value = UserDatatype::contiguous(2, &committed);
    assert_eq!(by_ref.type_map(), by_value.type_map());
    assert_eq!(by_ref.type_map().extent(), 2 * 16);
}

#[test]
fn address_of_gives_structured_displacements() {
    let p = Pair { x: 1.0, tag: 2 };
    let base = datatype::address_of(&p);
    let t = UserDatatype::structured(
        &[1, 1],
        &[
            datatype::address_of(&p.x) - base,
            datatype::address_of(&p.tag) - base,
        ],
        &[f64t(), u8::equivalent_datatype()],
    );
    assert_eq!(t.type_map().extent(), size_of::<Pair>());
}

// ---------------------------------------------------------------------------
// Types used on jobs

#[derive(Debug, Clone, Copy, PartialEq, Default, myriad::Equivalence)]
struct Pair {
    x: f64,
    tag: u8,
}

/// rsmpi's `structured` example: fields described in reverse order.
#[derive(Debug, PartialEq)]
struct MyInts([i32; 3]);

// SAFETY: three i32 at offsets 8, 4, 0 of a `[i32; 3]` cover all of
// `MyInts` (lb 0, extent 12); any i32 values are valid.
unsafe impl Equivalence for MyInts {
    type Out = UserDatatype;
    fn equivalent_datatype() -> UserDatatype {
        let int = i32::equivalent_datatype();
        UserDatatype::structured(
            &[1, 1, 1],
            &[
                (size_of::<i32>() * 2) as Address,
                size_of::<i32>() as Address,
                0,
            ],
            &[&int, &int, &int],
        )
    }
}

type TupleType = ([f32; 2], u8);

#[derive(Debug, Default, Clone, PartialEq)]
struct ComplexDatatype {
    b: bool,
    ints: [i32; 4],
    tuple: TupleType,
}

fn complex_datatype() -> UserDatatype {
    UserDatatype::structured(
        &[1, 1, 1],
        &[
            offset_of!(ComplexDatatype, b) as Address,
            offset_of!(ComplexDatatype, ints) as Address,
            offset_of!(ComplexDatatype, tuple) as Address,
        ],
        &[
            bool::equivalent_datatype().into(),
            UncommittedUserDatatype::contiguous(4, &i32::equivalent_datatype()).as_ref(),
            UncommittedUserDatatype::structured(
                &[2, 1],
                &[
                    offset_of!(TupleType, 0) as Address,
                    offset_of!(TupleType, 1) as Address,
                ],
                &[f32::equivalent_datatype(), u8::equivalent_datatype()],
            )
            .as_ref(),
        ],
    )
}

// SAFETY: every field is described at its offset (`offset_of!`), with the
// struct's size as extent (MPI's alignment padding), lb 0; all field types
// are valid for any matching values (`bool` only receives `bool`).
unsafe impl Equivalence for ComplexDatatype {
    type Out = UserDatatype;
    fn equivalent_datatype() -> UserDatatype {
        complex_datatype()
    }
}

/// Four i32 received from indexed blocks.
#[derive(Debug, Default, PartialEq, myriad::Equivalence)]
struct Picked {
    first: i32,
    pair: [i32; 2],
    last: i32,
}

/// Runs `f` on two ranks under eager limits that force each message path:
/// eager copies (limit 64 KiB), rendezvous (limit 0).
fn on_every_path(f: impl Fn(myriad::Universe, bool) + Sync) {
    for eager_limit in [0, 64 << 10] {
        for receiver_first in [false, true] {
            Runtime::builder()
                .ranks(2)
                .eager_limit(eager_limit)
                .run(|universe| f(universe, receiver_first))
                .unwrap_or_else(|e| {
                    panic!("eager limit {eager_limit}, receiver first {receiver_first}: {e}")
                });
        }
    }
}

/// Lets the other rank get to its call first.
fn pause() {
    myriad::sleep(Duration::from_millis(2));
}

// ---------------------------------------------------------------------------
// Round trips

#[test]
fn matrix_column_travels_as_a_vector_view_into_a_vec() {
    const ROWS: usize = 5;
    const COLS: usize = 4;
    on_every_path(|universe, receiver_first| {
        let world = universe.world();
        let column = UserDatatype::vector(ROWS as i32, 1, COLS as i32, &f64t());
        if world.rank() == 0 {
            if receiver_first {
                pause();
            }
            let matrix: Vec<f64> = (0..ROWS * COLS).map(|i| i as f64).collect();
            // Column 2 starts at element 2.
            // SAFETY: the vector type selects ROWS f64 of `matrix[2..]`.
            let view = unsafe { View::with_count_and_datatype(&matrix[2..], 1, &column) };
            world.process_at_rank(1).send(&view);
        } else {
            if !receiver_first {
                pause();
            }
            let mut col = vec![0.0f64; ROWS];
            let status = world.process_at_rank(0).receive_into(&mut col[..]);
            assert_eq!(status.count(f64t()), ROWS as i32);
            assert_eq!(col, vec![2.0, 6.0, 10.0, 14.0, 18.0]);
        }
    });
}

#[test]
fn contiguous_data_lands_in_a_matrix_column() {
    const ROWS: usize = 3;
    const COLS: usize = 3;
    on_every_path(|universe, receiver_first| {
        let world = universe.world();
        let column = UserDatatype::vector(ROWS as i32, 1, COLS as i32, &f64t());
        if world.rank() == 0 {
            if receiver_first {
                pause();
            }
            world.process_at_rank(1).send(&[1.5f64, 2.5, 3.5][..]);
        } else {
            if !receiver_first {
                pause();
            }
            let mut matrix = vec![0.0f64; ROWS * COLS];
            {
                // SAFETY: the column type selects ROWS f64 of `matrix[1..]`.
                let mut view =
                    unsafe { MutView::with_count_and_datatype(&mut matrix[1..], 1, &column) };
                world.process_at_rank(0).receive_into(&mut view);
            }
            assert_eq!(matrix, vec![0.0, 1.5, 0.0, 0.0, 2.5, 0.0, 0.0, 3.5, 0.0]);
        }
    });
}

#[test]
fn indexed_blocks_are_received_as_a_struct() {
    on_every_path(|universe, receiver_first| {
        let world = universe.world();
        if world.rank() == 0 {
            if receiver_first {
                pause();
            }
            let data: Vec<i32> = (0..10).collect();
            // Element 7, elements 2..4, element 0: four i32 in that order.
            let t = UserDatatype::indexed(&[1, 2, 1], &[7, 2, 0], &i32t());
            // SAFETY: the type selects i32 of `data` only.
            let view = unsafe { View::with_count_and_datatype(&data[..], 1, &t) };
            world.process_at_rank(1).send(&view);
        } else {
            if !receiver_first {
                pause();
            }
            let (got, _) = world.process_at_rank(0).receive::<Picked>();
            assert_eq!(
                got,
                Picked {
                    first: 7,
                    pair: [2, 3],
                    last: 0
                }
            );
        }
    });
}

#[test]
fn a_struct_is_received_as_another_type_with_its_signature() {
    myriad::run(2, |universe| {
        let world = universe.world();
        if world.rank() == 0 {
            world.process_at_rank(1).send(&MyInts([3, 2, 1]));
            // Whole vectors of a padded struct: extent = size_of.
            let values: Vec<ComplexDatatype> = (0..4)
                .map(|i| ComplexDatatype {
                    b: i % 2 == 0,
                    ints: [i, -i, 2 * i, -2 * i],
                    tuple: ([i as f32, 0.5], i as u8),
                })
                .collect();
            world.process_at_rank(1).send(&values[..]);
        } else {
            let mut ints = [0i32; 3];
            world.process_at_rank(0).receive_into(&mut ints[..]);
            assert_eq!(ints, [1, 2, 3]);
            let (got, _) = world.process_at_rank(0).receive_vec::<ComplexDatatype>();
            assert_eq!(got.len(), 4);
            assert_eq!(
                got[3],
                ComplexDatatype {
                    b: false,
                    ints: [3, -3, 6, -6],
                    tuple: ([3.0, 0.5], 3),
                }
            );
        }
    })
    .unwrap();
}

#[test]
fn views_with_a_lower_bound_and_several_elements() {
    on_every_path(|universe, receiver_first| {
        let world = universe.world();
        // Elements 3 then 1 of each group of 4: lb 4 bytes, extent 12.
        let t = UserDatatype::indexed(&[1, 1], &[3, 1], &i32t());
        assert_eq!((t.type_map().lb(), t.type_map().extent()), (4, 12));
        if world.rank() == 0 {
            if receiver_first {
                pause();
            }
            let data: Vec<i32> = (0..12).collect();
            // Three elements at 0, 12, 24 bytes: i32 3, 1, 6, 4, 9, 7.
            // SAFETY: 2 * 12 + 16 = 40 bytes of `data`'s 48.
            let view = unsafe { View::with_count_and_datatype(&data[..], 3, &t) };
            world.process_at_rank(1).send(&view);
            world.process_at_rank(1).send(&view);
        } else {
            if !receiver_first {
                pause();
            }
            let mut flat = vec![0i32; 6];
            world.process_at_rank(0).receive_into(&mut flat[..]);
            assert_eq!(flat, vec![3, 1, 6, 4, 9, 7]);
            let mut back = vec![-1i32; 12];
            {
                // SAFETY: as for the sender.
                let mut view = unsafe { MutView::with_count_and_datatype(&mut back[..], 3, &t) };
                world.process_at_rank(0).receive_into(&mut view);
            }
            assert_eq!(back, vec![-1, 1, -1, 3, 4, -1, 6, 7, -1, 9, -1, -1]);
        }
    });
}

#[test]
fn send_receive_between_views_as_in_rsmpis_vector_example() {
    myriad::run(3, |universe| {
        let world = universe.world();
        let (rank, size) = (world.rank(), world.size());
        let b1: Vec<f64> = (1..=6).map(|x| rank as f64 * x as f64).collect();
        let mut b2 = vec![-1.0f64; 6];
        let t = UserDatatype::vector(2, 2, 3, &f64t());
        {
            // SAFETY: the vector type selects elements 0, 1, 3, 4 of 6.
            let v1 = unsafe { View::with_count_and_datatype(&b1[..], 1, &t) };
            // SAFETY: as above.
            let mut v2 = unsafe { MutView::with_count_and_datatype(&mut b2[..], 1, &t) };
            myriad::point_to_point::send_receive_into(
                &v1,
                &world.process_at_rank((rank + 1) % size),
                &mut v2,
                &world.process_at_rank((rank + size - 1) % size),
            );
        }
        let f = ((rank + size - 1) % size) as f64;
        assert_eq!(b2, vec![f, 2.0 * f, -1.0, 4.0 * f, 5.0 * f, -1.0]);
    })
    .unwrap();
}

#[test]
fn broadcast_into_a_view() {
    myriad::run(3, |universe| {
        let world = universe.world();
        let t = UserDatatype::vector(3, 1, 2, &i32t());
        let mut data = if world.rank() == 0 {
            vec![1, 0, 2, 0, 3]
        } else {
            vec![9; 5]
        };
        {
            // SAFETY: elements 0, 2 and 4 of five i32.
            let mut view = unsafe { MutView::with_count_and_datatype(&mut data[..], 1, &t) };
            world.process_at_rank(0).broadcast_into(&mut view);
        }
        let expected = if world.rank() == 0 {
            vec![1, 0, 2, 0, 3]
        } else {
            vec![1, 9, 2, 9, 3]
        };
        assert_eq!(data, expected);
    })
    .unwrap();
}

#[test]
fn large_strided_messages_take_the_rendezvous_path() {
    const N: usize = 50_000;
    myriad::run(2, |universe| {
        let world = universe.world();
        // Every other f64 of 2N: N values, 400 KB, far above the eager limit.
        let t = UserDatatype::vector(N as i32, 1, 2, &f64t());
        if world.rank() == 0 {
            let data: Vec<f64> = (0..2 * N).map(|i| i as f64).collect();
            // SAFETY: the vector type selects the even elements of `data`.
            let view = unsafe { View::with_count_and_datatype(&data[..], 1, &t) };
            world.process_at_rank(1).send(&view);
            world.process_at_rank(1).synchronous_send(&view);
        } else {
            let mut dense = vec![0.0f64; N];
            world.process_at_rank(0).receive_into(&mut dense[..]);
            assert!(dense.iter().enumerate().all(|(i, &x)| x == (2 * i) as f64));
            let mut odd = vec![0.0f64; 2 * N];
            {
                // SAFETY: the vector type selects N f64 of `odd[1..]`.
                let mut view = unsafe { MutView::with_count_and_datatype(&mut odd[1..], 1, &t) };
                world.process_at_rank(0).receive_into(&mut view);
            }
            assert!(odd.iter().step_by(2).all(|&x| x == 0.0));
            assert!(odd
                .iter()
                .skip(1)
                .step_by(2)
                .enumerate()
                .all(|(i, &x)| x == (2 * i) as f64));
        }
    })
    .unwrap();
}

// ---------------------------------------------------------------------------
// pack / unpack

#[test]
fn pack_and_unpack_round_trips() {
    // rsmpi's pack example.
    let ints = [3i32, 2, 1];
    let packed = datatype::pack(&ints[..]);
    assert_eq!(packed.len(), 12);
    let mut new_ints = [0, 0, 0];
    // SAFETY: `packed` holds three i32.
    let end = unsafe { datatype::unpack_into(&packed, &mut new_ints[..], 0) };
    assert_eq!((end, new_ints), (12, [3, 2, 1]));

    // A view packs its data in type-map order, without holes.
    let data: Vec<f64> = (0..6).map(f64::from).collect();
    let t = UserDatatype::indexed(&[1, 2], &[5, 0], &f64t());
    // SAFETY: elements 5, 0, 1 of `data`.
    let view = unsafe { View::with_count_and_datatype(&data[..], 1, &t) };
    let packed = datatype::pack(&view);
    assert_eq!(packed.len(), datatype::pack_size(1, &t) as usize);
    let mut flat = [0.0f64; 3];
    // SAFETY: three packed f64.
    unsafe { datatype::unpack_into(&packed, &mut flat[..], 0) };
    assert_eq!(flat, [5.0, 0.0, 1.0]);

    // Unpacking into the same view layout restores the selected elements.
    let mut restored = vec![-1.0f64; 6];
    {
        // SAFETY: as above.
        let mut view = unsafe { MutView::with_count_and_datatype(&mut restored[..], 1, &t) };
        // SAFETY: packed from a view of the same type.
        unsafe { datatype::unpack_into(&packed, &mut view, 0) };
    }
    assert_eq!(restored, vec![0.0, 1.0, -1.0, -1.0, -1.0, 5.0]);
}

#[test]
fn pack_into_appends_at_positions() {
    let values = [Pair { x: 0.5, tag: 1 }, Pair { x: -2.0, tag: 9 }];
    let pair_type = UserDatatype::structured(
        &[1, 1],
        &[
            offset_of!(Pair, x) as Address,
            offset_of!(Pair, tag) as Address,
        ],
        &[f64t(), u8::equivalent_datatype()],
    );
    assert_eq!(datatype::pack_size(2, &pair_type), 18);
    let mut buf = vec![0u8; 18 + 4];
    // SAFETY: `Pair` is described field by field: no padding selected.
    let view = unsafe { View::with_count_and_datatype(&values[..], 2, &pair_type) };
    let at = datatype::pack_into(&view, &mut buf, 0);
    let at = datatype::pack_into(&7u32, &mut buf, at);
    assert_eq!(at, 22);

    let mut back = [Pair::default(); 2];
    let mut n = 0u32;
    {
        // SAFETY: as above; `f64` and `u8` fields accept any value.
        let mut view = unsafe { MutView::with_count_and_datatype(&mut back[..], 2, &pair_type) };
        // SAFETY: packed from a view of the same type.
        let at = unsafe { datatype::unpack_into(&buf, &mut view, 0) };
        // SAFETY: a packed u32 follows.
        unsafe { datatype::unpack_into(&buf, &mut n, at) };
    }
    assert_eq!((back, n), (values, 7));
}

#[test]
fn pack_and_unpack_check_sizes_and_positions() {
    let mut small = [0u8; 10];
    let err = datatype::try_pack_into(&[1u32, 2, 3][..], &mut small, 0).unwrap_err();
    assert!(matches!(err, Error::Count { .. }), "{err}");
    assert!(err.to_string().contains("holds 10"), "{err}");
    assert_eq!(small, [0; 10], "nothing written on error");
    let err = datatype::try_pack_into(&1u8, &mut small, -1).unwrap_err();
    assert!(matches!(err, Error::Arg { .. }), "{err}");

    let mut out = [0u64; 2];
    // SAFETY: only sizes are checked; nothing is read on error.
    let err = unsafe { datatype::try_unpack_into(&[0u8; 12], &mut out[..], 0) }.unwrap_err();
    assert!(matches!(err, Error::Count { .. }), "{err}");
    assert!(err.to_string().contains("16 bytes of data"), "{err}");
    // SAFETY: as above.
    let err = unsafe { datatype::try_unpack_into(&[0u8; 16], &mut out[..], 4) }.unwrap_err();
    assert!(matches!(err, Error::Count { .. }), "{err}");

    let caught = std::panic::catch_unwind(|| datatype::pack_size(-1, &f64t())).unwrap_err();
    let message = caught.downcast_ref::<String>().unwrap();
    assert!(message.contains("negative"), "{message}");
}

// ---------------------------------------------------------------------------
// Errors

#[test]
fn mismatched_signatures_are_type_errors() {
    let out = myriad::run(2, |universe| {
        let world = universe.world();
        if world.rank() == 0 {
            let data = [1.0f64; 6];
            let t = UserDatatype::vector(2, 2, 3, &f64t());
            // SAFETY: four f64 of six.
            let view = unsafe { View::with_count_and_datatype(&data[..], 1, &t) };
            world.process_at_rank(1).send(&view);
            let st = UserDatatype::structured(
                &[1, 1],
                &[0, 8],
                &[i32::equivalent_datatype(), f64::equivalent_datatype()],
            );
            let pair = [0u8; 16];
            // SAFETY: bytes 0..4 and 8..16 of `pair` are initialised u8s read
            // as an i32 and an f64.
            let view = unsafe { View::with_count_and_datatype(&pair[..], 1, &st) };
            world.process_at_rank(1).send(&view);
            world.process_at_rank(1).send(&1u8);
            vec![]
        } else {
            let mut ints = [0i64; 4];
            let e1 = world
                .process_at_rank(0)
                .try_receive_into_with_tag(&mut ints[..], ANY_TAG)
                .unwrap_err();
            assert_eq!(ints, [0; 4], "nothing copied on a type error");
            let mut swapped = (0.0f64, 0i32);
            let e2 = world
                .process_at_rank(0)
                .try_receive_into_with_tag(&mut swapped, ANY_TAG)
                .unwrap_err();
            // The job goes on: the next message is received normally.
            let (one, _) = world.process_at_rank(0).receive::<u8>();
            assert_eq!(one, 1);
            vec![e1, e2]
        }
    })
    .unwrap();
    let errors = &out[1];
    assert!(matches!(errors[0], Error::Type { .. }), "{}", errors[0]);
    assert!(
        errors[0].to_string().contains("sent f64, expected i64"),
        "{}",
        errors[0]
    );
    assert!(matches!(errors[1], Error::Type { .. }), "{}", errors[1]);
    assert!(
        errors[1].to_string().contains("sent i32, expected f64"),
        "{}",
        errors[1]
    );
}

#[test]
fn a_view_too_small_for_the_message_truncates() {
    let out = myriad::run(2, |universe| {
        let world = universe.world();
        if world.rank() == 0 {
            world.process_at_rank(1).send(&[1i32, 2, 3, 4][..]);
            None
        } else {
            let mut data = [0i32; 5];
            let t = UserDatatype::vector(3, 1, 2, &i32t());
            // SAFETY: elements 0, 2, 4 of five.
            let mut view = unsafe { MutView::with_count_and_datatype(&mut data[..], 1, &t) };
            let err = world
                .process_at_rank(0)
                .try_receive_into_with_tag(&mut view, ANY_TAG)
                .unwrap_err();
            Some((err, data))
        }
    })
    .unwrap();
    let (err, data) = out[1].clone().unwrap();
    assert!(
        matches!(
            err,
            Error::Truncate {
                message_bytes: 16,
                buffer_bytes: 12,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(data, [1, 0, 2, 0, 3], "the part that fits was copied");
}

#[test]
fn bad_constructor_arguments_are_clear_errors() {
    let err = UserDatatype::try_contiguous(-3, &f64t()).unwrap_err();
    assert!(matches!(err, Error::Count { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        "UserDatatype::contiguous: count is -3; it must not be negative"
    );
    let err = UserDatatype::try_vector(2, -1, 3, &f64t()).unwrap_err();
    assert!(err.to_string().contains("blocklength is -1"), "{err}");
    let err = UserDatatype::try_indexed(&[1, 1], &[0], &f64t()).unwrap_err();
    assert!(matches!(err, Error::Arg { .. }), "{err}");
    assert!(err
        .to_string()
        .contains("2 block lengths but 1 displacements"));
    let err = UserDatatype::try_heterogeneous_indexed(&[1], &[0, 8], &f64t()).unwrap_err();
    assert!(matches!(err, Error::Arg { .. }), "{err}");
    let err = UserDatatype::try_structured(&[1, 1], &[0, 8], &[f64t()]).unwrap_err();
    assert!(err.to_string().contains("1 types"), "{err}");
    let err = UserDatatype::try_heterogeneous_vector(3, 1, isize::MAX, &f64t()).unwrap_err();
    assert!(err.to_string().contains("overflow"), "{err}");
    assert!(UserDatatype::try_indexed_block(-1, &[0], &f64t()).is_err());
    assert!(UserDatatype::try_heterogeneous_indexed_block(1, &[0], &f64t()).is_ok());

    // The panicking forms carry the same message.
    let caught = std::panic::catch_unwind(|| UserDatatype::vector(-1, 1, 1, &f64t())).unwrap_err();
    let message = caught.downcast_ref::<String>().unwrap();
    assert_eq!(
        message,
        "UserDatatype::vector: count is -1; it must not be negative"
    );
    let caught = std::panic::catch_unwind(|| UncommittedUserDatatype::indexed(&[1], &[], &f64t()))
        .unwrap_err();
    let message = caught.downcast_ref::<String>().unwrap();
    assert!(
        message.contains("1 block lengths but 0 displacements"),
        "{message}"
    );
}

fn view_panic(f: impl FnOnce() + std::panic::UnwindSafe) -> String {
    let caught = std::panic::catch_unwind(f).unwrap_err();
    caught
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_else(|| caught.downcast_ref::<&str>().unwrap().to_string())
}

#[test]
fn views_are_checked_against_their_buffers() {
    let data = [0.0f64; 6];
    let t = UserDatatype::vector(2, 2, 3, &f64t()); // reaches 40 bytes
                                                    // Fits exactly at one element; two elements need 80 bytes.
                                                    // SAFETY: checked to fit; not used.
    let _ = unsafe { View::with_count_and_datatype(&data[1..], 1, &t) };
    let message = view_panic(|| {
        // SAFETY: rejected before use.
        let _ = unsafe { View::with_count_and_datatype(&data[..], 2, &t) };
    });
    assert!(
        message.starts_with("View::with_count_and_datatype: 2 element(s)"),
        "{message}"
    );
    assert!(message.contains("reach 80 bytes"), "{message}");
    assert!(message.contains("holds 48"), "{message}");

    let message = view_panic(|| {
        // SAFETY: rejected before use.
        let _ = unsafe { View::with_count_and_datatype(&data[..3], 1, &t) };
    });
    assert!(message.contains("holds 24"), "{message}");

    // Data before the buffer's address: a negative lower bound.
    let backwards = UserDatatype::vector(2, 1, -1, &f64t());
    assert_eq!(backwards.type_map().lb(), -8);
    let message = view_panic(|| {
        // SAFETY: rejected before use.
        let _ = unsafe { View::with_count_and_datatype(&data[..], 1, &backwards) };
    });
    assert!(message.contains("before the buffer's start"), "{message}");
    // Nested at a positive displacement it is usable.
    let shifted = UserDatatype::structured(&[1], &[8], &[&backwards]);
    assert_eq!(shifted.type_map().lb(), 0);
    // SAFETY: f64 at 8 then 0.
    let view = unsafe { View::with_count_and_datatype(&[1.0f64, 2.0][..], 1, &shifted) };
    let bytes = datatype::pack(&view);
    let mut got = [0.0f64; 2];
    // SAFETY: two packed f64.
    unsafe { datatype::unpack_into(&bytes, &mut got[..], 0) };
    assert_eq!(got, [2.0, 1.0]);

    let mut out = [0i32; 4];
    let message = view_panic(move || {
        // SAFETY: rejected before use.
        let _ = unsafe { MutView::with_count_and_datatype(&mut out[..], -1, &i32t()) };
    });
    assert_eq!(
        message,
        "MutView::with_count_and_datatype: count -1 is negative"
    );
}

#[test]
fn uncommitted_refs_convert_from_every_handle() {
    let user = UserDatatype::contiguous(2, &i32t());
    let uncommitted = UncommittedUserDatatype::contiguous(2, &f64t());
    let refs: [UncommittedDatatypeRef<'_>; 3] =
        [i32t().into(), (&user).into(), (&uncommitted).into()];
    let t = UserDatatype::structured(&[1, 1, 1], &[0, 4, 16], &refs);
    assert_eq!(t.type_map().size(), 4 + 8 + 16);
    assert_eq!((t.type_map().lb(), t.type_map().extent()), (0, 32));
    let dup: UncommittedUserDatatype = refs[2].dup();
    assert_eq!(dup.commit().type_map().size(), 16);
}

#[test]
fn reductions_read_and_write_through_views() {
    myriad::run(3, |universe| {
        let world = universe.world();
        let rank = world.rank();
        // Elements 3 then 1: lb 4 bytes, so scratch space and the operands
        // must be placed by the lower bound, not by the buffer address.
        let t = UserDatatype::indexed(&[1, 1], &[3, 1], &i32t());
        let data: Vec<i32> = (0..4).map(|i| i * 10 + rank).collect();
        let mut out = vec![-1i32; 4];
        {
            // SAFETY: elements 3 and 1 of four i32.
            let send = unsafe { View::with_count_and_datatype(&data[..], 1, &t) };
            // SAFETY: as above.
            let mut recv = unsafe { MutView::with_count_and_datatype(&mut out[..], 1, &t) };
            world.all_reduce_into(&send, &mut recv, myriad::collective::SystemOperation::sum());
        }
        // 0 + 1 + 2 added to 3 * element.
        assert_eq!(out, vec![-1, 33, -1, 93]);
    })
    .unwrap();
}

#[test]
fn communicator_pack_methods_round_trip_through_a_message() {
    let out = myriad::run(2, |universe| {
        let world = universe.world();
        if world.rank() == 0 {
            let header = [7i32, 8];
            let body = [1.5f64, 2.5, 3.5];
            let mut bytes = vec![
                0u8;
                (world.pack_size(2, &i32::equivalent_datatype())
                    + world.pack_size(3, &f64::equivalent_datatype()))
                    as usize
            ];
            let at = world.pack_into(&header[..], &mut bytes, 0);
            let end = world.pack_into(&body[..], &mut bytes, at);
            assert_eq!(end as usize, bytes.len());
            assert_eq!(world.pack(&header[..]), bytes[..8].to_vec());
            world.process_at_rank(1).send(&bytes[..]);
            None
        } else {
            let (bytes, _) = world.process_at_rank(0).receive_vec::<u8>();
            let mut header = [0i32; 2];
            let mut body = [0f64; 3];
            // SAFETY: rank 0 packed two i32 and then three f64.
            let at = unsafe { world.unpack_into(&bytes, &mut header[..], 0) };
            // SAFETY: as above.
            unsafe { world.unpack_into(&bytes, &mut body[..], at) };
            Some((header, body))
        }
    })
    .unwrap();
    assert_eq!(out[1], Some(([7, 8], [1.5, 2.5, 3.5])));
}

/// `myriad::datatype::{DynBuffer, DynBufferMut}` at rsmpi's paths: built from
/// slices (or raw parts with a user datatype), they are buffers that sends,
/// receives and reductions take, and downcast back to their element type.
#[test]
fn dyn_buffers_carry_sends_and_reductions() {
    use myriad::collective::SystemOperation;
    use myriad::datatype::{DynBuffer, DynBufferMut};

    for ranks in [1usize, 2, 3, 4, 7, 64] {
        let out = myriad::run(ranks, |universe| {
            let world = universe.world();
            let (me, n) = (world.rank(), world.size());
            // A reduction through type-erased buffers.
            let mine = [me as i64, 1, -(me as i64)];
            let mut sums = [0i64; 3];
            world.all_reduce_into(
                &DynBuffer::new(&mine[..]),
                &mut DynBufferMut::new(&mut sums[..]),
                SystemOperation::sum(),
            );
            let n64 = n as i64;
            assert_eq!(sums, [n64 * (n64 - 1) / 2, n64, -n64 * (n64 - 1) / 2]);

            // A send around the ring through them, of a strided user type:
            // every other f64 of six.
            let strided = UserDatatype::vector(3, 1, 2, &f64::equivalent_datatype());
            let data: Vec<f64> = (0..6).map(|i| (me * 10 + i) as f64).collect();
            // SAFETY: `data` holds one element of `strided` (f64s 0, 2, 4)
            // and lives, unwritten, until the send has completed.
            let erased = unsafe { DynBuffer::from_raw(data.as_ptr(), 1, strided.as_ref()) };
            assert!(!erased.is::<f64>());
            assert_eq!(erased.len(), 1);
            let mut got = [0f64; 3];
            let next = world.process_at_rank((me + 1) % n);
            let prev = world.process_at_rank((me + n - 1) % n);
            myriad::request::scope(|sc| {
                let send = next.immediate_send(sc, &erased);
                let mut into = DynBufferMut::new(&mut got[..]);
                assert!(into.is::<f64>() && !into.is::<u64>());
                assert!(into.reborrow().downcast::<u64>().is_none());
                prev.receive_into(&mut into);
                assert_eq!(into.downgrade().downcast::<f64>().map(|s| s.len()), Some(3));
                send.wait();
            });
            got
        })
        .unwrap();
        for (r, got) in out.iter().enumerate() {
            let p = ((r + ranks - 1) % ranks) as f64 * 10.0;
            assert_eq!(got, &[p, p + 2.0, p + 4.0], "rank {r} of {ranks}");
        }
    }
}

/// Bad raw parts are refused with a clear panic; a DynBuffer of another
/// type does not downcast; a mismatched receive through one is a type error.
#[test]
fn dyn_buffer_bad_input_fails_clearly() {
    use myriad::datatype::{DynBuffer, DynBufferMut};

    let null = std::panic::catch_unwind(|| {
        // SAFETY: refused before anything is read.
        unsafe { DynBuffer::from_raw(std::ptr::null::<u8>(), 1, u8::equivalent_datatype()) };
    })
    .unwrap_err();
    let message = null.downcast_ref::<&str>().copied().unwrap_or_default();
    assert!(message.contains("null"), "{message}");
    let mut x = 0u32;
    let negative = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: refused before anything is written.
        unsafe { DynBufferMut::from_raw(&mut x, -1, u32::equivalent_datatype()) };
    }))
    .unwrap_err();
    let message = negative
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert!(message.contains("negative length -1"), "{message}");

    let bytes = [1u8, 2, 3, 4];
    assert!(DynBuffer::new(&bytes[..]).downcast::<u32>().is_none());
    assert_eq!(
        DynBuffer::new(&bytes[..]).downcast::<u8>(),
        Some(&bytes[..])
    );
    assert!(DynBuffer::new(&[] as &[u8]).is_empty());

    let err = Runtime::builder()
        .ranks(2)
        .run(|universe| {
            let world = universe.world();
            let peer = world.process_at_rank(1 - world.rank());
            if world.rank() == 0 {
                peer.send(&DynBuffer::new(&[1.5f64, 2.5][..]));
            } else {
                let mut ints = [0u64; 2];
                peer.receive_into(&mut DynBufferMut::new(&mut ints[..]));
            }
        })
        .unwrap_err()
        .to_string();
    assert!(err.contains("f64") && err.contains("u64"), "{err}");
}

/// A type whose `Equivalence` builds a fresh `UserDatatype` on each call
/// (as hand-written rsmpi impls do): `DynBuffer::new` keeps its map alive
/// and recognises the type.
#[test]
fn dyn_buffer_of_a_type_with_a_run_time_datatype() {
    use myriad::datatype::DynBuffer;

    #[derive(Debug, Clone, Copy, PartialEq)]
    #[repr(C)]
    struct Pair(u32, u32);
    // SAFETY: two contiguous u32s are exactly `Pair` (repr(C), no padding).
    unsafe impl Equivalence for Pair {
        type Out = UserDatatype;
        fn equivalent_datatype() -> UserDatatype {
            UserDatatype::contiguous(2, &u32::equivalent_datatype())
        }
    }
    let pairs = [Pair(1, 2), Pair(3, 4)];
    let erased = DynBuffer::new(&pairs[..]);
    assert!(erased.is::<Pair>());
    assert!(!erased.is::<u64>());
    assert_eq!(erased.downcast::<Pair>(), Some(&pairs[..]));
    let out = myriad::run(2, move |universe| {
        let world = universe.world();
        let mut got = [Pair(0, 0); 2];
        let erased = DynBuffer::new(&pairs[..]);
        myriad::request::scope(|sc| {
            let peer = world.process_at_rank(1 - world.rank());
            let send = peer.immediate_send(sc, &erased);
            peer.receive_into(&mut got[..]);
            send.wait();
        });
        got
    })
    .unwrap();
    assert_eq!(out, vec![pairs; 2]);
}
