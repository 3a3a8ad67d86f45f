//! The PMI client: one connection to the launcher's process manager, the
//! start-up exchange, and the operations a transport needs (put, fence,
//! get, barrier, finalize, abort).
//!
//! ## Start-up, by connection (what [`Client::init`] sends)
//!
//! | connection | first exchange | then |
//! |---|---|---|
//! | PMI-1, `PMI_FD` (Hydra `mpiexec`) | `init pmi_version=1 pmi_subversion=1` → `response_to_init` | `get_maxes`, `get_appnum`, `get_my_kvsname`; rank and size from `PMI_RANK`/`PMI_SIZE` |
//! | PMI-1, `PMI_PORT` (Hydra `-pmi-port`) | connect over TCP, `initack pmiid=ID` → `initack`, then `set size=`, `set rank=`, `set debug=` | as above (rank and size from the `set` lines) |
//! | PMI-2, `PMI_FD` (`srun --mpi=pmi2`) | the PMI-1 line `init pmi_version=2 pmi_subversion=0` → `response_to_init` | framed: `fullinit` (rank, size, appnum), `job-getid` |
//!
//! Every request gets one reply (`abort` none); a reply is a map of fields
//! ([`Reply`]) whose `cmd` must be the expected one and whose `rc`, where
//! present, must be 0. The key and value limits are the server's `maxes`
//! under PMI-1 (which count the C string's NUL: `keylen_max=64` allows 63
//! bytes) and PMI-2's constants (64 and 1024, likewise) otherwise; a longer
//! key or value is refused before it is sent (Hydra would silently cut it).
//!
//! ## Waiting
//!
//! A reply that the server can give at once is awaited for at most the
//! client's timeout ([`DEFAULT_TIMEOUT`]): a silent server is an error, not a
//! hang. A fence or barrier waits for the other processes, which may take
//! as long as they compute, so it waits without a timeout; a server that
//! goes away closes the connection, which ends the wait with an error.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use super::wire::{self, Reply, MAX_REPLY, PMI2_PREFIX};
use crate::error::{shorten, LaunchError};

/// How long a reply the server can give at once may take.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// PMI-2's key and value limits (`PMI2_MAX_KEYLEN`, `PMI2_MAX_VALLEN`),
/// which count the NUL, as PMI-1's `maxes` do.
const PMI2_KEYLEN_MAX: usize = 64;
const PMI2_VALLEN_MAX: usize = 1024;

/// The protocol spoken on the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Version {
    /// Line protocol (Hydra).
    Pmi1,
    /// Framed protocol (Slurm `--mpi=pmi2`; Hydra also speaks it).
    Pmi2,
}

/// The connection to the PMI server.
#[derive(Debug)]
pub(crate) enum Stream {
    /// An inherited socket (`PMI_FD`), or a socket pair in tests.
    Unix(UnixStream),
    /// A TCP connection (`PMI_PORT`).
    Tcp(TcpStream),
}

impl Stream {
    fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.set_read_timeout(timeout),
            Stream::Tcp(s) => s.set_read_timeout(timeout),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.read(buf),
            Stream::Tcp(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.write(buf),
            Stream::Tcp(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.flush(),
            Stream::Tcp(s) => s.flush(),
        }
    }
}

/// How the process starts its exchange: what the environment told it
/// (`launch::env`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Start {
    /// The protocol.
    pub(crate) version: Version,
    /// `PMI_RANK`, where the launcher sets it.
    pub(crate) rank: Option<u32>,
    /// `PMI_SIZE`, where the launcher sets it.
    pub(crate) size: Option<u32>,
    /// `PMI_ID` of `PMI_PORT` mode: sent in `initack`.
    pub(crate) pmiid: Option<String>,
    /// `PMI_JOBID` (Slurm): sent in PMI-2's `fullinit`.
    pub(crate) jobid: Option<String>,
}

/// Whether a reply comes at once or after the other processes arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wait {
    /// The server can reply at once: bounded by the client's timeout.
    Reply,
    /// A fence or barrier: no timeout.
    Others,
}

/// A PMI client after a successful start-up.
#[derive(Debug)]
pub(crate) struct Client {
    conn: BufReader<Stream>,
    version: Version,
    timeout: Duration,
    rank: u32,
    size: u32,
    appnum: i64,
    kvsname: String,
    /// Largest key and value, in bytes (NUL excluded), and where the
    /// limits come from.
    key_max: usize,
    value_max: usize,
    limits: &'static str,
}

