//! loom models of myriad-alloc's lock-free remote-free list (`myriad_alloc::remote`): frees
//! pushed by other threads while the owner takes the list must all arrive exactly once, also
//! when a block comes back to the list after being taken (the ABA shape), and the model must
//! catch a weakened memory ordering.
//!
//! Run: `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target-loom cargo test -p loom-tests --release
//! --test alloc_remote_free`
#![cfg(loom)]

use std::ptr::{self, NonNull};

use loom::sync::atomic::{AtomicPtr, Ordering};
use loom::sync::Arc;
use loom::thread;
use myriad_alloc::remote::{Block, RemoteFreeList};

fn new_block() -> usize {
    Box::into_raw(Box::new(Block::new())) as usize
}

fn block(addr: usize) -> NonNull<Block> {
    NonNull::new(addr as *mut Block).expect("non-null block")
}

fn free_blocks(addrs: &[usize]) {
    for &a in addrs {
        // SAFETY: made by `new_block`, out of every list, freed once.
        drop(unsafe { Box::from_raw(a as *mut Block) });
    }
}

/// Takes the whole list and appends the blocks, in list order, to `seen`.
fn drain(list: &RemoteFreeList, seen: &mut Vec<usize>) {
    let mut p = list.take_all();
    while let Some(b) = NonNull::new(p) {
        seen.push(b.as_ptr() as usize);
        // SAFETY: `take_all` synchronised with the push of every block of the chain.
        p = unsafe { Block::next(b) };
    }
}

#[test]
fn concurrent_pushes_and_takes_lose_nothing() {
    loom::model(|| {
        let list = Arc::new(RemoteFreeList::new());
        let blocks: Vec<usize> = (0..3).map(|_| new_block()).collect();
        let (a, b, c) = (blocks[0], blocks[1], blocks[2]);
        let l1 = list.clone();
        let t1 = thread::spawn(move || {
            // SAFETY: the blocks are owned by this thread until pushed.
            unsafe {
                l1.push(block(a));
                l1.push(block(b));
            }
        });
        let l2 = list.clone();
        let t2 = thread::spawn(move || {
            // SAFETY: as above.
            unsafe { l2.push(block(c)) };
        });
        // The owner takes concurrently with the pushes.
        let mut seen = Vec::new();
        drain(&list, &mut seen);
        t1.join().unwrap();
        t2.join().unwrap();
        drain(&list, &mut seen);
        assert!(list.is_empty());
        seen.sort_unstable();
        let mut expected = blocks.clone();
        expected.sort_unstable();
        assert_eq!(seen, expected, "a block was lost or seen twice");
        free_blocks(&blocks);
    });
}

#[test]
fn a_taken_block_pushed_again_is_not_confused() {
    // The owner takes blocks and frees them remotely again (as after reallocating them) while
    // another push is in flight: the in-flight CAS may see the same head address twice.
    loom::model(|| {
        let list = Arc::new(RemoteFreeList::new());
        let blocks: Vec<usize> = (0..2).map(|_| new_block()).collect();
        let (a, b) = (blocks[0], blocks[1]);
        // SAFETY: `a` is owned here until pushed.
        unsafe { list.push(block(a)) };
        let l1 = list.clone();
        let t1 = thread::spawn(move || {
            // SAFETY: `b` is owned by this thread until pushed.
            unsafe { l1.push(block(b)) };
        });
        let mut first = Vec::new();
        drain(&list, &mut first);
        for &x in &first {
            // SAFETY: taken above, so owned again.
            unsafe { list.push(block(x)) };
        }
        t1.join().unwrap();
        let mut seen = Vec::new();
        drain(&list, &mut seen);
        seen.sort_unstable();
        let mut expected = blocks.clone();
        expected.sort_unstable();
        assert_eq!(seen, expected);
        free_blocks(&blocks);
    });
}

/// The same list with the publishing orderings weakened to `Relaxed`: the owner may then read
/// a block's `next` before the pusher's write to it is visible. loom must catch that.
struct RelaxedList {
    head: AtomicPtr<Node>,
}

struct Node {
    next: loom::cell::UnsafeCell<*mut Node>,
}

impl RelaxedList {
    fn push(&self, node: *mut Node) {
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            // SAFETY: `node` is owned by the pusher until published.
            unsafe { (*node).next.with_mut(|p| *p = head) };
            match self
                .head
                .compare_exchange(head, node, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(h) => head = h,
            }
        }
    }

    fn take_all_and_walk(&self) -> usize {
        let mut p = self.head.swap(ptr::null_mut(), Ordering::Relaxed);
        let mut n = 0;
        while !p.is_null() {
            n += 1;
            // SAFETY: the node is live (freed only at the end of the model).
            p = unsafe { (*p).next.with(|q| *q) };
        }
        n
    }
}

#[test]
#[should_panic(expected = "Causality violation")]
fn the_model_catches_relaxed_publication() {
    loom::model(|| {
        let list = Arc::new(RelaxedList {
            head: AtomicPtr::new(ptr::null_mut()),
        });
        let node = Box::into_raw(Box::new(Node {
            next: loom::cell::UnsafeCell::new(ptr::null_mut()),
        })) as usize;
        let l1 = list.clone();
        let t = thread::spawn(move || l1.push(node as *mut Node));
        let taken = list.take_all_and_walk();
        t.join().unwrap();
        let _ = taken + list.take_all_and_walk();
        // SAFETY: made above, out of the list, freed once.
        drop(unsafe { Box::from_raw(node as *mut Node) });
    });
}
