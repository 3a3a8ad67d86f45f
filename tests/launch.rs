//! Programs started by a launcher (issue 9): a launcher's job of one process
//! runs as without a launcher; the processes of a launch of several
//! bootstrap (layout, build, secret, mesh) and run one job together, each
//! hosting its block of the world's ranks.
//!
//! * Mock Hydra: each case runs in a child process of this test binary
//!   (launcher variables are process-global) against a mock PMI-1 server of
//!   the parent (`PMI_PORT` mode, TCP loopback).
//! * The built-in launcher (`MYRIAD_PROCESSES`): the test re-runs itself as
//!   the launcher, which re-runs it as each process ([`Role`]); exit
//!   statuses, signals, `abort`, bad PMI lines.
//! * `real_mpiexec_*` (ignored) run under MPICH's `mpiexec`.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::thread::JoinHandle;
use std::time::Duration;

use common::in_child;
use myriad::{Error, LaunchError};

/// A mock Hydra serving one `-pmi-port` connection as process `rank` of
/// `size`: its address, and the thread, which returns the commands it was
/// sent. It accepts one connection only: a second `init` in the child would
/// fail to connect.
fn hydra(rank: u32, size: u32) -> (String, JoinHandle<Vec<String>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let server = std::thread::spawn(move || {
        let (conn, _) = listener.accept().unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        serve(conn, rank, size)
    });
    (addr, server)
}

/// Waits for the mock server's commands. If the child never connected
/// (PMI start-up skipped), a connection of our own ends the server's wait,
/// and the empty list fails the test instead of hanging it.
fn commands(addr: &str, server: JoinHandle<Vec<String>>) -> Vec<String> {
    let _ = TcpStream::connect(addr);
    server.join().unwrap()
}

fn serve(conn: TcpStream, rank: u32, size: u32) -> Vec<String> {
    let mut out = conn.try_clone().unwrap();
    let mut seen = Vec::new();
    for line in BufReader::new(conn).lines() {
        let Ok(line) = line else { break };
        let cmd = line
            .split_whitespace()
            .next()
            .unwrap_or("")
            .trim_start_matches("cmd=")
            .to_string();
        let reply = match cmd.as_str() {
            "initack" => {
                format!("cmd=initack\ncmd=set size={size}\ncmd=set rank={rank}\ncmd=set debug=0\n")
            }
            "init" => "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n".into(),
            "get_maxes" => "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024\n".into(),
            "get_appnum" => "cmd=appnum appnum=0\n".into(),
            "get_my_kvsname" => "cmd=my_kvsname kvsname=kvs_test\n".into(),
            "finalize" => "cmd=finalize_ack\n".into(),
            _ => format!("cmd={cmd} rc=-1 msg=unexpected\n"),
        };
        seen.push(cmd);
        if out.write_all(reply.as_bytes()).is_err() {
            break;
        }
    }
    seen
}

/// The start-up and finalize a client sends, in order.
const EXCHANGE: [&str; 6] = [
    "initack",
    "init",
    "get_maxes",
    "get_appnum",
    "get_my_kvsname",
    "finalize",
];

#[test]
fn one_process_of_a_launch_runs_the_job() {
    let name = "one_process_of_a_launch_runs_the_job";
    let in_parent = std::env::var("MYRIAD_TEST_CHILD").as_deref() != Ok(name);
    let server = in_parent.then(|| hydra(0, 1));
    let addr = server.as_ref().map_or(String::new(), |(a, _)| a.clone());
    in_child(name, &[("PMI_PORT", &addr), ("PMI_ID", "0")], || {
        // Two jobs: PMI starts once per process.
        for _ in 0..2 {
            let ranks = myriad::run(3, |u| {
                use myriad::traits::*;
                u.world().rank()
            })
            .unwrap();
            assert_eq!(ranks, vec![0, 1, 2]);
        }
    });
    if let Some((addr, server)) = server {
        assert_eq!(commands(&addr, server), EXCHANGE);
    }
}

