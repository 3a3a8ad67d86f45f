//! Hybrid parallelism: parallel regions inside a rank, run by the same
//! workers as the ranks (MPC's unified MPI + OpenMP scheduling).
//!
//! [`parallel_for`] splits a range into chunks handed out dynamically (like
//! OpenMP's `schedule(dynamic)`); [`scope`] runs spawned closures. Both run
//! their work as micro-tasks on every worker of the job and on the calling
//! rank itself, and return once all of it is done. While the rank waits for
//! the last chunks it parks: its worker runs other ranks and micro-tasks.
//! Many ranks may open regions at once (ranks × tasks oversubscription):
//! every worker drains whatever region has work left, none waits idle and
//! none deadlocks.
//!
//! The closures run outside of any rank, wherever they run (on the workers'
//! own stacks, or on the rank that opened the region): they must not call
//! MPI operations or use `rank_local!` values (such calls fail with a clear
//! error; read what they need before the region), and a region opened inside
//! them runs serially. Outside any rank, regions run serially on the calling
//! thread.
//!
//! ```
//! use std::sync::atomic::{AtomicU64, Ordering};
//!
//! let sums = myriad::run(2, |_universe| {
//!     let sum = AtomicU64::new(0);
//!     myriad::parallel_for(0..1000, 16, |i| {
//!         sum.fetch_add(i as u64, Ordering::Relaxed);
//!     });
//!     sum.into_inner()
//! })
//! .unwrap();
//! assert_eq!(sums, vec![499_500; 2]);
//! ```

use std::marker::PhantomData;
use std::ops::Range;
use std::panic::{self, AssertUnwindSafe, Location};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::identity::WorldRank;
use crate::runtime::job::Job;
use crate::sched::micro::MicroTask;
use crate::sched::{self, RankCtx};
use crate::sync::SendPtr;

/// Runs `f(i)` for every `i` of `range`, in chunks of `chunk` indices taken
/// dynamically by the rank and by every worker of its job.
#[track_caller]
pub fn parallel_for<F>(range: Range<usize>, chunk: usize, f: F)
where
    F: Fn(usize) + Sync,
{
    let site = Location::caller();
    let chunk = chunk.max(1);
    sched::rank::with_current(|ctx| match ctx {
        Some(ctx) => parallel_for_in(ctx, range, chunk, f, site),
        None => range.for_each(f),
    })
}

/// [`parallel_for`] on rank `ctx` (the caller), `chunk` at least 1.
fn parallel_for_in<F>(
    ctx: &RankCtx,
    range: Range<usize>,
    chunk: usize,
    f: F,
    site: &'static Location<'static>,
) where
    F: Fn(usize) + Sync,
{
    let len = range.end.saturating_sub(range.start);
    let chunks = len.div_ceil(chunk);
    if chunks <= 1 {
        range.for_each(f);
        return;
    }
    let sched = ctx.sched();
    let region = Region {
        next: AtomicUsize::new(range.start),
        end: range.end,
        chunk,
        work: &f,
        helpers: AtomicUsize::new(0),
        waiter: ctx.slot,
        sched,
    };
    let helpers = sched.worker_count().min(chunks - 1);
    region.helpers.store(helpers, Ordering::Release);
    let region_ptr = SendPtr::new(&region);
    let rank = ctx.rank;
    let tasks: Vec<MicroTask> = (0..helpers)
        .map(|_| {
            let run: Box<dyn FnOnce() + Send + '_> = Box::new(move || {
                // SAFETY: the region lives on the rank's stack until every
                // helper has signalled (`HelperGuard`, also on unwind).
                let region = unsafe { region_ptr.get() };
                region.help();
            });
            MicroTask {
                rank,
                // SAFETY: the helper borrows the region and `f`; the rank
                // waits for all helpers before returning, so before those
                // borrows end (also when it unwinds: `HelperGuard`).
                run: unsafe { erase(run) },
            }
        })
        .collect();
    let guard = HelperGuard {
        region: &region,
        ctx,
        site,
    };
    sched.push_micro(tasks);
    // The rank works on its region too, as a helper would: outside of any
    // rank, so that chunks behave the same wherever they run.
    {
        let _outside = OutsideRank::enter();
        region.work_chunks();
    }
    guard.wait();
}

