//! Small-object fast path benchmark (work in progress, see allocator/README.md).
fn main() {}
