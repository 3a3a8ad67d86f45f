//! [`ArgError`]: arguments that are not valid (`MPI_ERR_ARG`).

use std::fmt;
use std::panic::Location;

use crate::{Count, Rank};

/// An argument that is not valid (`MPI_ERR_ARG`): which one, with the
/// values involved. `Display` gives the sentence that
/// [`Error`](super::Error)'s `Display` prints.
///
/// `op` fields name the operation as the user called it; communicators are
/// named as in deadlock reports (`MPI_COMM_WORLD`, `split_by_color of
/// MPI_COMM_WORLD`, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ArgError {
    // Collective algorithms.
    /// An algorithm that the collective does not have.
    NoSuchAlgorithm {
        /// The collective (`broadcast`, ...).
        collective: &'static str,
        /// The algorithm asked for.
        algorithm: &'static str,
        /// The collective's algorithms, besides `auto`.
        valid: Vec<&'static str>,
    },
    /// An algorithm name that is not one of the collective's.
    NotAnAlgorithm {
        /// The name given.
        name: String,
        /// The collective.
        collective: &'static str,
        /// The collective's algorithms, besides `auto`.
        valid: Vec<&'static str>,
    },
    /// `shm` asked for on a communicator whose members are not all in this
    /// process.
    NotAllLocal {
        /// The collective.
        collective: &'static str,
        /// The communicator's name.
        communicator: String,
        /// Processes the communicator spans.
        processes: usize,
        /// Its members in this process.
        local: usize,
        /// The collective's other algorithms.
        valid: Vec<&'static str>,
    },
    /// A name that is not a collective's.
    UnknownCollective {
        /// The name given (trimmed, in lower case).
        name: String,
        /// The collectives' names.
        valid: Vec<&'static str>,
    },
    /// The `binomial_aggressive` Gatherv needs every rank to pass the counts
    /// and displacements, and a rank did not.
    CountsNotKnown {
        /// The operation.
        op: &'static str,
        /// The rank that did not pass them.
        rank: Rank,
    },

    // Datatypes and buffers.
    /// A derived datatype's constructor got a list with another length
    /// than the block lengths.
    BlockListLength {
        /// The constructor (`indexed`, `structured`, ...).
        constructor: &'static str,
        /// Number of block lengths.
        blocks: usize,
        /// Which list (`displacements`, `types`).
        what: &'static str,
        /// Its length.
        len: usize,
    },
    /// A derived datatype's displacements or extent overflow the address
    /// space.
    DatatypeOverflow {
        /// The constructor.
        constructor: &'static str,
    },
    /// A view's count and datatype do not fit its buffer.
    View {
        /// The view (`View`, `MutView`).
        view: &'static str,
        /// What does not fit.
        problem: ViewProblem,
    },
    /// A negative position in a packed buffer.
    NegativePosition {
        /// The operation (`pack_into`, `unpack_into`).
        op: &'static str,
        /// The position.
        position: Count,
    },

    // Groups and communicator creation.
    /// A rank that is not in the group.
    NotInGroup {
        /// The `Group` operation.
        op: &'static str,
        /// The rank.
        rank: Rank,
        /// Size of the group.
        size: Rank,
    },
    /// A rank listed more than once.
    RankRepeated {
        /// The `Group` operation.
        op: &'static str,
        /// The rank.
        rank: Rank,
    },
    /// A negative color for a split.
    NegativeColor {
        /// The value.
        value: i32,
    },
    /// A group that holds a world rank which is not in the communicator.
    NotSubgroup {
        /// The operation.
        op: &'static str,
        /// The world rank outside the communicator.
        world_rank: Rank,
        /// The communicator.
        comm: String,
    },
    /// Two ranks passed different arguments to a communicator creation that
    /// needs them equal (a Cartesian grid, retained dimensions).
    CreationArgs {
        /// The creating call (`create_cartesian_communicator`, ...).
        call: &'static str,
        /// The parent communicator.
        comm: String,
        /// The two ranks.
        ranks: (Rank, Rank),
        /// What each passed, in the order of `ranks`.
        passed: (String, String),
        /// Where each called, in the order of `ranks`.
        sites: (&'static Location<'static>, &'static Location<'static>),
    },
    /// Two ranks passed different groups that overlap to
    /// `split_by_subgroup_collective`.
    GroupsOverlap {
        /// The parent communicator.
        comm: String,
        /// The two ranks.
        ranks: (Rank, Rank),
        /// Where each called, in the order of `ranks`.
        sites: (&'static Location<'static>, &'static Location<'static>),
    },
    /// Only some members of a group passed it to
    /// `split_by_subgroup_collective`.
    GroupIncomplete {
        /// The parent communicator.
        comm: String,
        /// The ranks that passed it.
        ranks: Vec<Rank>,
        /// Size of the group.
        size: usize,
        /// Where the first of them called.
        site: &'static Location<'static>,
    },

    // Array datatypes.
    /// `create_resized` with a negative (or too large) extent.
    NegativeExtent {
        /// The extent passed.
        extent: isize,
    },
    /// An array datatype constructor's slices differ in length.
    DimensionLists {
        /// `subarray` or `darray`.
        constructor: &'static str,
        /// Number of dimensions (the length of its first slice).
        dims: usize,
        /// Which other slice.
        what: &'static str,
        /// Its length.
        len: usize,
    },
    /// An array datatype constructor got no dimensions.
    NoDimensions {
        /// `subarray` or `darray`.
        constructor: &'static str,
    },
    /// A subarray dimension that does not fit its array.
    SubarrayDimension {
        /// The dimension (as passed, before any reordering).
        dim: usize,
        /// Its size.
        size: Count,
        /// The subarray's size along it.
        subsize: Count,
        /// The subarray's start along it.
        start: Count,
    },
    /// A darray process grid that does not match `size`, or a `rank`
    /// outside it.
    DarrayGrid {
        /// The number of processes passed.
        size: Count,
        /// The rank passed.
        rank: Count,
        /// The grid passed.
        psizes: Vec<Count>,
    },
    /// A darray dimension whose distribution does not fit.
    DarrayDimension {
        /// The dimension.
        dim: usize,
        /// Its global size.
        gsize: Count,
        /// `block`, `cyclic` or `none`.
        distribution: &'static str,
        /// The block size passed (0 for none).
        darg: Count,
        /// The processes along it.
        psize: Count,
    },

    // Graph topologies.
    /// Bad arguments to a graph or distributed-graph creation.
    Graph {
        /// The creating call.
        op: &'static str,
        /// What is wrong.
        problem: GraphProblem,
    },

    // Inter-communicators.
    /// The two groups of an inter-communicator share a rank.
    GroupsNotDisjoint {
        /// The creating call.
        op: &'static str,
        /// A world rank in both groups.
        world_rank: Rank,
    },
    /// A spawn of no ranks (`Communicator::spawn_ranks`).
    NoRanksToSpawn {
        /// The parent communicator.
        comm: String,
    },
    /// Ranks that retire (`Communicator::shrink`) while immediate
    /// collectives they are the root of have not completed: the other
    /// members would wait for a root that left.
    RetiringRoot {
        /// The communicator being shrunk.
        comm: String,
        /// The retiring roots (ranks of that communicator), and how many
        /// such collectives each has pending.
        roots: Vec<(Rank, u32)>,
    },
    /// An operation that needs an intra-communicator got an
    /// inter-communicator, or the reverse.
    WrongKindOfCommunicator {
        /// The operation.
        op: &'static str,
        /// The communicator.
        comm: String,
        /// What it needs: "an intra-communicator", "an inter-communicator".
        needs: &'static str,
    },

    // Cartesian grids.
    /// `dims` and `periods` have different lengths.
    DimsPeriodsLength {
        /// The operation.
        op: &'static str,
        /// Entries in `dims`.
        dims: usize,
        /// Entries in `periods`.
        periods: usize,
    },
    /// A dimension without ranks.
    EmptyDimension {
        /// The operation.
        op: &'static str,
        /// The dimension.
        index: usize,
        /// Its extent (zero or negative).
        extent: Count,
    },
    /// A grid with more points than the communicator has ranks.
    GridTooLarge {
        /// The operation.
        op: &'static str,
        /// The grid's extents.
        dims: Vec<Count>,
        /// Size of the communicator.
        size: Rank,
    },
    /// A slice whose length is not the grid's number of dimensions.
    GridLength {
        /// The operation.
        op: &'static str,
        /// The argument.
        what: &'static str,
        /// Its length.
        len: usize,
        /// The grid's dimensions.
        dimensions: usize,
    },
    /// `get_layout_into`'s slices do not all have the grid's number of
    /// dimensions.
    LayoutLengths {
        /// The grid's dimensions.
        dimensions: usize,
        /// Entries of `dims`.
        dims: usize,
        /// Entries of `periods`.
        periods: usize,
        /// Entries of `coords`.
        coords: usize,
    },
    /// A coordinate outside a dimension that is not periodic.
    CoordinateOutside {
        /// The coordinates.
        coords: Vec<Count>,
        /// The dimension.
        dimension: usize,
        /// The coordinate along it.
        coordinate: Count,
        /// Its extent.
        extent: Count,
    },
    /// A dimension that is not in the grid.
    NoSuchDimension {
        /// The dimension.
        dimension: Count,
        /// The grid's dimensions.
        dimensions: usize,
    },
    /// `dims_create` was asked for a grid of no ranks.
    DimsCreateNodes {
        /// The number of ranks.
        nnodes: Count,
        /// The entries passed.
        dims: Vec<Count>,
    },
    /// `dims_create` got a negative entry.
    DimsCreateNegative {
        /// The number of ranks.
        nnodes: Count,
        /// The entries passed.
        dims: Vec<Count>,
    },
    /// `dims_create`'s number of ranks is not a multiple of the fixed
    /// entries' product.
    DimsCreateNotMultiple {
        /// The number of ranks.
        nnodes: Count,
        /// The entries passed.
        dims: Vec<Count>,
        /// The product of the positive entries.
        fixed: i64,
    },

    // Redistribution (`malleable`).
    /// A redistribution plan whose source blocks and target blocks hold
    /// different numbers of elements, or that has no source or no target.
    PlanSizes {
        /// Elements the source blocks hold, per source.
        sources: Vec<usize>,
        /// Elements the target blocks hold, per target.
        targets: Vec<usize>,
    },
    /// A redistribution over a communicator smaller than its sources or
    /// targets (MaM's convention: sources are ranks `0..NS`, targets
    /// `0..NT` of one communicator).
    PlanRanks {
        /// Sources of the plan.
        sources: usize,
        /// Targets of the plan.
        targets: usize,
        /// Size of the communicator.
        size: Rank,
    },
    /// A redistribution buffer too small for this rank's block.
    RedistributionBuffer {
        /// Which buffer (`source`, `target`).
        role: &'static str,
        /// The calling rank.
        rank: Rank,
        /// Elements the rank's block holds.
        needed: usize,
        /// Elements the buffer holds.
        len: usize,
    },
}

