//! The run order of a worker: a rank woken by the running rank runs next
//! (`sched::worker`'s hand-off), but a pair of ranks that keep waking each
//! other does not starve the other ranks of their worker.

use std::sync::atomic::{AtomicBool, Ordering};

use myriad::traits::*;

#[test]
fn ranks_waking_each_other_leave_their_worker_to_a_third() {
    // Ranks 0 and 1 exchange messages until rank 0 sees the flag that rank
    // 2, queued on the same (single) worker, sets when it runs. Each
    // exchange hands the worker to the woken partner; without a bound on
    // those hand-offs rank 2 would never run and the pair would stop only
    // at the cap below.
    const CAP: u32 = 100_000;
    let flag = AtomicBool::new(false);
    let exchanges = myriad::Runtime::builder()
        .ranks(3)
        .workers(1)
        .run(|universe| {
            let world = universe.world();
            world.barrier();
            match world.rank() {
                0 => {
                    let peer = world.process_at_rank(1);
                    let mut n = 0u32;
                    loop {
                        let go_on = !flag.load(Ordering::SeqCst) && n < CAP;
                        peer.send(&u8::from(go_on));
                        let _ = peer.receive::<u8>();
                        if !go_on {
                            return n;
                        }
                        n += 1;
                    }
                }
                1 => {
                    let peer = world.process_at_rank(0);
                    loop {
                        let (go_on, _) = peer.receive::<u8>();
                        peer.send(&go_on);
                        if go_on == 0 {
                            return 0;
                        }
                    }
                }
                _ => {
                    // To the back of the run queue, behind the pair.
                    myriad::yield_now();
                    flag.store(true, Ordering::SeqCst);
                    0
                }
            }
        })
        .unwrap();
    assert!(
        exchanges[0] < 1_000,
        "rank 2 ran only after {} exchanges of the pair",
        exchanges[0]
    );
}
