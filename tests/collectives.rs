//! Collectives: every algorithm against a reference result, immediate forms,
//! mismatch detection and bad input.

use myriad::collective::{Algorithm, Collective, SystemOperation, UserOperation};
use myriad::datatype::PartitionMut;
use myriad::request;
use myriad::traits::*;
use myriad::{Count, Error};

/// Runs `f` on `n` ranks with `algorithm` chosen for `collective`.
fn with<T: Send>(
    n: usize,
    collective: Collective,
    algorithm: Algorithm,
    f: impl Fn(&myriad::topology::SimpleCommunicator) -> T + Sync,
) -> Vec<T> {
    myriad::run(n, |universe| {
        let world = universe.world();
        world
            .set_collective_algorithm(collective, algorithm)
            .expect("a valid algorithm");
        f(&world)
    })
    .unwrap_or_else(|e| panic!("{collective} with {algorithm} on {n} ranks: {e}"))
}

#[test]
fn barrier_algorithms() {
    for alg in Collective::Barrier.algorithms() {
        for n in [1, 2, 5, 64] {
            with(n, Collective::Barrier, *alg, |world| {
                for _ in 0..3 {
                    world.barrier();
                }
            });
        }
    }
}

#[test]
fn broadcast_algorithms() {
    for alg in Collective::Broadcast.algorithms() {
        for n in [1, 2, 3, 8, 13] {
            for len in [0usize, 1, 7, 1000, 40_000] {
                for root in [0, n as i32 - 1] {
                    with(n, Collective::Broadcast, *alg, |world| {
                        let mut buf: Vec<u32> = if world.rank() == root {
                            (0..len as u32).map(|i| i * 3 + 1).collect()
                        } else {
                            vec![0; len]
                        };
                        world.process_at_rank(root).broadcast_into(&mut buf[..]);
                        assert!(
                            buf.iter().enumerate().all(|(i, &x)| x == i as u32 * 3 + 1),
                            "{alg}: n={n} len={len} root={root} rank {}",
                            world.rank()
                        );
                    });
                }
            }
        }
    }
}

#[test]
fn gather_algorithms() {
    for alg in Collective::Gather.algorithms() {
        for n in [1, 2, 3, 8, 13] {
            for root in [0, n as i32 / 2] {
                with(n, Collective::Gather, *alg, |world| {
                    let rank = world.rank();
                    let mine = [rank as u64 * 10, rank as u64 * 10 + 1];
                    let p = world.process_at_rank(root);
                    if rank == root {
                        let mut all = vec![0u64; 2 * n];
                        p.gather_into_root(&mine[..], &mut all[..]);
                        for r in 0..n {
                            assert_eq!(
                                &all[2 * r..2 * r + 2],
                                &[r as u64 * 10, r as u64 * 10 + 1],
                                "{alg} n={n}"
                            );
                        }
                    } else {
                        p.gather_into(&mine[..]);
                    }
                });
            }
        }
    }
}

/// Gatherv layouts of the seed's message-chain cases: blocks in rank order
/// (continuous), reversed (non-continuous), mixed, and with empty blocks.
fn gatherv_layout(n: usize, pattern: usize) -> (Vec<Count>, Vec<Count>, usize) {
    let counts: Vec<Count> = (0..n)
        .map(|r| {
            if pattern == 3 && r % 3 == 1 {
                0
            } else {
                (r % 4 + 1) as Count
            }
        })
        .collect();
    let mut order: Vec<usize> = (0..n).collect();
    match pattern {
        1 => order.reverse(),
        2 => order.sort_by_key(|&r| (r % 2, r)),
        _ => {}
    }
    let mut displs = vec![0; n];
    let mut at = 0;
    for &r in &order {
        displs[r] = at as Count;
        at += counts[r] as usize + usize::from(pattern == 2);
    }
    (counts, displs, at)
}

