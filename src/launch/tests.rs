//! The PMI client against a mock server on a thread: the transcripts of
//! `../shared/reference/launchers.md` (Hydra and Slurm, PMI-1 and PMI-2)
//! replayed byte for byte, then bad input. The client's own exchanges were
//! traced (`strace`) under Hydra 4.0.2 and Slurm 22.05 and match these
//! scripts. A test that runs the client under a real `mpiexec.mpich` is
//! `real_mpiexec` (ignored: it needs MPICH); its child part also runs under
//! `srun --mpi=pmi2 -n 2` with `MYRIAD_PMI_TEST_CHILD=1` set.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::fd::IntoRawFd;
use std::os::unix::net::UnixStream;
use std::thread::JoinHandle;
use std::time::Duration;

use super::pmi::{Client, Start, Stream, Version};
use super::server::Server;
use super::{connect, join_with, Bootstrap, Shape};
use crate::error::{Error, LaunchError};

/// Long enough never to fire in a passing test; short enough that a broken
/// one fails instead of hanging.
const PATIENCE: Duration = Duration::from_secs(10);

/// One step of a mock server's script.
enum Step {
    /// Read exactly these bytes from the client.
    Recv(Vec<u8>),
    /// Write these bytes.
    Send(Vec<u8>),
    /// Close the connection (the script ends here).
    Close,
}

/// The client sends this PMI-1 line (newline added).
fn c(line: &str) -> Step {
    Step::Recv(format!("{line}\n").into_bytes())
}

/// The server replies with this PMI-1 line (newline added).
fn s(line: &str) -> Step {
    Step::Send(format!("{line}\n").into_bytes())
}

/// A PMI-2 frame as written in the reference: the 6-byte prefix must be
/// the payload's length (checked, so a typo in a test fails loudly).
fn frame(raw: &str) -> Vec<u8> {
    let (prefix, payload) = raw.split_at(6);
    assert_eq!(
        prefix.trim().parse::<usize>().unwrap(),
        payload.len(),
        "test frame {raw:?} has a wrong length"
    );
    raw.as_bytes().to_vec()
}

fn c2(raw: &str) -> Step {
    Step::Recv(frame(raw))
}

fn s2(raw: &str) -> Step {
    Step::Send(frame(raw))
}

/// Plays `script` on `stream`; without a `Close` at the end, then waits for
/// the client to close and fails if it sent anything more.
fn play(mut stream: impl Read + Write, script: Vec<Step>) -> Result<(), String> {
    for (i, step) in script.into_iter().enumerate() {
        match step {
            Step::Recv(want) => {
                let mut got = vec![0u8; want.len()];
                let mut n = 0;
                while n < got.len() {
                    match stream.read(&mut got[n..]) {
                        Ok(0) => break,
                        Ok(k) => n += k,
                        Err(e) => return Err(format!("step {i}: {e}")),
                    }
                }
                if got[..n] != want[..] {
                    return Err(format!(
                        "step {i}: the client sent {:?}, expected {:?}",
                        String::from_utf8_lossy(&got[..n]),
                        String::from_utf8_lossy(&want)
                    ));
                }
            }
            Step::Send(bytes) => stream
                .write_all(&bytes)
                .map_err(|e| format!("step {i}: {e}"))?,
            Step::Close => return Ok(()),
        }
    }
    let mut rest = Vec::new();
    stream
        .read_to_end(&mut rest)
        .map_err(|e| format!("waiting for the client to close: {e}"))?;
    if rest.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the client sent more than the script: {:?}",
            String::from_utf8_lossy(&rest)
        ))
    }
}

/// A mock server on a socket pair: the client's end, and the server thread.
fn serve(script: Vec<Step>) -> (UnixStream, JoinHandle<Result<(), String>>) {
    let (ours, theirs) = UnixStream::pair().unwrap();
    theirs.set_read_timeout(Some(PATIENCE)).unwrap();
    (ours, std::thread::spawn(move || play(theirs, script)))
}

/// A mock server on TCP loopback: its `host:port` and the server thread.
fn serve_tcp(script: Vec<Step>) -> (String, JoinHandle<Result<(), String>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let server = std::thread::spawn(move || {
        let (conn, _) = listener.accept().map_err(|e| e.to_string())?;
        conn.set_read_timeout(Some(PATIENCE)).unwrap();
        play(conn, script)
    });
    (addr, server)
}

fn finish(server: JoinHandle<Result<(), String>>) {
    server.join().unwrap().unwrap();
}

fn pmi1(rank: u32, size: u32) -> Start {
    Start {
        version: Version::Pmi1,
        rank: Some(rank),
        size: Some(size),
        pmiid: None,
        jobid: None,
    }
}

fn pmi2(rank: u32, jobid: Option<&str>) -> Start {
    Start {
        version: Version::Pmi2,
        rank: Some(rank),
        size: None,
        pmiid: None,
        jobid: jobid.map(str::to_string),
    }
}

fn init(stream: UnixStream, start: &Start) -> Result<Client, LaunchError> {
    Client::init(Stream::Unix(stream), start, PATIENCE)
}

/// Hydra's PMI-1 start-up (reference §1), for `rank` of `size`.
fn hydra_pmi1_start(kvs: &str) -> Vec<Step> {
    vec![
        c("cmd=init pmi_version=1 pmi_subversion=1"),
        s("cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0"),
        c("cmd=get_maxes"),
        s("cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024"),
        c("cmd=get_appnum"),
        s("cmd=appnum appnum=0"),
        c("cmd=get_my_kvsname"),
        s(&format!("cmd=my_kvsname kvsname={kvs}")),
    ]
}

const KVS: &str = "kvs_8938_0_2139412012_vm";

#[test]
fn hydra_pmi1_transcript() {
    let mut script = hydra_pmi1_start(KVS);
    script.extend([
        c(&format!(
            "cmd=put kvsname={KVS} key=addr-0 value=host-vm-pid-8940"
        )),
        s("cmd=put_result rc=0 msg=success"),
        c("cmd=barrier_in"),
        s("cmd=barrier_out"),
        c(&format!("cmd=get kvsname={KVS} key=addr-1")),
        s("cmd=get_result rc=0 msg=success value=host-vm-pid-8941"),
        c(&format!("cmd=get kvsname={KVS} key=no-such-key")),
        s("cmd=get_result rc=-1 msg=key_no-such-key_not_found value=unknown"),
        c("cmd=finalize"),
        s("cmd=finalize_ack"),
    ]);
    let (conn, server) = serve(script);
    let mut client = init(conn, &pmi1(0, 4)).unwrap();
    assert_eq!((client.rank(), client.size()), (0, 4));
    assert_eq!(client.appnum(), 0);
    assert_eq!(client.kvsname(), KVS);
    assert_eq!(client.version(), Version::Pmi1);
    assert_eq!(client.limits(), (63, 1023));
    client.put("addr-0", "host-vm-pid-8940").unwrap();
    client.fence().unwrap();
    assert_eq!(client.get("addr-1").unwrap(), "host-vm-pid-8941");
    assert_eq!(
        client.get("no-such-key"),
        Err(LaunchError::KeyNotFound {
            key: "no-such-key".into()
        })
    );
    client.finalize().unwrap();
    finish(server);
}

