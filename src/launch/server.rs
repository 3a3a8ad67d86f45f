//! A PMI-1 server: what Hydra's proxy does for `mpiexec`, for the built-in
//! launcher (`--processes N`, `launcher.rs`) and for tests.
//!
//! One thread per process reads its requests, line by line, from the
//! process's end of a socket pair (the child's `PMI_FD`) and answers each
//! one (the commands of `../shared/reference/launchers.md` §1: `init`,
//! `get_maxes`, `get_appnum`, `get_my_kvsname`, `get_universe_size`,
//! `put`, `get`, `barrier_in`, `finalize`, `abort`) in Hydra's words.
//!
//! ## Shared state
//!
//! The key-value space, the barrier count and who finalized live under one
//! mutex ([`Synced`]). `barrier_in` counts the caller in; the last of the
//! job's processes to arrive sends `barrier_out` to every process (each
//! connection's writer has its own mutex, so that reply never interleaves
//! with another). A put is visible to gets at once (Hydra makes it visible
//! at the next barrier; a client that follows the protocol cannot tell).
//!
//! ## Bad input
//!
//! A line that does not parse, an unknown command, a put of a key or value
//! beyond the limits, or a request naming another key-value space is
//! answered with `rc=-1` and a `msg` saying why, and logged on standard
//! error; the process goes on (its client turns the refusal into an
//! error). A line longer than [`MAX_LINE`] bytes or bytes that are not
//! text close the connection: the process sees its PMI end and fails.
//! Nothing a process sends can block the server or another process.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use super::wire;

/// The limits announced in `maxes` (as Hydra: they count the NUL).
const KEYLEN_MAX: usize = 64;
const VALLEN_MAX: usize = 1024;
const KVSNAME_MAX: usize = 256;
/// The longest request line served.
pub(crate) const MAX_LINE: usize = 4096;

/// What the server tells its owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Event {
    /// A process asked to end the job (`abort`).
    Abort {
        /// The process.
        process: u32,
        /// The exit code it asked for.
        code: i32,
        /// Its message.
        message: String,
    },
    /// A process's connection ended (after `finalize` or not).
    Closed {
        /// The process.
        process: u32,
    },
}

/// State shared by the connection threads.
#[derive(Debug, Default)]
struct Synced {
    kvs: HashMap<String, String>,
    /// Processes in the current barrier.
    in_barrier: u32,
    finalized: Vec<bool>,
}

/// A running PMI-1 server for a job of `writers.len()` processes.
#[derive(Debug)]
pub(crate) struct Server {
    synced: Arc<Mutex<Synced>>,
    writers: Arc<Vec<Mutex<UnixStream>>>,
    threads: Vec<JoinHandle<()>>,
}

impl Server {
    /// Serves PMI-1 on `conns` (process `i` on `conns[i]`), in key-value
    /// space `kvsname`; events go to `events`.
    pub(crate) fn start(
        conns: Vec<UnixStream>,
        kvsname: String,
        events: Sender<Event>,
    ) -> std::io::Result<Server> {
        let n = conns.len() as u32;
        let synced = Arc::new(Mutex::new(Synced {
            finalized: vec![false; n as usize],
            ..Synced::default()
        }));
        let writers: Vec<Mutex<UnixStream>> = conns
            .iter()
            .map(|c| c.try_clone().map(Mutex::new))
            .collect::<std::io::Result<_>>()?;
        let writers = Arc::new(writers);
        let mut threads = Vec::with_capacity(conns.len());
        for (i, stream) in conns.into_iter().enumerate() {
            let conn = Connection {
                process: i as u32,
                processes: n,
                kvsname: kvsname.clone(),
                synced: Arc::clone(&synced),
                writers: Arc::clone(&writers),
                events: events.clone(),
            };
            let thread = std::thread::Builder::new()
                .name(format!("myriad-pmi{i}"))
                .spawn(move || conn.serve(stream));
            threads.push(thread?);
        }
        Ok(Server {
            synced,
            writers,
            threads,
        })
    }

    /// Whether `process` has finalized PMI (set before its `finalize_ack`
    /// is sent, so a process that exits after finalizing is always seen
    /// as finalized).
    pub(crate) fn finalized(&self, process: u32) -> bool {
        lock(&self.synced).finalized[process as usize]
    }

