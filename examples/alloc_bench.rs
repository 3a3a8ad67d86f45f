//! AMR-like allocator benchmark: glibc vs jemalloc vs mimalloc vs myriad-alloc.
//!
//! Threads repeatedly allocate, fill and free large blocks of 64 KiB to 8 MiB (log-uniform
//! sizes, a few live per thread) mixed with many small objects (16 to 512 bytes, a few thousand
//! live per thread), as an adaptive-mesh-refinement code does with its patches and their
//! bookkeeping. The total work is fixed, split evenly between the threads (strong scaling).
//!
//! Each (allocator, thread count) pair runs in its own child process: the example re-executes
//! itself with `MYRIAD_ALLOC_BENCH_ALLOCATOR` set, and a dispatching global allocator sends
//! every allocation of that process to the chosen allocator, so the four share one binary and
//! one workload and differ only in the allocator. The child measures its own `getrusage`
//! (user, system, minor faults, peak RSS) and wall time around the workload.
//!
//! ```text
//! cargo run --release --features alloc-bench --example alloc_bench -- [--threads 1,2,8,64]
//!     [--allocators glibc,jemalloc,mimalloc,myriad] [--iters 32768] [--repeat 1]
//! ```
//!
//! `--fast-path ALLOCATOR N SIZE` instead runs N alloc+free pairs of SIZE bytes through one
//! allocator called directly, for counting instructions with `valgrind --tool=callgrind`.
//!
//! Output: one row per run (`allocator threads wall_s user_s sys_s minflt peak_rss_mib`), then
//! the ratios against glibc. With `--repeat N` each pair runs N times and the row is the median
//! of the wall times (with that run's other figures).

use std::alloc::{GlobalAlloc, Layout, System};
use std::process::Command;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Instant;

use mimalloc::MiMalloc;
use myriad_alloc::MyriadAlloc;
use tikv_jemallocator::Jemalloc;

const ALLOCATORS: [&str; 4] = ["glibc", "jemalloc", "mimalloc", "myriad"];
const ENV_ALLOCATOR: &str = "MYRIAD_ALLOC_BENCH_ALLOCATOR";

/// Sends every allocation of the process to the allocator named by
/// `MYRIAD_ALLOC_BENCH_ALLOCATOR` (glibc when unset), chosen once at the first allocation.
struct Dispatch;

static WHICH: AtomicU8 = AtomicU8::new(u8::MAX);

#[inline(always)]
fn which() -> u8 {
    let w = WHICH.load(Ordering::Relaxed);
    if w != u8::MAX {
        return w;
    }
    // getenv does not allocate, so it is safe inside the first allocation.
    // SAFETY: the name is NUL-terminated; the result is null or a C string of the environment.
    let value = unsafe { libc::getenv(c"MYRIAD_ALLOC_BENCH_ALLOCATOR".as_ptr()) };
    let w = if value.is_null() {
        0
    } else {
        // SAFETY: getenv returned a valid C string.
        match unsafe { std::ffi::CStr::from_ptr(value) }.to_bytes() {
            b"jemalloc" => 1,
            b"mimalloc" => 2,
            b"myriad" => 3,
            _ => 0,
        }
    };
    WHICH.store(w, Ordering::Relaxed);
    w
}

macro_rules! dispatch {
    ($method:ident($($arg:expr),*)) => {
        match which() {
            1 => Jemalloc.$method($($arg),*),
            2 => MiMalloc.$method($($arg),*),
            3 => MyriadAlloc.$method($($arg),*),
            _ => System.$method($($arg),*),
        }
    };
}

