//! All-to-all(v), and a struct received as another type with the same signature.

use super::allgather::allgather_case;
use super::*;

/// The value rank `from` sends to rank `to` at index `i`.
pub(super) fn pair<T: Elem>(from: usize, to: usize, i: usize) -> T {
    T::of(from * 100 + to, i)
}

fn alltoall_case<S: Elem, R: Elem>(world: &SimpleCommunicator, block: usize) {
    let (rank, n) = (world.rank() as usize, world.size() as usize);
    let send: Vec<S> = (0..n * block)
        .map(|k| pair(rank, k / block, k % block))
        .collect();
    let mut recv = vec![untouched::<R>(); n * block + 1];
    world.all_to_all_into(&send[..], &mut recv[..]);
    check(
        &recv,
        |k| {
            if k < n * block {
                pair(k / block, rank, k % block)
            } else {
                untouched()
            }
        },
        &|| {
            format!(
                "all-to-all of {} as {} block {block}: rank {rank}",
                std::any::type_name::<S>(),
                std::any::type_name::<R>()
            )
        },
    );
}

#[test]
fn alltoall_algorithms() {
    for &alg in Collective::AllToAll.algorithms() {
        for n in SIZES {
            with(n, Collective::AllToAll, alg, |world| {
                for block in BLOCKS {
                    alltoall_case::<u32, u32>(world, block);
                    alltoall_case::<(u8, u32), (u8, u32)>(world, block);
                }
            });
        }
    }
}

/// Elements rank `from` sends to rank `to`.
fn pair_count(from: usize, to: usize, unit: usize) -> Count {
    (((from + 2 * to) % 4) * unit) as Count
}

fn alltoallv_case<T: Elem>(world: &SimpleCommunicator, unit: usize) {
    let (rank, n) = (world.rank() as usize, world.size() as usize);
    // Send parts in reverse order with gaps, receive parts in rank order.
    let scounts: Vec<Count> = (0..n).map(|to| pair_count(rank, to, unit)).collect();
    let (sdispls, slen) = reversed_with_gaps(&scounts);
    let mut send = vec![untouched::<T>(); slen];
    for to in 0..n {
        for i in 0..scounts[to] as usize {
            send[sdispls[to] as usize + i] = pair(rank, to, i);
        }
    }
    let rcounts: Vec<Count> = (0..n).map(|from| pair_count(from, rank, unit)).collect();
    let rdispls: Vec<Count> = rcounts
        .iter()
        .scan(0, |at, &c| {
            let d = *at;
            *at += c + 1;
            Some(d)
        })
        .collect();
    let rlen = rdispls[n - 1] as usize + rcounts[n - 1] as usize + 1;
    let mut recv = vec![untouched::<T>(); rlen];
    {
        let spart = Partition::new(&send[..], &scounts[..], &sdispls[..]);
        let mut rpart = PartitionMut::new(&mut recv[..], &rcounts[..], &rdispls[..]);
        world.all_to_all_varcount_into(&spart, &mut rpart);
    }
    let mut expect = vec![untouched::<T>(); rlen];
    for from in 0..n {
        for i in 0..rcounts[from] as usize {
            expect[rdispls[from] as usize + i] = pair(from, rank, i);
        }
    }
    check(&recv, |k| expect[k], &|| {
        format!(
            "all-to-allv of {} unit {unit}: rank {rank}",
            std::any::type_name::<T>()
        )
    });
}

#[test]
fn alltoallv_algorithms() {
    for &alg in Collective::AllToAllVarcount.algorithms() {
        for n in SIZES {
            with(n, Collective::AllToAllVarcount, alg, |world| {
                for unit in [0, 1, 3, 4500] {
                    alltoallv_case::<u32>(world, unit);
                    alltoallv_case::<(u8, u32)>(world, unit);
                }
            });
        }
    }
}

#[test]
fn a_struct_is_received_as_another_type_with_the_same_signature() {
    // Tuples one way, `repr(C)` structs the other, and mixed across ranks:
    // the shared-memory path copies between the ranks' own layouts.
    for &alg in Collective::AllGather.algorithms() {
        with(5, Collective::AllGather, alg, |world| {
            for block in [1, 7, 4500] {
                allgather_case::<(u8, u32), Pair>(world, block);
                allgather_case::<Pair, (u8, u32)>(world, block);
                if world.rank() % 2 == 0 {
                    allgather_case::<Pair, Pair>(world, block);
                } else {
                    allgather_case::<(u8, u32), (u8, u32)>(world, block);
                }
            }
        });
    }
    for &alg in Collective::AllToAll.algorithms() {
        with(5, Collective::AllToAll, alg, |world| {
            for block in [1, 7, 4500] {
                if world.rank() % 2 == 0 {
                    alltoall_case::<Pair, (u8, u32)>(world, block);
                } else {
                    alltoall_case::<(u8, u32), Pair>(world, block);
                }
            }
        });
    }
    for &alg in Collective::Scatter.algorithms() {
        with(5, Collective::Scatter, alg, |world| {
            for block in [1, 4500] {
                let p = world.process_at_rank(2);
                let mut recv = vec![untouched::<Pair>(); block];
                if world.rank() == 2 {
                    let send: Vec<(u8, u32)> = (0..5 * block)
                        .map(|k| <(u8, u32)>::of(k / block, k % block))
                        .collect();
                    p.scatter_into_root(&send[..], &mut recv[..]);
                } else {
                    p.scatter_into(&mut recv[..]);
                }
                let rank = world.rank() as usize;
                check(&recv, |i| Pair::of(rank, i), &|| {
                    format!("{alg}: rank {rank}")
                });
            }
        });
    }
}