#[test]
fn gatherv_algorithms_and_message_chains() {
    for alg in Collective::GatherVarcount.algorithms() {
        for n in [1, 2, 3, 7, 16, 21] {
            for pattern in 0..4 {
                let (counts, displs, total) = gatherv_layout(n, pattern);
                for root in [0, n as i32 - 1] {
                    with(n, Collective::GatherVarcount, *alg, |world| {
                        let rank = world.rank() as usize;
                        let mine: Vec<i32> =
                            (0..counts[rank]).map(|i| (rank * 100) as i32 + i).collect();
                        let p = world.process_at_rank(root);
                        if rank as i32 == root {
                            let mut all = vec![-1i32; total];
                            {
                                let mut part =
                                    PartitionMut::new(&mut all[..], &counts[..], &displs[..]);
                                p.gather_varcount_into_root(&mine[..], &mut part);
                            }
                            for r in 0..n {
                                for i in 0..counts[r] as usize {
                                    assert_eq!(
                                        all[displs[r] as usize + i],
                                        (r * 100 + i) as i32,
                                        "{alg} n={n} pattern={pattern} root={root} rank {r}"
                                    );
                                }
                            }
                        } else if *alg == Algorithm::BinomialAggressive {
                            p.gather_varcount_into_known(&mine[..], &counts, &displs);
                        } else {
                            p.gather_varcount_into(&mine[..]);
                        }
                    });
                }
            }
        }
    }
}

#[test]
fn binomial_gatherv_talks_to_log2_peers_at_the_root() {
    let n = 64;
    let counts = vec![2 as Count; n];
    let displs: Vec<Count> = (0..n as Count).map(|r| r * 2).collect();
    for (alg, peers) in [
        (Algorithm::Linear, n - 1),
        (Algorithm::BinomialConservative, 6),
        (Algorithm::BinomialAggressive, 6),
    ] {
        let stats = with(n, Collective::GatherVarcount, alg, |world| {
            let mine = [world.rank(); 2];
            let p = world.process_at_rank(0);
            if world.rank() == 0 {
                let mut all = vec![0i32; 2 * n];
                let mut part = PartitionMut::new(&mut all[..], &counts[..], &displs[..]);
                p.gather_varcount_into_root(&mine[..], &mut part);
                Some(myriad::collective::last_root_stats())
            } else {
                p.gather_varcount_into_known(&mine[..], &counts, &displs);
                None
            }
        });
        let stats = stats[0].unwrap();
        assert_eq!(stats.peers, peers, "{alg}");
        // Blocks in rank order: every chain is continuous, no temporary copy.
        assert_eq!(stats.tmp_bytes, 0, "{alg}");
    }
}

#[test]
fn reduce_and_all_reduce_algorithms() {
    for alg in Collective::Reduce.algorithms() {
        for n in [1, 2, 5, 16] {
            let out = with(n, Collective::Reduce, *alg, |world| {
                let rank = world.rank() as i64;
                let mine = [rank, rank * rank, 1];
                let p = world.process_at_rank(n as i32 - 1);
                if world.rank() == n as i32 - 1 {
                    let mut sum = [0i64; 3];
                    p.reduce_into_root(&mine[..], &mut sum[..], SystemOperation::sum());
                    Some(sum)
                } else {
                    p.reduce_into(&mine[..], SystemOperation::sum());
                    None
                }
            });
            let n64 = n as i64;
            let expect = [n64 * (n64 - 1) / 2, (0..n64).map(|r| r * r).sum(), n64];
            assert_eq!(out[n - 1], Some(expect), "{alg} n={n}");
        }
    }
    for alg in Collective::AllReduce.algorithms() {
        for n in [1, 2, 3, 6, 8, 13] {
            let out = with(n, Collective::AllReduce, *alg, |world| {
                let mut max = 0.0f64;
                world.all_reduce_into(
                    &(world.rank() as f64 * 1.5),
                    &mut max,
                    SystemOperation::max(),
                );
                let mut bits = 0u32;
                world.all_reduce_into(
                    &(1u32 << (world.rank() % 32)),
                    &mut bits,
                    SystemOperation::bitwise_or(),
                );
                (max, bits)
            });
            let bits = (0..n).fold(0u32, |b, r| b | 1 << (r % 32));
            assert!(
                out.iter().all(|&o| o == ((n - 1) as f64 * 1.5, bits)),
                "{alg} n={n}: {out:?}"
            );
        }
    }
}