/// Runs `f(k, chunk)` for every `chunk_len`-element chunk of `data` (the
/// last may be shorter), `k` being the chunk's index, on the rank and every
/// worker of its job like [`parallel_for`]: the safe way for a region to
/// write disjoint parts of one slice (a grid's rows, a vector's blocks).
///
/// ```
/// let out = myriad::run(1, |_| {
///     let mut v = vec![0usize; 10];
///     myriad::hybrid::parallel_chunks_mut(&mut v, 3, |k, chunk| {
///         for x in chunk.iter_mut() {
///             *x = k;
///         }
///     });
///     v
/// })
/// .unwrap();
/// assert_eq!(out[0], [0, 0, 0, 1, 1, 1, 2, 2, 2, 3]);
/// ```
#[track_caller]
pub fn parallel_chunks_mut<T, F>(data: &mut [T], chunk_len: usize, f: F)
where
    T: Send,
    F: Fn(usize, &mut [T]) + Sync,
{
    /// The slice's base, shared by the chunks' closures.
    struct Base<T>(*mut T);
    // SAFETY: only used to hand out disjoint `&mut [T]` chunks to other
    // threads, which `T: Send` allows (like `slice::chunks_mut` + threads).
    unsafe impl<T: Send> Sync for Base<T> {}
    impl<T> Base<T> {
        // A method, so that closures capture the whole `Base` (which is
        // `Sync`), not its raw pointer field.
        fn at(&self, i: usize) -> *mut T {
            self.0.wrapping_add(i)
        }
    }
    let chunk_len = chunk_len.max(1);
    let len = data.len();
    let base = Base(data.as_mut_ptr());
    parallel_for(0..len.div_ceil(chunk_len), 1, |k| {
        let start = k * chunk_len;
        let end = (start + chunk_len).min(len);
        // SAFETY: `parallel_for` runs each index exactly once (indices are
        // claimed by an atomic counter), so the chunks are disjoint parts of
        // `data`, which stays mutably borrowed until every chunk is done.
        let chunk = unsafe { std::slice::from_raw_parts_mut(base.at(start), end - start) };
        f(k, chunk);
    });
}

/// Hides the running rank from the code it runs (restored on drop, also
/// when unwinding).
struct OutsideRank(*const RankCtx);

impl OutsideRank {
    fn enter() -> OutsideRank {
        OutsideRank(sched::rank::set_current(std::ptr::null()))
    }
}

impl Drop for OutsideRank {
    fn drop(&mut self) {
        sched::rank::set_current(self.0);
    }
}

/// Erases the lifetime of a micro-task's closure.
///
/// # Safety
///
/// The caller must keep everything the closure borrows alive until it has
/// run (or been dropped).
unsafe fn erase<'a>(run: Box<dyn FnOnce() + Send + 'a>) -> Box<dyn FnOnce() + Send> {
    // SAFETY: same layout; the lifetime obligation is the caller's.
    unsafe { std::mem::transmute::<Box<dyn FnOnce() + Send + 'a>, Box<dyn FnOnce() + Send>>(run) }
}

struct Region<'a, F> {
    next: AtomicUsize,
    end: usize,
    chunk: usize,
    work: &'a F,
    /// Helpers still running (or queued).
    helpers: AtomicUsize,
    waiter: u32,
    sched: &'a sched::Scheduler,
}

impl<F: Fn(usize) + Sync> Region<'_, F> {
    fn work_chunks(&self) {
        loop {
            let start = self.next.fetch_add(self.chunk, Ordering::Relaxed);
            if start >= self.end {
                return;
            }
            for i in start..(start + self.chunk).min(self.end) {
                (self.work)(i);
            }
        }
    }

    /// A helper's life: take chunks, then signal the rank (last use of the
    /// region: read the waiter and the job first).
    fn help(&self) {
        let done = panic::catch_unwind(AssertUnwindSafe(|| self.work_chunks()));
        // A panicking chunk has already failed the job through the worker's
        // handler once we resume it; stop the others from taking chunks.
        if done.is_err() {
            self.next.store(self.end, Ordering::Relaxed);
        }
        // Read what the wake-up needs before the last signal: the region
        // may be gone right after it.
        let (waiter, sched) = (self.waiter, self.sched);
        if self.helpers.fetch_sub(1, Ordering::AcqRel) == 1 {
            sched::unpark(sched, waiter);
        }
        if let Err(payload) = done {
            panic::resume_unwind(payload);
        }
    }
}

/// Waits for a region's helpers, also when the rank unwinds (the helpers
/// borrow the rank's stack).
struct HelperGuard<'r, 'a, F> {
    region: &'r Region<'a, F>,
    ctx: &'r RankCtx,
    site: &'static Location<'static>,
}

impl<F> HelperGuard<'_, '_, F> {
    fn wait(self) {
        let done = || self.region.helpers.load(Ordering::Acquire) == 0;
        wait_for(self.ctx, self.site, done);
        std::mem::forget(self);
    }
}

/// Waits until `done()`: parks the rank, or, if it is unwinding (where it
/// must not suspend) or is unwound while parked (the job failed), runs
/// queued micro-tasks itself (its own helpers may be among them) and yields
/// the thread. It returns (or lets the unwind go on) only once `done()`:
/// the micro-tasks borrow the caller's stack.
fn wait_for(ctx: &RankCtx, site: &'static Location<'static>, done: impl Fn() -> bool) {
    sched::wait_fully(Some(ctx), site, done, || match ctx.sched().pop_micro() {
        Some(task) => {
            let _ = panic::catch_unwind(AssertUnwindSafe(task.run));
        }
        None => std::thread::yield_now(),
    });
}

