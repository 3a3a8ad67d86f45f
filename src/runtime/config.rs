//! Configuration knobs: builder values, then command-line flags, then
//! `MYRIAD_*` environment variables, then defaults. Every knob is in the
//! README's configuration table.

use std::env;

use crate::environment::Threading;
use crate::error::Error;
use crate::hardware::{Level, RankOrder};
use crate::sched::stack::GuardMode;
use crate::trace::{ProfileTo, RankSet, Window};

/// Default usable stack size of a rank.
pub(crate) const DEFAULT_STACK_SIZE: usize = 256 * 1024;
/// Default largest message sent eagerly when no receive is posted.
pub(crate) const DEFAULT_EAGER_LIMIT: usize = 16 * 1024;

/// Reads the program's allocator figures: `(name, bytes)` pairs.
pub(crate) type AllocatorStatistics = fn() -> Vec<(&'static str, u64)>;

/// A fully resolved configuration.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) ranks: usize,
    pub(crate) workers: usize,
    /// Whether the worker count was given (builder, `--workers`,
    /// `MYRIAD_WORKERS`) rather than defaulted to the processing units: a
    /// process sharing its host with others of the job defaults to its share.
    pub(crate) workers_given: bool,
    pub(crate) stack_size: usize,
    pub(crate) bind: bool,
    pub(crate) report_bindings: bool,
    /// Print the memory report when the job ends (`MYRIAD_REPORT_MEMORY`).
    pub(crate) report_memory: bool,
    /// The program's allocator figures for the memory report.
    pub(crate) allocator_statistics: Option<AllocatorStatistics>,
    pub(crate) eager_limit: usize,
    pub(crate) guard: Option<GuardMode>,
    pub(crate) check_collectives: bool,
    pub(crate) threading: Threading,
    pub(crate) map_by: Level,
    pub(crate) rank_order: RankOrder,
    /// The most ranks the job may have, spawned ones included
    /// (`MYRIAD_MAX_RANKS`, `MPI_UNIVERSE_SIZE`; `None`: what the stack
    /// address space allows, `sched::stack::StackBudget::max_stacks`).
    pub(crate) max_ranks: Option<usize>,
    /// What the job asks of the launch layer: the world's layout over
    /// processes, the built-in launcher.
    pub(crate) launch: crate::launch::Request,
    /// What the job records: trace and profile (`MYRIAD_TRACE*`,
    /// `MYRIAD_PROFILE`).
    pub(crate) trace: crate::trace::Settings,
}

/// The most processes the built-in launcher starts.
const MAX_PROCESSES: usize = 4096;

/// The launch knobs: `--processes N` / `MYRIAD_PROCESSES` (the built-in
/// launcher) and `MYRIAD_RANKS_PER_PROCESS`, for a world of `world` ranks
/// (`world_given`: set by the user, not the default).
pub(crate) fn launch_request(
    flags: &Flags,
    world: usize,
    world_given: bool,
) -> Result<crate::launch::Request, Error> {
    let env_processes = var("MYRIAD_PROCESSES")
        .map(|v| parse_count("MYRIAD_PROCESSES", &v))
        .transpose()?;
    let processes = match &flags.processes {
        Some(v) => Some(parse_count("--processes", v)?),
        None => env_processes,
    };
    if let Some(n) = processes.filter(|&n| n > MAX_PROCESSES) {
        return Err(Error::config(format!(
            "--processes/MYRIAD_PROCESSES={n}: the built-in launcher starts at most \
             {MAX_PROCESSES} processes"
        )));
    }
    Ok(crate::launch::Request {
        shape: crate::launch::Shape {
            world: world as u32,
            world_given,
            per_process: var("MYRIAD_RANKS_PER_PROCESS"),
        },
        processes: processes.map(|n| n as u32),
    })
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

/// A set of world ranks: `0-63,100` (`MYRIAD_TRACE_RANKS`).
pub(crate) fn parse_ranks(knob: &str, value: &str) -> Result<RankSet, Error> {
    RankSet::parse(value).map_err(|why| Error::config(format!("{knob}={value:?}: {why}")))
}

/// A whole number of MiB, at least 1 (`MYRIAD_TRACE_MAX_MB`), in bytes.
pub(crate) fn parse_mib(knob: &str, value: &str) -> Result<usize, Error> {
    parse_count(knob, value)?
        .checked_mul(1 << 20)
        .ok_or_else(|| Error::config(format!("{knob}={value:?} is too large")))
}

/// A file written when the job ends (`MYRIAD_TRACE`) must go to a
/// directory that exists: checked at the start, so that a typo fails the
/// job at once, not after it ran.
pub(crate) fn check_output_dir(knob: &str, path: &std::path::Path) -> Result<(), Error> {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() && !dir.is_dir() => Err(Error::config(format!(
            "{knob}={:?}: the directory {:?} does not exist",
            path.display().to_string(),
            dir.display().to_string()
        ))),
        _ => Ok(()),
    }
}

