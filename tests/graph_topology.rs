//! Graph and distributed-graph topologies, topology kinds, `self_comm`, and
//! bad input.

use myriad::collective::SystemOperation;
use myriad::topology::{
    CommunicatorTopology, DistributedGraphNeighbors, GraphLayout, IntoTopology, SimpleCommunicator,
};
use myriad::traits::*;
use myriad::Rank;

const SIZES: [usize; 6] = [1, 2, 3, 4, 7, 300];

/// A ring graph of `n` nodes: node i's neighbours are i - 1 and i + 1.
fn ring(n: Rank) -> (Vec<i32>, Vec<i32>) {
    let index: Vec<i32> = (1..=n).map(|i| 2 * i).collect();
    let edges: Vec<i32> = (0..n)
        .flat_map(|i| [(i + n - 1) % n, (i + 1) % n])
        .collect();
    (index, edges)
}

#[test]
fn graph_ring_neighbours_messages_and_kind() {
    for n in SIZES {
        let out = myriad::run(n, |universe| {
            let world = universe.world();
            let (size, me) = (world.size(), world.rank());
            let (index, edges) = ring(size);
            assert_eq!(world.graph_map(&index, &edges), Some(me));
            let graph = world
                .create_graph_communicator(&index, &edges, true)
                .expect("every rank is a node");
            assert_eq!(graph.graph_dims(), (size, 2 * size));
            assert_eq!(graph.get_layout(), GraphLayout { index, edges });
            let nb = graph.neighbors(me);
            assert_eq!(nb, [(me + size - 1) % size, (me + 1) % size]);
            assert_eq!(graph.neighbors_count(me), 2);
            // Messages to both neighbours, received from both.
            for &r in &nb {
                graph.process_at_rank(r).send(&me);
            }
            let mut got: Vec<Rank> = nb
                .iter()
                .map(|&r| graph.process_at_rank(r).receive::<Rank>().0)
                .collect();
            got.sort_unstable();
            let mut expected = nb.clone();
            expected.sort_unstable();
            assert_eq!(got, expected);
            let mut total = 0;
            graph.all_reduce_into(&1, &mut total, SystemOperation::sum());
            // The kind survives a duplicate and a plain handle.
            let dup = graph.duplicate();
            assert_eq!(dup.topology(), CommunicatorTopology::Graph);
            let IntoTopology::Graph(again) = dup.into_topology() else {
                panic!("a duplicate of a graph communicator is a graph communicator");
            };
            assert_eq!(again.neighbors(me), nb);
            let plain: SimpleCommunicator = graph.into();
            assert_eq!(plain.topology(), CommunicatorTopology::Graph);
            assert_eq!(world.topology(), CommunicatorTopology::Undefined);
            total
        })
        .unwrap();
        assert!(out.iter().all(|&t| t == n as i32));
    }
}

#[test]
fn graph_smaller_than_the_communicator_leaves_ranks_out() {
    for n in [2, 3, 4, 7] {
        let out = myriad::run(n, |universe| {
            let world = universe.world();
            // A star on the first n - 1 ranks: node 0 linked to every other.
            let nodes = world.size() - 1;
            let index: Vec<i32> = (0..nodes)
                .map(|i| if i == 0 { nodes - 1 } else { nodes - 1 + i })
                .collect();
            let mut edges: Vec<i32> = (1..nodes).collect();
            edges.extend(std::iter::repeat_n(0, nodes as usize - 1));
            assert_eq!(
                world.graph_map(&index, &edges),
                (world.rank() < nodes).then_some(world.rank())
            );
            world
                .create_graph_communicator(&index, &edges, false)
                .map(|g| (g.size(), g.neighbors_count(g.rank())))
        })
        .unwrap();
        let nodes = n as i32 - 1;
        assert_eq!(out[n - 1], None);
        assert_eq!(out[0], Some((nodes, nodes - 1)));
        for o in &out[1..n - 1] {
            assert_eq!(*o, Some((nodes, 1)));
        }
    }
}

