//! Which launcher started this process, from its environment variables
//! (`../shared/reference/launchers.md`, §3), and opening the connection to
//! its PMI server.
//!
//! | variables | launcher | PMI |
//! |---|---|---|
//! | `PMI_FD`, `PMI_RANK`, `PMI_SIZE` | Hydra `mpiexec` | PMI-1 |
//! | the same, and `PMI_JOBID` or `SLURM_MPI_TYPE=pmi2` | `srun --mpi=pmi2` | PMI-2 |
//! | `PMI_PORT=host:port`, `PMI_ID` | Hydra `mpiexec -pmi-port` | PMI-1 over TCP |
//! | a Slurm step of several tasks (`SLURM_STEP_ID`, `SLURM_STEP_NUM_TASKS` > 1), no `PMI_FD` | `srun` without `--mpi=pmi2` | none: an error naming the flag |
//! | `PMIX_NAMESPACE`, `PMIX_RANK` (and `PMIX_SERVER_URI*`), no `PMI_FD`/`PMI_PORT` | Open MPI `mpirun`, `srun --mpi=pmix` | PMIx (feature `pmix`; without it an error naming the feature, unless the job has one process) |
//! | `OMPI_COMM_WORLD_SIZE` > 1, no `PMI_FD`, no `PMIX_*` | Open MPI `mpirun` | none: an error |
//! | none of these | no launcher | none: one process, as without a launcher |
//!
//! `MYRIAD_PMI=1` or `2` chooses the protocol on a `PMI_FD` (Hydra speaks
//! both). A `PMI_*` variable that is set must be valid; the `SLURM_*` and
//! `OMPI_*` variables only serve to recognise a launcher without PMI, and
//! one that does not parse is ignored.

use std::net::{TcpStream, ToSocketAddrs};
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use super::pmi::{Start, Stream, Version};
use crate::error::LaunchError;

/// How to start a program so that it gets a PMI myriad speaks.
const HINT: &str = "start the program with MPICH's `mpiexec` (Hydra) or `srun --mpi=pmi2`, or \
                    without a launcher";
/// The same, under Slurm.
const HINT_SLURM: &str = "run it with `srun --mpi=pmi2` (or set `MpiDefault=pmi2` in slurm.conf)";
/// The same, under Open MPI.
const HINT_OMPI: &str = "Open MPI's `mpirun` offers only PMIx, and it gave this process no PMIx \
                         server (no PMIX_NAMESPACE/PMIX_RANK): use MPICH's `mpiexec` or `srun \
                         --mpi=pmi2`";
/// A PMIx launcher, in a build without PMIx.
#[cfg(not(feature = "pmix"))]
const HINT_PMIX: &str = "this build has no PMIx client: build it with the `pmix` cargo feature \
                         (`--features myriad/pmix`, needs libpmix-dev and libclang-dev), or start \
                         it with MPICH's `mpiexec.mpich` or `srun --mpi=pmi2`";
/// For `MYRIAD_PMI`.
const HINT_VERSION: &str = "use MYRIAD_PMI=1 or MYRIAD_PMI=2, or unset it";

/// Where the PMI server is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Connect {
    /// An inherited socket.
    Fd(RawFd),
    /// A TCP address, `host:port`.
    Port(String),
}

/// What the environment says about the launcher's PMI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PmiEnv {
    /// The launcher, for messages (`mpiexec (Hydra)`, `srun --mpi=pmi2`).
    pub(crate) launcher: &'static str,
    /// Where its server is.
    pub(crate) connect: Connect,
    /// How to start the exchange.
    pub(crate) start: Start,
}

/// What the environment says about a PMIx launcher (feature `pmix`):
/// libpmix reads the rest of its variables itself.
#[cfg(feature = "pmix")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PmixEnv {
    /// The launcher, for messages (`Open MPI's mpirun`, `srun --mpi=pmix`).
    pub(crate) launcher: &'static str,
}

/// The launcher's interface this process joins through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Found {
    /// PMI-1 or PMI-2.
    Pmi(PmiEnv),
    /// PMIx.
    #[cfg(feature = "pmix")]
    Pmix(PmixEnv),
}

