//! Helpers shared by the examples: flags and statistics.

#![allow(dead_code)]

use std::str::FromStr;

pub(crate) mod plot;

/// Flags every program built on myriad takes (the runtime reads them).
const RUNTIME_FLAGS: [&str; 3] = ["--ranks", "--workers", "--processes"];

/// Checks the command line against `usage`, the example's synopsis
/// (`"pingpong [--sizes 1,65536] [--iters N]"`): `--help` or `-h` prints it
/// and exits; a flag it does not name (nor the runtime's `--ranks`,
/// `--workers`, `--processes`) exits with status 2 and the synopsis, so a
/// mistyped flag is not silently replaced by its default. Call it first in
/// `main`.
pub(crate) fn usage(usage: &str) {
    let known: Vec<&str> = usage
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .chain(RUNTIME_FLAGS)
        .collect();
    for a in std::env::args().skip(1) {
        if a == "--" {
            break;
        }
        if a == "--help" || a == "-h" {
            println!("usage: {usage}");
            std::process::exit(0);
        }
        let name = a.split('=').next().unwrap_or(&a);
        if name.starts_with("--") && !known.contains(&name) {
            eprintln!("unknown flag {name}\nusage: {usage}");
            std::process::exit(2);
        }
    }
}

/// The value of `--name V` or `--name=V`, parsed.
pub(crate) fn arg<T: FromStr>(name: &str) -> Option<T> {
    let args: Vec<String> = std::env::args().collect();
    let value = args
        .iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
        .or_else(|| {
            args.iter()
                .find_map(|a| a.strip_prefix(&format!("{name}=")).map(str::to_string))
        })?;
    match value.parse() {
        Ok(v) => Some(v),
        Err(_) => {
            eprintln!("{name}: cannot parse {value:?}");
            std::process::exit(2);
        }
    }
}

/// A comma-separated list flag (`--sizes 8,1024`).
pub(crate) fn list<T: FromStr>(name: &str) -> Option<Vec<T>> {
    let raw: String = arg(name)?;
    Some(
        raw.split(',')
            .map(|v| {
                v.trim().parse().unwrap_or_else(|_| {
                    eprintln!("{name}: cannot parse {v:?}");
                    std::process::exit(2)
                })
            })
            .collect(),
    )
}

/// The median of `values` (sorted in place).
pub(crate) fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// Resident set size of this process in bytes.
pub(crate) fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64;
    pages * page
}
