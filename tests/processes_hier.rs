//! Hierarchical collectives (`hier`) on communicators whose ranks live in
//! several processes: jobs of 2, 3 and 4 processes with uneven blocks of
//! ranks, run as threads of this test process (`common/joined.rs`), joined
//! by the loopback transport and by TCP. Every hierarchical collective is
//! compared with a reference computed here, with roots in every process,
//! non-commutative reductions in rank order, communicators whose
//! processes' ranks are not consecutive (the flat fallback), immediate
//! calls, the peers of a Gather's root counted from the real traffic, a
//! mismatch across processes.
//!
//! Jobs whose processes run on emulated hosts (`Runtime::run_joined_on_hosts`,
//! loopback): the host level (process → host → job) against the same
//! reference, in even and uneven layouts (2 hosts × 2 processes, 3
//! processes on one host and 1 on the other, a host of one process, hosts
//! whose processes interleave), with `ANY_SOURCE` traffic in flight on the
//! same communicator; the processes a leader talks to (the host level keeps
//! a non-head to its own host); `split_shared` by host, `split_by_process`.
//! A real launch with `MYRIAD_HOST` is in `tests/processes_hosts.rs`.

use myriad::collective::{Algorithm, Collective, SystemOperation, UserOperation};
use myriad::datatype::PartitionMut;
use myriad::traits::*;
use myriad::{Count, Error};

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

/// 2, 3 and 4 processes, uneven blocks (one of a single rank).
const LAYOUTS: [&[usize]; 3] = [&[2, 3], &[3, 1, 2], &[2, 2, 1, 3]];

/// The collectives that have `hier`.
const HIER: [Collective; 8] = [
    Collective::Barrier,
    Collective::Broadcast,
    Collective::Gather,
    Collective::GatherVarcount,
    Collective::Scatter,
    Collective::AllGather,
    Collective::Reduce,
    Collective::AllReduce,
];

cases!(
    the_selector_picks_hier_across_processes,
    every_hierarchical_collective_matches_the_reference,
    non_commutative_reductions_keep_rank_order,
    interleaved_processes_fall_back_to_flat_algorithms,
    immediate_hierarchical_collectives,
    gather_root_talks_to_log2_p_processes,
    a_mismatch_across_processes_names_both_calls,
);

/// What one rank computes with `hier` (set on a duplicate of the world),
/// for the world's size `n`: every result, to compare with [`reference`].
fn run_all(comm: &impl Communicator, n: usize) -> Vec<i64> {
    let rank = comm.rank() as i64;
    let mut out = Vec::new();
    comm.barrier();
    for root in 0..n as i32 {
        // Broadcast, small and large (the shared-memory step publishes
        // rather than stages above 4 KiB).
        for len in [1usize, 1000] {
            let mut buf: Vec<i64> = if comm.rank() == root {
                (0..len as i64).map(|i| i * 7 + root as i64).collect()
            } else {
                vec![-1; len]
            };
            comm.process_at_rank(root).broadcast_into(&mut buf[..]);
            out.push(buf.iter().sum());
        }
        // Reduce.
        let mut sum = [0i64; 2];
        let mine = [rank + 1, rank * rank];
        if comm.rank() == root {
            comm.process_at_rank(root).reduce_into_root(
                &mine[..],
                &mut sum[..],
                SystemOperation::sum(),
            );
        } else {
            comm.process_at_rank(root)
                .reduce_into(&mine[..], SystemOperation::sum());
        }
        out.extend(sum);
        // Gather: two elements per rank.
        let mine = [rank * 10, rank * 10 + 1];
        if comm.rank() == root {
            let mut all = vec![-1i64; 2 * n];
            comm.process_at_rank(root)
                .gather_into_root(&mine[..], &mut all[..]);
            out.extend(all);
        } else {
            comm.process_at_rank(root).gather_into(&mine[..]);
        }
        // Gatherv: rank r sends r % 3 + 1 elements; the root keeps the
        // blocks in reverse rank order.
        let mine: Vec<i64> = (0..rank % 3 + 1).map(|i| rank * 100 + i).collect();
        if comm.rank() == root {
            let counts: Vec<Count> = (0..n).map(|r| (r % 3 + 1) as Count).collect();
            let displs: Vec<Count> = (0..n).map(|r| counts[r + 1..].iter().sum()).collect();
            let mut all = vec![-1i64; counts.iter().sum::<Count>() as usize];
            let mut part = PartitionMut::new(&mut all[..], &counts[..], &displs[..]);
            comm.process_at_rank(root)
                .gather_varcount_into_root(&mine[..], &mut part);
            out.extend(all);
        } else {
            comm.process_at_rank(root).gather_varcount_into(&mine[..]);
        }
        // Scatter: two elements per rank.
        let mut part = [-1i64; 2];
        if comm.rank() == root {
            let all: Vec<i64> = (0..2 * n as i64).map(|i| i * 3 + root as i64).collect();
            comm.process_at_rank(root)
                .scatter_into_root(&all[..], &mut part[..]);
        } else {
            comm.process_at_rank(root).scatter_into(&mut part[..]);
        }
        out.extend(part);
    }
    let mut total = [0i64; 3];
    comm.all_reduce_into(
        &[rank, 1, rank * 3][..],
        &mut total[..],
        SystemOperation::sum(),
    );
    out.extend(total);
    let mut max = 0i64;
    comm.all_reduce_into(&rank, &mut max, SystemOperation::max());
    out.push(max);
    let mut all = vec![-1i64; 3 * n];
    comm.all_gather_into(&[rank, -rank, 5][..], &mut all[..]);
    out.extend(all);
    comm.barrier();
    out
}

