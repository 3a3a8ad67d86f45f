//! Raw bindings of the C libraries optional features link, generated at
//! build time by `build.rs` beside this file (layer L0: no imports from the
//! crate). Safe types over them live where they are used
//! (`transport`, `launch`); nothing here is used directly elsewhere.
//!
//! Without the `ofi` and `pmix` features this module is empty.