impl Client {
    /// Runs the start-up exchange of `start.version` on `stream`, waiting at
    /// most `timeout` for each reply.
    pub(crate) fn init(
        stream: Stream,
        start: &Start,
        timeout: Duration,
    ) -> Result<Client, LaunchError> {
        let mut client = Client {
            conn: BufReader::new(stream),
            version: start.version,
            timeout,
            rank: 0,
            size: 0,
            appnum: 0,
            kvsname: String::new(),
            key_max: PMI2_KEYLEN_MAX - 1,
            value_max: PMI2_VALLEN_MAX - 1,
            limits: "PMI-2's limits",
        };
        match start.version {
            Version::Pmi1 => client.init_pmi1(start)?,
            Version::Pmi2 => client.init_pmi2(start)?,
        }
        Ok(client)
    }

    fn init_pmi1(&mut self, start: &Start) -> Result<(), LaunchError> {
        let (mut rank, mut size) = (start.rank, start.size);
        if let Some(id) = &start.pmiid {
            let r = self.exchange_pmi1("initack", &[("pmiid", id)], Wait::Reply)?;
            r.expect_cmd("initack", "initack")?;
            r.check_rc("initack")?;
            // Then the server tells size, rank and debug, one `set` each.
            for _ in 0..3 {
                let r = self.read_pmi1("initack", Wait::Reply)?;
                r.expect_cmd("initack", "set")?;
                if r.get("size").is_some() {
                    size = Some(count(&r, "initack", "size")?);
                }
                if r.get("rank").is_some() {
                    rank = Some(count(&r, "initack", "rank")?);
                }
            }
        }
        let r = self.exchange_pmi1(
            "init",
            &[("pmi_version", "1"), ("pmi_subversion", "1")],
            Wait::Reply,
        )?;
        r.expect_cmd("init", "response_to_init")?;
        r.check_rc("init")?;
        if r.int("init", "pmi_version")? != 1 {
            return Err(r.malformed("init", "the server does not speak PMI version 1"));
        }
        let r = self.exchange_pmi1("get_maxes", &[], Wait::Reply)?;
        r.expect_cmd("get_maxes", "maxes")?;
        r.check_rc("get_maxes")?;
        self.key_max = limit(&r, "get_maxes", "keylen_max")?;
        self.value_max = limit(&r, "get_maxes", "vallen_max")?;
        self.limits = "the server's maxes";
        let r = self.exchange_pmi1("get_appnum", &[], Wait::Reply)?;
        r.expect_cmd("get_appnum", "appnum")?;
        r.check_rc("get_appnum")?;
        self.appnum = r.int("get_appnum", "appnum")?;
        let r = self.exchange_pmi1("get_my_kvsname", &[], Wait::Reply)?;
        r.expect_cmd("get_my_kvsname", "my_kvsname")?;
        r.check_rc("get_my_kvsname")?;
        self.kvsname = nonempty(&r, "get_my_kvsname", "kvsname")?;
        let (Some(rank), Some(size)) = (rank, size) else {
            return Err(LaunchError::Malformed {
                command: "init".to_string(),
                problem: "the server never said this process's rank and size".to_string(),
                reply: String::new(),
            });
        };
        self.set_rank_size("init", rank, size)
    }

    fn init_pmi2(&mut self, start: &Start) -> Result<(), LaunchError> {
        // The first line is PMI-1's: it chooses the version.
        let r = self.exchange_pmi1(
            "init",
            &[("pmi_version", "2"), ("pmi_subversion", "0")],
            Wait::Reply,
        )?;
        r.expect_cmd("init", "response_to_init")?;
        r.check_rc("init")?;
        if r.int("init", "pmi_version")? != 2 {
            return Err(r.malformed("init", "the server does not speak PMI version 2"));
        }
        let rank = start.rank.ok_or_else(|| LaunchError::Malformed {
            command: "fullinit".to_string(),
            problem: "PMI-2 needs this process's rank (PMI_RANK) to start".to_string(),
            reply: String::new(),
        })?;
        let rank_text = rank.to_string();
        let mut fields = vec![("pmirank", rank_text.as_str()), ("threaded", "FALSE")];
        if let Some(jobid) = &start.jobid {
            wire::check_text("value", jobid, false)?;
            fields.push(("pmijobid", jobid));
        }
        let r = self.exchange_pmi2("fullinit", &fields, Wait::Reply)?;
        r.expect_cmd("fullinit", "fullinit-response")?;
        r.check_rc("fullinit")?;
        let size = count(&r, "fullinit", "size")?;
        let given = count(&r, "fullinit", "rank")?;
        if given != rank {
            return Err(r.malformed(
                "fullinit",
                format!("the server says rank {given}, PMI_RANK says {rank}"),
            ));
        }
        self.set_rank_size("fullinit", rank, size)?;
        self.appnum = r.int("fullinit", "appnum")?;
        let r = self.exchange_pmi2("job-getid", &[], Wait::Reply)?;
        r.expect_cmd("job-getid", "job-getid-response")?;
        r.check_rc("job-getid")?;
        self.kvsname = nonempty(&r, "job-getid", "jobid")?;
        Ok(())
    }

