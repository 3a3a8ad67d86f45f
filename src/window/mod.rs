//! One-sided communication: windows, epochs as guards, and RMA operations
//! (MPI-3's chapter 11 with rsmpi's feel; rsmpi itself has no RMA).
//!
//! ```
//! use myriad::traits::*;
//! use myriad::window::{Epoch, LockType, WindowCreation};
//!
//! let results = myriad::run(4, |universe| {
//!     let world = universe.world();
//!     let rank = world.rank();
//!     let mut mine = [rank as u64; 4];
//!     world
//!         .with_window(&mut mine, |win| {
//!             // Passive target: read rank (rank + 1) % 4's memory while it
//!             // does whatever it likes.
//!             let target = (rank + 1) % 4;
//!             let lock = win.lock(target, LockType::Shared).unwrap();
//!             let mut got = [0u64; 4];
//!             lock.get(target, 0, &mut got).unwrap();
//!             drop(lock); // unlock
//!             got[0]
//!         })
//!         .unwrap()
//! })
//! .unwrap();
//! assert_eq!(results, vec![1, 2, 3, 0]);
//! ```
//!
//! ## Design
//!
//! * **Windows.** [`WindowCreation::with_window`] lends a buffer to a window
//!   for the duration of a closure, and frees the window (collectively) when
//!   the closure returns: the buffer is borrowed for the window's whole
//!   life, and no safe code can forget the window while the buffer goes
//!   away. [`allocate_window`](WindowCreation::allocate_window) and
//!   [`allocate_shared_window`](WindowCreation::allocate_shared_window)
//!   return a [`Window<'static, T>`] that owns its memory: [`Window::free`]
//!   frees it (collective; waits until every rank closed its epochs), and
//!   so does dropping it. Forgetting one leaks its memory rather than
//!   freeing it under a peer (the other ranks' `free` then waits for it,
//!   and a deadlock report says so). A rank that panics or is unwound
//!   closes its memory to the other ranks, whose later operations on it
//!   fail with [`RmaError::TargetGone`].
//!   A window is a few pointers per rank: creation is one collective call
//!   that waits for nobody (an access to a rank waits, if need be, until
//!   that rank has made its part), and free is one barrier. `lock_all` is
//!   one window-wide count (O(1) in the number of ranks), which exclusive
//!   lockers check.
//! * **Displacements** count in the target's displacement unit, by default
//!   the size of `T` (an element index); `with_window_unit` sets another.
//! * **Epochs are guards**: [`Window::fence`] ([`Fence`]),
//!   [`Window::lock`] ([`Lock`]), [`Window::lock_all`] ([`LockAll`]),
//!   [`Window::start`] ([`Access`]) and [`Window::post`] ([`Exposure`]).
//!   Operations exist only on guards (the [`Epoch`] trait), so an operation
//!   outside an epoch does not compile; a target outside the epoch (another
//!   rank than the locked one, one outside `start`'s group) is an
//!   [`RmaError::NotInEpoch`]. Dropping a guard
//!   closes its epoch (unlock, complete, the closing fence, wait), so an
//!   epoch cannot be left open by accident. Epochs that MPI forbids
//!   together on one window (a lock inside a fence epoch, the same target
//!   locked twice, ...) are [`RmaError::NestedEpoch`].
//! * **Operations** ([`Epoch`]): `put`, `get`, `accumulate`,
//!   `get_accumulate`, `fetch_and_op`, `compare_and_swap` with the
//!   predefined [`SystemOperation`](crate::collective::SystemOperation)s
//!   (checked against `T`'s base types; a user operation is refused with
//!   `MPI_ERR_OP`, as MPI allows none in accumulates), and request-based
//!   `rput`, `rget`, `raccumulate` in a request scope. In one process an
//!   operation completes when it returns (the origin copies), so its
//!   request is complete at once; the request form is there for the
//!   transport, where it will not be. The simple calls move elements of
//!   the window's `T`: an operation with another type does not compile.
//!   `put_buffer` and `get_buffer` take any origin buffer (a view, a user
//!   datatype) whose type signature is `T`'s repeated, checked at run time
//!   as a receive is. `replace`/`swap` are `MPI_REPLACE`, `fetch` is
//!   `MPI_NO_OP`.
//! * **Target datatypes**: `put_typed`, `get_typed`, `accumulate_typed`,
//!   `get_accumulate_typed`, `replace_typed` and `rput_typed`,
//!   `rget_typed`, `raccumulate_typed` describe the target side by a
//!   [`TargetView`] (a displacement, a count and any datatype: vectors,
//!   indexed and struct types, resized types, subarrays), MPI's
//!   `target_disp`/`target_count`/`target_datatype`, and the origin by any
//!   buffer. The two type signatures must be equal (`MPI_ERR_TYPE`,
//!   naming both); the target's data, from its lowest to its highest
//!   byte, must lie in the target's segment (`MPI_ERR_RMA_RANGE`); and
//!   every base value it addresses must lie on a base value of the same
//!   type of the window's elements (`MPI_ERR_TYPE`: the window is the
//!   owner's `[T]`, so a `u8` written over a `bool`, or an `f64` across two
//!   fields, is refused; the simple calls check the same when a byte
//!   displacement falls inside an element). Accumulates through a target
//!   type combine each base value with its own type's operation, under
//!   the target's accumulate lock (atomic per base value, as MPI requires,
//!   and in fact per call); MPI asks that all base values be of one type,
//!   myriad also accepts mixed signatures (structs), as the simple calls
//!   do.
//! * **Errors**: a target outside the window (`MPI_ERR_RANK`), an access
//!   past the end of the target's segment (`MPI_ERR_RMA_RANGE`), epochs
//!   used the wrong way (`MPI_ERR_RMA_SYNC`), signatures that differ or
//!   data that would not land on the window's elements (`MPI_ERR_TYPE`), a
//!   user operation in an accumulate (`MPI_ERR_OP`), a window over ranks
//!   of several processes (unsupported until the transport).
//!
//! What the types refuse: an operation outside an epoch,
//!
//! ```compile_fail
//! use myriad::window::{Epoch, WindowCreation};
//! myriad::run(2, |universe| {
//!     let world = universe.world();
//!     let win = world.allocate_window::<u8>(4).unwrap();
//!     win.put(1, 0, &[1]).unwrap(); // `put` is an `Epoch` method, not a `Window` one
//! });
//! ```
//!
//! freeing a window while one of its epochs is open,
//!
//! ```compile_fail
//! use myriad::window::{Epoch, LockType, WindowCreation};
//! myriad::run(2, |universe| {
//!     let world = universe.world();
//!     let win = world.allocate_window::<u8>(4).unwrap();
//!     let lock = win.lock(0, LockType::Shared).unwrap();
//!     win.free().unwrap(); // cannot move out of `win`: the lock borrows it
//!     lock.unlock();
//! });
//! ```
//!
//! and data of another type than the window's:
//!
//! ```compile_fail
//! use myriad::window::{Epoch, LockType, WindowCreation};
//! myriad::run(2, |universe| {
//!     let world = universe.world();
//!     let win = world.allocate_window::<u8>(4).unwrap();
//!     let lock = win.lock(0, LockType::Shared).unwrap();
//!     lock.put(0, 0, &[1.5f64]).unwrap(); // expected `&[u8]`
//! });
//! ```

