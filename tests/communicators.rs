//! Communicators and groups: duplicate, splits, subgroups, compare, names,
//! attributes, Cartesian topologies, context isolation and bad input.

use std::time::{Duration, Instant};

use myriad::attribute::{AppNum, CommAttribute, UniverseSize};
use myriad::collective::{Algorithm, Collective, SystemOperation};
use myriad::request;
use myriad::topology::{
    dims_create, Color, CommunicatorRelation, GroupRelation, SimpleCommunicator, SystemGroup,
};
use myriad::traits::*;
use myriad::Rank;

fn sum(comm: &impl Communicator, x: i64) -> i64 {
    let mut total = 0;
    comm.all_reduce_into(&x, &mut total, SystemOperation::sum());
    total
}

/// The world ranks of a communicator's members, in its rank order.
fn world_ranks(comm: &SimpleCommunicator, world: &SimpleCommunicator) -> Vec<Option<Rank>> {
    let ranks: Vec<Rank> = (0..comm.size()).collect();
    comm.group().translate_ranks(&ranks, &world.group())
}

#[test]
fn split_by_parity_with_keys_reversing_the_order() {
    let out = myriad::run(7, |universe| {
        let world = universe.world();
        let rank = world.rank();
        let half = world
            .split_by_color_with_key(Color::with_value(rank % 2), -rank)
            .expect("every rank has a color");
        half.barrier();
        let mut root_value = if half.rank() == 0 { rank } else { -1 };
        half.process_at_rank(0).broadcast_into(&mut root_value);
        (
            half.rank(),
            half.size(),
            sum(&half, rank as i64),
            root_value,
            world_ranks(&half, &world),
            half.get_name(),
        )
    })
    .unwrap();
    let evens = vec![Some(6), Some(4), Some(2), Some(0)];
    let odds = vec![Some(5), Some(3), Some(1)];
    for (rank, (new_rank, size, total, root, members, name)) in out.into_iter().enumerate() {
        let (expected, total_expected, root_expected) = if rank % 2 == 0 {
            (&evens, 12, 6)
        } else {
            (&odds, 9, 5)
        };
        assert_eq!(size as usize, expected.len(), "rank {rank}");
        assert_eq!(expected[new_rank as usize], Some(rank as Rank));
        assert_eq!(total, total_expected);
        assert_eq!(root, root_expected);
        assert_eq!(&members, expected);
        assert_eq!(name, "split of MPI_COMM_WORLD");
    }
}

#[test]
fn undefined_color_and_default_keys() {
    let out = myriad::run(6, |universe| {
        let world = universe.world();
        let color = if world.rank() < 2 {
            Color::undefined()
        } else {
            Color::with_value(world.rank() / 4)
        };
        world
            .split_by_color(color)
            .map(|c| (c.rank(), c.size(), sum(&c, world.rank() as i64)))
    })
    .unwrap();
    assert_eq!(
        out,
        vec![
            None,
            None,
            Some((0, 2, 5)),
            Some((1, 2, 5)),
            Some((0, 2, 9)),
            Some((1, 2, 9))
        ]
    );
}

#[test]
fn nested_splits_and_message_based_collectives_on_them() {
    let out = myriad::run(12, |universe| {
        let world = universe.world();
        let half = world
            .split_by_color(Color::with_value(world.rank() % 2))
            .unwrap();
        let third = half
            .split_by_color(Color::with_value(half.rank() % 3))
            .unwrap();
        // The message-based algorithms address ranks of the sub-communicator.
        for (collective, algorithm) in [
            (Collective::AllReduce, Algorithm::RecursiveDoubling),
            (Collective::Broadcast, Algorithm::Binomial),
            (Collective::Barrier, Algorithm::Dissemination),
        ] {
            third
                .set_collective_algorithm(collective, algorithm)
                .unwrap();
        }
        third.barrier();
        let mut from_root = world.rank();
        third.process_at_rank(1).broadcast_into(&mut from_root);
        (
            third.size(),
            sum(&third, world.rank() as i64),
            from_root,
            third.get_name(),
            world_ranks(&third, &world),
        )
    })
    .unwrap();
    for (rank, (size, total, from_root, name, members)) in out.into_iter().enumerate() {
        // Halves: evens 0 2 4 6 8 10, odds 1 3 ... 11; thirds of a half take
        // every third rank of it: two ranks each, 6 apart.
        let first = rank % 6;
        assert_eq!(size, 2, "rank {rank}");
        assert_eq!(members, vec![Some(first as Rank), Some(first as Rank + 6)]);
        assert_eq!(total, (2 * first + 6) as i64);
        assert_eq!(from_root, first as Rank + 6);
        assert_eq!(name, "split of split of MPI_COMM_WORLD");
    }
}

