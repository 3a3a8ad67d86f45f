//! One-sided communication, modelled on the examples of the MPI standard's
//! one-sided chapter (fence, post/start/complete/wait, lock), with a
//! counter through `fetch_and_op`, `lock_all` + flush, several rank counts,
//! a target that computes while an origin completes a passive epoch,
//! `lock_all` (one window-wide count) against exclusive locks and their
//! deadlock reports, and bad input.

mod common;

use std::time::Duration;

use myriad::collective::SystemOperation;
use myriad::traits::*;
use myriad::window::{Epoch, LockAssert, LockType, WindowCreation};
use myriad::{Error, ErrorClass, RmaError};

const COUNTS: &[usize] = &[1, 2, 3, 4, 7, 100];

/// The fence example: every rank puts its rank into its right
/// neighbour's slot of its own rank; after the closing fence each rank's
/// buffer holds its left neighbour's contribution.
#[test]
fn fence_puts_to_neighbours() {
    for &n in COUNTS {
        let out = myriad::run(n, |universe| {
            let world = universe.world();
            let (rank, size) = (world.rank(), world.size());
            let mut buf = vec![-1i64; size as usize];
            world
                .with_window(&mut buf, |win| {
                    let epoch = win.fence().unwrap();
                    let right = (rank + 1) % size;
                    epoch
                        .put(right, rank as usize, &[rank as i64 * 10])
                        .unwrap();
                    epoch.end().unwrap();
                })
                .unwrap();
            buf
        })
        .unwrap();
        for (rank, buf) in out.iter().enumerate() {
            let left = (rank + n - 1) % n;
            for (i, &v) in buf.iter().enumerate() {
                let want = if i == left { left as i64 * 10 } else { -1 };
                assert_eq!(v, want, "{n} ranks: rank {rank} slot {i}");
            }
        }
    }
}

/// Fences in sequence: each epoch reads what the previous one wrote.
#[test]
fn fence_sequence_gets_what_the_previous_epoch_put() {
    let out = myriad::run(4, |universe| {
        let world = universe.world();
        let rank = world.rank();
        let mut buf = [0u32; 1];
        world
            .with_window(&mut buf, |win| {
                let mut epoch = win.fence().unwrap();
                epoch.put((rank + 1) % 4, 0, &[rank as u32 + 100]).unwrap();
                epoch.fence().unwrap();
                let mut got = [0u32];
                epoch.get((rank + 3) % 4, 0, &mut got).unwrap();
                epoch.end().unwrap();
                got[0]
            })
            .unwrap()
    })
    .unwrap();
    // Rank r reads rank r-1's memory, which rank r-2 wrote.
    for (r, got) in out.into_iter().enumerate() {
        assert_eq!(got, ((r + 2) % 4) as u32 + 100);
    }
}

/// The PSCW example: even ranks expose their memory to the next odd rank,
/// which puts into it and reads it back.
#[test]
fn post_start_complete_wait() {
    for &n in &[2usize, 4, 7, 100] {
        let out = myriad::run(n, |universe| {
            let world = universe.world();
            let (rank, size) = (world.rank(), world.size());
            let mut buf = [0u64; 2];
            world
                .with_window(&mut buf, |win| {
                    for round in 0..3u64 {
                        if rank % 2 == 0 && rank + 1 < size {
                            let exposure = win.post(&[rank + 1]).unwrap();
                            exposure.wait().unwrap();
                        } else if rank % 2 == 1 {
                            let access = win.start(&[rank - 1]).unwrap();
                            access.put(rank - 1, 0, &[rank as u64 + round]).unwrap();
                            access
                                .accumulate(rank - 1, 1, &[1], SystemOperation::sum())
                                .unwrap();
                            // A target outside the group is refused.
                            if size > 2 {
                                let bad = (rank + 1) % size;
                                let err = access.put(bad, 0, &[0]).unwrap_err();
                                assert_eq!(err.class(), ErrorClass::RmaSync, "{err}");
                            }
                            access.complete();
                        }
                    }
                })
                .unwrap();
            buf
        })
        .unwrap();
        for (rank, buf) in out.iter().enumerate() {
            if rank % 2 == 0 && rank + 1 < n {
                assert_eq!(buf, &[rank as u64 + 1 + 2, 3], "{n} ranks, rank {rank}");
            } else if rank % 2 == 0 {
                assert_eq!(buf, &[0, 0]);
            }
        }
    }
}