mod epoch;
mod target;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::marker::PhantomData;
use std::mem::size_of;
use std::panic::Location;
use std::sync::Arc;

use crate::coll::CommCore;
use crate::communicator::Communicator;
use crate::datatype::Datatype;
use crate::datatype::Equivalence;
use crate::error::{Error, RmaError};
use crate::rma::{self, Caller, Element, Elements, LockKind, Region, WinKind, WinShared};
use crate::Rank;

pub use epoch::{Access, Epoch, Exposure, Fence, Lock, LockAll};
pub use target::TargetView;

/// The slice (in a trace) and table entry (in a profile) of RMA call
/// `kind` by the rank calling on `comm` (`target`: the rank it accesses,
/// or `trace::NO_PEER`), recorded when the returned span drops; `None`
/// when the job records nothing, which costs one load and a branch (the
/// scheduler's tracer, as for a send's flow).
#[inline]
fn traced<'c>(
    comm: &'c CommCore,
    kind: crate::trace::Name,
    target: Rank,
    bytes: usize,
) -> Option<crate::trace::Span<'c>> {
    comm.job().sched().tracer()?;
    traced_slow(comm, kind, target, bytes)
}

#[cold]
#[inline(never)]
fn traced_slow<'c>(
    comm: &'c CommCore,
    kind: crate::trace::Name,
    target: Rank,
    bytes: usize,
) -> Option<crate::trace::Span<'c>> {
    let ctx = comm.caller().ok()?;
    crate::trace::rma_span(ctx.recorder(), kind, target, bytes)
}

