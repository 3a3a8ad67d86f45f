//! Synchronisation: no collective returns on a rank before the ranks its
//! result depends on have entered it, for every algorithm, blocking and
//! immediate.
//!
//! What MPI promises (chapter "Collective Communication": sections "Barrier
//! Synchronization", "Introduction and Overview", "Correctness"):
//! `MPI_Barrier` "blocks the caller until all group members have called
//! it", so it returns nowhere before every rank has entered. Of every other
//! collective the standard says only that it "may, or may not, have the
//! effect of synchronizing all calling processes": a rank may return as
//! soon as its own part is done.
//! What still holds is what the data forces, since a rank cannot return a
//! result made of inputs that were not yet given:
//!
//! | collective | returns on a rank only after these ranks entered |
//! |---|---|
//! | barrier, all_gather(v), all_to_all(v) (nonzero counts), all_reduce, reduce_scatter_block, split | all |
//! | gather(v), reduce | the root: all; the others: none |
//! | broadcast, scatter(v) | the root |
//! | scan | rank r: ranks 0..=r |
//! | exclusive_scan | rank r: ranks 0..r |
//! | window_create | none: an access to a rank waits for that rank's part instead (`tests/rma.rs`) |
//!
//! How a test catches an early return: every rank raises its flag in
//! `entered` just before the call. One rank, the late one, first waits until
//! every other rank has raised its flag, then sleeps ([`myriad::sleep`]
//! parks it, the others keep running) before raising its own and calling.
//! After the call, each rank checks the flags of the ranks it depends on.
//! A correct collective passes whatever the timing: a rank that waited for
//! the late rank's contribution finds its flag raised. A collective that
//! returns early does so during the late rank's sleep and finds the flag
//! down; with one worker the early ranks run to their end (or their wait)
//! before the sleeping rank can resume at all. Runs where no other rank
//! depends on the late one are skipped. The results are not checked here
//! (`collectives.rs` and `collectives_more.rs` do): only when calls return.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Mutex;
use std::time::Duration;

use myriad::collective::{Algorithm, Collective, SystemOperation};
use myriad::datatype::{Partition, PartitionMut};
use myriad::request;
use myriad::topology::{Color, SimpleCommunicator};
use myriad::traits::*;
use myriad::{Count, Rank};

/// How long the late rank sleeps before entering: time enough for any
/// early return to happen first.
const LATE_BY: Duration = Duration::from_millis(5);

/// Which ranks a rank's return depends on (the table in the module docs).
#[derive(Debug, Clone, Copy)]
enum Deps {
    /// Every rank, on every rank.
    All,
    /// Every rank, on the root only.
    RootNeedsAll,
    /// The root, on every rank.
    NeedRoot,
    /// Ranks 0..=r on rank r.
    Prefix,
    /// Ranks 0..r on rank r.
    ExclusivePrefix,
}

impl Deps {
    fn needs(self, rank: usize, n: usize, root: usize) -> std::ops::Range<usize> {
        match self {
            Deps::All => 0..n,
            Deps::RootNeedsAll if rank == root => 0..n,
            Deps::RootNeedsAll => 0..0,
            Deps::NeedRoot => root..root + 1,
            Deps::Prefix => 0..rank + 1,
            Deps::ExclusivePrefix => 0..rank,
        }
    }
}

/// Blocking call or immediate call plus wait.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Form {
    Blocking,
    Immediate,
}

/// Runs `op` for every algorithm of `collective` and panics listing every
/// rank that returned too early.
fn check(
    collective: Collective,
    deps: Deps,
    forms: &[Form],
    op: impl Fn(&SimpleCommunicator, Rank, Form) + Sync,
) {
    assert_none(early_returns(
        collective,
        collective.algorithms(),
        deps,
        forms,
        op,
    ));
}

fn assert_none(early: Vec<String>) {
    assert!(
        early.is_empty(),
        "{} call(s) returned before a rank they depend on entered:\n{}",
        early.len(),
        early.join("\n")
    );
}

