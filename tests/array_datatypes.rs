//! `create_resized`, `subarray` and `darray`: their type maps checked
//! against a brute-force model, and used in whole jobs (scatter of resized
//! columns, gathering subarrays and darray pieces into a global array).

use myriad::datatype::{self, Distribution, MutView, Order, UserDatatype, View};
use myriad::traits::*;
use myriad::Error;

fn i32t() -> myriad::datatype::SystemDatatype {
    i32::equivalent_datatype()
}

/// The elements a type selects from an array holding 0, 1, 2, ...: packs
/// one element of `t` over that array.
fn selected(t: &UserDatatype, len: usize) -> Vec<i32> {
    let array: Vec<i32> = (0..len as i32).collect();
    // SAFETY: `t` is built from i32 only, and `array` holds i32.
    let view = unsafe { View::with_count_and_datatype(&array[..], 1, t) };
    let bytes = datatype::pack(&view);
    bytes
        .chunks_exact(4)
        .map(|c| i32::from_ne_bytes(c.try_into().unwrap()))
        .collect()
}

/// Linear index of `idx` in an array of `sizes` stored in `order`.
fn linear(idx: &[usize], sizes: &[usize], order: Order) -> usize {
    let dims: Vec<usize> = match order {
        Order::C => (0..sizes.len()).collect(),
        Order::Fortran => (0..sizes.len()).rev().collect(),
    };
    dims.iter().fold(0, |acc, &d| acc * sizes[d] + idx[d])
}

