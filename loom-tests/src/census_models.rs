//! Models of arrivals counted by worker (`src/coll/census.rs`, compiled here
//! as it is): whatever the interleaving, exactly one arrival of a round is
//! the last, and every arrival's write (a deposit, a fold into a partial)
//! happens before it returns, also for an arrival counted on a worker's line
//! by another thread (an OS thread acting for a rank of that worker).
//!
//! A rank's write is a cell of its own, which the last arrival reads: loom
//! reports a read not ordered after a write. A worker's ranks run one after
//! another on its thread, so they are one loom thread each worker.

use loom::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;

use crate::census::arrive;
use crate::sync::UnsafeCell;

/// The counts of one round: the shared one, and each worker's line.
struct Round {
    all: AtomicU32,
    workers: [AtomicU32; 2],
    /// Each rank's deposit.
    deposits: Vec<UnsafeCell<u32>>,
    /// How many arrivals were the last.
    lasts: AtomicUsize,
    /// The tallies the last arrival of a round without a census must see
    /// (what it records as the census).
    tally: [u32; 2],
}

// SAFETY: a deposit is written by its rank before its arrival and read by
// the last arrival only (what the model checks).
unsafe impl Sync for Round {}
// SAFETY: as above.
unsafe impl Send for Round {}

impl Round {
    fn new(size: usize, tally: [u32; 2]) -> Round {
        Round {
            all: AtomicU32::new(0),
            workers: [AtomicU32::new(0), AtomicU32::new(0)],
            deposits: (0..size).map(|_| UnsafeCell::new(0)).collect(),
            lasts: AtomicUsize::new(0),
            tally,
        }
    }

    /// Rank `rank` deposits and arrives on `worker`; the last reads every
    /// deposit.
    fn rank(&self, rank: usize, worker: usize, expected: Option<u32>) {
        // SAFETY: this rank's own cell, read only by the last arrival.
        self.deposits[rank].with_mut(|p| unsafe { *p = rank as u32 + 1 });
        let size = self.deposits.len() as u32;
        if arrive(&self.all, size, &self.workers[worker], expected) {
            self.lasts.fetch_add(1, Ordering::Relaxed);
            for (r, d) in self.deposits.iter().enumerate() {
                // SAFETY: every arrival is over (what loom checks).
                assert_eq!(d.with(|p| unsafe { *p }), r as u32 + 1);
            }
            if expected.is_none() {
                let tally = self.workers.each_ref().map(|w| w.load(Ordering::Relaxed));
                assert_eq!(tally, self.tally);
            }
        }
    }
}

/// Ranks 0 and 1 on worker 0, rank 2 on worker 1, and rank 3 counted on
/// worker 0 by another thread: with the census `[3, 1]`.
#[test]
fn arrivals_by_worker_have_one_last_that_sees_every_deposit() {
    loom::model(|| {
        let round = Arc::new(Round::new(4, [3, 1]));
        let census = [3, 1];
        let spawn = |ranks: Vec<usize>, worker: usize| {
            let round = Arc::clone(&round);
            thread::spawn(move || {
                for rank in ranks {
                    round.rank(rank, worker, Some(census[worker]));
                }
            })
        };
        let threads = [spawn(vec![2], 1), spawn(vec![3], 0)];
        round.rank(0, 0, Some(census[0]));
        round.rank(1, 0, Some(census[0]));
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(round.lasts.load(Ordering::Relaxed), 1);
        assert_eq!(round.all.load(Ordering::Relaxed), 4);
    });
}

/// Without a census every arrival counts in the shared count and on its
/// worker: one last, which sees every deposit and, in the tallies, where
/// the ranks are (the census it records).
#[test]
fn arrivals_without_a_census_tally_the_workers() {
    loom::model(|| {
        let round = Arc::new(Round::new(3, [2, 1]));
        let other = {
            let round = Arc::clone(&round);
            thread::spawn(move || round.rank(2, 1, None))
        };
        round.rank(0, 0, None);
        round.rank(1, 0, None);
        other.join().unwrap();
        assert_eq!(round.lasts.load(Ordering::Relaxed), 1);
    });
}
