//! The links of one process to its peers on this host: a producer into
//! each peer's segment, a consumer of each peer's ring in this process's
//! segment, and the records the rings carry.
//!
//! ## What a ring carries
//!
//! A byte stream, like a TCP connection: frames as `transport::frame`
//! encodes them, and three records of this transport's own, told apart
//! from frames by their magic (bytes 4..6, where a frame has its own):
//!
//! ```text
//! offset  size  field
//!      0     4  length of the rest of the record
//!      4     2  RECORD_MAGIC ("Sm")
//!      6     1  type: 1 = CMA announce, 2 = CMA done, 3 = small message,
//!                     4 = split copy
//!      7     1  0
//!   announce:  8 address, 16 length, 24 token (u64 each), 32… the frame's
//!              header and signature, its payload length the data's
//!   done:      8 token
//!   split:     8 generation, 16 the lent address, 24 length, 32 the
//!              destination in the reader's memory (u64 each)
//!   small:     a frame's short form (`Frame::short_head`: an eager
//!              message of at most 256 bytes, no id or flow, one run)
//! ```
//!
//! A small eager message goes as `small`: its 32-byte header, its run and
//! the ring's length word put a 1-byte message on one cache line of the
//! ring, where the 64-byte header and 9-byte run of a frame spread it over
//! two or three (each a line the receiver's core fetches from the
//! sender's).
//!
//! A large borrowed payload ([`send_borrowed`](ShmLinks::send_borrowed))
//! to a peer that can read this process's memory travels as an announce:
//! the receiver copies the data once with `process_vm_readv` straight into
//! the [`Place`] its sink gives (else into the frame's own buffer; a large
//! read shared with `cma::Reader`'s helper thread), hands
//! it over, and answers `done`, whose arrival hands [`Incoming::Sent`] to
//! the sender. To a peer that cannot (CMA refused), the payload streams
//! through the ring from the sender's memory, and the receiver copies it
//! from the ring into the place: two copies, as MPICH's shared memory.
//!
//! A buffer lent for the receiver to read ([`lend`](ShmLinks::lend), at
//! least `cma::SHARED_READ` bytes) is read by the receiver and its lender
//! together where the lender may reach the receiver's memory: the
//! receiver's `fetch` asks with a `split` record, and the lender writes
//! pieces into the destination with `process_vm_writev` while the
//! receiver reads others (`split.rs`). The lender writes only from a
//! buffer still lent ([`unlend`](ShmLinks::unlend) waits for a piece
//! under way), so a request naming anything else copies nothing.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::cma;
use super::ring::{Consumer, Producer};
use super::segment::Segment;
use super::split;
use crate::datatype::Run;
use crate::identity::ProcessId;
use crate::transport::epoll::Doorbell;
use crate::transport::frame::{self, frame_len, Frame, Front};
use crate::transport::{place_large, Borrowed, Chunk, Incoming, Place, SendError, Sink};

/// The magic of this transport's records ("Sm").
const RECORD_MAGIC: u16 = 0x6d53;
/// A record announcing a payload to read with CMA.
const ANNOUNCE: u8 = 1;
/// A record saying a CMA read is done.
const DONE: u8 = 2;
/// A small eager message in a frame's short form (`Frame::short_head`).
const SMALL: u8 = 3;
/// A reader asks the lender to write part of a lent buffer (`split.rs`).
const SPLIT: u8 = 4;
/// Bytes 4..7 of a [`SMALL`] record.
const SMALL_MARK: [u8; 3] = [
    RECORD_MAGIC.to_le_bytes()[0],
    RECORD_MAGIC.to_le_bytes()[1],
    SMALL,
];
/// Byte 7 of a `done` record: the read was one the reader did alone
/// (below `cma::SHARED_READ`; see [`ShmLinks::busy`]).
const SHORT: u8 = 1;
/// The largest record: an announce with the largest signature.
const MAX_RECORD: usize = 32 + frame::HEADER + 9 * frame::MAX_RUNS;
/// Bytes moved from a ring into the input buffer at a time.
const CHUNK: usize = 64 * 1024;
/// Payloads at least this large go straight from the ring into their
/// place (or their frame's buffer), not through the input buffer.
const LARGE: usize = 64 * 1024;

/// One peer on this host.
#[derive(Debug)]
pub(crate) struct Peer {
    /// Its process id (for CMA).
    pub(crate) pid: u32,
    /// The ring it writes in this process's segment (its local slot).
    pub(crate) inbound: usize,
    /// Its segment, where this process writes ring `outbound`.
    pub(crate) theirs: Segment,
    /// This process's local slot.
    pub(crate) outbound: usize,
    /// Its doorbell.
    pub(crate) bell: Doorbell,
    /// It reads large payloads of this process with CMA.
    pub(crate) cma: bool,
    /// This process reads its large payloads with CMA.
    pub(crate) reads_by_cma: bool,
    out: Mutex<Output>,
    input: Mutex<Input>,
    /// Held while this process reads a buffer the peer lent (`fetch`).
    fetching: Mutex<()>,
    /// Buffers this process lent the peer (`lend`), address and length,
    /// until `unlend`: the only memory a `split` request may make this
    /// process write from. Held while writing a piece.
    lent: Mutex<Vec<(u64, u64)>>,
}

