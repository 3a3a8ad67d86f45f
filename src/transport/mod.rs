//! Transports: how frames travel between the processes of one job (layer
//! L2, beside `p2p`; imports nothing above `sched`).
//!
//! A [`Transport`] moves [`Frame`]s (the wire format, [`frame`]) between
//! this process and the others: [`send`](Transport::send) queues a frame
//! for one process and never blocks on that process (what its connection
//! will not take now waits in a queue, flushed by later calls), frames
//! from one process arrive in the order it sent them (FIFO per pair), and
//! [`poll`](Transport::poll) hands what arrived to a sink without
//! blocking. A progress thread blocks in [`wait`](Transport::wait) (epoll
//! for TCP, a condition variable for the loopback) until something may have
//! arrived or [`wake`](Transport::wake) is called; idle workers poll
//! between ranks.
//!
//! Implementations: [`loopback`] (in memory: several jobs of one test
//! process, every frame encoded and decoded, so tests cover the wire format)
//! and [`tcp`] (one connected stream per peer process, non-blocking, epoll),
//! and, with the `ofi` feature, `ofi` (a libfabric RDM endpoint per
//! process, the TCP mesh kept as its authenticated control channel).
//! The streams of [`tcp`] come from the [`mesh`]: one authenticated
//! connection per pair of processes, made at start-up with the addresses
//! the launcher's key-value space exchanged (`addr.rs` picks this
//! process's address).
//!
//! ## Design note
//!
//! The trait carries frames only; what they mean (eager data, the
//! acknowledgement of a synchronous send, the end of a job) is `p2p`'s.
//! A libfabric RDM endpoint fits the same shape: frames are `fi_send` /
//! `fi_recv` of tagged or untagged messages, `poll` reads the completion
//! queue and `wait` its wait set. Large messages there would be announced
//! by a frame and fetched with `fi_read` from registered memory.
//!
//! Large payloads are not copied in user space where a transport can help
//! it: a sender's data leaves from its own buffer
//! ([`send_borrowed`](Transport::send_borrowed), done when
//! [`Incoming::Sent`] comes back) and a receiver's data is written straight
//! into its receive buffer ([`Sink::place`], asked when the frame's header
//! arrives). Both lend memory of a waiting rank to the transport, so both
//! have a withdrawal for an owner that must go first (a failing job):
//! after it returns, the transport no longer touches that memory. TCP
//! implements both; the loopback copies (the defaults). An `fi_read`
//! transport would implement `place` by reading from the sender's
//! registered memory.

mod addr;
pub(crate) mod choice;
mod epoll;
pub(crate) mod frame;
pub(crate) mod loopback;
pub(crate) mod mesh;
#[cfg(feature = "ofi")]
pub(crate) mod ofi;
mod periodic;
pub(crate) mod route;
pub(crate) mod shm;
pub(crate) mod tcp;

use std::fmt;
use std::time::Duration;

pub(crate) use frame::Frame;

use crate::identity::ProcessId;

/// What a poll finds.
#[derive(Debug)]
pub(crate) enum Incoming {
    /// A frame from a process (in the order that process sent them).
    Frame(ProcessId, Frame),
    /// A data frame whose payload (`usize` bytes) went where
    /// [`Sink::place`] said, in its place among the frames of its process;
    /// the frame's own payload is empty. Also handed when the place was
    /// withdrawn meanwhile (the rest of the payload was then dropped).
    Placed(ProcessId, Frame, usize),
    /// The transport is done with the memory of the
    /// [`send_borrowed`](Transport::send_borrowed) call `token` to the
    /// process (its bytes left).
    Sent(ProcessId, u64),
    /// The connection to a process ended without its goodbye, or carried
    /// bytes that are not frames: nothing more comes from it.
    Lost(ProcessId, String),
}

/// Where a poll hands what it finds.
pub(crate) trait Sink {
    /// Takes one item (in order per process).
    fn take(&mut self, incoming: Incoming);

    /// Asked, where a transport can, for the header of a large frame from
    /// `from` (payload still to come, `len` bytes): where its payload
    /// should go instead of a buffer of the frame's own. `None` (the
    /// default): into the frame.
    fn place(&mut self, from: ProcessId, head: &Frame, len: usize) -> Option<Place> {
        let _ = (from, head, len);
        None
    }

    /// Takes a whole frame from `from` decoded where it arrived, its
    /// payload borrowed for this call only (in order with [`take`](Self::take)):
    /// a sink that can use the payload at once (a posted receive) saves
    /// the frame's own buffers. The default takes it as an owned frame.
    fn take_in_place(&mut self, from: ProcessId, frame: frame::InPlace<'_>) {
        self.take(Incoming::Frame(from, frame.into_frame()));
    }
}

/// Asks `sink` where the payload of a large frame from `from` goes (its
/// head `head`, `len` payload bytes of which `already` arrived): the
/// frame, decoded as a data frame, and its place with `already` written,
/// or `None` (not data, no place, or one too small: the payload goes into a
/// buffer of the frame's own).
pub(crate) fn place_large(
    sink: &mut dyn Sink,
    from: ProcessId,
    head: &[u8],
    len: usize,
    already: &[u8],
) -> Option<(Frame, Place)> {
    let frame = Frame::decode_placed(head, len).ok()?;
    let mut place = sink.place(from, &frame, len).filter(|p| p.len() >= len)?;
    place.write(0, already);
    Some((frame, place))
}