/// `trace::NO_PEER`: a call with no one target.
const ALL: Rank = crate::trace::NO_PEER;

/// Lock types of passive-target epochs (`MPI_LOCK_SHARED`,
/// `MPI_LOCK_EXCLUSIVE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockType {
    /// Other shared locks may be held at the same time.
    Shared,
    /// No other lock on the target while held.
    Exclusive,
}

/// Assertions of a lock call (`MPI_MODE_NOCHECK`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LockAssert {
    /// No assertion: the lock is taken.
    #[default]
    None,
    /// `MPI_MODE_NOCHECK`: the caller promises that no other rank holds or
    /// will ask for a conflicting lock during the epoch, so no lock is
    /// taken (seed 000's RMA1 method: shared + nocheck).
    NoCheck,
}

/// Creating windows over a communicator (an extension of every
/// [`Communicator`]).
pub trait WindowCreation: Communicator {
    /// Creates a window over `buf` (`MPI_Win_create`), runs `body` with it,
    /// then frees it (`MPI_Win_free`): collective, every rank of the
    /// communicator calls. Displacements count elements of `T`.
    #[track_caller]
    fn with_window<T, R>(
        &self,
        buf: &mut [T],
        body: impl FnOnce(&Window<'_, T>) -> R,
    ) -> Result<R, Error>
    where
        T: Equivalence + Copy,
    {
        with_window_at(self.core(), buf, size_of::<T>(), Location::caller(), body)
    }

    /// [`with_window`](Self::with_window) with displacement unit `unit`
    /// bytes (MPI's `disp_unit`): a displacement `d` of this rank's
    /// segment is byte `d * unit`.
    #[track_caller]
    fn with_window_unit<T, R>(
        &self,
        buf: &mut [T],
        unit: usize,
        body: impl FnOnce(&Window<'_, T>) -> R,
    ) -> Result<R, Error>
    where
        T: Equivalence + Copy,
    {
        with_window_at(self.core(), buf, unit, Location::caller(), body)
    }

    /// Allocates `len` elements (`T::default()`) and creates a window over
    /// them (`MPI_Win_allocate`): collective.
    #[track_caller]
    fn allocate_window<T>(&self, len: usize) -> Result<Window<'static, T>, Error>
    where
        T: Equivalence + Copy + Default,
    {
        allocate(self.core(), len, WinKind::Allocated, Location::caller())
    }

    /// [`allocate_window`](Self::allocate_window) whose segments peers may
    /// also load and store directly (`MPI_Win_allocate_shared`): see
    /// [`Window::shared_query`]. Each rank's segment is its own allocation
    /// (MPI's `alloc_shared_noncontig`).
    #[track_caller]
    fn allocate_shared_window<T>(&self, len: usize) -> Result<Window<'static, T>, Error>
    where
        T: Equivalence + Copy + Default,
    {
        allocate(self.core(), len, WinKind::Shared, Location::caller())
    }
}

impl<C: Communicator + ?Sized> WindowCreation for C {}

fn with_window_at<T: Equivalence + Copy, R>(
    comm: &CommCore,
    buf: &mut [T],
    unit: usize,
    site: &'static Location<'static>,
    body: impl FnOnce(&Window<'_, T>) -> R,
) -> Result<R, Error> {
    let region = Region {
        base: buf.as_mut_ptr() as *mut u8,
        bytes: std::mem::size_of_val(buf),
        unit,
    };
    // The window lives in this frame only: `body` sees a shared reference,
    // so the window is freed (or closed, when unwinding) here, before the
    // borrow of `buf` ends.
    let win = Window::<T>::create(comm, region, WinKind::Created, None, site)?;
    let out = body(&win);
    win.free().map(|()| out)
}

fn allocate<T: Equivalence + Copy + Default>(
    comm: &CommCore,
    len: usize,
    kind: WinKind,
    site: &'static Location<'static>,
) -> Result<Window<'static, T>, Error> {
    let memory: Box<[T]> = vec![T::default(); len].into_boxed_slice();
    let bytes = std::mem::size_of_val(&*memory);
    let base = Box::into_raw(memory);
    let region = Region {
        base: base as *mut u8,
        bytes,
        unit: size_of::<T>(),
    };
    Window::create(comm, region, kind, Some(base), site)
}

/// A window: this rank's handle to memory that every rank of a
/// communicator exposes to the others (`MPI_Win`). `'b` is the borrow of
/// the memory (`'static` for allocated windows, which own theirs).
pub struct Window<'b, T> {
    comm: CommCore,
    shared: Arc<WinShared>,
    /// Memory the window owns (allocated windows), freed after the window.
    owned: Option<*mut [T]>,
    /// `T`'s base values, for the placement checks of operations.
    elements: Elements,
    epochs: Epochs,
    done: bool,
    _memory: PhantomData<&'b mut [T]>,
}

impl<T> std::fmt::Debug for Window<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Window")
            .field("id", &self.shared.id())
            .field("rank", &self.comm.rank())
            .field("size", &self.shared.size())
            .finish()
    }
}