/// The lock example: every rank increments rank 0's counter under an
/// exclusive lock (get, add, put: not atomic without the lock), so the
/// count is exact only if exclusive locks serialise.
#[test]
fn exclusive_locks_serialise_read_modify_write() {
    for &n in COUNTS {
        let out = myriad::run(n, |universe| {
            let world = universe.world();
            let win = world.allocate_window::<u64>(1).unwrap();
            for _ in 0..20 {
                let lock = win.lock(0, LockType::Exclusive).unwrap();
                let mut v = [0u64];
                lock.get(0, 0, &mut v).unwrap();
                // Give others the chance to run between get and put.
                myriad::yield_now();
                lock.put(0, 0, &[v[0] + 1]).unwrap();
                lock.unlock();
            }
            win.fence().unwrap().end().unwrap();
            let lock = win.lock(0, LockType::Shared).unwrap();
            let mut v = [0u64];
            lock.get(0, 0, &mut v).unwrap();
            drop(lock);
            win.free().unwrap();
            v[0]
        })
        .unwrap();
        assert!(
            out.iter().all(|&v| v == 20 * n as u64),
            "{n} ranks: {out:?}"
        );
    }
}

/// A shared counter through `fetch_and_op`: every rank takes tickets; the
/// tickets are exactly 0..n*k, each once.
#[test]
fn fetch_and_op_counter_hands_out_every_ticket_once() {
    for &n in COUNTS {
        let k = 10;
        let out = myriad::run(n, |universe| {
            let world = universe.world();
            let win = world.allocate_window::<i64>(1).unwrap();
            let epoch = win.lock_all().unwrap();
            let mut mine = Vec::new();
            for _ in 0..k {
                mine.push(epoch.fetch_and_op(0, 0, 1, SystemOperation::sum()).unwrap());
                myriad::yield_now();
            }
            epoch.unlock_all();
            win.free().unwrap();
            mine
        })
        .unwrap();
        let mut all: Vec<i64> = out.into_iter().flatten().collect();
        all.sort_unstable();
        assert_eq!(all, (0..(n * k) as i64).collect::<Vec<_>>(), "{n} ranks");
    }
}

/// Accumulates of many ranks to one location are atomic: a `sum` of
/// arrays and a `max`, and `compare_and_swap` elects exactly one winner.
#[test]
fn accumulates_are_atomic_and_compare_and_swap_elects_one() {
    for &n in COUNTS {
        let out = myriad::run(n, |universe| {
            let world = universe.world();
            let rank = world.rank();
            let win = world.allocate_window::<i32>(5).unwrap();
            let epoch = win.lock_all().unwrap();
            for _ in 0..5 {
                epoch
                    .accumulate(0, 0, &[1, 2, 3], SystemOperation::sum())
                    .unwrap();
                myriad::yield_now();
            }
            epoch
                .accumulate(0, 3, &[rank], SystemOperation::max())
                .unwrap();
            let old = epoch.compare_and_swap(0, 4, 0, rank + 1).unwrap();
            let won = old == 0;
            epoch.flush_all();
            drop(epoch);
            let mut fence = win.fence().unwrap();
            let mut total = [0i32; 5];
            fence.get(0, 0, &mut total).unwrap();
            fence.fence().unwrap();
            fence.end().unwrap();
            (won, total)
        })
        .unwrap();
        let n32 = n as i32;
        assert_eq!(out.iter().filter(|(won, _)| *won).count(), 1, "{n} ranks");
        for (_, total) in &out {
            assert_eq!(&total[..4], &[5 * n32, 10 * n32, 15 * n32, n32 - 1]);
            assert!((1..=n32).contains(&total[4]));
        }
    }
}