#[derive(Clone, Debug, PartialEq)]
struct Inherited(Vec<u32>);
impl CommAttribute for Inherited {
    const CLONE_ON_DUP: bool = true;
}

#[derive(Clone, Debug, PartialEq)]
struct Local(&'static str);
impl CommAttribute for Local {}

#[test]
fn duplicate_copies_only_attributes_that_ask_for_it() {
    myriad::run(4, |universe| {
        let mut world = universe.world();
        let rank = world.rank() as u32;
        assert_eq!(world.get_attr::<UniverseSize>().map(usize::from), Some(4));
        assert_eq!(world.get_attr::<AppNum>().map(isize::from), Some(0));
        assert!(world.get_attr::<Inherited>().is_none());
        world.set_attr(Inherited(vec![rank]));
        world.set_attr(Local("world only"));
        world.set_attr(Inherited(vec![rank, rank]));

        let mut dup = world.duplicate();
        assert_eq!(
            dup.get_attr::<Inherited>(),
            Some(&Inherited(vec![rank, rank]))
        );
        assert!(dup.get_attr::<Local>().is_none());
        assert!(
            dup.get_attr::<UniverseSize>().is_none(),
            "predefined attributes live on the world communicator"
        );
        assert_eq!(dup.get_name(), "dup of MPI_COMM_WORLD");
        assert_eq!(dup.compare(&world), CommunicatorRelation::Congruent);

        // The copies are independent.
        dup.set_attr(Inherited(vec![99]));
        assert_eq!(
            world.get_attr::<Inherited>(),
            Some(&Inherited(vec![rank, rank]))
        );

        // A clone of a handle starts with a copy of the handle's attributes.
        let clone = world.clone();
        assert_eq!(clone.get_attr::<Local>(), Some(&Local("world only")));
        assert_eq!(clone.compare(&world), CommunicatorRelation::Identical);

        // Through `&dyn Communicator` and on a Cartesian communicator.
        let dynamic: &dyn Communicator = &dup;
        assert_eq!(dynamic.get_attr::<Inherited>(), Some(&Inherited(vec![99])));
        let mut grid = dup
            .create_cartesian_communicator(&[2, 2], &[false, false], true)
            .unwrap();
        assert!(grid.get_attr::<Inherited>().is_none());
        grid.set_attr(Local("grid"));
        assert_eq!(grid.get_attr::<Local>(), Some(&Local("grid")));
        let dup_of_grid = grid.duplicate();
        assert!(dup_of_grid.get_attr::<Local>().is_none());

        // A name set by one rank names the communicator for everyone.
        if rank == 0 {
            dup.set_name("solver");
        }
        dup.barrier();
        assert_eq!(dup.get_name(), "solver");
        assert_eq!(dup.duplicate().get_name(), "dup of solver");
        assert_eq!(sum(&dup, 1), 4);
    })
    .unwrap();
}

#[test]
fn same_tag_on_parent_and_child_never_cross() {
    const TAG: i32 = 7;
    let out = myriad::run(4, |universe| {
        let world = universe.world();
        let dup = world.duplicate();
        let pair = world
            .split_by_color(Color::with_value(world.rank() / 2))
            .unwrap();
        let rank = world.rank();
        if rank == 0 {
            // Child first, then parent: a receive on the parent must not take
            // the child's message although it came first.
            pair.process_at_rank(1).send_with_tag(&10i32, TAG);
            dup.process_at_rank(1).send_with_tag(&20i32, TAG);
            world.process_at_rank(1).send_with_tag(&30i32, TAG);
            Vec::new()
        } else if rank == 1 {
            let (from_world, s) = world.any_process().receive_with_tag::<i32>(TAG);
            assert_eq!(s.source_rank(), 0);
            let (from_dup, _) = dup.any_process().receive_with_tag::<i32>(TAG);
            let (from_pair, _) = pair.process_at_rank(0).receive_with_tag::<i32>(TAG);
            vec![from_world, from_dup, from_pair]
        } else if rank == 3 {
            // Pair rank 0 of the second pair is world rank 2: its source rank
            // is reported in the child's numbering.
            let (x, s) = pair.any_process().receive::<i32>();
            assert_eq!(s.source_rank(), 0);
            vec![x]
        } else {
            pair.process_at_rank(1).send(&42i32);
            Vec::new()
        }
    })
    .unwrap();
    assert_eq!(out[1], vec![30, 20, 10]);
    assert_eq!(out[3], vec![42]);
}

#[test]
fn creation_is_ordered_with_outstanding_immediate_collectives() {
    myriad::run(5, |universe| {
        let world = universe.world();
        let x = world.rank() as i64;
        let mut total = 0i64;
        request::scope(|scope| {
            let pending =
                world.immediate_all_reduce_into(scope, &x, &mut total, SystemOperation::sum());
            let dup = world.duplicate();
            assert_eq!(sum(&dup, 1), 5);
            pending.wait();
        });
        assert_eq!(total, 10);
    })
    .unwrap();
}

#[test]
fn split_shared_is_one_communicator_ordered_by_key() {
    let out = myriad::run(5, |universe| {
        let world = universe.world();
        let shared = world.split_shared(10 - world.rank());
        (shared.rank(), shared.size(), shared.compare(&world))
    })
    .unwrap();
    for (rank, (new_rank, size, relation)) in out.into_iter().enumerate() {
        assert_eq!((new_rank, size), (4 - rank as Rank, 5));
        assert_eq!(relation, CommunicatorRelation::Similar);
    }
}

#[test]
fn group_algebra_and_translation() {
    myriad::run(8, |universe| {
        let world_comm = universe.world();
        let world = world_comm.group();
        let me = world_comm.rank();
        assert_eq!(world.size(), 8);
        assert_eq!(world.rank(), Some(me));

        let evens = world.include(&[6, 4, 2, 0]);
        let low = world.include(&[0, 1, 2, 3]);
        let list = |g: &dyn Group| -> Vec<Option<Rank>> {
            (0..g.size()).map(|r| g.translate_rank(r, &world)).collect()
        };
        let some = |v: &[Rank]| v.iter().map(|&r| Some(r)).collect::<Vec<_>>();
        assert_eq!(list(&evens), some(&[6, 4, 2, 0]));
        assert_eq!(list(&evens.union(&low)), some(&[6, 4, 2, 0, 1, 3]));
        assert_eq!(list(&evens.intersection(&low)), some(&[2, 0]));
        assert_eq!(list(&evens.difference(&low)), some(&[6, 4]));
        assert_eq!(list(&world.exclude(&[7, 0, 3])), some(&[1, 2, 4, 5, 6]));
        assert_eq!(
            evens.translate_ranks(&[0, 1, 2, 3], &low),
            vec![None, None, Some(2), Some(0)]
        );
        assert_eq!(
            evens.rank(),
            match me {
                6 => Some(0),
                4 => Some(1),
                2 => Some(2),
                0 => Some(3),
                _ => None,
            }
        );

        // Compare.
        assert_eq!(world.compare(&world_comm.group()), GroupRelation::Identical);
        assert_eq!(
            evens.compare(&world.include(&[0, 2, 4, 6])),
            GroupRelation::Similar
        );
        assert_eq!(evens.compare(&low), GroupRelation::Unequal);
        assert_eq!(
            world.include(&[0, 1, 2, 3, 4, 5, 6, 7]).compare(&world),
            GroupRelation::Identical
        );

        // The empty group.
        let empty = SystemGroup::empty();
        assert_eq!((empty.size(), empty.rank()), (0, None));
        assert_eq!(
            evens.union(&empty).compare(&evens),
            GroupRelation::Identical
        );
        assert_eq!(empty.union(&evens).rank(), evens.rank());
        assert_eq!(evens.intersection(&empty).size(), 0);
        assert_eq!(
            world.difference(&world).compare(&empty),
            GroupRelation::Identical
        );

        // Groups of different communicators meet through world ranks.
        let half = world_comm
            .split_by_color_with_key(Color::with_value(me % 2), -me)
            .unwrap();
        let hg = half.group();
        assert_eq!(hg.rank(), Some(half.rank()));
        assert_eq!(hg.translate_rank(half.rank(), &world), Some(me));
        assert_eq!(world.translate_rank(me, &hg), Some(half.rank()));
        assert_eq!(world.translate_rank((me + 1) % 8, &hg), None);
    })
    .unwrap();
}

#[test]
fn compare_communicators() {
    myriad::run(6, |universe| {
        let world = universe.world();
        let rank = world.rank();
        assert_eq!(world.compare(&world), CommunicatorRelation::Identical);
        assert_eq!(
            world.compare(&universe.world()),
            CommunicatorRelation::Identical
        );
        let dup = world.duplicate();
        assert_eq!(world.compare(&dup), CommunicatorRelation::Congruent);
        let reversed = world
            .split_by_color_with_key(Color::with_value(0), -rank)
            .unwrap();
        assert_eq!(world.compare(&reversed), CommunicatorRelation::Similar);
        let same_order = world.split_by_color(Color::with_value(0)).unwrap();
        assert_eq!(world.compare(&same_order), CommunicatorRelation::Congruent);
        let half = world.split_by_color(Color::with_value(rank / 3)).unwrap();
        assert_eq!(world.compare(&half), CommunicatorRelation::Unequal);
        let dynamic: &dyn Communicator = &half;
        assert_eq!(dynamic.compare(&world), CommunicatorRelation::Unequal);
        assert!(!world.test_inter());
    })
    .unwrap();
}

#[test]
fn subgroup_collective_with_non_members() {
    let out = myriad::run(8, |universe| {
        let world = universe.world();
        let rank = world.rank();
        // Everyone passes the same group: 5, 1, 3 in that order.
        let picked = world.group().include(&[5, 1, 3]);
        let a = world
            .split_by_subgroup_collective(&picked)
            .map(|c| (c.rank(), c.size(), sum(&c, rank as i64)));
        // Disjoint groups: the evens in reverse order, the odds; rank 7
        // passes the empty group.
        let g = world.group();
        let b = if rank == 7 {
            world.split_by_subgroup_collective(&SystemGroup::empty())
        } else if rank % 2 == 0 {
            world.split_by_subgroup_collective(&g.include(&[6, 4, 2, 0]))
        } else {
            world.split_by_subgroup_collective(&g.include(&[1, 3, 5]))
        }
        .map(|c| (c.rank(), c.size(), c.get_name()));
        (a, b)
    })
    .unwrap();
    let name = || "subgroup of MPI_COMM_WORLD".to_string();
    assert_eq!(out[5], (Some((0, 3, 9)), Some((2, 3, name()))));
    assert_eq!(out[1], (Some((1, 3, 9)), Some((0, 3, name()))));
    assert_eq!(out[3].0, Some((2, 3, 9)));
    assert_eq!(out[0], (None, Some((3, 4, name()))));
    assert_eq!(out[6].1, Some((0, 4, name())));
    assert_eq!(out[7], (None, None));
}

#[test]
fn subgroup_called_by_members_only() {
    let out = myriad::run(6, |universe| {
        let world = universe.world();
        let rank = world.rank();
        let g = world.group();
        let mut seen = Vec::new();
        // Only ranks 1, 4 and 2 call; the others do not take part at all.
        if [1, 4, 2].contains(&rank) {
            for _ in 0..3 {
                // The same group and tag, several times in a row.
                let c = world.split_by_subgroup(&g.include(&[4, 2, 1])).unwrap();
                seen.push((c.rank(), c.size(), sum(&c, rank as i64)));
            }
        } else {
            // A non-member that calls gets None at once.
            assert!(world.split_by_subgroup(&g.include(&[4, 2, 1])).is_none());
        }
        // Overlapping groups with different tags, entered in different
        // orders by the rank they share (3).
        let left = g.include(&[0, 3]);
        let right = g.include(&[3, 5]);
        let (mut l, mut r) = (None, None);
        match rank {
            0 => l = world.split_by_subgroup_with_tag(&left, 1),
            5 => r = world.split_by_subgroup_with_tag(&right, 2),
            3 => {
                r = world.split_by_subgroup_with_tag(&right, 2);
                l = world.split_by_subgroup_with_tag(&left, 1);
            }
            _ => {}
        }
        let l = l.map(|c| sum(&c, rank as i64));
        let r = r.map(|c| (c.rank(), sum(&c, rank as i64)));
        (seen, l, r)
    })
    .unwrap();
    assert_eq!(out[4].0, vec![(0, 3, 7); 3]);
    assert_eq!(out[2].0, vec![(1, 3, 7); 3]);
    assert_eq!(out[1].0, vec![(2, 3, 7); 3]);
    assert!(out[0].0.is_empty());
    assert_eq!((out[0].1, out[3].1), (Some(3), Some(3)));
    assert_eq!((out[3].2, out[5].2), (Some((0, 8)), Some((1, 8))));
}

#[test]
fn cartesian_grid_coordinates_and_shifts() {
    let out = myriad::run(14, |universe| {
        let world = universe.world();
        assert_eq!(
            world.cartesian_map(&[3, 4], &[false, true]),
            (world.rank() < 12).then_some(world.rank())
        );
        // 3 rows × 4 columns, periodic along the columns; ranks 12 and 13
        // are outside the grid.
        let grid = world.create_cartesian_communicator(&[3, 4], &[false, true], true)?;
        assert_eq!(grid.num_dimensions(), 2);
        assert_eq!(grid.size(), 12);
        let layout = grid.get_layout();
        assert_eq!(layout.dims, vec![3, 4]);
        assert_eq!(layout.periods, vec![false, true]);
        let me = grid.rank();
        assert_eq!(grid.coordinates_to_rank(&layout.coords), me);
        let (mut d, mut p, mut c) = ([0; 2], [false; 2], [0; 2]);
        grid.get_layout_into(&mut d, &mut p, &mut c);
        assert_eq!(
            (d.to_vec(), c.to_vec()),
            (layout.dims.clone(), layout.coords.clone())
        );
        // Sub-grids: rows (keep dimension 1) and columns (keep dimension 0).
        let row = grid.subgroup(&[false, true]);
        let column = grid.subgroup(&[true, false]);
        assert_eq!(row.get_layout().dims, vec![4]);
        assert_eq!(row.rank(), layout.coords[1]);
        assert_eq!(column.rank(), layout.coords[0]);
        let row_sum = sum(&row, me as i64);
        let column_sum = sum(&column, me as i64);
        // Exchange with the neighbours to the left and right along the ring.
        let (left, right) = grid.shift(1, 1);
        let (left, right) = (left.unwrap(), right.unwrap());
        let mut from_left = -1;
        request::scope(|scope| {
            let r = grid
                .process_at_rank(left)
                .immediate_receive_into(scope, &mut from_left);
            grid.process_at_rank(right).send(&me);
            r.wait();
        });
        Some((
            layout.coords,
            grid.shift(0, 1),
            grid.shift(1, 1),
            grid.shift(0, -2),
            grid.shift(1, 5),
            row_sum,
            column_sum,
            from_left,
        ))
    })
    .unwrap();
    assert!(out[12].is_none() && out[13].is_none());
    // Rank 5 is at row 1, column 1.
    let five = out[5].clone().unwrap();
    assert_eq!(five.0, vec![1, 1]);
    assert_eq!(five.1, (Some(1), Some(9)));
    assert_eq!(five.2, (Some(4), Some(6)));
    assert_eq!(five.3, (None, None));
    assert_eq!(five.4, (Some(4), Some(6)));
    assert_eq!((five.5, five.6), (4 + 5 + 6 + 7, 1 + 5 + 9));
    assert_eq!(five.7, 4);
    // Rank 8: row 2 (the last, not periodic), column 0 (periodic).
    let eight = out[8].clone().unwrap();
    assert_eq!(eight.0, vec![2, 0]);
    assert_eq!(eight.1, (Some(4), None));
    assert_eq!(eight.2, (Some(11), Some(9)));
    assert_eq!(eight.3, (None, Some(0)));
    assert_eq!(eight.7, 11);
}

#[test]
fn cartesian_periodic_wrap_and_dims_create() {
    myriad::run(6, |universe| {
        let world = universe.world();
        let grid = world
            .create_cartesian_communicator(&[2, 3], &[true, true], false)
            .unwrap();
        assert_eq!(
            grid.coordinates_to_rank(&[-1, 4]),
            grid.coordinates_to_rank(&[1, 1])
        );
        assert_eq!(grid.rank_to_coordinates(4), vec![1, 1]);
        assert_eq!(grid.shift(0, 1), grid.shift(0, -1)); // two rows
        let point = grid.subgroup(&[false, false]);
        assert_eq!((point.size(), point.num_dimensions()), (1, 0));
        let whole = grid.subgroup(&[true, true]);
        assert_eq!(whole.compare(&grid), CommunicatorRelation::Congruent);
    })
    .unwrap();
    let mut dims = [0; 3];
    dims_create(60, &mut dims);
    assert_eq!(dims, [5, 4, 3]);
    let mut dims = [2, 0];
    dims_create(14, &mut dims);
    assert_eq!(dims, [2, 7]);
    let mut dims = [0, 0];
    dims_create(7, &mut dims);
    assert_eq!(dims, [7, 1]);
}

#[test]
fn ten_thousand_ranks_split_quickly() {
    let n = 10_000;
    let start = Instant::now();
    let out = myriad::run(n, |universe| {
        let world = universe.world();
        let rank = world.rank();
        let part = world
            .split_by_color_with_key(Color::with_value(rank % 4), -rank)
            .unwrap();
        (part.rank(), part.size(), sum(&part, 1))
    })
    .unwrap();
    let elapsed = start.elapsed();
    for (rank, &(new_rank, size, total)) in out.iter().enumerate() {
        assert_eq!(size, 2500);
        assert_eq!(new_rank, 2499 - (rank / 4) as Rank);
        assert_eq!(total, 2500);
    }
    assert!(
        elapsed < Duration::from_secs(20),
        "10,000-rank split took {elapsed:?}"
    );
}

#[test]
fn handles_and_groups_can_move_between_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<SimpleCommunicator>();
    send_sync::<myriad::topology::CartesianCommunicator>();
    send_sync::<myriad::topology::UserGroup>();
    send_sync::<SystemGroup>();
}