    fn set_rank_size(&mut self, command: &str, rank: u32, size: u32) -> Result<(), LaunchError> {
        if size == 0 || rank >= size {
            return Err(LaunchError::Malformed {
                command: command.to_string(),
                problem: format!("rank {rank} of {size} processes is not a rank"),
                reply: String::new(),
            });
        }
        (self.rank, self.size) = (rank, size);
        Ok(())
    }

    /// This process's index in the launcher's job.
    pub(crate) fn rank(&self) -> u32 {
        self.rank
    }

    /// The number of processes of the launcher's job.
    pub(crate) fn size(&self) -> u32 {
        self.size
    }
}

/// The operations the transport will use (issue 9); until it exists, the
/// tests are their only callers.
#[cfg_attr(not(test), allow(dead_code))]
impl Client {
    /// The application number (MPMD `mpiexec a : b`); `-1` under Slurm.
    pub(crate) fn appnum(&self) -> i64 {
        self.appnum
    }

    /// The key-value space's name (PMI-1 `kvsname`, PMI-2 `jobid`).
    pub(crate) fn kvsname(&self) -> &str {
        &self.kvsname
    }

    /// The protocol spoken.
    pub(crate) fn version(&self) -> Version {
        self.version
    }

    /// Largest key and value in bytes.
    pub(crate) fn limits(&self) -> (usize, usize) {
        (self.key_max, self.value_max)
    }

    /// Checks a key and value against the wire format and the limits.
    fn check_kv(&self, key: &str, value: Option<&str>) -> Result<(), LaunchError> {
        wire::check_text("key", key, true)?;
        let too_long = |what, len, max| LaunchError::TooLong {
            what,
            len,
            max,
            limit: format!("{} under {}", self.limits, self.version_name()),
        };
        if key.len() > self.key_max {
            return Err(too_long("key", key.len(), self.key_max));
        }
        if let Some(value) = value {
            wire::check_text("value", value, false)?;
            if value.len() > self.value_max {
                return Err(too_long("value", value.len(), self.value_max));
            }
        }
        Ok(())
    }