impl Peer {
    /// A peer reached through `theirs` and `bell`.
    pub(crate) fn new(
        pid: u32,
        inbound: usize,
        theirs: Segment,
        outbound: usize,
        bell: Doorbell,
        cma: bool,
        reads_by_cma: bool,
    ) -> Peer {
        Peer {
            pid,
            inbound,
            theirs,
            outbound,
            bell,
            cma,
            reads_by_cma,
            out: Mutex::default(),
            input: Mutex::default(),
            fetching: Mutex::default(),
            lent: Mutex::default(),
        }
    }
}

#[derive(Debug, Default)]
struct Output {
    queue: VecDeque<Chunk>,
    /// Bytes of the first chunk already in the ring.
    written: usize,
    /// Where a frame is encoded when nothing waits (allocated once).
    scratch: Vec<u8>,
}

#[derive(Debug, Default)]
struct Input {
    bytes: Vec<u8>,
    large: Option<Large>,
    /// The ring is corrupt: reported lost, never read again.
    ended: bool,
}

/// A frame whose large payload comes straight out of the ring.
#[derive(Debug)]
struct Large {
    len: usize,
    got: usize,
    into: Dest,
}

#[derive(Debug)]
enum Dest {
    Own { head: Vec<u8>, payload: Vec<u8> },
    Placed { frame: Frame, place: Option<Place> },
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One process's shared-memory links to its peers on this host.
#[derive(Debug)]
pub(crate) struct ShmLinks {
    own: Segment,
    bell: Doorbell,
    /// By process (`None`: this one, or a peer not reached this way).
    peers: Box<[Option<Peer>]>,
    /// Borrowed payloads done with, for the next poll to hand back.
    sent: Mutex<Vec<(ProcessId, u64)>>,
    /// `sent` may hold some (set after a push): an empty poll, the idle
    /// spin's every look, reads this line instead of taking the lock.
    any_sent: AtomicBool,
    closed: AtomicBool,
    /// Some output waits for room in a ring (a hint for `busy`).
    queued: AtomicBool,
    /// Reads announced payloads (with a helper thread when large).
    reader: cma::Reader,
    /// Payloads announced for CMA that the peer reads alone (below
    /// `cma::SHARED_READ`) and has not said `done` for.
    short_reads: AtomicUsize,
    /// Bytes this process wrote into peers' memory for their reads of
    /// buffers it lent (`split` records), for tests and reports.
    helped: AtomicU64,
}

impl ShmLinks {
    /// Links through `own` (this process's segment, woken by `bell`) to
    /// `peers` (by process).
    pub(crate) fn new(own: Segment, bell: Doorbell, peers: Vec<Option<Peer>>) -> ShmLinks {
        ShmLinks {
            own,
            bell,
            peers: peers.into(),
            sent: Mutex::default(),
            any_sent: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            queued: AtomicBool::new(false),
            reader: cma::Reader::new(),
            short_reads: AtomicUsize::new(0),
            helped: AtomicU64::new(0),
        }
    }

    /// Bytes this process wrote for peers reading buffers it lent.
    #[cfg(test)]
    pub(crate) fn helped(&self) -> u64 {
        self.helped.load(Ordering::Relaxed)
    }

    /// Whether frames to and from process `p` go through shared memory.
    pub(crate) fn reaches(&self, p: ProcessId) -> bool {
        matches!(self.peers.get(p.get() as usize), Some(Some(_)))
    }

    /// Whether this process reads process `p`'s large payloads by CMA.
    pub(crate) fn reads_by_cma(&self, p: ProcessId) -> bool {
        matches!(self.peers.get(p.get() as usize), Some(Some(peer)) if peer.reads_by_cma)
    }

    /// The descriptor a waiter adds to its epoll set.
    pub(crate) fn doorbell_fd(&self) -> i32 {
        self.bell.fd()
    }

    /// Resets the doorbell after a wake-up.
    pub(crate) fn clear_doorbell(&self) {
        self.bell.clear();
    }

    fn peer(&self, to: ProcessId) -> Result<&Peer, SendError> {
        self.peers
            .get(to.get() as usize)
            .and_then(Option::as_ref)
            .ok_or_else(|| SendError::Lost(to, "not a peer on this host".into()))
    }

