//! Reduction operations: MPI's predefined ones and Rust closures.
//!
//! A reduction combines two buffers of the same datatype element by element:
//! `inout[i] = in[i] op inout[i]`, as an `MPI_Op` does. Predefined operations
//! work on the base values of the datatype's signature (a struct of an `i32`
//! and an `f64` is summed field by field); an operation that is not defined
//! for one of the base types (a bitwise `and` of `f64`, a `sum` of `bool`) is
//! an error raised before any rank waits. User operations receive the two
//! buffers type-erased and downcast them.
//!
//! Non-commutative operations are applied in rank order (the result is
//! `x0 op x1 op ... op x(n-1)`); commutative ones in whatever order is fastest.

use std::any::type_name;

use std::ffi::{c_int, c_void};

use crate::datatype::{AsDatatype, BaseKind, Datatype, DynBuffer, DynBufferMut, TypeMap};
use crate::error::{CountError, Error, TypeError};
use crate::ffi;

/// An operation of a reduction (rsmpi's `Operation`).
pub trait Operation {
    /// Whether `a op b == b op a`; the runtime may then reorder.
    fn is_commutative(&self) -> bool;
    /// The operation, for the runtime.
    #[doc(hidden)]
    fn op(&self) -> OpRef<'_>;
}

/// An operation as the runtime sees it (internal).
#[doc(hidden)]
#[derive(Clone, Copy)]
pub enum OpRef<'a> {
    /// A predefined operation.
    System(SystemOperation),
    /// A user closure, with its commutativity.
    User(&'a (dyn Fn(DynBuffer<'_>, DynBufferMut<'_>) + Sync), bool),
}

impl std::fmt::Debug for OpRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpRef::System(op) => write!(f, "{op:?}"),
            OpRef::User(_, commutative) => write!(f, "UserOperation(commutative: {commutative})"),
        }
    }
}

/// MPI's predefined reduction operations (rsmpi's `SystemOperation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SystemOperation(System);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum System {
    Max,
    Min,
    Sum,
    Product,
    LogicalAnd,
    BitwiseAnd,
    LogicalOr,
    BitwiseOr,
    LogicalXor,
    BitwiseXor,
}

impl SystemOperation {
    /// `MPI_MAX`.
    pub fn max() -> Self {
        SystemOperation(System::Max)
    }
    /// `MPI_MIN`.
    pub fn min() -> Self {
        SystemOperation(System::Min)
    }
    /// `MPI_SUM`.
    pub fn sum() -> Self {
        SystemOperation(System::Sum)
    }
    /// `MPI_PROD`.
    pub fn product() -> Self {
        SystemOperation(System::Product)
    }
    /// `MPI_LAND`.
    pub fn logical_and() -> Self {
        SystemOperation(System::LogicalAnd)
    }
    /// `MPI_BAND`.
    pub fn bitwise_and() -> Self {
        SystemOperation(System::BitwiseAnd)
    }
    /// `MPI_LOR`.
    pub fn logical_or() -> Self {
        SystemOperation(System::LogicalOr)
    }
    /// `MPI_BOR`.
    pub fn bitwise_or() -> Self {
        SystemOperation(System::BitwiseOr)
    }
    /// `MPI_LXOR`.
    pub fn logical_xor() -> Self {
        SystemOperation(System::LogicalXor)
    }
    /// `MPI_BXOR`.
    pub fn bitwise_xor() -> Self {
        SystemOperation(System::BitwiseXor)
    }

    /// The MPI name (`MPI_SUM`, ...).
    pub fn name(&self) -> &'static str {
        match self.0 {
            System::Max => "MPI_MAX",
            System::Min => "MPI_MIN",
            System::Sum => "MPI_SUM",
            System::Product => "MPI_PROD",
            System::LogicalAnd => "MPI_LAND",
            System::BitwiseAnd => "MPI_BAND",
            System::LogicalOr => "MPI_LOR",
            System::BitwiseOr => "MPI_BOR",
            System::LogicalXor => "MPI_LXOR",
            System::BitwiseXor => "MPI_BXOR",
        }
    }

    /// Whether the operation is defined for base type `kind` (MPI 3.1
    /// §5.9.2: arithmetic on numbers, logical on integers and `bool`,
    /// bitwise on integers).
    /// (A bit in a table made from [`defined`] at compile time: a few
    /// instructions in the check of every reduction.)
    #[inline]
    pub(crate) fn supports(&self, kind: BaseKind) -> bool {
        SUPPORTED[self.0 as usize] >> (kind as u32) & 1 != 0
    }
}