/// Why a view's count and datatype do not fit its buffer
/// ([`ArgError::View`]). Datatypes are named by their type maps; bounds,
/// extents and reaches are in bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ViewProblem {
    /// The count is negative.
    NegativeCount {
        /// The count.
        count: Count,
    },
    /// The datatype has data outside its lower and upper bounds.
    OutsideBounds {
        /// The datatype.
        datatype: String,
        /// Its lower bound.
        lb: isize,
        /// Its upper bound.
        ub: isize,
    },
    /// A datatype has data before the buffer's address.
    BeforeStart {
        /// The datatype.
        datatype: String,
        /// The first byte with data, relative to the address.
        byte: isize,
    },
    /// The elements span more bytes than memory has.
    TooLarge {
        /// Number of elements.
        count: usize,
        /// The datatype.
        datatype: String,
    },
    /// The elements reach past the buffer's end.
    TooSmall {
        /// Number of elements.
        count: usize,
        /// The datatype.
        datatype: String,
        /// Its lower bound.
        lb: isize,
        /// Its extent.
        extent: usize,
        /// Bytes from the buffer's address the elements reach.
        need: usize,
        /// Elements of the buffer.
        buffer_count: Count,
        /// The buffer's datatype.
        buffer: String,
        /// Bytes from its address the buffer holds.
        have: usize,
    },
}

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgError::NoSuchAlgorithm {
                collective,
                algorithm,
                valid,
            } => write!(
                f,
                "{collective} has no algorithm {algorithm}; its algorithms are: auto, {}",
                valid.join(", ")
            ),
            ArgError::NotAllLocal {
                collective,
                communicator,
                processes,
                local,
                valid,
            } => write!(
                f,
                "{collective}: algorithm shm needs every member of the communicator in one \
                 process, but {communicator} spans {processes} processes ({local} of its \
                 members in this one); use auto or a message-based algorithm: {}",
                valid.join(", ")
            ),
            ArgError::NotAnAlgorithm {
                name,
                collective,
                valid,
            } => write!(
                f,
                "{name:?} is not an algorithm of {collective}; use one of: auto, {}",
                valid.join(", ")
            ),
            ArgError::UnknownCollective { name, valid } => write!(
                f,
                "unknown collective {name:?}; the collectives are: {}",
                valid.join(", ")
            ),
            ArgError::CountsNotKnown { op, rank } => write!(
                f,
                "{op}: the binomial_aggressive algorithm needs every rank to pass the counts and \
                 displacements (gather_varcount_into_known), but rank {rank} did not"
            ),
            ArgError::BlockListLength {
                constructor,
                blocks,
                what,
                len,
            } => write!(
                f,
                "UserDatatype::{constructor}: {blocks} block lengths but {len} {what}; there \
                 must be one per block"
            ),
            ArgError::DatatypeOverflow { constructor } => write!(
                f,
                "UserDatatype::{constructor}: the type's displacements or extent overflow the \
                 address space"
            ),
            ArgError::View { view, problem } => {
                write!(f, "{view}::with_count_and_datatype: {problem}")
            }
            ArgError::NegativePosition { op, position } => {
                write!(f, "{op}: position {position} is negative")
            }
            ArgError::NotInGroup { op, rank, size } => write!(
                f,
                "Group::{op}: rank {rank} is not in the group (valid ranks are 0..{size})"
            ),
            ArgError::RankRepeated { op, rank } => {
                write!(f, "Group::{op}: rank {rank} is listed more than once")
            }
            ArgError::NegativeColor { value } => write!(
                f,
                "Color::with_value({value}): a color must be non-negative"
            ),
            ArgError::NotSubgroup {
                op,
                world_rank,
                comm,
            } => write!(
                f,
                "{op}: the group holds world rank {world_rank}, which is not in communicator \
                 {comm} (a group passed here must be a subgroup of the communicator's group)"
            ),
            ArgError::CreationArgs {
                call,
                comm,
                ranks: (r0, r1),
                passed: (p0, p1),
                sites: (s0, s1),
            } => write!(
                f,
                "{call} on {comm}: rank {r0} passed {p0} at {s0}, but rank {r1} passed {p1} at \
                 {s1}"
            ),
            ArgError::NegativeExtent { extent } => write!(
                f,
                "UserDatatype::create_resized: extent {extent} is negative or too large"
            ),
            ArgError::DimensionLists {
                constructor,
                dims,
                what,
                len,
            } => write!(
                f,
                "UserDatatype::{constructor}: an array of {dims} dimensions, but {what} has {len} \
                 entries; there must be one per dimension"
            ),
            ArgError::NoDimensions { constructor } => {
                write!(
                    f,
                    "UserDatatype::{constructor}: an array needs at least one dimension"
                )
            }
            ArgError::SubarrayDimension {
                dim,
                size,
                subsize,
                start,
            } => write!(
                f,
                "UserDatatype::subarray: dimension {dim} has size {size}, subsize {subsize} and \
                 start {start}; it needs size >= 1, 1 <= subsize <= size and 0 <= start <= size \
                 - subsize"
            ),
            ArgError::DarrayGrid { size, rank, psizes } => write!(
                f,
                "UserDatatype::darray: rank {rank} of {size} processes on a process grid of \
                 {psizes:?}; the grid's dimensions must be at least 1 and multiply to size, and \
                 rank must be in 0..size"
            ),
            ArgError::DarrayDimension {
                dim,
                gsize,
                distribution,
                darg,
                psize,
            } => write!(
                f,
                "UserDatatype::darray: dimension {dim} of {gsize} elements cannot be \
                 distributed {distribution} (block size {darg}) over {psize} processes: sizes \
                 must be at least 1, a block distribution's blocks must cover the dimension, and \
                 an undistributed dimension needs 1 process"
            ),
            ArgError::Graph { op, problem } => write!(f, "{op}: {problem}"),
            ArgError::GroupsNotDisjoint { op, world_rank } => write!(
                f,
                "{op}: world rank {world_rank} is in both the local and the remote group; the \
                 groups of an inter-communicator must be disjoint"
            ),
            ArgError::NoRanksToSpawn { comm } => {
                write!(
                    f,
                    "spawning 0 ranks from {comm}: a spawn needs at least one"
                )
            }
            ArgError::RetiringRoot { comm, roots } => {
                let list: Vec<String> = roots
                    .iter()
                    .map(|(rank, n)| format!("rank {rank} ({n})"))
                    .collect();
                write!(
                    f,
                    "shrinking {comm}: retiring ranks are the root of immediate collectives that \
                     have not completed: {}; complete them (wait) before retiring",
                    list.join(", ")
                )
            }
            ArgError::WrongKindOfCommunicator { op, comm, needs } => {
                write!(f, "{op} needs {needs}, but {comm} is not one")
            }
            ArgError::GroupsOverlap {
                comm,
                ranks: (r0, r1),
                sites: (s0, s1),
            } => write!(
                f,
                "split_by_subgroup_collective on {comm}: ranks {r0} (at {s0}) and {r1} (at \
                 {s1}) passed different groups that overlap; the groups passed must be equal or \
                 disjoint"
            ),
            ArgError::GroupIncomplete {
                comm,
                ranks,
                size,
                site,
            } => write!(
                f,
                "split_by_subgroup_collective on {comm}: ranks {ranks:?} passed a group of \
                 {size} ranks (at {site}), but only {} of its members passed it; every member \
                 must pass the same group",
                ranks.len()
            ),
            ArgError::DimsPeriodsLength { op, dims, periods } => write!(
                f,
                "{op}: dims has {dims} entries but periods has {periods}; they must have the \
                 same length"
            ),
            ArgError::EmptyDimension { op, index, extent } => write!(
                f,
                "{op}: dims[{index}] = {extent}; every dimension needs at least one rank"
            ),
            ArgError::GridTooLarge { op, dims, size } => write!(
                f,
                "{op}: a grid of dims {dims:?} needs {} ranks but the communicator has {size}",
                dims.iter().map(|&d| d as i128).product::<i128>()
            ),
            ArgError::GridLength {
                op,
                what,
                len,
                dimensions,
            } => write!(
                f,
                "{op}: {what} has {len} entries but the grid has {dimensions} dimensions"
            ),
            ArgError::LayoutLengths {
                dimensions,
                dims,
                periods,
                coords,
            } => write!(
                f,
                "get_layout_into: the grid has {dimensions} dimensions but dims, periods and \
                 coords have {dims}, {periods} and {coords} entries"
            ),
            ArgError::CoordinateOutside {
                coords,
                dimension,
                coordinate,
                extent,
            } => write!(
                f,
                "coordinates_to_rank: coordinate {coordinate} of {coords:?} is outside \
                 dimension {dimension} (0..{extent}, not periodic)"
            ),
            ArgError::NoSuchDimension {
                dimension,
                dimensions,
            } => write!(
                f,
                "shift: dimension {dimension} is not in the grid (dimensions are \
                 0..{dimensions})"
            ),
            ArgError::DimsCreateNodes { nnodes, dims } => write!(
                f,
                "dims_create({nnodes}, {dims:?}): the number of ranks must be positive"
            ),
            ArgError::DimsCreateNegative { nnodes, dims } => write!(
                f,
                "dims_create({nnodes}, {dims:?}): entries must be 0 (to fill) or positive"
            ),
            ArgError::DimsCreateNotMultiple {
                nnodes,
                dims,
                fixed,
            } => write!(
                f,
                "dims_create({nnodes}, {dims:?}): {nnodes} is not a multiple of the fixed \
                 entries' product {fixed}"
            ),
            ArgError::PlanSizes { sources, targets } => {
                let (s, t) = (sources.iter().sum::<usize>(), targets.iter().sum::<usize>());
                if sources.is_empty() || targets.is_empty() {
                    write!(
                        f,
                        "a redistribution plan needs at least one source and one target \
                         ({} sources, {} targets)",
                        sources.len(),
                        targets.len()
                    )
                } else {
                    write!(
                        f,
                        "redistribution plan: the {} source blocks hold {s} elements but the \
                         {} target blocks hold {t}",
                        sources.len(),
                        targets.len()
                    )
                }
            }
            ArgError::PlanRanks {
                sources,
                targets,
                size,
            } => write!(
                f,
                "a redistribution from {sources} sources to {targets} targets needs a \
                 communicator of at least {} ranks; this one has {size}",
                sources.max(targets)
            ),
            ArgError::RedistributionBuffer {
                role,
                rank,
                needed,
                len,
            } => write!(
                f,
                "redistribution: rank {rank}'s {role} buffer holds {len} elements, its block \
                 needs {needed}"
            ),
        }
    }
}

