//! The table of park slots: one per rank, plus recycled slots for tasks.
//!
//! Slot ids `0..ranks` are the ranks of this process (a rank's slot id is
//! its local index, `crate::identity`; the slot records the world rank it
//! acts for, which reports name).
//! Above them, tasks (auxiliary coroutines that act for a rank, such as the
//! one running an immediate collective) take a slot when they start and give
//! it back when they end. Slots are never freed before the job ends, only
//! recycled: a completer may still unpark a slot a moment after its task
//! ended, and that stale wake-up must land on valid memory (at worst it wakes
//! the slot's next owner spuriously, which re-checks its condition and parks
//! again).
//!
//! Lookups are lock-free: task slots live in segments allocated on first use
//! and never moved.

use std::sync::{Mutex, OnceLock};

use super::rank::{Life, Slot};
use crate::error::{Error, ResourceError};
use crate::identity::WorldRank;
use std::sync::atomic::{AtomicU32, Ordering};

/// Task slots per segment.
const SEGMENT: usize = 1024;
/// Segments at most: about four million task slots alive at once.
const SEGMENTS: usize = 4096;

/// All park slots of a job.
#[derive(Debug)]
pub(crate) struct Slots {
    ranks: Box<[Slot]>,
    segments: Box<[OnceLock<Box<[Slot]>>]>,
    /// Task slots never used so far start here (relative to `ranks.len()`).
    fresh: AtomicU32,
    free: Mutex<Vec<u32>>,
}

impl Slots {
    /// Slots for the ranks of this process: `ranks` gives the world rank
    /// of each, by local index.
    pub(crate) fn new(ranks: impl ExactSizeIterator<Item = WorldRank>) -> Slots {
        Slots {
            ranks: ranks.map(Slot::new).collect(),
            segments: (0..SEGMENTS).map(|_| OnceLock::new()).collect(),
            fresh: AtomicU32::new(0),
            free: Mutex::new(Vec::new()),
        }
    }

    /// Number of ranks (slots `0..ranks()` are theirs).
    #[inline]
    pub(crate) fn ranks(&self) -> usize {
        self.ranks.len()
    }

    /// The slots of the ranks.
    pub(crate) fn rank_slots(&self) -> &[Slot] {
        &self.ranks
    }

    /// The slot with id `id`.
    #[inline]
    pub(crate) fn get(&self, id: u32) -> &Slot {
        let id = id as usize;
        if id < self.ranks.len() {
            return &self.ranks[id];
        }
        let extra = id - self.ranks.len();
        let segment = self.segments[extra / SEGMENT]
            .get()
            .expect("a task slot id comes from `allocate`");
        &segment[extra % SEGMENT]
    }

    /// A slot for a new task acting for `rank`.
    pub(crate) fn allocate(&self, rank: WorldRank) -> Result<u32, Error> {
        let recycled = self.free.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let id = match recycled {
            Some(id) => id,
            None => {
                let extra = self.fresh.fetch_add(1, Ordering::Relaxed) as usize;
                if extra >= SEGMENT * SEGMENTS {
                    return Err(Error::Resources(ResourceError::Tasks {
                        max: SEGMENT * SEGMENTS,
                    }));
                }
                self.segments[extra / SEGMENT].get_or_init(|| {
                    (0..SEGMENT)
                        .map(|_| Slot::new(WorldRank::new(u32::MAX)))
                        .collect()
                });
                (self.ranks.len() + extra) as u32
            }
        };
        self.get(id).reuse(rank);
        Ok(id)
    }

    /// Gives a task's slot back.
    pub(crate) fn release(&self, id: u32) {
        debug_assert!(
            id as usize >= self.ranks.len(),
            "rank slots are not released"
        );
        self.get(id).set_finished();
        self.free.lock().unwrap_or_else(|e| e.into_inner()).push(id);
    }

    /// Every slot in use by a task, with its id.
    pub(crate) fn task_slots(&self) -> impl Iterator<Item = (u32, &Slot)> {
        let used = (self.fresh.load(Ordering::Acquire) as usize).min(SEGMENT * SEGMENTS);
        let base = self.ranks.len();
        (0..used).filter_map(move |extra| {
            let segment = self.segments[extra / SEGMENT].get()?;
            let slot = &segment[extra % SEGMENT];
            (slot.life() == Life::Running).then_some(((base + extra) as u32, slot))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_slots_are_recycled_above_the_ranks() {
        // The three ranks of a process hosting world ranks 10..13.
        let slots = Slots::new((10..13).map(WorldRank::new));
        let a = slots.allocate(WorldRank::new(11)).unwrap();
        let b = slots.allocate(WorldRank::new(12)).unwrap();
        assert_eq!((a, b), (3, 4));
        assert_eq!(slots.get(b).rank(), WorldRank::new(12));
        slots.release(a);
        let c = slots.allocate(WorldRank::new(10)).unwrap();
        assert_eq!(c, a, "recycled");
        assert_eq!(slots.get(c).rank(), WorldRank::new(10));
        assert_eq!(slots.get(1).rank(), WorldRank::new(11), "by local index");
    }
}