#[test]
fn slurm_pmi1_transcript() {
    let script = vec![
        c("cmd=init pmi_version=1 pmi_subversion=1"),
        s("cmd=response_to_init rc=0 pmi_version=1 pmi_subversion=1"),
        c("cmd=get_maxes"),
        s("cmd=maxes rc=0 kvsname_max=256 keylen_max=64 vallen_max=1024"),
        c("cmd=get_appnum"),
        s("cmd=appnum rc=0 appnum=-1"),
        c("cmd=get_my_kvsname"),
        s("cmd=my_kvsname rc=0 kvsname=4.0"),
        c("cmd=put kvsname=4.0 key=addr-3 value=x"),
        s("cmd=put_result rc=0"),
        c("cmd=barrier_in"),
        s("cmd=barrier_out rc=0"),
        c("cmd=get kvsname=4.0 key=no-such-key"),
        s("cmd=get_result rc=1"),
        c("cmd=finalize"),
        s("cmd=finalize_ack rc=0"),
    ];
    let (conn, server) = serve(script);
    let mut client = init(conn, &pmi1(3, 4)).unwrap();
    assert_eq!((client.rank(), client.size(), client.appnum()), (3, 4, -1));
    assert_eq!(client.kvsname(), "4.0");
    client.put("addr-3", "x").unwrap();
    client.barrier().unwrap();
    assert!(matches!(
        client.get("no-such-key"),
        Err(LaunchError::KeyNotFound { .. })
    ));
    client.finalize().unwrap();
    finish(server);
}

/// Hydra `-pmi-port`: `initack`, then the server's `set` lines.
fn pmi_port_script(rank: u32, size: u32) -> Vec<Step> {
    let mut script = vec![
        c(&format!("cmd=initack pmiid={rank}")),
        s("cmd=initack"),
        s(&format!("cmd=set size={size}")),
        s(&format!("cmd=set rank={rank}")),
        s("cmd=set debug=0"),
    ];
    script.extend(hydra_pmi1_start(KVS));
    script
}

#[test]
fn pmi_port_transcript() {
    let mut script = pmi_port_script(1, 2);
    script.extend([
        c(&format!("cmd=get kvsname={KVS} key=addr-0")),
        s("cmd=get_result rc=0 msg=success value=10.99.0.1:43889"),
        c("cmd=finalize"),
        s("cmd=finalize_ack"),
    ]);
    let (addr, server) = serve_tcp(script);
    let vars = [("PMI_PORT", addr.as_str()), ("PMI_ID", "1")];
    let Some(super::env::Found::Pmi(found)) = super::env::detect(&lookup(&vars)).unwrap() else {
        panic!("PMI_PORT is PMI");
    };
    let stream = found.open(PATIENCE).unwrap();
    let mut client = Client::init(stream, &found.start, PATIENCE).unwrap();
    assert_eq!((client.rank(), client.size()), (1, 2));
    assert_eq!(client.get("addr-0").unwrap(), "10.99.0.1:43889");
    client.finalize().unwrap();
    finish(server);
}

/// Hydra's PMI-2 start-up for rank 0 of 4 (reference §2).
fn hydra_pmi2_start() -> Vec<Step> {
    vec![
        c("cmd=init pmi_version=2 pmi_subversion=0"),
        s("cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0"),
        c2("38    cmd=fullinit;pmirank=0;threaded=FALSE;"),
        s2("   113cmd=fullinit-response;pmi-version=2;pmi-subversion=0;rank=0;size=4;appnum=0;debugged=FALSE;pmiverbose=FALSE;rc=0;"),
        c2("14    cmd=job-getid;"),
        s2("    59cmd=job-getid-response;jobid=kvs_10294_0_867585953_vm;rc=0;"),
    ]
}

#[test]
fn hydra_pmi2_transcript() {
    let mut script = hydra_pmi2_start();
    script.extend([
        c2("47    cmd=kvs-put;key=addr-2;value=host-vm:pid=10766;"),
        s2("    26cmd=kvs-put-response;rc=0;"),
        c2("14    cmd=kvs-fence;"),
        s2("    28cmd=kvs-fence-response;rc=0;"),
        c2("63    cmd=kvs-get;jobid=kvs_10294_0_867585953_vm;srcid=-1;key=addr-0;"),
        s2("    61cmd=kvs-get-response;found=TRUE;value=host-vm:pid=10762;rc=0;"),
        c2("68    cmd=kvs-get;jobid=kvs_10294_0_867585953_vm;srcid=-1;key=no-such-key;"),
        s2("    38cmd=kvs-get-response;found=FALSE;rc=0;"),
        c2("13    cmd=finalize;"),
        s2("    27cmd=finalize-response;rc=0;"),
    ]);
    let (conn, server) = serve(script);
    let mut client = init(conn, &pmi2(0, None)).unwrap();
    assert_eq!((client.rank(), client.size(), client.appnum()), (0, 4, 0));
    assert_eq!(client.kvsname(), "kvs_10294_0_867585953_vm");
    assert_eq!(client.limits(), (63, 1023));
    client.put("addr-2", "host-vm:pid=10766").unwrap();
    client.fence().unwrap();
    assert_eq!(client.get("addr-0").unwrap(), "host-vm:pid=10762");
    assert_eq!(
        client.get("no-such-key"),
        Err(LaunchError::KeyNotFound {
            key: "no-such-key".into()
        })
    );
    client.finalize().unwrap();
    finish(server);
}

#[test]
fn slurm_pmi2_transcript() {
    let script = vec![
        c("cmd=init pmi_version=2 pmi_subversion=0"),
        s("cmd=response_to_init rc=0 pmi_version=2 pmi_subversion=0"),
        c2("51    cmd=fullinit;pmirank=2;threaded=FALSE;pmijobid=3.0;"),
        s2("114   cmd=fullinit-response;rc=0;pmi-version=2;pmi-subversion=0;rank=2;size=4;appnum=-1;debugged=FALSE;pmiverbose=FALSE;"),
        c2("14    cmd=job-getid;"),
        s2("38    cmd=job-getid-response;rc=0;jobid=3.0;"),
        c2("45    cmd=kvs-put;key=addr-2;value=rank2:pid=15753;"),
        s2("26    cmd=kvs-put-response;rc=0;"),
        c2("14    cmd=kvs-fence;"),
        // Slurm writes the prefix and the payload separately.
        Step::Send(b"28    ".to_vec()),
        Step::Send(b"cmd=kvs-fence-response;rc=0;".to_vec()),
        c2("42    cmd=kvs-get;jobid=3.0;srcid=-1;key=addr-0;"),
        s2("59    cmd=kvs-get-response;rc=0;found=TRUE;value=rank0:pid=15755;"),
        c2("47    cmd=kvs-get;jobid=3.0;srcid=-1;key=no-such-key;"),
        s2("38    cmd=kvs-get-response;rc=0;found=FALSE;"),
        c2("13    cmd=finalize;"),
        s2("27    cmd=finalize-response;rc=0;"),
    ];
    let (conn, server) = serve(script);
    let mut client = init(conn, &pmi2(2, Some("3.0"))).unwrap();
    assert_eq!((client.rank(), client.size(), client.appnum()), (2, 4, -1));
    assert_eq!(client.kvsname(), "3.0");
    client.put("addr-2", "rank2:pid=15753").unwrap();
    client.fence().unwrap();
    assert_eq!(client.get("addr-0").unwrap(), "rank0:pid=15755");
    assert!(matches!(
        client.get("no-such-key"),
        Err(LaunchError::KeyNotFound { .. })
    ));
    client.finalize().unwrap();
    finish(server);
}

