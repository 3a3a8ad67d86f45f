//! Collective checking (seed 004's "collective-communication debugging").
//!
//! Every collective call carries a [`Signature`]: the operation, its root,
//! the element size and count where every rank knows them, and the
//! communicator's collective sequence number. The first rank to reach call
//! number `seq` of a communicator records its signature and call site; every
//! other rank compares its own. A rank that calls another collective, or the
//! same one with another root or size, gets an error naming both ranks, both
//! operations and both call sites, instead of a hang or garbage.
//!
//! Cost: one spin-locked hash-map operation per call and rank (tens of
//! nanoseconds). `MYRIAD_CHECK_COLLECTIVES=0` turns it off.

use std::fmt;
use std::panic::Location;

use super::ring::SeqMap;
use super::Kind;
use crate::datatype::copy::Layout;
use crate::datatype::TypeMap;
use crate::error::{CollectiveError, Error};
use crate::sync::spin::SpinLock;
use crate::Rank;

/// What every rank of a collective call must agree on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Signature {
    pub(crate) kind: Kind,
    /// The root, for rooted collectives.
    pub(crate) root: Option<Rank>,
    /// Bytes of data per rank (or per pair), where every rank knows them.
    pub(crate) bytes: Option<usize>,
    /// A hash of the data's type signature, where every rank passes data of
    /// the same type.
    pub(crate) types: Option<u64>,
    /// The algorithm the rank resolved (filled in by `begin`).
    pub(crate) algorithm: Option<super::Algorithm>,
}

impl Signature {
    /// A signature of `kind` with an optional root and size.
    pub(crate) fn new(kind: Kind, root: Option<Rank>, bytes: Option<usize>) -> Signature {
        Signature {
            kind,
            root,
            bytes,
            types: None,
            algorithm: None,
        }
    }

    /// The same, also checking the type signature of `data`.
    #[inline]
    pub(crate) fn typed(mut self, data: &Layout) -> Signature {
        self.types = Some(type_hash(data.ty.map()));
        self
    }
}

impl fmt::Display for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kind.name())?;
        if let Some(root) = self.root {
            write!(f, " with root {root}")?;
        }
        if let Some(bytes) = self.bytes {
            write!(f, " of {bytes} bytes")?;
        }
        if self.types.is_some() {
            write!(
                f,
                " (type signature {:#x})",
                self.types.unwrap_or(0) & 0xffff
            )?;
        }
        if let Some(algorithm) = self.algorithm {
            write!(f, " (algorithm {algorithm})")?;
        }
        Ok(())
    }
}

/// FNV-1a's offset basis and prime.
const FNV_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0100_0000_01b3;

/// A hash of a type signature, equal for types with the same sequence of
/// base types per element (FNV-1a: a few instructions for a primitive).
/// (Inlined for a signature of one run, every primitive's: what
/// [`type_hash_runs`] gives it, without a call.)
#[inline]
pub(crate) fn type_hash(map: &TypeMap) -> u64 {
    match map.signature() {
        [run] => (FNV_BASIS ^ (run.kind as u64 + 1)).wrapping_mul(FNV_PRIME),
        _ => type_hash_runs(map),
    }
}

/// [`type_hash`] of any signature.
#[inline(never)]
fn type_hash_runs(map: &TypeMap) -> u64 {
    let mut h: u64 = FNV_BASIS;
    let mut mix = |v: u64| {
        h ^= v;
        h = h.wrapping_mul(FNV_PRIME);
    };
    match map.uniform_kind() {
        Some(kind) => mix(kind as u64 + 1),
        None => {
            for run in map.signature() {
                mix(run.kind as u64 + 1);
                mix(run.count as u64);
            }
        }
    }
    h
}

struct First {
    signature: Signature,
    rank: Rank,
    site: &'static Location<'static>,
    /// Ranks still to check against it.
    remaining: u32,
}

/// The checker of one communicator.
pub(crate) struct Checker {
    enabled: bool,
    calls: SpinLock<SeqMap<First>>,
}