/// Reads the launcher's variables through `var` (the process environment,
/// or a table in tests): `None` when no launcher asks this process to
/// join a job.
///
/// PMI wins where a launcher sets both (`PMI_FD` or `PMI_PORT`); a PMIx
/// launcher is recognised by `PMIX_NAMESPACE` and `PMIX_RANK`.
pub(crate) fn detect(var: &dyn Fn(&str) -> Option<String>) -> Result<Option<Found>, LaunchError> {
    let pmi = var("PMI_FD").is_some() || var("PMI_PORT").is_some();
    if pmi || var("PMIX_NAMESPACE").is_none() {
        return detect_pmi(var).map(|found| found.map(Found::Pmi));
    }
    let Some(rank) = var("PMIX_RANK") else {
        return detect_pmi(var).map(|found| found.map(Found::Pmi));
    };
    let slurm = var("SLURM_STEP_ID").is_some() || var("SLURM_STEPID").is_some();
    let launcher = if slurm {
        "srun --mpi=pmix"
    } else if var("OMPI_COMM_WORLD_SIZE").is_some() {
        "Open MPI's mpirun"
    } else {
        "a PMIx launcher"
    };
    if parse::<u32>(&rank).is_none() {
        return Err(LaunchError::Environment {
            variable: "PMIX_RANK",
            value: Some(rank),
            problem: "is not a whole number".to_string(),
            hint: if slurm { HINT_SLURM } else { HINT },
        });
    }
    pmix_launch(var, launcher)
}

/// A PMIx launcher's job, in a build with PMIx: libpmix takes it from here.
#[cfg(feature = "pmix")]
fn pmix_launch(
    _var: &dyn Fn(&str) -> Option<String>,
    launcher: &'static str,
) -> Result<Option<Found>, LaunchError> {
    Ok(Some(Found::Pmix(PmixEnv { launcher })))
}

/// A PMIx launcher's job, in a build without PMIx: a job of one process
/// runs alone, as before; one of several, or of a size the variables do not
/// tell, fails naming the feature (each process would run the whole job).
#[cfg(not(feature = "pmix"))]
fn pmix_launch(
    var: &dyn Fn(&str) -> Option<String>,
    launcher: &'static str,
) -> Result<Option<Found>, LaunchError> {
    let size = var("OMPI_COMM_WORLD_SIZE")
        .or_else(|| var("SLURM_STEP_NUM_TASKS"))
        .or_else(|| var("SLURM_NTASKS"))
        .and_then(|v| parse::<u64>(&v));
    match size {
        Some(1) => Ok(None),
        Some(n) => Err(LaunchError::NoPmi {
            launcher,
            processes: n,
            hint: HINT_PMIX,
        }),
        None => Err(LaunchError::Environment {
            variable: "PMIX_NAMESPACE",
            value: var("PMIX_NAMESPACE"),
            problem: format!("says {launcher} started this process through PMIx"),
            hint: HINT_PMIX,
        }),
    }
}

