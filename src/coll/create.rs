//! How the ranks of a communicator agree on new communicators (layer L4:
//! creation meets in the parent's collective rounds, and the new
//! communicator's collective state is this layer's `State`).
//!
//! ## Collective creation (`duplicate`, `split_*`, `split_by_subgroup_collective`, Cartesian)
//!
//! Every rank of the parent calls, and the call is one of the parent's
//! collectives: it starts with [`begin`](super::begin) (kind `communicator_create`),
//! which gives it the parent's next sequence number (so it is ordered with
//! the parent's other collectives, blocking or immediate) and reports a rank
//! that called another collective instead. Then the ranks meet in the call's
//! [`Round`](super::round::Round):
//!
//! 1. each rank pushes its [`Ask`] (what it called, color, key, what must
//!    agree) into the round's `comm_create` meeting, then counts its arrival;
//! 2. the last rank to arrive takes the asks out (the lock is not held while
//!    it works, so waiters checking the meeting never spin on it), checks
//!    them ([`decide`]: same call everywhere, same grid, groups equal or
//!    disjoint and complete), sorts the ranks of each color by (key, parent
//!    rank), creates each new communicator with `Registry::create` (a
//!    context pair, the member table, a name), publishes the outcome (or
//!    the error, which every rank then returns) and wakes the others;
//! 3. every rank takes its own entry — the new communicator and its rank in
//!    it — and leaves.
//!
//! Each new communicator's context pair is derived from the parent's
//! context, the call's sequence number and the new communicator's lowest
//! world rank (`comm/context.rs`, [`Derivation::Collective`]): every member
//! knows all three, so every process computes the same pair. A pair a live
//! communicator already holds (a hash collision) fails the call for every
//! rank with an error that says so.
//!
//! No second phase is needed before leaving: the outcome lives in the round,
//! which every rank holds an `Arc` to until it has picked, and no rank's
//! buffer is read by another (the asks are moved into the round).
//! The last arrival does O(n log n) work (the sort), every other rank O(1)
//! besides its push, lock and wake-up.
//!
//! ## Across processes
//!
//! A round lives in one process's memory; on a parent whose members live
//! in several processes (its locality spans more than one) the asks travel
//! instead, and there is no last arrival: every rank decides.
//!
//! 1. each rank takes the parent's next sequence number and checks the
//!    call (the checker, as any message-based collective);
//!    `split_by_process` sets its color to its process's index
//!    (`split_shared` and `split_by_host` come with their host's index);
//! 2. it encodes its ask (`create/wire.rs`) and two all-gathers
//!    (recursive doubling, in the parent's collective context with the
//!    call's tag) give every rank every ask: the lengths, then the asks
//!    padded to the longest;
//! 3. every rank runs [`decide`] on the same asks: the same checks, so the
//!    same error at every rank, in every process; then it makes only its
//!    own class's communicator. Its members in this process share one
//!    (`Registry::share`: the first makes it, with the collision check of
//!    `Registry::create`; the last takes it out of the table).
//!
//! The context pair is derived as in one process, so every process makes
//! the same pair without a further round. The collision check is per
//! process: a pair held by a live communicator in one process fails the
//! creation there only (its ranks raise the error, which ends the job),
//! the members elsewhere get the communicator. Every rank decodes and sorts
//! all n asks (O(n log n) at every rank instead of at the last one) and
//! receives O(n · longest ask) bytes. A rank of another process is named in
//! errors with this rank's call site (sites do not travel, `wire.rs`).
//! Creations on an inter-communicator whose side spans processes, and
//! inter-communicator sides over such a communicator, are
//! `Error::Unsupported`: an inter-communicator's collective context
//! reaches the other side.
//!
//! `MPI_Comm_create`'s groups are reduced to a split: a member of the group
//! it passes uses the group's lowest world rank as its color (groups must be
//! equal or disjoint, so that names one group) and its rank in the group as
//! its key, so the new communicator has the group's order. Each rank also
//! deposits the group's size and a 64-bit digest of its member list; the
//! last rank checks that every rank of a color passed the same group and
//! that all of its members did.
//!
//! ## Group-collective creation (`split_by_subgroup(_with_tag)`, `MPI_Comm_create_group`)
//!
//! Only the group's members call, so the parent's sequence numbers (which
//! every parent rank advances together) cannot be used, nor its rounds.
//! Instead the parent keeps a table of *group meetings* keyed by
//! `(tag, group size, digest of the member list)`:
//!
//! 1. a member takes the parent's table lock, finds or inserts the meeting
//!    for its key and counts its arrival; the member that completes the
//!    count removes the meeting from the table, still under the lock;
//! 2. that last member creates the communicator (the group's ranks, in the
//!    group's order) and publishes it (or the error of its creation) in the
//!    meeting, then wakes the members parked on it; a non-last member parks until it is published
//!    (`Round`'s no-lost-wake-up protocol: register, re-check, park);
//! 3. each member takes its rank in the group as its new rank.
//!
//! A meeting leaves the table once all its members arrived, and none of them
//! can return before that, so a member's *next* call with the same group
//! and tag meets in a fresh meeting: calls with the same key pair up in
//! program order, as MPI requires. Calls whose groups overlap must be made
//! in the same order by every member, or carry different tags (MPI's rule);
//! otherwise they wait for each other and the deadlock report names them.
//! A rank outside the group it passes returns `None` at once (a local call).
//! Across processes, each process's members meet in its memory (a meeting
//! counts the group's members in this process) and its last one creates
//! this process's share of the communicator: the context below needs no
//! message between processes. Members that pass unequal groups then meet
//! under different keys and wait for ever (reported as a deadlock), as in
//! one process.
//! The new communicator's context pair is derived from the parent's
//! context, the key, and how many meetings of that key completed before on
//! the parent (`comm/context.rs`, [`Derivation::Group`]; counted under the
//! table lock by the member that completes a meeting): calls with one key
//! come in the same order at every member, so every member — in any
//! process — counts the same.
//!
//! ## Topologies and inter-communicators
//!
//! Graph creation is a split keeping the first `nnodes` ranks whose asks
//! must carry equal graphs; a distributed graph keeps every rank, and the
//! last arrival checks that every edge is listed at both ends (or sorts
//! contributed edges out per rank). Either sets the new communicator's
//! topology (`comm/topo.rs`), as do Cartesian creations and duplicates.
//!
//! One side of a new inter-communicator is a collective creation over its
//! local communicator whose asks all carry the same [`InterPlan`] (context
//! pairs derived in `communicator/inter.rs`). On an inter-communicator,
//! `duplicate` runs over each side's own group and derives the other
//! side's new pair too (the sides' sequence numbers are equal); `merge`
//! first swaps the sides' `high` flags between their ranks 0 (an exchange
//! in the inter-communicator's collective pairs), then each side's last
//! arrival orders the groups and makes the merged communicator, or takes
//! the one the other side made (`Registry::meet`: one collective state for
//! both). When the other side has no member in this process, its process
//! makes its own merged communicator from the same values, and nothing is
//! kept for it here.
//!
//! Identifying the group by a digest instead of the whole list keeps a
//! meeting's key small; two different groups of the same size, tag and
//! 64-bit digest would be merged (probability 2^-64 per pair).

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::panic::Location;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use super::check::Signature;
use super::{Algorithm, Collective, CommCore, Selection, State};
use crate::comm::context::{self, Creation as Derivation};
use crate::comm::grid::Grid;
use crate::comm::topo::{Adjacency, Graph, Topo};
use crate::comm::{members_of, CommShared, Group, Members, Registry, Remote};
use crate::datatype::copy::Layout;
use crate::error::{ArgError, CollectiveError, Error};
use crate::identity::WorldRank;
use crate::sched::{self, WaitInfo, WaitOp};
use crate::sync::spin::SpinLock;
use crate::{Count, Rank, Tag};

