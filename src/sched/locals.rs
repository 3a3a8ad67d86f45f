//! The per-rank table behind `rank_local!` (and the per-rank views of
//! `Hls` values): one slot per key, in the rank's context.
//!
//! Every `rank_local!` static (and every `Hls` static) gets a [`KeyId`] the
//! first time it is used: a process-wide number, never reused, that indexes
//! the table of whichever rank uses it. A table starts empty (a rank that
//! never uses rank-local values allocates nothing) and grows to the largest
//! key the rank touched; each value is boxed, so a reference handed out
//! stays valid while the table grows under it (an initialiser may touch
//! other keys).
//!
//! ## Who touches the table
//!
//! Only the rank that owns it, on its own worker thread (a rank is pinned):
//! through `sched::rank::with_current` while it runs, and through the guard
//! that destroys the values when its coroutine ends or is unwound. So the
//! table needs no synchronisation, only care with re-entrance: no Rust
//! reference into the table is held across a call to user code
//! (initialisers, destructors), which may touch the table again.
//!
//! ## Life of a value
//!
//! `Empty` → `Initializing` (the initialiser runs; touching the same key
//! again from it panics, instead of aliasing a value being built) → `Alive`
//! → `Destroyed`. When the rank ends the table stops accepting new values
//! and drops the live ones in reverse order of initialisation, with the
//! rank's context still current; a destructor that touches a value already
//! dropped, or one never initialised, gets [`AccessError::Destroyed`].
//!
//! The table is the scheduler's (a rank context carries it, and the worker
//! destroys it when the rank ends); the `rank_local!` and `Hls` APIs over it
//! are in the `hls` module.
//!
//! Contexts that are not a rank's own (tasks acting for a rank, OS threads
//! calling MPI for it) have a table that refuses every access.

use std::cell::{Cell, UnsafeCell};
use std::mem;
use std::ptr;
use std::sync::atomic::{AtomicU32, Ordering};

use std::fmt;

/// Why a rank-local value could not be reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AccessError {
    /// No rank runs on this thread: a plain thread, or a closure of a
    /// parallel region (`parallel_for`, `hybrid::scope`), which runs outside of any
    /// rank wherever it runs.
    OutsideRank,
    /// The code runs in a task acting for `rank` (for instance a
    /// user-defined operation of an immediate collective): tasks may
    /// outlive their rank's values, so they get none.
    Task {
        /// The rank the task acts for.
        rank: crate::Rank,
    },
    /// The rank is ending and its rank-local values are being dropped: a
    /// destructor touched a value already dropped, or one never created.
    Destroyed,
    /// An `Hls` value was read by a rank that has not completed a
    /// `Hls::single` on it yet.
    Uninitialized,
}

impl fmt::Display for AccessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AccessError::OutsideRank => f.write_str(
                "accessed outside of any rank (from a plain thread, or from a closure of a \
                 parallel_for/scope region, which runs outside of any rank): read the value \
                 in the rank and pass it in",
            ),
            AccessError::Task { rank } => write!(
                f,
                "accessed from a task acting for rank {rank} (such as a user-defined \
                 operation of an immediate collective); only the rank itself has rank-local \
                 values"
            ),
            AccessError::Destroyed => f.write_str(
                "accessed while the rank's rank-local values are being dropped (from the \
                 destructor of another one)",
            ),
            AccessError::Uninitialized => {
                f.write_str("read before this rank completed a `single` on it: call `single` first")
            }
        }
    }
}

impl std::error::Error for AccessError {}

/// Allocates key ids, process-wide. 0 means "not allocated yet".
static NEXT_KEY: AtomicU32 = AtomicU32::new(1);

/// The id of one rank-local static, allocated on its first use.
#[derive(Debug)]
pub(crate) struct KeyId(AtomicU32);

impl KeyId {
    /// A key without an id yet (statics are built in const context).
    pub(crate) const fn new() -> KeyId {
        KeyId(AtomicU32::new(0))
    }

    /// The key's id, allocating it on first use.
    ///
    /// Relaxed is enough: the id is only a number (no data is published
    /// with it), and the compare-exchange makes every thread agree on it.
    #[inline]
    pub(crate) fn get(&self) -> u32 {
        match self.0.load(Ordering::Relaxed) {
            0 => self.allocate_slow(),
            id => id,
        }
    }

