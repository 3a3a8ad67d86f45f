//! Tearing down a failed job: nothing may touch a rank's memory once the
//! rank has been unwound, and no claim of another party's buffer is made
//! once the job aborts.
//!
//! Each test runs one worker, so the teardown unwinds the suspended
//! coroutines in a known order, and fails the job by panicking in the last
//! rank. A rank whose destructor makes an MPI call during the teardown
//! (a guard that flushes a last message, say) is the party that would touch
//! another rank's memory; it records what its call did.
//!
//! The memory errors these tests guard against are heap-use-after-free
//! reports under AddressSanitizer (the buffers are `Vec`s, freed when their
//! rank unwinds):
//!
//! ```text
//! RUSTFLAGS=-Zsanitizer=address CARGO_TARGET_DIR=target-asan cargo +nightly test \
//!     --target x86_64-unknown-linux-gnu -p myriad --features corosensei/sanitizer --test teardown
//! ```
//!
//! Without the sanitizer they check what the late call did: before the
//! fixes it copied into (or out of) the other rank's buffer.

use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicU8, Ordering};

use myriad::collective::{Algorithm, Collective};
use myriad::traits::*;
use myriad::Error;

/// What the late call of a tearing-down rank did.
const NOT_RUN: u8 = 0;
/// It copied: it claimed another party's buffer during the abort.
const COPIED: u8 = 1;
/// It was refused (its call failed: the job is aborting).
const REFUSED: u8 = 2;

/// Runs `late` when dropped (during the teardown) and records whether it
/// returned or failed.
struct OnTeardown<'a> {
    record: &'a AtomicU8,
    late: Option<Box<dyn FnOnce() + 'a>>,
}

impl Drop for OnTeardown<'_> {
    fn drop(&mut self) {
        let late = self.late.take().expect("dropped once");
        let outcome = match panic::catch_unwind(AssertUnwindSafe(late)) {
            Ok(()) => COPIED,
            Err(_) => REFUSED,
        };
        self.record.store(outcome, Ordering::SeqCst);
    }
}

fn expect_panic_of_rank_2(err: Error) {
    match err {
        Error::Panic { rank: 2, message } => assert!(message.contains("boom"), "{message}"),
        other => panic!("expected rank 2's panic, got: {other}"),
    }
}

/// Three ranks on one worker, no eager messages (a send waits for its
/// receive unless the receive is already posted, so a late send that is
/// refused fails instead of completing).
fn runtime() -> myriad::Runtime {
    myriad::Runtime::builder()
        .ranks(3)
        .workers(1)
        .eager_limit(0)
}

/// Rank 0 starts an immediate gather whose task posts receives straight
/// into rank 0's (heap) receive buffer, and waits for it. Rank 1, started
/// before the task, is parked when rank 2 panics; its guard then sends its
/// part of that gather. The teardown used to unwind rank 0 (freeing the
/// buffer) before the task (which withdraws its receives), so the late send
/// wrote into freed memory.
#[test]
fn a_task_is_unwound_before_the_rank_whose_buffers_its_receives_point_into() {
    static LATE: AtomicU8 = AtomicU8::new(NOT_RUN);
    let err = runtime()
        .run(|universe| {
            let world = universe.world();
            world
                .set_collective_algorithm(Collective::Gather, Algorithm::Linear)
                .unwrap();
            let root = world.process_at_rank(0);
            let part = vec![world.rank() as u64; 64];
            match world.rank() {
                0 => {
                    // Let rank 1 start first: the task is then unwound
                    // after it (in start order) unless tasks go first.
                    myriad::yield_now();
                    let mut all = vec![0u64; 3 * 64];
                    myriad::request::scope(|scope| {
                        root.immediate_gather_into_root(scope, &part[..], &mut all[..])
                            .wait();
                    });
                    unreachable!("rank 2 fails the job first");
                }
                1 => {
                    let _guard = OnTeardown {
                        record: &LATE,
                        late: Some(Box::new(|| root.gather_into(&part[..]))),
                    };
                    // Parked until the teardown.
                    let _ = world.process_at_rank(2).receive::<u8>();
                    unreachable!("rank 2 fails the job first");
                }
                _ => panic!("boom"),
            }
        })
        .unwrap_err();
    expect_panic_of_rank_2(err);
    assert_eq!(
        LATE.load(Ordering::SeqCst),
        REFUSED,
        "the late send found the task's posted receive into rank 0's freed buffer"
    );
}

