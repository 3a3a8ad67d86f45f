//! Where the ranks of a communicator find the round of a collective call:
//! a ring of slots indexed by sequence number, a map for calls the ring
//! cannot hold, and a few spare rounds to reuse.
//!
//! Call `seq` belongs to slot `seq % RING`. The first rank to ask for it
//! creates its round there if the slot is free; every other rank finds it
//! there (same slot, same `seq`). A slot still busy with another call
//! (ranks `RING` or more calls apart: immediate collectives outstanding,
//! ranks racing ahead, a call some rank never joins after a mismatch)
//! sends the call to the overflow map instead: slower, never wrong, never
//! waiting.
//!
//! ## Why no call has two rounds
//!
//! Every lookup, creation and removal of a round of call `seq` happens
//! under the lock of slot `seq % RING` (the map's lock is only ever taken
//! inside it, so the order is always slot, then map). Under that lock:
//!
//! * a busy slot holding `seq` is the round;
//! * a busy slot holding another call sends `seq` to the map (found there,
//!   or created there and counted in the slot's `overflowed`);
//! * a free slot looks in the map first if the slot's `overflowed` says a
//!   call of its residue is there, and creates in the slot only if `seq`
//!   is not.
//!
//! So once a round of `seq` exists, every later lookup under the same lock
//! finds it, wherever it is, until the last of its ranks removes it; after
//! that no rank asks for `seq` again (each rank asks once per call).
//!
//! ## Who owns a round
//!
//! The ring holds the only `Arc` of a round in progress; [`Ring::join`]
//! hands out its address, not a clone (two reference-count updates per
//! rank and call saved: uncontended, each costs what ~30 plain
//! instructions do). The owner of the ring (`round.rs`) guarantees that an
//! address is used only until its holder has counted its leave, and calls
//! [`Ring::remove`] only once every holder has.
//!
//! ## Reuse
//!
//! The last rank to leave a round moves it to the spares (at most
//! `SPARES`, and only if the owner's `keep` says so: large rounds are not
//! worth keeping). A creator takes a spare and resets it in place
//! (`Arc::get_mut`: nobody else holds a removed round); otherwise it makes
//! a new one. Reuse is a matter of allocation only: a reset round is, to
//! its users, a new one.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::ptr::NonNull;

use crate::sync::spin::SpinLock;
use crate::sync::Arc;

/// A hasher for maps keyed by sequence numbers: consecutive keys spread by
/// one multiplication, no SipHash.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct SeqHasher(u64);

