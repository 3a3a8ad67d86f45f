//! [`Hls`]: one value per group of ranks, updated by `single`.
//!
//! ## Generations
//!
//! The `k`-th [`Hls::single`] call of each rank of a group is one event,
//! *generation* `k`: the first rank to arrive runs the closure, the others
//! of the group park until it is done (or arrive later and go straight
//! through), and from then on every rank that passed generation `k` reads
//! its value. A generation's value is a new value, built from the previous
//! one: a rank that has not reached generation `k` yet may still be reading
//! generation `k - 1`, so values are never mutated in place.
//!
//! Generation `k - 1`'s value is dropped once generation `k` is done and
//! every rank of the group has arrived at it: no rank can read it any more
//! (a rank reads the generation it last passed, and `single` refuses to run
//! inside [`Hls::with`] on the same value). Until then it stays; a rank of
//! the group that never calls `single` keeps old generations alive until the
//! job ends.
//!
//! ## State and locking
//!
//! Per group ([`GroupCell`]): the generation list, the waiters and the
//! poison mark under a spin lock, taken for a few instructions per `single`
//! (never across the closure or a park); `done` (last published generation)
//! and `poisoned` as atomics that parked waiters poll. Per rank (a view in
//! its rank-local table): the generation it passed, a pointer to that
//! generation's value, and a count of open reads. Reading ([`Hls::with`])
//! only touches the rank's view: no lock, no shared cache line.
//!
//! Waiters register under the lock and re-check `done` before parking; the
//! runner publishes `done` and takes the waiter list under the same lock, so
//! no wake-up is lost (the pattern of `coll::round`).
//!
//! ## Panics
//!
//! If the closure panics, the generation is *poisoned*: the waiters are
//! woken and panic, and so does every later `single` of the group on this
//! value. Uncaught, the panic fails the job like any rank's panic (the
//! waiters are unwound with the other ranks).

use std::cell::Cell;
use std::collections::VecDeque;
use std::marker::PhantomData;
use std::mem;
use std::panic::Location;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::level::{with_own_rank, HlsGroup, HlsLevel, OrRaiseAccess};
use super::AccessError;
use crate::error::OrRaise;
use crate::runtime::job::Job;
use crate::sched::locals::KeyId;
use crate::sched::{self, RankCtx, WaitInfo, WaitOp};
use crate::sync::spin::SpinLock;

/// A value shared by the ranks of each group of a level: one copy per
/// process, per NUMA node, or per worker (MPC's hierarchical local storage,
/// `#pragma hls`).
///
/// Declare it as a `static`; [`single`](Self::single) builds or updates the
/// group's value on one rank while the others of the group wait, and
/// [`with`](Self::with) reads it without locking. The values belong to the
/// running job: they are dropped when the job ends, and the next job starts
/// without any.
///
/// ```
/// use myriad::hls::{Hls, HlsLevel};
/// use std::sync::atomic::{AtomicUsize, Ordering};
///
/// /// A read-only table, one copy per process.
/// static TABLE: Hls<Vec<f64>> = Hls::new(HlsLevel::Process);
/// static BUILDS: AtomicUsize = AtomicUsize::new(0);
///
/// let sums = myriad::run(100, |_| {
///     TABLE.single(|_| {
///         BUILDS.fetch_add(1, Ordering::Relaxed);
///         (0..1000).map(|i| i as f64).collect()
///     });
///     TABLE.with(|t| t.iter().sum::<f64>())
/// })
/// .unwrap();
/// assert_eq!(BUILDS.load(Ordering::Relaxed), 1);
/// assert!(sums.iter().all(|&s| s == 499_500.0));
/// ```
///
/// Every operation must be called by a rank itself: outside of any rank
/// (a plain thread, a closure of a parallel region) and in tasks acting for
/// a rank they panic.
pub struct Hls<T> {
    level: HlsLevel,
    key: KeyId,
    values: PhantomData<fn() -> T>,
}

impl<T> std::fmt::Debug for Hls<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hls")
            .field("level", &self.level)
            .field("type", &std::any::type_name::<T>())
            .finish()
    }
}

impl<T> Hls<T> {
    /// A value shared at `level`; no group has one until a `single`.
    pub const fn new(level: HlsLevel) -> Hls<T> {
        Hls {
            level,
            key: KeyId::new(),
            values: PhantomData,
        }
    }

    /// The level whose groups share the value.
    pub fn level(&self) -> HlsLevel {
        self.level
    }
}

