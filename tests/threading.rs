//! Thread levels: what `initialize_with_threading` provides, and MPI calls
//! from OS threads that a rank spawned.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use myriad::collective::SystemOperation;
use myriad::traits::*;
use myriad::{Runtime, Threading};

#[test]
fn every_level_is_provided_as_asked() {
    for level in Threading::ALL {
        let seen = AtomicUsize::new(0);
        Runtime::builder().ranks(3).workers(2).launch(|| {
            let (universe, provided) = myriad::initialize_with_threading(level).unwrap();
            assert_eq!(provided, level);
            assert_eq!(myriad::environment::threading_support(), level);
            universe.world().barrier();
            seen.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(seen.load(Ordering::Relaxed), 3, "{level}");
    }
}

#[test]
fn runtime_threading_sets_the_level_of_run() {
    for level in Threading::ALL {
        let levels = Runtime::builder()
            .ranks(2)
            .threading(level)
            .run(|_| myriad::environment::threading_support())
            .unwrap();
        assert_eq!(levels, vec![level; 2]);
    }
}

#[test]
fn threads_call_mpi_at_serialized_and_multiple_only() {
    for level in Threading::ALL {
        let outcome = Runtime::builder()
            .ranks(2)
            .workers(2)
            .threading(level)
            .run(|universe| {
                let world = universe.world();
                let peer = world.process_at_rank(1 - world.rank());
                let from_thread = myriad::thread::spawn({
                    let world = universe.world();
                    move || {
                        let peer = world.process_at_rank(1 - world.rank());
                        peer.send_with_tag(&(world.rank() * 100), 7);
                    }
                })
                .join();
                if from_thread.is_ok() {
                    let (v, status) = peer.receive_with_tag::<i32>(7);
                    assert_eq!(status.source_rank(), 1 - world.rank());
                    v
                } else {
                    -1
                }
            });
        match level {
            Threading::Serialized | Threading::Multiple => {
                assert_eq!(outcome.unwrap(), vec![100, 0], "{level}")
            }
            _ => {
                // The thread panicked with the error; the ranks carried on.
                assert_eq!(outcome.unwrap(), vec![-1, -1], "{level}");
            }
        }
    }
}

#[test]
fn the_error_at_low_levels_names_the_level() {
    let err = Runtime::builder()
        .ranks(1)
        .threading(Threading::Funneled)
        .run(|universe| {
            let world = universe.world();
            std::thread::scope(|s| {
                s.spawn(|| world.try_barrier().map_err(|e| e.to_string()))
                    .join()
                    .unwrap()
            })
        })
        .unwrap();
    let message = err[0].clone().unwrap_err();
    assert!(
        message.contains("Funneled") && message.contains("Threading::Multiple"),
        "{message}"
    );
}

#[test]
fn blocked_threads_park_themselves_not_the_worker() {
    // One worker: if a thread's blocking receive took the worker, rank 1
    // could never run to send what it waits for.
    let out = Runtime::builder()
        .ranks(2)
        .workers(1)
        .threading(Threading::Multiple)
        .run(|universe| {
            let world = universe.world();
            if world.rank() == 0 {
                let peer = world.process_at_rank(1);
                myriad::thread::scope(|s| {
                    for tag in 0..4 {
                        s.spawn(move || {
                            let (v, _) = peer.receive_with_tag::<u64>(tag);
                            assert_eq!(v, tag as u64 * 3);
                        });
                    }
                    // The rank itself talks to rank 1 meanwhile.
                    peer.send_with_tag(&1u8, 99);
                });
                0
            } else {
                let peer = world.process_at_rank(0);
                let (_, _) = peer.receive_with_tag::<u8>(99);
                for tag in (0..4).rev() {
                    peer.send_with_tag(&(tag as u64 * 3), tag);
                }
                1
            }
        })
        .unwrap();
    assert_eq!(out, vec![0, 1]);
}

/// OS threads of some ranks call collectives for them, beside ranks that
/// call from their coroutines, before and after the communicator took its
/// census of the workers its ranks are pinned to (`coll/round.rs`): a
/// thread's arrival counts on its rank's worker, so every call completes
/// with every rank's contribution.
#[test]
fn threads_and_ranks_meet_in_collectives_counted_by_worker() {
    let (n, calls) = (8i32, 30i32);
    let sums = Runtime::builder()
        .ranks(n as usize)
        .workers(2)
        .threading(Threading::Multiple)
        .run(|universe| {
            let world = universe.world();
            let me = world.rank();
            let step = |call: i32| {
                let mut total = 0i32;
                world.all_reduce_into(&(me + call), &mut total, SystemOperation::sum());
                world.barrier();
                total
            };
            (0..calls)
                .map(|call| {
                    if (me + call) % 3 == 0 {
                        myriad::thread::scope(|s| s.spawn(|| step(call)).join()).unwrap()
                    } else {
                        step(call)
                    }
                })
                .collect::<Vec<_>>()
        })
        .unwrap();
    let expect: Vec<i32> = (0..calls).map(|call| n * (n - 1) / 2 + n * call).collect();
    assert!(sums.iter().all(|s| *s == expect), "{sums:?}");
}

#[test]
fn many_threads_of_many_ranks_exchange_concurrently() {
    let ranks = 8;
    let threads = 4;
    let sums = Runtime::builder()
        .ranks(ranks)
        .workers(2)
        .threading(Threading::Multiple)
        .run(|universe| {
            let world = universe.world();
            let me = world.rank();
            let n = world.size();
            let received = AtomicUsize::new(0);
            myriad::thread::scope(|s| {
                for t in 0..threads {
                    let world = &world;
                    let received = &received;
                    s.spawn(move || {
                        // Thread t of each rank sends 50 messages to the
                        // next rank and receives 50 from the previous one.
                        let next = world.process_at_rank((me + 1) % n);
                        let prev = world.process_at_rank((me + n - 1) % n);
                        for i in 0..50usize {
                            myriad::request::scope(|sc| {
                                let request = next.immediate_send_with_tag(sc, &i, t);
                                let (v, _) = prev.receive_with_tag::<usize>(t);
                                request.wait();
                                received.fetch_add(v, Ordering::Relaxed);
                            });
                        }
                    });
                }
            });
            world.barrier();
            received.into_inner()
        })
        .unwrap();
    let per_thread: usize = (0..50).sum();
    assert_eq!(sums, vec![per_thread * threads as usize; ranks]);
}

#[test]
fn a_deadlock_through_a_thread_is_reported() {
    let err = Runtime::builder()
        .ranks(2)
        .workers(2)
        .threading(Threading::Multiple)
        .run(|universe| {
            let world = universe.world();
            if world.rank() == 0 {
                let peer = world.process_at_rank(1);
                myriad::thread::scope(|s| {
                    s.spawn(|| {
                        // Rank 1 never sends this.
                        let _ = peer.receive_with_tag::<u32>(5);
                    });
                });
            } else {
                let _ = world.process_at_rank(0).receive_with_tag::<u32>(6);
            }
        })
        .unwrap_err();
    let report = err.to_string();
    assert!(report.contains("deadlock"), "{report}");
    assert!(report.contains("OS thread"), "{report}");
    assert!(report.contains("tag 5"), "{report}");
}

#[test]
fn calls_after_the_job_ended_fail_clearly() {
    let worlds = Runtime::builder()
        .ranks(1)
        .threading(Threading::Multiple)
        .run(|universe| universe.world())
        .unwrap();
    let world = &worlds[0];
    let panic = catch_unwind(AssertUnwindSafe(|| world.barrier())).unwrap_err();
    let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(message.contains("already finished"), "{message}");
}

#[test]
fn immediate_collectives_from_threads_are_unsupported() {
    let out = Runtime::builder()
        .ranks(2)
        .threading(Threading::Multiple)
        .run(|universe| {
            let world = universe.world();
            let outcome = std::thread::scope(|s| {
                s.spawn(|| catch_unwind(AssertUnwindSafe(|| drop(world.immediate_barrier()))))
                    .join()
                    .unwrap()
            });
            let message = outcome
                .unwrap_err()
                .downcast_ref::<String>()
                .cloned()
                .unwrap_or_default();
            world.barrier();
            message
        })
        .unwrap();
    assert!(out.iter().all(|m| m.contains("not supported")), "{out:?}");
}

/// Scoped threads hand back values through their `ScopedJoinHandle`, as
/// with `std::thread::scope`, and the scope returns the closure's value.
#[test]
fn scoped_threads_return_values_through_their_handles() {
    for ranks in [1, 2, 3, 4, 7] {
        let out = Runtime::builder()
            .ranks(ranks)
            .workers(2)
            .run(|universe| {
                let me = universe.world().rank() as u64;
                let data: Vec<u64> = (0..10).map(|i| i * (me + 1)).collect();
                let total = myriad::thread::scope(|s| {
                    let handles: Vec<_> = data
                        .chunks(3)
                        .map(|chunk| s.spawn(move || chunk.iter().sum::<u64>()))
                        .collect();
                    // A handle joined from another scoped thread (an OS
                    // thread, not a rank) yields that thread until done.
                    let mut rest = handles.into_iter();
                    let head = rest.next().expect("four chunks");
                    let relay = s.spawn(move || head.join().expect("no panic"));
                    let mut sum = relay.join().expect("no panic");
                    for handle in rest {
                        assert_ne!(handle.thread().id(), std::thread::current().id());
                        sum += handle.join().expect("no panic");
                    }
                    sum
                });
                universe.world().barrier();
                total
            })
            .unwrap();
        let expected: Vec<u64> = (0..ranks as u64).map(|r| 45 * (r + 1)).collect();
        assert_eq!(out, expected, "{ranks} ranks");
    }
}

/// A scoped thread's panic surfaces as `Err` from its join (with the
/// payload), and the scope then ends normally; an unjoined panic still
/// makes the scope panic.
#[test]
fn a_scoped_threads_panic_is_an_err_from_join() {
    let out = Runtime::builder().ranks(2).workers(1).run(|_| {
        let joined = myriad::thread::scope(|s| {
            let handle = s.spawn(|| -> u32 { panic!("scoped thread fails") });
            handle.join()
        });
        let payload = joined.expect_err("the thread panicked");
        let message = payload.downcast_ref::<&str>().copied().unwrap_or_default();
        assert_eq!(message, "scoped thread fails");
        7
    });
    assert_eq!(out.unwrap(), vec![7, 7]);
    // A panic in a rank fails its job even if caught, so the unjoined case
    // runs outside any rank, where the scope behaves the same.
    let unjoined = catch_unwind(AssertUnwindSafe(|| {
        myriad::thread::scope(|s| {
            s.spawn(|| panic!("nobody joins me"));
        })
    }));
    let payload = unjoined.expect_err("the scope panics");
    let message = payload.downcast_ref::<&str>().copied().unwrap_or_default();
    assert!(message.contains("panicked"), "{message}");
}

/// Joining a scoped thread parks the rank, not its worker: with one worker,
/// the thread waits for rank 1, which only runs while rank 0 is parked in
/// `join`. Blocking the worker there would hang the job.
#[test]
fn joining_a_scoped_thread_parks_the_rank() {
    let (tx, rx) = std::sync::mpsc::channel::<u32>();
    let tx = std::sync::Mutex::new(Some(tx));
    let rx = std::sync::Mutex::new(Some(rx));
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let out = Runtime::builder().ranks(2).workers(1).run(move |universe| {
            let world = universe.world();
            if world.rank() == 0 {
                let rx = rx.lock().unwrap().take().expect("rank 0 takes it once");
                myriad::thread::scope(|s| {
                    let handle = s.spawn(move || rx.recv().expect("rank 1 sends") + 1);
                    assert!(!handle.is_finished(), "it waits for rank 1");
                    // An eager send: rank 0 goes on to join without
                    // switching, so rank 1 runs only once rank 0 parks.
                    world.process_at_rank(1).send(&0u8);
                    handle.join().expect("no panic")
                })
            } else {
                world.process_at_rank(0).receive::<u8>();
                let tx = tx.lock().unwrap().take().expect("rank 1 takes it once");
                tx.send(41).unwrap();
                0
            }
        });
        let _ = done_tx.send(out);
    });
    let out = done_rx
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("the job hung: the join blocked the worker");
    assert_eq!(out.unwrap(), vec![42, 0]);
}

