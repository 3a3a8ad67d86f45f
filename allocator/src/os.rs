//! The OS memory source: the only module that calls `mmap`, `munmap`, `madvise` and `mbind`.
//!
//! Everything here is a thin, allocation-free wrapper over one system call, plus a counter per
//! call kind so that [`crate::stats()`] can report how often the allocator went to the kernel.

use core::ptr::{self, NonNull};

use crate::sync::{AtomicU64, Ordering};

/// The page size the allocator works in (x86-64 and aarch64 Linux base pages).
pub(crate) const PAGE: usize = 4096;

/// `MPOL_PREFERRED`: allocate on the given node, fall back to others when it is full.
const MPOL_PREFERRED: libc::c_int = 1;

/// Counters of system calls, read by the statistics.
#[derive(Debug)]
pub(crate) struct OsCounters {
    pub(crate) mmap: AtomicU64,
    pub(crate) munmap: AtomicU64,
    pub(crate) madvise: AtomicU64,
    pub(crate) mbind: AtomicU64,
    pub(crate) mbind_failed: AtomicU64,
    pub(crate) mremap: AtomicU64,
    /// Bytes currently mapped (all mappings made here minus those unmapped).
    pub(crate) mapped: AtomicU64,
    /// Highest value `mapped` reached.
    pub(crate) peak_mapped: AtomicU64,
}

pub(crate) static COUNTERS: OsCounters = OsCounters {
    mmap: AtomicU64::new(0),
    munmap: AtomicU64::new(0),
    madvise: AtomicU64::new(0),
    mbind: AtomicU64::new(0),
    mbind_failed: AtomicU64::new(0),
    mremap: AtomicU64::new(0),
    mapped: AtomicU64::new(0),
    peak_mapped: AtomicU64::new(0),
};

