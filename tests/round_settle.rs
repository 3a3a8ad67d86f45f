//! A shared-memory collective's buffers outlive every access from other
//! ranks, also when the job fails in the middle of the round (issue 8, item
//! 2): the owner of a published buffer must not return (nor be unwound past
//! the buffer) while another rank is still reading or writing it.
//!
//! The window is made deterministic with a user operation, which runs *inside*
//! the access: the shared-memory scan's scanner combines straight into the
//! other ranks' receive buffers, and the non-commutative shared-memory
//! reduction's reducer reads the other ranks' send buffers. The operation
//! signals that it is inside, waits (at most [`WINDOW`]) for the owner of the
//! buffer it works on to come back from the call, then looks at the buffer.
//! Meanwhile a third rank fails the job, which makes the owner's wait in the
//! round fail. Before the fix the owner returned at once (an OS thread acting
//! for its rank at `Threading::Multiple`) or was unwound at teardown (a rank),
//! freed its buffer and let the operation touch freed memory: under
//! AddressSanitizer a heap-use-after-free in the operation; without it the
//! owner sees that it came back while the operation was still inside.
//! After the fix the owner waits until the operation is out; the operation
//! waits out its window instead, so each case takes about [`WINDOW`].

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

use myriad::collective::{Algorithm, Collective, SystemOperation, UserOperation};
use myriad::topology::{Color, SimpleCommunicator};
use myriad::traits::*;
use myriad::{Error, Runtime, Threading};

/// How long the operation waits for the owner to come back: far longer than
/// a woken thread or a teardown takes to get there when nothing holds it.
const WINDOW: Duration = Duration::from_millis(500);

/// The failing job makes every call in the round panic: print those panics
/// without a backtrace, whatever `RUST_BACKTRACE` says (resolving one under
/// AddressSanitizer takes longer than the window, and the panics of the
/// owners' threads lie on the owner's way back).
fn no_backtraces() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Read by `Backtrace::capture` (the runtime's hook for rank
        // panics), before `RUST_BACKTRACE`; set before any job starts.
        std::env::set_var("RUST_LIB_BACKTRACE", "0");
        // Chained to by the runtime's hook for panics outside ranks.
        std::panic::set_hook(Box::new(|info| eprintln!("{info}")));
    });
}

/// Elements of each rank's buffers; [`PROBE`] is one the allocator leaves
/// alone when it frees them (it writes its links at the start).
const LEN: usize = 64;
const PROBE: usize = 40;

/// What one case observed. Buffers are told apart by the value they hold:
/// rank r's holds r + 1.
struct Flags {
    /// The owner of the buffer the operation is inside (0: none yet).
    inside: AtomicU64,
    /// The operation is done with it.
    left: AtomicBool,
    /// The owner came back from the call (or was unwound past its buffer).
    owner_back: AtomicBool,
    violations: Mutex<Vec<String>>,
}

impl Flags {
    const fn new() -> Flags {
        Flags {
            inside: AtomicU64::new(0),
            left: AtomicBool::new(false),
            owner_back: AtomicBool::new(false),
            violations: Mutex::new(Vec::new()),
        }
    }

    fn violate(&self, what: String) {
        self.violations.lock().unwrap().push(what);
    }

    /// The operation, inside buffer `theirs` of owner `owner` (its elements
    /// must all be `expected` while the owner is in the call): the first time,
    /// signal, give the owner the window to come back, then look.
    fn inside_owner_buffer(&self, owner: u64, theirs: &[u64], expected: u64) {
        if self
            .inside
            .compare_exchange(0, owner, SeqCst, SeqCst)
            .is_err()
        {
            return;
        }
        let deadline = Instant::now() + WINDOW;
        while !self.owner_back.load(SeqCst) && Instant::now() < deadline {
            std::thread::yield_now();
        }
        let seen = theirs[PROBE];
        if seen != expected {
            self.violate(format!(
                "the operation read {seen:#x} instead of {expected:#x} from a buffer whose owner \
                 had come back from the call"
            ));
        }
        self.left.store(true, SeqCst);
    }

    /// Owner `owner` is back (its buffer is about to go): the operation must
    /// not be inside it.
    fn owner_returns(&self, owner: u64, buffer: &mut Vec<u64>) {
        if self.inside.load(SeqCst) != owner {
            return;
        }
        if !self.left.load(SeqCst) {
            self.violate(
                "the owner came back from the call while another rank's operation was still \
                 inside its buffer"
                    .into(),
            );
        }
        buffer.fill(0xdead_dead_dead_dead);
        *buffer = Vec::new();
        self.owner_back.store(true, SeqCst);
    }