/// [`detect`] for the PMI launchers and those without any PMI.
fn detect_pmi(var: &dyn Fn(&str) -> Option<String>) -> Result<Option<PmiEnv>, LaunchError> {
    let slurm = var("SLURM_JOB_ID").is_some() || var("SLURM_STEP_ID").is_some();
    let hint = if slurm { HINT_SLURM } else { HINT };
    let version = match var("MYRIAD_PMI") {
        None => None,
        Some(v) => match v.trim() {
            "1" => Some(Version::Pmi1),
            "2" => Some(Version::Pmi2),
            _ => {
                return Err(LaunchError::Environment {
                    variable: "MYRIAD_PMI",
                    value: Some(v),
                    problem: "is not a PMI version".to_string(),
                    hint: HINT_VERSION,
                })
            }
        },
    };
    if let Some(fd) = var("PMI_FD") {
        let fd =
            parse::<RawFd>(&fd)
                .filter(|&fd| fd >= 0)
                .ok_or_else(|| LaunchError::Environment {
                    variable: "PMI_FD",
                    value: Some(fd.clone()),
                    problem: "is not a file descriptor".to_string(),
                    hint,
                })?;
        let slurm_pmi2 =
            var("PMI_JOBID").is_some() || var("SLURM_MPI_TYPE").as_deref() == Some("pmi2");
        let version = version.unwrap_or(if slurm_pmi2 {
            Version::Pmi2
        } else {
            Version::Pmi1
        });
        let rank = required(var, "PMI_RANK", hint)?;
        let size = match version {
            Version::Pmi1 => Some(required(var, "PMI_SIZE", hint)?),
            Version::Pmi2 => optional(var, "PMI_SIZE", hint)?,
        };
        if let Some(size) = size {
            if rank >= size {
                return Err(LaunchError::Environment {
                    variable: "PMI_RANK",
                    value: Some(rank.to_string()),
                    problem: format!("is not below PMI_SIZE={size}"),
                    hint,
                });
            }
        }
        return Ok(Some(PmiEnv {
            launcher: if slurm_pmi2 {
                "srun --mpi=pmi2"
            } else {
                "mpiexec (Hydra)"
            },
            connect: Connect::Fd(fd),
            start: Start {
                version,
                rank: Some(rank),
                size,
                pmiid: None,
                jobid: var("PMI_JOBID"),
            },
        }));
    }
    if let Some(port) = var("PMI_PORT") {
        let valid = port
            .rsplit_once(':')
            .is_some_and(|(host, p)| !host.is_empty() && parse::<u16>(p).is_some_and(|p| p > 0));
        if !valid {
            return Err(LaunchError::Environment {
                variable: "PMI_PORT",
                value: Some(port),
                problem: "is not host:port".to_string(),
                hint,
            });
        }
        if version == Some(Version::Pmi2) {
            return Err(LaunchError::Environment {
                variable: "MYRIAD_PMI",
                value: Some("2".to_string()),
                problem: "is not supported over PMI_PORT (mpiexec -pmi-port), only over PMI_FD"
                    .to_string(),
                hint: HINT_VERSION,
            });
        }
        let id = required(var, "PMI_ID", hint)?;
        return Ok(Some(PmiEnv {
            launcher: "mpiexec -pmi-port (Hydra)",
            connect: Connect::Port(port),
            start: Start {
                version: Version::Pmi1,
                rank: None,
                size: None,
                pmiid: Some(id.to_string()),
                jobid: None,
            },
        }));
    }
    // No PMI: a launcher that started several processes anyway would
    // have each run the whole job.
    let step = var("SLURM_STEP_ID").is_some() || var("SLURM_STEPID").is_some();
    let tasks = var("SLURM_STEP_NUM_TASKS")
        .or_else(|| var("SLURM_NTASKS"))
        .and_then(|v| parse::<u64>(&v));
    if let (true, Some(n @ 2..)) = (step, tasks) {
        let mpi = var("SLURM_MPI_TYPE").unwrap_or_else(|| "none".to_string());
        return Err(LaunchError::NoPmi {
            launcher: if mpi == "pmix" || mpi.starts_with("pmix_") {
                "srun --mpi=pmix"
            } else {
                "srun without --mpi=pmi2"
            },
            processes: n,
            hint: HINT_SLURM,
        });
    }
    if let Some(n @ 2..) = var("OMPI_COMM_WORLD_SIZE").and_then(|v| parse::<u64>(&v)) {
        return Err(LaunchError::NoPmi {
            launcher: "Open MPI's mpirun",
            processes: n,
            hint: HINT_OMPI,
        });
    }
    Ok(None)
}

fn parse<T: std::str::FromStr>(v: &str) -> Option<T> {
    v.trim().parse().ok()
}

/// A count variable the launcher must have set.
fn required(
    var: &dyn Fn(&str) -> Option<String>,
    name: &'static str,
    hint: &'static str,
) -> Result<u32, LaunchError> {
    optional(var, name, hint)?.ok_or_else(|| LaunchError::Environment {
        variable: name,
        value: None,
        problem: "a launcher that sets PMI_FD or PMI_PORT sets it too".to_string(),
        hint,
    })
}