mod wire;

/// Which creation call a rank made (they must all make the same).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Creation {
    Duplicate,
    Split,
    Shared,
    Subgroup,
    Cartesian,
    CartesianSub,
    /// A graph topology (`MPI_Graph_create`).
    Graph,
    /// A distributed graph topology (`MPI_Dist_graph_create(_adjacent)`).
    DistGraph,
    /// One side of a new inter-communicator, over its local communicator.
    InterSide,
    /// The merge of an inter-communicator (each side over its own side).
    Merge,
    /// `split_by_host`: the color is the process's host.
    Host,
    /// `split_by_process`: the color is the process.
    Process,
}

impl Creation {
    fn call(self) -> &'static str {
        match self {
            Creation::Duplicate => "duplicate",
            Creation::Split => "split_by_color",
            Creation::Shared => "split_shared",
            Creation::Subgroup => "split_by_subgroup_collective",
            Creation::Cartesian => "create_cartesian_communicator",
            Creation::CartesianSub => "CartesianCommunicator::subgroup",
            Creation::Graph => "create_graph_communicator",
            Creation::DistGraph => "create_distributed_graph_communicator",
            Creation::InterSide => "InterCommunicator::create",
            Creation::Merge => "InterCommunicator::merge",
            Creation::Host => "split_by_host",
            Creation::Process => "split_by_process",
        }
    }

    /// How new communicators are named: "<prefix> of <parent>".
    fn prefix(self) -> &'static str {
        match self {
            Creation::Duplicate => "dup",
            Creation::Split | Creation::Shared | Creation::Host | Creation::Process => "split",
            Creation::Subgroup => "subgroup",
            Creation::Cartesian => "cartesian",
            Creation::CartesianSub => "cartesian sub-grid",
            Creation::Graph => "graph",
            Creation::DistGraph => "distributed graph",
            Creation::InterSide => "inter-communicator",
            Creation::Merge => "merge",
        }
    }
}

/// What, besides the call, the ranks must agree on.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Agree {
    Nothing,
    /// The group a rank passed: every rank of one color passed the same.
    Group {
        size: u32,
        digest: u64,
    },
    /// A Cartesian grid: every rank passed the same.
    Grid(Arc<Grid>),
    /// The dimensions a Cartesian sub-grid keeps: every rank passed the same.
    Retain(Box<[bool]>),
    /// A graph: every rank passed the same.
    Graph(Arc<Graph>),
    /// One rank's own edges of a distributed graph (`_adjacent`).
    Adjacent(Arc<Adjacency>),
    /// Edges a rank contributes to a distributed graph (any edges of any
    /// ranks), and whether it passed weights.
    Edges(Arc<Vec<(Rank, Rank, Count)>>, bool),
    /// One side of an inter-communicator: its context pair and the remote
    /// side, which every rank of the side computed from what its leader
    /// received.
    Inter(Arc<InterPlan>),
    /// A merge: whether this rank's side goes last (`high`), and, in the
    /// ask of the side's rank 0, what the other side said.
    Merge {
        high: bool,
        remote_high: Option<bool>,
    },
}

/// One side of a new inter-communicator: its context pair and the remote
/// side (derived in `communicator/inter.rs`).
#[derive(Debug)]
pub(crate) struct InterPlan {
    pub(crate) context: u64,
    pub(crate) remote: Remote,
}