impl fmt::Debug for Checker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Checker")
            .field("enabled", &self.enabled)
            .finish()
    }
}

impl Checker {
    pub(crate) fn new(enabled: bool) -> Checker {
        Checker {
            enabled,
            calls: SpinLock::new(SeqMap::default()),
        }
    }

    /// Whether full checking is on (`MYRIAD_CHECK_COLLECTIVES`).
    pub(crate) fn enabled(&self) -> bool {
        self.enabled
    }

    /// The first caller of call `seq`, if it checked here and others are
    /// still to come.
    pub(crate) fn first_of(
        &self,
        seq: u32,
    ) -> Option<(Signature, Rank, &'static Location<'static>)> {
        let calls = self.calls.lock();
        calls.get(&seq).map(|f| (f.signature, f.rank, f.site))
    }

    /// Checks call `seq` by `rank`, where `size` ranks of the communicator
    /// check in here (its members in this process).
    ///
    /// The first caller of a call also looks at `rounds`: calls that run a
    /// shared-memory algorithm are checked in their round, not here, and a
    /// rank that ran another collective (or algorithm) at the same sequence
    /// number must meet them somewhere. The first shared-memory caller
    /// looks here in turn (`Rounds::join_checked`); each inserts before it
    /// looks, under locks, so at least one of the two sees the other.
    pub(crate) fn check(
        &self,
        seq: u32,
        size: u32,
        rank: Rank,
        signature: Signature,
        site: &'static Location<'static>,
        rounds: &super::round::Rounds,
    ) -> Result<(), Error> {
        if !self.enabled || size == 1 {
            return Ok(());
        }
        let mut calls = self.calls.lock();
        match calls.get_mut(&seq) {
            None => {
                calls.insert(
                    seq,
                    First {
                        signature,
                        rank,
                        site,
                        remaining: size - 1,
                    },
                );
                drop(calls);
                match rounds.first_of(seq) {
                    Some(theirs) if !agree(&theirs.0, &signature) => {
                        Err(mismatch(seq, &theirs, &(signature, rank, site)))
                    }
                    _ => Ok(()),
                }
            }
            Some(first) => {
                let mismatch = !agree(&first.signature, &signature);
                let (theirs, their_rank, their_site) = (first.signature, first.rank, first.site);
                first.remaining -= 1;
                if first.remaining == 0 {
                    calls.remove(&seq);
                }
                drop(calls);
                if mismatch {
                    return Err(super::check::mismatch(
                        seq,
                        &(theirs, their_rank, their_site),
                        &(signature, rank, site),
                    ));
                }
                Ok(())
            }
        }
    }
}

/// The error for mismatched calls `seq` of `first` and `other`.
pub(crate) fn mismatch(
    seq: u32,
    first: &(Signature, Rank, &'static Location<'static>),
    other: &(Signature, Rank, &'static Location<'static>),
) -> Error {
    let ((theirs, their_rank, their_site), (mine, rank, site)) = (first, other);
    Error::Collective(CollectiveError::Mismatch {
        seq,
        ranks: (*their_rank, *rank),
        calls: (theirs.to_string(), mine.to_string()),
        sites: (their_site, site),
    })
}

/// Whether two ranks' signatures of the same call are compatible: same
/// operation and root; sizes equal where both know them.
/// Whether two calls run the same collective with the same algorithm: the
/// part of the check that stays on when checking is off, because calls
/// that meet in one shared-memory round read each other's deposits, and
/// different collectives would read what was never written.
pub(crate) fn same_protocol(a: &Signature, b: &Signature) -> bool {
    a.kind == b.kind && a.algorithm == b.algorithm
}

pub(crate) fn agree(a: &Signature, b: &Signature) -> bool {
    a.kind == b.kind
        && a.root == b.root
        && a.algorithm == b.algorithm
        && match (a.types, b.types) {
            (Some(x), Some(y)) => x == y,
            _ => true,
        }
        && match (a.bytes, b.bytes) {
            (Some(x), Some(y)) => x == y,
            _ => true,
        }
}