// SAFETY: forwards every call unchanged to one allocator, the same one for the whole process
// (fixed at the first allocation), so each block is freed by the allocator that made it.
unsafe impl GlobalAlloc for Dispatch {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded contract.
        unsafe { dispatch!(alloc(layout)) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded contract.
        unsafe { dispatch!(alloc_zeroed(layout)) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded contract.
        unsafe { dispatch!(dealloc(ptr, layout)) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded contract.
        unsafe { dispatch!(realloc(ptr, layout, new_size)) }
    }
}

#[global_allocator]
static GLOBAL: Dispatch = Dispatch;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Log-uniform in [lo, hi).
    fn log_uniform(&mut self, lo: usize, hi: usize) -> usize {
        let (l, h) = ((lo as f64).ln(), (hi as f64).ln());
        let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        ((l + u * (h - l)).exp() as usize).clamp(lo, hi - 1)
    }
}

const LIVE_LARGE: usize = 4;
const LIVE_SMALL: usize = 4096;
const SMALL_PER_ITER: usize = 64;

/// One thread's share of the workload; returns a checksum so nothing is optimised away.
fn worker(thread: usize, iters: usize) -> u64 {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (thread as u64 + 1).wrapping_mul(0x1234_5678_9ABC));
    let mut large: Vec<(*mut u8, Layout)> = Vec::with_capacity(LIVE_LARGE);
    let mut small: Vec<(*mut u8, Layout)> = Vec::with_capacity(LIVE_SMALL);
    let mut sum = 0u64;
    for i in 0..iters {
        let size = rng.log_uniform(64 << 10, 8 << 20);
        let layout = Layout::from_size_align(size, 64).unwrap();
        // SAFETY: non-zero size; freed below with the same layout.
        let p = unsafe { std::alloc::alloc(layout) };
        assert!(!p.is_null(), "out of memory");
        // Fill the whole block, as a solver fills its arrays.
        // SAFETY: `p` is live for `size` bytes.
        unsafe {
            p.write_bytes(i as u8, size);
            sum = sum.wrapping_add(u64::from(p.add(size / 2).read()));
        }
        if large.len() == LIVE_LARGE {
            let k = (rng.next() % LIVE_LARGE as u64) as usize;
            let (q, l) = large.swap_remove(k);
            // SAFETY: allocated above with `l`.
            unsafe { std::alloc::dealloc(q, l) };
        }
        large.push((p, layout));
        for _ in 0..SMALL_PER_ITER {
            let size = 16 + (rng.next() % 497) as usize;
            let layout = Layout::from_size_align(size, 8).unwrap();
            // SAFETY: non-zero size; freed later with the same layout.
            let p = unsafe { std::alloc::alloc(layout) };
            assert!(!p.is_null(), "out of memory");
            // SAFETY: `p` is live for `size >= 16` bytes.
            unsafe { p.cast::<u64>().write(size as u64) };
            if small.len() == LIVE_SMALL {
                let k = (rng.next() % LIVE_SMALL as u64) as usize;
                let (q, l) = small[k];
                // SAFETY: `q` is live, allocated with `l`, and starts with its size.
                unsafe {
                    sum = sum.wrapping_add(q.cast::<u64>().read());
                    std::alloc::dealloc(q, l);
                }
                small[k] = (p, layout);
            } else {
                small.push((p, layout));
            }
        }
    }
    for (p, l) in large.into_iter().chain(small) {
        // SAFETY: every remaining block is live and allocated with its layout.
        unsafe { std::alloc::dealloc(p, l) };
    }
    sum
}

#[derive(Clone, Copy, Debug)]
struct Row {
    wall: f64,
    user: f64,
    sys: f64,
    minflt: u64,
    rss_mib: f64,
    /// Transparent huge pages faulted in during the run (system-wide counter).
    thp: u64,
}

/// `thp_fault_alloc` of /proc/vmstat: 2 MiB pages faulted in, system-wide. Each counts as one
/// minor fault in `getrusage`, so an allocator that gets huge pages shows few faults while the
/// kernel still zeroes the same memory.
fn thp_faults() -> u64 {
    std::fs::read_to_string("/proc/vmstat")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("thp_fault_alloc ")
                    .map(|v| v.trim().parse().ok())
            })
        })
        .flatten()
        .unwrap_or(0)
}

fn rusage() -> libc::rusage {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct.
    unsafe {
        libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr());
        ru.assume_init()
    }
}

fn secs(tv: libc::timeval) -> f64 {
    tv.tv_sec as f64 + tv.tv_usec as f64 * 1e-6
}

/// Runs the workload in this process and prints the `RESULT` line the parent parses.
fn child(threads: usize, iters: usize) {
    let per_thread = (iters / threads).max(1);
    let thp0 = thp_faults();
    let r0 = rusage();
    let t0 = Instant::now();
    let sum: u64 = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|t| s.spawn(move || worker(t, per_thread)))
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum()
    });
    let wall = t0.elapsed().as_secs_f64();
    let r1 = rusage();
    let thp = thp_faults() - thp0;
    if std::env::var_os("MYRIAD_ALLOC_BENCH_STATS").is_some() && which() == 3 {
        eprintln!("{}", myriad_alloc::stats());
    }
    println!(
        "RESULT {wall:.3} {:.3} {:.3} {} {:.1} {thp} {sum}",
        secs(r1.ru_utime) - secs(r0.ru_utime),
        secs(r1.ru_stime) - secs(r0.ru_stime),
        r1.ru_minflt - r0.ru_minflt,
        r1.ru_maxrss as f64 / 1024.0,
    );
}

fn run(allocator: &str, threads: usize, iters: usize) -> Row {
    let out = Command::new(std::env::current_exe().expect("own path"))
        .args(["--child", &threads.to_string(), &iters.to_string()])
        .env(ENV_ALLOCATOR, allocator)
        .output()
        .expect("run the benchmark child");
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success(),
        "{allocator} x{threads} failed: {stdout}"
    );
    let line = stdout
        .lines()
        .find(|l| l.starts_with("RESULT "))
        .expect("RESULT line");
    let f: Vec<&str> = line.split_whitespace().collect();
    Row {
        wall: f[1].parse().unwrap(),
        user: f[2].parse().unwrap(),
        sys: f[3].parse().unwrap(),
        minflt: f[4].parse().unwrap(),
        rss_mib: f[5].parse().unwrap(),
        thp: f[6].parse().unwrap(),
    }
}