/// Large gets, which idle workers help copy in pieces: four ranks on two
/// workers read ranges of each other's byte windows, from odd
/// displacements and of lengths that are no multiple of a piece, first
/// one rank at a time (the others wait in a barrier: their worker idles
/// and helps), then all at once; every byte lands, nothing around the
/// ranges moves.
#[test]
fn large_gets_land_whole_from_odd_offsets() {
    const LEN: usize = (1 << 20) + 13;
    let byte = |owner: usize, i: usize| (owner * 31 + i * 7 + i / 4096) as u8;
    let out = myriad::Runtime::builder()
        .ranks(4)
        .workers(2)
        .run(move |universe| {
            let world = universe.world();
            let (rank, size) = (world.rank(), world.size());
            let mut data: Vec<u8> = (0..LEN).map(|i| byte(rank as usize, i)).collect();
            world
                .with_window(&mut data, |win| {
                    let read_all = || {
                        let epoch = win.lock_all_with(LockAssert::NoCheck).unwrap();
                        for t in 0..size {
                            for (from, len) in [(0, LEN), (3, 600 * 1024 + 5), (4097, 256 * 1024)] {
                                let mut out = vec![0xA5u8; len + 2];
                                epoch.get(t, from, &mut out[1..len + 1]).unwrap();
                                assert_eq!(out[0], 0xA5);
                                assert_eq!(out[len + 1], 0xA5);
                                let wrong = (0..len)
                                    .filter(|&i| out[1 + i] != byte(t as usize, from + i))
                                    .count();
                                assert_eq!(wrong, 0, "target {t}, from {from}, len {len}");
                            }
                        }
                        epoch.unlock_all();
                    };
                    for reader in 0..size {
                        if rank == reader {
                            read_all();
                        }
                        world.barrier();
                    }
                    read_all();
                })
                .unwrap();
            rank
        })
        .unwrap();
    assert_eq!(out, [0, 1, 2, 3]);
}

/// `lock_all` + gets + flush: seed 000's RMA2 redistribution, each rank
/// reading a block of every other rank's data; and RMA1 with shared +
/// nocheck locks.
#[test]
fn lock_all_and_nocheck_read_every_block() {
    for &n in COUNTS {
        let out = myriad::run(n, |universe| {
            let world = universe.world();
            let (rank, size) = (world.rank(), world.size());
            let mut data: Vec<u32> = (0..8).map(|i| rank as u32 * 1000 + i).collect();
            world
                .with_window(&mut data, |win| {
                    let mut all = vec![0u32; size as usize];
                    let epoch = win.lock_all().unwrap();
                    for t in 0..size {
                        epoch
                            .get(t, (rank % 8) as usize, &mut all[t as usize..t as usize + 1])
                            .unwrap();
                        epoch.flush(t).unwrap();
                    }
                    epoch.unlock_all();
                    let mut again = vec![0u32; size as usize];
                    for t in 0..size {
                        let lock = win
                            .lock_with(t, LockType::Shared, LockAssert::NoCheck)
                            .unwrap();
                        lock.get(
                            t,
                            (rank % 8) as usize,
                            &mut again[t as usize..t as usize + 1],
                        )
                        .unwrap();
                    }
                    assert_eq!(all, again);
                    all
                })
                .unwrap()
        })
        .unwrap();
        for (rank, all) in out.iter().enumerate() {
            for (t, &v) in all.iter().enumerate() {
                assert_eq!(v, t as u32 * 1000 + (rank % 8) as u32);
            }
        }
    }
}