#[test]
fn abort_sends_one_message_and_waits_for_no_reply() {
    let mut script = hydra_pmi1_start(KVS);
    script.push(c("cmd=abort exitcode=5 message=rank_3_panicked:_bye"));
    let (conn, server) = serve(script);
    let client = init(conn, &pmi1(0, 2)).unwrap();
    client.abort(5, "rank 3 panicked: bye").unwrap();
    finish(server);

    let mut script = hydra_pmi2_start();
    script.push(c2("38    cmd=abort;isworldabort=TRUE;msg=a_b_c;"));
    let (conn, server) = serve(script);
    let client = init(conn, &pmi2(0, None)).unwrap();
    client.abort(1, "a b;c").unwrap();
    finish(server);
}

/// An environment of `vars` only.
fn lookup<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
    move |name| {
        vars.iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.to_string())
    }
}

/// A world of `world` ranks, given by the user.
fn shape(world: u32) -> Shape {
    Shape {
        world,
        world_given: true,
        per_process: None,
    }
}

/// `join_with` over an inherited `PMI_FD` (a socket pair's end, given up to
/// the client like a launcher's), against a Hydra of one process.
fn join_alone_over_fd() -> Result<Option<Bootstrap>, Error> {
    let mut script = hydra_pmi1_start(KVS);
    script.extend([c("cmd=finalize"), s("cmd=finalize_ack")]);
    let (conn, server) = serve(script);
    let fd = conn.into_raw_fd().to_string();
    let vars = [
        ("PMI_FD", fd.as_str()),
        ("PMI_RANK", "0"),
        ("PMI_SIZE", "1"),
    ];
    let result = join_with(&lookup(&vars), PATIENCE, &shape(4));
    finish(server);
    result
}

#[test]
fn a_one_process_launch_runs_after_finalizing() {
    assert!(matches!(join_alone_over_fd(), Ok(None)));
    let mut script = pmi_port_script(0, 1);
    script.extend([c("cmd=finalize"), s("cmd=finalize_ack")]);
    let (addr, server) = serve_tcp(script);
    let vars = [("PMI_PORT", addr.as_str()), ("PMI_ID", "0")];
    assert!(matches!(
        join_with(&lookup(&vars), PATIENCE, &shape(4)),
        Ok(None)
    ));
    finish(server);
}

/// A job of `n` processes on threads of this test, each joining through
/// our PMI-1 server over its own socket pair (`PMI_FD`, as the built-in
/// launcher gives it), with the extra variables `extra(process)`: each
/// thread's result of `body(join_with(...))`, and whether the server saw
/// each process finalize.
fn threaded_job<T: Send + 'static>(
    n: u32,
    shapes: impl Fn(u32) -> Shape,
    extra: impl Fn(u32) -> Vec<(String, String)>,
    body: impl Fn(Result<Option<Bootstrap>, Error>) -> T + Send + Sync + 'static,
) -> (Vec<T>, Vec<bool>) {
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for _ in 0..n {
        let (a, b) = UnixStream::pair().unwrap();
        ours.push(a);
        theirs.push(b);
    }
    let (tx, _rx) = std::sync::mpsc::channel();
    let server = Server::start(ours, "kvs_threads".to_string(), tx).unwrap();
    let body = std::sync::Arc::new(body);
    let threads: Vec<_> = theirs
        .into_iter()
        .enumerate()
        .map(|(p, conn)| {
            let p = p as u32;
            let mut vars: Vec<(String, String)> = vec![
                ("PMI_FD".into(), conn.into_raw_fd().to_string()),
                ("PMI_RANK".into(), p.to_string()),
                ("PMI_SIZE".into(), n.to_string()),
            ];
            vars.extend(extra(p));
            let shape = shapes(p);
            let body = std::sync::Arc::clone(&body);
            std::thread::spawn(move || {
                let var = |name: &str| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
                body(join_with(&var, PATIENCE, &shape))
            })
        })
        .collect();
    let results = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let finalized = (0..n).map(|p| server.finalized(p)).collect();
    server.join();
    (results, finalized)
}

#[test]
fn a_multi_process_launch_bootstraps_connects_and_finalizes() {
    let (results, finalized) = threaded_job(
        3,
        |_| shape(10),
        |p| vec![("SLURM_LOCALID".into(), (p + 5).to_string())],
        |joined| {
            let mut b = joined.unwrap().expect("a job of several processes");
            let seen = (
                b.process,
                b.processes,
                b.blocks.clone(),
                b.credentials,
                b.local_process,
                b.processes_map().world_size(),
            );
            // The threads share this host: three shares of it, and a TCP
            // transport to the two other processes.
            let (transport, share) = connect(&mut b).unwrap();
            let joined = (transport.this().get(), transport.processes(), share);
            transport.close(std::time::Duration::from_secs(5));
            super::finish(b).unwrap();
            (seen, joined)
        },
    );
    assert_eq!(finalized, [true; 3]);
    let credentials = results[0].0 .3;
    for (p, ((process, processes, blocks, creds, local, world), joined)) in
        results.into_iter().enumerate()
    {
        assert_eq!((process, processes), (p as u32, 3));
        assert_eq!(blocks, [4, 3, 3]);
        assert_eq!(world, 10);
        assert_eq!(local, Some(p as u32 + 5));
        // One secret for the job, made by process 0.
        assert_eq!(creds, credentials);
        assert_eq!(creds.build, super::bootstrap::build_id());
        assert_eq!(joined, (p as u32, 3, (p as u32, 3)));
    }
    assert_ne!(credentials.secret, [0; 16]);
}

