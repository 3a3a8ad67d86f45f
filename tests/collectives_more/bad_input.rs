//! Bad input: buffers, counts, operations and type signatures that disagree.

use super::*;

fn all(c: Collective) -> Vec<(Collective, Algorithm)> {
    c.algorithms().iter().map(|&a| (c, a)).collect()
}

#[test]
fn scatter_root_buffer_too_small() {
    for (c, a) in all(Collective::Scatter) {
        let err = failure(3, true, &[(c, a)], |world| {
            let p = world.process_at_rank(1);
            let mut recv = [0u16; 2];
            if world.rank() == 1 {
                p.scatter_into_root(&[1u16; 5][..], &mut recv[..]);
            } else {
                p.scatter_into(&mut recv[..]);
            }
        });
        assert!(
            err.contains("holds 5 elements but 3 ranks × 2 elements need 6"),
            "{a}: {err}"
        );
    }
}

#[test]
fn all_to_all_blocks_that_do_not_divide_or_fit() {
    for (c, a) in all(Collective::AllToAll) {
        let err = failure(3, true, &[(c, a)], |world| {
            let mut recv = [0u8; 12];
            world.all_to_all_into(&[0u8; 4][..], &mut recv[..]);
        });
        assert!(
            err.contains("holds 4 elements, which do not split into 3 equal blocks"),
            "{a}: {err}"
        );
        let err = failure(3, true, &[(c, a)], |world| {
            let mut recv = [0u8; 5];
            world.all_to_all_into(&[0u8; 6][..], &mut recv[..]);
        });
        assert!(
            err.contains("holds 5 elements but 3 ranks × 2 elements need 6"),
            "{a}: {err}"
        );
    }
}

#[test]
fn all_gather_receive_buffers_too_small_or_of_another_size() {
    for (c, a) in all(Collective::AllGather) {
        let err = failure(4, true, &[(c, a)], |world| {
            let mut recv = [0u32; 7];
            world.all_gather_into(&[1u32, 2][..], &mut recv[..]);
        });
        assert!(
            err.contains("holds 7 elements but 4 ranks × 2 elements need 8"),
            "{a}: {err}"
        );
        // Counts are in elements of both buffers: their data sizes differ.
        let err = failure(2, true, &[(c, a)], |world| {
            let mut recv = [[0u32; 2]; 4];
            world.all_gather_into(&[1u32, 2][..], &mut recv[..]);
        });
        assert!(err.contains("counts are in elements of both"), "{a}: {err}");
    }
}

