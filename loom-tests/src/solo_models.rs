//! The solo mode of a job of one worker (`Scheduler::solo`,
//! `src/sched/mod.rs`): while only the worker thread touches park states
//! and mailbox locks, it parks, wakes and locks with plain loads and stores
//! (`ParkState::try_park_alone`, `unpark_alone`, `SpinLock::lock_alone`).
//! The mode ends, for good, on the worker thread, before the first other
//! thread (an OS thread acting for a rank) is started. The model checks
//! that hand-over: the worker's plain accesses before the spawn and the
//! read-modify-writes of both threads after it never race, lose a wake-up
//! or let both threads into the lock at once.

use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;

use crate::park::ParkState;
use crate::sync::spin::SpinLock;

/// The worker's solo steps on a rank's park state and a mailbox lock, then
/// the end of the mode and an OS thread that wakes the rank and takes the
/// lock, while the worker takes it too: no wake-up is lost (else loom
/// reports a deadlock), the lock's value (a loom cell) sees no concurrent
/// access, and both increments land.
#[test]
fn the_end_of_solo_mode_hands_over_to_read_modify_writes() {
    loom::model(|| {
        let state = Arc::new(ParkState::new());
        let lock = Arc::new(SpinLock::new(0usize));
        let solo = Arc::new(AtomicBool::new(true));
        let flag = Arc::new(AtomicBool::new(false));
        let requeues = Arc::new(AtomicUsize::new(0));

        // Solo: the worker's rank posts under the lock taken alone, and a
        // notification left alone is consumed by a park taken alone.
        assert!(solo.load(Ordering::Relaxed));
        // SAFETY: no other thread exists yet.
        *unsafe { lock.lock_alone() } += 1;
        assert!(!state.unpark_alone(), "the rank runs: a notification");
        assert!(!state.try_park_alone(), "the notification is consumed");

        // The rank that starts an OS thread ends the mode first.
        solo.store(false, Ordering::Relaxed);
        let rank = {
            let (state, flag) = (state.clone(), flag.clone());
            thread::spawn(move || {
                let mut parks = 0;
                while !flag.load(Ordering::Acquire) {
                    if state.try_park() {
                        parks += 1;
                        thread::park();
                    }
                }
                parks
            })
        };
        let rank_thread = rank.thread().clone();
        let os_thread = {
            let (state, lock, solo, flag, requeues) = (
                state.clone(),
                lock.clone(),
                solo.clone(),
                flag.clone(),
                requeues.clone(),
            );
            thread::spawn(move || {
                assert!(!solo.load(Ordering::Relaxed), "spawned after the end");
                *lock.lock() += 1;
                flag.store(true, Ordering::Release);
                if state.unpark() {
                    requeues.fetch_add(1, Ordering::SeqCst);
                    rank_thread.unpark();
                }
            })
        };
        *lock.lock() += 1;
        os_thread.join().unwrap();
        let parks = rank.join().unwrap();
        assert_eq!(parks, requeues.load(Ordering::SeqCst));
        assert_eq!(*lock.lock(), 3);
    });
}
