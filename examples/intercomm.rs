//! Two groups talking through an inter-communicator, written as an rsmpi
//! program (`#[mpi::main]`): the world splits into a lower and an upper
//! half; an inter-communicator joins them (rsmpi 0.8 only gets these from
//! `spawn`; `InterCommunicator::create` is `MPI_Intercomm_create`); every
//! rank of each half sends a block to every rank of the other half with
//! immediate sends, and receives theirs with immediate receives, all in one
//! request collection (`multiple_scope`, `wait_all`); then the halves merge
//! back into one communicator, upper half first, and check the data with an
//! all-reduce. Prints one line, exits non-zero if anything is wrong.
//!
//! ```text
//! MYRIAD_RANKS=6 cargo run --example intercomm
//! cargo run --release --example intercomm -- --ranks 1000 --len 64
//! ```

use myriad as mpi;

use mpi::collective::SystemOperation;
use mpi::topology::{Color, InterCommunicator, MergeOrder};
use mpi::traits::*;

/// The value of `--len N` (elements per block, default 16).
fn len() -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == "--len")
        .and_then(|i| args.get(i + 1)?.parse().ok())
        .unwrap_or(16)
}

/// Element `i` of the block world rank `from` sends to world rank `to`.
fn value(from: i32, to: i32, i: usize) -> u64 {
    (from as u64) << 40 | (to as u64) << 20 | i as u64
}

#[mpi::main]
fn main() {
    let universe = mpi::initialize().unwrap();
    let world = universe.world();
    let (rank, size) = (world.rank(), world.size());
    assert!(
        size >= 2,
        "intercomm needs at least 2 ranks (MYRIAD_RANKS=2 or more)"
    );
    let len = len();
    let half = size / 2;
    let lower = rank < half;
    let local = world
        .split_by_color(Color::with_value(lower as i32))
        .expect("every rank has a color");
    // Leaders: each half's rank 0, named by their world ranks.
    let remote_leader = if lower { half } else { 0 };
    let inter = InterCommunicator::create(&local, 0, &world, remote_leader, 99);
    let remote = inter.remote_size();
    let remote_world = |r: i32| if lower { half + r } else { r };

    // A block to and from every remote rank, all in one request collection.
    let outgoing: Vec<Vec<u64>> = (0..remote)
        .map(|r| (0..len).map(|i| value(rank, remote_world(r), i)).collect())
        .collect();
    let mut incoming = vec![vec![0u64; len]; remote as usize];
    mpi::request::multiple_scope(2 * remote as usize, |scope, coll| {
        for (r, block) in incoming.iter_mut().enumerate() {
            coll.add(
                inter
                    .process_at_rank(r as i32)
                    .immediate_receive_into(scope, &mut block[..]),
            );
        }
        for (r, block) in outgoing.iter().enumerate() {
            coll.add(
                inter
                    .process_at_rank(r as i32)
                    .immediate_send(scope, &block[..]),
            );
        }
        let mut statuses = Vec::new();
        coll.wait_all(&mut statuses);
        assert_eq!(statuses.len(), 2 * remote as usize);
    });
    let mut wrong = 0u64;
    for (r, block) in incoming.iter().enumerate() {
        for (i, &x) in block.iter().enumerate() {
            wrong += u64::from(x != value(remote_world(r as i32), rank, i));
        }
    }

    // Merge, upper half first: the merged rank of world rank w.
    let order = if lower {
        MergeOrder::High
    } else {
        MergeOrder::Low
    };
    let merged = inter.merge(order);
    let expected_rank = if lower {
        size - half + rank
    } else {
        rank - half
    };
    wrong += u64::from(merged.rank() != expected_rank);
    let mut total_wrong = 0u64;
    merged.all_reduce_into(&wrong, &mut total_wrong, SystemOperation::sum());
    if merged.rank() == 0 {
        println!(
            "intercomm: ranks={size} halves={half}+{} blocks={} len={len} wrong={total_wrong}",
            size - half,
            2 * half as u64 * (size - half) as u64,
        );
    }
    if total_wrong != 0 {
        std::process::exit(1);
    }
}