/// A time window, `START_MS-END_MS` (`MYRIAD_TRACE_WINDOW`).
pub(crate) fn parse_window(knob: &str, value: &str) -> Result<Window, Error> {
    Window::parse(value).map_err(|why| Error::config(format!("{knob}={value:?}: {why}")))
}

/// The builder's window (`Runtime::trace_window`).
pub(crate) fn window_of_range(
    range: &std::ops::Range<std::time::Duration>,
) -> Result<Window, Error> {
    let ns = |d: std::time::Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    Window::new(ns(range.start), ns(range.end))
        .map_err(|why| Error::config(format!("Runtime::trace_window: {why}")))
}

/// Where the profile goes (`MYRIAD_PROFILE`): a boolean (on: standard
/// error), or a file path (a value with a `/` or a `.`).
pub(crate) fn parse_profile(knob: &str, value: &str) -> Result<Option<ProfileTo>, Error> {
    if let Ok(on) = parse_bool(knob, value) {
        return Ok(on.then_some(ProfileTo::Stderr));
    }
    let v = value.trim();
    if v.contains('/') || v.contains('.') {
        return Ok(Some(ProfileTo::File(v.into())));
    }
    Err(Error::config(format!(
        "{knob}={value:?} is neither a boolean (1/0, true/false, yes/no, on/off) nor a \
         file path (one with a '/' or a '.', e.g. ./profile.txt)"
    )))
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

/// The command-line flags [`Flags`] reads, without their dashes.
const FLAG_NAMES: [&str; 3] = ["ranks", "workers", "processes"];

/// Values given as command-line flags (with `Runtime::from_env`).
///
/// The command line is shared with the program, which has flags of its
/// own, so not every unknown flag can be an error. The rule:
/// * `--ranks N`, `--workers N` and `--processes N` (also `--ranks=N`)
///   are myriad's; each
///   needs its value, and the last one given wins;
/// * a flag that is one slip away from one of them (another case, one dash,
///   one letter missing, extra, wrong or two letters swapped: `--rank`,
///   `--Workers`, `-ranks`, `--rnaks`) is an error naming the flag meant,
///   rather than a job silently run with the default;
/// * everything else, and every argument after a lone `--`, is the
///   program's and left alone (a program with a flag such as `--rank` of
///   its own takes it after `--`).
#[derive(Debug, Default, Clone)]
pub(crate) struct Flags {
    pub(crate) ranks: Option<String>,
    pub(crate) workers: Option<String>,
    pub(crate) processes: Option<String>,
    /// The first flag that broke the rule.
    pub(crate) error: Option<String>,
}

impl Flags {
    pub(crate) fn parse(args: impl IntoIterator<Item = String>) -> Flags {
        let mut flags = Flags::default();
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            if arg == "--" {
                break;
            }
            let (name, inline) = match arg.split_once('=') {
                Some((name, value)) => (name, Some(value.to_string())),
                None => (arg.as_str(), None),
            };
            let slot = match name {
                "--ranks" => &mut flags.ranks,
                "--workers" => &mut flags.workers,
                "--processes" => &mut flags.processes,
                _ => {
                    if let Some(meant) = slip_of(name) {
                        flags.error.get_or_insert_with(|| {
                            format!(
                                "unknown flag {name:?}: did you mean --{meant}? (myriad reads \
                                 --ranks N, --workers N and --processes N, and leaves the arguments after \
                                 `--` to the program)"
                            )
                        });
                    }
                    continue;
                }
            };
            match inline.or_else(|| args.next()) {
                Some(value) => *slot = Some(value),
                None => {
                    flags
                        .error
                        .get_or_insert_with(|| format!("{name} needs a value ({name} N)"));
                }
            }
        }
        flags
    }
}

