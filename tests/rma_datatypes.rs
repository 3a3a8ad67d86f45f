//! One-sided operations with target datatypes (`MPI_Put`'s
//! `target_count`/`target_datatype`), modelled on the MPI standard's
//! one-sided examples that use them: the "mapvals" gather through indexed
//! types (MPI-3.1 Example 11.1) and its accumulate twin (Example 11.2), a
//! strided put of a column, a transposing get with a resized vector type,
//! struct, subarray and resized targets (with `MPI_REPLACE`), accumulates from every rank at
//! once through a vector type, and the errors: a target span outside the
//! segment, mismatched signatures, base values that would not land on the
//! window's elements, user operations in accumulates.

use myriad::collective::{SystemOperation, UserOperation};
use myriad::datatype::{MutView, Order, UserDatatype, View};
use myriad::traits::*;
use myriad::window::{Epoch, LockType, TargetView, WindowCreation};
use myriad::{ErrorClass, RmaError};

/// Example 11.1's `map`: rank `r`'s value `i` is global index
/// `(i * n + 3 * r) % (n * m)`, one-to-one within a rank (so no target
/// location appears twice in one call), colliding across ranks.
fn map(r: usize, i: usize, n: usize, m: usize) -> usize {
    (i * n + 3 * r) % (n * m)
}

/// Per target rank, the (origin index, target displacement) pairs of `map`.
fn by_target(r: usize, n: usize, m: usize) -> Vec<Vec<(i32, i32)>> {
    let mut out = vec![Vec::new(); n];
    for i in 0..m {
        let g = map(r, i, n, m);
        out[g / m].push((i as i32, (g % m) as i32));
    }
    out
}

/// Example 11.1 ("mapvals"): `B(i) = A(map(i))` with `A` distributed in
/// blocks of `m`; one `get` per target rank, the origin and the target
/// both described by indexed types built from the map, in a fence epoch.
#[test]
fn mapvals_gets_through_indexed_target_types() {
    for &n in &[1usize, 2, 3, 5, 16] {
        let m = 8;
        let out = myriad::run(n, move |universe| {
            let world = universe.world();
            let r = world.rank() as usize;
            let mut a: Vec<f64> = (0..m).map(|j| (r * m + j) as f64).collect();
            let mut b = vec![-1.0f64; m];
            let f64t = f64::equivalent_datatype();
            world
                .with_window(&mut a, |win| {
                    let epoch = win.fence().unwrap();
                    for (t, pairs) in by_target(r, n, m).into_iter().enumerate() {
                        if pairs.is_empty() {
                            continue;
                        }
                        let ones = vec![1; pairs.len()];
                        let origin: Vec<i32> = pairs.iter().map(|p| p.0).collect();
                        let target: Vec<i32> = pairs.iter().map(|p| p.1).collect();
                        let otype = UserDatatype::indexed(&ones, &origin, &f64t);
                        let ttype = UserDatatype::indexed(&ones, &target, &f64t);
                        // SAFETY: the indexed type selects initialised f64s
                        // of `b` (indices below `m`).
                        let mut view =
                            unsafe { MutView::with_count_and_datatype(&mut b[..], 1, &otype) };
                        epoch
                            .get_typed(t as i32, &TargetView::new(0, &ttype), &mut view)
                            .unwrap();
                    }
                    epoch.end().unwrap();
                })
                .unwrap();
            b
        })
        .unwrap();
        for (r, b) in out.iter().enumerate() {
            let want: Vec<f64> = (0..m).map(|i| map(r, i, n, m) as f64).collect();
            assert_eq!(b, &want, "{n} ranks, rank {r}");
        }
    }
}