impl<T: Send + Sync + 'static> Hls<T> {
    /// Runs `f` on exactly one rank of the calling rank's group and makes
    /// its result the group's value; returns whether this rank ran it.
    ///
    /// `f` gets the group's previous value (`None` the first time). The
    /// `k`-th call of each rank of the group is one event: the first rank
    /// to arrive runs `f`, the others park until it is done, then all read
    /// the new value with [`with`](Self::with). Ranks that arrive after it
    /// is done do not wait. Every rank of the group should make the same
    /// calls (like a collective): an old value is dropped only once all of
    /// them moved past it.
    ///
    /// ```
    /// use myriad::hls::{Hls, HlsLevel};
    ///
    /// static STEP: Hls<u64> = Hls::new(HlsLevel::Worker);
    ///
    /// let seen = myriad::Runtime::builder().ranks(8).workers(2).run(|_| {
    ///     let mut seen = Vec::new();
    ///     for _ in 0..3 {
    ///         STEP.single(|prev| prev.map_or(1, |p| p * 10));
    ///         seen.push(STEP.with(|s| *s));
    ///     }
    ///     seen
    /// }).unwrap();
    /// assert!(seen.iter().all(|s| s == &[1, 10, 100]));
    /// ```
    ///
    /// # Panics
    ///
    /// Outside of any rank or in a task; inside `f` or [`with`](Self::with)
    /// on the same value; and if the rank that ran this generation (or an
    /// earlier one) panicked in `f` (the value is poisoned).
    #[track_caller]
    pub fn single<F>(&'static self, f: F) -> bool
    where
        F: FnOnce(Option<&T>) -> T,
    {
        let site = Location::caller();
        with_own_rank(|ctx| self.single_in(ctx, f, site)).or_raise_access("Hls::single")
    }

    /// [`single`](Self::single) on rank `ctx` (the caller); its panics name
    /// this file rather than the user's call (the closure that lends the
    /// context cuts the `#[track_caller]` chain).
    fn single_in<F>(&'static self, ctx: &RankCtx, f: F, site: &'static Location<'static>) -> bool
    where
        F: FnOnce(Option<&T>) -> T,
    {
        let view = self.view(ctx);
        assert!(
            view.readers.get() == 0,
            "Hls::single on a {} value of type {} was called inside `with` or `single` on \
             the same value (rank {}): the value being read would be replaced under its \
             reader",
            self.level,
            std::any::type_name::<T>(),
            ctx.rank
        );
        let cell = self.cell(ctx, view);
        let generation = view.generation.get() + 1;
        let mut synced = cell.synced.lock();
        if let Some(poison) = synced.poison {
            drop(synced);
            self.poisoned(ctx, poison);
        }
        synced.generation(generation).arrivals += 1;
        if generation > synced.started {
            debug_assert_eq!(generation, synced.started + 1);
            synced.started = generation;
            drop(synced);
            return self.run(ctx, view, cell, generation, f);
        }
        if cell.done.load(Ordering::Relaxed) < generation {
            // Another rank runs this generation.
            synced.waiters.push(ctx.slot);
            drop(synced);
            let info = WaitInfo::simple(WaitOp::Other, site);
            sched::wait_until(ctx, &info, || {
                cell.done.load(Ordering::Acquire) >= generation
                    || cell.poisoned.load(Ordering::Acquire)
            })
            .or_raise();
            synced = cell.synced.lock();
            if cell.done.load(Ordering::Relaxed) < generation {
                let poison = synced.poison.expect("woken by a poisoned generation");
                drop(synced);
                self.poisoned(ctx, poison);
            }
        }
        let value: *const T = &**synced
            .generation(generation)
            .value
            .as_ref()
            .expect("a done generation has its value");
        let garbage = synced.collect(generation, cell.size);
        drop(synced);
        drop(garbage);
        view.pass(generation, value.cast());
        false
    }

    /// The runner's part of [`single`](Self::single).
    fn run<F>(
        &'static self,
        ctx: &RankCtx,
        view: &View,
        cell: &GroupCell<T>,
        generation: u64,
        f: F,
    ) -> bool
    where
        F: FnOnce(Option<&T>) -> T,
    {
        let job = Job::of(ctx);
        let previous = view.value.get().cast::<T>();
        let poison = PoisonOnUnwind {
            cell,
            job,
            rank: ctx.rank.get(),
            generation,
        };
        let value = {
            // `with` may read the previous value inside `f`; `single` may not.
            let _reading = view.read();
            // SAFETY: `previous` is null or the value of generation
            // `generation - 1`, which is only dropped once this generation
            // is done (`Generations::collect`), after `f` returned.
            Box::new(f(unsafe { previous.as_ref() }))
        };
        mem::forget(poison);
        let pointer: *const T = &*value;
        let (waiters, garbage) = {
            let mut synced = cell.synced.lock();
            synced.generation(generation).value = Some(value);
            cell.done.store(generation, Ordering::Release);
            let waiters = mem::take(&mut synced.waiters);
            let garbage = synced.collect(generation, cell.size);
            (waiters, garbage)
        };
        sched::unpark_many(job.sched(), &waiters);
        // Dropped outside the lock (a big table takes a while to free).
        drop(garbage);
        view.pass(generation, pointer.cast());
        true
    }

    /// Calls `f` with the group's value as of the last
    /// [`single`](Self::single) this rank passed. Lock-free: it reads only
    /// the calling rank's own record.
    ///
    /// # Panics
    ///
    /// Outside of any rank or in a task, and before this rank passed a
    /// `single` on this value (see [`AccessError`]).
    #[track_caller]
    pub fn with<R>(&'static self, f: impl FnOnce(&T) -> R) -> R {
        match self.try_with(f) {
            Ok(r) => r,
            Err(err) => panic!(
                "cannot read the {} Hls value of type {}: {err}",
                self.level,
                std::any::type_name::<T>()
            ),
        }
    }

    /// Like [`with`](Self::with), returning an [`AccessError`] where `with`
    /// would panic.
    pub fn try_with<R>(&'static self, f: impl FnOnce(&T) -> R) -> Result<R, AccessError> {
        with_own_rank(|ctx| {
            let view = ctx.locals.get(self.key.get()).cast::<View>();
            // SAFETY: a non-null entry is this key's live `View` (created by
            // `view`), alive until the rank's table is destroyed, which
            // cannot happen while this rank runs `try_with`.
            let Some(view) = (unsafe { view.as_ref() }) else {
                return Err(ctx.locals.refusal().unwrap_or(AccessError::Uninitialized));
            };
            let value = view.value.get().cast::<T>();
            if value.is_null() {
                return Err(AccessError::Uninitialized);
            }
            let _reading = view.read();
            // SAFETY: the value of the generation this rank passed is
            // dropped only once every rank of the group arrived at a later
            // `single`, and this rank cannot do so before `f` returns
            // (`single` refuses to run while it reads).
            Ok(f(unsafe { &*value }))
        })?
    }

    /// The calling rank's group at this value's level.
    ///
    /// # Panics
    ///
    /// As [`HlsLevel::group`].
    #[track_caller]
    pub fn group(&'static self) -> HlsGroup {
        self.level.group()
    }

    /// A barrier of the calling rank's group at this value's level: see
    /// [`HlsLevel::barrier`].
    #[track_caller]
    pub fn barrier(&'static self) {
        self.level.barrier()
    }

    /// The calling rank's view of this value, created on first use.
    #[track_caller]
    fn view<'a>(&'static self, ctx: &'a RankCtx) -> &'a View {
        let name = std::any::type_name::<Self>();
        let view = ctx
            .locals
            .get_or_init(self.key.get(), &name, View::default)
            .or_raise_access("Hls");
        // SAFETY: as in `try_with`.
        unsafe { &*view }
    }

    /// The calling rank's group cell, found once per rank.
    fn cell<'a>(&'static self, ctx: &'a RankCtx, view: &View) -> &'a GroupCell<T> {
        let cached = view.cell.get().cast::<GroupCell<T>>();
        if !cached.is_null() {
            // SAFETY: cells live as long as the job, which outlives its
            // ranks' views.
            return unsafe { &*cached };
        }
        let hls = Job::of(ctx).hls();
        let group = hls.layout.group(self.level, ctx.local);
        let cell = &hls.cells::<T>(self.key.get(), self.level)[group.index()];
        view.cell.set((cell as *const GroupCell<T>).cast());
        cell
    }

    #[cold]
    #[track_caller]
    fn poisoned(&'static self, ctx: &RankCtx, poison: Poison) -> ! {
        let group = self.level.group();
        // A consequence of the builder's panic: if that panic fails the job
        // too, the job reports it rather than this one.
        sched::worker::panic_as_consequence(format!(
            "Hls::single on a {} value of type {} (group {} of {} ranks) is poisoned: rank {} \
             panicked while running generation {} of it (this is rank {})",
            self.level,
            std::any::type_name::<T>(),
            group.index(),
            group.size(),
            poison.rank,
            poison.generation,
            ctx.rank
        ))
    }
}

/// One rank's record of one `Hls` value (in its rank-local table).
struct View {
    /// The last generation this rank passed (0: none).
    generation: Cell<u64>,
    /// That generation's value (a `*const T`).
    value: Cell<*const ()>,
    /// The rank's group cell (a `*const GroupCell<T>`), once looked up.
    cell: Cell<*const ()>,
    /// Open `with` calls (and a running `single` closure).
    readers: Cell<u32>,
}

impl Default for View {
    fn default() -> View {
        View {
            generation: Cell::new(0),
            value: Cell::new(ptr::null()),
            cell: Cell::new(ptr::null()),
            readers: Cell::new(0),
        }
    }
}

impl View {
    fn pass(&self, generation: u64, value: *const ()) {
        self.generation.set(generation);
        self.value.set(value);
    }

    fn read(&self) -> Reading<'_> {
        self.readers.set(self.readers.get() + 1);
        Reading(self)
    }
}

