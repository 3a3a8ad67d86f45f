//! Epochs and operations: the [`Epoch`] trait of RMA operations, and the
//! guards of the epochs that offer them ([`Fence`], [`Lock`], [`LockAll`],
//! [`Access`]) or expose memory to them ([`Exposure`]). Each guard borrows
//! its window and ends its epoch when dropped; the operations check the
//! target against the epoch ([`sealed::EpochGuard::allows`]) and go to the
//! window's shared state (`rma`).
//!
//! Operations come in two shapes: the simple ones (`put`, `get`, ...) move
//! whole elements of the window's type `T` between a slice and the
//! elements at a displacement; the `_typed` ones take a [`TargetView`]
//! (a count and a datatype at the target, MPI's `target_count` and
//! `target_datatype`) and any origin buffer whose type signature equals
//! the target's (`target.rs`).

use std::mem::{size_of, MaybeUninit};
use std::panic::Location;

use super::target::{check_signatures, Packed, TargetView, Unpacked};
use super::{traced, Window, ALL};
use crate::coll::op::{OpRef, Operation};
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
        pub(super) &'a crate::rma::Elements,
    );

    impl Shared<'_> {
        /// The window's element type, whose map is `dt`'s.
        pub(super) fn element<'d>(
            &'d self,
            dt: &'d impl crate::datatype::Datatype,
        ) -> crate::rma::Element<'d> {
            crate::rma::Element {
                map: dt.type_map(),
                elements: self.2,
            }
        }
    }

    /// What an epoch guard tells the operations (internal).
    pub trait EpochGuard<T> {
        /// The window.
        fn window(&self) -> Shared<'_>;
        /// Whether `target` may be accessed in this epoch.
        fn allows(&self, op: &'static str, target: crate::Rank) -> Result<(), crate::Error>;
    }
}