impl PartialEq for InterPlan {
    fn eq(&self, other: &InterPlan) -> bool {
        self.context == other.context
            && self.remote.context == other.remote.context
            && self.remote.members.same(&other.remote.members)
    }
}

/// What one rank asks for in a collective creation.
#[derive(Debug)]
pub(crate) struct Ask {
    creation: Creation,
    /// `None`: the rank joins no new communicator.
    color: Option<i32>,
    key: i32,
    agree: Agree,
    /// Filled in by [`create`].
    rank: Rank,
    site: &'static Location<'static>,
}

impl Ask {
    pub(crate) fn new(creation: Creation, color: Option<i32>, key: i32) -> Ask {
        Ask {
            creation,
            color,
            key,
            agree: Agree::Nothing,
            rank: 0,
            site: Location::caller(),
        }
    }

    pub(crate) fn agreeing(mut self, agree: Agree) -> Ask {
        self.agree = agree;
        self
    }
}

/// A new communicator and a rank in it.
type Placed = (Arc<CommShared<State>>, Rank);

/// The meeting of one collective creation, kept in its round.
#[derive(Debug, Default)]
pub(crate) struct Meeting {
    asks: Vec<Ask>,
    /// Published by the last rank to arrive: per parent rank, its new
    /// communicator (taken by that rank), or the error every rank returns.
    outcome: Option<Result<Vec<Option<Placed>>, Error>>,
}

/// Runs a collective creation on the parent `core`: every rank of it calls
/// with its `ask`; returns the calling rank's new communicator, if any.
pub(crate) fn create(
    core: &CommCore,
    mut ask: Ask,
    site: &'static Location<'static>,
) -> Result<Option<CommCore>, Error> {
    ask.rank = core.rank();
    ask.site = site;
    let inter = core.shared().is_inter();
    if core.shared().locality.processes() > 1 {
        if inter {
            return Err(spanning_inter(core, ask.creation.call()));
        }
        return create_spanning(core, ask);
    }
    match ask.creation {
        Creation::Duplicate | Creation::Merge if inter => {}
        Creation::Merge => {
            return Err(Error::Arg(ArgError::WrongKindOfCommunicator {
                op: Creation::Merge.call(),
                comm: core.name(),
                needs: "an inter-communicator",
            }))
        }
        creation if inter => {
            return Err(Error::unsupported(format!(
                "{} on an inter-communicator ({})",
                creation.call(),
                core.name()
            )))
        }
        _ => {}
    }
    let signature = Signature::new(Collective::CommCreate, None, None);
    let call = super::begin(core, signature, Algorithm::Auto, site)?;
    // A merge needs the other side's `high`: the sides' ranks 0 swap theirs
    // in the inter-communicator's collective pairs, tagged by the call's
    // sequence number (equal on both sides).
    if let Agree::Merge { high, remote_high } = &mut ask.agree {
        if core.rank() == 0 {
            let mine = u8::from(*high);
            let mut theirs = 0u8;
            let mut exchange = super::exchange::Exchange::new(&call);
            exchange.recv(0, &Layout::of_mut(&mut theirs))?;
            exchange.send(0, &Layout::of(&mine));
            exchange.wait()?;
            *remote_high = Some(theirs != 0);
        }
    }
    let rounds = &core.coll().rounds;
    // Checked in the round too: the shared-memory collectives check their
    // calls there only, so this is where a rank that called one of them
    // instead is caught.
    let round = rounds.join_checked(&call)?;
    round.comm_create.lock().asks.push(ask);
    let waited = if round.arrive(&call) {
        let asks = std::mem::take(&mut round.comm_create.lock().asks);
        let outcome = decide(core, call.seq, asks, None);
        round.comm_create.lock().outcome = Some(outcome);
        round.wake_all(&call);
        Ok(())
    } else {
        round
            .wait(&call, || round.comm_create.lock().outcome.is_some())
            .map_err(Error::from)
    };
    let picked = waited.and_then(|()| {
        let mut meeting = round.comm_create.lock();
        match meeting.outcome.as_mut() {
            Some(Ok(placed)) => Ok(placed[core.rank() as usize].take()),
            Some(Err(err)) => Err(err.clone()),
            None => unreachable!("the outcome is published before anyone is woken"),
        }
    });
    rounds.leave(&call, round);
    Ok(picked?.map(|(shared, rank)| core.with_shared(shared, rank)))
}

/// [`create`] on a communicator whose members live in several processes
/// (module docs, "Across processes"): the asks travel by two all-gathers in
/// the parent's collective context, then every rank decides on all of them
/// and makes (or, in its process, shares) its own new communicator.
fn create_spanning(core: &CommCore, mut ask: Ask) -> Result<Option<CommCore>, Error> {
    let site = ask.site;
    let rank = core.rank();
    if ask.creation == Creation::Process {
        // The process's index names its part.
        let processes = crate::p2p::Node::p2p(core.job()).processes();
        ask.color = Some(processes.process_of(core.world()).get() as i32);
    }
    let ctx = core.caller()?;
    let state = core.coll();
    let seq = state.seq[rank as usize].fetch_add(1, Ordering::Relaxed);
    let algorithm = Algorithm::RecursiveDoubling;
    let mut signature = Signature::new(Collective::CommCreate, None, None);
    signature.algorithm = Some(algorithm);
    // This process's members check in here (as in `coll::begin_as`).
    state.checker.check(
        seq,
        core.shared().locality.local_count() as u32,
        rank,
        signature,
        site,
        &state.rounds,
    )?;
    let call = super::Call {
        comm: core,
        ctx,
        seq,
        kind: Collective::CommCreate,
        algorithm,
        site,
        signature,
    };
    let mine = wire::encode(&ask);
    let n = core.size() as usize;
    let mut lengths = vec![0u64; n];
    super::allgather::allgather(
        &call,
        &Layout::of(&(mine.len() as u64)),
        &Layout::of_mut(&mut lengths[..]),
    )?;
    let width = lengths.iter().copied().max().unwrap_or(0) as usize;
    let mut padded = mine;
    padded.resize(width, 0);
    let mut all = vec![0u8; width * n];
    super::allgather::allgather(
        &call,
        &Layout::of(&padded[..]),
        &Layout::of_mut(&mut all[..]),
    )?;
    let mut own = Some(ask);
    let asks = (0..n)
        .map(|r| match own.take_if(|_| r == rank as usize) {
            Some(ask) => Ok(ask),
            None => {
                let bytes = &all[r * width..][..lengths[r] as usize];
                wire::decode(bytes, r as Rank, site)
            }
        })
        .collect::<Result<Vec<Ask>, Error>>()?;
    let mut placed = decide(core, seq, asks, Some(rank))?;
    Ok(placed[rank as usize]
        .take()
        .map(|(shared, new_rank)| core.with_shared(shared, new_rank)))
}

