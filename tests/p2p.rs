//! Point-to-point semantics as MPI defines them, on whole jobs.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use myriad::point_to_point::{self as p2p, MatchedReceiveVec};
use myriad::request::{self, CancelGuard, WaitGuard};
use myriad::traits::*;
use myriad::{Error, ANY_TAG};

#[test]
fn tags_wildcards_and_status() {
    myriad::run(3, |universe| {
        let world = universe.world();
        match world.rank() {
            0 => {
                world.process_at_rank(2).send_with_tag(&[1u32, 2, 3][..], 7);
            }
            1 => {
                world.process_at_rank(2).send_with_tag(&9.5f64, 11);
            }
            _ => {
                // Receive tag 11 first although tag 7 may arrive first.
                let (x, status) = world.any_process().receive_with_tag::<f64>(11);
                assert_eq!(x, 9.5);
                assert_eq!(status.source_rank(), 1);
                assert_eq!(status.tag(), 11);
                let mut buf = [0u32; 8];
                let status = world.any_process().receive_into(&mut buf[..]);
                assert_eq!(status.source_rank(), 0);
                assert_eq!(status.tag(), 7);
                assert_eq!(status.count(u32::equivalent_datatype()), 3);
                assert_eq!(&buf[..3], &[1, 2, 3]);
            }
        }
    })
    .unwrap();
}

#[test]
fn messages_between_a_pair_do_not_overtake() {
    // Mixed sizes: eager (small) and rendezvous (large) messages, sent with
    // immediate sends so that both protocols are in flight at once.
    let sizes: Vec<usize> = (0..60)
        .map(|i| [0, 1, 100, 5_000, 100_000][i % 5])
        .collect();
    myriad::run(2, |universe| {
        let world = universe.world();
        if world.rank() == 0 {
            let bufs: Vec<Vec<u32>> = sizes
                .iter()
                .enumerate()
                .map(|(i, &n)| vec![i as u32; n])
                .collect();
            request::scope(|scope| {
                let requests: Vec<_> = bufs
                    .iter()
                    .enumerate()
                    .map(|(i, b)| {
                        world.process_at_rank(1).immediate_send_with_tag(
                            scope,
                            &b[..],
                            (i % 3) as i32,
                        )
                    })
                    .collect();
                request::wait_all(requests);
            });
        } else {
            myriad::sleep(Duration::from_millis(5));
            for (i, &n) in sizes.iter().enumerate() {
                let (v, status) = world.process_at_rank(0).receive_vec::<u32>();
                assert_eq!(status.tag(), (i % 3) as i32);
                assert_eq!(v.len(), n, "message {i}");
                assert!(v.iter().all(|&x| x == i as u32), "message {i} content");
            }
        }
    })
    .unwrap();
}

#[test]
fn zero_length_messages() {
    myriad::run(2, |universe| {
        let world = universe.world();
        if world.rank() == 0 {
            let empty: [u64; 0] = [];
            world.process_at_rank(1).send_with_tag(&empty[..], 3);
            world.process_at_rank(1).synchronous_send(&Vec::<u8>::new());
        } else {
            let mut buf = [0u64; 4];
            let status = world.process_at_rank(0).receive_into(&mut buf[..]);
            assert_eq!(status.count(u64::equivalent_datatype()), 0);
            assert_eq!(status.tag(), 3);
            let (v, _) = world.process_at_rank(0).receive_vec::<u8>();
            assert!(v.is_empty());
        }
    })
    .unwrap();
}

#[test]
fn synchronous_send_completes_only_when_matched() {
    let receiving = AtomicBool::new(false);
    myriad::run(2, |universe| {
        let world = universe.world();
        if world.rank() == 0 {
            world.process_at_rank(1).synchronous_send(&42u8);
            assert!(
                receiving.load(Ordering::SeqCst),
                "ssend returned before the receive was posted"
            );
        } else {
            myriad::sleep(Duration::from_millis(20));
            receiving.store(true, Ordering::SeqCst);
            let (x, _) = world.process_at_rank(0).receive::<u8>();
            assert_eq!(x, 42);
        }
    })
    .unwrap();
}

