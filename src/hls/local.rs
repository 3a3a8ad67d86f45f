//! `rank_local!`: statics with one value per rank (MPC's extended TLS).

use std::cell::{Cell, RefCell};
use std::fmt;

use crate::sched::locals::{AccessError, KeyId};
use crate::sched::rank;

/// Declares statics with one value per rank: [`RankLocalKey`]s.
///
/// The syntax is `std::thread_local!`'s. Each rank gets its own value,
/// created by the initialiser on the rank's first access and dropped when
/// the rank ends, however many ranks share a worker thread. See the
/// [module docs](crate::hls) for why `thread_local!` is not enough.
///
/// ```
/// use std::cell::{Cell, RefCell};
///
/// myriad::rank_local! {
///     /// Calls made by this rank.
///     pub static CALLS: Cell<u64> = Cell::new(0);
///     static NAMES: RefCell<Vec<String>> = RefCell::new(Vec::new());
/// }
///
/// let counts = myriad::Runtime::builder()
///     .ranks(8)
///     .workers(1)
///     .run(|universe| {
///         use myriad::traits::*;
///         let rank = universe.world().rank();
///         for _ in 0..=rank {
///             CALLS.set(CALLS.get() + 1);
///             myriad::yield_now(); // the other ranks of the worker run here
///         }
///         NAMES.with_borrow_mut(|n| n.push(format!("rank {rank}")));
///         CALLS.get()
///     })
///     .unwrap();
/// assert_eq!(counts, [1, 2, 3, 4, 5, 6, 7, 8]);
/// ```
#[macro_export]
macro_rules! rank_local {
    () => {};
    (@one $(#[$attr:meta])* $vis:vis $name:ident, $t:ty, $init:expr) => {
        $(#[$attr])*
        $vis static $name: $crate::hls::RankLocalKey<$t> = {
            fn __myriad_rank_local_init() -> $t {
                $init
            }
            $crate::hls::RankLocalKey::__new(
                __myriad_rank_local_init,
                ::core::concat!(::core::module_path!(), "::", ::core::stringify!($name)),
            )
        };
    };
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = $init:expr; $($rest:tt)*) => {
        $crate::rank_local!(@one $(#[$attr])* $vis $name, $t, $init);
        $crate::rank_local!($($rest)*);
    };
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = $init:expr) => {
        $crate::rank_local!(@one $(#[$attr])* $vis $name, $t, $init);
    };
}

/// A static with one value per rank, declared by [`rank_local!`].
///
/// The API is `std::thread::LocalKey`'s: [`with`](Self::with) borrows the
/// calling rank's value (creating it on the rank's first access),
/// [`try_with`](Self::try_with) returns an [`AccessError`] instead of
/// panicking, and keys of `Cell`s and `RefCell`s have the shortcuts `get`,
/// `set`, `take`, `replace`, `with_borrow` and `with_borrow_mut`.
///
/// Only a rank's own code has values: outside of any rank (a plain thread,
/// a closure of a parallel region) and in tasks acting for a rank, accesses
/// fail. A rank's values are dropped when its closure returns (or unwinds,
/// when the job fails), on the rank, most recently created first.
///
/// Values are never shared between threads (a rank runs on one worker from
/// start to end), so `T` need not be `Send` or `Sync`.
pub struct RankLocalKey<T: 'static> {
    key: KeyId,
    init: fn() -> T,
    name: &'static str,
}

impl<T: 'static> fmt::Debug for RankLocalKey<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RankLocalKey")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl<T: 'static> RankLocalKey<T> {
    #[doc(hidden)]
    pub const fn __new(init: fn() -> T, name: &'static str) -> RankLocalKey<T> {
        RankLocalKey {
            key: KeyId::new(),
            init,
            name,
        }
    }

    /// The calling rank's value, created with `init` if it has none yet.
    #[inline]
    fn get_or_init(&'static self, init: impl FnOnce() -> T) -> Result<*const T, AccessError> {
        let id = self.key.get();
        rank::with_current(|ctx| match ctx {
            Some(ctx) => ctx.locals.get_or_init(id, &self.name, init),
            None => Err(AccessError::OutsideRank),
        })
    }

    /// Calls `f` with the calling rank's value, creating it on the rank's
    /// first access.
    ///
    /// # Panics
    ///
    /// Outside of any rank, in a task acting for a rank, from a destructor
    /// of a rank-local value run while the rank ends when this value is
    /// already gone (see [`AccessError`]), and if the initialiser touches
    /// this key itself.
    #[inline]
    #[track_caller]
    pub fn with<F, R>(&'static self, f: F) -> R
    where
        F: FnOnce(&T) -> R,
    {
        match self.try_with(f) {
            Ok(r) => r,
            Err(err) => self.fail(err),
        }
    }

    /// Like [`with`](Self::with), returning an [`AccessError`] where `with`
    /// would panic (except for a re-entrant initialisation, which is a bug
    /// and panics).
    ///
    /// ```
    /// myriad::rank_local!(static X: u32 = 7);
    ///
    /// // Not in a rank: no value.
    /// assert_eq!(X.try_with(|x| *x), Err(myriad::hls::AccessError::OutsideRank));
    /// let xs = myriad::run(2, |_| X.try_with(|x| *x)).unwrap();
    /// assert_eq!(xs, [Ok(7), Ok(7)]);
    /// ```
    #[inline]
    pub fn try_with<F, R>(&'static self, f: F) -> Result<R, AccessError>
    where
        F: FnOnce(&T) -> R,
    {
        // The initialiser is only loaded on the slow path.
        let value = self.get_or_init(|| (self.init)())?;
        // SAFETY: the value is boxed in the rank's table and dropped only
        // when the rank's coroutine ends or unwinds, which cannot happen
        // while `f` runs on it; `f` cannot keep the reference (its lifetime
        // is chosen by the caller of `f`).
        Ok(f(unsafe { &*value }))
    }

    /// Creates the value from `value` instead of the initialiser if the
    /// rank has none yet; `Err(value)` if it has one.
    fn initialize_with(&'static self, value: T) -> Result<Result<(), T>, AccessError> {
        let mut slot = Some(value);
        self.get_or_init(|| slot.take().expect("taken once"))?;
        Ok(match slot {
            None => Ok(()),
            Some(value) => Err(value),
        })
    }

    #[cold]
    #[track_caller]
    fn fail(&'static self, err: AccessError) -> ! {
        panic!("cannot access rank_local `{}`: {err}", self.name)
    }
}

impl<T: 'static> RankLocalKey<Cell<T>> {
    /// Sets the calling rank's value (without running the initialiser if
    /// the rank had none yet).
    ///
    /// # Panics
    ///
    /// As [`with`](RankLocalKey::with).
    #[track_caller]
    pub fn set(&'static self, value: T) {
        match self.initialize_with(Cell::new(value)) {
            Ok(Ok(())) => {}
            Ok(Err(cell)) => self.with(|c| c.set(cell.into_inner())),
            Err(err) => self.fail(err),
        }
    }

    /// A copy of the calling rank's value.
    ///
    /// # Panics
    ///
    /// As [`with`](RankLocalKey::with).
    #[track_caller]
    pub fn get(&'static self) -> T
    where
        T: Copy,
    {
        self.with(Cell::get)
    }

    /// Takes the calling rank's value, leaving `T::default()`.
    ///
    /// # Panics
    ///
    /// As [`with`](RankLocalKey::with).
    #[track_caller]
    pub fn take(&'static self) -> T
    where
        T: Default,
    {
        self.with(Cell::take)
    }

    /// Replaces the calling rank's value, returning the old one.
    ///
    /// # Panics
    ///
    /// As [`with`](RankLocalKey::with).
    #[track_caller]
    pub fn replace(&'static self, value: T) -> T {
        self.with(|c| c.replace(value))
    }
}

impl<T: 'static> RankLocalKey<RefCell<T>> {
    /// Borrows the calling rank's value.
    ///
    /// # Panics
    ///
    /// As [`with`](RankLocalKey::with), and if the value is mutably
    /// borrowed.
    #[track_caller]
    pub fn with_borrow<F, R>(&'static self, f: F) -> R
    where
        F: FnOnce(&T) -> R,
    {
        self.with(|cell| f(&cell.borrow()))
    }

    /// Mutably borrows the calling rank's value.
    ///
    /// # Panics
    ///
    /// As [`with`](RankLocalKey::with), and if the value is borrowed.
    #[track_caller]
    pub fn with_borrow_mut<F, R>(&'static self, f: F) -> R
    where
        F: FnOnce(&mut T) -> R,
    {
        self.with(|cell| f(&mut cell.borrow_mut()))
    }

    /// Sets the calling rank's value (without running the initialiser if
    /// the rank had none yet).
    ///
    /// # Panics
    ///
    /// As [`with`](RankLocalKey::with), and if the value is borrowed.
    #[track_caller]
    pub fn set(&'static self, value: T) {
        match self.initialize_with(RefCell::new(value)) {
            Ok(Ok(())) => {}
            Ok(Err(cell)) => self.with(|c| *c.borrow_mut() = cell.into_inner()),
            Err(err) => self.fail(err),
        }
    }

    /// Takes the calling rank's value, leaving `T::default()`.
    ///
    /// # Panics
    ///
    /// As [`with`](RankLocalKey::with), and if the value is borrowed.
    #[track_caller]
    pub fn take(&'static self) -> T
    where
        T: Default,
    {
        self.with(RefCell::take)
    }

    /// Replaces the calling rank's value, returning the old one.
    ///
    /// # Panics
    ///
    /// As [`with`](RankLocalKey::with), and if the value is borrowed.
    #[track_caller]
    pub fn replace(&'static self, value: T) -> T {
        self.with(|c| c.replace(value))
    }
}