impl fmt::Display for ViewProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ViewProblem::NegativeCount { count } => write!(f, "count {count} is negative"),
            ViewProblem::OutsideBounds { datatype, lb, ub } => write!(
                f,
                "datatype `{datatype}` has data outside its bounds lb {lb} .. ub {ub}"
            ),
            ViewProblem::BeforeStart { datatype, byte } => write!(
                f,
                "datatype `{datatype}` has data at byte {byte}, before the buffer's start"
            ),
            ViewProblem::TooLarge { count, datatype } => write!(
                f,
                "{count} elements of datatype `{datatype}` span more bytes than memory has"
            ),
            ViewProblem::TooSmall {
                count,
                datatype,
                lb,
                extent,
                need,
                buffer_count,
                buffer,
                have,
            } => write!(
                f,
                "{count} element(s) of datatype `{datatype}` (lb {lb}, extent {extent}) reach \
                 {need} bytes from the buffer's address, but the buffer ({buffer_count} x \
                 `{buffer}`) holds {have}"
            ),
        }
    }
}

/// What is wrong with a graph topology's arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum GraphProblem {
    /// More nodes than the communicator has ranks.
    TooManyNodes {
        /// Nodes in the graph.
        nodes: usize,
        /// Ranks of the communicator.
        size: Rank,
    },
    /// `index` decreases at a node.
    IndexDecreases {
        /// The node.
        node: usize,
        /// Its index entry.
        index: Count,
    },
    /// The last `index` entry is not the number of edges.
    EdgeCount {
        /// The last index entry.
        index: Count,
        /// The edges passed.
        edges: usize,
    },
    /// An edge or neighbour names a node (rank) that does not exist.
    NoSuchNode {
        /// The node named.
        node: Rank,
        /// The number of nodes.
        nodes: usize,
    },
    /// A weight list of another length than its rank list.
    WeightCount {
        /// `sources`, `destinations` or `edges`.
        what: &'static str,
        /// The ranks listed.
        ranks: usize,
        /// The weights listed.
        weights: usize,
    },
    /// A negative weight.
    NegativeWeight {
        /// The weight.
        weight: Count,
    },
    /// The out-edges ranks list and the in-edges other ranks list differ.
    Inconsistent {
        /// An edge listed on one side only.
        from: Rank,
        /// Its target.
        to: Rank,
    },
    /// A list of another length than a count says.
    DegreeCount {
        /// The sum of the degrees.
        degrees: usize,
        /// The destinations passed.
        destinations: usize,
    },
}

