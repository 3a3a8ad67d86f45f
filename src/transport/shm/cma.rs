//! Cross-memory attach (CMA): `process_vm_readv` copies a peer's memory
//! straight into this process's, once, with no shared buffer in between.
//!
//! The kernel allows it where this process may ptrace the peer (same user;
//! with Yama's `ptrace_scope` 1, only if the peer named it a ptracer, which
//! `allow_peers` does for every process, as Open MPI's shared-memory
//! transport does). Whether it works is probed once per pair at start-up
//! ([`probe`]): reading a word the peer published.
//!
//! ## Design note: two threads for one copy
//!
//! A large read ([`Reader`]) is cut into pieces that the poller and a
//! helper thread claim from one atomic counter: still one copy per byte,
//! but on two cores, as a two-copy pipeline through a ring gets (sender and
//! receiver copy at once). Claiming pieces rather than halves keeps a
//! descheduled helper harmless (the poller takes what it has not claimed),
//! and the read stays synchronous for its caller, so the transport's
//! ordering and its `Place` contract are those of one `process_vm_readv`.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};

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
    // SAFETY: `process_vm_readv` writes the local range, which the
    // caller's contract makes writable.
    unsafe { transfer(libc::process_vm_readv, pid, remote, dst, len) }
}

/// Writes the `len` bytes at `src` into process `pid`'s memory at
/// `remote`.
///
/// # Safety
///
/// `src` is valid for reads of `len` bytes.
pub(crate) unsafe fn write(pid: u32, remote: u64, src: *const u8, len: usize) -> io::Result<()> {
    // SAFETY: `process_vm_writev` only reads the local range, which the
    // caller's contract makes readable.
    unsafe { transfer(libc::process_vm_writev, pid, remote, src.cast_mut(), len) }
}

/// `process_vm_readv` or `process_vm_writev`, by the signature they share.
type Syscall = unsafe extern "C" fn(
    libc::pid_t,
    *const libc::iovec,
    libc::c_ulong,
    *const libc::iovec,
    libc::c_ulong,
    libc::c_ulong,
) -> libc::ssize_t;

/// Moves `len` bytes between `local` and `remote` in process `pid` with
/// `call`, resuming after partial transfers and interruptions.
///
/// # Safety
///
/// `local` is valid for `len` bytes of what `call` does to it (writes
/// for a read of the peer, reads for a write into it).
unsafe fn transfer(
    call: Syscall,
    pid: u32,
    remote: u64,
    local: *mut u8,
    len: usize,
) -> io::Result<()> {
    let mut done = 0usize;
    while done < len {
        let near = libc::iovec {
            // SAFETY: inside `local` (done < len).
            iov_base: unsafe { local.add(done) }.cast(),
            iov_len: len - done,
        };
        let far = libc::iovec {
            iov_base: (remote as usize).wrapping_add(done) as *mut libc::c_void,
            iov_len: len - done,
        };
        // SAFETY: one local iovec valid for the access (the caller's
        // contract), one remote iovec the kernel checks against the peer's
        // mappings.
        let n = unsafe { call(pid as libc::pid_t, &near, 1, &far, 1, 0) };
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

/// Reads of at least this many bytes are shared with the helper thread.
///
/// Below it the helper's wake-up (a futex, tens of microseconds on a VM,
/// far more on a loaded host) and the hand-back cost about what the second
/// core saves: one `process_vm_readv` of 1 MiB took 83–99 µs here (load
/// 6 on 2 vCPUs), the same read split with a second thread 118–1,492 µs.
/// Reads below it also
/// keep their sender polling for the `done` (`ShmLinks::busy`), which a
/// shared read cannot (the helper wants the sender's core).
pub(crate) const SHARED_READ: usize = 4 << 20;
/// Bytes one `process_vm_readv` of a shared read copies: small enough that
/// whoever finishes first waits for at most one chunk of the other.
const PIECE: usize = 256 * 1024;

/// Reads a peer's memory with two threads where the process may run on
/// more than one processing unit: the poller that asks and a helper thread
/// (started at the first large read), which take pieces of the range in
/// turn from a shared counter.
///
/// One thread's `process_vm_readv` copies at about 60 % of `memcpy`'s
/// speed (the kernel copies page by page after pinning each page), so a
/// single-copy read of 16 MiB was only ~1.2× faster than a two-copy
/// pipeline through a shared ring, whose sender and receiver copy on
/// different cores at once. Sharing the read between two cores gives the
/// single copy both cores too. The helper is never waited for beyond the
/// piece it is copying: if it does not run (its core busy), the poller
/// takes every piece itself. It runs on the processing units the process
/// had when the transport was set up (before workers bound themselves),
/// so it does not share the poller's.
#[derive(Debug)]
pub(crate) struct Reader {
    /// The processing units the helper may run on (`None`: one only, no
    /// helper).
    mask: Option<libc::cpu_set_t>,
    shared: Arc<Shared>,
    /// One shared read at a time (another poller reads alone meanwhile).
    turn: Mutex<()>,
    helper: OnceLock<Option<std::thread::JoinHandle<()>>>,
    /// Reads of at least [`SHARED_READ`] bytes under way.
    long: AtomicUsize,
}

/// Counts a long read while it lasts.
struct Long<'a>(&'a AtomicUsize);

impl Drop for Long<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
    /// The helper waits here for a job, the poller for the helper's end.
    changed: Condvar,
    /// The next offset to claim in the current job.
    next: AtomicUsize,
}

