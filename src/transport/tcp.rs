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
//! * **poll** flushes the output queues and reads the streams that epoll
//!   reports writable or readable (a zero-timeout `epoll_wait`), reading
//!   until it would block, cutting frames out of the bytes received so far
//!   ([`frame_len`]: partial frames wait for the rest); a stream that ends
//!   or carries bytes that are not frames is reported lost once and
//!   dropped from the epoll set;
//! * **wait** is `epoll_wait` on the streams and an `eventfd` that
//!   [`wake`](Transport::wake) writes;
//! * **large payloads** (at least [`LARGE`] bytes) never pass through the
//!   input buffer: a borrowed payload is written from its sender's memory
//!   ([`Transport::send_borrowed`]; the next poll hands back
//!   [`Incoming::Sent`] once its last byte is written), and when a frame's
//!   header arrives the sink may give a [`Place`] (the receive buffer) that
//!   the rest is read into; otherwise it is read into the frame's own
//!   buffer. So a rendezvous message crosses with the kernel's copies only.
//!
//! Writes use `send(MSG_NOSIGNAL)`: a peer that closed its end is an
//! error, not a `SIGPIPE`.
//!
//! ## Design note: a small send buffer
//!
//! Each stream's send buffer is set to [`SNDBUF`] (the kernel doubles it
//! and stops autotuning it; `MYRIAD_TCP_SNDBUF` sets another size in
//! bytes, `0` leaves the kernel's autotuning). Autotuned on loopback it
//! grows to 4 MiB, and a large payload then crosses in megabyte writes
//! whose bytes have left the caches by the time the receiver copies them
//! out; with half a megabyte in flight the sender's copy in and the
//! receiver's copy out overlap on data still in cache. 16 MiB one-way
//! between 2 processes here went from 7.4–13.5 ms to 3.6–4.9 ms (load
//! ~10, 3 alternating rounds). 512 KiB in flight still fills a link of
//! 10 Gb/s at 400 µs round trips; a longer or faster path can ask for
//! more.

use std::collections::VecDeque;
use std::io::{self, Read};
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::epoll::{Doorbell, Epoll};
use super::frame::{self, Frame, Front};
use super::{Borrowed, Chunk, Incoming, Place, SendError, Sink, Transport};
use crate::identity::ProcessId;

/// The epoll token of the wake-up eventfd (peers use their process id).
const WAKE: u64 = u64::MAX;
/// Bytes read per `read` call.
const CHUNK: usize = 64 * 1024;

/// Payloads at least this large travel in their own buffers: written from
/// the frame's buffer ([`Transport::send_owned`]) and read straight into the
/// buffer the received frame keeps, so the bytes are not copied through the
/// chunk and the input buffer (nor the input buffer grown and moved).
const LARGE: usize = 256 * 1024;

/// The send buffer asked for each stream (`SO_SNDBUF`, which the kernel
/// doubles): see the design note.
const SNDBUF: usize = 256 * 1024;

/// The send buffer to ask for: [`SNDBUF`], or `MYRIAD_TCP_SNDBUF` (bytes;
/// `None` for `0`: the kernel's autotuning).
fn sndbuf() -> io::Result<Option<libc::c_int>> {
    sndbuf_from(std::env::var_os("MYRIAD_TCP_SNDBUF"))
}

/// [`sndbuf`] for the variable's value `v`.
fn sndbuf_from(v: Option<std::ffi::OsString>) -> io::Result<Option<libc::c_int>> {
    let Some(v) = v else {
        return Ok(Some(SNDBUF as libc::c_int));
    };
    match v.to_str().map(str::trim).map(str::parse::<libc::c_int>) {
        Some(Ok(0)) => Ok(None),
        Some(Ok(n)) if n > 0 => Ok(Some(n)),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "MYRIAD_TCP_SNDBUF={v:?} is not a size in bytes (e.g. 262144; 0 leaves the \
                 kernel's autotuning)"
            ),
        )),
    }
}

