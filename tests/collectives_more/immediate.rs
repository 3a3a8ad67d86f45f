//! Immediate forms, several outstanding at once.

use super::alltoall::pair;
use super::*;

/// The `k`-th algorithm of every collective of this file (cyclically).
fn kth_algorithms(k: usize) -> Vec<(Collective, Algorithm)> {
    [
        Collective::Scatter,
        Collective::ScatterVarcount,
        Collective::AllGather,
        Collective::AllGatherVarcount,
        Collective::AllToAll,
        Collective::AllToAllVarcount,
        Collective::Scan,
        Collective::ExclusiveScan,
    ]
    .into_iter()
    .map(|c| (c, c.algorithms()[k % c.algorithms().len()]))
    .collect()
}

#[test]
fn immediate_forms_overlap() {
    for k in 0..4 {
        for n in [1, 4, 7] {
            for block in [2, 3000] {
                immediate_case(n, k, block);
            }
        }
    }
}

fn immediate_case(n: usize, k: usize, block: usize) {
    let algorithms = kth_algorithms(k);
    let out = job(n, &algorithms, |world| {
        let (rank, size) = (world.rank() as usize, world.size() as usize);
        let root = world.process_at_rank(size as i32 - 1);
        let is_root = rank == size - 1;
        let scatter_send: Vec<u32> = (0..size * block)
            .map(|k| u32::of(k / block, k % block))
            .collect();
        let counts: Vec<Count> = (0..size).map(|r| (r % 3 * block) as Count).collect();
        let displs: Vec<Count> = (0..size).map(|r| (0..r).map(|q| counts[q]).sum()).collect();
        let total = counts.iter().sum::<Count>() as usize;
        let scatterv_send: Vec<u32> = (0..total).map(|k| u32::of(k, 3)).collect();
        let mine: Vec<u32> = (0..block).map(|i| u32::of(rank, i)).collect();
        let mine_v: Vec<u32> = (0..counts[rank] as usize)
            .map(|i| u32::of(rank, i))
            .collect();
        let to_all: Vec<u32> = (0..size * block)
            .map(|k| pair(rank, k / block, k % block))
            .collect();
        let ones = vec![1u64; block];

        let mut scattered = vec![0u32; block];
        let mut scattered_v = vec![0u32; counts[rank] as usize];
        let mut gathered = vec![0u32; size * block];
        let mut gathered_v = vec![0u32; total];
        let mut exchanged = vec![0u32; size * block];
        let mut exchanged_v = vec![0u32; size * block];
        let mut sums = vec![0u64; block];
        let mut ex_sums = vec![7u64; block];
        let uniform: Vec<Count> = vec![block as Count; size];
        let udispls: Vec<Count> = (0..size as Count).map(|r| r * block as Count).collect();
        // Partitions outlive the scope that borrows them.
        let sv_part = Partition::new(&scatterv_send[..], &counts[..], &displs[..]);
        let mut gv_part = PartitionMut::new(&mut gathered_v[..], &counts[..], &displs[..]);
        let tv_send = Partition::new(&to_all[..], &uniform[..], &udispls[..]);
        let mut tv_recv = PartitionMut::new(&mut exchanged_v[..], &uniform[..], &udispls[..]);
        request::scope(|scope| {
            let a = if is_root {
                root.immediate_scatter_into_root(scope, &scatter_send[..], &mut scattered[..])
            } else {
                root.immediate_scatter_into(scope, &mut scattered[..])
            };
            let b = if is_root {
                root.immediate_scatter_varcount_into_root(scope, &sv_part, &mut scattered_v[..])
            } else {
                root.immediate_scatter_varcount_into(scope, &mut scattered_v[..])
            };
            let c = world.immediate_all_gather_into(scope, &mine[..], &mut gathered[..]);
            let d = world.immediate_all_gather_varcount_into(scope, &mine_v[..], &mut gv_part);
            let e = world.immediate_all_to_all_into(scope, &to_all[..], &mut exchanged[..]);
            let f = world.immediate_all_to_all_varcount_into(scope, &tv_send, &mut tv_recv);
            let g =
                world.immediate_scan_into(scope, &ones[..], &mut sums[..], SystemOperation::sum());
            let h = world.immediate_exclusive_scan_into(
                scope,
                &ones[..],
                &mut ex_sums[..],
                SystemOperation::sum(),
            );
            // Complete them in another order than they started.
            h.wait();
            f.wait();
            d.wait();
            b.wait();
            g.wait();
            e.wait();
            c.wait();
            a.wait();
        });
        let what = || format!("immediate, algorithms #{k}, n={size} block={block}: rank {rank}");
        check(&scattered, |i| u32::of(rank, i), &what);
        check(
            &scattered_v,
            |i| scatterv_send[displs[rank] as usize + i],
            &what,
        );
        check(&gathered, |k| u32::of(k / block, k % block), &what);
        check(
            &gathered_v,
            |k| {
                let r = (0..size)
                    .find(|&r| (displs[r]..displs[r] + counts[r]).contains(&(k as Count)))
                    .unwrap();
                u32::of(r, k - displs[r] as usize)
            },
            &what,
        );
        check(&exchanged, |k| pair(k / block, rank, k % block), &what);
        check(&exchanged_v, |k| pair(k / block, rank, k % block), &what);
        assert!(sums.iter().all(|&s| s == rank as u64 + 1), "{}", what());
        let ex_expect = if rank == 0 { 7 } else { rank as u64 };
        assert!(ex_sums.iter().all(|&s| s == ex_expect), "{}", what());
        rank
    });
    assert_eq!(out.len(), n);
}
