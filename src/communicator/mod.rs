//! The rsmpi-facing communicator API (layer L5; see ARCHITECTURE.md,
//! "Layers"): the [`Communicator`] trait every communicator handle
//! implements, [`SimpleCommunicator`], and the [`Process`] / [`AnyProcess`]
//! handles that point-to-point calls start from. The state behind them
//! (`Core`, `CommShared`) is the communicator core, `comm` (L3); the handle
//! they hold, `coll::CommCore`, is that core with the collectives' state
//! (L4), and creating communicators meets in collective rounds
//! (`coll/create.rs`).
//!
//! | file | question it answers |
//! |---|---|
//! | `mod.rs` | the API: the `Communicator` trait, `SimpleCommunicator`, `Process`, `AnyProcess`, `Color`, `Key` |
//! | `cartesian.rs` | the Cartesian API: `CartesianCommunicator`, shifts, sub-grids, `dims_create` |
//! | `graph.rs` | graph and distributed-graph topologies: `GraphCommunicator`, `DistributedGraphCommunicator`, the topology kind (`CommunicatorTopology`, `IntoTopology`) |
//! | `inter.rs` | inter-communicators: `InterCommunicator` (creation, remote group, `merge`, `duplicate`), `MergeOrder` |
//! | `attribute.rs` | attributes cached on a rank's communicator handle: `CommAttribute`, `AnyCommunicator` |
//! | `spawn.rs` | growing and shrinking a running job: `spawn_ranks` (children as new coroutines, an inter-communicator to them, their `parent()`), `shrink` (retiring ranks) |

pub(crate) mod attribute;
mod cartesian;
mod graph;
mod inter;
mod spawn;

pub use attribute::{AnyCommunicator, CommAttribute};
pub use cartesian::{dims_create, CartesianCommunicator, CartesianLayout};
pub use graph::{
    CommunicatorTopology, DistributedGraphCommunicator, DistributedGraphNeighbors,
    GraphCommunicator, GraphLayout, IntoTopology,
};
pub use inter::{InterCommunicator, MergeOrder};

use crate::coll::create as split;
use crate::coll::CommCore;
use crate::comm::grid::Grid;
use crate::comm::{Group, UserGroup};
use crate::environment::Universe;
use crate::error::{raise, ArgError, CommError, Error, OrRaise};
use crate::runtime::job::Job;
use crate::sched;
use crate::{Count, Rank, Tag, UNDEFINED};
use attribute::Attributes;

/// A color for [`Communicator::split_by_color`](Communicator::split_by_color):
/// ranks with the same color end up in the same communicator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Color(i32);

impl Color {
    /// The color of ranks that join no communicator (`MPI_UNDEFINED`): they
    /// get `None`.
    pub fn undefined() -> Color {
        Color(UNDEFINED)
    }

    /// A color with a value.
    ///
    /// # Panics
    ///
    /// If `value` is negative (MPI's colors are non-negative).
    #[track_caller]
    pub fn with_value(value: i32) -> Color {
        if value < 0 {
            crate::error::raise(Error::Arg(ArgError::NegativeColor { value }));
        }
        Color(value)
    }

    /// The value, `None` for [`Color::undefined`].
    pub(crate) fn get(self) -> Option<i32> {
        (self.0 != UNDEFINED).then_some(self.0)
    }
}

/// Orders the ranks of a new communicator in a split: lower keys first, ties
/// by rank in the parent.
pub type Key = i32;

/// Two communicators compared ([`Communicator::compare`], `MPI_Comm_compare`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CommunicatorRelation {
    /// The same communicator (same context, same group).
    Identical,
    /// Same members in the same order, different contexts (e.g. a duplicate).
    Congruent,
    /// Same members in another order.
    Similar,
    /// Anything else.
    Unequal,
}

/// Hosts emulated for tests of one process standing for several
/// ([`emulate_hosts`]).
static EMULATED_HOSTS: std::sync::Mutex<Option<Vec<u32>>> = std::sync::Mutex::new(None);

