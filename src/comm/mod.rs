//! Communicators: who talks to whom, in which context.
//!
//! A communicator handle ([`SimpleCommunicator`]) is one rank's view of a
//! communicator: the job, the communicator's shared state (context id, group,
//! name, barrier) and the rank's own rank in it. Handles are cheap (two `Arc`
//! clones); the shared state is created once per communicator, not per rank.
//!
//! Context ids keep the traffic of different communicators apart: each
//! communicator owns two, one for point-to-point messages and one for the
//! messages of its collectives.
//!
//! | file | question it answers |
//! |---|---|
//! | `mod.rs` | what a communicator is: `Members`, `CommShared`, the `Registry` of context ids and names, the rank's handle `CommCore`, the `Communicator` trait, `SimpleCommunicator`, `Process` |
//! | `split.rs` | how the ranks of a communicator agree on new ones (`duplicate`, `split_*`; the protocol is in its docs) |
//! | `group.rs` | groups: ordered sets of world ranks and their algebra |
//! | `cartesian.rs` | Cartesian topologies: coordinates, shifts, sub-grids |
//! | `attribute.rs` | attributes cached on a rank's communicator handle |

pub(crate) mod attribute;
mod cartesian;
mod group;
pub(crate) mod split;

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use crate::coll;
use crate::error::{raise, Error, OrRaise};
use crate::runtime::job::Job;
use crate::sched::{self, RankCtx};
use crate::{Count, Rank, Tag};

pub use attribute::{AnyCommunicator, CommAttribute};
use attribute::{AppNum, Attributes, UniverseSize};
pub use cartesian::{dims_create, CartesianCommunicator, CartesianLayout};
pub use group::{Group, GroupRelation, SystemGroup, UserGroup};
pub use split::{Color, Key};

/// Which world ranks a communicator (or a group) has, in its rank order.
///
/// Canonical: a table that lists world ranks `0..n` in order is always
/// stored as `World(n)` (see [`Members::from_vec`]), so two member lists are
/// equal exactly when their representations are.
#[derive(Debug, Clone)]
pub(crate) enum Members {
    /// Ranks `0..n` of the world, in order (no table).
    World(u32),
    /// An explicit table: rank `i` is world rank `ranks[i]`. Shared by the
    /// communicator and the groups taken from it.
    Ranks(Arc<[u32]>),
}

impl Members {
    /// The members listed in `ranks`, in that order.
    pub(crate) fn from_vec(ranks: Vec<u32>) -> Members {
        if ranks.iter().enumerate().all(|(i, &w)| i as u32 == w) {
            Members::World(ranks.len() as u32)
        } else {
            Members::Ranks(ranks.into())
        }
    }

    #[inline]
    pub(crate) fn size(&self) -> u32 {
        match self {
            Members::World(n) => *n,
            Members::Ranks(ranks) => ranks.len() as u32,
        }
    }

    #[inline]
    pub(crate) fn world_rank(&self, rank: Rank) -> u32 {
        match self {
            Members::World(_) => rank as u32,
            Members::Ranks(ranks) => ranks[rank as usize],
        }
    }

    /// The rank of world rank `world` among the members (a linear search
    /// for a table).
    pub(crate) fn position(&self, world: u32) -> Option<Rank> {
        match self {
            Members::World(n) => (world < *n).then_some(world as Rank),
            Members::Ranks(ranks) => ranks.iter().position(|&w| w == world).map(|i| i as Rank),
        }
    }

    /// The world ranks, in rank order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        let (n, table) = match self {
            Members::World(n) => (*n as usize, None),
            Members::Ranks(ranks) => (ranks.len(), Some(ranks)),
        };
        (0..n).map(move |i| table.map_or(i as u32, |t| t[i]))
    }

    /// Whether both list the same world ranks in the same order.
    pub(crate) fn same(&self, other: &Members) -> bool {
        match (self, other) {
            (Members::World(a), Members::World(b)) => a == b,
            (Members::Ranks(a), Members::Ranks(b)) => Arc::ptr_eq(a, b) || a == b,
            _ => false,
        }
    }

    /// Whether both hold the same world ranks, in any order.
    pub(crate) fn same_set(&self, other: &Members) -> bool {
        if self.size() != other.size() {
            return false;
        }
        let sorted = |m: &Members| {
            let mut v: Vec<u32> = m.iter().collect();
            v.sort_unstable();
            v
        };
        self.same(other) || sorted(self) == sorted(other)
    }
}

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

/// State shared by all ranks of one communicator.
#[derive(Debug)]
pub(crate) struct CommShared {
    /// Context id of point-to-point traffic; collectives use `context + 1`.
    pub(crate) context: u32,
    pub(crate) group: Members,
    /// Sequence numbers, checker, rounds, algorithm choices.
    pub(crate) coll: coll::State,
    /// `split_by_subgroup(_with_tag)` calls in progress (`split.rs`).
    pub(crate) group_meetings: split::GroupMeetings,
    /// The registry's name table, from which the communicator removes its
    /// name when it goes (`None` for the world, which lasts as long).
    names: Option<Names>,
}

