//! Communicators made on communicators whose ranks live in several
//! processes: jobs of 2, 3 and 4 processes run as threads of this test
//! process (the harness of `tests/processes.rs`), joined by the in-memory
//! loopback transport (`loopback::`) and by TCP (`tcp::`). The new
//! communicators must have the members, order and locality a one-process
//! job gives them, and collectives on them must work; bad input fails with
//! the errors of one process, in every process, instead of hanging.

use myriad::collective::{Algorithm, Collective, SystemOperation};
use myriad::request;
use myriad::topology::{Color, CommunicatorRelation, InterCommunicator, MergeOrder};
use myriad::traits::*;
use myriad::Error;

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

/// The layouts the cases run on: 2, 3 and 4 processes, several ranks each.
const LAYOUTS: [&[usize]; 3] = [&[2, 3], &[3, 1, 2], &[2, 2, 1, 3]];

cases!(
    duplicate_and_collectives_on_the_duplicate,
    split_with_keys_reversing_the_order,
    split_by_process_is_one_communicator_per_process,
    comm_create_from_a_group,
    cartesian_grid_across_processes,
    nested_splits,
    different_creations_are_the_errors_of_one_process,
    unequal_groups_are_the_errors_of_one_process,
    group_collective_creation_across_processes,
    inter_communicator_between_processes,
    graph_topologies_across_processes,
    inter_communicator_with_a_side_spanning_processes_is_unsupported,
);

/// The world ranks of a communicator's members, by its rank (an all-gather
/// on it).
fn world_ranks_of(comm: &impl Communicator, world_rank: i32) -> Vec<i32> {
    let mut all = vec![0i32; comm.size() as usize];
    comm.all_gather_into(&world_rank, &mut all[..]);
    all
}

fn duplicate_and_collectives_on_the_duplicate(via: Via) {
    for layout in LAYOUTS {
        let n: usize = layout.iter().sum();
        let out = all_ok(joined(via, layout, |universe| {
            let world = universe.world();
            let rank = world.rank();
            let dup = world.duplicate();
            assert_eq!((dup.rank(), dup.size()), (rank, world.size()));
            assert_eq!(world.compare(&dup), CommunicatorRelation::Congruent);
            let mut sum = 0i64;
            dup.all_reduce_into(&(rank as i64 + 1), &mut sum, SystemOperation::sum());
            dup.barrier();
            let mut root_says = if rank == 1 { 77u32 } else { 0 };
            dup.process_at_rank(1).broadcast_into(&mut root_says);
            // A duplicate of the duplicate, and its members' order.
            let again = dup.duplicate();
            let order = world_ranks_of(&again, rank);
            (sum, root_says, order, dup.get_name())
        }));
        let total = (n * (n + 1) / 2) as i64;
        let order: Vec<i32> = (0..n as i32).collect();
        for (sum, said, got, name) in out {
            assert_eq!((sum, said), (total, 77), "{layout:?}");
            assert_eq!(got, order, "{layout:?}");
            assert_eq!(name, "dup of MPI_COMM_WORLD");
        }
    }
}

fn split_with_keys_reversing_the_order(via: Via) {
    for layout in LAYOUTS {
        let n = layout.iter().sum::<usize>() as i32;
        let out = all_ok(joined(via, layout, |universe| {
            let world = universe.world();
            let rank = world.rank();
            let part = world
                .split_by_color_with_key(Color::with_value(rank % 2), -rank)
                .expect("every rank has a color");
            let order = world_ranks_of(&part, rank);
            let mut max = 0i32;
            part.all_reduce_into(&rank, &mut max, SystemOperation::max());
            // Ranks of an undefined color get none.
            let none = world.split_by_color(if rank == 0 {
                Color::undefined()
            } else {
                Color::with_value(5)
            });
            let rest = none.map(|c| (c.rank(), c.size()));
            (rank, part.rank(), order, max, rest)
        }));
        for (rank, new_rank, order, max, rest) in out {
            let expected: Vec<i32> = (0..n).rev().filter(|r| r % 2 == rank % 2).collect();
            assert_eq!(order, expected, "{layout:?} rank {rank}");
            assert_eq!(order[new_rank as usize], rank);
            assert_eq!(max, expected[0]);
            match rest {
                None => assert_eq!(rank, 0),
                Some((r, s)) => assert_eq!((r, s), (rank - 1, n - 1)),
            }
        }
    }
}