/// Request-based operations in a scope, and a derived (struct) element type.
#[test]
fn requests_and_struct_elements() {
    #[derive(Equivalence, Clone, Copy, Default, Debug, PartialEq)]
    struct Pair {
        a: i32,
        b: f64,
    }
    let out = myriad::run(3, |universe| {
        let world = universe.world();
        let rank = world.rank();
        let win = world.allocate_window::<Pair>(3).unwrap();
        {
            let epoch = win.lock_all().unwrap();
            let mine = [Pair {
                a: rank,
                b: rank as f64 / 2.0,
            }];
            let ones = [Pair { a: 1, b: 1.0 }];
            myriad::request::scope(|scope| {
                for t in 0..3 {
                    epoch.rput(scope, t, rank as usize, &mine).unwrap().wait();
                }
                epoch
                    .raccumulate(
                        scope,
                        (rank + 1) % 3,
                        rank as usize,
                        &ones,
                        SystemOperation::sum(),
                    )
                    .unwrap()
                    .wait();
            });
        }
        win.fence().unwrap().end().unwrap();
        let epoch = win.lock(rank, LockType::Exclusive).unwrap();
        let mut got = [Pair::default(); 3];
        myriad::request::scope(|scope| {
            epoch.rget(scope, rank, 0, &mut got).unwrap().wait();
        });
        drop(epoch);
        got
    })
    .unwrap();
    for (rank, got) in out.iter().enumerate() {
        for (i, p) in got.iter().enumerate() {
            let extra = if (i + 1) % 3 == rank { 1 } else { 0 };
            assert_eq!(p.a, i as i32 + extra, "rank {rank} slot {i}");
            assert_eq!(p.b, i as f64 / 2.0 + extra as f64);
        }
    }
}

/// A shared window: a peer's segment read and written through
/// `shared_query`, ordered by barriers and `sync`.
#[test]
fn shared_window_segments_are_reachable() {
    let out = myriad::run(4, |universe| {
        let world = universe.world();
        let rank = world.rank();
        let win = world.allocate_shared_window::<u16>(4).unwrap();
        let right = win.shared_query((rank + 1) % 4).unwrap();
        assert_eq!(right.len(), 4);
        right.write(rank as usize, &[rank as u16 + 7]).unwrap();
        win.sync();
        world.barrier();
        win.sync();
        let own = win.shared_query(rank).unwrap();
        let mut got = [0u16; 4];
        own.read(0, &mut got).unwrap();
        assert!(right.write(4, &[1]).is_err());
        got
    })
    .unwrap();
    for (rank, got) in out.iter().enumerate() {
        let left = (rank + 3) % 4;
        for (i, &v) in got.iter().enumerate() {
            assert_eq!(v, if i == left { left as u16 + 7 } else { 0 });
        }
    }
}

/// A passive-target epoch completes while its target computes and never
/// calls MPI (no timing: the job just must end). The target spins on a
/// plain atomic that only the origin's finished epoch sets: if the epoch
/// needed the target, the job would hang (and the time limit fail it).
#[test]
fn a_computing_target_never_blocks_a_passive_epoch() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let out = common::within_time_limit(
        "passive epoch on a computing target",
        Duration::from_secs(120),
        || {
            let done = Arc::new(AtomicBool::new(false));
            myriad::Runtime::builder()
                .ranks(2)
                .workers(2)
                .run(move |universe| {
                    let world = universe.world();
                    let rank = world.rank();
                    let mut buf = [0u64; 4];
                    world
                        .with_window(&mut buf, |win| {
                            if rank == 1 {
                                // Compute without calling MPI until the
                                // origin's epoch is over.
                                let mut x = 1u64;
                                while !done.load(Ordering::Acquire) {
                                    x = std::hint::black_box(
                                        x.wrapping_mul(6364136223846793005).wrapping_add(1),
                                    );
                                }
                            } else {
                                for kind in [LockType::Exclusive, LockType::Shared] {
                                    let lock = win.lock(1, kind).unwrap();
                                    lock.put(1, 0, &[7, 8, 9, 10]).unwrap();
                                    let mut back = [0u64; 4];
                                    lock.get(1, 0, &mut back).unwrap();
                                    assert_eq!(back, [7, 8, 9, 10]);
                                    lock.unlock();
                                }
                                done.store(true, Ordering::Release);
                            }
                        })
                        .unwrap();
                    buf
                })
                .unwrap()
        },
    );
    assert_eq!(out[1], [7, 8, 9, 10]);
}

