//! OS threads acting for a rank: MPI calls from threads that a rank spawned
//! (thread levels `Serialized` and `Multiple`).
//!
//! A rank's own MPI calls run on its coroutine and park it. An OS thread
//! cannot be suspended that way, so the first MPI call it makes for a rank
//! gives it a *thread context*: a [`RankCtx`] with the rank's identity, a
//! park slot of its own (taken from the task slots) whose home is the thread
//! rather than a worker, and no yielder. Its waits park the OS thread
//! (`std::thread::park`); whoever unparks its slot wakes the thread instead
//! of requeueing a coroutine ([`wake`]). The context lives in a thread-local
//! until the thread exits, so a request started on the thread can be waited
//! for later on the same thread.
//!
//! Deadlock detection covers thread contexts: their slots are waiting
//! parties like tasks. A thread that is not parked in MPI keeps the job from
//! being declared deadlocked; a thread that parks while every worker sleeps
//! runs the check itself. An OS thread may wake ranks while another party
//! inspects the slots, so thread contexts bump an epoch before parking and
//! every check is confirmed against it (`deadlock::check_stable`).
//!
//! When the job fails or ends, parked threads are woken and their calls
//! return an error: MPI calls must not outlive the rank they act for.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, Weak};
use std::thread::Thread;

use super::deadlock;
use super::rank::{Life, RankCtx, WaitInfo};
use super::{Host, Scheduler, Threading};
use crate::error::{CommError, Error};
use crate::identity::LocalIndex;

/// The worker part of a slot's home (`Slot::home`) when it is an OS thread.
pub(crate) const HOME: usize = u32::MAX as usize;

/// The thread contexts of one job.
#[derive(Debug, Default)]
pub(crate) struct Threads {
    /// The thread behind each thread-context slot.
    registered: Mutex<HashMap<u32, Thread>>,
    /// Bumped by every thread context before it parks.
    epoch: AtomicU64,
    /// Every rank has finished: no MPI call can complete any more.
    ended: AtomicBool,
}

impl Threads {
    /// The parking epoch (see the module docs).
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }

    /// Wakes every registered thread (the job failed or ended).
    pub(crate) fn wake_all(&self) {
        for thread in self
            .registered
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
        {
            thread.unpark();
        }
    }

    /// The job's ranks have all finished: fail the calls of threads still
    /// acting for them.
    pub(crate) fn end(&self) {
        self.ended.store(true, Ordering::SeqCst);
        self.wake_all();
    }

    fn ended(&self) -> bool {
        self.ended.load(Ordering::SeqCst)
    }
}

/// A thread context, owned by the thread-local list of its OS thread.
struct ThreadCtx {
    ctx: RankCtx,
    /// Keeps the job's allocation (not the job) alive, so that its address
    /// (`RankCtx::host`) identifies it for as long as this context exists.
    host: Weak<dyn Host>,
}

impl Drop for ThreadCtx {
    fn drop(&mut self) {
        if let Some(host) = self.host.upgrade() {
            let sched = host.scheduler();
            sched
                .threads
                .registered
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&self.ctx.slot);
            sched.slots.release(self.ctx.slot);
        }
    }
}

thread_local! {
    /// The job whose `external` count includes this OS thread while it runs
    /// (threads started by `myriad::thread`).
    static EXTERNAL: Cell<*const Scheduler> = const { Cell::new(ptr::null()) };

    /// The contexts of this OS thread, one per (job, rank) it acted for.
    /// Boxed: references handed out stay valid while the list grows.
    #[allow(clippy::vec_box)]
    static CONTEXTS: RefCell<Vec<Box<ThreadCtx>>> = const { RefCell::new(Vec::new()) };
}

/// The context through which this OS thread (which runs no rank) calls MPI
/// as the rank of local index `local` of the job `host` (whose scheduler
/// is `sched`); created on first use. It is lent for as long as the caller
/// borrows `sched`: the caller keeps the scheduler alive while it uses the
/// context (it holds its job's communicator layer), and the context never
/// leaves the thread.
///
/// # Errors
///
/// The rank's thread level is below `Serialized`, or the job has ended or
/// failed.
pub(crate) fn context<'a>(
    sched: &'a Scheduler,
    host: &Weak<dyn Host>,
    local: LocalIndex,
) -> Result<&'a RankCtx, Error> {
    let level = sched.threading_of(local);
    let rank = sched.slots.get(local.slot()).rank();
    if level < Threading::Serialized {
        return Err(Error::Comm(CommError::ThreadLevel {
            owner: rank.as_rank(),
            level: format!("{level:?}"),
        }));
    }
    check_alive(sched)?;
    let id = Weak::as_ptr(host).cast::<()>();
    let found = CONTEXTS.with(|list| {
        let list = list.borrow();
        list.iter()
            .find(|t| ptr::eq(t.ctx.host, id) && t.ctx.local == local)
            .map(|t| &t.ctx as *const RankCtx)
    });
    let ctx = match found {
        Some(ctx) => ctx,
        None => create(sched, host, local)?,
    };
    // SAFETY: the context is boxed in this thread's list, which only drops
    // entries at thread exit or when their job is gone (`create`); the
    // reference borrows `sched`, which the caller keeps alive (it holds its
    // job's communicator layer) while it uses the reference, and the
    // reference never leaves this thread (`RankCtx` is not `Sync`).
    Ok(unsafe { &*ctx })
}