/// Makes jobs of `hosts.len()` processes run as threads of this process
/// (`Runtime::run_joined*`) see process `p` on host `hosts[p]` (`None`:
/// one host again), in every such job started after the call: what
/// `split_shared`, `split_by_host` and the host level of hierarchical
/// collectives see. Process-global: tests that run in parallel should pass
/// the hosts to `Runtime::run_joined_on_hosts` instead.
#[doc(hidden)]
pub fn emulate_hosts(hosts: Option<Vec<u32>>) {
    *EMULATED_HOSTS.lock().unwrap_or_else(|e| e.into_inner()) = hosts;
}

/// The hosts [`emulate_hosts`] set for jobs of `processes` processes.
pub(crate) fn emulated_hosts(processes: usize) -> Option<Vec<u32>> {
    let emulated = EMULATED_HOSTS.lock().unwrap_or_else(|e| e.into_inner());
    emulated.clone().filter(|h| h.len() == processes)
}

/// The color of this rank's host: its index among the job's hosts (from
/// the host names the processes exchanged when the job started), the same
/// in every process of the host.
fn host_color(core: &CommCore) -> Rank {
    use crate::p2p::Node;
    let processes = core.job().p2p().processes();
    processes.host_of(processes.this()) as Rank
}

mod sealed {
    /// Access to a communicator's internals.
    pub trait AsCore {
        /// The rank's handle.
        fn core(&self) -> &super::CommCore;

        /// The attributes this handle keeps (none for a [`super::Process`]).
        fn attributes(&self) -> Option<&super::Attributes> {
            None
        }

        /// The attributes this handle keeps, to change them.
        fn attributes_mut(&mut self) -> Option<&mut super::Attributes> {
            None
        }
    }
}

/// Access to a communicator's internals (sealed: only myriad's types
/// implement it).
#[doc(hidden)]
pub use sealed::AsCore;

/// A communicator: a group of ranks and a context to talk in (rsmpi's
/// `Communicator`). Object safe: `&dyn Communicator` works.
///
/// Creating communicators (`duplicate`, `split_*`,
/// `create_cartesian_communicator`) is collective: every rank of this
/// communicator calls the same method, in the same order relative to the
/// communicator's other collectives — except
/// [`split_by_subgroup`](Self::split_by_subgroup), which only the group's
/// members call. Bad arguments panic with a message naming the values.
///
/// ```
/// use myriad::collective::SystemOperation;
/// use myriad::topology::Color;
/// use myriad::traits::*;
///
/// let sizes = myriad::run(6, |universe| {
///     let world = universe.world();
///     // Even and odd ranks, each half in reverse order.
///     let half = world
///         .split_by_color_with_key(Color::with_value(world.rank() % 2), -world.rank())
///         .expect("every rank has a color");
///     let mut sum = 0;
///     half.all_reduce_into(&world.rank(), &mut sum, SystemOperation::sum());
///     (half.rank(), half.size(), sum)
/// })
/// .unwrap();
/// assert_eq!(sizes[0], (2, 3, 0 + 2 + 4));
/// assert_eq!(sizes[5], (0, 3, 1 + 3 + 5));
/// ```
pub trait Communicator: AsCore {
    /// Number of ranks in the communicator.
    fn size(&self) -> Rank {
        self.core().size()
    }

    /// The calling rank's rank in the communicator.
    fn rank(&self) -> Rank {
        self.core().rank()
    }

    /// Number of ranks [`process_at_rank`](Self::process_at_rank) can name:
    /// [`size`](Self::size), or the remote group's size on an
    /// inter-communicator (rsmpi's `target_size`).
    fn target_size(&self) -> Rank {
        self.core().shared().peers.size() as Rank
    }

    /// Ends the job (`MPI_Abort`): every rank is stopped and the job
    /// returns an error naming this rank, the communicator and `errorcode`
    /// (`myriad::run` returns it; a `#[myriad::main]` program exits with a
    /// failure). Unlike rsmpi, the process itself is not aborted: other
    /// jobs of the process, and the caller of `run`, go on.
    #[track_caller]
    fn abort(&self, errorcode: i32) -> ! {
        let core = self.core();
        raise(Error::Comm(CommError::Abort {
            rank: core.rank(),
            comm: core.name(),
            errorcode,
        }))
    }