#[test]
fn varcount_counts_that_disagree() {
    // All-gatherv: a rank's send count differs from its own part.
    for (c, a) in all(Collective::AllGatherVarcount) {
        let err = failure(3, true, &[(c, a)], |world| {
            let counts = [1 as Count, 1, 1];
            let displs = [0 as Count, 1, 2];
            let mut recv = [0u8; 3];
            let mut part = PartitionMut::new(&mut recv[..], &counts[..], &displs[..]);
            let mine = vec![0u8; if world.rank() == 2 { 2 } else { 1 }];
            world.all_gather_varcount_into(&mine[..], &mut part);
        });
        assert!(
            err.contains("rank 2 sends 2 elements but its own part of the receive buffer holds 1"),
            "{a}: {err}"
        );
    }
    // All-gatherv: ranks disagree on another rank's count.
    for (c, a) in [
        (Collective::AllGatherVarcount, Algorithm::SharedMemory),
        (Collective::AllGatherVarcount, Algorithm::GatherBroadcast),
    ] {
        let err = failure(3, true, &[(c, a)], |world| {
            let counts: [Count; 3] = if world.rank() == 1 {
                [2, 1, 1]
            } else {
                [1, 1, 1]
            };
            let displs = [0 as Count, 2, 3];
            let mut recv = [0u8; 4];
            let mut part = PartitionMut::new(&mut recv[..], &counts[..], &displs[..]);
            world.all_gather_varcount_into(&[0u8][..], &mut part);
        });
        // Whichever rank notices first names both counts.
        assert!(
            err.contains("rank 0 sends 1 elements but rank 1 expects 2 from it")
                || err.contains("and 1 disagree on the count of rank 0: 1 and 2 elements")
                || err.contains("ranks 1 and 0 disagree on the count of rank 0: 2 and 1 elements")
                || err.contains("ranks 1 and 2 disagree on the count of rank 0: 2 and 1 elements")
                || err.contains("rank 1's part for rank 0 holds 2 elements but rank 0's holds 1"),
            "{a}: {err}"
        );
    }
    // Scatterv: the root sends rank 1 more than it receives.
    for (c, a) in all(Collective::ScatterVarcount) {
        let err = failure(3, true, &[(c, a)], |world| {
            let counts = [1 as Count, 3, 1];
            let displs = [0 as Count, 1, 4];
            let send = [9u32; 5];
            let mut recv = vec![0u32; if world.rank() == 1 { 2 } else { 1 }];
            let p = world.process_at_rank(0);
            if world.rank() == 0 {
                let part = Partition::new(&send[..], &counts[..], &displs[..]);
                p.scatter_varcount_into_root(&part, &mut recv[..]);
            } else {
                p.scatter_varcount_into(&mut recv[..]);
            }
        });
        assert!(
            err.contains("rank 1 receives 2 elements but the root sends it 3")
                || err.contains("truncated"),
            "{a}: {err}"
        );
    }
    // All-to-allv: rank 0 sends rank 1 two elements, rank 1 expects one.
    for (c, a) in all(Collective::AllToAllVarcount) {
        let err = failure(3, true, &[(c, a)], |world| {
            let rank = world.rank();
            let scounts: [Count; 3] = if rank == 0 { [1, 2, 1] } else { [1, 1, 1] };
            let sdispls = [0 as Count, 1, 3];
            let rcounts = [1 as Count, 1, 1];
            let rdispls = [0 as Count, 1, 2];
            let send = [rank as u32; 4];
            let mut recv = [0u32; 3];
            let spart = Partition::new(&send[..], &scounts[..], &sdispls[..]);
            let mut rpart = PartitionMut::new(&mut recv[..], &rcounts[..], &rdispls[..]);
            world.all_to_all_varcount_into(&spart, &mut rpart);
        });
        assert!(
            err.contains("rank 0 sends 2 elements to rank 1 but it expects 1 from it")
                || err.contains("truncated"),
            "{a}: {err}"
        );
    }
}

#[test]
fn uniform_counts_that_disagree() {
    // With the checker, different sizes are a collective mismatch.
    let body = |world: &SimpleCommunicator| {
        let p = world.process_at_rank(0);
        let mut recv = vec![0u32; if world.rank() == 2 { 3 } else { 2 }];
        if world.rank() == 0 {
            p.scatter_into_root(&[0u32; 6][..], &mut recv[..]);
        } else {
            p.scatter_into(&mut recv[..]);
        }
    };
    let err = failure(3, true, &all(Collective::Scatter)[..1], body);
    assert!(err.contains("collective mismatch"), "{err}");
    // Without it, the shared-memory path still names the values.
    let err = failure(3, false, &all(Collective::Scatter)[..1], body);
    assert!(
        err.contains("rank 2 receives 3 elements but the root sends it 2"),
        "{err}"
    );
    let err = failure(3, false, &all(Collective::AllGather)[..1], |world| {
        let mine = vec![0u32; if world.rank() == 1 { 2 } else { 1 }];
        let mut recv = [0u32; 6];
        world.all_gather_into(&mine[..], &mut recv[..]);
    });
    // Whichever rank notices first names both counts.
    assert!(
        err.contains("rank 1 sends 2 elements but rank 0 expects 1 from it")
            || err.contains("rank 1 sends 2 elements but rank 2 expects 1 from it")
            || err.contains("sends 1 elements but rank 1 expects 2 from it")
            || err.contains("and 1 disagree on the count of rank 0: 1 and 2 elements")
            || err.contains("and 1 disagree on the count of rank 2: 1 and 2 elements")
            || err.contains("disagree on the count of rank 1: 2 and 1 elements"),
        "{err}"
    );
    for kind in [Collective::Scan, Collective::ExclusiveScan] {
        let err = failure(3, false, &all(kind)[..1], |world| {
            let mine = vec![1u32; if world.rank() == 1 { 2 } else { 1 }];
            let mut recv = [0u32; 2];
            if kind == Collective::Scan {
                world.scan_into(&mine[..], &mut recv[..], SystemOperation::sum());
            } else {
                world.exclusive_scan_into(&mine[..], &mut recv[..], SystemOperation::sum());
            }
        });
        assert!(
            err.contains("rank 1 contributes 2 elements but rank 0 contributes 1"),
            "{kind}: {err}"
        );
    }
}

