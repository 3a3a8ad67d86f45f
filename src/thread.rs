//! OS threads of a rank, joined without blocking its worker.
//!
//! A rank is a coroutine on a worker thread: `std::thread::JoinHandle::join`
//! (and the end of `std::thread::scope`) would block that worker, and with
//! it every other rank it runs, possibly the very rank the thread waits for.
//! [`spawn`] and [`scope`] start ordinary OS threads whose joins *park the
//! rank* instead: its worker runs other ranks until the thread is done.
//!
//! With thread level [`Threading::Serialized`](crate::Threading) or
//! [`Threading::Multiple`](crate::Threading), these threads (like any OS
//! thread) may call MPI through the rank's communicators; their blocking
//! calls park the OS thread. Outside any rank, both behave like their `std`
//! counterparts. The API is `std`'s: [`Scope::spawn`] returns a
//! [`ScopedJoinHandle`] through which a scoped thread hands back its value.
//!
//! ```
//! use myriad::traits::*;
//! use myriad::Threading;
//!
//! myriad::Runtime::builder()
//!     .ranks(2)
//!     .threading(Threading::Multiple)
//!     .run(|universe| {
//!         let world = universe.world();
//!         let peer = world.process_at_rank(1 - world.rank());
//!         // One thread sends while the rank itself receives.
//!         myriad::thread::scope(|s| {
//!             s.spawn(|| peer.send(&world.rank()));
//!             let (got, _) = peer.receive::<i32>();
//!             assert_eq!(got, 1 - world.rank());
//!         });
//!         // A scoped thread returns a value; joining it parks the rank.
//!         let doubled = myriad::thread::scope(|s| s.spawn(|| 2 * world.rank()).join());
//!         assert_eq!(doubled.unwrap(), 2 * world.rank());
//!     })
//!     .unwrap();
//! ```

use std::marker::PhantomData;
use std::panic::{AssertUnwindSafe, Location};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::runtime::job::Job;
use crate::sched;
use crate::sched::join::JoinLatch;
use crate::sync::SendPtr;

/// A rank (its job and park slot) that waits for threads: the rank that
/// opened a [`Scope`].
struct Joiner {
    job: Arc<Job>,
    slot: u32,
}

impl Joiner {
    fn of_caller() -> Option<Joiner> {
        with_caller_rank(|ctx| {
            ctx.map(|ctx| Joiner {
                job: Job::arc_of(ctx),
                slot: ctx.slot,
            })
        })
    }
}

/// Runs `f` with the context of the calling rank, if the caller is a rank's
/// coroutine (not an OS thread acting for one, nor code outside any rank).
fn with_caller_rank<R>(f: impl FnOnce(Option<&sched::RankCtx>) -> R) -> R {
    sched::rank::with_current(|ctx| f(ctx.filter(|ctx| !ctx.is_thread())))
}

/// Counts a thread about to start in `job`: while it runs, a rank waiting
/// for it is not deadlocked (`Scheduler::external`).
fn count_thread(job: &Job) {
    job.sched().external_started();
}

/// The thread runs: it tells MPI waits it is counted.
fn thread_started(job: &Job) {
    sched::thread::counted_as_external(job.sched());
}

/// The thread is done (after waking whoever waits for it).
fn thread_ended(job: &Job) {
    job.sched().external_ended();
}

/// Signals the end of a spawned thread (also when it panics) and wakes the
/// rank that joins it, if one parked.
struct Finished<'a>(&'a Shared);

impl Drop for Finished<'_> {
    fn drop(&mut self) {
        let shared = self.0;
        let waiter = shared.end.finish();
        if let Some(job) = &shared.job {
            if let Some(slot) = waiter {
                sched::unpark(job.sched(), slot);
            }
            thread_ended(job);
        }
    }
}

