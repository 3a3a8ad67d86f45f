//! Ranks in different processes behave as ranks of one: jobs of 2, 3 and 4
//! processes run as threads of this test process, joined by the in-memory
//! loopback transport (`loopback::`) and by TCP streams over the loopback
//! interface (`tcp::`): the same cases for both. Every job runs under a
//! time limit, since a broken wait across processes would hang.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use myriad::collective::SystemOperation;
use myriad::datatype::{MutView, Partition, PartitionMut, UserDatatype};
use myriad::request::{self, multiple_scope, CancelGuard};
use myriad::traits::*;
use myriad::{Error, ANY_TAG};

#[macro_use]
mod common;

use common::joined::{joined, Via};

/// Every process's ranks' results, in world rank order.
fn all_ok<T: std::fmt::Debug>(results: Vec<Result<Vec<T>, Error>>) -> Vec<T> {
    results
        .into_iter()
        .enumerate()
        .flat_map(|(p, r)| r.unwrap_or_else(|e| panic!("process {p} failed: {e}")))
        .collect()
}

cases!(
    every_rank_sends_to_every_other_both_ways,
    any_source_mixes_local_and_remote_senders,
    tag_wildcards_across_processes,
    messages_of_one_pair_do_not_overtake,
    probes_and_matched_probes,
    truncation_and_type_errors_are_those_of_one_process,
    large_messages,
    large_messages_into_every_kind_of_buffer,
    synchronous_send_completes_only_when_matched,
    immediate_operations_and_request_collections,
    a_pending_remote_receive_can_be_cancelled,
    a_panicking_rank_ends_every_process,
    a_wait_for_a_busy_remote_sender_is_no_deadlock,
    a_wait_nobody_can_end_is_reported_once_every_peer_left,
    collectives_on_the_world,
    more_collectives_on_the_world,
);

fn every_rank_sends_to_every_other_both_ways(via: Via) {
    let out = all_ok(joined(via, &[2, 3], |universe| {
        let world = universe.world();
        let (rank, size) = (world.rank(), world.size());
        for peer in (0..size).filter(|&p| p != rank) {
            world
                .process_at_rank(peer)
                .send_with_tag(&[rank, peer, 7][..], rank);
        }
        let mut got = Vec::new();
        for peer in (0..size).filter(|&p| p != rank) {
            let (v, status) = world.process_at_rank(peer).receive_vec::<i32>();
            assert_eq!(v, [peer, rank, 7]);
            assert_eq!((status.source_rank(), status.tag()), (peer, peer));
            got.push(peer);
        }
        (rank, got.len())
    }));
    assert_eq!(out, (0..5).map(|r| (r, 4)).collect::<Vec<_>>());
}

fn any_source_mixes_local_and_remote_senders(via: Via) {
    let out = all_ok(joined(via, &[2, 2, 2], |universe| {
        let world = universe.world();
        if world.rank() == 0 {
            let mut sources: Vec<i32> = (1..6)
                .map(|_| {
                    let (v, status) = world.any_process().receive::<u64>();
                    assert_eq!(v, status.source_rank() as u64 * 10);
                    status.source_rank()
                })
                .collect();
            sources.sort();
            sources
        } else {
            world.process_at_rank(0).send(&(world.rank() as u64 * 10));
            Vec::new()
        }
    }));
    assert_eq!(out[0], [1, 2, 3, 4, 5]);
}

fn tag_wildcards_across_processes(via: Via) {
    let out = all_ok(joined(via, &[1, 1], |universe| {
        let world = universe.world();
        if world.rank() == 0 {
            world.process_at_rank(1).send_with_tag(&[1u32, 2, 3][..], 7);
            world.process_at_rank(1).send_with_tag(&9.5f64, 11);
            None
        } else {
            let (x, status) = world.any_process().receive_with_tag::<f64>(11);
            assert_eq!((x, status.source_rank(), status.tag()), (9.5, 0, 11));
            let mut buf = [0u32; 8];
            let status = world.any_process().receive_into(&mut buf[..]);
            assert_eq!(status.tag(), 7);
            assert_eq!(status.count(u32::equivalent_datatype()), 3);
            Some(buf[..3].to_vec())
        }
    }));
    assert_eq!(out[1], Some(vec![1, 2, 3]));
}

