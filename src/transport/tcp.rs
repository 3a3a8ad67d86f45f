//! The TCP transport: one connected stream per peer process.
//!
//! The streams come connected (and authenticated) from the job's start-up
//! (`transport/mesh.rs`; tests connect pairs over the loopback interface).
//! Every stream is non-blocking, with `TCP_NODELAY`:
//!
//! * **send** encodes the frame and writes what the socket takes at once;
//!   the rest waits in the peer's output queue (FIFO: a frame never
//!   overtakes queued bytes), and the stream's epoll interest gains
//!   `EPOLLOUT` so a waiting progress thread wakes up to flush it;
//! * **poll** flushes every output queue, then reads every stream until it
//!   would block, cutting frames out of the bytes received so far
//!   ([`frame_len`]: partial frames wait for the rest); a stream that ends
//!   or carries bytes that are not frames is reported lost once and
//!   dropped from the epoll set;
//! * **wait** is `epoll_wait` on the streams and an `eventfd` that
//!   [`wake`](Transport::wake) writes.
//!
//! Writes use `send(MSG_NOSIGNAL)`: a peer that closed its end is an
//! error, not a `SIGPIPE`.

use std::collections::VecDeque;
use std::io::{self, Read};
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::frame::{frame_len, Frame};
use super::{Incoming, SendError, Transport};
use crate::identity::ProcessId;

/// The epoll token of the wake-up eventfd (peers use their process id).
const WAKE: u64 = u64::MAX;
/// Bytes read per `read` call.
const CHUNK: usize = 64 * 1024;

/// One process's TCP connections to the others.
#[derive(Debug)]
pub(crate) struct TcpTransport {
    this: ProcessId,
    peers: Box<[Option<Peer>]>,
    epoll: OwnedFd,
    wake: OwnedFd,
    closed: AtomicBool,
}

#[derive(Debug)]
struct Peer {
    stream: TcpStream,
    out: Mutex<Output>,
    input: Mutex<Input>,
}

#[derive(Debug, Default)]
struct Output {
    /// Encoded frames not yet written, the first from `written` on.
    queue: VecDeque<Vec<u8>>,
    written: usize,
    /// The stream's epoll interest includes `EPOLLOUT`.
    watching_out: bool,
    /// A write failed: the connection is gone.
    failed: Option<String>,
}

#[derive(Debug, Default)]
struct Input {
    bytes: Vec<u8>,
    /// Where `read` puts what it reads (allocated once).
    chunk: Vec<u8>,
    /// Nothing more is read from this stream (reported lost).
    ended: bool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

impl TcpTransport {
    /// The transport of process `this`, whose connection to process `p` is
    /// `streams[p]` (`None` for `this`).
    ///
    /// # Errors
    ///
    /// `streams` has an entry for `this` or lacks one for another process,
    /// or the sockets or epoll cannot be set up.
    pub(crate) fn new(
        this: ProcessId,
        streams: Vec<Option<TcpStream>>,
    ) -> io::Result<TcpTransport> {
        let invalid = |what: String| io::Error::new(io::ErrorKind::InvalidInput, what);
        if this.get() as usize >= streams.len() {
            return Err(invalid(format!(
                "process {this} of a job of {} processes",
                streams.len()
            )));
        }
        // SAFETY: plain system calls; the returned descriptors are owned
        // right away.
        let epoll = unsafe { OwnedFd::from_raw_fd(cvt(libc::epoll_create1(libc::EPOLL_CLOEXEC))?) };
        // SAFETY: as above.
        let wake = unsafe {
            OwnedFd::from_raw_fd(cvt(libc::eventfd(
                0,
                libc::EFD_CLOEXEC | libc::EFD_NONBLOCK,
            ))?)
        };
        add(&epoll, wake.as_raw_fd(), libc::EPOLLIN as u32, WAKE)?;
        let mut peers = Vec::with_capacity(streams.len());
        for (p, stream) in streams.into_iter().enumerate() {
            match (p == this.get() as usize, stream) {
                (true, None) => peers.push(None),
                (true, Some(_)) => {
                    return Err(invalid(format!("a stream to process {this} itself")))
                }
                (false, None) => return Err(invalid(format!("no stream to process {p}"))),
                (false, Some(stream)) => {
                    stream.set_nonblocking(true)?;
                    stream.set_nodelay(true)?;
                    add(&epoll, stream.as_raw_fd(), libc::EPOLLIN as u32, p as u64)?;
                    peers.push(Some(Peer {
                        stream,
                        out: Mutex::default(),
                        input: Mutex::default(),
                    }));
                }
            }
        }
        Ok(TcpTransport {
            this,
            peers: peers.into(),
            epoll,
            wake,
            closed: AtomicBool::new(false),
        })
    }