    fn check(&self) -> Result<(), SendError> {
        if self.closed.load(Ordering::Acquire) {
            Err(SendError::Closed)
        } else {
            Ok(())
        }
    }

    /// Queues `frame` for `to`.
    pub(crate) fn send(&self, to: ProcessId, frame: &Frame) -> Result<(), SendError> {
        self.send_parts(to, frame, &frame.signature, &frame.payload)
    }

    /// Queues `frame` for `to` with `signature` and `payload` in place of
    /// its own (see `Transport::send_parts`).
    pub(crate) fn send_parts(
        &self,
        to: ProcessId,
        frame: &Frame,
        signature: &[Run],
        payload: &[u8],
    ) -> Result<(), SendError> {
        self.check()?;
        if payload.len() > frame::MAX_PAYLOAD {
            return Err(SendError::TooLarge(payload.len()));
        }
        let peer = self.peer(to)?;
        let mut out = lock(&peer.out);
        let mut scratch = std::mem::take(&mut out.scratch);
        scratch.clear();
        // A small message's short header from the stack, else the frame's
        // header encoded in `scratch`.
        let short = frame.short_head(signature, payload.len(), SMALL_MARK);
        let head: &[u8] = match &short {
            Some(short) => short.bytes(),
            None => {
                frame.encode_head_with(signature, payload.len(), &mut scratch);
                &scratch
            }
        };
        if out.queue.is_empty() {
            // The common case: straight into the ring, no allocation; the
            // header from where it was encoded, the payload from the caller, as one
            // chunk (each byte copied once).
            let (n, sleeping) = {
                let (control, bytes) = peer.theirs.ring(peer.outbound);
                let producer = Producer {
                    control,
                    bytes: &bytes,
                };
                let parts = [
                    (head.as_ptr(), head.len()),
                    (payload.as_ptr(), payload.len()),
                ];
                // SAFETY: both parts are readable for their lengths; the
                // `out` lock makes this the ring's only producer.
                unsafe { producer.write_parts(&parts) }
            };
            if sleeping {
                peer.bell.ring();
            }
            if n < head.len() + payload.len() {
                let rest = match n.checked_sub(head.len()) {
                    None => [&head[n..], payload].concat(),
                    Some(sent) => payload[sent..].to_vec(),
                };
                out.queue.push_back(Chunk::Owned(rest));
                self.queued.store(true, Ordering::Relaxed);
                self.flush(peer, to, &mut out);
            }
        } else {
            out.queue.push_back(Chunk::Owned([head, payload].concat()));
            self.flush(peer, to, &mut out);
        }
        out.scratch = scratch;
        Ok(())
    }

    /// Queues `frame` with `data` as its payload, written from the
    /// caller's memory: `false` (a later poll hands [`Incoming::Sent`]).
    pub(crate) fn send_borrowed(
        &self,
        to: ProcessId,
        frame: Frame,
        data: Borrowed,
        token: u64,
    ) -> Result<bool, SendError> {
        self.check()?;
        let len = data.bytes().len();
        if len > frame::MAX_PAYLOAD {
            return Err(SendError::TooLarge(len));
        }
        let peer = self.peer(to)?;
        let mut out = lock(&peer.out);
        if peer.cma {
            let mut record = Vec::with_capacity(32 + frame.encoded_len());
            record.extend_from_slice(&[0; 4]);
            record.extend_from_slice(&RECORD_MAGIC.to_le_bytes());
            record.extend_from_slice(&[ANNOUNCE, 0]);
            record.extend_from_slice(&(data.bytes().as_ptr() as u64).to_le_bytes());
            record.extend_from_slice(&(len as u64).to_le_bytes());
            record.extend_from_slice(&token.to_le_bytes());
            frame.encode_head_for(len, &mut record);
            let rest = (record.len() - 4) as u32;
            record[..4].copy_from_slice(&rest.to_le_bytes());
            out.queue.push_back(Chunk::Owned(record));
            if len < cma::SHARED_READ {
                self.short_reads.fetch_add(1, Ordering::Relaxed);
            }
        } else {
            let mut head = Vec::new();
            frame.encode_head_for(len, &mut head);
            out.queue.push_back(Chunk::Owned(head));
            out.queue.push_back(Chunk::Borrowed(data, token));
        }
        if self.flush(peer, to, &mut out) {
            // Whoever polls next hands the `Sent` back.
            self.bell.ring();
        }
        Ok(false)
    }

