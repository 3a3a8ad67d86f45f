//! What a transport blocks on: an epoll set, and a doorbell (an eventfd)
//! that [`Transport::wake`](super::Transport::wake) rings, in the set under
//! a token of its own.
//!
//! TCP and libfabric wait on their own set; the routing transport waits on
//! one that holds TCP's set and the shared-memory doorbell peers ring. One
//! type each, so their system calls and `SAFETY` arguments live once.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// `-1` as an `io::Error` (the `errno`), else the value.
fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// An eventfd: its owner sleeps on it, others write it to wake the owner.
#[derive(Debug)]
pub(crate) struct Doorbell(OwnedFd);

impl Doorbell {
    /// A new non-blocking eventfd.
    pub(crate) fn new() -> io::Result<Doorbell> {
        // SAFETY: a plain system call; the descriptor is owned right away.
        let fd = cvt(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) })?;
        // SAFETY: `fd` is a fresh descriptor nobody else owns.
        Ok(Doorbell(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// The doorbell behind `fd`, an eventfd (another process's, fetched
    /// with `pidfd_getfd`).
    pub(crate) fn from_fd(fd: OwnedFd) -> Doorbell {
        Doorbell(fd)
    }

    /// The descriptor (for epoll, and the number peers fetch).
    pub(crate) fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }

    /// Wakes the owner.
    pub(crate) fn ring(&self) {
        let one = 1u64;
        // SAFETY: writes 8 bytes from `one` to the open eventfd.
        unsafe { libc::write(self.0.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    /// Resets it (the owner, after waking).
    pub(crate) fn clear(&self) {
        let mut count = 0u64;
        // SAFETY: reads 8 bytes into `count` from the open, non-blocking
        // eventfd.
        unsafe { libc::read(self.0.as_raw_fd(), (&mut count as *mut u64).cast(), 8) };
    }
}

/// An epoll set; each descriptor in it comes back with its `u64` token.
#[derive(Debug)]
pub(crate) struct Epoll(OwnedFd);

impl Epoll {
    /// A new, empty set.
    pub(crate) fn new() -> io::Result<Epoll> {
        // SAFETY: a plain system call; the descriptor is owned right away.
        let fd = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // SAFETY: a fresh descriptor nobody else owns.
        Ok(Epoll(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// The set's descriptor (to nest it in another set).
    pub(crate) fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }

    /// Watches `fd` for `events`, reported with `token`.
    pub(crate) fn add(&self, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        self.control(libc::EPOLL_CTL_ADD, fd, events, token)
    }

    /// Watches `fd`, already in the set, for `events` instead.
    pub(crate) fn modify(&self, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        self.control(libc::EPOLL_CTL_MOD, fd, events, token)
    }

    /// Stops watching `fd`.
    pub(crate) fn delete(&self, fd: RawFd) -> io::Result<()> {
        // The event is ignored for a deletion (non-null for old kernels).
        self.control(libc::EPOLL_CTL_DEL, fd, 0, 0)
    }

    fn control(&self, op: libc::c_int, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        let mut event = libc::epoll_event { events, u64: token };
        // SAFETY: the set is open, `fd` is the caller's open descriptor and
        // `event` is valid for the call.
        cvt(unsafe { libc::epoll_ctl(self.0.as_raw_fd(), op, fd, &mut event) }).map(drop)
    }

    /// The ready entries, at most `events.len()`, waiting up to `ms`
    /// milliseconds (`-1`: no limit, `0`: not at all); none on an error
    /// (an interrupted wait is a spurious wake-up to every caller).
    pub(crate) fn ready<'e>(
        &self,
        events: &'e mut [libc::epoll_event],
        ms: i32,
    ) -> &'e [libc::epoll_event] {
        let room = events.len().min(i32::MAX as usize) as i32;
        // SAFETY: `events` has room for `room` entries; the set is open.
        let n = unsafe { libc::epoll_wait(self.0.as_raw_fd(), events.as_mut_ptr(), room, ms) };
        &events[..n.max(0) as usize]
    }

    /// As [`ready`](Self::ready), waiting up to `timeout` (`None`: no
    /// limit) with a resolution finer than a millisecond where the kernel
    /// has `epoll_pwait2`.
    pub(crate) fn ready_within<'e>(
        &self,
        events: &'e mut [libc::epoll_event],
        timeout: Option<Duration>,
    ) -> &'e [libc::epoll_event] {
        let room = events.len().min(i32::MAX as usize) as i32;
        let spec = timeout.map(|t| libc::timespec {
            tv_sec: t.as_secs().min(i32::MAX as u64) as libc::time_t,
            tv_nsec: t.subsec_nanos() as libc::c_long,
        });
        let spec_ptr = spec
            .as_ref()
            .map_or(std::ptr::null(), |s| s as *const libc::timespec);
        // SAFETY: `events` has room for `room` entries, the set is open,
        // `spec_ptr` is null or points at a timespec alive for the call,
        // and a null signal mask leaves the mask alone.
        let n = unsafe {
            libc::syscall(
                libc::SYS_epoll_pwait2,
                self.0.as_raw_fd(),
                events.as_mut_ptr(),
                room,
                spec_ptr,
                std::ptr::null::<libc::sigset_t>(),
                0,
            )
        } as i32;
        if n < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS) {
            let ms = timeout.map_or(-1, |t| t.as_millis().clamp(1, i32::MAX as u128) as i32);
            return self.ready(events, ms);
        }
        &events[..n.max(0) as usize]
    }

    /// Blocks up to `ms` milliseconds until something in the set is ready;
    /// resets `bell` (in the set under `token`) if it was rung.
    pub(crate) fn wait(&self, bell: &Doorbell, token: u64, ms: i32) {
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 8];
        if self.ready(&mut events, ms).iter().any(|e| e.u64 == token) {
            bell.clear();
        }
    }
}
