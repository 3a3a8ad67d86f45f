//! libfabric's bindings (feature `ofi`): see `build.rs`.
//!
//! Only the functions libfabric exports and the types, constants and ops
//! tables of the headers below: most of its API (`fi_send`, `fi_cq_read`,
//! `fi_close`, ...) are `static inline` calls through the ops tables, which
//! `transport/ofi/` writes in Rust over these structs.

use std::path::PathBuf;

/// The headers the transport uses.
const HEADERS: [&str; 7] = [
    "rdma/fabric.h",
    "rdma/fi_domain.h",
    "rdma/fi_endpoint.h",
    "rdma/fi_cm.h",
    "rdma/fi_rma.h",
    "rdma/fi_errno.h",
    "rdma/fi_eq.h",
];

/// Writes `OUT_DIR/ofi.rs` and links `libfabric`.
pub(crate) fn generate() {
    println!("cargo:rerun-if-changed=src/sys/build_ofi.rs");
    println!("cargo:rustc-link-lib=fabric");
    let wrapper: String = HEADERS
        .iter()
        .map(|h| format!("#include <{h}>\n"))
        .collect();
    let bindings = bindgen::Builder::default()
        .header_contents("ofi_wrapper.h", &wrapper)
        .allowlist_function("fi_.*")
        .allowlist_type("fi_.*|fid.*")
        .allowlist_var("FI_.*")
        // Inline functions have no symbol to link: the Rust side calls the
        // ops tables instead.
        .generate_inline_functions(false)
        .derive_default(true)
        .derive_debug(true)
        .layout_tests(false)
        .wrap_unsafe_ops(true)
        .generate()
        .unwrap_or_else(|e| {
            panic!(
                "bindgen on libfabric's headers failed ({e}): the `ofi` feature needs \
                 libfabric-dev (<rdma/fabric.h>) and libclang-dev"
            )
        });
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("ofi.rs");
    bindings
        .write_to_file(&out)
        .unwrap_or_else(|e| panic!("writing {}: {e}", out.display()));
}
