//! A thread's cache goes back to the pools when the thread exits: empty slabs are released,
//! slabs with live blocks become orphans that later frees and other threads reclaim; and
//! allocating inside thread-local destructors (after the cache is gone) still works.

mod common;

use std::cell::RefCell;
use std::thread;

use myriad_alloc::MyriadAlloc;

#[global_allocator]
static ALLOC: MyriadAlloc = MyriadAlloc;

#[test]
fn exiting_threads_return_their_slabs() {
    // Alone in its own process, so that other tests do not move the statistics.
    if common::in_child("exiting_threads_return_their_slabs", &[]) {
        return;
    }
    let before = myriad_alloc::stats();
    for round in 0..20 {
        thread::spawn(move || {
            let mut v: Vec<Box<[u64; 8]>> = (0..5000).map(|i| Box::new([i + round; 8])).collect();
            v.retain(|b| b[0] % 2 == 0);
            let strings: Vec<String> = (0..1000).map(|i| i.to_string()).collect();
            assert_eq!(strings[999], "999");
        })
        .join()
        .unwrap();
    }
    let after = myriad_alloc::stats();
    // Each thread used a few slabs; none may stay behind: all of them were emptied before exit.
    let slack = 4 << 20;
    assert!(
        after.slab_bytes <= before.slab_bytes + slack,
        "slab bytes grew from {} to {}",
        before.slab_bytes,
        after.slab_bytes
    );
    // Small in-use bytes came back to where they were (the test harness allocates a little).
    assert!(after.small_in_use <= before.small_in_use + (64 << 10));
}

#[test]
fn blocks_outliving_their_thread_are_freed_later_and_slabs_adopted() {
    if common::in_child(
        "blocks_outliving_their_thread_are_freed_later_and_slabs_adopted",
        &[],
    ) {
        return;
    }
    let mut blocks: Vec<Box<[u8; 48]>> =
        thread::spawn(|| (0..20_000).map(|i| Box::new([i as u8; 48])).collect())
            .join()
            .unwrap();
    // The blocks live on in orphaned slabs; freeing half of them from here is a remote free.
    for (i, b) in blocks.iter().enumerate() {
        assert_eq!(b[47], i as u8);
    }
    let mut i = 0;
    blocks.retain(|_| {
        i += 1;
        i % 2 == 0
    });
    // Other threads of the same class adopt the orphans instead of carving new slabs.
    let before = myriad_alloc::stats();
    thread::spawn(|| {
        let v: Vec<Box<[u8; 48]>> = (0..20_000).map(|i| Box::new([i as u8; 48])).collect();
        assert_eq!(v[19_999][0], (19_999 % 256) as u8);
    })
    .join()
    .unwrap();
    let after = myriad_alloc::stats();
    let adopted: u64 = (0..after.nodes)
        .map(|n| after.node(n).slabs_adopted - before.node(n).slabs_adopted)
        .sum();
    assert!(adopted > 0, "no orphan adopted:\n{after}");
    for b in &blocks {
        assert_eq!(b[0], b[47]);
    }
    drop(blocks);
}

struct AllocatesOnDrop(RefCell<Vec<String>>);

impl Drop for AllocatesOnDrop {
    fn drop(&mut self) {
        // Runs during thread teardown, possibly after the allocator's own guard.
        let mut v = self.0.borrow_mut();
        for i in 0..1000 {
            v.push(format!("late {i}"));
        }
        let b = vec![1u8; 1 << 20];
        assert_eq!(b.len(), 1 << 20);
        v.clear();
        v.shrink_to_fit();
    }
}

thread_local! {
    static LATE: AllocatesOnDrop = const { AllocatesOnDrop(RefCell::new(Vec::new())) };
}

#[test]
fn allocation_inside_thread_local_destructors_works() {
    let before = myriad_alloc::stats().fallback_allocs;
    for _ in 0..8 {
        thread::spawn(|| {
            // Register the late destructor before the allocator's first use in this thread.
            LATE.with(|_| ());
            let v: Vec<u64> = (0..10_000).collect();
            assert_eq!(v.iter().sum::<u64>(), 49_995_000);
            LATE.with(|l| l.0.borrow_mut().push("x".repeat(100)));
        })
        .join()
        .unwrap();
    }
    // The late destructors ran after the allocator's guard, so they used the fallback cache.
    assert!(myriad_alloc::stats().fallback_allocs >= before + 8 * 1000);
}