#[test]
fn buffered_and_eager_sends_do_not_wait() {
    myriad::run(2, |universe| {
        let world = universe.world();
        if world.rank() == 0 {
            // 1 MiB buffered send: copied, returns at once.
            world
                .process_at_rank(1)
                .buffered_send(&vec![7u8; 1 << 20][..]);
            world.process_at_rank(1).send(&5u32); // small: eager
            world.barrier();
        } else {
            world.barrier();
            let (big, _) = world.process_at_rank(0).receive_vec::<u8>();
            assert_eq!(big.len(), 1 << 20);
            assert!(big.iter().all(|&b| b == 7));
            assert_eq!(world.process_at_rank(0).receive::<u32>().0, 5);
        }
    })
    .unwrap();
}

#[test]
fn a_rank_that_returns_still_delivers_its_eager_sends() {
    myriad::run(2, |universe| {
        let world = universe.world();
        if world.rank() == 0 {
            for i in 0..100u32 {
                world
                    .process_at_rank(1)
                    .send_with_tag(&[i; 16][..], (i % 5) as i32);
            }
            // Returns now, with 100 unmatched messages queued.
        } else {
            myriad::sleep(Duration::from_millis(20));
            for i in 0..100u32 {
                let mut buf = [0u32; 16];
                let status = world
                    .process_at_rank(0)
                    .receive_into_with_tag(&mut buf[..], (i % 5) as i32);
                assert_eq!(status.tag(), (i % 5) as i32);
                assert_eq!(buf, [i; 16]);
            }
        }
    })
    .unwrap();
}

#[test]
fn probe_matched_probe_and_receive_vec() {
    myriad::run(2, |universe| {
        let world = universe.world();
        if world.rank() == 0 {
            world
                .process_at_rank(1)
                .send_with_tag(&[1i16, 2, 3, 4, 5][..], 1);
            world
                .process_at_rank(1)
                .send_with_tag(&vec![9u64; 50_000][..], 2);
            world.barrier();
        } else {
            let status = world.process_at_rank(0).probe_with_tag(1);
            assert_eq!(status.count(i16::equivalent_datatype()), 5);
            // Probing does not consume: the message is still there.
            assert!(world.any_process().immediate_probe_with_tag(1).is_some());
            let (msg, status) = world.any_process().matched_probe_with_tag(2);
            assert_eq!(status.count(u64::equivalent_datatype()), 50_000);
            // After a matched probe nobody else can receive it.
            assert!(world.any_process().immediate_probe_with_tag(2).is_none());
            let (big, _) = (msg, status).matched_receive_vec::<u64>();
            assert_eq!(big.len(), 50_000);
            let (small, _) = world.process_at_rank(0).receive_vec::<i16>();
            assert_eq!(small, vec![1, 2, 3, 4, 5]);
            assert!(world.any_process().immediate_matched_probe().is_none());
            world.barrier();
        }
    })
    .unwrap();
}

#[test]
fn immediate_operations_wait_any_test_and_guards() {
    myriad::run(4, |universe| {
        let world = universe.world();
        let rank = world.rank();
        if rank == 0 {
            let mut bufs = [[0i32; 2]; 3];
            request::scope(|scope| {
                let mut requests: Vec<_> = bufs
                    .iter_mut()
                    .enumerate()
                    .map(|(i, b)| {
                        world
                            .process_at_rank(i as i32 + 1)
                            .immediate_receive_into(scope, b)
                    })
                    .collect();
                let mut seen = Vec::new();
                while let Some((_, status)) = request::wait_any(&mut requests) {
                    seen.push(status.source_rank());
                }
                seen.sort();
                assert_eq!(seen, vec![1, 2, 3]);
            });
            for (i, b) in bufs.iter().enumerate() {
                assert_eq!(*b, [i as i32 + 1; 2]);
            }
            // A receive that nobody will match, cancelled.
            let mut x = 0u8;
            request::scope(|scope| {
                let r = world
                    .process_at_rank(1)
                    .immediate_receive_into_with_tag(scope, &mut x, 99);
                r.cancel();
                assert!(r.wait().is_cancelled());
            });
            request::scope(|scope| {
                let _guard = CancelGuard::from(
                    world
                        .process_at_rank(2)
                        .immediate_receive_into_with_tag(scope, &mut x, 98),
                );
            });
        } else {
            myriad::sleep(Duration::from_millis(3 * rank as u64));
            let data = [rank; 2];
            request::scope(|scope| {
                let mut r = world.process_at_rank(0).immediate_send(scope, &data);
                // Poll with test: it yields, so rank 0 gets to run.
                loop {
                    match r.test() {
                        Ok(_) => break,
                        Err(again) => r = again,
                    }
                }
                let _g = WaitGuard::from(
                    world
                        .process_at_rank(0)
                        .immediate_send_with_tag(scope, &data, 55),
                );
            });
        }
        world.barrier();
        if rank == 0 {
            for _ in 1..4 {
                let mut buf = [0i32; 2];
                let status = world.any_process().receive_into_with_tag(&mut buf[..], 55);
                assert_eq!(buf, [status.source_rank(); 2]);
            }
        }
    })
    .unwrap();
}

