//! The stack pool: rank stacks carved out of large lazily committed mappings,
//! each with a guard page below it.
//!
//! A rank's stack costs only the pages it touches: the pool maps chunks of
//! slots with `MAP_NORESERVE` and never writes to them itself. Each slot is
//! `[guard page][stack ...]`, growing down towards the guard.
//!
//! Guard pages are installed with `madvise(MADV_GUARD_INSTALL)` (Linux ≥ 6.13),
//! which marks the page in the page tables without splitting the mapping: a
//! million guarded stacks fit in a few hundred mappings. On older kernels the
//! pool falls back to `mprotect(PROT_NONE)`, which splits the mapping (two
//! memory mappings per stack), so [`StackPool::check_map_budget`] refuses, with
//! an error that says how to raise `vm.max_map_count`, a job that cannot fit.
//!
//! ## Handing out stacks in batches
//!
//! At start-up a worker starts ranks back to back, and each new stack costs
//! two kernel entries: the guard install, and the page fault of the first
//! write to its top page (corosensei's initial frame, then the rank's
//! context and first frames; the rank usually needs no other page). While
//! many ranks wait to start, a worker takes [`StackPool::allocate_batch`]
//! stacks at once (at most [`StackPool::BATCH`]): adjacent fresh slots,
//! whose guards are installed by one `process_madvise` call, on the calling
//! process itself (`PIDFD_SELF`, Linux ≥ 6.14 with any advice). Measured on
//! the 2-core VM of the README's figures, this takes a guard from ~0.5–1.0
//! to ~0.35–0.65 µs. Adjacent slots also keep the two workers off each
//! other's page table pages (the page-table lock and its cache line were a
//! hot spot when they took alternate slots). Where `process_madvise`
//! refuses, the pool falls back to one `madvise` per guard.
//!
//! The top pages are left to fault at the coroutine's first write. They
//! were populated with the guards (`MADV_POPULATE_WRITE` through the same
//! vectored call), which measured ~1.8 µs against a ~2.6 µs fault on an
//! earlier kernel; on Linux 6.18 (2026-12-04, load 4–6) the populate costs
//! more than the fault it saves (`get_user_pages` looks each page up before
//! and after faulting it in): `hello --ranks 4000000`, 4 alternating pairs
//! in both orders, each pair faster faulting: system time 12.2–18.1 s faulting against 15.0–22.2 s
//! populating, wall 23.1–28.5 s against 25.6–37.3 s; at 1,000,000 ranks
//! 2.39–2.62 s against 2.66–2.81 s of system time in 5 pairs.
//!
//! Stacks of finished ranks are kept for the next rank started on the same
//! worker (their pages stay warm); all memory is unmapped when the pool drops,
//! after every coroutine of the job has been dropped: for a big pool (at
//! least [`UNMAP_IN_BACKGROUND`] slots carved) on a thread of its own, so
//! that `run` takes down the rest of the job and returns its results
//! meanwhile (a million-rank `hello`: out of the all-reduce to `run`
//! returned 0.80–0.95 s before, 0.13–0.24 s after, load ~4.8; the unmap
//! itself, ~0.65 s, then overlaps with the caller, or with the process's
//! exit). The next pool waits for that thread before mapping anything, so
//! at most one finished job's stacks are still mapped. (Unmapping a share of
//! the chunks on each worker instead made the end of a million-rank `hello`
//! slower, 0.91–1.00 s against 0.43–0.66 s: freeing pages from two threads
//! contends in the page allocator. Measured again with the pool's drop
//! itself split over two scoped threads: a million stacks took 0.97–1.61 s,
//! median 1.35 s, against 0.43–4.2 s, median 0.95 s, in one thread, six
//! alternating runs each at a load of 10–11.)
//!
//! ## Colored stack tops
//!
//! Every slot's top is page aligned, so without more the ranks' contexts
//! (near the top) and the frames they park in (at the same depth in every
//! rank) sit at the same offsets in their pages, and so in the same few
//! sets of each cache: the L2 (2 MiB, 16 ways, 2,048 sets on the README's
//! VM) holds only 512 lines of one page offset, and 512 ranks on a worker
//! touch that many in every collective. In a job of at most
//! [`COLORED_RANKS_PER_WORKER`] ranks a worker, a stack starts 0 to
//! [`COLORS`] − 1 cache lines below its slot's top (its color: consecutive
//! slots, consecutive colors), spreading those lines over half a page's
//! offsets: the ranks' frames stay in the top page (`hello`'s 4.34 KiB a
//! rank is unchanged), and the slot is that much larger, so every stack
//! still has the bytes asked for. Measured on that VM (2026-12-04,
//! `coll_bench --ranks 1024 --sizes 8`, 4 alternating pairs): back-to-back
//! barriers 60–63 µs against 76–80, all-reduces 80–85 against 99–120, the
//! all-reduce after a barrier 98–101 against 109–110; one worker, 512 ranks
//! (`coll_count all_reduce 4000 512 1`), 0.23–0.24 s of CPU against 0.29.
//! Tried on 1,024 ranks and one worker: 0.29 s against 0.34, and 0.23 s
//! with whole-page colors (64), which move half the ranks' frames onto a
//! second page (5.84 KiB a rank). With many ranks a worker the colors cost:
//! the frames no longer fit in any case, and spread over every set they
//! evict the data the ranks share instead of only each other (2 workers,
//! all-reduce of 2,048 ranks 367–384 µs colored against 317–328, 4,096
//! ranks 726–795 against 660–667, a million 300–318 ms against 280–299).
//!
//! ## Where a big job's start-up goes
//!
//! Profiled (`perf record -e cpu-clock`) on the 2-vCPU VM, `hello` with
//! 500,000 ranks, ~5.3 µs of CPU per rank in all (linear from 250,000 to
//! 2,000,000 ranks): the guard installs and top-page populates of this pool
//! take 42% (populate 31%: page allocation, zeroing, the cgroup charge and
//! an LRU drain per page; guards 8%, their page-table pages included; the
//! populates have since given way to faults, see above);
//! the barrier and all-reduce 29% of the workers' time (cache and TLB
//! misses on each rank's stack page and park slot); the final `munmap`
//! 6.6%, on one thread after the workers end, as the set-up (2%, the page
//! faults of the per-rank tables). So the wall time of a quiet machine is
//! about the serial set-up and unmap plus the rest over two workers. What
//! did not pay: prefetching the stack of a rank further back in the run
//! queue (the 2nd or 4th) instead of the next (user time at 500,000 ranks,
//! medians of 6: 1.26 and 1.34 s against 1.25 s), glibc's `hugetlb`
//! tunable for the per-rank tables (their faults cost more), 32 KiB stacks
//! (fewer page-table pages: ~5% less CPU, not a default to change).
//! Measured again on 2026-12-04 (21:45, 2 alternating pairs): with
//! `MYRIAD_STACK_SIZE=60K` (64 KiB slots, 32 to a page-table page) a
//! million-rank `hello` took 2.16–2.17 s start to exit against 2.21–2.22 s,
//! system time 2.24–2.26 s against 2.31–2.33: the slot's size is not where
//! the start-up goes. The page tables, ~0.5 KiB per rank with the
//! default 256 KiB slots (1 GB at 2,000,000 ranks), are not in the RSS
//! `hello` reports.
//!
//! At 4,000,000 ranks (2026-12-04, quiet, load ~2; `hello --ranks 4000000
//! --phases`, best of 4 warm runs 9.0 s start to exit, RSS 4.33 KiB a rank):
//! set-up 0.37 s (populating 1.3 GB of per-rank tables, mostly the
//! mailboxes), ranks started 5.85 s later, barrier +0.52 s, all-reduce
//! +0.70 s, `run` returned +0.21 s, the process's exit 1.35 s (freeing
//! 17 GB of stacks and 2 GB of page tables). The same kernel work in C
//! (`benches/fault_floor.c` with a guard installed per slot, 64 per
//! `process_madvise`, from two threads, right beside): 4.5–5.0 s for the
//! guards and faults (3.9–4.2 s faults alone), an exit of 1.3–1.5 s. So
//! the stacks are ~80% of the start and the exit is all kernel: a guard
//! costs ~0.4 µs of CPU whatever the batch (64 or 1,024 ranges a call),
//! and on this VM most of a page fault is the host backing fresh guest
//! memory (`clear_page_erms` was 38–50% of all CPU samples): the first run
//! after an idle spell takes 16–20 s. The rest of the start (~0.5 µs of
//! worker time a rank) is the rank's body up to its barrier arrival;
//! `Worker::start` itself is the first write to the stack (the fault).
//!
//! ## Touched pages (`MYRIAD_REPORT_MEMORY`)
//!
//! With [`StackPool::record_touched`] on, the worker hands each finished
//! rank's stack to [`StackPool::note_finished`], which counts the resident
//! pages of the slot with `mincore` (the rank's high-water mark: a stack
//! never gives pages back while its rank runs) and then drops them
//! (`MADV_DONTNEED`), so the next rank on that stack starts cold and is
//! measured alone. Off (the default), `note_finished` is one branch on a
//! `None`: warm reuse and no system calls.
//!
//! ## Under AddressSanitizer
//!
//! With the `sanitizer` feature (only with `-Zsanitizer=address`), corosensei
//! announces every switch to and from a rank's stack
//! (`__sanitizer_start_switch_fiber`), taking the stack's bounds from
//! [`Stack::base`] and [`Stack::limit`] (the trait's hidden `sanitizer_fiber`
//! method has a default built from them; a custom stack has nothing else to
//! implement). When a coroutine finishes (`into_stack`) or is dropped, it
//! unpoisons its whole stack, so a stack reused from the pool carries no
//! redzones of the rank that ran on it before: the pool itself needs no ASan
//! calls. The guard page is part of those bounds; ASan never reads it (it
//! checks shadow memory), and an overflow still faults on it and reaches the
//! handler in `guard` (ASan installs its own `SIGSEGV` handler first; ours
//! chains to it for faults outside the guard pages).