#[test]
fn processes_that_disagree_on_the_world_fail_naming_both() {
    let (results, finalized) = threaded_job(
        3,
        |p| shape(if p == 2 { 12 } else { 10 }),
        |_| Vec::new(),
        |joined| joined.unwrap_err().to_string(),
    );
    assert_eq!(finalized, [true; 3]);
    // Every process fails, each naming a process that differs from it.
    for (p, text) in results.iter().enumerate() {
        assert!(text.contains("disagree on the world size"), "{text}");
        if p == 2 {
            assert!(
                text.contains("process 0 has 10 ranks as 4,3,3, process 2 has 12 ranks as 4,4,4"),
                "{text}"
            );
        } else {
            assert!(
                text.contains(&format!(
                    "process 2 has 12 ranks as 4,4,4, process {p} has 10 ranks as 4,3,3"
                )),
                "{text}"
            );
        }
    }
    let per = |p: u32| Shape {
        world: 7,
        world_given: false,
        per_process: Some(if p == 0 { "2,2" } else { "3" }.to_string()),
    };
    let (results, _) = threaded_job(2, per, |_| Vec::new(), |j| j.unwrap_err().to_string());
    assert!(
        results[0].contains("process 1 has 6 ranks as 3,3, process 0 has 4 ranks as 2,2"),
        "{}",
        results[0]
    );
}

#[test]
fn a_layout_error_in_one_process_fails_every_process_without_a_hang() {
    let (results, finalized) = threaded_job(
        3,
        |p| Shape {
            world: 6,
            world_given: true,
            per_process: (p == 1).then(|| "1,2".into()),
        },
        |_| Vec::new(),
        |j| j.unwrap_err().to_string(),
    );
    assert!(
        results[1].contains("lists 2 counts, but the launcher started 3"),
        "{}",
        results[1]
    );
    for p in [0, 2] {
        assert!(
            results[p].contains(&format!(
                "process 1 has none, process {p} has 6 ranks as 2,2,2"
            )) && results[p].contains("that process's settings are invalid"),
            "{}",
            results[p]
        );
    }
    // Every process finalized: the launcher sees an orderly end.
    assert_eq!(finalized, [true; 3]);
}

#[test]
fn allgather_carries_long_values_over_several_epochs() {
    let (results, finalized) = threaded_job(
        4,
        |_| shape(4),
        |_| Vec::new(),
        |joined| {
            let mut b = joined.unwrap().unwrap();
            let p = b.process;
            let mut seen = Vec::new();
            for round in 0..3u32 {
                // Longer than the 1023-byte value limit for some processes.
                let value = format!(
                    "{p}-{round}-{}",
                    "x".repeat(700 * (p as usize) + round as usize)
                );
                seen.push(b.session.allgather("test", &value).unwrap());
            }
            b.session.barrier().unwrap();
            let bad = b.session.allgather("bad name", "x").unwrap_err();
            assert!(matches!(bad, LaunchError::BadByte { .. }), "{bad:?}");
            let bad = b.session.allgather("name", "a b").unwrap_err();
            assert!(matches!(bad, LaunchError::BadByte { .. }), "{bad:?}");
            let bad = b.session.allgather("a.b", "x").unwrap_err();
            assert!(
                matches!(bad, LaunchError::BadByte { byte: '.', .. }),
                "{bad:?}"
            );
            let bad = b.session.allgather(&"n".repeat(33), "x").unwrap_err();
            assert!(
                matches!(bad, LaunchError::TooLong { len: 33, .. }),
                "{bad:?}"
            );
            b.session.finalize().unwrap();
            seen
        },
    );
    assert_eq!(finalized, [true; 4]);
    for seen in results {
        for (round, all) in seen.into_iter().enumerate() {
            let expected: Vec<String> = (0..4)
                .map(|p| format!("{p}-{round}-{}", "x".repeat(700 * p + round)))
                .collect();
            assert_eq!(all, expected);
        }
    }
}

#[test]
fn the_server_refuses_bad_lines_and_goes_on() {
    let (ours, mut theirs) = UnixStream::pair().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let server = Server::start(vec![ours], "kvs_bad".to_string(), tx).unwrap();
    theirs.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut reader = std::io::BufReader::new(theirs.try_clone().unwrap());
    let mut ask = |line: &str| {
        use std::io::BufRead;
        theirs.write_all(line.as_bytes()).unwrap();
        let mut reply = String::new();
        reader.read_line(&mut reply).unwrap();
        reply
    };
    for (line, reply) in [
        ("garbage\n", "cmd=error rc=-1 msg="),
        (
            "cmd=frobnicate\n",
            "cmd=frobnicate_result rc=-1 msg=unknown_command",
        ),
        (
            "cmd=init pmi_version=2 pmi_subversion=0\n",
            "cmd=response_to_init rc=-1",
        ),
        (
            "cmd=put kvsname=other key=a value=b\n",
            "cmd=put_result rc=-1 msg=no_key-value_space",
        ),
        (
            "cmd=put kvsname=kvs_bad value=b\n",
            "cmd=put_result rc=-1 msg=no_key",
        ),
        (
            "cmd=get kvsname=kvs_bad key=nope\n",
            "cmd=get_result rc=-1 msg=key_nope_not_found",
        ),
        (
            "cmd=put kvsname=kvs_bad key=a value=b=c\n",
            "cmd=put_result rc=0",
        ),
        (
            "cmd=get kvsname=kvs_bad key=a\n",
            "cmd=get_result rc=0 msg=success value=b=c",
        ),
    ] {
        let got = ask(line);
        assert!(got.starts_with(reply), "{line:?}: {got:?}");
    }
    let long = format!("cmd=put kvsname=kvs_bad key=a value={}\n", "v".repeat(2000));
    assert!(ask(&long).starts_with("cmd=put_result rc=-1 msg=a_value_of"));
    // A line beyond the server's limit closes the connection.
    let huge = "x".repeat(super::server::MAX_LINE + 10);
    let _ = theirs.write_all(huge.as_bytes());
    let mut rest = String::new();
    use std::io::Read;
    let n = reader.read_to_string(&mut rest).unwrap();
    assert_eq!(n, 0, "{rest:?}");
    assert_eq!(
        rx.recv_timeout(PATIENCE).unwrap(),
        super::server::Event::Closed { process: 0 }
    );
    assert!(!server.finalized(0));
    server.join();
}

#[test]
fn without_launcher_variables_nothing_is_contacted() {
    assert!(matches!(
        join_with(&lookup(&[("PATH", "/bin")]), PATIENCE, &shape(2)),
        Ok(None)
    ));
}

#[test]
fn a_launch_error_fails_join_with_the_flag_to_use() {
    let vars = [
        ("SLURM_JOB_ID", "5"),
        ("SLURM_STEP_ID", "0"),
        ("SLURM_STEP_NUM_TASKS", "2"),
    ];
    let err = join_with(&lookup(&vars), PATIENCE, &shape(2)).unwrap_err();
    assert!(
        matches!(err, Error::Launch(LaunchError::NoPmi { .. })),
        "{err:?}"
    );
    assert!(err.to_string().contains("`srun --mpi=pmi2`"), "{err}");
    // A port nobody listens on: a connection error, not a hang.
    let free = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = free.local_addr().unwrap().to_string();
    drop(free);
    let vars = [("PMI_PORT", addr.as_str()), ("PMI_ID", "0")];
    let err = join_with(&lookup(&vars), PATIENCE, &shape(2)).unwrap_err();
    assert!(
        matches!(&err, Error::Launch(LaunchError::Io { command, .. }) if command.contains(&addr)),
        "{err:?}"
    );
}