#[test]
fn send_receive_exchanges_without_deadlock() {
    myriad::run(6, |universe| {
        let world = universe.world();
        let (rank, size) = (world.rank(), world.size());
        let right = world.process_at_rank((rank + 1) % size);
        let left = world.process_at_rank((rank + size - 1) % size);
        // Large enough for rendezvous: plain send/receive in this order would
        // deadlock, send_receive must not.
        let out = vec![rank as u64; 100_000];
        let mut input = vec![0u64; 100_000];
        p2p::send_receive_into(&out[..], &right, &mut input[..], &left);
        assert!(input
            .iter()
            .all(|&x| x == ((rank + size - 1) % size) as u64));
        let (x, _): (i32, _) = p2p::send_receive(&rank, &left, &right);
        assert_eq!(x, (rank + 1) % size);
        let mut buf = [rank; 3];
        p2p::send_receive_replace_into(&mut buf[..], &right, &left);
        assert_eq!(buf, [(rank + size - 1) % size; 3]);
    })
    .unwrap();
}

#[test]
fn truncation_is_an_error_and_nothing_is_silently_cut() {
    let result = myriad::run(2, |universe| {
        let world = universe.world();
        if world.rank() == 0 {
            world.process_at_rank(1).send(&[1u32, 2, 3, 4][..]);
            world.process_at_rank(1).send(&vec![5u32; 100_000][..]);
            None
        } else {
            let mut small = [0u32; 2];
            let err = world
                .process_at_rank(0)
                .try_receive_into_with_tag(&mut small[..], ANY_TAG)
                .unwrap_err();
            let mut big = [0u32; 10];
            let err2 = world
                .process_at_rank(0)
                .try_receive_into_with_tag(&mut big[..], ANY_TAG)
                .unwrap_err();
            Some((err, err2, small))
        }
    })
    .unwrap();
    let (err, err2, small) = result[1].clone().unwrap();
    match err {
        Error::Truncate {
            rank,
            source,
            message_bytes,
            buffer_bytes,
            ..
        } => {
            assert_eq!((rank, source, message_bytes, buffer_bytes), (1, 0, 16, 8));
        }
        other => panic!("expected a truncation error, got {other}"),
    }
    assert!(err2.to_string().contains("400000 bytes"), "{err2}");
    assert_eq!(small, [1, 2], "the part that fits is delivered");
    // The panicking variant fails the job with the same message.
    let err = myriad::run(2, |universe| {
        let world = universe.world();
        if world.rank() == 0 {
            world.process_at_rank(1).send(&[1u8, 2, 3][..]);
        } else {
            let mut one = [0u8; 1];
            world.process_at_rank(0).receive_into(&mut one[..]);
        }
    })
    .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("rank 1 panicked") && text.contains("truncated"),
        "{text}"
    );
}