/// Asks for a send buffer of `bytes` on `stream`.
fn set_sndbuf(stream: &TcpStream, bytes: libc::c_int) -> io::Result<()> {
    // SAFETY: the socket is open; the option value is a `c_int` that lives
    // for the call, and its size is passed.
    let rc = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_SNDBUF,
            (&bytes as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// One process's TCP connections to the others.
#[derive(Debug)]
pub(crate) struct TcpTransport {
    this: ProcessId,
    peers: Box<[Option<Peer>]>,
    epoll: Epoll,
    wake: Doorbell,
    closed: AtomicBool,
    /// Borrowed payloads written whole, by peer and token, for the next
    /// poll to hand back ([`Incoming::Sent`]).
    sent: Mutex<Vec<(ProcessId, u64)>>,
}

#[derive(Debug)]
struct Peer {
    stream: TcpStream,
    out: Mutex<Output>,
    input: Mutex<Input>,
}

#[derive(Debug, Default)]
struct Output {
    /// Encoded frames (or parts of frames) not yet written, the first from
    /// `written` on.
    queue: VecDeque<Chunk>,
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
    /// A frame with a [`LARGE`] payload being read.
    large: Option<Large>,
    /// Nothing more is read from this stream (reported lost).
    ended: bool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
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
        let sndbuf = sndbuf()?;
        let epoll = Epoll::new()?;
        let wake = Doorbell::new()?;
        epoll.add(wake.fd(), libc::EPOLLIN as u32, WAKE)?;
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
                    if let Some(bytes) = sndbuf {
                        set_sndbuf(&stream, bytes)?;
                    }
                    epoll.add(stream.as_raw_fd(), libc::EPOLLIN as u32, p as u64)?;
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
            sent: Mutex::default(),
        })
    }

    /// The epoll descriptor: a routing transport (`route.rs`) waits on it
    /// among others.
    pub(crate) fn epoll_fd(&self) -> RawFd {
        self.epoll.fd()
    }

    fn watch(&self, peer: &Peer, p: usize, out: bool) -> io::Result<()> {
        let mut events = libc::EPOLLIN as u32;
        if out {
            events |= libc::EPOLLOUT as u32;
        }
        self.epoll.modify(peer.stream.as_raw_fd(), events, p as u64)
    }

    /// Writes what the socket takes of `peer`'s queue; keeps the epoll
    /// interest in `EPOLLOUT` while bytes remain. Returns whether it wrote
    /// the last byte of a borrowed payload (whose token is then in `sent`).
    fn flush(&self, peer: &Peer, p: usize, out: &mut Output) -> bool {
        let mut lent_back = false;
        while let Some(front) = out.queue.front() {
            let rest = &front.bytes()[out.written..];
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
            if out.written == front.bytes().len() {
                if let Some(Chunk::Borrowed(_, token)) = out.queue.pop_front() {
                    lock(&self.sent).push((ProcessId::new(p as u32), token));
                    lent_back = true;
                }
                out.written = 0;
            }
        }
        let want = !out.queue.is_empty();
        if want != out.watching_out && out.failed.is_none() && self.watch(peer, p, want).is_ok() {
            out.watching_out = want;
        }
        lent_back
    }

    /// Reads what `peer` sent and hands its complete frames to `sink`.
    fn read(&self, peer: &Peer, p: usize, sink: &mut dyn Sink) -> usize {
        let mut guard = lock(&peer.input);
        let input = &mut *guard;
        if input.ended {
            return 0;
        }
        let from = ProcessId::new(p as u32);
        let mut handed = 0;
        let mut chunk = std::mem::take(&mut input.chunk);
        chunk.resize(CHUNK, 0);
        // Why the stream carries nothing more (after the frames it carried
        // before).
        let mut end: Option<String> = None;
        loop {
            if let Some(large) = &mut input.large {
                let want = large.len - large.got();
                match large.fill(&peer.stream, &mut chunk) {
                    Ok(0) if want > 0 => {
                        end = Some("the connection was closed".into());
                        break;
                    }
                    Ok(_) => {
                        if large.got() == large.len {
                            let large = input.large.take().expect("a large frame");
                            match large.finish() {
                                Ok(incoming) => {
                                    handed += 1;
                                    sink.take(incoming.into_incoming(from));
                                }
                                Err(err) => {
                                    end = Some(format!("a bad frame: {err}"));
                                    break;
                                }
                            }
                        }
                        continue;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        end = Some(e.to_string());
                        break;
                    }
                }
            }
            let short = match (&peer.stream).read(&mut chunk) {
                Ok(0) => {
                    end = Some("the connection was closed".into());
                    break;
                }
                Ok(n) => {
                    input.bytes.extend_from_slice(&chunk[..n]);
                    n < chunk.len()
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    end = Some(e.to_string());
                    break;
                }
            };
            if let Err(why) = hand_frames(input, from, &mut handed, sink) {
                end = Some(why);
                break;
            }
            // A short read emptied the socket: the read that would find it
            // so (`EAGAIN`) is skipped, a system call per small message.
            // Epoll is level-triggered, so bytes that arrive meanwhile are
            // reported at the next poll.
            if short {
                break;
            }
        }
        input.chunk = chunk;
        if let Some(why) = end {
            input.ended = true;
            input.bytes = Vec::new();
            input.large = None;
            let _ = self.epoll.delete(peer.stream.as_raw_fd());
            handed += 1;
            sink.take(Incoming::Lost(from, why));
        }
        handed
    }
}

