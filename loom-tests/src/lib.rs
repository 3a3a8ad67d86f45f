//! loom models of the concurrency primitives of myriad and myriad-alloc.
//!
//! The models live in `tests/`; they only build with `RUSTFLAGS="--cfg loom"`:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p loom-tests --release
//! ```