    /// A handle with which `to` reads the `len` bytes at `address` itself
    /// (see [`Transport::lend`](crate::transport::Transport::lend)): the
    /// address and the length, where `to` reads this process's memory by
    /// CMA and the payload is at least [`cma::SHARED_READ`].
    ///
    /// Smaller payloads keep the announce after `ClearToSend`: the lend is
    /// made when the message is announced, perhaps long before a receive
    /// matches, so its sender cannot poll for the end of a read that is
    /// about to start (`busy`), which a short read's sender does (a
    /// wake-up would cost more than the read). A large read's sender
    /// sleeps anyway.
    pub(crate) fn lend(&self, to: ProcessId, address: usize, len: usize) -> Option<Vec<u8>> {
        let peer = self.peer(to).ok()?;
        if !peer.cma || len < cma::SHARED_READ {
            return None;
        }
        let mut handle = Vec::with_capacity(16);
        handle.extend_from_slice(&(address as u64).to_le_bytes());
        handle.extend_from_slice(&(len as u64).to_le_bytes());
        lock(&peer.lent).push((address as u64, len as u64));
        Some(handle)
    }

    /// The buffer at `address` lent to `to` ([`lend`](Self::lend)) is
    /// taken back: returns once no piece of it is being written.
    pub(crate) fn unlend(&self, to: ProcessId, address: usize) {
        let Ok(peer) = self.peer(to) else { return };
        let mut lent = lock(&peer.lent);
        if let Some(i) = lent.iter().position(|&(a, _)| a == address as u64) {
            lent.swap_remove(i);
        }
    }

    /// Reads the `len` bytes that `from` lent with `handle` ([`lend`](Self::lend))
    /// into `dst`, with the reader's helper thread.
    ///
    /// # Safety
    ///
    /// `dst` is valid for writes of `len` bytes, and nothing else reads or
    /// writes it until this returns.
    pub(crate) unsafe fn fetch(
        &self,
        from: ProcessId,
        handle: &[u8],
        dst: *mut u8,
        len: usize,
    ) -> Result<(), String> {
        let peer = self.peer(from).map_err(|err| err.to_string())?;
        let word = |i: usize| {
            handle
                .get(i..i + 8)
                .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
        };
        let (Some(address), Some(lent), 16) = (word(0), word(8), handle.len()) else {
            return Err(format!("a lent handle of {} bytes", handle.len()));
        };
        if !peer.reads_by_cma || lent != len as u64 {
            return Err(format!(
                "it lent {lent} bytes for a read of {len} that this process cannot make by CMA"
            ));
        }
        let _fetching = lock(&peer.fetching);
        let failed = |err: std::io::Error| {
            format!(
                "reading {len} bytes of its memory (process_vm_readv, pid {}) failed: {err}",
                peer.pid
            )
        };
        if peer.cma {
            // The lender may reach this process's memory: it writes part.
            // SAFETY: the caller's contract.
            if unsafe { self.fetch_split(peer, from, address, dst, len) }? {
                return Ok(());
            }
        }
        // SAFETY: the caller's contract.
        unsafe { self.reader.read(peer.pid, address, dst, len) }.map_err(failed)
    }

    /// Reads `len` bytes at `address` of `peer` into `dst` with its help
    /// (`split.rs`): `true` when every byte arrived, `false` when a piece
    /// of the lender's failed (the caller then reads it all).
    ///
    /// # Safety
    ///
    /// As [`fetch`](Self::fetch).
    unsafe fn fetch_split(
        &self,
        peer: &Peer,
        from: ProcessId,
        address: u64,
        dst: *mut u8,
        len: usize,
    ) -> Result<bool, String> {
        let _long = self.reader.long_copy();
        let line = self.own.split(peer.inbound);
        let copy = split::Receiver::start(line, len as u64);
        let mut record = Vec::with_capacity(40);
        record.extend_from_slice(&36u32.to_le_bytes());
        record.extend_from_slice(&RECORD_MAGIC.to_le_bytes());
        record.extend_from_slice(&[SPLIT, 0]);
        for word in [copy.generation(), address, len as u64, dst as u64] {
            record.extend_from_slice(&word.to_le_bytes());
        }
        {
            let mut out = lock(&peer.out);
            out.queue.push_back(Chunk::Owned(record));
            self.flush(peer, from, &mut out);
        }
        // The lender is woken by its doorbell if it sleeps; meanwhile this
        // side takes pieces, and all of them if the lender never comes.
        copy.copy(
            |at, n| {
                // SAFETY: `[at, at + n)` lies inside `dst`'s `len` bytes
                // (claims stay below the length), writable by the
                // caller's contract; each piece is claimed by one side.
                unsafe { cma::read(peer.pid, address + at, dst.add(at as usize), n as usize) }
                    .map_err(|err| {
                        format!(
                            "reading {len} bytes of its memory (process_vm_readv, pid {}) \
                             failed: {err}",
                            peer.pid
                        )
                    })
            },
            || process_alive(peer.pid),
        )
    }