impl<F: FnMut(Incoming)> Sink for F {
    fn take(&mut self, incoming: Incoming) {
        self(incoming)
    }
}

/// Memory a transport writes a frame's payload into: a receive buffer
/// whose owner waits for the frame (see [`Sink::place`]).
#[derive(Debug)]
pub(crate) struct Place {
    ptr: *mut u8,
    len: usize,
}

impl Place {
    /// `len` bytes at `ptr`.
    ///
    /// # Safety
    ///
    /// The memory must be valid for writes of `len` bytes, and neither read
    /// nor written by anyone else, until the transport hands the frame's
    /// [`Incoming::Placed`] or [`Transport::withdraw_place`] for it returns.
    pub(crate) unsafe fn new(ptr: *mut u8, len: usize) -> Place {
        Place { ptr, len }
    }

    /// The place's length.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Writes `bytes` at offset `at`.
    ///
    /// # Panics
    ///
    /// If they do not fit.
    pub(crate) fn write(&mut self, at: usize, bytes: &[u8]) {
        assert!(at <= self.len && bytes.len() <= self.len - at);
        // SAFETY: inside the place (checked), which `new`'s contract keeps
        // valid and ours alone.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.ptr.add(at), bytes.len()) };
    }

    /// The place from offset `at` on, for a system call to fill.
    pub(crate) fn rest(&mut self, at: usize) -> (*mut u8, usize) {
        assert!(at <= self.len);
        (self.ptr.wrapping_add(at), self.len - at)
    }
}

// SAFETY: the memory is handed over to the transport by `new`'s contract;
// whichever thread polls may write it.
unsafe impl Send for Place {}

/// Memory a transport sends a frame's payload from, without a copy: a send
/// buffer whose owner waits until the transport is done with it (see
/// [`Transport::send_borrowed`]).
#[derive(Debug)]
pub(crate) struct Borrowed {
    ptr: *const u8,
    len: usize,
}

impl Borrowed {
    /// `len` bytes at `ptr`.
    ///
    /// # Safety
    ///
    /// The memory must be valid for reads of `len` bytes and not written by
    /// anyone until the transport hands [`Incoming::Sent`] for it or
    /// [`Transport::withdraw_send`] for it returns.
    pub(crate) unsafe fn new(ptr: *const u8, len: usize) -> Borrowed {
        Borrowed { ptr, len }
    }

    /// The bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: `new`'s contract.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

// SAFETY: as for `Place`: the memory is the transport's to read until it
// gives it back.
unsafe impl Send for Borrowed {}

/// Bytes of an output queue of a stream-like transport (TCP, shared
/// memory): a buffer of its own, or a borrowed payload named by its token.
#[derive(Debug)]
pub(crate) enum Chunk {
    Owned(Vec<u8>),
    /// A payload written from its sender's memory, named by a token.
    Borrowed(Borrowed, u64),
}

impl Chunk {
    /// The bytes to write.
    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            Chunk::Owned(bytes) => bytes,
            Chunk::Borrowed(data, _) => data.bytes(),
        }
    }
}

/// Why a frame could not be queued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SendError {
    /// The connection to the process is gone.
    Lost(ProcessId, String),
    /// The frame is larger than the wire format allows.
    TooLarge(usize),
    /// The transport was closed.
    Closed,
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::Lost(p, why) => write!(f, "the connection to process {p} is lost: {why}"),
            SendError::TooLarge(n) => write!(
                f,
                "a message of {n} bytes exceeds the {} bytes a frame carries",
                frame::MAX_PAYLOAD
            ),
            SendError::Closed => f.write_str("the transport is closed"),
        }
    }
}

/// Frames between the processes of one job (see the module docs).
pub(crate) trait Transport: Send + Sync + fmt::Debug {
    /// This process.
    fn this(&self) -> ProcessId;

    /// Processes in the job (this one included).
    fn processes(&self) -> u32;

    /// Queues `frame` for process `to` (not this one). Never blocks on the
    /// peer; frames to one process leave in the order of the calls.
    fn send(&self, to: ProcessId, frame: &Frame) -> Result<(), SendError>;

    /// [`send`](Self::send) of `frame` (its own signature and payload
    /// empty) with `signature` and `payload` from the caller's memory: a
    /// small message leaves from the sender's type map and buffer, where a
    /// transport can write them at once (shared memory), without copying
    /// them into the frame's own buffers first. The default copies them.
    fn send_parts(
        &self,
        to: ProcessId,
        frame: &Frame,
        signature: &[crate::datatype::Run],
        payload: &[u8],
    ) -> Result<(), SendError> {
        let frame = Frame {
            signature: signature.to_vec(),
            payload: payload.to_vec(),
            ..frame.clone()
        };
        self.send(to, &frame)
    }