#[test]
fn non_commutative_reductions_keep_rank_order() {
    // 2x2 matrix product is associative, not commutative.
    let op = UserOperation::associative(|x, y| {
        let x: &[[i64; 4]] = x.downcast().unwrap();
        for (y, x) in y.downcast::<[i64; 4]>().unwrap().iter_mut().zip(x) {
            let [a, b, c, d] = *x;
            let [e, f, g, h] = *y;
            *y = [a * e + b * g, a * f + b * h, c * e + d * g, c * f + d * h];
        }
    });
    let matrix = |r: i64| [1, r, 0, 1 + r % 2];
    let n = 7;
    let expected = (0..n as i64).map(matrix).reduce(|x, y| {
        let [a, b, c, d] = x;
        let [e, f, g, h] = y;
        [a * e + b * g, a * f + b * h, c * e + d * g, c * f + d * h]
    });
    for alg in Collective::AllReduce.algorithms() {
        let out = with(n, Collective::AllReduce, *alg, |world| {
            let mut prod = [0i64; 4];
            world.all_reduce_into(&matrix(world.rank() as i64), &mut prod, &op);
            prod
        });
        assert!(
            out.iter().all(|&p| Some(p) == expected),
            "{alg}: {out:?} vs {expected:?}"
        );
    }
    for alg in Collective::Reduce.algorithms() {
        let out = with(n, Collective::Reduce, *alg, |world| {
            let p = world.process_at_rank(3);
            if world.rank() == 3 {
                let mut prod = [0i64; 4];
                p.reduce_into_root(&matrix(world.rank() as i64), &mut prod, &op);
                Some(prod)
            } else {
                p.reduce_into(&matrix(world.rank() as i64), &op);
                None
            }
        });
        assert_eq!(out[3], expected, "{alg}");
    }
}

#[test]
fn reduce_scatter_block_algorithms() {
    for alg in Collective::ReduceScatterBlock.algorithms() {
        for n in [1, 3, 8] {
            let out = with(n, Collective::ReduceScatterBlock, *alg, |world| {
                let send: Vec<u64> = (0..2 * n as u64).map(|i| i + world.rank() as u64).collect();
                let mut mine = [0u64; 2];
                world.reduce_scatter_block_into(&send[..], &mut mine[..], SystemOperation::sum());
                mine
            });
            let n64 = n as u64;
            for (r, got) in out.iter().enumerate() {
                let base = n64 * (n64 - 1) / 2;
                assert_eq!(
                    *got,
                    [2 * r as u64 * n64 + base, (2 * r as u64 + 1) * n64 + base],
                    "{alg} n={n}"
                );
            }
        }
    }
}

#[test]
fn immediate_collectives_overlap() {
    let n = 6;
    let out = myriad::run(n, |universe| {
        let world = universe.world();
        let rank = world.rank();
        let mut sum = 0i32;
        let mut buf = if rank == 2 { [7u8; 5] } else { [0u8; 5] };
        let mut all = [0i32; 6];
        let mine = rank * 2;
        request::scope(|scope| {
            let a = world.immediate_all_reduce_into(scope, &rank, &mut sum, SystemOperation::sum());
            let b = world
                .process_at_rank(2)
                .immediate_broadcast_into(scope, &mut buf);
            // Complete them in another order than they started.
            if rank == 0 {
                let c =
                    world
                        .process_at_rank(0)
                        .immediate_gather_into_root(scope, &mine, &mut all[..]);
                let d = world.immediate_barrier();
                d.wait();
                c.wait();
            } else {
                let c = world.process_at_rank(0).immediate_gather_into(scope, &mine);
                let d = world.immediate_barrier();
                d.wait();
                c.wait();
            }
            b.wait();
            a.wait();
        });
        (sum, buf, all)
    })
    .unwrap();
    for (rank, (sum, buf, all)) in out.iter().enumerate() {
        assert_eq!(*sum, 15);
        assert_eq!(*buf, [7; 5]);
        if rank == 0 {
            assert_eq!(*all, [0, 2, 4, 6, 8, 10]);
        }
    }
}

