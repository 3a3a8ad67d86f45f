//! Shared memory between the processes of one host: frames through a
//! ring per pair in the receiver's memory, large payloads copied once
//! from the sender's memory with CMA.
//!
//! | file | what it is |
//! |---|---|
//! | `ring.rs` | the single-producer single-consumer byte ring and its sleep/wake protocol (modelled in `loom-tests`) |
//! | `segment.rs` | a process's segment (memfd, mapped shared), its doorbell (eventfd), reaching a peer's (`pidfd_getfd`) |
//! | `cma.rs` | `process_vm_readv`: reading a peer's memory (large reads shared with a helper thread), and the probe that says whether the kernel allows it |
//! | `split.rs` | a large copy shared by receiver and sender (`process_vm_readv` and `process_vm_writev` on pieces claimed from one shared word) |
//! | `links.rs` | one process's links to its peers: output queues, input parsing, the CMA records |
//!
//! ## Setting up ([`set_up`], at a job's start, after the TCP mesh)
//!
//! 1. Every process of several on one host creates its segment (one ring
//!    for each process of its host, `MYRIAD_SHM_RING_BYTES` each, 1 MiB by
//!    default) and its doorbell, and publishes `pid,memfd,doorbell,ring,
//!    address` through the bootstrap session's allgather (or `none`).
//! 2. Each maps the segment of every peer of its host (`pidfd_open` +
//!    `pidfd_getfd` of the published descriptors, the header checked) and
//!    probes whether it may read the peer's memory with CMA (reading the
//!    published address); it publishes what worked, one letter per process.
//! 3. A pair talks through shared memory if both mapped the other's
//!    segment; large payloads from `p` to `q` go by CMA if `q` may read
//!    `p`'s memory. Everything else goes through TCP, and the TCP mesh
//!    stays for every pair: a peer's stream closing is how its loss is
//!    seen (`route.rs`).
//!
//! Every process runs both rounds, whatever it could set up, so that the
//! allgathers match; what failed is a note the caller reports once.
//!
//! ## Design note
//!
//! The sender writes into the receiver's memory and the receiver reads it
//! in place (one copy each way, no system call while the receiver polls):
//! MPICH's and Open MPI's eager shared-memory path. A small message goes
//! from the sender's buffer into the ring (`Transport::send_parts`) and,
//! decoded where it lies, from the ring into the posted receive's buffer
//! (`Sink::take_in_place`): no allocation on either side. The receiver sleeps
//! only in the progress thread's `wait`, after flagging every inbound ring
//! (`ring.rs`); a sender that sees the flag rings the receiver's eventfd,
//! which sits in the same epoll set as the TCP streams. Large messages
//! take one copy (CMA) instead of MPICH's two through the ring.

mod cma;
mod links;
pub(crate) mod ring;
mod segment;
mod split;

use std::fmt::Write as _;

pub(crate) use links::ShmLinks;

use crate::error::Error;
use crate::transport::epoll::Doorbell;
use links::Peer;
use segment::{PeerProcess, Segment, MAGIC};

/// Ring bytes by default.
pub(crate) const DEFAULT_RING: usize = 1 << 20;
/// The smallest ring.
const MIN_RING: usize = 4096;

/// How the shared memory is set up (from the environment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Settings {
    /// Bytes of each ring (a power of two, or an impossible size that
    /// makes creation fail).
    pub(crate) ring: usize,
    /// Large payloads may go by CMA (`MYRIAD_SHM_CMA=off`: through the
    /// ring, as when the kernel refuses CMA).
    pub(crate) cma: bool,
}

