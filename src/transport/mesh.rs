//! The connection mesh: one TCP connection per pair of the job's
//! processes, authenticated, before any message moves.
//!
//! ## Protocol (what [`Mesh::establish`] does in every process)
//!
//! 1. Bind a listener on this process's address (`addr.rs`: an override
//!    variable, else the first non-loopback IPv4, else loopback), port
//!    chosen by the kernel.
//! 2. Publish `ip:port` through `exchange` (the bootstrap session's
//!    allgather): every process learns every address.
//! 3. Connect to every lower-numbered process, in order, and send a
//!    [`Hello`]; wait for its reply.
//! 4. Accept until every higher-numbered process is in.
//!
//! Step 3 of process `p` waits only for processes below `p`, whose own
//! step 3 waits only for processes below them, so the order cannot
//! deadlock: process 0 accepts at once, then 1 is done connecting, and so
//! on. A connection waits in the listener's backlog until its acceptor
//! reaches step 4.
//!
//! ## Handshake
//!
//! The connector sends [`HELLO_LEN`] bytes: the magic `MYRIAD\0M`, the
//! wire-format version, the build id, the job secret, its process index
//! and the index it means to reach (little-endian). The acceptor checks
//! them in that order and answers with the same layout, its status first
//! (0: accepted; else why not) and, only when it accepts, the secret: both
//! sides prove they belong to the job. A connection that fails a check
//! (not myriad's, silent or cut short for [`HELLO_WAIT`], another build, a
//! wrong secret, a process index that is not expected or already
//! connected) is answered with its reason where it spoke the protocol,
//! closed, logged on standard error and counted in [`Mesh::refused`]; the
//! acceptor keeps waiting for its peers, so a stray connection never
//! disturbs the job. A peer that does not connect before the deadline
//! fails the mesh with an error naming it.
//!
//! The secret travels in the clear: it keeps out stray and mistaken
//! connections (another job, a port scanner, a rebuilt binary), not an
//! attacker who can read the network, as with MPICH and Open MPI.
//!
//! The streams are handed over blocking, with `TCP_NODELAY`, and no
//! timeouts; the transport makes them what it needs.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use crate::error::{Error, LaunchError};

/// How long establishing the mesh may take in all, by default.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// How long an accepted connection may take to send its hello.
pub(crate) const HELLO_WAIT: Duration = Duration::from_secs(5);

/// The first bytes of every hello and reply.
const MAGIC: [u8; 8] = *b"MYRIAD\0M";

/// Bytes of a hello and of a reply.
pub(crate) const HELLO_LEN: usize = 8 + 4 + 8 + 16 + 4 + 4;

/// Why an acceptor refused a connection (a reply's status).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
enum Status {
    Accepted = 0,
    DifferentBuild = 1,
    WrongSecret = 2,
    UnexpectedProcess = 3,
}

impl Status {
    fn from_u32(v: u32) -> Option<Status> {
        [
            Status::Accepted,
            Status::DifferentBuild,
            Status::WrongSecret,
            Status::UnexpectedProcess,
        ]
        .into_iter()
        .find(|s| *s as u32 == v)
    }

    fn reason(self) -> &'static str {
        match self {
            Status::Accepted => "accepted",
            Status::DifferentBuild => "different builds (or wire formats) of the program",
            Status::WrongSecret => "a wrong job secret (a process of another job?)",
            Status::UnexpectedProcess => "a process index that is not expected",
        }
    }
}

/// A hello (connector to acceptor) or, with `word` the status, a reply.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Hello {
    /// The wire-format version.
    version: u32,
    build: u64,
    secret: [u8; 16],
    /// The sender's process index.
    from: u32,
    /// In a hello: the process meant; in a reply: the status.
    word: u32,
}

impl Hello {
    fn encode(&self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        b[..8].copy_from_slice(&MAGIC);
        b[8..12].copy_from_slice(&self.version.to_le_bytes());
        b[12..20].copy_from_slice(&self.build.to_le_bytes());
        b[20..36].copy_from_slice(&self.secret);
        b[36..40].copy_from_slice(&self.from.to_le_bytes());
        b[40..44].copy_from_slice(&self.word.to_le_bytes());
        b
    }

