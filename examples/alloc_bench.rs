//! AMR-like allocator benchmark (work in progress, see allocator/README.md).
fn main() {}