#[test]
fn type_signatures_are_checked() {
    let out = myriad::run(2, |universe| {
        let world = universe.world();
        if world.rank() == 0 {
            world.process_at_rank(1).send(&1.5f32);
            world.process_at_rank(1).send(&[3u16, 4]);
            None
        } else {
            let err = world
                .process_at_rank(0)
                .try_receive_with_tag::<u32>(ANY_TAG)
                .unwrap_err();
            // Arrays and slices of the same base type interoperate.
            let (v, _) = world.process_at_rank(0).receive_vec::<u16>();
            assert_eq!(v, vec![3, 4]);
            Some(err)
        }
    })
    .unwrap();
    let err = out[1].clone().unwrap();
    assert!(matches!(err, Error::Type { .. }), "{err}");
    assert!(err.to_string().contains("sent f32, expected u32"), "{err}");
}

#[test]
fn receive_of_one_value_checks_the_count() {
    let err = myriad::run(2, |universe| {
        let world = universe.world();
        if world.rank() == 0 {
            world.process_at_rank(1).send(&[0u64; 0][..]);
        } else {
            let _ = world.process_at_rank(0).receive::<u64>();
        }
    })
    .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("expected one value of type u64"), "{text}");
    assert!(
        text.contains("tests/p2p.rs"),
        "the user's call site: {text}"
    );
}

#[test]
fn ten_thousand_ranks_send_to_random_peers_and_nothing_is_lost() {
    const N: usize = 10_000;
    fn peer_of(rank: usize) -> usize {
        // A deterministic pseudo-random peer (splitmix64), never itself.
        let mut z = (rank as u64).wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        let p = (z % (N as u64 - 1)) as usize;
        if p >= rank {
            p + 1
        } else {
            p
        }
    }
    fn payload(rank: usize) -> [u64; 4] {
        let r = rank as u64;
        [r, r * r, r ^ 0xdead_beef, r.wrapping_mul(0x1234_5678_9abc)]
    }
    let expected_in: Vec<usize> = {
        let mut v = vec![0; N];
        for r in 0..N {
            v[peer_of(r)] += 1;
        }
        v
    };
    let received = AtomicUsize::new(0);
    let sums = myriad::run(N, |universe| {
        let world = universe.world();
        let rank = world.rank() as usize;
        world
            .process_at_rank(peer_of(rank) as i32)
            .send(&payload(rank));
        let mut checksum = 0u64;
        for _ in 0..expected_in[rank] {
            let (msg, status) = world.any_process().receive::<[u64; 4]>();
            let from = status.source_rank() as usize;
            assert_eq!(peer_of(from), rank, "message from {from} landed at {rank}");
            assert_eq!(msg, payload(from), "payload from {from} corrupted");
            checksum = checksum.wrapping_add(msg.iter().fold(0u64, |a, &x| a.wrapping_add(x)));
            received.fetch_add(1, Ordering::Relaxed);
        }
        checksum
    })
    .unwrap();
    assert_eq!(received.load(Ordering::Relaxed), N);
    let total = sums.iter().fold(0u64, |a, &x| a.wrapping_add(x));
    let expected = (0..N).fold(0u64, |a, r| {
        a.wrapping_add(payload(r).iter().fold(0u64, |b, &x| b.wrapping_add(x)))
    });
    assert_eq!(total, expected);
}

#[test]
fn jobs_run_concurrently_in_one_process() {
    let handles: Vec<_> = (0..4)
        .map(|j| {
            std::thread::spawn(move || {
                myriad::run(50 + j, |universe| {
                    let world = universe.world();
                    world.barrier();
                    let next = world.process_at_rank((world.rank() + 1) % world.size());
                    let prev =
                        world.process_at_rank((world.rank() + world.size() - 1) % world.size());
                    p2p::send_receive::<i32, _, _, _>(&world.rank(), &next, &prev).0
                })
                .unwrap()
            })
        })
        .collect();
    for (j, h) in handles.into_iter().enumerate() {
        let out = h.join().unwrap();
        let n = 50 + j as i32;
        assert_eq!(out, (0..n).map(|r| (r + n - 1) % n).collect::<Vec<_>>());
    }
}

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
struct Particle {
    position: [f64; 3],
    id: u32,
    alive: bool,
}