/// Example 11.2: `A(map(i)) += B(i)`, one `accumulate` per target rank
/// through indexed types; ranks' maps collide, so several origins add to
/// one location in the same epoch.
#[test]
fn mapvals_accumulates_through_indexed_target_types() {
    for &n in &[2usize, 3, 16] {
        let m = 8;
        let out = myriad::Runtime::builder()
            .ranks(n)
            .workers(2)
            .run(move |universe| {
                let world = universe.world();
                let r = world.rank() as usize;
                let mut a = vec![1000i64; m];
                let b: Vec<i64> = (0..m).map(|i| (r * 100 + i) as i64).collect();
                let i64t = i64::equivalent_datatype();
                world
                    .with_window(&mut a, |win| {
                        let epoch = win.fence().unwrap();
                        for (t, pairs) in by_target(r, n, m).into_iter().enumerate() {
                            if pairs.is_empty() {
                                continue;
                            }
                            let ones = vec![1; pairs.len()];
                            let origin: Vec<i32> = pairs.iter().map(|p| p.0).collect();
                            let target: Vec<i32> = pairs.iter().map(|p| p.1).collect();
                            let otype = UserDatatype::indexed(&ones, &origin, &i64t);
                            let ttype = UserDatatype::indexed(&ones, &target, &i64t);
                            // SAFETY: initialised i64s of `b`.
                            let view = unsafe { View::with_count_and_datatype(&b[..], 1, &otype) };
                            epoch
                                .accumulate_typed(
                                    t as i32,
                                    &TargetView::new(0, &ttype),
                                    &view,
                                    SystemOperation::sum(),
                                )
                                .unwrap();
                        }
                        epoch.end().unwrap();
                    })
                    .unwrap();
                a
            })
            .unwrap();
        let mut want = vec![1000i64; n * m];
        for r in 0..n {
            for i in 0..m {
                want[map(r, i, n, m)] += (r * 100 + i) as i64;
            }
        }
        let got: Vec<i64> = out.concat();
        assert_eq!(got, want, "{n} ranks");
    }
}

/// A strided put of a column: rank `r` puts its row into column `r` of
/// rank 0's `n × n` matrix through a vector type; and a transposing get:
/// every rank reads its neighbour's matrix transposed, through a column
/// type resized to one element (`count = n` columns, one element apart).
#[test]
fn strided_put_of_a_column_and_transposing_get() {
    for &n in &[1usize, 2, 4, 9] {
        let out = myriad::run(n, move |universe| {
            let world = universe.world();
            let r = world.rank() as usize;
            let f64t = f64::equivalent_datatype();
            let column = UserDatatype::vector(n as i32, 1, n as i32, &f64t);
            let one_column = UserDatatype::create_resized(&column, 0, 8);
            let win = world.allocate_window::<f64>(n * n).unwrap();
            let row: Vec<f64> = (0..n).map(|j| (r * 10 + j) as f64).collect();
            let epoch = win.fence().unwrap();
            epoch
                .put_typed(0, &TargetView::new(r, &column), &row[..])
                .unwrap();
            epoch.end().unwrap();
            let mut gathered = vec![0.0f64; n * n];
            if r == 0 {
                let lock = win.lock(0, LockType::Shared).unwrap();
                lock.get(0, 0, &mut gathered).unwrap();
            }
            // Now every rank fills its own matrix and reads the
            // neighbour's transposed.
            let mine: Vec<f64> = (0..n * n).map(|k| (r * 1000 + k) as f64).collect();
            win.lock(r as i32, LockType::Exclusive)
                .unwrap()
                .put(r as i32, 0, &mine)
                .unwrap();
            world.barrier();
            let t = ((r + 1) % n) as i32;
            let mut transposed = vec![0.0f64; n * n];
            let lock = win.lock(t, LockType::Shared).unwrap();
            let columns = TargetView::with_count_and_datatype(0, n as i32, &one_column);
            lock.get_typed(t, &columns, &mut transposed[..]).unwrap();
            drop(lock);
            win.free().unwrap();
            (gathered, transposed)
        })
        .unwrap();
        for i in 0..n {
            for j in 0..n {
                // Column j of rank 0 is rank j's row: element (i, j) = j*10 + i.
                assert_eq!(
                    out[0].0[i * n + j],
                    (j * 10 + i) as f64,
                    "{n} ranks: ({i}, {j})"
                );
            }
        }
        for (r, (_, transposed)) in out.iter().enumerate() {
            let t = (r + 1) % n;
            for i in 0..n {
                for j in 0..n {
                    assert_eq!(transposed[i * n + j], (t * 1000 + j * n + i) as f64);
                }
            }
        }
    }
}

