//! Programs started by a launcher (issue 9, bootstrap): a launcher's job of
//! one process runs as without a launcher; one of several processes fails
//! every process with a clear error instead of running the whole job once
//! per process. Each case runs in a child process of this test binary
//! (launcher variables are process-global) against a mock PMI-1 server of
//! the parent (`PMI_PORT` mode, TCP loopback); the `real_mpiexec_*` tests
//! (ignored) run under MPICH's `mpiexec`.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::thread::JoinHandle;
use std::time::Duration;

use common::in_child;
use myriad::{Error, LaunchError};

const MULTI: &str = "multi-process jobs need the transport (issue 9)";

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
fn several_processes_of_a_launch_fail_with_a_clear_error() {
    let name = "several_processes_of_a_launch_fail_with_a_clear_error";
    let in_parent = std::env::var("MYRIAD_TEST_CHILD").as_deref() != Ok(name);
    let server = in_parent.then(|| hydra(1, 2));
    let addr = server.as_ref().map_or(String::new(), |(a, _)| a.clone());
    in_child(name, &[("PMI_PORT", &addr), ("PMI_ID", "1")], || {
        for _ in 0..2 {
            let err = myriad::run(3, |_| ()).unwrap_err();
            assert!(matches!(err, Error::Unsupported { .. }), "{err:?}");
            let text = err.to_string();
            assert!(
                text.contains(MULTI)
                    && text
                        .contains("mpiexec -pmi-port (Hydra) started this program as 2 processes")
                    && text.contains("this is process 1")
                    && text.contains("--ranks N"),
                "{text}"
            );
        }
    });
    if let Some((addr, server)) = server {
        // Finalized, so the launcher sees an orderly failure.
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

/// `myriad::launch` (and so `#[myriad::main]`) in a child: with the
/// launcher's variables set it must exit non-zero with the message.
#[test]
fn launch_exits_non_zero_with_the_message() {
    const CHILD: &str = "MYRIAD_TEST_LAUNCH_CHILD";
    if std::env::var_os(CHILD).is_some() {
        myriad::launch(|| {
            let _universe = myriad::initialize().unwrap();
        });
        return;
    }
    let (addr, server) = hydra(0, 3);
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "launch_exits_non_zero_with_the_message",
            "--exact",
            "--nocapture",
        ])
        .env(CHILD, "1")
        .env("PMI_PORT", &addr)
        .env("PMI_ID", "0")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("myriad: job failed: not supported by myriad yet: ")
            && stderr.contains(MULTI)
            && stderr.contains("as 3 processes"),
        "{stderr}"
    );
    assert_eq!(commands(&addr, server), EXCHANGE);
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
fn real_mpiexec_two_processes_fail_clearly() {
    if under_mpiexec() {
        let err = myriad::run(4, |_| ()).unwrap_err();
        assert!(err.to_string().contains(MULTI), "{err}");
        return;
    }
    let (status, stdout, stderr) = mpiexec(&["-n", "2"], "real_mpiexec_two_processes_fail_clearly");
    assert!(status.success(), "{status:?}\n{stdout}\n{stderr}");
    assert_eq!(stdout.matches("1 passed").count(), 2, "{stdout}");
}

#[test]
#[ignore = "needs MPICH's mpiexec (apt-get install mpich)"]
fn real_mpiexec_launch_exits_non_zero() {
    if under_mpiexec() {
        myriad::launch(|| {
            let _universe = myriad::initialize().unwrap();
        });
        return;
    }
    let (status, stdout, stderr) = mpiexec(&["-n", "2"], "real_mpiexec_launch_exits_non_zero");
    eprintln!("mpiexec: {status:?}\n{stdout}\n{stderr}");
    assert!(!status.success(), "{stdout}\n{stderr}");
    assert_eq!(stderr.matches(MULTI).count(), 2, "{stderr}");
}
