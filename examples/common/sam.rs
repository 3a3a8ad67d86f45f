//! Seed 000's SAM emulator of Conjugate Gradient, and one reconfiguration
//! of it from NS to NT ranks with MaM's stages (Merge, then the data
//! redistribution of `myriad::malleable`). Shared by
//! `examples/malleable_cg.rs` (the timings) and `tests/malleable.rs` (the
//! emulator's result does not depend on the resize), which include this
//! file with `#[path]`.
//!
//! The emulator runs real CG on `A x = b`, `A` the banded matrix with
//! `2·band` on the diagonal and `-1` on the `band` diagonals either side
//! (a 1-D Laplacian widened: symmetric positive definite, slow to
//! converge, so its state stays meaningful for hundreds of iterations),
//! `b = A·1`, `x₀ = 0`. The vectors are block-distributed; one iteration
//! is the seed's communication pattern, one `all_gather` (the direction
//! vector, `n` `f64`) and two `all_reduce` (the dot products), plus the
//! local compute SAM models: the product of the rank's `2·band + 1`
//! nonzeros per row with the gathered vector, and the vector updates.
//!
//! MaM's data: the *variable* data are CG's vectors `x`, `r`, `p`
//! (changed by every iteration, redistributed blocking once the sources
//! stop iterating), the *constant* data a payload of `u64` standing for
//! the matrix (redistributed with the chosen strategy while the sources
//! iterate; SAM emulates the compute, so the iterations do not read it).

#![allow(dead_code)]

use std::time::Instant;

use myriad::collective::SystemOperation;
use myriad::datatype::PartitionMut;
use myriad::malleable::{block_range, InFlight, Method, Plan, Strategy};
use myriad::topology::{MergeOrder, RankOrder, SimpleCommunicator};
use myriad::traits::*;
use myriad::{Count, Runtime, Threading};

/// What every case runs with.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Setup {
    /// CG's vector length (global).
    pub(crate) n: usize,
    /// Half-width of the band: `2·band + 1` nonzeros per row.
    pub(crate) band: usize,
    /// Constant data: this many `u64`, block-distributed.
    pub(crate) payload: usize,
    /// Iterations timed on NS ranks before the resize (T_it(NS)) and on
    /// NT ranks after it (T_it(NT)).
    pub(crate) iters: usize,
    /// Bytes of reads each test of the background redistribution may
    /// issue (`InFlight::test_bounded`; the RMA methods under NB and WT
    /// read in pieces); `usize::MAX`: no bound. Ranks that are only
    /// targets test in a loop that yields between pieces.
    pub(crate) piece: usize,
}

/// One case's figures: times are the slowest rank's, in ms.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Figures {
    /// Grow: `spawn_ranks` + `merge` at the parents. Shrink: `shrink` at
    /// the survivors.
    pub(crate) spawn_ms: f64,
    /// From a barrier of all ranks (sources and targets) to the end of
    /// the variable data's redistribution: the constant data under the
    /// strategy while the sources iterate, then the variable data
    /// blocking.
    pub(crate) redist_ms: f64,
    /// One iteration on NS ranks without redistribution.
    pub(crate) it_ns_ms: f64,
    /// One iteration on NS ranks during the background redistribution
    /// (its test and the sources' agreement included); NaN if none ran.
    pub(crate) it_during_ms: f64,
    /// One iteration on NT ranks after the resize.
    pub(crate) it_nt_ms: f64,
    /// ω with means instead of medians on both sides (each source's mean
    /// iteration, the slowest source's): what a few long iterations add,
    /// which the medians leave out. NaN if no iteration ran.
    pub(crate) mean_omega: f64,
    /// The process's CPU time (every thread) per iteration on NS ranks
    /// without redistribution, and during it (NaN if none ran), as rank 0
    /// saw it over its own iterations: against each other, the work the
    /// background redistribution adds to an iteration (its copies, tests
    /// and agreements), which a loaded host disturbs less than the wall
    /// clock's ω.
    pub(crate) cpu_it_ns_ms: f64,
    pub(crate) cpu_it_during_ms: f64,
    /// Iterations the sources ran during the redistribution.
    pub(crate) iters_during: u64,
    /// CPU time of the whole process (every thread: the workers run the
    /// ranks and the Threading strategy's helpers) while `redist_ms` ran:
    /// the most any rank saw over its own timed span. Against
    /// `redist_ms`, the CPUs the redistribution kept busy.
    pub(crate) cpu_ms: f64,
    /// Every element of the constant data in place, and the variable
    /// data's checksum the same before and after.
    pub(crate) ok: bool,
    /// CG's iterations done at the end, and `r·r` then.
    pub(crate) done: u64,
    pub(crate) rr: f64,
}

