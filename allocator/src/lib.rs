//! myriad-alloc: placeholder, built by the allocator issue.