/// What [`run_all`] must give on rank `me` of `n`.
fn reference(me: usize, n: usize) -> Vec<i64> {
    let me_i = me as i64;
    let ranks = 0..n as i64;
    let mut out = Vec::new();
    for root in 0..n {
        for len in [1i64, 1000] {
            out.push((0..len).map(|i| i * 7 + root as i64).sum());
        }
        if me == root {
            out.push(ranks.clone().map(|r| r + 1).sum());
            out.push(ranks.clone().map(|r| r * r).sum());
        } else {
            out.extend([0, 0]);
        }
        if me == root {
            out.extend(ranks.clone().flat_map(|r| [r * 10, r * 10 + 1]));
            out.extend(
                ranks
                    .clone()
                    .rev()
                    .flat_map(|r| (0..r % 3 + 1).map(move |i| r * 100 + i)),
            );
        }
        out.extend([
            (2 * me_i) * 3 + root as i64,
            (2 * me_i + 1) * 3 + root as i64,
        ]);
    }
    out.extend([
        ranks.clone().sum(),
        n as i64,
        ranks.clone().map(|r| r * 3).sum(),
    ]);
    out.push(n as i64 - 1);
    out.extend(ranks.flat_map(|r| [r, -r, 5]));
    out
}

fn the_selector_picks_hier_across_processes(via: Via) {
    // Set explicitly, every other algorithm still selectable: the results
    // of `auto` (which picks `hier` here) and of the flat ones agree.
    for layout in LAYOUTS {
        let n: usize = layout.iter().sum();
        let out = all_ok(joined(via, layout, move |universe| {
            let world = universe.world();
            let auto = run_all(&world, n);
            let flat = world.duplicate();
            flat.set_collective_algorithm(Collective::AllReduce, Algorithm::RecursiveDoubling)
                .unwrap();
            flat.set_collective_algorithm(Collective::Broadcast, Algorithm::Binomial)
                .unwrap();
            flat.set_collective_algorithm(Collective::Gather, Algorithm::Linear)
                .unwrap();
            flat.set_collective_algorithm(
                Collective::GatherVarcount,
                Algorithm::BinomialConservative,
            )
            .unwrap();
            flat.set_collective_algorithm(Collective::Barrier, Algorithm::Dissemination)
                .unwrap();
            let flat = run_all(&flat, n);
            (auto, flat)
        }));
        for (me, (auto, flat)) in out.into_iter().enumerate() {
            let expected = reference(me, n);
            assert_eq!(auto, expected, "{layout:?} rank {me}: auto");
            assert_eq!(flat, expected, "{layout:?} rank {me}: flat");
        }
    }
}

