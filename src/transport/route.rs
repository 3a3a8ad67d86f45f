//! The routing transport: peers on this host through shared memory
//! (`shm/`), the others through a [`Network`] transport (TCP, or
//! libfabric where `auto` found a fabric), behind one [`Transport`].
//!
//! Below, "TCP" is that network transport (libfabric keeps the TCP mesh
//! as its control channel, whose end reports a loss the same way).
//!
//! Every pair keeps its TCP connection even when its frames go through
//! shared memory: the stream's end is how a peer's loss is seen (a
//! process killed mid-job closes its sockets, not its rings). A loss that
//! TCP reports for a shared-memory peer is handed on after what that peer
//! wrote to its ring (its last frames, a goodbye included), so the order
//! of its frames and its end is kept.
//!
//! `wait` is one epoll set over the TCP transport's own epoll descriptor
//! and this process's doorbell (the eventfd senders ring when they see the
//! receiver sleeping). Where every peer is on this host, TCP only watches
//! for losses: `poll` asks it at most every millisecond, or when `wait`
//! saw it ready, so a poll that finds nothing makes no system call.
//!
//! [`connect`] builds it for a job from the mesh's streams, the hosts and
//! the bootstrap session, as `MYRIAD_TRANSPORT` chooses
//! (`choice.rs`).

use std::io;
use std::net::TcpStream;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::choice::Choice;
use super::epoll::Epoll;
use super::periodic::Periodic;
use super::shm::{self, ShmLinks};
use super::tcp::TcpTransport;
use super::{Borrowed, Frame, Incoming, Place, SendError, Sink, Transport};
use crate::datatype::Run;
use crate::error::Error;
use crate::identity::ProcessId;

/// The epoll token of the TCP transport's epoll descriptor.
const TCP: u64 = 1;
/// The epoll token of the doorbell.
const BELL: u64 = 2;
/// Polls between two readings of the clock when TCP only watches for
/// losses.
const TCP_EVERY: u32 = 64;
/// How often TCP is asked when it only watches for losses: each look is
/// an `epoll_wait`, a system call that a worker polling in a loop made
/// every 64th poll (a fifth of a call per message in a 1 B ping-pong,
/// whose reply waited for it); a loss is seen within this.
const TCP_PERIOD: Duration = Duration::from_millis(1);
/// How long a `wait` sleeps before it asks the peers of this host to wake
/// it (see `wait`).
const LIGHT: Duration = Duration::from_micros(100);

/// The transport of the peers on other hosts: one whose readiness an
/// epoll set can watch.
pub(crate) trait Network: Transport {
    /// An epoll descriptor that is readable when a
    /// [`wait`](Transport::wait) with a zero timeout and a poll have
    /// something to do.
    fn epoll_fd(&self) -> RawFd;
}

impl Network for TcpTransport {
    fn epoll_fd(&self) -> RawFd {
        TcpTransport::epoll_fd(self)
    }
}

/// Shared memory for the peers of this host, the network (TCP, libfabric)
/// for the others.
#[derive(Debug)]
pub(crate) struct Routed {
    /// The network transport (TCP or libfabric).
    tcp: Box<dyn Network>,
    shm: ShmLinks,
    epoll: Epoll,
    /// Every peer is reached through shared memory.
    all_shm: bool,
    /// When a poll asks TCP next.
    tcp_looks: Periodic,
    /// `wait` saw TCP ready: the next poll asks it.
    tcp_ready: AtomicBool,
}

impl Routed {
    /// Routes through `shm` the peers it reaches, the others through `tcp`
    /// (the network transport).
    pub(crate) fn new(tcp: impl Network + 'static, shm: ShmLinks) -> io::Result<Routed> {
        Routed::over(Box::new(tcp), shm)
    }