/// Whether `op` is defined for base type `kind` ([`SystemOperation::supports`]).
const fn defined(op: System, kind: BaseKind) -> bool {
    if matches!(kind, BaseKind::C32 | BaseKind::C64) {
        // MPI defines only these on complex numbers.
        return matches!(op, System::Sum | System::Product);
    }
    let float = matches!(kind, BaseKind::F32 | BaseKind::F64);
    let boolean = matches!(kind, BaseKind::Bool);
    match op {
        System::Max | System::Min | System::Sum | System::Product => !boolean,
        System::LogicalAnd | System::LogicalOr | System::LogicalXor => !float,
        System::BitwiseAnd | System::BitwiseOr | System::BitwiseXor => !float && !boolean,
    }
}

/// Per operation (by discriminant), bit `kind as u32` set where
/// [`defined`].
const SUPPORTED: [u32; 10] = {
    const OPS: [System; 10] = [
        System::Max,
        System::Min,
        System::Sum,
        System::Product,
        System::LogicalAnd,
        System::BitwiseAnd,
        System::LogicalOr,
        System::BitwiseOr,
        System::LogicalXor,
        System::BitwiseXor,
    ];
    let mut table = [0u32; 10];
    let mut o = 0;
    while o < OPS.len() {
        // The table is indexed by discriminant: OPS lists them in order.
        assert!(OPS[o] as usize == o);
        let mut k = 0;
        while k < BaseKind::ALL.len() {
            let kind = BaseKind::ALL[k];
            assert!((kind as u32) < 32);
            if defined(OPS[o], kind) {
                table[o] |= 1 << (kind as u32);
            }
            k += 1;
        }
        o += 1;
    }
    table
};

impl Operation for SystemOperation {
    fn is_commutative(&self) -> bool {
        true
    }
    fn op(&self) -> OpRef<'_> {
        OpRef::System(*self)
    }
}

impl<O: Operation + ?Sized> Operation for &O {
    fn is_commutative(&self) -> bool {
        (**self).is_commutative()
    }
    fn op(&self) -> OpRef<'_> {
        (**self).op()
    }
}

/// A reduction written in Rust (rsmpi's `UserOperation`): a closure that
/// combines `input` into `inout` element by element.
///
/// ```
/// use myriad::collective::UserOperation;
/// use myriad::traits::*;
///
/// let op = UserOperation::commutative(|x, y| {
///     let x: &[u64] = x.downcast().unwrap();
///     for (y, x) in y.downcast::<u64>().unwrap().iter_mut().zip(x) {
///         *y = (*y).max(*x) + 0;
///     }
/// });
/// let maxima = myriad::run(4, |universe| {
///     let world = universe.world();
///     let mut max = 0u64;
///     world.all_reduce_into(&(world.rank() as u64 * 3), &mut max, &op);
///     max
/// })
/// .unwrap();
/// assert_eq!(maxima, vec![9; 4]);
/// ```
pub struct UserOperation<'a> {
    f: Box<dyn Fn(DynBuffer<'_>, DynBufferMut<'_>) + Sync + 'a>,
    commutative: bool,
}

impl std::fmt::Debug for UserOperation<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserOperation")
            .field("commutative", &self.commutative)
            .finish()
    }
}

impl<'a> UserOperation<'a> {
    /// A commutative operation.
    pub fn commutative<F>(f: F) -> Self
    where
        F: Fn(DynBuffer<'_>, DynBufferMut<'_>) + Sync + 'a,
    {
        Self::new(true, f)
    }

    /// An associative but not commutative operation: applied in rank order.
    pub fn associative<F>(f: F) -> Self
    where
        F: Fn(DynBuffer<'_>, DynBufferMut<'_>) + Sync + 'a,
    {
        Self::new(false, f)
    }

    /// An operation, commutative or not.
    pub fn new<F>(commute: bool, f: F) -> Self
    where
        F: Fn(DynBuffer<'_>, DynBufferMut<'_>) + Sync + 'a,
    {
        UserOperation {
            f: Box::new(f),
            commutative: commute,
        }
    }
}

/// The C signature of an [`UnsafeUserOperation`]'s function (rsmpi's
/// `UnsafeUserFunction`, `MPI_User_function`): `(input, inout, len,
/// datatype)`, combining `*len` elements of `*datatype` of `input` into
/// `inout`.
pub type UnsafeUserFunction =
    unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_int, *mut ffi::MPI_Datatype);