/// The failure message of a job that is expected to fail.
fn failure(n: usize, f: impl Fn(SimpleCommunicator) + Sync) -> String {
    myriad::run(n, |universe| f(universe.world()))
        .expect_err("the job must fail")
        .to_string()
}

#[test]
fn bad_input_is_reported_clearly() {
    let text = failure(4, |world| {
        world.group().include(&[0, 9]);
    });
    assert!(
        text.contains("Group::include: rank 9 is not in the group (valid ranks are 0..4)"),
        "{text}"
    );
    let text = failure(4, |world| {
        world.group().exclude(&[1, 1]);
    });
    assert!(
        text.contains("Group::exclude: rank 1 is listed more than once"),
        "{text}"
    );
    let text = failure(2, |world| {
        world.group().translate_rank(-1, &world.group());
    });
    assert!(text.contains("rank -1 is not in the group"), "{text}");

    let text = failure(4, |world| {
        world.create_cartesian_communicator(&[3, 2], &[false, false], false);
    });
    assert!(
        text.contains("a grid of dims [3, 2] needs 6 ranks but the communicator has 4"),
        "{text}"
    );
    let text = failure(4, |world| {
        world.create_cartesian_communicator(&[2, 2], &[false], false);
    });
    assert!(
        text.contains("dims has 2 entries but periods has 1"),
        "{text}"
    );
    let text = failure(4, |world| {
        world.create_cartesian_communicator(&[4, 0], &[false, false], false);
    });
    assert!(text.contains("dims[1] = 0"), "{text}");
    let text = failure(4, |world| {
        let dims = if world.rank() == 3 { [1, 4] } else { [2, 2] };
        world.create_cartesian_communicator(&dims, &[false, false], false);
    });
    assert!(
        text.contains("rank 0 passed dims [2, 2]") && text.contains("rank 3 passed dims [1, 4]"),
        "{text}"
    );
    let text = failure(4, |world| {
        let grid = world
            .create_cartesian_communicator(&[2, 2], &[false, true], false)
            .unwrap();
        grid.coordinates_to_rank(&[2, 0]);
    });
    assert!(
        text.contains("coordinate 2 of [2, 0] is outside dimension 0"),
        "{text}"
    );

    let text = failure(1, |_| {
        Color::with_value(-3);
    });
    assert!(text.contains("a color must be non-negative"), "{text}");

    // Ranks calling different creations, or a creation and a collective.
    let text = failure(3, |world| {
        if world.rank() == 2 {
            world.duplicate();
        } else {
            world.split_by_color(Color::with_value(0));
        }
    });
    assert!(
        text.contains("split_by_color") && text.contains("duplicate"),
        "{text}"
    );
    assert!(
        text.matches("tests/communicators.rs").count() >= 2,
        "{text}"
    );
    let text = failure(3, |world| {
        if world.rank() == 1 {
            world.barrier();
        } else {
            world.duplicate();
        }
    });
    assert!(
        text.contains("collective mismatch") && text.contains("communicator_create"),
        "{text}"
    );

    // Overlapping groups in split_by_subgroup_collective; a group with a
    // rank outside the communicator.
    let text = failure(4, |world| {
        let g = world.group();
        let mine = if world.rank() == 3 {
            g.include(&[3, 1])
        } else {
            g.include(&[0, 1, 2])
        };
        world.split_by_subgroup_collective(&mine);
    });
    assert!(text.contains("only"), "{text}");
    let text = failure(4, |world| {
        let half = world
            .split_by_color(Color::with_value(world.rank() / 2))
            .unwrap();
        let all = world.group();
        half.split_by_subgroup(&all);
    });
    assert!(
        text.contains("is not in communicator split of MPI_COMM_WORLD"),
        "{text}"
    );
    let text = failure(2, |world| {
        world.split_by_subgroup_with_tag(&world.group(), -5);
    });
    assert!(text.contains("tag -5"), "{text}");
}