use std::io;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use corosensei::stack::{Stack, StackPointer};

use super::guard;
use crate::error::ResourceError;

/// `MADV_GUARD_INSTALL` (Linux 6.13); the libc crate has no constant for it.
const MADV_GUARD_INSTALL: libc::c_int = 102;

/// `PIDFD_SELF_THREAD_GROUP` (Linux 6.14): a pidfd meaning "this process",
/// so no descriptor is opened (nor inherited wrongly across `fork`).
const PIDFD_SELF: libc::c_int = -10001;

/// Whether `process_madvise` works on this process (cleared at its first
/// refusal; from then on one `madvise` per page).
static VECTORED: AtomicBool = AtomicBool::new(true);

/// How guard pages are installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GuardMode {
    /// Page-table guard markers: no mapping split.
    Madvise,
    /// `mprotect(PROT_NONE)`: two mappings per stack.
    Mprotect,
}

/// The system page size.
pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if size <= 0 {
        4096
    } else {
        size as usize
    }
}

/// A pool of guarded stacks of one size.
#[derive(Debug)]
pub(crate) struct StackPool {
    page: usize,
    slot_size: usize,
    /// Usable bytes every stack has at least (see
    /// [`stack_size`](Self::stack_size)).
    stack_size: usize,
    chunk_slots: usize,
    mode: GuardMode,
    chunks: Mutex<Chunks>,
    /// How many colors stack tops take (1: all at the top of their slot).
    colors: usize,
    /// Per rank slot (local index), the figures of the memory report;
    /// `None` unless it is on.
    touched: Option<Box<[RankFootprint]>>,
}