/// CG on one rank.
pub(crate) struct Cg {
    n: usize,
    band: usize,
    /// The rank's block of the vectors.
    lo: usize,
    x: Vec<f64>,
    r: Vec<f64>,
    p: Vec<f64>,
    p_all: Vec<f64>,
    ap: Vec<f64>,
    /// The blocks of every rank of the current communicator (the
    /// all-gather's partition).
    counts: Vec<Count>,
    displs: Vec<Count>,
    /// `r·r`, known to every rank.
    pub(crate) rr: f64,
    /// Iterations done.
    pub(crate) done: u64,
}

fn dot(u: &[f64], v: &[f64]) -> f64 {
    u.iter().zip(v).map(|(a, b)| a * b).sum()
}

impl Cg {
    /// `x = 0`, `r = p = b` on `comm`'s block distribution.
    pub(crate) fn start(comm: &impl Communicator, n: usize, band: usize) -> Cg {
        let block = block_range(n, comm.size() as usize, comm.rank() as usize);
        // Row g of A·1: 2·band minus its off-diagonal nonzeros inside [0, n).
        let b: Vec<f64> = block
            .map(|g| {
                let (lo, hi) = (g.saturating_sub(band), (g + band + 1).min(n));
                (2 * band + 1) as f64 - (hi - lo) as f64
            })
            .collect();
        let mut cg = Cg::adopt(comm, n, band, vec![0.0; b.len()], b.clone(), b, 0.0, 0);
        let mut rr = 0.0;
        comm.all_reduce_into(&dot(&cg.r, &cg.r), &mut rr, SystemOperation::sum());
        cg.rr = rr;
        cg
    }

    /// CG's state on `comm`'s block distribution (after a redistribution).
    #[allow(clippy::too_many_arguments)]
    fn adopt(
        comm: &impl Communicator,
        n: usize,
        band: usize,
        x: Vec<f64>,
        r: Vec<f64>,
        p: Vec<f64>,
        rr: f64,
        done: u64,
    ) -> Cg {
        let (size, rank) = (comm.size() as usize, comm.rank() as usize);
        let blocks: Vec<_> = (0..size).map(|i| block_range(n, size, i)).collect();
        let block = blocks[rank].clone();
        assert_eq!(x.len(), block.len(), "CG's block on this rank");
        Cg {
            n,
            band,
            lo: block.start,
            ap: vec![0.0; x.len()],
            x,
            r,
            p,
            p_all: vec![0.0; n],
            counts: blocks.iter().map(|b| b.len() as Count).collect(),
            displs: blocks.iter().map(|b| b.start as Count).collect(),
            rr,
            done,
        }
    }

    /// One iteration over `comm` (whose distribution this state has).
    pub(crate) fn step(&mut self, comm: &impl Communicator) {
        {
            let mut all =
                PartitionMut::new(&mut self.p_all[..], &self.counts[..], &self.displs[..]);
            comm.all_gather_varcount_into(&self.p[..], &mut all);
        }
        let width = 2 * self.band + 1;
        for (i, out) in self.ap.iter_mut().enumerate() {
            let g = self.lo + i;
            let (lo, hi) = (g.saturating_sub(self.band), (g + self.band + 1).min(self.n));
            let row: f64 = self.p_all[lo..hi].iter().sum();
            *out = width as f64 * self.p_all[g] - row;
        }
        let mut pap = 0.0;
        comm.all_reduce_into(&dot(&self.p, &self.ap), &mut pap, SystemOperation::sum());
        let alpha = self.rr / pap;
        for i in 0..self.x.len() {
            self.x[i] += alpha * self.p[i];
            self.r[i] -= alpha * self.ap[i];
        }
        let mut rr = 0.0;
        comm.all_reduce_into(&dot(&self.r, &self.r), &mut rr, SystemOperation::sum());
        let beta = rr / self.rr;
        self.rr = rr;
        for i in 0..self.p.len() {
            self.p[i] = self.r[i] + beta * self.p[i];
        }
        self.done += 1;
    }

