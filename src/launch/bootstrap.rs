//! A job's shape across its processes, agreed through the launcher's
//! key-value space before the processes have a network of their own.
//!
//! ## The exchange (one allgather, `job`)
//!
//! Every process publishes `world,blocks,build,secret`:
//! * `world` and `blocks` (ranks per process, `+`-separated): what this
//!   process computed from its own configuration (`--ranks`/`MYRIAD_RANKS`,
//!   `MYRIAD_RANKS_PER_PROCESS`). Every process compares every other's with
//!   its own, so a process started with other settings fails the job with
//!   an error naming both, in every process, instead of computing a world
//!   of another size;
//! * `build`: [`build_id`], so processes of different builds are refused
//!   (their frames might differ);
//! * `secret`: 128 random bits, from process 0 only (`-` elsewhere): the
//!   mesh's handshake proves with it that a connection comes from this job.
//!
//! A process whose own settings are invalid publishes `!` instead, so the
//! others fail naming it rather than wait for it; every failure finalizes
//! PMI before it returns.
//!
//! The result is a [`Bootstrap`], which keeps the PMI session open for the
//! rest of the job (`Session`: later exchanges such as the mesh's
//! addresses, the final barrier, finalize).

use std::io::Read;
use std::sync::OnceLock;
use std::time::Instant;

use super::session::Session;
use crate::error::{Error, LaunchError};
use crate::identity::{ProcessId, Processes};
use crate::transport::mesh::{Credentials, WIRE_VERSION};

/// How the user asked to lay the world out over the processes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Shape {
    /// The world size (`--ranks`/`MYRIAD_RANKS`, or the default).
    pub(crate) world: u32,
    /// Whether the user gave the world size. If not, `world` is the
    /// default (this process's processing units) and each process hosts
    /// that many ranks, unless `MYRIAD_RANKS_PER_PROCESS` says otherwise.
    pub(crate) world_given: bool,
    /// `MYRIAD_RANKS_PER_PROCESS`: a count, or a comma list per process.
    pub(crate) per_process: Option<String>,
}

/// This process's place in a job of several processes, and the open PMI
/// session: what `run_job` needs to build the mesh and the job.
#[derive(Debug)]
// The transport's glue (issue 9) reads what the tests do not yet.
#[allow(dead_code)]
pub(crate) struct Bootstrap {
    /// This process's index, `0..processes`.
    pub(crate) process: u32,
    /// The number of processes.
    pub(crate) processes: u32,
    /// World ranks hosted by each process, in process order (process `p`
    /// hosts the block after those of `0..p`).
    pub(crate) blocks: Vec<u32>,
    /// The job's build id and secret, for the mesh's handshake.
    pub(crate) credentials: Credentials,
    /// This process's index among the job's processes on its host, where
    /// the launcher says (`MPI_LOCALRANKID`, `PMI_LOCAL_RANK`,
    /// `SLURM_LOCALID`, `OMPI_COMM_WORLD_LOCAL_RANK`).
    pub(crate) local_process: Option<u32>,
    /// The launcher, for messages (`mpiexec (Hydra)`, `myriad --processes`).
    pub(crate) launcher: &'static str,
    /// The PMI connection, open until the job ends.
    pub(crate) session: Session,
    /// Each process's host name, once `connect` exchanged them.
    pub(crate) hosts: Option<Vec<String>>,
}

impl Bootstrap {
    /// The job's processes, their rank blocks and (once `connect` exchanged
    /// them) their hosts, seen from this process.
    pub(crate) fn processes_map(&self) -> Processes {
        let processes = Processes::from_blocks(&self.blocks, ProcessId::new(self.process));
        match &self.hosts {
            Some(hosts) => processes.with_hosts(hosts),
            None => processes,
        }
    }

