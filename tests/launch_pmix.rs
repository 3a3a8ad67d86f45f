//! Programs started by Open MPI's `mpirun` (feature `pmix`): the processes
//! bootstrap through PMIx and run one job together, as under MPICH's
//! `mpiexec` (`tests/launch.rs`).
//!
//! * A PMIx server that is not there (`PMIX_SERVER_URI*` at a closed port):
//!   the job fails at once with an error naming `PMIx_Init`, no hang. Runs
//!   in a child process (the variables are process-global).
//! * `real_open_mpi_*` (ignored: they need `mpirun.openmpi`, apt package
//!   openmpi-bin) run this binary under `mpirun.openmpi --oversubscribe -n N`.
#![cfg(feature = "pmix")]

mod common;

use std::process::Command;
use std::time::Duration;

use common::{in_child, within_time_limit};
use myriad::{Error, LaunchError};

/// A port nobody listens on, on loopback.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[test]
fn an_unreachable_pmix_server_fails_the_job_without_a_hang() {
    const TEST: &str = "an_unreachable_pmix_server_fails_the_job_without_a_hang";
    let uri = format!("1445527552.0;tcp4://127.0.0.1:{}", closed_port());
    let mut envs: Vec<(&str, &str)> = vec![
        ("OMPI_COMM_WORLD_SIZE", "2"),
        ("OMPI_COMM_WORLD_RANK", "0"),
        ("PMIX_NAMESPACE", "1445527553"),
        ("PMIX_RANK", "0"),
    ];
    for v in [
        "PMIX_SERVER_URI41",
        "PMIX_SERVER_URI4",
        "PMIX_SERVER_URI3",
        "PMIX_SERVER_URI2",
        "PMIX_SERVER_URI21",
    ] {
        envs.push((v, &uri));
    }
    in_child(TEST, &envs, || {
        let err = within_time_limit(
            "PMIx_Init to a closed port",
            Duration::from_secs(60),
            || myriad::run(2, |_| ()).unwrap_err(),
        );
        assert!(
            matches!(&err, Error::Launch(LaunchError::Io { command, .. }) if command == "PMIx_Init"),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(
            text.contains("UNREACH") && text.contains("PMIX_SERVER_URI41"),
            "{text}"
        );
    });
}

/// Set in the processes `mpirun.openmpi` starts.
const CHILD: &str = "MYRIAD_TEST_OPEN_MPI_CHILD";

fn under_open_mpi() -> bool {
    std::env::var_os(CHILD).is_some()
}

/// `mpirun.openmpi --oversubscribe` with `args`, running the test `test` of
/// this binary in each process: its status and output. Root may run it (as
/// CI does).
fn open_mpi(args: &[&str], test: &str) -> (std::process::ExitStatus, String, String) {
    let out = Command::new("mpirun.openmpi")
        .arg("--oversubscribe")
        .args(args)
        .arg(std::env::current_exe().unwrap())
        .args([test, "--exact", "--ignored", "--nocapture"])
        .env(CHILD, "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .output()
        .expect("mpirun.openmpi runs (apt-get install openmpi-bin)");
    (
        out.status,
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// In a process of `mpirun -n processes`: a world of 10 ranks split over
/// the processes, whose all-reduce of the ranks crosses every process.
fn ten_ranks_reduce(processes: u32) {
    use myriad::traits::*;
    let results = myriad::run(10, |universe| {
        let world = universe.world();
        let mut sum = 0;
        world.all_reduce_into(
            &world.rank(),
            &mut sum,
            myriad::collective::SystemOperation::sum(),
        );
        (world.rank(), world.size(), sum)
    })
    .unwrap();
    // The world split evenly, the remainder first (`bootstrap::layout`).
    let process: u32 = std::env::var("OMPI_COMM_WORLD_RANK")
        .unwrap()
        .parse()
        .unwrap();
    let (each, extra) = (10 / processes, 10 % processes);
    let first: u32 = (0..process).map(|p| each + u32::from(p < extra)).sum();
    let count = each + u32::from(process < extra);
    assert_eq!(results.len() as u32, count);
    for (i, (rank, size, sum)) in results.into_iter().enumerate() {
        assert_eq!((rank, size, sum), ((first + i as u32) as i32, 10, 45));
    }
}

fn processes_run_one_job(n: u32, test: &str) {
    let (status, stdout, stderr) = open_mpi(&["-n", &n.to_string()], test);
    assert!(status.success(), "{status:?}\n{stdout}\n{stderr}");
    assert_eq!(
        stdout.matches("1 passed").count(),
        n as usize,
        "{stdout}\n{stderr}"
    );
}

#[test]
#[ignore = "needs Open MPI's mpirun (apt-get install openmpi-bin)"]
fn real_open_mpi_two_processes_run_one_job() {
    if under_open_mpi() {
        return ten_ranks_reduce(2);
    }
    processes_run_one_job(2, "real_open_mpi_two_processes_run_one_job");
}

#[test]
#[ignore = "needs Open MPI's mpirun (apt-get install openmpi-bin)"]
fn real_open_mpi_four_processes_run_one_job() {
    if under_open_mpi() {
        return ten_ranks_reduce(4);
    }
    processes_run_one_job(4, "real_open_mpi_four_processes_run_one_job");
}

/// World rank 4 of 7 (process 1 of 3: 3, 2, 2 ranks) panics; the others
/// wait for it at a barrier, which must end anyway.
fn rank_four_panics() {
    use myriad::traits::*;
    let universe = myriad::initialize().unwrap();
    let world = universe.world();
    if world.rank() == 4 {
        panic!("rank four gives up");
    }
    world.barrier();
}

#[test]
#[ignore = "needs Open MPI's mpirun (apt-get install openmpi-bin)"]
fn real_open_mpi_a_panicking_rank_ends_every_process() {
    if under_open_mpi() {
        myriad::Runtime::builder().ranks(7).launch(rank_four_panics);
        return;
    }
    let (status, stdout, stderr) = open_mpi(
        &["-n", "3"],
        "real_open_mpi_a_panicking_rank_ends_every_process",
    );
    assert!(!status.success(), "{stdout}\n{stderr}");
    // No process's job succeeded; those that report (mpirun may kill the
    // others first once one exits non-zero) name the rank and its message.
    assert!(!stdout.contains("1 passed"), "{stdout}\n{stderr}");
    let failed: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("myriad: job failed: "))
        .collect();
    assert!(!failed.is_empty(), "{stderr}");
    assert!(
        failed
            .iter()
            .all(|l| l.contains("rank 4") && l.contains("rank four gives up")),
        "{stderr}"
    );
}