fn count(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

fn add_mapped(bytes: usize) {
    let now = COUNTERS.mapped.fetch_add(bytes as u64, Ordering::Relaxed) + bytes as u64;
    COUNTERS.peak_mapped.fetch_max(now, Ordering::Relaxed);
}

fn sub_mapped(bytes: usize) {
    COUNTERS.mapped.fetch_sub(bytes as u64, Ordering::Relaxed);
}

/// Maps `len` bytes (a multiple of [`PAGE`]) of fresh zeroed memory aligned to `align` (a power
/// of two, at least [`PAGE`]), or returns `None` when the kernel refuses.
///
/// Alignment above a page is obtained by over-mapping and unmapping the excess at both ends, so
/// the result is exactly one mapping of `len` bytes.
pub(crate) fn map(len: usize, align: usize) -> Option<NonNull<u8>> {
    map_offset(len, align, 0)
}

/// Like [`map`], but the address `offset` bytes into the mapping (a multiple of [`PAGE`],
/// below `len`) is the one aligned to `align`: room for a header page in front of an aligned
/// block.
pub(crate) fn map_offset(len: usize, align: usize, offset: usize) -> Option<NonNull<u8>> {
    debug_assert!(len % PAGE == 0 && align.is_power_of_two() && align >= PAGE);
    debug_assert!(offset % PAGE == 0 && offset < len);
    let extra = align.saturating_sub(PAGE);
    let total = len.checked_add(extra)?;
    if total > isize::MAX as usize {
        return None;
    }
    count(&COUNTERS.mmap);
    // SAFETY: an anonymous private mapping at a kernel-chosen address touches no existing
    // memory; the result is checked against MAP_FAILED.
    let raw = unsafe {
        libc::mmap(
            ptr::null_mut(),
            total,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if raw == libc::MAP_FAILED {
        return None;
    }
    let start = raw as usize;
    // `start + offset` is page-aligned, so rounding it up moves it by at most `extra`.
    let aligned = ((start + offset + align - 1) & !(align - 1)) - offset;
    let head = aligned - start;
    let tail = total - head - len;
    add_mapped(total);
    if head > 0 {
        // SAFETY: [start, aligned) is the unused head of the mapping made just above.
        unsafe { unmap(start as *mut u8, head) };
    }
    if tail > 0 {
        // SAFETY: [aligned + len, start + total) is the unused tail of that mapping.
        unsafe { unmap((aligned + len) as *mut u8, tail) };
    }
    NonNull::new(aligned as *mut u8)
}

/// Returns `[ptr, ptr + len)` to the kernel.
///
/// # Safety
/// The range must be page-aligned, lie inside mappings made by [`map`], and hold nothing still
/// in use.
pub(crate) unsafe fn unmap(ptr: *mut u8, len: usize) {
    count(&COUNTERS.munmap);
    // SAFETY: the caller guarantees the range is ours and unused.
    let rc = unsafe { libc::munmap(ptr.cast(), len) };
    if rc == 0 {
        sub_mapped(len);
    }
}

/// Releases the physical pages of `[ptr, ptr + len)` but keeps the range mapped: the next
/// touch faults in a fresh zero page.
///
/// # Safety
/// The range must be page-aligned, inside a mapping made by [`map`], and hold no live data.
pub(crate) unsafe fn purge(ptr: *mut u8, len: usize) {
    count(&COUNTERS.madvise);
    // SAFETY: the caller guarantees the range is ours and holds no live data.
    unsafe { libc::madvise(ptr.cast(), len, libc::MADV_DONTNEED) };
}

/// Asks for transparent huge pages on `[ptr, ptr + len)` (`MADV_HUGEPAGE`); a hint only.
///
/// # Safety
/// The range must be page-aligned and inside a mapping made by [`map`].
pub(crate) unsafe fn advise_hugepages(ptr: *mut u8, len: usize) {
    count(&COUNTERS.madvise);
    // SAFETY: the caller guarantees the range is ours; the advice does not change contents.
    unsafe { libc::madvise(ptr.cast(), len, libc::MADV_HUGEPAGE) };
}

/// Resizes the mapping `[ptr, ptr + old_len)` to `new_len` bytes, moving it if needed
/// (no copy: the kernel moves page-table entries). Returns `None` on failure, in which case the
/// old mapping is untouched.
///
/// # Safety
/// `[ptr, ptr + old_len)` must be exactly one mapping made by [`map`] (page-aligned lengths).
pub(crate) unsafe fn remap(ptr: *mut u8, old_len: usize, new_len: usize) -> Option<NonNull<u8>> {
    count(&COUNTERS.mremap);
    // SAFETY: the caller guarantees the range is one whole mapping of ours.
    let raw = unsafe { libc::mremap(ptr.cast(), old_len, new_len, libc::MREMAP_MAYMOVE) };
    if raw == libc::MAP_FAILED {
        return None;
    }
    if new_len >= old_len {
        add_mapped(new_len - old_len);
    } else {
        sub_mapped(old_len - new_len);
    }
    NonNull::new(raw.cast())
}

/// Asks the kernel to place the pages of `[ptr, ptr + len)` on NUMA node `node`
/// (`MPOL_PREFERRED`, so a full node falls back to another one instead of failing a fault).
/// Returns whether the kernel accepted; failures are counted, never fatal.
///
/// The call goes through `syscall(SYS_mbind)` directly, so no C NUMA library is needed.
pub(crate) fn bind(ptr: *mut u8, len: usize, node: usize) -> bool {
    const MASK_WORDS: usize = 16;
    if node >= MASK_WORDS * 64 {
        count(&COUNTERS.mbind_failed);
        return false;
    }
    let mut mask = [0 as libc::c_ulong; MASK_WORDS];
    mask[node / 64] |= 1 << (node % 64);
    count(&COUNTERS.mbind);
    // SAFETY: mbind reads `MASK_WORDS * 64` bits from `mask`, a live stack array; it changes
    // only the placement policy of our own range, never its contents.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mbind,
            ptr as usize,
            len,
            MPOL_PREFERRED,
            mask.as_ptr(),
            MASK_WORDS * 64 + 1,
            0usize,
        )
    };
    if rc != 0 {
        count(&COUNTERS.mbind_failed);
    }
    rc == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_offset_aligns_the_address_after_the_offset() {
        for (len, align, offset) in [
            (3 * PAGE, 2 << 20, PAGE),
            (PAGE * 2, PAGE, PAGE),
            (5 * PAGE, 8 << 20, 2 * PAGE),
        ] {
            let p = map_offset(len, align, offset).expect("map");
            let a = p.as_ptr() as usize;
            assert_eq!((a + offset) % align, 0, "{len} {align} {offset}");
            // SAFETY: the whole range is our fresh mapping; unmapped once.
            unsafe {
                p.as_ptr().write_bytes(1, len);
                unmap(p.as_ptr(), len);
            }
        }
    }
}