#[test]
fn srun_without_pmi2_fails_naming_the_flag() {
    in_child(
        "srun_without_pmi2_fails_naming_the_flag",
        &[
            ("SLURM_JOB_ID", "7"),
            ("SLURM_STEP_ID", "0"),
            ("SLURM_STEP_NUM_TASKS", "4"),
            ("SLURM_PROCID", "0"),
        ],
        || {
            let err = myriad::run(2, |_| ()).unwrap_err();
            assert!(
                matches!(err, Error::Launch(LaunchError::NoPmi { processes: 4, .. })),
                "{err:?}"
            );
            assert!(err.to_string().contains("`srun --mpi=pmi2`"), "{err}");
        },
    );
}

#[test]
fn broken_pmi_variables_fail_naming_them() {
    in_child(
        "broken_pmi_variables_fail_naming_them",
        &[("PMI_FD", "3"), ("PMI_SIZE", "2")],
        || {
            let err = myriad::run(2, |_| ()).unwrap_err();
            assert!(
                matches!(
                    err,
                    Error::Launch(LaunchError::Environment {
                        variable: "PMI_RANK",
                        ..
                    })
                ),
                "{err:?}"
            );
            assert!(err.to_string().contains("mpiexec"), "{err}");
        },
    );
}

/// What this run of the test binary is, in a built-in launcher test.
enum Role {
    /// The test as `cargo test` runs it: starts the launcher.
    Parent,
    /// The launcher (`MYRIAD_PROCESSES` set): its `run` never returns.
    Launcher,
    /// A process the launcher started, with its PMI rank.
    Child(u32),
}

fn role(test: &str) -> Role {
    if std::env::var("MYRIAD_TEST_LAUNCH").as_deref() != Ok(test) {
        return Role::Parent;
    }
    match std::env::var("PMI_RANK") {
        Ok(rank) => Role::Child(rank.parse().unwrap()),
        Err(_) => Role::Launcher,
    }
}

/// Runs the test `test` of this binary as the built-in launcher of
/// `processes` processes (`MYRIAD_PROCESSES`), each a run of the same test:
/// the launcher's exit status, standard output and standard error. The
/// test's `Role::Launcher` part calls `myriad::run`, which launches.
///
/// A launcher still running after a minute is killed (its processes die
/// with it) and the test fails: a test of "no hang" must not hang.
fn built_in_launch(test: &str, processes: u32) -> (std::process::ExitStatus, String, String) {
    built_in_launch_with(test, processes, &[])
}

/// [`built_in_launch`] with variables `envs` set for the launcher and its
/// processes.
fn built_in_launch_with(
    test: &str,
    processes: u32,
    envs: &[(&str, &str)],
) -> (std::process::ExitStatus, String, String) {
    common::launched::launch(test, processes, envs, &[], Duration::from_secs(60))
}

/// The launcher's part: `myriad::run` launches and exits the process.
fn be_the_launcher() -> ! {
    let _ = myriad::run(7, |_| ());
    unreachable!("the built-in launcher exits the process");
}

/// PMI-1 by hand over the child's `PMI_FD`, for the tests of what a
/// misbehaving process does to the launcher.
struct RawPmi {
    out: std::os::unix::net::UnixStream,
    replies: BufReader<std::os::unix::net::UnixStream>,
}

impl RawPmi {
    fn open() -> RawPmi {
        use std::os::fd::FromRawFd;
        let fd: i32 = std::env::var("PMI_FD").unwrap().parse().unwrap();
        // SAFETY: the launcher gave this process the descriptor `PMI_FD`,
        // open and a socket, and nothing else in this process uses it.
        let out = unsafe { std::os::unix::net::UnixStream::from_raw_fd(fd) };
        out.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let replies = BufReader::new(out.try_clone().unwrap());
        RawPmi { out, replies }
    }

    fn send(&mut self, line: &str) {
        self.out.write_all(line.as_bytes()).unwrap();
        self.out.write_all(b"\n").unwrap();
    }

    fn ask(&mut self, line: &str) -> String {
        self.send(line);
        let mut reply = String::new();
        self.replies.read_line(&mut reply).unwrap();
        reply
    }
}