/// Struct elements with a target type that picks one field of each (the
/// `f64`s of `#[repr(C)]` pairs, by byte displacements), a subarray target
/// (a 2×2 block of a 4×4 matrix) and a resized type with a negative lower
/// bound; the request forms in a scope.
#[test]
fn struct_subarray_and_resized_targets() {
    #[derive(Equivalence, Clone, Copy, Default, Debug, PartialEq)]
    #[repr(C)]
    struct Pair {
        a: i32,
        b: f64,
    }
    let out = myriad::run(2, |universe| {
        let world = universe.world();
        let (rank, other) = (world.rank(), 1 - world.rank());
        let f64t = f64::equivalent_datatype();
        let i32t = i32::equivalent_datatype();
        let pairs = world.allocate_window::<Pair>(3).unwrap();
        let grid = world.allocate_window::<i32>(16).unwrap();
        // The b fields of the three pairs: bytes 8, 24, 40.
        let fields = UserDatatype::heterogeneous_indexed(&[1, 1, 1], &[8, 24, 40], &f64t);
        let block = UserDatatype::subarray(&[4, 4], &[2, 2], &[1, 1], Order::C, &i32t);
        // One i32 whose lower bound is 4 bytes before its data: data at
        // the buffer address, lb -4.
        let shifted = UserDatatype::create_resized(&i32t, -4, 4);
        let mut fetched = [0.0f64; 3];
        let mut corner = [0i32; 4];
        let mut three = [0i32; 3];
        {
            let lock = pairs.lock(other, LockType::Exclusive).unwrap();
            let values = [1.5, 2.5, 3.5];
            myriad::request::scope(|scope| {
                lock.rput_typed(scope, other, &TargetView::new(0, &fields), &values[..])
                    .unwrap()
                    .wait();
                lock.raccumulate_typed(
                    scope,
                    other,
                    &TargetView::new(0, &fields),
                    &[1.0, 1.0, 1.0][..],
                    SystemOperation::sum(),
                )
                .unwrap()
                .wait();
                lock.rget_typed(scope, other, &TargetView::new(0, &fields), &mut fetched[..])
                    .unwrap()
                    .wait();
            });
        }
        {
            let lock = grid.lock(other, LockType::Exclusive).unwrap();
            let values = [1, 2, 3, 4];
            lock.put_typed(other, &TargetView::new(0, &block), &values[..])
                .unwrap();
            // MPI_REPLACE through the same type: the block becomes 5..=8.
            lock.replace_typed(other, &TargetView::new(0, &block), &[5, 6, 7, 8][..])
                .unwrap();
            lock.get_typed(other, &TargetView::new(0, &block), &mut corner[..])
                .unwrap();
            // Three resized i32s one element apart, from element 13 on.
            let view = TargetView::with_count_and_datatype(13, 3, &shifted);
            lock.put_typed(other, &view, &[-1, -2, -3][..]).unwrap();
            lock.get_typed(other, &view, &mut three[..]).unwrap();
        }
        pairs.fence().unwrap().end().unwrap();
        grid.fence().unwrap().end().unwrap();
        let mut mine = [Pair::default(); 3];
        let mut cells = [0i32; 16];
        pairs
            .lock(rank, LockType::Shared)
            .unwrap()
            .get(rank, 0, &mut mine)
            .unwrap();
        grid.lock(rank, LockType::Shared)
            .unwrap()
            .get(rank, 0, &mut cells)
            .unwrap();
        (fetched, corner, three, mine, cells)
    })
    .unwrap();
    for (fetched, corner, three, mine, cells) in out {
        assert_eq!(fetched, [2.5, 3.5, 4.5]);
        assert_eq!(corner, [5, 6, 7, 8]);
        assert_eq!(three, [-1, -2, -3]);
        let bs: Vec<f64> = mine.iter().map(|p| p.b).collect();
        assert_eq!(bs, [2.5, 3.5, 4.5]);
        assert!(mine.iter().all(|p| p.a == 0), "{mine:?}");
        let mut want = [0i32; 16];
        want[5] = 5;
        want[6] = 6;
        want[9] = 7;
        want[10] = 8;
        want[13] = -1;
        want[14] = -2;
        want[15] = -3;
        assert_eq!(cells, want);
    }
}

