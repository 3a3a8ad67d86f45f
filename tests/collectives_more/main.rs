//! Scatter(v), all-gather(v), all-to-all(v) and scans: every algorithm
//! against a reference result over communicator sizes, roots, block sizes
//! (empty, one, small, past the eager limit) and element types (contiguous,
//! padded, a struct received as another type with the same signature);
//! immediate forms, several outstanding at once; bad input.
//!
//! One test binary, one file per family: `scatter.rs`, `allgather.rs`, `alltoall.rs`,
//! `scan.rs`, `immediate.rs`, `bad_input.rs`; the shared helpers are here.

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

mod allgather;
mod alltoall;
mod bad_input;
mod immediate;
mod scan;
mod scatter;