    /// `None` if the bytes do not start with the magic.
    fn decode(b: &[u8; HELLO_LEN]) -> Option<Hello> {
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        (b[..8] == MAGIC).then(|| Hello {
            version: u32_at(8),
            build: u64::from_le_bytes(b[12..20].try_into().expect("8 bytes")),
            secret: b[20..36].try_into().expect("16 bytes"),
            from: u32_at(36),
            word: u32_at(40),
        })
    }
}

/// Compares secrets in time independent of where they differ.
fn same_secret(a: &[u8; 16], b: &[u8; 16]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// One authenticated connection to every other process of the job.
#[derive(Debug)]
#[allow(dead_code)] // The transport (issue 9) takes the streams over.
pub(crate) struct Mesh {
    /// This process's index.
    pub(crate) this: u32,
    /// The connection to each process, by index (`None` for this one):
    /// blocking, `TCP_NODELAY`, no timeouts.
    pub(crate) streams: Vec<Option<TcpStream>>,
    /// The connections refused while waiting for the peers, each with its
    /// reason (also logged on standard error).
    pub(crate) refused: Vec<String>,
}

impl Mesh {
    /// Connects this process (`this` of `processes`) with every other:
    /// listens on `ip`, publishes its address through `exchange` (an
    /// allgather: called once, with this process's `ip:port`, it returns
    /// every process's, by index), connects to the lower processes and
    /// accepts the higher ones, all within `timeout`.
    ///
    /// # Errors
    ///
    /// [`LaunchError::Mesh`] naming the peer: an address that does not
    /// parse, a peer that refused this process (another build, another
    /// secret) or cannot be reached, peers that did not connect in time.
    /// `exchange`'s own errors are passed on.
    pub(crate) fn establish(
        this: u32,
        processes: u32,
        credentials: &Credentials,
        ip: IpAddr,
        exchange: &mut dyn FnMut(&str) -> Result<Vec<String>, Error>,
        timeout: Duration,
    ) -> Result<Mesh, Error> {
        let fail = |problem: String| {
            Error::Launch(LaunchError::Mesh {
                process: this,
                problem,
            })
        };
        let deadline = Instant::now() + timeout;
        let listener =
            TcpListener::bind((ip, 0)).map_err(|e| fail(format!("cannot listen on {ip}: {e}")))?;
        let here = listener
            .local_addr()
            .map_err(|e| fail(format!("the listener's address: {e}")))?;
        let addresses = exchange(&here.to_string())?;
        if addresses.len() != processes as usize {
            return Err(fail(format!(
                "the address exchange gave {} addresses for {processes} processes",
                addresses.len()
            )));
        }
        let mut streams: Vec<Option<TcpStream>> = (0..processes).map(|_| None).collect();
        for peer in 0..this {
            let text = &addresses[peer as usize];
            let addr: SocketAddr = text.parse().map_err(|_| {
                fail(format!(
                    "process {peer} published {text:?}, which is not ip:port"
                ))
            })?;
            let stream = connect(this, peer, addr, credentials, deadline).map_err(|problem| {
                fail(format!("connecting to process {peer} at {addr}: {problem}"))
            })?;
            streams[peer as usize] = Some(stream);
        }
        let refused = accept(this, &listener, credentials, &mut streams, deadline).map_err(fail)?;
        Ok(Mesh {
            this,
            streams,
            refused,
        })
    }
}

/// The time left until `deadline`, or an error saying it passed.
fn left(deadline: Instant) -> Result<Duration, String> {
    let now = Instant::now();
    if now >= deadline {
        return Err("the time to set up the mesh ran out".to_string());
    }
    Ok(deadline - now)
}

/// Connects to `peer` and runs the connector's side of the handshake.
fn connect(
    this: u32,
    peer: u32,
    addr: SocketAddr,
    credentials: &Credentials,
    deadline: Instant,
) -> Result<TcpStream, String> {
    let mut stream =
        TcpStream::connect_timeout(&addr, left(deadline)?).map_err(|e| e.to_string())?;
    let hello = Hello {
        version: WIRE_VERSION,
        build: credentials.build,
        secret: credentials.secret,
        from: this,
        word: peer,
    };
    stream
        .write_all(&hello.encode())
        .map_err(|e| format!("sending the hello: {e}"))?;
    stream
        .set_read_timeout(Some(left(deadline)?))
        .map_err(|e| e.to_string())?;
    let mut reply = [0u8; HELLO_LEN];
    stream.read_exact(&mut reply).map_err(|e| match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            "no reply to the hello in time (is the process alive and in this job?)".to_string()
        }
        std::io::ErrorKind::UnexpectedEof => {
            "it closed the connection without a reply (not a process of this job?)".to_string()
        }
        _ => format!("reading the reply: {e}"),
    })?;
    let reply = Hello::decode(&reply).ok_or("its reply is not myriad's")?;
    match Status::from_u32(reply.word) {
        Some(Status::Accepted) => {}
        Some(status) => return Err(format!("it refused this process: {}", status.reason())),
        None => return Err(format!("its reply has the unknown status {}", reply.word)),
    }
    if reply.version != WIRE_VERSION || reply.build != credentials.build {
        return Err(Status::DifferentBuild.reason().to_string());
    }
    if !same_secret(&reply.secret, &credentials.secret) || reply.from != peer {
        return Err("it does not prove it is that process of this job".to_string());
    }
    finish(stream)
}