#[derive(Debug, Default)]
struct State {
    job: Option<Job>,
    /// Jobs posted so far (the helper takes each one at most once).
    posted: u64,
    /// The helper is copying pieces of the current job.
    helping: bool,
    /// The helper's copy failed.
    failed: Option<io::Error>,
    /// The reader is dropped: the helper ends.
    closed: bool,
}

#[derive(Debug, Clone, Copy)]
struct Job {
    pid: u32,
    remote: u64,
    dst: usize,
    len: usize,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Reader {
    /// A reader whose helper runs where the calling thread may run.
    pub(crate) fn new() -> Reader {
        // SAFETY: a zeroed `cpu_set_t` is an empty set.
        let mut mask: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: `mask` is a writable `cpu_set_t` of the size passed.
        let got = unsafe {
            libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut mask)
        };
        // SAFETY: `CPU_COUNT` reads the set.
        let many = got == 0 && unsafe { libc::CPU_COUNT(&mask) } > 1;
        Reader {
            mask: many.then_some(mask),
            shared: Arc::default(),
            turn: Mutex::new(()),
            helper: OnceLock::new(),
            long: AtomicUsize::new(0),
        }
    }

    /// A reader without a helper thread (tests compare with it).
    #[cfg(test)]
    pub(crate) fn alone() -> Reader {
        Reader {
            mask: None,
            shared: Arc::default(),
            turn: Mutex::new(()),
            helper: OnceLock::new(),
            long: AtomicUsize::new(0),
        }
    }

    /// Whether a helper thread takes part in large reads.
    #[cfg(test)]
    pub(crate) fn helped(&self) -> bool {
        self.mask.is_some()
    }

    /// Whether a read of at least [`SHARED_READ`] bytes is under way: its
    /// thread holds the peer's input for a millisecond or more, and a
    /// worker that polled on meanwhile would only take a core the copy
    /// wants (see `ShmLinks::busy`).
    pub(crate) fn reading_long(&self) -> bool {
        self.long.load(Ordering::Relaxed) > 0
    }

    /// Counts a long copy made without the helper (a split copy,
    /// `split.rs`) for [`reading_long`](Self::reading_long) while the
    /// result lives.
    pub(crate) fn long_copy(&self) -> impl Drop + '_ {
        self.long.fetch_add(1, Ordering::Relaxed);
        Long(&self.long)
    }

    /// Starts the helper once; `false` if there is none.
    fn start(&self) -> bool {
        let Some(mask) = self.mask else { return false };
        self.helper
            .get_or_init(|| {
                let shared = Arc::clone(&self.shared);
                std::thread::Builder::new()
                    .name("myriad-cma".into())
                    .spawn(move || {
                        // SAFETY: `mask` is a valid set of the size passed;
                        // failing leaves the inherited mask (still correct).
                        unsafe {
                            libc::sched_setaffinity(
                                0,
                                std::mem::size_of::<libc::cpu_set_t>(),
                                &mask,
                            )
                        };
                        help(&shared);
                    })
                    .ok()
            })
            .is_some()
    }

    /// Reads `len` bytes at `remote` in process `pid` into `dst`, shared
    /// with the helper thread when the read is large.
    ///
    /// # Safety
    ///
    /// `dst` is valid for writes of `len` bytes, and not read or written by
    /// anyone else until this returns.
    pub(crate) unsafe fn read(
        &self,
        pid: u32,
        remote: u64,
        dst: *mut u8,
        len: usize,
    ) -> io::Result<()> {
        if len < SHARED_READ {
            // SAFETY: the caller's contract.
            return unsafe { read(pid, remote, dst, len) };
        }
        self.long.fetch_add(1, Ordering::Relaxed);
        let _long = Long(&self.long);
        let turn = if self.start() {
            self.turn.try_lock().ok()
        } else {
            None
        };
        let Some(_turn) = turn else {
            // SAFETY: the caller's contract.
            return unsafe { read(pid, remote, dst, len) };
        };
        let shared = &*self.shared;
        let job = Job {
            pid,
            remote,
            dst: dst as usize,
            len,
        };
        {
            let mut state = lock(&shared.state);
            shared.next.store(0, Ordering::Relaxed);
            state.job = Some(job);
            state.posted += 1;
            state.failed = None;
        }
        shared.changed.notify_all();
        let mine = pieces(shared, job);
        let mut state = lock(&shared.state);
        // The helper takes no piece of this job from now on.
        state.job = None;
        while state.helping {
            state = shared
                .changed
                .wait(state)
                .unwrap_or_else(|e| e.into_inner());
        }
        let theirs = state.failed.take();
        drop(state);
        mine.and(theirs.map_or(Ok(()), Err))
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        lock(&self.shared.state).closed = true;
        self.shared.changed.notify_all();
        if let Some(Some(helper)) = self.helper.take() {
            let _ = helper.join();
        }
    }
}

