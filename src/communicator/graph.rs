//! Graph and distributed-graph topologies (MPI 3.1 §7.5.3, §7.5.4), and
//! the topology kind of a communicator (rsmpi's `Topology`, here
//! [`CommunicatorTopology`], and `IntoTopology`).
//!
//! ## Design
//!
//! Creating a topology communicator is a collective creation on the parent
//! (`coll/create.rs`), like a Cartesian one: a graph is a split that keeps
//! the first `nnodes` ranks in order, whose last arriving rank checks that
//! every rank passed the same graph; a distributed graph keeps every rank,
//! and the last arriving rank checks that every edge is listed at both its
//! ends (`_adjacent`) or sorts the contributed edges out per rank
//! (`MPI_Dist_graph_create`). The topology is kept in the new
//! communicator's shared state (`comm/topo.rs`), so every handle — also a
//! plain `SimpleCommunicator`, or a `duplicate` — knows it, and queries
//! are local. myriad keeps the ranks in their order whatever `reorder` says
//! (every rank is equally close). rsmpi 0.8 has only empty placeholders for
//! these types, and no neighbourhood collectives; myriad has none either.

use std::panic::Location;
use std::sync::Arc;

use super::cartesian::CartesianCommunicator;
use super::{AsCore, Attributes, Communicator, SimpleCommunicator};
use crate::coll::create::{self, Agree, Ask, Creation};
use crate::coll::CommCore;
use crate::comm::topo::{Adjacency, Graph, Topo};
use crate::error::{raise, ArgError, Error, GraphProblem, OrRaise};
use crate::{Count, Rank};

/// The kind of topology a communicator has (rsmpi's `Topology`, renamed:
/// `myriad::topology::Topology` is the hardware).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CommunicatorTopology {
    /// A graph ([`GraphCommunicator`]).
    Graph,
    /// A Cartesian grid ([`CartesianCommunicator`]).
    Cartesian,
    /// A distributed graph ([`DistributedGraphCommunicator`]).
    DistributedGraph,
    /// None.
    Undefined,
}

/// A communicator as the typed handle of its topology
/// ([`SimpleCommunicator::into_topology`]).
#[derive(Debug)]
pub enum IntoTopology {
    /// A graph.
    Graph(GraphCommunicator),
    /// A Cartesian grid.
    Cartesian(CartesianCommunicator),
    /// A distributed graph.
    DistributedGraph(DistributedGraphCommunicator),
    /// No topology.
    Undefined(SimpleCommunicator),
}

impl SimpleCommunicator {
    /// The topology of this communicator (`MPI_Topo_test`).
    pub fn topology(&self) -> CommunicatorTopology {
        match self.core.shared().topology.get() {
            Some(Topo::Cartesian(_)) => CommunicatorTopology::Cartesian,
            Some(Topo::Graph(_)) => CommunicatorTopology::Graph,
            Some(Topo::DistGraph(_)) => CommunicatorTopology::DistributedGraph,
            None => CommunicatorTopology::Undefined,
        }
    }

    /// This handle as the typed handle of its topology.
    pub fn into_topology(self) -> IntoTopology {
        match self.core.shared().topology.get().cloned() {
            Some(Topo::Cartesian(grid)) => {
                IntoTopology::Cartesian(CartesianCommunicator::from_parts(self, grid))
            }
            Some(Topo::Graph(graph)) => {
                IntoTopology::Graph(GraphCommunicator { comm: self, graph })
            }
            Some(Topo::DistGraph(_)) => {
                IntoTopology::DistributedGraph(DistributedGraphCommunicator { comm: self })
            }
            None => IntoTopology::Undefined(self),
        }
    }
}

/// Creates a graph communicator (collective over `core`).
pub(crate) fn create_graph(
    core: &CommCore,
    index: &[Count],
    edges: &[Count],
    site: &'static Location<'static>,
) -> Result<Option<GraphCommunicator>, Error> {
    let graph = Arc::new(Graph::new(index, edges, core.size())?);
    let color = (core.rank() < graph.nodes()).then_some(0);
    let ask = Ask::new(Creation::Graph, color, core.rank()).agreeing(Agree::Graph(graph.clone()));
    Ok(
        create::create(core, ask, site)?.map(|new| GraphCommunicator {
            comm: SimpleCommunicator::from_core(new),
            graph,
        }),
    )
}

