//! A thread of a forked child that lands on the thread-local storage of a parent thread.
//!
//! `fork()` copies only the calling thread; glibc puts the stacks of the parent's other threads
//! (with their static TLS, where each thread cache lives) in its stack cache, so the child's
//! next thread of the same stack size gets one of them, at the same address, with its TLS
//! re-initialised. The parent thread's slabs and its entry in the cache registry are still in
//! the child's memory. Nothing the allocator derives from the cache's address may then take
//! the new thread for the old one:
//!
//! - slab ownership: the new thread does not own the dead thread's slabs, so its frees of
//!   blocks in them are remote frees (those slabs are never allocated from again in the
//!   child); taken as local frees, they would move slabs the new thread never owned into its
//!   lists and hand their blocks out again;
//! - the registry of caches (statistics): the dead thread's entry, overwritten by the new
//!   thread's fresh cache, must not link the list into a cycle.
//!
//! Each test checks that the reuse happened (same TLS address), so it cannot pass by missing
//! the scenario.

use std::alloc::{GlobalAlloc, Layout};
use std::collections::HashSet;
use std::io::Read;
use std::os::fd::FromRawFd;
use std::sync::mpsc;
use std::thread;

use myriad_alloc::MyriadAlloc;

#[global_allocator]
static ALLOC: MyriadAlloc = MyriadAlloc;

thread_local! {
    static MARK: u8 = const { 0 };
}

/// Where the calling thread's static TLS is (the thread cache is at a fixed offset from it).
fn tls_address() -> usize {
    MARK.with(|m| m as *const u8 as usize)
}

/// Runs `f` in a forked child and returns its verdict; a panic, a crash or a hang (killed by an
/// alarm after 5 s) is an error naming what happened.
fn in_forked_child(f: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
    let mut fds = [0; 2];
    // SAFETY: pipe writes two descriptors into the array.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0, "pipe");
    // SAFETY: fork has no preconditions; the child runs `f`, reports and `_exit`s.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // SAFETY: alarm has no preconditions; a hung child dies of SIGALRM.
        unsafe { libc::alarm(5) };
        let verdict =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|p| {
                Err(p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "panic".into()))
            });
        let msg = verdict.as_ref().err().cloned().unwrap_or_default();
        // SAFETY: writes our buffer to our pipe, then ends the child without running the
        // parent's exit handlers.
        unsafe {
            libc::write(fds[1], msg.as_ptr().cast(), msg.len());
            libc::_exit(i32::from(verdict.is_err()));
        }
    }
    // SAFETY: closes our copy of the write end; `fds[0]` is ours and read once.
    let mut pipe = unsafe {
        libc::close(fds[1]);
        std::fs::File::from_raw_fd(fds[0])
    };
    let mut msg = String::new();
    pipe.read_to_string(&mut msg)
        .expect("read the child's report");
    let mut status = 0;
    // SAFETY: waits for the child just forked.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        let what = if sig == libc::SIGALRM {
            "hung (killed by the 5 s alarm)".to_string()
        } else {
            format!("died of signal {sig}")
        };
        return Err(format!("the child {what}; {msg}"));
    }
    if libc::WEXITSTATUS(status) != 0 {
        return Err(msg);
    }
    Ok(())
}

/// In a child: starts threads of `stack` bytes of stack until one gets the TLS address
/// `target` (keeping the others alive meanwhile, so each takes another cached stack), runs
/// `work` on it and returns its verdict.
fn on_thread_at(
    target: usize,
    stack: usize,
    work: impl FnOnce() -> Result<(), String> + Send + 'static,
) -> Result<(), String> {
    let mut work = Some(work);
    let mut parked = Vec::new();
    let mut seen = Vec::new();
    let mut verdict = None;
    for _ in 0..32 {
        let (addr_tx, addr_rx) = mpsc::channel();
        let (go_tx, go_rx) =
            mpsc::channel::<Option<Box<dyn FnOnce() -> Result<(), String> + Send>>>();
        let handle = thread::Builder::new()
            .stack_size(stack)
            .spawn(move || {
                addr_tx.send(tls_address()).unwrap();
                match go_rx.recv().unwrap() {
                    Some(work) => work(),
                    None => Ok(()),
                }
            })
            .expect("spawn");
        let addr = addr_rx.recv().unwrap();
        if addr == target {
            go_tx.send(Some(Box::new(work.take().unwrap()))).unwrap();
            verdict = Some(
                handle
                    .join()
                    .unwrap_or_else(|_| Err("the thread panicked".into())),
            );
            break;
        }
        seen.push(addr);
        parked.push((go_tx, handle));
    }
    for (go, handle) in parked {
        go.send(None).unwrap();
        handle.join().unwrap().unwrap();
    }
    verdict.unwrap_or_else(|| {
        Err(format!(
            "no thread of the child got the parent thread's TLS address {target:#x} (got \
             {seen:x?}): the scenario was not set up"
        ))
    })
}

