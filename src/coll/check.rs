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

use std::collections::HashMap;
use std::fmt;
use std::panic::Location;

use super::Kind;
use crate::error::Error;
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

    /// The same, also checking the type signature of the data.
    pub(crate) fn typed(mut self, types: u64) -> Signature {
        self.types = Some(types);
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
    calls: SpinLock<HashMap<u32, First>>,
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
            calls: SpinLock::new(HashMap::new()),
        }
    }

    /// Checks call `seq` of a communicator of `size` ranks by `rank`.
    pub(crate) fn check(
        &self,
        seq: u32,
        size: u32,
        rank: Rank,
        signature: Signature,
        site: &'static Location<'static>,
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
                Ok(())
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
                    return Err(Error::Collective {
                        message: format!(
                            "collective mismatch on call {seq} of the communicator: rank {their_rank} \
                             called {theirs} at {}:{}:{}, but rank {rank} called {signature} at {}:{}:{}",
                            their_site.file(),
                            their_site.line(),
                            their_site.column(),
                            site.file(),
                            site.line(),
                            site.column()
                        ),
                    });
                }
                Ok(())
            }
        }
    }
}

/// Whether two ranks' signatures of the same call are compatible: same
/// operation and root; sizes equal where both know them.
fn agree(a: &Signature, b: &Signature) -> bool {
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