#[derive(Debug, Default)]
struct Chunks {
    /// `(address, length, registration)` of every mapping.
    maps: Vec<(usize, usize, guard::Registration)>,
    /// Slots of the newest chunk not handed out yet.
    next: usize,
    end: usize,
    /// Slots handed back by workers that exited while the job still ran.
    free: Vec<usize>,
}

/// What the memory report records of one rank while the job runs: the
/// stack bytes it touched (the pool) and the `rank_local!` values it
/// created (the worker, when the rank's body returns).
#[derive(Debug, Default)]
struct RankFootprint {
    stack: AtomicUsize,
    locals: AtomicUsize,
    locals_bytes: AtomicUsize,
}

/// [`RankFootprint`] read back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Footprint {
    /// Stack bytes touched (high-water mark).
    pub(crate) stack: usize,
    /// `rank_local!` values created, and their inline bytes.
    pub(crate) locals: usize,
    pub(crate) locals_bytes: usize,
}

/// The limits more stacks of a [`StackPool`] must fit in (see
/// [`StackPool::budget`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct StackBudget {
    mode: GuardMode,
    chunk_slots: usize,
    slot_size: usize,
}

/// Address space the stacks of one job may reserve at most (`MAP_NORESERVE`
/// mappings cost no memory until touched, but x86-64 gives a process 128
/// TiB): the default rank limit divides it by a stack slot.
const STACK_ADDRESS_SPACE: usize = 1 << 45;

impl StackBudget {
    /// With `mprotect` guards every stack splits its mapping: check that
    /// `stacks` more stacks fit under `vm.max_map_count` (reads
    /// `/proc/self/maps`; nothing to check with `madvise` guards).
    pub(crate) fn check(&self, stacks: usize) -> Result<(), ResourceError> {
        if self.mode == GuardMode::Madvise {
            return Ok(());
        }
        let limit = read_max_map_count().unwrap_or(65530);
        let used = count_maps().unwrap_or(0);
        // Two mappings per stack, plus one per chunk and headroom for the
        // program's own mappings (threads, buffers).
        let needed = 2 * stacks + stacks / self.chunk_slots + 1024;
        if used + needed > limit {
            return Err(ResourceError::MapCount {
                stacks,
                needed,
                limit,
                used,
            });
        }
        Ok(())
    }

    /// The most stacks the address space allows (the default limit of a
    /// job's ranks): those that fit in [`STACK_ADDRESS_SPACE`], at most
    /// 2^24. (With `mprotect` guards, [`check`](Self::check) bounds each
    /// spawn by the mappings left besides.)
    pub(crate) fn max_stacks(&self) -> usize {
        (STACK_ADDRESS_SPACE / self.slot_size).min(1 << 24)
    }
}

/// One guarded stack slot of a [`StackPool`].
#[derive(Debug)]
pub(crate) struct PooledStack {
    /// Lowest address of the slot (the guard page).
    slot: usize,
    size: usize,
    /// Where the stack starts: the slot's top, less its color.
    base: usize,
}

/// The colors of stack tops (see the module's note): 32 cache lines, half a
/// page of 4 KiB.
const COLORS: usize = 32;

/// The bytes between two colors: a cache line.
const COLOR_STEP: usize = 64;

/// The most ranks per worker for which stacks are colored (see the module's
/// note on colors).
const COLORED_RANKS_PER_WORKER: usize = 512;

/// How far below its slot's top a stack may start.
const COLOR_SPAN: usize = (COLORS - 1) * COLOR_STEP;

impl PooledStack {
    /// The stack of the slot at `slot`, its top moved down by the slot's
    /// color, one of `colors` (1: none): consecutive slots get consecutive
    /// colors.
    fn new(slot: usize, size: usize, colors: usize) -> PooledStack {
        let color = (slot / size) % colors;
        PooledStack {
            slot,
            size,
            base: slot + size - color * COLOR_STEP,
        }
    }
}

// SAFETY: [1] `limit` is the low end of the slot and includes the guard page
// installed before the slot is handed out, so an overflow faults instead of
// writing into the slot below; [2] the usable part, `base - slot - page`, is
// at least `size - page - (COLORS - 1) * COLOR_STEP` ≥ 4 KiB (`StackPool::new`
// rounds the stack size plus the colors' span up to whole pages, at least
// one); [3] `limit` is page aligned and `base` a multiple of `COLOR_STEP`
// below the page-aligned top, hence both `STACK_ALIGNMENT` (16) aligned; [4] the
// memory stays mapped until the pool drops, after every coroutine using one of
// its stacks has been dropped (the job joins its workers first).
unsafe impl Stack for PooledStack {
    fn base(&self) -> StackPointer {
        StackPointer::new(self.base).expect("stack slot address is not null")
    }

