//! Smoke tests: small whole jobs, end to end.

use myriad::traits::*;

#[test]
fn ring() {
    let out = myriad::run(8, |universe| {
        let world = universe.world();
        let (rank, size) = (world.rank(), world.size());
        let next = world.process_at_rank((rank + 1) % size);
        let prev = world.process_at_rank((rank + size - 1) % size);
        if rank == 0 {
            next.send(&1u64);
            prev.receive::<u64>().0
        } else {
            let (t, _) = prev.receive::<u64>();
            next.send(&(t + 1));
            t
        }
    })
    .unwrap();
    assert_eq!(out, vec![8, 1, 2, 3, 4, 5, 6, 7]);
}

#[test]
fn barrier_many() {
    let n = 10_000;
    let out = myriad::run(n, |universe| {
        let world = universe.world();
        world.barrier();
        world.barrier();
        world.rank()
    })
    .unwrap();
    assert_eq!(out.len(), n);
}

#[test]
fn panic_reported() {
    let err = myriad::run(4, |universe| {
        let world = universe.world();
        if world.rank() == 2 {
            panic!("boom");
        }
        world.barrier();
    })
    .unwrap_err();
    let s = err.to_string();
    assert!(s.contains("rank 2") && s.contains("boom"), "{s}");
}

#[test]
fn deadlock_reported() {
    let err = myriad::run(2, |universe| {
        let world = universe.world();
        let other = 1 - world.rank();
        let _ = world.process_at_rank(other).receive::<u32>();
    })
    .unwrap_err();
    let s = err.to_string();
    assert!(s.contains("deadlock"), "{s}");
    eprintln!("{s}");
}