fn split_by_process_is_one_communicator_per_process(via: Via) {
    for layout in LAYOUTS {
        let out = all_ok(joined(via, layout, |universe| {
            let world = universe.world();
            let rank = world.rank();
            let shared = world.split_by_process(-rank);
            // The processes of a joined job share this host: `split_shared`
            // keeps them all (by host).
            assert_eq!(world.split_shared(0).size(), world.size());
            // All local: the shared-memory algorithms are allowed there
            // (and refused on the world, which is not).
            let allowed = shared
                .set_collective_algorithm(Collective::AllReduce, Algorithm::SharedMemory)
                .is_ok();
            let mut sum = 0i32;
            shared.all_reduce_into(&1, &mut sum, SystemOperation::sum());
            let on_world = world
                .set_collective_algorithm(Collective::AllReduce, Algorithm::SharedMemory)
                .is_ok();
            (rank, world_ranks_of(&shared, rank), allowed, sum, on_world)
        }));
        let mut first = 0i32;
        let mut blocks = Vec::new();
        for &count in layout {
            let block: Vec<i32> = (first..first + count as i32).rev().collect();
            blocks.extend(std::iter::repeat_n(block, count));
            first += count as i32;
        }
        for ((rank, members, allowed, sum, on_world), block) in out.into_iter().zip(blocks) {
            assert_eq!(members, block, "{layout:?} rank {rank}");
            assert!(allowed, "rank {rank}: shm refused on an all-local part");
            assert_eq!(sum, block.len() as i32);
            assert!(!on_world, "rank {rank}: shm allowed on the world");
        }
    }
}

fn comm_create_from_a_group(via: Via) {
    for layout in LAYOUTS {
        let n = layout.iter().sum::<usize>() as i32;
        let out = all_ok(joined(via, layout, move |universe| {
            let world = universe.world();
            let rank = world.rank();
            // Odd ranks, from the highest down; even ranks, from 0 up
            // (disjoint groups, each passed by all its members).
            let odd: Vec<i32> = (0..n).rev().filter(|r| r % 2 == 1).collect();
            let even: Vec<i32> = (0..n).filter(|r| r % 2 == 0).collect();
            let group = world.group();
            let mine = if rank % 2 == 1 {
                group.include(&odd)
            } else {
                group.include(&even)
            };
            let made = world
                .split_by_subgroup_collective(&mine)
                .expect("a member of its group");
            // A group that leaves rank 0 out: rank 0 gets none.
            let without: Vec<i32> = (1..n).collect();
            let rest = world.split_by_subgroup_collective(&group.include(&without));
            (
                rank,
                world_ranks_of(&made, rank),
                rest.map(|c| world_ranks_of(&c, rank)),
            )
        }));
        let odd: Vec<i32> = (0..n).rev().filter(|r| r % 2 == 1).collect();
        let even: Vec<i32> = (0..n).filter(|r| r % 2 == 0).collect();
        for (rank, members, rest) in out {
            let expected = if rank % 2 == 1 { &odd } else { &even };
            assert_eq!(&members, expected, "{layout:?} rank {rank}");
            match rest {
                None => assert_eq!(rank, 0),
                Some(m) => assert_eq!(m, (1..n).collect::<Vec<_>>()),
            }
        }
    }
}

