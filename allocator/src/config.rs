//! Configuration from the environment, read without allocating.
//!
//! The allocator may be initialised before `main`, and reading the environment through
//! `std::env` would allocate through the allocator being initialised. So variables are read
//! with `libc::getenv`, which returns a pointer into the process environment, and parsed from
//! the bytes in place.

use core::ffi::CStr;

/// Upper bound of the default of `MYRIAD_ALLOC_KEEP` (the default is the smaller of this and
/// an eighth of physical memory).
pub(crate) const DEFAULT_KEEP_MAX: usize = 1 << 30;

/// The default of `MYRIAD_ALLOC_KEEP`: min(1 GiB, physical memory / 8).
fn default_keep() -> usize {
    // SAFETY: sysconf has no preconditions and does not allocate.
    let pages = unsafe { libc::sysconf(libc::_SC_PHYS_PAGES) };
    if pages <= 0 {
        return DEFAULT_KEEP_MAX;
    }
    (pages as usize)
        .saturating_mul(crate::os::PAGE)
        .checked_div(8)
        .map_or(DEFAULT_KEEP_MAX, |eighth| eighth.min(DEFAULT_KEEP_MAX))
}

/// The allocator's knobs, fixed at initialisation.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Config {
    /// `MYRIAD_ALLOC_KEEP`: bytes of freed memory kept resident (mapped and already faulted in)
    /// for reuse, summed over all nodes; beyond it, freed pages are returned with `madvise`.
    pub(crate) keep: usize,
    /// `MYRIAD_ALLOC_BIND`: whether pools bind their mappings to their node (default: when
    /// there is more than one node).
    pub(crate) bind: Option<bool>,
    /// `MYRIAD_ALLOC_HUGEPAGES`: whether arenas and huge blocks ask for transparent huge pages
    /// (`madvise(MADV_HUGEPAGE)`); off by default.
    pub(crate) hugepages: bool,
}

impl Config {
    /// The defaults, before the environment is read.
    pub(crate) const DEFAULT: Config = Config {
        keep: DEFAULT_KEEP_MAX,
        bind: None,
        hugepages: false,
    };

    /// Reads the configuration from the environment.
    pub(crate) fn from_env() -> Config {
        let keep = env(c"MYRIAD_ALLOC_KEEP")
            .and_then(parse_size)
            .unwrap_or_else(default_keep);
        let bind = env(c"MYRIAD_ALLOC_BIND").and_then(parse_bool);
        let hugepages = env(c"MYRIAD_ALLOC_HUGEPAGES")
            .and_then(parse_bool)
            .unwrap_or(false);
        Config {
            keep,
            bind,
            hugepages,
        }
    }
}

/// The bytes of environment variable `name`, if set (without allocating).
pub(crate) fn env(name: &CStr) -> Option<&'static [u8]> {
    // SAFETY: `name` is NUL-terminated; getenv returns null or a pointer into the environment,
    // which lives for the process (the allocator never calls setenv).
    let value = unsafe { libc::getenv(name.as_ptr()) };
    if value.is_null() {
        return None;
    }
    // SAFETY: getenv returned a valid NUL-terminated string.
    Some(unsafe { CStr::from_ptr(value) }.to_bytes())
}

/// Parses a byte count: digits with an optional `K`, `M`, `G` or `T` suffix (powers of 1024,
/// optionally followed by `B` or `iB`), e.g. `0`, `65536`, `256M`, `1GiB`.
pub(crate) fn parse_size(text: &[u8]) -> Option<usize> {
    let text = trim(text);
    let digits = text.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 {
        return None;
    }
    let mut value: usize = 0;
    for &b in &text[..digits] {
        value = value.checked_mul(10)?.checked_add(usize::from(b - b'0'))?;
    }
    let shift = match trim(&text[digits..]) {
        b"" | b"B" | b"b" => 0,
        b"K" | b"k" | b"KB" | b"KiB" | b"kB" => 10,
        b"M" | b"m" | b"MB" | b"MiB" => 20,
        b"G" | b"g" | b"GB" | b"GiB" => 30,
        b"T" | b"t" | b"TB" | b"TiB" => 40,
        _ => return None,
    };
    value.checked_mul(1usize << shift)
}

fn parse_bool(text: &[u8]) -> Option<bool> {
    match trim(text) {
        b"0" | b"no" | b"false" | b"off" => Some(false),
        b"1" | b"yes" | b"true" | b"on" => Some(true),
        _ => None,
    }
}

fn trim(mut text: &[u8]) -> &[u8] {
    while let [b' ' | b'\t' | b'\n', rest @ ..] = text {
        text = rest;
    }
    while let [rest @ .., b' ' | b'\t' | b'\n'] = text {
        text = rest;
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_suffixes() {
        assert_eq!(parse_size(b"0"), Some(0));
        assert_eq!(parse_size(b"4096"), Some(4096));
        assert_eq!(parse_size(b"256M"), Some(256 << 20));
        assert_eq!(parse_size(b" 1GiB\n"), Some(1 << 30));
        assert_eq!(parse_size(b"3k"), Some(3072));
        assert_eq!(parse_size(b"12X"), None);
        assert_eq!(parse_size(b""), None);
        assert_eq!(parse_size(b"99999999999999999999999"), None);
    }

    #[test]
    fn default_keep_is_bounded() {
        let k = default_keep();
        assert!(k > 0 && k <= DEFAULT_KEEP_MAX);
        assert_eq!(parse_bool(b"on"), Some(true));
        assert_eq!(parse_bool(b"0"), Some(false));
        assert_eq!(parse_bool(b"maybe"), None);
    }
}
