//! Zero-size requests and alignments from 1 byte to above the page size.

mod common;

use std::alloc::{GlobalAlloc, Layout};

use myriad_alloc::MyriadAlloc;

#[global_allocator]
static ALLOC: MyriadAlloc = MyriadAlloc;

#[test]
fn zero_size_requests_get_distinct_usable_blocks() {
    // `GlobalAlloc` forbids size 0, but a direct caller may pass it: myriad answers with a
    // minimal block rather than undefined behaviour.
    let layout = Layout::from_size_align(0, 1).unwrap();
    // SAFETY: myriad accepts size 0 (documented); the blocks are freed with the same layout.
    unsafe {
        let a = ALLOC.alloc(layout);
        let b = ALLOC.alloc(layout);
        assert!(!a.is_null() && !b.is_null());
        assert_ne!(a, b);
        ALLOC.dealloc(a, layout);
        ALLOC.dealloc(b, layout);
    }
    // Zero-sized types never reach the allocator, but must keep working with it installed.
    let v: Vec<()> = vec![(); 1000];
    assert_eq!(v.len(), 1000);
    let b = Box::new(());
    assert_eq!(*b, ());
    let empty: Vec<u64> = Vec::with_capacity(0);
    assert_eq!(empty.capacity(), 0);
}

fn check_alignment(size: usize, align: usize) {
    let layout = Layout::from_size_align(size, align).unwrap();
    let mut ptrs = Vec::new();
    for i in 0..4 {
        // SAFETY: non-zero size layout.
        let p = unsafe { ALLOC.alloc(layout) };
        assert!(!p.is_null(), "size {size} align {align}");
        assert_eq!(p as usize % align, 0, "size {size} align {align}");
        // SAFETY: `p` is a live block of `size` bytes.
        unsafe { p.write_bytes(i as u8 + 1, size) };
        ptrs.push(p);
    }
    for (i, &p) in ptrs.iter().enumerate() {
        // SAFETY: live blocks of `size` bytes, filled above.
        unsafe {
            assert_eq!(p.read(), i as u8 + 1);
            assert_eq!(p.add(size - 1).read(), i as u8 + 1);
            ALLOC.dealloc(p, layout);
        }
    }
}

#[test]
fn every_alignment_up_to_and_above_the_page_size() {
    let sizes = [
        1,
        7,
        16,
        24,
        100,
        1000,
        4095,
        4096,
        5000,
        16384,
        70_000,
        1 << 20,
    ];
    let mut align = 1;
    while align <= 8 << 20 {
        for &size in &sizes {
            check_alignment(size, align);
        }
        align *= 2;
    }
    // Huge blocks (direct mappings) with and without large alignment.
    check_alignment(20 << 20, 8);
    check_alignment(20 << 20, 4 << 20);
}

#[test]
fn odd_sizes_in_every_class() {
    for size in (1..20_000).step_by(37) {
        let v: Vec<u8> = (0..size).map(|i| i as u8).collect();
        assert!(v.iter().enumerate().all(|(i, &b)| b == i as u8));
    }
    for &align in &[16usize, 32, 64, 128, 256, 512, 1024, 2048, 4096] {
        for size in [align / 2, align, align + 1, 3 * align, 16 << 10] {
            check_alignment(size.max(1), align);
        }
    }
}