/// More calls in progress on one communicator than its ring of rounds holds
/// (64): outstanding immediate collectives, completed in reverse order, and
/// roots racing ahead of their readers. Each call must meet its own round
/// (the calls beyond the ring's reach go to its overflow map) and give its
/// own result. 40 ranks, so that the selector picks the shared-memory
/// rounds.
#[test]
fn calls_further_apart_than_the_ring_of_rounds_meet_their_own_rounds() {
    const CALLS: i64 = 150;
    let n = 40;
    let out = myriad::run(n, |universe| {
        let world = universe.world();
        let rank = world.rank() as i64;
        // Outstanding immediate reductions, waited for last-first.
        let mine: Vec<i64> = (0..CALLS).map(|i| rank * 1000 + i).collect();
        let mut sums = vec![0i64; CALLS as usize];
        request::scope(|scope| {
            let mut requests: Vec<_> = mine
                .iter()
                .zip(sums.iter_mut())
                .map(|(mine, sum)| {
                    world.immediate_all_reduce_into(scope, mine, sum, SystemOperation::sum())
                })
                .collect();
            while let Some(r) = requests.pop() {
                r.wait();
            }
        });
        // Broadcasts whose root does not wait for its readers, readers
        // that fall behind.
        let mut seen = Vec::new();
        for i in 0..CALLS {
            let mut value = if rank == 3 { i * 7 } else { -1 };
            if rank != 3 && rank % 2 == 0 {
                for _ in 0..(i % 5) {
                    myriad::yield_now();
                }
            }
            world.process_at_rank(3).broadcast_into(&mut value);
            seen.push(value);
        }
        (sums, seen)
    })
    .unwrap();
    let ranks = n as i64;
    for (sums, seen) in out {
        for (i, sum) in sums.iter().enumerate() {
            assert_eq!(*sum, 1000 * ranks * (ranks - 1) / 2 + ranks * i as i64);
        }
        assert_eq!(seen, (0..CALLS).map(|i| i * 7).collect::<Vec<_>>());
    }
}

/// Rounds are reused from call to call (`src/coll/ring.rs`): a round that
/// served a reduction, a staged broadcast, an all-gather (in the round's own
/// buffer) or a gather of one type and size
/// must serve the next call, of another type and size, as a new one would
/// (no contribution, staged byte or deposit of the earlier call left).
#[test]
fn reused_rounds_forget_the_calls_they_served() {
    let n = 40;
    let out = myriad::run(n, |universe| {
        let world = universe.world();
        let rank = world.rank();
        let root = world.process_at_rank(1);
        let mut wrong = Vec::new();
        for i in 0..60usize {
            let len = 1 + i % 7;
            let mine: Vec<u32> = (0..len)
                .map(|k| (rank as u32 + 1) * (k as u32 + 1))
                .collect();
            let mut sum = vec![0u32; len];
            world.all_reduce_into(&mine[..], &mut sum[..], SystemOperation::sum());
            let ranks = n as u32 * (n as u32 + 1) / 2;
            if sum != (0..len).map(|k| ranks * (k as u32 + 1)).collect::<Vec<_>>() {
                wrong.push(format!("all_reduce {i}: {sum:?}"));
            }
            let x = [rank as f64 + 0.5; 3];
            let mut y = [0.0f64; 3];
            world.all_reduce_into(&x[..], &mut y[..], SystemOperation::max());
            if y != [n as f64 - 0.5; 3] {
                wrong.push(format!("max {i}: {y:?}"));
            }
            let mut data = vec![if rank == 1 { i as u16 } else { 0 }; 2 + i % 5];
            root.broadcast_into(&mut data[..]);
            if data.iter().any(|&d| d != i as u16) {
                wrong.push(format!("broadcast {i}: {data:?}"));
            }
            let part = vec![rank as u8 ^ i as u8; 1 + i % 3];
            let mut parts = vec![0u8; n * part.len()];
            world.all_gather_into(&part[..], &mut parts[..]);
            let expected: Vec<u8> = (0..n)
                .flat_map(|r| vec![r as u8 ^ i as u8; part.len()])
                .collect();
            if parts != expected {
                wrong.push(format!("all_gather {i}: {parts:?}"));
            }
            let word = (rank as u64) << 8 | i as u64;
            if rank == 1 {
                let mut all = vec![0u64; n];
                root.gather_into_root(&word, &mut all[..]);
                if all != (0..n as u64).map(|r| r << 8 | i as u64).collect::<Vec<_>>() {
                    wrong.push(format!("gather {i}: {all:?}"));
                }
            } else {
                root.gather_into(&word);
            }
        }
        wrong
    })
    .unwrap();
    for (rank, wrong) in out.iter().enumerate() {
        assert!(wrong.is_empty(), "rank {rank}: {wrong:#?}");
    }
}