    fn version_name(&self) -> &'static str {
        match self.version {
            Version::Pmi1 => "PMI-1",
            Version::Pmi2 => "PMI-2",
        }
    }

    /// Publishes `key` = `value` in the job's key-value space; other
    /// processes see it after the next [`fence`](Self::fence).
    pub(crate) fn put(&mut self, key: &str, value: &str) -> Result<(), LaunchError> {
        self.check_kv(key, Some(value))?;
        let r = match self.version {
            Version::Pmi1 => {
                let kvs = self.kvsname.clone();
                let r = self.exchange_pmi1(
                    "put",
                    &[("kvsname", &kvs), ("key", key), ("value", value)],
                    Wait::Reply,
                )?;
                r.expect_cmd("put", "put_result")?;
                r
            }
            Version::Pmi2 => {
                let r =
                    self.exchange_pmi2("kvs-put", &[("key", key), ("value", value)], Wait::Reply)?;
                r.expect_cmd("kvs-put", "kvs-put-response")?;
                r
            }
        };
        r.check_rc("put")
    }

    /// Commits this process's puts and waits until every process of the
    /// job has (PMI-1 `barrier_in`/`barrier_out`, PMI-2 `kvs-fence`).
    pub(crate) fn fence(&mut self) -> Result<(), LaunchError> {
        let r = match self.version {
            Version::Pmi1 => {
                let r = self.exchange_pmi1("barrier_in", &[], Wait::Others)?;
                r.expect_cmd("barrier_in", "barrier_out")?;
                r
            }
            Version::Pmi2 => {
                let r = self.exchange_pmi2("kvs-fence", &[], Wait::Others)?;
                r.expect_cmd("kvs-fence", "kvs-fence-response")?;
                r
            }
        };
        r.check_rc("fence")
    }

    /// Waits until every process of the job has called it. PMI has no
    /// barrier without a commit, so this is [`fence`](Self::fence).
    pub(crate) fn barrier(&mut self) -> Result<(), LaunchError> {
        self.fence()
    }

    /// The value of `key` in the job's key-value space (put by any process
    /// before the last fence). A key that is not there is
    /// [`LaunchError::KeyNotFound`].
    pub(crate) fn get(&mut self, key: &str) -> Result<String, LaunchError> {
        self.check_kv(key, None)?;
        let kvs = self.kvsname.clone();
        match self.version {
            Version::Pmi1 => {
                let r =
                    self.exchange_pmi1("get", &[("kvsname", &kvs), ("key", key)], Wait::Reply)?;
                r.expect_cmd("get", "get_result")?;
                // Hydra answers a missing key with rc=-1, Slurm with rc=1,
                // neither with a code of its own: a refused get is "no value
                // for this key".
                match r.check_rc("get") {
                    Err(LaunchError::Refused { .. }) => {
                        return Err(LaunchError::KeyNotFound {
                            key: key.to_string(),
                        })
                    }
                    other => other?,
                }
                Ok(r.require("get", "value")?.to_string())
            }
            Version::Pmi2 => {
                let r = self.exchange_pmi2(
                    "kvs-get",
                    &[("jobid", &kvs), ("srcid", "-1"), ("key", key)],
                    Wait::Reply,
                )?;
                r.expect_cmd("kvs-get", "kvs-get-response")?;
                r.check_rc("kvs-get")?;
                match r.require("kvs-get", "found")? {
                    "TRUE" => Ok(r.require("kvs-get", "value")?.to_string()),
                    "FALSE" => Err(LaunchError::KeyNotFound {
                        key: key.to_string(),
                    }),
                    other => {
                        Err(r.malformed("kvs-get", format!("found={other:?} is not TRUE or FALSE")))
                    }
                }
            }
        }
    }

    /// Tells the launcher this process is done with PMI (a process that
    /// exits without it is a failed process to Hydra) and closes the
    /// connection.
    pub(crate) fn finalize(mut self) -> Result<(), LaunchError> {
        let r = match self.version {
            Version::Pmi1 => {
                let r = self.exchange_pmi1("finalize", &[], Wait::Reply)?;
                r.expect_cmd("finalize", "finalize_ack")?;
                r
            }
            Version::Pmi2 => {
                let r = self.exchange_pmi2("finalize", &[], Wait::Reply)?;
                r.expect_cmd("finalize", "finalize-response")?;
                r
            }
        };
        r.check_rc("finalize")
    }

    /// Asks the launcher to end the whole job with `exit_code` (`mpiexec`
    /// then returns it); `message` is sent with spaces and `;` replaced by
    /// `_`. The server does not reply.
    pub(crate) fn abort(mut self, exit_code: i32, message: &str) -> Result<(), LaunchError> {
        let message: String = message
            .chars()
            .take(512)
            .map(|c| {
                if c.is_whitespace() || c == ';' || c == '\0' {
                    '_'
                } else {
                    c
                }
            })
            .collect();
        let code = exit_code.to_string();
        let bytes = match self.version {
            Version::Pmi1 => {
                wire::pmi1_line("abort", &[("exitcode", &code), ("message", &message)]).into_bytes()
            }
            Version::Pmi2 => {
                wire::pmi2_frame("abort", &[("isworldabort", "TRUE"), ("msg", &message)])?
            }
        };
        self.send("abort", &bytes)
    }
}

impl Client {
    fn send(&mut self, command: &str, bytes: &[u8]) -> Result<(), LaunchError> {
        let stream = self.conn.get_mut();
        stream
            .write_all(bytes)
            .and_then(|()| stream.flush())
            .map_err(|e| io_error(command, &e))
    }