    /// Writes what the ring takes of `peer`'s queue; returns whether it
    /// finished a borrowed payload (its token is then in `sent`).
    fn flush(&self, peer: &Peer, to: ProcessId, out: &mut Output) -> bool {
        let (control, bytes) = peer.theirs.ring(peer.outbound);
        let producer = Producer {
            control,
            bytes: &bytes,
        };
        let mut lent_back = false;
        let mut wake = false;
        while let Some(front) = out.queue.front() {
            let rest = &front.bytes()[out.written..];
            // SAFETY: `rest` is readable (a borrowed payload by `Borrowed`'s
            // contract); the `out` lock makes this the only producer.
            let (n, sleeping) = unsafe { producer.write(rest.as_ptr(), rest.len()) };
            wake |= sleeping;
            out.written += n;
            if n == rest.len() {
                if let Some(Chunk::Borrowed(_, token)) = out.queue.pop_front() {
                    lock(&self.sent).push((to, token));
                    // Release: the push is seen by the poll that sees this.
                    self.any_sent.store(true, Ordering::Release);
                    lent_back = true;
                }
                out.written = 0;
                continue;
            }
            // The ring is full: ask the peer to ring when it frees room,
            // unless it did meanwhile.
            if !producer.want_room() {
                break;
            }
        }
        if wake {
            peer.bell.ring();
        }
        if !out.queue.is_empty() {
            self.queued.store(true, Ordering::Relaxed);
        }
        lent_back
    }

    /// Flushes what waits and hands what arrived to `sink`.
    pub(crate) fn poll(&self, sink: &mut dyn Sink) -> usize {
        let mut handed = 0;
        // A send that queues after the swap sets the hint again. Read
        // first: a swap is a locked instruction on every (empty) look.
        if self.queued.load(Ordering::Relaxed) && self.queued.swap(false, Ordering::Relaxed) {
            for (p, peer) in self.peers.iter().enumerate() {
                let Some(peer) = peer else { continue };
                let mut out = lock(&peer.out);
                if !out.queue.is_empty() {
                    self.flush(peer, ProcessId::new(p as u32), &mut out);
                }
            }
        }
        for (p, peer) in self.peers.iter().enumerate() {
            if let Some(peer) = peer {
                handed += self.read(peer, ProcessId::new(p as u32), sink);
            }
        }
        // Acquire: the pushes before the hint are seen under the lock; a
        // push after the swap sets the hint again.
        if !self.any_sent.load(Ordering::Relaxed) || !self.any_sent.swap(false, Ordering::Acquire) {
            return handed;
        }
        let sent = std::mem::take(&mut *lock(&self.sent));
        handed += sent.len();
        for (to, token) in sent {
            sink.take(Incoming::Sent(to, token));
        }
        handed
    }

    /// Hands what process `from` wrote so far to `sink` (before its loss
    /// is reported: what it sent before it went is delivered).
    pub(crate) fn drain(&self, from: ProcessId, sink: &mut dyn Sink) -> usize {
        match self.peers.get(from.get() as usize) {
            Some(Some(peer)) => self.read(peer, from, sink),
            _ => 0,
        }
    }