#[test]
fn a_job_of_one_worker_leaves_solo_mode_for_its_first_thread() {
    // One worker and no transport: ranks park, wake and lock mailboxes
    // without read-modify-writes (solo mode) until the first OS thread
    // starts; after it, threads and ranks exchange concurrently.
    let ranks = 4;
    let sums = Runtime::builder()
        .ranks(ranks)
        .workers(1)
        .threading(Threading::Multiple)
        .run(|universe| {
            let world = universe.world();
            let me = world.rank();
            let n = world.size();
            let next = world.process_at_rank((me + 1) % n);
            let prev = world.process_at_rank((me + n - 1) % n);
            let mut sum = 0usize;
            let mut ring = |tag: i32| {
                for i in 0..200usize {
                    if me % 2 == 0 {
                        next.send_with_tag(&i, tag);
                        sum += prev.receive_with_tag::<usize>(tag).0;
                    } else {
                        sum += prev.receive_with_tag::<usize>(tag).0;
                        next.send_with_tag(&i, tag);
                    }
                }
            };
            ring(0);
            let received = AtomicUsize::new(0);
            myriad::thread::scope(|s| {
                s.spawn(|| {
                    for i in 0..200usize {
                        next.send_with_tag(&i, 1);
                        let (v, _) = prev.receive_with_tag::<usize>(1);
                        received.fetch_add(v, Ordering::Relaxed);
                    }
                });
                // The rank talks to its peers meanwhile.
                ring(2);
            });
            ring(3);
            sum + received.into_inner()
        })
        .unwrap();
    let per_round: usize = (0..200).sum();
    assert_eq!(sums, vec![per_round * 4; ranks]);
}