/// Runs the PMI-1 start-up against a server that replies `replies` to the
/// first request (then closes), and returns the client's error.
fn init_error(version: Version, replies: Vec<Step>, timeout: Duration) -> LaunchError {
    let start = match version {
        Version::Pmi1 => pmi1(0, 1),
        Version::Pmi2 => pmi2(0, None),
    };
    let first = match version {
        Version::Pmi1 => c("cmd=init pmi_version=1 pmi_subversion=1"),
        Version::Pmi2 => c("cmd=init pmi_version=2 pmi_subversion=0"),
    };
    let mut script = vec![first];
    script.extend(replies);
    let (conn, server) = serve(script);
    let err = Client::init(Stream::Unix(conn), &start, timeout).unwrap_err();
    // The client is gone: the server's script ends.
    finish(server);
    err
}

#[test]
fn bad_replies_are_clear_errors() {
    let ok1 = || s("cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0");
    let cases: Vec<(Vec<Step>, &str)> = vec![
        (
            vec![s("cmd=response_to_init rc=-2 msg=no_way")],
            "refused it (rc=-2, no_way)",
        ),
        (
            vec![s("cmd=response_to_init pmi_version=1 garbage")],
            "the field \"garbage\" has no '='",
        ),
        (
            vec![s("cmd=maxes kvsname_max=256")],
            "expected cmd=response_to_init",
        ),
        (vec![s("pmi_version=1 rc=0")], "no cmd= field"),
        (
            vec![s("cmd=response_to_init pmi_version=2 rc=0")],
            "does not speak PMI version 1",
        ),
        (
            vec![s("cmd=response_to_init rc=0")],
            "no pmi_version= field",
        ),
        (
            vec![s("cmd=response_to_init pmi_version=one")],
            "\"one\" is not a number",
        ),
        (
            vec![Step::Send(b"cmd=response_to_init \xff\xfe\n".to_vec())],
            "not text",
        ),
        (
            vec![Step::Send(vec![b'x'; 70 * 1024])],
            "a line longer than 65536 bytes",
        ),
        (
            vec![
                Step::Send(b"cmd=response_to_init pmi_ver".to_vec()),
                Step::Close,
            ],
            "closed the connection",
        ),
        (vec![Step::Close], "closed the connection"),
        (
            vec![
                ok1(),
                c("cmd=get_maxes"),
                s("cmd=maxes kvsname_max=256 keylen_max=1 vallen_max=1024"),
            ],
            "keylen_max=1 is too small",
        ),
        (
            vec![
                ok1(),
                c("cmd=get_maxes"),
                s("cmd=maxes keylen_max=64 vallen_max=1024"),
                c("cmd=get_appnum"),
                s("cmd=appnum rc=0"),
            ],
            "no appnum= field",
        ),
        (
            vec![
                ok1(),
                c("cmd=get_maxes"),
                s("cmd=maxes keylen_max=64 vallen_max=1024"),
                c("cmd=get_appnum"),
                s("cmd=appnum appnum=0"),
                c("cmd=get_my_kvsname"),
                s("cmd=my_kvsname kvsname="),
            ],
            "kvsname is empty",
        ),
        (
            vec![ok1(), c("cmd=get_maxes"), Step::Close],
            "PMI get_maxes: the launcher closed",
        ),
    ];
    for (replies, want) in cases {
        let err = init_error(Version::Pmi1, replies, PATIENCE).to_string();
        assert!(err.contains(want), "expected {want:?} in {err:?}");
    }
}

#[test]
fn bad_pmi2_frames_are_clear_errors() {
    let ok = || s("cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0");
    let fullinit = || c2("38    cmd=fullinit;pmirank=0;threaded=FALSE;");
    let cases: Vec<(Vec<Step>, &str)> = vec![
        (
            vec![ok(), fullinit(), Step::Send(b"abcdefcmd=x;".to_vec())],
            "length prefix is not a number",
        ),
        (
            vec![ok(), fullinit(), Step::Send(b"999999".to_vec())],
            "more than the 65536 bytes",
        ),
        (
            vec![
                ok(),
                fullinit(),
                Step::Send(b"    40cmd=fullinit-response;".to_vec()),
                Step::Close,
            ],
            "closed the connection",
        ),
        (
            vec![ok(), fullinit(), Step::Send(b"   ".to_vec()), Step::Close],
            "closed the connection",
        ),
        (
            vec![ok(), fullinit(), s2("    20cmd=x;rank=0;size=1;")],
            "expected cmd=fullinit-response",
        ),
        (
            vec![
                ok(),
                fullinit(),
                s2("    41cmd=fullinit-response;rc=7;rank=0;size=1;"),
            ],
            "rc=7",
        ),
        (
            vec![
                ok(),
                fullinit(),
                s2("    50cmd=fullinit-response;rank=1;size=2;appnum=0;rc=0;"),
            ],
            "the server says rank 1",
        ),
        (
            vec![
                ok(),
                fullinit(),
                s2("    50cmd=fullinit-response;rank=0;size=0;appnum=0;rc=0;"),
            ],
            "rank 0 of 0 processes",
        ),
        (
            vec![
                ok(),
                fullinit(),
                s2("    51cmd=fullinit-response;rank=0;size=-4;appnum=0;rc=0;"),
            ],
            "size=-4 is not a count",
        ),
        (
            vec![ok(), fullinit(), s2("    27cmd=fullinit-response;junk;")],
            "has no '='",
        ),
        (
            vec![s("cmd=response_to_init pmi_version=1 rc=0")],
            "does not speak PMI version 2",
        ),
    ];
    for (replies, want) in cases {
        let err = init_error(Version::Pmi2, replies, PATIENCE).to_string();
        assert!(err.contains(want), "expected {want:?} in {err:?}");
    }
}

#[test]
fn a_silent_server_times_out() {
    // The server reads the request and never replies; it waits for the
    // client to give up and close.
    let err = init_error(Version::Pmi1, vec![], Duration::from_millis(200));
    assert_eq!(
        err,
        LaunchError::Timeout {
            command: "init".into(),
            waited_ms: 200
        }
    );
}

#[test]
fn a_server_closing_during_a_fence_ends_it() {
    // A fence waits without a timeout: the close is what ends it.
    let mut script = hydra_pmi1_start(KVS);
    script.extend([c("cmd=barrier_in"), Step::Close]);
    let (conn, server) = serve(script);
    let mut client = init(conn, &pmi1(0, 2)).unwrap();
    assert_eq!(
        client.fence(),
        Err(LaunchError::Closed {
            command: "barrier_in".into()
        })
    );
    finish(server);
    let mut script = hydra_pmi2_start();
    script.extend([
        c2("14    cmd=kvs-fence;"),
        Step::Send(b"    28cmd=kvs-fe".to_vec()),
        Step::Close,
    ]);
    let (conn, server) = serve(script);
    let mut client = init(conn, &pmi2(0, None)).unwrap();
    assert_eq!(
        client.fence(),
        Err(LaunchError::Closed {
            command: "kvs-fence".into()
        })
    );
    finish(server);
}

