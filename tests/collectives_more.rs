//! Scatter(v), all-gather(v), all-to-all(v) and scans: every algorithm
//! against a reference result over communicator sizes, roots, block sizes
//! (empty, one, small, past the eager limit) and element types (contiguous,
//! padded, a struct received as another type with the same signature);
//! immediate forms, several outstanding at once; bad input.

use std::fmt::Debug;

use myriad::collective::{Algorithm, Collective, SystemOperation, UserOperation};
use myriad::datatype::{Partition, PartitionMut};
use myriad::request;
use myriad::topology::SimpleCommunicator;
use myriad::traits::*;
use myriad::{Count, Runtime};

/// Communicator sizes every algorithm runs on.
const SIZES: [usize; 6] = [1, 2, 3, 5, 8, 13];

/// Elements per block: none, one, a few, and more than 16 KiB of data for
/// both element types (rendezvous).
const BLOCKS: [usize; 4] = [0, 1, 7, 4500];

/// An element type for the tests: a value per (rank, index).
trait Elem: Equivalence + Copy + PartialEq + Debug + Send + Sync + 'static {
    fn of(rank: usize, i: usize) -> Self;
}

impl Elem for u32 {
    fn of(rank: usize, i: usize) -> u32 {
        (rank * 1_000_003 + i) as u32
    }
}

/// Padded (a `u32` after a `u8`); Rust may lay the tuple out in another
/// order than [`Pair`], with the same type signature.
impl Elem for (u8, u32) {
    fn of(rank: usize, i: usize) -> (u8, u32) {
        ((rank * 31 + i) as u8, (rank * 7919 + i) as u32)
    }
}

/// The tuple's signature in a `repr(C)` struct.
#[derive(Equivalence, Debug, Clone, Copy, PartialEq)]
#[repr(C)]
struct Pair {
    a: u8,
    b: u32,
}

impl Elem for Pair {
    fn of(rank: usize, i: usize) -> Pair {
        let (a, b) = <(u8, u32)>::of(rank, i);
        Pair { a, b }
    }
}

/// A value no test writes: marks elements a collective must not touch.
fn untouched<T: Elem>() -> T {
    T::of(4321, 77)
}

/// Checks `got` against `expect(i)`, naming the first difference.
fn check<T: PartialEq + Debug>(got: &[T], expect: impl Fn(usize) -> T, what: &dyn Fn() -> String) {
    if let Some(i) = (0..got.len()).find(|&i| got[i] != expect(i)) {
        panic!(
            "{}: element {i} of {} is {:?}, expected {:?}",
            what(),
            got.len(),
            got[i],
            expect(i)
        );
    }
}

/// Runs `f` on `n` ranks with the given algorithms chosen.
fn job<T: Send>(
    n: usize,
    algorithms: &[(Collective, Algorithm)],
    f: impl Fn(&SimpleCommunicator) -> T + Sync,
) -> Vec<T> {
    myriad::run(n, |universe| {
        let world = universe.world();
        for &(c, a) in algorithms {
            world
                .set_collective_algorithm(c, a)
                .expect("a valid algorithm");
        }
        f(&world)
    })
    .unwrap_or_else(|e| panic!("{algorithms:?} on {n} ranks: {e}"))
}

/// Runs `f` on `n` ranks with `algorithm` chosen for `collective`.
fn with<T: Send>(
    n: usize,
    collective: Collective,
    algorithm: Algorithm,
    f: impl Fn(&SimpleCommunicator) -> T + Sync,
) -> Vec<T> {
    job(n, &[(collective, algorithm)], f)
}

/// The error of a job that must fail, as text.
fn failure<T: Send>(
    n: usize,
    check: bool,
    algorithms: &[(Collective, Algorithm)],
    f: impl Fn(&SimpleCommunicator) -> T + Sync,
) -> String {
    let result = Runtime::builder()
        .ranks(n)
        .check_collectives(check)
        .run(|universe| {
            let world = universe.world();
            for &(c, a) in algorithms {
                world.set_collective_algorithm(c, a).unwrap();
            }
            f(&world)
        });
    match result {
        Ok(_) => panic!("{algorithms:?} on {n} ranks succeeded"),
        Err(e) => e.to_string(),
    }
}

fn roots(n: usize) -> Vec<i32> {
    let mut roots = vec![0, n as i32 / 2, n as i32 - 1];
    roots.dedup();
    roots
}