/// A reduction given as a C-signature function (rsmpi's
/// `UnsafeUserOperation`), for code ported from C or from rsmpi's
/// `UnsafeUserOperation`. [`UserOperation`] is the safe form.
///
/// The function gets the two operands' addresses, the element count, and a
/// datatype handle ([`ffi::MPI_Datatype`]: opaque in myriad, the same for
/// both operands).
pub struct UnsafeUserOperation {
    inner: UserOperation<'static>,
}

impl std::fmt::Debug for UnsafeUserOperation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UnsafeUserOperation")
            .field("commutative", &self.inner.commutative)
            .finish()
    }
}

impl UnsafeUserOperation {
    /// An associative but not commutative operation: applied in rank order.
    ///
    /// # Safety
    ///
    /// `function` must be sound to call with any two non-overlapping
    /// operand buffers of `len` elements of the datatype (the input
    /// readable, the inout readable and writable), and must leave valid
    /// values of that datatype in the inout buffer.
    pub unsafe fn associative(function: UnsafeUserFunction) -> Self {
        // SAFETY: the caller's contract, passed on.
        unsafe { Self::new(false, function) }
    }

    /// A commutative operation.
    ///
    /// # Safety
    ///
    /// As for [`associative`](Self::associative).
    pub unsafe fn commutative(function: UnsafeUserFunction) -> Self {
        // SAFETY: the caller's contract, passed on.
        unsafe { Self::new(true, function) }
    }

    /// An operation, commutative or not.
    ///
    /// # Safety
    ///
    /// As for [`associative`](Self::associative).
    pub unsafe fn new(commute: bool, function: UnsafeUserFunction) -> Self {
        let call = move |input: DynBuffer<'_>, mut inout: DynBufferMut<'_>| {
            let mut len = c_int::try_from(inout.len()).unwrap_or_else(|_| {
                crate::error::raise(Error::Count(CountError::BufferTooLarge {
                    len: inout.len(),
                }))
            });
            let mut datatype: ffi::MPI_Datatype =
                (input.as_datatype().type_map() as *const TypeMap).cast();
            // SAFETY: the reduction hands `len` elements of the datatype in
            // two non-overlapping buffers, the inout one exclusively
            // (`apply`'s contract); the constructor's caller promised that
            // `function` is sound for such buffers.
            unsafe {
                function(
                    input.as_ptr().cast_mut(),
                    inout.as_mut_ptr(),
                    &mut len,
                    &mut datatype,
                )
            };
        };
        UnsafeUserOperation {
            inner: UserOperation::new(commute, call),
        }
    }
}

impl Operation for UnsafeUserOperation {
    fn is_commutative(&self) -> bool {
        self.inner.is_commutative()
    }
    fn op(&self) -> OpRef<'_> {
        self.inner.op()
    }
}

impl Operation for UserOperation<'_> {
    fn is_commutative(&self) -> bool {
        self.commutative
    }
    fn op(&self) -> OpRef<'_> {
        OpRef::User(&*self.f, self.commutative)
    }
}

/// Checks that `op` is defined for every base type of `map`.
pub(crate) fn check_supported(op: &OpRef<'_>, map: &TypeMap) -> Result<(), Error> {
    if let OpRef::System(op) = op {
        for run in map.signature() {
            if !op.supports(run.kind) {
                return Err(Error::Type(TypeError::OpNotDefined {
                    op: op.name(),
                    base: run.kind.name(),
                    datatype: map.name().into(),
                }));
            }
        }
    }
    Ok(())
}

/// `inout[i] = input[i] op inout[i]` for `count` elements of `map`.
///
/// # Safety
///
/// `input` must be valid for reads and `inout` for reads and writes of
/// `count` elements laid out as `map`, and must not overlap;
/// `check_supported` must have accepted `op` for `map`.
#[inline]
pub(crate) unsafe fn apply(
    op: &OpRef<'_>,
    map: &TypeMap,
    input: *const u8,
    inout: *mut u8,
    count: usize,
) {
    if let (OpRef::System(op), true, [run]) = (op, map.is_contiguous(), map.signature()) {
        // The usual case, inlined: contiguous elements of one run (every
        // primitive), `run.count` values of its kind per element.
        let n = count * run.count;
        if n == 1 && op.0 == System::Sum {
            // The commonest of all, one 8-byte sum, without a call.
            // SAFETY: one value of `run.kind` at each pointer (the
            // caller's contract), read and written unaligned.
            unsafe {
                match run.kind {
                    BaseKind::I64 | BaseKind::U64 => {
                        let (a, b) = (input as *const u64, inout as *mut u64);
                        b.write_unaligned(a.read_unaligned().wrapping_add(b.read_unaligned()));
                        return;
                    }
                    BaseKind::F64 => {
                        let (a, b) = (input as *const f64, inout as *mut f64);
                        b.write_unaligned(a.read_unaligned() + b.read_unaligned());
                        return;
                    }
                    _ => {}
                }
            }
        }
        // SAFETY: contiguous data of one base kind: `n` values at each
        // pointer (the caller's contract).
        unsafe { apply_values(*op, run.kind, input, inout, n) };
        return;
    }
    // SAFETY: the caller's contract, passed on.
    unsafe { apply_any(op, map, input, inout, count) }
}