    fn limit(&self) -> StackPointer {
        StackPointer::new(self.slot).expect("stack slot address is not null")
    }
}

impl StackPool {
    /// A pool for stacks of at least `stack_size` usable bytes, expecting
    /// about `expected` live stacks (sizes the chunks), with guard pages
    /// installed as `mode` says (`None`: detect).
    pub(crate) fn new(
        stack_size: usize,
        expected: usize,
        mode: Option<GuardMode>,
    ) -> io::Result<StackPool> {
        let page = page_size();
        let stack_size = stack_size
            .max(corosensei::stack::MIN_STACK_SIZE)
            .div_ceil(page)
            * page;
        // The colors cost up to `COLOR_SPAN` bytes of a slot: added, so
        // that every stack still has `stack_size` bytes.
        let usable = (stack_size + COLOR_SPAN).div_ceil(page) * page;
        let slot_size = usable + page;
        // Chunks of at most 1 GiB of address space and at most 4096 slots: few
        // mappings for a million ranks, little waste for small jobs.
        let chunk_slots = expected
            .clamp(1, 4096)
            .min(((1usize << 30) / slot_size).max(1));
        let mode = match mode {
            Some(mode) => mode,
            None => detect_mode(page),
        };
        guard::install_handler();
        // The stacks of the last big job are still being unmapped: not two
        // jobs' worth of them at once.
        wait_unmapped();
        Ok(StackPool {
            page,
            slot_size,
            stack_size,
            chunk_slots,
            mode,
            chunks: Mutex::new(Chunks::default()),
            colors: 1,
            touched: None,
        })
    }

    /// Colors the tops of the stacks handed out from now on, if `ranks`
    /// ranks on `workers` workers are few enough for that to pay (see the
    /// module's note on colors).
    pub(crate) fn color_stacks(&mut self, ranks: usize, workers: usize) {
        if ranks.div_ceil(workers.max(1)) <= COLORED_RANKS_PER_WORKER {
            self.colors = COLORS;
        }
    }

    /// Records, for each of `ranks` rank slots, the stack bytes its rank
    /// touched (see the module's note on touched pages); read with
    /// [`StackPool::touched`].
    pub(crate) fn record_touched(&mut self, ranks: usize) {
        self.touched = Some((0..ranks).map(|_| RankFootprint::default()).collect());
    }

    /// What each rank slot's rank touched and created, if recorded (zeros
    /// for a rank that did not finish).
    pub(crate) fn footprints(&self) -> Option<Vec<Footprint>> {
        let touched = self.touched.as_ref()?;
        Some(
            touched
                .iter()
                .map(|t| Footprint {
                    stack: t.stack.load(Ordering::Relaxed),
                    locals: t.locals.load(Ordering::Relaxed),
                    locals_bytes: t.locals_bytes.load(Ordering::Relaxed),
                })
                .collect(),
        )
    }

    /// Called by a rank (slot `slot`) whose body returned, with the
    /// `rank_local!` values it created and their bytes, before they are
    /// destroyed; nothing unless the report is on.
    #[inline]
    pub(crate) fn note_locals(&self, slot: u32, (count, bytes): (usize, usize)) {
        if let Some(entry) = self.touched.as_ref().and_then(|t| t.get(slot as usize)) {
            entry.locals.store(count, Ordering::Relaxed);
            entry.locals_bytes.store(bytes, Ordering::Relaxed);
        }
    }

    /// Called by the worker with the stack of a finished rank or task (slot
    /// `slot`): with recording on, measures and drops its touched pages.
    #[inline]
    pub(crate) fn note_finished(&self, stack: &PooledStack, slot: u32) {
        if let Some(touched) = &self.touched {
            self.measure_and_drop(stack, touched.get(slot as usize));
        }
    }

    #[cold]
    fn measure_and_drop(&self, stack: &PooledStack, into: Option<&RankFootprint>) {
        let start = stack.slot + self.page;
        let len = stack.size - self.page;
        let pages = len / self.page;
        let mut residency = vec![0u8; pages];
        // SAFETY: `[start, start + len)` is the usable part of a slot of a
        // live mapping owned by the pool (page aligned); `residency` has one
        // byte per page of it, which is what `mincore` writes.
        let ret = unsafe {
            libc::mincore(
                start as *mut libc::c_void,
                len,
                residency.as_mut_ptr().cast(),
            )
        };
        if ret != 0 {
            return;
        }
        let resident = residency.iter().filter(|&&b| b & 1 != 0).count();
        if let Some(into) = into {
            // A task slot is not a rank's: its pages are dropped, not counted.
            into.stack
                .fetch_add(resident * self.page, Ordering::Relaxed);
        }
        // SAFETY: the stack's coroutine has finished (the worker passes only
        // stacks from `into_stack`), so nothing lives in these pages; the
        // next coroutine on this stack sees zeroed pages, which a fresh
        // stack also has.
        unsafe { libc::madvise(start as *mut libc::c_void, len, libc::MADV_DONTNEED) };
    }

    /// The guard mode in use.
    pub(crate) fn mode(&self) -> GuardMode {
        self.mode
    }

    /// Usable bytes per stack, at least: the size asked for, in whole
    /// pages (a stack's color takes up to [`COLOR_SPAN`] bytes of the rest
    /// of its slot).
    pub(crate) fn stack_size(&self) -> usize {
        self.stack_size
    }