    fn set_wait(&mut self, command: &str, wait: Wait) -> Result<(), LaunchError> {
        let timeout = match wait {
            Wait::Reply => Some(self.timeout),
            Wait::Others => None,
        };
        self.conn
            .get_ref()
            .set_read_timeout(timeout)
            .map_err(|e| io_error(command, &e))
    }

    /// Sends a PMI-1 line and reads the reply line.
    fn exchange_pmi1(
        &mut self,
        command: &str,
        fields: &[(&str, &str)],
        wait: Wait,
    ) -> Result<Reply, LaunchError> {
        let line = wire::pmi1_line(command, fields);
        self.send(command, line.as_bytes())?;
        self.read_pmi1(command, wait)
    }

    /// Reads one PMI-1 line.
    fn read_pmi1(&mut self, command: &str, wait: Wait) -> Result<Reply, LaunchError> {
        self.set_wait(command, wait)?;
        let mut buf = Vec::new();
        let n = (&mut self.conn)
            .take(MAX_REPLY as u64 + 1)
            .read_until(b'\n', &mut buf)
            .map_err(|e| self.read_error(command, &e))?;
        if buf.last() != Some(&b'\n') {
            if n > MAX_REPLY {
                return Err(LaunchError::Malformed {
                    command: command.to_string(),
                    problem: format!("a line longer than {MAX_REPLY} bytes"),
                    reply: shorten(&String::from_utf8_lossy(&buf)),
                });
            }
            // End of stream, before or within the line.
            return Err(LaunchError::Closed {
                command: command.to_string(),
            });
        }
        buf.pop();
        let line = text(command, &buf)?;
        wire::parse_pmi1(command, line.trim_end_matches('\r'))
    }

    /// Sends a PMI-2 frame and reads the reply frame.
    fn exchange_pmi2(
        &mut self,
        command: &str,
        fields: &[(&str, &str)],
        wait: Wait,
    ) -> Result<Reply, LaunchError> {
        let frame = wire::pmi2_frame(command, fields)?;
        self.send(command, &frame)?;
        self.set_wait(command, wait)?;
        let mut prefix = [0u8; PMI2_PREFIX];
        self.conn
            .read_exact(&mut prefix)
            .map_err(|e| self.read_error(command, &e))?;
        let len = wire::parse_pmi2_len(command, &prefix)?;
        let mut payload = vec![0u8; len];
        self.conn
            .read_exact(&mut payload)
            .map_err(|e| self.read_error(command, &e))?;
        wire::parse_pmi2(command, text(command, &payload)?)
    }

    fn read_error(&self, command: &str, e: &io::Error) -> LaunchError {
        match e.kind() {
            io::ErrorKind::UnexpectedEof => LaunchError::Closed {
                command: command.to_string(),
            },
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => LaunchError::Timeout {
                command: command.to_string(),
                waited_ms: self.timeout.as_millis() as u64,
            },
            _ => io_error(command, e),
        }
    }
}

fn io_error(command: &str, e: &io::Error) -> LaunchError {
    LaunchError::Io {
        command: command.to_string(),
        reason: e.to_string(),
    }
}

/// `bytes` as UTF-8 (the protocol is ASCII).
fn text<'a>(command: &str, bytes: &'a [u8]) -> Result<&'a str, LaunchError> {
    std::str::from_utf8(bytes).map_err(|_| LaunchError::Malformed {
        command: command.to_string(),
        problem: "bytes that are not text".to_string(),
        reply: shorten(&String::from_utf8_lossy(bytes)),
    })
}

/// A field that must be a count that fits a `u32`.
fn count(r: &Reply, command: &str, key: &str) -> Result<u32, LaunchError> {
    let n = r.int(command, key)?;
    u32::try_from(n).map_err(|_| r.malformed(command, format!("{key}={n} is not a count")))
}

/// A `maxes` field: the limit including the NUL, at least 2; the usable
/// bytes are one fewer.
fn limit(r: &Reply, command: &str, key: &str) -> Result<usize, LaunchError> {
    let n = r.int(command, key)?;
    if n < 2 {
        return Err(r.malformed(command, format!("{key}={n} is too small to be a limit")));
    }
    Ok(n as usize - 1)
}

/// A field that must not be empty.
fn nonempty(r: &Reply, command: &str, key: &str) -> Result<String, LaunchError> {
    let v = r.require(command, key)?;
    if v.is_empty() {
        return Err(r.malformed(command, format!("{key} is empty")));
    }
    Ok(v.to_string())
}