#[test]
fn the_built_in_launcher_bootstraps_every_process() {
    const TEST: &str = "the_built_in_launcher_bootstraps_every_process";
    match role(TEST) {
        Role::Parent => {}
        Role::Launcher => be_the_launcher(),
        Role::Child(rank) => {
            // 7 ranks over 3 processes: 3, 2, 2, each returning its own.
            let results = myriad::run(7, |universe| {
                use myriad::traits::*;
                let world = universe.world();
                let mut sum = 0;
                world.all_reduce_into(
                    &world.rank(),
                    &mut sum,
                    myriad::collective::SystemOperation::sum(),
                );
                (world.rank(), world.size(), sum, universe.process_ranks())
            })
            .unwrap();
            let (first, hosting) = [(0, 3), (3, 2), (5, 2)][rank as usize];
            assert_eq!(results.len(), hosting);
            for (i, (r, size, sum, hosted)) in results.into_iter().enumerate() {
                assert_eq!((r, size, sum), (first + i as i32, 7, 21));
                assert_eq!(hosted, first..first + hosting as i32);
            }
            // PMI starts once per process: a second job cannot join.
            let text = myriad::run(7, |_| ()).unwrap_err().to_string();
            assert!(text.contains("each runs one job"), "{text}");
            return;
        }
    }
    let (status, stdout, stderr) = built_in_launch(TEST, 3);
    assert!(status.success(), "{status:?}\n{stdout}\n{stderr}");
    assert_eq!(stdout.matches("1 passed").count(), 3, "{stdout}\n{stderr}");
}

#[test]
fn ranks_per_process_lays_out_the_world_of_a_launch() {
    const TEST: &str = "ranks_per_process_lays_out_the_world_of_a_launch";
    match role(TEST) {
        Role::Parent => {}
        Role::Launcher => be_the_launcher(),
        Role::Child(rank) => {
            let outcome = myriad::run(4, |universe| universe.process_ranks());
            if std::env::var("MYRIAD_RANKS_PER_PROCESS").as_deref() == Ok("3,1") {
                let hosted = [0..3, 3..4][rank as usize].clone();
                assert_eq!(outcome.unwrap(), vec![hosted.clone(); hosted.len()]);
            } else {
                // Every process fails the same way, naming the knob.
                let text = outcome.unwrap_err().to_string();
                assert!(
                    text.contains(
                        "MYRIAD_RANKS_PER_PROCESS=\"3,2\" over 2 processes makes 5 \
                                   ranks, but --ranks/MYRIAD_RANKS says 4"
                    ),
                    "{text}"
                );
            }
            return;
        }
    }
    for per in ["3,1", "3,2"] {
        let (status, stdout, stderr) =
            built_in_launch_with(TEST, 2, &[("MYRIAD_RANKS_PER_PROCESS", per)]);
        assert!(status.success(), "{per}: {status:?}\n{stdout}\n{stderr}");
        assert_eq!(
            stdout.matches("1 passed").count(),
            2,
            "{per}: {stdout}\n{stderr}"
        );
    }
}

#[test]
fn a_process_that_fails_ends_the_launch_with_its_status() {
    const TEST: &str = "a_process_that_fails_ends_the_launch_with_its_status";
    match role(TEST) {
        Role::Parent => {}
        Role::Launcher => be_the_launcher(),
        // Process 1 never joins: the others wait for it in the bootstrap's
        // fence until the launcher kills them.
        Role::Child(1) => std::process::exit(7),
        Role::Child(_) => {
            let _ = myriad::run(7, |_| ());
            unreachable!("process 1 never joins");
        }
    }
    let (status, stdout, stderr) = built_in_launch(TEST, 3);
    assert_eq!(status.code(), Some(7), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("myriad launcher: process 1 exited with status 7"),
        "{stderr}"
    );
}

#[test]
fn a_process_killed_by_a_signal_ends_the_launch() {
    const TEST: &str = "a_process_killed_by_a_signal_ends_the_launch";
    match role(TEST) {
        Role::Parent => {}
        Role::Launcher => be_the_launcher(),
        Role::Child(2) => {
            // SAFETY: raising a signal has no memory effects.
            unsafe { libc::raise(libc::SIGKILL) };
            unreachable!("SIGKILL ends the process");
        }
        Role::Child(_) => {
            let _ = myriad::run(7, |_| ());
            unreachable!("process 2 never joins");
        }
    }
    let (status, stdout, stderr) = built_in_launch(TEST, 3);
    assert_eq!(status.code(), Some(128 + 9), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("process 2 was killed by signal 9"),
        "{stderr}"
    );
}