    /// Runs `iters` iterations (after one untimed) and returns the
    /// slowest rank's time per iteration in ms, and the process's CPU time
    /// per iteration over this rank's span.
    pub(crate) fn time(&mut self, comm: &impl Communicator, iters: usize) -> (f64, f64) {
        self.step(comm);
        comm.barrier();
        let (t, cpu) = (Instant::now(), process_cpu_ms());
        for _ in 0..iters {
            self.step(comm);
        }
        let per = iters.max(1) as f64;
        let cpu = (process_cpu_ms() - cpu) / per;
        (slowest(comm, ms(t) / per), cpu)
    }

    /// T_it's samples: `iters` iterations after one untimed (the
    /// warm-up) and a barrier, each one's time on this rank in ms, and the
    /// process's CPU time per iteration over them.
    fn samples(&mut self, comm: &impl Communicator, iters: usize) -> (Vec<f64>, f64) {
        self.step(comm);
        comm.barrier();
        let cpu = process_cpu_ms();
        let each = (0..iters)
            .map(|_| {
                let t = Instant::now();
                self.step(comm);
                ms(t)
            })
            .collect();
        (each, (process_cpu_ms() - cpu) / iters.max(1) as f64)
    }

    /// An exact checksum of the rank's vector elements with their global
    /// indices (xor of hashes, so the ranks' parts combine in any order).
    fn checksum(&self) -> u64 {
        hash_vectors(self.lo, [&self.x, &self.r, &self.p])
    }
}

fn hash_vectors(lo: usize, vectors: [&[f64]; 3]) -> u64 {
    let mut h = 0;
    for (which, v) in vectors.iter().enumerate() {
        for (i, e) in v.iter().enumerate() {
            let key = ((lo + i) as u64) << 2 | which as u64;
            h ^= mix(e.to_bits() ^ mix(key));
        }
    }
    h
}

/// splitmix64's finaliser.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// CPU time the process has used so far (every thread), in ms.
fn process_cpu_ms() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable `timespec`; the clock id is a
    // constant every Linux supports.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_PROCESS_CPUTIME_ID)");
    ts.tv_sec as f64 * 1e3 + ts.tv_nsec as f64 / 1e6
}

/// The per-iteration statistic ω compares: the median of one rank's
/// iteration times (a spell of load from other processes on the shared
/// host lengthens a few iterations; the redistribution's bounded pieces
/// lengthen every one alike). NaN for none.
pub(crate) fn typical(times: &[f64]) -> f64 {
    if times.is_empty() {
        return f64::NAN;
    }
    let mut v = times.to_vec();
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    }
}

fn slowest(comm: &impl Communicator, mine: f64) -> f64 {
    let mut out = 0.0;
    comm.all_reduce_into(&mine, &mut out, SystemOperation::max());
    out
}