    /// The process with rank `r`, as a destination or source; on an
    /// inter-communicator, rank `r` of the remote group.
    ///
    /// # Panics
    ///
    /// If `r` is not in `0..size()` (`0..remote_size()` on an
    /// inter-communicator; the message names both).
    #[track_caller]
    fn process_at_rank(&self, r: Rank) -> Process<'_> {
        let core = self.core();
        if let Err(err) = core.check_peer("process_at_rank", r) {
            raise(err);
        }
        Process { core, rank: r }
    }

    /// Any process: a source that matches messages from every rank.
    fn any_process(&self) -> AnyProcess<'_> {
        AnyProcess { core: self.core() }
    }

    /// The calling process itself.
    fn this_process(&self) -> Process<'_> {
        let core = self.core();
        Process {
            core,
            rank: core.rank(),
        }
    }

    /// The communicator's name (`MPI_COMM_WORLD` for the world; derived
    /// communicators are named after their parent, e.g. "split of
    /// MPI_COMM_WORLD", until [`set_name`](Self::set_name)).
    fn get_name(&self) -> String {
        let core = self.core();
        core.name()
    }

    /// Names the communicator (for error and deadlock reports). The name
    /// belongs to the communicator, so every rank sees it.
    fn set_name(&self, name: &str) {
        let core = self.core();
        core.job().comms().set_name(core.p2p_context(), name);
    }

    /// Compares two communicators (`MPI_Comm_compare`): the same one, the
    /// same ranks in the same order, the same ranks in another order, or
    /// different ranks (for inter-communicators: in both groups; an inter-
    /// and an intra-communicator are unequal).
    fn compare(&self, other: &dyn Communicator) -> CommunicatorRelation {
        let (a, b) = (self.core().shared(), other.core().shared());
        // Inter-communicators compare both groups (MPI 3.1 §6.4.1).
        let peers_same = !a.is_inter() && !b.is_inter()
            || a.is_inter() && b.is_inter() && a.peers.same(&b.peers);
        let peers_similar = !a.is_inter() && !b.is_inter()
            || a.is_inter() && b.is_inter() && a.peers.same_set(&b.peers);
        if std::ptr::eq(a, b) {
            CommunicatorRelation::Identical
        } else if !peers_similar {
            CommunicatorRelation::Unequal
        } else if a.group.same(&b.group) && peers_same {
            CommunicatorRelation::Congruent
        } else if a.group.same_set(&b.group) {
            CommunicatorRelation::Similar
        } else {
            CommunicatorRelation::Unequal
        }
    }

    /// A new communicator with the same ranks in the same order and a new
    /// context (`MPI_Comm_dup`). Attributes whose type sets
    /// [`CommAttribute::CLONE_ON_DUP`] are copied to it. Collective.
    #[track_caller]
    fn duplicate(&self) -> SimpleCommunicator {
        let core = self.core();
        let ask = split::Ask::new(split::Creation::Duplicate, Some(0), core.rank());
        let new = split::create(core, ask, std::panic::Location::caller())
            .or_raise()
            .expect("every rank takes part in a duplicate");
        let mut dup = SimpleCommunicator::from_core(new);
        if let Some(attrs) = self.attributes() {
            dup.attrs = attrs.duplicate();
        }
        dup
    }

    /// Splits the communicator (`MPI_Comm_split` with key 0): ranks that
    /// pass the same color form one new communicator, in their order here;
    /// [`Color::undefined`] gets `None`. Collective.
    #[track_caller]
    fn split_by_color(&self, color: Color) -> Option<SimpleCommunicator> {
        self.split_by_color_with_key(color, Key::default())
    }

    /// Splits the communicator (`MPI_Comm_split`): ranks that pass the same
    /// color form one new communicator, ordered by `key` and then by their
    /// rank here; [`Color::undefined`] gets `None`. Collective.
    #[track_caller]
    fn split_by_color_with_key(&self, color: Color, key: Key) -> Option<SimpleCommunicator> {
        let core = self.core();
        let ask = split::Ask::new(split::Creation::Split, color.get(), key);
        split::create(core, ask, std::panic::Location::caller())
            .or_raise()
            .map(SimpleCommunicator::from_core)
    }

    /// The processes (by index, ascending) that this rank exchanged
    /// collective messages with on this communicator since it last asked,
    /// counted from the messages themselves (not in rsmpi). A hierarchical
    /// collective's messages between processes are its leaders', so the
    /// peers of a root's process are those of its leader. Forgets them.
    /// Counting starts at the first call on the communicator (by any rank
    /// of this process): call it once before what you measure, and from
    /// the same rank after it. A communicator nobody asks keeps no table.
    fn take_collective_peer_processes(&self) -> Vec<u32> {
        let core = self.core();
        core.coll().traffic.take(core.world())
    }

    /// Splits the communicator into parts whose ranks share memory
    /// (`MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)`): one communicator per
    /// host (the ranks of every process of the job on one machine, which
    /// reach each other through shared memory), ordered by `key` and then
    /// by rank; in a job of one process, or of processes on one host, all
    /// ranks. The hosts come from the names the processes exchanged when
    /// the job started (`MYRIAD_HOST` overrides this process's), so no
    /// further exchange is needed. Collective.
    ///
    /// Windows (`allocate_shared_window`) span one process only: for a
    /// communicator of the ranks that share this process's address space,
    /// use [`split_by_process`](Self::split_by_process).
    #[track_caller]
    fn split_shared(&self, key: Key) -> SimpleCommunicator {
        let core = self.core();
        let ask = split::Ask::new(split::Creation::Shared, Some(host_color(core)), key);
        split::create(core, ask, std::panic::Location::caller())
            .or_raise()
            .map(SimpleCommunicator::from_core)
            .expect("every rank has a host")
    }

    /// Splits the communicator into one part per process: the ranks that
    /// share this process's address space (what `split_shared` gave before
    /// it split by host; not in rsmpi), ordered by `key` and then by rank.
    /// In a job of one process, all ranks. Collective.
    ///
    /// ```
    /// use myriad::traits::*;
    /// let sizes = myriad::run(3, |universe| {
    ///     let world = universe.world();
    ///     world.split_by_process(0).size()
    /// })
    /// .unwrap();
    /// assert_eq!(sizes, [3, 3, 3]);
    /// ```
    #[track_caller]
    fn split_by_process(&self, key: Key) -> SimpleCommunicator {
        let core = self.core();
        let ask = split::Ask::new(split::Creation::Process, Some(0), key);
        split::create(core, ask, std::panic::Location::caller())
            .or_raise()
            .map(SimpleCommunicator::from_core)
            .expect("every rank has a process")
    }

    /// Splits the communicator into one part per host: the same parts as
    /// [`split_shared`](Self::split_shared) (not in rsmpi; kept for the
    /// programs that asked for hosts by name).
    ///
    /// ```
    /// use myriad::traits::*;
    /// let sizes = myriad::run(4, |universe| {
    ///     let world = universe.world();
    ///     world.split_by_host(world.rank()).size()
    /// })
    /// .unwrap();
    /// assert_eq!(sizes, [4, 4, 4, 4]);
    /// ```
    #[track_caller]
    fn split_by_host(&self, key: Key) -> SimpleCommunicator {
        let core = self.core();
        let ask = split::Ask::new(split::Creation::Host, Some(host_color(core)), key);
        split::create(core, ask, std::panic::Location::caller())
            .or_raise()
            .map(SimpleCommunicator::from_core)
            .expect("every rank has a host")
    }

    /// A communicator of the ranks of `group`, in the group's order
    /// (`MPI_Comm_create`); `None` for ranks outside the group they pass.
    /// Collective over this whole communicator: every rank calls it, ranks
    /// may pass different groups if those are disjoint, and every member of
    /// a group must pass that same group.
    ///
    /// # Panics
    ///
    /// If the group has ranks outside this communicator, or the ranks'
    /// groups overlap without being equal.
    #[track_caller]
    fn split_by_subgroup_collective(&self, group: &dyn Group) -> Option<SimpleCommunicator> {
        split::create_collective(self.core(), group, std::panic::Location::caller())
            .or_raise()
            .map(SimpleCommunicator::from_core)
    }

    /// A communicator of the ranks of `group`, in the group's order
    /// (`MPI_Comm_create_group` with tag 0). Only the group's members call
    /// it (collective over the group, not over this communicator); a rank
    /// outside `group` gets `None` at once.
    #[track_caller]
    fn split_by_subgroup(&self, group: &dyn Group) -> Option<SimpleCommunicator> {
        self.split_by_subgroup_with_tag(group, Tag::default())
    }

    /// [`split_by_subgroup`](Self::split_by_subgroup) with a tag: calls with
    /// the same group and tag meet each other; calls whose groups overlap
    /// may run in any order only if their tags differ. See the protocol in
    /// the docs of `coll/create.rs`.
    ///
    /// # Panics
    ///
    /// If the tag is negative or the group has ranks outside this
    /// communicator.
    #[track_caller]
    fn split_by_subgroup_with_tag(
        &self,
        group: &dyn Group,
        tag: Tag,
    ) -> Option<SimpleCommunicator> {
        split::create_group(self.core(), group, tag, std::panic::Location::caller())
            .or_raise()
            .map(SimpleCommunicator::from_core)
    }

    /// The group of this communicator's ranks, in rank order
    /// (`MPI_Comm_group`). Local: no other rank takes part.
    fn group(&self) -> UserGroup {
        let core = self.core();
        UserGroup::from_comm(core.shared().group.clone(), core.world().get(), core.rank())
    }

    /// Whether this is an inter-communicator ([`InterCommunicator`], or a
    /// handle to one, such as the `duplicate` of one through this trait).
    fn test_inter(&self) -> bool {
        self.core().shared().is_inter()
    }

    /// A communicator whose ranks form a grid of `dims` (row-major, the
    /// last dimension varying fastest), periodic along the dimensions
    /// where `periods` is true (`MPI_Cart_create`). Ranks beyond the grid
    /// (`rank >= product of dims`) get `None`. myriad keeps the ranks in
    /// their order whatever `reorder` says (every rank is equally close).
    /// Collective; every rank passes the same `dims` and `periods`.
    ///
    /// # Panics
    ///
    /// If `dims` and `periods` differ in length, a dimension is not
    /// positive, or the grid has more points than the communicator has
    /// ranks.
    #[track_caller]
    fn create_cartesian_communicator(
        &self,
        dims: &[Count],
        periods: &[bool],
        reorder: bool,
    ) -> Option<CartesianCommunicator> {
        let _ = reorder;
        cartesian::create(self.core(), dims, periods, std::panic::Location::caller()).or_raise()
    }

    /// The rank the calling rank would have in
    /// [`create_cartesian_communicator`](Self::create_cartesian_communicator)
    /// with these `dims` and `periods` (`MPI_Cart_map`); `None` beyond the
    /// grid. Local.
    ///
    /// # Panics
    ///
    /// As `create_cartesian_communicator`.
    #[track_caller]
    fn cartesian_map(&self, dims: &[Count], periods: &[bool]) -> Option<Rank> {
        let core = self.core();
        let grid = Grid::new("cartesian_map", dims, periods, core.size()).or_raise();
        (core.rank() < grid.points()).then_some(core.rank())
    }

    /// A communicator whose ranks are the nodes of the graph `index`,
    /// `edges` (`MPI_Graph_create`): `index[i]` counts the edges of nodes
    /// `0..=i`, `edges` lists the neighbours of node 0, then of node 1, ...
    /// Ranks beyond the graph (`rank >= index.len()`) get `None`; the ranks
    /// keep their order whatever `reorder` says. Collective; every rank
    /// passes the same graph.
    ///
    /// # Panics
    ///
    /// If the graph has more nodes than the communicator ranks, `index`
    /// decreases, its last entry is not `edges.len()`, an edge names no
    /// node, or ranks pass different graphs.
    #[track_caller]
    fn create_graph_communicator(
        &self,
        index: &[Count],
        edges: &[Count],
        reorder: bool,
    ) -> Option<GraphCommunicator> {
        let _ = reorder;
        graph::create_graph(self.core(), index, edges, std::panic::Location::caller()).or_raise()
    }

    /// The rank the calling rank would have in
    /// [`create_graph_communicator`](Self::create_graph_communicator) with
    /// this graph (`MPI_Graph_map`); `None` beyond it. Local.
    ///
    /// # Panics
    ///
    /// As `create_graph_communicator`.
    #[track_caller]
    fn graph_map(&self, index: &[Count], edges: &[Count]) -> Option<Rank> {
        graph::graph_map(self.core(), index, edges)
    }

    /// A communicator in which each rank names the ranks it receives from
    /// (`sources`) and sends to (`destinations`), with optional weights
    /// (`MPI_Dist_graph_create_adjacent`; `None` is `MPI_UNWEIGHTED`). Every
    /// edge must be listed at both of its ends. The ranks keep their order
    /// whatever `reorder` says. Collective.
    ///
    /// # Panics
    ///
    /// If a rank is outside the communicator, a weight list has another
    /// length than its ranks or a negative weight, or an edge is listed at
    /// one end only.
    #[track_caller]
    fn create_distributed_graph_communicator_adjacent(
        &self,
        sources: &[Rank],
        source_weights: Option<&[Count]>,
        destinations: &[Rank],
        destination_weights: Option<&[Count]>,
        reorder: bool,
    ) -> DistributedGraphCommunicator {
        let _ = reorder;
        let core = self.core();
        let site = std::panic::Location::caller();
        graph::adjacent(
            core,
            sources,
            source_weights,
            destinations,
            destination_weights,
        )
        .and_then(|agree| graph::create_dist_graph(core, agree, site))
        .or_raise()
    }

    /// A distributed-graph communicator from edges any rank may contribute
    /// (`MPI_Dist_graph_create`): for each `sources[i]`, `degrees[i]` edges
    /// to the next destinations, with optional weights (one per edge). Each
    /// rank's neighbours are listed in the order of the contributing ranks,
    /// then of their lists. The ranks keep their order. Collective; all
    /// ranks pass weights or none does.
    ///
    /// # Panics
    ///
    /// If a rank is outside the communicator, `degrees` has another length
    /// than `sources` or does not add up to `destinations.len()`, a weight
    /// list has another length than `destinations`, or ranks disagree on
    /// weights.
    #[track_caller]
    fn create_distributed_graph_communicator(
        &self,
        sources: &[Rank],
        degrees: &[Count],
        destinations: &[Rank],
        weights: Option<&[Count]>,
        reorder: bool,
    ) -> DistributedGraphCommunicator {
        let _ = reorder;
        let core = self.core();
        let site = std::panic::Location::caller();
        graph::contributed_edges(core.size(), sources, degrees, destinations, weights)
            .and_then(|agree| graph::create_dist_graph(core, agree, site))
            .or_raise()
    }

    /// The inter-communicator to the parents of the calling rank
    /// (`MPI_Comm_get_parent`, rsmpi's `Communicator::parent`): for a rank
    /// spawned by [`spawn_ranks`](Self::spawn_ranks), its side (the ranks
    /// spawned with it) facing the parent communicator's ranks; `None` for
    /// the ranks the job started with, and outside of a rank. The answer
    /// does not depend on `self` (MPI's is the process's).
    fn parent(&self) -> Option<InterCommunicator> {
        spawn::parent()
    }

    /// Spawns `size` new ranks into the running job, each running `body`
    /// (`MPI_Comm_spawn` with a closure instead of a program: ranks are
    /// coroutines of this program), with rank 0 as the root; see
    /// [`spawn_ranks_from`](Self::spawn_ranks_from).
    ///
    /// ```
    /// use myriad::topology::MergeOrder;
    /// use myriad::traits::*;
    ///
    /// let out = myriad::run(4, |universe| {
    ///     let world = universe.world();
    ///     let children = world
    ///         .spawn_ranks(3, |child| {
    ///             assert_eq!(child.world().size(), 3); // the children's own world
    ///             let all = child.parent().unwrap().merge(MergeOrder::High);
    ///             assert_eq!(all.rank(), 4 + child.world().rank());
    ///             all.barrier();
    ///             assert!(all.shrink(false).unwrap().is_none()); // retire
    ///         })
    ///         .unwrap();
    ///     let all = children.merge(MergeOrder::Low); // parents first
    ///     all.barrier();
    ///     all.shrink(true).unwrap().unwrap().size()
    /// })
    /// .unwrap();
    /// assert_eq!(out, [4, 4, 4, 4]); // the started ranks' results
    /// ```
    #[track_caller]
    fn spawn_ranks<F>(&self, size: usize, body: F) -> Result<InterCommunicator, Error>
    where
        F: Fn(Universe) + Send + Sync + 'static,
        Self: Sized,
    {
        spawn::spawn(
            self,
            0,
            size,
            Box::new(body),
            std::panic::Location::caller(),
        )
    }

    /// Spawns `size` new ranks into the running job, each running `body`
    /// (`MPI_Comm_spawn`). Collective over this (intra-)communicator, the
    /// parents; only the root's `size` and `body` count. Returns the
    /// inter-communicator whose remote group is the children.
    ///
    /// The children get world ranks after the job's last rank and run on
    /// the job's workers like its other ranks. A child's
    /// [`Universe::world`] is the children of this call (`MPI_COMM_WORLD`
    /// of the spawned job, ranks `0..size`), and its [`Universe::parent`]
    /// (or [`parent`](Self::parent)) the other side of the returned
    /// inter-communicator; [`InterCommunicator::merge`] gives parents and
    /// children one intra-communicator (`MPI_Intercomm_merge`). `run`
    /// returns the results of the ranks the job started with: a child's
    /// `body` returns nothing (it sends what it has to a parent). A child
    /// that panics fails the job, naming its world rank.
    ///
    /// # Errors
    ///
    /// At every parent, the same error: the job would exceed its rank limit
    /// ([`Runtime::max_ranks`](crate::Runtime::max_ranks),
    /// `MYRIAD_MAX_RANKS`) or the stack budget (`vm.max_map_count` with
    /// `mprotect` guards), or `size` is 0 (the job is left as it was and
    /// goes on); `root` is not a rank here; this is an inter-communicator;
    /// the job spans several processes, or this is an OS thread acting for
    /// a rank (`Error::Unsupported`).
    #[track_caller]
    fn spawn_ranks_from<F>(
        &self,
        root: Rank,
        size: usize,
        body: F,
    ) -> Result<InterCommunicator, Error>
    where
        F: Fn(Universe) + Send + Sync + 'static,
        Self: Sized,
    {
        spawn::spawn(
            self,
            root,
            size,
            Box::new(body),
            std::panic::Location::caller(),
        )
    }

    /// Shrinks the job by retiring ranks: collective over this
    /// communicator; ranks that pass `keep` get a new communicator of the
    /// survivors, in their order here, the others `None` (they go on to
    /// return from their closure: a retired rank ends when its closure
    /// does). The malleability counterpart of
    /// [`spawn_ranks`](Self::spawn_ranks); a split with extra checks.
    ///
    /// # Errors
    ///
    /// At every member, the same error if a retiring rank is the root of an
    /// immediate collective that has not completed (nothing is split);
    /// this is an inter-communicator; the caller is an OS thread acting for
    /// a rank (`Error::Unsupported`).
    #[track_caller]
    fn shrink(&self, keep: bool) -> Result<Option<SimpleCommunicator>, Error>
    where
        Self: Sized,
    {
        spawn::shrink(self, keep)
    }

    /// Bytes that packing `incount` elements of `datatype` takes
    /// (`MPI_Pack_size`; see [`crate::datatype::pack_size`]).
    #[track_caller]
    fn pack_size<Dt>(&self, incount: Count, datatype: &Dt) -> Count
    where
        Dt: crate::datatype::Datatype,
        Self: Sized,
    {
        crate::datatype::pack_size(incount, datatype)
    }

    /// Packs `inbuf` into a new byte vector (`MPI_Pack`; see
    /// [`crate::datatype::pack`]).
    #[track_caller]
    fn pack<Buf>(&self, inbuf: &Buf) -> Vec<u8>
    where
        Buf: ?Sized + crate::datatype::Buffer,
        Self: Sized,
    {
        crate::datatype::pack(inbuf)
    }

    /// Packs `inbuf` into `outbuf` at byte `position`, returning the
    /// position after it (`MPI_Pack`; see [`crate::datatype::pack_into`]).
    #[track_caller]
    fn pack_into<Buf>(&self, inbuf: &Buf, outbuf: &mut [u8], position: Count) -> Count
    where
        Buf: ?Sized + crate::datatype::Buffer,
        Self: Sized,
    {
        crate::datatype::pack_into(inbuf, outbuf, position)
    }

    /// Unpacks `outbuf`'s elements from `inbuf` at byte `position`,
    /// returning the position after them (`MPI_Unpack`; see
    /// [`crate::datatype::unpack_into`]).
    ///
    /// # Safety
    ///
    /// As [`crate::datatype::unpack_into`]: the bytes must be a valid
    /// packing of values of `outbuf`'s types.
    #[track_caller]
    unsafe fn unpack_into<Buf>(&self, inbuf: &[u8], outbuf: &mut Buf, position: Count) -> Count
    where
        Buf: ?Sized + crate::datatype::BufferMut,
        Self: Sized,
    {
        // SAFETY: the caller upholds `unpack_into`'s contract.
        unsafe { crate::datatype::unpack_into(inbuf, outbuf, position) }
    }
}