#[test]
fn abort_from_a_process_ends_the_launch_with_its_code() {
    const TEST: &str = "abort_from_a_process_ends_the_launch_with_its_code";
    match role(TEST) {
        Role::Parent => {}
        Role::Launcher => be_the_launcher(),
        Role::Child(0) => {
            let mut pmi = RawPmi::open();
            assert!(pmi
                .ask("cmd=init pmi_version=1 pmi_subversion=1")
                .starts_with("cmd=response_to_init"));
            pmi.send("cmd=abort exitcode=5 message=bye");
            // No reply: the launcher kills this process after its grace.
            let mut line = String::new();
            let _ = pmi.replies.read_line(&mut line);
            std::thread::park();
        }
        Role::Child(_) => {
            let _ = myriad::run(7, |_| ());
            unreachable!("the abort kills this process");
        }
    }
    let (status, stdout, stderr) = built_in_launch(TEST, 3);
    assert_eq!(status.code(), Some(5), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("process 0 aborted the job (exit code 5): bye"),
        "{stderr}"
    );
}

#[test]
fn bad_pmi_lines_are_refused_and_the_launch_goes_on() {
    const TEST: &str = "bad_pmi_lines_are_refused_and_the_launch_goes_on";
    match role(TEST) {
        Role::Parent => {}
        Role::Launcher => be_the_launcher(),
        Role::Child(_) => {
            let mut pmi = RawPmi::open();
            assert!(pmi
                .ask("cmd=init pmi_version=1 pmi_subversion=1")
                .starts_with("cmd=response_to_init"));
            let reply = pmi.ask("no command at all");
            assert!(reply.starts_with("cmd=error rc=-1 msg="), "{reply}");
            let reply = pmi.ask("cmd=put kvsname=wrong key=a value=b");
            assert!(reply.contains("rc=-1"), "{reply}");
            assert_eq!(pmi.ask("cmd=barrier_in"), "cmd=barrier_out\n");
            assert_eq!(pmi.ask("cmd=finalize"), "cmd=finalize_ack\n");
            return;
        }
    }
    let (status, stdout, stderr) = built_in_launch(TEST, 2);
    assert!(status.success(), "{status:?}\n{stdout}\n{stderr}");
    assert_eq!(stdout.matches("1 passed").count(), 2, "{stdout}");
    assert_eq!(
        stderr.matches("PMI request of process").count(),
        4,
        "each refusal is logged: {stderr}"
    );
}

#[test]
fn a_process_exiting_without_finalize_fails_the_launch() {
    const TEST: &str = "a_process_exiting_without_finalize_fails_the_launch";
    match role(TEST) {
        Role::Parent => {}
        Role::Launcher => be_the_launcher(),
        Role::Child(_) => return,
    }
    let (status, stdout, stderr) = built_in_launch(TEST, 2);
    assert_eq!(status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(stderr.contains("without finalizing PMI"), "{stderr}");
}

/// The rank `launch_rank_panics` lets panic: world rank 4, hosted by
/// process 1 of 3 (7 ranks: 3, 2, 2).
fn launch_rank_panics() {
    use myriad::traits::*;
    let universe = myriad::initialize().unwrap();
    let world = universe.world();
    if world.rank() == 4 {
        panic!("rank four gives up");
    }
    // The others wait for rank 4, which never comes: the job must end anyway.
    world.barrier();
}

/// `myriad::launch` (and so `#[myriad::main]`) in processes of the
/// built-in launcher, one rank panicking: every process's job fails naming
/// that rank, each exits non-zero with the message, and so does the
/// launcher; nothing hangs.
#[test]
fn a_panicking_rank_ends_every_process_with_its_message() {
    const TEST: &str = "a_panicking_rank_ends_every_process_with_its_message";
    match role(TEST) {
        Role::Parent => {}
        Role::Launcher | Role::Child(_) => {
            myriad::Runtime::builder()
                .ranks(7)
                .launch(launch_rank_panics);
            return;
        }
    }
    let (status, stdout, stderr) = built_in_launch(TEST, 3);
    assert!(!status.success(), "{stdout}\n{stderr}");
    let failed: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("myriad: job failed: "))
        .collect();
    assert_eq!(failed.len(), 3, "{stderr}");
    assert!(
        failed
            .iter()
            .all(|l| l.contains("rank 4") && l.contains("rank four gives up")),
        "{stderr}"
    );
}