fn list<T: std::str::FromStr>(text: &str) -> Vec<T> {
    text.split(',')
        .map(|s| s.trim().parse().ok().expect("bad list item"))
        .collect()
}

/// `n` alloc+free pairs of `size` bytes through `a` called directly (not through the global
/// allocator), for instruction counting: run twice under `valgrind --tool=callgrind` with two
/// values of `n`; the difference of the totals divided by the difference of `n` is the cost of
/// one pair, without start-up.
#[inline(never)]
fn fast_path_pairs<A: GlobalAlloc>(a: &A, n: usize, size: usize) {
    let layout = Layout::from_size_align(size, 8).expect("layout");
    for _ in 0..n {
        // SAFETY: non-zero layout; the block is freed once with it.
        unsafe {
            let p = a.alloc(std::hint::black_box(layout));
            std::hint::black_box(p).write(1);
            a.dealloc(p, layout);
        }
    }
}

fn fast_path(allocator: &str, n: usize, size: usize) {
    match allocator {
        "myriad" => fast_path_pairs(&MyriadAlloc, n, size),
        "mimalloc" => fast_path_pairs(&MiMalloc, n, size),
        "jemalloc" => fast_path_pairs(&Jemalloc, n, size),
        _ => fast_path_pairs(&System, n, size),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--child") {
        child(args[1].parse().unwrap(), args[2].parse().unwrap());
        return;
    }
    if args.first().map(String::as_str) == Some("--fast-path") {
        fast_path(
            &args[1],
            args[2].parse().expect("--fast-path ALLOCATOR N SIZE"),
            args[3].parse().expect("--fast-path ALLOCATOR N SIZE"),
        );
        return;
    }
    let mut threads = vec![1usize, 2, 8, 64];
    let mut allocators: Vec<String> = ALLOCATORS.iter().map(|s| s.to_string()).collect();
    let mut iters = 32768usize;
    let mut repeat = 1usize;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().expect("flag needs a value").clone();
        match a.as_str() {
            "--threads" => threads = list(&value()),
            "--allocators" => allocators = list(&value()),
            "--iters" => iters = value().parse().expect("--iters N"),
            "--repeat" => repeat = value().parse().expect("--repeat N"),
            "--help" | "-h" => {
                println!(
                    "alloc_bench [--threads 1,2,8,64] [--allocators glibc,jemalloc,mimalloc,myriad] \
                     [--iters 32768] [--repeat 1]"
                );
                return;
            }
            other => panic!("unknown argument {other} (try --help)"),
        }
    }
    for a in &allocators {
        assert!(ALLOCATORS.contains(&a.as_str()), "unknown allocator {a}");
    }
    println!(
        "# AMR-like workload: {iters} iterations in total, each a 64 KiB-8 MiB block filled \
         ({LIVE_LARGE} live per thread) and {SMALL_PER_ITER} small objects ({LIVE_SMALL} live \
         per thread)"
    );
    println!(
        "{:<9} {:>7} {:>8} {:>8} {:>8} {:>10} {:>12}",
        "allocator", "threads", "wall_s", "user_s", "sys_s", "minflt", "peak_rss_mib"
    );
    let mut results: Vec<(String, usize, Row)> = Vec::new();
    for &t in &threads {
        for a in &allocators {
            let mut runs: Vec<Row> = (0..repeat).map(|_| run(a, t, iters)).collect();
            runs.sort_by(|x, y| x.wall.total_cmp(&y.wall));
            let r = runs[runs.len() / 2];
            println!(
                "{:<9} {:>7} {:>8.3} {:>8.3} {:>8.3} {:>10} {:>12.1}",
                a, t, r.wall, r.user, r.sys, r.minflt, r.rss_mib
            );
            results.push((a.clone(), t, r));
        }
    }
    if results.iter().any(|(_, _, r)| r.thp > 0) {
        println!();
        println!(
            "# transparent huge pages faulted in during each run (/proc/vmstat thp_fault_alloc, \
             system-wide): each is ONE minor fault for 2 MiB"
        );
        for (a, t, r) in &results {
            println!("{a:<9} {t:>7} {:>8}", r.thp);
        }
    }
    println!();
    println!("# ratios against glibc (lower is better)");
    println!(
        "{:<9} {:>7} {:>8} {:>8} {:>8} {:>10} {:>12}",
        "allocator", "threads", "wall", "user", "sys", "minflt", "peak_rss"
    );
    for (a, t, r) in &results {
        let Some((_, _, g)) = results.iter().find(|(ga, gt, _)| ga == "glibc" && gt == t) else {
            continue;
        };
        let ratio = |x: f64, y: f64| {
            if y > 0.0 {
                format!("{:.2}", x / y)
            } else {
                "-".into()
            }
        };
        println!(
            "{:<9} {:>7} {:>8} {:>8} {:>8} {:>10} {:>12}",
            a,
            t,
            ratio(r.wall, g.wall),
            ratio(r.user, g.user),
            ratio(r.sys, g.sys),
            ratio(r.minflt as f64, g.minflt as f64),
            ratio(r.rss_mib, g.rss_mib),
        );
    }
}