    /// [`new`](Self::new) over a network transport chosen at run time.
    pub(crate) fn over(tcp: Box<dyn Network>, shm: ShmLinks) -> io::Result<Routed> {
        let epoll = Epoll::new()?;
        epoll.add(tcp.epoll_fd(), libc::EPOLLIN as u32, TCP)?;
        epoll.add(shm.doorbell_fd(), libc::EPOLLIN as u32, BELL)?;
        let all_shm = (0..tcp.processes())
            .map(ProcessId::new)
            .all(|p| p == tcp.this() || shm.reaches(p));
        Ok(Routed {
            tcp,
            shm,
            epoll,
            all_shm,
            tcp_looks: Periodic::new(TCP_EVERY, TCP_PERIOD),
            tcp_ready: AtomicBool::new(false),
        })
    }
}

impl Routed {
    /// The shared-memory links (tests).
    #[cfg(test)]
    pub(crate) fn shm(&self) -> &ShmLinks {
        &self.shm
    }

    /// The network transport (tests of libfabric under it).
    #[cfg(all(test, feature = "ofi"))]
    pub(crate) fn network(&self) -> &dyn Network {
        &*self.tcp
    }
}

impl Routed {
    /// Whether a poll should ask TCP, which only watches for losses: at
    /// most every [`TCP_PERIOD`], the clock read every [`TCP_EVERY`]th
    /// poll.
    fn tcp_due(&self) -> bool {
        self.tcp_looks.due()
    }

    /// Waits on the epoll set for at most `timeout` (with a resolution
    /// finer than a millisecond where the kernel has `epoll_pwait2`) and
    /// handles what it reports; returns how many events it saw.
    fn epoll_wait(&self, timeout: Option<Duration>) -> usize {
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 2];
        let ready = self.epoll.ready_within(&mut events, timeout);
        for event in ready {
            match event.u64 {
                BELL => self.shm.clear_doorbell(),
                _ => {
                    self.tcp_ready.store(true, Ordering::Relaxed);
                    // Resets TCP's wake-up eventfd if that was it.
                    self.tcp.wait(Some(Duration::ZERO));
                }
            }
        }
        ready.len()
    }
}

/// Hands TCP's items on, a shared-memory peer's loss after its ring's
/// last frames.
struct AfterRing<'a> {
    shm: &'a ShmLinks,
    sink: &'a mut dyn Sink,
    handed: usize,
}

impl Sink for AfterRing<'_> {
    fn take(&mut self, incoming: Incoming) {
        if let Incoming::Lost(p, _) = &incoming {
            if self.shm.reaches(*p) {
                self.handed += self.shm.drain(*p, self.sink);
            }
        }
        self.sink.take(incoming);
    }

    fn place(&mut self, from: ProcessId, head: &Frame, len: usize) -> Option<Place> {
        self.sink.place(from, head, len)
    }
}

impl Transport for Routed {
    fn this(&self) -> ProcessId {
        self.tcp.this()
    }

    fn processes(&self) -> u32 {
        self.tcp.processes()
    }

    fn send(&self, to: ProcessId, frame: &Frame) -> Result<(), SendError> {
        if self.shm.reaches(to) {
            self.shm.send(to, frame)
        } else {
            self.tcp.send(to, frame)
        }
    }

    fn send_parts(
        &self,
        to: ProcessId,
        frame: &Frame,
        signature: &[Run],
        payload: &[u8],
    ) -> Result<(), SendError> {
        if self.shm.reaches(to) {
            self.shm.send_parts(to, frame, signature, payload)
        } else {
            self.tcp.send_parts(to, frame, signature, payload)
        }
    }

    fn send_owned(&self, to: ProcessId, frame: Frame) -> Result<(), SendError> {
        if self.shm.reaches(to) {
            self.shm.send(to, &frame)
        } else {
            self.tcp.send_owned(to, frame)
        }
    }