#[test]
fn processes_under_a_launcher_is_refused() {
    let (addr, server) = hydra(0, 1);
    in_child(
        "processes_under_a_launcher_is_refused",
        &[
            ("PMI_PORT", &addr),
            ("PMI_ID", "0"),
            ("MYRIAD_PROCESSES", "2"),
        ],
        || {
            let err = myriad::run(2, |_| ()).unwrap_err().to_string();
            assert!(err.contains("give one or the other"), "{err}");
        },
    );
    assert!(commands(&addr, server).is_empty());
}

/// `mpiexec.mpich` with `args`, running the test `test` of this binary in
/// each process (with `CHILD` set): its status and output.
fn mpiexec(args: &[&str], test: &str) -> (std::process::ExitStatus, String, String) {
    let out = Command::new("mpiexec.mpich")
        .args(args)
        .arg(std::env::current_exe().unwrap())
        .args([test, "--exact", "--ignored", "--nocapture"])
        .env("MYRIAD_TEST_MPIEXEC_CHILD", "1")
        .output()
        .expect("mpiexec.mpich runs (apt-get install mpich)");
    (
        out.status,
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn under_mpiexec() -> bool {
    std::env::var_os("MYRIAD_TEST_MPIEXEC_CHILD").is_some()
}

#[test]
#[ignore = "needs MPICH's mpiexec (apt-get install mpich)"]
fn real_mpiexec_one_process_runs_the_job() {
    if under_mpiexec() {
        let sizes = myriad::run(4, |u| {
            use myriad::traits::*;
            u.world().size()
        })
        .unwrap();
        assert_eq!(sizes, vec![4; 4]);
        return;
    }
    for args in [&["-n", "1"][..], &["-n", "1", "-pmi-port"]] {
        let (status, stdout, stderr) = mpiexec(args, "real_mpiexec_one_process_runs_the_job");
        assert!(status.success(), "{args:?}: {status:?}\n{stdout}\n{stderr}");
        assert!(stdout.contains("1 passed"), "{stdout}");
    }
}

#[test]
#[ignore = "needs MPICH's mpiexec (apt-get install mpich)"]
fn real_mpiexec_two_processes_run_one_job() {
    if under_mpiexec() {
        let results = myriad::run(5, |universe| {
            use myriad::traits::*;
            let world = universe.world();
            let mut sum = 0;
            world.all_reduce_into(
                &world.rank(),
                &mut sum,
                myriad::collective::SystemOperation::sum(),
            );
            (world.rank(), sum)
        })
        .unwrap();
        let first = if results.len() == 3 { 0 } else { 3 };
        for (i, (rank, sum)) in results.into_iter().enumerate() {
            assert_eq!((rank, sum), (first + i as i32, 10));
        }
        return;
    }
    let (status, stdout, stderr) = mpiexec(&["-n", "2"], "real_mpiexec_two_processes_run_one_job");
    assert!(status.success(), "{status:?}\n{stdout}\n{stderr}");
    assert_eq!(stdout.matches("1 passed").count(), 2, "{stdout}");
}

#[test]
#[ignore = "needs MPICH's mpiexec (apt-get install mpich)"]
fn real_mpiexec_a_panicking_rank_ends_the_job() {
    if under_mpiexec() {
        myriad::Runtime::builder()
            .ranks(7)
            .launch(launch_rank_panics);
        return;
    }
    let (status, stdout, stderr) =
        mpiexec(&["-n", "3"], "real_mpiexec_a_panicking_rank_ends_the_job");
    assert!(!status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("rank four gives up") && stderr.contains("myriad: job failed: "),
        "{stderr}"
    );
}