// SAFETY: the map lists every field at its offset; all fields are
// Equivalence, so signature-matching data is a valid Particle.
unsafe impl Equivalence for Particle {
    type Out = myriad::datatype::SystemDatatype;
    fn equivalent_datatype() -> Self::Out {
        use myriad::datatype::{DatatypeRef, TypeMap};
        static MAP: std::sync::OnceLock<TypeMap> = std::sync::OnceLock::new();
        DatatypeRef::from_static(MAP.get_or_init(|| {
            TypeMap::structure(
                "Particle",
                &[
                    (
                        std::mem::offset_of!(Particle, position),
                        <[f64; 3]>::equivalent_datatype().type_map(),
                        1,
                    ),
                    (
                        std::mem::offset_of!(Particle, id),
                        u32::equivalent_datatype().type_map(),
                        1,
                    ),
                    (
                        std::mem::offset_of!(Particle, alive),
                        bool::equivalent_datatype().type_map(),
                        1,
                    ),
                ],
                std::mem::size_of::<Particle>(),
            )
        }))
    }
}

#[test]
fn repr_c_structs_travel_with_their_padding_untouched() {
    myriad::run(2, |universe| {
        let world = universe.world();
        let ps: Vec<Particle> = (0..10)
            .map(|i| Particle {
                position: [i as f64, 1.0, -2.5],
                id: i,
                alive: i % 2 == 0,
            })
            .collect();
        if world.rank() == 0 {
            world.process_at_rank(1).send(&ps[..]);
            world.process_at_rank(1).send(&ps[3]);
        } else {
            let (got, _) = world.process_at_rank(0).receive_vec::<Particle>();
            assert_eq!(got, ps);
            let (one, _) = world.process_at_rank(0).receive::<Particle>();
            assert_eq!(one, ps[3]);
        }
    })
    .unwrap();
}

#[test]
fn sleep_and_yield_let_other_ranks_run() {
    let flag = AtomicBool::new(false);
    myriad::Runtime::builder()
        .ranks(2)
        .workers(1)
        .run(|universe| {
            let world = universe.world();
            if world.rank() == 0 {
                // Spin with yield_now: on one worker, rank 1 must get to run.
                while !flag.load(Ordering::SeqCst) {
                    myriad::yield_now();
                }
            } else {
                myriad::sleep(Duration::from_millis(10));
                flag.store(true, Ordering::SeqCst);
            }
        })
        .unwrap();
}

#[test]
fn initialize_inside_ranks() {
    myriad::run(2, |universe| {
        // The universe was handed to the closure: initialize() says "already".
        assert!(myriad::initialize().is_none());
        assert!(myriad::environment::is_initialized());
        drop(universe);
    })
    .unwrap();
    myriad::Runtime::builder().ranks(3).launch(|| {
        let (universe, level) =
            myriad::initialize_with_threading(myriad::Threading::Multiple).expect("first call");
        assert!(level <= myriad::Threading::Multiple);
        assert_eq!(level, myriad::environment::threading_support());
        assert!(myriad::initialize().is_none(), "second call");
        let world = universe.world();
        world.barrier();
        assert_eq!(world.size(), 3);
    });
}