/// Accumulates through a vector target type from every rank at once (a
/// shared `lock_all` epoch, two workers): every selected element ends with
/// the exact sum, and `get_accumulate_typed` hands out each old value of
/// every selected element exactly once, so no read-modify-write of one
/// base value was split by another's.
#[test]
fn vector_accumulates_from_every_rank_are_atomic() {
    const N: usize = 8;
    const ITERS: usize = 100;
    let out = myriad::Runtime::builder()
        .ranks(N)
        .workers(2)
        .run(|universe| {
            let world = universe.world();
            let i64t = i64::equivalent_datatype();
            // Elements 0, 1, 4, 5, 8, 9, ...: 8 blocks of 2, stride 4.
            let every_other_pair = UserDatatype::vector(8, 2, 4, &i64t);
            let win = world.allocate_window::<i64>(32).unwrap();
            let at = TargetView::new(0, &every_other_pair);
            let ones = [1i64; 16];
            let mut tickets = Vec::new();
            {
                let all = win.lock_all().unwrap();
                for k in 0..ITERS {
                    if k % 2 == 0 {
                        all.accumulate_typed(0, &at, &ones[..], SystemOperation::sum())
                            .unwrap();
                    } else {
                        let mut old = [0i64; 16];
                        all.get_accumulate_typed(
                            0,
                            &at,
                            &ones[..],
                            &mut old[..],
                            SystemOperation::sum(),
                        )
                        .unwrap();
                        tickets.push(old);
                    }
                    if k % 7 == 0 {
                        myriad::yield_now();
                    }
                }
                all.flush_local(0).unwrap();
                assert_eq!(
                    all.flush_local(N as i32).unwrap_err().class(),
                    ErrorClass::Rank
                );
            }
            win.fence().unwrap().end().unwrap();
            let mut final_values = [0i64; 32];
            if world.rank() == 0 {
                let lock = win.lock(0, LockType::Shared).unwrap();
                lock.get(0, 0, &mut final_values).unwrap();
            }
            (tickets, final_values)
        })
        .unwrap();
    let total = (N * ITERS) as i64;
    for (i, &v) in out[0].1.iter().enumerate() {
        let selected = i % 4 < 2;
        assert_eq!(v, if selected { total } else { 0 }, "element {i}");
    }
    // Per selected element, the old values fetched by all ranks are
    // distinct (each increment saw the previous one).
    for e in 0..16 {
        let mut seen: Vec<i64> = out.iter().flat_map(|o| o.0.iter().map(|t| t[e])).collect();
        let count = seen.len();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(
            seen.len(),
            count,
            "element {e}: an old value was fetched twice"
        );
    }
}