/// The error of a creation on an inter-communicator whose side spans
/// processes: its collective context reaches the other side, so the asks
/// of one side cannot travel there.
#[cold]
fn spanning_inter(core: &CommCore, call: &'static str) -> Error {
    Error::Unsupported {
        what: format!(
            "{call} on the inter-communicator {}, whose side spans {} processes \
             (inter-communicator creations across processes are not implemented)",
            core.name(),
            core.shared().locality.processes()
        ),
    }
}

/// The last rank's work: checks the asks and creates the communicators.
/// With `me` (a creation across processes), every rank decides: all
/// checks run as for the last rank, so every rank returns the same error,
/// but only `me`'s communicator is made, shared by its members in this
/// process (`Registry::share`).
fn decide(
    parent: &CommCore,
    seq: u32,
    mut asks: Vec<Ask>,
    me: Option<Rank>,
) -> Result<Vec<Option<Placed>>, Error> {
    let parent_name = parent.name();
    asks.sort_unstable_by_key(|a| a.rank);
    let first = &asks[0];
    for ask in &asks[1..] {
        if ask.creation != first.creation {
            return Err(Error::Collective(CollectiveError::CreationMismatch {
                comm: parent_name,
                ranks: (first.rank, ask.rank),
                calls: (first.creation.call(), ask.creation.call()),
                sites: (first.site, ask.site),
            }));
        }
        let compared = matches!(
            first.agree,
            Agree::Grid(_) | Agree::Retain(_) | Agree::Graph(_)
        );
        if compared && ask.agree != first.agree {
            return Err(Error::Arg(ArgError::CreationArgs {
                call: first.creation.call(),
                comm: parent_name,
                ranks: (first.rank, ask.rank),
                passed: (describe(&first.agree), describe(&ask.agree)),
                sites: (first.site, ask.site),
            }));
        }
    }
    let creation = first.creation;
    match creation {
        Creation::InterSide | Creation::Merge if me.is_some() => {
            return Err(spanning_inter(parent, creation.call()))
        }
        Creation::InterSide => return decide_inter(parent, asks),
        Creation::Merge => return decide_merge(parent, seq, asks),
        _ => {}
    }
    let dist = match creation {
        Creation::DistGraph => Some(dist_graph(parent, &asks)?),
        _ => None,
    };
    let mut placed: Vec<Option<Placed>> = (0..asks.len()).map(|_| None).collect();
    let mut joining: Vec<&Ask> = asks.iter().filter(|a| a.color.is_some()).collect();
    joining.sort_by_key(|a| (a.color, a.key, a.rank));
    let parent_members = &parent.shared().group;
    let name = format!("{} of {parent_name}", creation.prefix());
    for class in joining.chunk_by(|a, b| a.color == b.color) {
        if let Agree::Group { size, digest } = class[0].agree {
            check_group_class(class, size, digest, &parent_name)?;
        }
        if me.is_some_and(|me| class.iter().all(|a| a.rank != me)) {
            continue;
        }
        // The parent's own order (a duplicate, or a split that keeps
        // everyone in order) shares the parent's member table.
        let members = if class.len() == parent_members.size() as usize
            && class.iter().enumerate().all(|(i, a)| a.rank == i as Rank)
        {
            parent_members.clone()
        } else {
            Members::from_vec(
                class
                    .iter()
                    .map(|a| parent_members.world_rank(a.rank))
                    .collect(),
            )
        };
        let lowest = members.iter().min().unwrap_or(0);
        // The duplicate of an inter-communicator's side faces the duplicate
        // of the other side, whose pair that side derives the same way.
        let remote = parent.shared().remote().map(|remote| Remote {
            context: context::derive(
                remote.context,
                Derivation::Collective {
                    seq,
                    lowest: remote.members.iter().min().unwrap_or(0),
                },
            ),
            members: remote.members,
        });
        let context = context::derive(parent.p2p_context(), Derivation::Collective { seq, lowest });
        let shared = match me {
            None => new_comm(parent, context, members, remote, &name)?,
            Some(_) => parent.job().comms().share(context, &members, || {
                new_comm(parent, context, members.clone(), remote, &name)
            })?,
        };
        let topology = match (&class[0].agree, creation) {
            (Agree::Grid(grid), _) => Some(Topo::Cartesian(Arc::clone(grid))),
            (Agree::Graph(graph), _) => Some(Topo::Graph(Arc::clone(graph))),
            (_, Creation::DistGraph) => dist.clone(),
            (_, Creation::Duplicate) => parent.shared().topology.get().cloned(),
            _ => None,
        };
        if let Some(topology) = topology {
            let _ = shared.topology.set(topology);
        }
        for (new_rank, ask) in class.iter().enumerate() {
            placed[ask.rank as usize] = Some((Arc::clone(&shared), new_rank as Rank));
        }
    }
    Ok(placed)
}

