//! [`LaunchError`]: the launcher's environment or its process-management
//! interface (PMI) failed this process.

use std::fmt;

/// What went wrong between this process and the launcher that started it
/// (`mpiexec`, `srun`): its environment variables, or the PMI exchange with
/// it. `Display` gives the part of [`Error`](super::Error)'s message after
/// `launcher: `.
///
/// `hint` fields say how to start the program so that it works (the
/// launcher flag to use).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LaunchError {
    /// A variable the launcher should have set is missing or not valid.
    Environment {
        /// The variable (`PMI_RANK`, `PMI_PORT`, ...).
        variable: &'static str,
        /// Its value, if it is set.
        value: Option<String>,
        /// What is wrong with it.
        problem: String,
        /// How to start the program instead.
        hint: &'static str,
    },
    /// A launcher started several processes but gives them no PMI this
    /// client speaks (`srun` without `--mpi=pmi2`, Open MPI's `mpirun`).
    NoPmi {
        /// The launcher, as recognised from its variables.
        launcher: &'static str,
        /// How many processes it started.
        processes: u64,
        /// How to start the program instead.
        hint: &'static str,
    },
    /// Connecting to, reading from or writing to the PMI server failed.
    Io {
        /// The PMI command being exchanged (`init`, `connect`, ...).
        command: String,
        /// The operating system's error.
        reason: String,
    },
    /// The PMI server closed the connection before it replied.
    Closed {
        /// The PMI command being exchanged.
        command: String,
    },
    /// The PMI server did not reply in time.
    Timeout {
        /// The PMI command being exchanged.
        command: String,
        /// How long the client waited, in milliseconds.
        waited_ms: u64,
    },
    /// A reply that is not what the protocol allows.
    Malformed {
        /// The PMI command being exchanged.
        command: String,
        /// What is wrong.
        problem: String,
        /// The reply (shortened if long).
        reply: String,
    },
    /// The PMI server refused a command (`rc` not 0).
    Refused {
        /// The PMI command.
        command: String,
        /// The server's return code.
        rc: i64,
        /// The server's message, if it sent one.
        message: Option<String>,
    },
    /// The key-value space has no value for a key.
    KeyNotFound {
        /// The key.
        key: String,
    },
    /// A key or value is longer than the PMI server accepts.
    TooLong {
        /// `"key"` or `"value"`.
        what: &'static str,
        /// Its length in bytes.
        len: usize,
        /// The most bytes the server accepts.
        max: usize,
        /// Where the limit comes from (`keylen_max=64 from the server`).
        limit: String,
    },
    /// An empty key.
    EmptyKey,
    /// The processes of one job disagree on something they must share
    /// (their build, the world size and layout).
    Mismatch {
        /// What they disagree on.
        what: &'static str,
        /// The other process.
        process: u32,
        /// Its value.
        theirs: String,
        /// This process.
        this: u32,
        /// This process's value.
        ours: String,
    },
    /// The connections between the job's processes (the mesh) could not
    /// be made.
    Mesh {
        /// This process.
        process: u32,
        /// What went wrong, naming the peer processes concerned.
        problem: String,
    },
    /// A key or value holds a byte the PMI wire format cannot carry.
    BadByte {
        /// `"key"` or `"value"`.
        what: &'static str,
        /// The key or value (shortened if long).
        text: String,
        /// The byte.
        byte: char,
    },
}

/// `s` cut to at most 200 bytes (at a character boundary), for messages.
pub(crate) fn shorten(s: &str) -> String {
    const MAX: usize = 200;
    if s.len() <= MAX {
        return s.to_string();
    }
    let mut end = MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes)", &s[..end], s.len())
}

impl fmt::Display for LaunchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LaunchError::Environment {
                variable,
                value,
                problem,
                hint,
            } => {
                match value {
                    Some(v) => write!(f, "{variable}={v:?} {problem}")?,
                    None => write!(f, "{variable} is not set: {problem}")?,
                }
                write!(f, "; {hint}")
            }
            LaunchError::NoPmi {
                launcher,
                processes,
                hint,
            } => write!(
                f,
                "{launcher} started {processes} processes without a PMI myriad speaks, so each \
                 would run the whole job alone; {hint}"
            ),
            LaunchError::Io { command, reason } => {
                write!(f, "PMI {command}: {reason}")
            }
            LaunchError::Closed { command } => write!(
                f,
                "PMI {command}: the launcher closed the connection before replying"
            ),
            LaunchError::Timeout { command, waited_ms } => write!(
                f,
                "PMI {command}: no reply from the launcher within {waited_ms} ms"
            ),
            LaunchError::Malformed {
                command,
                problem,
                reply,
            } => write!(f, "PMI {command}: {problem} in the reply {reply:?}"),
            LaunchError::Refused {
                command,
                rc,
                message,
            } => {
                write!(f, "PMI {command}: the launcher refused it (rc={rc}")?;
                match message {
                    Some(m) => write!(f, ", {m})"),
                    None => f.write_str(")"),
                }
            }
            LaunchError::KeyNotFound { key } => {
                write!(f, "PMI get: the key-value space has no key {key:?}")
            }
            LaunchError::TooLong {
                what,
                len,
                max,
                limit,
            } => write!(
                f,
                "PMI {what} of {len} bytes is longer than the {max} bytes the launcher accepts \
                 ({limit})"
            ),
            LaunchError::EmptyKey => f.write_str("PMI keys must not be empty"),
            LaunchError::Mismatch {
                what,
                process,
                theirs,
                this,
                ours,
            } => write!(
                f,
                "the job's processes disagree on the {what}: process {process} has {theirs}, \
                 process {this} has {ours}"
            ),
            LaunchError::Mesh { process, problem } => {
                write!(
                    f,
                    "process {process} could not join the job's mesh: {problem}"
                )
            }
            LaunchError::BadByte { what, text, byte } => write!(
                f,
                "PMI {what} {text:?} holds {byte:?}, which the PMI wire format cannot carry \
                 (keys and values must not hold spaces, newlines, ';' or, in keys, '=')"
            ),
        }
    }
}
