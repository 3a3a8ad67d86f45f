//! Inclusive and exclusive scans with a non-commutative operation.

use super::*;

/// 2x2 matrix product: associative, not commutative.
fn matmul(x: [i64; 4], y: [i64; 4]) -> [i64; 4] {
    let [a, b, c, d] = x;
    let [e, f, g, h] = y;
    [a * e + b * g, a * f + b * h, c * e + d * g, c * f + d * h]
}

fn matrix(rank: usize, i: usize) -> [i64; 4] {
    [1, ((rank + i) % 5) as i64, 0, 1 + ((rank + i) % 2) as i64]
}

/// The inclusive (or exclusive) prefix of `rank` at element `i`.
fn prefix<T>(
    rank: usize,
    i: usize,
    exclusive: bool,
    x: impl Fn(usize, usize) -> T,
    op: impl Fn(T, T) -> T,
) -> T {
    let last = if exclusive { rank - 1 } else { rank };
    (1..=last).fold(x(0, i), |acc, r| op(acc, x(r, i)))
}

fn scan_case(world: &SimpleCommunicator, count: usize, exclusive: bool) {
    let (rank, n) = (world.rank() as usize, world.size() as usize);
    let what = || format!("scan (exclusive: {exclusive}) count {count} on {n}: rank {rank}");
    let run = |send: &[u64], recv: &mut [u64], op: SystemOperation| {
        if exclusive {
            world.exclusive_scan_into(send, recv, op)
        } else {
            world.scan_into(send, recv, op)
        }
    };
    // Sums.
    let x = |r: usize, i: usize| (r * 3 + i + 1) as u64;
    let send: Vec<u64> = (0..count).map(|i| x(rank, i)).collect();
    let mut recv = vec![u64::MAX; count + 1];
    run(&send, &mut recv[..], SystemOperation::sum());
    if exclusive && rank == 0 {
        assert!(recv.iter().all(|&v| v == u64::MAX), "{}", what());
    } else {
        check(
            &recv[..count],
            |i| prefix(rank, i, exclusive, x, |a, b| a + b),
            &what,
        );
        assert_eq!(recv[count], u64::MAX, "{}: past the count", what());
    }
    // A padded type, field by field.
    let y = |r: usize, i: usize| (1u8, (r * 5 + i) as u32);
    let send: Vec<(u8, u32)> = (0..count).map(|i| y(rank, i)).collect();
    let mut recv = vec![(0u8, 0u32); count];
    if exclusive {
        world.exclusive_scan_into(&send[..], &mut recv[..], SystemOperation::sum());
    } else {
        world.scan_into(&send[..], &mut recv[..], SystemOperation::sum());
    }
    if !(exclusive && rank == 0) {
        let add = |a: (u8, u32), b: (u8, u32)| (a.0 + b.0, a.1 + b.1);
        check(&recv, |i| prefix(rank, i, exclusive, y, add), &what);
    }
    // A non-commutative operation keeps rank order.
    let op = UserOperation::associative(|x, y| {
        let x: &[[i64; 4]] = x.downcast().unwrap();
        for (y, x) in y.downcast::<[i64; 4]>().unwrap().iter_mut().zip(x) {
            *y = matmul(*x, *y);
        }
    });
    let send: Vec<[i64; 4]> = (0..count).map(|i| matrix(rank, i)).collect();
    let mut recv = vec![[-1i64; 4]; count];
    if exclusive {
        world.exclusive_scan_into(&send[..], &mut recv[..], &op);
    } else {
        world.scan_into(&send[..], &mut recv[..], &op);
    }
    if exclusive && rank == 0 {
        assert!(recv.iter().all(|&m| m == [-1; 4]), "{}", what());
    } else {
        for (i, got) in recv.iter().enumerate() {
            assert_eq!(
                *got,
                prefix(rank, i, exclusive, matrix, matmul),
                "{} element {i}",
                what()
            );
        }
    }
}

#[test]
fn scan_algorithms_inclusive_and_exclusive() {
    for kind in [Collective::Scan, Collective::ExclusiveScan] {
        for &alg in kind.algorithms() {
            for n in SIZES {
                with(n, kind, alg, |world| {
                    // 3000 u64 are 24 KiB: rendezvous, and several chunks in
                    // the shared-memory scan.
                    for count in [0, 1, 5, 3000] {
                        scan_case(world, count, kind == Collective::ExclusiveScan);
                    }
                });
            }
        }
    }
}
