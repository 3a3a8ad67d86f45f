//! Growing and shrinking a running job: spawning ranks as new coroutines
//! (`MPI_Comm_spawn`'s Merge method in a thread-based runtime) and retiring
//! ranks.
//!
//! ## Design
//!
//! A spawn is collective over the parent communicator, as
//! `MPI_Comm_spawn`: every rank reads the sequence number of the parent's
//! next collective; the root adds the ranks to the job (`Job::spawn`: the
//! rank limit and stack budget are checked first, and an error leaves the
//! job as it was), which also makes the children's world and their side of
//! the inter-communicator, already registered, so the children need no
//! collective to start; the root broadcasts what the parents need (the
//! children's first world rank, count and the two sides' context pairs, or
//! that it failed); every parent then makes its side in one collective
//! creation on the parent (`coll::create::create_inter`). The context
//! pairs are derived from the parent's context and that sequence number
//! (`comm/context.rs`, `Creation::Spawn`), so both sides agree without a
//! message; the two sides start at sequence number 0, which `merge`
//! (`MPI_Intercomm_merge`) and `duplicate` need.
//!
//! Only the root's `size` and closure count (MPI: the root's arguments);
//! a failure at the root is returned at every parent, the same error (the
//! root leaves it in the job for the others to take).
//!
//! Retiring (`shrink`) is a split: survivors get a new communicator, in
//! their old order, retired ranks get `None` and go on to return from
//! their closure. Before it the members exchange, in one all-gather,
//! whether each is retiring while it is the root of an immediate
//! collective that has not completed (`runtime::job::PendingRoot`): then
//! every member gets the same error naming those roots, and nothing is
//! split.
//!
//! A job of several processes cannot spawn (the ranks of a process are
//! numbered in one block of the world: there is no room to grow into):
//! `Error::Unsupported` at every parent, before any communication.

use std::collections::HashMap;
use std::panic::Location;
use std::sync::{Arc, Mutex, OnceLock};

use super::{Color, Communicator, InterCommunicator, SimpleCommunicator};
use crate::coll::create::{self as split, InterPlan};
use crate::collective::CommunicatorCollectives;
use crate::collective::Root;
use crate::comm::Remote;
use crate::environment::Universe;
use crate::error::{ArgError, Error};
use crate::identity::LocalIndex;
use crate::runtime::job::{Job, Spawned};
use crate::sched;
use crate::Rank;

/// Errors of failed spawns, left by the root for the other parents:
/// keyed by the job, the parent's context and the spawn's sequence
/// number; each with the parents still to take it.
type Failures = Mutex<HashMap<(usize, u64, u32), (Error, usize)>>;

fn failures() -> &'static Failures {
    static FAILURES: OnceLock<Failures> = OnceLock::new();
    FAILURES.get_or_init(Failures::default)
}

/// The job and local index of the rank running the calling code, if it is
/// a rank (a coroutine, or a task acting for one) of the job of `comm`.
fn job_of_caller(comm: &crate::coll::CommCore) -> Option<(Arc<Job>, LocalIndex)> {
    sched::rank::with_current(|ctx| {
        let ctx = ctx?;
        let job = Job::arc_of(ctx);
        std::ptr::eq(&**job.core(), comm.job()).then_some((job, ctx.local))
    })
}

/// Spawning and shrinking run on the rank itself.
fn from_thread(what: &str) -> Error {
    Error::unsupported(format!(
        "{what} from an OS thread acting for a rank (call it from the rank)"
    ))
}

