//! Cross-memory attach (CMA): `process_vm_readv` copies a peer's memory
//! straight into this process's, once, with no shared buffer in between.
//!
//! The kernel allows it where this process may ptrace the peer (same user;
//! with Yama's `ptrace_scope` 1, only if the peer named it a ptracer, which
//! `allow_peers` does for every process, as Open MPI's shared-memory
//! transport does). Whether it works is probed once per pair at start-up
//! ([`probe`]): reading a word the peer published.

use std::io;

/// Lets any process of this user ptrace this one where Yama restricts it
/// to descendants (`PR_SET_PTRACER_ANY`): peers of the job are siblings.
/// Without Yama the call fails and nothing changes.
pub(crate) fn allow_peers() {
    // SAFETY: a plain prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_PTRACER, libc::PR_SET_PTRACER_ANY, 0, 0, 0) };
}

/// Reads `len` bytes at `remote` in process `pid` into `dst`.
///
/// # Safety
///
/// `dst` is valid for writes of `len` bytes.
pub(crate) unsafe fn read(pid: u32, remote: u64, dst: *mut u8, len: usize) -> io::Result<()> {
    let mut done = 0usize;
    while done < len {
        let local = libc::iovec {
            // SAFETY: inside `dst` (done < len).
            iov_base: unsafe { dst.add(done) }.cast(),
            iov_len: len - done,
        };
        let far = libc::iovec {
            iov_base: (remote as usize).wrapping_add(done) as *mut libc::c_void,
            iov_len: len - done,
        };
        // SAFETY: one local iovec of writable memory (the caller's
        // contract), one remote iovec the kernel checks against the peer's
        // mappings.
        let n = unsafe { libc::process_vm_readv(pid as libc::pid_t, &local, 1, &far, 1, 0) };
        match n {
            n if n > 0 => done += n as usize,
            0 => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the peer's memory ended",
                ))
            }
            _ => {
                let err = io::Error::last_os_error();
                if err.kind() != io::ErrorKind::Interrupted {
                    return Err(err);
                }
            }
        }
    }
    Ok(())
}

/// Whether this process can read process `pid`'s memory: reads the word at
/// `remote` and compares it with `expected`.
pub(crate) fn probe(pid: u32, remote: u64, expected: u64) -> Result<(), String> {
    let mut word = 0u64;
    // SAFETY: `word` is 8 writable bytes.
    match unsafe { read(pid, remote, (&mut word as *mut u64).cast(), 8) } {
        Ok(()) if word == expected => Ok(()),
        Ok(()) => Err(format!("read {word:#x}, not the published word")),
        Err(err) if err.raw_os_error() == Some(libc::EPERM) => Err(format!(
            "refused ({err}: see /proc/sys/kernel/yama/ptrace_scope, or a seccomp filter)"
        )),
        Err(err) => Err(err.to_string()),
    }
}