/// Every immediate receive form works on `AnyProcess` as on `Process`
/// (rsmpi's `Source` provides them for both): `immediate_receive` (a
/// `ReceiveFuture`), `immediate_receive_into`, `immediate_probe` and
/// `immediate_matched_probe`, each with and without a tag. Each rank sends
/// to the next one in a ring (itself with one rank).
#[test]
fn immediate_receives_on_any_process_and_process() {
    for ranks in [1i32, 2, 3, 4, 7] {
        let out = myriad::run(ranks as usize, |universe| {
            let world = universe.world();
            let (me, n) = (world.rank(), world.size());
            let next = world.process_at_rank((me + 1) % n);
            let prev_rank = (me + n - 1) % n;
            let prev = world.process_at_rank(prev_rank);
            let any = world.any_process();
            let mut got = Vec::new();
            let values: Vec<i32> = (0..6).map(|k| me * 10 + k).collect();
            let mut slot = 0i32;
            request::scope(|sc| {
                let sends: Vec<_> = values
                    .iter()
                    .zip(1..)
                    .map(|(v, tag)| next.immediate_send_with_tag(sc, v, tag))
                    .collect();
                // A ReceiveFuture from AnyProcess, completed by `get`.
                let (v, status) = any.immediate_receive_with_tag::<i32>(1).get();
                assert_eq!(status.source_rank(), prev_rank);
                got.push(v);
                // ... from Process, polled with `try` until it arrives.
                let mut future = prev.immediate_receive_with_tag::<i32>(2);
                let (v, status) = loop {
                    match future.r#try() {
                        Ok(done) => break done,
                        Err(again) => future = again,
                    }
                };
                assert_eq!(status.tag(), 2);
                got.push(v);
                // immediate_receive_into on AnyProcess.
                let status = any.immediate_receive_into_with_tag(sc, &mut slot, 3).wait();
                assert_eq!(status.source_rank(), prev_rank);
                // immediate_probe, then immediate_matched_probe on AnyProcess.
                let status = loop {
                    if let Some(status) = any.immediate_probe_with_tag(4) {
                        break status;
                    }
                };
                assert_eq!((status.source_rank(), status.tag()), (prev_rank, 4));
                let (message, status) = loop {
                    if let Some(found) = any.immediate_matched_probe_with_tag(4) {
                        break found;
                    }
                };
                assert_eq!(status.tag(), 4);
                got.push(message.matched_receive::<i32>().0);
                // The any-tag forms.
                let (message, _) = loop {
                    if let Some(found) = any.immediate_matched_probe() {
                        break found;
                    }
                };
                let (first, status) = message.matched_receive::<i32>();
                got.push(first);
                let (second, _) = any.immediate_receive::<i32>().get();
                got.push(second);
                assert!(status.tag() == 5 || status.tag() == 6);
                for send in sends {
                    send.wait();
                }
            });
            got.push(slot);
            got.sort();
            world.barrier();
            got
        })
        .unwrap();
        for (r, got) in out.iter().enumerate() {
            let prev = (r as i32 + ranks - 1) % ranks;
            let want: Vec<i32> = (0..6).map(|k| prev * 10 + k).collect();
            assert_eq!(got, &want, "rank {r} of {ranks}");
        }
    }
}

/// A `ReceiveFuture` of one value given a longer message fails `get`
/// (truncation, naming both sizes) and `try_get` returns that error; a
/// bad source rank is refused when the receive starts.
#[test]
fn receive_future_bad_input_fails_clearly() {
    let err = myriad::run(2, |universe| {
        let world = universe.world();
        if world.rank() == 0 {
            world.process_at_rank(1).send(&[1u32, 2, 3][..]);
        } else {
            let _ = world.any_process().immediate_receive::<u32>().get();
        }
    })
    .unwrap_err()
    .to_string();
    assert!(err.contains("truncated"), "{err}");
    assert!(err.contains("12 bytes"), "{err}");

    let out = myriad::run(2, |universe| {
        let world = universe.world();
        let future = world.any_process().immediate_receive::<u64>();
        if world.rank() == 0 {
            world.process_at_rank(1).send(&[5u64, 6][..]);
        } else {
            world.process_at_rank(0).send(&[7u64, 8][..]);
        }
        future.try_get().map(|(v, _)| v).map_err(|e| e.to_string())
    })
    .unwrap();
    for result in out {
        let message = result.expect_err("two values are not one");
        assert!(message.contains("16 bytes"), "{message}");
    }

    let err = myriad::run(2, |universe| {
        let world = universe.world();
        let _ = world.process_at_rank(5).immediate_receive::<u32>();
    })
    .unwrap_err()
    .to_string();
    assert!(err.contains("rank 5 is not in the communicator"), "{err}");

    // Dropped before its message came: the receive is withdrawn and the
    // drop fails the rank clearly (the cell is never written once freed).
    let err = myriad::run(1, |universe| {
        drop(universe.world().any_process().immediate_receive::<u32>());
    })
    .unwrap_err()
    .to_string();
    assert!(err.contains("dropped without being completed"), "{err}");
}