impl CommShared {
    pub(crate) fn new(context: u32, group: Members, check_collectives: bool) -> CommShared {
        let size = group.size() as usize;
        CommShared {
            context,
            group,
            coll: coll::State::new(size, check_collectives, coll::Selection::from_env()),
            group_meetings: split::GroupMeetings::default(),
            names: None,
        }
    }
}

impl Drop for CommShared {
    fn drop(&mut self) {
        if let Some(names) = &self.names {
            names
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&self.context);
        }
    }
}

/// Communicator names by context id (the even id of each pair).
type Names = Arc<Mutex<HashMap<u32, String>>>;

/// Communicator bookkeeping of a job.
#[derive(Debug)]
pub(crate) struct Registry {
    next_context: AtomicU32,
    names: Names,
    /// Whether new communicators check their collective calls.
    pub(crate) check_collectives: bool,
    pub(crate) world: Arc<CommShared>,
    /// The world communicator's predefined attributes.
    universe_size: UniverseSize,
    appnum: AppNum,
}

impl Registry {
    pub(crate) fn new(ranks: u32, check_collectives: bool) -> Registry {
        let mut names = HashMap::new();
        names.insert(0, "MPI_COMM_WORLD".to_string());
        Registry {
            next_context: AtomicU32::new(2),
            names: Arc::new(Mutex::new(names)),
            check_collectives,
            world: Arc::new(CommShared::new(0, Members::World(ranks), check_collectives)),
            universe_size: UniverseSize::new(ranks),
            appnum: AppNum::new(0),
        }
    }

    /// Reserves a context id pair for a new communicator.
    pub(crate) fn new_context(&self) -> u32 {
        self.next_context.fetch_add(2, Ordering::Relaxed)
    }

    /// A new communicator of `members`, with its own context pair and
    /// `name` (forgotten when the communicator is dropped).
    pub(crate) fn create(&self, members: Members, name: &str) -> Arc<CommShared> {
        let context = self.new_context();
        self.set_name(context, name);
        let mut shared = CommShared::new(context, members, self.check_collectives);
        shared.names = Some(Arc::clone(&self.names));
        Arc::new(shared)
    }

    /// The name of the communicator owning `context` (either of its two ids).
    pub(crate) fn name(&self, context: u32) -> String {
        let base = context & !1;
        let names = self.names.lock().unwrap_or_else(|e| e.into_inner());
        match names.get(&base) {
            Some(name) => name.clone(),
            None => format!("#{}", base / 2),
        }
    }

    pub(crate) fn set_name(&self, context: u32, name: &str) {
        self.names
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(context & !1, name.to_string());
    }
}

/// One rank's handle to a communicator (internal; reached through
/// [`Communicator`]).
#[doc(hidden)]
#[derive(Clone)]
pub struct CommCore {
    job: Arc<Job>,
    shared: Arc<CommShared>,
    rank: Rank,
    world: u32,
}

impl fmt::Debug for CommCore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CommCore")
            .field("context", &self.shared.context)
            .field("rank", &self.rank)
            .field("size", &self.size())
            .finish()
    }
}

impl CommCore {
    pub(crate) fn new(job: Arc<Job>, shared: Arc<CommShared>, rank: Rank) -> CommCore {
        let world = shared.group.world_rank(rank);
        CommCore {
            job,
            shared,
            rank,
            world,
        }
    }

    #[inline]
    pub(crate) fn job(&self) -> &Job {
        &self.job
    }

    #[inline]
    pub(crate) fn shared(&self) -> &CommShared {
        &self.shared
    }

    /// This rank in the communicator.
    #[inline]
    pub(crate) fn rank(&self) -> Rank {
        self.rank
    }

    /// This rank in the world.
    #[inline]
    pub(crate) fn world(&self) -> u32 {
        self.world
    }

    #[inline]
    pub(crate) fn size(&self) -> Rank {
        self.shared.group.size() as Rank
    }

    /// The world rank of communicator rank `rank` (checked by the caller).
    #[inline]
    pub(crate) fn world_rank(&self, rank: Rank) -> u32 {
        self.shared.group.world_rank(rank)
    }

    #[inline]
    pub(crate) fn p2p_context(&self) -> u32 {
        self.shared.context
    }