    fn watch(&self, peer: &Peer, p: usize, out: bool) -> io::Result<()> {
        let mut events = libc::EPOLLIN as u32;
        if out {
            events |= libc::EPOLLOUT as u32;
        }
        let mut event = libc::epoll_event {
            events,
            u64: p as u64,
        };
        // SAFETY: both descriptors are open (owned by `self`); `event` is a
        // valid epoll_event.
        cvt(unsafe {
            libc::epoll_ctl(
                self.epoll.as_raw_fd(),
                libc::EPOLL_CTL_MOD,
                peer.stream.as_raw_fd(),
                &mut event,
            )
        })
        .map(drop)
    }

    /// Writes what the socket takes of `peer`'s queue; keeps the epoll
    /// interest in `EPOLLOUT` while bytes remain.
    fn flush(&self, peer: &Peer, p: usize, out: &mut Output) {
        while let Some(front) = out.queue.front() {
            let rest = &front[out.written..];
            // SAFETY: `rest` is a valid readable slice; the socket is open.
            let n = unsafe {
                libc::send(
                    peer.stream.as_raw_fd(),
                    rest.as_ptr().cast(),
                    rest.len(),
                    libc::MSG_NOSIGNAL,
                )
            };
            if n < 0 {
                let err = io::Error::last_os_error();
                match err.kind() {
                    io::ErrorKind::WouldBlock => break,
                    io::ErrorKind::Interrupted => continue,
                    _ => {
                        out.failed = Some(err.to_string());
                        out.queue.clear();
                        break;
                    }
                }
            }
            out.written += n as usize;
            if out.written == front.len() {
                out.queue.pop_front();
                out.written = 0;
            }
        }
        let want = !out.queue.is_empty();
        if want != out.watching_out && out.failed.is_none() && self.watch(peer, p, want).is_ok() {
            out.watching_out = want;
        }
    }

    /// Reads what `peer` sent and hands its complete frames to `sink`.
    fn read(&self, peer: &Peer, p: usize, sink: &mut dyn FnMut(Incoming)) -> usize {
        let mut input = lock(&peer.input);
        if input.ended {
            return 0;
        }
        let from = ProcessId::new(p as u32);
        let mut handed = 0;
        let mut chunk = std::mem::take(&mut input.chunk);
        chunk.resize(CHUNK, 0);
        // Why the stream ends (after the frames it carried before).
        let mut closed: Option<String> = None;
        loop {
            match (&peer.stream).read(&mut chunk) {
                Ok(0) => {
                    closed = Some("the connection was closed".into());
                    break;
                }
                Ok(n) => input.bytes.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    closed = Some(e.to_string());
                    break;
                }
            }
        }
        let mut end: Option<String> = None;
        let mut at = 0;
        while end.is_none() {
            match frame_len(&input.bytes[at..]) {
                Ok(Some(len)) if input.bytes.len() - at >= len => {
                    match Frame::decode(&input.bytes[at..at + len]) {
                        Ok(frame) => {
                            handed += 1;
                            sink(Incoming::Frame(from, frame));
                        }
                        Err(err) => end = Some(format!("a bad frame: {err}")),
                    }
                    at += len;
                }
                Ok(_) => break,
                Err(err) => end = Some(format!("a bad frame: {err}")),
            }
        }
        input.chunk = chunk;
        let end = end.or(closed);
        input.bytes.drain(..at);
        if let Some(why) = end {
            input.ended = true;
            input.bytes = Vec::new();
            // SAFETY: both descriptors are open; a null event is allowed
            // for EPOLL_CTL_DEL.
            unsafe {
                libc::epoll_ctl(
                    self.epoll.as_raw_fd(),
                    libc::EPOLL_CTL_DEL,
                    peer.stream.as_raw_fd(),
                    std::ptr::null_mut(),
                )
            };
            handed += 1;
            sink(Incoming::Lost(from, why));
        }
        handed
    }
}