    /// Runs the exchange over `session`: agrees on the layout, the build and
    /// the secret. `var` reads the environment (the local process index).
    ///
    /// On an error the session is finalized (the launcher sees an orderly
    /// end) and every process fails: a process whose own layout is
    /// invalid still takes part in the allgather (publishing `!`), so the
    /// others learn it instead of waiting for it forever.
    pub(crate) fn exchange(
        mut session: Session,
        shape: &Shape,
        launcher: &'static str,
        var: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Bootstrap, Error> {
        match agree(&mut session, shape) {
            Ok((blocks, credentials)) => Ok(Bootstrap {
                process: session.process(),
                processes: session.processes(),
                blocks,
                credentials,
                // The PMIx server's word (PMIX_LOCAL_RANK) before variables.
                local_process: session.local_process().or_else(|| local_process(var)),
                launcher,
                session,
                hosts: None,
            }),
            Err(e) => {
                let _ = session.finalize();
                Err(e)
            }
        }
    }
}

/// The allgather of [`Bootstrap::exchange`]: the blocks and credentials
/// every process agrees on.
fn agree(session: &mut Session, shape: &Shape) -> Result<(Vec<u32>, Credentials), Error> {
    let (process, processes) = (session.process(), session.processes());
    let laid_out = layout(shape, processes);
    let build = build_id();
    let ours = laid_out.as_ref().ok().map(|blocks| Published {
        world: blocks.iter().map(|&b| u64::from(b)).sum(),
        blocks: blocks.clone(),
        build,
    });
    let mine = match &ours {
        Some(ours) if process == 0 => format!("{},{}", ours.text(), hex(&random_secret()?)),
        Some(ours) => format!("{},-", ours.text()),
        None => LAYOUT_FAILED.to_string(),
    };
    let all = session.allgather("job", &mine).map_err(Error::Launch)?;
    // This process's own error first: it names the knob.
    let blocks = laid_out?;
    let ours = ours.expect("laid out");
    let mut secret = None;
    for (p, value) in all.iter().enumerate() {
        let p = p as u32;
        if value == LAYOUT_FAILED {
            return Err(Error::Launch(LaunchError::Mismatch {
                what: "world size and ranks per process (that process's settings are invalid: \
                       see its error)",
                process: p,
                theirs: "none".to_string(),
                this: process,
                ours: ours.describe(),
            }));
        }
        let (theirs, their_secret) = Published::parse(value)
            .ok_or_else(|| LaunchError::Malformed {
                command: "get".to_string(),
                problem: format!("process {p}'s job description is garbled"),
                reply: crate::error::shorten(value),
            })
            .map_err(Error::Launch)?;
        if theirs.build != ours.build {
            return Err(Error::Launch(LaunchError::Mismatch {
                what: "build (different builds of the program cannot join one job)",
                process: p,
                theirs: format!("{:016x}", theirs.build),
                this: process,
                ours: format!("{:016x}", ours.build),
            }));
        }
        if theirs.world != ours.world || theirs.blocks != ours.blocks {
            return Err(Error::Launch(LaunchError::Mismatch {
                what: "world size and ranks per process (start every process with the same \
                       --ranks/MYRIAD_RANKS and MYRIAD_RANKS_PER_PROCESS)",
                process: p,
                theirs: theirs.describe(),
                this: process,
                ours: ours.describe(),
            }));
        }
        if p == 0 {
            secret = unhex(their_secret);
        }
    }
    let secret = secret
        .ok_or_else(|| LaunchError::Malformed {
            command: "get".to_string(),
            problem: "process 0 published no valid job secret".to_string(),
            reply: String::new(),
        })
        .map_err(Error::Launch)?;
    Ok((blocks, Credentials { build, secret }))
}

/// What a process whose layout is invalid publishes.
const LAYOUT_FAILED: &str = "!";

/// What each process publishes (but the secret).
#[derive(Debug, PartialEq, Eq)]
struct Published {
    world: u64,
    blocks: Vec<u32>,
    build: u64,
}

impl Published {
    fn text(&self) -> String {
        let blocks: Vec<String> = self.blocks.iter().map(u32::to_string).collect();
        format!("{},{},{:016x}", self.world, blocks.join("+"), self.build)
    }

    fn parse(value: &str) -> Option<(Published, &str)> {
        let mut fields = value.split(',');
        let world = fields.next()?.parse().ok()?;
        let blocks = fields
            .next()?
            .split('+')
            .map(|b| b.parse().ok())
            .collect::<Option<Vec<u32>>>()?;
        let build = u64::from_str_radix(fields.next()?, 16).ok()?;
        let secret = fields.next()?;
        fields.next().is_none().then_some((
            Published {
                world,
                blocks,
                build,
            },
            secret,
        ))
    }