    fn send_borrowed(
        &self,
        to: ProcessId,
        frame: Frame,
        data: Borrowed,
        token: u64,
    ) -> Result<bool, SendError> {
        if self.shm.reaches(to) {
            self.shm.send_borrowed(to, frame, data, token)
        } else {
            self.tcp.send_borrowed(to, frame, data, token)
        }
    }

    fn lend(&self, to: ProcessId, address: usize, len: usize) -> Option<Vec<u8>> {
        if self.shm.reaches(to) {
            self.shm.lend(to, address, len)
        } else {
            self.tcp.lend(to, address, len)
        }
    }

    fn unlend(&self, to: ProcessId, address: usize) {
        if self.shm.reaches(to) {
            self.shm.unlend(to, address);
        } else {
            self.tcp.unlend(to, address);
        }
    }

    unsafe fn fetch(
        &self,
        from: ProcessId,
        handle: &[u8],
        dst: *mut u8,
        len: usize,
    ) -> Result<(), String> {
        if self.shm.reaches(from) {
            // SAFETY: the caller's contract.
            unsafe { self.shm.fetch(from, handle, dst, len) }
        } else {
            // SAFETY: the caller's contract.
            unsafe { self.tcp.fetch(from, handle, dst, len) }
        }
    }

    fn withdraw_send(&self, to: ProcessId, token: u64) {
        if self.shm.reaches(to) {
            self.shm.withdraw_send(to, token);
        } else {
            self.tcp.withdraw_send(to, token);
        }
    }

    fn withdraw_place(&self, from: ProcessId, id: u64) {
        if self.shm.reaches(from) {
            self.shm.withdraw_place(from, id);
        } else {
            self.tcp.withdraw_place(from, id);
        }
    }

    fn busy(&self) -> bool {
        self.shm.busy() || (!self.all_shm && self.tcp.busy())
    }

    fn copy_under_way(&self) -> bool {
        self.shm.copy_under_way()
    }

    fn holds_completions(&self) -> bool {
        // Shared memory hands a `Sent` as it reads the `done` record.
        self.tcp.holds_completions()
    }

    fn poll(&self, sink: &mut dyn Sink) -> usize {
        let mut handed = self.shm.poll(sink);
        let look = !self.all_shm
            || (self.tcp_ready.load(Ordering::Relaxed)
                && self.tcp_ready.swap(false, Ordering::Relaxed))
            || self.tcp_due();
        if look {
            let mut after = AfterRing {
                shm: &self.shm,
                sink,
                handed: 0,
            };
            handed += self.tcp.poll(&mut after);
            handed += after.handed;
        }
        handed
    }

    fn wait(&self, timeout: Option<Duration>) {
        // First a light sleep, in which the peers of this host are not
        // asked to ring: a worker about to poll usually takes their frames
        // sooner, and a ring is a system call on the sender's path.
        let light = timeout.map_or(LIGHT, |t| t.min(LIGHT));
        let start = Instant::now();
        if self.epoll_wait(Some(light)) > 0 {
            return;
        }
        let rest = timeout.map(|t| t.saturating_sub(start.elapsed()));
        if rest.is_some_and(|r| r.is_zero()) {
            return;
        }
        if self.shm.sleep() {
            self.epoll_wait(rest);
        }
        self.shm.awake();
    }

    fn wake(&self) {
        // TCP's eventfd is in TCP's epoll set, which is in ours.
        self.tcp.wake();
    }

    fn close(&self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        self.shm.close(timeout);
        self.tcp
            .close(deadline.saturating_duration_since(Instant::now()));
    }
}