#[test]
fn scans_check_their_operation_and_buffers() {
    for (c, a) in all(Collective::Scan) {
        let err = failure(2, true, &[(c, a)], |world| {
            let mut out = [0.0f64];
            world.scan_into(&[1.0f64][..], &mut out[..], SystemOperation::bitwise_xor());
        });
        assert!(
            err.contains("MPI_BXOR is not defined for f64"),
            "{a}: {err}"
        );
        let err = failure(2, true, &[(c, a)], |world| {
            let mut out = [0u32; 1];
            world.scan_into(&[1u32, 2][..], &mut out[..], SystemOperation::sum());
        });
        assert!(
            err.contains("the receive buffer holds 1 elements but 2 are reduced"),
            "{a}: {err}"
        );
    }
}

#[test]
fn type_signatures_that_disagree() {
    // Rank 1 sends f32 where the others send and receive u32. The checker
    // compares type signatures first; without it, every algorithm still
    // refuses to reinterpret the data.
    let err = failure(3, true, &all(Collective::AllGather)[..1], |world| {
        let mut recv = [0u32; 3];
        if world.rank() == 1 {
            world.all_gather_into(&[1.0f32][..], &mut recv[..]);
        } else {
            world.all_gather_into(&[1u32][..], &mut recv[..]);
        }
    });
    assert!(err.contains("collective mismatch"), "{err}");
    for (c, a) in all(Collective::AllGather) {
        let err = failure(3, false, &[(c, a)], |world| {
            let mut recv = [0u32; 3];
            if world.rank() == 1 {
                world.all_gather_into(&[1.0f32][..], &mut recv[..]);
            } else {
                world.all_gather_into(&[1u32][..], &mut recv[..]);
            }
        });
        assert!(err.contains("type signature"), "{a}: {err}");
    }
    for (c, a) in all(Collective::AllToAll) {
        let err = failure(3, false, &[(c, a)], |world| {
            let mut recv = [0u32; 3];
            if world.rank() == 1 {
                world.all_to_all_into(&[1.0f32; 3][..], &mut recv[..]);
            } else {
                world.all_to_all_into(&[1u32; 3][..], &mut recv[..]);
            }
        });
        assert!(err.contains("type signature"), "{a}: {err}");
    }
    for (c, a) in all(Collective::Scatter) {
        let err = failure(3, false, &[(c, a)], |world| {
            let p = world.process_at_rank(0);
            if world.rank() == 0 {
                let mut recv = [0.0f32];
                p.scatter_into_root(&[1.0f32; 3][..], &mut recv[..]);
            } else {
                let mut recv = [0u32];
                p.scatter_into(&mut recv[..]);
            }
        });
        assert!(err.contains("type signature"), "{a}: {err}");
    }
    for (c, a) in all(Collective::Scan) {
        let err = failure(3, false, &[(c, a)], |world| {
            if world.rank() == 1 {
                let mut recv = [0.0f32];
                world.scan_into(&[1.0f32][..], &mut recv[..], SystemOperation::sum());
            } else {
                let mut recv = [0u32];
                world.scan_into(&[1u32][..], &mut recv[..], SystemOperation::sum());
            }
        });
        assert!(
            err.contains("type signature") || err.contains("a scan needs one type"),
            "{a}: {err}"
        );
    }
}

#[test]
fn short_messages_in_message_based_algorithms_are_count_errors() {
    // Checking off: message-based algorithms receive exactly what they
    // expect or fail with the counts, never leave the rest unwritten.
    for alg in [Algorithm::Linear, Algorithm::Pairwise] {
        let err = failure(2, false, &[(Collective::AllToAllVarcount, alg)], |world| {
            let me = world.rank();
            let send = [1u32; 3];
            // Rank 1 sends 2 elements to rank 0, which expects 3.
            let scounts: [Count; 2] = if me == 1 { [2, 1] } else { [1, 1] };
            let rcounts: [Count; 2] = if me == 0 { [1, 3] } else { [1, 1] };
            let sdispl: [Count; 2] = [0, 2];
            let rdispl: [Count; 2] = [0, 1];
            let mut recv = [0u32; 4];
            let spart = Partition::new(&send[..], &scounts[..], &sdispl[..]);
            let mut rpart = PartitionMut::new(&mut recv[..], &rcounts[..], &rdispl[..]);
            world.all_to_all_varcount_into(&spart, &mut rpart);
        });
        assert!(
            err.contains("expected 12 bytes from rank 1 but received 8"),
            "{alg:?}: {err}"
        );
    }
}