/// The epochs this rank has open on a window (only this rank's handle
/// touches them).
#[derive(Debug, Default)]
struct Epochs {
    fence: Cell<bool>,
    locks: RefCell<Vec<Rank>>,
    lock_all: Cell<bool>,
    start: Cell<bool>,
    post: Cell<bool>,
    /// Per target, the exposure epochs of it this rank started.
    started: RefCell<HashMap<Rank, u32>>,
    /// Completes this rank's posts expect in all.
    expected: Cell<u32>,
}

impl Epochs {
    /// What is open, for errors; `None` if nothing.
    fn open(&self) -> Option<String> {
        let mut open = Vec::new();
        if self.fence.get() {
            open.push("a fence epoch".to_string());
        }
        for r in self.locks.borrow().iter() {
            open.push(format!("a lock on rank {r}"));
        }
        if self.lock_all.get() {
            open.push("a lock_all epoch".to_string());
        }
        if self.start.get() {
            open.push("a start epoch".to_string());
        }
        if self.post.get() {
            open.push("a post epoch".to_string());
        }
        (!open.is_empty()).then(|| open.join(", "))
    }
}

impl<'b, T: Equivalence + Copy> Window<'b, T> {
    fn create(
        comm: &CommCore,
        region: Region,
        kind: WinKind,
        owned: Option<*mut [T]>,
        site: &'static Location<'static>,
    ) -> Result<Window<'b, T>, Error> {
        let _span = traced(comm, &"win_create", ALL, region.bytes);
        match rma::create(comm, region, kind, site) {
            Ok(shared) => Ok(Window {
                comm: comm.clone(),
                shared,
                owned,
                elements: Elements::of(T::equivalent_datatype().type_map()),
                epochs: Epochs::default(),
                done: false,
                _memory: PhantomData,
            }),
            Err(err) => {
                if let Some(memory) = owned {
                    // SAFETY: made by `Box::into_raw` in `allocate`, and no
                    // window was made, so nobody else has its address.
                    drop(unsafe { Box::from_raw(memory) });
                }
                Err(err)
            }
        }
    }

    /// The number of ranks of the window.
    pub fn size(&self) -> Rank {
        self.shared.size()
    }

    /// This rank in the window (its rank in the communicator).
    pub fn rank(&self) -> Rank {
        self.comm.rank()
    }

    /// The window's number in this process (deadlock reports name it).
    pub fn id(&self) -> u64 {
        self.shared.id()
    }

    /// The length of rank `rank`'s segment in bytes.
    pub fn segment_bytes(&self, rank: Rank) -> Result<usize, Error> {
        self.shared.check_rank("segment_bytes", rank)?;
        Ok(self.shared.region_ready(&self.comm, rank)?.bytes)
    }

    #[inline]
    fn caller(&self, site: &'static Location<'static>) -> Result<Caller<'_>, Error> {
        Ok(Caller {
            comm: &self.comm,
            ctx: self.comm.caller()?,
            site,
        })
    }

    fn refuse(&self, call: &'static str, busy: bool) -> Result<(), Error> {
        if !busy {
            return Ok(());
        }
        Err(Error::Rma(RmaError::NestedEpoch {
            call,
            open: self.epochs.open().unwrap_or_default(),
        }))
    }

    /// Opens a fence epoch (`MPI_Win_fence`): collective over the window's
    /// ranks; every rank may access every other until the epoch's
    /// [`Fence::end`] (or its drop), which is the closing fence.
    #[track_caller]
    pub fn fence(&self) -> Result<Fence<'_, 'b, T>, Error> {
        let _span = traced(&self.comm, &"win_fence", ALL, 0);
        let e = &self.epochs;
        self.refuse(
            "fence",
            e.fence.get()
                || e.lock_all.get()
                || e.start.get()
                || e.post.get()
                || !e.locks.borrow().is_empty(),
        )?;
        let caller = self.caller(Location::caller())?;
        self.shared.barrier(&caller, &"win_fence")?;
        e.fence.set(true);
        Ok(Fence {
            win: self,
            ended: false,
        })
    }

    /// Opens a passive-target epoch on `target` (`MPI_Win_lock`): waits
    /// while a conflicting lock is held (the target takes no part).
    #[track_caller]
    pub fn lock(&self, target: Rank, kind: LockType) -> Result<Lock<'_, 'b, T>, Error> {
        self.lock_at(target, kind, LockAssert::None, Location::caller())
    }

    /// [`lock`](Self::lock) with an assertion.
    #[track_caller]
    pub fn lock_with(
        &self,
        target: Rank,
        kind: LockType,
        assert: LockAssert,
    ) -> Result<Lock<'_, 'b, T>, Error> {
        self.lock_at(target, kind, assert, Location::caller())
    }

    #[inline(always)]
    fn lock_at(
        &self,
        target: Rank,
        kind: LockType,
        assert: LockAssert,
        site: &'static Location<'static>,
    ) -> Result<Lock<'_, 'b, T>, Error> {
        let _span = traced(&self.comm, &"win_lock", target, 0);
        self.shared.check_rank("lock", target)?;
        let e = &self.epochs;
        self.refuse(
            "lock",
            e.fence.get() || e.lock_all.get() || e.locks.borrow().contains(&target),
        )?;
        let kind = match kind {
            LockType::Shared => LockKind::Shared,
            LockType::Exclusive => LockKind::Exclusive,
        };
        let taken = assert == LockAssert::None;
        if taken {
            self.shared.lock(&self.caller(site)?, target, kind)?;
        }
        e.locks.borrow_mut().push(target);
        Ok(Lock {
            win: self,
            target,
            kind,
            taken,
        })
    }

    /// Opens a shared passive-target epoch on every rank
    /// (`MPI_Win_lock_all`).
    #[track_caller]
    pub fn lock_all(&self) -> Result<LockAll<'_, 'b, T>, Error> {
        self.lock_all_at(LockAssert::None, Location::caller())
    }

    /// [`lock_all`](Self::lock_all) with an assertion.
    #[track_caller]
    pub fn lock_all_with(&self, assert: LockAssert) -> Result<LockAll<'_, 'b, T>, Error> {
        self.lock_all_at(assert, Location::caller())
    }

    #[inline(always)]
    fn lock_all_at(
        &self,
        assert: LockAssert,
        site: &'static Location<'static>,
    ) -> Result<LockAll<'_, 'b, T>, Error> {
        let _span = traced(&self.comm, &"win_lock_all", ALL, 0);
        let e = &self.epochs;
        self.refuse(
            "lock_all",
            e.fence.get() || e.lock_all.get() || !e.locks.borrow().is_empty(),
        )?;
        let taken = assert == LockAssert::None;
        if taken {
            self.shared.lock_all(&self.caller(site)?)?;
        }
        e.lock_all.set(true);
        Ok(LockAll { win: self, taken })
    }

    /// Opens an access epoch to `targets` (`MPI_Win_start`): waits until
    /// each has posted an exposure epoch for it.
    #[track_caller]
    pub fn start(&self, targets: &[Rank]) -> Result<Access<'_, 'b, T>, Error> {
        let _span = traced(&self.comm, &"win_start", ALL, 0);
        let e = &self.epochs;
        for &t in targets {
            self.shared.check_rank("start", t)?;
        }
        self.refuse(
            "start",
            e.fence.get() || e.start.get() || e.lock_all.get() || !e.locks.borrow().is_empty(),
        )?;
        let caller = self.caller(Location::caller())?;
        let mut targets = targets.to_vec();
        targets.sort_unstable();
        targets.dedup();
        for &t in &targets {
            let used = e.started.borrow().get(&t).copied().unwrap_or(0);
            self.shared.wait_posted(&caller, t, used)?;
            e.started.borrow_mut().insert(t, used + 1);
        }
        e.start.set(true);
        Ok(Access { win: self, targets })
    }

    /// Opens an exposure epoch to `origins` (`MPI_Win_post`): they may
    /// access this rank's memory until each has completed its access
    /// epoch; [`Exposure::wait`] (or the guard's drop) waits for that.
    #[track_caller]
    pub fn post(&self, origins: &[Rank]) -> Result<Exposure<'_, 'b, T>, Error> {
        let _span = traced(&self.comm, &"win_post", ALL, 0);
        let e = &self.epochs;
        for &o in origins {
            self.shared.check_rank("post", o)?;
        }
        self.refuse("post", e.fence.get() || e.post.get())?;
        let mut origins = origins.to_vec();
        origins.sort_unstable();
        origins.dedup();
        let caller = self.caller(Location::caller())?;
        e.expected.set(e.expected.get() + origins.len() as u32);
        e.post.set(true);
        self.shared.post(&caller);
        Ok(Exposure {
            win: self,
            waited: false,
        })
    }

    /// `MPI_Win_sync`: a memory fence between this rank's direct loads and
    /// stores of shared-window memory and the other ranks'.
    pub fn sync(&self) {
        self.shared.sync();
    }

    /// Rank `rank`'s segment of a shared window (`MPI_Win_shared_query`).
    pub fn shared_query(&self, rank: Rank) -> Result<SharedSegment<'_, T>, Error> {
        if self.shared.kind() != WinKind::Shared {
            return Err(Error::Rma(RmaError::NotShared));
        }
        self.shared.check_rank("shared_query", rank)?;
        let region = self.shared.region_ready(&self.comm, rank)?;
        Ok(SharedSegment {
            shared: &self.shared,
            comm: &self.comm,
            elements: &self.elements,
            rank,
            base: region.base as *mut T,
            len: region.bytes / size_of::<T>(),
        })
    }

    /// Frees the window (`MPI_Win_free`): collective; returns once every
    /// rank has called it, so no rank accesses this rank's memory any
    /// more. An epoch still open (a leaked guard) is an error, returned
    /// after the window is freed all the same.
    #[track_caller]
    pub fn free(mut self) -> Result<(), Error> {
        self.finish(Location::caller())
    }

    fn check_size(&self, op: &'static str, target: Rank) -> Result<(), Error> {
        self.shared.check_rank(op, target)
    }
}

