//! A rank that overflows its stack hits its guard page: the process dies with
//! a message naming the rank, and no other rank's stack is touched. The
//! crash happens in a child process (this test binary, re-run).

use std::process::Command;

use myriad::traits::*;

const CHILD: &str = "MYRIAD_TEST_STACK_OVERFLOW_CHILD";

#[inline(never)]
fn recurse(depth: u64, sink: &mut [u8; 1024]) -> u64 {
    let mut local = [depth as u8; 1024];
    std::hint::black_box(&mut local);
    sink[0] = sink[0].wrapping_add(local[3]);
    if depth == u64::MAX {
        return 0;
    }
    recurse(depth + 1, &mut local) + 1
}

fn child() {
    let result = myriad::Runtime::builder()
        .ranks(4)
        .workers(1)
        .stack_size(64 * 1024)
        .run(|universe| {
            let world = universe.world();
            world.barrier();
            if world.rank() == 1 {
                let mut sink = [0u8; 1024];
                std::hint::black_box(recurse(0, &mut sink));
            }
            world.barrier();
        });
    println!("child finished unexpectedly: {result:?}");
}

#[test]
fn stack_overflow_is_caught_by_the_guard_page() {
    if std::env::var_os(CHILD).is_some() {
        child();
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let output = Command::new(exe)
        .arg("stack_overflow_is_caught_by_the_guard_page")
        .arg("--exact")
        .arg("--nocapture")
        .env(CHILD, "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "the child must die: {stderr}");
    assert!(
        stderr.contains("myriad: rank 1 overflowed its stack of 64 KiB"),
        "stderr: {stderr}"
    );
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            output.status.signal(),
            Some(libc_sigsegv()),
            "{:?}",
            output.status
        );
    }
}

fn libc_sigsegv() -> i32 {
    11
}
