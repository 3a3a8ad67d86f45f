//! Bulk copies: contiguous copies too large for the caches.
//!
//! A copy whose source and destination together exceed the last-level
//! cache is a trip to memory, and there an ordinary store first reads the
//! destination's line (read-for-ownership) only to overwrite it: three
//! memory transfers per line instead of two. Non-temporal stores write
//! whole lines without reading them. glibc's `memcpy` switches to them only
//! from `x86_non_temporal_threshold` on, which this VM's glibc sets to
//! 240 MiB, so a 16 MiB message took the slow way. Measured on the 2-core
//! VM (a C loop copying between two buffers back and forth, as a ping-pong
//! does, load 2–4): 16 MiB `memcpy` 2.4–4.2 ms against 1.3–2.3 ms with
//! streaming stores (1.2–1.9×), 32 MiB 7.0–7.2 against 3.9–4.8; 8 MiB and
//! less, where both buffers fit in the 32 MiB L3, `memcpy` wins (1 MiB:
//! 2×), 12 MiB ties. Hence [`streaming_from`]: half the last-level cache.

use std::sync::OnceLock;

/// Copies from this many bytes on go through [`copy_streaming`]: half the
/// last-level cache (source and destination then exceed it), read once
/// from sysfs; 16 MiB where the size is unknown.
pub(crate) fn streaming_from() -> usize {
    static FROM: OnceLock<usize> = OnceLock::new();
    *FROM.get_or_init(|| last_level_cache().map_or(16 << 20, |bytes| (bytes / 2).max(1 << 20)))
}

/// The size of CPU 0's largest cache level, from
/// `/sys/devices/system/cpu/cpu0/cache/index*/{level,size}`.
fn last_level_cache() -> Option<usize> {
    let dir = std::fs::read_dir("/sys/devices/system/cpu/cpu0/cache").ok()?;
    dir.filter_map(|entry| {
        let path = entry.ok()?.path();
        let level: u32 = std::fs::read_to_string(path.join("level"))
            .ok()?
            .trim()
            .parse()
            .ok()?;
        let size = parse_size(std::fs::read_to_string(path.join("size")).ok()?.trim())?;
        Some((level, size))
    })
    .max()
    .map(|(_, size)| size)
}

/// `"32768K"`, `"2M"` or `"512"` as bytes.
fn parse_size(text: &str) -> Option<usize> {
    let (digits, unit) = match text.as_bytes().last()? {
        b'K' | b'k' => (&text[..text.len() - 1], 1 << 10),
        b'M' | b'm' => (&text[..text.len() - 1], 1 << 20),
        b'G' | b'g' => (&text[..text.len() - 1], 1 << 30),
        _ => (text, 1),
    };
    digits.parse::<usize>().ok()?.checked_mul(unit)
}

/// Copies `len` bytes with non-temporal stores where the target has them
/// (x86-64: SSE2's `movntdq`, 64 bytes a round, the destination aligned
/// to 16 bytes by a plain head copy), then fences them, so the caller's
/// next release store publishes the data. Elsewhere, `memcpy`.
///
/// # Safety
///
/// As `ptr::copy_nonoverlapping(src, dst, len)`.
pub(crate) unsafe fn copy_streaming(dst: *mut u8, src: *const u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};
        let head = dst.align_offset(16).min(len);
        let body = (len - head) / 64 * 64;
        // SAFETY: head, body and tail partition the two ranges (the
        // caller's contract); `dst + head` is 16-byte aligned, as
        // `movntdq` needs; loads may be unaligned (`loadu`); SSE2 is part
        // of the x86-64 baseline.
        unsafe {
            std::ptr::copy_nonoverlapping(src, dst, head);
            let (s, d) = (src.add(head), dst.add(head));
            let mut at = 0;
            while at < body {
                let a = _mm_loadu_si128(s.add(at) as *const __m128i);
                let b = _mm_loadu_si128(s.add(at + 16) as *const __m128i);
                let c = _mm_loadu_si128(s.add(at + 32) as *const __m128i);
                let e = _mm_loadu_si128(s.add(at + 48) as *const __m128i);
                _mm_stream_si128(d.add(at) as *mut __m128i, a);
                _mm_stream_si128(d.add(at + 16) as *mut __m128i, b);
                _mm_stream_si128(d.add(at + 32) as *mut __m128i, c);
                _mm_stream_si128(d.add(at + 48) as *mut __m128i, e);
                at += 64;
            }
            // Non-temporal stores are weakly ordered: fence them before
            // the caller's next store (the completion's release).
            _mm_sfence();
            std::ptr::copy_nonoverlapping(s.add(body), d.add(body), len - head - body);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: the caller's contract.
    unsafe {
        std::ptr::copy_nonoverlapping(src, dst, len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_their_units() {
        assert_eq!(parse_size("32768K"), Some(32 << 20));
        assert_eq!(parse_size("2M"), Some(2 << 20));
        assert_eq!(parse_size("512"), Some(512));
        assert_eq!(parse_size("x"), None);
        assert_eq!(parse_size(""), None);
    }

    #[test]
    fn streaming_copies_every_byte_at_every_alignment() {
        let src: Vec<u8> = (0..4096u32).map(|i| (i * 7 + 3) as u8).collect();
        for len in [0, 1, 15, 16, 63, 64, 65, 127, 1000, 4000] {
            for from in [0, 1, 5, 16, 33] {
                for to in [0, 1, 8, 15, 48] {
                    let mut dst = vec![0xAAu8; 4096 + 64];
                    // SAFETY: both ranges lie inside their vectors and do
                    // not overlap (two allocations).
                    unsafe {
                        copy_streaming(dst.as_mut_ptr().add(to), src.as_ptr().add(from), len)
                    };
                    assert_eq!(
                        &dst[to..to + len],
                        &src[from..from + len],
                        "{len} {from} {to}"
                    );
                    assert!(dst[..to].iter().all(|&b| b == 0xAA));
                    assert!(dst[to + len..].iter().all(|&b| b == 0xAA));
                }
            }
        }
    }

    #[test]
    fn the_threshold_is_at_least_a_mebibyte() {
        assert!(streaming_from() >= 1 << 20);
    }
}