#[test]
fn distributed_graphs_adjacent_and_contributed() {
    for n in SIZES {
        let out = myriad::run(n, |universe| {
            let world = universe.world();
            let (size, me) = (world.size(), world.rank());
            let (left, right) = ((me + size - 1) % size, (me + 1) % size);
            // A weighted directed ring: weight = the sender's rank.
            let ring = world.create_distributed_graph_communicator_adjacent(
                &[left],
                Some(&[left]),
                &[right],
                Some(&[me]),
                false,
            );
            assert_eq!(ring.neighbors_count(), (1, 1, true));
            assert_eq!(
                ring.neighbors(),
                DistributedGraphNeighbors {
                    sources: vec![left],
                    source_weights: Some(vec![left]),
                    destinations: vec![right],
                    destination_weights: Some(vec![me]),
                }
            );
            ring.process_at_rank(right).send(&me);
            let (x, _) = ring.process_at_rank(left).receive::<Rank>();
            assert_eq!(x, left);
            assert_eq!(
                ring.duplicate().topology(),
                CommunicatorTopology::DistributedGraph
            );
            let IntoTopology::DistributedGraph(dup) = ring.duplicate().into_topology() else {
                panic!("the duplicate keeps the topology");
            };
            assert_eq!(dup.neighbors().destinations, vec![right]);

            // The same ring contributed by rank 0 alone, unweighted, and a
            // star from rank 0 that rank 1 contributes.
            let (sources, degrees, destinations): (Vec<Rank>, Vec<i32>, Vec<Rank>) = if me == 0 {
                (
                    (0..size).collect(),
                    vec![1; size as usize],
                    (0..size).map(|i| (i + 1) % size).collect(),
                )
            } else {
                (Vec::new(), Vec::new(), Vec::new())
            };
            let ring2 = world.create_distributed_graph_communicator(
                &sources,
                &degrees,
                &destinations,
                None,
                true,
            );
            assert_eq!(ring2.neighbors_count(), (1, 1, false));
            let nb = ring2.neighbors();
            assert_eq!((nb.sources, nb.destinations), (vec![left], vec![right]));
            let star_from = if size > 1 { 1 } else { 0 };
            let (s, d, w): (Vec<Rank>, Vec<i32>, Vec<Rank>) = if me == star_from {
                (vec![0], vec![size], (0..size).collect())
            } else {
                (Vec::new(), Vec::new(), Vec::new())
            };
            let weights: Vec<i32> = w.iter().map(|x| 10 + x).collect();
            let star =
                world.create_distributed_graph_communicator(&s, &d, &w, Some(&weights), false);
            star.neighbors()
        })
        .unwrap();
        let size = n as Rank;
        for (r, nb) in out.iter().enumerate() {
            let r = r as Rank;
            let (dests, dweights) = if r == 0 {
                ((0..size).collect(), (0..size).map(|x| 10 + x).collect())
            } else {
                (Vec::new(), Vec::new())
            };
            assert_eq!(nb.sources, vec![0], "n {n} rank {r}");
            assert_eq!(nb.source_weights, Some(vec![10 + r]));
            assert_eq!(nb.destinations, dests);
            assert_eq!(nb.destination_weights, Some(dweights));
        }
    }
}

#[test]
fn cartesian_kind_and_self_comm() {
    for n in [1, 2, 3, 4, 7] {
        myriad::run(n, |universe| {
            let world = universe.world();
            let cart = world
                .create_cartesian_communicator(&[world.size()], &[true], false)
                .unwrap();
            assert_eq!(cart.duplicate().topology(), CommunicatorTopology::Cartesian);
            let plain: SimpleCommunicator = cart.into();
            let IntoTopology::Cartesian(cart) = plain.into_topology() else {
                panic!("a Cartesian communicator");
            };
            assert_eq!(cart.shift(0, 1).1, Some((world.rank() + 1) % world.size()));
            let sub = cart.subgroup(&[true]);
            assert_eq!(sub.duplicate().topology(), CommunicatorTopology::Cartesian);
            let split = world
                .split_by_color(myriad::topology::Color::with_value(0))
                .unwrap();
            assert!(matches!(split.into_topology(), IntoTopology::Undefined(_)));
            assert!(world.parent().is_none());

            // MPI_COMM_SELF: one rank, one communicator however often asked.
            let me = SimpleCommunicator::self_comm();
            let again = SimpleCommunicator::self_comm();
            assert_eq!((me.size(), me.rank()), (1, 0));
            assert_eq!(me.get_name(), "MPI_COMM_SELF");
            me.this_process().send(&world.rank());
            let (x, _) = again.process_at_rank(0).receive::<Rank>();
            assert_eq!(x, world.rank());
            let mut sum = 0;
            me.all_reduce_into(&5, &mut sum, SystemOperation::sum());
            assert_eq!(sum, 5);
            // Its traffic never meets the world's.
            world.this_process().send(&1i32);
            me.this_process().send(&2i32);
            assert_eq!(me.any_process().receive::<i32>().0, 2);
            assert_eq!(world.any_process().receive::<i32>().0, 1);
        })
        .unwrap();
    }
}