/// What each rank of [`plain_threads_send_while_ranks_exchange`] does: a
/// plain `std::thread` sends `messages` eager messages (tag 1) to the next
/// rank while the rank exchanges as many with its neighbours (tag 2) and
/// receives its predecessor's thread's; returns the sum received.
fn send_from_a_plain_thread(universe: &myriad::Universe, messages: usize) -> usize {
    let world = universe.world();
    let me = world.rank();
    let n = world.size();
    let prev = world.process_at_rank((me + n - 1) % n);
    let next = world.process_at_rank((me + 1) % n);
    let started = Arc::new(AtomicBool::new(false));
    let from_thread = std::thread::spawn({
        let (world, started) = (universe.world(), Arc::clone(&started));
        move || {
            let next = world.process_at_rank((me + 1) % n);
            for i in 0..messages {
                next.send_with_tag(&i, 1);
                started.store(true, Ordering::Release);
            }
        }
    });
    // A thread is a party of the job from its first MPI call on: until
    // then every rank waiting for it would look deadlocked. Stay runnable.
    while !started.load(Ordering::Acquire) {
        myriad::yield_now();
    }
    // The worker's ranks lock the mailboxes the threads send to.
    let mut sum = 0usize;
    for i in 0..messages {
        next.send_with_tag(&i, 2);
        sum += prev.receive_with_tag::<usize>(2).0;
        sum += prev.receive_with_tag::<usize>(1).0;
    }
    while !from_thread.is_finished() {
        myriad::yield_now();
    }
    from_thread.join().expect("the thread's sends");
    sum
}

