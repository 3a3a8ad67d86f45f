//! Freed pages are reused without new page faults up to `MYRIAD_ALLOC_KEEP`; beyond it they go
//! back to the kernel. Statistics follow.

mod common;

use std::alloc::{GlobalAlloc, Layout};

use myriad_alloc::MyriadAlloc;

#[global_allocator]
static ALLOC: MyriadAlloc = MyriadAlloc;

#[test]
fn reused_large_blocks_do_not_fault_again() {
    // Alone in its own process, so that other tests do not move the statistics.
    if common::in_child("reused_large_blocks_do_not_fault_again", &[]) {
        return;
    }
    let len = 8 << 20;
    let layout = Layout::from_size_align(len, 64).unwrap();
    // Warm up once: the first use faults every page in.
    // SAFETY: valid layout, freed once with it.
    unsafe {
        let p = ALLOC.alloc(layout);
        common::touch(p, len, 1);
        ALLOC.dealloc(p, layout);
    }
    let mmaps = myriad_alloc::stats().os.mmap;
    let faults = common::thread_minor_faults();
    for round in 0..20u8 {
        // SAFETY: as above.
        unsafe {
            let p = ALLOC.alloc(layout);
            common::touch(p, len, round);
            common::check(p, len, round);
            ALLOC.dealloc(p, layout);
        }
    }
    let faults = common::thread_minor_faults() - faults;
    let s = myriad_alloc::stats();
    // 20 rounds x 2048 pages would be 40,960 faults without reuse.
    assert!(faults < 200, "{faults} faults\n{s}");
    assert_eq!(s.os.mmap, mmaps, "no new mapping\n{s}");
    assert!(s.kept >= len as u64, "{s}");
}

#[test]
fn statistics_track_blocks() {
    // Alone in its own process, so that other tests do not move the statistics.
    if common::in_child("statistics_track_blocks", &[]) {
        return;
    }
    let s0 = myriad_alloc::stats();
    let v = vec![0u8; 3 << 20];
    let small: Vec<Box<u64>> = (0..1000).map(Box::new).collect();
    let s1 = myriad_alloc::stats();
    assert!(s1.large_in_use >= s0.large_in_use + (3 << 20), "{s1}");
    assert!(s1.small_in_use >= s0.small_in_use + 16_000, "{s1}");
    assert!(s1.mapped >= s1.in_use);
    drop(v);
    drop(small);
    let s2 = myriad_alloc::stats();
    assert!(s2.large_in_use + (3 << 20) <= s1.large_in_use, "{s2}");
    let text = s2.to_string();
    assert!(text.contains("node 0"), "{text}");
    assert!(text.contains("os calls"), "{text}");
}

#[test]
fn keep_zero_returns_freed_pages_at_once() {
    if common::in_child(
        "keep_zero_returns_freed_pages_at_once",
        &[("MYRIAD_ALLOC_KEEP", "0")],
    ) {
        return;
    }
    let s0 = myriad_alloc::stats();
    assert_eq!(s0.keep_limit, 0);
    for _ in 0..5 {
        let v = vec![1u8; 4 << 20];
        assert_eq!(v[(4 << 20) - 1], 1);
    }
    let s = myriad_alloc::stats();
    assert!(s.os.madvise > s0.os.madvise, "{s}");
    assert_eq!(s.kept, 0, "{s}");
    assert!(s.node(0).purged >= 4 << 20, "{s}");
}

#[test]
fn keep_bound_caps_kept_memory() {
    if common::in_child(
        "keep_bound_caps_kept_memory",
        &[("MYRIAD_ALLOC_KEEP", "16M")],
    ) {
        return;
    }
    let blocks: Vec<Vec<u8>> = (0..16).map(|i| vec![i as u8; 4 << 20]).collect();
    drop(blocks);
    let s = myriad_alloc::stats();
    assert_eq!(s.keep_limit, 16 << 20);
    assert!(s.kept <= 16 << 20, "{s}");
    assert!(s.kept >= 4 << 20, "kept nothing: {s}");
}