/// Runs `op` for each of `algorithms`, on 4 and 5 ranks, 1 and 2 workers,
/// with the first, middle (the root), second-to-last and last rank as the
/// late one (where another rank depends on it); one line per rank that
/// returned too early.
fn early_returns(
    collective: Collective,
    algorithms: &[Algorithm],
    deps: Deps,
    forms: &[Form],
    op: impl Fn(&SimpleCommunicator, Rank, Form) + Sync,
) -> Vec<String> {
    let mut early = Vec::new();
    for &algorithm in algorithms {
        for &form in forms {
            for n in [4, 5] {
                let root = n / 2;
                // The first, the root, the last and the one before it.
                let mut lates = vec![0, root, n - 2, n - 1];
                lates.dedup();
                for late in lates {
                    let depended_on =
                        (0..n).any(|r| r != late && deps.needs(r, n, root).contains(&late));
                    if !depended_on {
                        continue;
                    }
                    for workers in [1, 2] {
                        let case = format!(
                            "{collective} {algorithm} {form:?}, {n} ranks on {workers} \
                             worker(s), root {root}, rank {late} late"
                        );
                        early.extend(
                            run_once(n, workers, late, root, deps, |world| {
                                world
                                    .set_collective_algorithm(collective, algorithm)
                                    .unwrap();
                                op(world, root as Rank, form)
                            })
                            .into_iter()
                            .map(|e| format!("{case}: {e}")),
                        );
                    }
                }
            }
        }
    }
    early
}

/// One job; returns what went wrong (one line per early rank).
fn run_once(
    n: usize,
    workers: usize,
    late: usize,
    root: usize,
    deps: Deps,
    call: impl Fn(&SimpleCommunicator) + Sync,
) -> Vec<String> {
    let entered: Vec<AtomicBool> = (0..n).map(|_| AtomicBool::new(false)).collect();
    let count = AtomicUsize::new(0);
    let early = Mutex::new(Vec::new());
    myriad::Runtime::builder()
        .ranks(n)
        .workers(workers)
        .run(|universe| {
            let world = universe.world();
            let rank = world.rank() as usize;
            if rank == late {
                while count.load(SeqCst) < n - 1 {
                    myriad::yield_now();
                }
                myriad::sleep(LATE_BY);
            }
            entered[rank].store(true, SeqCst);
            count.fetch_add(1, SeqCst);
            call(&world);
            let missing: Vec<usize> = deps
                .needs(rank, n, root)
                .filter(|&r| !entered[r].load(SeqCst))
                .collect();
            if !missing.is_empty() {
                early.lock().unwrap().push(format!(
                    "rank {rank} returned before rank(s) {missing:?} entered"
                ));
            }
        })
        .unwrap_or_else(|e| panic!("job failed: {e}"));
    early.into_inner().unwrap()
}

const BOTH: &[Form] = &[Form::Blocking, Form::Immediate];

/// `r + 1` elements for rank `r`: every part nonzero.
fn counts(n: usize) -> (Vec<Count>, Vec<Count>) {
    let counts: Vec<Count> = (1..=n as Count).collect();
    let displs = counts
        .iter()
        .scan(0, |at, &c| {
            let d = *at;
            *at += c;
            Some(d)
        })
        .collect();
    (counts, displs)
}

#[test]
fn barrier_waits_for_every_rank() {
    check(
        Collective::Barrier,
        Deps::All,
        BOTH,
        |world, _, form| match form {
            Form::Blocking => world.barrier(),
            Form::Immediate => {
                world.immediate_barrier().wait();
            }
        },
    );
}

#[test]
fn all_gather_waits_for_every_rank() {
    check(Collective::AllGather, Deps::All, BOTH, |world, _, form| {
        let mine = [world.rank() as u64; 2];
        let mut all = vec![0u64; 2 * world.size() as usize];
        match form {
            Form::Blocking => world.all_gather_into(&mine[..], &mut all[..]),
            Form::Immediate => request::scope(|scope| {
                world
                    .immediate_all_gather_into(scope, &mine[..], &mut all[..])
                    .wait();
            }),
        }
    });
}