impl Settings {
    /// Reads `MYRIAD_SHM_RING_BYTES` (bytes, with an optional `K`, `M`,
    /// `G` or `T` suffix, rounded up to a power of two) and
    /// `MYRIAD_SHM_CMA` (`on`/`off`) through `var`.
    pub(crate) fn from_env(var: &dyn Fn(&str) -> Option<String>) -> Result<Settings, Error> {
        let ring = match var("MYRIAD_SHM_RING_BYTES").filter(|v| !v.trim().is_empty()) {
            None => DEFAULT_RING,
            Some(text) => {
                let bad = || {
                    Error::config(format!(
                        "MYRIAD_SHM_RING_BYTES={text:?} is not a size of at least {MIN_RING} \
                         bytes (such as 65536, 256K or 4M)"
                    ))
                };
                let t = text.trim();
                let (digits, shift) = match t.chars().last().map(|c| c.to_ascii_uppercase()) {
                    Some('K') => (&t[..t.len() - 1], 10),
                    Some('M') => (&t[..t.len() - 1], 20),
                    Some('G') => (&t[..t.len() - 1], 30),
                    Some('T') => (&t[..t.len() - 1], 40),
                    _ => (t, 0),
                };
                let n: u64 = digits.trim().parse().map_err(|_| bad())?;
                let n = n.checked_mul(1 << shift).ok_or_else(bad)?;
                if n < MIN_RING as u64 {
                    return Err(bad());
                }
                usize::try_from(n)
                    .ok()
                    .and_then(usize::checked_next_power_of_two)
                    .unwrap_or(usize::MAX)
            }
        };
        let cma = match var("MYRIAD_SHM_CMA").as_deref().map(str::trim) {
            None | Some("") | Some("on") | Some("1") => true,
            Some("off") | Some("0") => false,
            Some(other) => {
                return Err(Error::config(format!(
                    "MYRIAD_SHM_CMA={other:?}: use on or off"
                )))
            }
        };
        Ok(Settings { ring, cma })
    }
}

/// What [`set_up`] made.
#[derive(Debug)]
pub(crate) struct SetUp {
    /// The links, if this process reaches a peer through shared memory.
    pub(crate) links: Option<ShmLinks>,
    /// Peers on this host not reached through shared memory.
    pub(crate) unreached: Vec<u32>,
    /// What did not work, for the caller to report once.
    pub(crate) notes: Vec<String>,
}

/// The bootstrap session's allgather: a round's name and this process's
/// value in, every process's value out.
pub(crate) type Exchange<'a> = dyn FnMut(&str, &str) -> Result<Vec<String>, Error> + 'a;

/// A peer's published segment.
struct Published {
    pid: u32,
    memfd: i32,
    bell: i32,
    ring: usize,
    address: u64,
}

fn parse(value: &str) -> Option<Published> {
    let mut it = value.split(',');
    let published = Published {
        pid: it.next()?.parse().ok()?,
        memfd: it.next()?.parse().ok()?,
        bell: it.next()?.parse().ok()?,
        ring: it.next()?.parse().ok()?,
        address: it.next()?.parse().ok()?,
    };
    it.next().is_none().then_some(published)
}

/// Sets up this process's shared memory with the peers of its host
/// (see the module docs). `hosts` names each process's host; `wanted`
/// false publishes nothing (`MYRIAD_TRANSPORT=tcp`) but still takes part
/// in the two rounds of `exchange` (the bootstrap session's allgather:
/// name, this process's value → every process's).
pub(crate) fn set_up(
    this: u32,
    hosts: &[String],
    wanted: bool,
    settings: Settings,
    exchange: &mut Exchange<'_>,
) -> Result<SetUp, Error> {
    let here = &hosts[this as usize];
    let local: Vec<u32> = (0..hosts.len() as u32)
        .filter(|&p| hosts[p as usize] == *here)
        .collect();
    let slot = |p: u32| local.iter().position(|&q| q == p).expect("a local process");
    let mut notes = Vec::new();
    let mut own = None;
    if wanted && local.len() > 1 {
        match Segment::create(local.len(), settings.ring).and_then(|s| Ok((s, Doorbell::new()?))) {
            Ok(made) => own = Some(made),
            Err(err) => notes.push(format!(
                "its shared segment ({} rings of {} bytes) could not be created: {err}",
                local.len(),
                settings.ring
            )),
        }
    }
    let value = match &own {
        Some((segment, bell)) => {
            cma::allow_peers();
            format!(
                "{},{},{},{},{}",
                std::process::id(),
                segment.fd(),
                bell.fd(),
                settings.ring,
                segment.address()
            )
        }
        None => "none".to_string(),
    };
    let published = exchange("shm", &value)?;
    // Map every peer's segment (only with a segment of our own: a pair
    // needs both directions).
    let mut reached: Vec<Option<(Segment, Doorbell, u32, bool)>> =
        (0..hosts.len()).map(|_| None).collect();
    if own.is_some() {
        for &q in local.iter().filter(|&&q| q != this) {
            let Some(p) = published.get(q as usize).and_then(|v| parse(v)) else {
                continue;
            };
            let attached = PeerProcess::open(p.pid).and_then(|process| {
                let segment = Segment::attach(process.fetch(p.memfd)?, local.len(), p.ring)?;
                Ok((segment, process.doorbell(p.bell)?))
            });
            match attached {
                Ok((segment, bell)) => {
                    let cma = if !settings.cma {
                        false
                    } else {
                        match cma::probe(p.pid, p.address, MAGIC) {
                            Ok(()) => true,
                            Err(why) => {
                                notes.push(format!(
                                    "single-copy reads (CMA) from process {q} {why}: large \
                                     messages from it go through the shared ring"
                                ));
                                false
                            }
                        }
                    };
                    reached[q as usize] = Some((segment, bell, p.pid, cma));
                }
                Err(err) => notes.push(format!(
                    "the shared segment of process {q} (pid {}) could not be mapped: {err}",
                    p.pid
                )),
            }
        }
        if !settings.cma {
            notes.push(
                "single-copy reads (CMA) are off (MYRIAD_SHM_CMA=off): large messages go \
                 through the shared rings"
                    .into(),
            );
        }
    }
    let mut mine = String::with_capacity(hosts.len());
    for r in &reached {
        mine.push(match r {
            Some((.., true)) => 'c',
            Some(_) => 'm',
            None => '.',
        });
    }
    let views = exchange("shmok", &mine)?;
    let mut peers: Vec<Option<Peer>> = (0..hosts.len()).map(|_| None).collect();
    let mut unreached = Vec::new();
    for (q, r) in reached.into_iter().enumerate() {
        if q as u32 == this || hosts[q] != *here {
            continue;
        }
        let theirs = views
            .get(q)
            .and_then(|v| v.as_bytes().get(this as usize).copied());
        match (r, theirs) {
            (Some((segment, bell, pid, reads)), Some(view @ (b'c' | b'm'))) => {
                peers[q] = Some(Peer::new(
                    pid,
                    slot(q as u32),
                    segment,
                    slot(this),
                    bell,
                    view == b'c',
                    reads,
                ));
            }
            _ => unreached.push(q as u32),
        }
    }
    let links = match own {
        Some((segment, bell)) if peers.iter().any(Option::is_some) => {
            Some(ShmLinks::new(segment, bell, peers))
        }
        _ => None,
    };
    Ok(SetUp {
        links,
        unreached,
        notes,
    })
}