struct Reading<'a>(&'a View);

impl Drop for Reading<'_> {
    fn drop(&mut self) {
        self.0.readers.set(self.0.readers.get() - 1);
    }
}

/// The state of one `Hls` value in one group of one job.
pub(crate) struct GroupCell<T> {
    /// Ranks in the group.
    size: usize,
    /// The last generation whose value is published.
    done: AtomicU64,
    /// Set with `Generations::poison`.
    poisoned: AtomicBool,
    synced: SpinLock<Generations<T>>,
}

impl<T> GroupCell<T> {
    pub(crate) fn new(size: usize) -> GroupCell<T> {
        GroupCell {
            size,
            done: AtomicU64::new(0),
            poisoned: AtomicBool::new(false),
            synced: SpinLock::new(Generations {
                started: 0,
                first: 1,
                live: VecDeque::new(),
                waiters: Vec::new(),
                poison: None,
            }),
        }
    }
}

/// Which rank poisoned which generation.
#[derive(Debug, Clone, Copy)]
struct Poison {
    rank: u32,
    generation: u64,
}

struct Generations<T> {
    /// The last generation whose runner was chosen (at most `done + 1`:
    /// a rank only reaches generation `k + 1` after `k` is done).
    started: u64,
    /// The generation of `live[0]`.
    first: u64,
    live: VecDeque<Generation<T>>,
    /// Slots of ranks waiting for generation `started`.
    waiters: Vec<u32>,
    poison: Option<Poison>,
}

