//! The small-object fast path: `alloc` + `dealloc` of small blocks through myriad-alloc,
//! mimalloc and the system allocator (glibc), called directly (not as the global allocator),
//! in one run so that the numbers compare.
//!
//! `cargo bench --features alloc-bench --bench alloc_fast_path`

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use mimalloc::MiMalloc;
use myriad_alloc::MyriadAlloc;

/// One alloc immediately followed by its free (LIFO: the block is reused every time).
fn pair<A: GlobalAlloc>(a: &A, layout: Layout) {
    // SAFETY: non-zero layout; the block is freed once with it.
    unsafe {
        let p = a.alloc(black_box(layout));
        black_box(p).write(1);
        a.dealloc(p, layout);
    }
}

/// A batch of allocations, then their frees in allocation order (FIFO), per block.
fn batch<A: GlobalAlloc>(a: &A, layout: Layout, ptrs: &mut [*mut u8]) {
    // SAFETY: non-zero layout; every block is freed once with it.
    unsafe {
        for p in ptrs.iter_mut() {
            *p = a.alloc(layout);
            p.write(1);
        }
        for &p in ptrs.iter() {
            a.dealloc(black_box(p), layout);
        }
    }
}

fn fast_path(c: &mut Criterion) {
    for size in [16usize, 64, 256] {
        let layout = Layout::from_size_align(size, 8).unwrap();
        let mut g = c.benchmark_group(format!("alloc_free_{size}B"));
        g.bench_function("myriad", |b| b.iter(|| pair(&MyriadAlloc, layout)));
        g.bench_function("mimalloc", |b| b.iter(|| pair(&MiMalloc, layout)));
        g.bench_function("glibc", |b| b.iter(|| pair(&System, layout)));
        g.finish();
    }
    let layout = Layout::from_size_align(64, 8).unwrap();
    let mut ptrs = vec![std::ptr::null_mut(); 100];
    let mut g = c.benchmark_group("batch_100x64B_per_block");
    g.throughput(criterion::Throughput::Elements(100));
    g.bench_function("myriad", |b| {
        b.iter(|| batch(&MyriadAlloc, layout, &mut ptrs))
    });
    g.bench_function("mimalloc", |b| {
        b.iter(|| batch(&MiMalloc, layout, &mut ptrs))
    });
    g.bench_function("glibc", |b| b.iter(|| batch(&System, layout, &mut ptrs)));
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(50);
    targets = fast_path
}
criterion_main!(benches);