impl Hasher for SeqHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.0 = (n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// A map keyed by sequence numbers.
pub(crate) type SeqMap<V> = HashMap<u32, V, BuildHasherDefault<SeqHasher>>;

/// Slots in the ring: calls of one communicator that may be in progress at
/// once before calls go to the overflow map. A broadcast's root need not
/// wait for its readers and runs ahead: with 16 slots, 8 B broadcasts on
/// 256 ranks cost 738 instructions per rank and call, with 64 slots 708
/// (`examples/coll_count.rs`), for 1.5 KiB per communicator.
pub(crate) const RING: usize = 64;

/// Finished rounds kept for reuse.
const SPARES: usize = 2;

#[derive(Debug)]
struct Slot<T> {
    /// The call whose round `round` is (meaningful while `round` is set).
    seq: u32,
    /// The round of call `seq` while it is in progress.
    round: Option<Arc<T>>,
    /// Rounds of calls `≡ slot index (mod RING)` in the overflow map.
    overflowed: u32,
}

impl<T> Default for Slot<T> {
    fn default() -> Self {
        Slot {
            seq: 0,
            round: None,
            overflowed: 0,
        }
    }
}

/// The rounds in progress of one communicator, by sequence number.
#[derive(Debug)]
pub(crate) struct Ring<T> {
    slots: Box<[SpinLock<Slot<T>>]>,
    overflow: SpinLock<SeqMap<Arc<T>>>,
    spares: SpinLock<Vec<Arc<T>>>,
}

impl<T> Default for Ring<T> {
    fn default() -> Self {
        Ring {
            slots: (0..RING).map(|_| SpinLock::new(Slot::default())).collect(),
            overflow: SpinLock::new(SeqMap::default()),
            spares: SpinLock::new(Vec::new()),
        }
    }
}

/// A round found or made by [`Ring::join`].
#[derive(Debug)]
pub(crate) struct Joined<T> {
    /// The round's address: valid until [`Ring::remove`] removes it (the
    /// ring keeps the round alive until then).
    pub(crate) round: NonNull<T>,
    /// Whether this call made it.
    pub(crate) created: bool,
}

/// The address [`Ring::join`] hands out for `round`.
#[inline]
fn address<T>(round: &Arc<T>) -> NonNull<T> {
    NonNull::new(Arc::as_ptr(round).cast_mut()).expect("an Arc is never null")
}

impl<T> Ring<T> {
    #[inline]
    fn slot(&self, seq: u32) -> &SpinLock<Slot<T>> {
        &self.slots[seq as usize % RING]
    }

    /// The round of call `seq`, made by `make` if this is the first ask.
    /// `make` gets a spare round, if one is free, to reset and return (or
    /// to drop).
    pub(crate) fn join(&self, seq: u32, make: impl FnOnce(Option<Arc<T>>) -> Arc<T>) -> Joined<T> {
        let mut slot = self.slot(seq).lock();
        if let Some(round) = &slot.round {
            if slot.seq == seq {
                return Joined {
                    round: address(round),
                    created: false,
                };
            }
            // Busy with another call: `seq` lives in the map.
            return self.join_overflow(&mut slot, seq, make);
        }
        if slot.overflowed > 0 {
            if let Some(round) = self.overflow.lock().get(&seq) {
                return Joined {
                    round: address(round),
                    created: false,
                };
            }
        }
        let spare = self.spares.lock().pop();
        let round = make(spare);
        slot.seq = seq;
        let joined = Joined {
            round: address(&round),
            created: true,
        };
        slot.round = Some(round);
        joined
    }

    #[cold]
    fn join_overflow(
        &self,
        slot: &mut Slot<T>,
        seq: u32,
        make: impl FnOnce(Option<Arc<T>>) -> Arc<T>,
    ) -> Joined<T> {
        let mut map = self.overflow.lock();
        if let Some(round) = map.get(&seq) {
            return Joined {
                round: address(round),
                created: false,
            };
        }
        let spare = self.spares.lock().pop();
        let round = make(spare);
        let joined = Joined {
            round: address(&round),
            created: true,
        };
        map.insert(seq, round);
        slot.overflowed += 1;
        joined
    }

    /// Runs `f` on the round of call `seq`, if it exists.
    pub(crate) fn with<R>(&self, seq: u32, f: impl FnOnce(&T) -> R) -> Option<R> {
        let slot = self.slot(seq).lock();
        match &slot.round {
            Some(round) if slot.seq == seq => Some(f(round)),
            _ if slot.overflowed > 0 => self.overflow.lock().get(&seq).map(|r| f(r)),
            _ => None,
        }
    }

    /// Removes `round`, the round of call `seq`, once its last rank has
    /// left (no address [`join`](Self::join) handed out is used any more);
    /// it goes to the spares if `keep` and there is room, else it is
    /// dropped.
    pub(crate) fn remove(&self, seq: u32, round: NonNull<T>, keep: bool) {
        let mut slot = self.slot(seq).lock();
        let in_ring = slot.seq == seq && slot.round.as_ref().is_some_and(|r| address(r) == round);
        let removed = if in_ring {
            slot.round.take()
        } else {
            let removed = self.overflow.lock().remove(&seq);
            if removed.is_some() {
                slot.overflowed -= 1;
            }
            removed
        };
        drop(slot);
        let Some(round) = removed else {
            debug_assert!(false, "a round removed twice");
            return;
        };
        if keep {
            let mut spares = self.spares.lock();
            if spares.len() < SPARES {
                spares.push(round);
            }
        }
    }

    /// Rounds in progress (for tests).
    #[allow(dead_code)]
    pub(crate) fn in_progress(&self) -> usize {
        let in_ring = self
            .slots
            .iter()
            .filter(|s| s.lock().round.is_some())
            .count();
        in_ring + self.overflow.lock().len()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A stand-in round: its call's number.
    fn make(seq: u32) -> impl FnOnce(Option<Arc<u32>>) -> Arc<u32> {
        move |spare| match spare {
            Some(mut spare) => {
                *Arc::get_mut(&mut spare).expect("nobody else holds a spare") = seq;
                spare
            }
            None => Arc::new(seq),
        }
    }

    /// The call number of a joined round (still in the ring).
    fn read(joined: &Joined<u32>) -> u32 {
        // SAFETY: the tests read a round only before removing it.
        unsafe { *joined.round.as_ref() }
    }

    #[test]
    fn every_rank_of_a_call_finds_one_round() {
        let ring = Ring::<u32>::default();
        let first = ring.join(5, make(5));
        let second = ring.join(5, |_| panic!("made twice"));
        assert!(first.created && !second.created);
        assert_eq!(first.round, second.round);
        assert_eq!(read(&first), 5);
        assert_eq!(ring.with(5, |r| *r), Some(5));
        assert_eq!(ring.with(5 + RING as u32, |r| *r), None);
    }

    /// Calls `RING` apart: the later one goes to the map, and stays the
    /// one round of its call when the slot frees up (a free slot would
    /// otherwise give its late ranks a second round).
    #[test]
    fn a_call_a_ring_ahead_overflows_and_is_found_after_the_slot_frees() {
        let ring = Ring::<u32>::default();
        let early = ring.join(3, make(3));
        let late_seq = 3 + RING as u32;
        let late = ring.join(late_seq, make(late_seq));
        assert!(late.created);
        assert_eq!(read(&late), late_seq);
        assert_eq!(ring.in_progress(), 2);
        assert_eq!(ring.with(late_seq, |r| *r), Some(late_seq));
        assert_eq!(ring.with(3, |r| *r), Some(3));
        // The early call ends; its slot is free.
        ring.remove(3, early.round, true);
        assert_eq!(ring.with(3, |r| *r), None);
        let again = ring.join(late_seq, |_| panic!("a second round of one call"));
        assert_eq!(again.round, late.round);
        // The late call ends in the map; the slot is the ring's again.
        ring.remove(late_seq, late.round, true);
        assert_eq!(ring.in_progress(), 0);
        let next = ring.join(late_seq + RING as u32, make(late_seq + RING as u32));
        assert!(next.created);
        assert_eq!(ring.slot(3).lock().overflowed, 0);
        assert!(ring.slot(3).lock().round.is_some(), "back in the ring");
    }

    #[test]
    fn finished_rounds_are_reused_and_only_kept_when_asked() {
        let ring = Ring::<u32>::default();
        let a = ring.join(0, make(0));
        let address = a.round;
        ring.remove(0, a.round, true);
        let b = ring.join(1, make(1));
        assert_eq!(b.round, address, "the spare was reused");
        assert_eq!(read(&b), 1);
        // Not kept: no spare.
        ring.remove(1, b.round, false);
        ring.join(2, |spare| {
            assert!(spare.is_none());
            Arc::new(2)
        });
    }
}