impl fmt::Display for GraphProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GraphProblem::TooManyNodes { nodes, size } => write!(
                f,
                "the graph has {nodes} nodes but the communicator only {size} ranks"
            ),
            GraphProblem::IndexDecreases { node, index } => write!(
                f,
                "index[{node}] = {index} is smaller than the entry before it (index counts the \
                 edges of nodes 0..=i)"
            ),
            GraphProblem::EdgeCount { index, edges } => write!(
                f,
                "the last index entry says {index} edges, but edges has {edges}"
            ),
            GraphProblem::NoSuchNode { node, nodes } => write!(
                f,
                "rank {node} is not a node of the graph (valid: 0..{nodes})"
            ),
            GraphProblem::WeightCount {
                what,
                ranks,
                weights,
            } => write!(f, "{ranks} {what} but {weights} weights for them"),
            GraphProblem::NegativeWeight { weight } => {
                write!(f, "weight {weight} is negative")
            }
            GraphProblem::Inconsistent { from, to } => write!(
                f,
                "the edge {from} -> {to} is listed by one of its ends only (rank {from}'s \
                 destinations and rank {to}'s sources must agree)"
            ),
            GraphProblem::DegreeCount {
                degrees,
                destinations,
            } => write!(
                f,
                "the degrees add up to {degrees} but {destinations} destinations were passed"
            ),
        }
    }
}
