//! Epochs and operations: the [`Epoch`] trait of RMA operations, and the
//! guards of the epochs that offer them ([`Fence`], [`Lock`], [`LockAll`],
//! [`Access`]) or expose memory to them ([`Exposure`]). Each guard borrows
//! its window and ends its epoch when dropped; the operations check the
//! target against the epoch ([`sealed::EpochGuard::allows`]) and go to the
//! window's shared state (`rma`).

use std::mem::{size_of, MaybeUninit};
use std::panic::Location;

use super::Window;
use crate::coll::op::{OpRef, SystemOperation};
use crate::datatype::copy::{self, Layout};
use crate::datatype::{signature_mismatch, Buffer, BufferMut, Datatype, Equivalence};
use crate::error::{Error, RmaError};
use crate::p2p::Status;
use crate::request::{Op, Request, Scope};
use crate::rma::LockKind;
use crate::Rank;

mod sealed {
    /// A window's shared state, as the operations reach it (internal).
    #[derive(Debug)]
    pub struct Shared<'a>(
        pub(super) &'a crate::rma::WinShared,
        pub(super) &'a crate::coll::CommCore,
    );

    /// What an epoch guard tells the operations (internal).
    pub trait EpochGuard<T> {
        /// The window.
        fn window(&self) -> Shared<'_>;
        /// Whether `target` may be accessed in this epoch.
        fn allows(&self, op: &'static str, target: crate::Rank) -> Result<(), crate::Error>;
    }
}

fn op_ref(op: SystemOperation) -> OpRef<'static> {
    OpRef::System(op)
}

/// The RMA operations, available on every access epoch's guard
/// ([`Fence`], [`Lock`], [`LockAll`], [`Access`]). Displacements count in
/// the target's displacement unit; every access is checked against the
/// target's segment. In one process each operation has completed when it
/// returns.
pub trait Epoch<T: Equivalence + Copy>: sealed::EpochGuard<T> {
    /// `MPI_Put`: writes `data` at displacement `disp` of `target`.
    fn put(&self, target: Rank, disp: usize, data: &[T]) -> Result<(), Error> {
        self.allows("put", target)?;
        let w = self.window();
        // SAFETY: `data` is borrowed shared: nobody writes it meanwhile.
        unsafe {
            w.0.put(
                w.1,
                target,
                disp,
                data.as_ptr() as *const u8,
                std::mem::size_of_val(data),
            )
        }
    }

    /// `MPI_Get`: reads `out.len()` elements at `disp` of `target`.
    fn get(&self, target: Rank, disp: usize, out: &mut [T]) -> Result<(), Error> {
        self.allows("get", target)?;
        let w = self.window();
        // SAFETY: `out` is borrowed exclusively.
        unsafe {
            w.0.get(
                w.1,
                target,
                disp,
                out.as_mut_ptr() as *mut u8,
                std::mem::size_of_val(out),
            )
        }
    }

    /// `MPI_Put` with an origin datatype: `data` is any buffer (a view
    /// through a count and a datatype, a user datatype, a slice of another
    /// type) whose type signature is `T`'s, repeated; it lands as that many
    /// elements of `T` at `disp`. Another signature is an error
    /// (`MPI_ERR_TYPE`), as for a receive.
    fn put_buffer<B: Buffer + ?Sized>(
        &self,
        target: Rank,
        disp: usize,
        data: &B,
    ) -> Result<(), Error> {
        self.allows("put", target)?;
        let src = Layout::of(data);
        let count = elements_of::<T>("put", &src)?;
        let mut scratch = zeroed::<T>(count);
        let dst = Layout::at(
            scratch.as_mut_ptr() as *const u8,
            count,
            T::equivalent_datatype().handle(),
        );
        let w = self.window();
        // SAFETY: [1] `src` is the layout of the borrowed `data`, `dst` of
        // our zeroed scratch of `count` elements, disjoint; [2] the put
        // reads the scratch's `count` elements (initialised: zeroed, then
        // the data's runs copied in).
        unsafe {
            copy::copy(&src, &dst);
            w.0.put(
                w.1,
                target,
                disp,
                scratch.as_ptr() as *const u8,
                count * size_of::<T>(),
            )
        }
    }

