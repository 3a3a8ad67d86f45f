//! Virtual topologies a communicator carries (MPI 3.1 §7): a Cartesian
//! grid (`grid.rs`), a graph (`MPI_Graph_create`: every rank knows the
//! whole graph) or a distributed graph (`MPI_Dist_graph_create(_adjacent)`:
//! each rank knows its own in- and out-edges).
//!
//! A communicator's topology is set once, when it is created
//! (`coll/create.rs` sets it from what the creating ranks passed), and kept
//! in its shared state ([`CommShared::topology`](super::CommShared)), so a
//! plain handle can tell its topology (`SimpleCommunicator::topology`) and
//! be turned into the typed one (`into_topology`), and `duplicate` copies
//! it. The API over it is `communicator/graph.rs` and
//! `communicator/cartesian.rs` (layer L5).

use std::sync::{Arc, OnceLock};

use super::grid::Grid;
use crate::error::{ArgError, Error, GraphProblem};
use crate::{Count, Rank};

/// The topology of a communicator.
#[derive(Debug, Clone)]
pub(crate) enum Topo {
    Cartesian(Arc<Grid>),
    Graph(Arc<Graph>),
    /// Each rank's edges, by rank (each entry set once, at creation).
    DistGraph(Arc<[OnceLock<Adjacency>]>),
}

/// A graph topology: MPI's `index` and `edges` arrays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Graph {
    /// `index[i]`: the number of edges of nodes `0..=i`.
    pub(crate) index: Box<[Count]>,
    /// The neighbours of node 0, then of node 1, ...
    pub(crate) edges: Box<[Count]>,
}

impl Graph {
    /// Checks a graph for a communicator of `size` ranks.
    pub(crate) fn new(index: &[Count], edges: &[Count], size: Rank) -> Result<Graph, Error> {
        const OP: &str = "create_graph_communicator";
        let nodes = index.len();
        let bad = |problem: GraphProblem| Err(Error::Arg(ArgError::Graph { op: OP, problem }));
        if nodes > size as usize {
            return bad(GraphProblem::TooManyNodes { nodes, size });
        }
        let mut last = 0;
        for (i, &n) in index.iter().enumerate() {
            if n < last {
                return bad(GraphProblem::IndexDecreases { node: i, index: n });
            }
            last = n;
        }
        if last as usize != edges.len() {
            return bad(GraphProblem::EdgeCount {
                index: last,
                edges: edges.len(),
            });
        }
        if let Some(&e) = edges.iter().find(|&&e| e < 0 || e as usize >= nodes) {
            return bad(GraphProblem::NoSuchNode { node: e, nodes });
        }
        Ok(Graph {
            index: index.into(),
            edges: edges.into(),
        })
    }

    /// The number of nodes.
    pub(crate) fn nodes(&self) -> Rank {
        self.index.len() as Rank
    }

    /// The neighbours of `node` (checked by the caller).
    pub(crate) fn neighbors(&self, node: Rank) -> &[Count] {
        let node = node as usize;
        let start = if node == 0 { 0 } else { self.index[node - 1] };
        &self.edges[start as usize..self.index[node] as usize]
    }
}

/// One rank's edges in a distributed graph: where its messages come from
/// and go to, with optional weights.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Adjacency {
    pub(crate) sources: Vec<Rank>,
    pub(crate) source_weights: Option<Vec<Count>>,
    pub(crate) destinations: Vec<Rank>,
    pub(crate) destination_weights: Option<Vec<Count>>,
}

impl Adjacency {
    /// Checks one rank's adjacency for a communicator of `size` ranks.
    pub(crate) fn new(
        op: &'static str,
        size: Rank,
        sources: &[Rank],
        source_weights: Option<&[Count]>,
        destinations: &[Rank],
        destination_weights: Option<&[Count]>,
    ) -> Result<Adjacency, Error> {
        let bad = |problem: GraphProblem| Err(Error::Arg(ArgError::Graph { op, problem }));
        for (what, ranks, weights) in [
            ("sources", sources, source_weights),
            ("destinations", destinations, destination_weights),
        ] {
            if let Some(&r) = ranks.iter().find(|&&r| r < 0 || r >= size) {
                return bad(GraphProblem::NoSuchNode {
                    node: r,
                    nodes: size as usize,
                });
            }
            if let Some(w) = weights {
                if w.len() != ranks.len() {
                    return bad(GraphProblem::WeightCount {
                        what,
                        ranks: ranks.len(),
                        weights: w.len(),
                    });
                }
                if let Some(&w) = w.iter().find(|&&w| w < 0) {
                    return bad(GraphProblem::NegativeWeight { weight: w });
                }
            }
        }
        Ok(Adjacency {
            sources: sources.to_vec(),
            source_weights: source_weights.map(<[Count]>::to_vec),
            destinations: destinations.to_vec(),
            destination_weights: destination_weights.map(<[Count]>::to_vec),
        })
    }
}