fn every_hierarchical_collective_matches_the_reference(via: Via) {
    for layout in LAYOUTS {
        let n: usize = layout.iter().sum();
        let out = all_ok(joined(via, layout, move |universe| {
            let world = universe.world();
            let hier = world.duplicate();
            for c in HIER {
                hier.set_collective_algorithm(c, Algorithm::Hierarchical)
                    .unwrap();
            }
            // Twice: the second call runs on the tiers the first made.
            (run_all(&hier, n), run_all(&hier, n))
        }));
        for (me, (first, second)) in out.into_iter().enumerate() {
            let expected = reference(me, n);
            assert_eq!(first, expected, "{layout:?} rank {me}");
            assert_eq!(second, expected, "{layout:?} rank {me}, again");
        }
    }
}

/// 2x2 matrix product: associative, not commutative.
fn matrix_op() -> UserOperation<'static> {
    UserOperation::associative(|x, y| {
        let x: &[[i64; 4]] = x.downcast().unwrap();
        for (y, x) in y.downcast::<[i64; 4]>().unwrap().iter_mut().zip(x) {
            *y = product(*x, *y);
        }
    })
}

fn product(x: [i64; 4], y: [i64; 4]) -> [i64; 4] {
    let [a, b, c, d] = x;
    let [e, f, g, h] = y;
    [a * e + b * g, a * f + b * h, c * e + d * g, c * f + d * h]
}

fn matrix(r: i64) -> [i64; 4] {
    [1, r, 0, 1 + r % 2]
}

/// The hierarchical all-reduce of every rank's matrix, and the reduce to
/// every root in turn (what this rank received as root).
fn matrix_reductions(world: &myriad::topology::SimpleCommunicator) -> ([i64; 4], Vec<[i64; 4]>) {
    let op = matrix_op();
    let me = world.rank();
    for c in [Collective::AllReduce, Collective::Reduce] {
        world
            .set_collective_algorithm(c, Algorithm::Hierarchical)
            .unwrap();
    }
    let mut all = [0i64; 4];
    world.all_reduce_into(&matrix(me as i64), &mut all, &op);
    let mut at_roots = Vec::new();
    for root in 0..world.size() {
        let mut prod = [0i64; 4];
        if me == root {
            world
                .process_at_rank(root)
                .reduce_into_root(&matrix(me as i64), &mut prod, &op);
            at_roots.push(prod);
        } else {
            world
                .process_at_rank(root)
                .reduce_into(&matrix(me as i64), &op);
        }
    }
    (all, at_roots)
}

fn non_commutative_reductions_keep_rank_order(via: Via) {
    for layout in LAYOUTS {
        let n: usize = layout.iter().sum();
        let expected = (0..n as i64).map(matrix).reduce(product).unwrap();
        let out = all_ok(joined(via, layout, move |universe| {
            matrix_reductions(&universe.world())
        }));
        for (me, (all, at_roots)) in out.into_iter().enumerate() {
            assert_eq!(all, expected, "{layout:?} rank {me}: all_reduce");
            assert_eq!(at_roots, [expected], "{layout:?} rank {me}: reduce");
        }
    }
}

fn interleaved_processes_fall_back_to_flat_algorithms(via: Via) {
    // Keys that deal the ranks out round-robin over the processes: no
    // process's members are consecutive, so the order-keeping collectives
    // run flat, and the others stay hierarchical.
    for layout in LAYOUTS {
        let n: usize = layout.iter().sum();
        let out = all_ok(joined(via, layout, move |universe| {
            let world = universe.world();
            let me = world.rank();
            let key = (n as i32 - 1 - me) % 2 * n as i32 + me;
            let comm = world.split_by_color_with_key(myriad::topology::Color::with_value(0), key);
            let comm = comm.expect("every rank has the color");
            for c in HIER {
                comm.set_collective_algorithm(c, Algorithm::Hierarchical)
                    .unwrap();
            }
            let order = {
                let mut all = vec![0i32; n];
                comm.all_gather_into(&me, &mut all[..]);
                all
            };
            let op = matrix_op();
            let mut prod = [0i64; 4];
            comm.all_reduce_into(&matrix(me as i64), &mut prod, &op);
            (comm.rank(), order, run_all(&comm, n), prod)
        }));
        let order = out[0].1.clone();
        let expected_prod = order
            .iter()
            .map(|&w| matrix(w as i64))
            .reduce(product)
            .unwrap();
        for (world_rank, (rank, seen, results, prod)) in out.into_iter().enumerate() {
            assert_eq!(order[rank as usize], world_rank as i32);
            assert_eq!(seen, order);
            assert_eq!(prod, expected_prod, "{layout:?} rank {rank}");
            assert_eq!(
                results,
                reference(rank as usize, n),
                "{layout:?} rank {rank}"
            );
        }
    }
}

