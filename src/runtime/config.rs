//! Configuration knobs: builder values, then command-line flags, then
//! `MYRIAD_*` environment variables, then defaults. Every knob is in the
//! README's configuration table.

use std::env;

use crate::environment::Threading;
use crate::error::Error;
use crate::sched::stack::GuardMode;
use crate::topology::{Level, RankOrder};

/// Default usable stack size of a rank.
pub(crate) const DEFAULT_STACK_SIZE: usize = 256 * 1024;
/// Default largest message sent eagerly when no receive is posted.
pub(crate) const DEFAULT_EAGER_LIMIT: usize = 16 * 1024;

/// A fully resolved configuration.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) ranks: usize,
    pub(crate) workers: usize,
    pub(crate) stack_size: usize,
    pub(crate) bind: bool,
    pub(crate) report_bindings: bool,
    pub(crate) eager_limit: usize,
    pub(crate) guard: Option<GuardMode>,
    pub(crate) check_collectives: bool,
    pub(crate) threading: Threading,
    pub(crate) map_by: Level,
    pub(crate) rank_order: RankOrder,
}

/// Reads an environment variable, treating empty as unset.
pub(crate) fn var(name: &str) -> Option<String> {
    env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// A positive count (`MYRIAD_RANKS=1000`).
pub(crate) fn parse_count(knob: &str, value: &str) -> Result<usize, Error> {
    match value.trim().replace('_', "").parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(Error::config(format!(
            "{knob}={value:?} is not a positive whole number"
        ))),
    }
}

/// A size in bytes with an optional binary suffix (`64K`, `1M`, `1G`,
/// `65536`).
pub(crate) fn parse_size(knob: &str, value: &str) -> Result<usize, Error> {
    let v = value.trim();
    let (digits, unit) = match v
        .char_indices()
        .find(|(_, c)| !c.is_ascii_digit() && *c != '_')
    {
        Some((i, _)) => (&v[..i], v[i..].trim().to_ascii_lowercase()),
        None => (v, String::new()),
    };
    let shift = match unit.as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => {
            return Err(Error::config(format!(
                "{knob}={value:?}: unknown unit {unit:?} (use a byte count, or K, M or G)"
            )))
        }
    };
    digits
        .replace('_', "")
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .ok_or_else(|| Error::config(format!("{knob}={value:?} is not a size (e.g. 256K)")))
}

/// A boolean (`1/0`, `true/false`, `yes/no`, `on/off`).
pub(crate) fn parse_bool(knob: &str, value: &str) -> Result<bool, Error> {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err(Error::config(format!(
            "{knob}={value:?} is not a boolean (use 1/0, true/false, yes/no or on/off)"
        ))),
    }
}

/// `auto`, `madvise` or `mprotect`.
pub(crate) fn parse_guard(knob: &str, value: &str) -> Result<Option<GuardMode>, Error> {
    match value.trim().to_ascii_lowercase().as_str() {
        "auto" => Ok(None),
        "madvise" => Ok(Some(GuardMode::Madvise)),
        "mprotect" => Ok(Some(GuardMode::Mprotect)),
        _ => Err(Error::config(format!(
            "{knob}={value:?} is not a guard mode (use auto, madvise or mprotect)"
        ))),
    }
}

/// Values given as command-line flags (`--ranks N`, `--workers N`, both
/// also as `--flag=N`); other arguments are left alone.
#[derive(Debug, Default, Clone)]
pub(crate) struct Flags {
    pub(crate) ranks: Option<String>,
    pub(crate) workers: Option<String>,
}

impl Flags {
    pub(crate) fn parse(args: impl IntoIterator<Item = String>) -> Flags {
        let mut flags = Flags::default();
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            for (name, slot) in [
                ("--ranks", &mut flags.ranks),
                ("--workers", &mut flags.workers),
            ] {
                if arg == name {
                    *slot = args.next();
                } else if let Some(v) = arg.strip_prefix(name).and_then(|r| r.strip_prefix('=')) {
                    *slot = Some(v.to_string());
                }
            }
        }
        flags
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("S", "65536").unwrap(), 65536);
        assert_eq!(parse_size("S", "64K").unwrap(), 65536);
        assert_eq!(parse_size("S", "1m").unwrap(), 1 << 20);
        assert_eq!(parse_size("S", "2 GiB").unwrap(), 2 << 30);
        let err = parse_size("MYRIAD_STACK_SIZE", "12Q")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("MYRIAD_STACK_SIZE") && err.contains("unit"),
            "{err}"
        );
    }

    #[test]
    fn counts_and_bools() {
        assert_eq!(parse_count("R", "1_000").unwrap(), 1000);
        assert!(parse_count("MYRIAD_RANKS", "0").is_err());
        assert!(parse_count("MYRIAD_RANKS", "-3").is_err());
        assert!(parse_bool("B", "off").is_ok_and(|b| !b));
        assert!(parse_bool("MYRIAD_BIND", "maybe").is_err());
    }

    #[test]
    fn flags() {
        let f = Flags::parse(
            ["prog", "--ranks", "12", "--size=3", "--workers=2"]
                .iter()
                .map(|s| s.to_string()),
        );
        assert_eq!(f.ranks.as_deref(), Some("12"));
        assert_eq!(f.workers.as_deref(), Some("2"));
    }
}