/// Bad input: clear errors, no undefined behaviour, no hang.
#[test]
fn bad_input_gets_clear_errors() {
    let out = myriad::run(3, |universe| {
        let world = universe.world();
        let rank = world.rank();
        let mut buf = [0u32; 4];
        let mut errors = Vec::new();
        world
            .with_window(&mut buf, |win| {
                // A lock on a rank outside the window.
                errors.push(win.lock(3, LockType::Shared).unwrap_err());
                errors.push(win.lock(-1, LockType::Exclusive).unwrap_err());
                // Accesses outside the target's segment (4 elements).
                let lock = win.lock((rank + 1) % 3, LockType::Shared).unwrap();
                errors.push(lock.put((rank + 1) % 3, 3, &[1, 2]).unwrap_err());
                errors.push(lock.get((rank + 1) % 3, usize::MAX, &mut [0]).unwrap_err());
                // Another target than the locked one.
                errors.push(lock.get((rank + 2) % 3, 0, &mut [0]).unwrap_err());
                // The same target locked twice, lock_all and fence inside a lock.
                errors.push(win.lock((rank + 1) % 3, LockType::Shared).unwrap_err());
                errors.push(win.lock_all().unwrap_err());
                errors.push(win.fence().unwrap_err());
                drop(lock);
                // An operation not defined for the type.
                let all = win.lock_all().unwrap();
                let f = world.allocate_window::<f64>(1);
                drop(all);
                let f = f.unwrap();
                let all = f.lock_all().unwrap();
                errors.push(
                    all.accumulate(0, 0, &[1.0], SystemOperation::bitwise_and())
                        .unwrap_err(),
                );
                drop(all);
                f.free().unwrap();
            })
            .unwrap();
        errors
            .into_iter()
            .map(|e| (e.class(), e.to_string()))
            .collect::<Vec<_>>()
    })
    .unwrap();
    for errors in out {
        let classes: Vec<ErrorClass> = errors.iter().map(|e| e.0).collect();
        use ErrorClass::*;
        assert_eq!(
            classes,
            [Rank, Rank, RmaRange, RmaRange, RmaSync, RmaSync, RmaSync, RmaSync, Type],
            "{errors:#?}"
        );
        assert!(
            errors[0].1.contains("rank 3 is not in the communicator"),
            "{}",
            errors[0].1
        );
        assert!(
            errors[2].1.contains("8 bytes at byte 12") && errors[2].1.contains("(16 bytes)"),
            "{}",
            errors[2].1
        );
        assert!(
            errors[4].1.contains("not a target of the open lock epoch"),
            "{}",
            errors[4].1
        );
        assert!(errors[5].1.contains("a lock on rank"), "{}", errors[5].1);
    }
}

/// Freeing a window while a leaked guard keeps an epoch open frees it and
/// says so.
#[test]
fn freeing_with_a_leaked_epoch_is_an_error() {
    let out = myriad::run(2, |universe| {
        let world = universe.world();
        let win = world.allocate_window::<u8>(8).unwrap();
        let lock = win.lock(0, LockType::Shared).unwrap();
        std::mem::forget(lock);
        win.free().unwrap_err()
    })
    .unwrap();
    for err in out {
        assert!(
            matches!(err, Error::Rma(RmaError::EpochOpen { .. })),
            "{err}"
        );
        assert!(err.to_string().contains("a lock on rank 0"), "{err}");
    }
}