/// Message chains: standard, synchronous and large sends from one rank to
/// another process arrive in the order they were sent, received by tag
/// wildcard.
fn messages_of_one_pair_do_not_overtake(via: Via) {
    let out = all_ok(joined(via, &[2, 2], |universe| {
        let world = universe.world();
        const N: u64 = 300;
        match world.rank() {
            1 => {
                for i in 0..N {
                    let dest = world.process_at_rank(2); // Synchronous, eager (40 kB), announced (160 kB, above
                                                         // the eager limit) and small messages in one chain.
                    match i % 5 {
                        0 => dest.synchronous_send_with_tag(&i, 3),
                        1 => dest.send_with_tag(&vec![i; 5000][..], 4),
                        2 => dest.send_with_tag(&vec![i; 20_000][..], 6),
                        _ => dest.send_with_tag(&i, 5),
                    }
                }
                true
            }
            2 => (0..N).all(|i| {
                let (v, status) = world.process_at_rank(1).receive_vec::<u64>();
                v.iter().all(|&x| x == i)
                    && status.tag() == [3, 4, 6, 5, 5][i as usize % 5]
                    && v.len() == [1, 5000, 20_000, 1, 1][i as usize % 5]
            }),
            _ => true,
        }
    }));
    assert!(out.iter().all(|&ok| ok), "{out:?}");
}

fn probes_and_matched_probes(via: Via) {
    let out = all_ok(joined(via, &[1, 1], |universe| {
        let world = universe.world();
        if world.rank() == 0 {
            world
                .process_at_rank(1)
                .send_with_tag(&[1i16, 2, 3, 4, 5][..], 1);
            world
                .process_at_rank(1)
                .send_with_tag(&vec![9u64; 50_000][..], 2);
            world.barrier();
            0
        } else {
            let status = world.process_at_rank(0).probe_with_tag(1);
            assert_eq!(status.count(i16::equivalent_datatype()), 5);
            assert!(world.any_process().immediate_probe_with_tag(1).is_some());
            let (msg, status) = world.any_process().matched_probe_with_tag(2);
            assert_eq!(status.count(u64::equivalent_datatype()), 50_000);
            assert!(world.any_process().immediate_probe_with_tag(2).is_none());
            let (big, _) = (msg, status).matched_receive_vec::<u64>();
            let (small, _) = world.process_at_rank(0).receive_vec::<i16>();
            assert_eq!(small, vec![1, 2, 3, 4, 5]);
            assert!(world.any_process().immediate_matched_probe().is_none());
            world.barrier();
            big.iter().filter(|&&x| x == 9).count()
        }
    }));
    assert_eq!(out[1], 50_000);
}

fn truncation_and_type_errors_are_those_of_one_process(via: Via) {
    let out = all_ok(joined(via, &[1, 1], |universe| {
        let world = universe.world();
        if world.rank() == 0 {
            world.process_at_rank(1).send(&[1u32, 2, 3, 4][..]);
            world.process_at_rank(1).send(&vec![5u32; 100_000][..]);
            world.process_at_rank(1).send(&1.5f32);
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
            let err3 = world
                .process_at_rank(0)
                .try_receive_with_tag::<u32>(ANY_TAG)
                .unwrap_err();
            Some((err, err2, err3, small))
        }
    }));
    let (err, err2, err3, small) = out[1].clone().unwrap();
    match err {
        Error::Truncate {
            rank,
            source,
            message_bytes,
            buffer_bytes,
            ..
        } => assert_eq!((rank, source, message_bytes, buffer_bytes), (1, 0, 16, 8)),
        other => panic!("expected a truncation error, got {other}"),
    }
    assert!(err2.to_string().contains("400000 bytes"), "{err2}");
    assert_eq!(small, [1, 2], "the part that fits is delivered");
    assert!(matches!(err3, Error::Type { .. }), "{err3}");
    assert!(
        err3.to_string().contains("sent f32, expected u32"),
        "{err3}"
    );
}