/// Parks the calling rank until `done()`. When it is not a rank, is
/// unwinding, or is unwound while parked (the job failed), it yields the
/// thread until `done()` instead: it never returns or lets an unwind go on
/// before `done()`, because the threads may borrow the caller's stack.
fn wait(site: &'static Location<'static>, done: impl Fn() -> bool) {
    with_caller_rank(|ctx| sched::wait_fully(ctx, site, done, std::thread::yield_now));
}

/// The state a spawned thread shares with its handle.
///
/// Whoever holds the handle may join: the spawning rank, another rank it
/// handed the handle to, or a plain thread. A rank of the spawner's job
/// registers its slot with `end` before it parks, and the thread wakes that
/// slot when it ends (`sched::join`); its `external` count keeps the job
/// from being reported as deadlocked meanwhile.
struct Shared {
    end: JoinLatch,
    /// The spawning rank's job; none if spawned outside any rank.
    job: Option<Arc<Job>>,
}

/// An owned permission to join a thread started by [`spawn`].
#[derive(Debug)]
pub struct JoinHandle<T> {
    inner: std::thread::JoinHandle<T>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("finished", &self.end.is_finished())
            .finish()
    }
}

impl<T> JoinHandle<T> {
    /// Waits for the thread to finish and returns its result (`Err` with
    /// the panic payload if it panicked). Inside a rank of the job the
    /// thread was spawned in (the spawning rank, or any rank the handle was
    /// handed to) the rank parks meanwhile and its worker runs other ranks.
    /// Elsewhere (a plain thread, a micro-task of a parallel region, a rank
    /// of another job) it blocks the calling thread, like `std`'s join.
    #[track_caller]
    pub fn join(self) -> std::thread::Result<T> {
        let joiner = self.shared.job.as_ref().and_then(|job| {
            with_caller_rank(|ctx| ctx.filter(|ctx| job.hosts(ctx)).map(|ctx| ctx.slot))
        });
        if let Some(slot) = joiner {
            let site = Location::caller();
            if self.shared.end.register(slot) {
                wait(site, || self.shared.end.is_finished());
            }
        }
        self.inner.join()
    }

    /// Whether the thread has finished running its closure.
    pub fn is_finished(&self) -> bool {
        self.shared.end.is_finished()
    }

    /// The underlying `std` thread.
    pub fn thread(&self) -> &std::thread::Thread {
        self.inner.thread()
    }
}

/// Spawns an OS thread (`std::thread::spawn`) whose [`JoinHandle::join`]
/// parks the joining rank instead of blocking its worker.
///
/// # Panics
///
/// If the OS cannot create a thread, like `std::thread::spawn`.
pub fn spawn<F, T>(f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let shared = Arc::new(Shared {
        end: JoinLatch::new(),
        job: with_caller_rank(|ctx| ctx.map(Job::arc_of)),
    });
    if let Some(job) = &shared.job {
        count_thread(job);
    }
    let theirs = Arc::clone(&shared);
    let inner = std::thread::spawn(move || {
        if let Some(job) = &theirs.job {
            thread_started(job);
        }
        let _finished = Finished(&theirs);
        f()
    });
    JoinHandle { inner, shared }
}

/// A scope for spawning threads that borrow from the rank: see [`scope`].
pub struct Scope<'scope, 'env: 'scope> {
    running: AtomicUsize,
    joiner: Option<Joiner>,
    /// Threads of the scope, joined when it ends.
    threads: std::sync::Mutex<Vec<std::thread::JoinHandle<()>>>,
    panicked: AtomicBool,
    scope: PhantomData<&'scope mut &'scope ()>,
    env: PhantomData<&'env mut &'env ()>,
}

impl std::fmt::Debug for Scope<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scope")
            .field("running", &self.running.load(Ordering::Relaxed))
            .finish()
    }
}