/// The sources' iterations while the constant data moves (MaM's loop):
/// before each iteration the sources test the redistribution and agree
/// (an `all_reduce` of the flags over `app`: the strategies complete at
/// different iterations on different ranks, and CG's collectives need
/// them all); they iterate until all saw it complete. When every source
/// saw its own part complete but not yet the whole (under Wait Targets:
/// all of them in the barrier), they test and agree once more before
/// iterating: the first agreement synchronised them, so the barrier is
/// complete by then unless a rank that is only a target has not entered
/// it, and an iteration started only because some source tested before
/// the last one entered would be waste (seed 000 names these extra
/// iterations as future work). Otherwise the second look could not
/// succeed, so they iterate at once: one agreement per iteration, not two
/// (a collective more per iteration is a few wake-ups of the other
/// worker, milliseconds when the host is loaded). The second look issues
/// no reads (`test_bounded(0)`): an iteration carries one piece of the
/// copy, the ratio the header states.
/// Returns each iteration's time in ms (its test and agreement included)
/// and the process's CPU time over them.
fn iterate_during(
    app: &impl Communicator,
    cg: &mut Cg,
    flight: &mut InFlight<'_>,
    piece: usize,
) -> (Vec<f64>, f64) {
    // The least progress any source saw: 2 complete, 1 its own part
    // complete (under Wait Targets: in the barrier), 0 neither.
    let agree = |flight: &mut InFlight<'_>, piece: usize| {
        flight.test_bounded(piece).expect("the redistribution");
        let mine = u8::from(flight.is_done()) + u8::from(flight.is_mine_done());
        let mut all = 0u8;
        app.all_reduce_into(&mine, &mut all, SystemOperation::min());
        all
    };
    let (mut each, mut cpu) = (Vec::new(), 0.0);
    loop {
        let (t, c) = (Instant::now(), process_cpu_ms());
        let all = agree(flight, piece);
        if all == 2 || (all == 1 && agree(flight, 0) == 2) {
            return (each, cpu);
        }
        cg.step(app);
        each.push(ms(t));
        cpu += process_cpu_ms() - c;
    }
}

/// Bytes a rank that is only a target reads per turn of its worker's idle
/// time under a bound: a few microseconds of copying, the delay a source
/// woken meanwhile (its collective completed on the other worker) sees.
const IDLE_PIECE: usize = 16 << 10;

/// What one rank brings to the resize.
struct Side<'a> {
    /// The sources' communicator to iterate on, and CG's state (sources).
    app: Option<(&'a SimpleCommunicator, Cg)>,
    /// The spawn time (grow: parents).
    spawn_ms: f64,
}

/// One reconfiguration from `ns` to `nt` ranks with `method` and
/// `strategy`, in a job of its own; `setup.iters` iterations before and
/// after. Returns rank 0's figures.
///
/// The ranks are dealt to the workers cyclically: a shrink keeps ranks
/// `0..nt`, which the default block order puts on the first workers, so
/// the targets' copies and the survivors' iterations would use only part
/// of the machine (every method alike: the collective's receivers copy
/// too). Ranks do not migrate once started.
pub(crate) fn case(
    setup: Setup,
    ns: usize,
    nt: usize,
    method: Method,
    strategy: Strategy,
) -> Result<Figures, myriad::Error> {
    assert!(ns >= 1 && nt >= 1 && ns != nt, "a resize: {ns} -> {nt}");
    let out = Runtime::builder()
        .ranks(ns)
        .threading(Threading::Multiple)
        .rank_order(RankOrder::Cyclic)
        .run(move |universe| {
            let world = universe.world();
            let cg = Cg::start(&world, setup.n, setup.band);
            if nt > ns {
                world.barrier();
                let t = Instant::now();
                let children = world
                    .spawn_ranks(nt - ns, move |child| {
                        let parents = child.parent().expect("a spawned rank has parents");
                        let all = parents.merge(MergeOrder::High);
                        let side = Side {
                            app: None,
                            spawn_ms: 0.0,
                        };
                        resize(&all, setup, ns, nt, method, strategy, side);
                    })
                    .expect("spawn_ranks");
                let all = children.merge(MergeOrder::Low);
                let spawn_ms = ms(t);
                let side = Side {
                    app: Some((&world, cg)),
                    spawn_ms,
                };
                resize(&all, setup, ns, nt, method, strategy, side)
            } else {
                let side = Side {
                    app: Some((&world, cg)),
                    spawn_ms: 0.0,
                };
                resize(&world, setup, ns, nt, method, strategy, side)
            }
        })?;
    Ok(out[0].expect("rank 0 reports"))
}