    /// `MPI_Get` with an origin datatype: reads as many elements of `T` at
    /// `disp` as `out`'s type signature holds, into `out`'s layout.
    fn get_buffer<B: BufferMut + ?Sized>(
        &self,
        target: Rank,
        disp: usize,
        out: &mut B,
    ) -> Result<(), Error> {
        self.allows("get", target)?;
        let dst = Layout::of_mut(out);
        let count = elements_of::<T>("get", &dst)?;
        let mut scratch = zeroed::<T>(count);
        let w = self.window();
        // SAFETY: the get writes our scratch's `count` elements; then the
        // copy reads them and writes `out`'s layout (borrowed exclusively,
        // disjoint from the scratch).
        unsafe {
            w.0.get(
                w.1,
                target,
                disp,
                scratch.as_mut_ptr() as *mut u8,
                count * size_of::<T>(),
            )?;
            let src = Layout::at(
                scratch.as_ptr() as *const u8,
                count,
                T::equivalent_datatype().handle(),
            );
            copy::copy(&src, &dst);
        }
        Ok(())
    }

    /// `MPI_Accumulate`: `target[disp + i] = data[i] op target[disp + i]`,
    /// atomic per element with respect to other accumulates.
    fn accumulate(
        &self,
        target: Rank,
        disp: usize,
        data: &[T],
        op: SystemOperation,
    ) -> Result<(), Error> {
        self.allows("accumulate", target)?;
        let dt = T::equivalent_datatype();
        let w = self.window();
        // SAFETY: `data` is borrowed shared, `data.len()` elements of `T`'s map.
        unsafe {
            w.0.accumulate(
                w.1,
                "accumulate",
                target,
                disp,
                dt.type_map(),
                data.len(),
                Some(&op_ref(op)),
                Some(data.as_ptr() as *const u8),
                None,
                None,
            )
        }
    }

    /// `MPI_Get_accumulate`: `result` receives the target's elements as
    /// they were, then `target = data op target`, atomically.
    fn get_accumulate(
        &self,
        target: Rank,
        disp: usize,
        data: &[T],
        result: &mut [T],
        op: SystemOperation,
    ) -> Result<(), Error> {
        self.allows("get_accumulate", target)?;
        if data.len() != result.len() {
            return Err(Error::Count(crate::error::CountError::ReduceLocalCount {
                input: data.len(),
                inout: result.len(),
            }));
        }
        let dt = T::equivalent_datatype();
        let w = self.window();
        // SAFETY: `data` borrowed shared, `result` exclusively, both
        // `data.len()` elements.
        unsafe {
            w.0.accumulate(
                w.1,
                "get_accumulate",
                target,
                disp,
                dt.type_map(),
                data.len(),
                Some(&op_ref(op)),
                Some(data.as_ptr() as *const u8),
                None,
                Some(result.as_mut_ptr() as *mut u8),
            )
        }
    }

    /// `MPI_Fetch_and_op`: one element; returns the target's old value.
    fn fetch_and_op(
        &self,
        target: Rank,
        disp: usize,
        value: T,
        op: SystemOperation,
    ) -> Result<T, Error> {
        let mut old = [value];
        self.get_accumulate(target, disp, &[value], &mut old, op)?;
        Ok(old[0])
    }

    /// `MPI_Accumulate` with `MPI_REPLACE`: writes `data` like
    /// [`put`](Self::put), but atomically with respect to other
    /// accumulates, element by element.
    fn replace(&self, target: Rank, disp: usize, data: &[T]) -> Result<(), Error> {
        self.allows("replace", target)?;
        let dt = T::equivalent_datatype();
        let w = self.window();
        // SAFETY: `data` is borrowed shared, `data.len()` elements of `T`'s map.
        unsafe {
            w.0.accumulate(
                w.1,
                "replace",
                target,
                disp,
                dt.type_map(),
                data.len(),
                None,
                Some(data.as_ptr() as *const u8),
                None,
                None,
            )
        }
    }

    /// `MPI_Fetch_and_op` with `MPI_REPLACE`: writes `value`, returns the
    /// old one, atomically.
    fn swap(&self, target: Rank, disp: usize, value: T) -> Result<T, Error> {
        self.allows("swap", target)?;
        let dt = T::equivalent_datatype();
        let mut old = [value];
        let w = self.window();
        // SAFETY: two one-element buffers of ours.
        unsafe {
            w.0.accumulate(
                w.1,
                "swap",
                target,
                disp,
                dt.type_map(),
                1,
                None,
                Some(&value as *const T as *const u8),
                None,
                Some(old.as_mut_ptr() as *mut u8),
            )?;
        }
        Ok(old[0])
    }

