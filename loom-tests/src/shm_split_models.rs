//! Models of a copy shared by its reader and its lender
//! (`src/transport/shm/split.rs`, compiled here as it is): both claim
//! pieces from one word, the lender flags itself busy around each piece,
//! and the reader returns only when no piece of the lender's is under
//! way. Each piece is a loom cell written by whoever claimed it: a piece
//! claimed twice is a data race, and the reader's look at every piece
//! after the copy races with a lender's write it did not wait for.

use loom::sync::Arc;
use loom::thread;

use crate::shm_split::{help, Receiver, Split, PIECE};
use crate::sync::UnsafeCell;

/// One cell per piece: how many times it was copied.
struct Pieces(Vec<UnsafeCell<u8>>);

// SAFETY: every access goes through loom's cells, which check them.
unsafe impl Sync for Pieces {}

impl Pieces {
    fn copy(&self, at: u64, n: u64) {
        assert!(n > 0 && n <= PIECE);
        // SAFETY: loom checks the access.
        self.0[(at / PIECE) as usize].with_mut(|p| unsafe { *p += 1 });
    }
}

fn run(pieces: usize, helper_fails: bool) {
    loom::model(move || {
        let split = Arc::new(Split::default());
        let cells = Arc::new(Pieces((0..pieces).map(|_| UnsafeCell::new(0)).collect()));
        let len = pieces as u64 * PIECE - 1;
        let receiver = Receiver::start(&split, len);
        let generation = receiver.generation();
        let lender = {
            let (split, cells) = (split.clone(), cells.clone());
            thread::spawn(move || {
                help(&split, generation, len, |at, n| {
                    if helper_fails {
                        return false;
                    }
                    cells.copy(at, n);
                    true
                })
            })
        };
        let whole = receiver
            .copy(
                |at, n| {
                    cells.copy(at, n);
                    Ok(())
                },
                || true,
            )
            .unwrap();
        let copied: Vec<u8> = cells
            .0
            .iter()
            // SAFETY: loom checks the access.
            .map(|c| c.with(|p| unsafe { *p }))
            .collect();
        if whole {
            assert!(copied.iter().all(|&c| c == 1), "{copied:?}");
        } else {
            // A piece of the lender's failed: the caller reads it all again.
            assert!(helper_fails);
            assert!(copied.iter().all(|&c| c <= 1), "{copied:?}");
        }
        let theirs = lender.join().unwrap();
        assert!(theirs <= len);
    });
}

#[test]
fn every_piece_is_copied_once_and_before_the_reader_returns() {
    run(3, false);
}

#[test]
fn a_failed_piece_of_the_lender_is_reported_short() {
    run(2, true);
}