    #[cold]
    fn allocate_slow(&self) -> u32 {
        let id = NEXT_KEY.fetch_add(1, Ordering::Relaxed);
        assert!(
            id != 0 && id < u32::MAX / 2,
            "myriad: too many rank_local!/Hls statics"
        );
        match self
            .0
            .compare_exchange(0, id, Ordering::Relaxed, Ordering::Relaxed)
        {
            Ok(_) => id,
            // Another thread allocated it first: its id wins (ours is lost,
            // which only leaves a hole in the tables).
            Err(winner) => winner,
        }
    }
}

/// What a context's table accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// A rank's own context: values are created on first access.
    Live,
    /// The rank ended: no new values; live ones are being dropped.
    Destroyed,
    /// A task acting for rank `rank`: refuses every access.
    Task { rank: u32 },
    /// An OS thread calling MPI for a rank: refuses every access.
    Thread,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Empty,
    Initializing,
    Alive,
    Destroyed,
}

/// The bookkeeping of one slot (its value pointer is in `values`).
#[derive(Clone, Copy)]
struct Entry {
    drop: Option<unsafe fn(*mut ())>,
    state: State,
}

impl Entry {
    const EMPTY: Entry = Entry {
        drop: None,
        state: State::Empty,
    };
}

/// The rank-local values of one context (a field of `RankCtx`).
pub(crate) struct RankLocals {
    mode: Cell<Mode>,
    /// The boxed values, indexed by key id (slot 0 is never used): non-null
    /// exactly when the entry is `Alive`, which is all the fast path reads.
    values: UnsafeCell<Vec<*mut ()>>,
    /// The same slots' destructors and states.
    entries: UnsafeCell<Vec<Entry>>,
    /// Keys of live values, in order of initialisation.
    order: UnsafeCell<Vec<u32>>,
    /// Values created so far and their inline bytes (`size_of`; what a
    /// value owns on the heap is not known): the memory report.
    created: Cell<(usize, usize)>,
}

impl std::fmt::Debug for RankLocals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RankLocals")
            .field("mode", &self.mode.get())
            .finish_non_exhaustive()
    }
}

impl RankLocals {
    fn with_mode(mode: Mode) -> RankLocals {
        RankLocals {
            mode: Cell::new(mode),
            values: UnsafeCell::new(Vec::new()),
            entries: UnsafeCell::new(Vec::new()),
            order: UnsafeCell::new(Vec::new()),
            created: Cell::new((0, 0)),
        }
    }

    /// The values this table created and their inline bytes.
    pub(crate) fn footprint(&self) -> (usize, usize) {
        self.created.get()
    }

    /// The table of a rank's own context.
    pub(crate) fn new() -> RankLocals {
        RankLocals::with_mode(Mode::Live)
    }

    /// The table of a task acting for `rank`: refuses every access (the
    /// values belong to the rank, which may end, or unwind, first).
    pub(crate) fn for_task(rank: u32) -> RankLocals {
        RankLocals::with_mode(Mode::Task { rank })
    }

    /// The table of an OS thread's context: refuses every access.
    pub(crate) fn for_thread() -> RankLocals {
        RankLocals::with_mode(Mode::Thread)
    }

    /// Why this context may not hold rank-local values, if it may not.
    pub(crate) fn refusal(&self) -> Option<AccessError> {
        match self.mode.get() {
            Mode::Live => None,
            Mode::Destroyed => Some(AccessError::Destroyed),
            Mode::Task { rank } => Some(AccessError::Task {
                rank: rank as crate::Rank,
            }),
            Mode::Thread => Some(AccessError::OutsideRank),
        }
    }

    /// The live value of key `id`, or null (not initialised, destroyed, or
    /// refused: the slow path tells which).
    #[inline]
    pub(crate) fn get(&self, id: u32) -> *const () {
        // SAFETY: only the owning rank touches the table, on its thread, and
        // no reference into it is held across user code (module docs): this
        // shared borrow ends before we return.
        let values = unsafe { &*self.values.get() };
        match values.get(id as usize) {
            Some(&value) => value,
            None => ptr::null(),
        }
    }