/// Something that has a communicator: communicator handles and processes
/// (rsmpi's `AsCommunicator`, the supertrait of the point-to-point and
/// rooted-collective traits).
pub trait AsCommunicator {
    /// The communicator type.
    type Out: Communicator;

    /// The communicator.
    fn as_communicator(&self) -> &Self::Out;
}

macro_rules! as_communicator_self {
    ($($ty:ty),*) => {
        $(impl AsCommunicator for $ty {
            type Out = Self;

            fn as_communicator(&self) -> &Self {
                self
            }
        })*
    };
}

as_communicator_self!(
    SimpleCommunicator,
    InterCommunicator,
    CartesianCommunicator,
    GraphCommunicator,
    DistributedGraphCommunicator,
    Process<'_>,
    AnyProcess<'_>
);

/// A communicator handle (rsmpi's `SimpleCommunicator`).
///
/// Cloning a handle gives another handle to the same communicator (no
/// collective call); the clone starts with a copy of this handle's
/// attributes.
#[derive(Debug, Clone)]
pub struct SimpleCommunicator {
    core: CommCore,
    attrs: Attributes,
}

impl SimpleCommunicator {
    pub(crate) fn from_core(core: CommCore) -> Self {
        SimpleCommunicator {
            core,
            attrs: Attributes::default(),
        }
    }

