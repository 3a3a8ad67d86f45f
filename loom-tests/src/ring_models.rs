//! Models of the ring of rounds (`src/coll/ring.rs`, compiled here as it
//! is): two ranks of a communicator find one round per call, also when a
//! call overflows into the map while its slot frees up, and a finished
//! round is reset for a later call only once no rank can still read it.
//!
//! A round is a cell holding its call's number: ranks read it while they
//! are in the call, the creator of a later call writes it when it resets a
//! spare. loom reports a reset that is not ordered after every read of the
//! earlier call, and the models assert that every rank reads its own call.

use loom::sync::atomic::{AtomicU32, Ordering};
use loom::sync::Arc;
use loom::thread;

use crate::ring::{Ring, RING};
use crate::sync::UnsafeCell;

/// A round: the number of the call it serves, and how many ranks left it.
struct Round {
    seq: UnsafeCell<u32>,
    left: AtomicU32,
}

// SAFETY: `seq` is written only through `Arc::get_mut` (exclusive) or
// before the round is shared; otherwise it is only read (what the model
// checks).
unsafe impl Sync for Round {}
// SAFETY: as above.
unsafe impl Send for Round {}

impl Round {
    fn read(&self) -> u32 {
        // SAFETY: see the `Sync` impl.
        self.seq.with(|p| unsafe { *p })
    }
}

/// The `make` of `Rounds::join_created`: reset a spare nobody holds, else
/// a new round.
fn make(seq: u32) -> impl FnOnce(Option<Arc<Round>>) -> Arc<Round> {
    move |spare| {
        if let Some(mut spare) = spare {
            if let Some(round) = Arc::get_mut(&mut spare) {
                // SAFETY: `get_mut` proved this the only handle.
                round.seq.with_mut(|p| unsafe { *p = seq });
                round.left = AtomicU32::new(0);
                return spare;
            }
        }
        Arc::new(Round {
            seq: UnsafeCell::new(seq),
            left: AtomicU32::new(0),
        })
    }
}

/// One rank's call `seq` of a communicator of `size` ranks: join, read,
/// leave (the last removes the round, keeping it as a spare). The ring
/// hands out the round's address, not a handle: what orders a reset after
/// the reads is the count of leaves alone.
fn call(ring: &Ring<Round>, seq: u32, size: u32) -> u32 {
    let joined = ring.join(seq, make(seq));
    // SAFETY: the round stays in the ring until the last leave counted
    // below, and this rank's is not counted yet.
    let round = unsafe { joined.round.as_ref() };
    let seen = round.read();
    if round.left.fetch_add(1, Ordering::AcqRel) + 1 == size {
        ring.remove(seq, joined.round, true);
    }
    seen
}

/// Two ranks make two calls each: the second call reuses the first's
/// round when it can, and every rank reads its own call's number.
#[test]
fn a_reused_round_is_reset_only_after_its_last_reader() {
    loom::model(|| {
        let ring = Arc::new(Ring::<Round>::default());
        let other = {
            let ring = Arc::clone(&ring);
            thread::spawn(move || (call(&ring, 0, 2), call(&ring, 1, 2)))
        };
        let mine = (call(&ring, 0, 2), call(&ring, 1, 2));
        assert_eq!(mine, (0, 1));
        assert_eq!(other.join().unwrap(), (0, 1));
        assert_eq!(ring.in_progress(), 0);
    });
}

/// Call `RING` is asked for by two ranks while call 0, in the same slot,
/// ends: one rank may find the slot busy (and make the round in the map)
/// and the other find it free (and must look in the map), or both find it
/// free, or both busy: either way both meet in one round. (The rank that
/// ends call 0 then asks for call `RING`: two threads cover every order.)
#[test]
fn a_call_overflowing_while_its_slot_frees_has_one_round() {
    loom::model(|| {
        let ring = Arc::new(Ring::<Round>::default());
        let late = RING as u32;
        // Call 0 is in progress.
        let early = ring.join(0, make(0)).round;
        let other = {
            let ring = Arc::clone(&ring);
            thread::spawn(move || {
                let joined = ring.join(late, make(late));
                // An address is not `Send`; its number is.
                (joined.round.as_ptr() as usize, joined.created)
            })
        };
        // Its last rank leaves, then joins the late call.
        ring.remove(0, early, true);
        let mine = ring.join(late, make(late));
        let (theirs, they_created) = other.join().unwrap();
        assert_eq!(
            mine.round.as_ptr() as usize,
            theirs,
            "two rounds for one call"
        );
        assert!(mine.created != they_created, "made exactly once");
        // SAFETY: the round of call `late` is still in the ring.
        assert_eq!(unsafe { mine.round.as_ref() }.read(), late);
        ring.remove(late, mine.round, true);
        assert_eq!(ring.in_progress(), 0);
    });
}