/// Errors: a target span outside the segment (past its end, before its
/// start, overflowing), signatures that differ (naming both sides), base
/// values that would not land on the window's elements (also for the
/// simple calls at a displacement inside an element), a negative target
/// count, and user operations in accumulates (`MPI_ERR_OP`).
#[test]
fn target_datatype_errors() {
    let out = myriad::run(2, |universe| {
        let world = universe.world();
        let other = 1 - world.rank();
        let f64t = f64::equivalent_datatype();
        let column = UserDatatype::vector(3, 1, 3, &f64t);
        let before = UserDatatype::heterogeneous_indexed(&[1], &[-8], &f64t);
        let add = UserOperation::commutative(|_, _| {});
        let mut errors = Vec::new();
        let win = world.allocate_window::<f64>(8).unwrap();
        {
            let lock = win.lock(other, LockType::Exclusive).unwrap();
            let three = [1.0f64; 3];
            // Bytes 16..72 of a 64-byte segment.
            errors.push(lock.put_typed(other, &TargetView::new(2, &column), &three[..]));
            // Data 8 bytes before the buffer address, which is byte 0.
            errors.push(lock.put_typed(other, &TargetView::new(0, &before), &three[..1]));
            // A displacement whose byte offset overflows.
            let huge = TargetView::new(usize::MAX, &column);
            let mut out = [0.0f64; 3];
            errors.push(lock.get_typed(other, &huge, &mut out[..]));
            // Signatures: three i32 against three f64; two f64 against three.
            errors.push(lock.put_typed(other, &TargetView::new(0, &column), &[1i32, 2, 3][..]));
            errors.push(lock.put_typed(other, &TargetView::new(0, &column), &three[..2]));
            // A negative count.
            let negative = TargetView::with_count_and_datatype(0, -1, &column);
            errors.push(lock.put_typed(other, &negative, &three[..]));
            // User operations in accumulates.
            errors.push(lock.accumulate(other, 0, &[1.0], &add));
            errors.push(lock.accumulate_typed(
                other,
                &TargetView::new(0, &column),
                &three[..],
                &add,
            ));
            errors.push(lock.fetch_and_op(other, 0, 1.0, &add).map(|_| ()));
            // An operation not defined for f64.
            errors.push(lock.accumulate_typed(
                other,
                &TargetView::new(0, &column),
                &three[..],
                SystemOperation::bitwise_and(),
            ));
            // Nothing above touched the target.
            let mut all = [9.0f64; 8];
            lock.get(other, 0, &mut all).unwrap();
            assert_eq!(all, [0.0; 8]);
        }
        drop(win);
        // Byte displacements (unit 1) into a window of f64: byte 4 is
        // inside an element, for typed and simple calls alike.
        let mut bytes = [0.0f64; 4];
        world
            .with_window_unit(&mut bytes, 1, |win| {
                let lock = win.lock(other, LockType::Exclusive).unwrap();
                errors.push(lock.put_typed(other, &TargetView::new(4, &f64t), &[1.0][..]));
                errors.push(lock.put(other, 4, &[1.0]));
                // Byte 8 is an element: fine.
                lock.put(other, 8, &[1.0]).unwrap();
            })
            .unwrap();
        // A window of bools takes no u8.
        let flags = world.allocate_window::<bool>(4).unwrap();
        {
            let lock = flags.lock(other, LockType::Exclusive).unwrap();
            let u8s = UserDatatype::contiguous(2, &u8::equivalent_datatype());
            errors.push(lock.put_typed(other, &TargetView::new(0, &u8s), &[1u8, 2][..]));
            let bools = UserDatatype::vector(2, 1, 2, &bool::equivalent_datatype());
            lock.put_typed(other, &TargetView::new(0, &bools), &[true, true][..])
                .unwrap();
        }
        drop(flags);
        errors
            .into_iter()
            .map(|e| {
                let e = e.unwrap_err();
                (e.class(), e.to_string(), e)
            })
            .collect::<Vec<_>>()
    })
    .unwrap();
    for errors in out {
        use ErrorClass::*;
        let classes: Vec<ErrorClass> = errors.iter().map(|e| e.0).collect();
        assert_eq!(
            classes,
            [RmaRange, RmaRange, RmaRange, Type, Type, Count, Op, Op, Op, Type, Type, Type, Type],
            "{errors:#?}"
        );
        let text = |i: usize| errors[i].1.as_str();
        assert!(
            text(0).contains("touch bytes 16..72") && text(0).contains("outside its 64 bytes"),
            "{}",
            text(0)
        );
        assert!(text(1).contains("touch bytes -8..0"), "{}", text(1));
        assert!(
            text(3).contains("3 × i32") && text(3).contains("different type signatures"),
            "{}",
            text(3)
        );
        assert!(
            text(4).contains("different numbers of base values"),
            "{}",
            text(4)
        );
        assert!(matches!(
            errors[6].2,
            myriad::Error::Rma(RmaError::UserOperation { op: "accumulate" })
        ));
        assert!(
            text(6).contains("user-defined operations are not allowed"),
            "{}",
            text(6)
        );
        assert!(text(10).contains("would land at byte 4"), "{}", text(10));
        assert!(text(11).contains("would land at byte 4"), "{}", text(11));
        assert!(
            text(12).contains("(a u8)") && text(12).contains("bool"),
            "{}",
            text(12)
        );
    }
}