/// A partition of `counts` in reverse rank order with a gap of one element
/// before each part; returns the displacements and the buffer's length.
fn reversed_with_gaps(counts: &[Count]) -> (Vec<Count>, usize) {
    let mut displs = vec![0; counts.len()];
    let mut at = 0;
    for r in (0..counts.len()).rev() {
        at += 1;
        displs[r] = at as Count;
        at += counts[r] as usize;
    }
    (displs, at + 1)
}

/// Varying counts, some zero, in units of `unit` elements.
fn varying(n: usize, unit: usize, salt: usize) -> Vec<Count> {
    (0..n).map(|r| (((r + salt) % 4) * unit) as Count).collect()
}

// ---------------------------------------------------------------- scatter

fn scatter_case<T: Elem>(world: &SimpleCommunicator, root: i32, block: usize) {
    let (rank, n) = (world.rank() as usize, world.size() as usize);
    let p = world.process_at_rank(root);
    let mut recv = vec![untouched::<T>(); block];
    if world.rank() == root {
        let send: Vec<T> = (0..n * block)
            .map(|k| T::of(k / block, k % block))
            .collect();
        p.scatter_into_root(&send[..], &mut recv[..]);
    } else {
        p.scatter_into(&mut recv[..]);
    }
    check(&recv, |i| T::of(rank, i), &|| {
        format!(
            "scatter of {} root {root} block {block}: rank {rank}",
            std::any::type_name::<T>()
        )
    });
}

#[test]
fn scatter_algorithms() {
    for &alg in Collective::Scatter.algorithms() {
        for n in SIZES {
            with(n, Collective::Scatter, alg, |world| {
                for root in roots(n) {
                    for block in BLOCKS {
                        scatter_case::<u32>(world, root, block);
                        scatter_case::<(u8, u32)>(world, root, block);
                    }
                }
            });
        }
    }
}

fn scatterv_case<T: Elem>(world: &SimpleCommunicator, root: i32, unit: usize) {
    let (rank, n) = (world.rank() as usize, world.size() as usize);
    let counts = varying(n, unit, 1);
    let (mut displs, len) = reversed_with_gaps(&counts);
    // Send parts may overlap: the last rank reads (part of) rank 0's part.
    if n > 2 {
        displs[n - 1] = displs[0].min((len - counts[n - 1] as usize) as Count);
    }
    let send: Vec<T> = (0..len).map(|k| T::of(k, 1)).collect();
    let mut recv = vec![untouched::<T>(); counts[rank] as usize];
    let p = world.process_at_rank(root);
    if world.rank() == root {
        let part = Partition::new(&send[..], &counts[..], &displs[..]);
        p.scatter_varcount_into_root(&part, &mut recv[..]);
    } else {
        p.scatter_varcount_into(&mut recv[..]);
    }
    check(&recv, |i| send[displs[rank] as usize + i], &|| {
        format!(
            "scatterv of {} root {root} unit {unit}: rank {rank}",
            std::any::type_name::<T>()
        )
    });
}

#[test]
fn scatterv_algorithms() {
    for &alg in Collective::ScatterVarcount.algorithms() {
        for n in SIZES {
            with(n, Collective::ScatterVarcount, alg, |world| {
                for root in roots(n) {
                    for unit in [0, 1, 3, 4500] {
                        scatterv_case::<u32>(world, root, unit);
                        scatterv_case::<(u8, u32)>(world, root, unit);
                    }
                }
            });
        }
    }
}

// ------------------------------------------------------------- all-gather

fn allgather_case<S: Elem, R: Elem>(world: &SimpleCommunicator, block: usize) {
    let (rank, n) = (world.rank() as usize, world.size() as usize);
    let send: Vec<S> = (0..block).map(|i| S::of(rank, i)).collect();
    // Two elements more than needed, which must stay as they are.
    let mut recv = vec![untouched::<R>(); n * block + 2];
    world.all_gather_into(&send[..], &mut recv[..]);
    check(
        &recv,
        |k| {
            if k < n * block {
                R::of(k / block, k % block)
            } else {
                untouched()
            }
        },
        &|| {
            format!(
                "all-gather of {} as {} block {block}: rank {rank}",
                std::any::type_name::<S>(),
                std::any::type_name::<R>()
            )
        },
    );
}