fn create(
    sched: &Scheduler,
    host: &Weak<dyn Host>,
    local: LocalIndex,
) -> Result<*const RankCtx, Error> {
    let rank_slot = sched.slots.get(local.slot());
    let rank = rank_slot.rank();
    let slot = sched.slots.allocate(rank)?;
    // The rank's worker: a hint for per-worker structures (collective
    // rounds keep their waiter lists per worker, under locks).
    let worker = match rank_slot.life() {
        Life::Running => rank_slot.home().0 as u32,
        _ => 0,
    };
    sched
        .threads
        .registered
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(slot, std::thread::current());
    // Running from now on: a waiting party for deadlock detection.
    sched.slots.get(slot).set_home(HOME, 0);
    let entry = Box::new(ThreadCtx {
        ctx: RankCtx {
            sched,
            host: Weak::as_ptr(host).cast(),
            rank,
            local,
            slot,
            park_slot: sched.slots.get(slot),
            worker,
            spins: false,
            yielder: ptr::null(),
            initialized: Cell::new(true),
            parked_at: Cell::new(0),
            locals: super::locals::RankLocals::for_thread(),
            recorder: None,
        },
        host: Weak::clone(host),
    });
    let ctx = &entry.ctx as *const RankCtx;
    CONTEXTS.with(|list| {
        let mut list = list.borrow_mut();
        // Contexts of jobs that are gone can go: nobody can be using them
        // (a call keeps its scheduler alive, and fails once its job ended).
        list.retain(|t| t.host.strong_count() > 0);
        list.push(entry);
    });
    Ok(ctx)
}

fn check_alive(sched: &Scheduler) -> Result<(), Error> {
    if sched.is_aborting() {
        return Err(Error::Aborted);
    }
    if sched.threads.ended() {
        return Err(Error::Comm(CommError::RankFinished));
    }
    Ok(())
}

/// Starts counting the calling OS thread, a thread of a rank of `job`, as
/// one that may still wake ranks (`Scheduler::external`): no deadlock is
/// reported while it runs outside MPI waits. The caller already added it to
/// the count (before the thread started, so that no report can slip in).
pub(crate) fn counted_as_external(sched: &Scheduler) {
    EXTERNAL.with(|e| e.set(sched));
}

/// `sched::park_once` for a thread context: parks the OS thread until its
/// slot is unparked (or the job fails or ends).
pub(crate) fn park_once(ctx: &RankCtx, info: &WaitInfo) -> Result<(), Error> {
    let sched = ctx.sched();
    check_alive(sched)?;
    let slot = sched.slots.get(ctx.slot);
    slot.set_wait(info);
    sched.threads.epoch.fetch_add(1, Ordering::SeqCst);
    // While parked it wakes nobody: out of the external count (its slot
    // stands for it instead).
    let counted = EXTERNAL.with(|e| ptr::eq(e.get(), sched));
    if counted {
        sched.external.fetch_sub(1, Ordering::SeqCst);
    }
    let _recount = Recount(counted.then_some(sched));
    if slot.park.try_park() {
        if sched.sleep.all_asleep()
            && sched.timers.load(Ordering::SeqCst) == 0
            && sched.external.load(Ordering::SeqCst) == 0
        {
            // Nobody else may look: every worker already went to sleep.
            if let Some(report) = deadlock::check_stable(sched) {
                sched.fail(Error::Deadlock { report });
            }
        }
        while slot.park.is_parked() && !sched.is_aborting() && !sched.threads.ended() {
            std::thread::park();
        }
        slot.park.resumed();
        check_alive(sched)?;
    }
    Ok(())
}

/// Adds a counted thread back to the external count when it stops waiting.
struct Recount<'a>(Option<&'a Scheduler>);

impl Drop for Recount<'_> {
    fn drop(&mut self) {
        if let Some(sched) = self.0 {
            sched.external.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// Wakes the OS thread behind thread-context slot `slot` (its park state
/// was just unparked).
pub(crate) fn wake(sched: &Scheduler, slot: u32) {
    if let Some(thread) = sched
        .threads
        .registered
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&slot)
    {
        thread.unpark();
    }
}