    /// The value of key `id`, created by `init` if the rank has none yet.
    ///
    /// The caller must use `T` consistently for `id` (every key is owned by
    /// one typed static).
    ///
    /// # Panics
    ///
    /// If `init` touches key `id` itself (re-entrant initialisation).
    #[inline]
    pub(crate) fn get_or_init<T: 'static>(
        &self,
        id: u32,
        name: &dyn std::fmt::Display,
        init: impl FnOnce() -> T,
    ) -> Result<*const T, AccessError> {
        let value = self.get(id);
        if !value.is_null() {
            return Ok(value.cast());
        }
        self.init_slow(id, name, init)
    }

    #[cold]
    #[inline(never)]
    fn init_slow<T: 'static>(
        &self,
        id: u32,
        name: &dyn std::fmt::Display,
        init: impl FnOnce() -> T,
    ) -> Result<*const T, AccessError> {
        if let Some(refusal) = self.refusal() {
            return Err(refusal);
        }
        let index = id as usize;
        {
            // SAFETY: as in `get`; these exclusive borrows end before `init`.
            let (values, entries) = unsafe { (&mut *self.values.get(), &mut *self.entries.get()) };
            if entries.len() <= index {
                values.resize(index + 1, ptr::null_mut());
                entries.resize(index + 1, Entry::EMPTY);
            }
            let entry = &mut entries[index];
            match entry.state {
                State::Alive => return Ok(values[index].cast()),
                State::Initializing => {
                    panic!(
                        "rank_local `{name}` was accessed while it was being initialised \
                         on this rank (its initialiser touches it, directly or not)"
                    )
                }
                // Only a destroyed table has destroyed entries (refused above).
                State::Destroyed => return Err(AccessError::Destroyed),
                State::Empty => entry.state = State::Initializing,
            }
        }
        // An initialiser that panics leaves the key empty, not stuck.
        let reset = ResetOnUnwind {
            locals: self,
            index,
        };
        let value = Box::into_raw(Box::new(init()));
        mem::forget(reset);
        // SAFETY: as in `get`; `init` is done, and the table may have grown
        // meanwhile, so index it again.
        let (values, entries) = unsafe { (&mut *self.values.get(), &mut *self.entries.get()) };
        values[index] = value.cast();
        entries[index] = Entry {
            drop: Some(drop_box::<T>),
            state: State::Alive,
        };
        // SAFETY: as in `get`.
        unsafe { &mut *self.order.get() }.push(id);
        let (count, bytes) = self.created.get();
        self.created.set((count + 1, bytes + mem::size_of::<T>()));
        Ok(value)
    }

    /// Drops every live value, most recently initialised first, and refuses
    /// new ones from then on. Idempotent: a destructor that panicked leaves
    /// the rest for the next call (values left when the table itself goes
    /// away are leaked, never dropped twice).
    pub(crate) fn destroy(&self) {
        match self.mode.get() {
            Mode::Live | Mode::Destroyed => self.mode.set(Mode::Destroyed),
            Mode::Task { .. } | Mode::Thread => return,
        }
        while let Some(id) = self.pop_order() {
            let (value, drop) = {
                // SAFETY: as in `get`; the borrows end before the destructor.
                let (values, entries) =
                    unsafe { (&mut *self.values.get(), &mut *self.entries.get()) };
                let index = id as usize;
                let taken = (
                    mem::replace(&mut values[index], ptr::null_mut()),
                    entries[index].drop,
                );
                entries[index] = Entry {
                    drop: None,
                    state: State::Destroyed,
                };
                taken
            };
            if let Some(drop) = drop {
                // SAFETY: `value` came from `Box::into_raw` of the type
                // `drop` was instantiated with, and its entry no longer
                // points to it, so it is dropped exactly once.
                unsafe { drop(value) };
            }
        }
        // SAFETY: as in `get`; nothing is alive any more.
        let tables = unsafe {
            (
                mem::take(&mut *self.values.get()),
                mem::take(&mut *self.entries.get()),
            )
        };
        drop(tables);
    }

    /// The key of the most recently initialised live value.
    fn pop_order(&self) -> Option<u32> {
        // SAFETY: as in `get`; the borrow ends before we return.
        unsafe { &mut *self.order.get() }.pop()
    }

    /// A guard that destroys the values when it is dropped: at the end of
    /// the rank's coroutine, also when it is unwound.
    pub(crate) fn destroy_on_exit(&self) -> DestroyOnExit<'_> {
        DestroyOnExit(self)
    }
}