/// The processes in `list`, for messages.
pub(crate) fn names(list: &[u32]) -> String {
    let mut s = String::new();
    for (i, p) in list.iter().enumerate() {
        let _ = write!(s, "{}{p}", if i > 0 { ", " } else { "" });
    }
    s
}

/// Set-ups of `n` "processes" that are threads of this process (tests and
/// `Runtime::run_joined_shm`): each creates its own segment and reaches
/// the others through `pidfd_getfd` of this very process; the allgather
/// is a board the threads share.
///
/// # Errors
///
/// A set-up failed (it does not here: the exchange cannot).
pub(crate) fn joined_in_threads(n: usize, settings: Settings) -> Result<Vec<SetUp>, Error> {
    let hosts: Vec<String> = (0..n).map(|_| "here".to_string()).collect();
    joined_in_threads_on(&hosts, settings)
}

/// [`joined_in_threads`] of "processes" on `hosts` (by process): only
/// those of one host reach each other.
pub(crate) fn joined_in_threads_on(
    hosts: &[String],
    settings: Settings,
) -> Result<Vec<SetUp>, Error> {
    use std::sync::{Arc, Barrier, Mutex};
    type Board = Vec<Vec<(usize, String)>>;
    fn lock(b: &Mutex<Board>) -> std::sync::MutexGuard<'_, Board> {
        b.lock().unwrap_or_else(|e| e.into_inner())
    }
    let n = hosts.len();
    let board: Arc<Mutex<Board>> = Arc::default();
    let barrier = Arc::new(Barrier::new(n));
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|p| {
                let (board, barrier) = (&board, &barrier);
                s.spawn(move || {
                    let mut round = 0;
                    let mut exchange = |_name: &str, value: &str| {
                        {
                            let mut b = lock(board);
                            if b.len() <= round {
                                b.resize(round + 1, Vec::new());
                            }
                            b[round].push((p, value.to_string()));
                        }
                        barrier.wait();
                        let mut got = lock(board)[round].clone();
                        got.sort();
                        round += 1;
                        barrier.wait();
                        Ok(got.into_iter().map(|(_, v)| v).collect())
                    };
                    set_up(p as u32, hosts, true, settings, &mut exchange)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    })
}

/// This process as a `ProcessId` (tests).
#[cfg(test)]
pub(crate) fn id(p: u32) -> crate::identity::ProcessId {
    crate::identity::ProcessId::new(p)
}

#[cfg(test)]
mod tests;
