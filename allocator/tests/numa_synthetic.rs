//! NUMA logic on a synthetic two-node topology (`MYRIAD_ALLOC_NODES`), since the test machine
//! may have a single node: a thread pinned to a CPU of node 1 allocates from node 1's pool,
//! frees from elsewhere go back to the owning node, and binding is attempted per node (the
//! kernel may refuse node 1 when it does not exist: counted, not fatal).

mod common;

use std::thread;

use myriad_alloc::MyriadAlloc;

#[global_allocator]
static ALLOC: MyriadAlloc = MyriadAlloc;

fn pin_to(cpu: usize) -> bool {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes inside it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

fn cpus() -> usize {
    thread::available_parallelism().map_or(1, |n| n.get())
}

#[test]
fn threads_allocate_from_the_pool_of_their_node() {
    if common::in_child(
        "threads_allocate_from_the_pool_of_their_node",
        &[("MYRIAD_ALLOC_NODES", "0;1-1023")],
    ) {
        return;
    }
    let s0 = myriad_alloc::stats();
    assert_eq!(s0.nodes, 2);
    assert!(s0.synthetic_topology);
    if cpus() < 2 || !pin_to(1) {
        eprintln!("only one CPU usable: skipping the node-1 half");
        return;
    }
    // This thread now runs on CPU 1, node 1 of the synthetic topology.
    assert_eq!(myriad_alloc::current_node(), 1);
    let big = vec![5u8; 2 << 20];
    let s1 = myriad_alloc::stats();
    assert!(s1.node(1).large_in_use >= 2 << 20, "{s1}");
    assert!(s1.node(1).arenas >= 1, "{s1}");
    // Binding was attempted for node 1's arena (a one-node VM refuses node 1: counted only).
    assert!(s1.os.mbind >= 1, "{s1}");
    assert_eq!(
        s1.os.mbind_failed,
        (0..s1.nodes).map(|n| s1.node(n).bind_failures).sum::<u64>()
    );
    // Free it from a thread on node 0: the block returns to node 1's pool.
    thread::spawn(move || {
        assert!(pin_to(0));
        assert_eq!(myriad_alloc::current_node(), 0);
        assert_eq!(big[(2 << 20) - 1], 5);
        let s = myriad_alloc::stats();
        let node1_before = s.node(1).large_in_use;
        drop(big);
        let s = myriad_alloc::stats();
        assert_eq!(s.node(1).large_in_use + (2 << 20), node1_before, "{s}");
        assert!(s.node(1).kept >= 2 << 20, "{s}");
        // And a new block on this thread comes from node 0.
        // (black_box: a release build would elide the unused allocation)
        let small_node0 = std::hint::black_box(vec![1u8; 1 << 20]);
        let s = myriad_alloc::stats();
        assert!(s.node(0).large_in_use >= 1 << 20, "{s}");
        // Node 0 exists on every machine, so binding its arena must have succeeded.
        assert!(s.node(0).arenas >= 1, "{s}");
        assert_eq!(s.node(0).bind_failures, 0, "{s}");
        drop(small_node0);
    })
    .join()
    .unwrap();
}

#[test]
fn small_blocks_follow_the_node_and_remote_frees_cross_nodes() {
    if common::in_child(
        "small_blocks_follow_the_node_and_remote_frees_cross_nodes",
        &[("MYRIAD_ALLOC_NODES", "2")],
    ) {
        return;
    }
    if cpus() < 2 {
        eprintln!("only one CPU usable: nothing to check");
        return;
    }
    // With "2", CPU c is on node c % 2.
    let on_node1 = thread::spawn(|| {
        assert!(pin_to(1));
        assert_eq!(myriad_alloc::current_node(), 1);
        (0..50_000u32).map(Box::new).collect::<Vec<_>>()
    })
    .join()
    .unwrap();
    let s = myriad_alloc::stats();
    assert!(s.node(1).slabs_created >= 1, "{s}");
    thread::spawn(move || {
        assert!(pin_to(0));
        for (i, b) in on_node1.iter().enumerate() {
            assert_eq!(**b as usize, i);
        }
        drop(on_node1);
    })
    .join()
    .unwrap();
}

#[test]
fn a_count_spec_deals_cpus_round_robin() {
    if common::in_child(
        "a_count_spec_deals_cpus_round_robin",
        &[("MYRIAD_ALLOC_NODES", "4")],
    ) {
        return;
    }
    let s = myriad_alloc::stats();
    assert_eq!(s.nodes, 4);
    let t = myriad_alloc::Topology::from_spec(b"4").unwrap();
    // SAFETY: sched_getcpu has no preconditions.
    let cpu = unsafe { libc::sched_getcpu() };
    if cpu >= 0 {
        assert_eq!(myriad_alloc::current_node(), t.node_of_cpu(cpu as usize));
    }
}

#[test]
fn a_huge_block_freed_on_another_node_is_cached_on_its_own_node() {
    if common::in_child(
        "a_huge_block_freed_on_another_node_is_cached_on_its_own_node",
        &[
            ("MYRIAD_ALLOC_NODES", "0;1-1023"),
            ("MYRIAD_ALLOC_KEEP", "1G"),
        ],
    ) {
        return;
    }
    if cpus() < 2 {
        eprintln!("only one CPU usable: nothing to check");
        return;
    }
    const HUGE: usize = 24 << 20;
    // A huge block (a direct mapping) made by a thread of node 1.
    let block = thread::spawn(|| {
        assert!(pin_to(1));
        assert_eq!(myriad_alloc::current_node(), 1);
        vec![3u8; HUGE]
    })
    .join()
    .unwrap();
    // Freed by a thread of node 0: the mapping belongs to node 1 (bound there), so node 1's
    // huge-mapping cache must keep it, not node 0's.
    thread::spawn(move || {
        assert!(pin_to(0));
        assert_eq!(myriad_alloc::current_node(), 0);
        assert_eq!(block[HUGE - 1], 3);
        let before = myriad_alloc::stats();
        drop(block);
        let after = myriad_alloc::stats();
        assert_eq!(
            after.huge_in_use + HUGE as u64,
            before.huge_in_use,
            "{after}"
        );
        assert_eq!(
            after.node(0).kept,
            before.node(0).kept,
            "node 0 kept a huge block of node 1\n{after}"
        );
        assert!(
            after.node(1).kept >= before.node(1).kept + HUGE as u64,
            "node 1 did not keep its huge block\n{after}"
        );
    })
    .join()
    .unwrap();
    // A thread of node 1 gets the cached mapping back without a new mapping.
    thread::spawn(|| {
        assert!(pin_to(1));
        let before = myriad_alloc::stats();
        let again = std::hint::black_box(vec![4u8; HUGE]);
        let after = myriad_alloc::stats();
        assert_eq!(after.os.mmap, before.os.mmap, "node 1 mapped anew\n{after}");
        assert!(
            after.node(1).kept + HUGE as u64 <= before.node(1).kept,
            "{after}"
        );
        drop(again);
    })
    .join()
    .unwrap();
}