#[test]
fn all_gather_varcount_waits_for_every_rank() {
    check(
        Collective::AllGatherVarcount,
        Deps::All,
        BOTH,
        |world, _, form| {
            let (rank, n) = (world.rank() as usize, world.size() as usize);
            let (counts, displs) = counts(n);
            let mine = vec![rank as u64; rank + 1];
            let mut all = vec![0u64; n * (n + 1) / 2];
            let mut part = PartitionMut::new(&mut all[..], &counts[..], &displs[..]);
            match form {
                Form::Blocking => world.all_gather_varcount_into(&mine[..], &mut part),
                Form::Immediate => request::scope(|scope| {
                    world
                        .immediate_all_gather_varcount_into(scope, &mine[..], &mut part)
                        .wait();
                }),
            }
        },
    );
}

#[test]
fn all_to_all_waits_for_every_rank() {
    check(Collective::AllToAll, Deps::All, BOTH, |world, _, form| {
        let n = world.size() as usize;
        let send = vec![world.rank() as u64; n];
        let mut recv = vec![0u64; n];
        match form {
            Form::Blocking => world.all_to_all_into(&send[..], &mut recv[..]),
            Form::Immediate => request::scope(|scope| {
                world
                    .immediate_all_to_all_into(scope, &send[..], &mut recv[..])
                    .wait();
            }),
        }
    });
}

#[test]
fn all_to_all_varcount_waits_for_every_rank() {
    check(
        Collective::AllToAllVarcount,
        Deps::All,
        BOTH,
        |world, _, form| {
            // Rank r sends r + 1 elements to everyone and receives j + 1
            // from rank j: no pair exchanges nothing.
            let (rank, n) = (world.rank() as usize, world.size() as usize);
            let scounts = vec![rank as Count + 1; n];
            let sdispls: Vec<Count> = (0..n as Count).map(|j| j * (rank as Count + 1)).collect();
            let (rcounts, rdispls) = counts(n);
            let send = vec![rank as u64; n * (rank + 1)];
            let mut recv = vec![0u64; n * (n + 1) / 2];
            let spart = Partition::new(&send[..], &scounts[..], &sdispls[..]);
            let mut rpart = PartitionMut::new(&mut recv[..], &rcounts[..], &rdispls[..]);
            match form {
                Form::Blocking => world.all_to_all_varcount_into(&spart, &mut rpart),
                Form::Immediate => request::scope(|scope| {
                    world
                        .immediate_all_to_all_varcount_into(scope, &spart, &mut rpart)
                        .wait();
                }),
            }
        },
    );
}

#[test]
fn all_reduce_waits_for_every_rank() {
    check(Collective::AllReduce, Deps::All, BOTH, |world, _, form| {
        let mine = [world.rank() as u64, 1];
        let mut sum = [0u64; 2];
        let op = SystemOperation::sum();
        match form {
            Form::Blocking => world.all_reduce_into(&mine[..], &mut sum[..], op),
            Form::Immediate => request::scope(|scope| {
                world
                    .immediate_all_reduce_into(scope, &mine[..], &mut sum[..], op)
                    .wait();
            }),
        }
    });
}

#[test]
fn reduce_scatter_block_waits_for_every_rank() {
    check(
        Collective::ReduceScatterBlock,
        Deps::All,
        BOTH,
        |world, _, form| {
            let n = world.size() as usize;
            let send = vec![1u64; 2 * n];
            let mut mine = [0u64; 2];
            let op = SystemOperation::sum();
            match form {
                Form::Blocking => world.reduce_scatter_block_into(&send[..], &mut mine[..], op),
                Form::Immediate => request::scope(|scope| {
                    world
                        .immediate_reduce_scatter_block_into(scope, &send[..], &mut mine[..], op)
                        .wait();
                }),
            }
        },
    );
}

#[test]
fn split_waits_for_every_rank() {
    // The new communicator's group depends on every rank's color.
    check(
        Collective::CommCreate,
        Deps::All,
        &[Form::Blocking],
        |world, _, _| {
            let color = Color::with_value(world.rank() % 2);
            world.split_by_color(color);
        },
    );
}