impl<T> Window<'_, T> {
    /// Frees the window once: the collective barrier (not while
    /// unwinding), then, on every path (also when the barrier fails or the
    /// rank is unwound from inside it), closes this rank's segment and
    /// frees the memory the window owns.
    fn finish(&mut self, site: &'static Location<'static>) -> Result<(), Error> {
        /// Closes the segment and frees owned memory when dropped.
        struct Release<'a, T> {
            shared: &'a WinShared,
            rank: Rank,
            owned: Option<*mut [T]>,
        }
        impl<T> Drop for Release<'_, T> {
            fn drop(&mut self) {
                // After the barrier nobody accesses this memory any more;
                // when it failed (or while unwinding), refuse later
                // accesses and wait for those in progress.
                self.shared.close(self.rank);
                if let Some(memory) = self.owned.take() {
                    // SAFETY: made by `Box::into_raw` in `allocate`, taken
                    // out of the window once; the segment is closed and
                    // drained, so no other rank touches it any more.
                    drop(unsafe { Box::from_raw(memory) });
                }
            }
        }
        if std::mem::replace(&mut self.done, true) {
            return Ok(());
        }
        let _span = traced(&self.comm, &"win_free", ALL, 0);
        let release = Release {
            shared: &self.shared,
            rank: self.comm.rank(),
            owned: self.owned.take(),
        };
        let freed = if std::thread::panicking() {
            // No collective while unwinding: the job is failing.
            Ok(())
        } else {
            self.comm.caller().and_then(|ctx| {
                let caller = Caller {
                    comm: &self.comm,
                    ctx,
                    site,
                };
                self.shared.barrier(&caller, &"win_free")
            })
        };
        drop(release);
        freed?;
        match self.epochs.open() {
            Some(open) => Err(Error::Rma(RmaError::EpochOpen { open })),
            None => Ok(()),
        }
    }
}