/// Plain `std::thread`s act for their ranks at `Serialized` and above
/// without telling the runtime before they start (unlike `myriad::thread`):
/// a job whose ranks may have such threads must not let its one worker lock
/// mailboxes without read-modify-writes (solo mode), or a thread and the
/// worker hold one mailbox's lock at once. `ask`: the ranks ask for
/// `Multiple` themselves (`initialize_with_threading` under `launch`), else
/// the job starts at `Multiple`.
fn plain_threads_send_while_ranks_exchange(ask: bool) {
    let ranks = 4;
    let messages = 5_000usize;
    let expected = 2 * (0..messages).sum::<usize>();
    let runtime = Runtime::builder().ranks(ranks).workers(1);
    if ask {
        // `launch` exits the process if the job fails: the test fails then.
        let right = AtomicUsize::new(0);
        runtime.launch(|| {
            let (universe, given) = myriad::initialize_with_threading(Threading::Multiple)
                .expect("the rank's first initialisation");
            assert_eq!(given, Threading::Multiple);
            if send_from_a_plain_thread(&universe, messages) == expected {
                right.fetch_add(1, Ordering::Relaxed);
            }
        });
        assert_eq!(
            right.into_inner(),
            ranks,
            "ranks that received every message"
        );
    } else {
        let sums = runtime
            .threading(Threading::Multiple)
            .run(move |universe| send_from_a_plain_thread(&universe, messages))
            .unwrap();
        assert_eq!(sums, vec![expected; ranks]);
    }
}

#[test]
fn plain_threads_of_a_multiple_job_of_one_worker_share_mailboxes_safely() {
    plain_threads_send_while_ranks_exchange(false);
}

#[test]
fn plain_threads_of_ranks_that_ask_for_multiple_share_mailboxes_safely() {
    plain_threads_send_while_ranks_exchange(true);
}