    /// `MPI_Fetch_and_op` with `MPI_NO_OP`: reads one element atomically
    /// with respect to accumulates.
    fn fetch(&self, target: Rank, disp: usize) -> Result<T, Error> {
        self.allows("fetch", target)?;
        let dt = T::equivalent_datatype();
        let mut old = [MaybeUninit::<T>::zeroed()];
        let w = self.window();
        // SAFETY: one element of ours, written by the call (all of its
        // bytes: the fetch copies the element's `extent` bytes).
        unsafe {
            w.0.accumulate(
                w.1,
                "fetch",
                target,
                disp,
                dt.type_map(),
                1,
                None,
                None,
                None,
                Some(old.as_mut_ptr() as *mut u8),
            )?;
            Ok(old[0].assume_init())
        }
    }

    /// `MPI_Compare_and_swap`: replaces the target's element with `value`
    /// if it equals `compare` (byte for byte); returns the old value.
    fn compare_and_swap(
        &self,
        target: Rank,
        disp: usize,
        compare: T,
        value: T,
    ) -> Result<T, Error> {
        self.allows("compare_and_swap", target)?;
        let dt = T::equivalent_datatype();
        let mut old = [value];
        let w = self.window();
        // SAFETY: three one-element buffers of ours.
        unsafe {
            w.0.accumulate(
                w.1,
                "compare_and_swap",
                target,
                disp,
                dt.type_map(),
                1,
                None,
                Some(&value as *const T as *const u8),
                Some(&compare as *const T as *const u8),
                Some(old.as_mut_ptr() as *mut u8),
            )?;
        }
        Ok(old[0])
    }

    /// `MPI_Rput`: [`put`](Self::put) as a request of `scope`.
    fn rput<'a, S: Scope<'a>>(
        &self,
        scope: S,
        target: Rank,
        disp: usize,
        data: &'a [T],
    ) -> Result<Request<'a, [T], S>, Error> {
        self.put(target, disp, data)?;
        Ok(done(scope, target, data))
    }

    /// `MPI_Rget`: [`get`](Self::get) as a request of `scope`.
    fn rget<'a, S: Scope<'a>>(
        &self,
        scope: S,
        target: Rank,
        disp: usize,
        out: &'a mut [T],
    ) -> Result<Request<'a, [T], S>, Error> {
        self.get(target, disp, out)?;
        Ok(done(scope, target, out))
    }

    /// `MPI_Raccumulate`: [`accumulate`](Self::accumulate) as a request of
    /// `scope`.
    fn raccumulate<'a, S: Scope<'a>>(
        &self,
        scope: S,
        target: Rank,
        disp: usize,
        data: &'a [T],
        op: SystemOperation,
    ) -> Result<Request<'a, [T], S>, Error> {
        self.accumulate(target, disp, data, op)?;
        Ok(done(scope, target, data))
    }
}

/// `count` elements of `T`, every byte zero (padding included: window
/// memory is copied as bytes).
fn zeroed<T>(count: usize) -> Vec<MaybeUninit<T>> {
    (0..count).map(|_| MaybeUninit::zeroed()).collect()
}

/// How many elements of `T` the data of `layout` is: its type signature
/// must be `T`'s, repeated a whole number of times.
fn elements_of<T: Equivalence>(op: &'static str, layout: &Layout) -> Result<usize, Error> {
    let element = T::equivalent_datatype();
    let (origin, window) = (layout.ty.map(), element.type_map());
    let values =
        |map: &crate::datatype::TypeMap| map.signature().iter().map(|r| r.count).sum::<usize>();
    let mismatch = |index| {
        Error::Rma(RmaError::TypeMismatch {
            op,
            datatype: origin.name().to_string(),
            element: window.name().to_string(),
            index,
        })
    };
    if let Some((index, _, _)) = signature_mismatch(origin, layout.count, window) {
        return Err(mismatch(Some(index)));
    }
    let (total, per) = (values(origin) * layout.count, values(window));
    if per == 0 || total % per != 0 {
        return Err(mismatch(None));
    }
    Ok(total / per)
}