/// Ranks that create different kinds of windows at once: a collective
/// mismatch naming the call, not a hang.
#[test]
fn different_window_kinds_are_a_mismatch() {
    let err = myriad::run(2, |universe| {
        let world = universe.world();
        if world.rank() == 0 {
            world.allocate_window::<u8>(8).unwrap();
        } else {
            world.allocate_shared_window::<u8>(8).unwrap();
        }
    })
    .unwrap_err();
    assert!(err.to_string().contains("window_create"), "{err}");
}

/// A deadlock through an exclusive lock names the lock, the rank it is on,
/// the window and the holder.
#[test]
fn a_lock_deadlock_names_the_holder() {
    let err = common::within_time_limit("lock deadlock", Duration::from_secs(120), || {
        myriad::run(2, |universe| {
            let world = universe.world();
            let win = world.allocate_window::<u8>(8).unwrap();
            if world.rank() == 0 {
                let lock = win.lock(1, LockType::Exclusive).unwrap();
                world.barrier();
                // Rank 1 now waits for the lock, and this rank for rank 1.
                world.barrier();
                drop(lock);
            } else {
                world.barrier();
                let lock = win.lock(1, LockType::Exclusive).unwrap();
                drop(lock);
                world.barrier();
            }
            win.free().unwrap();
        })
        .unwrap_err()
    });
    let text = err.to_string();
    assert_eq!(err.class(), ErrorClass::Deadlock, "{text}");
    assert!(
        text.contains("exclusive lock on rank 1 of window") && text.contains("held by rank 0"),
        "{text}"
    );
}

/// Creation does not wait for the other ranks: an origin that reaches a
/// rank which has not created its part yet waits for it, then reads what
/// that rank lent.
#[test]
fn an_access_before_the_target_created_its_part_waits_for_it() {
    for &n in &[2usize, 7] {
        let out = myriad::run(n, |universe| {
            let world = universe.world();
            let (rank, size) = (world.rank(), world.size());
            if rank == size - 1 {
                for _ in 0..1000 {
                    myriad::yield_now();
                }
            }
            let mut buf = [rank as u32 + 1; 2];
            world
                .with_window(&mut buf, |win| {
                    let last = size - 1;
                    let lock = win.lock(last, LockType::Shared).unwrap();
                    let mut got = [0u32; 2];
                    lock.get(last, 0, &mut got).unwrap();
                    assert_eq!(win.segment_bytes(last).unwrap(), 8);
                    got
                })
                .unwrap()
        })
        .unwrap();
        assert!(out.iter().all(|got| *got == [n as u32; 2]), "{out:?}");
    }
}

/// A rank that panics takes its window memory (on its stack) back before
/// its frames go: an origin writing to it in a loop gets `TargetGone`
/// instead of writing into a dead stack (ASan checks the rest).
#[test]
fn a_failing_target_closes_its_memory_to_origins() {
    use std::sync::Mutex;
    static SEEN: Mutex<Option<Error>> = Mutex::new(None);
    let err = common::within_time_limit("failing target", Duration::from_secs(120), || {
        myriad::Runtime::builder()
            .ranks(2)
            .workers(2)
            .run(|universe| {
                let world = universe.world();
                let rank = world.rank();
                let mut buf = [0u64; 512];
                world
                    .with_window(&mut buf, |win| {
                        let all = win.lock_all().unwrap();
                        world.barrier();
                        if rank == 1 {
                            panic!("rank 1 fails inside an epoch");
                        }
                        let data = [7u64; 512];
                        loop {
                            if let Err(e) = all.put(1, 0, &data) {
                                *SEEN.lock().unwrap() = Some(e);
                                break;
                            }
                        }
                    })
                    .ok();
            })
            .unwrap_err()
    });
    assert!(err.to_string().contains("rank 1 fails"), "{err}");
    let seen = SEEN.lock().unwrap().take().expect("rank 0 saw an error");
    assert!(
        matches!(seen, Error::Rma(RmaError::TargetGone { target: 1, .. })),
        "{seen}"
    );
}