#[test]
fn a_member_that_never_calls_split_by_subgroup_is_a_deadlock() {
    let text = failure(3, |world| {
        if world.rank() != 2 {
            world.split_by_subgroup(&world.group());
        }
    });
    assert!(text.contains("deadlock"), "{text}");
    assert!(text.contains("communicator_create"), "{text}");
}

/// `set_name` on the world renames it for every rank, and communicators made
/// from it afterwards are named after the new name; dup'd and split
/// communicators take a later `set_name` as well.
#[test]
fn set_name_renames_world_dup_and_split() {
    for ranks in [1, 2, 3, 4, 7] {
        myriad::run(ranks, |universe| {
            let world = universe.world();
            let rank = world.rank();
            assert_eq!(world.get_name(), "MPI_COMM_WORLD");
            world.barrier();
            if rank == 0 {
                world.set_name("everyone");
            }
            world.barrier();
            assert_eq!(world.get_name(), "everyone");
            // The name belongs to the world, not to this handle.
            assert_eq!(universe.world().get_name(), "everyone");
            assert_eq!(SimpleCommunicator::world().get_name(), "everyone");
            world.barrier();
            // Every rank setting the same name is fine too.
            world.set_name("all of us");
            world.barrier();
            assert_eq!(world.get_name(), "all of us");

            let dup = world.duplicate();
            assert_eq!(dup.get_name(), "dup of all of us");
            dup.barrier();
            dup.set_name("copy");
            dup.barrier();
            assert_eq!(dup.get_name(), "copy");
            assert_eq!(world.get_name(), "all of us");

            let half = world
                .split_by_color(Color::with_value(rank % 2))
                .expect("every rank has a colour");
            assert_eq!(half.get_name(), "split of all of us");
            half.barrier();
            half.set_name(&format!("half {}", rank % 2));
            half.barrier();
            assert_eq!(half.get_name(), format!("half {}", rank % 2));
            world.barrier();
            assert_eq!(world.get_name(), "all of us");
            assert_eq!(dup.get_name(), "copy");
            let grid = world
                .create_cartesian_communicator(&[world.size()], &[false], false)
                .unwrap();
            grid.barrier();
            grid.set_name("line");
            assert_eq!(grid.get_name(), "line");
            drop(grid);
            drop(half);
            drop(dup);
            world.barrier();
            assert_eq!(world.get_name(), "all of us");
        })
        .unwrap();
    }
}