/// Every index tuple of an array of `sizes`, in storage order.
fn indices(sizes: &[usize], order: Order) -> Vec<Vec<usize>> {
    let total: usize = sizes.iter().product();
    let mut all = vec![vec![0; sizes.len()]; total];
    let mut idx = vec![0usize; sizes.len()];
    for _ in 0..total {
        all[linear(&idx, sizes, order)] = idx.clone();
        for d in 0..sizes.len() {
            idx[d] += 1;
            if idx[d] < sizes[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    all
}

#[test]
fn resized_keeps_data_and_moves_bounds() {
    let column = UserDatatype::vector(3, 1, 3, &i32t());
    let r = UserDatatype::create_resized(&column, 0, 4);
    let m = r.type_map();
    assert_eq!((m.size(), m.lb(), m.extent()), (12, 0, 4));
    // Three consecutive "columns" of a 3x3 matrix: the whole matrix by
    // columns.
    let matrix: Vec<i32> = (0..9).collect();
    // SAFETY: i32 data viewed through an i32 type.
    let view = unsafe { View::with_count_and_datatype(&matrix[..], 3, &r) };
    let packed = datatype::pack(&view);
    let got: Vec<i32> = packed
        .chunks_exact(4)
        .map(|c| i32::from_ne_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(got, [0, 3, 6, 1, 4, 7, 2, 5, 8]);
    // A larger extent and a lower bound before the data.
    let r = UserDatatype::create_resized(&i32t(), -4, 12);
    assert_eq!((r.type_map().lb(), r.type_map().extent()), (-4, 12));
    assert_eq!(r.type_map().segments()[0].offset, 4);
    // Nested in a contiguous type, the new extent is the stride.
    let c = UserDatatype::contiguous(3, &UserDatatype::create_resized(&i32t(), 0, 8));
    assert_eq!(selected(&c, 6), [0, 2, 4]);
    // Bad input.
    let err = UserDatatype::try_create_resized(&i32t(), 0, -1).unwrap_err();
    assert!(err.to_string().contains("extent -1 is negative"), "{err}");
    let err = UserDatatype::try_create_resized(&i32t(), 2, 4).unwrap_err();
    assert!(matches!(err, Error::Unsupported { .. }), "{err}");
    assert!(
        err.to_string().contains("before the new lower bound 2"),
        "{err}"
    );
}

#[test]
fn subarrays_in_both_orders_match_the_model() {
    let cases: &[(&[i32], &[i32], &[i32])] = &[
        (&[7], &[3], &[2]),
        (&[4, 4], &[2, 2], &[1, 1]),
        (&[3, 5], &[3, 1], &[0, 4]),
        (&[2, 3, 4], &[1, 2, 3], &[1, 0, 1]),
        (&[5, 1, 3], &[5, 1, 3], &[0, 0, 0]),
    ];
    for &(sizes, subsizes, starts) in cases {
        for order in [Order::C, Order::Fortran] {
            let t = UserDatatype::subarray(sizes, subsizes, starts, order, &i32t());
            let us: Vec<usize> = sizes.iter().map(|&s| s as usize).collect();
            let total: usize = us.iter().product();
            assert_eq!(t.type_map().lb(), 0);
            assert_eq!(t.type_map().extent(), total * 4);
            let expected: Vec<i32> = indices(&us, order)
                .iter()
                .filter(|idx| {
                    (0..idx.len()).all(|d| {
                        let i = idx[d] as i32;
                        starts[d] <= i && i < starts[d] + subsizes[d]
                    })
                })
                .map(|idx| linear(idx, &us, order) as i32)
                .collect();
            assert_eq!(selected(&t, total), expected, "{sizes:?} {order:?}");
        }
    }
    // Bad input: each a clear error.
    type Case<'a> = (&'a [i32], &'a [i32], &'a [i32], &'a str);
    let bad: &[Case] = &[
        (&[4, 4], &[2], &[0, 0], "subsizes has 1 entries"),
        (&[4, 4], &[2, 2], &[0], "starts has 1 entries"),
        (&[], &[], &[], "at least one dimension"),
        (
            &[4, 4],
            &[5, 1],
            &[0, 0],
            "dimension 0 has size 4, subsize 5",
        ),
        (
            &[4, 4],
            &[2, 2],
            &[0, 3],
            "dimension 1 has size 4, subsize 2 and start 3",
        ),
        (&[4, 0], &[2, 0], &[0, 0], "dimension 1 has size 0"),
        (&[4, 4], &[2, 2], &[-1, 0], "start -1"),
    ];
    for &(sizes, subsizes, starts, needle) in bad {
        let err = UserDatatype::try_subarray(sizes, subsizes, starts, Order::C, &i32t())
            .unwrap_err()
            .to_string();
        assert!(err.contains(needle), "{err}");
    }
}

/// Which grid coordinate owns index `i` of a dimension.
fn owner(i: usize, g: usize, p: usize, dist: Distribution) -> usize {
    match dist {
        Distribution::None => 0,
        Distribution::Block(b) => i / b.map_or(g.div_ceil(p), |b| b as usize),
        Distribution::Cyclic(b) => (i / b.map_or(1, |b| b as usize)) % p,
    }
}

#[test]
fn darray_pieces_match_the_model_and_cover_the_array_once() {
    use Distribution as D;
    let cases: &[(&[i32], &[Distribution], &[i32])] = &[
        (&[10], &[D::Block(None)], &[3]),
        (&[10], &[D::Cyclic(Some(2))], &[2]),
        (&[10], &[D::Cyclic(None)], &[4]),
        (&[10], &[D::Block(Some(4))], &[3]),
        (&[6, 5], &[D::Block(None), D::Cyclic(None)], &[2, 3]),
        (&[6, 5], &[D::None, D::Block(None)], &[1, 2]),
        (
            &[4, 3, 5],
            &[D::Cyclic(Some(2)), D::None, D::Block(Some(2))],
            &[2, 1, 3],
        ),
        (&[7], &[D::Block(None)], &[7]),
        (&[3, 3], &[D::Block(None), D::Block(None)], &[1, 1]),
    ];
    for &(gsizes, distribs, psizes) in cases {
        for order in [Order::C, Order::Fortran] {
            let size: i32 = psizes.iter().product();
            let us: Vec<usize> = gsizes.iter().map(|&s| s as usize).collect();
            let total: usize = us.iter().product();
            let mut seen = vec![0; total];
            for rank in 0..size {
                let t = UserDatatype::darray(size, rank, gsizes, distribs, psizes, order, &i32t());
                assert_eq!((t.type_map().lb(), t.type_map().extent()), (0, total * 4));
                // Row-major grid coordinates of `rank`.
                let mut coords = vec![0usize; psizes.len()];
                let mut left = rank as usize;
                for d in (0..psizes.len()).rev() {
                    coords[d] = left % psizes[d] as usize;
                    left /= psizes[d] as usize;
                }
                let expected: Vec<i32> = indices(&us, order)
                    .iter()
                    .filter(|idx| {
                        (0..idx.len()).all(|d| {
                            owner(idx[d], us[d], psizes[d] as usize, distribs[d]) == coords[d]
                        })
                    })
                    .map(|idx| linear(idx, &us, order) as i32)
                    .collect();
                let got = selected(&t, total);
                assert_eq!(
                    got, expected,
                    "{gsizes:?} {distribs:?} {psizes:?} {order:?} {rank}"
                );
                for i in got {
                    seen[i as usize] += 1;
                }
            }
            assert!(
                seen.iter().all(|&n| n == 1),
                "{gsizes:?} {order:?}: {seen:?}"
            );
        }
    }
    // Bad input.
    type Case<'a> = (i32, i32, &'a [i32], &'a [Distribution], &'a [i32], &'a str);
    let bad: &[Case] = &[
        (4, 0, &[8], &[D::Block(None)], &[3], "grid of [3]"),
        (4, 4, &[8], &[D::Block(None)], &[4], "rank 4 of 4"),
        (4, -1, &[8], &[D::Block(None)], &[4], "rank -1 of 4"),
        (
            2,
            0,
            &[8],
            &[D::Block(Some(3))],
            &[2],
            "cannot be distributed block (block size 3)",
        ),
        (
            2,
            0,
            &[8],
            &[D::Cyclic(Some(0))],
            &[2],
            "cyclic (block size 0)",
        ),
        (2, 0, &[8], &[D::None], &[2], "distributed none"),
        (
            1,
            0,
            &[0],
            &[D::Block(None)],
            &[1],
            "dimension 0 of 0 elements",
        ),
        (
            2,
            0,
            &[8, 2],
            &[D::Block(None)],
            &[2, 1],
            "distribs has 1 entries",
        ),
        (
            2,
            0,
            &[8],
            &[D::Block(None)],
            &[2, 1],
            "psizes has 2 entries",
        ),
        (1, 0, &[], &[], &[], "at least one dimension"),
    ];
    for &(size, rank, gsizes, distribs, psizes, needle) in bad {
        let err = UserDatatype::try_darray(size, rank, gsizes, distribs, psizes, Order::C, &i32t())
            .unwrap_err()
            .to_string();
        assert!(err.contains(needle), "{needle}: {err}");
    }
}

/// The root scatters the columns of an n x n matrix, one per rank, with a
/// column type resized to one element; each rank sends its column back
/// into a transposed matrix through the same type.
#[test]
fn scatter_resized_columns_on_several_rank_counts() {
    for n in [1usize, 2, 3, 4, 7, 64] {
        let out = myriad::run(n, |universe| {
            let world = universe.world();
            let n = world.size();
            let column = UserDatatype::vector(n, 1, n, &i32t());
            let column = UserDatatype::create_resized(&column, 0, 4);
            let root = world.process_at_rank(0);
            let mut mine = vec![0i32; n as usize];
            // Each rank receives one element of n contiguous i32 (myriad's
            // collectives count elements: one column each).
            let row = UserDatatype::contiguous(n, &i32t());
            // SAFETY: i32 data, i32 type.
            let mut into = unsafe { MutView::with_count_and_datatype(&mut mine[..], 1, &row) };
            if world.rank() == 0 {
                let matrix: Vec<i32> = (0..n * n).collect();
                // SAFETY: i32 data, i32 type; n columns reach the matrix's end.
                let view = unsafe { View::with_count_and_datatype(&matrix[..], n, &column) };
                root.scatter_into_root(&view, &mut into);
            } else {
                root.scatter_into(&mut into);
            }
            // Back: every rank's column into column `rank` of a matrix at
            // the root, through a MutView of one resized column at an
            // offset.
            if world.rank() == 0 {
                let mut back = vec![-1i32; (n * n) as usize];
                for r in 0..n {
                    let part = &mut back[r as usize..];
                    // SAFETY: as above; the column reaches n*(n-1) past `r`.
                    let mut view = unsafe { MutView::with_count_and_datatype(part, 1, &column) };
                    if r == 0 {
                        world.this_process().send(&mine[..]);
                    }
                    world.process_at_rank(r).receive_into(&mut view);
                }
                Some(back)
            } else {
                world.process_at_rank(0).send(&mine[..]);
                None
            }
            .map(|back| (mine.clone(), back))
            .unwrap_or((mine, Vec::new()))
        })
        .unwrap();
        let n32 = n as i32;
        for (r, (column, _)) in out.iter().enumerate() {
            let expected: Vec<i32> = (0..n32).map(|i| i * n32 + r as i32).collect();
            assert_eq!(column, &expected, "n {n} rank {r}");
        }
        let matrix: Vec<i32> = (0..n32 * n32).collect();
        assert_eq!(out[0].1, matrix, "n {n}: the columns come back in place");
    }
}

/// Every rank owns a darray piece of a global 2-D array; the root gathers
/// the pieces with point-to-point into one array through each rank's
/// darray type, and a subarray of it through a subarray type.
#[test]
fn gather_darray_pieces_on_several_rank_counts() {
    for n in [1usize, 2, 3, 4, 7, 36] {
        let out = myriad::run(n, |universe| {
            let world = universe.world();
            let size = world.size();
            let mut dims = [0, 0];
            myriad::topology::dims_create(size, &mut dims);
            let gsizes = [2 * dims[0] + 1, 3 * dims[1]];
            let total = (gsizes[0] * gsizes[1]) as usize;
            let distribs = [Distribution::Block(None), Distribution::Cyclic(None)];
            let piece = |rank| {
                UserDatatype::darray(
                    size,
                    rank,
                    &gsizes,
                    &distribs,
                    &dims,
                    Order::Fortran,
                    &i32t(),
                )
            };
            let global: Vec<i32> = (0..total as i32).map(|i| i + 1000 * world.rank()).collect();
            let mine = piece(world.rank());
            // SAFETY: i32 data, i32 type; one element spans the array.
            let view = unsafe { View::with_count_and_datatype(&global[..], 1, &mine) };
            world.process_at_rank(0).send(&view);
            if world.rank() != 0 {
                return Vec::new();
            }
            let mut result = vec![-1i32; total];
            for r in 0..size {
                let theirs = piece(r);
                // SAFETY: as above.
                let mut view =
                    unsafe { MutView::with_count_and_datatype(&mut result[..], 1, &theirs) };
                world.process_at_rank(r).receive_into(&mut view);
            }
            // A subarray of the result, received as a contiguous block.
            let sub = UserDatatype::subarray(&gsizes, &[2, 2], &[1, 1], Order::Fortran, &i32t());
            // SAFETY: as above.
            let view = unsafe { View::with_count_and_datatype(&result[..], 1, &sub) };
            world.this_process().send(&view);
            let (block, _) = world.this_process().receive_vec::<i32>();
            let mut out = result;
            out.extend(block);
            out
        })
        .unwrap();
        let root = &out[0];
        let mut dims = [0, 0];
        myriad::topology::dims_create(n as i32, &mut dims);
        let gsizes = [2 * dims[0] + 1, 3 * dims[1]];
        let total = (gsizes[0] * gsizes[1]) as usize;
        // Element i comes from its owner: block rows, cyclic columns, and
        // Fortran order (index = row + g0 * col).
        let g0 = gsizes[0] as usize;
        for (i, &got) in root[..total].iter().enumerate() {
            let (row, col) = (i % g0, i / g0);
            let prow = row / g0.div_ceil(dims[0] as usize);
            let pcol = col % dims[1] as usize;
            let owner = prow * dims[1] as usize + pcol;
            assert_eq!(got, i as i32 + 1000 * owner as i32, "n {n} element {i}");
        }
        let at = |r: usize, c: usize| root[r + g0 * c];
        assert_eq!(&root[total..], &[at(1, 1), at(2, 1), at(1, 2), at(2, 2)]);
    }
}

#[test]
fn receiving_a_subarray_of_the_wrong_size_is_an_error() {
    let text = myriad::run(2, |universe| {
        let world = universe.world();
        let sub = UserDatatype::subarray(&[4, 4], &[2, 2], &[0, 0], Order::C, &i32t());
        if world.rank() == 0 {
            world.process_at_rank(1).send(&[1i32, 2, 3, 4, 5][..]);
        } else {
            let mut global = [0i32; 16];
            // SAFETY: i32 data, i32 type.
            let mut view = unsafe { MutView::with_count_and_datatype(&mut global[..], 1, &sub) };
            world.process_at_rank(0).receive_into(&mut view);
        }
    })
    .expect_err("a message of 5 i32 does not fit a 2x2 subarray")
    .to_string();
    assert!(text.contains("truncat") || text.contains("bytes"), "{text}");
    // A message of f64 into a subarray of i32: a type-signature error.
    let text = myriad::run(2, |universe| {
        let world = universe.world();
        let sub = UserDatatype::subarray(&[4, 4], &[2, 2], &[0, 0], Order::C, &i32t());
        if world.rank() == 0 {
            world.process_at_rank(1).send(&[1.0f64, 2.0][..]);
        } else {
            let mut global = [0i32; 16];
            // SAFETY: i32 data, i32 type.
            let mut view = unsafe { MutView::with_count_and_datatype(&mut global[..], 1, &sub) };
            world.process_at_rank(0).receive_into(&mut view);
        }
    })
    .expect_err("f64 data cannot be received as i32")
    .to_string();
    assert!(text.contains("f64") && text.contains("i32"), "{text}");
}

/// Reductions over resized column types, whose data reaches far beyond
/// `count * extent`: the scratch space of every algorithm must hold it.
#[test]
fn reductions_over_resized_columns() {
    use myriad::collective::{Algorithm, Collective, SystemOperation};
    for n in [1usize, 2, 3, 4, 7, 32] {
        for algorithm in [
            Algorithm::SharedMemory,
            Algorithm::RecursiveDoubling,
            Algorithm::ReduceBroadcast,
        ] {
            let out = myriad::run(n, |universe| {
                let world = universe.world();
                world
                    .set_collective_algorithm(Collective::AllReduce, algorithm)
                    .unwrap();
                let n = world.size();
                let column = UserDatatype::vector(n, 1, n, &i32t());
                let column = UserDatatype::create_resized(&column, 0, 4);
                let mine: Vec<i32> = (0..n * n).map(|i| i * (world.rank() + 1)).collect();
                let mut total = vec![0i32; (n * n) as usize];
                // SAFETY: i32 data, i32 type; n columns span the matrix.
                let send = unsafe { View::with_count_and_datatype(&mine[..], n, &column) };
                // SAFETY: as above.
                let mut recv =
                    unsafe { MutView::with_count_and_datatype(&mut total[..], n, &column) };
                world.all_reduce_into(&send, &mut recv, SystemOperation::sum());
                total
            })
            .unwrap();
            let n32 = n as i32;
            let factor: i32 = (1..=n32).sum();
            let expected: Vec<i32> = (0..n32 * n32).map(|i| i * factor).collect();
            for (r, total) in out.iter().enumerate() {
                assert_eq!(total, &expected, "n {n} {algorithm:?} rank {r}");
            }
        }
    }
}