/// A parent thread with `stack` bytes of stack runs `setup`, reports its TLS address and what
/// `setup` returned, and stays alive (it is still running when the parent forks) until the
/// returned sender is dropped.
fn parked_thread<T: Send + 'static>(
    stack: usize,
    setup: impl FnOnce() -> T + Send + 'static,
) -> (usize, T, mpsc::Sender<()>, thread::JoinHandle<()>) {
    let (tx, rx) = mpsc::channel();
    let (stop_tx, stop_rx) = mpsc::channel::<()>();
    let handle = thread::Builder::new()
        .stack_size(stack)
        .spawn(move || {
            tx.send((tls_address(), setup())).unwrap();
            let _ = stop_rx.recv();
        })
        .expect("spawn");
    let (addr, value) = rx.recv().unwrap();
    (addr, value, stop_tx, handle)
}

/// Blocks of a class no other code of this test allocates (so the slabs involved hold only
/// these blocks): 3 KiB, 21 to a 64 KiB slab.
const LAYOUT: Layout = match Layout::from_size_align(3072, 16) {
    Ok(l) => l,
    Err(_) => panic!(),
};

#[test]
fn a_child_thread_at_a_parent_threads_address_frees_its_blocks_remotely() {
    // The parent thread fills a few slabs (some full, one current) and stays alive.
    const STACK: usize = 256 << 10;
    let (t_addr, t_blocks, stop, t) = parked_thread(STACK, || {
        (0..100)
            // SAFETY: a valid non-zero layout; the blocks are freed with it (in the child).
            .map(|_| unsafe { ALLOC.alloc(LAYOUT) } as usize)
            .collect::<Vec<_>>()
    });
    assert!(t_blocks.iter().all(|&p| p != 0));

    let verdict = in_forked_child(move || {
        on_thread_at(t_addr, STACK, move || {
            // This thread is not the parent's thread: it owns none of these slabs, so every
            // free below is a remote free, and no block it allocates afterwards can be one of
            // them (nobody collects those slabs' remote frees in the child).
            let theirs: HashSet<usize> = t_blocks.iter().copied().collect();
            for &p in &t_blocks {
                // SAFETY: live blocks of LAYOUT (inherited from the parent), freed once.
                unsafe { ALLOC.dealloc(p as *mut u8, LAYOUT) };
            }
            let mine: Vec<usize> = (0..200)
                // SAFETY: as above.
                .map(|_| unsafe { ALLOC.alloc(LAYOUT) } as usize)
                .collect();
            let again = mine.iter().filter(|p| theirs.contains(p)).count();
            for &p in &mine {
                // SAFETY: blocks just allocated with LAYOUT, freed once.
                unsafe { ALLOC.dealloc(p as *mut u8, LAYOUT) };
            }
            if again > 0 {
                return Err(format!(
                    "{again} of the 200 blocks the child's thread allocated were blocks of the \
                     parent thread's slabs that it had freed: at the parent thread's TLS \
                     address {t_addr:#x} it was taken for their owner (frees taken as local, \
                     slabs moved into its lists)"
                ));
            }
            Ok(())
        })
    });
    drop(stop);
    t.join().unwrap();
    verdict.unwrap();
}

#[test]
fn statistics_work_in_a_child_whose_thread_reuses_a_parent_threads_cache() {
    const STACK: usize = 320 << 10;
    // A parent thread with a registered cache (it allocated), alive at the fork.
    let (t_addr, b, stop, t) = parked_thread(STACK, || Box::new(7u64));
    let verdict = in_forked_child(move || {
        on_thread_at(t_addr, STACK, move || {
            let small = Layout::from_size_align(64, 8).unwrap();
            let mut blocks = [std::ptr::null_mut::<u8>(); 100];
            let s0 = myriad_alloc::stats().small_in_use;
            for p in blocks.iter_mut() {
                // SAFETY: a valid non-zero layout; freed below with it.
                *p = unsafe { ALLOC.alloc(small) };
            }
            let s1 = myriad_alloc::stats().small_in_use;
            for &p in &blocks {
                // SAFETY: allocated above with `small`, freed once.
                unsafe { ALLOC.dealloc(p, small) };
            }
            let s2 = myriad_alloc::stats().small_in_use;
            if s1.wrapping_sub(s0) != 6400 || s2 != s0 {
                return Err(format!(
                    "small_in_use {s0} -> {s1} after 100 x 64 B -> {s2} after freeing them"
                ));
            }
            Ok(())
        })
    });
    drop(stop);
    t.join().unwrap();
    assert_eq!(*b, 7);
    verdict.unwrap();
}
