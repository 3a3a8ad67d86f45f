//! Models of the reader/owner protocol of buffers published into a
//! collective round (`src/coll/published.rs`, compiled here as it is).
//!
//! A published buffer is a loom `UnsafeCell`: readers read it inside a turn
//! (`enter` .. `leave`), the owner "frees" it by writing it once it may go
//! (every turn over, or closed and drained). loom reports any read that is
//! not ordered before that write, so each model checks that the owner never
//! frees a buffer while a reader is inside, on the normal way out and on the
//! failure path, and that a refused reader touches nothing.
//!
//! On the normal way out the owner parks until the last turn's reader wakes
//! it (`leave` returning `true`), as `Round::publish` does; like the models
//! in `models.rs`, the parked owner is a spawned thread. The failure path
//! is the runtime's own spinning `close_and_drain`.

use loom::sync::Arc;
use loom::thread;

use crate::published::Gate;
use crate::sync::UnsafeCell;

/// One owner's published buffer and the round's gate.
struct Round {
    gate: Gate,
    buffer: UnsafeCell<u64>,
}

impl Round {
    fn new(turns: u32) -> Arc<Round> {
        Arc::new(Round {
            gate: Gate::new(turns),
            buffer: UnsafeCell::new(7),
        })
    }

    /// A reader's turn: `Some(value read)` if granted, `None` if refused.
    fn read(&self) -> Option<u64> {
        if !self.gate.enter() {
            return None;
        }
        // SAFETY: inside a turn the owner keeps the buffer (what the model
        // checks).
        let value = self.buffer.with(|p| unsafe { *p });
        self.gate.leave();
        Some(value)
    }

    /// The owner is gone: its buffer is reused.
    fn free(&self) {
        // SAFETY: the owner may go (what the model checks).
        self.buffer.with_mut(|p| unsafe { *p = 0 });
    }

    /// A reader's turn that wakes `owner` if it was the last of all.
    fn read_and_wake(&self, owner: &thread::Thread) -> Option<u64> {
        if !self.gate.enter() {
            return None;
        }
        // SAFETY: as in `read`.
        let value = self.buffer.with(|p| unsafe { *p });
        if self.gate.leave() {
            owner.unpark();
        }
        Some(value)
    }
}

fn readers(round: &Arc<Round>, n: usize) -> Vec<thread::JoinHandle<Option<u64>>> {
    (0..n)
        .map(|_| {
            let round = Arc::clone(round);
            thread::spawn(move || round.read())
        })
        .collect()
}

/// An owner that waits (parked) until every turn is over, then frees; and
/// `n` readers that wake it.
fn owner_and_readers(
    round: &Arc<Round>,
    n: usize,
) -> (thread::JoinHandle<()>, Vec<thread::JoinHandle<Option<u64>>>) {
    let owner = {
        let round = Arc::clone(round);
        thread::spawn(move || {
            while !round.gate.finished() {
                thread::park();
            }
            round.free();
        })
    };
    let readers = (0..n)
        .map(|_| {
            let (round, owner) = (Arc::clone(round), owner.thread().clone());
            thread::spawn(move || round.read_and_wake(&owner))
        })
        .collect();
    (owner, readers)
}

#[test]
fn the_owner_frees_only_after_every_turn_on_the_normal_way_out() {
    loom::model(|| {
        let round = Round::new(2);
        let (owner, readers) = owner_and_readers(&round, 2);
        for reader in readers {
            // Nobody closed: every reader had its turn and saw the data.
            assert_eq!(reader.join().unwrap(), Some(7));
        }
        owner.join().unwrap();
    });
}

#[test]
fn a_failing_owner_closes_and_waits_for_the_reader_inside() {
    loom::model(|| {
        let round = Round::new(2);
        let readers = readers(&round, 2);
        // The owner's wait failed (the job aborts) at any point.
        round.gate.close_and_drain();
        round.free();
        for reader in readers {
            // Granted turns read the data; refused ones read nothing.
            assert!(matches!(reader.join().unwrap(), None | Some(7)));
        }
    });
}

#[test]
fn a_reader_after_the_close_is_refused() {
    loom::model(|| {
        let round = Round::new(2);
        round.gate.close_and_drain();
        let late = readers(&round, 1);
        round.free();
        assert_eq!(late.into_iter().next().unwrap().join().unwrap(), None);
        assert!(round.gate.drained());
    });
}

#[test]
fn no_turn_is_granted_beyond_the_rounds_turns() {
    loom::model(|| {
        // One turn, two candidates: once it is over the owner goes without
        // closing, so the other must be refused whenever it comes.
        let round = Round::new(1);
        let (owner, readers) = owner_and_readers(&round, 2);
        owner.join().unwrap();
        let granted = readers
            .into_iter()
            .filter_map(|r| r.join().unwrap())
            .inspect(|&v| assert_eq!(v, 7))
            .count();
        assert_eq!(granted, 1);
    });
}
