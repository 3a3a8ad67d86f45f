//! Real processes on emulated hosts (issue 15, item 2): the built-in
//! launcher (`MYRIAD_PROCESSES`) re-runs each test as the launcher, which
//! re-runs it as each process, with `MYRIAD_HOST=a,a,b,b` giving processes
//! 0 and 1 host `a`, 2 and 3 host `b`.
//!
//! * the transport joins the processes of each emulated host by shared
//!   memory and the hosts by TCP (the override reaches the bootstrap's host
//!   exchange);
//! * `split_shared` gives each host's ranks, `split_by_process` each
//!   process's;
//! * the hierarchical collectives (with the host level) give what the flat
//!   algorithms give, with `ANY_SOURCE` messages in flight.
//!
//! The same cases run on threads standing for processes in
//! `tests/processes_hier.rs` (`Runtime::run_joined_on_hosts`).

mod common;

use std::time::Duration;

use myriad::collective::{Algorithm, Collective, SystemOperation};
use myriad::traits::*;

/// How long a launch may take before the test fails as a hang.
const LIMIT: Duration = Duration::from_secs(90);

/// This run's PMI rank if it is a process of the launch of `test`,
/// `Some(None)` if it is the launcher, `None` if it is the test itself.
fn role(test: &str) -> Option<Option<u32>> {
    if std::env::var("MYRIAD_TEST_LAUNCH").as_deref() != Ok(test) {
        return None;
    }
    Some(std::env::var("PMI_RANK").ok().map(|r| r.parse().unwrap()))
}

/// The launcher's part: `myriad::run` launches and exits the process.
fn be_the_launcher() -> ! {
    let _ = myriad::run(RANKS as usize, |_| ());
    unreachable!("the built-in launcher exits the process");
}

/// World size: two ranks per process.
const RANKS: i32 = 8;

/// The collectives with a host level.
const HOSTED: [Collective; 7] = [
    Collective::Barrier,
    Collective::Broadcast,
    Collective::Reduce,
    Collective::AllReduce,
    Collective::Gather,
    Collective::Scatter,
    Collective::AllGather,
];

/// Broadcasts, reduces and all-reduces from every root on `comm` (a
/// digest of every result, for comparing two algorithm choices).
fn collectives(comm: &impl Communicator) -> Vec<i64> {
    let me = comm.rank() as i64;
    let mut out = Vec::new();
    comm.barrier();
    for root in 0..comm.size() {
        for len in [1usize, 3000] {
            let mut buf: Vec<i64> = if comm.rank() == root {
                (0..len as i64).map(|i| i * 5 + root as i64).collect()
            } else {
                vec![-1; len]
            };
            comm.process_at_rank(root).broadcast_into(&mut buf[..]);
            out.push(buf.iter().sum());
        }
        let mine = [me + 1, me * me, -me];
        let mut sum = [0i64; 3];
        if comm.rank() == root {
            comm.process_at_rank(root).reduce_into_root(
                &mine[..],
                &mut sum[..],
                SystemOperation::sum(),
            );
        } else {
            comm.process_at_rank(root)
                .reduce_into(&mine[..], SystemOperation::sum());
        }
        out.extend(sum);
        let mut all = [0i64; 3];
        comm.all_reduce_into(&mine[..], &mut all[..], SystemOperation::sum());
        out.extend(all);
        let mut max = 0i64;
        comm.all_reduce_into(&(me * (root as i64 + 1)), &mut max, SystemOperation::max());
        out.push(max);
        let n = comm.size() as usize;
        let mut all = vec![-1i64; 2 * n];
        let mine = [me * 3, root as i64];
        if comm.rank() == root {
            comm.process_at_rank(root)
                .gather_into_root(&mine[..], &mut all[..]);
        } else {
            comm.process_at_rank(root).gather_into(&mine[..]);
        }
        out.extend(&all);
        let mut part = [-1i64; 2];
        if comm.rank() == root {
            let sends: Vec<i64> = (0..2 * n as i64).map(|i| i * 7 - root as i64).collect();
            comm.process_at_rank(root)
                .scatter_into_root(&sends[..], &mut part[..]);
        } else {
            comm.process_at_rank(root).scatter_into(&mut part[..]);
        }
        out.extend(part);
        comm.all_gather_into(&mine[..], &mut all[..]);
        out.extend(&all);
    }
    comm.barrier();
    out
}

