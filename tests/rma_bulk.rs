//! Large gets, which copy out of window memory with streaming stores
//! (`src/rma/access.rs`, from 256 KiB on), racing accumulates to the same
//! words: every word read is one an accumulate left whole (MPI calls the
//! access erroneous, not undefined: some value), at the right place, from
//! several starting displacements and lengths, and the accumulates all
//! land.

use myriad::collective::SystemOperation;
use myriad::traits::*;
use myriad::window::{Epoch, WindowCreation};
use myriad::Runtime;

/// 768 KiB of words: well above the streaming threshold.
const WORDS: usize = 96 * 1024 + 3;
/// Added to every word's low half by each accumulate: its four bytes stay
/// equal to each other (fewer than 256 adds: no carry).
const STEP: u64 = 0x0101_0101;
const ADDS_PER_RANK: usize = 60;

#[test]
fn large_gets_racing_accumulates_read_whole_words_in_place() {
    let out = Runtime::builder()
        .ranks(3)
        .workers(2)
        .run(|universe| {
            let world = universe.world();
            let rank = world.rank();
            // Word i: its index in the high half, the adds in the low one.
            let mut data: Vec<u64> = (0..WORDS as u64).map(|i| i << 32).collect();
            world
                .with_window(&mut data, |win| {
                    let epoch = win.lock_all().unwrap();
                    let mut bad = Vec::new();
                    if rank == 0 {
                        let mut buf = vec![0u64; WORDS];
                        for round in 0..30usize {
                            // Starts and ends move word by word.
                            let (from, len) = (round % 5, WORDS - 5 - round % 3);
                            epoch.get(1, from, &mut buf[..len]).unwrap();
                            for (j, &w) in buf[..len].iter().enumerate() {
                                let low = (w as u32).to_le_bytes();
                                if w >> 32 != (from + j) as u64 || low.iter().any(|&b| b != low[0])
                                {
                                    bad.push((round, j, w));
                                }
                            }
                            myriad::yield_now();
                        }
                    } else {
                        let add = vec![STEP; WORDS];
                        for _ in 0..ADDS_PER_RANK {
                            epoch
                                .accumulate(1, 0, &add, SystemOperation::sum())
                                .unwrap();
                            myriad::yield_now();
                        }
                    }
                    epoch.unlock_all();
                    world.barrier();
                    // Every add landed.
                    let mut last = vec![0u64; WORDS];
                    let epoch = win.lock_all().unwrap();
                    epoch.get(1, 0, &mut last).unwrap();
                    epoch.unlock_all();
                    let adds = (2 * ADDS_PER_RANK) as u64 * STEP;
                    let landed = last
                        .iter()
                        .enumerate()
                        .all(|(i, &w)| w == ((i as u64) << 32) + adds);
                    (bad.len(), bad.first().copied(), landed)
                })
                .unwrap()
        })
        .unwrap();
    for (rank, (bad, first, landed)) in out.into_iter().enumerate() {
        assert_eq!(
            bad, 0,
            "rank {rank}: torn or misplaced words, first {first:x?}"
        );
        assert!(landed, "rank {rank}: the accumulates did not all land");
    }
}
