//! Hierarchical collectives (`hier`): a shared-memory step among each
//! process's members, message-based steps among one leader per process
//! (grouped by host where the job spans hosts: process → host → job), a
//! shared-memory step back.
//!
//! On a communicator whose members live in several processes, the flat
//! message-based algorithms run over *all* its ranks: a million ranks in
//! four processes exchange millions of messages where four leaders would
//! do. Here each communicator gets **tiers**, made by each process on the
//! first hierarchical call and kept in its collective state
//! ([`State::tiers`](super::State)):
//!
//! * the **local part**: its members in this process, in rank order (all
//!   local, so the round-based `shm` algorithms run there);
//! * the **leaders**: the lowest-ranked member of each process, in process
//!   order (one per process, so message-based algorithms run there; only
//!   this process's leader ever holds a handle to it);
//! * where its processes run on several hosts
//!   ([`HostLevel`](crate::comm::locality::HostLevel)), the **peers**: the
//!   leaders of the processes of this process's host (made only if there
//!   are several), and the **heads**: one leader per host, its first
//!   process's (this process holds it only if its leader heads its host).
//!
//! Their context pairs are derived from the parent's
//! ([`Creation::Tier`](crate::comm::context::Creation),
//! `Creation::HostTier`), so no process talks to another to make them, and
//! they live as long as the parent.
//!
//! ## One call
//!
//! A call on the parent at sequence number `s` runs its steps as calls on
//! the tiers at sequence numbers `s * STEPS + step`: derived from `s`, not
//! taken from the tiers' own counters, so immediate collectives (whose
//! tasks may run in any order) still meet the right calls. Signatures were
//! checked on the parent (`coll::begin`); the steps carry the parent's
//! signature, so a mismatch across processes that the leaders' messages
//! reveal names the parent's calls (`exchange.rs`).
//!
//! | collective | local step | leaders | local step |
//! |---|---|---|---|
//! | barrier | arrive (the leader waits for all) | dissemination | release |
//! | broadcast | `shm` broadcast in the root's process | the selector's broadcast among leaders | `shm` broadcast elsewhere |
//! | reduce | `shm` reduce to the leader | reduce to the root's leader | leader → root if they differ |
//! | all-reduce | `shm` reduce to the leader | all-reduce | `shm` broadcast |
//! | gather | `shm` gather to the leader | seed 002's binomial Gatherv (aggressive: every leader knows the blocks) | leader → root if they differ |
//! | scatter | root → leader if they differ | linear Scatterv | `shm` scatter |
//! | all-gather | `shm` gather to the leader | all-gatherv (ring) | `shm` broadcast |
//!
//! The root of a Gather talks to ⌈log2 P⌉ processes for P processes.
//!
//! ## The host level
//!
//! With the host level, the leaders' column becomes three steps: among
//! each host's peers, among the heads, among each host's peers again.
//!
//! | collective | peers | heads | peers |
//! |---|---|---|---|
//! | barrier | each reports to its head | dissemination | the head releases them |
//! | broadcast | on the root's host, from the root's leader (if it is not the head) | from the root's host | from the head (on the root's host too, if its leader is the head) |
//! | reduce | reduce to the head | reduce to the root's host | head → root's leader if they differ |
//! | all-reduce | reduce to the head | all-reduce | broadcast from the head |
//! | gather | Gatherv to the head | Gatherv of hosts' blocks to the root's host | head → root's leader if they differ |
//! | scatter | root's leader → head if they differ | Scatterv of hosts' blocks | Scatterv from the head |
//! | all-gather | Gatherv to the head | all-gatherv of hosts' blocks | broadcast from the head |
//!
//! A step whose tier has one member is skipped: on a job of one host there
//! is no host level at all (the tiers are the two above, the cost is the
//! same), and a host of one process has no peers. A leader that heads no
//! host talks only to its head. `MYRIAD_HIER_HOSTS=0` keeps the process
//! level (to measure one against the other). Gatherv runs as gather, after
//! a broadcast of the counts by host (to the leaders).
//!
//! Rank order: a hierarchical reduction combines each process's members
//! (in rank order) and then the processes (in process order), which is
//! rank order when each process's members are consecutive ranks and the
//! processes come in rank order ([`Locality::is_blocked`]: the world and
//! most splits). Elsewhere a non-commutative reduction, and the gathers and
//! scatters (whose blocks would not be contiguous), run the flat algorithm
//! the selector would pick without `hier`, decided alike by every rank.
//! By host likewise: where a host's processes are not consecutive among
//! the leaders ([`HostLevel::is_blocked`]), the calls whose result depends
//! on order keep the process level; barrier, broadcast and commutative
//! reductions use the host level anyway.

use std::sync::Arc;

use super::check::Signature;
use super::exchange::Exchange;
use super::op::OpRef;
use super::operand::Scratch;
use super::parts::Parts;
use super::select::{select_local, select_spanning};
use super::{allgather, barrier, bcast, gather, reduce, scatter};
use super::{Algorithm, Call, CommCore, Kind, Selection, State};
use crate::comm::context::{self, Creation};
use crate::comm::locality::{HostLevel, Locality};
use crate::comm::{CommShared, Members};
use crate::datatype::copy::Layout;
use crate::error::Error;
use crate::identity::WorldRank;
use crate::p2p::Node;
use crate::Rank;

/// Sequence numbers of the tiers per call of the parent.
pub(crate) const STEPS: u32 = 8;

/// The tiers of a communicator spanning processes (module docs).
#[derive(Debug)]
pub(crate) struct Tiers {
    local: Arc<CommShared<State>>,
    leaders: Arc<CommShared<State>>,
    /// This process's position among the processes with members: its
    /// leader's rank among the leaders.
    me: usize,
    /// The host level, where the processes with members run on several
    /// hosts.
    host: Option<HostTiers>,
}