fn cartesian_grid_across_processes(via: Via) {
    // 2 × 3 periodic in dimension 1, over 6 of 7 ranks in 3 processes.
    let out = all_ok(joined(via, &[3, 2, 2], |universe| {
        let world = universe.world();
        let rank = world.rank();
        let Some(grid) = world.create_cartesian_communicator(&[2, 3], &[false, true], false) else {
            return (rank, None);
        };
        let me = grid.rank();
        let coords = grid.rank_to_coordinates(me);
        let (from, to) = grid.shift(1, 1);
        let (from, to) = (from.expect("periodic"), to.expect("periodic"));
        // Pass the rank along the ring of dimension 1.
        let got = request::scope(|scope| {
            let sent = grid
                .process_at_rank(to)
                .immediate_send_with_tag(scope, &me, 3);
            let (got, _) = grid.process_at_rank(from).receive_with_tag::<i32>(3);
            sent.wait();
            got
        });
        let (up, down) = grid.shift(0, 1);
        // The row of this rank: a sub-grid keeping dimension 1.
        let row = grid.subgroup(&[false, true]);
        let mut row_sum = 0i32;
        row.all_reduce_into(&me, &mut row_sum, SystemOperation::sum());
        (rank, Some((me, coords, from, to, got, up, down, row_sum)))
    }));
    for (rank, seen) in out {
        let Some((me, coords, from, to, got, up, down, row_sum)) = seen else {
            assert_eq!(rank, 6, "only the rank beyond the grid has none");
            continue;
        };
        assert_eq!(me, rank, "no reordering");
        let (r, c) = (me / 3, me % 3);
        assert_eq!(coords, [r, c]);
        assert_eq!((from, to), (r * 3 + (c + 2) % 3, r * 3 + (c + 1) % 3));
        assert_eq!(got, from);
        let other = (1 - r) * 3 + c;
        if r == 0 {
            assert_eq!((up, down), (None, Some(other)));
        } else {
            assert_eq!((up, down), (Some(other), None));
        }
        assert_eq!(row_sum, r * 9 + 3);
    }
}

fn nested_splits(via: Via) {
    for layout in LAYOUTS {
        let n = layout.iter().sum::<usize>() as i32;
        let out = all_ok(joined(via, layout, |universe| {
            let world = universe.world();
            let rank = world.rank();
            let halves = world
                .split_by_color(Color::with_value(rank / 3))
                .expect("a color");
            let quarters = halves
                .split_by_color_with_key(Color::with_value(halves.rank() % 2), -halves.rank())
                .expect("a color");
            let dup = quarters.duplicate();
            let mut sum = 0i32;
            dup.all_reduce_into(&rank, &mut sum, SystemOperation::sum());
            let mut max = 0i32;
            halves.all_reduce_into(&rank, &mut max, SystemOperation::max());
            (rank, world_ranks_of(&dup, rank), sum, max)
        }));
        for (rank, members, sum, max) in out {
            let half: Vec<i32> = (0..n).filter(|r| r / 3 == rank / 3).collect();
            let pos = half.iter().position(|&r| r == rank).unwrap();
            let quarter: Vec<i32> = half
                .iter()
                .enumerate()
                .rev()
                .filter(|(i, _)| i % 2 == pos % 2)
                .map(|(_, &r)| r)
                .collect();
            assert_eq!(members, quarter, "{layout:?} rank {rank}");
            assert_eq!(sum, quarter.iter().sum::<i32>());
            assert_eq!(max, *half.last().unwrap());
        }
    }
}

fn different_creations_are_the_errors_of_one_process(via: Via) {
    let texts = all_failed(joined(via, &[2, 2], |universe| {
        let world = universe.world();
        if world.rank() == 3 {
            world.duplicate();
        } else {
            world.split_by_color(Color::with_value(0));
        }
    }));
    for text in texts {
        assert!(
            text.contains("split_by_color") && text.contains("duplicate"),
            "{text}"
        );
        assert!(text.contains("rank 0") && text.contains("rank 3"), "{text}");
    }
    let texts = all_failed(joined(via, &[1, 2, 1], |universe| {
        let world = universe.world();
        let dims = if world.rank() == 3 { [1, 4] } else { [2, 2] };
        world.create_cartesian_communicator(&dims, &[false, false], false);
    }));
    for text in texts {
        assert!(
            text.contains("rank 0 passed dims [2, 2]")
                && text.contains("rank 3 passed dims [1, 4]"),
            "{text}"
        );
    }
}

fn unequal_groups_are_the_errors_of_one_process(via: Via) {
    let texts = all_failed(joined(via, &[2, 1, 1], |universe| {
        let world = universe.world();
        let g = world.group();
        let mine = if world.rank() == 3 {
            g.include(&[3, 1])
        } else {
            g.include(&[0, 1, 2])
        };
        world.split_by_subgroup_collective(&mine);
    }));
    for text in texts {
        assert!(text.contains("only"), "{text}");
    }
}