fn immediate_hierarchical_collectives(via: Via) {
    for layout in LAYOUTS {
        let n: usize = layout.iter().sum();
        let out = all_ok(joined(via, layout, move |universe| {
            let world = universe.world();
            for c in HIER {
                world
                    .set_collective_algorithm(c, Algorithm::Hierarchical)
                    .unwrap();
            }
            let me = world.rank() as i64;
            let mut sums = [0i64; 6];
            let mut buf = if me == 0 { 42i64 } else { 0 };
            let mut all = vec![0i64; n];
            let mine: Vec<i64> = (1..=6).map(|i| me * i).collect();
            myriad::request::scope(|scope| {
                let mut requests = Vec::new();
                for (sum, mine) in sums.iter_mut().zip(&mine) {
                    requests.push(world.immediate_all_reduce_into(
                        scope,
                        mine,
                        sum,
                        SystemOperation::sum(),
                    ));
                }
                let b = world
                    .process_at_rank(0)
                    .immediate_broadcast_into(scope, &mut buf);
                let g = world.immediate_all_gather_into(scope, &me, &mut all[..]);
                let barrier = world.immediate_barrier();
                for r in requests {
                    r.wait();
                }
                b.wait();
                g.wait();
                barrier.wait();
            });
            (sums, buf, all)
        }));
        let total: i64 = (0..n as i64).sum();
        for (sums, buf, all) in out {
            assert_eq!(sums, std::array::from_fn(|i| total * (i as i64 + 1)));
            assert_eq!(buf, 42);
            assert_eq!(all, (0..n as i64).collect::<Vec<_>>());
        }
    }
}

/// ⌈log2 p⌉.
fn log2_ceil(p: usize) -> usize {
    (usize::BITS - (p - 1).leading_zeros()) as usize
}

fn gather_root_talks_to_log2_p_processes(via: Via) {
    static LAYOUTS: [[usize; 16]; 1] = [[2; 16]];
    for p in 2..=16usize {
        let layout: &'static [usize] = &LAYOUTS[0][..p];
        for root_process in [0, p - 1] {
            let root = 2 * root_process as i32 + 1;
            let out = all_ok(joined(via, layout, move |universe| {
                let world = universe.world();
                let me = world.rank();
                let n = world.size() as usize;
                world.take_collective_peer_processes();
                let mine = [me as i64; 3];
                let mut all = vec![0i64; 3 * n];
                if me == root {
                    world
                        .process_at_rank(root)
                        .gather_into_root(&mine[..], &mut all[..]);
                } else {
                    world.process_at_rank(root).gather_into(&mine[..]);
                }
                let gather_peers = world.take_collective_peer_processes();
                world.barrier();
                world.take_collective_peer_processes();
                // Gatherv (conservative: only the root knows the counts).
                let mut allv = vec![0i64; 3 * n];
                if me == root {
                    let counts = vec![3 as Count; n];
                    let displs: Vec<Count> = (0..n as Count).map(|r| 3 * r).collect();
                    let mut part = PartitionMut::new(&mut allv[..], &counts[..], &displs[..]);
                    world
                        .process_at_rank(root)
                        .gather_varcount_into_root(&mine[..], &mut part);
                } else {
                    world.process_at_rank(root).gather_varcount_into(&mine[..]);
                }
                assert_eq!(all, allv);
                (all, gather_peers, world.take_collective_peer_processes())
            }));
            // The peers of the root's process: those its ranks (the
            // leader, which does the talking) exchanged messages with.
            for (what, pick) in [("gather", 1), ("gatherv", 2)] {
                let peers: std::collections::BTreeSet<u32> = out
                    [2 * root_process..2 * root_process + 2]
                    .iter()
                    .flat_map(|r| if pick == 1 { &r.1 } else { &r.2 }.iter().copied())
                    .collect();
                assert_eq!(
                    peers.len(),
                    log2_ceil(p),
                    "{what}, {p} processes, root in process {root_process}: {peers:?}"
                );
            }
            let expected: Vec<i64> = (0..2 * p as i64).flat_map(|r| [r; 3]).collect();
            assert_eq!(out[root as usize].0, expected);
        }
    }
}