/// The tiers of the host level (module docs).
#[derive(Debug)]
struct HostTiers {
    /// The leaders of the processes of this process's host (`None`: it is
    /// the host's only process with members).
    peers: Option<Arc<CommShared<State>>>,
    /// One leader per host (`None`: this process's leader heads no host).
    heads: Option<Arc<CommShared<State>>>,
    /// This process's leader's rank among its host's peers (0: the head).
    peer: usize,
    /// This host's position among the hosts with members (the head's rank
    /// among the heads).
    host: usize,
}

/// The tiers of `comm`, made on first use.
fn tiers(comm: &CommCore) -> Result<&Tiers, Error> {
    comm.coll()
        .tiers
        .get_or_init(|| make_tiers(comm))
        .as_ref()
        .map_err(Clone::clone)
}

#[cold]
fn make_tiers(comm: &CommCore) -> Result<Tiers, Error> {
    let shared = comm.shared();
    let locality = &shared.locality;
    let registry = comm.job().comms();
    let this = comm.job().p2p().processes().this();
    let me = locality
        .position_of(this)
        .expect("a member calls, so its process has members");
    let world = |r: Rank| shared.group.world_rank(r);
    let name = comm.name();
    let check = registry.check_collectives();
    let local_members = Members::from_vec(locality.local_ranks().map(world).collect());
    let mut state = State::new(locality.local_count(), check, Selection::from_env());
    state.traffic = Arc::clone(&comm.coll().traffic);
    let local = registry.create(
        context::derive(
            shared.context,
            Creation::Tier {
                leaders: false,
                process: this.get(),
            },
        ),
        local_members,
        None,
        &format!("{name} (part in process {this})"),
        state,
    )?;
    // A tier of leaders (by their positions among all leaders).
    let of_leaders = |positions: &mut dyn Iterator<Item = usize>,
                      creation: Creation,
                      what: &str|
     -> Result<Arc<CommShared<State>>, Error> {
        let ranks: Box<[Rank]> = positions.map(|i| locality.leaders()[i].1).collect();
        let members = Members::from_vec(ranks.iter().map(|&r| world(r)).collect());
        let mut state = State::new(ranks.len(), check, Selection::from_env());
        // Errors and signatures of the leaders' messages name parent ranks.
        state.parent_ranks = Some(ranks);
        state.traffic = Arc::clone(&comm.coll().traffic);
        let context = context::derive(shared.context, creation);
        registry.create(context, members, None, &format!("{name} ({what})"), state)
    };
    let leaders = of_leaders(
        &mut (0..locality.processes()),
        Creation::Tier {
            leaders: true,
            process: 0,
        },
        "leaders",
    )?;
    let host = match locality.hosts() {
        None => None,
        Some(level) => {
            let host = level.host_position(me);
            let peer = level.peer_index(me).expect("this process is on its host");
            let peers = (level.peers().len() > 1)
                .then(|| {
                    of_leaders(
                        &mut level.peers().iter().copied(),
                        Creation::HostTier {
                            heads: false,
                            host: host as u32,
                        },
                        &format!("leaders on host {host}"),
                    )
                })
                .transpose()?;
            let heads = (peer == 0)
                .then(|| {
                    of_leaders(
                        &mut level.heads().iter().copied(),
                        Creation::HostTier {
                            heads: true,
                            host: 0,
                        },
                        "one leader per host",
                    )
                })
                .transpose()?;
            Some(HostTiers {
                peers,
                heads,
                peer,
                host,
            })
        }
    };
    Ok(Tiers {
        local,
        leaders,
        me,
        host,
    })
}

/// Whether hierarchical collectives may use the host level
/// (`MYRIAD_HIER_HOSTS`, default on; `0` keeps them at the process level,
/// to measure one against the other). Read once; every process of a job
/// must see the same value.
fn hosts_enabled() -> bool {
    static ENABLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ENABLED.get_or_init(|| {
        !matches!(
            std::env::var("MYRIAD_HIER_HOSTS").as_deref(),
            Ok("0" | "off" | "false" | "no")
        )
    })
}

/// This rank's view of one call's hierarchy.
struct Plan<'a> {
    tiers: &'a Tiers,
    /// This rank's handle to the local part.
    local: CommCore,
    /// Its rank there (0: the leader).
    rl: Rank,
    /// The handle to the leaders (the leader only).
    leaders: Option<CommCore>,
    /// The handle to this host's peers (the leader only, where the host
    /// level exists and the host has several processes with members).
    peers: Option<CommCore>,
    /// The handle to the heads (a host's head only).
    heads: Option<CommCore>,
}

impl<'a> Plan<'a> {
    fn new(call: &Call<'a>) -> Result<Plan<'a>, Error> {
        let tiers = tiers(call.comm)?;
        let locality = &call.comm.shared().locality;
        let rl = locality
            .local_index(call.rank())
            .expect("the caller lives here");
        let local = call.comm.with_shared(Arc::clone(&tiers.local), rl);
        let leads = rl == 0;
        let leaders = leads.then(|| {
            call.comm
                .with_shared(Arc::clone(&tiers.leaders), tiers.me as Rank)
        });
        let host = tiers.host.as_ref().filter(|_| leads);
        let peers = host.and_then(|h| {
            let peers = h.peers.as_ref()?;
            Some(call.comm.with_shared(Arc::clone(peers), h.peer as Rank))
        });
        let heads = host.and_then(|h| {
            let heads = h.heads.as_ref()?;
            Some(call.comm.with_shared(Arc::clone(heads), h.host as Rank))
        });
        Ok(Plan {
            tiers,
            local,
            rl,
            leaders,
            peers,
            heads,
        })
    }

    /// Members in this process.
    fn nl(&self) -> Rank {
        self.local.size()
    }

    /// Processes with members.
    fn processes(&self) -> Rank {
        self.tiers.leaders.group.size() as Rank
    }

    /// The host level if this call uses it: it exists, is enabled, and
    /// (for a call whose result depends on the order of the processes,
    /// `ordered`) each host's processes are consecutive. Decided alike by
    /// every rank.
    fn by_host<'c>(
        &self,
        call: &Call<'c>,
        ordered: bool,
    ) -> Option<(&'a HostTiers, &'c HostLevel)> {
        let tiers = self.tiers.host.as_ref()?;
        let level = locality(call).hosts()?;
        (hosts_enabled() && (!ordered || level.is_blocked())).then_some((tiers, level))
    }
}