/// The request of an operation that completed when it was issued.
fn done<'a, T, S: Scope<'a>>(scope: S, target: Rank, data: &'a [T]) -> Request<'a, [T], S> {
    let status = Status::new(target, 0, std::mem::size_of_val(data));
    Request::new(Op::Done(Ok(status)), data as *const [T], scope)
}

/// A fence epoch ([`Window::fence`]): every rank may access every other.
/// [`end`](Self::end) (or dropping it) is the closing fence, collective.
#[derive(Debug)]
pub struct Fence<'w, 'b, T: Equivalence + Copy> {
    pub(super) win: &'w Window<'b, T>,
    pub(super) ended: bool,
}

impl<T: Equivalence + Copy> Fence<'_, '_, T> {
    /// A fence inside the sequence (`MPI_Win_fence` between two epochs):
    /// every operation of every rank before it is visible after it.
    #[track_caller]
    pub fn fence(&mut self) -> Result<(), Error> {
        let caller = self.win.caller(Location::caller())?;
        self.win.shared.barrier(&caller, &"win_fence")
    }

    /// The closing fence.
    #[track_caller]
    pub fn end(mut self) -> Result<(), Error> {
        self.ended = true;
        self.win.epochs.fence.set(false);
        let caller = self.win.caller(Location::caller())?;
        self.win.shared.barrier(&caller, &"win_fence")
    }
}

impl<T: Equivalence + Copy> Drop for Fence<'_, '_, T> {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        self.win.epochs.fence.set(false);
        if !std::thread::panicking() {
            if let Ok(caller) = self.win.caller(Location::caller()) {
                // The job's error, if any, is reported by the job.
                let _ = self.win.shared.barrier(&caller, &"win_fence");
            }
        }
    }
}

impl<T: Equivalence + Copy> sealed::EpochGuard<T> for Fence<'_, '_, T> {
    fn window(&self) -> sealed::Shared<'_> {
        sealed::Shared(&self.win.shared, &self.win.comm)
    }
    fn allows(&self, op: &'static str, target: Rank) -> Result<(), Error> {
        self.win.check_size(op, target)
    }
}
impl<T: Equivalence + Copy> Epoch<T> for Fence<'_, '_, T> {}

/// A passive-target epoch on one rank ([`Window::lock`]); dropping it (or
/// [`unlock`](Self::unlock)) ends it.
#[derive(Debug)]
pub struct Lock<'w, 'b, T: Equivalence + Copy> {
    pub(super) win: &'w Window<'b, T>,
    pub(super) target: Rank,
    pub(super) kind: LockKind,
    pub(super) taken: bool,
}

impl<T: Equivalence + Copy> Lock<'_, '_, T> {
    /// The locked rank.
    pub fn target(&self) -> Rank {
        self.target
    }

    /// `MPI_Win_flush`: operations issued so far are complete at the
    /// target (in one process they are when issued: a memory fence).
    pub fn flush(&self) {
        self.win.shared.sync();
    }

    /// `MPI_Win_flush_local`: the origin's buffers may be reused.
    pub fn flush_local(&self) {
        self.win.shared.sync();
    }

    /// `MPI_Win_unlock`.
    pub fn unlock(self) {}
}

impl<T: Equivalence + Copy> Drop for Lock<'_, '_, T> {
    fn drop(&mut self) {
        if self.taken {
            self.win
                .shared
                .unlock(&self.win.comm, self.target, self.kind);
        }
        self.win
            .epochs
            .locks
            .borrow_mut()
            .retain(|&r| r != self.target);
    }
}

impl<T: Equivalence + Copy> sealed::EpochGuard<T> for Lock<'_, '_, T> {
    fn window(&self) -> sealed::Shared<'_> {
        sealed::Shared(&self.win.shared, &self.win.comm)
    }
    fn allows(&self, op: &'static str, target: Rank) -> Result<(), Error> {
        self.win.check_size(op, target)?;
        if target == self.target {
            Ok(())
        } else {
            Err(Error::Rma(RmaError::NotInEpoch {
                op,
                target,
                epoch: "lock",
            }))
        }
    }
}
impl<T: Equivalence + Copy> Epoch<T> for Lock<'_, '_, T> {}

/// A shared passive-target epoch on every rank ([`Window::lock_all`]).
#[derive(Debug)]
pub struct LockAll<'w, 'b, T: Equivalence + Copy> {
    pub(super) win: &'w Window<'b, T>,
    pub(super) taken: bool,
}