fn large_messages(via: Via) {
    let out = all_ok(joined(via, &[2, 1], |universe| {
        let world = universe.world();
        let (rank, size) = (world.rank(), world.size());
        let n = 1 << 20;
        let data: Vec<u32> = (0..n).map(|i| i ^ rank as u32).collect();
        let right = world.process_at_rank((rank + 1) % size);
        let left = world.process_at_rank((rank + size - 1) % size);
        let mut input = vec![0u32; n as usize];
        myriad::point_to_point::send_receive_into(&data[..], &right, &mut input[..], &left);
        let from = ((rank + size - 1) % size) as u32;
        input.iter().enumerate().all(|(i, &x)| x == i as u32 ^ from)
    }));
    assert_eq!(out, [true, true, true]);
}

/// Large (announced) messages whose data the transport writes straight
/// into the receive buffer when it can (TCP; shared memory, whose receiver
/// reads a lent buffer itself from 4 MiB on): a larger buffer, a strided
/// one (unpacked from a copy), one of another type (a type error) and one
/// too small (truncation) all behave as in one process.
fn large_messages_into_every_kind_of_buffer(via: Via) {
    const N: usize = 1 << 20;
    let out = all_ok(joined(via, &[1, 1], |universe| {
        let world = universe.world();
        let peer = world.process_at_rank(1 - world.rank());
        if world.rank() == 0 {
            let data: Vec<u32> = (0..N as u32)
                .map(|i| i.wrapping_mul(2_654_435_761))
                .collect();
            for _ in 0..4 {
                peer.send(&data[..]);
            }
            None
        } else {
            let expected: Vec<u32> = (0..N as u32)
                .map(|i| i.wrapping_mul(2_654_435_761))
                .collect();
            // A larger buffer: the message fills its start.
            let mut larger = vec![7u32; N + 5];
            let status = peer.receive_into(&mut larger[..]);
            let larger_ok = status.count(u32::equivalent_datatype()) == N as i32
                && larger[..N] == expected[..]
                && larger[N..] == [7; 5];
            // Every other element of a buffer twice as long.
            let every_other = UserDatatype::vector(N as i32, 1, 2, &u32::equivalent_datatype());
            let mut strided = vec![1u32; 2 * N];
            // SAFETY: the vector type spans 2N - 1 elements of `strided`.
            let mut view =
                unsafe { MutView::with_count_and_datatype(&mut strided[..], 1, &every_other) };
            peer.receive_into(&mut view);
            let strided_ok =
                (0..N).all(|i| strided[2 * i] == expected[i] && strided[2 * i + 1] == 1);
            // Another type, then a buffer too small.
            let mut floats = vec![0f32; N];
            let type_err = peer
                .try_receive_into_with_tag(&mut floats[..], ANY_TAG)
                .unwrap_err();
            let mut small = vec![0u32; N / 2];
            let trunc = peer
                .try_receive_into_with_tag(&mut small[..], ANY_TAG)
                .unwrap_err();
            Some((
                larger_ok,
                strided_ok,
                type_err.to_string(),
                trunc.to_string(),
                small[..4] == expected[..4],
            ))
        }
    }));
    let (larger_ok, strided_ok, type_err, trunc, small_ok) = out[1].clone().unwrap();
    assert!(larger_ok, "a larger contiguous buffer");
    assert!(strided_ok, "a strided buffer");
    assert!(type_err.contains("sent u32, expected f32"), "{type_err}");
    assert!(trunc.contains(&format!("{} bytes", 4 * N)), "{trunc}");
    assert!(small_ok, "the part that fits is delivered");
}

fn synchronous_send_completes_only_when_matched(via: Via) {
    static RECEIVING: [AtomicBool; 3] = [const { AtomicBool::new(false) }; 3];
    let slot = via as usize;
    RECEIVING[slot].store(false, Ordering::SeqCst);
    all_ok(joined(via, &[1, 1], move |universe| {
        let world = universe.world();
        if world.rank() == 0 {
            world.process_at_rank(1).synchronous_send(&42u8);
            assert!(
                RECEIVING[slot].load(Ordering::SeqCst),
                "ssend returned before the receive was posted"
            );
        } else {
            myriad::sleep(Duration::from_millis(30));
            RECEIVING[slot].store(true, Ordering::SeqCst);
            let (x, _) = world.process_at_rank(0).receive::<u8>();
            assert_eq!(x, 42);
        }
    }));
}