/// Every process's error text (each must fail).
fn all_failed<T>(results: Vec<Result<Vec<T>, Error>>) -> Vec<String> {
    results
        .into_iter()
        .enumerate()
        .map(|(p, r)| match r {
            Ok(_) => panic!("process {p} succeeded"),
            Err(e) => e.to_string(),
        })
        .collect()
}

fn a_mismatch_across_processes_names_both_calls(via: Via) {
    // Process 0 calls an all-reduce where process 1 calls a broadcast: each
    // process agrees with itself, so only the signature travelling with
    // the leaders' messages can tell.
    let errors = all_failed(joined(via, &[2, 3], |universe| {
        let world = universe.world();
        let mut x = world.rank() as u64;
        if world.rank() < 2 {
            let mine = x;
            world.all_reduce_into(&mine, &mut x, SystemOperation::sum());
        } else {
            world.process_at_rank(0).broadcast_into(&mut x);
        }
    }));
    for text in errors {
        assert!(
            text.contains("collective mismatch on call 0 of the communicator, across processes")
                && text.contains("all_reduce of 8 bytes")
                && text.contains("broadcast with root 0 of 8 bytes")
                && text.contains("(algorithm hier)")
                && text.contains("tests/processes_hier.rs:"),
            "{text}"
        );
        // Both leaders named: rank 0 (process 0) and rank 2 (process 1).
        assert!(
            text.contains("rank 0 called") && text.contains("rank 2 called"),
            "{text}"
        );
    }
    // Flat: a broadcast of 8 bytes in process 0, of 16 in process 1. The
    // root's process only sends, and may be done before process 1 finds
    // the difference: process 1 fails, process 0 fails or is done.
    let results = joined(via, &[2, 3], |universe| {
        let world = universe.world();
        world
            .set_collective_algorithm(Collective::Broadcast, Algorithm::Linear)
            .unwrap();
        let mut x = [0u64; 2];
        let len = if world.rank() < 2 { 1 } else { 2 };
        world.process_at_rank(0).broadcast_into(&mut x[..len]);
    });
    assert!(results[1].is_err(), "process 1 found no mismatch");
    for text in results
        .into_iter()
        .filter_map(|r| r.err())
        .map(|e| e.to_string())
    {
        assert!(
            text.contains("across processes")
                && text.contains("rank 0 called broadcast with root 0 of 8 bytes")
                && text.contains("called broadcast with root 0 of 16 bytes"),
            "{text}"
        );
    }
}

/// Explicit `hier` on a communicator of one process is its shared-memory
/// step alone (the leaders' step has one member).
#[test]
fn explicit_hier_in_one_process() {
    let n = 5;
    let out = myriad::run(n, move |universe| {
        let world = universe.world();
        for c in HIER {
            world
                .set_collective_algorithm(c, Algorithm::Hierarchical)
                .unwrap();
        }
        run_all(&world, n)
    })
    .unwrap();
    for (me, results) in out.into_iter().enumerate() {
        assert_eq!(results, reference(me, n), "rank {me}");
    }
}