#[test]
fn mismatched_collectives_are_reported_with_both_call_sites() {
    let err = myriad::run(4, |universe| {
        let world = universe.world();
        if world.rank() == 1 {
            let mut x = 0u32;
            world.process_at_rank(0).broadcast_into(&mut x);
        } else {
            world.barrier();
        }
    })
    .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("collective mismatch"), "{text}");
    assert!(
        text.contains("broadcast") && text.contains("barrier"),
        "{text}"
    );
    assert!(text.matches("tests/collectives.rs").count() >= 2, "{text}");

    let err = myriad::run(3, |universe| {
        let world = universe.world();
        let mut x = 0u32;
        let root = if world.rank() == 2 { 1 } else { 0 };
        world.process_at_rank(root).broadcast_into(&mut x);
    })
    .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("root 0") && text.contains("root 1"), "{text}");
}

#[test]
fn gatherv_counts_that_disagree_with_what_ranks_send() {
    for alg in [
        Algorithm::SharedMemory,
        Algorithm::Linear,
        Algorithm::BinomialConservative,
    ] {
        let err = myriad::run(4, |universe| {
            let world = universe.world();
            world
                .set_collective_algorithm(Collective::GatherVarcount, alg)
                .unwrap();
            let counts = [1 as Count, 1, 1, 1];
            let displs = [0 as Count, 1, 2, 3];
            // Rank 2 sends 3 elements where the root expects 1.
            let mine = vec![world.rank(); if world.rank() == 2 { 3 } else { 1 }];
            let p = world.process_at_rank(0);
            if world.rank() == 0 {
                let mut all = [0i32; 4];
                let mut part = PartitionMut::new(&mut all[..], &counts[..], &displs[..]);
                p.gather_varcount_into_root(&mine[..], &mut part);
            } else {
                p.gather_varcount_into(&mine[..]);
            }
        })
        .unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("rank 2 sends 3 elements but the root expects 1")
                || text.contains("truncated"),
            "{alg}: {text}"
        );
    }
}

#[test]
fn bad_buffers_and_partitions_are_errors() {
    // A receive buffer too small for a gather.
    let err = myriad::run(3, |universe| {
        let world = universe.world();
        let p = world.process_at_rank(0);
        if world.rank() == 0 {
            let mut all = [0u8; 2];
            p.gather_into_root(&1u8, &mut all[..]);
        } else {
            p.gather_into(&1u8);
        }
    })
    .unwrap_err();
    assert!(err.to_string().contains("need 3"), "{err}");
    // Overlapping and out-of-range partitions.
    for (displs, what) in [
        ([0 as Count, 1, 0], "overlap"),
        ([0 as Count, 2, 9], "ends after"),
    ] {
        let err = myriad::run(3, |universe| {
            let world = universe.world();
            let p = world.process_at_rank(0);
            if world.rank() == 0 {
                let mut all = [0u8; 4];
                let counts = [2 as Count, 1, 1];
                let mut part = PartitionMut::new(&mut all[..], &counts[..], &displs[..]);
                p.gather_varcount_into_root(&1u8, &mut part);
            } else {
                p.gather_varcount_into(&1u8);
            }
        })
        .unwrap_err();
        assert!(err.to_string().contains(what), "{what}: {err}");
    }
    // An operation the type does not support.
    let err = myriad::run(2, |universe| {
        let world = universe.world();
        let mut out = 0.0f64;
        world.all_reduce_into(&1.0f64, &mut out, SystemOperation::bitwise_and());
    })
    .unwrap_err();
    assert!(
        err.to_string().contains("MPI_BAND is not defined for f64"),
        "{err}"
    );
    // An algorithm the collective does not have.
    let err = myriad::run(1, |universe| {
        universe
            .world()
            .set_collective_algorithm(Collective::Broadcast, Algorithm::Ring)
            .unwrap_err()
    })
    .unwrap();
    assert!(
        err[0].to_string().contains("linear, binomial, symmetric"),
        "{}",
        err[0]
    );
}