/// Makes an authenticated stream what the transport expects.
fn finish(stream: TcpStream) -> Result<TcpStream, String> {
    stream
        .set_read_timeout(None)
        .and_then(|()| stream.set_nodelay(true))
        .map_err(|e| e.to_string())?;
    Ok(stream)
}

/// Accepts until every process above `this` is in `streams`; returns the
/// reasons of the connections refused on the way.
fn accept(
    this: u32,
    listener: &TcpListener,
    credentials: &Credentials,
    streams: &mut [Option<TcpStream>],
    deadline: Instant,
) -> Result<Vec<String>, String> {
    let processes = streams.len() as u32;
    let mut refused = Vec::new();
    let missing = |streams: &[Option<TcpStream>]| -> Vec<u32> {
        (this + 1..processes)
            .filter(|&p| streams[p as usize].is_none())
            .collect()
    };
    while !missing(streams).is_empty() {
        let waited = wait_readable(listener, deadline);
        if !waited {
            let names: Vec<String> = missing(streams).iter().map(u32::to_string).collect();
            return Err(format!(
                "no connection from process{} {} in time{}",
                if names.len() > 1 { "es" } else { "" },
                names.join(", "),
                if refused.is_empty() {
                    String::new()
                } else {
                    format!(
                        " ({} connection(s) refused: {})",
                        refused.len(),
                        refused.join("; ")
                    )
                }
            ));
        }
        let (mut stream, peer) = match listener.accept() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("accepting: {e}")),
        };
        match handshake(this, &mut stream, credentials, streams) {
            Ok(from) => {
                streams[from as usize] = Some(finish(stream)?);
            }
            Err(reason) => {
                say!("[myriad] process {this} refused a connection from {peer}: {reason}");
                refused.push(format!("{peer}: {reason}"));
            }
        }
    }
    Ok(refused)
}

/// Waits until the listener has a connection to accept or `deadline`
/// passes (`false`).
fn wait_readable(listener: &TcpListener, deadline: Instant) -> bool {
    loop {
        let Ok(wait) = left(deadline) else {
            return false;
        };
        let mut fd = libc::pollfd {
            fd: listener.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = wait.as_millis().clamp(1, i32::MAX as u128) as i32;
        // SAFETY: `fd` is one valid `pollfd`, and the count says one.
        let n = unsafe { libc::poll(&mut fd, 1, ms) };
        if n > 0 {
            return true;
        }
        // 0: timed out (the loop checks the deadline); -1: EINTR, retry.
    }
}

/// The acceptor's side of the handshake on `stream`: the connector's
/// process index, or why it is refused (after replying where it spoke the
/// protocol).
fn handshake(
    this: u32,
    stream: &mut TcpStream,
    credentials: &Credentials,
    streams: &[Option<TcpStream>],
) -> Result<u32, String> {
    let mut bytes = [0u8; HELLO_LEN];
    stream
        .set_read_timeout(Some(HELLO_WAIT))
        .map_err(|e| e.to_string())?;
    stream.read_exact(&mut bytes).map_err(|e| match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            format!("no hello within {} s", HELLO_WAIT.as_secs())
        }
        std::io::ErrorKind::UnexpectedEof => {
            "the connection ended before a whole hello".to_string()
        }
        _ => format!("reading the hello: {e}"),
    })?;
    let hello = Hello::decode(&bytes).ok_or("not a myriad connection (garbage hello)")?;
    let processes = streams.len() as u32;
    let status = if hello.version != WIRE_VERSION || hello.build != credentials.build {
        Status::DifferentBuild
    } else if !same_secret(&hello.secret, &credentials.secret) {
        Status::WrongSecret
    } else if hello.word != this
        || hello.from <= this
        || hello.from >= processes
        || streams[hello.from as usize].is_some()
    {
        Status::UnexpectedProcess
    } else {
        Status::Accepted
    };
    let reply = Hello {
        version: WIRE_VERSION,
        build: credentials.build,
        // Only a peer that proved itself learns that this one knows it.
        secret: if status == Status::Accepted {
            credentials.secret
        } else {
            [0; 16]
        },
        from: this,
        word: status as u32,
    };
    let sent = stream.write_all(&reply.encode());
    match status {
        Status::Accepted => {
            sent.map_err(|e| format!("replying to process {}: {e}", hello.from))?;
            Ok(hello.from)
        }
        Status::DifferentBuild => Err(format!(
            "different builds: it runs build {:016x} with wire format {}, this process build \
             {:016x} with wire format {WIRE_VERSION} (process {} of another build?)",
            hello.build, hello.version, credentials.build, hello.from
        )),
        Status::WrongSecret => Err(format!(
            "a wrong job secret (it says it is process {}: of another job?)",
            hello.from
        )),
        Status::UnexpectedProcess => Err(format!(
            "it says it is process {} calling process {}, which this process {this} of \
             {processes} does not expect",
            hello.from, hello.word
        )),
    }
}