/// A count variable, if it is set.
fn optional(
    var: &dyn Fn(&str) -> Option<String>,
    name: &'static str,
    hint: &'static str,
) -> Result<Option<u32>, LaunchError> {
    var(name)
        .map(|v| {
            parse::<u32>(&v).ok_or_else(|| LaunchError::Environment {
                variable: name,
                value: Some(v),
                problem: "is not a whole number".to_string(),
                hint,
            })
        })
        .transpose()
}

impl PmiEnv {
    /// Opens the connection to the PMI server (connecting waits at most
    /// `timeout`).
    ///
    /// A `PMI_FD` becomes this process's own: the caller opens it once per
    /// process (`launch::join`), and nothing else in myriad uses it.
    pub(crate) fn open(&self, timeout: Duration) -> Result<Stream, LaunchError> {
        match &self.connect {
            Connect::Fd(fd) => {
                let bad = |problem: &str| LaunchError::Environment {
                    variable: "PMI_FD",
                    value: Some(fd.to_string()),
                    problem: problem.to_string(),
                    hint: HINT,
                };
                // SAFETY: `fstat` writes into the `stat` it is given and
                // reads nothing else; any fd number is a valid argument.
                let stat = unsafe {
                    let mut st = std::mem::zeroed::<libc::stat>();
                    (libc::fstat(*fd, &mut st) == 0).then_some(st)
                };
                let Some(stat) = stat else {
                    return Err(bad("is not open in this process (did a wrapper close it?)"));
                };
                if stat.st_mode & libc::S_IFMT != libc::S_IFSOCK {
                    return Err(bad("is not a socket"));
                }
                // Programs the process starts must not inherit the PMI
                // connection (the launcher would wait for them too).
                // SAFETY: `fcntl` on an open descriptor touches no memory.
                unsafe { libc::fcntl(*fd, libc::F_SETFD, libc::FD_CLOEXEC) };
                // SAFETY: the fd is open and a socket (checked above), and
                // this process hands it to exactly one owner: `launch::join`
                // opens the PMI connection once per process, and no other
                // code of myriad touches PMI_FD.
                Ok(Stream::Unix(unsafe { UnixStream::from_raw_fd(*fd) }))
            }
            Connect::Port(port) => {
                let addrs = port.to_socket_addrs().map_err(|e| LaunchError::Io {
                    command: format!("connect to PMI_PORT={port}"),
                    reason: e.to_string(),
                })?;
                let mut last = None;
                for addr in addrs {
                    match TcpStream::connect_timeout(&addr, timeout) {
                        Ok(s) => {
                            // Small request/reply messages: no Nagle delay.
                            let _ = s.set_nodelay(true);
                            return Ok(Stream::Tcp(s));
                        }
                        Err(e) => last = Some(e.to_string()),
                    }
                }
                Err(LaunchError::Io {
                    command: format!("connect to PMI_PORT={port}"),
                    reason: last.unwrap_or_else(|| "the name has no address".to_string()),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    fn detect_in(vars: &[(&str, &str)]) -> Result<Option<PmiEnv>, LaunchError> {
        detect(&env(vars)).map(|found| {
            found.map(|found| match found {
                Found::Pmi(pmi) => pmi,
                #[cfg(feature = "pmix")]
                Found::Pmix(pmix) => panic!("{vars:?} detected as PMIx: {pmix:?}"),
            })
        })
    }

    #[test]
    fn no_launcher_is_one_process() {
        assert_eq!(detect_in(&[]), Ok(None));
        // A Slurm batch script (no step) or a one-task step runs as today.
        assert_eq!(
            detect_in(&[("SLURM_JOB_ID", "3"), ("SLURM_NTASKS", "4")]),
            Ok(None)
        );
        assert_eq!(
            detect_in(&[("SLURM_STEP_ID", "0"), ("SLURM_STEP_NUM_TASKS", "1")]),
            Ok(None)
        );
        assert_eq!(detect_in(&[("OMPI_COMM_WORLD_SIZE", "1")]), Ok(None));
        // Unparsable launcher variables do not fail a program.
        assert_eq!(
            detect_in(&[("SLURM_STEP_ID", "0"), ("SLURM_STEP_NUM_TASKS", "x")]),
            Ok(None)
        );
    }

    #[test]
    fn hydra_is_pmi1_over_the_fd() {
        let e = detect_in(&[("PMI_FD", "5"), ("PMI_RANK", "1"), ("PMI_SIZE", "4")])
            .unwrap()
            .unwrap();
        assert_eq!(e.connect, Connect::Fd(5));
        assert_eq!(e.launcher, "mpiexec (Hydra)");
        assert_eq!(e.start.version, Version::Pmi1);
        assert_eq!((e.start.rank, e.start.size), (Some(1), Some(4)));
        let e = detect_in(&[
            ("PMI_FD", "5"),
            ("PMI_RANK", "1"),
            ("PMI_SIZE", "4"),
            ("MYRIAD_PMI", "2"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(e.start.version, Version::Pmi2);
    }

    #[test]
    fn srun_pmi2_is_pmi2_over_the_fd() {
        let e = detect_in(&[
            ("PMI_FD", "7"),
            ("PMI_RANK", "0"),
            ("PMI_SIZE", "4"),
            ("PMI_JOBID", "4.0"),
            ("SLURM_MPI_TYPE", "pmi2"),
            ("SLURM_JOB_ID", "4"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(e.launcher, "srun --mpi=pmi2");
        assert_eq!(e.start.version, Version::Pmi2);
        assert_eq!(e.start.jobid.as_deref(), Some("4.0"));
        let e = detect_in(&[
            ("PMI_FD", "7"),
            ("PMI_RANK", "0"),
            ("SLURM_MPI_TYPE", "pmi2"),
            ("MYRIAD_PMI", "1"),
        ]);
        // PMI-1 needs the size from the environment.
        assert!(
            matches!(
                e,
                Err(LaunchError::Environment {
                    variable: "PMI_SIZE",
                    ..
                })
            ),
            "{e:?}"
        );
    }

    #[test]
    fn pmi_port_is_pmi1_over_tcp() {
        let e = detect_in(&[("PMI_PORT", "vm:39187"), ("PMI_ID", "0")])
            .unwrap()
            .unwrap();
        assert_eq!(e.connect, Connect::Port("vm:39187".into()));
        assert_eq!(e.start.pmiid.as_deref(), Some("0"));
        assert_eq!(e.start.rank, None);
    }

    #[test]
    fn bad_variables_are_errors_naming_them_and_the_flag() {
        type Vars<'a> = &'a [(&'a str, &'a str)];
        let cases: &[(Vars, &str, &str)] = &[
            (
                &[("PMI_FD", "x"), ("PMI_RANK", "0"), ("PMI_SIZE", "1")],
                "PMI_FD",
                "mpiexec",
            ),
            (
                &[("PMI_FD", "-1"), ("PMI_RANK", "0"), ("PMI_SIZE", "1")],
                "PMI_FD",
                "mpiexec",
            ),
            (&[("PMI_FD", "")], "PMI_FD", "mpiexec"),
            (&[("PMI_FD", "3"), ("PMI_SIZE", "2")], "PMI_RANK", "mpiexec"),
            (&[("PMI_FD", "3"), ("PMI_RANK", "0")], "PMI_SIZE", "mpiexec"),
            (
                &[("PMI_FD", "3"), ("PMI_RANK", "2"), ("PMI_SIZE", "2")],
                "PMI_RANK",
                "mpiexec",
            ),
            (
                &[("PMI_FD", "3"), ("PMI_RANK", "a"), ("PMI_SIZE", "2")],
                "PMI_RANK",
                "mpiexec",
            ),
            (
                &[
                    ("PMI_FD", "3"),
                    ("PMI_RANK", "0"),
                    ("SLURM_JOB_ID", "9"),
                    ("MYRIAD_PMI", "1"),
                ],
                "PMI_SIZE",
                "srun --mpi=pmi2",
            ),
            (&[("PMI_PORT", "vm")], "PMI_PORT", "mpiexec"),
            (
                &[("PMI_PORT", "vm:0"), ("PMI_ID", "0")],
                "PMI_PORT",
                "mpiexec",
            ),
            (
                &[("PMI_PORT", ":80"), ("PMI_ID", "0")],
                "PMI_PORT",
                "mpiexec",
            ),
            (&[("PMI_PORT", "vm:80")], "PMI_ID", "mpiexec"),
            (
                &[("PMI_PORT", "vm:80"), ("PMI_ID", "a")],
                "PMI_ID",
                "mpiexec",
            ),
            (
                &[("PMI_PORT", "vm:80"), ("PMI_ID", "0"), ("MYRIAD_PMI", "2")],
                "MYRIAD_PMI",
                "MYRIAD_PMI=1",
            ),
            (
                &[("MYRIAD_PMI", "3"), ("PMI_FD", "3")],
                "MYRIAD_PMI",
                "MYRIAD_PMI=1",
            ),
        ];
        for (vars, variable, flag) in cases {
            let err = detect_in(vars).unwrap_err();
            assert!(
                matches!(&err, LaunchError::Environment { variable: v, .. } if v == variable),
                "{vars:?}: {err:?}"
            );
            assert!(err.to_string().contains(flag), "{vars:?}: {err}");
        }
    }

    #[test]
    fn launchers_without_pmi_are_refused_with_the_flag_to_use() {
        let err = detect_in(&[
            ("SLURM_JOB_ID", "3"),
            ("SLURM_STEP_ID", "0"),
            ("SLURM_STEP_NUM_TASKS", "4"),
            ("SLURM_PROCID", "2"),
        ])
        .unwrap_err();
        assert!(
            matches!(err, LaunchError::NoPmi { processes: 4, .. }),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(
            text.contains("srun without --mpi=pmi2 started 4 processes"),
            "{text}"
        );
        assert!(text.contains("srun --mpi=pmi2`"), "{text}");
        let err = detect_in(&[
            ("SLURM_STEPID", "0"),
            ("SLURM_NTASKS", "2"),
            ("SLURM_MPI_TYPE", "pmix"),
        ])
        .unwrap_err();
        assert!(
            err.to_string().starts_with("srun --mpi=pmix started 2"),
            "{err}"
        );
        let err = detect_in(&[("OMPI_COMM_WORLD_SIZE", "2"), ("PMIX_RANK", "0")]).unwrap_err();
        assert!(err.to_string().contains("PMIx"), "{err}");
    }

    #[test]
    fn the_pmi_socket_is_not_inherited_by_programs_the_process_starts() {
        use std::os::fd::IntoRawFd;
        let (ours, _server) = UnixStream::pair().unwrap();
        let fd = ours.into_raw_fd();
        // As a launcher hands it over: inheritable.
        // SAFETY: `fcntl` on an open descriptor touches no memory.
        unsafe { libc::fcntl(fd, libc::F_SETFD, 0) };
        let e = PmiEnv {
            launcher: "mpiexec (Hydra)",
            connect: Connect::Fd(fd),
            start: Start {
                version: Version::Pmi1,
                rank: Some(0),
                size: Some(1),
                pmiid: None,
                jobid: None,
            },
        };
        let stream = e.open(Duration::from_secs(1)).unwrap();
        // SAFETY: as above.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
        assert_eq!(flags & libc::FD_CLOEXEC, libc::FD_CLOEXEC);
        drop(stream);
    }

    #[test]
    fn an_fd_that_is_not_an_open_socket_is_refused() {
        let start = Start {
            version: Version::Pmi1,
            rank: Some(0),
            size: Some(1),
            pmiid: None,
            jobid: None,
        };
        let file = std::fs::File::open("/proc/self/exe").unwrap();
        use std::os::fd::AsRawFd;
        for (fd, problem) in [(file.as_raw_fd(), "not a socket"), (1 << 20, "not open")] {
            let e = PmiEnv {
                launcher: "mpiexec (Hydra)",
                connect: Connect::Fd(fd),
                start: start.clone(),
            };
            let err = e.open(Duration::from_secs(1)).unwrap_err();
            assert!(err.to_string().contains(problem), "{err}");
        }
    }
}