/// `split_by_subgroup` (only the group's members call): a group inside one
/// process on a communicator that spans several, and groups spanning
/// processes, in the group's order, twice with one tag (a second meeting
/// gets its own context) and beside a disjoint group made at once.
fn group_collective_creation_across_processes(via: Via) {
    let out = all_ok(joined(via, &[2, 2], |universe| {
        let world = universe.world();
        let rank = world.rank();
        let g = world.group();
        let local = g.include(if rank < 2 { &[1, 0] } else { &[2, 3] });
        let made = world.split_by_subgroup(&local).expect("a member");
        let mut sum = 0i32;
        made.all_reduce_into(&rank, &mut sum, SystemOperation::sum());
        (made.rank(), sum)
    }));
    assert_eq!(out, [(1, 1), (0, 1), (0, 5), (1, 5)]);
    let out = all_ok(joined(via, &[2, 1, 2], |universe| {
        let world = universe.world();
        let rank = world.rank();
        let g = world.group();
        // Even ranks in reverse order (spanning all three processes), odd
        // ranks apart; only members call.
        let (mine, outside): (&[i32], &[i32]) = if rank % 2 == 0 {
            (&[4, 2, 0], &[1, 3])
        } else {
            (&[3, 1], &[0, 2, 4])
        };
        assert!(world
            .split_by_subgroup_with_tag(&g.include(outside), 3)
            .is_none());
        let first = world
            .split_by_subgroup_with_tag(&g.include(mine), 3)
            .expect("a member");
        let second = world
            .split_by_subgroup_with_tag(&g.include(mine), 3)
            .expect("a member");
        let order = world_ranks_of(&first, rank);
        let mut sum = 0i32;
        second.all_reduce_into(&rank, &mut sum, SystemOperation::sum());
        // Point-to-point on the first: a ring in the group's order.
        let n = first.size();
        let next = first.process_at_rank((first.rank() + 1) % n);
        let prev = first.process_at_rank((first.rank() + n - 1) % n);
        let mut got = -1i32;
        myriad::point_to_point::send_receive_into(&rank, &next, &mut got, &prev);
        (first.rank(), order, sum, got)
    }));
    let evens = vec![4, 2, 0];
    let odds = vec![3, 1];
    assert_eq!(out[0], (2, evens.clone(), 6, 2));
    assert_eq!(out[1], (1, odds.clone(), 4, 3));
    assert_eq!(out[2], (1, evens.clone(), 6, 4));
    assert_eq!(out[3], (0, odds.clone(), 4, 1));
    assert_eq!(out[4], (0, evens, 6, 0));
}

/// An inter-communicator whose sides are the ranks of two processes: each
/// side is local, the other side remote; point-to-point between them,
/// duplicate and merge (each process makes its side's merged communicator;
/// the collective on it spans both processes).
fn inter_communicator_between_processes(via: Via) {
    let out = all_ok(joined(via, &[2, 3], |universe| {
        let world = universe.world();
        let rank = world.rank();
        let left = rank < 2;
        let local = world.split_by_process(0);
        let inter = InterCommunicator::create(&local, 0, &world, if left { 2 } else { 0 }, 7);
        let theirs = inter.remote_size();
        inter
            .process_at_rank(inter.rank() % theirs)
            .send_with_tag(&rank, 1);
        let mine = inter.size();
        let mut got: Vec<i32> = (0..theirs)
            .filter(|r| r % mine == inter.rank())
            .map(|r| inter.process_at_rank(r).receive_with_tag::<i32>(1).0)
            .collect();
        got.sort();
        let dup = inter.duplicate();
        assert_eq!(dup.remote_size(), theirs);
        let order = if left {
            MergeOrder::High
        } else {
            MergeOrder::Low
        };
        let merged = dup.merge(order);
        let members = world_ranks_of(&merged, rank);
        let mut sum = 0i32;
        merged.all_reduce_into(&rank, &mut sum, SystemOperation::sum());
        (rank, got, members, sum)
    }));
    for (rank, got, members, sum) in out {
        let expected: Vec<i32> = match rank {
            0 => vec![2, 4],
            1 => vec![3],
            2 => vec![0],
            3 => vec![1],
            _ => vec![],
        };
        assert_eq!(got, expected, "rank {rank}");
        assert_eq!(
            members,
            [2, 3, 4, 0, 1],
            "rank {rank}: the right side first"
        );
        assert_eq!(sum, 10);
    }
}