/// A step of `call` on a tier (`comm`): its own sequence number, the
/// parent's signature and call site.
fn step<'c>(
    call: &Call<'c>,
    comm: &'c CommCore,
    kind: Kind,
    algorithm: Algorithm,
    step: u32,
) -> Call<'c> {
    Call {
        comm,
        ctx: call.ctx,
        seq: call.seq.wrapping_mul(STEPS).wrapping_add(step),
        kind,
        algorithm,
        site: call.site,
        signature: call.signature,
    }
}

/// The message-based algorithm the leaders run for `kind`.
fn among_leaders(kind: Kind, leaders: Rank, signature: &Signature) -> Algorithm {
    select_spanning(kind, leaders as usize, signature.bytes).unwrap_or(Algorithm::Linear)
}

/// Step `n` of `call` on a tier of leaders (`comm`), running the
/// message-based algorithm the selector picks for its size.
fn among<'c>(call: &Call<'c>, comm: &'c CommCore, kind: Kind, n: u32) -> Call<'c> {
    let algorithm = among_leaders(kind, comm.size(), &call.signature);
    step(call, comm, kind, algorithm, n)
}

/// The call as the flat algorithm the selector picks without `hier`.
fn flat<'c>(call: &Call<'c>) -> Call<'c> {
    let (size, bytes) = (call.size() as usize, call.signature.bytes);
    let algorithm = if call.comm.shared().locality.is_all_local() {
        select_local(call.kind, size, bytes)
    } else {
        select_spanning(call.kind, size, bytes).unwrap_or(Algorithm::Linear)
    };
    Call { algorithm, ..*call }
}

/// The position among the leaders of the process hosting rank `rank`.
fn process_position(call: &Call<'_>, rank: Rank) -> usize {
    let shared = call.comm.shared();
    let world = WorldRank::new(shared.group.world_rank(rank));
    let process = call.comm.job().p2p().processes().process_of(world);
    shared
        .locality
        .position_of(process)
        .expect("a member's process has members")
}

fn locality<'c>(call: &Call<'c>) -> &'c Locality {
    &call.comm.shared().locality
}

/// Barrier: the members arrive in their local round, where the leader waits
/// for all of them, meets the other leaders, and releases them.
pub(crate) fn barrier(call: &Call<'_>) -> Result<(), Error> {
    let plan = Plan::new(call)?;
    let local = step(call, &plan.local, Kind::Barrier, Algorithm::SharedMemory, 0);
    let rounds = &plan.local.coll().rounds;
    let round = rounds.join_checked(&local)?;
    let result = if plan.rl == 0 {
        let mut result = if round.arrive(&local) {
            Ok(())
        } else {
            round
                .wait(&local, || round.all_arrived())
                .map_err(Error::from)
        };
        if result.is_ok() {
            result = leaders_barrier(call, &plan);
        }
        // Released also on an error: the job fails with it either way.
        round.set_ready(&local);
        result
    } else {
        if round.arrive(&local) {
            round.wake_all(&local);
        }
        round.wait_ready(&local).map_err(Error::from)
    };
    rounds.leave(&local, round);
    result
}

/// Broadcast of `buf` from `root`.
pub(crate) fn broadcast(call: &Call<'_>, root: Rank, buf: &Layout) -> Result<(), Error> {
    let plan = Plan::new(call)?;
    let rp = process_position(call, root);
    let shm = |n| {
        step(
            call,
            &plan.local,
            Kind::Broadcast,
            Algorithm::SharedMemory,
            n,
        )
    };
    if rp == plan.tiers.me {
        let local_root = locality(call).local_index(root).expect("the root is here");
        if plan.nl() > 1 {
            bcast::broadcast(&shm(0), local_root, buf)?;
        }
        leaders_broadcast(call, &plan, rp, buf)?;
    } else {
        leaders_broadcast(call, &plan, rp, buf)?;
        if plan.nl() > 1 {
            bcast::broadcast(&shm(1), 0, buf)?;
        }
    }
    Ok(())
}

/// Reduce (`root`) or all-reduce (`None`) of `send` into `recv`.
pub(crate) fn reduce(
    call: &Call<'_>,
    root: Option<Rank>,
    op: &OpRef<'_>,
    commutative: bool,
    send: &Layout,
    recv: Option<&Layout>,
) -> Result<(), Error> {
    if !commutative && !locality(call).is_blocked() {
        return reduce::reduce(&flat(call), root, op, commutative, send, recv);
    }
    let plan = Plan::new(call)?;
    let (nl, count) = (plan.nl(), send.count);
    // Step 0: this process's members reduce to the leader.
    let partial = (plan.rl == 0 && nl > 1).then(|| Scratch::like(send));
    if nl > 1 {
        let shm = step(call, &plan.local, Kind::Reduce, Algorithm::SharedMemory, 0);
        reduce::reduce(&shm, Some(0), op, commutative, send, partial.as_deref())?;
    }
    let mine: &Layout = partial.as_deref().unwrap_or(send);
    let Some(root) = root else {
        // All-reduce: the leaders all-reduce, each leader broadcasts.
        let recv = recv.expect("all-reduce").slice(0, count);
        if plan.rl == 0 {
            leaders_all_reduce(call, &plan, op, commutative, mine, &recv)?;
        }
        if nl > 1 {
            let shm = step(
                call,
                &plan.local,
                Kind::Broadcast,
                Algorithm::SharedMemory,
                1,
            );
            bcast::broadcast(&shm, 0, &recv)?;
        }
        return Ok(());
    };
    let rp = process_position(call, root);
    let root_leads = locality(call).leaders()[rp].1 == root;
    let here = rp == plan.tiers.me;
    let total = (here && !root_leads && plan.rl == 0).then(|| Scratch::like(send));
    if plan.rl == 0 {
        let dst = match (&total, here) {
            (Some(total), _) => Some((**total).clone()),
            (None, true) => Some(recv.expect("the root has a receive buffer").slice(0, count)),
            (None, false) => None,
        };
        leaders_reduce(call, &plan, rp, op, commutative, mine, dst.as_ref())?;
    }
    if here && !root_leads {
        hand_over(call, &plan, root, total.as_deref(), recv, count)?;
    }
    Ok(())
}

