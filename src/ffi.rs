//! The few C-level names that rsmpi signatures mention (rsmpi's `mpi::ffi`,
//! which re-exports a whole C MPI library's bindings).
//!
//! myriad has no C library: only the names that safe-to-port rsmpi code
//! needs exist here, so far those of
//! [`UnsafeUserFunction`](crate::collective::UnsafeUserFunction), the C
//! signature of an [`UnsafeUserOperation`](crate::collective::UnsafeUserOperation).
//! Any other `ffi` name fails to compile, on purpose: a C handle of a real
//! MPI library means nothing to a thread runtime.

#![allow(non_camel_case_types)]

use std::ffi::c_void;

/// A datatype handle as a C callback receives it. In myriad it points to
/// the datatype's type map (opaque): compare it with other handles of the
/// same call, do not dereference it.
pub type MPI_Datatype = *const c_void;

/// C's `int`, as in the callback's length argument.
pub use std::ffi::c_int;
