//! Scatter and Gatherv's mirror, scatter(v): every algorithm against a reference.

use super::*;

fn scatter_case<T: Elem>(world: &SimpleCommunicator, root: i32, block: usize) {
    let (rank, n) = (world.rank() as usize, world.size() as usize);
    let p = world.process_at_rank(root);
    let mut recv = vec![untouched::<T>(); block];
    if world.rank() == root {
        let send: Vec<T> = (0..n * block)
            .map(|k| T::of(k / block, k % block))
            .collect();
        p.scatter_into_root(&send[..], &mut recv[..]);
    } else {
        p.scatter_into(&mut recv[..]);
    }
    check(&recv, |i| T::of(rank, i), &|| {
        format!(
            "scatter of {} root {root} block {block}: rank {rank}",
            std::any::type_name::<T>()
        )
    });
}

#[test]
fn scatter_algorithms() {
    for &alg in Collective::Scatter.algorithms() {
        for n in SIZES {
            with(n, Collective::Scatter, alg, |world| {
                for root in roots(n) {
                    for block in BLOCKS {
                        scatter_case::<u32>(world, root, block);
                        scatter_case::<(u8, u32)>(world, root, block);
                    }
                }
            });
        }
    }
}

fn scatterv_case<T: Elem>(world: &SimpleCommunicator, root: i32, unit: usize) {
    let (rank, n) = (world.rank() as usize, world.size() as usize);
    let counts = varying(n, unit, 1);
    let (mut displs, len) = reversed_with_gaps(&counts);
    // Send parts may overlap: the last rank reads (part of) rank 0's part.
    if n > 2 {
        displs[n - 1] = displs[0].min((len - counts[n - 1] as usize) as Count);
    }
    let send: Vec<T> = (0..len).map(|k| T::of(k, 1)).collect();
    let mut recv = vec![untouched::<T>(); counts[rank] as usize];
    let p = world.process_at_rank(root);
    if world.rank() == root {
        let part = Partition::new(&send[..], &counts[..], &displs[..]);
        p.scatter_varcount_into_root(&part, &mut recv[..]);
    } else {
        p.scatter_varcount_into(&mut recv[..]);
    }
    check(&recv, |i| send[displs[rank] as usize + i], &|| {
        format!(
            "scatterv of {} root {root} unit {unit}: rank {rank}",
            std::any::type_name::<T>()
        )
    });
}

#[test]
fn scatterv_algorithms() {
    for &alg in Collective::ScatterVarcount.algorithms() {
        for n in SIZES {
            with(n, Collective::ScatterVarcount, alg, |world| {
                for root in roots(n) {
                    for unit in [0, 1, 3, 4500] {
                        scatterv_case::<u32>(world, root, unit);
                        scatterv_case::<(u8, u32)>(world, root, unit);
                    }
                }
            });
        }
    }
}