/// The leaders' barrier (the leader of each process calls it): a
/// dissemination among all leaders, or by host: each host's peers report
/// to their head, the heads run the dissemination, the heads release their
/// peers.
fn leaders_barrier(call: &Call<'_>, plan: &Plan<'_>) -> Result<(), Error> {
    let Some((host, _)) = plan.by_host(call, false) else {
        let leaders = plan.leaders.as_ref().expect("the leader calls");
        let among = step(call, leaders, Kind::Barrier, Algorithm::Dissemination, 0);
        return barrier::barrier(&among);
    };
    let empty = Layout::empty();
    if let Some(peers) = &plan.peers {
        let up = step(call, peers, Kind::Barrier, Algorithm::Linear, 0);
        let mut ex = Exchange::new(&up);
        if host.peer == 0 {
            for r in 1..peers.size() {
                ex.recv(r, &empty)?;
            }
        } else {
            ex.send(0, &empty);
        }
        ex.wait()?;
    }
    if let Some(heads) = &plan.heads {
        let among = step(call, heads, Kind::Barrier, Algorithm::Dissemination, 0);
        barrier::barrier(&among)?;
    }
    if let Some(peers) = &plan.peers {
        let down = step(call, peers, Kind::Barrier, Algorithm::Linear, 1);
        let mut ex = Exchange::new(&down);
        if host.peer == 0 {
            for r in 1..peers.size() {
                ex.send(r, &empty);
            }
        } else {
            ex.recv(0, &empty)?;
        }
        ex.wait()?;
    }
    Ok(())
}

/// The leaders' broadcast of `buf` from the leader at position `rp` (every
/// leader calls it; others return at once): among all leaders, or by host:
/// on the root's host among its peers, then among the heads, then among
/// each other host's peers.
fn leaders_broadcast(
    call: &Call<'_>,
    plan: &Plan<'_>,
    rp: usize,
    buf: &Layout,
) -> Result<(), Error> {
    if plan.rl != 0 {
        return Ok(());
    }
    let on = |comm, n| among(call, comm, Kind::Broadcast, n);
    let Some((host, level)) = plan.by_host(call, false) else {
        let leaders = plan.leaders.as_ref().expect("the leader calls");
        return bcast::broadcast(&on(leaders, 0), rp as Rank, buf);
    };
    let root_host = level.host_position(rp);
    let root_peer = (root_host == host.host)
        .then(|| level.peer_index(rp).expect("the root's leader is a peer"));
    if root_peer.is_some_and(|r| r != 0) {
        // The root's leader is not the head: its host first.
        if let Some(peers) = &plan.peers {
            bcast::broadcast(&on(peers, 0), root_peer.unwrap_or(0) as Rank, buf)?;
        }
        if let Some(heads) = &plan.heads {
            bcast::broadcast(&on(heads, 0), root_host as Rank, buf)?;
        }
    } else if root_peer == Some(0) {
        // The head holds it: the other hosts first (they wait longest),
        // then its own peers.
        if let Some(heads) = &plan.heads {
            bcast::broadcast(&on(heads, 0), root_host as Rank, buf)?;
        }
        if let Some(peers) = &plan.peers {
            bcast::broadcast(&on(peers, 0), 0, buf)?;
        }
    } else {
        if let Some(heads) = &plan.heads {
            bcast::broadcast(&on(heads, 0), root_host as Rank, buf)?;
        }
        if let Some(peers) = &plan.peers {
            bcast::broadcast(&on(peers, 1), 0, buf)?;
        }
    }
    Ok(())
}

/// The leaders' reduce of `mine` to the leader at position `rp` (into
/// `dst`, there): among all leaders, or by host: each host's peers reduce
/// to their head, the heads to the root's host's head, which hands the
/// result to the root's leader if they differ. The leaders only.
fn leaders_reduce(
    call: &Call<'_>,
    plan: &Plan<'_>,
    rp: usize,
    op: &OpRef<'_>,
    commutative: bool,
    mine: &Layout,
    dst: Option<&Layout>,
) -> Result<(), Error> {
    let on = |comm, n| among(call, comm, Kind::Reduce, n);
    let Some((host, level)) = plan.by_host(call, !commutative) else {
        let leaders = plan.leaders.as_ref().expect("the leader calls");
        return reduce::reduce(
            &on(leaders, 0),
            Some(rp as Rank),
            op,
            commutative,
            mine,
            dst,
        );
    };
    // This host's processes reduce to its head.
    let partial = (host.peer == 0 && plan.peers.is_some()).then(|| Scratch::like(mine));
    if let Some(peers) = &plan.peers {
        reduce::reduce(
            &on(peers, 0),
            Some(0),
            op,
            commutative,
            mine,
            partial.as_deref(),
        )?;
    }
    let mine: &Layout = partial.as_deref().unwrap_or(mine);
    let root_host = level.host_position(rp);
    let here = root_host == host.host;
    let root_peer = if here {
        level.peer_index(rp).expect("the root's leader is a peer")
    } else {
        0
    };
    // The heads reduce to the root's host's head (into `dst` if it is the
    // root's leader).
    let total = (here && root_peer != 0 && host.peer == 0).then(|| Scratch::like(mine));
    if let Some(heads) = &plan.heads {
        let into = match (&total, here) {
            (Some(total), _) => Some(&**total),
            (None, true) => dst,
            (None, false) => None,
        };
        reduce::reduce(
            &on(heads, 0),
            Some(root_host as Rank),
            op,
            commutative,
            mine,
            into,
        )?;
    }
    if here && root_peer != 0 {
        let peers = plan.peers.as_ref().expect("the root's host has peers");
        let hop = step(call, peers, Kind::Reduce, Algorithm::Linear, 2);
        let mut ex = Exchange::new(&hop);
        if host.peer == 0 {
            ex.send(
                root_peer as Rank,
                total.as_deref().expect("the head holds it"),
            );
        } else if host.peer == root_peer {
            ex.recv(0, dst.expect("the root's leader receives"))?;
        }
        ex.wait()?;
    }
    Ok(())
}