    /// Reads what `peer` wrote and hands its complete frames to `sink`.
    fn read(&self, peer: &Peer, from: ProcessId, sink: &mut dyn Sink) -> usize {
        let (control, bytes) = self.own.ring(peer.inbound);
        let consumer = Consumer {
            control,
            bytes: &bytes,
        };
        // The common case, without a lock: nothing there.
        if matches!(consumer.available(), Ok(0)) {
            return 0;
        }
        let mut guard = lock(&peer.input);
        let input = &mut *guard;
        if input.ended {
            return 0;
        }
        let mut handed = 0;
        let mut wake_producer = false;
        let mut result: Result<(), String> = Ok(());
        // Whole frames below `LARGE`, one per chunk (what `send` writes),
        // decoded in place and handed over with their payload still in the
        // ring (no buffers of their own); anything else (records, frames
        // cut in chunks, large payloads that go to their place, errors)
        // goes the way below.
        while input.bytes.is_empty() && input.large.is_none() {
            let whole = |bytes: &[u8]| {
                if bytes.len() >= LARGE {
                    return None;
                }
                // Not a frame (a record), or not all of one: `None`.
                let frame = if bytes.get(4..7) == Some(&SMALL_MARK[..]) {
                    Frame::decode_short(bytes).ok()?
                } else {
                    Frame::decode_in_place(bytes).ok()?
                };
                sink.take_in_place(from, frame);
                Some(())
            };
            // SAFETY: the `input` lock makes this the ring's only consumer.
            match unsafe { consumer.take_whole(whole) } {
                Ok(Some(((), waiting))) => {
                    wake_producer |= waiting;
                    handed += 1;
                }
                Ok(None) | Err(_) => break,
            }
        }
        loop {
            if let Some(large) = &mut input.large {
                let want = large.len - large.got;
                let mut discard = [0u8; 4096];
                let (dst, room) = match &mut large.into {
                    Dest::Own { payload, .. } => (payload[large.got..].as_mut_ptr(), want),
                    Dest::Placed {
                        place: Some(place), ..
                    } => place.rest(large.got),
                    Dest::Placed { place: None, .. } => (discard.as_mut_ptr(), discard.len()),
                };
                // SAFETY: `dst` is `room` writable bytes: the frame's own
                // buffer, the place (the transport's until handed over or
                // withdrawn, `Place::new`'s contract), or `discard`; the
                // `input` lock makes this the ring's only consumer.
                match unsafe { consumer.read(dst, want.min(room)) } {
                    Ok((0, _)) => break,
                    Ok((n, waiting)) => {
                        wake_producer |= waiting;
                        large.got += n;
                    }
                    Err(why) => {
                        result = Err(why.to_string());
                        break;
                    }
                }
                if large.got == large.len {
                    let large = input.large.take().expect("a large frame");
                    match large.into {
                        Dest::Own { head, payload } => match Frame::decode_parts(&head, payload) {
                            Ok(frame) => sink.take(Incoming::Frame(from, frame)),
                            Err(err) => {
                                result = Err(format!("a bad frame: {err}"));
                                break;
                            }
                        },
                        Dest::Placed { frame, .. } => {
                            sink.take(Incoming::Placed(from, frame, large.len))
                        }
                    }
                    handed += 1;
                }
                continue;
            }
            let available = match consumer.available() {
                Ok(0) => break,
                Ok(n) => n.min(CHUNK),
                Err(why) => {
                    result = Err(why.to_string());
                    break;
                }
            };
            let old = input.bytes.len();
            // Into the spare capacity: no zeroing of bytes about to be
            // overwritten (a 4 KiB frame's worth per message).
            input.bytes.reserve(available);
            let spare = input.bytes.spare_capacity_mut().as_mut_ptr().cast::<u8>();
            // SAFETY: `spare` has room for `available` bytes (reserved);
            // the `input` lock makes this the ring's only consumer.
            match unsafe { consumer.read(spare, available) } {
                Ok((n, waiting)) => {
                    wake_producer |= waiting;
                    // SAFETY: `read` initialized the `n` bytes after `old`,
                    // within the capacity.
                    unsafe { input.bytes.set_len(old + n) };
                }
                Err(why) => {
                    result = Err(why.to_string());
                    break;
                }
            }
            if let Err(why) = self.hand_records(peer, input, from, &mut handed, sink) {
                result = Err(why);
                break;
            }
        }
        if wake_producer {
            peer.bell.ring();
        }
        if let Err(why) = result {
            input.ended = true;
            input.bytes = Vec::new();
            input.large = None;
            handed += 1;
            sink.take(Incoming::Lost(from, why));
        }
        handed
    }

    /// Hands the complete frames and records at the start of
    /// `input.bytes` to `sink` and removes them; a frame with a large
    /// payload whose header is there moves to `input.large`.
    fn hand_records(
        &self,
        peer: &Peer,
        input: &mut Input,
        from: ProcessId,
        handed: &mut usize,
        sink: &mut dyn Sink,
    ) -> Result<(), String> {
        let mut at = 0;
        let result = loop {
            let rest = &input.bytes[at..];
            if rest.len() >= 6 && u16::from_le_bytes([rest[4], rest[5]]) == RECORD_MAGIC {
                if rest.len() < 8 {
                    break Ok(());
                }
                let len = u32::from_le_bytes(rest[..4].try_into().expect("4 bytes")) as usize + 4;
                if !(16..=MAX_RECORD).contains(&len) {
                    break Err(format!("a record of {len} bytes"));
                }
                if rest.len() < len {
                    break Ok(());
                }
                if let Err(why) = self.record(peer, &rest[..len], from, sink) {
                    break Err(why);
                }
                *handed += 1;
                at += len;
                continue;
            }
            match frame::front(rest, LARGE) {
                Err(err) => break Err(format!("a bad frame: {err}")),
                Ok(Front::Wanting) => break Ok(()),
                Ok(Front::Whole(frame, len)) => {
                    *handed += 1;
                    sink.take(Incoming::Frame(from, frame));
                    at += len;
                }
                Ok(Front::Large { head, already, len }) => {
                    let into = match place_large(sink, from, head, len, already) {
                        Some((frame, place)) => Dest::Placed {
                            frame,
                            place: Some(place),
                        },
                        None => {
                            let mut payload = vec![0u8; len];
                            payload[..already.len()].copy_from_slice(already);
                            Dest::Own {
                                head: head.to_vec(),
                                payload,
                            }
                        }
                    };
                    input.large = Some(Large {
                        len,
                        got: already.len(),
                        into,
                    });
                    at = input.bytes.len();
                    break Ok(());
                }
            }
        };
        input.bytes.drain(..at);
        result
    }