/// The distributed graph the asks describe (every rank of the parent
/// joins, in its order): each rank's own edges, checked to agree at both
/// ends, or the edges any rank contributed, sorted out per rank.
fn dist_graph(parent: &CommCore, asks: &[Ask]) -> Result<Topo, Error> {
    const OP: &str = "create_distributed_graph_communicator";
    let first = &asks[0];
    let n = asks.len();
    let mismatch = |other: &Ask| {
        Error::Arg(ArgError::CreationArgs {
            call: Creation::DistGraph.call(),
            comm: parent.name(),
            ranks: (first.rank, other.rank),
            passed: (describe(&first.agree), describe(&other.agree)),
            sites: (first.site, other.site),
        })
    };
    let table: Vec<Adjacency> = match &first.agree {
        Agree::Adjacent(_) => {
            let mut table = Vec::with_capacity(n);
            for ask in asks {
                let Agree::Adjacent(adj) = &ask.agree else {
                    return Err(mismatch(ask));
                };
                table.push(Adjacency::clone(adj));
            }
            // Every edge must be listed at both ends, as often.
            let mut out: Vec<(Rank, Rank)> = Vec::new();
            let mut inn: Vec<(Rank, Rank)> = Vec::new();
            for (r, adj) in table.iter().enumerate() {
                out.extend(adj.destinations.iter().map(|&d| (r as Rank, d)));
                inn.extend(adj.sources.iter().map(|&s| (s, r as Rank)));
            }
            out.sort_unstable();
            inn.sort_unstable();
            if out != inn {
                let (from, to) = out
                    .iter()
                    .zip(&inn)
                    .find(|(a, b)| a != b)
                    .map(|(a, b)| *a.min(b))
                    .or_else(|| out.get(inn.len()).or(inn.get(out.len())).copied())
                    .expect("the lists differ");
                return Err(Error::Arg(ArgError::Graph {
                    op: OP,
                    problem: crate::error::GraphProblem::Inconsistent { from, to },
                }));
            }
            table
        }
        Agree::Edges(_, weighted) => {
            let mut table = vec![Adjacency::default(); n];
            if *weighted {
                for adj in &mut table {
                    adj.source_weights = Some(Vec::new());
                    adj.destination_weights = Some(Vec::new());
                }
            }
            for ask in asks {
                let Agree::Edges(edges, w) = &ask.agree else {
                    return Err(mismatch(ask));
                };
                if w != weighted {
                    return Err(mismatch(ask));
                }
                for &(from, to, weight) in edges.iter() {
                    let (f, t) = (&mut table[from as usize], to);
                    f.destinations.push(t);
                    if let Some(ws) = &mut f.destination_weights {
                        ws.push(weight);
                    }
                    let t = &mut table[to as usize];
                    t.sources.push(from);
                    if let Some(ws) = &mut t.source_weights {
                        ws.push(weight);
                    }
                }
            }
            table
        }
        _ => unreachable!("distributed graph asks carry edges"),
    };
    Ok(Topo::DistGraph(
        table.into_iter().map(std::sync::OnceLock::from).collect(),
    ))
}

/// `MPI_COMM_SELF` of the rank whose world handle is `world`.
pub(crate) fn self_comm(world: &CommCore) -> CommCore {
    let me = world.world().get();
    let registry = world.job().comms();
    let context = context::derive(context::WORLD, Derivation::SelfComm { world: me });
    let state = State::new(1, registry.check_collectives(), Selection::from_env());
    let shared =
        registry.predefined_comm(context, Members::from_vec(vec![me]), "MPI_COMM_SELF", state);
    world.with_shared(shared, 0)
}

/// The world communicator of a job of `ranks` ranks.
pub(crate) fn world(registry: &Registry, ranks: u32) -> Arc<CommShared<State>> {
    let state = State::new(
        ranks as usize,
        registry.check_collectives(),
        Selection::from_env(),
    );
    registry.world(ranks, state)
}

/// A new communicator of `members` made from `parent` with the context
/// pair `context` (derived by the creating call, `comm/context.rs`): its
/// collective state, its name; with `remote`, one side of an
/// inter-communicator.
fn new_comm(
    parent: &CommCore,
    context: u64,
    members: Members,
    remote: Option<Remote>,
    name: &str,
) -> Result<Arc<CommShared<State>>, Error> {
    standalone(parent.job().comms(), context, members, remote, name)
}

/// A communicator one rank makes for ranks that do not run yet (the world
/// of spawned ranks, their side of the inter-communicator to their
/// parents): registered and given its collective state as in a collective
/// creation, without a meeting.
pub(crate) fn standalone(
    registry: &Registry,
    context: u64,
    members: Members,
    remote: Option<Remote>,
    name: &str,
) -> Result<Arc<CommShared<State>>, Error> {
    let state = State::new(
        members.size() as usize,
        registry.check_collectives(),
        Selection::from_env(),
    );
    registry.create(context, members, remote, name, state)
}

