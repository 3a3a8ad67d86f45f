//! Inter-communicators: creation, remote group and size, point-to-point
//! between the groups, merge (both orders), duplicate, and bad input.

use myriad::collective::SystemOperation;
use myriad::topology::{Color, InterCommunicator, MergeOrder, SimpleCommunicator};
use myriad::traits::*;
use myriad::Rank;

/// World ranks `0..left` against `left..n`; returns whether the caller is
/// on the left and its side of the inter-communicator (leaders: each side's
/// rank 0, named in the world).
fn halves(world: &SimpleCommunicator, left: Rank, tag: i32) -> (bool, InterCommunicator) {
    let is_left = world.rank() < left;
    let local = world
        .split_by_color(Color::with_value(is_left as i32))
        .unwrap();
    let remote_leader = if is_left { left } else { 0 };
    let inter = InterCommunicator::create(&local, 0, world, remote_leader, tag);
    (is_left, inter)
}

/// The world ranks of a group's members, in its order.
fn world_ranks(group: &impl Group, world: &SimpleCommunicator) -> Vec<Option<Rank>> {
    let ranks: Vec<Rank> = (0..group.size()).collect();
    group.translate_ranks(&ranks, &world.group())
}

const SIZES: [usize; 5] = [2, 3, 4, 7, 1000];

#[test]
fn sizes_groups_and_messages_both_ways() {
    for n in SIZES {
        let out = myriad::run(n, |universe| {
            let world = universe.world();
            let left = (world.size() / 2).max(1);
            let (is_left, inter) = halves(&world, left, 5);
            let (lsize, rsize) = (left, world.size() - left);
            let (mine, theirs) = if is_left {
                (lsize, rsize)
            } else {
                (rsize, lsize)
            };
            assert!(inter.test_inter());
            assert_eq!((inter.size(), inter.remote_size()), (mine, theirs));
            assert_eq!(inter.group().size(), mine);
            let remote = inter.remote_group();
            assert_eq!(remote.rank(), None);
            let offset = if is_left { left } else { 0 };
            let expected: Vec<Option<Rank>> = (0..theirs).map(|r| Some(offset + r)).collect();
            assert_eq!(world_ranks(&remote, &world), expected);
            assert!(!inter.this_process().is_self());

            // Each rank sends its world rank to remote rank (rank % remote
            // size) and receives from every remote rank that targets it.
            let me = inter.rank();
            inter
                .process_at_rank(me % theirs)
                .send_with_tag(&world.rank(), 3);
            let senders: Vec<Rank> = (0..theirs).filter(|r| r % mine == me).collect();
            let mut got = Vec::new();
            for _ in &senders {
                let (x, status) = inter.any_process().receive_with_tag::<Rank>(3);
                assert_eq!(
                    x,
                    offset + status.source_rank(),
                    "source is the remote rank"
                );
                got.push(status.source_rank());
            }
            got.sort_unstable();
            assert_eq!(got, senders);
            // A receive from a named remote rank.
            if me < theirs.min(mine) {
                inter.process_at_rank(me).send_with_tag(&(me * 10), 4);
                let (x, _) = inter.process_at_rank(me).receive_with_tag::<Rank>(4);
                assert_eq!(x, me * 10);
            }
            inter.size()
        })
        .unwrap();
        assert_eq!(out.len(), n);
    }
}

#[test]
fn merge_orders_the_groups_by_high_then_by_lowest_world_rank() {
    for n in [2, 3, 4, 7, 300] {
        let out = myriad::run(n, |universe| {
            let world = universe.world();
            let left = (world.size() / 3).max(1);
            let (is_left, inter) = halves(&world, left, 0);
            // Left high: the right group first.
            let order = if is_left {
                MergeOrder::High
            } else {
                MergeOrder::Low
            };
            let a = inter.merge(order);
            let mut total = 0;
            a.all_reduce_into(&world.rank(), &mut total, SystemOperation::sum());
            // Both low: the group holding world rank 0 (the left) first.
            let b = inter.merge(MergeOrder::Low);
            let c = inter.merge(MergeOrder::High);
            // Merged communicators talk among all ranks.
            let mut root = if b.rank() == 0 { 42 } else { 0 };
            b.process_at_rank(0).broadcast_into(&mut root);
            assert!(!a.test_inter() && !b.test_inter());
            assert_eq!(
                a.compare(&b),
                myriad::topology::CommunicatorRelation::Similar
            );
            (a.rank(), a.size(), total, b.rank(), c.rank(), root)
        })
        .unwrap();
        let left = (n / 3).max(1);
        let sum: Rank = (0..n as Rank).sum();
        for (w, &(a, size, total, b, c, root)) in out.iter().enumerate() {
            let right = n - left;
            let expect_a = if w < left { right + w } else { w - left };
            assert_eq!(a as usize, expect_a, "n {n} world rank {w}");
            assert_eq!((size as usize, total, root), (n, sum, 42));
            assert_eq!(b as usize, w);
            assert_eq!(c as usize, w);
        }
    }
}