/// One process's part: every check, `exit(3)` naming the first that
/// failed.
fn check_hosts() {
    let results = myriad::run(RANKS as usize, |universe| {
        let world = universe.world();
        let me = world.rank();
        let mut failed: Vec<String> = Vec::new();
        // Host a: processes 0, 1 (ranks 0..4); host b: ranks 4..8.
        let shared = world.split_shared(-me);
        let members = {
            let mut all = vec![0i32; shared.size() as usize];
            shared.all_gather_into(&me, &mut all[..]);
            all
        };
        let host: Vec<i32> = if me < 4 {
            (0..4).rev().collect()
        } else {
            (4..8).rev().collect()
        };
        if members != host {
            failed.push(format!("split_shared: {members:?}, not {host:?}"));
        }
        let process = world.split_by_process(0).size();
        if process != 2 {
            failed.push(format!("split_by_process: {process} ranks, not 2"));
        }
        // A message to the next rank in flight across the collectives.
        world
            .process_at_rank((me + 1) % RANKS)
            .send_with_tag(&(100 + me), 3);
        let hier = world.duplicate();
        for c in HOSTED {
            hier.set_collective_algorithm(c, Algorithm::Hierarchical)
                .unwrap();
        }
        let flat = world.duplicate();
        for (c, a) in [
            (Collective::Barrier, Algorithm::Dissemination),
            (Collective::Broadcast, Algorithm::Binomial),
            (Collective::Reduce, Algorithm::Binomial),
            (Collective::AllReduce, Algorithm::RecursiveDoubling),
            (Collective::Gather, Algorithm::Binomial),
            (Collective::Scatter, Algorithm::Linear),
            (Collective::AllGather, Algorithm::Ring),
        ] {
            flat.set_collective_algorithm(c, a).unwrap();
        }
        let by_hier = collectives(&hier);
        let on_shared = collectives(&shared);
        let (got, status) = world.any_process().receive::<i32>();
        let by_flat = collectives(&flat);
        if by_hier != by_flat {
            failed.push("hierarchical and flat collectives differ".to_string());
        }
        let from = (me + RANKS - 1) % RANKS;
        if (got, status.source_rank()) != (100 + from, from) {
            failed.push(format!(
                "ANY_SOURCE got {got} from {}, not {} from {from}",
                status.source_rank(),
                100 + from
            ));
        }
        let mut sum = 0i32;
        shared.all_reduce_into(&me, &mut sum, SystemOperation::sum());
        if sum != host.iter().sum::<i32>() || on_shared.is_empty() {
            failed.push(format!("all_reduce on the host's part: {sum}"));
        }
        failed
    })
    .unwrap();
    if let Some(failed) = results.iter().find(|f| !f.is_empty()) {
        eprintln!(
            "process {}: {}",
            std::env::var("PMI_RANK").unwrap(),
            failed.join("; ")
        );
        std::process::exit(3);
    }
}

#[test]
fn myriad_host_emulates_two_hosts_for_transport_split_shared_and_hier() {
    const TEST: &str = "myriad_host_emulates_two_hosts_for_transport_split_shared_and_hier";
    match role(TEST) {
        None => {}
        Some(None) => be_the_launcher(),
        Some(Some(_)) => return check_hosts(),
    }
    let (status, stdout, stderr) = common::launched::launch(
        TEST,
        4,
        &[
            ("MYRIAD_HOST", "a,a,b,b"),
            ("MYRIAD_REPORT_BINDINGS", "1"),
            ("MYRIAD_WORKERS", "1"),
        ],
        &["MYRIAD_TRANSPORT", "MYRIAD_HIER_HOSTS"],
        LIMIT,
    );
    let out = format!("{stderr}\n--- stdout ---\n{stdout}");
    assert_eq!(status.code(), Some(0), "{out}");
    // Each emulated host's processes share memory, the hosts use TCP.
    for (p, peer, others) in [
        (0, 1, "2, 3"),
        (1, 0, "2, 3"),
        (2, 3, "0, 1"),
        (3, 2, "0, 1"),
    ] {
        let report = out
            .lines()
            .find(|l| l.starts_with("[myriad] transport: ") && l.contains(&format!("process {p} ")))
            .unwrap_or_else(|| panic!("no transport line of process {p}:\n{out}"));
        assert!(
            report.contains(&format!("shared memory with processes {peer} "))
                && report.contains(&format!("TCP with {others}")),
            "{report}"
        );
    }
}

/// A `MYRIAD_HOST` list that does not name one host per process fails the
/// launch with an error naming the variable.
#[test]
fn a_myriad_host_list_of_the_wrong_length_fails_the_launch() {
    const TEST: &str = "a_myriad_host_list_of_the_wrong_length_fails_the_launch";
    match role(TEST) {
        None => {}
        Some(None) => be_the_launcher(),
        Some(Some(_)) => {
            if let Err(e) = myriad::run(RANKS as usize, |_| ()) {
                eprintln!("the job failed: {e}");
                std::process::exit(3);
            }
            return;
        }
    }
    let (status, stdout, stderr) = common::launched::launch(
        TEST,
        2,
        &[("MYRIAD_HOST", "a,b,c"), ("MYRIAD_WORKERS", "1")],
        &["MYRIAD_TRANSPORT"],
        LIMIT,
    );
    assert_ne!(status.code(), Some(0), "{stderr}\n{stdout}");
    assert!(
        stderr.contains("MYRIAD_HOST=\"a,b,c\" lists 3 hosts for a job of 2 processes"),
        "{stderr}\n{stdout}"
    );
}