/// An inter-communicator whose side spans processes: its creation fails
/// clearly in every process.
fn inter_communicator_with_a_side_spanning_processes_is_unsupported(via: Via) {
    let texts = all_failed(joined(via, &[2, 2], |universe| {
        let world = universe.world();
        let rank = world.rank();
        let left = rank % 2 == 0;
        let local = world.split_by_color(Color::with_value(rank % 2)).unwrap();
        InterCommunicator::create(&local, 0, &world, if left { 1 } else { 0 }, 7);
    }));
    for text in texts {
        assert!(
            text.contains("InterCommunicator::create") && text.contains("not implemented"),
            "{text}"
        );
    }
}

/// A graph (a ring over 4 of 5 ranks) and distributed graphs (each rank's
/// own edges; edges contributed by rank 0 alone, weighted) across
/// processes; a distributed graph whose ends disagree fails everywhere.
fn graph_topologies_across_processes(via: Via) {
    let out = all_ok(joined(via, &[2, 1, 2], |universe| {
        let world = universe.world();
        let rank = world.rank();
        let ring = world.create_graph_communicator(&[2, 4, 6, 8], &[1, 3, 0, 2, 1, 3, 0, 2], false);
        let ring = ring.map(|g| (g.rank(), g.neighbors(g.rank())));
        let n = world.size();
        let (next, prev) = ((rank + 1) % n, (rank + n - 1) % n);
        let own = world.create_distributed_graph_communicator_adjacent(
            &[prev],
            None,
            &[next],
            None,
            false,
        );
        let own = own.neighbors();
        // Rank 0 contributes every edge r -> r + 1 with weight r.
        let (sources, degrees, destinations, weights): (Vec<i32>, Vec<i32>, Vec<i32>, Vec<i32>) =
            if rank == 0 {
                (
                    (0..n - 1).collect(),
                    vec![1; n as usize - 1],
                    (1..n).collect(),
                    (0..n - 1).collect(),
                )
            } else {
                Default::default()
            };
        let chain = world.create_distributed_graph_communicator(
            &sources,
            &degrees,
            &destinations,
            Some(&weights),
            false,
        );
        let chain = chain.neighbors();
        (
            rank,
            ring,
            own.sources,
            own.destinations,
            chain.sources,
            chain.source_weights,
        )
    }));
    for (rank, ring, sources, destinations, chain, weights) in out {
        match ring {
            Some((r, neighbors)) => {
                assert_eq!(r, rank);
                let mut expected = vec![(rank + 1) % 4, (rank + 3) % 4];
                expected.sort();
                assert_eq!(neighbors, expected);
            }
            None => assert_eq!(rank, 4),
        }
        assert_eq!(
            (sources, destinations),
            (vec![(rank + 4) % 5], vec![(rank + 1) % 5])
        );
        if rank == 0 {
            assert!(chain.is_empty());
        } else {
            assert_eq!((chain, weights), (vec![rank - 1], Some(vec![rank - 1])));
        }
    }
    let texts = all_failed(joined(via, &[2, 2], |universe| {
        let world = universe.world();
        let rank = world.rank();
        // Rank 3 forgets that rank 2 sends to it.
        let sources: Vec<i32> = if rank == 3 {
            vec![]
        } else {
            vec![(rank + 3) % 4]
        };
        world.create_distributed_graph_communicator_adjacent(
            &sources,
            None,
            &[(rank + 1) % 4],
            None,
            false,
        );
    }));
    for text in texts {
        assert!(
            text.contains("the edge 2 -> 3 is listed by one of its ends only"),
            "{text}"
        );
    }
}