/// A frame with a [`LARGE`] payload, read into its own buffer or into a
/// place the sink gave.
#[derive(Debug)]
struct Large {
    /// The payload's length.
    len: usize,
    into: Dest,
}

#[derive(Debug)]
enum Dest {
    Own {
        /// The frame's header and signature.
        head: Vec<u8>,
        /// The payload read so far (its capacity is its whole length).
        payload: Vec<u8>,
    },
    Placed {
        /// The frame, its payload empty.
        frame: Frame,
        /// `None` once withdrawn: the rest of the payload is dropped.
        place: Option<Place>,
        got: usize,
    },
}

/// A large frame read whole.
enum Whole {
    Frame(Frame),
    Placed(Frame, usize),
}

impl Whole {
    fn into_incoming(self, from: ProcessId) -> Incoming {
        match self {
            Whole::Frame(frame) => Incoming::Frame(from, frame),
            Whole::Placed(frame, len) => Incoming::Placed(from, frame, len),
        }
    }
}

impl Large {
    /// Payload bytes read so far.
    fn got(&self) -> usize {
        match &self.into {
            Dest::Own { payload, .. } => payload.len(),
            Dest::Placed { got, .. } => *got,
        }
    }

    /// Reads more of the payload from `stream` (through `chunk` when it is
    /// dropped).
    fn fill(&mut self, stream: &TcpStream, chunk: &mut [u8]) -> io::Result<usize> {
        let want = self.len - self.got();
        match &mut self.into {
            Dest::Own { payload, .. } => recv_into(stream, payload, want),
            Dest::Placed {
                place: Some(place),
                got,
                ..
            } => {
                let (at, room) = place.rest(*got);
                // SAFETY: `at` is `room` writable bytes of the place, which
                // is the transport's until the frame is handed over or the
                // place withdrawn (`Place::new`'s contract), and `recv`
                // writes at most `want` ≤ `room` of them.
                let n = cvt_size(unsafe {
                    libc::recv(stream.as_raw_fd(), at.cast(), want.min(room), 0)
                })?;
                *got += n;
                Ok(n)
            }
            Dest::Placed {
                place: None, got, ..
            } => {
                let n = (&*stream).read(&mut chunk[..want.min(CHUNK)])?;
                *got += n;
                Ok(n)
            }
        }
    }

    /// The frame, once its payload is all there.
    fn finish(self) -> Result<Whole, super::frame::FrameError> {
        match self.into {
            Dest::Own { head, payload } => Frame::decode_parts(&head, payload).map(Whole::Frame),
            Dest::Placed { frame, .. } => Ok(Whole::Placed(frame, self.len)),
        }
    }
}

fn cvt_size(ret: isize) -> io::Result<usize> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret as usize)
    }
}

/// Reads at most `want` bytes from `stream` into the spare capacity of
/// `buf` (reserving it first), without initialising it before.
fn recv_into(stream: &TcpStream, buf: &mut Vec<u8>, want: usize) -> io::Result<usize> {
    buf.reserve(want);
    let spare = buf.spare_capacity_mut();
    let n = want.min(spare.len());
    // SAFETY: `spare` is at least `n` bytes of `buf`'s allocation, writable
    // and not aliased; `recv` writes at most `n` bytes into it.
    let got = unsafe { libc::recv(stream.as_raw_fd(), spare.as_mut_ptr().cast(), n, 0) };
    if got < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `recv` initialised the first `got` (≤ `n`) bytes after the
    // vector's length.
    unsafe { buf.set_len(buf.len() + got as usize) };
    Ok(got as usize)
}