    /// Ends every connection and waits for the connection threads. Called
    /// once the processes have exited: a descriptor a process handed down
    /// to a process of its own would otherwise keep its connection open.
    pub(crate) fn join(self) {
        for w in self.writers.iter() {
            let _ = lock(w).shutdown(std::net::Shutdown::Both);
        }
        for t in self.threads {
            let _ = t.join();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One process's connection, served by its own thread.
struct Connection {
    process: u32,
    processes: u32,
    kvsname: String,
    synced: Arc<Mutex<Synced>>,
    writers: Arc<Vec<Mutex<UnixStream>>>,
    events: Sender<Event>,
}

/// What to do after a request.
enum Next {
    Reply(String),
    /// The reply comes later (a barrier).
    Wait,
    /// Reply, then stop serving (finalize).
    Last(String),
    /// No reply; stop serving (abort, or a connection too broken to go on).
    Stop,
}

impl Connection {
    fn serve(self, stream: UnixStream) {
        let mut reader = BufReader::new(stream);
        loop {
            let mut line = Vec::new();
            let read = (&mut reader)
                .take(MAX_LINE as u64 + 1)
                .read_until(b'\n', &mut line);
            match read {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            if line.last() != Some(&b'\n') {
                if line.len() > MAX_LINE {
                    self.log(&format!("a line longer than {MAX_LINE} bytes; closing"));
                }
                // Else the end of the stream within a line.
                break;
            }
            line.pop();
            let Ok(text) = std::str::from_utf8(&line) else {
                self.log("bytes that are not text; closing");
                break;
            };
            let next = self.answer(text.trim_end_matches('\r'));
            let (reply, stop) = match next {
                Next::Reply(r) => (Some(r), false),
                Next::Wait => (None, false),
                Next::Last(r) => (Some(r), true),
                Next::Stop => (None, true),
            };
            if let Some(reply) = reply {
                if self.send(self.process, &reply).is_err() {
                    break;
                }
            }
            if stop {
                break;
            }
        }
        // The process sees the end of its connection (its client's read
        // ends) even while the server keeps the socket for the barrier's
        // writers.
        let _ = lock(&self.writers[self.process as usize]).shutdown(std::net::Shutdown::Both);
        let _ = self.events.send(Event::Closed {
            process: self.process,
        });
    }

    fn send(&self, process: u32, line: &str) -> std::io::Result<()> {
        let mut w = lock(&self.writers[process as usize]);
        w.write_all(line.as_bytes())?;
        w.write_all(b"\n")
    }

    fn log(&self, problem: &str) {
        say!(
            "myriad launcher: PMI request of process {} refused: {problem}",
            self.process
        );
    }

    /// A refusal: logged, and answered as `cmd=reply rc=-1 msg=...`.
    fn refuse(&self, reply: &str, problem: &str) -> Next {
        self.log(problem);
        let msg: String = problem
            .chars()
            .map(|c| {
                if c.is_whitespace() || c == '=' {
                    '_'
                } else {
                    c
                }
            })
            .collect();
        Next::Reply(format!("cmd={reply} rc=-1 msg={msg}"))
    }

    fn answer(&self, line: &str) -> Next {
        let request = match wire::parse_pmi1("request", line) {
            Ok(r) => r,
            Err(e) => return self.refuse("error", &format!("{e}")),
        };
        let field = |k: &str| request.get(k);
        match request.cmd.as_str() {
            "init" => {
                if field("pmi_version") != Some("1") {
                    return self.refuse(
                        "response_to_init",
                        "this launcher speaks PMI version 1 only (unset MYRIAD_PMI)",
                    );
                }
                Next::Reply("cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0".to_string())
            }
            "get_maxes" => Next::Reply(format!(
                "cmd=maxes kvsname_max={KVSNAME_MAX} keylen_max={KEYLEN_MAX} \
                 vallen_max={VALLEN_MAX}"
            )),
            "get_appnum" => Next::Reply("cmd=appnum appnum=0".to_string()),
            "get_my_kvsname" => Next::Reply(format!("cmd=my_kvsname kvsname={}", self.kvsname)),
            "get_universe_size" => {
                Next::Reply(format!("cmd=universe_size size={}", self.processes))
            }
            "put" | "get" => {
                if field("kvsname") != Some(&self.kvsname) {
                    return self.refuse(
                        &format!("{}_result", request.cmd),
                        &format!("no key-value space {:?}", field("kvsname").unwrap_or("")),
                    );
                }
                let Some(key) = field("key").filter(|k| !k.is_empty()) else {
                    return self.refuse(&format!("{}_result", request.cmd), "no key");
                };
                if key.len() >= KEYLEN_MAX {
                    return self.refuse(
                        &format!("{}_result", request.cmd),
                        &format!("a key of {} bytes (at most {})", key.len(), KEYLEN_MAX - 1),
                    );
                }
                if request.cmd == "put" {
                    let Some(value) = field("value") else {
                        return self.refuse("put_result", "no value");
                    };
                    if value.len() >= VALLEN_MAX {
                        return self.refuse(
                            "put_result",
                            &format!(
                                "a value of {} bytes (at most {})",
                                value.len(),
                                VALLEN_MAX - 1
                            ),
                        );
                    }
                    lock(&self.synced)
                        .kvs
                        .insert(key.to_string(), value.to_string());
                    Next::Reply("cmd=put_result rc=0 msg=success".to_string())
                } else {
                    match lock(&self.synced).kvs.get(key) {
                        Some(v) => {
                            Next::Reply(format!("cmd=get_result rc=0 msg=success value={v}"))
                        }
                        None => Next::Reply(format!(
                            "cmd=get_result rc=-1 msg=key_{key}_not_found value=unknown"
                        )),
                    }
                }
            }
            "barrier_in" => {
                let mut synced = lock(&self.synced);
                synced.in_barrier += 1;
                if synced.in_barrier < self.processes {
                    return Next::Wait;
                }
                synced.in_barrier = 0;
                drop(synced);
                for p in 0..self.processes {
                    // A process gone is the launcher's business (it sees it
                    // exit); the others still get their reply.
                    let _ = self.send(p, "cmd=barrier_out");
                }
                Next::Wait
            }
            "finalize" => {
                lock(&self.synced).finalized[self.process as usize] = true;
                Next::Last("cmd=finalize_ack".to_string())
            }
            "abort" => {
                let code = field("exitcode").and_then(|c| c.parse().ok()).unwrap_or(1);
                let message = field("message").unwrap_or("").to_string();
                let _ = self.events.send(Event::Abort {
                    process: self.process,
                    code,
                    message,
                });
                Next::Stop
            }
            other => self.refuse(
                &format!("{other}_result"),
                &format!("unknown command {other:?}"),
            ),
        }
    }
}