/// One side of a new inter-communicator over its local communicator
/// `local`: every rank of `local` calls with the same `plan`.
pub(crate) fn create_inter(
    local: &CommCore,
    plan: InterPlan,
    site: &'static Location<'static>,
) -> Result<CommCore, Error> {
    let ask = Ask::new(Creation::InterSide, Some(0), 0).agreeing(Agree::Inter(Arc::new(plan)));
    Ok(create(local, ask, site)?.expect("every rank of the local side joins"))
}

/// The merge of the inter-communicator side `side` (`MPI_Intercomm_merge`):
/// every rank of both sides calls, each side with one `high`.
pub(crate) fn merge(
    side: &CommCore,
    high: bool,
    site: &'static Location<'static>,
) -> Result<CommCore, Error> {
    let ask = Ask::new(Creation::Merge, Some(0), 0).agreeing(Agree::Merge {
        high,
        remote_high: None,
    });
    Ok(create(side, ask, site)?.expect("every rank of both sides joins a merge"))
}

/// The last rank's work in [`create_inter`]: the side's communicator.
fn decide_inter(local: &CommCore, asks: Vec<Ask>) -> Result<Vec<Option<Placed>>, Error> {
    let first = &asks[0];
    let Agree::Inter(plan) = &first.agree else {
        unreachable!("InterCommunicator::create asks carry their plan")
    };
    if let Some(other) = asks.iter().find(|a| a.agree != first.agree) {
        return Err(Error::Arg(ArgError::CreationArgs {
            call: Creation::InterSide.call(),
            comm: local.name(),
            ranks: (first.rank, other.rank),
            passed: (describe(&first.agree), describe(&other.agree)),
            sites: (first.site, other.site),
        }));
    }
    let name = format!("inter-communicator of {}", local.name());
    let members = local.shared().group.clone();
    let shared = new_comm(
        local,
        plan.context,
        members,
        Some(plan.remote.clone()),
        &name,
    )?;
    Ok(asks
        .iter()
        .map(|a| Some((Arc::clone(&shared), a.rank)))
        .collect())
}

/// The last rank's work in [`merge`] on one side: orders the two groups and
/// makes (or, when the other side came first, takes) the merged
/// communicator.
fn decide_merge(side: &CommCore, seq: u32, asks: Vec<Ask>) -> Result<Vec<Option<Placed>>, Error> {
    let first = &asks[0];
    let (Agree::Merge { high, remote_high }, Some(remote)) = (&first.agree, side.shared().remote())
    else {
        unreachable!("merge asks carry their order, on an inter-communicator")
    };
    let high_of = |a: &Ask| matches!(a.agree, Agree::Merge { high: true, .. });
    if let Some(other) = asks.iter().find(|a| high_of(a) != *high) {
        return Err(Error::Arg(ArgError::CreationArgs {
            call: Creation::Merge.call(),
            comm: side.name(),
            ranks: (first.rank, other.rank),
            passed: (describe(&first.agree), describe(&other.agree)),
            sites: (first.site, other.site),
        }));
    }
    let remote_high = remote_high.expect("rank 0's ask carries the other side's order");
    let local = &side.shared().group;
    let local_first = match (*high, remote_high) {
        (false, true) => true,
        (true, false) => false,
        // Both sides asked for the same: the side with the lowest world
        // rank goes first (either side decides the same).
        _ => local.iter().min() < remote.members.iter().min(),
    };
    let (low, high_group) = if local_first {
        (local, &remote.members)
    } else {
        (&remote.members, local)
    };
    let members = Members::from_vec(low.iter().chain(high_group.iter()).collect());
    let own = side.p2p_context();
    let (lower, higher) = (own.min(remote.context), own.max(remote.context));
    let context = context::derive(lower, Derivation::Merge { seq, high: higher });
    let name = format!("merge of {}", side.name());
    let registry = side.job().comms();
    // The other side's decider is in this process if any of its members is
    // (a side spanning processes never gets here).
    let processes = crate::p2p::Node::p2p(side.job()).processes();
    let partner = remote
        .members
        .iter()
        .any(|w| processes.local(WorldRank::new(w)).is_some());
    let shared = registry.meet(context, partner, || {
        new_comm(side, context, members.clone(), None, &name)
    })?;
    if !shared.group.same(&members) {
        unreachable!("both sides of a merge order the groups the same way");
    }
    let offset = if local_first { 0 } else { low.size() as Rank };
    Ok(asks
        .iter()
        .map(|a| Some((Arc::clone(&shared), offset + a.rank)))
        .collect())
}

/// Checks that the ranks of one color of `split_by_subgroup_collective`
/// passed one group and are all of its members.
fn check_group_class(class: &[&Ask], size: u32, digest: u64, parent: &str) -> Result<(), Error> {
    let first = class[0];
    if let Some(other) = class
        .iter()
        .find(|a| a.agree != (Agree::Group { size, digest }))
    {
        return Err(Error::Arg(ArgError::GroupsOverlap {
            comm: parent.into(),
            ranks: (first.rank, other.rank),
            sites: (first.site, other.site),
        }));
    }
    if class.len() != size as usize {
        let ranks: Vec<Rank> = class.iter().map(|a| a.rank).collect();
        return Err(Error::Arg(ArgError::GroupIncomplete {
            comm: parent.into(),
            ranks,
            size: size as usize,
            site: first.site,
        }));
    }
    Ok(())
}

