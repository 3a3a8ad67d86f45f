//! Raw bindings of the C libraries optional features link, generated at
//! build time by `build.rs` beside this file (layer L0: no imports from the
//! crate). Safe types over them live where they are used
//! (`transport`, `launch`); nothing here is used directly elsewhere.
//!
//! Without the `ofi` and `pmix` features this module is empty.

/// PMIx (`<pmix.h>`, libpmix): the client calls of `launch/pmix.rs`.
#[cfg(feature = "pmix")]
#[allow(
    non_upper_case_globals,
    non_camel_case_types,
    non_snake_case,
    dead_code,
    unreachable_pub,
    missing_docs,
    clippy::all
)]
pub(crate) mod pmix {
    include!(concat!(env!("OUT_DIR"), "/pmix.rs"));
}

/// libfabric (`ofi` feature): `fabric.h`, `fi_domain.h`, `fi_endpoint.h`,
/// `fi_cm.h`, `fi_rma.h`, `fi_errno.h`, `fi_eq.h`.
#[cfg(feature = "ofi")]
#[allow(
    non_camel_case_types,
    non_snake_case,
    non_upper_case_globals,
    dead_code,
    missing_docs,
    unreachable_pub,
    missing_debug_implementations,
    clippy::all,
    clippy::undocumented_unsafe_blocks
)]
pub(crate) mod ofi {
    include!(concat!(env!("OUT_DIR"), "/ofi.rs"));
}
