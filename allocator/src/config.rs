//! Configuration from the environment, read without allocating.
//!
//! The allocator may be initialised before `main`, and reading the environment through
//! `std::env` would allocate through the allocator being initialised. So variables are read
//! with `libc::getenv`, which returns a pointer into the process environment, and parsed from
//! the bytes in place.

use core::ffi::CStr;

/// Default of `MYRIAD_ALLOC_KEEP`: freed memory kept resident for reuse, whole process.
pub(crate) const DEFAULT_KEEP: usize = 256 << 20;

/// The allocator's knobs, fixed at initialisation.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Config {
    /// `MYRIAD_ALLOC_KEEP`: bytes of freed memory kept resident (mapped and already faulted in)
    /// for reuse, summed over all nodes; beyond it, freed pages are returned with `madvise`.
    pub(crate) keep: usize,
    /// `MYRIAD_ALLOC_BIND`: whether pools bind their mappings to their node (default: when
    /// there is more than one node).
    pub(crate) bind: Option<bool>,
}

impl Config {
    /// The defaults, before the environment is read.
    pub(crate) const DEFAULT: Config = Config {
        keep: DEFAULT_KEEP,
        bind: None,
    };

    /// Reads the configuration from the environment.
    pub(crate) fn from_env() -> Config {
        let keep = env(c"MYRIAD_ALLOC_KEEP")
            .and_then(parse_size)
            .unwrap_or(DEFAULT_KEEP);
        let bind = env(c"MYRIAD_ALLOC_BIND").and_then(|v| match v {
            b"0" | b"no" | b"false" | b"off" => Some(false),
            b"1" | b"yes" | b"true" | b"on" => Some(true),
            _ => None,
        });
        Config { keep, bind }
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
}