    /// With `mprotect` guards every stack splits its mapping: check that
    /// `stacks` more stacks fit under `vm.max_map_count`.
    pub(crate) fn check_map_budget(&self, stacks: usize) -> Result<(), ResourceError> {
        self.budget().check(stacks)
    }

    /// What more stacks cost in mappings and address space, for checks
    /// made while the job runs (spawning ranks), away from the pool.
    pub(crate) fn budget(&self) -> StackBudget {
        StackBudget {
            mode: self.mode,
            chunk_slots: self.chunk_slots,
            slot_size: self.slot_size,
        }
    }

    /// The most stacks [`allocate_batch`](Self::allocate_batch) hands out at
    /// once: 64 slots of the default size span 16 MiB (eight page-table
    /// pages), whose 64 guards one system call installs.
    pub(crate) const BATCH: usize = 64;

    /// Appends `want` stacks (1 to [`BATCH`](Self::BATCH)) to `into`, in
    /// the order to use them (pop from the back): stacks handed back first,
    /// then adjacent fresh slots of one chunk (fewer if the chunk ends),
    /// their guards installed in one system call (see the module's note).
    /// At least one stack on success.
    pub(crate) fn allocate_batch(
        &self,
        want: usize,
        into: &mut Vec<PooledStack>,
    ) -> io::Result<()> {
        let want = want.clamp(1, Self::BATCH);
        let mut chunks = self.chunks.lock().unwrap_or_else(|e| e.into_inner());
        let reused = chunks.free.len().min(want);
        let from = chunks.free.len() - reused;
        let mut fresh = [0usize; Self::BATCH];
        let mut n = 0;
        if reused < want {
            if chunks.next == chunks.end {
                self.map_chunk(&mut chunks)?;
            }
            let left = (chunks.end - chunks.next) / self.slot_size;
            n = (want - reused).min(left);
            for (i, slot) in fresh[..n].iter_mut().enumerate() {
                *slot = chunks.next + i * self.slot_size;
            }
            chunks.next += n * self.slot_size;
        }
        let size = self.slot_size;
        let reused: Vec<usize> = chunks.free.drain(from..).collect();
        drop(chunks);
        let fresh = &fresh[..n];
        self.install_guards(fresh)?;
        let colors = self.colors;
        // Lowest fresh slot used first, then the reused ones.
        let slots = fresh.iter().rev().copied().chain(reused);
        into.extend(slots.map(|slot| PooledStack::new(slot, size, colors)));
        Ok(())
    }

    /// Hands out one stack slot with its guard page installed.
    #[cfg(test)]
    fn allocate(&self) -> io::Result<PooledStack> {
        let mut one = Vec::with_capacity(1);
        self.allocate_batch(1, &mut one)?;
        Ok(one.pop().expect("a batch holds a stack"))
    }

    /// Gives a stack back to the pool.
    #[cfg(test)]
    fn release(&self, stack: PooledStack) {
        self.release_all(std::iter::once(stack));
    }

    /// Gives stacks back to the pool (a worker exiting with spare stacks:
    /// all the stacks of its finished ranks, half a million at the end of
    /// a million-rank job, so one lock for them all).
    pub(crate) fn release_all(&self, stacks: impl ExactSizeIterator<Item = PooledStack>) {
        let mut chunks = self.chunks.lock().unwrap_or_else(|e| e.into_inner());
        chunks.free.reserve(stacks.len());
        chunks.free.extend(stacks.map(|stack| stack.slot));
    }

    fn map_chunk(&self, chunks: &mut Chunks) -> io::Result<()> {
        let len = self.chunk_slots * self.slot_size;
        // SAFETY: an anonymous private mapping at an address of the kernel's
        // choosing; no existing memory is affected.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        // Transparent huge pages would turn a 4 KiB stack into 2 MiB of RSS.
        // SAFETY: advice on a mapping we own; failure is harmless.
        unsafe { libc::madvise(addr, len, libc::MADV_NOHUGEPAGE) };
        let addr = addr as usize;
        let registration = guard::register(addr, len, self.slot_size, self.page, self.stack_size);
        chunks.maps.push((addr, len, registration));
        chunks.next = addr;
        chunks.end = addr + len;
        Ok(())
    }

    fn install_guard(&self, slot: usize) -> io::Result<()> {
        install_guard(slot, self.page, self.mode)
    }

    /// Installs the guard pages of fresh `slots` (not handed out yet).
    fn install_guards(&self, slots: &[usize]) -> io::Result<()> {
        if slots.len() > 1 && self.mode == GuardMode::Madvise {
            let pages = slots.iter().map(|&slot| (slot, self.page));
            // SAFETY: each range is the guard page of a slot inside a
            // mapping owned by the pool and not handed out yet: nothing
            // lives there.
            if unsafe { advise_pages(pages, MADV_GUARD_INSTALL) } {
                return Ok(());
            }
        }
        slots.iter().try_for_each(|&slot| self.install_guard(slot))
    }
}