/// See [`RankLocals::destroy_on_exit`].
pub(crate) struct DestroyOnExit<'a>(&'a RankLocals);

impl Drop for DestroyOnExit<'_> {
    fn drop(&mut self) {
        self.0.destroy();
    }
}

struct ResetOnUnwind<'a> {
    locals: &'a RankLocals,
    index: usize,
}

impl Drop for ResetOnUnwind<'_> {
    fn drop(&mut self) {
        // SAFETY: as in `RankLocals::get`.
        let entries = unsafe { &mut *self.locals.entries.get() };
        if let Some(entry) = entries.get_mut(self.index) {
            entry.state = State::Empty;
        }
    }
}

/// Drops a value boxed by `init_slow`.
///
/// # Safety
///
/// `value` comes from `Box::<T>::into_raw` and is not used afterwards.
unsafe fn drop_box<T>(value: *mut ()) {
    // SAFETY: guaranteed by the caller.
    drop(unsafe { Box::from_raw(value.cast::<T>()) });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    #[test]
    fn values_are_created_once_and_dropped_in_reverse_order() {
        let locals = RankLocals::new();
        let log = Rc::new(std::cell::RefCell::new(Vec::new()));
        struct Noisy(u32, Rc<std::cell::RefCell<Vec<u32>>>);
        impl Drop for Noisy {
            fn drop(&mut self) {
                self.1.borrow_mut().push(self.0);
            }
        }
        let a = locals
            .get_or_init(3, &"a", || Noisy(3, log.clone()))
            .unwrap();
        let b = locals
            .get_or_init(1, &"b", || Noisy(1, log.clone()))
            .unwrap();
        let again = locals
            .get_or_init(3, &"a", || -> Noisy { unreachable!() })
            .unwrap();
        assert_eq!(a, again);
        assert_ne!(a, b);
        locals.destroy();
        assert_eq!(*log.borrow(), [1, 3]);
        assert_eq!(
            locals.get_or_init(2, &"c", || 0u8).unwrap_err(),
            AccessError::Destroyed
        );
    }

    #[test]
    fn a_panicking_initialiser_leaves_the_key_empty() {
        let locals = RankLocals::new();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            locals.get_or_init(1, &"k", || -> u8 { panic!("init failed") })
        }));
        assert!(result.is_err());
        let value = locals.get_or_init(1, &"k", || 7u8).unwrap();
        // SAFETY: alive until `destroy`.
        assert_eq!(unsafe { *value }, 7);
        locals.destroy();
    }

    #[test]
    fn re_entrant_initialisation_panics_and_leaves_the_key_usable() {
        let locals = RankLocals::new();
        let payload = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            locals.get_or_init(1, &"me", || locals.get_or_init(1, &"me", || 1u8))
        }))
        .unwrap_err();
        let message = payload.downcast_ref::<String>().unwrap();
        assert!(message.contains("`me`"), "{message}");
        assert!(message.contains("being initialised"), "{message}");
        assert!(locals.get(1).is_null());
        let value = locals.get_or_init(1, &"me", || 2u8).unwrap();
        // SAFETY: alive until `destroy`.
        assert_eq!(unsafe { *value }, 2);
        locals.destroy();
    }

    #[test]
    fn task_and_thread_tables_refuse() {
        let task = RankLocals::for_task(5);
        assert_eq!(
            task.get_or_init(1, &"k", || 0u8).unwrap_err(),
            AccessError::Task { rank: 5 }
        );
        let thread = RankLocals::for_thread();
        assert_eq!(
            thread.get_or_init(1, &"k", || 0u8).unwrap_err(),
            AccessError::OutsideRank
        );
    }

    #[test]
    fn key_ids_are_distinct_and_stable() {
        let (a, b) = (KeyId::new(), KeyId::new());
        let id = a.get();
        assert_ne!(id, 0);
        assert_eq!(a.get(), id);
        assert_ne!(b.get(), id);
    }
}