/// Origin datatypes: a strided column (a vector view) put into and read
/// back from a window of `f64`, a tuple type matching the element
/// signature, and a mismatched signature refused with `MPI_ERR_TYPE`.
#[test]
fn origin_views_and_signature_checks() {
    use myriad::datatype::{MutView, UserDatatype, View};
    let out = myriad::run(2, |universe| {
        let world = universe.world();
        let rank = world.rank();
        let win = world.allocate_window::<f64>(8).unwrap();
        let target = 1 - rank;
        // A 4×3 matrix; column 1 is elements 1, 4, 7, 10.
        let matrix: Vec<f64> = (0..12).map(|i| (rank * 100 + i) as f64).collect();
        let column = UserDatatype::vector(4, 1, 3, &f64::equivalent_datatype());
        let lock = win.lock(target, LockType::Exclusive).unwrap();
        // SAFETY: the vector selects elements 1, 4, 7, 10 of `matrix[1..]`'s
        // 11 initialised f64s (offsets 0, 3, 6, 9).
        let view = unsafe { View::with_count_and_datatype(&matrix[1..], 1, &column) };
        lock.put_buffer(target, 2, &view).unwrap();
        // (f64, f64) has the signature of two window elements.
        lock.put_buffer(target, 6, &[(0.5f64, 1.5f64)][..]).unwrap();
        // Three i32 are not f64s; one f32 is not either.
        let bad = lock.put_buffer(target, 0, &[1i32, 2, 3][..]).unwrap_err();
        let mut back = [0.0f64; 12];
        // SAFETY: as above, in `back[1..]` (11 initialised f64s).
        let mut into = unsafe { MutView::with_count_and_datatype(&mut back[1..], 1, &column) };
        lock.get_buffer(target, 2, &mut into).unwrap();
        let mut pair = [(0.0f64, 0.0f64)];
        lock.get_buffer(target, 6, &mut pair[..]).unwrap();
        drop(lock);
        win.free().unwrap();
        (bad.class(), bad.to_string(), back, pair[0])
    })
    .unwrap();
    for (rank, (class, text, back, pair)) in out.into_iter().enumerate() {
        assert_eq!(class, ErrorClass::Type, "{text}");
        assert!(
            text.contains("does not match the window's elements"),
            "{text}"
        );
        let me = (rank * 100) as f64;
        let mut want = [0.0f64; 12];
        for (k, i) in [1usize, 4, 7, 10].into_iter().enumerate() {
            want[i] = me + [1.0, 4.0, 7.0, 10.0][k];
        }
        assert_eq!(back, want, "rank {rank}");
        assert_eq!(pair, (0.5, 1.5));
    }
}

/// `MPI_REPLACE` and `MPI_NO_OP` forms: `swap` hands one token around
/// every rank exactly once, `replace` and `fetch` agree.
#[test]
fn swap_replace_and_fetch() {
    for &n in COUNTS {
        let out = myriad::run(n, |universe| {
            let world = universe.world();
            let rank = world.rank();
            let win = world.allocate_window::<i64>(2).unwrap();
            let all = win.lock_all().unwrap();
            // Everyone swaps rank + 1 into rank 0's slot 0 (initially 0):
            // the old values and the final one are 0..=n, each once.
            let old = all.swap(0, 0, rank as i64 + 1).unwrap();
            all.replace(0, 1, &[7]).unwrap();
            let seven = all.fetch(0, 1).unwrap();
            drop(all);
            win.fence().unwrap().end().unwrap();
            let last = win.lock(0, LockType::Shared).unwrap().fetch(0, 0).unwrap();
            (old, seven, last)
        })
        .unwrap();
        let mut seen: Vec<i64> = out.iter().map(|o| o.0).collect();
        seen.push(out[0].2);
        seen.sort_unstable();
        assert_eq!(seen, (0..=n as i64).collect::<Vec<_>>(), "{n} ranks");
        assert!(out.iter().all(|o| o.1 == 7));
    }
}

