//! The build script: generates the bindings of the C libraries that
//! optional features link (`ofi`: libfabric, `pmix`: PMIx) with bindgen,
//! against the system's headers, into `OUT_DIR`. Without those features it
//! does nothing, so the default build needs no C library and no libclang.
//!
//! Each library's generation is its own file beside this one
//! (`build_ofi.rs`, `build_pmix.rs`); `src/sys/` includes what they write.

#[cfg(feature = "ofi")]
#[path = "build_ofi.rs"]
mod ofi;
#[cfg(feature = "pmix")]
#[path = "build_pmix.rs"]
mod pmix;

fn main() {
    println!("cargo:rerun-if-changed=src/sys/build.rs");
    #[cfg(feature = "ofi")]
    ofi::generate();
    #[cfg(feature = "pmix")]
    pmix::generate();
}