/// [`apply`] of any operation and type map.
///
/// # Safety
///
/// As for [`apply`].
#[inline(never)]
unsafe fn apply_any(op: &OpRef<'_>, map: &TypeMap, input: *const u8, inout: *mut u8, count: usize) {
    match op {
        // SAFETY: the caller's contract: `count` elements of `map` at
        // each pointer, `inout` accessed only through the second buffer.
        OpRef::User(f, _) => f(unsafe { DynBuffer::from_map(input, count, map) }, unsafe {
            DynBufferMut::from_map(inout, count, map)
        }),
        OpRef::System(op) => {
            if map.is_contiguous() {
                if let Some(kind) = map.uniform_kind() {
                    let values = count * map.size() / kind.size();
                    // SAFETY: contiguous data of one base kind: `values`
                    // values at each pointer (the caller's contract).
                    unsafe { apply_values(*op, kind, input, inout, values) };
                    return;
                }
            }
            // Element by element, run by run of the signature, each base
            // value inside one data segment.
            for e in 0..count {
                let base = e * map.extent();
                let mut segments = map.segments().iter();
                let mut seg = segments.next().copied();
                let mut used = 0;
                for run in map.signature() {
                    let mut left = run.count;
                    while left > 0 {
                        let s = seg.expect("the signature fits the segments");
                        let fit = ((s.len - used) / run.kind.size()).min(left);
                        let at = base + s.offset + used;
                        // SAFETY: `fit` values of `run.kind` lie in segment
                        // `s` of element `e` of both buffers.
                        unsafe { apply_values(*op, run.kind, input.add(at), inout.add(at), fit) };
                        used += fit * run.kind.size();
                        left -= fit;
                        if used == s.len {
                            seg = segments.next().copied();
                            used = 0;
                        }
                    }
                }
            }
        }
    }
}