fn describe(agree: &Agree) -> String {
    match agree {
        Agree::Nothing => "nothing".into(),
        Agree::Group { size, .. } => format!("a group of {size} ranks"),
        Agree::Grid(grid) => grid.to_string(),
        Agree::Retain(retain) => format!("retained dimensions {retain:?}"),
        Agree::Graph(graph) => format!(
            "a graph of index {:?} and edges {:?}",
            graph.index, graph.edges
        ),
        Agree::Adjacent(_) => "its adjacent edges".into(),
        Agree::Edges(_, true) => "weighted edges".into(),
        Agree::Edges(_, false) => "unweighted edges".into(),
        Agree::Inter(plan) => format!(
            "a remote group of {} ranks (context {:#x})",
            plan.remote.members.size(),
            plan.remote.context
        ),
        Agree::Merge { high: true, .. } => "high = true".into(),
        Agree::Merge { high: false, .. } => "high = false".into(),
    }
}

/// A digest of a member list (equal lists have equal digests; the
/// representation is canonical, see [`Members`]).
pub(crate) fn digest(members: &Members) -> u64 {
    let mut h = DefaultHasher::new();
    match members {
        Members::World(n) => (0u8, *n).hash(&mut h),
        Members::Ranks(ranks) => (1u8, &ranks[..]).hash(&mut h),
    }
    h.finish()
}

/// Checks that every member of a group is in the communicator.
fn check_subset(core: &CommCore, members: &Members, op: &'static str) -> Result<(), Error> {
    let outside = match &core.shared().group {
        Members::World(n) => members.iter().find(|&w| w >= *n),
        Members::Ranks(parent) => {
            let set: HashSet<u32> = parent.iter().copied().collect();
            members.iter().find(|w| !set.contains(w))
        }
    };
    match outside {
        None => Ok(()),
        Some(w) => Err(Error::Arg(ArgError::NotSubgroup {
            op,
            world_rank: w as Rank,
            comm: core.name(),
        })),
    }
}

/// `split_by_subgroup_collective` (`MPI_Comm_create`): a split whose color
/// names the group and whose key is the rank in it (module docs).
pub(crate) fn create_collective(
    core: &CommCore,
    group: &dyn Group,
    site: &'static Location<'static>,
) -> Result<Option<CommCore>, Error> {
    let members = members_of(group);
    check_subset(core, members, "split_by_subgroup_collective")?;
    let ask = match members.position(core.world().get()) {
        Some(key) => {
            let lowest = members.iter().min().unwrap_or(0);
            Ask::new(Creation::Subgroup, Some(lowest as i32), key)
        }
        None => Ask::new(Creation::Subgroup, None, 0),
    };
    let agree = Agree::Group {
        size: members.size(),
        digest: digest(members),
    };
    create(core, ask.agreeing(agree), site)
}

/// The group meetings of a communicator: those in progress, and how many
/// completed, by (tag, group size, group digest).
pub(crate) type GroupMeetings = SpinLock<GroupTable>;

/// The table behind [`GroupMeetings`].
#[derive(Debug, Default)]
pub(crate) struct GroupTable {
    active: HashMap<GroupKey, Arc<GroupMeeting>>,
    /// Completed meetings per key: the count that derives the next context
    /// pair of that key.
    completed: HashMap<GroupKey, u64>,
}

type GroupKey = (Tag, u32, u64);

/// One `split_by_subgroup_with_tag` call of a group's members.
#[derive(Debug)]
pub(crate) struct GroupMeeting {
    /// The group's members in this process.
    size: u32,
    /// Members that arrived (changed under the table's lock).
    arrived: AtomicU32,
    waiters: SpinLock<Vec<u32>>,
    outcome: SpinLock<Option<Result<Arc<CommShared<State>>, Error>>>,
}