/// Gives `advice` for every `(address, length)` range of `pages` in one
/// `process_madvise` call per 64 ranges; `false` if the kernel refused
/// (then nothing is promised: the caller falls back to `madvise`).
///
/// # Safety
///
/// `advice` on each range must be sound as `madvise` would be.
unsafe fn advise_pages(pages: impl Iterator<Item = (usize, usize)>, advice: libc::c_int) -> bool {
    if !VECTORED.load(Ordering::Relaxed) {
        return false;
    }
    let mut iov = [libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }; StackPool::BATCH];
    let mut n = 0;
    let mut total = 0;
    let flush = |iov: &[libc::iovec], total: usize| -> bool {
        // SAFETY: `iov` holds `iov.len()` valid entries (≤ UIO_MAXIOV); the
        // caller vouches for the advice on each.
        let done = unsafe {
            libc::syscall(
                libc::SYS_process_madvise,
                PIDFD_SELF,
                iov.as_ptr(),
                iov.len(),
                advice,
                0,
            )
        };
        if done < 0 {
            let err = io::Error::last_os_error().raw_os_error();
            // No such system call, no `PIDFD_SELF`, or advice it does not
            // take for a process: never try again.
            if matches!(
                err,
                Some(libc::ENOSYS | libc::EBADF | libc::EINVAL | libc::EPERM | libc::ESRCH)
            ) {
                VECTORED.store(false, Ordering::Relaxed);
            }
            return false;
        }
        done as usize == total
    };
    for (addr, len) in pages {
        iov[n] = libc::iovec {
            iov_base: addr as *mut libc::c_void,
            iov_len: len,
        };
        n += 1;
        total += len;
        if n == iov.len() {
            if !flush(&iov[..n], total) {
                return false;
            }
            (n, total) = (0, 0);
        }
    }
    n == 0 || flush(&iov[..n], total)
}

fn install_guard(slot: usize, page: usize, mode: GuardMode) -> io::Result<()> {
    let ret = match mode {
        // SAFETY: `slot` is the page-aligned start of a slot inside a mapping
        // owned by the pool and not handed out yet: nothing lives there.
        GuardMode::Madvise => unsafe {
            libc::madvise(slot as *mut libc::c_void, page, MADV_GUARD_INSTALL)
        },
        // SAFETY: as above.
        GuardMode::Mprotect => unsafe {
            libc::mprotect(slot as *mut libc::c_void, page, libc::PROT_NONE)
        },
    };
    if ret != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Slots a pool must have carved at least for its drop to unmap them on a
/// background thread (see the module's note on the end of a job): below
/// this, unmapping costs less than starting a thread.
const UNMAP_IN_BACKGROUND: usize = 1 << 16;

/// The thread unmapping the chunks of the last big pool dropped, if any:
/// the next pool waits for it, so that one job's dead stacks at most
/// outlive their job.
static UNMAPPING: Mutex<Option<std::thread::JoinHandle<()>>> = Mutex::new(None);

/// Waits until the chunks of the pools dropped so far are unmapped.
pub(crate) fn wait_unmapped() {
    let previous = UNMAPPING.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(thread) = previous {
        let _ = thread.join();
    }
}

/// Unmaps `maps`, `(address, length)` mappings of a dropped pool.
///
/// # Safety
///
/// Each mapping was created by [`StackPool::map_chunk`] and nothing refers
/// to its memory any more.
unsafe fn unmap(maps: &[(usize, usize)]) {
    for &(addr, len) in maps {
        // SAFETY: the caller vouches that nothing refers to this mapping.
        unsafe { libc::munmap(addr as *mut libc::c_void, len) };
    }
}

impl Drop for StackPool {
    fn drop(&mut self) {
        let chunks = self.chunks.get_mut().unwrap_or_else(|e| e.into_inner());
        let carved = chunks.maps.len() * self.chunk_slots;
        let maps: Vec<(usize, usize)> = chunks
            .maps
            .drain(..)
            .map(|(addr, len, registration)| {
                guard::unregister(registration);
                (addr, len)
            })
            .collect();
        if carved < UNMAP_IN_BACKGROUND {
            // SAFETY: the mappings were created by `map_chunk`; every
            // coroutine that used one of their stacks has been dropped (see
            // the `Stack` impl) and the pool that handed them out is going,
            // so nothing refers to this memory any more.
            unsafe { unmap(&maps) };
            return;
        }
        wait_unmapped();
        // Kept here too, in case no thread starts.
        let maps = std::sync::Arc::new(Mutex::new(maps));
        let theirs = std::sync::Arc::clone(&maps);
        let spawned = std::thread::Builder::new()
            .name("myriad-unmap".into())
            .spawn(move || {
                let maps = std::mem::take(&mut *theirs.lock().unwrap_or_else(|e| e.into_inner()));
                // SAFETY: the mappings were created by `map_chunk` and the
                // pool, gone with every coroutine that used one of their
                // stacks, handed them over: nothing refers to them any more.
                unsafe { unmap(&maps) };
            });
        match spawned {
            Ok(thread) => {
                // Another pool dropped meanwhile (processes as threads):
                // keep one thread, wait for the other.
                let other = UNMAPPING
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .replace(thread);
                if let Some(other) = other {
                    let _ = other.join();
                }
            }
            Err(_) => {
                let maps = std::mem::take(&mut *maps.lock().unwrap_or_else(|e| e.into_inner()));
                // SAFETY: as for a small pool above: nothing refers to
                // these mappings any more.
                unsafe { unmap(&maps) };
            }
        }
    }
}

/// Whether this kernel supports `MADV_GUARD_INSTALL`, probed on a scratch
/// mapping.
fn detect_mode(page: usize) -> GuardMode {
    static MODE: std::sync::OnceLock<GuardMode> = std::sync::OnceLock::new();
    *MODE.get_or_init(|| {
        // SAFETY: a scratch anonymous mapping, unmapped below.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                2 * page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return GuardMode::Mprotect;
        }
        // SAFETY: advice on the scratch mapping.
        let ok = unsafe { libc::madvise(addr, page, MADV_GUARD_INSTALL) } == 0;
        // SAFETY: unmapping the scratch mapping created above.
        unsafe { libc::munmap(addr, 2 * page) };
        if ok {
            GuardMode::Madvise
        } else {
            GuardMode::Mprotect
        }
    })
}