impl<T: Equivalence + Copy> LockAll<'_, '_, T> {
    /// `MPI_Win_flush` on one target.
    pub fn flush(&self, target: Rank) -> Result<(), Error> {
        self.win.check_size("flush", target)?;
        self.win.shared.sync();
        Ok(())
    }

    /// `MPI_Win_flush_all`.
    pub fn flush_all(&self) {
        self.win.shared.sync();
    }

    /// `MPI_Win_flush_local_all`.
    pub fn flush_local_all(&self) {
        self.win.shared.sync();
    }

    /// `MPI_Win_unlock_all`.
    pub fn unlock_all(self) {}
}

impl<T: Equivalence + Copy> Drop for LockAll<'_, '_, T> {
    fn drop(&mut self) {
        if self.taken {
            for target in 0..self.win.size() {
                self.win
                    .shared
                    .unlock(&self.win.comm, target, LockKind::Shared);
            }
        }
        self.win.epochs.lock_all.set(false);
    }
}

impl<T: Equivalence + Copy> sealed::EpochGuard<T> for LockAll<'_, '_, T> {
    fn window(&self) -> sealed::Shared<'_> {
        sealed::Shared(&self.win.shared, &self.win.comm)
    }
    fn allows(&self, op: &'static str, target: Rank) -> Result<(), Error> {
        self.win.check_size(op, target)
    }
}
impl<T: Equivalence + Copy> Epoch<T> for LockAll<'_, '_, T> {}

/// An access epoch of post/start/complete/wait ([`Window::start`]);
/// dropping it (or [`complete`](Self::complete)) completes it.
#[derive(Debug)]
pub struct Access<'w, 'b, T: Equivalence + Copy> {
    pub(super) win: &'w Window<'b, T>,
    pub(super) targets: Vec<Rank>,
}

impl<T: Equivalence + Copy> Access<'_, '_, T> {
    /// `MPI_Win_complete`.
    pub fn complete(self) {}
}

impl<T: Equivalence + Copy> Drop for Access<'_, '_, T> {
    fn drop(&mut self) {
        for &t in &self.targets {
            self.win.shared.complete(&self.win.comm, t);
        }
        self.win.epochs.start.set(false);
    }
}

impl<T: Equivalence + Copy> sealed::EpochGuard<T> for Access<'_, '_, T> {
    fn window(&self) -> sealed::Shared<'_> {
        sealed::Shared(&self.win.shared, &self.win.comm)
    }
    fn allows(&self, op: &'static str, target: Rank) -> Result<(), Error> {
        self.win.check_size(op, target)?;
        if self.targets.binary_search(&target).is_ok() {
            Ok(())
        } else {
            Err(Error::Rma(RmaError::NotInEpoch {
                op,
                target,
                epoch: "start",
            }))
        }
    }
}
impl<T: Equivalence + Copy> Epoch<T> for Access<'_, '_, T> {}

/// An exposure epoch ([`Window::post`]); [`wait`](Self::wait) (or dropping
/// it) waits until every origin of its group completed.
#[derive(Debug)]
pub struct Exposure<'w, 'b, T: Equivalence + Copy> {
    pub(super) win: &'w Window<'b, T>,
    pub(super) waited: bool,
}

impl<T: Equivalence + Copy> Exposure<'_, '_, T> {
    /// `MPI_Win_test`: whether every origin completed.
    pub fn test(&self) -> bool {
        self.win
            .shared
            .completed(self.win.rank(), self.win.epochs.expected.get())
    }

    /// `MPI_Win_wait`.
    #[track_caller]
    pub fn wait(mut self) -> Result<(), Error> {
        self.waited = true;
        self.win.epochs.post.set(false);
        let caller = self.win.caller(Location::caller())?;
        self.win
            .shared
            .wait_completes(&caller, self.win.epochs.expected.get())
    }
}

impl<T: Equivalence + Copy> Drop for Exposure<'_, '_, T> {
    fn drop(&mut self) {
        if self.waited {
            return;
        }
        self.win.epochs.post.set(false);
        if !std::thread::panicking() {
            if let Ok(caller) = self.win.caller(Location::caller()) {
                let _ = self
                    .win
                    .shared
                    .wait_completes(&caller, self.win.epochs.expected.get());
            }
        }
    }
}