/// Copies pieces of `job` until none is left; the first error stops every
/// copier (the counter jumps past the end).
fn pieces(shared: &Shared, job: Job) -> io::Result<()> {
    loop {
        let at = shared.next.fetch_add(PIECE, Ordering::Relaxed);
        if at >= job.len {
            return Ok(());
        }
        let n = PIECE.min(job.len - at);
        // SAFETY: `[at, at + n)` lies inside the job's destination, which
        // its poster keeps valid and otherwise untouched until every copier
        // left the job (`Reader::read` waits for the helper); each piece is
        // claimed by one copier only (the counter).
        let result = unsafe {
            read(
                job.pid,
                job.remote + at as u64,
                (job.dst + at) as *mut u8,
                n,
            )
        };
        if result.is_err() {
            shared.next.store(usize::MAX / 2, Ordering::Relaxed);
            return result;
        }
    }
}

/// The helper thread: takes part in each job posted until the reader goes.
fn help(shared: &Shared) {
    let mut seen = 0;
    let mut state = lock(&shared.state);
    loop {
        if state.closed {
            return;
        }
        match state.job {
            Some(job) if state.posted != seen => {
                seen = state.posted;
                state.helping = true;
                drop(state);
                let result = pieces(shared, job);
                state = lock(&shared.state);
                state.helping = false;
                if let Err(err) = result {
                    state.failed = Some(err);
                }
                shared.changed.notify_all();
            }
            _ => {
                state = shared
                    .changed
                    .wait(state)
                    .unwrap_or_else(|e| e.into_inner())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pattern no two pieces share, so a piece copied to the wrong
    /// place, or not at all, shows.
    fn pattern(len: usize) -> Vec<u8> {
        (0..len)
            .map(|i| (i ^ (i >> 11) ^ (i >> 19)) as u8)
            .collect()
    }

    fn read_own(reader: &Reader, src: &[u8]) -> io::Result<Vec<u8>> {
        let mut dst = vec![0u8; src.len()];
        // SAFETY: `dst` has `src.len()` writable bytes, ours alone.
        unsafe {
            reader.read(
                std::process::id(),
                src.as_ptr() as u64,
                dst.as_mut_ptr(),
                dst.len(),
            )
        }?;
        Ok(dst)
    }

    #[test]
    fn a_shared_read_copies_every_piece_once_in_place() {
        let reader = Reader::new();
        // Not a multiple of a piece; below, at and above the shared size.
        for len in [5, SHARED_READ - 1, SHARED_READ, 3 * SHARED_READ + 4097] {
            let src = pattern(len);
            for _ in 0..3 {
                assert!(read_own(&reader, &src).unwrap() == src, "{len} bytes");
            }
        }
        let alone = Reader::alone();
        assert!(!alone.helped());
        let src = pattern(2 * SHARED_READ + 1);
        assert!(read_own(&alone, &src).unwrap() == src);
    }

    #[test]
    fn a_shared_read_of_memory_that_is_not_there_fails_and_the_next_succeeds() {
        let reader = Reader::new();
        // A mapping with its second half unmapped: the pieces there fail,
        // whichever thread copies them.
        let len = 4 * SHARED_READ;
        // SAFETY: a fresh anonymous mapping; its second half is unmapped
        // before use and the rest unmapped at the end.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(map, libc::MAP_FAILED);
        // SAFETY: the second half of the mapping just made.
        let unmapped = unsafe { libc::munmap(map.cast::<u8>().add(len / 2).cast(), len / 2) };
        assert_eq!(unmapped, 0);
        let mut dst = vec![0u8; len];
        // SAFETY: `dst` has `len` writable bytes, ours alone.
        let err = unsafe { reader.read(std::process::id(), map as u64, dst.as_mut_ptr(), len) };
        assert!(err.is_err(), "half of the range is not mapped");
        // SAFETY: the first half, still mapped.
        let unmapped = unsafe { libc::munmap(map, len / 2) };
        assert_eq!(unmapped, 0);
        let src = pattern(len);
        assert!(read_own(&reader, &src).unwrap() == src);
    }
}