    fn describe(&self) -> String {
        let blocks: Vec<String> = self.blocks.iter().map(u32::to_string).collect();
        format!("{} ranks as {}", self.world, blocks.join(","))
    }
}

/// The ranks of each of `processes` processes: the world split evenly
/// (earlier processes get the remainder) unless `MYRIAD_RANKS_PER_PROCESS`
/// says otherwise.
pub(crate) fn layout(shape: &Shape, processes: u32) -> Result<Vec<u32>, Error> {
    const KNOB: &str = "MYRIAD_RANKS_PER_PROCESS";
    let p = processes as usize;
    let blocks: Vec<u32> = match shape.per_process.as_deref().map(str::trim) {
        None | Some("") if !shape.world_given => {
            // The default world is this process's processing units: each
            // process hosts that many.
            vec![shape.world; p]
        }
        None | Some("") => {
            if shape.world < processes {
                return Err(Error::config(format!(
                    "a world of {} ranks cannot be split over {processes} processes: every \
                     process needs at least one rank (give more with --ranks N or MYRIAD_RANKS)",
                    shape.world
                )));
            }
            let (each, extra) = (shape.world / processes, shape.world % processes);
            (0..processes)
                .map(|i| each + u32::from(i < extra))
                .collect()
        }
        Some(text) => {
            let parsed: Option<Vec<u32>> = text
                .split(',')
                .map(|n| {
                    n.trim()
                        .replace('_', "")
                        .parse::<u32>()
                        .ok()
                        .filter(|&n| n > 0)
                })
                .collect();
            let Some(parsed) = parsed else {
                return Err(Error::config(format!(
                    "{KNOB}={text:?} is not a positive count or a comma list of positive counts, \
                     one per process (e.g. 4 or 3,2,2)"
                )));
            };
            match parsed.len() {
                1 => vec![parsed[0]; p],
                n if n == p => parsed,
                n => {
                    return Err(Error::config(format!(
                        "{KNOB}={text:?} lists {n} counts, but the launcher started {processes} \
                         processes (give one count for all, or one per process)"
                    )))
                }
            }
        }
    };
    let world: u64 = blocks.iter().map(|&b| u64::from(b)).sum();
    if world > u64::from(u32::MAX / 2) {
        return Err(Error::config(format!(
            "{KNOB} makes a world of {world} ranks, more than myriad supports"
        )));
    }
    if shape.world_given && shape.per_process.is_some() && world != u64::from(shape.world) {
        return Err(Error::config(format!(
            "{KNOB}={:?} over {processes} processes makes {world} ranks, but --ranks/MYRIAD_RANKS \
             says {} (give one of them, or make them agree)",
            shape.per_process.as_deref().unwrap_or(""),
            shape.world
        )));
    }
    Ok(blocks)
}

/// This process's index among the processes of the job on its host, from
/// the first launcher variable that has one.
fn local_process(var: &dyn Fn(&str) -> Option<String>) -> Option<u32> {
    [
        "MPI_LOCALRANKID",
        "PMI_LOCAL_RANK",
        "SLURM_LOCALID",
        "OMPI_COMM_WORLD_LOCAL_RANK",
    ]
    .into_iter()
    .find_map(|name| var(name).and_then(|v| v.trim().parse().ok()))
}

/// Identifies this program's build: a hash of the executable's bytes
/// (`/proc/self/exe`), the crate version and the transport's wire-format
/// version. Computed once per process.
///
/// Two copies of one binary on different hosts agree; a rebuilt binary
/// does not. SipHash-1-3 with zero keys (std's `DefaultHasher::new`) is
/// the same in both: they are the same code. Where the executable cannot
/// be read, the hash covers the versions only.
pub(crate) fn build_id() -> u64 {
    static ID: OnceLock<u64> = OnceLock::new();
    *ID.get_or_init(|| {
        use std::hash::Hasher;
        let started = Instant::now();
        #[allow(deprecated)] // `SipHasher13` is not public; DefaultHasher::new() is it, fixed keys.
        let mut hasher = std::hash::DefaultHasher::new();
        hasher.write(env!("CARGO_PKG_VERSION").as_bytes());
        hasher.write_u32(WIRE_VERSION);
        let mut bytes = 0u64;
        if let Ok(mut exe) = std::fs::File::open("/proc/self/exe") {
            let mut buf = vec![0u8; 1 << 20];
            while let Ok(n @ 1..) = exe.read(&mut buf) {
                hasher.write(&buf[..n]);
                bytes += n as u64;
            }
        }
        let id = hasher.finish();
        if std::env::var_os("MYRIAD_REPORT_BUILD_ID").is_some() {
            say!(
                "[myriad] build id {id:016x}: {bytes} bytes of /proc/self/exe hashed in {:.1} ms",
                started.elapsed().as_secs_f64() * 1e3
            );
        }
        id
    })
}

/// 128 bits from the kernel's random source.
fn random_secret() -> Result<[u8; 16], Error> {
    let mut secret = [0u8; 16];
    let mut filled = 0;
    while filled < secret.len() {
        // SAFETY: the kernel writes at most `len - filled` bytes into the
        // buffer's unfilled tail, which is valid for writes.
        let n = unsafe {
            libc::getrandom(
                secret[filled..].as_mut_ptr().cast(),
                secret.len() - filled,
                0,
            )
        };
        if n > 0 {
            filled += n as usize;
            continue;
        }
        let e = std::io::Error::last_os_error();
        if e.kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        // No getrandom (old kernel, seccomp): the device.
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut secret))
            .map_err(|e2| {
                Error::Launch(LaunchError::Io {
                    command: "make the job secret".to_string(),
                    reason: format!("getrandom: {e}; /dev/urandom: {e2}"),
                })
            })?;
        break;
    }
    Ok(secret)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<[u8; 16]> {
    if text.len() != 32 || !text.is_ascii() {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(world: u32, given: bool, per: Option<&str>) -> Shape {
        Shape {
            world,
            world_given: given,
            per_process: per.map(str::to_string),
        }
    }

    #[test]
    fn the_world_is_split_evenly_with_the_remainder_first() {
        assert_eq!(layout(&shape(10, true, None), 4).unwrap(), [3, 3, 2, 2]);
        assert_eq!(layout(&shape(8, true, None), 4).unwrap(), [2; 4]);
        assert_eq!(layout(&shape(1, true, None), 1).unwrap(), [1]);
        // Without --ranks, each process hosts the default (its PUs).
        assert_eq!(layout(&shape(2, false, None), 3).unwrap(), [2, 2, 2]);
        let err = layout(&shape(3, true, None), 4).unwrap_err().to_string();
        assert!(
            err.contains("3 ranks") && err.contains("4 processes"),
            "{err}"
        );
    }

    #[test]
    fn ranks_per_process_as_a_count_or_a_list() {
        assert_eq!(layout(&shape(2, false, Some("5")), 3).unwrap(), [5, 5, 5]);
        assert_eq!(layout(&shape(15, true, Some("5")), 3).unwrap(), [5, 5, 5]);
        assert_eq!(
            layout(&shape(2, false, Some("3, 1,2")), 3).unwrap(),
            [3, 1, 2]
        );
        for (per, given, world, needle) in [
            (
                "5",
                true,
                14,
                "makes 15 ranks, but --ranks/MYRIAD_RANKS says 14",
            ),
            (
                "3,1",
                false,
                1,
                "lists 2 counts, but the launcher started 3",
            ),
            ("3,0,1", false, 1, "not a positive count"),
            ("x", false, 1, "MYRIAD_RANKS_PER_PROCESS=\"x\""),
            ("1,,2", false, 1, "not a positive count"),
            ("2000000000", false, 1, "more than myriad supports"),
        ] {
            let err = layout(&shape(world, given, Some(per)), 3)
                .unwrap_err()
                .to_string();
            assert!(err.contains(needle), "{per}: {err}");
        }
    }

    #[test]
    fn published_descriptions_round_trip() {
        let p = Published {
            world: 7,
            blocks: vec![4, 3],
            build: 0xabc,
        };
        let text = format!("{},-", p.text());
        let (back, secret) = Published::parse(&text).unwrap();
        assert_eq!((back, secret), (p, "-"));
        for bad in [
            "",
            "7",
            "7,4+3",
            "7,4+x,abc,-",
            "7,4+3,zz,-",
            "7,4,abc,-,extra",
        ] {
            assert!(Published::parse(bad).is_none(), "{bad:?}");
        }
        let s = random_secret().unwrap();
        assert_eq!(unhex(&hex(&s)), Some(s));
        assert_ne!(random_secret().unwrap(), s, "two secrets are random");
        assert_eq!(unhex("-"), None);
    }

    #[test]
    fn the_build_id_is_stable_in_a_process() {
        assert_eq!(build_id(), build_id());
    }

    #[test]
    fn the_local_process_comes_from_the_first_launcher_variable() {
        let vars = |list: &'static [(&'static str, &'static str)]| {
            move |n: &str| {
                list.iter()
                    .find(|(k, _)| *k == n)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(local_process(&vars(&[])), None);
        assert_eq!(local_process(&vars(&[("SLURM_LOCALID", "3")])), Some(3));
        assert_eq!(
            local_process(&vars(&[("MPI_LOCALRANKID", "1"), ("SLURM_LOCALID", "3")])),
            Some(1)
        );
        assert_eq!(local_process(&vars(&[("PMI_LOCAL_RANK", "x")])), None);
    }
}