#[test]
fn refused_puts_and_gets_are_errors() {
    let mut script = hydra_pmi1_start(KVS);
    script.extend([
        c(&format!("cmd=put kvsname={KVS} key=k value=v")),
        s("cmd=put_result rc=-1 msg=duplicate_key"),
        c("cmd=barrier_in"),
        s("cmd=barrier_out rc=3"),
    ]);
    let (conn, server) = serve(script);
    let mut client = init(conn, &pmi1(0, 2)).unwrap();
    assert_eq!(
        client.put("k", "v"),
        Err(LaunchError::Refused {
            command: "put".into(),
            rc: -1,
            message: Some("duplicate_key".into())
        })
    );
    assert!(matches!(
        client.fence(),
        Err(LaunchError::Refused { rc: 3, .. })
    ));
    drop(client);
    finish(server);

    let mut script = hydra_pmi2_start();
    script.extend([
        c2("63    cmd=kvs-get;jobid=kvs_10294_0_867585953_vm;srcid=-1;key=addr-0;"),
        s2("    33cmd=kvs-get-response;found=MAYBE;"),
    ]);
    let (conn, server) = serve(script);
    let mut client = init(conn, &pmi2(0, None)).unwrap();
    let err = client.get("addr-0").unwrap_err().to_string();
    assert!(err.contains("found=\"MAYBE\""), "{err}");
    drop(client);
    finish(server);
}