fn immediate_operations_and_request_collections(via: Via) {
    let out = all_ok(joined(via, &[1, 2, 1], |universe| {
        let world = universe.world();
        let (rank, size) = (world.rank(), world.size());
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
                assert_eq!(seen, [1, 2, 3]);
            });
            assert_eq!(bufs, [[1; 2], [2; 2], [3; 2]]);
        } else {
            let data = [rank; 2];
            request::scope(|scope| {
                let r = world.process_at_rank(0).immediate_send(scope, &data);
                r.wait();
            });
        }
        // A ring in a request collection.
        let next = world.process_at_rank((rank + 1) % size);
        let prev = world.process_at_rank((rank + size - 1) % size);
        let mut got = [-1i32; 4];
        let mut completed = 0;
        multiple_scope(8, |scope, coll| {
            for _ in 0..4 {
                coll.add(next.immediate_synchronous_send(scope, &rank));
            }
            for slot in got.iter_mut() {
                coll.add(prev.immediate_receive_into(scope, slot));
            }
            while coll.wait_any().is_some() {
                completed += 1;
            }
        });
        assert_eq!(got, [(rank + size - 1) % size; 4]);
        completed
    }));
    assert_eq!(out, [8, 8, 8, 8]);
}

fn a_pending_remote_receive_can_be_cancelled(via: Via) {
    let out = all_ok(joined(via, &[1, 1], |universe| {
        let world = universe.world();
        let mut cancelled = false;
        if world.rank() == 0 {
            let (mut x, mut y) = (0u8, 0u8);
            request::scope(|scope| {
                let r = world
                    .process_at_rank(1)
                    .immediate_receive_into_with_tag(scope, &mut x, 99);
                r.cancel();
                cancelled = r.wait().is_cancelled();
                let _guard = CancelGuard::from(
                    world
                        .process_at_rank(1)
                        .immediate_receive_into_with_tag(scope, &mut y, 98),
                );
            });
        }
        world.barrier();
        if world.rank() == 1 {
            // Sent after the cancels: a later receive gets it, not the
            // cancelled ones.
            world.process_at_rank(0).send_with_tag(&5u8, 99);
        } else {
            let (v, _) = world.process_at_rank(1).receive_with_tag::<u8>(99);
            assert_eq!(v, 5);
        }
        cancelled
    }));
    assert!(out[0]);
}

fn a_panicking_rank_ends_every_process(via: Via) {
    let results = joined(via, &[2, 2], |universe| {
        let world = universe.world();
        if world.rank() == 3 {
            myriad::sleep(Duration::from_millis(10));
            panic!("rank three gives up");
        }
        // Waits that only the panicking rank could end: a posted receive,
        // an announced (large) send and a synchronous send to another
        // process, each given up when the job fails.
        let three = world.process_at_rank(3);
        match world.rank() {
            0 => three.send(&vec![1u64; 100_000][..]),
            1 => three.synchronous_send(&1u8),
            _ => drop(three.receive::<u8>()),
        }
    });
    for (p, result) in results.into_iter().enumerate() {
        let err = result
            .err()
            .unwrap_or_else(|| panic!("process {p} succeeded"));
        match &err {
            Error::Panic { rank, message } => {
                assert_eq!(*rank, 3, "process {p}: {err}");
                assert!(
                    message.contains("rank three gives up"),
                    "process {p}: {err}"
                );
            }
            other => panic!("process {p}: expected rank 3's panic, got {other}"),
        }
    }
}

fn a_wait_for_a_busy_remote_sender_is_no_deadlock(via: Via) {
    let out = all_ok(joined(via, &[1, 1], |universe| {
        let world = universe.world();
        if world.rank() == 1 {
            // Every rank of process 1 computes (no worker idles to poll).
            std::thread::sleep(Duration::from_millis(50));
            world.process_at_rank(0).send(&7u32);
            0
        } else {
            world.process_at_rank(1).receive::<u32>().0
        }
    }));
    assert_eq!(out, [7, 0]);
}

fn a_wait_nobody_can_end_is_reported_once_every_peer_left(via: Via) {
    let results = joined(via, &[1, 1], |universe| {
        let world = universe.world();
        if world.rank() == 0 {
            let _ = world.process_at_rank(1).receive::<u32>();
        }
    });
    assert!(results[1].is_ok());
    let err = results[0].as_ref().unwrap_err();
    assert!(matches!(err, Error::Deadlock { .. }), "{err}");
}

