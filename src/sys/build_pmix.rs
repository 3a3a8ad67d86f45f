//! PMIx's bindings (feature `pmix`): see `build.rs`.

/// Writes `OUT_DIR/pmix.rs`.
pub fn generate() {
    // The `pmix` feature's bindgen run goes here (issue 15).
}
