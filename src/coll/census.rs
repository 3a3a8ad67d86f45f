//! Arrivals in a collective round counted by worker.
//!
//! Every rank of a round counts its arrival, and the last to arrive
//! completes the round (wakes the others, reduces the partials, ...). With
//! one counter for all, each arrival is a read-modify-write of a line every
//! worker writes: at 1,024 ranks on 2 workers the line crossed cores at
//! most arrivals (the add and the waits' loads of the count, ~25 % of a
//! barrier's samples). A rank stays on the worker that started it for
//! good (`sched::worker`), so a communicator's ranks fall on the workers
//! the same way in every call: its [`Census`].
//! With it, an arrival counts on its worker's own line, and only the
//! worker's last adds them all to the shared count ([`arrive`]): one
//! read-modify-write of that line per worker and call.
//!
//! The census is taken from the first round whose ranks all arrived, each
//! also counting on its worker's line; a round takes it when it is made,
//! so that all its arrivals count the same way (the contributors of a
//! reduction leave a round before its last arrival and arrive in the next:
//! two rounds, one made before the census and one after, may be in progress
//! at once). A rank's tasks run on its worker, and an OS thread acting for
//! it counts on its worker too (its context names that worker,
//! `sched::thread`). (An OS thread acting for a rank that has finished,
//! which is erroneous, names worker 0: the call waits for ever, reported as
//! a deadlock.)
//!
//! Memory order: an arrival's writes (its deposit, its fold into a
//! partial) happen before its worker's last arrival (program order on the
//! worker's thread, or through the worker's count for an OS thread), whose
//! addition to the shared count releases them to the round's last arrival.
//! The loom model is `loom-tests/src/census_models.rs`.

use std::sync::OnceLock;

use crate::sync::{AtomicU32, Ordering};

/// How many of a communicator's ranks in this process are pinned to each
/// worker, once known.
#[derive(Debug, Default)]
pub(crate) struct Census(OnceLock<Box<[u32]>>);

impl Census {
    /// The census, for a round of `workers` workers.
    pub(crate) fn of(&self, workers: usize) -> Option<&[u32]> {
        self.0.get().map(|c| &c[..]).filter(|c| c.len() == workers)
    }

    /// Records `tally` (the arrivals of a round without a census, by
    /// worker), unless a census is already recorded.
    pub(crate) fn record(&self, tally: Box<[u32]>) {
        let _ = self.0.set(tally);
    }
}

/// Counts an arrival on `worker`, the count of the arriving rank's worker,
/// whose ranks number `expected` by the round's census (`None`: the round
/// has none), and in `all` when the worker's count is complete (or, without
/// a census, always); `true` for the last of the round's `size` arrivals.
#[inline]
pub(crate) fn arrive(
    all: &AtomicU32,
    size: u32,
    worker: &AtomicU32,
    expected: Option<u32>,
) -> bool {
    // AcqRel: the worker's last arrival acquires what arrivals counted
    // here by other threads (an OS thread acting for a rank) released.
    let mine = worker.fetch_add(1, Ordering::AcqRel) + 1;
    let add = match expected {
        Some(expected) if mine == expected => expected,
        Some(_) => return false,
        None => 1,
    };
    all.fetch_add(add, Ordering::AcqRel) + add == size
}