/// The transport of process `this` of a job whose processes run on
/// `hosts` (by process), over the mesh's `streams`, as `choice` says:
/// shared memory for the peers of this host where it can be set up
/// (`auto`: else TCP, with a warning on standard error; `shm`: else an
/// error), TCP for the others, or `network` (libfabric, built over the
/// streams already; `streams` are then unused) where given. `exchange` is the bootstrap session's
/// allgather (name, value → every process's value); every process calls
/// it the same number of times, whatever the choice.
///
/// # Errors
///
/// `shm` for a job across hosts (naming them) or with a peer that shared
/// memory does not reach; a bad `MYRIAD_SHM_*` variable; the transports'
/// set-up failing.
pub(crate) fn connect(
    choice: Choice,
    this: u32,
    hosts: &[String],
    streams: Vec<Option<TcpStream>>,
    network: Option<Box<dyn Network>>,
    var: &dyn Fn(&str) -> Option<String>,
    exchange: &mut shm::Exchange<'_>,
) -> Result<Arc<dyn Transport>, Error> {
    let settings = shm::Settings::from_env(var)?;
    let id = ProcessId::new(this);
    let (tcp, over) = match network {
        Some(network) => (network, "libfabric"),
        None => {
            let tcp = TcpTransport::new(id, streams)
                .map_err(|e| Error::config(format!("setting up the TCP transport: {e}")))?;
            (Box::new(tcp) as Box<dyn Network>, "TCP")
        }
    };
    let set_up = shm::set_up(this, hosts, choice != Choice::Tcp, settings, exchange)?;
    let say = |what: &str| format!("process {this} (host {}): {what}", hosts[this as usize]);
    if choice == Choice::Shm && !set_up.unreached.is_empty() {
        return Err(Error::config(format!(
            "MYRIAD_TRANSPORT=shm: {}",
            say(&format!(
                "shared memory does not reach process(es) {}{}",
                shm::names(&set_up.unreached),
                if set_up.notes.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", set_up.notes.join("; "))
                }
            ))
        )));
    }
    for note in &set_up.notes {
        say!("[myriad] warning: {}", say(note));
    }
    if choice != Choice::Tcp && !set_up.unreached.is_empty() {
        say!(
            "[myriad] warning: {}",
            say(&format!(
                "process(es) {} of this host are reached through {over}, not shared memory",
                shm::names(&set_up.unreached)
            ))
        );
    }
    let report = var("MYRIAD_REPORT_BINDINGS")
        .is_some_and(|v| matches!(v.trim(), "1" | "true" | "yes" | "on"));
    if report {
        say!(
            "[myriad] transport: {}",
            say(&describe(&set_up, hosts.len() as u32, this, over))
        );
    }
    match set_up.links {
        Some(links) => Routed::over(tcp, links)
            .map(|r| Arc::new(r) as Arc<dyn Transport>)
            .map_err(|e| Error::config(format!("setting up the routed transport: {e}"))),
        None => Ok(Arc::<dyn Network>::from(tcp)),
    }
}

/// Which peers this process reaches how (`MYRIAD_REPORT_BINDINGS`).
fn describe(set_up: &shm::SetUp, processes: u32, this: u32, over: &str) -> String {
    let others = (0..processes).filter(|&p| p != this);
    let (mut shared, mut cma, mut tcp) = (Vec::new(), Vec::new(), Vec::new());
    for p in others {
        match &set_up.links {
            Some(links) if links.reaches(ProcessId::new(p)) => {
                shared.push(p);
                if links.reads_by_cma(ProcessId::new(p)) {
                    cma.push(p);
                }
            }
            _ => tcp.push(p),
        }
    }
    let list = |l: &[u32]| {
        if l.is_empty() {
            "none".to_string()
        } else {
            shm::names(l)
        }
    };
    format!(
        "shared memory with processes {} (large messages read by CMA from {}), {over} with {}",
        list(&shared),
        list(&cma),
        list(&tcp)
    )
}

/// Fails a job of `choice` `shm` whose processes span hosts, naming them.
pub(crate) fn check_one_host(choice: Choice, hosts: &[String]) -> Result<(), Error> {
    if choice != Choice::Shm || hosts.iter().all(|h| *h == hosts[0]) {
        return Ok(());
    }
    let mut listed: Vec<String> = Vec::new();
    for (p, h) in hosts.iter().enumerate() {
        listed.push(format!("process {p} on {h}"));
    }
    Err(Error::config(format!(
        "MYRIAD_TRANSPORT=shm, but the job spans hosts ({}): shared memory joins the processes \
         of one host; use MYRIAD_TRANSPORT=auto (shared memory within hosts, the network \
         between them) or tcp",
        listed.join(", ")
    )))
}