/// The runtime flag `arg` is a slip of, if any (see [`Flags`]).
fn slip_of(arg: &str) -> Option<&'static str> {
    let bare = arg.strip_prefix('-')?.trim_start_matches('-');
    let bare = bare.to_ascii_lowercase();
    FLAG_NAMES
        .into_iter()
        .find(|flag| within_one_edit(&bare, flag))
}

/// Whether `a` becomes `b` by at most one insertion, deletion, substitution
/// or swap of neighbours (ASCII).
fn within_one_edit(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let (a, b) = (&a[prefix..], &b[prefix..]);
    let same = |x: &[u8], y: &[u8]| x == y;
    match (a.len(), b.len()) {
        (0, 0) => true,
        (la, lb) if la == lb => {
            same(&a[1..], &b[1..])
                || (la >= 2 && a[0] == b[1] && a[1] == b[0] && same(&a[2..], &b[2..]))
        }
        (la, lb) if la == lb + 1 => same(&a[1..], b),
        (la, lb) if la + 1 == lb => same(a, &b[1..]),
        _ => false,
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
    fn trace_and_profile_values() {
        assert!(parse_ranks("R", "0-3,9").unwrap().contains(9));
        let err = parse_ranks("MYRIAD_TRACE_RANKS", "3-1")
            .unwrap_err()
            .to_string();
        assert!(err.contains("MYRIAD_TRACE_RANKS=\"3-1\""), "{err}");
        assert_eq!(parse_mib("M", "2").unwrap(), 2 << 20);
        assert!(parse_mib("MYRIAD_TRACE_MAX_MB", "0")
            .unwrap_err()
            .to_string()
            .contains("MYRIAD_TRACE_MAX_MB"));
        assert_eq!(
            parse_window("W", "100-250.5").unwrap(),
            Window {
                start_ns: 100_000_000,
                end_ns: 250_500_000
            }
        );
        assert_eq!(parse_window("W", " 5- ").unwrap().end_ns, u64::MAX);
        for bad in ["250-100", "5", "a-3", "-1-3", "3-3"] {
            let err = parse_window("MYRIAD_TRACE_WINDOW", bad)
                .unwrap_err()
                .to_string();
            assert!(err.contains("MYRIAD_TRACE_WINDOW"), "{err}");
        }
        assert_eq!(parse_profile("P", "1").unwrap(), Some(ProfileTo::Stderr));
        assert_eq!(parse_profile("P", "off").unwrap(), None);
        assert_eq!(
            parse_profile("P", "./p.txt").unwrap(),
            Some(ProfileTo::File("./p.txt".into()))
        );
        let err = parse_profile("MYRIAD_PROFILE", "maybe")
            .unwrap_err()
            .to_string();
        assert!(err.contains("MYRIAD_PROFILE=\"maybe\""), "{err}");
    }

    #[test]
    fn counts_and_bools() {
        assert_eq!(parse_count("R", "1_000").unwrap(), 1000);
        assert!(parse_count("MYRIAD_RANKS", "0").is_err());
        assert!(parse_count("MYRIAD_RANKS", "-3").is_err());
        assert!(parse_bool("B", "off").is_ok_and(|b| !b));
        assert!(parse_bool("MYRIAD_BIND", "maybe").is_err());
    }

    fn flags(args: &[&str]) -> Flags {
        Flags::parse(args.iter().map(|s| s.to_string()))
    }

    #[test]
    fn runtime_flags() {
        let f = flags(&["prog", "--ranks", "12", "--size=3", "--workers=2"]);
        assert_eq!(f.ranks.as_deref(), Some("12"));
        assert_eq!(f.workers.as_deref(), Some("2"));
        assert!(f.error.is_none());
        // The last one wins; values are checked later, as numbers.
        let f = flags(&["--ranks", "1", "--ranks=7", "--workers", "-2"]);
        assert_eq!(f.ranks.as_deref(), Some("7"));
        assert_eq!(f.workers.as_deref(), Some("-2"));
        assert!(f.error.is_none());
    }

    #[test]
    fn slips_of_runtime_flags_are_errors() {
        for (arg, meant) in [
            ("--rank", "--ranks"),
            ("--rank=3", "--ranks"),
            ("--RANKS", "--ranks"),
            ("-ranks", "--ranks"),
            ("---ranks", "--ranks"),
            ("--rnaks", "--ranks"),
            ("--nranks", "--ranks"),
            ("--ranls", "--ranks"),
            ("--worker", "--workers"),
            ("--Workers", "--workers"),
            ("--wokers", "--workers"),
            ("--workres", "--workers"),
            ("--workerss", "--workers"),
        ] {
            let f = flags(&["prog", "--number", "7", arg, "3"]);
            let err = f.error.unwrap_or_else(|| panic!("{arg} accepted"));
            let name = arg.split('=').next().unwrap();
            assert!(
                err.contains(&format!("{name:?}")) && err.contains(meant),
                "{arg}: {err}"
            );
        }
    }

    #[test]
    fn the_programs_flags_are_left_alone() {
        // Flags of the examples and of the test harness.
        let f = flags(&[
            "prog",
            "--n",
            "64",
            "--ranks-per-worker",
            "3",
            "--max-ranks=64",
            "--hybrid-ranks",
            "2",
            "--tasks",
            "4",
            "--number",
            "7",
            "--sizes",
            "8,1024",
            "--laps",
            "3",
            "--rounds",
            "3",
            "--exact",
            "--test-threads=1",
            "-n",
            "4",
            "ranks",
            "-",
        ]);
        assert!(f.error.is_none(), "{:?}", f.error);
        assert!(f.ranks.is_none() && f.workers.is_none());
        // After `--`, even the runtime's own flags are the program's.
        let f = flags(&["--ranks", "2", "--", "--rank", "--workers", "x"]);
        assert!(f.error.is_none(), "{:?}", f.error);
        assert_eq!(f.ranks.as_deref(), Some("2"));
        assert!(f.workers.is_none());
    }

    #[test]
    fn a_runtime_flag_needs_its_value() {
        let err = flags(&["prog", "--workers"]).error.unwrap();
        assert!(err.contains("--workers needs a value"), "{err}");
        // The next argument is the value, whatever it looks like.
        let f = flags(&["--ranks", "--workers", "2"]);
        assert_eq!(f.ranks.as_deref(), Some("--workers"));
    }

    #[test]
    fn one_edit() {
        assert!(within_one_edit("ranks", "ranks"));
        assert!(within_one_edit("rank", "ranks"));
        assert!(within_one_edit("ranks", "rank"));
        assert!(within_one_edit("rnaks", "ranks"));
        assert!(within_one_edit("ranka", "ranks"));
        assert!(within_one_edit("aranks", "ranks"));
        assert!(!within_one_edit("tasks", "ranks"));
        assert!(!within_one_edit("rans", "workers"));
        assert!(!within_one_edit("", "ranks"));
        assert!(!within_one_edit("knars", "ranks"));
    }
}