/// The leaders' all-reduce of `mine` into `recv`: among all leaders, or
/// by host: each host's peers reduce to their head, the heads all-reduce,
/// each head broadcasts to its peers. The leaders only.
fn leaders_all_reduce(
    call: &Call<'_>,
    plan: &Plan<'_>,
    op: &OpRef<'_>,
    commutative: bool,
    mine: &Layout,
    recv: &Layout,
) -> Result<(), Error> {
    let on = |comm, kind, n| among(call, comm, kind, n);
    let Some((host, _)) = plan.by_host(call, !commutative) else {
        let leaders = plan.leaders.as_ref().expect("the leader calls");
        let among = on(leaders, Kind::AllReduce, 0);
        return reduce::reduce(&among, None, op, commutative, mine, Some(recv));
    };
    let partial = (host.peer == 0 && plan.peers.is_some()).then(|| Scratch::like(mine));
    if let Some(peers) = &plan.peers {
        let up = on(peers, Kind::Reduce, 0);
        reduce::reduce(&up, Some(0), op, commutative, mine, partial.as_deref())?;
    }
    if let Some(heads) = &plan.heads {
        let mine: &Layout = partial.as_deref().unwrap_or(mine);
        let among = on(heads, Kind::AllReduce, 0);
        reduce::reduce(&among, None, op, commutative, mine, Some(recv))?;
    }
    if let Some(peers) = &plan.peers {
        bcast::broadcast(&on(peers, Kind::Broadcast, 1), 0, recv)?;
    }
    Ok(())
}

/// Moves `count` elements from rank `from` of `tier` (its `src`) to rank
/// `to` (into its `dst`); `me` is the caller's rank there. Step `n` of
/// `call`.
#[allow(clippy::too_many_arguments)]
fn hop(
    call: &Call<'_>,
    tier: &CommCore,
    n: u32,
    me: usize,
    from: usize,
    to: usize,
    src: Option<&Layout>,
    dst: Option<&Layout>,
) -> Result<(), Error> {
    let hop = step(call, tier, call.kind, Algorithm::Linear, n);
    let mut ex = Exchange::new(&hop);
    if me == from {
        ex.send(to as Rank, src.expect("the sender holds the data"));
    } else if me == to {
        ex.recv(from as Rank, dst.expect("the receiver has a buffer"))?;
    }
    ex.wait()
}

/// Counts and displacements of blocks, in elements.
type Blocks = (Vec<usize>, Vec<usize>);

/// On a communicator blocked by process and by host: the blocks (counts
/// and displacements, in elements) of this host's processes relative to
/// the host's first element, and of every host, from the processes'
/// blocks `counts`/`displs` (by leader position).
fn host_blocks(level: &HostLevel, counts: &[usize], displs: &[usize]) -> (Blocks, Blocks) {
    let peers = level.peers();
    let start = displs[peers[0]];
    let peer_blocks = peers
        .iter()
        .map(|&i| (counts[i], displs[i] - start))
        .unzip();
    let heads = level.heads();
    let host_blocks = heads
        .iter()
        .enumerate()
        .map(|(h, &first)| {
            let end = heads.get(h + 1).copied().unwrap_or(counts.len());
            (counts[first..end].iter().sum::<usize>(), displs[first])
        })
        .unzip();
    (peer_blocks, host_blocks)
}

/// The leaders' gather of each process's block (`mine`, `count` elements
/// per member) to the leader at position `rp` (into `dst`, there): see
/// [`leaders_gatherv`]. The leaders only.
fn leaders_gather(
    call: &Call<'_>,
    plan: &Plan<'_>,
    rp: usize,
    mine: &Layout,
    dst: Option<&Layout>,
    count: usize,
) -> Result<(), Error> {
    let (counts, displs) = blocks(locality(call), count);
    leaders_gatherv(call, plan, rp, mine, dst, (&counts, &displs), 0)
}