/// Rank 0 sends a message that waits for its receive (its data stays in
/// rank 0's heap buffer); rank 1 takes it with a matched probe and keeps
/// the message in a guard that receives it during the teardown. Rank 0,
/// unwound first, gives up on the held message once the job aborts and
/// frees its buffer, so the late receive must be refused rather than read
/// freed memory.
#[test]
fn a_held_message_is_not_received_once_the_job_aborts() {
    static LATE: AtomicU8 = AtomicU8::new(NOT_RUN);
    let err = runtime()
        .run(|universe| {
            let world = universe.world();
            match world.rank() {
                0 => {
                    let data = vec![7u64; 64];
                    world.process_at_rank(1).send(&data[..]);
                    unreachable!("rank 2 fails the job first");
                }
                1 => {
                    let (message, _status) = world.process_at_rank(0).matched_probe();
                    let mut into = vec![0u64; 64];
                    let _guard = OnTeardown {
                        record: &LATE,
                        late: Some(Box::new(move || {
                            message.matched_receive_into(&mut into[..]);
                        })),
                    };
                    let _ = world.process_at_rank(2).receive::<u8>();
                    unreachable!("rank 2 fails the job first");
                }
                _ => panic!("boom"),
            }
        })
        .unwrap_err();
    expect_panic_of_rank_2(err);
    assert_eq!(
        LATE.load(Ordering::SeqCst),
        REFUSED,
        "the held message was received from the freed buffer of its sender"
    );
}

/// Rank 1 waits in a receive; rank 0, unwound first, sends to it from a
/// guard. Once the job aborts no party may claim a posted receive (a
/// pointer into another rank's buffer): the late send is refused, and rank
/// 1's buffer is left as it was.
#[test]
fn a_posted_receive_is_not_claimed_once_the_job_aborts() {
    static LATE: AtomicU8 = AtomicU8::new(NOT_RUN);
    static UNTOUCHED: AtomicU8 = AtomicU8::new(NOT_RUN);
    let err = runtime()
        .run(|universe| {
            let world = universe.world();
            match world.rank() {
                0 => {
                    let data = vec![7u64; 64];
                    let _guard = OnTeardown {
                        record: &LATE,
                        late: Some(Box::new(|| world.process_at_rank(1).send(&data[..]))),
                    };
                    let _ = world.process_at_rank(2).receive::<u8>();
                    unreachable!("rank 2 fails the job first");
                }
                1 => {
                    struct Check<'a>(*const u64, &'a AtomicU8);
                    impl Drop for Check<'_> {
                        fn drop(&mut self) {
                            // SAFETY: the buffer below is declared before
                            // this guard, so it is still alive here.
                            let first = unsafe { self.0.read() };
                            self.1
                                .store(if first == 0 { REFUSED } else { COPIED }, Ordering::SeqCst);
                        }
                    }
                    let mut into = vec![0u64; 64];
                    let _check = Check(into.as_ptr(), &UNTOUCHED);
                    world.process_at_rank(0).receive_into(&mut into[..]);
                    unreachable!("rank 2 fails the job first");
                }
                _ => panic!("boom"),
            }
        })
        .unwrap_err();
    expect_panic_of_rank_2(err);
    assert_eq!(
        LATE.load(Ordering::SeqCst),
        REFUSED,
        "a send claimed a posted receive after the abort"
    );
    assert_eq!(
        UNTOUCHED.load(Ordering::SeqCst),
        REFUSED,
        "rank 1's buffer was written"
    );
}