/// Small messages between ranks of two workers, whose receiver mostly
/// waits (spinning) in a blocking receive already posted: every size from
/// 0 to 10 bytes arrives whole, a message too long is cut with a
/// truncation error, a signature mismatch copies nothing, and a strided
/// receive buffer gets its elements in place. (A path that moves small
/// messages other than by a copy into the posted buffer, as one tried in
/// the completion, must keep all four.)
#[test]
fn small_messages_between_workers_arrive_whole_cut_or_refused() {
    use myriad::datatype::{MutView, UserDatatype};
    let rounds = 3000u32;
    myriad::Runtime::builder()
        .ranks(2)
        .workers(2)
        .run(|universe| {
            let world = universe.world();
            // Every other byte of 8: a strided receive of 4 bytes.
            let strided = UserDatatype::vector(4, 1, 2, &u8::equivalent_datatype());
            for round in 0..rounds {
                let n = (round % 11) as usize; // 0..=10 bytes
                let fill = round as u8;
                if world.rank() == 0 {
                    world.process_at_rank(1).send(&vec![fill; n][..]);
                    match round % 4 {
                        0 => {
                            let mut cut = [0u16; 1];
                            let err = world
                                .process_at_rank(1)
                                .try_receive_into_with_tag(&mut cut[..], ANY_TAG)
                                .unwrap_err();
                            assert!(matches!(err, Error::Truncate { .. }), "{err}");
                            assert_eq!(cut, [round as u16], "the part that fits");
                        }
                        1 => {
                            let mut wrong = [7u32; 1];
                            let err = world
                                .process_at_rank(1)
                                .try_receive_into_with_tag(&mut wrong[..], ANY_TAG)
                                .unwrap_err();
                            assert!(matches!(err, Error::Type { .. }), "{err}");
                            assert_eq!(wrong, [7], "nothing copied");
                        }
                        2 => {
                            let mut spread = [9u8; 8];
                            // SAFETY: the vector type selects 4 bytes of 8.
                            let mut view = unsafe {
                                MutView::with_count_and_datatype(&mut spread[..], 1, &strided)
                            };
                            let status = world.process_at_rank(1).receive_into(&mut view);
                            assert_eq!(status.count(u8::equivalent_datatype()), 4);
                            let f = (round % 200) as u8;
                            assert_eq!(spread, [f, 9, f + 1, 9, f + 2, 9, f + 3, 9]);
                        }
                        _ => {
                            let mut two = [0u16; 2];
                            let status = world.process_at_rank(1).receive_into(&mut two[..]);
                            assert_eq!(status.count(u16::equivalent_datatype()), 2);
                            assert_eq!(two, [round as u16, round as u16 + 1]);
                        }
                    }
                } else {
                    let mut buf = [0xAAu8; 16];
                    let status = world.process_at_rank(0).receive_into(&mut buf[..]);
                    assert_eq!(status.count(u8::equivalent_datatype()), n as i32);
                    assert!(buf[..n].iter().all(|&b| b == fill), "round {round}");
                    assert!(buf[n..].iter().all(|&b| b == 0xAA), "round {round}");
                    let peer = world.process_at_rank(0);
                    match round % 4 {
                        0 | 3 => peer.send(&[round as u16, round as u16 + 1][..]),
                        1 => peer.send(&[1u8, 2, 3, 4][..]),
                        _ => {
                            let f = (round % 200) as u8;
                            peer.send(&[f, f + 1, f + 2, f + 3][..]);
                        }
                    }
                }
            }
        })
        .unwrap();
}