#[test]
fn keys_and_values_beyond_the_limits_are_refused_before_sending() {
    // The script ends after start-up: a refused put or get sends nothing
    // (the server fails on any byte more).
    let (conn, server) = serve(hydra_pmi1_start(KVS));
    let mut client = init(conn, &pmi1(0, 2)).unwrap();
    let key63 = "k".repeat(63);
    let value1023 = "v".repeat(1023);
    let key64 = "k".repeat(64);
    let value1024 = "v".repeat(1024);
    let err = client.put(&key64, "v").unwrap_err();
    assert!(
        matches!(
            err,
            LaunchError::TooLong {
                what: "key",
                len: 64,
                max: 63,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("the server's maxes under PMI-1"),
        "{err}"
    );
    let err = client.put("k", &value1024).unwrap_err();
    assert!(
        matches!(
            err,
            LaunchError::TooLong {
                what: "value",
                len: 1024,
                max: 1023,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(matches!(
        client.get(&key64),
        Err(LaunchError::TooLong { .. })
    ));
    for (key, value) in [
        ("a b", "v"),
        ("k", "a b"),
        ("k", "x;y"),
        ("k=1", "v"),
        ("k", "a\nb"),
    ] {
        assert!(
            matches!(client.put(key, value), Err(LaunchError::BadByte { .. })),
            "{key:?}={value:?}"
        );
    }
    assert_eq!(client.put("", "v"), Err(LaunchError::EmptyKey));
    drop(client);
    finish(server);

    // The longest key and value pass.
    let mut script = hydra_pmi1_start(KVS);
    script.extend([
        c(&format!(
            "cmd=put kvsname={KVS} key={key63} value={value1023}"
        )),
        s("cmd=put_result rc=0 msg=success"),
    ]);
    let (conn, server) = serve(script);
    let mut client = init(conn, &pmi1(0, 2)).unwrap();
    client.put(&key63, &value1023).unwrap();
    drop(client);
    finish(server);

    // Smaller maxes from the server are the limits.
    let script = vec![
        c("cmd=init pmi_version=1 pmi_subversion=1"),
        s("cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0"),
        c("cmd=get_maxes"),
        s("cmd=maxes kvsname_max=256 keylen_max=16 vallen_max=32"),
        c("cmd=get_appnum"),
        s("cmd=appnum appnum=0"),
        c("cmd=get_my_kvsname"),
        s("cmd=my_kvsname kvsname=k"),
    ];
    let (conn, server) = serve(script);
    let mut client = init(conn, &pmi1(0, 2)).unwrap();
    assert_eq!(client.limits(), (15, 31));
    assert!(matches!(
        client.put(&"k".repeat(16), "v"),
        Err(LaunchError::TooLong { max: 15, .. })
    ));
    assert!(matches!(
        client.put("k", &"v".repeat(32)),
        Err(LaunchError::TooLong { max: 31, .. })
    ));
    drop(client);
    finish(server);

    // PMI-2's constants.
    let (conn, server) = serve(hydra_pmi2_start());
    let mut client = init(conn, &pmi2(0, None)).unwrap();
    let err = client.put("k", &value1024).unwrap_err();
    assert!(
        err.to_string().contains("PMI-2's limits under PMI-2"),
        "{err}"
    );
    drop(client);
    finish(server);
}

/// Under a real `mpiexec.mpich -n 2` (MPICH installed): each process puts
/// its key, fences, and reads the other's, over PMI-1 on `PMI_FD`, PMI-2
/// on `PMI_FD` (`MYRIAD_PMI=2`) and PMI-1 on `-pmi-port`.
#[test]
#[ignore = "needs MPICH's mpiexec (apt-get install mpich)"]
fn real_mpiexec() {
    const CHILD: &str = "MYRIAD_PMI_TEST_CHILD";
    if std::env::var_os(CHILD).is_some() {
        let Some(super::env::Found::Pmi(found)) =
            super::env::detect(&|n| std::env::var(n).ok()).unwrap()
        else {
            panic!("not started by mpiexec");
        };
        let stream = found.open(PATIENCE).unwrap();
        let mut client = Client::init(stream, &found.start, PATIENCE).unwrap();
        let (rank, size) = (client.rank(), client.size());
        assert_eq!(size, 2);
        client
            .put(
                &format!("addr-{rank}"),
                &format!("rank{rank}:pid={}", std::process::id()),
            )
            .unwrap();
        client.fence().unwrap();
        let other = 1 - rank;
        let value = client.get(&format!("addr-{other}")).unwrap();
        assert!(value.starts_with(&format!("rank{other}:pid=")), "{value}");
        assert!(matches!(
            client.get("no-such-key"),
            Err(LaunchError::KeyNotFound { .. })
        ));
        client.barrier().unwrap();
        eprintln!(
            "child {rank}/{size} ({:?}, kvs {}, appnum {}) read {value}",
            client.version(),
            client.kvsname(),
            client.appnum()
        );
        client.finalize().unwrap();
        return;
    }
    let exe = std::env::current_exe().unwrap();
    for (pmi, extra) in [("1", None), ("2", None), ("1", Some("-pmi-port"))] {
        let mut cmd = std::process::Command::new("mpiexec.mpich");
        cmd.args(["-n", "2"]);
        if let Some(flag) = extra {
            cmd.arg(flag);
        }
        cmd.arg(&exe)
            .args([
                "launch::tests::real_mpiexec",
                "--exact",
                "--ignored",
                "--nocapture",
            ])
            .env(CHILD, "1")
            .env("MYRIAD_PMI", pmi);
        let out = cmd.output().expect("mpiexec.mpich runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        eprintln!("MYRIAD_PMI={pmi} {extra:?}:\n{stderr}");
        assert!(out.status.success(), "{:?}\n{stdout}\n{stderr}", out.status);
        assert_eq!(stdout.matches("1 passed").count(), 2, "{stdout}");
    }
}

/// Set in the processes of the mesh tests.
const MESH_CHILD: &str = "MYRIAD_MESH_TEST_CHILD";

/// The processes' part of the mesh tests (ignored: it runs only as their
/// child): bootstrap through the launcher, build the mesh, send this
/// process's index to every peer and check the byte from each, then meet
/// at a barrier and finalize.
#[test]
#[ignore = "the child part of mesh_across_processes_*"]
fn mesh_child() {
    if std::env::var_os(MESH_CHILD).is_none() {
        return;
    }
    let var = |name: &str| std::env::var(name).ok();
    let mut b = join_with(&var, PATIENCE, &shape(8))
        .unwrap()
        .expect("a job of several processes");
    let mut mesh = super::mesh(&mut b, PATIENCE).unwrap();
    assert_eq!(mesh.this, b.process);
    for s in mesh.streams.iter_mut().flatten() {
        s.write_all(&[b.process as u8]).unwrap();
    }
    for (p, s) in mesh.streams.iter_mut().enumerate() {
        let Some(s) = s else {
            assert_eq!(p as u32, b.process);
            continue;
        };
        s.set_read_timeout(Some(PATIENCE)).unwrap();
        let mut byte = [0u8];
        s.read_exact(&mut byte).unwrap();
        assert_eq!(byte[0] as usize, p);
    }
    let done = b
        .session
        .allgather("done", &format!("ok{}", b.process))
        .unwrap();
    assert_eq!(
        done,
        (0..b.processes)
            .map(|p| format!("ok{p}"))
            .collect::<Vec<_>>()
    );
    b.session.barrier().unwrap();
    let peers: Vec<String> = mesh
        .streams
        .iter()
        .flatten()
        .map(|s| s.peer_addr().unwrap().ip().to_string())
        .collect();
    // One write: the processes share standard error.
    let line = format!(
        "mesh child: process {} of {} ({}), blocks {:?}, {} peers connected: {}\n",
        b.process,
        b.processes,
        b.launcher,
        b.blocks,
        peers.len(),
        peers.join(",")
    );
    std::io::stderr().write_all(line.as_bytes()).unwrap();
    b.session.finalize().unwrap();
}

fn mesh_child_args() -> Vec<std::ffi::OsString> {
    [
        "launch::tests::mesh_child",
        "--exact",
        "--ignored",
        "--nocapture",
    ]
    .iter()
    .map(Into::into)
    .collect()
}

/// Four processes of the built-in launcher build the mesh and exchange a
/// byte over every connection (no MPICH needed).
#[test]
fn mesh_across_processes_of_the_built_in_launcher() {
    let plan = super::launcher::Plan {
        program: std::env::current_exe().unwrap(),
        args: mesh_child_args(),
        envs: vec![(MESH_CHILD.into(), "1".into())],
        processes: 4,
        grace: super::launcher::DEFAULT_GRACE,
    };
    assert_eq!(plan.run().unwrap(), super::launcher::Outcome::Success);
}

/// The same under a real `mpiexec.mpich -launcher fork -n 4`, over PMI-1
/// on `PMI_FD` and on `-pmi-port`.
#[test]
#[ignore = "needs MPICH's mpiexec (apt-get install mpich)"]
fn mesh_across_processes_of_real_mpiexec() {
    for extra in [None, Some("-pmi-port")] {
        let mut cmd = std::process::Command::new("mpiexec.mpich");
        cmd.args(["-launcher", "fork", "-n", "4"]);
        if let Some(flag) = extra {
            cmd.arg(flag);
        }
        let out = cmd
            .arg(std::env::current_exe().unwrap())
            .args(mesh_child_args())
            .env(MESH_CHILD, "1")
            .env_remove("MYRIAD_PMI")
            .output()
            .expect("mpiexec.mpich runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "{extra:?}: {:?}\n{stdout}\n{stderr}",
            out.status
        );
        assert_eq!(stdout.matches("1 passed").count(), 4, "{stdout}\n{stderr}");
        assert_eq!(stderr.matches("3 peers connected").count(), 4, "{stderr}");
    }
}

/// The variables Open MPI's `mpirun -n 2` gives process 0 (trimmed; §7 of
/// `../shared/reference/launchers.md`), with the server's address at a port
/// nobody listens on.
const OPEN_MPI_VARS: &[(&str, &str)] = &[
    ("OMPI_COMM_WORLD_SIZE", "2"),
    ("OMPI_COMM_WORLD_RANK", "0"),
    ("OMPI_COMM_WORLD_LOCAL_RANK", "0"),
    ("PMIX_NAMESPACE", "1445527553"),
    ("PMIX_RANK", "0"),
    ("PMIX_SERVER_URI4", "1445527552.0;tcp4://127.0.0.1:1"),
];

/// A PMIx launcher's process in a build without the `pmix` feature: an
/// error naming the feature and the launchers that work instead (each
/// process would otherwise run the whole job alone); a job of one process
/// still runs alone, as before.
#[cfg(not(feature = "pmix"))]
#[test]
fn a_pmix_launch_without_the_feature_fails_naming_it() {
    let srun: &[(&str, &str)] = &[
        ("SLURM_JOB_ID", "5"),
        ("SLURM_STEP_ID", "0"),
        ("SLURM_STEP_NUM_TASKS", "4"),
        ("SLURM_MPI_TYPE", "pmix"),
        ("PMIX_NAMESPACE", "slurm.pmix.5.0"),
        ("PMIX_RANK", "3"),
    ];
    let unknown_size: &[(&str, &str)] = &[("PMIX_NAMESPACE", "prterun-vm-1@1"), ("PMIX_RANK", "0")];
    for (vars, launcher) in [
        (OPEN_MPI_VARS, "Open MPI's mpirun started 2 processes"),
        (srun, "srun --mpi=pmix started 4 processes"),
        (unknown_size, "a PMIx launcher"),
    ] {
        let err = join_with(&lookup(vars), PATIENCE, &shape(2)).unwrap_err();
        let text = err.to_string();
        for needle in [
            launcher,
            "`pmix` cargo feature",
            "mpiexec.mpich",
            "srun --mpi=pmi2",
        ] {
            assert!(text.contains(needle), "{vars:?}: {needle:?} not in {text}");
        }
    }
    let mut one = OPEN_MPI_VARS.to_vec();
    one[0].1 = "1";
    assert!(matches!(
        join_with(&lookup(&one), PATIENCE, &shape(2)),
        Ok(None)
    ));
    let err = join_with(
        &lookup(&[("PMIX_NAMESPACE", "n"), ("PMIX_RANK", "x")]),
        PATIENCE,
        &shape(2),
    )
    .unwrap_err();
    assert!(err.to_string().contains("PMIX_RANK=\"x\""), "{err}");
}

/// With the feature, the same variables are a PMIx launch; PMI wins where a
/// launcher sets both.
#[cfg(feature = "pmix")]
#[test]
fn pmix_variables_are_a_pmix_launch_and_pmi_wins_over_them() {
    use super::env::{detect, Found};
    let found = detect(&lookup(OPEN_MPI_VARS)).unwrap();
    assert!(
        matches!(&found, Some(Found::Pmix(p)) if p.launcher == "Open MPI's mpirun"),
        "{found:?}"
    );
    let mut both = OPEN_MPI_VARS.to_vec();
    both.extend([("PMI_FD", "5"), ("PMI_RANK", "0"), ("PMI_SIZE", "2")]);
    let found = detect(&lookup(&both)).unwrap();
    assert!(matches!(found, Some(Found::Pmi(_))), "{found:?}");
    // A rank only (no namespace) is not a PMIx launch.
    let found = detect(&lookup(&[("PMIX_RANK", "0")])).unwrap();
    assert_eq!(found, None);
}

/// Set in the processes of [`real_open_mpi`].
#[cfg(feature = "pmix")]
const PMIX_CHILD: &str = "MYRIAD_PMIX_TEST_CHILD";

/// `mpirun.openmpi` (Open MPI 4.1) with `args`, running the lib test `test`
/// with `env` set in each process; allowed as root, as CI runs.
#[cfg(feature = "pmix")]
fn open_mpi(args: &[&str], test: &str, env: (&str, &str)) -> std::process::Output {
    std::process::Command::new("mpirun.openmpi")
        .args(["--oversubscribe"])
        .args(args)
        .arg(std::env::current_exe().unwrap())
        .args([test, "--exact", "--ignored", "--nocapture"])
        .env(env.0, env.1)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env_remove("MYRIAD_PMI")
        .output()
        .expect("mpirun.openmpi runs (apt-get install openmpi-bin)")
}

/// Under a real `mpirun.openmpi -n 2`: the PMIx client starts (rank, size,
/// local rank), each process puts its key, fences and reads the other's; a
/// missing key is `KeyNotFound` within the get's timeout, a rank outside
/// the job an error; then barrier and finalize.
#[cfg(feature = "pmix")]
#[test]
#[ignore = "needs Open MPI's mpirun (apt-get install openmpi-bin)"]
fn real_open_mpi() {
    use super::pmix;
    if std::env::var_os(PMIX_CHILD).is_some() {
        let found = super::env::detect(&|n| std::env::var(n).ok()).unwrap();
        assert!(
            matches!(&found, Some(super::env::Found::Pmix(p)) if p.launcher == "Open MPI's mpirun"),
            "{found:?}"
        );
        let short = Duration::from_secs(2);
        let mut client = pmix::Client::init(short).unwrap();
        let (rank, size) = (client.rank(), client.size());
        assert_eq!(size, 2);
        // One host: the local rank is the rank.
        assert_eq!(client.local_rank(), Some(rank));
        // A second client in the process is refused (libpmix is global).
        assert!(pmix::Client::init(short).is_err());
        client
            .put(
                &format!("addr-{rank}"),
                &format!(
                    "rank{rank}:pid={} with spaces; and more",
                    std::process::id()
                ),
            )
            .unwrap();
        client.fence().unwrap();
        let other = 1 - rank;
        let value = client.get(other, &format!("addr-{other}")).unwrap();
        assert!(value.starts_with(&format!("rank{other}:pid=")), "{value}");
        let started = std::time::Instant::now();
        let missing = client.get(other, "no-such-key");
        assert!(
            matches!(&missing, Err(LaunchError::KeyNotFound { key }) if key.contains("no-such-key")),
            "{missing:?}"
        );
        assert!(started.elapsed() < PATIENCE, "{:?}", started.elapsed());
        assert!(client.get(2, "addr-0").is_err());
        assert!(matches!(client.put("", "x"), Err(LaunchError::EmptyKey)));
        client.barrier().unwrap();
        eprintln!(
            "child {rank}/{size} (namespace {}) read {value}",
            client.namespace()
        );
        client.finalize().unwrap();
        return;
    }
    let out = open_mpi(
        &["-n", "2"],
        "launch::tests::real_open_mpi",
        (PMIX_CHILD, "1"),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}\n{stdout}\n{stderr}", out.status);
    assert_eq!(stdout.matches("1 passed").count(), 2, "{stdout}\n{stderr}");
}

/// The mesh test's processes under `mpirun.openmpi -n 4`: bootstrap,
/// allgather and the mesh over PMIx.
#[cfg(feature = "pmix")]
#[test]
#[ignore = "needs Open MPI's mpirun (apt-get install openmpi-bin)"]
fn mesh_across_processes_of_open_mpi() {
    let out = open_mpi(&["-n", "4"], "launch::tests::mesh_child", (MESH_CHILD, "1"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}\n{stdout}\n{stderr}", out.status);
    assert_eq!(stdout.matches("1 passed").count(), 4, "{stdout}\n{stderr}");
    assert_eq!(
        stderr
            .matches("(Open MPI's mpirun), blocks [2, 2, 2, 2], 3 peers connected")
            .count(),
        4,
        "{stderr}"
    );
}

/// `MYRIAD_HOST`: one name for every process, or one per process; a list
/// of the wrong length or an empty name is a configuration error.
#[test]
fn host_name_override() {
    let with =
        |value: &'static str| move |name: &str| (name == "MYRIAD_HOST").then(|| value.to_string());
    assert_eq!(super::host_name(&with("node7"), 2, 4).unwrap(), "node7");
    let list = with("a, a,b,b");
    let names: Vec<String> = (0..4)
        .map(|p| super::host_name(&list, p, 4).unwrap())
        .collect();
    assert_eq!(names, ["a", "a", "b", "b"]);
    let err = super::host_name(&with("a,b,c"), 0, 4)
        .unwrap_err()
        .to_string();
    assert!(err.contains("3 hosts for a job of 4 processes"), "{err}");
    let err = super::host_name(&with("a,,b,b"), 1, 4)
        .unwrap_err()
        .to_string();
    assert!(err.contains("empty host name"), "{err}");
    // Without the variable: the machine's name.
    let none = |_: &str| None;
    assert_eq!(
        super::host_name(&none, 0, 2).unwrap(),
        crate::environment::processor_name().unwrap()
    );
}