/// Applies `op` to `n` base values of `kind`.
///
/// # Safety
///
/// Both pointers valid for `n` values of `kind` (unaligned is fine: values
/// are read and written unaligned).
unsafe fn apply_values(op: SystemOperation, kind: BaseKind, a: *const u8, b: *mut u8, n: usize) {
    macro_rules! numeric {
        ($t:ty) => {{
            let (a, b) = (a as *const $t, b as *mut $t);
            // One loop per operation: the match is outside the loop.
            macro_rules! each {
                (|$x:ident, $y:ident| $e:expr) => {{
                    if n == 1 {
                        // One value (the usual small reduction): no loop,
                        // whose set-up for vectors costs more than the
                        // value.
                        // SAFETY: one value in bounds of both (the
                        // caller's contract).
                        unsafe {
                            let $x = a.read_unaligned();
                            let $y = b.read_unaligned();
                            b.write_unaligned($e);
                        }
                        return;
                    }
                    for i in 0..n {
                        // SAFETY: `i < n` values are in bounds of both
                        // (the caller's contract).
                        unsafe {
                            let $x = a.add(i).read_unaligned();
                            let $y = b.add(i).read_unaligned();
                            b.add(i).write_unaligned($e);
                        }
                    }
                }};
            }
            match op.0 {
                System::Max => each!(|x, y| if x > y { x } else { y }),
                System::Min => each!(|x, y| if x < y { x } else { y }),
                System::Sum => each!(|x, y| <$t as Arith>::add(x, y)),
                System::Product => each!(|x, y| <$t as Arith>::mul(x, y)),
                System::LogicalAnd => each!(|x, y| logical::<$t>((x != zero::<$t>()) && (y != zero::<$t>()))),
                System::LogicalOr => each!(|x, y| logical::<$t>((x != zero::<$t>()) || (y != zero::<$t>()))),
                System::LogicalXor => each!(|x, y| logical::<$t>((x != zero::<$t>()) != (y != zero::<$t>()))),
                System::BitwiseAnd => each!(|x, y| <$t as Bits>::bits(x, y, "&")),
                System::BitwiseOr => each!(|x, y| <$t as Bits>::bits(x, y, "|")),
                System::BitwiseXor => each!(|x, y| <$t as Bits>::bits(x, y, "^")),
            }
        }};
    }
    // Complex numbers as `[re, im]`; only sum and product reach here
    // (`check_supported`).
    macro_rules! complex {
        ($t:ty) => {{
            let (a, b) = (a as *const [$t; 2], b as *mut [$t; 2]);
            for i in 0..n {
                // SAFETY: `i < n` values are in bounds of both (the
                // caller's contract).
                unsafe {
                    let [xr, xi] = a.add(i).read_unaligned();
                    let [yr, yi] = b.add(i).read_unaligned();
                    let r = match op.0 {
                        System::Sum => [xr + yr, xi + yi],
                        System::Product => [xr * yr - xi * yi, xr * yi + xi * yr],
                        _ => unreachable!("{} on complex numbers was rejected", op.name()),
                    };
                    b.add(i).write_unaligned(r);
                }
            }
        }};
    }
    match kind {
        BaseKind::I8 => numeric!(i8),
        BaseKind::U8 => numeric!(u8),
        BaseKind::I16 => numeric!(i16),
        BaseKind::U16 => numeric!(u16),
        BaseKind::I32 => numeric!(i32),
        BaseKind::U32 => numeric!(u32),
        BaseKind::I64 => numeric!(i64),
        BaseKind::U64 => numeric!(u64),
        BaseKind::F32 => numeric!(f32),
        BaseKind::F64 => numeric!(f64),
        BaseKind::C32 => complex!(f32),
        BaseKind::C64 => complex!(f64),
        BaseKind::Bool => {
            // Only logical operations reach here (check_supported).
            for i in 0..n {
                // SAFETY: in bounds (caller); bools hold 0 or 1 (the
                // signature check delivers only bool data to bool buffers).
                unsafe {
                    let x = a.add(i).read() != 0;
                    let y = b.add(i).read() != 0;
                    let r = match op.0 {
                        System::LogicalAnd => x && y,
                        System::LogicalOr => x || y,
                        System::LogicalXor => x != y,
                        _ => unreachable!("{} on bool was rejected", op.name()),
                    };
                    b.add(i).write(r as u8);
                }
            }
        }
    }
}

trait Arith: Copy + PartialOrd {
    fn add(self, other: Self) -> Self;
    fn mul(self, other: Self) -> Self;
    fn zero() -> Self;
    fn one() -> Self;
}

trait Bits: Copy {
    fn bits(self, other: Self, op: &str) -> Self;
}

macro_rules! ints {
    ($($t:ty)*) => {$(
        impl Arith for $t {
            // MPI's integer sum wraps like C's (no trap on overflow).
            fn add(self, other: Self) -> Self { self.wrapping_add(other) }
            fn mul(self, other: Self) -> Self { self.wrapping_mul(other) }
            fn zero() -> Self { 0 }
            fn one() -> Self { 1 }
        }
        impl Bits for $t {
            fn bits(self, other: Self, op: &str) -> Self {
                match op {
                    "&" => self & other,
                    "|" => self | other,
                    _ => self ^ other,
                }
            }
        }
    )*};
}
ints!(i8 u8 i16 u16 i32 u32 i64 u64);

macro_rules! floats {
    ($($t:ty)*) => {$(
        impl Arith for $t {
            fn add(self, other: Self) -> Self { self + other }
            fn mul(self, other: Self) -> Self { self * other }
            fn zero() -> Self { 0.0 }
            fn one() -> Self { 1.0 }
        }
        impl Bits for $t {
            fn bits(self, _: Self, op: &str) -> Self {
                unreachable!("bitwise {op} on {} was rejected", type_name::<$t>())
            }
        }
    )*};
}
floats!(f32 f64);

fn zero<T: Arith>() -> T {
    T::zero()
}

fn logical<T: Arith>(truth: bool) -> T {
    if truth {
        T::one()
    } else {
        T::zero()
    }
}