/// The leaders' gather of each process's block (`mine`; the blocks by
/// leader position in `table`, counts and displacements in elements) to
/// the leader at position `rp` (into `dst`, there): seed 002's binomial
/// Gatherv among all leaders, or by host: each host's peers gather to
/// their head, the heads to the root's host's head (the same binomial
/// Gatherv on hosts' blocks), which hands the whole to the root's leader
/// if they differ. Steps `base` and `base + 2` of `call`. The leaders only.
fn leaders_gatherv(
    call: &Call<'_>,
    plan: &Plan<'_>,
    rp: usize,
    mine: &Layout,
    dst: Option<&Layout>,
    (counts, displs): (&[usize], &[usize]),
    base: u32,
) -> Result<(), Error> {
    let gatherv_among =
        |comm, n, root: usize, mine: &Layout, buf: Option<&Layout>, table: (&[usize], &[usize])| {
            let parts = buf.map(|buf| Parts {
                buf: buf.clone(),
                counts: table.0.to_vec(),
                displs: table.1.to_vec(),
                uniform: None,
            });
            let among = step(
                call,
                comm,
                Kind::GatherVarcount,
                Algorithm::BinomialAggressive,
                base + n,
            );
            gather::gatherv(&among, root as Rank, mine, parts.as_ref(), Some(table))
        };
    let Some((host, level)) = plan.by_host(call, true) else {
        let leaders = plan.leaders.as_ref().expect("the leader calls");
        return gatherv_among(leaders, 0, rp, mine, dst, (counts, displs));
    };
    let ((pc, pd), (hc, hd)) = host_blocks(level, counts, displs);
    // This host's processes gather to its head.
    let block = (host.peer == 0 && plan.peers.is_some()).then(|| scratch(mine, pc.iter().sum()));
    if let Some(peers) = &plan.peers {
        gatherv_among(peers, 0, 0, mine, block.as_deref(), (&pc, &pd))?;
    }
    let mine: &Layout = block.as_deref().unwrap_or(mine);
    let root_host = level.host_position(rp);
    let here = root_host == host.host;
    let root_peer = if here {
        level.peer_index(rp).expect("the root's leader is a peer")
    } else {
        0
    };
    let total: usize = counts.iter().sum();
    let whole = (here && root_peer != 0 && host.peer == 0).then(|| scratch(mine, total));
    if let Some(heads) = &plan.heads {
        let into = match (&whole, here) {
            (Some(whole), _) => Some(&**whole),
            (None, true) => dst,
            (None, false) => None,
        };
        gatherv_among(heads, 0, root_host, mine, into, (&hc, &hd))?;
    }
    if here && root_peer != 0 {
        let peers = plan.peers.as_ref().expect("the root's host has peers");
        hop(
            call,
            peers,
            base + 2,
            host.peer,
            0,
            root_peer,
            whole.as_deref(),
            dst,
        )?;
    }
    Ok(())
}

/// The leaders' scatter of the processes' blocks (`src`, at the leader at
/// position `rp`; `count` elements per member) into each leader's `mine`:
/// a linear Scatterv among all leaders, or by host: the root's leader
/// hands the whole to its host's head if they differ, the heads scatter
/// the hosts' blocks, each head its processes' blocks. The leaders only.
fn leaders_scatter(
    call: &Call<'_>,
    plan: &Plan<'_>,
    rp: usize,
    src: Option<&Layout>,
    mine: &Layout,
    count: usize,
) -> Result<(), Error> {
    let (counts, displs) = blocks(locality(call), count);
    let scatterv_among =
        |comm, n, root: usize, buf: Option<&Layout>, table: (&[usize], &[usize]), into: &Layout| {
            let parts = buf.map(|buf| Parts {
                buf: buf.clone(),
                counts: table.0.to_vec(),
                displs: table.1.to_vec(),
                uniform: None,
            });
            let among = step(call, comm, Kind::ScatterVarcount, Algorithm::Linear, n);
            scatter::scatterv(&among, root as Rank, parts.as_ref(), into)
        };
    let Some((host, level)) = plan.by_host(call, true) else {
        let leaders = plan.leaders.as_ref().expect("the leader calls");
        return scatterv_among(leaders, 0, rp, src, (&counts, &displs), mine);
    };
    let ((pc, pd), (hc, hd)) = host_blocks(level, &counts, &displs);
    let root_host = level.host_position(rp);
    let here = root_host == host.host;
    let root_peer = if here {
        level.peer_index(rp).expect("the root's leader is a peer")
    } else {
        0
    };
    let total: usize = counts.iter().sum();
    let whole = (here && root_peer != 0 && host.peer == 0).then(|| scratch(mine, total));
    if here && root_peer != 0 {
        let peers = plan.peers.as_ref().expect("the root's host has peers");
        hop(
            call,
            peers,
            2,
            host.peer,
            root_peer,
            0,
            src,
            whole.as_deref(),
        )?;
    }
    // The heads scatter the hosts' blocks (into the host's block, or
    // straight into `mine` on a host of one process).
    let block = (host.peer == 0 && plan.peers.is_some()).then(|| scratch(mine, pc.iter().sum()));
    if let Some(heads) = &plan.heads {
        let from = whole.as_deref().or(if here { src } else { None });
        let into: &Layout = block.as_deref().unwrap_or(mine);
        scatterv_among(heads, 0, root_host, from, (&hc, &hd), into)?;
    }
    if let Some(peers) = &plan.peers {
        scatterv_among(peers, 1, 0, block.as_deref(), (&pc, &pd), mine)?;
    }
    Ok(())
}

/// The leaders' all-gather of each process's block (`mine`, `count`
/// elements per member) into `all`: an all-gatherv among all leaders, or
/// by host: each host's peers gather to their head, the heads all-gather
/// the hosts' blocks, each head broadcasts the whole to its peers. The
/// leaders only.
fn leaders_all_gather(
    call: &Call<'_>,
    plan: &Plan<'_>,
    mine: &Layout,
    all: &Layout,
    count: usize,
) -> Result<(), Error> {
    let (counts, displs) = blocks(locality(call), count);
    let parts = |buf: &Layout, table: (Vec<usize>, Vec<usize>)| Parts {
        buf: buf.clone(),
        counts: table.0,
        displs: table.1,
        uniform: None,
    };
    let Some((host, level)) = plan.by_host(call, true) else {
        let leaders = plan.leaders.as_ref().expect("the leader calls");
        let among = among(call, leaders, Kind::AllGatherVarcount, 0);
        return allgather::allgatherv(&among, mine, &parts(all, (counts, displs)));
    };
    let ((pc, pd), hosts) = host_blocks(level, &counts, &displs);
    let block = (host.peer == 0 && plan.peers.is_some()).then(|| scratch(mine, pc.iter().sum()));
    if let Some(peers) = &plan.peers {
        let buf = block.as_deref().map(|b| parts(b, (pc.clone(), pd.clone())));
        let up = step(
            call,
            peers,
            Kind::GatherVarcount,
            Algorithm::BinomialAggressive,
            0,
        );
        gather::gatherv(&up, 0, mine, buf.as_ref(), Some((&pc, &pd)))?;
    }
    if let Some(heads) = &plan.heads {
        let mine: &Layout = block.as_deref().unwrap_or(mine);
        let among = among(call, heads, Kind::AllGatherVarcount, 0);
        allgather::allgatherv(&among, mine, &parts(all, hosts))?;
    }
    if let Some(peers) = &plan.peers {
        bcast::broadcast(&among(call, peers, Kind::Broadcast, 1), 0, all)?;
    }
    Ok(())
}