/// Runs `f` on a job whose process `p` hosts `layout[p]` ranks (2 workers
/// each) and runs on emulated host `hosts[p]`, joined by the loopback
/// transport; every rank's result in world rank order.
fn on_hosts<T, F>(layout: &'static [usize], hosts: &'static [u32], f: F) -> Vec<T>
where
    T: Send + std::fmt::Debug + 'static,
    F: Fn(myriad::Universe) -> T + Send + Sync + 'static,
{
    all_ok(common::within_time_limit(
        "a job on emulated hosts",
        common::joined::LIMIT,
        move || {
            myriad::Runtime::builder()
                .workers(2)
                .run_joined_on_hosts(layout, hosts, f)
                .expect("the job starts")
        },
    ))
}

/// (ranks per process, host per process): 2 hosts × 2 processes × 2
/// ranks; uneven blocks on the same hosts; 3 processes on host A and 1 on
/// B; a host of one process first; hosts whose processes interleave (the
/// order-keeping collectives stay at the process level there).
const HOST_LAYOUTS: [(&[usize], &[u32]); 6] = [
    (&[2, 2, 2, 2], &[0, 0, 1, 1]),
    (&[2, 3, 1, 2], &[0, 0, 1, 1]),
    (&[1, 2, 3, 1], &[0, 0, 0, 1]),
    (&[2, 3, 1], &[0, 1, 1]),
    (&[2, 1, 3, 2], &[0, 1, 0, 1]),
    (&[1, 1, 1, 1, 1, 1], &[0, 0, 1, 1, 2, 2]),
];

/// Every hierarchical collective on the world of jobs on several hosts
/// equals the reference (what the flat algorithms give), twice, while each
/// rank's message to the next rank (sent before, received with
/// `ANY_SOURCE` and any tag after) is in flight on the same communicator.
#[test]
fn hosts_every_hierarchical_collective_matches_the_reference() {
    for (layout, hosts) in HOST_LAYOUTS {
        let n: usize = layout.iter().sum();
        let out = on_hosts(layout, hosts, move |universe| {
            let world = universe.world();
            for c in HIER {
                world
                    .set_collective_algorithm(c, Algorithm::Hierarchical)
                    .unwrap();
            }
            let me = world.rank();
            let size = world.size();
            world
                .process_at_rank((me + 1) % size)
                .send_with_tag(&(1000 + me), 7 + me % 3);
            let first = run_all(&world, n);
            let (got, status) = world.any_process().receive::<i32>();
            let second = run_all(&world, n);
            (first, second, got, status.source_rank(), status.tag())
        });
        for (me, (first, second, got, source, tag)) in out.into_iter().enumerate() {
            let expected = reference(me, n);
            assert_eq!(first, expected, "{layout:?} on {hosts:?} rank {me}");
            assert_eq!(second, expected, "{layout:?} on {hosts:?} rank {me}, again");
            let from = (me + n - 1) % n;
            assert_eq!(
                (got, source, tag),
                (1000 + from as i32, from as i32, 7 + from as i32 % 3),
                "{layout:?} on {hosts:?} rank {me}: the ANY_SOURCE message"
            );
        }
    }
}

/// The selector's choice (`hier` across processes) agrees with flat
/// algorithms set explicitly, on several hosts.
#[test]
fn hosts_auto_agrees_with_flat_algorithms() {
    for (layout, hosts) in HOST_LAYOUTS {
        let n: usize = layout.iter().sum();
        let out = on_hosts(layout, hosts, move |universe| {
            let world = universe.world();
            let auto = run_all(&world, n);
            let flat = world.duplicate();
            for (c, a) in [
                (Collective::AllReduce, Algorithm::RecursiveDoubling),
                (Collective::Reduce, Algorithm::Binomial),
                (Collective::Broadcast, Algorithm::Binomial),
                (Collective::Barrier, Algorithm::Dissemination),
            ] {
                flat.set_collective_algorithm(c, a).unwrap();
            }
            (auto, run_all(&flat, n))
        });
        for (me, (auto, flat)) in out.into_iter().enumerate() {
            assert_eq!(auto, flat, "{layout:?} on {hosts:?} rank {me}");
            assert_eq!(auto, reference(me, n), "{layout:?} on {hosts:?} rank {me}");
        }
    }
}