    /// The context of the calling rank, checked to be this handle's rank.
    #[inline]
    pub(crate) fn caller(&self) -> Result<&'static RankCtx, Error> {
        match sched::rank::current() {
            Some(ctx) if std::ptr::eq(ctx.job, &*self.job) && ctx.rank == self.world => Ok(ctx),
            // An OS thread of the rank (thread levels Serialized, Multiple);
            // never a worker thread, which must not block in MPI.
            None if !sched::worker::on_worker_thread() => {
                sched::thread::context(&self.job, self.world)
            }
            other => Err(self.wrong_caller(other)),
        }
    }

    #[cold]
    fn wrong_caller(&self, ctx: Option<&RankCtx>) -> Error {
        let message = match ctx {
            None => format!(
                "an MPI operation on a communicator of rank {} was called outside of any \
                 rank, from a worker thread (a micro-task of a parallel region, which \
                 must not call blocking MPI operations)",
                self.world
            ),
            Some(ctx) if std::ptr::eq(ctx.job, &*self.job) => format!(
                "rank {} used a communicator handle that belongs to rank {}; handles must \
                 stay with the rank that created them",
                ctx.rank, self.world
            ),
            Some(ctx) => format!(
                "rank {} of one job used a communicator of another job (rank {})",
                ctx.rank, self.world
            ),
        };
        Error::Comm { message }
    }

    /// Checks that `rank` is in the communicator.
    pub(crate) fn check_rank(&self, op: &'static str, rank: Rank) -> Result<(), Error> {
        if rank < 0 || rank >= self.size() {
            return Err(Error::Rank {
                op,
                rank,
                size: self.size(),
            });
        }
        Ok(())
    }
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

    /// The process with rank `r`, as a destination or source.
    ///
    /// # Panics
    ///
    /// If `r` is not in `0..size()` (the message names both).
    #[track_caller]
    fn process_at_rank(&self, r: Rank) -> Process<'_> {
        let core = self.core();
        if let Err(err) = core.check_rank("process_at_rank", r) {
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
        core.job().comms.name(core.p2p_context())
    }

    /// Names the communicator (for error and deadlock reports). The name
    /// belongs to the communicator, so every rank sees it.
    fn set_name(&self, name: &str) {
        let core = self.core();
        core.job().comms.set_name(core.p2p_context(), name);
    }

    /// Compares two communicators (`MPI_Comm_compare`): the same one, the
    /// same ranks in the same order, the same ranks in another order, or
    /// different ranks.
    fn compare(&self, other: &dyn Communicator) -> CommunicatorRelation {
        let (a, b) = (self.core().shared(), other.core().shared());
        if std::ptr::eq(a, b) {
            CommunicatorRelation::Identical
        } else if a.group.same(&b.group) {
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

    /// Splits the communicator into parts whose ranks share memory
    /// (`MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)`). Every rank of a myriad
    /// job lives in one process, so this is one communicator of all ranks,
    /// ordered by `key` and then by rank. Collective.
    #[track_caller]
    fn split_shared(&self, key: Key) -> SimpleCommunicator {
        let core = self.core();
        let ask = split::Ask::new(split::Creation::Shared, Some(0), key);
        split::create(core, ask, std::panic::Location::caller())
            .or_raise()
            .map(SimpleCommunicator::from_core)
            .expect("every rank shares the process")
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
    /// the docs of `comm/split.rs`.
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
        UserGroup::from_comm(core.shared().group.clone(), core.world(), core.rank())
    }

    /// Whether this is an inter-communicator (myriad has none).
    fn test_inter(&self) -> bool {
        false
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
        let grid = cartesian::Grid::new("cartesian_map", dims, periods, core.size()).or_raise();
        (core.rank() < grid.points()).then_some(core.rank())
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
        let Some(ctx) = sched::rank::current() else {
            raise(Error::Comm {
                message: "SimpleCommunicator::world() was called outside of any rank".into(),
            });
        };
        // SAFETY: the job outlives the running rank; `Job::arc` recovers the
        // `Arc` that owns it.
        let job = unsafe { Job::arc_from_ptr(ctx.job) };
        let world = Arc::clone(&job.comms.world);
        SimpleCommunicator::from_core(CommCore::new(job, world, ctx.rank as Rank))
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

    /// Whether this is the calling process.
    pub fn is_self(&self) -> bool {
        self.rank == self.core.rank()
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

impl AsCore for AnyProcess<'_> {
    fn core(&self) -> &CommCore {
        self.core
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_are_canonical_and_names_go_with_their_communicator() {
        assert!(matches!(
            Members::from_vec(vec![0, 1, 2]),
            Members::World(3)
        ));
        let table = Members::from_vec(vec![2, 0, 1]);
        assert!(matches!(table, Members::Ranks(_)));
        assert_eq!(table.position(1), Some(2));
        assert!(table.same_set(&Members::World(3)) && !table.same(&Members::World(3)));

        let registry = Registry::new(4, true);
        let comm = registry.create(table, "split of MPI_COMM_WORLD");
        let context = comm.context;
        assert_eq!(registry.name(context + 1), "split of MPI_COMM_WORLD");
        drop(comm);
        assert_eq!(registry.name(context), format!("#{}", context / 2));
        assert_eq!(registry.name(0), "MPI_COMM_WORLD");
    }
}