/// Like `std::thread::scope`: threads spawned in the scope may borrow from
/// outside it and are all joined when it ends, by parking the calling rank.
///
/// # Panics
///
/// If a spawned thread panicked (after all have finished), like
/// `std::thread::scope`.
#[track_caller]
pub fn scope<'env, F, T>(f: F) -> T
where
    F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> T,
{
    let site = Location::caller();
    let scope = Scope {
        running: AtomicUsize::new(0),
        joiner: Joiner::of_caller(),
        threads: std::sync::Mutex::new(Vec::new()),
        panicked: AtomicBool::new(false),
        scope: PhantomData,
        env: PhantomData,
    };
    /// Waits for the scope's threads, also when `f` unwinds: they borrow
    /// from the caller's stack.
    struct End<'a, 's, 'e>(&'a Scope<'s, 'e>, &'static Location<'static>);
    impl Drop for End<'_, '_, '_> {
        fn drop(&mut self) {
            if self.0.joiner.is_some() {
                wait(self.1, || self.0.running.load(Ordering::Acquire) == 0);
            }
            let threads =
                std::mem::take(&mut *self.0.threads.lock().unwrap_or_else(|e| e.into_inner()));
            for thread in threads {
                // Finished already (they signalled): this returns at once.
                if thread.join().is_err() {
                    self.0.panicked.store(true, Ordering::Relaxed);
                }
            }
        }
    }
    let result = {
        let _end = End(&scope, site);
        // SAFETY: `scope` lives until `_end` has waited for every thread;
        // `f` gets it for 'scope, which cannot outlive this block from the
        // caller's point of view (the closure is generic over it).
        f(unsafe { &*(&scope as *const Scope<'_, 'env>) })
    };
    if scope.panicked.load(Ordering::Relaxed) {
        panic!("a thread spawned in myriad::thread::scope panicked");
    }
    result
}

impl<'scope, 'env> Scope<'scope, 'env> {
    /// Spawns a thread that may borrow anything that outlives the scope,
    /// like `std::thread::Scope::spawn`. It is joined when the scope ends
    /// unless joined before through the returned handle.
    ///
    /// # Panics
    ///
    /// If the OS cannot create a thread.
    pub fn spawn<F, T>(&'scope self, f: F) -> ScopedJoinHandle<'scope, T>
    where
        F: FnOnce() -> T + Send + 'scope,
        T: Send + 'scope,
    {
        self.running.fetch_add(1, Ordering::AcqRel);
        if let Some(joiner) = &self.joiner {
            count_thread(&joiner.job);
        }
        let packet = Arc::new(Packet {
            end: JoinLatch::new(),
            result: std::sync::Mutex::new(None),
            scope_panicked: &self.panicked,
        });
        let theirs = Arc::clone(&packet);
        let me = SendPtr::new(self);
        let body = move || {
            // SAFETY: the scope outlives its threads (`scope` waits for
            // `running` to reach zero before it returns or unwinds).
            let scope: &Scope<'scope, 'env> = unsafe { me.get() };
            if let Some(joiner) = &scope.joiner {
                thread_started(&joiner.job);
            }
            // Declared first, dropped last: the scope may end once it ran.
            let _finished = ScopeFinished(scope);
            let result = std::panic::catch_unwind(AssertUnwindSafe(f));
            *theirs.result.lock().unwrap_or_else(|e| e.into_inner()) = Some(result);
            // A rank that joins this handle is of the scope's job (see
            // `ScopedJoinHandle::join`); the job lives as long as the scope.
            if let Some(slot) = theirs.end.finish() {
                if let Some(joiner) = &scope.joiner {
                    sched::unpark(joiner.job.sched(), slot);
                }
            }
            // Dropping the last reference records an unjoined panic in the
            // scope, which is alive until `_finished` is dropped.
            drop(theirs);
        };
        // SAFETY: the closure may borrow data of lifetime 'scope; `scope`
        // joins the thread (waits for its end signal, then `join`) before
        // 'scope ends, also when unwinding.
        let handle = match unsafe { std::thread::Builder::new().spawn_unchecked(body) } {
            Ok(handle) => handle,
            Err(err) => {
                self.running.fetch_sub(1, Ordering::AcqRel);
                if let Some(joiner) = &self.joiner {
                    thread_ended(&joiner.job);
                }
                panic!("failed to spawn a thread: {err}");
            }
        };
        let thread = handle.thread().clone();
        self.threads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(handle);
        ScopedJoinHandle {
            packet,
            thread,
            joiner: self.joiner.as_ref(),
        }
    }
}

/// What a scoped thread shares with its [`ScopedJoinHandle`]: whether it
/// has ended (and which rank to wake then), and its result until joined.
struct Packet<'scope, T> {
    end: JoinLatch,
    result: std::sync::Mutex<Option<std::thread::Result<T>>>,
    /// Set if the thread panicked and nobody joined it (then `scope`
    /// panics, like `std::thread::scope`).
    scope_panicked: &'scope AtomicBool,
}