#[test]
fn gather_root_waits_for_every_rank() {
    check(
        Collective::Gather,
        Deps::RootNeedsAll,
        BOTH,
        |world, root, form| {
            let p = world.process_at_rank(root);
            let mine = [world.rank() as u64; 2];
            let mut all = vec![0u64; 2 * world.size() as usize];
            let is_root = world.rank() == root;
            match (form, is_root) {
                (Form::Blocking, true) => p.gather_into_root(&mine[..], &mut all[..]),
                (Form::Blocking, false) => p.gather_into(&mine[..]),
                (Form::Immediate, true) => request::scope(|scope| {
                    p.immediate_gather_into_root(scope, &mine[..], &mut all[..])
                        .wait();
                }),
                (Form::Immediate, false) => request::scope(|scope| {
                    p.immediate_gather_into(scope, &mine[..]).wait();
                }),
            }
        },
    );
}

#[test]
fn gather_varcount_root_waits_for_every_rank() {
    let op = |world: &SimpleCommunicator, root: Rank, form: Form| {
        let (rank, n) = (world.rank() as usize, world.size() as usize);
        let p = world.process_at_rank(root);
        let (counts, displs) = counts(n);
        let mine = vec![rank as u64; rank + 1];
        let mut all = vec![0u64; n * (n + 1) / 2];
        let is_root = rank == root as usize;
        let mut part = PartitionMut::new(&mut all[..], &counts[..], &displs[..]);
        match (form, is_root) {
            (Form::Blocking, true) => p.gather_varcount_into_root(&mine[..], &mut part),
            // The aggressive binomial Gatherv needs every rank to know the
            // counts.
            (Form::Blocking, false) => p.gather_varcount_into_known(&mine[..], &counts, &displs),
            (Form::Immediate, true) => request::scope(|scope| {
                p.immediate_gather_varcount_into_root(scope, &mine[..], &mut part)
                    .wait();
            }),
            (Form::Immediate, false) => request::scope(|scope| {
                p.immediate_gather_varcount_into(scope, &mine[..]).wait();
            }),
        }
    };
    let c = Collective::GatherVarcount;
    let mut early = early_returns(c, c.algorithms(), Deps::RootNeedsAll, &[Form::Blocking], op);
    // The immediate form has no way to pass the counts on a non-root rank,
    // which `binomial_aggressive` needs.
    let immediate: Vec<Algorithm> = c
        .algorithms()
        .iter()
        .copied()
        .filter(|&a| a != Algorithm::BinomialAggressive)
        .collect();
    early.extend(early_returns(
        c,
        &immediate,
        Deps::RootNeedsAll,
        &[Form::Immediate],
        op,
    ));
    assert_none(early);
}

#[test]
fn reduce_root_waits_for_every_rank() {
    check(
        Collective::Reduce,
        Deps::RootNeedsAll,
        BOTH,
        |world, root, form| {
            let p = world.process_at_rank(root);
            let mine = [world.rank() as u64, 1];
            let mut sum = [0u64; 2];
            let op = SystemOperation::sum();
            let is_root = world.rank() == root;
            match (form, is_root) {
                (Form::Blocking, true) => p.reduce_into_root(&mine[..], &mut sum[..], op),
                (Form::Blocking, false) => p.reduce_into(&mine[..], op),
                (Form::Immediate, true) => request::scope(|scope| {
                    p.immediate_reduce_into_root(scope, &mine[..], &mut sum[..], op)
                        .wait();
                }),
                (Form::Immediate, false) => request::scope(|scope| {
                    p.immediate_reduce_into(scope, &mine[..], op).wait();
                }),
            }
        },
    );
}

#[test]
fn broadcast_waits_for_the_root() {
    check(
        Collective::Broadcast,
        Deps::NeedRoot,
        BOTH,
        |world, root, form| {
            let p = world.process_at_rank(root);
            let mut buf = [world.rank() as u64; 3];
            match form {
                Form::Blocking => p.broadcast_into(&mut buf[..]),
                Form::Immediate => request::scope(|scope| {
                    p.immediate_broadcast_into(scope, &mut buf[..]).wait();
                }),
            }
        },
    );
}