/// A non-commutative reduction on several hosts: rank order when hosts'
/// processes are consecutive (host level) and when they interleave (the
/// process level then).
#[test]
fn hosts_non_commutative_reductions_keep_rank_order() {
    for (layout, hosts) in HOST_LAYOUTS {
        let n: usize = layout.iter().sum();
        let expected = (0..n as i64).map(matrix).reduce(product).unwrap();
        let out = on_hosts(layout, hosts, move |universe| {
            matrix_reductions(&universe.world())
        });
        for (me, (all, at_roots)) in out.into_iter().enumerate() {
            assert_eq!(all, expected, "{layout:?} on {hosts:?} rank {me}");
            assert_eq!(at_roots, [expected], "{layout:?} on {hosts:?} rank {me}");
        }
    }
}

/// With the host level, a leader that heads no host talks only to the
/// processes of its own host (its head), in an all-reduce, a barrier, a
/// broadcast, gather and scatter rooted on another host's non-head, and an
/// all-gather; at the process level (one host), the leaders' recursive
/// doubling and dissemination reach across.
#[test]
fn hosts_a_non_head_talks_only_within_its_host() {
    // Processes 0, 1 on host 0 and 2, 3 on host 1; process 1's leader is
    // world rank 2, process 3's rank 6.
    let layout: &'static [usize] = &[2, 2, 2, 2];
    let measure = |universe: myriad::Universe| {
        let world = universe.world();
        world.take_collective_peer_processes();
        let mut sum = 0i32;
        world.all_reduce_into(&world.rank(), &mut sum, SystemOperation::sum());
        world.barrier();
        let mut value = if world.rank() == 7 { 42 } else { 0 };
        world.process_at_rank(7).broadcast_into(&mut value);
        // Gather, scatter (rooted at process 3's non-leader) and all-gather.
        let me = world.rank();
        let mut all = [0i32; 8];
        if me == 7 {
            world.process_at_rank(7).gather_into_root(&me, &mut all[..]);
        } else {
            world.process_at_rank(7).gather_into(&me);
        }
        let mut part = 0i32;
        if me == 7 {
            let sends: Vec<i32> = (0..8).map(|r| r * 11).collect();
            world
                .process_at_rank(7)
                .scatter_into_root(&sends[..], &mut part);
        } else {
            world.process_at_rank(7).scatter_into(&mut part);
        }
        let mut every = [0i32; 8];
        world.all_gather_into(&(me * 2), &mut every[..]);
        let ok = part == me * 11
            && every.iter().enumerate().all(|(r, &v)| v == 2 * r as i32)
            && (me != 7 || all.iter().enumerate().all(|(r, &v)| v == r as i32));
        let sum = if ok { sum } else { -1 };
        (world.take_collective_peer_processes(), sum, value)
    };
    let by_host = on_hosts(layout, &[0, 0, 1, 1], measure);
    let one_host = on_hosts(layout, &[0, 0, 0, 0], measure);
    for out in [&by_host, &one_host] {
        assert!(out.iter().all(|&(_, sum, value)| sum == 28 && value == 42));
    }
    assert_eq!(by_host[2].0, [0], "process 1 talks to its head only");
    assert_eq!(by_host[6].0, [2], "process 3 talks to its head only");
    // The heads talk to their peer and to each other.
    assert_eq!(by_host[0].0, [1, 2]);
    assert_eq!(by_host[4].0, [0, 3]);
    // One host: the leaders' recursive doubling pairs processes 1 and 3.
    assert!(one_host[2].0.contains(&3), "{:?}", one_host[2].0);
}