/// [`Communicator::spawn_ranks_from`].
pub(crate) fn spawn<C: Communicator + ?Sized>(
    comm: &C,
    root: Rank,
    size: usize,
    body: Box<dyn Fn(Universe) + Send + Sync>,
    site: &'static Location<'static>,
) -> Result<InterCommunicator, Error> {
    const OP: &str = "Communicator::spawn_ranks";
    let core = comm.core();
    if core.shared().is_inter() {
        return Err(Error::Arg(ArgError::WrongKindOfCommunicator {
            op: OP,
            comm: core.name(),
            needs: "an intra-communicator",
        }));
    }
    core.check_rank(OP, root)?;
    core.caller()?;
    let (job, _) = job_of_caller(core).ok_or_else(|| from_thread("spawning ranks"))?;
    if job.processes().count() > 1 {
        return Err(Error::unsupported(
            "spawning ranks in a job of several processes (each process's ranks are one \
             block of the world: there is no room to grow into)",
        ));
    }
    // 1. The parent's next collective (the broadcast below) has this
    // sequence number at every parent.
    let seq = core.coll().next_seq(core.rank());
    let key = (Arc::as_ptr(&job) as usize, core.p2p_context(), seq);
    let mut words = [0u64; 5];
    if core.rank() == root {
        let outcome = if size == 0 {
            Err(Error::Arg(ArgError::NoRanksToSpawn { comm: core.name() }))
        } else {
            job.spawn(core, seq, size, body)
        };
        match outcome {
            Ok(s) => {
                words = [
                    1,
                    s.first.into(),
                    s.size.into(),
                    s.parents_context,
                    s.children_context,
                ];
            }
            Err(error) => {
                let others = core.size() as usize - 1;
                if others == 0 {
                    return Err(error);
                }
                let mut failed = failures().lock().unwrap_or_else(|e| e.into_inner());
                failed.insert(key, (error.clone(), others));
                drop(failed);
                comm.process_at_rank(root).broadcast_into(&mut words[..]);
                return Err(error);
            }
        }
    }
    // 2. The root tells the parents.
    comm.process_at_rank(root).broadcast_into(&mut words[..]);
    let [ok, first, size, parents_context, children_context] = words;
    if ok == 0 {
        let mut failed = failures().lock().unwrap_or_else(|e| e.into_inner());
        let entry = failed
            .get_mut(&key)
            .expect("a root that failed leaves its error before the broadcast");
        entry.1 -= 1;
        let error = if entry.1 == 0 {
            failed.remove(&key).expect("present").0
        } else {
            entry.0.clone()
        };
        return Err(error);
    }
    let spawned = Spawned {
        first: first as u32,
        size: size as u32,
        parents_context,
        children_context,
    };
    // 3. The parents' side, in one collective creation on the parent.
    let plan = InterPlan {
        context: spawned.parents_context,
        remote: Remote {
            members: spawned.members(),
            context: spawned.children_context,
        },
    };
    let side = split::create_inter(core, plan, site)?;
    Ok(InterCommunicator::from_core(side))
}

/// [`Communicator::shrink`].
pub(crate) fn shrink<C: Communicator + ?Sized>(
    comm: &C,
    keep: bool,
) -> Result<Option<SimpleCommunicator>, Error> {
    const OP: &str = "Communicator::shrink";
    let core = comm.core();
    if core.shared().is_inter() {
        return Err(Error::Arg(ArgError::WrongKindOfCommunicator {
            op: OP,
            comm: core.name(),
            needs: "an intra-communicator",
        }));
    }
    core.caller()?;
    let (job, local) = job_of_caller(core).ok_or_else(|| from_thread("shrinking"))?;
    let pending = if keep { 0 } else { job.pending_roots(local) };
    let mut all = vec![0u32; core.size() as usize];
    comm.all_gather_into(&pending, &mut all[..]);
    let roots: Vec<(Rank, u32)> = all
        .iter()
        .enumerate()
        .filter(|&(_, &n)| n > 0)
        .map(|(rank, &n)| (rank as Rank, n))
        .collect();
    if !roots.is_empty() {
        return Err(Error::Arg(ArgError::RetiringRoot {
            comm: core.name(),
            roots,
        }));
    }
    let color = if keep {
        Color::with_value(0)
    } else {
        Color::undefined()
    };
    Ok(comm.split_by_color(color))
}

/// [`Communicator::parent`]: the calling rank's inter-communicator to its
/// parents, if it was spawned.
pub(crate) fn parent() -> Option<InterCommunicator> {
    let (job, rank, local) = sched::rank::with_current(|ctx| {
        let ctx = ctx?;
        Some((Job::arc_of(ctx), ctx.rank, ctx.local))
    })?;
    let group = job.spawned_group(local)?;
    Some(InterCommunicator::from_core(crate::coll::CommCore::new(
        Arc::clone(job.core()),
        Arc::clone(&group.parent),
        (rank.get() - group.first) as Rank,
    )))
}