#[test]
fn allgather_algorithms() {
    for &alg in Collective::AllGather.algorithms() {
        for n in SIZES {
            with(n, Collective::AllGather, alg, |world| {
                for block in BLOCKS {
                    allgather_case::<u32, u32>(world, block);
                    allgather_case::<(u8, u32), (u8, u32)>(world, block);
                }
            });
        }
    }
}

fn allgatherv_case<T: Elem>(world: &SimpleCommunicator, unit: usize) {
    let (rank, n) = (world.rank() as usize, world.size() as usize);
    let counts = varying(n, unit, 2);
    let (displs, len) = reversed_with_gaps(&counts);
    let send: Vec<T> = (0..counts[rank] as usize).map(|i| T::of(rank, i)).collect();
    let mut recv = vec![untouched::<T>(); len];
    {
        let mut part = PartitionMut::new(&mut recv[..], &counts[..], &displs[..]);
        world.all_gather_varcount_into(&send[..], &mut part);
    }
    // Parts filled, gaps untouched.
    let mut expect = vec![untouched::<T>(); len];
    for r in 0..n {
        for i in 0..counts[r] as usize {
            expect[displs[r] as usize + i] = T::of(r, i);
        }
    }
    check(&recv, |k| expect[k], &|| {
        format!(
            "all-gatherv of {} unit {unit}: rank {rank}",
            std::any::type_name::<T>()
        )
    });
}

#[test]
fn allgatherv_algorithms() {
    for &alg in Collective::AllGatherVarcount.algorithms() {
        for n in SIZES {
            with(n, Collective::AllGatherVarcount, alg, |world| {
                for unit in [0, 1, 3, 4500] {
                    allgatherv_case::<u32>(world, unit);
                    allgatherv_case::<(u8, u32)>(world, unit);
                }
            });
        }
    }
}

// ------------------------------------------------------------- all-to-all

/// The value rank `from` sends to rank `to` at index `i`.
fn pair<T: Elem>(from: usize, to: usize, i: usize) -> T {
    T::of(from * 100 + to, i)
}

fn alltoall_case<S: Elem, R: Elem>(world: &SimpleCommunicator, block: usize) {
    let (rank, n) = (world.rank() as usize, world.size() as usize);
    let send: Vec<S> = (0..n * block)
        .map(|k| pair(rank, k / block, k % block))
        .collect();
    let mut recv = vec![untouched::<R>(); n * block + 1];
    world.all_to_all_into(&send[..], &mut recv[..]);
    check(
        &recv,
        |k| {
            if k < n * block {
                pair(k / block, rank, k % block)
            } else {
                untouched()
            }
        },
        &|| {
            format!(
                "all-to-all of {} as {} block {block}: rank {rank}",
                std::any::type_name::<S>(),
                std::any::type_name::<R>()
            )
        },
    );
}

#[test]
fn alltoall_algorithms() {
    for &alg in Collective::AllToAll.algorithms() {
        for n in SIZES {
            with(n, Collective::AllToAll, alg, |world| {
                for block in BLOCKS {
                    alltoall_case::<u32, u32>(world, block);
                    alltoall_case::<(u8, u32), (u8, u32)>(world, block);
                }
            });
        }
    }
}

/// Elements rank `from` sends to rank `to`.
fn pair_count(from: usize, to: usize, unit: usize) -> Count {
    (((from + 2 * to) % 4) * unit) as Count
}

fn alltoallv_case<T: Elem>(world: &SimpleCommunicator, unit: usize) {
    let (rank, n) = (world.rank() as usize, world.size() as usize);
    // Send parts in reverse order with gaps, receive parts in rank order.
    let scounts: Vec<Count> = (0..n).map(|to| pair_count(rank, to, unit)).collect();
    let (sdispls, slen) = reversed_with_gaps(&scounts);
    let mut send = vec![untouched::<T>(); slen];
    for to in 0..n {
        for i in 0..scounts[to] as usize {
            send[sdispls[to] as usize + i] = pair(rank, to, i);
        }
    }
    let rcounts: Vec<Count> = (0..n).map(|from| pair_count(from, rank, unit)).collect();
    let rdispls: Vec<Count> = rcounts
        .iter()
        .scan(0, |at, &c| {
            let d = *at;
            *at += c + 1;
            Some(d)
        })
        .collect();
    let rlen = rdispls[n - 1] as usize + rcounts[n - 1] as usize + 1;
    let mut recv = vec![untouched::<T>(); rlen];
    {
        let spart = Partition::new(&send[..], &scounts[..], &sdispls[..]);
        let mut rpart = PartitionMut::new(&mut recv[..], &rcounts[..], &rdispls[..]);
        world.all_to_all_varcount_into(&spart, &mut rpart);
    }
    let mut expect = vec![untouched::<T>(); rlen];
    for from in 0..n {
        for i in 0..rcounts[from] as usize {
            expect[rdispls[from] as usize + i] = pair(from, rank, i);
        }
    }
    check(&recv, |k| expect[k], &|| {
        format!(
            "all-to-allv of {} unit {unit}: rank {rank}",
            std::any::type_name::<T>()
        )
    });
}