    /// The job failed with the third rank's panic, the operation really ran
    /// inside the owner's buffer, and nobody touched it after the owner left.
    fn check(&self, outcome: Result<Vec<()>, Error>) {
        let err = outcome.expect_err("the job must fail");
        assert!(err.to_string().contains("fails the job"), "{err}");
        assert_ne!(self.inside.load(SeqCst), 0, "the operation never ran");
        let violations = self.violations.lock().unwrap();
        assert!(violations.is_empty(), "{violations:#?}");
    }
}

/// Rank 2's part: wait until the operation is inside a buffer, then fail the
/// job (from a rank, so that the owner's wait in the round fails).
fn fail_the_job(flags: &Flags) {
    while flags.inside.load(SeqCst) == 0 {
        myriad::yield_now();
    }
    panic!("rank 2 fails the job");
}

/// Buffer of owner `.1`, handed back to `.2` when it goes away, whether its
/// owner returns or is unwound.
struct Owned<'f>(Vec<u64>, u64, &'f Flags);

impl Drop for Owned<'_> {
    fn drop(&mut self) {
        self.2.owner_returns(self.1, &mut self.0);
    }
}

/// Ranks 0 and 1 of the world in a communicator of their own, in reverse
/// order: world rank 1 is its rank 0 (the scanner, the reducer's first
/// operand...), world rank 0 its rank 1 (the owner). Rank 2 alone.
fn pair(world: &SimpleCommunicator) -> SimpleCommunicator {
    let rank = world.rank();
    let color = Color::with_value(i32::from(rank == 2));
    world
        .split_by_color_with_key(color, -rank)
        .expect("every rank has a color")
}

/// The shared-memory scan's scanner (rank 0 of `pair`, world rank 1) writes
/// into every other rank's receive buffer; rank 1's (world rank 0) is
/// combined by the operation while it is inside.
fn scan_case(flags: &'static Flags, owner_on_thread: bool) -> Result<Vec<()>, Error> {
    no_backtraces();
    Runtime::builder()
        .ranks(3)
        .workers(2)
        .threading(Threading::Multiple)
        .run(move |universe| {
            let world = universe.world();
            let pair = pair(&world);
            if world.rank() == 2 {
                return fail_the_job(flags);
            }
            pair.set_collective_algorithm(Collective::Scan, Algorithm::SharedMemory)
                .unwrap();
            // Rank r's operand: LEN times r + 1; the scanner copies rank 1's
            // into its receive buffer before it combines rank 0's result in.
            let op = UserOperation::associative(move |x, y| {
                let x: &[u64] = x.downcast().unwrap();
                let y = y.downcast::<u64>().unwrap();
                flags.inside_owner_buffer(2, y, 2);
                for (y, x) in y.iter_mut().zip(x) {
                    *y += *x;
                }
            });
            let me = pair.rank() as u64 + 1;
            let send = vec![me; LEN];
            let scan = |recv: &mut Owned<'_>| {
                let _ = catch_unwind(AssertUnwindSafe(|| {
                    pair.scan_into(&send[..], &mut recv.0[..], &op)
                }));
            };
            if world.rank() == 0 && !owner_on_thread {
                // The owner is this rank: it parks in the round, and the
                // failing job unwinds it from there.
                let mut recv = Owned(vec![0; LEN], me, flags);
                scan(&mut recv);
                return;
            }
            // An OS thread acts for the rank: the scanner's so that its
            // operation may wait without holding a worker; the owner's so
            // that its wait fails (and returns) as soon as the job does.
            myriad::thread::scope(|s| {
                s.spawn(|| {
                    let mut recv = Owned(vec![0; LEN], me, flags);
                    scan(&mut recv);
                });
            });
        })
}

#[test]
fn a_scan_owner_thread_waits_for_the_scanner_in_its_receive_buffer() {
    static FLAGS: Flags = Flags::new();
    FLAGS.check(scan_case(&FLAGS, true));
}

#[test]
fn a_scan_owner_unwound_at_teardown_waits_for_the_scanner_in_its_receive_buffer() {
    static FLAGS: Flags = Flags::new();
    FLAGS.check(scan_case(&FLAGS, false));
}

