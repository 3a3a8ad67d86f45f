//! All-gather(v): every algorithm against a reference.

use super::*;

pub(super) fn allgather_case<S: Elem, R: Elem>(world: &SimpleCommunicator, block: usize) {
    let (rank, n) = (world.rank() as usize, world.size() as usize);
    let send: Vec<S> = (0..block).map(|i| S::of(rank, i)).collect();
    // Two elements more than needed, which must stay as they are.
    let mut recv = vec![untouched::<R>(); n * block + 2];
    world.all_gather_into(&send[..], &mut recv[..]);
    check(
        &recv,
        |k| {
            if k < n * block {
                R::of(k / block, k % block)
            } else {
                untouched()
            }
        },
        &|| {
            format!(
                "all-gather of {} as {} block {block}: rank {rank}",
                std::any::type_name::<S>(),
                std::any::type_name::<R>()
            )
        },
    );
}

#[test]
fn allgather_algorithms() {
    for &alg in Collective::AllGather.algorithms() {
        for n in SIZES {
            with(n, Collective::AllGather, alg, |world| {
                for block in BLOCKS {
                    allgather_case::<u32, u32>(world, block);
                    allgather_case::<(u8, u32), (u8, u32)>(world, block);
                }
            });
        }
    }
}

fn allgatherv_case<T: Elem>(world: &SimpleCommunicator, unit: usize) {
    let (rank, n) = (world.rank() as usize, world.size() as usize);
    let counts = varying(n, unit, 2);
    let (displs, len) = reversed_with_gaps(&counts);
    let send: Vec<T> = (0..counts[rank] as usize).map(|i| T::of(rank, i)).collect();
    let mut recv = vec![untouched::<T>(); len];
    {
        let mut part = PartitionMut::new(&mut recv[..], &counts[..], &displs[..]);
        world.all_gather_varcount_into(&send[..], &mut part);
    }
    // Parts filled, gaps untouched.
    let mut expect = vec![untouched::<T>(); len];
    for r in 0..n {
        for i in 0..counts[r] as usize {
            expect[displs[r] as usize + i] = T::of(r, i);
        }
    }
    check(&recv, |k| expect[k], &|| {
        format!(
            "all-gatherv of {} unit {unit}: rank {rank}",
            std::any::type_name::<T>()
        )
    });
}

#[test]
fn allgatherv_algorithms() {
    for &alg in Collective::AllGatherVarcount.algorithms() {
        for n in SIZES {
            with(n, Collective::AllGatherVarcount, alg, |world| {
                for unit in [0, 1, 3, 4500] {
                    allgatherv_case::<u32>(world, unit);
                    allgatherv_case::<(u8, u32)>(world, unit);
                }
            });
        }
    }
}
