//! libfabric's bindings (feature `ofi`): see `build.rs`.

/// Writes `OUT_DIR/ofi.rs`.
pub fn generate() {
    // The `ofi` feature's bindgen run goes here (issue 15).
}
