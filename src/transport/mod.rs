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
//! and [`tcp`] (one connected stream per peer process, non-blocking, epoll).
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
//! by a frame and fetched with `fi_read` from registered memory: that is a
//! capability to add to this trait (register a buffer, read a peer's
//! buffer into ours, completion through `poll`) used by `p2p`'s receive
//! path, not a change of `p2p`'s matching.

mod addr;
pub(crate) mod frame;
pub(crate) mod loopback;
pub(crate) mod mesh;
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
    /// The connection to a process ended without its goodbye, or carried
    /// bytes that are not frames: nothing more comes from it.
    Lost(ProcessId, String),
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

    /// [`send`](Self::send) of a frame the caller gives away: a transport
    /// may then write its payload from the frame's own buffer instead of a
    /// copy (large data frames).
    fn send_owned(&self, to: ProcessId, frame: Frame) -> Result<(), SendError> {
        self.send(to, &frame)
    }

    /// Flushes what it can of the queued output and hands every frame that
    /// arrived to `sink`, without blocking; returns how many items it
    /// handed over. Calls may come from several threads, but the caller
    /// serialises them (order per peer is kept by handing frames over in
    /// order, which concurrent polls could not).
    fn poll(&self, sink: &mut dyn FnMut(Incoming)) -> usize;

    /// Blocks until something may have arrived, [`wake`](Self::wake) was
    /// called, or `timeout` passed (a hint: it may return early).
    fn wait(&self, timeout: Option<Duration>);

    /// Ends a [`wait`](Self::wait) in progress (or the next one).
    fn wake(&self);

    /// Sends what is queued (waiting at most `timeout`), then closes: the
    /// peers see the end of the connection. Later sends fail.
    fn close(&self, timeout: Duration);
}