/// Creates a distributed-graph communicator (collective over `core`) from
/// what this rank contributes.
pub(crate) fn create_dist_graph(
    core: &CommCore,
    agree: Agree,
    site: &'static Location<'static>,
) -> Result<DistributedGraphCommunicator, Error> {
    let ask = Ask::new(Creation::DistGraph, Some(0), core.rank()).agreeing(agree);
    let new = create::create(core, ask, site)?.expect("every rank joins a distributed graph");
    Ok(DistributedGraphCommunicator {
        comm: SimpleCommunicator::from_core(new),
    })
}

/// The edges `MPI_Dist_graph_create` arguments describe, checked.
pub(crate) fn contributed_edges(
    size: Rank,
    sources: &[Rank],
    degrees: &[Count],
    destinations: &[Rank],
    weights: Option<&[Count]>,
) -> Result<Agree, Error> {
    const OP: &str = "create_distributed_graph_communicator";
    let bad = |problem| Err(Error::Arg(ArgError::Graph { op: OP, problem }));
    if sources.len() != degrees.len() {
        return bad(GraphProblem::WeightCount {
            what: "sources",
            ranks: sources.len(),
            weights: degrees.len(),
        });
    }
    if let Some(&d) = degrees.iter().find(|&&d| d < 0) {
        return bad(GraphProblem::NegativeWeight { weight: d });
    }
    let total: usize = degrees.iter().map(|&d| d as usize).sum();
    if total != destinations.len() {
        return bad(GraphProblem::DegreeCount {
            degrees: total,
            destinations: destinations.len(),
        });
    }
    // Checks ranks and weights with the adjacency checks.
    Adjacency::new(OP, size, sources, None, destinations, weights)?;
    let mut edges = Vec::with_capacity(total);
    let mut next = 0;
    for (&from, &degree) in sources.iter().zip(degrees) {
        for _ in 0..degree {
            let weight = weights.map_or(1, |w| w[next]);
            edges.push((from, destinations[next], weight));
            next += 1;
        }
    }
    Ok(Agree::Edges(Arc::new(edges), weights.is_some()))
}

/// The layout of a graph communicator ([`GraphCommunicator::get_layout`],
/// `MPI_Graph_get`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphLayout {
    /// `index[i]`: the number of edges of nodes `0..=i`.
    pub index: Vec<Count>,
    /// The neighbours of node 0, then of node 1, ...
    pub edges: Vec<Count>,
}

/// A communicator whose ranks are the nodes of a graph that every rank
/// knows (`MPI_Graph_create`, from
/// [`Communicator::create_graph_communicator`]; rsmpi 0.8 only has an empty
/// placeholder). It is a communicator: point-to-point and collectives work
/// on it.
///
/// ```
/// use myriad::traits::*;
///
/// let out = myriad::run(4, |universe| {
///     let world = universe.world();
///     // A ring 0 - 1 - 2 - 0; rank 3 is not in the graph.
///     let graph = world.create_graph_communicator(&[2, 4, 6], &[1, 2, 0, 2, 0, 1], false)?;
///     Some(graph.neighbors(graph.rank()))
/// })
/// .unwrap();
/// assert_eq!(out, [Some(vec![1, 2]), Some(vec![0, 2]), Some(vec![0, 1]), None]);
/// ```
#[derive(Debug, Clone)]
pub struct GraphCommunicator {
    comm: SimpleCommunicator,
    graph: Arc<Graph>,
}

impl GraphCommunicator {
    /// Number of nodes and edges (`MPI_Graphdims_get`).
    pub fn graph_dims(&self) -> (Count, Count) {
        (self.graph.nodes(), self.graph.edges.len() as Count)
    }

    /// The graph (`MPI_Graph_get`).
    pub fn get_layout(&self) -> GraphLayout {
        GraphLayout {
            index: self.graph.index.to_vec(),
            edges: self.graph.edges.to_vec(),
        }
    }

    /// Number of neighbours of `rank` (`MPI_Graph_neighbors_count`).
    ///
    /// # Panics
    ///
    /// If `rank` is not a node.
    #[track_caller]
    pub fn neighbors_count(&self, rank: Rank) -> Count {
        self.neighbors_of("neighbors_count", rank).len() as Count
    }

    /// The neighbours of `rank`, in the graph's order
    /// (`MPI_Graph_neighbors`).
    ///
    /// # Panics
    ///
    /// If `rank` is not a node.
    #[track_caller]
    pub fn neighbors(&self, rank: Rank) -> Vec<Rank> {
        self.neighbors_of("neighbors", rank).to_vec()
    }

    #[track_caller]
    fn neighbors_of(&self, op: &'static str, rank: Rank) -> &[Count] {
        if let Err(err) = self.core().check_rank(op, rank) {
            raise(err);
        }
        self.graph.neighbors(rank)
    }
}