/// Hands the complete frames at the start of `input.bytes` to `sink` and
/// removes them; a frame with a [`LARGE`] payload whose header is there
/// moves to `input.large` (with the payload bytes already read), where the
/// rest of its payload is read straight into its buffer. An error names
/// why the stream carries no more frames.
fn hand_frames(
    input: &mut Input,
    from: ProcessId,
    handed: &mut usize,
    sink: &mut dyn Sink,
) -> Result<(), String> {
    let mut at = 0;
    let result = loop {
        match frame::front(&input.bytes[at..], LARGE) {
            Err(err) => break Err(format!("a bad frame: {err}")),
            Ok(Front::Wanting) => break Ok(()),
            Ok(Front::Whole(frame, len)) => {
                *handed += 1;
                sink.take(Incoming::Frame(from, frame));
                at += len;
            }
            Ok(Front::Large { head, already, len }) => {
                // A data frame may go straight where its receive wants it.
                let into = match super::place_large(sink, from, head, len, already) {
                    Some((frame, place)) => Dest::Placed {
                        frame,
                        place: Some(place),
                        got: already.len(),
                    },
                    None => {
                        let mut payload = Vec::with_capacity(len);
                        payload.extend_from_slice(already);
                        Dest::Own {
                            head: head.to_vec(),
                            payload,
                        }
                    }
                };
                input.large = Some(Large { len, into });
                at = input.bytes.len();
                break Ok(());
            }
        }
    };
    input.bytes.drain(..at);
    result
}

impl TcpTransport {
    /// Refuses what cannot be sent: after `close`, and a frame too large.
    fn check(&self, frame: &Frame) -> Result<(), SendError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(SendError::Closed);
        }
        if frame.payload.len() > super::frame::MAX_PAYLOAD {
            return Err(SendError::TooLarge(frame.payload.len()));
        }
        Ok(())
    }

    /// Queues the buffers of one frame for process `to`, in order, and
    /// writes what the socket takes if nothing was queued before them.
    fn enqueue<const N: usize>(&self, to: ProcessId, bufs: [Chunk; N]) -> Result<(), SendError> {
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
        let idle = out.queue.is_empty();
        out.queue.extend(bufs);
        if idle && self.flush(peer, p, &mut out) {
            // Whoever polls next hands the `Sent` back.
            self.wake();
        }
        match &out.failed {
            Some(why) => Err(SendError::Lost(to, why.clone())),
            None => Ok(()),
        }
    }
}

impl Transport for TcpTransport {
    fn this(&self) -> ProcessId {
        self.this
    }

    fn processes(&self) -> u32 {
        self.peers.len() as u32
    }

    fn send(&self, to: ProcessId, frame: &Frame) -> Result<(), SendError> {
        self.check(frame)?;
        self.enqueue(to, [Chunk::Owned(frame.to_bytes())])
    }

    fn send_owned(&self, to: ProcessId, frame: Frame) -> Result<(), SendError> {
        if frame.payload.len() < LARGE {
            return self.send(to, &frame);
        }
        let mut head = Vec::new();
        self.check(&frame)?;
        frame.encode_head(&mut head);
        self.enqueue(to, [Chunk::Owned(head), Chunk::Owned(frame.payload)])
    }

    fn send_borrowed(
        &self,
        to: ProcessId,
        frame: Frame,
        data: Borrowed,
        token: u64,
    ) -> Result<bool, SendError> {
        let len = data.bytes().len();
        self.check(&frame)?;
        if len > super::frame::MAX_PAYLOAD {
            return Err(SendError::TooLarge(len));
        }
        let mut head = Vec::new();
        frame.encode_head_for(len, &mut head);
        self.enqueue(to, [Chunk::Owned(head), Chunk::Borrowed(data, token)])
            .map(|()| false)
    }

