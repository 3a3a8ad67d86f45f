//! The table of park slots: one per rank, plus recycled slots for tasks.
//!
//! Slot ids `0..ranks` are the ranks of this process (a rank's slot id is
//! its local index, `crate::identity`; the slot records the world rank it
//! acts for, which reports name). The ranks' slots are a [`GrowTable`]:
//! ranks spawned while the job runs append theirs, and a started rank's
//! lookup costs what indexing a slice did.
//! Task slots have ids from [`TASK_BASE`] up (so the ranks' ids can grow
//! below them): tasks (auxiliary coroutines that act for a rank, such as the
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
use crate::grow::GrowTable;
use crate::identity::WorldRank;
use std::sync::atomic::{AtomicU32, Ordering};

/// Task slots per segment.
const SEGMENT: usize = 1024;
/// Segments at most: about four million task slots alive at once.
const SEGMENTS: usize = 4096;
/// The first task slot id: rank slot ids (local indices) stay below it.
pub(crate) const TASK_BASE: u32 = 1 << 31;

/// All park slots of a job.
#[derive(Debug)]
pub(crate) struct Slots {
    ranks: GrowTable<Slot>,
    segments: Box<[OnceLock<Box<[Slot]>>]>,
    /// Task slots never used so far start here (relative to [`TASK_BASE`]).
    fresh: AtomicU32,
    free: Mutex<Vec<u32>>,
}

impl Slots {
    /// Slots for the ranks of this process: `ranks` gives the world rank
    /// of each, by local index.
    pub(crate) fn new(ranks: impl ExactSizeIterator<Item = WorldRank>) -> Slots {
        Slots {
            ranks: GrowTable::new(crate::grow::populated(ranks.map(Slot::new))),
            segments: (0..SEGMENTS).map(|_| OnceLock::new()).collect(),
            fresh: AtomicU32::new(0),
            free: Mutex::new(Vec::new()),
        }
    }

    /// Number of ranks, started with the job or spawned (slots
    /// `0..ranks()` are theirs).
    #[inline]
    pub(crate) fn ranks(&self) -> usize {
        self.ranks.len()
    }

    /// Whether slot `id` is a rank's (else a task's or an OS thread's).
    #[inline]
    pub(crate) fn is_rank(id: u32) -> bool {
        id < TASK_BASE
    }

    /// The slots of the ranks, by local index.
    pub(crate) fn rank_slots(&self) -> impl Iterator<Item = &Slot> {
        self.ranks.iter()
    }

    /// Appends the slots of `n` spawned ranks, the one of local index `i`
    /// acting for world rank `world(i)`; returns their local indices.
    pub(crate) fn grow(
        &self,
        n: usize,
        world: impl Fn(usize) -> WorldRank,
    ) -> std::ops::Range<usize> {
        self.ranks.append(n, |i| Slot::new(world(i)))
    }

    /// The slot with id `id`.
    #[inline]
    pub(crate) fn get(&self, id: u32) -> &Slot {
        // A started rank: one comparison, as when the table was a slice.
        match self.ranks.initial_entries().get(id as usize) {
            Some(slot) => slot,
            None => self.beyond(id),
        }
    }

    /// The slot of a spawned rank or of a task.
    #[inline(never)]
    fn beyond(&self, id: u32) -> &Slot {
        if Slots::is_rank(id) {
            return &self.ranks[id as usize];
        }
        let extra = (id - TASK_BASE) as usize;
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
                TASK_BASE + extra as u32
            }
        };
        self.get(id).reuse(rank);
        Ok(id)
    }

    /// Gives a task's slot back.
    pub(crate) fn release(&self, id: u32) {
        debug_assert!(!Slots::is_rank(id), "rank slots are not released");
        self.get(id).set_finished();
        self.free.lock().unwrap_or_else(|e| e.into_inner()).push(id);
    }

    /// Every slot in use by a task, with its id.
    pub(crate) fn task_slots(&self) -> impl Iterator<Item = (u32, &Slot)> {
        let used = (self.fresh.load(Ordering::Acquire) as usize).min(SEGMENT * SEGMENTS);
        (0..used).filter_map(move |extra| {
            let segment = self.segments[extra / SEGMENT].get()?;
            let slot = &segment[extra % SEGMENT];
            (slot.life() == Life::Running).then_some((TASK_BASE + extra as u32, slot))
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
        assert_eq!((a, b), (TASK_BASE, TASK_BASE + 1));
        assert_eq!(slots.get(b).rank(), WorldRank::new(12));
        slots.release(a);
        let c = slots.allocate(WorldRank::new(10)).unwrap();
        assert_eq!(c, a, "recycled");
        assert_eq!(slots.get(c).rank(), WorldRank::new(10));
        assert_eq!(slots.get(1).rank(), WorldRank::new(11), "by local index");
        // Spawned ranks take the next local indices, below the tasks.
        assert_eq!(slots.grow(2, |i| WorldRank::new(10 + i as u32)), 3..5);
        assert_eq!(slots.get(4).rank(), WorldRank::new(14));
        assert_eq!(slots.get(b).rank(), WorldRank::new(12), "tasks unmoved");
        assert_eq!(slots.ranks(), 5);
    }
}