/// `split_by_subgroup_with_tag` (`MPI_Comm_create_group`): collective over
/// the members of `group` only (module docs).
pub(crate) fn create_group(
    core: &CommCore,
    group: &dyn Group,
    tag: Tag,
    site: &'static Location<'static>,
) -> Result<Option<CommCore>, Error> {
    const OP: &str = "split_by_subgroup_with_tag";
    if core.shared().is_inter() {
        return Err(Error::unsupported(format!(
            "{OP} on an inter-communicator ({})",
            core.name()
        )));
    }
    if tag < 0 {
        return Err(Error::Tag { op: OP, tag });
    }
    let ctx = core.caller()?;
    let members = members_of(group);
    let Some(new_rank) = members.position(core.world().get()) else {
        return Ok(None);
    };
    // Checked by every member: one outside the communicator would never
    // arrive.
    check_subset(core, members, OP)?;
    // This process's members meet here; every process with members derives
    // the same context from what all members know (the parent, the tag, the
    // group and how many creations of that group with that tag came before,
    // which MPI's ordering rule makes equal everywhere), so no round
    // between processes is needed.
    let processes = crate::p2p::Node::p2p(core.job()).processes();
    let local = if processes.count() == 1 {
        members.size()
    } else {
        members
            .iter()
            .filter(|&w| processes.local(WorldRank::new(w)).is_some())
            .count() as u32
    };
    let key = (tag, members.size(), digest(members));
    let table = &core.coll().group_meetings;
    // `Some(count)` for the member that completes the meeting.
    let (meeting, last) = {
        let mut table = table.lock();
        let meeting = Arc::clone(table.active.entry(key).or_insert_with(|| {
            Arc::new(GroupMeeting {
                size: local,
                arrived: AtomicU32::new(0),
                waiters: SpinLock::new(Vec::new()),
                outcome: SpinLock::new(None),
            })
        }));
        let last = meeting.arrived.fetch_add(1, Ordering::Relaxed) + 1 == meeting.size;
        let count = last.then(|| {
            table.active.remove(&key);
            let completed = table.completed.entry(key).or_insert(0);
            *completed += 1;
            *completed - 1
        });
        (meeting, count)
    };
    if let Some(count) = last {
        let derivation = Derivation::Group {
            tag,
            size: key.1,
            digest: key.2,
            count,
        };
        let name = format!("subgroup of {}", core.name());
        let context = context::derive(core.p2p_context(), derivation);
        let made = new_comm(core, context, members.clone(), None, &name);
        *meeting.outcome.lock() = Some(made);
        let waiters = std::mem::take(&mut *meeting.waiters.lock());
        sched::unpark_many(core.job().sched(), &waiters);
    } else {
        let info = WaitInfo {
            op: WaitOp::Collective,
            label: Some(Collective::CommCreate.label()),
            peer: WaitInfo::NO_PEER,
            tag: WaitInfo::NO_TAG,
            comm: core.p2p_context() + 1,
            site,
        };
        let ready = || meeting.outcome.lock().is_some();
        while !ready() {
            meeting.waiters.lock().push(ctx.slot);
            if ready() {
                break;
            }
            sched::park_once(ctx, &info)?;
        }
    }
    let shared = meeting
        .outcome
        .lock()
        .clone()
        .expect("published before the members are woken")?;
    Ok(Some(core.with_shared(shared, new_rank)))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use crate::comm::context::{self, Creation as Derivation};
    use crate::communicator::AsCore;
    use crate::topology::Color;
    use crate::traits::*;

    /// The sequence number the calling rank's next collective on `comm`
    /// gets (what `begin` will take).
    fn next_seq(comm: &dyn Communicator) -> u32 {
        let core = comm.core();
        core.coll().seq[core.rank() as usize].load(Ordering::Relaxed)
    }

    /// Every rank derives its new communicator's context pair by itself,
    /// from what it knows (the parent's context, the sequence number the
    /// split takes, its new communicator's lowest world rank), and gets the
    /// pair the communicator has; the two colors' pairs differ.
    #[test]
    fn every_rank_derives_the_context_of_its_split() {
        let out = crate::run(6, |universe| {
            let world = universe.world();
            let seq = next_seq(&world);
            let color = world.rank() % 2;
            let half = world.split_by_color(Color::with_value(color)).unwrap();
            let lowest = half.core().shared().group.iter().min().unwrap();
            let mine = context::derive(
                world.core().p2p_context(),
                Derivation::Collective { seq, lowest },
            );
            assert_eq!(half.core().p2p_context(), mine);
            (color, mine)
        })
        .unwrap();
        let (even, odd) = (out[0].1, out[1].1);
        for (color, context) in &out {
            assert_eq!(*context, if *color == 0 { even } else { odd });
        }
        assert_ne!(even, odd, "disjoint colors of one split share a context");
        assert_ne!(even, context::WORLD);
        assert_ne!(odd, context::WORLD);
    }

    /// A duplicate of a duplicate has its own pair, and so does a second
    /// duplicate of the same parent.
    #[test]
    fn dup_of_dup_differs_from_dup() {
        let out = crate::run(3, |universe| {
            let world = universe.world();
            let dup = world.duplicate();
            let dup_dup = dup.duplicate();
            let again = world.duplicate();
            [
                world.core().p2p_context(),
                dup.core().p2p_context(),
                dup_dup.core().p2p_context(),
                again.core().p2p_context(),
            ]
        })
        .unwrap();
        assert!(out.iter().all(|c| *c == out[0]), "ranks disagree: {out:?}");
        let c = out[0];
        for i in 0..c.len() {
            for j in i + 1..c.len() {
                assert_ne!(c[i], c[j], "contexts {i} and {j} are equal: {c:?}");
            }
        }
    }

    /// Group creation: the members derive the pair from the tag, the group
    /// and how many such calls came before; a second call with the same
    /// group and tag gets another pair.
    #[test]
    fn group_creations_derive_distinct_contexts() {
        let out = crate::run(4, |universe| {
            let world = universe.world();
            let group = world.group().include(&[3, 1]);
            let members = crate::comm::members_of(&group);
            let key = (7, members.size(), super::digest(members));
            let mut contexts = Vec::new();
            for count in 0..2 {
                let Some(sub) = world.split_by_subgroup_with_tag(&group, 7) else {
                    return contexts;
                };
                let mine = context::derive(
                    world.core().p2p_context(),
                    Derivation::Group {
                        tag: key.0,
                        size: key.1,
                        digest: key.2,
                        count,
                    },
                );
                assert_eq!(sub.core().p2p_context(), mine);
                contexts.push(mine);
            }
            contexts
        })
        .unwrap();
        assert!(out[0].is_empty() && out[2].is_empty());
        assert_eq!(out[1], out[3]);
        assert_ne!(out[1][0], out[1][1]);
    }

    /// The communicators of one split keep their own names, also when one
    /// is renamed, and a name goes with its communicator.
    #[test]
    fn names_stay_with_their_communicator() {
        let out = crate::run(4, |universe| {
            let world = universe.world();
            let half = world
                .split_by_color(Color::with_value(world.rank() % 2))
                .unwrap();
            let context = half.core().p2p_context();
            assert_eq!(half.get_name(), "split of MPI_COMM_WORLD");
            world.barrier();
            if world.rank() == 0 {
                half.set_name("evens");
            }
            world.barrier();
            let named = half.get_name();
            world.barrier();
            drop(half);
            world.barrier();
            let gone = world.core().job().comms().name(context);
            (named, gone, context)
        })
        .unwrap();
        for (rank, (named, gone, context)) in out.iter().enumerate() {
            let expected = if rank % 2 == 0 {
                "evens"
            } else {
                "split of MPI_COMM_WORLD"
            };
            assert_eq!(named, expected, "rank {rank}");
            assert_eq!(*gone, format!("#{}", context / 2), "rank {rank}");
        }
    }
}