/// The last hop in the root's process when the root is not its leader:
/// the leader sends `from` (its result), the root receives the first
/// `count` elements of `into`.
fn hand_over(
    call: &Call<'_>,
    plan: &Plan<'_>,
    root: Rank,
    from: Option<&Layout>,
    into: Option<&Layout>,
    count: usize,
) -> Result<(), Error> {
    let hop = step(call, &plan.local, call.kind, Algorithm::Linear, 2);
    let local_root = locality(call).local_index(root).expect("the root is here");
    let mut ex = Exchange::new(&hop);
    if plan.rl == 0 {
        ex.send(local_root, from.expect("the leader holds the result"));
    } else if plan.rl == local_root {
        let into = into.expect("the root has a receive buffer");
        ex.recv(0, &into.slice(0, count))?;
    }
    ex.wait()
}

/// The first hop in the root's process when the root is not its leader:
/// the root sends `from`, the leader receives `into`.
fn hand_up(
    call: &Call<'_>,
    plan: &Plan<'_>,
    root: Rank,
    from: Option<&Layout>,
    into: Option<&Layout>,
    n: u32,
) -> Result<(), Error> {
    let hop = step(call, &plan.local, call.kind, Algorithm::Linear, n);
    let local_root = locality(call).local_index(root).expect("the root is here");
    let mut ex = Exchange::new(&hop);
    if plan.rl == 0 {
        ex.recv(local_root, into.expect("the leader receives"))?;
    } else if plan.rl == local_root {
        ex.send(0, from.expect("the root sends"));
    }
    ex.wait()
}

/// Each process's block of a gathered buffer of `count` elements per rank,
/// in elements: counts and displacements by leader.
fn blocks(locality: &Locality, count: usize) -> Blocks {
    (0..locality.processes())
        .map(|i| {
            let block = locality.block(i);
            (block.len() * count, block.start as usize * count)
        })
        .unzip()
}

/// `count` elements like `like`'s.
fn scratch(like: &Layout, count: usize) -> Scratch {
    Scratch::like(&Layout {
        count,
        ..like.clone()
    })
}

/// Gather of `send` to `root` (whose buffer is `recv`).
pub(crate) fn gather(
    call: &Call<'_>,
    root: Rank,
    send: &Layout,
    recv: Option<&Layout>,
) -> Result<(), Error> {
    if !locality(call).is_blocked() {
        return gather::gather(&flat(call), root, send, recv);
    }
    let plan = Plan::new(call)?;
    let (nl, count, n) = (plan.nl(), send.count, call.size() as usize);
    if let Some(recv) = recv {
        // The root's buffer is checked before anything moves.
        Parts::uniform("gather_into_root", recv.clone(), count, call.size())?;
    }
    // Step 0: the members gather to their leader.
    let block = (plan.rl == 0 && nl > 1).then(|| scratch(send, nl as usize * count));
    if nl > 1 {
        let shm = step(call, &plan.local, Kind::Gather, Algorithm::SharedMemory, 0);
        gather::gather(&shm, 0, send, block.as_deref())?;
    }
    let rp = process_position(call, root);
    let root_leads = locality(call).leaders()[rp].1 == root;
    let here = rp == plan.tiers.me;
    let all = (here && !root_leads && plan.rl == 0).then(|| scratch(send, n * count));
    if plan.rl == 0 {
        let mine: &Layout = block.as_deref().unwrap_or(send);
        let dst = here.then(|| match &all {
            Some(all) => (**all).clone(),
            None => recv
                .expect("the root has a receive buffer")
                .slice(0, n * count),
        });
        leaders_gather(call, &plan, rp, mine, dst.as_ref(), count)?;
    }
    if here && !root_leads {
        hand_over(call, &plan, root, all.as_deref(), recv, n * count)?;
    }
    Ok(())
}