fn collectives_on_the_world(via: Via) {
    let out = all_ok(joined(via, &[2, 3, 1, 2], |universe| {
        let world = universe.world();
        let (rank, size) = (world.rank(), world.size());
        let n = size as usize;
        world.barrier();
        let mut b = if rank == 2 { 99u64 } else { 0 };
        world.process_at_rank(2).broadcast_into(&mut b);
        let mut sum = 0i64;
        world.all_reduce_into(&(rank as i64), &mut sum, SystemOperation::sum());
        let root = world.process_at_rank(n as i32 - 1);
        let mut reduced = 0i64;
        if rank == size - 1 {
            root.reduce_into_root(&(rank as i64 * 2), &mut reduced, SystemOperation::sum());
        } else {
            root.reduce_into(&(rank as i64 * 2), SystemOperation::sum());
        }
        let root = world.process_at_rank(0);
        let mut gathered = vec![0i32; n];
        let mut scattered = 0i32;
        if rank == 0 {
            root.gather_into_root(&rank, &mut gathered[..]);
            let table: Vec<i32> = (0..size).map(|r| r * 3).collect();
            root.scatter_into_root(&table[..], &mut scattered);
        } else {
            root.gather_into(&rank);
            root.scatter_into(&mut scattered);
        }
        // Gatherv: rank r contributes r + 1 values.
        let mine = vec![rank; rank as usize + 1];
        let counts: Vec<i32> = (1..=size).collect();
        let displs: Vec<i32> = counts
            .iter()
            .scan(0, |s, &c| {
                let d = *s;
                *s += c;
                Some(d)
            })
            .collect();
        let mut all = vec![-1i32; counts.iter().sum::<i32>() as usize];
        if rank == 0 {
            let mut part = PartitionMut::new(&mut all[..], &counts[..], &displs[..]);
            root.gather_varcount_into_root(&mine[..], &mut part);
        } else {
            root.gather_varcount_into(&mine[..]);
        }
        let _ = Partition::new(&mine[..], &counts[..1], &displs[..1]);
        let send: Vec<i32> = (0..size).map(|d| rank * 100 + d).collect();
        let mut recv = vec![0i32; n];
        world.all_to_all_into(&send[..], &mut recv[..]);
        let all_to_all_ok = recv
            .iter()
            .enumerate()
            .all(|(s, &x)| x == s as i32 * 100 + rank);
        (b, sum, reduced, gathered, scattered, all, all_to_all_ok)
    }));
    let n = out.len() as i64;
    for (rank, (b, sum, reduced, gathered, scattered, all, a2a)) in out.iter().enumerate() {
        assert_eq!(*b, 99);
        assert_eq!(*sum, n * (n - 1) / 2);
        if rank == out.len() - 1 {
            assert_eq!(*reduced, n * (n - 1));
        }
        if rank == 0 {
            assert_eq!(*gathered, (0..n as i32).collect::<Vec<_>>());
            let expected: Vec<i32> = (0..n as i32)
                .flat_map(|r| vec![r; r as usize + 1])
                .collect();
            assert_eq!(*all, expected);
        }
        assert_eq!(*scattered, rank as i32 * 3);
        assert!(a2a, "rank {rank}'s all-to-all");
    }
}

/// More collectives on the world: all-gather, scan and immediate
/// all-reduce, with ranks of several processes.
fn more_collectives_on_the_world(via: Via) {
    let out = all_ok(joined(via, &[3, 1, 2], |universe| {
        let world = universe.world();
        let (rank, size) = (world.rank(), world.size());
        let mut all = vec![0i32; size as usize];
        world.all_gather_into(&(rank * 2), &mut all[..]);
        let mut prefix = 0i32;
        world.scan_into(&rank, &mut prefix, SystemOperation::sum());
        let mut total = 0i32;
        request::scope(|scope| {
            world
                .immediate_all_reduce_into(scope, &1i32, &mut total, SystemOperation::sum())
                .wait();
        });
        (all, prefix, total)
    }));
    for (rank, (all, prefix, total)) in out.iter().enumerate() {
        assert_eq!(*all, (0..6).map(|r| r * 2).collect::<Vec<_>>());
        assert_eq!(*prefix, (0..=rank as i32).sum::<i32>());
        assert_eq!(*total, 6);
    }
}