#[test]
fn scatter_waits_for_the_root() {
    check(
        Collective::Scatter,
        Deps::NeedRoot,
        BOTH,
        |world, root, form| {
            let p = world.process_at_rank(root);
            let send = vec![7u64; 2 * world.size() as usize];
            let mut mine = [0u64; 2];
            let is_root = world.rank() == root;
            match (form, is_root) {
                (Form::Blocking, true) => p.scatter_into_root(&send[..], &mut mine[..]),
                (Form::Blocking, false) => p.scatter_into(&mut mine[..]),
                (Form::Immediate, true) => request::scope(|scope| {
                    p.immediate_scatter_into_root(scope, &send[..], &mut mine[..])
                        .wait();
                }),
                (Form::Immediate, false) => request::scope(|scope| {
                    p.immediate_scatter_into(scope, &mut mine[..]).wait();
                }),
            }
        },
    );
}

#[test]
fn scatter_varcount_waits_for_the_root() {
    check(
        Collective::ScatterVarcount,
        Deps::NeedRoot,
        BOTH,
        |world, root, form| {
            let (rank, n) = (world.rank() as usize, world.size() as usize);
            let p = world.process_at_rank(root);
            let (counts, displs) = counts(n);
            let send = vec![7u64; n * (n + 1) / 2];
            let mut mine = vec![0u64; rank + 1];
            let part = Partition::new(&send[..], &counts[..], &displs[..]);
            let is_root = rank == root as usize;
            match (form, is_root) {
                (Form::Blocking, true) => p.scatter_varcount_into_root(&part, &mut mine[..]),
                (Form::Blocking, false) => p.scatter_varcount_into(&mut mine[..]),
                (Form::Immediate, true) => request::scope(|scope| {
                    p.immediate_scatter_varcount_into_root(scope, &part, &mut mine[..])
                        .wait();
                }),
                (Form::Immediate, false) => request::scope(|scope| {
                    p.immediate_scatter_varcount_into(scope, &mut mine[..])
                        .wait();
                }),
            }
        },
    );
}

#[test]
fn scan_waits_for_the_ranks_before() {
    check(Collective::Scan, Deps::Prefix, BOTH, |world, _, form| {
        let mine = [1u64, world.rank() as u64];
        let mut sum = [0u64; 2];
        let op = SystemOperation::sum();
        match form {
            Form::Blocking => world.scan_into(&mine[..], &mut sum[..], op),
            Form::Immediate => request::scope(|scope| {
                world
                    .immediate_scan_into(scope, &mine[..], &mut sum[..], op)
                    .wait();
            }),
        }
    });
}

#[test]
fn exclusive_scan_waits_for_the_ranks_before() {
    check(
        Collective::ExclusiveScan,
        Deps::ExclusivePrefix,
        BOTH,
        |world, _, form| {
            let mine = [1u64, world.rank() as u64];
            let mut sum = [0u64; 2];
            let op = SystemOperation::sum();
            match form {
                Form::Blocking => world.exclusive_scan_into(&mine[..], &mut sum[..], op),
                Form::Immediate => request::scope(|scope| {
                    world
                        .immediate_exclusive_scan_into(scope, &mine[..], &mut sum[..], op)
                        .wait();
                }),
            }
        },
    );
}

/// The test above would pass for a collective that never returns early
/// because the late rank never sleeps: check the harness itself, with a
/// "collective" that does nothing.
#[test]
fn a_call_that_does_not_wait_is_caught() {
    for workers in [1, 2] {
        let early = run_once(4, workers, 3, 0, Deps::All, |_| {});
        assert_eq!(early.len(), 3, "{workers} worker(s): {early:?}");
    }
}

/// A collective added later gets a synchronisation test too (or a reason
/// in the module docs why it has none).
#[test]
fn every_collective_is_covered() {
    let covered = [
        Collective::Barrier,
        Collective::Broadcast,
        Collective::Gather,
        Collective::GatherVarcount,
        Collective::Scatter,
        Collective::ScatterVarcount,
        Collective::AllGather,
        Collective::AllGatherVarcount,
        Collective::AllToAll,
        Collective::AllToAllVarcount,
        Collective::Reduce,
        Collective::AllReduce,
        Collective::ReduceScatterBlock,
        Collective::Scan,
        Collective::ExclusiveScan,
        Collective::CommCreate,
        // Returns at once by design; covered in tests/rma.rs
        // (`an_access_before_the_target_created_its_part_waits_for_it`).
        Collective::WindowCreate,
    ];
    for c in Collective::ALL {
        assert!(covered.contains(c), "{c} has no synchronisation test");
    }
}