#[test]
fn duplicates_and_second_creations_have_their_own_contexts() {
    for n in [2, 3, 4, 7] {
        myriad::run(n, |universe| {
            let world = universe.world();
            let (is_left, inter) = halves(&world, 1, 9);
            let again = halves(&world, 1, 9).1;
            let dup = inter.duplicate();
            let dyn_dup: SimpleCommunicator = Communicator::duplicate(&inter);
            assert!(dup.test_inter() && dyn_dup.test_inter());
            assert_eq!(dyn_dup.size(), inter.size());
            let comms: [&dyn Communicator; 4] = [&inter, &again, &dup, &dyn_dup];
            if is_left {
                // The left group is world rank 0 alone: a message to every
                // right rank in each communicator, same tag.
                for r in 0..inter.remote_size() {
                    for (i, comm) in comms.iter().enumerate() {
                        comm.process_at_rank(r).send(&(i as i32));
                    }
                }
            } else {
                // Received in reverse order: each comes from its own
                // communicator.
                for (i, comm) in comms.iter().enumerate().rev() {
                    let (x, status) = comm.process_at_rank(0).receive::<i32>();
                    assert_eq!((x, status.source_rank()), (i as i32, 0));
                }
            }
            use myriad::topology::CommunicatorRelation;
            assert_eq!(inter.compare(&dup), CommunicatorRelation::Congruent);
            assert_eq!(inter.compare(&inter), CommunicatorRelation::Identical);
            assert_eq!(inter.compare(&world), CommunicatorRelation::Unequal);
            // A merge of the duplicate still works, and names are kept.
            let merged = dup.merge(MergeOrder::Low);
            assert_eq!(merged.size(), world.size());
            assert!(inter.get_name().contains("inter-communicator of"));
        })
        .unwrap();
    }
}

#[test]
fn groups_need_not_cover_the_world_and_leaders_need_not_be_rank_0() {
    for n in [3, 4, 7, 200] {
        let out = myriad::run(n, |universe| {
            let world = universe.world();
            let w = world.rank();
            // Odd ranks against even ranks but 0, which stays out; the
            // leaders are each group's last rank.
            let color = match w {
                0 => Color::undefined(),
                w => Color::with_value(w % 2),
            };
            let local = world.split_by_color(color)?;
            let n = world.size();
            let last_even = (n - 1) / 2 * 2;
            let last_odd = (n - 2) / 2 * 2 + 1;
            let (remote_leader, local_leader) = if w % 2 == 1 {
                (last_even, local.size() - 1)
            } else {
                (last_odd, local.size() - 1)
            };
            let inter = InterCommunicator::create(&local, local_leader, &world, remote_leader, 1);
            let mut all = vec![0 as Rank; inter.remote_size() as usize];
            for r in 0..inter.remote_size() {
                inter.process_at_rank(r).send(&w);
            }
            for _ in 0..inter.remote_size() {
                let (x, status) = inter.any_process().receive::<Rank>();
                all[status.source_rank() as usize] = x;
            }
            Some(all)
        })
        .unwrap();
        assert_eq!(out[0], None);
        let evens: Vec<Rank> = (2..n as Rank).step_by(2).collect();
        let odds: Vec<Rank> = (1..n as Rank).step_by(2).collect();
        for (w, got) in out.iter().enumerate().skip(1) {
            let expected = if w % 2 == 1 { &evens } else { &odds };
            assert_eq!(got.as_ref().unwrap(), expected, "n {n} rank {w}");
        }
    }
}

/// The failure message of a job that is expected to fail.
fn failure(n: usize, f: impl Fn(SimpleCommunicator) + Sync) -> String {
    myriad::run(n, |universe| f(universe.world()))
        .expect_err("the job must fail")
        .to_string()
}