    fn withdraw_send(&self, to: ProcessId, token: u64) {
        let Some(peer) = self.peers.get(to.get() as usize).and_then(Option::as_ref) else {
            return;
        };
        let mut out = lock(&peer.out);
        let written = out.written;
        for (i, chunk) in out.queue.iter_mut().enumerate() {
            if let Chunk::Borrowed(data, t) = chunk {
                if *t == token {
                    // What is not written yet leaves from a copy: the frame
                    // stays whole on the stream.
                    let from = if i == 0 { written } else { 0 };
                    *chunk = Chunk::Owned(data.bytes()[from..].to_vec());
                    if i == 0 {
                        out.written = 0;
                    }
                    return;
                }
            }
        }
    }

    fn withdraw_place(&self, from: ProcessId, id: u64) {
        let Some(peer) = self.peers.get(from.get() as usize).and_then(Option::as_ref) else {
            return;
        };
        let mut input = lock(&peer.input);
        if let Some(Large {
            into: Dest::Placed { frame, place, .. },
            ..
        }) = &mut input.large
        {
            if frame.id == id {
                *place = None;
            }
        }
    }

    fn holds_completions(&self) -> bool {
        !lock(&self.sent).is_empty()
    }

    fn busy(&self) -> bool {
        self.peers.iter().flatten().any(|peer| {
            // A lock held by a poller counts as busy.
            let out = peer.out.try_lock().map(|out| !out.queue.is_empty());
            let input = peer.input.try_lock().map(|input| input.large.is_some());
            out.unwrap_or(true) || input.unwrap_or(true)
        })
    }

