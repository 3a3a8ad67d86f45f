//! Alignment of the buffers a user operation sees (issue 8, item 4).
//!
//! A `UserOperation` turns the type-erased buffers it is handed into `&[T]`
//! with `DynBuffer::downcast`; that slice must be aligned for `T`. Two ways
//! it was not:
//!
//! * reductions made their scratch operands (message-based algorithms) and
//!   accumulators (shared-memory algorithms) in `Vec<u128>` storage, aligned
//!   to 16 only, so a `#[repr(align(32))]` type got slices at addresses
//!   ≡ 16 mod 32;
//! * `downcast` compared layouts and signatures but not alignment, so
//!   `#[repr(packed)] struct P(f64)` data (alignment 1, anywhere in memory)
//!   passed as `f64`.
//!
//! Run these in release builds too (`cargo test --release --test alignment`):
//! the original report came from one, where nothing else notices a
//! misaligned slice.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};

use myriad::collective::{
    reduce_local_into, Algorithm, Collective, DynBuffer, DynBufferMut, UserOperation,
};
use myriad::datatype::{MutView, UserDatatype, View};
use myriad::traits::*;

// ------------------------------------------------- over-aligned derived type

/// A derived type aligned to more than any primitive.
#[derive(Equivalence, Debug, Clone, Copy, PartialEq, Default)]
#[repr(C, align(32))]
struct Wide {
    value: u64,
    weight: u32,
}

const ALIGN: usize = 32;

/// How often the operation ran, over all jobs of a test (to show the checks
/// below really ran).
static CALLS: AtomicUsize = AtomicUsize::new(0);

/// `inout.value += input.value`, asserting that both slices are aligned.
fn add(x: DynBuffer<'_>, y: DynBufferMut<'_>) {
    CALLS.fetch_add(1, Ordering::Relaxed);
    let x: &[Wide] = x.downcast().expect("input is a slice of Wide");
    assert_eq!(
        x.as_ptr() as usize % ALIGN,
        0,
        "input slice of {} Wide at {:p}",
        x.len(),
        x.as_ptr()
    );
    let y: &mut [Wide] = y.downcast().expect("inout is a slice of Wide");
    assert_eq!(
        y.as_ptr() as usize % ALIGN,
        0,
        "inout slice of {} Wide at {:p}",
        y.len(),
        y.as_ptr()
    );
    for (y, x) in y.iter_mut().zip(x) {
        y.value += x.value;
        y.weight += x.weight;
    }
}

fn wide(rank: usize, i: usize) -> Wide {
    Wide {
        value: (rank * 100 + i) as u64,
        weight: 1,
    }
}

/// Sum of `wide(r, i)` over ranks `r` in `ranks`.
fn total(ranks: std::ops::Range<usize>, i: usize) -> Wide {
    let n = ranks.len();
    Wide {
        value: ranks.map(|r| (r * 100 + i) as u64).sum(),
        weight: n as u32,
    }
}

const RANKS: usize = 5;
/// Counts for each call: several allocation sizes, so that a 16-aligned
/// allocation lands on an odd multiple of 16 at least once.
const COUNTS: [usize; 4] = [1, 2, 3, 7];

