//! A process's shared segment: `memfd_create` memory mapped shared, the
//! eventfd its owner sleeps on, and how a peer reaches both
//! (`pidfd_open` + `pidfd_getfd`).
//!
//! ## Layout
//!
//! ```text
//! offset              size        what
//!      0                 8        magic (MAGIC), written by the owner
//!      8                 8        slots: the job's processes on this host
//!     16                 8        ring bytes (a power of two)
//!     64 + s * stride  256        ring of the sender of local slot s: Control
//!    320 + s * stride   64        its copies shared with this process (Split)
//!    384 + s * stride  ring       its data            (stride = 320 + ring)
//! ```
//!
//! The memory starts zeroed (a fresh memfd), which is every ring empty and
//! awake. Peers map the owner's memfd, so a sender writes straight into
//! the receiver's memory; the segment outlives a peer that exits (each
//! process keeps its own mapping).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::ring::{Bytes, Control};
use super::split::Split;
use crate::sync::AtomicU64;
use crate::transport::epoll::Doorbell;

/// The first word of every segment ("myriadS4": chunked rings whose
/// chunks start on cache lines, each ring with a [`Split`] line; a peer
/// of another layout is not mapped, it goes through TCP).
pub(crate) const MAGIC: u64 = u64::from_le_bytes(*b"myriadS4");
/// Bytes before the first ring.
const HEADER: usize = 64;
/// Bytes of a ring's [`Control`] and its [`Split`] line.
const CONTROL: usize = 256 + 64;
/// A cache line: where a ring's chunks start.
const LINE: usize = 64;

fn cvt(ret: libc::c_long) -> io::Result<libc::c_long> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// The bytes of a segment of `slots` rings of `ring` bytes, or `None` if
/// that overflows.
pub(crate) fn segment_len(slots: usize, ring: usize) -> Option<usize> {
    (CONTROL.checked_add(ring)?)
        .checked_mul(slots)?
        .checked_add(HEADER)
}

/// A mapped segment (this process's or a peer's).
#[derive(Debug)]
pub(crate) struct Segment {
    fd: OwnedFd,
    ptr: *mut u8,
    len: usize,
    slots: usize,
    ring: usize,
}

// SAFETY: the mapping is plain shared memory; every access goes through
// the ring protocol's atomics or the `Bytes` contract.
unsafe impl Send for Segment {}
// SAFETY: as above.
unsafe impl Sync for Segment {}

impl Segment {
    /// Creates this process's segment: `slots` rings of `ring` bytes.
    pub(crate) fn create(slots: usize, ring: usize) -> io::Result<Segment> {
        let len = segment_len(slots, ring).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{slots} rings of {ring} bytes overflow the address space"),
            )
        })?;
        // SAFETY: a valid C string; the descriptor is owned right away.
        let fd = unsafe {
            OwnedFd::from_raw_fd(cvt(
                libc::memfd_create(c"myriad-shm".as_ptr(), libc::MFD_CLOEXEC) as libc::c_long,
            )? as RawFd)
        };
        let size = libc::off_t::try_from(len)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "segment too large"))?;
        // SAFETY: resizes the memfd we own.
        cvt(unsafe { libc::ftruncate(fd.as_raw_fd(), size) } as libc::c_long)?;
        let segment = Segment::map(fd, len, slots, ring)?;
        let words = [MAGIC, slots as u64, ring as u64];
        for (i, word) in words.iter().enumerate() {
            // SAFETY: the header's first 24 bytes, inside the mapping,
            // 8-aligned (the mapping is page-aligned); nobody else has the
            // segment yet.
            unsafe { segment.ptr.cast::<u64>().add(i).write(*word) };
        }
        Ok(segment)
    }

    /// Maps a peer's segment from its descriptor, checking its header
    /// against what the peer published.
    pub(crate) fn attach(fd: OwnedFd, slots: usize, ring: usize) -> io::Result<Segment> {
        let bad = |what: String| io::Error::new(io::ErrorKind::InvalidData, what);
        let len = segment_len(slots, ring).ok_or_else(|| bad("an impossible size".into()))?;
        // SAFETY: `stat` is plain old data, filled by `fstat`.
        let mut stat: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: `fd` is open; `stat` is writable.
        cvt(unsafe { libc::fstat(fd.as_raw_fd(), &mut stat) } as libc::c_long)?;
        if stat.st_size as u64 != len as u64 {
            return Err(bad(format!(
                "the segment has {} bytes, not the {len} published",
                stat.st_size
            )));
        }
        let segment = Segment::map(fd, len, slots, ring)?;
        let header: Vec<u64> = (0..3)
            // SAFETY: inside the mapping, 8-aligned; the owner wrote the
            // header before publishing the segment.
            .map(|i| unsafe { segment.ptr.cast::<u64>().add(i).read_volatile() })
            .collect();
        if header != [MAGIC, slots as u64, ring as u64] {
            return Err(bad("the segment's header is not what was published".into()));
        }
        Ok(segment)
    }

    fn map(fd: OwnedFd, len: usize, slots: usize, ring: usize) -> io::Result<Segment> {
        // A power of two: the rings' positions are masked, not divided
        // (`SharedBytes::offset`), and each ring stays 64-aligned.
        if !ring.is_power_of_two() || ring < 4 * LINE {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("rings of {ring} bytes (not a power of two of at least 256)"),
            ));
        }
        // SAFETY: maps `len` bytes of the open memfd (at least that long);
        // the result is checked.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Segment {
            fd,
            ptr: ptr.cast(),
            len,
            slots,
            ring,
        })
    }

    /// The memfd (its number is what peers fetch).
    pub(crate) fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// The mapping's address in this process (what a CMA probe reads).
    pub(crate) fn address(&self) -> usize {
        self.ptr as usize
    }

    /// The ring written by the sender of local slot `slot`.
    ///
    /// # Panics
    ///
    /// If `slot` is not below the segment's slot count.
    pub(crate) fn ring(&self, slot: usize) -> (&Control, SharedBytes<'_>) {
        assert!(slot < self.slots, "slot {slot} of {}", self.slots);
        let at = HEADER + slot * (CONTROL + self.ring);
        debug_assert!(at + CONTROL + self.ring <= self.len);
        // SAFETY: `at` is inside the mapping, 64-aligned (HEADER, CONTROL
        // and the power-of-two ring are multiples of 64), and `Control` is
        // atomic words, valid for any bit pattern (zero at first).
        let control = unsafe { &*self.ptr.add(at).cast::<Control>() };
        let bytes = SharedBytes {
            // SAFETY: the ring's data follows its control, inside the
            // mapping (checked above).
            ptr: unsafe { self.ptr.add(at + CONTROL) },
            len: self.ring,
            _segment: std::marker::PhantomData,
        };
        (control, bytes)
    }

    /// The [`Split`] line of ring `slot` (beside its control).
    pub(crate) fn split(&self, slot: usize) -> &Split {
        assert!(slot < self.slots, "slot {slot} of {}", self.slots);
        let at = HEADER + slot * (CONTROL + self.ring) + std::mem::size_of::<Control>();
        const _: () =
            assert!(std::mem::size_of::<Control>() + std::mem::size_of::<Split>() <= CONTROL);
        // SAFETY: inside the mapping (the ring's control area, checked
        // above), 64-aligned (`Control` is whole lines), and `Split` is
        // atomic words, valid for any bit pattern (zero at first).
        unsafe { &*self.ptr.add(at).cast::<Split>() }
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `map`; every borrow of
        // it ended with `self`'s.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// A ring's data area in a mapped segment.
#[derive(Debug)]
pub(crate) struct SharedBytes<'a> {
    ptr: *mut u8,
    len: usize,
    _segment: std::marker::PhantomData<&'a Segment>,
}