/// One rank's neighbours in a distributed graph
/// ([`DistributedGraphCommunicator::neighbors`],
/// `MPI_Dist_graph_neighbors`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DistributedGraphNeighbors {
    /// Ranks this rank receives from.
    pub sources: Vec<Rank>,
    /// Their weights (`None`: unweighted).
    pub source_weights: Option<Vec<Count>>,
    /// Ranks this rank sends to.
    pub destinations: Vec<Rank>,
    /// Their weights (`None`: unweighted).
    pub destination_weights: Option<Vec<Count>>,
}

/// A communicator whose ranks each know their own in- and out-edges
/// (`MPI_Dist_graph_create_adjacent` / `MPI_Dist_graph_create`, from
/// [`Communicator::create_distributed_graph_communicator_adjacent`] and
/// [`Communicator::create_distributed_graph_communicator`]; rsmpi 0.8
/// only has an empty placeholder). It is a communicator.
///
/// ```
/// use myriad::traits::*;
///
/// let out = myriad::run(3, |universe| {
///     let world = universe.world();
///     let (r, n) = (world.rank(), world.size());
///     // A directed ring: receive from the left, send to the right.
///     let ring = world.create_distributed_graph_communicator_adjacent(
///         &[(r + n - 1) % n], None, &[(r + 1) % n], None, false,
///     );
///     let nb = ring.neighbors();
///     (nb.sources, nb.destinations)
/// })
/// .unwrap();
/// assert_eq!(out[0], (vec![2], vec![1]));
/// ```
#[derive(Debug, Clone)]
pub struct DistributedGraphCommunicator {
    comm: SimpleCommunicator,
}

impl DistributedGraphCommunicator {
    fn adjacency(&self) -> &Adjacency {
        let core = self.core();
        match core.shared().topology.get() {
            Some(Topo::DistGraph(table)) => table[core.rank() as usize]
                .get()
                .expect("set when the communicator was created"),
            _ => unreachable!("a distributed graph communicator has its topology"),
        }
    }

    /// In-degree, out-degree and whether the edges are weighted
    /// (`MPI_Dist_graph_neighbors_count`).
    pub fn neighbors_count(&self) -> (Count, Count, bool) {
        let adj = self.adjacency();
        (
            adj.sources.len() as Count,
            adj.destinations.len() as Count,
            adj.source_weights.is_some() || adj.destination_weights.is_some(),
        )
    }

    /// This rank's neighbours (`MPI_Dist_graph_neighbors`).
    pub fn neighbors(&self) -> DistributedGraphNeighbors {
        let adj = self.adjacency();
        DistributedGraphNeighbors {
            sources: adj.sources.clone(),
            source_weights: adj.source_weights.clone(),
            destinations: adj.destinations.clone(),
            destination_weights: adj.destination_weights.clone(),
        }
    }
}

macro_rules! topology_communicator {
    ($ty:ty) => {
        impl AsCore for $ty {
            fn core(&self) -> &CommCore {
                self.comm.core()
            }

            fn attributes(&self) -> Option<&Attributes> {
                self.comm.attributes()
            }

            fn attributes_mut(&mut self) -> Option<&mut Attributes> {
                self.comm.attributes_mut()
            }
        }

        impl Communicator for $ty {}

        impl From<$ty> for SimpleCommunicator {
            fn from(comm: $ty) -> SimpleCommunicator {
                comm.comm
            }
        }
    };
}

topology_communicator!(GraphCommunicator);
topology_communicator!(DistributedGraphCommunicator);

/// Checks a rank's `_adjacent` arguments (for the trait method).
pub(crate) fn adjacent(
    core: &CommCore,
    sources: &[Rank],
    source_weights: Option<&[Count]>,
    destinations: &[Rank],
    destination_weights: Option<&[Count]>,
) -> Result<Agree, Error> {
    let adj = Adjacency::new(
        "create_distributed_graph_communicator_adjacent",
        core.size(),
        sources,
        source_weights,
        destinations,
        destination_weights,
    )?;
    Ok(Agree::Adjacent(Arc::new(adj)))
}

/// `MPI_Graph_map`: the rank the caller would have in the graph.
pub(crate) fn graph_map(core: &CommCore, index: &[Count], edges: &[Count]) -> Option<Rank> {
    let graph = Graph::new(index, edges, core.size()).or_raise();
    (core.rank() < graph.nodes()).then_some(core.rank())
}
