//! `fork()` while other threads allocate: the child must be able to allocate (the allocator's
//! `pthread_atfork` handlers keep its locks consistent), and the parent keeps working.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

use myriad_alloc::MyriadAlloc;

#[global_allocator]
static ALLOC: MyriadAlloc = MyriadAlloc;

/// Work the child does; returns its exit code (0 when everything checked out).
fn child_work() -> i32 {
    let small: Vec<Box<u64>> = (0..10_000).map(Box::new).collect();
    let large = vec![7u8; 3 << 20];
    let huge = vec![1u8; 20 << 20];
    let ok = small.iter().enumerate().all(|(i, b)| **b == i as u64)
        && large[(3 << 20) - 1] == 7
        && huge[(20 << 20) - 1] == 1;
    i32::from(!ok)
}

#[test]
fn children_forked_while_threads_allocate_can_allocate() {
    let stop = Arc::new(AtomicBool::new(false));
    // Threads that keep the node pools' locks busy (page runs) and the small-object paths.
    let workers: Vec<_> = (0..3)
        .map(|t| {
            let stop = stop.clone();
            thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let v = vec![t as u8; 64 << 10 << (n % 5)];
                    let b: Vec<Box<[u8; 40]>> = (0..64).map(|_| Box::new([1; 40])).collect();
                    n += u64::from(v[0]) + b.len() as u64;
                }
                n
            })
        })
        .collect();
    for _ in 0..30 {
        // SAFETY: fork has no preconditions; the child only allocates, checks and `_exit`s.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            // Child: a deadlock would hang, so let an alarm kill it instead.
            // SAFETY: alarm and _exit have no preconditions.
            unsafe {
                libc::alarm(10);
                libc::_exit(child_work());
            }
        }
        let mut status = 0;
        // SAFETY: waits for the child just forked.
        let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
        assert_eq!(rc, pid);
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "child failed or hung (status {status:#x})"
        );
    }
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().unwrap();
    }
}