fn failure(n: usize, f: impl Fn(SimpleCommunicator) + Sync) -> String {
    myriad::run(n, |universe| f(universe.world()))
        .expect_err("the job must fail")
        .to_string()
}

#[test]
fn bad_graphs_are_reported_clearly() {
    let cases: &[(&[i32], &[i32], &str)] = &[
        (&[2, 1, 3], &[1, 2, 0], "index[1] = 1 is smaller"),
        (
            &[1, 2, 3],
            &[1, 2],
            "the last index entry says 3 edges, but edges has 2",
        ),
        (
            &[1, 2, 3],
            &[1, 2, 5],
            "rank 5 is not a node of the graph (valid: 0..3)",
        ),
        (
            &[0, 0, 0, 0, 0],
            &[],
            "5 nodes but the communicator only 4 ranks",
        ),
    ];
    for &(index, edges, needle) in cases {
        let text = failure(4, |world| {
            world.create_graph_communicator(index, edges, false);
        });
        assert!(
            text.contains("create_graph_communicator") && text.contains(needle),
            "{text}"
        );
    }
    let text = failure(3, |world| {
        let edges = if world.rank() == 2 { [1, 0] } else { [0, 1] };
        world.create_graph_communicator(&[1, 2], &edges, false);
    });
    assert!(
        text.contains("rank 0 passed a graph") && text.contains("rank 2 passed"),
        "{text}"
    );
}

#[test]
fn bad_distributed_graphs_are_reported_clearly() {
    let text = failure(3, |world| {
        world.create_distributed_graph_communicator_adjacent(&[3], None, &[], None, false);
    });
    assert!(text.contains("rank 3 is not a node"), "{text}");
    let text = failure(3, |world| {
        world.create_distributed_graph_communicator_adjacent(&[0], Some(&[]), &[], None, false);
    });
    assert!(text.contains("1 sources but 0 weights"), "{text}");
    let text = failure(2, |world| {
        world.create_distributed_graph_communicator_adjacent(
            &[0],
            Some(&[-4]),
            &[0],
            Some(&[1]),
            false,
        );
    });
    assert!(text.contains("weight -4 is negative"), "{text}");
    // Rank 0 sends to rank 1, which does not list it as a source.
    let text = failure(2, |world| {
        let dests: &[Rank] = if world.rank() == 0 { &[1] } else { &[] };
        world.create_distributed_graph_communicator_adjacent(&[], None, dests, None, false);
    });
    assert!(
        text.contains("the edge 0 -> 1 is listed by one of its ends only"),
        "{text}"
    );
    let text = failure(2, |world| {
        world.create_distributed_graph_communicator(&[0], &[2], &[1], None, false);
    });
    assert!(
        text.contains("degrees add up to 2 but 1 destinations"),
        "{text}"
    );
    let text = failure(2, |world| {
        world.create_distributed_graph_communicator(&[0, 1], &[1], &[1], None, false);
    });
    assert!(text.contains("2 sources but 1 weights"), "{text}");
    let text = failure(2, |world| {
        let weights: Option<&[i32]> = if world.rank() == 0 { Some(&[]) } else { None };
        world.create_distributed_graph_communicator(&[], &[], &[], weights, false);
    });
    assert!(
        text.contains("weighted edges") && text.contains("unweighted edges"),
        "{text}"
    );
    // Some ranks adjacent, some contributing.
    let text = failure(2, |world| {
        if world.rank() == 0 {
            world.create_distributed_graph_communicator_adjacent(&[], None, &[], None, false);
        } else {
            world.create_distributed_graph_communicator(&[], &[], &[], None, false);
        }
    });
    assert!(text.contains("its adjacent edges"), "{text}");
    // A graph query of a rank that is not a node.
    let text = failure(2, |world| {
        let g = world
            .create_graph_communicator(&[0, 0], &[], false)
            .unwrap();
        g.neighbors(2);
    });
    assert!(
        text.contains("neighbors") && text.contains("rank 2"),
        "{text}"
    );
}