#[test]
fn bad_input_is_reported_clearly() {
    // One rank: its only possible remote group is itself.
    let text = failure(1, |world| {
        InterCommunicator::create(&world, 0, &world, 0, 0);
    });
    assert!(
        text.contains("world rank 0 is in both the local and the remote group"),
        "{text}"
    );
    // Overlapping groups of several ranks.
    let text = failure(4, |world| {
        let local = world
            .split_by_color(Color::with_value(world.rank() % 2))
            .unwrap();
        let remote_leader = if world.rank() % 2 == 0 { 0 } else { 1 };
        InterCommunicator::create(&local, 0, &world, remote_leader, 0);
    });
    assert!(
        text.contains("in both the local and the remote group"),
        "{text}"
    );
    // A local leader outside the local group.
    let text = failure(3, |world| {
        InterCommunicator::create(&world, 3, &world, 0, 0);
    });
    assert!(
        text.contains("InterCommunicator::create") && text.contains("rank 3"),
        "{text}"
    );
    // A remote leader outside the peer communicator.
    let text = failure(2, |world| {
        let local = world
            .split_by_color(Color::with_value(world.rank()))
            .unwrap();
        InterCommunicator::create(&local, 0, &world, 7, 0);
    });
    assert!(text.contains("rank 7"), "{text}");
    // A bad tag.
    let text = failure(2, |world| {
        let local = world
            .split_by_color(Color::with_value(world.rank()))
            .unwrap();
        InterCommunicator::create(&local, 0, &world, 1 - world.rank(), -2);
    });
    assert!(text.contains("tag -2"), "{text}");
    // Leaders passing different tags never meet.
    let text = failure(2, |world| {
        let local = world
            .split_by_color(Color::with_value(world.rank()))
            .unwrap();
        InterCommunicator::create(&local, 0, &world, 1 - world.rank(), world.rank());
    });
    assert!(text.contains("deadlock"), "{text}");
    // Ranks of one group passing different leaders (each names the other):
    // their broadcasts have different roots.
    let text = failure(4, |world| {
        let left = world.rank() < 2;
        let local = world
            .split_by_color(Color::with_value(left as i32))
            .unwrap();
        let leader = match world.rank() {
            0 => 1,
            1 => 0,
            _ => 0,
        };
        let remote_leader = if left { 2 } else { 0 };
        InterCommunicator::create(&local, leader, &world, remote_leader, 0);
    });
    assert!(text.contains("collective mismatch"), "{text}");
    // An inter-communicator as the local communicator.
    let text = failure(2, |world| {
        let (_, inter) = halves(&world, 1, 0);
        InterCommunicator::create(&inter, 0, &world, 0, 0);
    });
    assert!(text.contains("needs an intra-communicator"), "{text}");
    // A remote rank out of range.
    let text = failure(3, |world| {
        let (_, inter) = halves(&world, 1, 0);
        inter.process_at_rank(inter.remote_size());
    });
    assert!(text.contains("process_at_rank"), "{text}");
    // Different orders within one group of a merge.
    let text = failure(4, |world| {
        let (_, inter) = halves(&world, 2, 0);
        let order = if world.rank() == 3 {
            MergeOrder::High
        } else {
            MergeOrder::Low
        };
        inter.merge(order);
    });
    assert!(
        text.contains("InterCommunicator::merge") && text.contains("high = true"),
        "{text}"
    );
    // Collectives and splits on an inter-communicator.
    let text = failure(2, |world| {
        let (_, inter) = halves(&world, 1, 0);
        inter.barrier();
    });
    assert!(
        text.contains("not supported") && text.contains("barrier on an inter-communicator"),
        "{text}"
    );
    let text = failure(2, |world| {
        let (_, inter) = halves(&world, 1, 0);
        inter.immediate_barrier().wait();
    });
    assert!(text.contains("barrier on an inter-communicator"), "{text}");
    let text = failure(3, |world| {
        let (_, inter) = halves(&world, 1, 0);
        let mut sum = 0;
        inter.all_reduce_into(&1, &mut sum, myriad::collective::SystemOperation::sum());
    });
    assert!(
        text.contains("all_reduce on an inter-communicator"),
        "{text}"
    );
    let text = failure(2, |world| {
        let (_, inter) = halves(&world, 1, 0);
        inter.create_cartesian_communicator(&[1], &[false], false);
    });
    assert!(
        text.contains("create_cartesian_communicator on an inter"),
        "{text}"
    );
    let text = failure(2, |world| {
        let (_, inter) = halves(&world, 1, 0);
        inter.split_by_subgroup(&inter.group());
    });
    assert!(
        text.contains("split_by_subgroup_with_tag on an inter"),
        "{text}"
    );
    let text = failure(2, |world| {
        let (_, inter) = halves(&world, 1, 0);
        inter.split_by_color(Color::with_value(0));
    });
    assert!(
        text.contains("not supported") && text.contains("split_by_color on an inter"),
        "{text}"
    );
    // Sending a wrongly typed message still fails the receive clearly.
    let text = failure(2, |world| {
        let (is_left, inter) = halves(&world, 1, 0);
        if is_left {
            inter.process_at_rank(0).send(&1.5f64);
        } else {
            inter.process_at_rank(0).receive::<i32>();
        }
    });
    assert!(text.contains("f64") || text.contains("type"), "{text}");
}
