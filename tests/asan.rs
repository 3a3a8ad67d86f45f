//! The AddressSanitizer run can see the bugs it is there for (built only with
//! `--features sanitizer` under `RUSTFLAGS=-Zsanitizer=address`; see README,
//! "Checking memory safety").
//!
//! Each test re-runs this binary as a child whose ranks make one deliberate
//! memory error, and checks that ASan reports it: if the run lost its
//! instrumentation, its fiber annotations or `detect_stack_use_after_return`
//! (the `ASAN_OPTIONS` of `.ci/run`), a clean ASan run would prove nothing
//! and these tests fail. The errors are the shapes of the soundness
//! items: a rank touching memory that another rank freed, or a frame of
//! another rank's stack that has returned (a request's buffer or completion
//! left behind by a wait that returned early).
#![cfg(feature = "sanitizer")]

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use myriad::traits::*;

const CHILD: &str = "MYRIAD_TEST_ASAN_CHILD";

/// Runs test `name` in a child that must die of an ASan report; returns its
/// standard error.
fn child_report(name: &str) -> Option<String> {
    if std::env::var(CHILD).as_deref() == Ok(name) {
        return None;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, name)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !out.status.success(),
        "the child must die of an ASan report\n{stderr}"
    );
    assert!(
        stderr.contains("ERROR: AddressSanitizer"),
        "no ASan report:\n{stderr}"
    );
    Some(stderr)
}

/// Where the first rank left its pointer for the second.
static LEFT_BEHIND: AtomicUsize = AtomicUsize::new(0);

/// Publishes the address of a local of this frame, then returns.
#[inline(never)]
fn publish_frame() {
    let local = [7u64; 16];
    LEFT_BEHIND.store(
        std::hint::black_box(&local).as_ptr() as usize,
        Ordering::SeqCst,
    );
}

/// The peer writes into it after the frame returned.
fn write_left_behind() {
    let ptr = LEFT_BEHIND.load(Ordering::SeqCst) as *mut u64;
    // SAFETY: none: this is the deliberate error ASan must report.
    unsafe { ptr.add(3).write_volatile(1) };
}

fn returned_frame_job(workers: usize) {
    myriad::Runtime::builder()
        .ranks(2)
        .workers(workers)
        .run(|universe| {
            let world = universe.world();
            if world.rank() == 0 {
                publish_frame();
            }
            world.barrier();
            if world.rank() == 1 {
                write_left_behind();
            }
            world.barrier();
        })
        .unwrap();
}

#[test]
fn a_write_into_a_returned_frame_of_a_rank_on_the_same_worker_is_reported() {
    // One worker: the two ranks share a thread and switch stacks on it, so
    // this also needs corosensei's fiber annotations.
    let name = "a_write_into_a_returned_frame_of_a_rank_on_the_same_worker_is_reported";
    let Some(report) = child_report(name) else {
        return returned_frame_job(1);
    };
    // ASan cannot name the frame (it lives in another fiber's fake stack),
    // but it names the access.
    assert!(report.contains("stack-use-after-return"), "{report}");
    assert!(report.contains("write_left_behind"), "{report}");
}

#[test]
fn a_write_into_a_returned_frame_of_a_rank_on_another_worker_is_reported() {
    let name = "a_write_into_a_returned_frame_of_a_rank_on_another_worker_is_reported";
    let Some(report) = child_report(name) else {
        return returned_frame_job(2);
    };
    // ASan cannot name the frame (it lives in another fiber's fake stack),
    // but it names the access.
    assert!(report.contains("stack-use-after-return"), "{report}");
    assert!(report.contains("write_left_behind"), "{report}");
}

#[test]
fn a_read_of_memory_another_rank_freed_is_reported() {
    let name = "a_read_of_memory_another_rank_freed_is_reported";
    let Some(report) = child_report(name) else {
        myriad::Runtime::builder()
            .ranks(2)
            .workers(1)
            .run(|universe| {
                let world = universe.world();
                if world.rank() == 0 {
                    let boxed = Box::new([3u64; 8]);
                    LEFT_BEHIND.store(boxed.as_ptr() as usize, Ordering::SeqCst);
                    drop(boxed);
                }
                world.barrier();
                if world.rank() == 1 {
                    let ptr = LEFT_BEHIND.load(Ordering::SeqCst) as *const u64;
                    // SAFETY: none: this is the deliberate error ASan must report.
                    std::hint::black_box(unsafe { ptr.read_volatile() });
                }
                world.barrier();
            })
            .unwrap();
        return;
    };
    assert!(report.contains("heap-use-after-free"), "{report}");
}