fn add(epoll: &OwnedFd, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
    let mut event = libc::epoll_event { events, u64: token };
    // SAFETY: both descriptors are open; `event` is valid.
    cvt(unsafe { libc::epoll_ctl(epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut event) })
        .map(drop)
}

impl Transport for TcpTransport {
    fn this(&self) -> ProcessId {
        self.this
    }

    fn processes(&self) -> u32 {
        self.peers.len() as u32
    }

    fn send(&self, to: ProcessId, frame: &Frame) -> Result<(), SendError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(SendError::Closed);
        }
        if frame.payload.len() > super::frame::MAX_PAYLOAD {
            return Err(SendError::TooLarge(frame.payload.len()));
        }
        let p = to.get() as usize;
        let peer = self
            .peers
            .get(p)
            .and_then(Option::as_ref)
            .ok_or_else(|| SendError::Lost(to, "no such peer".into()))?;
        let mut out = lock(&peer.out);
        if let Some(why) = &out.failed {
            return Err(SendError::Lost(to, why.clone()));
        }
        out.queue.push_back(frame.to_bytes());
        if out.queue.len() == 1 {
            self.flush(peer, p, &mut out);
        }
        match &out.failed {
            Some(why) => Err(SendError::Lost(to, why.clone())),
            None => Ok(()),
        }
    }

    fn poll(&self, sink: &mut dyn FnMut(Incoming)) -> usize {
        let mut handed = 0;
        for (p, peer) in self.peers.iter().enumerate() {
            let Some(peer) = peer else { continue };
            {
                let mut out = lock(&peer.out);
                if !out.queue.is_empty() {
                    self.flush(peer, p, &mut out);
                }
            }
            handed += self.read(peer, p, sink);
        }
        handed
    }

    fn wait(&self, timeout: Option<Duration>) {
        let ms = timeout.map_or(-1, |t| t.as_millis().min(i32::MAX as u128) as i32);
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 8];
        // SAFETY: `events` has room for 8 entries; the epoll fd is open.
        let n = unsafe { libc::epoll_wait(self.epoll.as_raw_fd(), events.as_mut_ptr(), 8, ms) };
        if n > 0 && events[..n as usize].iter().any(|e| e.u64 == WAKE) {
            let mut count = 0u64;
            // SAFETY: reads 8 bytes into `count` from the open eventfd
            // (non-blocking: resets it).
            unsafe { libc::read(self.wake.as_raw_fd(), (&mut count as *mut u64).cast(), 8) };
        }
    }

    fn wake(&self) {
        let one = 1u64;
        // SAFETY: writes 8 bytes from `one` to the open eventfd.
        unsafe { libc::write(self.wake.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    fn close(&self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        for (p, peer) in self.peers.iter().enumerate() {
            let Some(peer) = peer else { continue };
            loop {
                let mut out = lock(&peer.out);
                self.flush(peer, p, &mut out);
                if out.queue.is_empty() || out.failed.is_some() || Instant::now() >= deadline {
                    break;
                }
                drop(out);
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        self.closed.store(true, Ordering::Release);
        for peer in self.peers.iter().flatten() {
            let _ = peer.stream.shutdown(Shutdown::Write);
        }
    }
}

/// Connected stream pairs over the loopback interface for a job of
/// `processes` processes: entry `p` is process `p`'s streams, by peer.
pub(crate) fn loopback_mesh(processes: usize) -> io::Result<Vec<Vec<Option<TcpStream>>>> {
    let mut mesh: Vec<Vec<Option<TcpStream>>> = (0..processes)
        .map(|_| (0..processes).map(|_| None).collect())
        .collect();
    let pairs = (0..processes).flat_map(|a| (a + 1..processes).map(move |b| (a, b)));
    for (a, b) in pairs {
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
        let near = TcpStream::connect(listener.local_addr()?)?;
        let (far, _) = listener.accept()?;
        mesh[a][b] = Some(near);
        mesh[b][a] = Some(far);
    }
    Ok(mesh)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::frame::Kind;

    fn transports(n: usize) -> Vec<TcpTransport> {
        loopback_mesh(n)
            .unwrap()
            .into_iter()
            .enumerate()
            .map(|(p, streams)| TcpTransport::new(ProcessId::new(p as u32), streams).unwrap())
            .collect()
    }

    /// Polls `t` (waiting in between) until `n` items arrived.
    fn receive(t: &TcpTransport, n: usize) -> Vec<Incoming> {
        let mut got = Vec::new();
        while got.len() < n {
            t.poll(&mut |i| got.push(i));
            if got.len() < n {
                t.wait(Some(Duration::from_millis(100)));
            }
        }
        got
    }

    #[test]
    fn large_frames_cross_in_order_through_partial_writes() {
        let t = transports(2);
        // Far more than the socket buffers take at once: most of it waits
        // in the queue and leaves through the receiver's polls.
        let big = (0..8u64).map(|i| {
            let mut f = Frame::control(Kind::Ack);
            f.id = i;
            f.payload = vec![i as u8; 3 << 20];
            f
        });
        for f in big {
            t[0].send(ProcessId::new(1), &f).unwrap();
        }
        let mut ids = Vec::new();
        std::thread::scope(|s| {
            s.spawn(|| {
                // The sender's side flushes while the receiver reads.
                while !lock(&t[0].peers[1].as_ref().unwrap().out).queue.is_empty() {
                    t[0].poll(&mut |_| {});
                    t[0].wait(Some(Duration::from_millis(10)));
                }
            });
            for item in receive(&t[1], 8) {
                match item {
                    Incoming::Frame(p, f) => {
                        assert_eq!(p.get(), 0);
                        assert!(f.payload.iter().all(|&b| b == f.id as u8));
                        ids.push(f.id);
                    }
                    Incoming::Lost(_, why) => panic!("lost: {why}"),
                }
            }
        });
        assert_eq!(ids, (0..8).collect::<Vec<_>>());
    }

    #[test]
    fn garbage_and_a_closed_peer_are_reported_lost() {
        let mut mesh = loopback_mesh(3).unwrap();
        let mut raw = mesh[1][0].take().unwrap();
        let t0 = TcpTransport::new(ProcessId::new(0), std::mem::take(&mut mesh[0])).unwrap();
        std::io::Write::write_all(&mut raw, &[0xffu8; 64]).unwrap();
        let t2 = TcpTransport::new(ProcessId::new(2), std::mem::take(&mut mesh[2])).unwrap();
        t2.close(Duration::from_secs(1));
        drop(t2);
        let got = receive(&t0, 2);
        let lost: Vec<String> = got
            .iter()
            .map(|i| match i {
                Incoming::Lost(p, why) => format!("{p}: {why}"),
                Incoming::Frame(..) => panic!("no frame was sent"),
            })
            .collect();
        assert!(
            lost.iter().any(|l| l.starts_with("1: a bad frame")),
            "{lost:?}"
        );
        assert!(
            lost.iter()
                .any(|l| l.starts_with("2: the connection was closed")),
            "{lost:?}"
        );
        // Reported once, then silent.
        assert_eq!(t0.poll(&mut |_| panic!("reported once")), 0);
    }

    #[test]
    fn a_wake_ends_a_wait() {
        let t = transports(2);
        std::thread::scope(|s| {
            s.spawn(|| t[1].wait(None));
            t[1].wake();
        });
    }
}