/// The version of the bytes processes exchange over TCP: part of the
/// handshake and of the build id, so processes that frame messages
/// differently never join one job.
pub(crate) const WIRE_VERSION: u32 = 2;

/// What proves that a connection comes from a process of this job.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Credentials {
    /// Identifies the program's build (`launch::build_id`): processes of
    /// different builds are refused.
    pub(crate) build: u64,
    /// The job's secret, made by process 0 and shared through the
    /// launcher's key-value space.
    pub(crate) secret: [u8; 16],
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the secret.
        f.debug_struct("Credentials")
            .field("build", &format_args!("{:016x}", self.build))
            .finish_non_exhaustive()
    }
}

/// The address this process listens on (`addr.rs`): from the environment
/// and the machine's interfaces.
pub(crate) fn listen_ip() -> Result<IpAddr, Error> {
    super::addr::listen_ip(&|name| std::env::var(name).ok(), &super::addr::interfaces)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Barrier, Mutex};

    /// Long enough never to fire in a passing test.
    const PATIENCE: Duration = Duration::from_secs(20);

    fn credentials() -> Credentials {
        Credentials {
            build: 0x1234_5678_9abc_def0,
            secret: *b"sixteen byte key",
        }
    }

    /// An allgather among `n` threads through a shared table.
    #[derive(Clone)]
    struct Table {
        values: Arc<Mutex<Vec<String>>>,
        barrier: Arc<Barrier>,
    }

    impl Table {
        fn new(n: usize) -> Table {
            Table {
                values: Arc::new(Mutex::new(vec![String::new(); n])),
                barrier: Arc::new(Barrier::new(n)),
            }
        }

        fn allgather(&self, p: u32, value: &str) -> Vec<String> {
            self.values.lock().unwrap()[p as usize] = value.to_string();
            self.barrier.wait();
            self.values.lock().unwrap().clone()
        }
    }

    type Before = Arc<dyn Fn(u32, &[String]) + Send + Sync>;

    /// Runs `n` processes' `establish` on threads; process `p` uses
    /// `creds(p)`, and after the exchange `before(p, addresses)` runs (a
    /// test's stray connections). Processes in `absent` publish an address
    /// nobody accepts on and never establish.
    fn meshes(
        n: u32,
        creds: impl Fn(u32) -> Credentials,
        absent: &[u32],
        before: Before,
        timeout: Duration,
    ) -> Vec<Option<Result<Mesh, Error>>> {
        let table = Table::new(n as usize);
        let threads: Vec<_> = (0..n)
            .map(|p| {
                let table = table.clone();
                let creds = creds(p);
                let absent = absent.contains(&p);
                let before = Arc::clone(&before);
                std::thread::spawn(move || {
                    if absent {
                        // Listening, never accepting: connections to it wait.
                        // Kept until every thread is joined.
                        let l = TcpListener::bind("127.0.0.1:0").unwrap();
                        table.allgather(p, &l.local_addr().unwrap().to_string());
                        return (None, Some(l));
                    }
                    let mut exchange = |addr: &str| {
                        let all = table.allgather(p, addr);
                        before(p, &all);
                        Ok(all)
                    };
                    let mesh = Mesh::establish(
                        p,
                        n,
                        &creds,
                        IpAddr::from([127, 0, 0, 1]),
                        &mut exchange,
                        timeout,
                    );
                    (Some(mesh), None)
                })
            })
            .collect();
        let (results, _listeners): (Vec<_>, Vec<_>) =
            threads.into_iter().map(|t| t.join().unwrap()).unzip();
        results
    }

    fn nothing() -> Before {
        Arc::new(|_, _| {})
    }

    #[test]
    fn every_pair_of_processes_gets_one_connection() {
        let n = 4;
        let results = meshes(n, |_| credentials(), &[], nothing(), PATIENCE);
        let mut all: Vec<Mesh> = results.into_iter().map(|r| r.unwrap().unwrap()).collect();
        // Each process sends its index to every peer, then reads one byte
        // from each: the byte names the process at the other end.
        for mesh in &mut all {
            assert_eq!(mesh.streams.len(), n as usize);
            assert!(mesh.streams[mesh.this as usize].is_none());
            assert!(mesh.refused.is_empty());
            for s in mesh.streams.iter_mut().flatten() {
                assert!(s.nodelay().unwrap());
                s.write_all(&[mesh.this as u8]).unwrap();
            }
        }
        for mesh in &mut all {
            for (p, s) in mesh.streams.iter_mut().enumerate() {
                if let Some(s) = s {
                    let mut b = [0u8];
                    s.set_read_timeout(Some(PATIENCE)).unwrap();
                    s.read_exact(&mut b).unwrap();
                    assert_eq!(b[0] as usize, p, "process {}'s stream {p}", mesh.this);
                }
            }
        }
    }

    /// Connects to `addr` and sends `bytes`; returns what comes back
    /// until the acceptor closes.
    fn stray(addr: &str, bytes: &[u8]) -> Vec<u8> {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(PATIENCE)).unwrap();
        let _ = s.write_all(bytes);
        let _ = s.shutdown(std::net::Shutdown::Write);
        let mut back = Vec::new();
        let _ = s.read_to_end(&mut back);
        back
    }

    #[test]
    fn stray_and_wrong_connections_are_refused_and_the_job_goes_on() {
        let seen: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
        let record = Arc::clone(&seen);
        let before: Before = Arc::new(move |p, addrs| {
            if p != 1 {
                return;
            }
            // Before process 1 connects to process 0: a stray, garbage, a
            // wrong secret, another build, a process index never expected.
            let creds = credentials();
            let hello = |secret, build, from, to| {
                Hello {
                    version: WIRE_VERSION,
                    build,
                    secret,
                    from,
                    word: to,
                }
                .encode()
            };
            let mut replies = record.lock().unwrap();
            replies.push(stray(&addrs[0], b""));
            replies.push(stray(
                &addrs[0],
                b"GET / HTTP/1.0\r\n\r\n.............................",
            ));
            replies.push(stray(
                &addrs[0],
                &hello(*b"not the secret!!", creds.build, 1, 0),
            ));
            replies.push(stray(&addrs[0], &hello(creds.secret, 99, 1, 0)));
            replies.push(stray(&addrs[0], &hello(creds.secret, creds.build, 7, 0)));
        });
        let results = meshes(2, |_| credentials(), &[], before, PATIENCE);
        let zero = results[0].as_ref().unwrap().as_ref().unwrap();
        assert!(results[1].as_ref().unwrap().is_ok());
        let reasons = &zero.refused;
        assert_eq!(reasons.len(), 5, "{reasons:?}");
        assert!(
            reasons[0].contains("ended before a whole hello"),
            "{reasons:?}"
        );
        assert!(
            reasons[1].contains("not a myriad connection"),
            "{reasons:?}"
        );
        assert!(reasons[2].contains("wrong job secret"), "{reasons:?}");
        assert!(reasons[3].contains("different builds"), "{reasons:?}");
        assert!(reasons[4].contains("process 7"), "{reasons:?}");
        // Replies: none to garbage; a status, and never the secret, to the others.
        let replies = seen.lock().unwrap();
        assert!(replies[0].is_empty() && replies[1].is_empty());
        for (reply, status) in replies[2..].iter().zip([2, 1, 3]) {
            let reply = Hello::decode(reply.as_slice().try_into().unwrap()).unwrap();
            assert_eq!(reply.word, status);
            assert_eq!(reply.secret, [0; 16]);
        }
    }

    #[test]
    fn processes_of_different_builds_are_refused() {
        let results = meshes(
            2,
            |p| Credentials {
                build: credentials().build + u64::from(p),
                ..credentials()
            },
            &[],
            nothing(),
            Duration::from_secs(2),
        );
        let one = results[1]
            .as_ref()
            .unwrap()
            .as_ref()
            .unwrap_err()
            .to_string();
        assert!(
            one.contains("process 1 could not join")
                && one.contains("connecting to process 0")
                && one.contains("refused this process: different builds"),
            "{one}"
        );
        // Process 0 waits for a process 1 of its own build, in vain.
        let zero = results[0]
            .as_ref()
            .unwrap()
            .as_ref()
            .unwrap_err()
            .to_string();
        assert!(
            zero.contains("no connection from process 1 in time")
                && zero.contains("different builds"),
            "{zero}"
        );
    }

    #[test]
    fn a_wrong_secret_is_refused() {
        let results = meshes(
            3,
            |p| Credentials {
                secret: if p == 2 {
                    [7; 16]
                } else {
                    credentials().secret
                },
                ..credentials()
            },
            &[],
            nothing(),
            Duration::from_secs(2),
        );
        assert!(results[0].as_ref().unwrap().is_err());
        let two = results[2]
            .as_ref()
            .unwrap()
            .as_ref()
            .unwrap_err()
            .to_string();
        assert!(two.contains("wrong job secret"), "{two}");
        let one = results[1]
            .as_ref()
            .unwrap()
            .as_ref()
            .unwrap_err()
            .to_string();
        assert!(one.contains("no connection from process 2"), "{one}");
    }

    #[test]
    fn a_peer_that_never_shows_up_is_named() {
        let results = meshes(
            4,
            |_| credentials(),
            &[2],
            nothing(),
            Duration::from_secs(1),
        );
        for p in [0, 1] {
            let e = results[p]
                .as_ref()
                .unwrap()
                .as_ref()
                .unwrap_err()
                .to_string();
            assert!(e.contains("no connection from process 2 in time"), "{e}");
        }
        // Process 3 connects to 2 first; 2 never replies.
        let e = results[3]
            .as_ref()
            .unwrap()
            .as_ref()
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("connecting to process 2") && e.contains("no reply"),
            "{e}"
        );
    }

    #[test]
    fn bad_exchanges_are_errors() {
        let mut short = |_: &str| Ok(vec!["127.0.0.1:1".to_string()]);
        let e = Mesh::establish(
            1,
            3,
            &credentials(),
            IpAddr::from([127, 0, 0, 1]),
            &mut short,
            PATIENCE,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("gave 1 addresses for 3 processes"), "{e}");
        let mut garbled = |a: &str| Ok(vec!["nowhere".to_string(), a.to_string()]);
        let e = Mesh::establish(
            1,
            2,
            &credentials(),
            IpAddr::from([127, 0, 0, 1]),
            &mut garbled,
            PATIENCE,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("process 0 published \"nowhere\""), "{e}");
        let mut failing = |_: &str| Err(Error::config("exchange down"));
        let e = Mesh::establish(
            0,
            2,
            &credentials(),
            IpAddr::from([127, 0, 0, 1]),
            &mut failing,
            PATIENCE,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("exchange down"), "{e}");
    }

    #[test]
    fn hellos_round_trip_and_garbage_does_not_decode() {
        let h = Hello {
            version: 3,
            build: 5,
            secret: [9; 16],
            from: 2,
            word: 1,
        };
        assert!(Hello::decode(&h.encode()) == Some(h));
        let mut bad = h.encode();
        bad[0] = b'X';
        assert!(Hello::decode(&bad).is_none());
        assert!(same_secret(&[1; 16], &[1; 16]) && !same_secret(&[1; 16], &[2; 16]));
        assert!(!format!("{:?}", credentials()).contains("sixteen"));
    }
}