    /// Handles one of this transport's records from `from`.
    fn record(
        &self,
        peer: &Peer,
        record: &[u8],
        from: ProcessId,
        sink: &mut dyn Sink,
    ) -> Result<(), String> {
        let word = |i: usize| u64::from_le_bytes(record[i..i + 8].try_into().expect("8 bytes"));
        match record[6] {
            DONE => {
                if record[7] == SHORT {
                    self.short_reads.fetch_sub(1, Ordering::Relaxed);
                }
                sink.take(Incoming::Sent(from, word(8)));
                Ok(())
            }
            ANNOUNCE if record.len() >= 32 + frame::HEADER => {
                let (address, len, token) = (word(8), word(16) as usize, word(24));
                let head = &record[32..];
                if len > frame::MAX_PAYLOAD
                    || frame_len(head).ok().flatten() != Some(head.len() + len)
                {
                    return Err("a bad announce record".into());
                }
                let failed = |err: std::io::Error| {
                    format!(
                        "reading {len} bytes of its memory (process_vm_readv, pid {}) failed: {err}",
                        peer.pid
                    )
                };
                let placed = Frame::decode_placed(head, len).ok().and_then(|frame| {
                    let place = sink.place(from, &frame, len).filter(|p| p.len() >= len)?;
                    Some((frame, place))
                });
                let incoming = match placed {
                    Some((frame, mut place)) => {
                        let (dst, _) = place.rest(0);
                        // SAFETY: the place has at least `len` writable
                        // bytes, the transport's until handed over.
                        unsafe { self.reader.read(peer.pid, address, dst, len) }.map_err(failed)?;
                        Incoming::Placed(from, frame, len)
                    }
                    None => {
                        let mut payload = vec![0u8; len];
                        // SAFETY: `payload` has `len` writable bytes.
                        unsafe {
                            self.reader
                                .read(peer.pid, address, payload.as_mut_ptr(), len)
                        }
                        .map_err(failed)?;
                        let frame = Frame::decode_parts(head, payload)
                            .map_err(|err| format!("a bad frame: {err}"))?;
                        Incoming::Frame(from, frame)
                    }
                };
                sink.take(incoming);
                let mut done = Vec::with_capacity(16);
                done.extend_from_slice(&12u32.to_le_bytes());
                done.extend_from_slice(&RECORD_MAGIC.to_le_bytes());
                let short = if len < cma::SHARED_READ { SHORT } else { 0 };
                done.extend_from_slice(&[DONE, short]);
                done.extend_from_slice(&token.to_le_bytes());
                let mut out = lock(&peer.out);
                out.queue.push_back(Chunk::Owned(done));
                self.flush(peer, from, &mut out);
                Ok(())
            }
            SPLIT if record.len() == 40 => {
                let (generation, address, len, dst) = (word(8), word(16), word(24), word(32));
                // Only from a buffer lent to this peer, whole: the lock
                // keeps it lent while a piece is written.
                let lent = lock(&peer.lent);
                if !lent.iter().any(|&(a, l)| a == address && l == len) {
                    return Ok(());
                }
                let line = peer.theirs.split(peer.outbound);
                let wrote = split::help(line, generation, len, |at, n| {
                    // SAFETY: `[address + at, + n)` lies inside a buffer
                    // this process lent and has not taken back (`lent`,
                    // held), readable until `unlend`; the kernel checks
                    // the peer's range.
                    unsafe {
                        cma::write(peer.pid, dst + at, (address + at) as *const u8, n as usize)
                    }
                    .is_ok()
                });
                drop(lent);
                self.helped.fetch_add(wrote, Ordering::Relaxed);
                Ok(())
            }
            SMALL => {
                let frame = Frame::decode_short(record)
                    .map_err(|err| format!("a bad short frame: {err}"))?
                    .into_frame();
                sink.take(Incoming::Frame(from, frame));
                Ok(())
            }
            other => Err(format!("a record of unknown type {other}")),
        }
    }