    fn poll(&self, sink: &mut dyn Sink) -> usize {
        let mut handed = 0;
        // A queue whose stream is not watched for `EPOLLOUT` (its epoll
        // update failed) is flushed on every poll instead.
        for (p, peer) in self.peers.iter().enumerate() {
            let Some(peer) = peer else { continue };
            let mut out = lock(&peer.out);
            if !out.queue.is_empty() && !out.watching_out {
                self.flush(peer, p, &mut out);
            }
        }
        // Only the streams epoll reports ready: asking it does not take the
        // sockets' locks, which a `recv` (or a `send` that would block) on
        // every stream at every poll would, in the way of the kernel
        // delivering segments and acknowledgements on loopback.
        const BATCH: usize = 16;
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; BATCH];
        loop {
            // A zero timeout does not block.
            let ready = self.epoll.ready(&mut events, 0);
            for event in ready {
                let p = event.u64 as usize;
                let Some(Some(peer)) = self.peers.get(p) else {
                    continue;
                };
                if event.events & libc::EPOLLOUT as u32 != 0 {
                    let mut out = lock(&peer.out);
                    if !out.queue.is_empty() {
                        self.flush(peer, p, &mut out);
                    }
                }
                if event.events & !(libc::EPOLLOUT as u32) != 0 {
                    handed += self.read(peer, p, sink);
                }
            }
            if ready.len() < BATCH {
                break;
            }
        }
        let sent = std::mem::take(&mut *lock(&self.sent));
        handed += sent.len();
        for (to, token) in sent {
            sink.take(Incoming::Sent(to, token));
        }
        handed
    }

    fn wait(&self, timeout: Option<Duration>) {
        let ms = timeout.map_or(-1, |t| t.as_millis().min(i32::MAX as u128) as i32);
        self.epoll.wait(&self.wake, WAKE, ms);
    }

    fn wake(&self) {
        self.wake.ring();
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
                    other => panic!("nothing was placed or borrowed: {other:?}"),
                }
            }
        });
        assert_eq!(ids, (0..8).collect::<Vec<_>>());
    }

    /// Large payloads leave from their own buffers (`send_owned`) and are
    /// read straight into the received frame's buffer; small ones around
    /// them go through the input buffer: every byte arrives, in order.
    #[test]
    fn owned_and_large_payloads_arrive_whole_and_in_order() {
        let t = transports(2);
        let sizes = [1, LARGE - 1, LARGE, 3, LARGE + 7, 5 << 20, 0, 2 * LARGE];
        let frames: Vec<Frame> = sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                let mut f = Frame::control(Kind::Ack);
                f.id = i as u64;
                f.payload = (0..n).map(|j| (i * 31 + j * 7) as u8).collect();
                f
            })
            .collect();
        for (i, f) in frames.iter().enumerate() {
            if i % 2 == 0 {
                t[0].send_owned(ProcessId::new(1), f.clone()).unwrap();
            } else {
                t[0].send(ProcessId::new(1), f).unwrap();
            }
        }
        let mut got = Vec::new();
        std::thread::scope(|s| {
            s.spawn(|| {
                while !lock(&t[0].peers[1].as_ref().unwrap().out).queue.is_empty() {
                    t[0].poll(&mut |_| {});
                    t[0].wait(Some(Duration::from_millis(10)));
                }
            });
            for item in receive(&t[1], sizes.len()) {
                match item {
                    Incoming::Frame(_, f) => got.push(f),
                    Incoming::Lost(_, why) => panic!("lost: {why}"),
                    other => panic!("nothing was placed or borrowed: {other:?}"),
                }
            }
        });
        assert_eq!(got.len(), frames.len());
        for (a, b) in got.iter().zip(&frames) {
            assert_eq!(a.id, b.id);
            assert!(a.payload == b.payload, "frame {} differs", a.id);
        }
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
                other => panic!("only losses: {other:?}"),
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
    fn the_send_buffer_size_is_read_and_checked() {
        let v = |s: &str| Some(std::ffi::OsString::from(s));
        assert_eq!(sndbuf_from(None).unwrap(), Some(SNDBUF as libc::c_int));
        assert_eq!(sndbuf_from(v(" 65536 ")).unwrap(), Some(65536));
        assert_eq!(sndbuf_from(v("0")).unwrap(), None);
        for bad in ["-1", "1M", ""] {
            let err = sndbuf_from(v(bad)).unwrap_err().to_string();
            assert!(err.contains("MYRIAD_TCP_SNDBUF"), "{err}");
        }
        // A stream gets it (the kernel doubles what it is asked for).
        let t = transports(2);
        let stream = &t[0].peers[1].as_ref().unwrap().stream;
        let mut got: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: the socket is open; `got` and `len` live for the call.
        let rc = unsafe {
            libc::getsockopt(
                stream.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_SNDBUF,
                (&mut got as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        assert_eq!(rc, 0);
        // Asked sizes are capped at `net.core.wmem_max`.
        let max = std::fs::read_to_string("/proc/sys/net/core/wmem_max")
            .ok()
            .and_then(|m| m.trim().parse::<usize>().ok())
            .unwrap_or(usize::MAX);
        assert_eq!(got as usize, 2 * SNDBUF.min(max));
    }

    #[test]
    fn a_wake_ends_a_wait() {
        let t = transports(2);
        std::thread::scope(|s| {
            s.spawn(|| t[1].wait(None));
            t[1].wake();
        });
    }

    /// A sink that places data frames into `buf` (while `place` is set)
    /// and records what it is handed.
    struct Placer<'a> {
        buf: Option<&'a mut Vec<u8>>,
        got: Vec<Incoming>,
    }

    impl Sink for Placer<'_> {
        fn take(&mut self, incoming: Incoming) {
            self.got.push(incoming);
        }

        fn place(&mut self, _from: ProcessId, _head: &Frame, len: usize) -> Option<Place> {
            let buf = self.buf.take()?;
            assert!(buf.len() >= len);
            // SAFETY: the test keeps `buf` borrowed (and untouched) until
            // the frame is handed over or the place withdrawn.
            Some(unsafe { Place::new(buf.as_mut_ptr(), len) })
        }
    }

    fn data_frame(id: u64) -> Frame {
        let mut f = Frame::control(Kind::Data);
        f.id = id;
        f
    }

    /// Polls `t` with `sink` until `n` items arrived, flushing `sender`;
    /// returns what the sender's polls found.
    fn drain(
        t: &TcpTransport,
        sender: &TcpTransport,
        sink: &mut Placer<'_>,
        n: usize,
    ) -> Vec<Incoming> {
        let mut at_sender = Vec::new();
        while sink.got.len() < n {
            sender.poll(&mut |i| at_sender.push(i));
            t.poll(sink);
        }
        at_sender
    }

    #[test]
    fn a_borrowed_payload_lands_in_its_place_without_a_frame_buffer() {
        let t = transports(2);
        let data: Vec<u8> = (0..(4usize << 20)).map(|i| (i % 251) as u8).collect();
        // SAFETY: `data` outlives the transfer (checked through `Sent`) and
        // is not written meanwhile.
        let lent = unsafe { Borrowed::new(data.as_ptr(), data.len()) };
        let done = t[0]
            .send_borrowed(ProcessId::new(1), data_frame(7), lent, 99)
            .unwrap();
        assert!(!done, "4 MiB does not fit the socket at once");
        let mut buf = vec![0u8; data.len() + 10];
        let mut sink = Placer {
            buf: Some(&mut buf),
            got: Vec::new(),
        };
        let mut sent = drain(&t[1], &t[0], &mut sink, 1);
        match &sink.got[0] {
            Incoming::Placed(p, f, len) => {
                assert_eq!((p.get(), f.id, *len), (0, 7, data.len()));
                assert!(f.payload.is_empty());
            }
            other => panic!("not placed: {other:?}"),
        }
        assert_eq!(&buf[..data.len()], &data[..]);
        // The sender learns that its buffer is free.
        while sent.is_empty() {
            t[0].poll(&mut |i| sent.push(i));
        }
        assert!(matches!(sent[0], Incoming::Sent(p, 99) if p.get() == 1));
    }

    #[test]
    fn a_sent_not_handed_back_yet_is_a_held_completion() {
        // A payload that fits the socket is written whole by `send_borrowed`
        // itself; its `Sent` waits for the next poll. Until then the sender
        // is about to run, so the process must not answer a termination
        // wave as idle (`Remote::idle` asks).
        let t = transports(2);
        let data = vec![5u8; 1024];
        // SAFETY: `data` outlives the transfer (checked through `Sent`) and
        // is not written meanwhile.
        let lent = unsafe { Borrowed::new(data.as_ptr(), data.len()) };
        let done = t[0]
            .send_borrowed(ProcessId::new(1), data_frame(3), lent, 42)
            .unwrap();
        assert!(!done);
        assert!(t[0].holds_completions(), "a Sent waits for the next poll");
        let mut sent = Vec::new();
        t[0].poll(&mut |i| sent.push(i));
        assert!(matches!(sent[..], [Incoming::Sent(p, 42)] if p.get() == 1));
        assert!(!t[0].holds_completions());
    }

    #[test]
    fn withdrawn_memory_is_not_touched_and_the_stream_stays_whole() {
        let t = transports(2);
        let len = 16usize << 20;
        let mut data = vec![5u8; len];
        // SAFETY: withdrawn below before `data` changes.
        let lent = unsafe { Borrowed::new(data.as_ptr(), len) };
        t[0].send_borrowed(ProcessId::new(1), data_frame(1), lent, 1)
            .unwrap();
        let mut next = data_frame(2);
        next.payload = vec![6u8; 300 << 10];
        t[0].send(ProcessId::new(1), &next).unwrap();
        // Read a part into the place, then its owner goes.
        let mut buf = vec![0u8; len];
        let mut sink = Placer {
            buf: Some(&mut buf),
            got: Vec::new(),
        };
        t[1].poll(&mut sink);
        t[1].withdraw_place(ProcessId::new(0), 1);
        drop(sink);
        let seen = buf.iter().filter(|&&b| b == 5).count();
        // The sender's owner goes too: what was not written leaves from a
        // copy, so overwriting the buffer changes nothing on the wire.
        t[0].withdraw_send(ProcessId::new(1), 1);
        data.fill(9);
        buf.fill(0);
        let mut sink = Placer {
            buf: None,
            got: Vec::new(),
        };
        drain(&t[1], &t[0], &mut sink, 2);
        assert!(buf.iter().all(|&b| b == 0), "written after withdrawal");
        assert!(
            seen > 0 && seen < len,
            "{seen} bytes placed before the withdrawal"
        );
        match &sink.got[..] {
            [Incoming::Placed(_, a, n), Incoming::Frame(_, b)] => {
                assert_eq!((a.id, *n, b.id), (1, len, 2));
                assert!(b.payload.iter().all(|&x| x == 6));
            }
            other => panic!("{other:?}"),
        }
    }
}