#[test]
fn alltoallv_algorithms() {
    for &alg in Collective::AllToAllVarcount.algorithms() {
        for n in SIZES {
            with(n, Collective::AllToAllVarcount, alg, |world| {
                for unit in [0, 1, 3, 4500] {
                    alltoallv_case::<u32>(world, unit);
                    alltoallv_case::<(u8, u32)>(world, unit);
                }
            });
        }
    }
}

#[test]
fn a_struct_is_received_as_another_type_with_the_same_signature() {
    // Tuples one way, `repr(C)` structs the other, and mixed across ranks:
    // the shared-memory path copies between the ranks' own layouts.
    for &alg in Collective::AllGather.algorithms() {
        with(5, Collective::AllGather, alg, |world| {
            for block in [1, 7, 4500] {
                allgather_case::<(u8, u32), Pair>(world, block);
                allgather_case::<Pair, (u8, u32)>(world, block);
                if world.rank() % 2 == 0 {
                    allgather_case::<Pair, Pair>(world, block);
                } else {
                    allgather_case::<(u8, u32), (u8, u32)>(world, block);
                }
            }
        });
    }
    for &alg in Collective::AllToAll.algorithms() {
        with(5, Collective::AllToAll, alg, |world| {
            for block in [1, 7, 4500] {
                if world.rank() % 2 == 0 {
                    alltoall_case::<Pair, (u8, u32)>(world, block);
                } else {
                    alltoall_case::<(u8, u32), Pair>(world, block);
                }
            }
        });
    }
    for &alg in Collective::Scatter.algorithms() {
        with(5, Collective::Scatter, alg, |world| {
            for block in [1, 4500] {
                let p = world.process_at_rank(2);
                let mut recv = vec![untouched::<Pair>(); block];
                if world.rank() == 2 {
                    let send: Vec<(u8, u32)> = (0..5 * block)
                        .map(|k| <(u8, u32)>::of(k / block, k % block))
                        .collect();
                    p.scatter_into_root(&send[..], &mut recv[..]);
                } else {
                    p.scatter_into(&mut recv[..]);
                }
                let rank = world.rank() as usize;
                check(&recv, |i| Pair::of(rank, i), &|| {
                    format!("{alg}: rank {rank}")
                });
            }
        });
    }
}

