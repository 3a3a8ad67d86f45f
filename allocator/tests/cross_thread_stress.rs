//! Many threads allocate, pass blocks to each other and free them on the receiving side
//! (remote frees), mixing small blocks, page runs and huge blocks; every block carries a
//! pattern that is checked before it is freed.

use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::thread;

use myriad_alloc::MyriadAlloc;

#[global_allocator]
static ALLOC: MyriadAlloc = MyriadAlloc;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn size_for(rng: &mut Rng) -> usize {
    match rng.next() % 100 {
        0..=79 => 1 + (rng.next() % 512) as usize,
        80..=94 => 512 + (rng.next() % 16_000) as usize,
        95..=98 => 16_384 + (rng.next() % (2 << 20)) as usize,
        // Huge blocks (direct mappings) are rare: filling them dominates the run time.
        _ if rng.next() % 8 == 0 => (17 << 20) + (rng.next() % (1 << 20)) as usize,
        _ => 16_384 + (rng.next() % (2 << 20)) as usize,
    }
}

fn make(len: usize, tag: u64) -> Vec<u64> {
    let words = len.div_ceil(8);
    (0..words as u64)
        .map(|i| tag ^ i.wrapping_mul(0x9E37_79B9))
        .collect()
}

fn verify(v: &[u64], tag: u64) {
    for (i, &w) in v.iter().enumerate().step_by(61) {
        assert_eq!(
            w,
            tag ^ (i as u64).wrapping_mul(0x9E37_79B9),
            "tag {tag:#x} word {i}"
        );
    }
    if let Some(&last) = v.last() {
        let i = v.len() as u64 - 1;
        assert_eq!(last, tag ^ i.wrapping_mul(0x9E37_79B9));
    }
}

#[test]
fn cross_thread_frees_with_content_checks() {
    const THREADS: usize = 8;
    let per_thread: u64 = if cfg!(debug_assertions) {
        1_500
    } else {
        20_000
    };
    let (senders, receivers): (Vec<_>, Vec<_>) = (0..THREADS)
        .map(|_| mpsc::channel::<(u64, Vec<u64>)>())
        .unzip();
    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = receivers
        .into_iter()
        .enumerate()
        .map(|(t, rx)| {
            let senders = senders.clone();
            let barrier = barrier.clone();
            thread::spawn(move || {
                let mut rng = Rng(0x1234_5678 + t as u64 * 7919);
                let mut own: Vec<(u64, Vec<u64>)> = Vec::new();
                barrier.wait();
                for i in 0..per_thread {
                    let tag = (t as u64) << 40 | i;
                    let v = make(size_for(&mut rng), tag);
                    match rng.next() % 3 {
                        0 => own.push((tag, v)),
                        _ => {
                            let to = (rng.next() % THREADS as u64) as usize;
                            senders[to].send((tag, v)).unwrap();
                        }
                    }
                    if own.len() > 64 {
                        let k = (rng.next() % own.len() as u64) as usize;
                        let (tag, v) = own.swap_remove(k);
                        verify(&v, tag);
                    }
                    while let Ok((tag, v)) = rx.try_recv() {
                        verify(&v, tag);
                    }
                }
                for (tag, v) in own {
                    verify(&v, tag);
                }
                drop(senders);
                rx
            })
        })
        .collect();
    drop(senders);
    let rxs: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    for rx in rxs {
        for (tag, v) in rx.try_iter() {
            verify(&v, tag);
        }
    }
    let s = myriad_alloc::stats();
    println!("{s}");
    // Everything was freed: what remains in use is the harness's own few allocations.
    assert!(s.large_in_use < (1 << 20), "{s}");
    assert_eq!(s.huge_in_use, 0, "{s}");
    assert!(s.small_in_use < (1 << 20), "{s}");
}