impl<F> Drop for HelperGuard<'_, '_, F> {
    fn drop(&mut self) {
        // Unwinding out of the region: no more chunks for anyone.
        self.region.next.store(self.region.end, Ordering::Relaxed);
        let done = || self.region.helpers.load(Ordering::Acquire) == 0;
        wait_for(self.ctx, self.site, done);
    }
}

/// A scope for spawning closures as micro-tasks: see [`scope`].
pub struct Scope<'scope> {
    pending: AtomicUsize,
    waiter: Option<u32>,
    rank: WorldRank,
    panicked: AtomicBool,
    /// Closures of a scope used outside any rank, run at the end.
    serial: Mutex<Vec<Box<dyn FnOnce() + Send + 'scope>>>,
    /// The job of the rank that opened the scope (`None` outside any
    /// rank), whose workers run the spawned closures. An `Arc` of the job,
    /// not a reference from the rank's context: the scope keeps nothing
    /// of the context (`sched::rank::with_current`).
    job: Option<Arc<Job>>,
    marker: PhantomData<&'scope mut &'scope ()>,
}

impl std::fmt::Debug for Scope<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scope")
            .field("pending", &self.pending.load(Ordering::Relaxed))
            .finish()
    }
}

impl<'scope> Scope<'scope> {
    /// Runs `f` as a micro-task on some worker of the job, before the scope
    /// ends.
    pub fn spawn<F>(&self, f: F)
    where
        F: FnOnce() + Send + 'scope,
    {
        let Some(sched) = self.job.as_deref().map(|job| job.sched()) else {
            self.serial
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(Box::new(f));
            return;
        };
        self.pending.fetch_add(1, Ordering::AcqRel);
        let me = SendPtr::new(self);
        let run: Box<dyn FnOnce() + Send + 'scope> = Box::new(move || {
            let outcome = panic::catch_unwind(AssertUnwindSafe(f));
            // SAFETY: the scope waits for every spawned closure before it
            // returns (also when unwinding), so it is alive here.
            let scope = unsafe { me.get() };
            if outcome.is_err() {
                scope.panicked.store(true, Ordering::Relaxed);
            }
            // The job outlives the scope (its workers run this closure):
            // its scheduler may be used once the scope is gone.
            let waiter = scope.waiter;
            let sched = scope.job.as_deref().map(|job| job.sched());
            if scope.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
                if let (Some(waiter), Some(sched)) = (waiter, sched) {
                    sched::unpark(sched, waiter);
                }
            }
            if let Err(payload) = outcome {
                panic::resume_unwind(payload);
            }
        });
        // SAFETY: the closure borrows data of lifetime 'scope; the scope
        // waits for it (`scope`'s end, also on unwind) before 'scope ends.
        let run = unsafe { erase(run) };
        sched.push_micro([MicroTask {
            rank: self.rank,
            run,
        }]);
    }

    fn wait_all(&self, site: &'static Location<'static>) {
        sched::rank::with_current(|ctx| {
            if let Some(ctx) = ctx {
                wait_for(ctx, site, || self.pending.load(Ordering::Acquire) == 0);
            }
        });
    }
}

/// Runs `f` with a [`Scope`] whose spawned closures run as micro-tasks on
/// the job's workers; returns once all of them have finished.
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
///
/// myriad::run(1, |_| {
///     let hits = AtomicUsize::new(0);
///     myriad::hybrid::scope(|s| {
///         for _ in 0..10 {
///             s.spawn(|| {
///                 hits.fetch_add(1, Ordering::Relaxed);
///             });
///         }
///     });
///     assert_eq!(hits.load(Ordering::Relaxed), 10);
/// })
/// .unwrap();
/// ```
#[track_caller]
pub fn scope<'scope, F, R>(f: F) -> R
where
    F: FnOnce(&Scope<'scope>) -> R,
{
    let site = Location::caller();
    let (waiter, rank, job) = sched::rank::with_current(|ctx| match ctx {
        Some(c) => (Some(c.slot), c.rank, Some(Job::arc_of(c))),
        None => (None, WorldRank::new(0), None),
    });
    let scope = Scope {
        pending: AtomicUsize::new(0),
        waiter,
        rank,
        panicked: AtomicBool::new(false),
        serial: Mutex::new(Vec::new()),
        job,
        marker: PhantomData,
    };
    struct Wait<'a, 's>(&'a Scope<'s>, &'static Location<'static>);
    impl Drop for Wait<'_, '_> {
        fn drop(&mut self) {
            self.0.wait_all(self.1);
        }
    }
    let result = {
        let _wait = Wait(&scope, site);
        f(&scope)
    };
    for f in scope
        .serial
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .drain(..)
    {
        f();
    }
    if scope.panicked.load(Ordering::Relaxed) {
        panic!("a closure spawned in a hybrid::scope panicked");
    }
    result
}