struct Generation<T> {
    value: Option<Box<T>>,
    arrivals: usize,
}

impl<T> Generations<T> {
    /// Generation `k`, created on first arrival. Generations before `first`
    /// are gone, but no rank can still arrive at one (see `collect`).
    fn generation(&mut self, k: u64) -> &mut Generation<T> {
        debug_assert!(k >= self.first);
        let index = (k - self.first) as usize;
        while self.live.len() <= index {
            self.live.push_back(Generation {
                value: None,
                arrivals: 0,
            });
        }
        &mut self.live[index]
    }

    /// Once generation `k` is done and all `size` ranks arrived at it,
    /// nobody reads an earlier one: returns their values, to drop.
    fn collect(&mut self, k: u64, size: usize) -> Vec<Box<T>> {
        let generation = self.generation(k);
        if generation.arrivals < size || generation.value.is_none() {
            return Vec::new();
        }
        let mut garbage = Vec::new();
        while self.first < k {
            let old = self
                .live
                .pop_front()
                .expect("generations up to k are listed");
            garbage.extend(old.value);
            self.first += 1;
        }
        garbage
    }
}

/// Poisons the generation if its closure unwinds, waking its waiters.
struct PoisonOnUnwind<'a, T> {
    cell: &'a GroupCell<T>,
    job: &'a Job,
    rank: u32,
    generation: u64,
}

impl<T> Drop for PoisonOnUnwind<'_, T> {
    fn drop(&mut self) {
        let waiters = {
            let mut synced = self.cell.synced.lock();
            synced.poison = Some(Poison {
                rank: self.rank,
                generation: self.generation,
            });
            self.cell.poisoned.store(true, Ordering::Release);
            mem::take(&mut synced.waiters)
        };
        sched::unpark_many(self.job.sched(), &waiters);
    }
}