// SAFETY: copies exactly the bytes asked, inside the area (asserted);
// `word` is the memory `put` and `get` reach.
unsafe impl Bytes for SharedBytes<'_> {
    fn capacity(&self) -> usize {
        self.len
    }

    /// Chunks on cache lines: a small message and its length word are one
    /// line that moves from the sender's core to the receiver's (a 1-byte
    /// message in the short form, `links.rs`), not two or three.
    #[inline]
    fn align(&self) -> usize {
        LINE
    }

    #[inline]
    fn offset(&self, pos: u64) -> usize {
        // A power of two (checked when the segment was mapped).
        (pos & (self.len as u64 - 1)) as usize
    }

    #[inline]
    fn prefetch(&self, at: usize) {
        #[cfg(target_arch = "x86_64")]
        if at < self.len {
            // SAFETY: a prefetch is a hint that neither faults nor changes
            // memory; the address is inside the mapping anyway (checked).
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                    self.ptr.add(at).cast::<i8>(),
                )
            };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = at;
    }

    fn word(&self, at: usize) -> &AtomicU64 {
        assert!(at % 8 == 0 && at < self.len);
        // SAFETY: 8 bytes inside the area (checked), 8-aligned (the area
        // is 64-aligned), shared memory that lives as long as `self`; any
        // bit pattern is a valid `AtomicU64`.
        unsafe { &*self.ptr.add(at).cast::<AtomicU64>() }
    }

    unsafe fn put(&self, at: usize, src: *const u8, len: usize) {
        assert!(at <= self.len && len <= self.len - at);
        // SAFETY: inside the area (checked); `src` by the caller's contract.
        unsafe { std::ptr::copy_nonoverlapping(src, self.ptr.add(at), len) };
    }

    unsafe fn get(&self, at: usize, dst: *mut u8, len: usize) {
        assert!(at <= self.len && len <= self.len - at);
        // SAFETY: as for `put`.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.add(at), dst, len) };
    }

    unsafe fn slice(&self, at: usize, len: usize) -> Option<&[u8]> {
        assert!(at <= self.len && len <= self.len - at);
        // SAFETY: inside the area (checked), shared memory that lives as
        // long as `self`; unwritten while the slice lives by the caller's
        // contract.
        Some(unsafe { std::slice::from_raw_parts(self.ptr.add(at), len) })
    }
}

/// A live process's descriptors, fetched with `pidfd_getfd` (needs the
/// right to ptrace it: same user, and Yama's scope allowing it).
#[derive(Debug)]
pub(crate) struct PeerProcess(OwnedFd);

impl PeerProcess {
    /// Opens process `pid`.
    pub(crate) fn open(pid: u32) -> io::Result<PeerProcess> {
        // SAFETY: a plain system call; the descriptor is owned right away.
        let fd = cvt(unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) })?;
        // SAFETY: a fresh descriptor.
        Ok(PeerProcess(unsafe { OwnedFd::from_raw_fd(fd as RawFd) }))
    }

    /// A duplicate of the process's descriptor `fd` (close-on-exec).
    pub(crate) fn fetch(&self, fd: RawFd) -> io::Result<OwnedFd> {
        // SAFETY: a plain system call on our pidfd; the descriptor is owned
        // right away.
        let got = cvt(unsafe { libc::syscall(libc::SYS_pidfd_getfd, self.0.as_raw_fd(), fd, 0) })?;
        // SAFETY: a fresh descriptor.
        Ok(unsafe { OwnedFd::from_raw_fd(got as RawFd) })
    }

    /// A doorbell of the process, from its descriptor number.
    pub(crate) fn doorbell(&self, fd: RawFd) -> io::Result<Doorbell> {
        self.fetch(fd).map(Doorbell::from_fd)
    }
}