impl<T> Drop for Packet<'_, T> {
    fn drop(&mut self) {
        let result = self.result.get_mut().unwrap_or_else(|e| e.into_inner());
        if matches!(result, Some(Err(_))) {
            self.scope_panicked.store(true, Ordering::Relaxed);
        }
    }
}

/// An owned permission to join a thread spawned in a [`scope`]
/// (`std::thread::ScopedJoinHandle`).
///
/// Dropping it detaches nothing: the scope still joins the thread when it
/// ends, and panics then if the thread panicked and was not joined.
pub struct ScopedJoinHandle<'scope, T> {
    packet: Arc<Packet<'scope, T>>,
    thread: std::thread::Thread,
    /// The rank that opened the scope (its job hosts the ranks that park
    /// in `join`); `None` outside any rank.
    joiner: Option<&'scope Joiner>,
}

impl<T> std::fmt::Debug for ScopedJoinHandle<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScopedJoinHandle")
            .field("thread", &self.thread)
            .field("finished", &self.is_finished())
            .finish()
    }
}

impl<'scope, T> ScopedJoinHandle<'scope, T> {
    /// Waits for the thread to finish and returns its result: `Ok` with the
    /// value its closure returned, `Err` with the panic payload if it
    /// panicked (the scope then does not panic for it).
    ///
    /// A rank of the scope's job parks meanwhile and its worker runs other
    /// ranks. Any other caller (an OS thread the handle was moved to, a
    /// rank of another job, code outside any rank) yields its thread until
    /// the thread has finished.
    #[track_caller]
    pub fn join(self) -> std::thread::Result<T> {
        let site = Location::caller();
        let packet = &self.packet;
        let done = || packet.end.is_finished();
        let ours = self.joiner.and_then(|joiner| {
            with_caller_rank(|ctx| ctx.filter(|ctx| joiner.job.hosts(ctx)).map(|ctx| ctx.slot))
        });
        match ours {
            Some(slot) => {
                if packet.end.register(slot) {
                    wait(site, done);
                }
            }
            None => sched::wait_fully(None, site, done, std::thread::yield_now),
        }
        let result = packet
            .result
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        result.expect("a finished scoped thread leaves its result")
    }

    /// Whether the thread has finished running its closure (it may still be
    /// exiting).
    pub fn is_finished(&self) -> bool {
        self.packet.end.is_finished()
    }

    /// The underlying `std` thread.
    pub fn thread(&self) -> &std::thread::Thread {
        &self.thread
    }
}
/// Decrements a scope's running count when its thread ends (also by
/// panic) and wakes the rank waiting for the scope.
struct ScopeFinished<'a, 's, 'e>(&'a Scope<'s, 'e>);

impl Drop for ScopeFinished<'_, '_, '_> {
    fn drop(&mut self) {
        // Read what the wake-up needs first: the scope may end right after
        // the decrement.
        let joiner = self.0.joiner.as_ref().map(|j| (Arc::clone(&j.job), j.slot));
        if self.0.running.fetch_sub(1, Ordering::AcqRel) == 1 {
            if let Some((job, slot)) = &joiner {
                sched::unpark(job.sched(), *slot);
            }
        }
        if let Some((job, _)) = joiner {
            job.sched().external_ended();
        }
    }
}
