//! Which algorithm a collective call runs.
//!
//! In order: the algorithm given for the call, the one set for the
//! communicator ([`Selection::set`], from
//! `CommunicatorCollectives::set_collective_algorithm`), the one named by
//! `MYRIAD_COLL_<COLLECTIVE>` (checked when a job starts: an unknown name is
//! a configuration error listing the valid ones), else the selector's choice
//! ([`Selection::resolve`], rules in the README).
//!
//! Round-based shared-memory (`shm`) algorithms need every member of the
//! communicator in this process (its [`Locality`]): the selector picks them
//! only there, and an explicit `shm` (for the call, the communicator or the
//! environment) on a communicator that spans processes is an error that
//! names the communicator and its process count. Elsewhere the selector
//! picks `hier` (hierarchical: `hier.rs`) for the collectives that have it
//! when some process holds several members, else message-based algorithms
//! ([`select_spanning`]); see [`select`].

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicU16, AtomicU8, Ordering};
use std::sync::OnceLock;

use crate::comm::locality::Locality;
use crate::error::{ArgError, Error};

macro_rules! named_enum {
    ($(#[$meta:meta])* $vis:vis enum $name:ident { $($(#[$vm:meta])* $variant:ident => $text:literal,)* }) => {
        $(#[$meta])*
        $vis enum $name { $($(#[$vm])* $variant,)* }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)*];

            /// The name used in environment variables and messages.
            pub fn name(self) -> &'static str {
                match self { $($name::$variant => $text,)* }
            }

            /// [`name`](Self::name) as a wait's label in deadlock reports.
            #[allow(dead_code)]
            pub(crate) fn label(self) -> crate::sched::rank::Label {
                match self { $($name::$variant => &$text,)* }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

named_enum! {
    /// The collective operations, for algorithm selection and reports.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum Collective {
        /// `barrier`.
        Barrier => "barrier",
        /// `broadcast_into`.
        Broadcast => "broadcast",
        /// `gather_into(_root)`.
        Gather => "gather",
        /// `gather_varcount_into(_root)` (Gatherv).
        GatherVarcount => "gather_varcount",
        /// `scatter_into(_root)`.
        Scatter => "scatter",
        /// `scatter_varcount_into(_root)` (Scatterv).
        ScatterVarcount => "scatter_varcount",
        /// `all_gather_into`.
        AllGather => "all_gather",
        /// `all_gather_varcount_into`.
        AllGatherVarcount => "all_gather_varcount",
        /// `all_to_all_into`.
        AllToAll => "all_to_all",
        /// `all_to_all_varcount_into`.
        AllToAllVarcount => "all_to_all_varcount",
        /// `reduce_into(_root)`.
        Reduce => "reduce",
        /// `all_reduce_into`.
        AllReduce => "all_reduce",
        /// `reduce_scatter_block_into`.
        ReduceScatterBlock => "reduce_scatter_block",
        /// `scan_into`.
        Scan => "scan",
        /// `exclusive_scan_into`.
        ExclusiveScan => "exclusive_scan",
        /// Communicator creation (`duplicate`, `split_*`).
        CommCreate => "communicator_create",
        /// Window creation (`create_window`, `allocate_window`, ...).
        WindowCreate => "window_create",
    }
}

named_enum! {
    /// Collective algorithms, selectable by name.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum Algorithm {
        /// Let the selector choose.
        Auto => "auto",
        /// The scheduler-managed shared-memory path (ranks of one process).
        SharedMemory => "shm",
        /// The root (or every rank) talks to every other rank directly.
        Linear => "linear",
        /// A binomial tree.
        Binomial => "binomial",
        /// Seed 001's symmetric broadcast: the root scatters p pieces, every
        /// rank forwards its piece to all (scatter + allgather).
        Symmetric => "symmetric",
        /// Dissemination barrier (log2 p rounds).
        Dissemination => "dissemination",
        /// A ring.
        Ring => "ring",
        /// Recursive doubling.
        RecursiveDoubling => "recursive_doubling",
        /// Pairwise exchange.
        Pairwise => "pairwise",
        /// Seed 002's binomial Gatherv, the root first broadcasting counts and
        /// displacements.
        BinomialConservative => "binomial_conservative",
        /// Seed 002's binomial Gatherv, every rank already knowing the counts.
        BinomialAggressive => "binomial_aggressive",
        /// A reduce followed by a broadcast.
        ReduceBroadcast => "reduce_broadcast",
        /// A gather followed by a broadcast.
        GatherBroadcast => "gather_broadcast",
        /// A reduce followed by a scatter.
        ReduceScatter => "reduce_scatter",
        /// Hierarchical: a shared-memory step among each process's members,
        /// a message-based step among one leader per process, a
        /// shared-memory step back (`coll/hier.rs`).
        Hierarchical => "hier",
    }
}

impl Collective {
    /// The collective's position in [`Collective::ALL`] (declaration order).
    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// The algorithms this collective has (besides `auto`).
    pub fn algorithms(self) -> &'static [Algorithm] {
        use Algorithm::*;
        match self {
            Collective::Barrier => &[SharedMemory, Dissemination, Linear, Hierarchical],
            Collective::Broadcast => &[SharedMemory, Linear, Binomial, Symmetric, Hierarchical],
            Collective::Gather => &[SharedMemory, Linear, Binomial, Hierarchical],
            Collective::GatherVarcount => &[
                SharedMemory,
                Linear,
                BinomialConservative,
                BinomialAggressive,
                Hierarchical,
            ],
            Collective::Scatter => &[SharedMemory, Linear, Binomial, Hierarchical],
            Collective::ScatterVarcount => &[SharedMemory, Linear],
            Collective::AllGather => &[
                SharedMemory,
                Ring,
                RecursiveDoubling,
                GatherBroadcast,
                Hierarchical,
            ],
            Collective::AllGatherVarcount => &[SharedMemory, Ring, GatherBroadcast],
            Collective::AllToAll => &[SharedMemory, Linear, Pairwise],
            Collective::AllToAllVarcount => &[SharedMemory, Linear, Pairwise],
            Collective::Reduce => &[SharedMemory, Linear, Binomial, Hierarchical],
            Collective::AllReduce => &[
                SharedMemory,
                RecursiveDoubling,
                ReduceBroadcast,
                Hierarchical,
            ],
            Collective::ReduceScatterBlock => &[SharedMemory, ReduceScatter],
            Collective::Scan => &[SharedMemory, Linear, RecursiveDoubling],
            Collective::ExclusiveScan => &[SharedMemory, Linear, RecursiveDoubling],
            Collective::CommCreate | Collective::WindowCreate => &[SharedMemory],
        }
    }

    /// The environment variable naming this collective's algorithm.
    pub fn env_var(self) -> String {
        format!("MYRIAD_COLL_{}", self.name().to_ascii_uppercase())
    }

    /// Checks that `algorithm` is one of this collective's.
    pub fn check(self, algorithm: Algorithm) -> Result<(), Error> {
        if algorithm == Algorithm::Auto || self.algorithms().contains(&algorithm) {
            Ok(())
        } else {
            Err(Error::Arg(ArgError::NoSuchAlgorithm {
                collective: self.name(),
                algorithm: algorithm.name(),
                valid: names(self.algorithms()),
            }))
        }
    }
}

fn names(algorithms: &[Algorithm]) -> Vec<&'static str> {
    algorithms.iter().map(|a| a.name()).collect()
}

impl FromStr for Collective {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        let s = s.trim().to_ascii_lowercase();
        Collective::ALL
            .iter()
            .copied()
            .find(|c| c.name() == s)
            .ok_or_else(|| {
                Error::Arg(ArgError::UnknownCollective {
                    valid: Collective::ALL.iter().map(|c| c.name()).collect(),
                    name: s,
                })
            })
    }
}

impl Algorithm {
    /// Parses `name` as an algorithm of `collective`.
    pub fn parse_for(collective: Collective, name: &str) -> Result<Algorithm, Error> {
        let wanted = name.trim().to_ascii_lowercase();
        let found = Algorithm::ALL.iter().copied().find(|a| a.name() == wanted);
        match found {
            Some(a) if collective.check(a).is_ok() => Ok(a),
            _ => Err(Error::Arg(ArgError::NotAnAlgorithm {
                name: name.into(),
                collective: collective.name(),
                valid: names(collective.algorithms()),
            })),
        }
    }

    fn index(self) -> u8 {
        Algorithm::ALL.iter().position(|&a| a == self).unwrap_or(0) as u8
    }

    fn from_index(i: u8) -> Algorithm {
        Algorithm::ALL
            .get(i as usize)
            .copied()
            .unwrap_or(Algorithm::Auto)
    }
}

/// The prefix of the variables that choose collective algorithms.
const ENV_PREFIX: &str = "MYRIAD_COLL_";

/// The `MYRIAD_COLL_*` choices of this process, parsed once. A set
/// `MYRIAD_COLL_<NAME>` whose NAME is no collective is an error too (it
/// would otherwise be ignored), naming every collective's variable.
pub(crate) fn env_defaults() -> Result<&'static [Algorithm], Error> {
    static DEFAULTS: OnceLock<Result<Vec<Algorithm>, Error>> = OnceLock::new();
    DEFAULTS
        .get_or_init(|| {
            check_env_names(std::env::vars_os().filter_map(|(k, v)| {
                let set = !v.to_string_lossy().trim().is_empty();
                k.into_string().ok().filter(|_| set)
            }))?;
            Collective::ALL
                .iter()
                .map(|&c| match std::env::var(c.env_var()) {
                    Ok(v) if !v.trim().is_empty() => Algorithm::parse_for(c, &v)
                        .map_err(|e| Error::config(format!("{}={v:?}: {e}", c.env_var()))),
                    _ => Ok(Algorithm::Auto),
                })
                .collect()
        })
        .as_deref()
        .map_err(Clone::clone)
}

/// Checks that every `MYRIAD_COLL_*` among the names of the set variables
/// names a collective.
fn check_env_names(mut names: impl Iterator<Item = String>) -> Result<(), Error> {
    let known: Vec<String> = Collective::ALL.iter().map(|c| c.env_var()).collect();
    match names.find(|n| n.starts_with(ENV_PREFIX) && !known.contains(n)) {
        None => Ok(()),
        Some(name) => Err(Error::config(format!(
            "{name} names no collective; the variables are {}",
            known.join(", ")
        ))),
    }
}

/// The algorithm choices of one communicator, and the selector's answers.
///
/// The algorithm of a call with no explicit choice is a pure function of
/// the collective, the communicator's choice for it ([`set`](Self::set) or
/// the environment), the communicator's size and locality (fixed), and the
/// byte class of the call ([`byte_class`]). `resolve` caches it per
/// collective, in one entry when the answer is the same for every byte
/// class (an explicit choice, any communicator over 32 ranks), else per
/// byte class. Each entry is tagged with the choice it was computed under,
/// so that a later [`set`](Self::set) invalidates it (the tag no longer
/// matches) without a race: an entry is only ever used with the choice it
/// was computed from.
#[derive(Debug)]
pub(crate) struct Selection {
    chosen: [AtomicU8; COLLECTIVES],
    /// Per collective, a row of `ROW` entries: the answer for every byte
    /// class, then one per class; each `(choice index + 1) << 8 |
    /// algorithm index`, 0 for none yet.
    cache: [AtomicU16; COLLECTIVES * ROW],
}

/// Number of collectives (fixed-size tables index by `Collective::index`
/// without a bounds check).
const COLLECTIVES: usize = Collective::ALL.len();

/// Entries per collective in [`Selection`]'s cache.
const ROW: usize = 1 + BYTE_CLASSES;

/// Byte classes of [`byte_class`].
const BYTE_CLASSES: usize = 7;

/// The class of a call's bytes: within one class [`select_local`] and
/// [`select_spanning`] choose alike, for every collective and size (their
/// rules compare bytes with these bounds only; a test checks it). Calls
/// without a byte count select as for 0 bytes.
#[inline]
fn byte_class(bytes: Option<usize>) -> usize {
    let b = bytes.unwrap_or(0);
    CLASS_BOUNDS
        .iter()
        .position(|&bound| b <= bound)
        .unwrap_or(BYTE_CLASSES - 1)
}

/// Upper bounds (inclusive) of byte classes 0 to 5; class 6 is the rest.
const CLASS_BOUNDS: [usize; BYTE_CLASSES - 1] = {
    const KIB: usize = 1024;
    const MIB: usize = 1024 * KIB;
    [64, KIB, 2 * KIB, 64 * KIB - 1, MIB - 1, 4 * MIB - 1]
};

/// A byte count in each class (its smallest).
fn class_members() -> impl Iterator<Item = usize> {
    std::iter::once(0).chain(CLASS_BOUNDS.iter().map(|b| b + 1))
}

impl Selection {
    /// Starts from the environment's choices (`auto` where none).
    pub(crate) fn from_env() -> Selection {
        let defaults = env_defaults().unwrap_or(&[]);
        Selection::with_choices(|i| defaults.get(i).copied().unwrap_or(Algorithm::Auto))
    }

    /// A selection whose choice for collective number `i` is `choice(i)`.
    fn with_choices(choice: impl Fn(usize) -> Algorithm) -> Selection {
        Selection {
            chosen: std::array::from_fn(|i| AtomicU8::new(choice(i).index())),
            cache: std::array::from_fn(|_| AtomicU16::new(0)),
        }
    }

    /// Sets the algorithm of `collective` for this communicator, of
    /// `locality`, named `name()` (for errors).
    pub(crate) fn set(
        &self,
        collective: Collective,
        algorithm: Algorithm,
        locality: &Locality,
        name: impl FnOnce() -> String,
    ) -> Result<(), Error> {
        collective.check(algorithm)?;
        check_local(collective, algorithm, locality, name)?;
        let i = collective.index();
        self.chosen[i].store(algorithm.index(), Ordering::Relaxed);
        Ok(())
    }

    /// The algorithm a call runs on a communicator of `size` ranks and
    /// `locality`, named `name()` (only for errors): this selection's
    /// communicator, whose size and locality never change (the cache
    /// relies on it).
    #[inline]
    pub(crate) fn resolve(
        &self,
        collective: Collective,
        requested: Algorithm,
        size: usize,
        bytes: Option<usize>,
        locality: &Locality,
        name: impl FnOnce() -> String,
    ) -> Result<Algorithm, Error> {
        if requested != Algorithm::Auto {
            collective.check(requested)?;
            check_local(collective, requested, locality, name)?;
            return Ok(requested);
        }
        let i = collective.index();
        let choice = self.chosen[i].load(Ordering::Relaxed);
        let tag = (u16::from(choice) + 1) << 8;
        let row = i * ROW;
        let any = self.cache[row].load(Ordering::Relaxed);
        if any & 0xff00 == tag {
            return Ok(Algorithm::from_index(any as u8));
        }
        let class = byte_class(bytes);
        let cached = self.cache[row + 1 + class].load(Ordering::Relaxed);
        if cached & 0xff00 == tag {
            return Ok(Algorithm::from_index(cached as u8));
        }
        self.resolve_uncached(collective, choice, size, bytes, locality, name)
    }

    /// [`resolve`](Self::resolve) when the cache has no answer: decides
    /// and caches. Out of line, so that its locals stay out of the frames
    /// of every collective call.
    #[cold]
    #[inline(never)]
    fn resolve_uncached(
        &self,
        collective: Collective,
        choice: u8,
        size: usize,
        bytes: Option<usize>,
        locality: &Locality,
        name: impl FnOnce() -> String,
    ) -> Result<Algorithm, Error> {
        let i = collective.index();
        let tag = (u16::from(choice) + 1) << 8;
        let row = i * ROW;
        let class = byte_class(bytes);
        let chosen = Algorithm::from_index(choice);
        let algorithm = Self::resolve_choice(collective, chosen, size, bytes, locality, name)?;
        // The same answer for every byte class: one entry serves them all.
        let everywhere = chosen != Algorithm::Auto
            || class_members()
                .all(|b| select(collective, size, Some(b), locality) == Some(algorithm));
        let entry = &self.cache[if everywhere { row } else { row + 1 + class }];
        entry.store(tag | u16::from(algorithm.index()), Ordering::Relaxed);
        Ok(algorithm)
    }

    /// What [`resolve`](Self::resolve) caches: the algorithm of a call
    /// with no explicit choice, under the communicator's choice `chosen`.
    #[cold]
    fn resolve_choice(
        collective: Collective,
        chosen: Algorithm,
        size: usize,
        bytes: Option<usize>,
        locality: &Locality,
        name: impl FnOnce() -> String,
    ) -> Result<Algorithm, Error> {
        if chosen != Algorithm::Auto {
            check_local(collective, chosen, locality, name)?;
            return Ok(chosen);
        }
        select(collective, size, bytes, locality)
            .ok_or_else(|| no_spanning_algorithm(collective, locality, name))
    }
}

/// The selector's choice on a communicator of `size` ranks and `locality`:
/// [`select_local`] where every member is local; where they span
/// processes, `hier` for the collectives that have it when it has a level
/// to use — some process holds several members (fewer leaders than
/// members), or some host runs several of the processes (fewer hosts than
/// leaders: one rank per process, as MPI jobs are usually launched, still
/// keeps a host's traffic on the host) — else [`select_spanning`].
fn select(
    collective: Collective,
    size: usize,
    bytes: Option<usize>,
    locality: &Locality,
) -> Option<Algorithm> {
    let levels = || {
        locality.processes() < size
            || locality
                .hosts()
                .is_some_and(|hosts| hosts.heads().len() < locality.processes())
    };
    if locality.is_all_local() {
        Some(select_local(collective, size, bytes))
    } else if collective.algorithms().contains(&Algorithm::Hierarchical) && levels() {
        Some(Algorithm::Hierarchical)
    } else {
        select_spanning(collective, size, bytes)
    }
}

/// Refuses `shm` on a communicator that is not all local: its rounds meet
/// in this process's memory, which members elsewhere cannot reach.
#[inline]
fn check_local(
    collective: Collective,
    algorithm: Algorithm,
    locality: &Locality,
    name: impl FnOnce() -> String,
) -> Result<(), Error> {
    if algorithm == Algorithm::SharedMemory && !locality.is_all_local() {
        return Err(not_local(collective, locality, name()));
    }
    Ok(())
}

#[cold]
fn not_local(collective: Collective, locality: &Locality, name: String) -> Error {
    let others: Vec<Algorithm> = collective
        .algorithms()
        .iter()
        .copied()
        .filter(|&a| a != Algorithm::SharedMemory)
        .collect();
    Error::Arg(ArgError::NotAllLocal {
        collective: collective.name(),
        communicator: name,
        processes: locality.processes(),
        local: locality.local_count(),
        valid: names(&others),
    })
}

#[cold]
fn no_spanning_algorithm(
    collective: Collective,
    locality: &Locality,
    name: impl FnOnce() -> String,
) -> Error {
    Error::Unsupported {
        what: format!(
            "{collective} on {}, which spans {} processes: it has only a shared-memory \
             algorithm, which needs every member in one process",
            name(),
            locality.processes()
        ),
    }
}

/// The selector for a communicator whose ranks share the process (every
/// communicator today).
///
/// The shared-memory path moves each byte once and parks instead of
/// matching messages; from 8 ranks on it is the fastest or within noise of
/// it in the measured cases, except large broadcasts and mid-size
/// all-gathers on small communicators. On 2 to 4 ranks its fixed costs
/// (a round, per-worker partial results, a shared buffer) lose to a few
/// direct messages. The rules below come from `coll_bench --algorithms`
/// on 2 to 256 ranks of a 2-worker machine (README, "Collective
/// algorithms"). They depend only on what every rank of the call knows
/// alike (the communicator's size, and the bytes of fixed-count calls), so
/// all ranks choose the same algorithm; varcount calls, whose sizes differ
/// between ranks, depend on the size alone.
pub(crate) fn select_local(collective: Collective, size: usize, bytes: Option<usize>) -> Algorithm {
    use Algorithm::*;
    const KIB: usize = 1024;
    const MIB: usize = 1024 * KIB;
    // Every rule below is for 32 ranks or fewer: one test for the rest.
    if size > 32 {
        return SharedMemory;
    }
    let b = bytes.unwrap_or(0);
    match collective {
        Collective::Barrier if size == 2 => Dissemination,
        Collective::Broadcast if size == 2 => Linear,
        Collective::Broadcast if size <= 4 && b <= KIB => Linear,
        Collective::Broadcast if size <= 4 && b < MIB => Binomial,
        Collective::Broadcast if (16..=32).contains(&size) && (MIB..4 * MIB).contains(&b) => {
            Binomial
        }
        Collective::Reduce if size == 4 && b <= 64 => Binomial,
        Collective::Reduce if size == 2 || (size <= 4 && b < MIB) => Linear,
        Collective::AllReduce if size == 2 => RecursiveDoubling,
        Collective::Gather | Collective::Scatter if size <= 4 => Linear,
        Collective::GatherVarcount | Collective::ScatterVarcount if size == 2 => Linear,
        Collective::AllGather if size == 2 => RecursiveDoubling,
        Collective::AllGather
            if (size <= 4 && b >= 64 * KIB) || (size <= 8 && (64 * KIB..MIB).contains(&b)) =>
        {
            Ring
        }
        // The send buffer holds one block per rank.
        Collective::AllToAll if size == 2 && b <= 2 * KIB => Linear,
        Collective::Scan | Collective::ExclusiveScan if size <= 4 && b <= KIB => Linear,
        _ => SharedMemory,
    }
}

/// The flat selector for a communicator whose members live in several
/// processes: message-based algorithms only, over all its ranks (what the
/// leaders of a hierarchical call run among themselves, and what runs where
/// `hier` does not apply, see [`select`]). `None` for a collective that has
/// none (communicator creation).
pub(crate) fn select_spanning(
    collective: Collective,
    size: usize,
    bytes: Option<usize>,
) -> Option<Algorithm> {
    use Algorithm::*;
    // The in-process rules where they pick a message-based algorithm.
    let local = select_local(collective, size, bytes);
    if local != SharedMemory {
        return Some(local);
    }
    Some(match collective {
        Collective::Barrier => Dissemination,
        Collective::Broadcast | Collective::Gather | Collective::Scatter | Collective::Reduce => {
            Binomial
        }
        Collective::GatherVarcount => BinomialConservative,
        Collective::ScatterVarcount => Linear,
        Collective::AllGather
        | Collective::AllReduce
        | Collective::Scan
        | Collective::ExclusiveScan => RecursiveDoubling,
        Collective::AllGatherVarcount => Ring,
        Collective::AllToAll | Collective::AllToAllVarcount => Pairwise,
        Collective::ReduceScatterBlock => ReduceScatter,
        Collective::CommCreate | Collective::WindowCreate => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_selector_picks_algorithms_the_collective_has() {
        for &c in Collective::ALL {
            for size in [1, 2, 3, 4, 8, 16, 32, 64, 1024] {
                for bytes in [
                    None,
                    Some(0),
                    Some(8),
                    Some(1024),
                    Some(65536),
                    Some(1 << 20),
                ] {
                    let a = select_local(c, size, bytes);
                    assert!(c.algorithms().contains(&a), "{c} {size} {bytes:?}: {a}");
                }
            }
        }
        // Large communicators keep the shared-memory path.
        assert_eq!(
            select_local(Collective::AllReduce, 1024, Some(8)),
            Algorithm::SharedMemory
        );
        assert_eq!(
            select_local(Collective::Broadcast, 16, Some(1 << 20)),
            Algorithm::Binomial
        );
        assert_eq!(
            select_local(Collective::GatherVarcount, 4, None),
            Algorithm::SharedMemory
        );
    }

    /// A selection as `MYRIAD_COLL_<NAME>` would start it: `chosen` for
    /// every collective that has it, `auto` for the others.
    fn selection_of(chosen: Algorithm) -> Selection {
        Selection::with_choices(|i| {
            if Collective::ALL[i].algorithms().contains(&chosen) {
                chosen
            } else {
                Algorithm::Auto
            }
        })
    }

    /// The locality of the world communicator of a job of `blocks`, from
    /// process 0.
    fn world_of(blocks: &[u32]) -> Locality {
        use crate::comm::Members;
        use crate::identity::{ProcessId, Processes};
        let processes = Processes::from_blocks(blocks, ProcessId::new(0));
        Locality::new(&Members::World(processes.world_size()), &processes)
    }

    const SIZES: [usize; 7] = [2, 3, 4, 8, 32, 64, 1024];
    const BYTES: [Option<usize>; 5] = [None, Some(0), Some(8), Some(65536), Some(1 << 20)];

    #[test]
    fn auto_picks_shm_only_where_every_member_is_local() {
        let name = || "MPI_COMM_WORLD".to_string();
        for &c in Collective::ALL {
            for size in SIZES {
                // A selection belongs to one communicator: one size and
                // locality (what its cache relies on).
                let (auto_here, auto_spanning) =
                    (selection_of(Algorithm::Auto), selection_of(Algorithm::Auto));
                let here = world_of(&[size as u32]);
                let half = (size / 2) as u32;
                let spanning = world_of(&[half, size as u32 - half]);
                for bytes in BYTES {
                    // One process: today's choices, unchanged.
                    let a = auto_here.resolve(c, Algorithm::Auto, size, bytes, &here, name);
                    assert_eq!(a.unwrap(), select_local(c, size, bytes));
                    // Two processes: never shm, and an algorithm of `c`.
                    let a = auto_spanning.resolve(c, Algorithm::Auto, size, bytes, &spanning, name);
                    if c == Collective::CommCreate || c == Collective::WindowCreate {
                        let text = a.unwrap_err().to_string();
                        assert!(text.contains("spans 2 processes"), "{text}");
                        continue;
                    }
                    let a = a.unwrap();
                    assert_ne!(a, Algorithm::SharedMemory, "{c} {size} {bytes:?}");
                    assert!(c.algorithms().contains(&a), "{c} {size} {bytes:?}: {a}");
                }
            }
        }
    }

    #[test]
    fn an_explicit_shm_across_processes_is_an_error_naming_why() {
        let spanning = world_of(&[3, 2, 4]);
        let name = || "split of MPI_COMM_WORLD".to_string();
        let expect_refusal = |result: Result<Algorithm, Error>| {
            let err = result.unwrap_err();
            assert_eq!(err.class(), crate::error::ErrorClass::Arg);
            let text = err.to_string();
            assert!(
                text.contains("all_reduce: algorithm shm needs every member")
                    && text.contains("split of MPI_COMM_WORLD spans 3 processes")
                    && text.contains("3 of its members in this one")
                    && text.contains("recursive_doubling, reduce_broadcast"),
                "{text}"
            );
        };
        let c = Collective::AllReduce;
        // For the call.
        let auto = selection_of(Algorithm::Auto);
        expect_refusal(auto.resolve(c, Algorithm::SharedMemory, 9, Some(8), &spanning, name));
        // For the communicator: refused when set, nothing recorded.
        expect_refusal(
            auto.set(c, Algorithm::SharedMemory, &spanning, name)
                .map(|()| Algorithm::SharedMemory),
        );
        assert_eq!(
            auto.resolve(c, Algorithm::Auto, 9, Some(8), &spanning, name)
                .unwrap(),
            Algorithm::Hierarchical
        );
        // From the environment (`MYRIAD_COLL_ALL_REDUCE=shm`).
        let env = selection_of(Algorithm::SharedMemory);
        expect_refusal(env.resolve(c, Algorithm::Auto, 9, Some(8), &spanning, name));
        // Message-based choices stay allowed, and shm where all is local.
        assert_eq!(
            env.resolve(c, Algorithm::ReduceBroadcast, 9, Some(8), &spanning, name)
                .unwrap(),
            Algorithm::ReduceBroadcast
        );
        let here = world_of(&[9]);
        assert_eq!(
            env.resolve(c, Algorithm::Auto, 9, Some(8), &here, name)
                .unwrap(),
            Algorithm::SharedMemory
        );
        auto.set(c, Algorithm::SharedMemory, &here, name).unwrap();
    }

    /// Across processes `auto` is `hier` for the collectives that have it
    /// when some process holds several members or some host several
    /// processes, the flat selector's choice when every process holds one
    /// on a host of its own (a hierarchy would add steps for nothing) and
    /// for the other collectives.
    #[test]
    fn auto_picks_hier_where_processes_hold_several_members() {
        let name = || "MPI_COMM_WORLD".to_string();
        let several = world_of(&[3, 1, 2]);
        let single = world_of(&[1, 1, 1]);
        for &c in Collective::ALL {
            let has = c.algorithms().contains(&Algorithm::Hierarchical);
            for bytes in BYTES {
                let sel = selection_of(Algorithm::Auto);
                let a = sel.resolve(c, Algorithm::Auto, 6, bytes, &several, name);
                if has {
                    assert_eq!(a.unwrap(), Algorithm::Hierarchical, "{c} {bytes:?}");
                } else if let Ok(a) = a {
                    assert_eq!(Some(a), select_spanning(c, 6, bytes), "{c} {bytes:?}");
                }
                let sel = selection_of(Algorithm::Auto);
                if let Ok(a) = sel.resolve(c, Algorithm::Auto, 3, bytes, &single, name) {
                    assert_eq!(Some(a), select_spanning(c, 3, bytes), "{c} {bytes:?}");
                }
            }
        }
        // One member per process: `hier` where a host runs several of the
        // processes, flat where each process has a host of its own.
        let hosts_of = |hosts: &[u32]| {
            use crate::comm::Members;
            use crate::identity::{ProcessId, Processes};
            let processes =
                Processes::from_blocks(&[1, 1, 1, 1], ProcessId::new(0)).with_hosts(hosts);
            Locality::new(&Members::World(4), &processes)
        };
        let (shared, apart) = (hosts_of(&[0, 0, 1, 1]), hosts_of(&[0, 1, 2, 3]));
        for &c in Collective::ALL {
            let has = c.algorithms().contains(&Algorithm::Hierarchical);
            let sel = selection_of(Algorithm::Auto);
            let a = sel.resolve(c, Algorithm::Auto, 4, Some(8), &shared, name);
            if has {
                assert_eq!(a.unwrap(), Algorithm::Hierarchical, "{c} on 2 hosts");
            }
            let sel = selection_of(Algorithm::Auto);
            if let Ok(a) = sel.resolve(c, Algorithm::Auto, 4, Some(8), &apart, name) {
                assert_eq!(Some(a), select_spanning(c, 4, Some(8)), "{c} on 4 hosts");
            }
        }
        // Explicit `hier`, also where every member is local (one process:
        // the local step alone); flat algorithms stay selectable.
        let here = world_of(&[6]);
        let sel = selection_of(Algorithm::Auto);
        let c = Collective::Broadcast;
        for (algorithm, locality) in [
            (Algorithm::Hierarchical, &here),
            (Algorithm::Binomial, &several),
        ] {
            sel.set(c, algorithm, locality, name).unwrap();
            assert_eq!(
                sel.resolve(c, Algorithm::Auto, 6, Some(8), locality, name)
                    .unwrap(),
                algorithm
            );
        }
        let text = Algorithm::parse_for(Collective::AllToAll, "hier")
            .unwrap_err()
            .to_string();
        assert!(text.contains("linear, pairwise"), "{text}");
        assert_eq!(
            Algorithm::parse_for(Collective::Gather, "HIER").unwrap(),
            Algorithm::Hierarchical
        );
    }

    #[test]
    fn names_parse_and_errors_list_the_valid_ones() {
        assert_eq!(
            Algorithm::parse_for(Collective::Broadcast, "Symmetric").unwrap(),
            Algorithm::Symmetric
        );
        let err = Algorithm::parse_for(Collective::Broadcast, "ring").unwrap_err();
        let text = err.to_string();
        assert!(text.contains("linear, binomial, symmetric"), "{text}");
        assert_eq!(Collective::AllReduce.env_var(), "MYRIAD_COLL_ALL_REDUCE");
        assert_eq!(
            "gather_varcount".parse::<Collective>().unwrap(),
            Collective::GatherVarcount
        );
    }

    #[test]
    fn variables_that_name_no_collective_are_errors() {
        let names = |n: &[&str]| check_env_names(n.iter().map(|s| s.to_string()));
        assert!(names(&["PATH", "MYRIAD_RANKS", "MYRIAD_COLL_BROADCAST"]).is_ok());
        assert!(names(&["MYRIAD_COLL_ALL_TO_ALL_VARCOUNT", "MYRIAD_COLLX"]).is_ok());
        for bad in [
            "MYRIAD_COLL_BRODCAST",
            "MYRIAD_COLL_broadcast",
            "MYRIAD_COLL_",
        ] {
            let text = names(&["MYRIAD_COLL_GATHER", bad]).unwrap_err().to_string();
            assert!(
                text.contains(&format!("{bad} names no collective")),
                "{text}"
            );
            assert!(
                text.contains("MYRIAD_COLL_BARRIER, MYRIAD_COLL_BROADCAST")
                    && text.contains("MYRIAD_COLL_COMMUNICATOR_CREATE"),
                "{text}"
            );
        }
    }

    /// Within a byte class the selectors choose alike: the cache keyed by
    /// class answers what they would (fails if a rule's bound falls inside
    /// a class).
    #[test]
    fn byte_classes_never_split_a_rule() {
        let mut bytes: Vec<usize> = (0..=4100).collect();
        for shift in 11..24 {
            let p = 1usize << shift;
            bytes.extend([p - 1, p, p + 1, p + p / 2]);
        }
        bytes.extend([3 << 20, (4 << 20) - 1, 4 << 20, (4 << 20) + 1, 1 << 30]);
        for &c in Collective::ALL {
            for size in (1..=40).chain([64, 1024]) {
                let mut seen: [Option<(usize, Algorithm, Option<Algorithm>)>; BYTE_CLASSES] =
                    [None; BYTE_CLASSES];
                for &b in &bytes {
                    let here = (
                        select_local(c, size, Some(b)),
                        select_spanning(c, size, Some(b)),
                    );
                    match seen[byte_class(Some(b))] {
                        None => seen[byte_class(Some(b))] = Some((b, here.0, here.1)),
                        Some((first, local, spanning)) => assert_eq!(
                            (local, spanning),
                            here,
                            "{c} on {size} ranks: {first} and {b} bytes share a class"
                        ),
                    }
                }
                assert_eq!(byte_class(None), byte_class(Some(0)));
            }
        }
    }

    /// A cached answer does not outlive the choice it was made under.
    #[test]
    fn setting_an_algorithm_invalidates_the_cached_selection() {
        let here = world_of(&[64]);
        let name = || "MPI_COMM_WORLD".to_string();
        let c = Collective::AllReduce;
        let sel = selection_of(Algorithm::Auto);
        let resolve = || {
            sel.resolve(c, Algorithm::Auto, 64, Some(8), &here, name)
                .unwrap()
        };
        assert_eq!(resolve(), Algorithm::SharedMemory);
        assert_eq!(resolve(), Algorithm::SharedMemory);
        sel.set(c, Algorithm::RecursiveDoubling, &here, name)
            .unwrap();
        assert_eq!(resolve(), Algorithm::RecursiveDoubling);
        sel.set(c, Algorithm::ReduceBroadcast, &here, name).unwrap();
        assert_eq!(resolve(), Algorithm::ReduceBroadcast);
        sel.set(c, Algorithm::Auto, &here, name).unwrap();
        assert_eq!(resolve(), Algorithm::SharedMemory);
        // Other collectives and byte classes kept their own answers.
        let b = sel.resolve(Collective::Barrier, Algorithm::Auto, 64, None, &here, name);
        assert_eq!(b.unwrap(), Algorithm::SharedMemory);
    }
}