    /// The world communicator of the calling rank.
    ///
    /// # Panics
    ///
    /// Outside of any rank.
    #[track_caller]
    pub fn world() -> SimpleCommunicator {
        let core = sched::rank::with_current(|ctx| ctx.map(|ctx| Job::of(ctx).world(ctx.rank)));
        let Some(core) = core else {
            raise(Error::Comm(CommError::WorldOutsideRank));
        };
        SimpleCommunicator::from_core(core)
    }

    /// The communicator of the calling rank alone (`MPI_COMM_SELF`; rsmpi's
    /// `SimpleCommunicator::self_comm`): every call gives a handle to the
    /// same communicator (its messages and name are shared).
    ///
    /// # Panics
    ///
    /// Outside of any rank.
    #[track_caller]
    pub fn self_comm() -> SimpleCommunicator {
        let world = SimpleCommunicator::world();
        SimpleCommunicator::from_core(split::self_comm(&world.core))
    }
}

impl AsCore for SimpleCommunicator {
    fn core(&self) -> &CommCore {
        &self.core
    }

    fn attributes(&self) -> Option<&Attributes> {
        Some(&self.attrs)
    }

    fn attributes_mut(&mut self) -> Option<&mut Attributes> {
        Some(&mut self.attrs)
    }
}

impl Communicator for SimpleCommunicator {}

/// One rank of a communicator, as a destination or source (rsmpi's
/// `Process`).
#[derive(Debug, Clone, Copy)]
pub struct Process<'a> {
    pub(crate) core: &'a CommCore,
    pub(crate) rank: Rank,
}

impl Process<'_> {
    /// The process's rank in its communicator.
    pub fn rank(&self) -> Rank {
        self.rank
    }

    /// Whether this is the calling process (never on an
    /// inter-communicator, whose processes are remote).
    pub fn is_self(&self) -> bool {
        self.rank == self.core.rank() && !self.core.shared().is_inter()
    }
}

/// Every rank of a communicator as a source (rsmpi's `AnyProcess`).
#[derive(Debug, Clone, Copy)]
pub struct AnyProcess<'a> {
    pub(crate) core: &'a CommCore,
}

impl AsCore for Process<'_> {
    fn core(&self) -> &CommCore {
        self.core
    }
}

/// As in rsmpi, a process is also its communicator.
impl Communicator for Process<'_> {}

/// As in rsmpi, any process is also its communicator.
impl Communicator for AnyProcess<'_> {}

impl AsCore for AnyProcess<'_> {
    fn core(&self) -> &CommCore {
        self.core
    }
}