fn read_max_map_count() -> Option<usize> {
    std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .ok()?
        .trim()
        .parse()
        .ok()
}

fn count_maps() -> Option<usize> {
    Some(
        std::fs::read_to_string("/proc/self/maps")
            .ok()?
            .lines()
            .count(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_distinct_and_guarded() {
        let pool = StackPool::new(16 * 1024, 8, None).unwrap();
        let a = pool.allocate().unwrap();
        let b = pool.allocate().unwrap();
        assert_ne!(a.slot, b.slot);
        // Every stack has the bytes asked for, whatever its color.
        assert!(a.base().get() - a.limit().get() - pool.page >= 16 * 1024);
        assert_eq!(pool.stack_size(), 16 * 1024);
        assert!(pool.slot_size - pool.page - COLOR_SPAN >= pool.stack_size());
        // The usable part is writable from top to just above the guard.
        let top = a.base().get();
        // SAFETY: inside the usable part of slot `a`, owned by this test.
        unsafe {
            std::ptr::write_bytes(
                (a.slot + pool.page) as *mut u8,
                0xAB,
                top - a.slot - pool.page,
            )
        };
        pool.release(a);
        let c = pool.allocate().unwrap();
        assert_ne!(c.slot, b.slot);
    }

    /// In a job of few ranks per worker, adjacent stacks start at different
    /// offsets in their pages (their tops would share the same few cache
    /// sets otherwise), cycling through every color, and a stack given back
    /// keeps its color; in a big job all start at the top of their slot.
    #[test]
    fn adjacent_stacks_start_in_different_cache_lines_in_small_jobs() {
        fn tops(ranks: usize, workers: usize) -> (StackPool, Vec<PooledStack>, usize) {
            let mut pool = StackPool::new(16 * 1024, 2 * COLORS, None).unwrap();
            pool.color_stacks(ranks, workers);
            let mut stacks = Vec::new();
            while stacks.len() < COLORS {
                pool.allocate_batch(COLORS - stacks.len(), &mut stacks)
                    .unwrap();
            }
            let mut offsets: Vec<usize> =
                stacks.iter().map(|s| s.base().get() % pool.page).collect();
            offsets.sort_unstable();
            offsets.dedup();
            (pool, stacks, offsets.len())
        }
        let (pool, mut stacks, offsets) = tops(1024, 2);
        assert_eq!(offsets, COLORS, "one stack top per cache line");
        assert!(stacks.iter().all(|s| s.base().get() % COLOR_STEP == 0));
        let stack = stacks.pop().unwrap();
        let (slot, base) = (stack.slot, stack.base().get());
        pool.release_all(std::iter::once(stack));
        let again = pool.allocate().unwrap();
        assert_eq!((again.slot, again.base().get()), (slot, base));

        let (pool, stacks, offsets) = tops(1026, 2);
        assert_eq!(offsets, 1, "a big job's stacks are not colored");
        assert!(stacks
            .iter()
            .all(|s| s.base().get() == s.slot + pool.slot_size));
    }

    /// A rank that ends can leave poisoned bytes on its stack (redzones of
    /// frames whose epilogue never ran: a panic, a forced unwind at
    /// teardown); the next rank that gets the stack from the pool must not
    /// trip over them. corosensei unpoisons the bounds our `Stack` impl
    /// gives: this fails if they do not cover the usable part.
    #[cfg(all(feature = "sanitizer", target_arch = "x86_64"))]
    #[test]
    fn a_stack_comes_back_from_its_coroutine_unpoisoned() {
        use corosensei::{Coroutine, CoroutineResult, Yielder};

        extern "C" {
            fn __asan_poison_memory_region(addr: *const u8, size: usize);
            fn __asan_region_is_poisoned(beg: *mut u8, size: usize) -> *mut u8;
        }
        /// Poisons the unused part of the running stack, from `low` to a
        /// few pages below the current frame.
        fn poison_below_here(low: usize) {
            // The stack pointer itself: with `detect_stack_use_after_return`
            // the address of a local is in ASan's fake stack, not here.
            let sp: usize;
            // SAFETY: reads a register, touches no memory.
            unsafe { std::arch::asm!("mov {}, rsp", out(reg) sp, options(nomem, nostack)) };
            let high = (sp - 16 * 1024) & !4095;
            // SAFETY: `[low, high)` is the unused part of this stack, below
            // every live frame; poisoning only writes ASan's shadow.
            unsafe { __asan_poison_memory_region(low as *const u8, high - low) };
            assert!(is_poisoned(low, high - low));
        }
        fn is_poisoned(start: usize, len: usize) -> bool {
            // SAFETY: a shadow-memory query on memory the test owns.
            !unsafe { __asan_region_is_poisoned(start as *mut u8, len) }.is_null()
        }

        let pool = StackPool::new(64 * 1024, 1, None).unwrap();
        let stack = pool.allocate().unwrap();
        let (low, top) = (stack.slot + pool.page, stack.base().get());

        // A rank that returns: the stack comes back through `into_stack`.
        let mut co =
            Coroutine::with_stack(stack, move |_: &Yielder<(), ()>, ()| poison_below_here(low));
        assert!(matches!(co.resume(()), CoroutineResult::Return(())));
        let stack = co.into_stack();
        assert!(!is_poisoned(low, top - low), "a finished coroutine's stack");

        // A rank dropped while suspended (job teardown): through `Drop`.
        let mut co = Coroutine::with_stack(stack, move |y: &Yielder<(), ()>, ()| {
            poison_below_here(low);
            y.suspend(());
        });
        assert!(matches!(co.resume(()), CoroutineResult::Yield(())));
        drop(co);
        assert!(!is_poisoned(low, top - low), "a dropped coroutine's stack");
    }

    /// The `/proc/self/pagemap` entry of the page at `addr`.
    fn pagemap(addr: usize) -> u64 {
        use std::os::unix::fs::FileExt;
        let file = std::fs::File::open("/proc/self/pagemap").unwrap();
        let mut entry = [0u8; 8];
        file.read_exact_at(&mut entry, (addr / page_size() * 8) as u64)
            .unwrap();
        u64::from_ne_bytes(entry)
    }
    const PRESENT: u64 = 1 << 63;
    /// `PM_GUARD_REGION` (Linux 6.15).
    const GUARD: u64 = 1 << 58;

    /// Every stack of a batch has its own guard page and no page populated:
    /// a batch must not cost more memory than its ranks touch. Fails if a
    /// guard of the batch is missing (pagemap marks guard pages on Linux ≥
    /// 6.15) or if installing the guards populated any page of a stack.
    #[test]
    fn a_batch_of_stacks_is_guarded_and_nothing_populated() {
        let pool = StackPool::new(16 * 1024, 1000, None).unwrap();
        let mut stacks = Vec::new();
        pool.allocate_batch(8, &mut stacks).unwrap();
        assert_eq!(stacks.len(), 8);
        let page = pool.page;
        // Used from the back: the lowest slot first, then adjacent ones.
        let slots: Vec<usize> = stacks.iter().rev().map(|s| s.slot).collect();
        for pair in slots.windows(2) {
            assert_eq!(pair[1] - pair[0], pool.slot_size, "adjacent slots");
        }
        // Does this kernel's pagemap show guard pages? Probe one installed
        // the plain way.
        let probe = pool.allocate().unwrap();
        let shows_guards = pagemap(probe.slot) & GUARD != 0;
        for stack in &stacks {
            if pool.mode() == GuardMode::Madvise && shows_guards {
                assert_ne!(pagemap(stack.slot) & GUARD, 0, "guard of {:#x}", stack.slot);
            }
            for page in (stack.slot + page..stack.base().get()).step_by(page) {
                assert_eq!(pagemap(page) & PRESENT, 0, "page {page:#x} of a stack");
            }
        }
        // A batch stops at the end of its chunk; the next starts a chunk.
        let small = StackPool::new(16 * 1024, 3, None).unwrap();
        let mut more = Vec::new();
        small.allocate_batch(8, &mut more).unwrap();
        assert_eq!(more.len(), 3, "the chunk's slots");
        small.allocate_batch(8, &mut more).unwrap();
        assert_eq!(more.len(), 6, "a new chunk");
        // Stacks given back come first.
        let back = more.pop().unwrap();
        let slot = back.slot;
        small.release(back);
        let mut again = Vec::new();
        small.allocate_batch(2, &mut again).unwrap();
        assert!(
            again.iter().any(|s| s.slot == slot),
            "the released slot is reused"
        );
        assert_eq!(again.len(), 2);
    }

    /// A big pool's chunks are unmapped on a thread of its own once it
    /// drops, and gone once [`wait_unmapped`] returns (as a new pool
    /// waits). Fails if a marker written into each chunk can still be read
    /// back (`/proc/self/mem` fails on unmapped memory; memory that a test
    /// running meanwhile mapped there does not hold the marker).
    #[test]
    fn a_big_pool_unmaps_its_chunks_in_the_background() {
        use std::os::unix::fs::FileExt;
        const MARKER: &[u8; 16] = b"myriad-unmapping";
        let big = StackPool::new(16 * 1024, UNMAP_IN_BACKGROUND, None).unwrap();
        let chunks = UNMAP_IN_BACKGROUND.div_ceil(big.chunk_slots);
        let starts: Vec<usize> = (0..chunks)
            .map(|_| {
                let mut guard = big.chunks.lock().unwrap();
                big.map_chunk(&mut guard).unwrap();
                let start = guard.next;
                // SAFETY: the first bytes of a fresh chunk of this pool,
                // handed out to no one: one page touched per chunk.
                unsafe { std::ptr::copy_nonoverlapping(MARKER.as_ptr(), start as *mut u8, 16) };
                start
            })
            .collect();
        let mem = std::fs::File::open("/proc/self/mem").unwrap();
        let holds_marker = |start: usize| {
            let mut read = [0u8; 16];
            mem.read_exact_at(&mut read, start as u64).is_ok() && &read == MARKER
        };
        assert!(starts.iter().all(|&s| holds_marker(s)));
        drop(big);
        wait_unmapped();
        for start in starts {
            assert!(!holds_marker(start), "chunk {start:#x} of a big pool");
        }
    }

    #[test]
    fn mprotect_budget_error_names_the_sysctl() {
        let pool = StackPool::new(16 * 1024, 8, Some(GuardMode::Mprotect)).unwrap();
        let err = pool.check_map_budget(10_000_000).unwrap_err().to_string();
        assert!(err.contains("vm.max_map_count"), "{err}");
        assert!(err.contains("sysctl -w"), "{err}");
        assert!(pool.check_map_budget(10).is_ok());
    }
}