/// `lock_all` is one window-wide count, not a lock per rank: exclusive
/// locks on any rank still exclude it. Some ranks increment rank 0's
/// counter under exclusive locks (get, yield, put), the others read it
/// twice inside `lock_all` epochs with a yield between: the two reads
/// agree (no exclusive epoch ran inside a `lock_all` one) and the count
/// is exact (exclusive epochs serialise).
#[test]
fn lock_all_and_exclusive_locks_exclude_each_other() {
    for &n in &[2usize, 5, 16] {
        let out = myriad::Runtime::builder()
            .ranks(n)
            .workers(2)
            .run(|universe| {
                let world = universe.world();
                let rank = world.rank();
                let win = world.allocate_window::<u64>(1).unwrap();
                let mut torn = 0;
                for _ in 0..30 {
                    if rank % 2 == 0 {
                        let lock = win.lock(0, LockType::Exclusive).unwrap();
                        let mut v = [0u64];
                        lock.get(0, 0, &mut v).unwrap();
                        myriad::yield_now();
                        lock.put(0, 0, &[v[0] + 1]).unwrap();
                    } else {
                        let all = win.lock_all().unwrap();
                        let (mut a, mut b) = ([0u64], [0u64]);
                        all.get(0, 0, &mut a).unwrap();
                        myriad::yield_now();
                        myriad::yield_now();
                        all.get(0, 0, &mut b).unwrap();
                        torn += (a != b) as u32;
                    }
                }
                win.fence().unwrap().end().unwrap();
                let last = win.lock(0, LockType::Shared).unwrap().fetch(0, 0).unwrap();
                (torn, last)
            })
            .unwrap();
        let writers = n.div_ceil(2) as u64;
        for (rank, &(torn, last)) in out.iter().enumerate() {
            assert_eq!(
                torn, 0,
                "{n} ranks: rank {rank} saw a write inside lock_all"
            );
            assert_eq!(last, 30 * writers, "{n} ranks");
        }
    }
}

/// Deadlocks between `lock_all` and exclusive locks name both waits: a
/// `lock_all` behind an exclusive lock names the locked rank and its
/// holder; an exclusive lock behind `lock_all` epochs names their count.
#[test]
fn lock_all_deadlocks_name_the_other_side() {
    for exclusive_first in [true, false] {
        let err =
            common::within_time_limit("lock_all deadlock", Duration::from_secs(120), move || {
                myriad::run(2, move |universe| {
                    let world = universe.world();
                    let win = world.allocate_window::<u8>(8).unwrap();
                    let first = world.rank() == 0;
                    // Rank 0 opens its epoch, then rank 1 asks for the other
                    // kind and waits, while rank 0 waits for it in a barrier.
                    let exclusive = first == exclusive_first;
                    if first {
                        let held = if exclusive {
                            (Some(win.lock(1, LockType::Exclusive).unwrap()), None)
                        } else {
                            (None, Some(win.lock_all().unwrap()))
                        };
                        world.barrier();
                        world.barrier();
                        drop(held);
                    } else {
                        world.barrier();
                        if exclusive {
                            drop(win.lock(1, LockType::Exclusive).unwrap());
                        } else {
                            drop(win.lock_all().unwrap());
                        }
                        world.barrier();
                    }
                    win.free().unwrap();
                })
                .unwrap_err()
            });
        let text = err.to_string();
        assert_eq!(err.class(), ErrorClass::Deadlock, "{text}");
        let want = if exclusive_first {
            // Rank 1 waits in lock_all behind rank 0's exclusive lock.
            "shared lock (lock_all) on rank 1 of window"
        } else {
            // Rank 1 waits for an exclusive lock on itself behind rank 0's lock_all.
            "exclusive lock (behind lock_all epochs) on rank 1 of window"
        };
        let holder = if exclusive_first {
            "held by rank 0"
        } else {
            "held by 1 ranks (shared)"
        };
        assert!(text.contains(want) && text.contains(holder), "{text}");
    }
}
