//! Helpers shared by the allocator's test binaries.
#![allow(dead_code)]

use std::process::Command;

/// Runs the test `name` of this binary again in a child process with `vars` set (the
/// allocator reads its environment once, at its first allocation, before `main`), and asserts
/// that it passed. Returns `true` in the parent (the body should return), `false` in the child
/// (the body should run).
pub(crate) fn in_child(name: &str, vars: &[(&str, &str)]) -> bool {
    if std::env::var_os("MYRIAD_ALLOC_TEST_CHILD").is_some() {
        return false;
    }
    let exe = std::env::current_exe().expect("test binary path");
    let out = Command::new(exe)
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env("MYRIAD_ALLOC_TEST_CHILD", "1")
        .envs(vars.iter().copied())
        .output()
        .expect("re-run the test binary");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "child {name} failed:\n{text}");
    assert!(text.contains("1 passed"), "child ran no test:\n{text}");
    println!("{text}");
    true
}

/// Minor page faults of this process so far.
pub(crate) fn minor_faults() -> u64 {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct.
    unsafe {
        libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr());
        ru.assume_init().ru_minflt as u64
    }
}

/// Minor page faults of the calling thread so far.
pub(crate) fn thread_minor_faults() -> u64 {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct.
    unsafe {
        libc::getrusage(libc::RUSAGE_THREAD, ru.as_mut_ptr());
        ru.assume_init().ru_minflt as u64
    }
}

/// Writes one byte per page of `[p, p + len)` and a pattern at both ends.
pub(crate) fn touch(p: *mut u8, len: usize, seed: u8) {
    // SAFETY: the caller passes a live allocation of `len` bytes.
    unsafe {
        let mut off = 0;
        while off < len {
            p.add(off).write(seed);
            off += 4096;
        }
        p.add(len - 1).write(seed.wrapping_add(1));
    }
}

/// Checks the pattern written by [`touch`].
pub(crate) fn check(p: *const u8, len: usize, seed: u8) {
    // SAFETY: the caller passes a live allocation of `len` bytes.
    unsafe {
        let mut off = 0;
        while off < len - 1 {
            assert_eq!(p.add(off).read(), seed, "offset {off} of {len}");
            off += 4096;
        }
        assert_eq!(p.add(len - 1).read(), seed.wrapping_add(1));
    }
}