/// One rank per process (how MPI jobs are usually launched), 2 hosts × 2
/// processes, no algorithm set: `auto` still takes the host level, so a
/// non-head process talks only to its host's head, and the results hold.
#[test]
fn hosts_one_rank_per_process_auto_keeps_a_non_head_on_its_host() {
    let out = on_hosts(&[1, 1, 1, 1], &[0, 0, 1, 1], |universe| {
        let world = universe.world();
        let me = world.rank();
        world.take_collective_peer_processes();
        let mut sum = 0i32;
        world.all_reduce_into(&me, &mut sum, SystemOperation::sum());
        world.barrier();
        let mut value = if me == 3 { 42 } else { 0 };
        world.process_at_rank(3).broadcast_into(&mut value);
        let mut every = [0i32; 4];
        world.all_gather_into(&(me * 2), &mut every[..]);
        // Gatherv of rank r's r + 1 values to rank 3 (a non-head).
        let mine: Vec<i32> = (0..=me).map(|i| 10 * me + i).collect();
        let mut allv = [0i32; 10];
        if me == 3 {
            let (counts, displs): (Vec<Count>, Vec<Count>) =
                (0..4).map(|r| (r + 1, r * (r + 1) / 2)).unzip();
            let mut part = PartitionMut::new(&mut allv[..], &counts[..], &displs[..]);
            world
                .process_at_rank(3)
                .gather_varcount_into_root(&mine[..], &mut part);
        } else {
            world.process_at_rank(3).gather_varcount_into(&mine[..]);
        }
        let gathered = me != 3 || allv == [0, 10, 11, 20, 21, 22, 30, 31, 32, 33];
        let ok = sum == 6 && value == 42 && every == [0, 2, 4, 6] && gathered;
        (world.take_collective_peer_processes(), ok)
    });
    assert!(out.iter().all(|&(_, ok)| ok), "{out:?}");
    assert_eq!(out[1].0, [0], "process 1 talks to its head only");
    assert_eq!(out[3].0, [2], "process 3 talks to its head only");
    assert_eq!(out[0].0, [1, 2]);
    assert_eq!(out[2].0, [0, 3]);
}

/// `split_shared` gives the ranks of each host (every process of it), in
/// key order; `split_by_host` the same; `split_by_process` each process's
/// ranks. Collectives on the host parts (which span processes) agree.
#[test]
fn split_shared_is_one_communicator_per_host() {
    let layout: &'static [usize] = &[2, 3, 1, 2];
    let hosts: &'static [u32] = &[0, 0, 1, 1];
    let out = on_hosts(layout, hosts, |universe| {
        let world = universe.world();
        let me = world.rank();
        let members = |comm: &myriad::topology::SimpleCommunicator| {
            let mut all = vec![0i32; comm.size() as usize];
            comm.all_gather_into(&me, &mut all[..]);
            all
        };
        // Reversed order within each host.
        let shared = world.split_shared(-me);
        let host = world.split_by_host(-me);
        let process = world.split_by_process(0);
        let mut sum = 0i32;
        shared.all_reduce_into(&me, &mut sum, SystemOperation::sum());
        let mut from_first = if shared.rank() == 0 { me } else { -1 };
        shared.process_at_rank(0).broadcast_into(&mut from_first);
        (
            members(&shared),
            members(&host),
            members(&process),
            sum,
            from_first,
        )
    });
    let blocks = [0..2, 2..5, 5..6, 6..8];
    for (me, (shared, host, process, sum, from_first)) in out.into_iter().enumerate() {
        let expected: Vec<i32> = if me < 5 {
            (0..5).rev().collect()
        } else {
            (5..8).rev().collect()
        };
        assert_eq!(shared, expected, "rank {me}");
        assert_eq!(host, expected, "rank {me}");
        assert_eq!(sum, expected.iter().sum::<i32>(), "rank {me}");
        assert_eq!(from_first, expected[0], "rank {me}");
        let block = blocks.iter().find(|b| b.contains(&(me as i32))).unwrap();
        assert_eq!(process, block.clone().collect::<Vec<_>>(), "rank {me}");
    }
    // One host: every rank in one part.
    let out = on_hosts(&[2, 1, 2], &[4, 4, 4], |universe| {
        let world = universe.world();
        (
            world.split_shared(0).size(),
            world.split_by_process(0).size(),
        )
    });
    assert_eq!(out, [(5, 2), (5, 2), (5, 1), (5, 2), (5, 2)]);
}

/// A host list of the wrong length is refused before anything runs.
#[test]
fn hosts_of_the_wrong_length_are_refused() {
    let err = myriad::Runtime::builder()
        .workers(1)
        .run_joined_on_hosts(&[1, 1], &[0], |_| ())
        .unwrap_err()
        .to_string();
    assert!(err.contains("1 hosts for a job of 2 processes"), "{err}");
}