/// The transports of a job of `n` "processes" that are threads of this
/// process, joined by shared memory (and TCP over the loopback interface
/// for their losses), `MYRIAD_SHM_*` as in a real job: what
/// `Runtime::run_joined_shm` runs the cross-process tests on.
///
/// # Errors
///
/// A bad `MYRIAD_SHM_*` variable, or shared memory or TCP could not be set
/// up.
pub(crate) fn joined_in_threads(n: usize) -> Result<Vec<Arc<dyn Transport>>, Error> {
    let settings = shm::Settings::from_env(&|name| std::env::var(name).ok())?;
    let set_ups = shm::joined_in_threads(n, settings)?;
    let mesh = super::tcp::loopback_mesh(n)
        .map_err(|e| Error::config(format!("connecting processes over TCP: {e}")))?;
    mesh.into_iter()
        .zip(set_ups)
        .enumerate()
        .map(|(p, (streams, set_up))| {
            let tcp = TcpTransport::new(ProcessId::new(p as u32), streams)
                .map_err(|e| Error::config(format!("setting up the TCP transport: {e}")))?;
            let links = set_up.links.ok_or_else(|| {
                Error::config(format!(
                    "shared memory between threads could not be set up: {}",
                    set_up.notes.join("; ")
                ))
            })?;
            Routed::new(tcp, links)
                .map(|r| Arc::new(r) as Arc<dyn Transport>)
                .map_err(|e| Error::config(format!("setting up the routed transport: {e}")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::frame::Kind;

    /// TCP's loss of a shared-memory peer is handed on after the frames
    /// that peer left in its ring (which a poll of the rings just before
    /// may have missed): its last frames, a goodbye say, come first.
    #[test]
    fn a_loss_comes_after_the_lost_peer_s_ring_is_drained() {
        let settings = shm::Settings {
            ring: shm::DEFAULT_RING,
            cma: true,
        };
        let mut set_ups = shm::joined_in_threads(2, settings).unwrap().into_iter();
        let receiver = set_ups.next().unwrap().links.unwrap();
        let sender = set_ups.next().unwrap().links.unwrap();
        for i in 0..3 {
            let mut f = Frame::control(Kind::Ack);
            f.id = i;
            sender.send(ProcessId::new(0), &f).unwrap();
        }
        let mut got = Vec::new();
        let mut sink = |i: Incoming| {
            got.push(match i {
                Incoming::Frame(_, f) => format!("frame {}", f.id),
                Incoming::Lost(p, _) => format!("lost {p}"),
                other => format!("{other:?}"),
            })
        };
        let mut after = AfterRing {
            shm: &receiver,
            sink: &mut sink,
            handed: 0,
        };
        after.take(Incoming::Lost(ProcessId::new(1), "closed".into()));
        assert_eq!(after.handed, 3);
        assert_eq!(got, ["frame 0", "frame 1", "frame 2", "lost 1"]);
    }

    #[test]
    fn forced_shared_memory_across_hosts_is_an_error_naming_them() {
        let hosts: Vec<String> = ["n1", "n1", "n2"].iter().map(|h| h.to_string()).collect();
        let e = check_one_host(Choice::Shm, &hosts).unwrap_err().to_string();
        assert!(
            e.contains("MYRIAD_TRANSPORT=shm")
                && e.contains("process 2 on n2")
                && e.contains("process 0 on n1"),
            "{e}"
        );
        assert!(check_one_host(Choice::Auto, &hosts).is_ok());
        assert!(check_one_host(Choice::Shm, &hosts[..2]).is_ok());
    }
}