/// Reduces `input` into `inout` with `op` on one rank (`MPI_Reduce_local`):
/// `inout[i] = input[i] op inout[i]`.
///
/// # Panics
///
/// If the buffers have different types or lengths, or `op` is not defined
/// for their type.
#[track_caller]
pub fn reduce_local_into<S, R, O>(input: &S, inout: &mut R, op: O)
where
    S: crate::datatype::Buffer + ?Sized,
    R: crate::datatype::BufferMut + ?Sized,
    O: Operation,
{
    use crate::error::OrRaise;
    let dt = input.as_datatype();
    let map = dt.type_map();
    let count = input.count() as usize;
    let out_dt = inout.as_datatype();
    let result = if !std::ptr::eq(map, out_dt.type_map()) && map != out_dt.type_map() {
        Err(Error::Type(TypeError::ReduceLocalTypes {
            input: map.name().into(),
            inout: out_dt.type_map().name().into(),
        }))
    } else if count != inout.count() as usize {
        Err(Error::Count(CountError::ReduceLocalCount {
            input: count,
            inout: inout.count() as usize,
        }))
    } else {
        check_supported(&op.op(), map)
    };
    result.or_raise();
    // SAFETY: both buffers hold `count` elements of `map` (checked), are
    // distinct borrows, and the operation was checked for the type.
    unsafe {
        apply(
            &op.op(),
            map,
            // Segment offsets count from the type's lower bound.
            (input.pointer() as *const u8).wrapping_offset(map.lb()),
            (inout.pointer_mut() as *mut u8).wrapping_offset(map.lb()),
            count,
        )
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datatype::Equivalence;

    fn reduce<T: Equivalence + Copy>(op: SystemOperation, a: &[T], b: &mut [T]) {
        let dt = T::equivalent_datatype();
        check_supported(&op.op(), dt.type_map()).unwrap();
        // SAFETY: same type and length, distinct buffers.
        unsafe {
            apply(
                &op.op(),
                dt.type_map(),
                a.as_ptr() as *const u8,
                b.as_mut_ptr() as *mut u8,
                a.len(),
            )
        }
    }

    #[test]
    fn predefined_operations() {
        let mut b = [1i32, 5, -3];
        reduce(SystemOperation::sum(), &[2, 2, 2], &mut b);
        assert_eq!(b, [3, 7, -1]);
        reduce(SystemOperation::max(), &[9, 0, 0], &mut b);
        assert_eq!(b, [9, 7, 0]);
        let mut f = [1.5f64, 2.0];
        reduce(SystemOperation::product(), &[2.0, 0.5], &mut f);
        assert_eq!(f, [3.0, 1.0]);
        let mut u = [0b1100u16];
        reduce(SystemOperation::bitwise_xor(), &[0b1010], &mut u);
        assert_eq!(u, [0b0110]);
        let mut l = [true, false, true];
        reduce(SystemOperation::logical_and(), &[true, true, false], &mut l);
        assert_eq!(l, [true, false, false]);
        let mut i = [0i64, 3];
        reduce(SystemOperation::logical_or(), &[0, 0], &mut i);
        assert_eq!(i, [0, 1]);
    }

    #[test]
    fn one_value_sums_take_the_short_path_with_the_same_results() {
        let mut i = [i64::MAX];
        reduce(SystemOperation::sum(), &[1i64], &mut i);
        assert_eq!(i, [i64::MIN], "integer sums wrap");
        let mut u = [7u64];
        reduce(SystemOperation::sum(), &[u64::MAX], &mut u);
        assert_eq!(u, [6]);
        let mut f = [0.25f64];
        reduce(SystemOperation::sum(), &[1.5], &mut f);
        assert_eq!(f, [1.75]);
        let mut m = [3u64];
        reduce(SystemOperation::max(), &[9], &mut m);
        assert_eq!(m, [9], "other operations on one value");
    }

    #[test]
    fn structs_reduce_field_by_field() {
        let mut b = [(1u8, 10.0f64), (2, 20.0)];
        reduce(SystemOperation::sum(), &[(5u8, 0.5f64), (6, 0.25)], &mut b);
        assert_eq!(b, [(6, 10.5), (8, 20.25)]);
    }

    #[test]
    fn undefined_combinations_are_errors() {
        let f = f64::equivalent_datatype();
        let err = check_supported(&SystemOperation::bitwise_and().op(), f.type_map()).unwrap_err();
        assert!(
            err.to_string().contains("MPI_BAND is not defined for f64"),
            "{err}"
        );
        let b = bool::equivalent_datatype();
        assert!(check_supported(&SystemOperation::sum().op(), b.type_map()).is_err());
        assert!(check_supported(&SystemOperation::logical_xor().op(), b.type_map()).is_ok());
    }
}