/// The resize's redistribution and what follows, on `comm` (the merged
/// communicator of a grow, the sources' world of a shrink): ranks `0..ns`
/// are the sources, `0..nt` the targets. Every rank of `comm` calls it, in
/// the same order of collectives; rank 0 returns the figures.
fn resize(
    comm: &SimpleCommunicator,
    setup: Setup,
    ns: usize,
    nt: usize,
    method: Method,
    strategy: Strategy,
    side: Side<'_>,
) -> Option<Figures> {
    let rank = comm.rank() as usize;
    let Side { app, spawn_ms } = side;
    let (app, mut cg) = match app {
        Some((app, cg)) => (Some(app), Some(cg)),
        None => (None, None),
    };
    let payload = Plan::block(setup.payload, ns, nt).expect("the payload's plan");
    let vectors = Plan::block(setup.n, ns, nt).expect("the vectors' plan");
    let target = if rank < nt {
        payload.target_block(rank)
    } else {
        0..0
    };
    let mut src: Vec<u64> = if rank < ns {
        payload.source_block(rank).map(|i| i as u64).collect()
    } else {
        Vec::new()
    };
    let mut dst = vec![u64::MAX; target.len()];
    let dup = comm.duplicate();
    // T_it(NS), right before the background phase: the job as it will be
    // during it (the new ranks spawned and waiting, the buffers
    // allocated and touched), the time next to it; sampled again right
    // after it.
    let (mut without, cpu_before) = match (app, cg.as_mut()) {
        (Some(app), Some(cg)) => cg.samples(app, setup.iters),
        _ => (Vec::new(), f64::NAN),
    };
    // CG's scalars, for the new ranks, and T_it(NS), which paces the
    // reads of the ranks that are only targets.
    let mut scalars = cg
        .as_ref()
        .map_or([0.0; 3], |cg| [cg.rr, cg.done as f64, typical(&without)]);
    comm.process_at_rank(0).broadcast_into(&mut scalars[..]);
    let pace = std::time::Duration::from_secs_f64(scalars[2].max(0.0) / 1e3);
    comm.barrier();

    // The redistribution: constant data with the strategy while the
    // sources iterate, then the variable data blocking.
    let t = Instant::now();
    let cpu = process_cpu_ms();
    let (during, busy_cpu) = payload
        .redistribute_in_background(&dup, method, strategy, &mut src, &mut dst, |flight| match (
            app,
            cg.as_mut(),
        ) {
            (Some(app), Some(cg)) => iterate_during(app, cg, flight, setup.piece),
            _ => {
                // Only a target. With a bound it reads like the targets
                // that iterate, one piece per iteration: after each
                // T_it(NS) it sleeps through, the piece in its worker's
                // idle time (while the sources wait in their
                // collectives), at most `IDLE_PIECE` at a time: a source
                // woken meanwhile waits for the copy in progress.
                if setup.piece < usize::MAX {
                    'paced: loop {
                        myriad::sleep(pace);
                        let mut left = setup.piece;
                        while left > 0 {
                            myriad::yield_when_idle();
                            let take = left.min(IDLE_PIECE);
                            if flight.test_bounded(take).expect("the redistribution") {
                                break 'paced;
                            }
                            left -= take;
                        }
                    }
                }
                flight.wait().expect("the redistribution");
                (Vec::new(), 0.0)
            }
        })
        .expect("the constant data's redistribution");
    let (background_ms, background_cpu) = (ms(t), process_cpu_ms() - cpu);
    // T_it(NS) again, right after it; the redistribution's clock stops
    // meanwhile (the ranks that are not sources wait in a barrier).
    let (after, cpu_after) = match (app, cg.as_mut()) {
        (Some(app), Some(cg)) => cg.samples(app, setup.iters),
        _ => (Vec::new(), f64::NAN),
    };
    without.extend(after);
    comm.barrier();
    let t = Instant::now();
    let cpu = process_cpu_ms();
    // The variable data's checksum, now that the sources stopped
    // iterating: its time is not the redistribution's.
    let hashing = Instant::now();
    let before_mine = cg.as_ref().map_or(0, Cg::checksum);
    let hashing_ms = ms(hashing);
    let new_len = if rank < nt {
        vectors.target_block(rank).len()
    } else {
        0
    };
    let mut moved = [(); 3].map(|()| vec![0.0f64; new_len]);
    {
        let mut old = match cg.as_mut() {
            Some(cg) => [&mut cg.x, &mut cg.r, &mut cg.p].map(std::mem::take),
            None => [(); 3].map(|()| Vec::new()),
        };
        for (from, to) in old.iter_mut().zip(&mut moved) {
            vectors
                .redistribute(comm, method, from, to)
                .expect("the variable data's redistribution");
        }
    }
    let (mine, cpu_mine) = (
        background_ms + ms(t) - hashing_ms,
        background_cpu + process_cpu_ms() - cpu,
    );
    let redist_ms = slowest(comm, mine);
    // The checksum's CPU is in it (3 × `n` hashes over all sources).
    let cpu_ms = slowest(comm, cpu_mine);
    let mut before = 0u64;
    comm.all_reduce_into(&before_mine, &mut before, SystemOperation::bitwise_xor());

    // Every element checked.
    let payload_ok = dst.iter().copied().eq(target.clone().map(|i| i as u64));
    let lo = if rank < nt {
        vectors.target_block(rank).start
    } else {
        0
    };
    let [x, r, p] = moved;
    let mut after = 0u64;
    comm.all_reduce_into(
        &hash_vectors(lo, [&x, &r, &p]),
        &mut after,
        SystemOperation::bitwise_xor(),
    );
    let mut ok = 0u8;
    comm.all_reduce_into(&u8::from(payload_ok), &mut ok, SystemOperation::min());
    let ok = ok == 1 && before == after;
    let most = |v: u64| {
        let mut out = 0u64;
        comm.all_reduce_into(&v, &mut out, SystemOperation::max());
        out
    };
    let iters = during.len() as u64;
    let iters_during = most(iters);
    // ω's two sides, the same statistic: each source's median iteration,
    // the slowest source's.
    let it_during_ms = slowest(comm, if iters > 0 { typical(&during) } else { 0.0 });
    let it_ns_ms = slowest(
        comm,
        if without.is_empty() {
            0.0
        } else {
            typical(&without)
        },
    );
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let mean_omega =
        slowest(comm, if iters > 0 { mean(&during) } else { 0.0 }) / slowest(comm, mean(&without));
    let cpu_it_ns_ms = (cpu_before + cpu_after) / 2.0;
    let spawn_grow = slowest(comm, spawn_ms);
    let done = most(cg.as_ref().map_or(0, |cg| cg.done));
    let rr = scalars[0];
    let rr = cg.as_ref().map_or(rr, |cg| cg.rr);
    // The sources agreed on their iterations, so every source has the
    // same `rr`; rank 0 is one. New ranks take it from rank 0.
    let mut state = [rr, done as f64];
    comm.process_at_rank(0).broadcast_into(&mut state[..]);

    // Resume on the targets.
    let (next, spawn_ms) = if nt > ns {
        (None, spawn_grow)
    } else {
        comm.barrier();
        let t = Instant::now();
        let survivors = comm.shrink(rank < nt).expect("shrink");
        let mine = ms(t);
        match survivors {
            Some(s) => {
                let spawn_ms = slowest(&s, mine);
                (Some(s), spawn_ms)
            }
            None => return None,
        }
    };
    let on: &SimpleCommunicator = next.as_ref().unwrap_or(comm);
    let mut cg = Cg::adopt(on, setup.n, setup.band, x, r, p, state[0], state[1] as u64);
    let (it_nt_ms, _) = cg.time(on, setup.iters);
    (on.rank() == 0).then_some(Figures {
        spawn_ms,
        redist_ms,
        it_ns_ms,
        it_during_ms: if iters_during > 0 {
            it_during_ms
        } else {
            f64::NAN
        },
        it_nt_ms,
        mean_omega: if iters_during > 0 {
            mean_omega
        } else {
            f64::NAN
        },
        cpu_it_ns_ms,
        cpu_it_during_ms: if iters > 0 {
            busy_cpu / iters as f64
        } else {
            f64::NAN
        },
        iters_during,
        cpu_ms,
        ok,
        done: cg.done,
        rr: cg.rr,
    })
}

/// CG without a resize: `iters` iterations on `ranks` ranks; `r·r` then.
pub(crate) fn reference(n: usize, band: usize, ranks: usize, iters: u64) -> f64 {
    let out = Runtime::builder()
        .ranks(ranks)
        .run(move |universe| {
            let world = universe.world();
            let mut cg = Cg::start(&world, n, band);
            for _ in 0..iters {
                cg.step(&world);
            }
            cg.rr
        })
        .expect("the reference job");
    out[0]
}