/// Runs `body` on `RANKS` ranks (two workers, so the shared-memory
/// reduction folds per-worker partials) with `algorithm` for `collective`,
/// one job per operation kind (commutative and not) and form (blocking and
/// immediate), for every count of `COUNTS`. Reports every job that failed.
fn each_form(
    collective: Collective,
    algorithm: Algorithm,
    body: impl Fn(&myriad::topology::SimpleCommunicator, &UserOperation<'_>, bool, usize) + Sync,
) -> Result<(), String> {
    let mut failed = Vec::new();
    for op in [
        UserOperation::commutative(add),
        UserOperation::associative(add),
    ] {
        for immediate in [false, true] {
            let job = myriad::Runtime::builder()
                .ranks(RANKS)
                .workers(2)
                .run(|universe| {
                    let world = universe.world();
                    world
                        .set_collective_algorithm(collective, algorithm)
                        .expect("a valid algorithm");
                    for count in COUNTS {
                        body(&world, &op, immediate, count);
                    }
                });
            if let Err(e) = job {
                let form = if immediate { "immediate" } else { "blocking" };
                failed.push(format!(
                    "{collective} with {algorithm}, {op:?}, {form}: {e}"
                ));
            }
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(failed.join("\n"))
    }
}

/// Asserts that no algorithm failed, naming every one that did.
fn all_passed(results: impl IntoIterator<Item = Result<(), String>>) {
    let failed: Vec<String> = results.into_iter().filter_map(Result::err).collect();
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

#[test]
fn reduce_operands_are_aligned() {
    let results = Collective::Reduce.algorithms().iter().map(|&alg| {
        each_form(Collective::Reduce, alg, |world, op, immediate, count| {
            let rank = world.rank() as usize;
            let send: Vec<Wide> = (0..count).map(|i| wide(rank, i)).collect();
            // Not rank 0, so the binomial tree of a non-commutative
            // operation forwards its result.
            let root = world.process_at_rank(2);
            if rank == 2 {
                let mut recv = vec![Wide::default(); count];
                if immediate {
                    myriad::request::scope(|scope| {
                        root.immediate_reduce_into_root(scope, &send[..], &mut recv[..], op)
                            .wait();
                    });
                } else {
                    root.reduce_into_root(&send[..], &mut recv[..], op);
                }
                for (i, got) in recv.iter().enumerate() {
                    assert_eq!(*got, total(0..RANKS, i), "{alg} count {count}");
                }
            } else if immediate {
                myriad::request::scope(|scope| {
                    root.immediate_reduce_into(scope, &send[..], op).wait();
                });
            } else {
                root.reduce_into(&send[..], op);
            }
        })
    });
    all_passed(results);
}

#[test]
fn all_reduce_operands_are_aligned() {
    let results = Collective::AllReduce.algorithms().iter().map(|&alg| {
        each_form(Collective::AllReduce, alg, |world, op, immediate, count| {
            let rank = world.rank() as usize;
            let send: Vec<Wide> = (0..count).map(|i| wide(rank, i)).collect();
            let mut recv = vec![Wide::default(); count];
            if immediate {
                myriad::request::scope(|scope| {
                    world
                        .immediate_all_reduce_into(scope, &send[..], &mut recv[..], op)
                        .wait();
                });
            } else {
                world.all_reduce_into(&send[..], &mut recv[..], op);
            }
            for (i, got) in recv.iter().enumerate() {
                assert_eq!(*got, total(0..RANKS, i), "{alg} count {count}");
            }
        })
    });
    all_passed(results);
}

#[test]
fn reduce_scatter_block_operands_are_aligned() {
    let results = Collective::ReduceScatterBlock
        .algorithms()
        .iter()
        .map(|&alg| {
            each_form(
                Collective::ReduceScatterBlock,
                alg,
                |world, op, immediate, block| {
                    let rank = world.rank() as usize;
                    let send: Vec<Wide> = (0..RANKS * block).map(|i| wide(rank, i)).collect();
                    let mut recv = vec![Wide::default(); block];
                    if immediate {
                        myriad::request::scope(|scope| {
                            world
                                .immediate_reduce_scatter_block_into(
                                    scope,
                                    &send[..],
                                    &mut recv[..],
                                    op,
                                )
                                .wait();
                        });
                    } else {
                        world.reduce_scatter_block_into(&send[..], &mut recv[..], op);
                    }
                    for (i, got) in recv.iter().enumerate() {
                        let at = rank * block + i;
                        assert_eq!(*got, total(0..RANKS, at), "{alg} block {block}");
                    }
                },
            )
        });
    all_passed(results);
}

#[test]
fn scan_operands_are_aligned() {
    let mut results = Vec::new();
    for collective in [Collective::Scan, Collective::ExclusiveScan] {
        let exclusive = collective == Collective::ExclusiveScan;
        results.extend(collective.algorithms().iter().map(|&alg| {
            each_form(collective, alg, |world, op, immediate, count| {
                let rank = world.rank() as usize;
                let send: Vec<Wide> = (0..count).map(|i| wide(rank, i)).collect();
                let mut recv = vec![Wide::default(); count];
                myriad::request::scope(|scope| match (immediate, exclusive) {
                    (false, false) => world.scan_into(&send[..], &mut recv[..], op),
                    (false, true) => world.exclusive_scan_into(&send[..], &mut recv[..], op),
                    (true, false) => {
                        world
                            .immediate_scan_into(scope, &send[..], &mut recv[..], op)
                            .wait();
                    }
                    (true, true) => {
                        world
                            .immediate_exclusive_scan_into(scope, &send[..], &mut recv[..], op)
                            .wait();
                    }
                });
                let upto = if exclusive { rank } else { rank + 1 };
                if upto > 0 {
                    for (i, got) in recv.iter().enumerate() {
                        assert_eq!(*got, total(0..upto, i), "{collective} {alg} count {count}");
                    }
                }
            })
        }));
    }
    all_passed(results);
    assert!(CALLS.load(Ordering::Relaxed) > 0, "the operation never ran");
}

// ------------------------------------------------------------ packed types

/// An `f64` without its alignment: the same layout and signature as `f64`,
/// but it may sit at any address.
#[derive(Equivalence, Debug, Clone, Copy, PartialEq)]
#[repr(C, packed)]
struct P(f64);

/// Two `P`s at an address that is a multiple of 8: only the type, not the
/// address, tells them from `f64`s.
#[repr(C, align(8))]
struct EightAligned([P; 2]);

/// Two `P`s at an odd address (one past a multiple of 8).
#[repr(C, align(8))]
struct Odd {
    _pad: u8,
    ps: [P; 2],
}

/// What a user operation learnt about the buffers it was handed.
#[derive(Debug, Default, PartialEq)]
struct Seen {
    input_is_f64: bool,
    input_as_f64: bool,
    inout_as_f64: bool,
    input_as_p: bool,
    inout_as_p: bool,
}

/// An operation on `P`s that records whether the buffers also pass as `f64`
/// (and adds them as `P`s, reading the packed field by value).
fn probing(seen: &std::sync::Mutex<Seen>) -> UserOperation<'_> {
    UserOperation::commutative(move |x, mut y| {
        let mut s = seen.lock().unwrap();
        s.input_is_f64 |= x.is::<f64>();
        s.input_as_f64 |= x.downcast::<f64>().is_some();
        s.inout_as_f64 |= y.reborrow_mut().downcast::<f64>().is_some();
        let x: Option<&[P]> = x.downcast();
        s.input_as_p |= x.is_some();
        let y: Option<&mut [P]> = y.downcast();
        s.inout_as_p |= y.is_some();
        if let (Some(x), Some(y)) = (x, y) {
            for (y, x) in y.iter_mut().zip(x) {
                *y = P({ y.0 } + { x.0 });
            }
        }
    })
}

const P_ONLY: Seen = Seen {
    input_is_f64: false,
    input_as_f64: false,
    inout_as_f64: false,
    input_as_p: true,
    inout_as_p: true,
};

#[test]
fn packed_data_is_not_f64_at_an_aligned_address() {
    let seen = Default::default();
    let op = probing(&seen);
    let input = EightAligned([P(1.0), P(2.0)]);
    let mut inout = EightAligned([P(10.0), P(20.0)]);
    reduce_local_into(&input.0[..], &mut inout.0[..], &op);
    assert_eq!(*seen.lock().unwrap(), P_ONLY);
    assert_eq!(inout.0, [P(11.0), P(22.0)]);
}

#[test]
fn packed_data_is_not_f64_at_an_odd_address() {
    let seen = Default::default();
    let op = probing(&seen);
    let input = Odd {
        _pad: 0,
        ps: [P(1.0), P(2.0)],
    };
    let mut inout = Odd {
        _pad: 0,
        ps: [P(10.0), P(20.0)],
    };
    assert_eq!(
        inout.ps.as_ptr() as usize % 2,
        1,
        "the test needs an odd address"
    );
    reduce_local_into(&input.ps[..], &mut inout.ps[..], &op);
    assert_eq!(*seen.lock().unwrap(), P_ONLY);
    let ps = inout.ps;
    assert_eq!(ps, [P(11.0), P(22.0)]);
}

#[test]
fn collective_on_packed_data_hands_out_no_f64() {
    let seen = Default::default();
    let op = probing(&seen);
    let out = myriad::run(3, |universe| {
        let world = universe.world();
        let mut algorithms = Collective::AllReduce.algorithms().iter().cycle();
        let mut sums = Vec::new();
        for _ in 0..Collective::AllReduce.algorithms().len() {
            world
                .set_collective_algorithm(Collective::AllReduce, *algorithms.next().unwrap())
                .unwrap();
            let input = Odd {
                _pad: 0,
                ps: [P(world.rank() as f64), P(1.0)],
            };
            let mut result = Odd {
                _pad: 0,
                ps: [P(0.0), P(0.0)],
            };
            world.all_reduce_into(&input.ps[..], &mut result.ps[..], &op);
            let ps = result.ps;
            sums.push(ps);
        }
        sums
    })
    .unwrap();
    let expected = [P(3.0), P(3.0)];
    assert!(out.iter().flatten().all(|s| *s == expected), "{out:?}");
    assert_eq!(*seen.lock().unwrap(), P_ONLY);
}

#[test]
fn f64_and_packed_buffers_are_different_types() {
    // A reduction needs one type on both sides; `P` is not `f64`.
    let input = [1.0f64, 2.0];
    let mut inout = Odd {
        _pad: 0,
        ps: [P(10.0), P(20.0)],
    };
    let op = UserOperation::commutative(|_, _| panic!("the operation must not run"));
    let err = catch_unwind(AssertUnwindSafe(|| {
        reduce_local_into(&input[..], &mut inout.ps[..], &op)
    }))
    .expect_err("reducing f64 into P must be refused");
    let message = err.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(message.contains("different types"), "{message}");

    let out = myriad::run(2, |universe| {
        let world = universe.world();
        let mut result = Odd {
            _pad: 0,
            ps: [P(0.0), P(0.0)],
        };
        catch_unwind(AssertUnwindSafe(|| {
            world.all_reduce_into(&input[..], &mut result.ps[..], &op)
        }))
        .is_err()
    });
    // Refused before any rank waits: either every rank's call panicked or
    // the job reports the error.
    match out {
        Ok(refused) => assert!(refused.iter().all(|&r| r), "{refused:?}"),
        Err(e) => assert!(e.to_string().contains("one type"), "{e}"),
    }
}

// ----------------------------------------------- views at unaligned memory

#[test]
fn a_view_at_an_unaligned_address_is_not_a_slice() {
    // Three f64 starting one byte into a byte buffer, described by a
    // contiguous datatype: the elements match `[f64; 3]` but the address
    // does not.
    let triple = UserDatatype::contiguous(3, &f64::equivalent_datatype());
    let input: Vec<u8> = (0..64).collect();
    let mut output = [0u8; 64];
    let seen = std::sync::Mutex::new((false, false, 0usize));
    let op = UserOperation::commutative(|x, y| {
        let mut s = seen.lock().unwrap();
        s.0 |= x.is::<[f64; 3]>();
        s.1 |= x.downcast::<[f64; 3]>().is_some();
        s.2 += y.len();
    });
    // SAFETY: each view selects 24 initialised bytes of its 63-byte buffer.
    let (src, mut dst) = unsafe {
        (
            View::with_count_and_datatype(&input[1..], 1, &triple),
            MutView::with_count_and_datatype(&mut output[1..], 1, &triple),
        )
    };
    reduce_local_into(&src, &mut dst, &op);
    let (is, as_slice, len) = *seen.lock().unwrap();
    assert!(is, "the layout matches [f64; 3]");
    assert!(!as_slice, "but the address is odd");
    assert_eq!(len, 1);
}

// ------------------------------------------------------- recorded alignment

#[test]
fn type_maps_record_the_rust_alignment() {
    fn align<T: Equivalence>() -> usize {
        T::equivalent_datatype().type_map().align()
    }
    assert_eq!(align::<Wide>(), 32);
    assert_eq!(align::<P>(), 1);
    assert_eq!(align::<f64>(), std::mem::align_of::<f64>());
    assert_eq!(align::<(u8, u16)>(), std::mem::align_of::<(u8, u16)>());
    assert_eq!(align::<[Wide; 3]>(), 32);
    assert_eq!(align::<[P; 3]>(), 1);
    // A derived type describing `Wide`'s fields gets their alignment (and
    // MPI's padding to 16 bytes), not `Wide`'s 32: it is not `Wide`.
    let (u64s, u32s) = (u64::equivalent_datatype(), u32::equivalent_datatype());
    let fields = UserDatatype::structured(&[1, 1], &[0, 8], &[u64s, u32s]);
    assert_eq!(
        (fields.type_map().extent(), fields.type_map().align()),
        (16, 8)
    );
    // Built from `Wide` itself, it is `Wide`s.
    let wides = UserDatatype::contiguous(2, &Wide::equivalent_datatype());
    assert_eq!(wides.type_map().align(), 32);
}