#[test]
fn unknown_algorithm_names_in_the_environment_are_configuration_errors() {
    // Env vars are process-wide: check in a child process.
    if std::env::var_os("MYRIAD_COLL_BROADCAST").is_some() {
        let err = myriad::run(2, |_| ()).unwrap_err();
        assert!(matches!(err, Error::Config { .. }), "{err}");
        let text = err.to_string();
        assert!(
            text.contains("MYRIAD_COLL_BROADCAST") && text.contains("symmetric"),
            "{text}"
        );
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "unknown_algorithm_names_in_the_environment_are_configuration_errors",
            "--exact",
        ])
        .env("MYRIAD_COLL_BROADCAST", "bogus")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn every_shared_memory_family_is_checked_against_the_others() {
    // Each pair meets in one shared-memory round: the mismatch is an error,
    // never a hang.
    type Call = fn(&myriad::topology::SimpleCommunicator);
    let calls: [(&str, Call); 4] = [
        ("barrier", |w| w.barrier()),
        ("scan", |w| {
            let mut out = 0u64;
            w.scan_into(&1u64, &mut out, SystemOperation::sum());
        }),
        ("all_gather", |w| {
            let mut out = vec![0u32; w.size() as usize];
            w.all_gather_into(&1u32, &mut out[..]);
        }),
        ("all_to_all", |w| {
            let send = vec![1u32; w.size() as usize];
            let mut out = vec![0u32; w.size() as usize];
            w.all_to_all_into(&send[..], &mut out[..]);
        }),
    ];
    for (a, call_a) in calls {
        for (b, call_b) in calls {
            if a == b {
                continue;
            }
            let err = myriad::run(3, |universe| {
                let world = universe.world();
                if world.rank() == 2 {
                    call_b(&world);
                } else {
                    call_a(&world);
                }
            })
            .unwrap_err();
            let text = err.to_string();
            assert!(text.contains("collective mismatch"), "{a} vs {b}: {text}");
            assert!(text.contains(a) && text.contains(b), "{a} vs {b}: {text}");
        }
    }
}

#[test]
fn small_shared_memory_broadcasts_stage_padded_data_and_check_types() {
    // Up to 4 KiB the root stages its data and returns without waiting:
    // padding is skipped, the receivers' types are still checked.
    let out = with(5, Collective::Broadcast, Algorithm::SharedMemory, |world| {
        let mut buf = [(0u8, 0u32); 9];
        if world.rank() == 2 {
            for (i, x) in buf.iter_mut().enumerate() {
                *x = (i as u8, i as u32 * 1000);
            }
        }
        world.process_at_rank(2).broadcast_into(&mut buf[..]);
        buf
    });
    let expected: Vec<(u8, u32)> = (0..9).map(|i| (i as u8, i as u32 * 1000)).collect();
    assert!(out.iter().all(|b| b[..] == expected[..]), "{out:?}");

    let err = myriad::Runtime::builder()
        .ranks(3)
        .check_collectives(false)
        .run(|universe| {
            let world = universe.world();
            world
                .set_collective_algorithm(Collective::Broadcast, Algorithm::SharedMemory)
                .unwrap();
            if world.rank() == 0 {
                let mut buf = [1u32, 2];
                world.process_at_rank(0).broadcast_into(&mut buf[..]);
            } else {
                let mut buf = [0f32; 2];
                world.process_at_rank(0).broadcast_into(&mut buf[..]);
            }
        })
        .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("type signature"), "{text}");
}

/// `inout[i] = input[i] * 10 + inout[i]` over `i64`s: in rank order, the
/// ranks' digits side by side.
unsafe extern "C" fn digits(
    input: *mut std::ffi::c_void,
    inout: *mut std::ffi::c_void,
    len: *mut myriad::ffi::c_int,
    datatype: *mut myriad::ffi::MPI_Datatype,
) {
    // SAFETY: the runtime passes `*len` i64s at each pointer (the operation
    // is only used on i64 buffers) and a valid datatype handle.
    unsafe {
        if (*datatype).is_null() {
            return; // leaves inout unchanged: the test then fails
        }
        let n = *len as usize;
        let input = std::slice::from_raw_parts(input as *const i64, n);
        let inout = std::slice::from_raw_parts_mut(inout as *mut i64, n);
        for (y, x) in inout.iter_mut().zip(input) {
            *y += *x * 10i64.pow(y.to_string().len() as u32);
        }
    }
}