/// The predefined operation `op` is; a user operation is refused
/// (`MPI_ERR_OP`: MPI allows only predefined operations in accumulates).
fn predefined<O: Operation>(name: &'static str, op: &O) -> Result<OpRef<'static>, Error> {
    match op.op() {
        OpRef::System(op) => Ok(OpRef::System(op)),
        OpRef::User(..) => Err(Error::Rma(RmaError::UserOperation { op: name })),
    }
}

/// The RMA operations, available on every access epoch's guard
/// ([`Fence`], [`Lock`], [`LockAll`], [`Access`]). Displacements count in
/// the target's displacement unit; every access is checked against the
/// target's segment. In one process each operation has completed when it
/// returns.
///
/// Reductions take any [`Operation`], as rsmpi's reductions do, but MPI
/// allows only the predefined ones
/// ([`SystemOperation`](crate::collective::SystemOperation)) in
/// accumulates: a user operation is an error of class `MPI_ERR_OP`
/// ([`RmaError::UserOperation`]).
pub trait Epoch<T: Equivalence + Copy>: sealed::EpochGuard<T> {
    /// `MPI_Put`: writes `data` at displacement `disp` of `target`.
    #[inline(always)]
    fn put(&self, target: Rank, disp: usize, data: &[T]) -> Result<(), Error> {
        let _span = traced(self.window().1, &"put", target, std::mem::size_of_val(data));
        self.allows("put", target)?;
        let w = self.window();
        let dt = T::equivalent_datatype();
        // SAFETY: `data` is borrowed shared: nobody writes it meanwhile.
        unsafe {
            w.0.put(
                w.1,
                target,
                disp,
                w.element(&dt),
                data.as_ptr() as *const u8,
                std::mem::size_of_val(data),
            )
        }
    }

    /// `MPI_Get`: reads `out.len()` elements at `disp` of `target`.
    #[inline(always)]
    fn get(&self, target: Rank, disp: usize, out: &mut [T]) -> Result<(), Error> {
        let _span = traced(self.window().1, &"get", target, std::mem::size_of_val(out));
        self.allows("get", target)?;
        let w = self.window();
        let dt = T::equivalent_datatype();
        // SAFETY: `out` is borrowed exclusively.
        unsafe {
            w.0.get(
                w.1,
                target,
                disp,
                w.element(&dt),
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
        let src = Layout::of(data);
        let _span = traced(self.window().1, &"put", target, src.bytes());
        self.allows("put", target)?;
        let count = elements_of::<T>("put", &src)?;
        let mut scratch = zeroed::<T>(count);
        let dst = Layout::at(
            scratch.as_mut_ptr() as *const u8,
            count,
            T::equivalent_datatype().handle(),
        );
        let w = self.window();
        let dt = T::equivalent_datatype();
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
                w.element(&dt),
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
        let dst = Layout::of_mut(out);
        let _span = traced(self.window().1, &"get", target, dst.bytes());
        self.allows("get", target)?;
        let count = elements_of::<T>("get", &dst)?;
        let mut scratch = zeroed::<T>(count);
        let w = self.window();
        let dt = T::equivalent_datatype();
        // SAFETY: the get writes our scratch's `count` elements; then the
        // copy reads them and writes `out`'s layout (borrowed exclusively,
        // disjoint from the scratch).
        unsafe {
            w.0.get(
                w.1,
                target,
                disp,
                w.element(&dt),
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

    /// `MPI_Put` with a target datatype: `data` (any buffer: a slice, a
    /// view, a user datatype) goes to the data of `to`'s elements at
    /// `target`. The two type signatures must be equal (`MPI_ERR_TYPE`,
    /// naming both); `to`'s data must lie inside the target's segment
    /// (`MPI_ERR_RMA_RANGE`) and on base values of the same type of the
    /// window's elements (`MPI_ERR_TYPE`).
    fn put_typed<D: Datatype, B: Buffer + ?Sized>(
        &self,
        target: Rank,
        to: &TargetView<'_, D>,
        data: &B,
    ) -> Result<(), Error> {
        let src = Layout::of(data);
        let _span = traced(self.window().1, &"put", target, src.bytes());
        self.allows("put", target)?;
        let at = to.placed("put")?;
        check_signatures("put", src.ty.map(), src.count, at)?;
        let w = self.window();
        let dt = T::equivalent_datatype();
        // SAFETY: `data` is borrowed shared, so its packed form (in place
        // or copied) is valid and unchanged during the put; it holds the
        // target's bytes (equal signatures).
        unsafe {
            let packed = Packed::of(&src);
            w.0.put_placed(w.1, target, at, w.element(&dt), packed.as_ptr())
        }
    }

    /// `MPI_Get` with a target datatype: the data of `from`'s elements at
    /// `target` into `out` (any writable buffer), whose type signature must
    /// equal the target's; checked as [`put_typed`](Self::put_typed).
    fn get_typed<D: Datatype, B: BufferMut + ?Sized>(
        &self,
        target: Rank,
        from: &TargetView<'_, D>,
        out: &mut B,
    ) -> Result<(), Error> {
        let dst = Layout::of_mut(out);
        let _span = traced(self.window().1, &"get", target, dst.bytes());
        self.allows("get", target)?;
        let at = from.placed("get")?;
        check_signatures("get", dst.ty.map(), dst.count, at)?;
        let w = self.window();
        let dt = T::equivalent_datatype();
        let mut into = Unpacked::new(&dst);
        // SAFETY: `out` is borrowed exclusively: the packed bytes go
        // straight into it (contiguous) or into our scratch, then out into
        // its layout; either holds the target's bytes (equal signatures).
        unsafe {
            w.0.get_placed(w.1, target, at, w.element(&dt), into.as_mut_ptr())?;
            into.finish();
        }
        Ok(())
    }

    /// `MPI_Accumulate`: `target[disp + i] = data[i] op target[disp + i]`,
    /// atomic per element with respect to other accumulates. `op` must be
    /// predefined.
    #[inline(always)]
    fn accumulate<O: Operation>(
        &self,
        target: Rank,
        disp: usize,
        data: &[T],
        op: O,
    ) -> Result<(), Error> {
        let _span = traced(
            self.window().1,
            &"accumulate",
            target,
            std::mem::size_of_val(data),
        );
        self.allows("accumulate", target)?;
        let op = predefined("accumulate", &op)?;
        let dt = T::equivalent_datatype();
        let w = self.window();
        // SAFETY: `data` is borrowed shared, `data.len()` elements of `T`'s map.
        unsafe {
            w.0.accumulate(
                w.1,
                "accumulate",
                target,
                disp,
                w.element(&dt),
                data.len(),
                Some(&op),
                Some(data.as_ptr() as *const u8),
                None,
                None,
            )
        }
    }

    /// `MPI_Accumulate` with a target datatype: each base value of `to`'s
    /// data at `target` becomes `data`'s value `op` it, under the target's
    /// accumulate lock (atomic per base value, and per call, with respect
    /// to other accumulates). Signatures, range and placement are checked
    /// as in [`put_typed`](Self::put_typed); `op` must be predefined and
    /// defined for every base type. A target type that names one location
    /// twice (MPI does not allow overlapping target entries) leaves it
    /// holding one of the two results.
    fn accumulate_typed<D: Datatype, B: Buffer + ?Sized, O: Operation>(
        &self,
        target: Rank,
        to: &TargetView<'_, D>,
        data: &B,
        op: O,
    ) -> Result<(), Error> {
        let src = Layout::of(data);
        let _span = traced(self.window().1, &"accumulate", target, src.bytes());
        self.allows("accumulate", target)?;
        let op = predefined("accumulate", &op)?;
        let at = to.placed("accumulate")?;
        check_signatures("accumulate", src.ty.map(), src.count, at)?;
        let w = self.window();
        let dt = T::equivalent_datatype();
        // SAFETY: as in `put_typed`; nothing is fetched.
        unsafe {
            let packed = Packed::of(&src);
            w.0.accumulate_placed(
                w.1,
                "accumulate",
                target,
                at,
                w.element(&dt),
                Some(&op),
                Some(packed.as_ptr()),
                None,
            )
        }
    }

    /// `MPI_Accumulate` with `MPI_REPLACE` and a target datatype: writes
    /// `data` like [`put_typed`](Self::put_typed), but atomically with
    /// respect to other accumulates.
    fn replace_typed<D: Datatype, B: Buffer + ?Sized>(
        &self,
        target: Rank,
        to: &TargetView<'_, D>,
        data: &B,
    ) -> Result<(), Error> {
        let src = Layout::of(data);
        let _span = traced(self.window().1, &"replace", target, src.bytes());
        self.allows("replace", target)?;
        let at = to.placed("replace")?;
        check_signatures("replace", src.ty.map(), src.count, at)?;
        let w = self.window();
        let dt = T::equivalent_datatype();
        // SAFETY: as in `put_typed`; nothing is fetched.
        unsafe {
            let packed = Packed::of(&src);
            w.0.accumulate_placed(
                w.1,
                "replace",
                target,
                at,
                w.element(&dt),
                None,
                Some(packed.as_ptr()),
                None,
            )
        }
    }

    /// `MPI_Get_accumulate` with a target datatype: `result` receives the
    /// target's data as it was, then it becomes `data op` it, atomically.
    /// `data` and `result` must both have the target's type signature.
    fn get_accumulate_typed<D, B, R, O>(
        &self,
        target: Rank,
        to: &TargetView<'_, D>,
        data: &B,
        result: &mut R,
        op: O,
    ) -> Result<(), Error>
    where
        D: Datatype,
        B: Buffer + ?Sized,
        R: BufferMut + ?Sized,
        O: Operation,
    {
        let src = Layout::of(data);
        let _span = traced(self.window().1, &"get_accumulate", target, src.bytes());
        self.allows("get_accumulate", target)?;
        let op = predefined("get_accumulate", &op)?;
        let at = to.placed("get_accumulate")?;
        check_signatures("get_accumulate", src.ty.map(), src.count, at)?;
        let dst = Layout::of_mut(result);
        check_signatures("get_accumulate", dst.ty.map(), dst.count, at)?;
        let w = self.window();
        let dt = T::equivalent_datatype();
        let mut into = Unpacked::new(&dst);
        // SAFETY: as in `put_typed` for `data` and `get_typed` for
        // `result` (borrowed exclusively, so disjoint from `data`).
        unsafe {
            let packed = Packed::of(&src);
            w.0.accumulate_placed(
                w.1,
                "get_accumulate",
                target,
                at,
                w.element(&dt),
                Some(&op),
                Some(packed.as_ptr()),
                Some(into.as_mut_ptr()),
            )?;
            into.finish();
        }
        Ok(())
    }

    /// `MPI_Get_accumulate`: `result` receives the target's elements as
    /// they were, then `target = data op target`, atomically.
    #[inline(always)]
    fn get_accumulate<O: Operation>(
        &self,
        target: Rank,
        disp: usize,
        data: &[T],
        result: &mut [T],
        op: O,
    ) -> Result<(), Error> {
        let _span = traced(
            self.window().1,
            &"get_accumulate",
            target,
            std::mem::size_of_val(data),
        );
        self.allows("get_accumulate", target)?;
        let op = predefined("get_accumulate", &op)?;
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
                w.element(&dt),
                data.len(),
                Some(&op),
                Some(data.as_ptr() as *const u8),
                None,
                Some(result.as_mut_ptr() as *mut u8),
            )
        }
    }

    /// `MPI_Fetch_and_op`: one element; returns the target's old value.
    #[inline(always)]
    fn fetch_and_op<O: Operation>(
        &self,
        target: Rank,
        disp: usize,
        value: T,
        op: O,
    ) -> Result<T, Error> {
        let _span = traced(self.window().1, &"fetch_and_op", target, size_of::<T>());
        let mut old = [value];
        self.get_accumulate(target, disp, &[value], &mut old, op)?;
        Ok(old[0])
    }

    /// `MPI_Accumulate` with `MPI_REPLACE`: writes `data` like
    /// [`put`](Self::put), but atomically with respect to other
    /// accumulates, element by element.
    #[inline(always)]
    fn replace(&self, target: Rank, disp: usize, data: &[T]) -> Result<(), Error> {
        let _span = traced(
            self.window().1,
            &"replace",
            target,
            std::mem::size_of_val(data),
        );
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
                w.element(&dt),
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
    #[inline(always)]
    fn swap(&self, target: Rank, disp: usize, value: T) -> Result<T, Error> {
        let _span = traced(self.window().1, &"swap", target, size_of::<T>());
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
                w.element(&dt),
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
    #[inline(always)]
    fn fetch(&self, target: Rank, disp: usize) -> Result<T, Error> {
        let _span = traced(self.window().1, &"fetch", target, size_of::<T>());
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
                w.element(&dt),
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
    #[inline(always)]
    fn compare_and_swap(
        &self,
        target: Rank,
        disp: usize,
        compare: T,
        value: T,
    ) -> Result<T, Error> {
        let _span = traced(self.window().1, &"compare_and_swap", target, size_of::<T>());
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
                w.element(&dt),
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
        let _span = traced(
            self.window().1,
            &"rput",
            target,
            std::mem::size_of_val(data),
        );
        self.put(target, disp, data)?;
        Ok(done(scope, target, data, std::mem::size_of_val(data)))
    }

    /// `MPI_Rget`: [`get`](Self::get) as a request of `scope`.
    fn rget<'a, S: Scope<'a>>(
        &self,
        scope: S,
        target: Rank,
        disp: usize,
        out: &'a mut [T],
    ) -> Result<Request<'a, [T], S>, Error> {
        let _span = traced(self.window().1, &"rget", target, std::mem::size_of_val(out));
        self.get(target, disp, out)?;
        Ok(done(scope, target, out, std::mem::size_of_val(out)))
    }

    /// `MPI_Raccumulate`: [`accumulate`](Self::accumulate) as a request of
    /// `scope`.
    fn raccumulate<'a, S: Scope<'a>, O: Operation>(
        &self,
        scope: S,
        target: Rank,
        disp: usize,
        data: &'a [T],
        op: O,
    ) -> Result<Request<'a, [T], S>, Error> {
        let _span = traced(
            self.window().1,
            &"raccumulate",
            target,
            std::mem::size_of_val(data),
        );
        self.accumulate(target, disp, data, op)?;
        Ok(done(scope, target, data, std::mem::size_of_val(data)))
    }

    /// `MPI_Rput` with a target datatype: [`put_typed`](Self::put_typed)
    /// as a request of `scope`.
    fn rput_typed<'a, S: Scope<'a>, D: Datatype, B: Buffer + ?Sized>(
        &self,
        scope: S,
        target: Rank,
        to: &TargetView<'_, D>,
        data: &'a B,
    ) -> Result<Request<'a, B, S>, Error> {
        let _span = traced(self.window().1, &"rput", target, Layout::of(data).bytes());
        self.put_typed(target, to, data)?;
        Ok(done(scope, target, data, Layout::of(data).bytes()))
    }

    /// `MPI_Rget` with a target datatype: [`get_typed`](Self::get_typed)
    /// as a request of `scope`.
    fn rget_typed<'a, S: Scope<'a>, D: Datatype, B: BufferMut + ?Sized>(
        &self,
        scope: S,
        target: Rank,
        from: &TargetView<'_, D>,
        out: &'a mut B,
    ) -> Result<Request<'a, B, S>, Error> {
        let bytes = Layout::of_mut(out).bytes();
        let _span = traced(self.window().1, &"rget", target, bytes);
        self.get_typed(target, from, out)?;
        Ok(done(scope, target, out, bytes))
    }

    /// `MPI_Raccumulate` with a target datatype:
    /// [`accumulate_typed`](Self::accumulate_typed) as a request of
    /// `scope`.
    fn raccumulate_typed<'a, S, D, B, O>(
        &self,
        scope: S,
        target: Rank,
        to: &TargetView<'_, D>,
        data: &'a B,
        op: O,
    ) -> Result<Request<'a, B, S>, Error>
    where
        S: Scope<'a>,
        D: Datatype,
        B: Buffer + ?Sized,
        O: Operation,
    {
        let _span = traced(
            self.window().1,
            &"raccumulate",
            target,
            Layout::of(data).bytes(),
        );
        self.accumulate_typed(target, to, data, op)?;
        Ok(done(scope, target, data, Layout::of(data).bytes()))
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
fn done<'a, B: ?Sized, S: Scope<'a>>(
    scope: S,
    target: Rank,
    data: &'a B,
    bytes: usize,
) -> Request<'a, B, S> {
    let status = Status::new(target, 0, bytes);
    Request::new(Op::Done(Ok(status)), data as *const B, scope)
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
        let _span = traced(&self.win.comm, &"win_fence", ALL, 0);
        let caller = self.win.caller(Location::caller())?;
        self.win.shared.barrier(&caller, &"win_fence")
    }

    /// The closing fence.
    #[track_caller]
    pub fn end(mut self) -> Result<(), Error> {
        let _span = traced(&self.win.comm, &"win_fence", ALL, 0);
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
        let _span = traced(&self.win.comm, &"win_fence", ALL, 0);
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
        sealed::Shared(&self.win.shared, &self.win.comm, &self.win.elements)
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
        let _span = traced(&self.win.comm, &"win_flush", self.target, 0);
        self.win.shared.sync();
    }

    /// `MPI_Win_flush_local`: the origin's buffers may be reused.
    pub fn flush_local(&self) {
        let _span = traced(&self.win.comm, &"win_flush_local", self.target, 0);
        self.win.shared.sync();
    }

    /// `MPI_Win_unlock`.
    pub fn unlock(self) {}
}

impl<T: Equivalence + Copy> Drop for Lock<'_, '_, T> {
    #[inline(always)]
    fn drop(&mut self) {
        let _span = traced(&self.win.comm, &"win_unlock", self.target, 0);
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
        sealed::Shared(&self.win.shared, &self.win.comm, &self.win.elements)
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
        let _span = traced(&self.win.comm, &"win_flush", target, 0);
        self.win.check_size("flush", target)?;
        self.win.shared.sync();
        Ok(())
    }

    /// `MPI_Win_flush_local` on one target: the origin's buffers of
    /// operations on it may be reused (they may as soon as an operation
    /// returns, in one process).
    pub fn flush_local(&self, target: Rank) -> Result<(), Error> {
        let _span = traced(&self.win.comm, &"win_flush_local", target, 0);
        self.win.check_size("flush_local", target)?;
        self.win.shared.sync();
        Ok(())
    }

    /// `MPI_Win_flush_all`.
    pub fn flush_all(&self) {
        let _span = traced(&self.win.comm, &"win_flush_all", ALL, 0);
        self.win.shared.sync();
    }

    /// `MPI_Win_flush_local_all`.
    pub fn flush_local_all(&self) {
        let _span = traced(&self.win.comm, &"win_flush_local_all", ALL, 0);
        self.win.shared.sync();
    }

    /// `MPI_Win_unlock_all`.
    pub fn unlock_all(self) {}
}

impl<T: Equivalence + Copy> Drop for LockAll<'_, '_, T> {
    #[inline(always)]
    fn drop(&mut self) {
        let _span = traced(&self.win.comm, &"win_unlock_all", ALL, 0);
        if self.taken {
            self.win.shared.unlock_all(&self.win.comm);
        }
        self.win.epochs.lock_all.set(false);
    }
}

impl<T: Equivalence + Copy> sealed::EpochGuard<T> for LockAll<'_, '_, T> {
    fn window(&self) -> sealed::Shared<'_> {
        sealed::Shared(&self.win.shared, &self.win.comm, &self.win.elements)
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
        let _span = traced(&self.win.comm, &"win_complete", ALL, 0);
        for &t in &self.targets {
            self.win.shared.complete(&self.win.comm, t);
        }
        self.win.epochs.start.set(false);
    }
}

impl<T: Equivalence + Copy> sealed::EpochGuard<T> for Access<'_, '_, T> {
    fn window(&self) -> sealed::Shared<'_> {
        sealed::Shared(&self.win.shared, &self.win.comm, &self.win.elements)
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
        let _span = traced(&self.win.comm, &"win_wait", ALL, 0);
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
        let _span = traced(&self.win.comm, &"win_wait", ALL, 0);
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
