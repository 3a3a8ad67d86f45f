//! `realloc` stays in place where it can: same size class, shrinking page runs, growing into
//! free neighbouring pages, huge blocks via `mremap`; content survives every move.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::Mutex;

use myriad_alloc::MyriadAlloc;

#[global_allocator]
static ALLOC: MyriadAlloc = MyriadAlloc;

/// The tests run one at a time: "grows into the free pages after it"
/// holds only while no other thread takes those pages between the shrink
/// and the grow, and the Vec growth of the huge-block test (on another test
/// thread) took them about once in four loaded runs.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn fill(p: *mut u8, len: usize) {
    for i in 0..len {
        // SAFETY: `p` is live for `len` bytes.
        unsafe { p.add(i).write((i % 251) as u8) };
    }
}

fn check(p: *const u8, len: usize) {
    for i in 0..len {
        // SAFETY: `p` is live for `len` bytes.
        assert_eq!(unsafe { p.add(i).read() }, (i % 251) as u8, "byte {i}");
    }
}

#[test]
fn small_blocks_stay_within_their_class() {
    let _serial = serial();
    let layout = Layout::from_size_align(100, 8).unwrap();
    // SAFETY: valid layouts, each realloc passes the layout of the current size.
    unsafe {
        let p = ALLOC.alloc(layout);
        fill(p, 100);
        let q = ALLOC.realloc(p, layout, 110); // class 112
        assert_eq!(p, q);
        let r = ALLOC.realloc(q, Layout::from_size_align(110, 8).unwrap(), 97);
        assert_eq!(p, r);
        check(r, 97);
        let s = ALLOC.realloc(r, Layout::from_size_align(97, 8).unwrap(), 4000);
        check(s, 97);
        ALLOC.dealloc(s, Layout::from_size_align(4000, 8).unwrap());
    }
}

#[test]
fn page_runs_shrink_in_place_and_grow_into_free_pages() {
    let _serial = serial();
    let big = 1 << 20;
    // SAFETY: valid layouts, each realloc passes the layout of the current size.
    unsafe {
        let l = Layout::from_size_align(big, 8).unwrap();
        let p = ALLOC.alloc(l);
        fill(p, big);
        // Shrink: the tail goes back to the pool, the block stays.
        let q = ALLOC.realloc(p, l, big / 4);
        assert_eq!(p, q);
        check(q, big / 4);
        // Grow back: the freed tail is right after the block.
        let r = ALLOC.realloc(q, Layout::from_size_align(big / 4, 8).unwrap(), big);
        assert_eq!(p, r);
        check(r, big / 4);
        // Grow a lot, possibly moving: content must follow.
        let s = ALLOC.realloc(r, l, 6 * big);
        check(s, big / 4);
        ALLOC.dealloc(s, Layout::from_size_align(6 * big, 8).unwrap());
    }
}

#[test]
fn huge_blocks_resize_with_mremap_and_vec_growth_keeps_data() {
    let _serial = serial();
    let before = myriad_alloc::stats().os.mremap;
    // SAFETY: valid layouts, each realloc passes the layout of the current size.
    unsafe {
        let l = Layout::from_size_align(20 << 20, 16).unwrap();
        let p = ALLOC.alloc(l);
        fill(p, 1 << 16);
        let q = ALLOC.realloc(p, l, 40 << 20);
        check(q, 1 << 16);
        let r = ALLOC.realloc(q, Layout::from_size_align(40 << 20, 16).unwrap(), 24 << 20);
        check(r, 1 << 16);
        ALLOC.dealloc(r, Layout::from_size_align(24 << 20, 16).unwrap());
    }
    assert!(myriad_alloc::stats().os.mremap >= before + 2);
    // A Vec growing through every kind (small, page run, huge).
    let mut v: Vec<u32> = Vec::new();
    for i in 0..(12 << 20) / 4 {
        v.push(i as u32);
    }
    assert!(v.iter().enumerate().all(|(i, &x)| x == i as u32));
    v.truncate(10);
    v.shrink_to_fit();
    assert_eq!(v, (0..10).collect::<Vec<u32>>());
}