    /// See [`Transport::withdraw_send`](crate::transport::Transport::withdraw_send):
    /// a payload streaming through the ring leaves from a copy. One
    /// announced for CMA is not in this process's hands: the peer may
    /// still read it, which cannot harm this process (the kernel checks
    /// the range), and a withdrawal only happens when the job fails.
    pub(crate) fn withdraw_send(&self, to: ProcessId, token: u64) {
        let Ok(peer) = self.peer(to) else { return };
        let mut out = lock(&peer.out);
        let written = out.written;
        for (i, chunk) in out.queue.iter_mut().enumerate() {
            if let Chunk::Borrowed(data, t) = chunk {
                if *t == token {
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

    /// See [`Transport::withdraw_place`](crate::transport::Transport::withdraw_place):
    /// also waits for a read of a lent buffer from `from` under way (a
    /// [`fetch`](Self::fetch) writes into the place of a pull too).
    pub(crate) fn withdraw_place(&self, from: ProcessId, id: u64) {
        let Ok(peer) = self.peer(from) else { return };
        let mut input = lock(&peer.input);
        if let Some(Large {
            into: Dest::Placed { frame, place },
            ..
        }) = &mut input.large
        {
            if frame.id == id {
                *place = None;
            }
        }
        drop(input);
        drop(lock(&peer.fetching));
    }

    /// Output waits for room, or a payload is partly read, or a peer
    /// reads a payload of this process that it copies alone.
    ///
    /// The last keeps the waiting sender's worker polling for the `done`
    /// (a read below `cma::SHARED_READ` takes well under a millisecond; a
    /// sleeping sender would cost a wake-up of its progress thread and
    /// then of its worker before the next message). A sender of a larger
    /// payload sleeps instead: the reader's helper thread wants its core.
    ///
    /// A long CMA read under way is not: the poller copying holds the
    /// input until it is done (and then wakes the rank it completes),
    /// while a worker polling on would take the core that the read's
    /// helper thread, or the peer, wants.
    pub(crate) fn busy(&self) -> bool {
        self.queued.load(Ordering::Relaxed)
            || self.short_reads.load(Ordering::Relaxed) > 0
            || self
                .peers
                .iter()
                .flatten()
                .any(|peer| match peer.input.try_lock() {
                    Ok(input) => input.large.is_some(),
                    Err(_) => !self.reader.reading_long(),
                })
    }

    /// A read of a peer's payload of at least `cma::SHARED_READ` is under
    /// way: its helper thread wants the other core (see
    /// `Transport::copy_under_way`).
    pub(crate) fn copy_under_way(&self) -> bool {
        self.reader.reading_long()
    }

    /// About to sleep: marks every inbound ring sleeping. `false` if
    /// something is there to do (then do not sleep); call
    /// [`awake`](Self::awake) either way.
    pub(crate) fn sleep(&self) -> bool {
        let mut idle = true;
        for peer in self.peers.iter().flatten() {
            let (control, bytes) = self.own.ring(peer.inbound);
            let consumer = Consumer {
                control,
                bytes: &bytes,
            };
            idle &= consumer.sleep();
            let out = lock(&peer.out);
            if !out.queue.is_empty() {
                self.queued.store(true, Ordering::Relaxed);
                let (control, bytes) = peer.theirs.ring(peer.outbound);
                let producer = Producer {
                    control,
                    bytes: &bytes,
                };
                idle &= !producer.want_room();
            }
        }
        idle && lock(&self.sent).is_empty()
    }

    /// Whether this process flagged the ring from `from` sleeping (tests).
    #[cfg(test)]
    pub(crate) fn asleep(&self, from: ProcessId) -> bool {
        let peer = self.peer(from).expect("a peer");
        let (control, bytes) = self.own.ring(peer.inbound);
        Consumer {
            control,
            bytes: &bytes,
        }
        .asleep()
    }

    /// Awake again (after [`sleep`](Self::sleep)).
    pub(crate) fn awake(&self) {
        for peer in self.peers.iter().flatten() {
            let (control, bytes) = self.own.ring(peer.inbound);
            Consumer {
                control,
                bytes: &bytes,
            }
            .awake();
        }
    }

    /// Writes what waits (for at most `timeout`), then refuses sends.
    pub(crate) fn close(&self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        for (p, peer) in self.peers.iter().enumerate() {
            let Some(peer) = peer else { continue };
            loop {
                let mut out = lock(&peer.out);
                self.flush(peer, ProcessId::new(p as u32), &mut out);
                if out.queue.is_empty() || Instant::now() >= deadline {
                    break;
                }
                drop(out);
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        self.closed.store(true, Ordering::Release);
    }
}

/// Whether process `pid` is still running (not exited, not a zombie).
fn process_alive(pid: u32) -> bool {
    // SAFETY: a plain system call with integer arguments.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        // Gone (ESRCH), or pidfds unavailable: then only `kill` can tell.
        // SAFETY: signal 0 checks the process exists and sends nothing.
        return std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
            && unsafe { libc::kill(pid as libc::pid_t, 0) } == 0;
    }
    let mut poll = libc::pollfd {
        fd: fd as i32,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd; the descriptor is ours and closed after.
    let ready = unsafe {
        let ready = libc::poll(&mut poll, 1, 0);
        libc::close(fd as i32);
        ready
    };
    // A pidfd is readable once its process has exited.
    ready == 0
}