impl<T> Drop for Window<'_, T> {
    fn drop(&mut self) {
        // An error here is the job's (it is failing) or a leaked epoch
        // guard's, which only `free` can report.
        let _ = self.finish(Location::caller());
    }
}

/// One rank's segment of a shared window ([`Window::shared_query`]).
///
/// [`read`](Self::read) and [`write`](Self::write) access it safely
/// (racing accesses by other ranks are not undefined behaviour); the raw
/// pointer is for direct loads and stores, ordered with [`Window::sync`]
/// and the window's epochs as MPI's shared-memory model says.
#[derive(Debug)]
pub struct SharedSegment<'w, T> {
    shared: &'w WinShared,
    comm: &'w CommCore,
    elements: &'w Elements,
    rank: Rank,
    base: *mut T,
    len: usize,
}

impl<T: Equivalence + Copy> SharedSegment<'_, T> {
    /// The segment's length in elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the segment is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Its address, valid until the window is freed.
    pub fn as_ptr(&self) -> *mut T {
        self.base
    }

    /// Copies elements `index..index + out.len()` into `out`.
    pub fn read(&self, index: usize, out: &mut [T]) -> Result<(), Error> {
        let dt = T::equivalent_datatype();
        let element = Element {
            map: dt.type_map(),
            elements: self.elements,
        };
        // SAFETY: `out` is ours, exclusively borrowed, `size_of_val` bytes.
        unsafe {
            self.shared.get(
                self.comm,
                self.rank,
                index,
                element,
                out.as_mut_ptr() as *mut u8,
                std::mem::size_of_val(out),
            )
        }
    }

    /// Copies `data` to elements `index..index + data.len()`.
    pub fn write(&self, index: usize, data: &[T]) -> Result<(), Error> {
        let dt = T::equivalent_datatype();
        let element = Element {
            map: dt.type_map(),
            elements: self.elements,
        };
        // SAFETY: `data` is borrowed, so nobody writes it meanwhile.
        unsafe {
            self.shared.put(
                self.comm,
                self.rank,
                index,
                element,
                data.as_ptr() as *const u8,
                std::mem::size_of_val(data),
            )
        }
    }
}
