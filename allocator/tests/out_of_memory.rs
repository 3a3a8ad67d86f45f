//! Requests the kernel cannot satisfy return null (or `Err` through the fallible std APIs);
//! nothing aborts inside the allocator, and the allocator keeps working afterwards.

use std::alloc::{GlobalAlloc, Layout};

use myriad_alloc::MyriadAlloc;

#[global_allocator]
static ALLOC: MyriadAlloc = MyriadAlloc;

#[test]
fn impossible_requests_return_null() {
    for size in [1usize << 50, (isize::MAX as usize) - 4095, 1 << 62] {
        let layout = Layout::from_size_align(size, 8).unwrap();
        // SAFETY: non-zero size.
        let p = unsafe { ALLOC.alloc(layout) };
        assert!(p.is_null(), "size {size:#x}");
    }
    // Huge alignment too.
    let layout = Layout::from_size_align(1 << 50, 1 << 30).unwrap();
    // SAFETY: non-zero size.
    assert!(unsafe { ALLOC.alloc(layout) }.is_null());
}

#[test]
fn failed_realloc_keeps_the_old_block() {
    let layout = Layout::from_size_align(64, 8).unwrap();
    // SAFETY: valid layout; the block is freed once, with its layout.
    unsafe {
        let p = ALLOC.alloc(layout);
        p.write_bytes(0xAB, 64);
        let q = ALLOC.realloc(p, layout, 1 << 50);
        assert!(q.is_null());
        assert_eq!(p.add(63).read(), 0xAB);
        ALLOC.dealloc(p, layout);
    }
}

#[test]
fn fallible_std_apis_report_the_error() {
    let mut v: Vec<u8> = Vec::new();
    assert!(v.try_reserve(1 << 50).is_err());
    assert!(v.try_reserve_exact(usize::MAX / 2).is_err());
    // Still usable.
    v.extend_from_slice(&[1, 2, 3]);
    assert_eq!(v, [1, 2, 3]);
    let big = vec![7u8; 32 << 20];
    assert_eq!(big[(32 << 20) - 1], 7);
}