/// `inout[i] += input[i]` over `i64`s.
unsafe extern "C" fn add(
    input: *mut std::ffi::c_void,
    inout: *mut std::ffi::c_void,
    len: *mut myriad::ffi::c_int,
    _datatype: *mut myriad::ffi::MPI_Datatype,
) {
    // SAFETY: the runtime passes `*len` i64s at each pointer (the operation
    // is only used on i64 buffers).
    unsafe {
        let n = *len as usize;
        let input = std::slice::from_raw_parts(input as *const i64, n);
        let inout = std::slice::from_raw_parts_mut(inout as *mut i64, n);
        for (y, x) in inout.iter_mut().zip(input) {
            *y = y.wrapping_add(*x);
        }
    }
}

/// `UnsafeUserOperation` (a C-signature function, rsmpi's type) reduces in
/// rank order when associative, and any way when commutative.
#[test]
fn unsafe_user_operations_with_the_c_signature() {
    use myriad::collective::UnsafeUserOperation;
    for ranks in [1usize, 2, 3, 4, 7, 64] {
        let out = myriad::run(ranks, |universe| {
            let world = universe.world();
            let me = world.rank() as i64;
            let mut joined = [0i64; 2];
            if world.size() <= 7 {
                // SAFETY: `digits` is sound on any two i64 buffers.
                let ordered = unsafe { UnsafeUserOperation::associative(digits) };
                world.all_reduce_into(&[me + 1, 1][..], &mut joined[..], &ordered);
            }
            // SAFETY: `add` is sound on any two i64 buffers.
            let sum = unsafe { UnsafeUserOperation::commutative(add) };
            let mut total = 0i64;
            world.all_reduce_into(&me, &mut total, &sum);
            (joined, total)
        })
        .unwrap();
        let n = ranks as i64;
        for (joined, total) in out {
            assert_eq!(total, n * (n - 1) / 2, "{ranks} ranks");
            if ranks <= 7 {
                let digits: String = (1..=n).map(|d| d.to_string()).collect();
                let ones = "1".repeat(ranks);
                let want = [digits.parse().unwrap(), ones.parse().unwrap()];
                assert_eq!(joined, want, "{ranks} ranks");
            }
        }
    }
}

/// Reductions in a row, whose contributors leave a call's round before its
/// last arrival and arrive in the next call's: the first calls run before
/// the communicator knows which workers its ranks are pinned to (its census,
/// `coll/round.rs`), the later ones count their arrivals by worker, and a
/// round made before the census and one made after may be in progress at
/// once. Every root gets every call's sum, every all-reduce its total.
#[test]
fn reductions_in_a_row_across_the_census_of_workers() {
    let (n, calls) = (48u64, 120u64);
    let out = myriad::Runtime::builder()
        .ranks(n as usize)
        .workers(2)
        .run(|universe| {
            let world = universe.world();
            let me = world.rank() as u64;
            let mut got = Vec::new();
            for call in 0..calls {
                let root = world.process_at_rank((call % n) as i32);
                let mine = me * 1000 + call;
                if root.rank() == world.rank() {
                    let mut sum = 0u64;
                    root.reduce_into_root(&mine, &mut sum, SystemOperation::sum());
                    got.push((call, sum));
                } else {
                    root.reduce_into(&mine, SystemOperation::sum());
                }
                if call % 5 == 0 {
                    let mut total = 0u64;
                    world.all_reduce_into(&(me + call), &mut total, SystemOperation::sum());
                    got.push((call + 1_000_000, total));
                }
            }
            got
        })
        .unwrap();
    for (rank, got) in out.iter().enumerate() {
        for &(key, value) in got {
            let expect = match key.checked_sub(1_000_000) {
                Some(call) => n * (n - 1) / 2 + n * call,
                None => 1000 * n * (n - 1) / 2 + n * key,
            };
            assert_eq!(value, expect, "rank {rank}, call {key}");
        }
    }
    let roots: usize = out.iter().map(|g| g.len()).sum();
    assert_eq!(
        roots,
        calls as usize + n as usize * calls.div_ceil(5) as usize
    );
}