    /// [`send`](Self::send) of a frame the caller gives away: a transport
    /// may then write its payload from the frame's own buffer instead of a
    /// copy (large data frames).
    fn send_owned(&self, to: ProcessId, frame: Frame) -> Result<(), SendError> {
        self.send(to, &frame)
    }

    /// [`send`](Self::send) of `frame` (its own payload empty) with `data`
    /// as its payload, written from the caller's memory. Returns `true` if
    /// the transport is done with `data` already (the default copies it);
    /// else a later poll hands [`Incoming::Sent`] with `token`, unless
    /// [`withdraw_send`](Self::withdraw_send) comes first.
    fn send_borrowed(
        &self,
        to: ProcessId,
        mut frame: Frame,
        data: Borrowed,
        token: u64,
    ) -> Result<bool, SendError> {
        let _ = token;
        frame.payload = data.bytes().to_vec();
        self.send_owned(to, frame).map(|()| true)
    }

    /// A handle with which process `to` can read the `len` bytes at
    /// `address` of this process itself, for an announcement (rendezvous)
    /// to carry: the receive that matches it pulls the data with
    /// [`fetch`](Self::fetch), so no further frame from this process is
    /// on the message's path (two fewer hops than `ClearToSend` and
    /// `send_borrowed`). `None` (the default) where the transport cannot.
    /// Nothing is read until a receive matches; the caller keeps the
    /// memory unwritten until the receiver says it is done or the send is
    /// given up.
    fn lend(&self, to: ProcessId, address: usize, len: usize) -> Option<Vec<u8>> {
        let _ = (to, address, len);
        None
    }

    /// The memory at `address` lent to process `to` ([`lend`](Self::lend))
    /// is taken back (its send completed or was given up): the transport
    /// touches it no more once this returns.
    fn unlend(&self, to: ProcessId, address: usize) {
        let _ = (to, address);
    }

    /// Reads the `len` bytes that process `from` lent with `handle`
    /// ([`lend`](Self::lend)) into `dst`; the error says why not (the
    /// lender is gone, a garbled handle). A
    /// [`withdraw_place`](Self::withdraw_place) for `from` returns only
    /// once a fetch from it under way ended (a fetch fills a pull's place).
    ///
    /// # Safety
    ///
    /// `dst` is valid for writes of `len` bytes, and nothing else reads or
    /// writes it until this returns.
    unsafe fn fetch(
        &self,
        from: ProcessId,
        handle: &[u8],
        dst: *mut u8,
        len: usize,
    ) -> Result<(), String> {
        let _ = (from, handle, dst, len);
        Err("this transport lends no memory".into())
    }

    /// The owner of the memory of `send_borrowed(to, .., token)` must go
    /// before it was sent: the transport copies what it has not written
    /// yet, so the frame still leaves whole. Nothing touches the memory
    /// after this returns.
    fn withdraw_send(&self, to: ProcessId, token: u64) {
        let _ = (to, token);
    }

    /// The owner of a [`Place`] given for the data frame `id` from `from`
    /// must go before it was filled: the rest of the payload is dropped.
    /// Nothing touches the memory after this returns.
    fn withdraw_place(&self, from: ProcessId, id: u64) {
        let _ = (from, id);
    }

    /// Bytes of a frame are in flight on a connection (output still queued,
    /// a payload partly read): more will leave or arrive soon, so an idle
    /// worker keeps polling rather than sleeping (a wake-up costs more than
    /// the next chunk takes). A hint; `false` by default.
    fn busy(&self) -> bool {
        false
    }

    /// A copy between processes that wants every CPU is under way in this
    /// process (a long read that a helper thread shares): an idle worker
    /// that would poll on only for a message that may come (not for a
    /// transfer it takes part in, [`busy`](Self::busy)) sleeps instead.
    /// A hint; `false` by default.
    fn copy_under_way(&self) -> bool {
        false
    }

    /// A completion found but not handed back yet (an [`Incoming::Sent`]
    /// that a write finishing a borrowed payload queued for the end of the
    /// poll): its sender is about to run, so the process must not answer a
    /// termination wave as idle. Asked from inside a poll (unlike
    /// [`busy`](Self::busy), which counts the poller's own locks as work).
    /// `false` by default (transports that hand completions at once).
    fn holds_completions(&self) -> bool {
        false
    }

    /// Flushes what it can of the queued output and hands every frame that
    /// arrived to `sink`, without blocking; returns how many items it
    /// handed over. Calls may come from several threads, but the caller
    /// serialises them (order per peer is kept by handing frames over in
    /// order, which concurrent polls could not).
    fn poll(&self, sink: &mut dyn Sink) -> usize;

    /// Blocks until something may have arrived, [`wake`](Self::wake) was
    /// called, or `timeout` passed (a hint: it may return early).
    fn wait(&self, timeout: Option<Duration>);

    /// Ends a [`wait`](Self::wait) in progress (or the next one).
    fn wake(&self);

    /// Sends what is queued (waiting at most `timeout`), then closes: the
    /// peers see the end of the connection. Later sends fail.
    fn close(&self, timeout: Duration);
}