/// Messages of up to 16 bytes, which a sender may leave in the line of its
/// receiver's mailbox (`p2p::mailbox::Delivery`), and just past it, between
/// ranks of two workers: received through wildcards, each keeps its
/// sender, tag and length in the status, arrives whole in a larger buffer,
/// and per sender in order. Each sender waits for an acknowledgement
/// before its next message: the receive is then mostly posted first, the
/// case of a delivery into the line.
#[test]
fn small_messages_keep_sender_tag_and_order_through_wildcards() {
    const ROUNDS: u64 = 2000;
    myriad::Runtime::builder()
        .ranks(3)
        .workers(2)
        .run(|universe| {
            let world = universe.world();
            let me = world.rank();
            if me == 0 {
                let mut next = [0u64; 3];
                for _ in 0..2 * ROUNDS {
                    let mut buf = [u64::MAX; 4];
                    let status = world.any_process().receive_into(&mut buf[..]);
                    let (source, tag) = (status.source_rank(), status.tag());
                    assert!(source == 1 || source == 2, "{source}");
                    let round = next[source as usize];
                    next[source as usize] += 1;
                    let words = (round % 3 + 1) as usize; // 8, 16 or 24 bytes
                    assert_eq!(tag, (round % 5) as i32, "from {source}, round {round}");
                    assert_eq!(status.count(u64::equivalent_datatype()), words as i32);
                    for (i, &w) in buf.iter().enumerate() {
                        let want = if i < words {
                            (source as u64) << 32 | round << 4 | i as u64
                        } else {
                            u64::MAX
                        };
                        assert_eq!(w, want, "word {i} from {source}, round {round}");
                    }
                    // Now and then the receiver is late: the message waits.
                    if round % 7 == 0 {
                        std::thread::yield_now();
                    }
                    // The sender waits for this before its next message, so
                    // that most receives are posted before it comes.
                    world.process_at_rank(source).send(&round);
                }
                assert_eq!(next, [0, ROUNDS, ROUNDS]);
            } else {
                let peer = world.process_at_rank(0);
                for round in 0..ROUNDS {
                    let words = (round % 3 + 1) as usize;
                    let data: Vec<u64> = (0..words)
                        .map(|i| (me as u64) << 32 | round << 4 | i as u64)
                        .collect();
                    peer.send_with_tag(&data[..], (round % 5) as i32);
                    let (ack, _) = peer.receive::<u64>();
                    assert_eq!(ack, round);
                }
            }
        })
        .unwrap();
}

/// Messages of a MiB and more between ranks of two workers (whose copy the
/// idle worker may share, `p2p::shared_copy`) arrive whole, whether the
/// receive was posted first or the message came first, with pieces that do
/// not divide them; one too large for its buffer fills exactly the buffer
/// and is a truncation error.
#[test]
fn large_messages_between_workers_arrive_whole_or_cut_at_the_buffer() {
    const MIB: usize = 1 << 20;
    let pattern = |len: usize, salt: usize| -> Vec<u8> {
        (0..len).map(|i| (i.wrapping_mul(7) ^ salt) as u8).collect()
    };
    myriad::Runtime::builder()
        .ranks(2)
        .workers(2)
        .run(|universe| {
            let world = universe.world();
            let peer = world.process_at_rank(1 - world.rank());
            // 33 MiB: past half of a last-level cache up to 64 MiB, where
            // the copy stores around the caches (`datatype::bulk`).
            let sizes = [MIB - 1, MIB + 3, 5 * MIB + 12_345, 33 * MIB + 7];
            for (k, len) in sizes.into_iter().enumerate() {
                for posted_first in [true, false] {
                    if world.rank() == 0 {
                        if !posted_first {
                            // The message waits for its receive.
                            let data = pattern(len, k);
                            request::scope(|scope| {
                                let request = peer.immediate_send(scope, &data[..]);
                                world.barrier();
                                request.wait();
                            });
                        } else {
                            world.barrier();
                            peer.send(&pattern(len, k)[..]);
                        }
                    } else {
                        let mut buf = vec![0u8; len];
                        if posted_first {
                            request::scope(|scope| {
                                let request = peer.immediate_receive_into(scope, &mut buf[..]);
                                world.barrier();
                                request.wait();
                            });
                        } else {
                            world.barrier();
                            peer.receive_into(&mut buf[..]);
                        }
                        assert!(
                            buf == pattern(len, k),
                            "{len} bytes, posted first {posted_first}"
                        );
                    }
                }
            }
            // Three MiB into two: the first two arrive, nothing past them.
            if world.rank() == 0 {
                peer.send(&pattern(3 * MIB, 9)[..]);
            } else {
                let mut buf = vec![0xAAu8; 3 * MIB];
                let err = peer
                    .try_receive_into_with_tag(&mut buf[..2 * MIB], ANY_TAG)
                    .unwrap_err();
                assert!(matches!(err, Error::Truncate { .. }), "{err}");
                assert!(buf[..2 * MIB] == pattern(3 * MIB, 9)[..2 * MIB]);
                assert!(buf[2 * MIB..].iter().all(|&b| b == 0xAA));
            }
        })
        .unwrap();
}