/// Gatherv of `send` to `root` (whose partition is `parts`; `known`: the
/// table a non-root passed, which the flat fallback may need).
///
/// Only the leaders need the counts: the root's leader gets them from the
/// root (a hop if they differ) and broadcasts them among the leaders
/// (binomial tree: the same ⌈log2 P⌉ peers as the gather's); each leader
/// gathers its members' blocks packed, the leaders run the binomial
/// Gatherv on the packed blocks (aggressive: each knows them all), and the
/// root (after a hop if it is not the leader) unpacks into its parts.
pub(crate) fn gatherv(
    call: &Call<'_>,
    root: Rank,
    send: &Layout,
    parts: Option<&Parts>,
    known: Option<(&[usize], &[usize])>,
) -> Result<(), Error> {
    if !locality(call).is_blocked() {
        return gather::gatherv(&flat(call), root, send, parts, known);
    }
    let plan = Plan::new(call)?;
    let n = call.size() as usize;
    let rp = process_position(call, root);
    let root_leads = locality(call).leaders()[rp].1 == root;
    let here = rp == plan.tiers.me;
    let is_root = call.rank() == root;
    // 1. The counts reach every leader.
    let mut counts: Vec<u64> = if plan.rl == 0 || is_root {
        vec![0; n]
    } else {
        Vec::new()
    };
    if let Some(parts) = parts {
        let table = parts.table();
        for (r, c) in counts.iter_mut().enumerate() {
            *c = table.count(r) as u64;
        }
    }
    let table = Layout::of_mut(&mut counts[..]);
    if here && !root_leads {
        hand_up(call, &plan, root, Some(&table), Some(&table), 3)?;
    }
    if plan.by_host(call, false).is_some() {
        // By host (steps 0 and 1): a non-head leader hears only its head.
        leaders_broadcast(call, &plan, rp, &table)?;
    } else if let Some(comm) = &plan.leaders {
        let among = step(call, comm, Kind::Broadcast, Algorithm::Binomial, 1);
        bcast::broadcast(&among, rp as Rank, &table)?;
    }
    let counts: Vec<usize> = counts.iter().map(|&c| c as usize).collect();
    let packed = |counts: &[usize]| -> Vec<usize> {
        counts
            .iter()
            .scan(0, |at, &c| {
                let start = *at;
                *at += c;
                Some(start)
            })
            .collect()
    };
    // 2. The members gather to their leader, packed.
    let nl = plan.nl();
    let mine_block = locality(call).block(plan.tiers.me);
    let local_counts: Vec<usize> = if plan.rl == 0 {
        mine_block.map(|r| counts[r as usize]).collect()
    } else {
        Vec::new()
    };
    let block_storage = (plan.rl == 0 && nl > 1).then(|| scratch(send, local_counts.iter().sum()));
    let block = block_storage.as_ref().map(|storage| Parts {
        buf: (**storage).clone(),
        displs: packed(&local_counts),
        counts: local_counts.clone(),
        uniform: None,
    });
    if nl > 1 {
        let shm = step(
            call,
            &plan.local,
            Kind::GatherVarcount,
            Algorithm::SharedMemory,
            0,
        );
        gather::gatherv(&shm, 0, send, block.as_ref(), None)?;
    }
    // 3. The leaders gather the packed blocks to the root's leader (steps
    //    4 and 6: by host, the counts' broadcast took 0 and 1).
    let total: usize = counts.iter().sum();
    let all = (here && plan.rl == 0).then(|| scratch(send, total));
    if plan.rl == 0 {
        let proc_counts: Vec<usize> = (0..plan.processes() as usize)
            .map(|i| locality(call).block(i).map(|r| counts[r as usize]).sum())
            .collect();
        let proc_displs = packed(&proc_counts);
        let mine: &Layout = block.as_ref().map_or(send, |b| &b.buf);
        let table = (&proc_counts[..], &proc_displs[..]);
        leaders_gatherv(call, &plan, rp, mine, all.as_deref(), table, 4)?;
    }
    // 4. The root unpacks into its parts.
    if !here {
        return Ok(());
    }
    let received = (is_root && !root_leads).then(|| {
        let buf = &parts.expect("the root has a partition").buf;
        scratch(buf, total)
    });
    if !root_leads {
        hand_over(
            call,
            &plan,
            root,
            all.as_deref(),
            received.as_deref(),
            total,
        )?;
    }
    if is_root {
        let parts = parts.expect("the root has a partition");
        let from: &Layout = match (&all, &received) {
            (Some(all), _) if root_leads => all,
            (_, Some(received)) => received,
            _ => unreachable!("the root holds the packed blocks"),
        };
        for (r, at) in packed(&counts).into_iter().enumerate() {
            super::copy_checked(call, r as Rank, &from.slice(at, counts[r]), &parts.part(r))?;
        }
    }
    Ok(())
}

/// Scatter of `root`'s `send` (blocks of `recv.count` elements).
pub(crate) fn scatter(
    call: &Call<'_>,
    root: Rank,
    send: Option<&Layout>,
    recv: &Layout,
) -> Result<(), Error> {
    if !locality(call).is_blocked() {
        return scatter::scatter(&flat(call), root, send, recv);
    }
    let plan = Plan::new(call)?;
    let (nl, count, n) = (plan.nl(), recv.count, call.size() as usize);
    if let Some(send) = send {
        Parts::uniform("scatter_into_root", send.clone(), count, call.size())?;
    }
    let rp = process_position(call, root);
    let root_leads = locality(call).leaders()[rp].1 == root;
    let here = rp == plan.tiers.me;
    // The root's data reaches its leader.
    let all = (here && !root_leads && plan.rl == 0).then(|| scratch(recv, n * count));
    if here && !root_leads {
        let from = send.map(|s| s.slice(0, n * count));
        hand_up(call, &plan, root, from.as_ref(), all.as_deref(), 2)?;
    }
    // The leaders scatter the processes' blocks.
    let block = (plan.rl == 0 && nl > 1).then(|| scratch(recv, nl as usize * count));
    if plan.rl == 0 {
        let src = here.then(|| match &all {
            Some(all) => (**all).clone(),
            None => send.expect("the root sends").slice(0, n * count),
        });
        let mine: &Layout = block.as_deref().unwrap_or(recv);
        leaders_scatter(call, &plan, rp, src.as_ref(), mine, count)?;
    }
    if nl > 1 {
        let shm = step(call, &plan.local, Kind::Scatter, Algorithm::SharedMemory, 1);
        scatter::scatter(&shm, 0, block.as_deref(), recv)?;
    }
    Ok(())
}

/// All-gather of every rank's `send` into `recv`.
pub(crate) fn allgather(call: &Call<'_>, send: &Layout, recv: &Layout) -> Result<(), Error> {
    if !locality(call).is_blocked() {
        return allgather::allgather(&flat(call), send, recv);
    }
    let plan = Plan::new(call)?;
    let (nl, count, n) = (plan.nl(), send.count, call.size() as usize);
    Parts::receive_blocks(call, recv, count)?;
    let block = (plan.rl == 0 && nl > 1).then(|| scratch(send, nl as usize * count));
    if nl > 1 {
        let shm = step(call, &plan.local, Kind::Gather, Algorithm::SharedMemory, 0);
        gather::gather(&shm, 0, send, block.as_deref())?;
    }
    let all = recv.slice(0, n * count);
    if plan.rl == 0 {
        let mine: &Layout = block.as_deref().unwrap_or(send);
        leaders_all_gather(call, &plan, mine, &all, count)?;
    }
    if nl > 1 {
        let shm = step(
            call,
            &plan.local,
            Kind::Broadcast,
            Algorithm::SharedMemory,
            1,
        );
        bcast::broadcast(&shm, 0, &all)?;
    }
    Ok(())
}