// ------------------------------------------------------------------ scans

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
    let op = UserOperation::associative(|x, mut y| {
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

// -------------------------------------------------------------- immediate

/// The `k`-th algorithm of every collective of this file (cyclically).
fn kth_algorithms(k: usize) -> Vec<(Collective, Algorithm)> {
    [
        Collective::Scatter,
        Collective::ScatterVarcount,
        Collective::AllGather,
        Collective::AllGatherVarcount,
        Collective::AllToAll,
        Collective::AllToAllVarcount,
        Collective::Scan,
        Collective::ExclusiveScan,
    ]
    .into_iter()
    .map(|c| (c, c.algorithms()[k % c.algorithms().len()]))
    .collect()
}

#[test]
fn immediate_forms_overlap() {
    for k in 0..4 {
        for n in [1, 4, 7] {
            for block in [2, 3000] {
                immediate_case(n, k, block);
            }
        }
    }
}

fn immediate_case(n: usize, k: usize, block: usize) {
    let algorithms = kth_algorithms(k);
    let out = job(n, &algorithms, |world| {
        let (rank, size) = (world.rank() as usize, world.size() as usize);
        let root = world.process_at_rank(size as i32 - 1);
        let is_root = rank == size - 1;
        let scatter_send: Vec<u32> = (0..size * block)
            .map(|k| u32::of(k / block, k % block))
            .collect();
        let counts: Vec<Count> = (0..size).map(|r| (r % 3 * block) as Count).collect();
        let displs: Vec<Count> = (0..size).map(|r| (0..r).map(|q| counts[q]).sum()).collect();
        let total = counts.iter().sum::<Count>() as usize;
        let scatterv_send: Vec<u32> = (0..total).map(|k| u32::of(k, 3)).collect();
        let mine: Vec<u32> = (0..block).map(|i| u32::of(rank, i)).collect();
        let mine_v: Vec<u32> = (0..counts[rank] as usize)
            .map(|i| u32::of(rank, i))
            .collect();
        let to_all: Vec<u32> = (0..size * block)
            .map(|k| pair(rank, k / block, k % block))
            .collect();
        let ones = vec![1u64; block];

        let mut scattered = vec![0u32; block];
        let mut scattered_v = vec![0u32; counts[rank] as usize];
        let mut gathered = vec![0u32; size * block];
        let mut gathered_v = vec![0u32; total];
        let mut exchanged = vec![0u32; size * block];
        let mut exchanged_v = vec![0u32; size * block];
        let mut sums = vec![0u64; block];
        let mut ex_sums = vec![7u64; block];
        let uniform: Vec<Count> = vec![block as Count; size];
        let udispls: Vec<Count> = (0..size as Count).map(|r| r * block as Count).collect();
        // Partitions outlive the scope that borrows them.
        let sv_part = Partition::new(&scatterv_send[..], &counts[..], &displs[..]);
        let mut gv_part = PartitionMut::new(&mut gathered_v[..], &counts[..], &displs[..]);
        let tv_send = Partition::new(&to_all[..], &uniform[..], &udispls[..]);
        let mut tv_recv = PartitionMut::new(&mut exchanged_v[..], &uniform[..], &udispls[..]);
        request::scope(|scope| {
            let a = if is_root {
                root.immediate_scatter_into_root(scope, &scatter_send[..], &mut scattered[..])
            } else {
                root.immediate_scatter_into(scope, &mut scattered[..])
            };
            let b = if is_root {
                root.immediate_scatter_varcount_into_root(scope, &sv_part, &mut scattered_v[..])
            } else {
                root.immediate_scatter_varcount_into(scope, &mut scattered_v[..])
            };
            let c = world.immediate_all_gather_into(scope, &mine[..], &mut gathered[..]);
            let d = world.immediate_all_gather_varcount_into(scope, &mine_v[..], &mut gv_part);
            let e = world.immediate_all_to_all_into(scope, &to_all[..], &mut exchanged[..]);
            let f = world.immediate_all_to_all_varcount_into(scope, &tv_send, &mut tv_recv);
            let g =
                world.immediate_scan_into(scope, &ones[..], &mut sums[..], SystemOperation::sum());
            let h = world.immediate_exclusive_scan_into(
                scope,
                &ones[..],
                &mut ex_sums[..],
                SystemOperation::sum(),
            );
            // Complete them in another order than they started.
            h.wait();
            f.wait();
            d.wait();
            b.wait();
            g.wait();
            e.wait();
            c.wait();
            a.wait();
        });
        let what = || format!("immediate, algorithms #{k}, n={size} block={block}: rank {rank}");
        check(&scattered, |i| u32::of(rank, i), &what);
        check(
            &scattered_v,
            |i| scatterv_send[displs[rank] as usize + i],
            &what,
        );
        check(&gathered, |k| u32::of(k / block, k % block), &what);
        check(
            &gathered_v,
            |k| {
                let r = (0..size)
                    .find(|&r| (displs[r]..displs[r] + counts[r]).contains(&(k as Count)))
                    .unwrap();
                u32::of(r, k - displs[r] as usize)
            },
            &what,
        );
        check(&exchanged, |k| pair(k / block, rank, k % block), &what);
        check(&exchanged_v, |k| pair(k / block, rank, k % block), &what);
        assert!(sums.iter().all(|&s| s == rank as u64 + 1), "{}", what());
        let ex_expect = if rank == 0 { 7 } else { rank as u64 };
        assert!(ex_sums.iter().all(|&s| s == ex_expect), "{}", what());
        rank
    });
    assert_eq!(out.len(), n);
}

// -------------------------------------------------------------- bad input

fn all(c: Collective) -> Vec<(Collective, Algorithm)> {
    c.algorithms().iter().map(|&a| (c, a)).collect()
}

#[test]
fn scatter_root_buffer_too_small() {
    for (c, a) in all(Collective::Scatter) {
        let err = failure(3, true, &[(c, a)], |world| {
            let p = world.process_at_rank(1);
            let mut recv = [0u16; 2];
            if world.rank() == 1 {
                p.scatter_into_root(&[1u16; 5][..], &mut recv[..]);
            } else {
                p.scatter_into(&mut recv[..]);
            }
        });
        assert!(
            err.contains("holds 5 elements but 3 ranks × 2 elements need 6"),
            "{a}: {err}"
        );
    }
}

#[test]
fn all_to_all_blocks_that_do_not_divide_or_fit() {
    for (c, a) in all(Collective::AllToAll) {
        let err = failure(3, true, &[(c, a)], |world| {
            let mut recv = [0u8; 12];
            world.all_to_all_into(&[0u8; 4][..], &mut recv[..]);
        });
        assert!(
            err.contains("holds 4 elements, which do not split into 3 equal blocks"),
            "{a}: {err}"
        );
        let err = failure(3, true, &[(c, a)], |world| {
            let mut recv = [0u8; 5];
            world.all_to_all_into(&[0u8; 6][..], &mut recv[..]);
        });
        assert!(
            err.contains("holds 5 elements but 3 ranks × 2 elements need 6"),
            "{a}: {err}"
        );
    }
}

#[test]
fn all_gather_receive_buffers_too_small_or_of_another_size() {
    for (c, a) in all(Collective::AllGather) {
        let err = failure(4, true, &[(c, a)], |world| {
            let mut recv = [0u32; 7];
            world.all_gather_into(&[1u32, 2][..], &mut recv[..]);
        });
        assert!(
            err.contains("holds 7 elements but 4 ranks × 2 elements need 8"),
            "{a}: {err}"
        );
        // Counts are in elements of both buffers: their data sizes differ.
        let err = failure(2, true, &[(c, a)], |world| {
            let mut recv = [[0u32; 2]; 4];
            world.all_gather_into(&[1u32, 2][..], &mut recv[..]);
        });
        assert!(err.contains("counts are in elements of both"), "{a}: {err}");
    }
}

#[test]
fn varcount_counts_that_disagree() {
    // All-gatherv: a rank's send count differs from its own part.
    for (c, a) in all(Collective::AllGatherVarcount) {
        let err = failure(3, true, &[(c, a)], |world| {
            let counts = [1 as Count, 1, 1];
            let displs = [0 as Count, 1, 2];
            let mut recv = [0u8; 3];
            let mut part = PartitionMut::new(&mut recv[..], &counts[..], &displs[..]);
            let mine = vec![0u8; if world.rank() == 2 { 2 } else { 1 }];
            world.all_gather_varcount_into(&mine[..], &mut part);
        });
        assert!(
            err.contains("rank 2 sends 2 elements but its own part of the receive buffer holds 1"),
            "{a}: {err}"
        );
    }
    // All-gatherv: ranks disagree on another rank's count.
    for (c, a) in [
        (Collective::AllGatherVarcount, Algorithm::SharedMemory),
        (Collective::AllGatherVarcount, Algorithm::GatherBroadcast),
    ] {
        let err = failure(3, true, &[(c, a)], |world| {
            let counts: [Count; 3] = if world.rank() == 1 {
                [2, 1, 1]
            } else {
                [1, 1, 1]
            };
            let displs = [0 as Count, 2, 3];
            let mut recv = [0u8; 4];
            let mut part = PartitionMut::new(&mut recv[..], &counts[..], &displs[..]);
            world.all_gather_varcount_into(&[0u8][..], &mut part);
        });
        // Whichever rank notices first names both counts.
        assert!(
            err.contains("rank 0 sends 1 elements but rank 1 expects 2 from it")
                || err.contains("and 1 disagree on the count of rank 0: 1 and 2 elements")
                || err.contains("ranks 1 and 0 disagree on the count of rank 0: 2 and 1 elements")
                || err.contains("ranks 1 and 2 disagree on the count of rank 0: 2 and 1 elements")
                || err.contains("rank 1's part for rank 0 holds 2 elements but rank 0's holds 1"),
            "{a}: {err}"
        );
    }
    // Scatterv: the root sends rank 1 more than it receives.
    for (c, a) in all(Collective::ScatterVarcount) {
        let err = failure(3, true, &[(c, a)], |world| {
            let counts = [1 as Count, 3, 1];
            let displs = [0 as Count, 1, 4];
            let send = [9u32; 5];
            let mut recv = vec![0u32; if world.rank() == 1 { 2 } else { 1 }];
            let p = world.process_at_rank(0);
            if world.rank() == 0 {
                let part = Partition::new(&send[..], &counts[..], &displs[..]);
                p.scatter_varcount_into_root(&part, &mut recv[..]);
            } else {
                p.scatter_varcount_into(&mut recv[..]);
            }
        });
        assert!(
            err.contains("rank 1 receives 2 elements but the root sends it 3")
                || err.contains("truncated"),
            "{a}: {err}"
        );
    }
    // All-to-allv: rank 0 sends rank 1 two elements, rank 1 expects one.
    for (c, a) in all(Collective::AllToAllVarcount) {
        let err = failure(3, true, &[(c, a)], |world| {
            let rank = world.rank();
            let scounts: [Count; 3] = if rank == 0 { [1, 2, 1] } else { [1, 1, 1] };
            let sdispls = [0 as Count, 1, 3];
            let rcounts = [1 as Count, 1, 1];
            let rdispls = [0 as Count, 1, 2];
            let send = [rank as u32; 4];
            let mut recv = [0u32; 3];
            let spart = Partition::new(&send[..], &scounts[..], &sdispls[..]);
            let mut rpart = PartitionMut::new(&mut recv[..], &rcounts[..], &rdispls[..]);
            world.all_to_all_varcount_into(&spart, &mut rpart);
        });
        assert!(
            err.contains("rank 0 sends 2 elements to rank 1 but it expects 1 from it")
                || err.contains("truncated"),
            "{a}: {err}"
        );
    }
}

#[test]
fn uniform_counts_that_disagree() {
    // With the checker, different sizes are a collective mismatch.
    let body = |world: &SimpleCommunicator| {
        let p = world.process_at_rank(0);
        let mut recv = vec![0u32; if world.rank() == 2 { 3 } else { 2 }];
        if world.rank() == 0 {
            p.scatter_into_root(&[0u32; 6][..], &mut recv[..]);
        } else {
            p.scatter_into(&mut recv[..]);
        }
    };
    let err = failure(3, true, &all(Collective::Scatter)[..1], body);
    assert!(err.contains("collective mismatch"), "{err}");
    // Without it, the shared-memory path still names the values.
    let err = failure(3, false, &all(Collective::Scatter)[..1], body);
    assert!(
        err.contains("rank 2 receives 3 elements but the root sends it 2"),
        "{err}"
    );
    let err = failure(3, false, &all(Collective::AllGather)[..1], |world| {
        let mine = vec![0u32; if world.rank() == 1 { 2 } else { 1 }];
        let mut recv = [0u32; 6];
        world.all_gather_into(&mine[..], &mut recv[..]);
    });
    // Whichever rank notices first names both counts.
    assert!(
        err.contains("rank 1 sends 2 elements but rank 0 expects 1 from it")
            || err.contains("rank 1 sends 2 elements but rank 2 expects 1 from it")
            || err.contains("sends 1 elements but rank 1 expects 2 from it")
            || err.contains("and 1 disagree on the count of rank 0: 1 and 2 elements")
            || err.contains("and 1 disagree on the count of rank 2: 1 and 2 elements")
            || err.contains("disagree on the count of rank 1: 2 and 1 elements"),
        "{err}"
    );
    for kind in [Collective::Scan, Collective::ExclusiveScan] {
        let err = failure(3, false, &all(kind)[..1], |world| {
            let mine = vec![1u32; if world.rank() == 1 { 2 } else { 1 }];
            let mut recv = [0u32; 2];
            if kind == Collective::Scan {
                world.scan_into(&mine[..], &mut recv[..], SystemOperation::sum());
            } else {
                world.exclusive_scan_into(&mine[..], &mut recv[..], SystemOperation::sum());
            }
        });
        assert!(
            err.contains("rank 1 contributes 2 elements but rank 0 contributes 1"),
            "{kind}: {err}"
        );
    }
}

#[test]
fn scans_check_their_operation_and_buffers() {
    for (c, a) in all(Collective::Scan) {
        let err = failure(2, true, &[(c, a)], |world| {
            let mut out = [0.0f64];
            world.scan_into(&[1.0f64][..], &mut out[..], SystemOperation::bitwise_xor());
        });
        assert!(
            err.contains("MPI_BXOR is not defined for f64"),
            "{a}: {err}"
        );
        let err = failure(2, true, &[(c, a)], |world| {
            let mut out = [0u32; 1];
            world.scan_into(&[1u32, 2][..], &mut out[..], SystemOperation::sum());
        });
        assert!(
            err.contains("the receive buffer holds 1 elements but 2 are reduced"),
            "{a}: {err}"
        );
    }
}

#[test]
fn type_signatures_that_disagree() {
    // Rank 1 sends f32 where the others send and receive u32. The checker
    // compares type signatures first; without it, every algorithm still
    // refuses to reinterpret the data.
    let err = failure(3, true, &all(Collective::AllGather)[..1], |world| {
        let mut recv = [0u32; 3];
        if world.rank() == 1 {
            world.all_gather_into(&[1.0f32][..], &mut recv[..]);
        } else {
            world.all_gather_into(&[1u32][..], &mut recv[..]);
        }
    });
    assert!(err.contains("collective mismatch"), "{err}");
    for (c, a) in all(Collective::AllGather) {
        let err = failure(3, false, &[(c, a)], |world| {
            let mut recv = [0u32; 3];
            if world.rank() == 1 {
                world.all_gather_into(&[1.0f32][..], &mut recv[..]);
            } else {
                world.all_gather_into(&[1u32][..], &mut recv[..]);
            }
        });
        assert!(err.contains("type signature"), "{a}: {err}");
    }
    for (c, a) in all(Collective::AllToAll) {
        let err = failure(3, false, &[(c, a)], |world| {
            let mut recv = [0u32; 3];
            if world.rank() == 1 {
                world.all_to_all_into(&[1.0f32; 3][..], &mut recv[..]);
            } else {
                world.all_to_all_into(&[1u32; 3][..], &mut recv[..]);
            }
        });
        assert!(err.contains("type signature"), "{a}: {err}");
    }
    for (c, a) in all(Collective::Scatter) {
        let err = failure(3, false, &[(c, a)], |world| {
            let p = world.process_at_rank(0);
            if world.rank() == 0 {
                let mut recv = [0.0f32];
                p.scatter_into_root(&[1.0f32; 3][..], &mut recv[..]);
            } else {
                let mut recv = [0u32];
                p.scatter_into(&mut recv[..]);
            }
        });
        assert!(err.contains("type signature"), "{a}: {err}");
    }
    for (c, a) in all(Collective::Scan) {
        let err = failure(3, false, &[(c, a)], |world| {
            if world.rank() == 1 {
                let mut recv = [0.0f32];
                world.scan_into(&[1.0f32][..], &mut recv[..], SystemOperation::sum());
            } else {
                let mut recv = [0u32];
                world.scan_into(&[1u32][..], &mut recv[..], SystemOperation::sum());
            }
        });
        assert!(
            err.contains("type signature") || err.contains("a scan needs one type"),
            "{a}: {err}"
        );
    }
}

#[test]
fn short_messages_in_message_based_algorithms_are_count_errors() {
    // Checking off: message-based algorithms receive exactly what they
    // expect or fail with the counts, never leave the rest unwritten.
    for alg in [Algorithm::Linear, Algorithm::Pairwise] {
        let err = failure(2, false, &[(Collective::AllToAllVarcount, alg)], |world| {
            let me = world.rank();
            let send = [1u32; 3];
            // Rank 1 sends 2 elements to rank 0, which expects 3.
            let scounts: [Count; 2] = if me == 1 { [2, 1] } else { [1, 1] };
            let rcounts: [Count; 2] = if me == 0 { [1, 3] } else { [1, 1] };
            let sdispl: [Count; 2] = [0, 2];
            let rdispl: [Count; 2] = [0, 1];
            let mut recv = [0u32; 4];
            let spart = Partition::new(&send[..], &scounts[..], &sdispl[..]);
            let mut rpart = PartitionMut::new(&mut recv[..], &rcounts[..], &rdispl[..]);
            world.all_to_all_varcount_into(&spart, &mut rpart);
        });
        assert!(
            err.contains("expected 12 bytes from rank 1 but received 8"),
            "{alg:?}: {err}"
        );
    }
}