/// The non-commutative shared-memory reduction: the last rank to arrive
/// reduces every rank's send buffer in rank order, so whichever of the three
/// ranks reduces, its operation reads a send buffer that is not its own
/// (told apart by the reducing thread's `MINE`). Every rank acts through an
/// OS thread.
fn reduce_case(flags: &'static Flags) -> Result<Vec<()>, Error> {
    thread_local! {
        static MINE: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }
    no_backtraces();
    Runtime::builder()
        .ranks(4)
        .workers(2)
        .threading(Threading::Multiple)
        .run(move |universe| {
            let world = universe.world();
            // World ranks 0, 1 and 3 reduce; rank 2 fails the job.
            let color = Color::with_value(i32::from(world.rank() == 2));
            let group = world.split_by_color(color).expect("every rank has a color");
            if world.rank() == 2 {
                return fail_the_job(flags);
            }
            group
                .set_collective_algorithm(Collective::Reduce, Algorithm::SharedMemory)
                .unwrap();
            // The result is the first operand: the operation keeps its input.
            let op = UserOperation::associative(move |x, y| {
                let x: &[u64] = x.downcast().unwrap();
                if x[0] != MINE.with(|m| m.get()) {
                    flags.inside_owner_buffer(x[0], x, x[0]);
                }
                y.downcast::<u64>().unwrap().copy_from_slice(x);
            });
            let me = group.rank() as u64 + 1;
            myriad::thread::scope(|s| {
                s.spawn(|| {
                    MINE.with(|m| m.set(me));
                    let send = Owned(vec![me; LEN], me, flags);
                    let mut recv = vec![0u64; LEN];
                    let _ = catch_unwind(AssertUnwindSafe(|| {
                        let root = group.process_at_rank(0);
                        if group.rank() == 0 {
                            root.reduce_into_root(&send.0[..], &mut recv[..], &op);
                        } else {
                            root.reduce_into(&send.0[..], &op);
                        }
                    }));
                });
            });
        })
}

#[test]
fn a_reduction_owner_thread_waits_for_the_reducer_in_its_send_buffer() {
    static FLAGS: Flags = Flags::new();
    FLAGS.check(reduce_case(&FLAGS));
}

/// The rank-order reduction's reducer reads every rank's send buffer with
/// its own type and count: with the collective check off, a rank that
/// contributes fewer elements must be an error, not a read past its buffer
/// (before: `Ok` with whatever lay behind it; under AddressSanitizer a
/// heap-buffer-overflow).
#[test]
fn a_rank_order_reduction_checks_every_operand_it_reads() {
    let op = UserOperation::associative(|x, y| {
        let x: &[u64] = x.downcast().unwrap();
        for (y, x) in y.downcast::<u64>().unwrap().iter_mut().zip(x) {
            *y = x.wrapping_mul(31).wrapping_add(*y);
        }
    });
    let outcome = Runtime::builder()
        .ranks(3)
        .check_collectives(false)
        .run(|universe| {
            let world = universe.world();
            world
                .set_collective_algorithm(Collective::AllReduce, Algorithm::SharedMemory)
                .unwrap();
            let count = if world.rank() == 1 { 2 } else { 64 };
            let send = vec![world.rank() as u64; count];
            let mut recv = vec![0u64; count];
            world.all_reduce_into(&send[..], &mut recv[..], &op);
        });
    let err = outcome.expect_err("the contributions differ");
    assert!(err.to_string().contains("contribut"), "{err}");
}

/// The commutative shared-memory reduction folds every contribution into
/// per-worker accumulators laid out like the first one: with the collective
/// check off, one of another count must be an error, not a reduction past
/// the accumulator's end (before: a hang or heap corruption; under
/// AddressSanitizer a heap-buffer-overflow in `op::apply`).
#[test]
fn a_commutative_reduction_checks_every_contribution_it_folds() {
    let outcome = Runtime::builder()
        .ranks(3)
        .workers(1)
        .check_collectives(false)
        .run(|universe| {
            let world = universe.world();
            world
                .set_collective_algorithm(Collective::AllReduce, Algorithm::SharedMemory)
                .unwrap();
            let count = if world.rank() == 0 { 2 } else { 4096 };
            let send = vec![1u64; count];
            let mut recv = vec![0u64; count];
            world.all_reduce_into(&send[..], &mut recv[..], SystemOperation::sum());
        });
    let err = outcome.expect_err("the contributions differ");
    assert!(err.to_string().contains("contributions differ"), "{err}");
}
