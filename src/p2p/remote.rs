//! Point-to-point with ranks of other processes: messages become frames
//! of a [`Transport`], frames that arrive go through the same matching as
//! local sends.
//!
//! ## Protocol
//!
//! * **Send** (any mode): the data is packed into an `Eager` frame with
//!   its envelope (context, source rank, tag, destination world rank) and
//!   its element's run-length type signature; the send is complete once the
//!   frame is queued (its buffer is free again), except a synchronous send,
//!   which waits for the receiver's `Ack` (the frame's `id` names it).
//! * **Arrival**: [`progress`] polls the transport and hands each frame to
//!   the destination rank's mailbox as a local send would (`arrive`): the
//!   first matching posted receive takes it (unpacked straight from the
//!   frame into the receive buffer), or it is queued as unexpected
//!   ([`Payload::Remote`]), so matching order, wildcards, probes, matched
//!   probes, truncation and type errors are those of one process.
//! * **Order**: frames from one process arrive in order (the transport's
//!   FIFO per pair) and one poller at a time hands them to the mailboxes
//!   (the `progress` lock), so MPI's non-overtaking rule holds across
//!   processes.
//! * **End**: a process whose job ends says `Bye` (it sends nothing more)
//!   or, when its job failed, `Abort` with the error (a rank's panic names
//!   the rank); every process's job then fails with it. A connection that
//!   ends without either fails the job naming the lost process and its
//!   ranks.
//!
//! Large messages travel the same way (one frame, copied once more on
//! each side than a rendezvous would: pack, and unpack from the frame);
//! a rendezvous handshake (request to send, clear to send, data into the
//! matched receive's buffer) is not implemented yet.
//!
//! ## Completions across processes
//!
//! A posted receive taken by a frame is completed by the poller that took
//! it, which copies and completes without parking, like a local claimer.
//! A synchronous send's completion is completed when its `Ack` arrives,
//! which may take long: it sits in [`Remote`]'s table, and a sender that
//! must settle without parking (unwinding, an abort) removes it from there
//! under the table's lock ([`Remote::forget_ack`]), after which nobody
//! completes it; a cancel cannot withdraw it (its data has left).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::time::Duration;

use super::completion::{Completion, Fault, Outcome};
use super::mailbox::{Envelope, Mailbox, Payload, Unexpected};
use super::{Node, Started};
use crate::datatype::copy::{self, Layout};
use crate::datatype::{runs_mismatch, Run};
use crate::error::{CommError, Error};
use crate::identity::{ProcessId, Processes, WorldRank};
use crate::sched::{self, Scheduler};
use crate::transport::frame::{self, Frame, Kind};
use crate::transport::{Incoming, Transport};

/// The cross-process half of a process's point-to-point state.
#[derive(Debug)]
pub(crate) struct Remote {
    transport: Arc<dyn Transport>,
    /// Synchronous sends waiting for their acknowledgement, by id.
    acks: Mutex<HashMap<u64, SyncSend>>,
    next_id: AtomicU64,
    /// Held by the one thread handing arrived frames to the mailboxes.
    progress: Mutex<()>,
    /// Peers that may still send (no goodbye, not lost), by process.
    open: Mutex<Vec<bool>>,
    /// The transport counts as an external waker of the scheduler (no
    /// local deadlock is reported while a peer may still send).
    counted: AtomicBool,
}

#[derive(Debug)]
struct SyncSend {
    completion: *const Completion,
    bytes: usize,
}

// SAFETY: the completion is kept alive by its waiting sender until it is
// done or the entry is removed (`forget_ack`), both under the table lock.
unsafe impl Send for SyncSend {}

/// A message from another process waiting for its receive.
#[derive(Debug)]
pub(crate) struct RemoteMessage {
    from: ProcessId,
    /// The packed data.
    pub(crate) data: Vec<u8>,
    /// The type signature of one element, and the element count.
    signature: Vec<Run>,
    count: usize,
    /// A synchronous send's acknowledgement id (0: none).
    ack: u64,
}

impl Remote {
    pub(crate) fn new(transport: Arc<dyn Transport>) -> Remote {
        let this = transport.this().get() as usize;
        let open = (0..transport.processes() as usize)
            .map(|p| p != this)
            .collect();
        Remote {
            transport,
            acks: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            progress: Mutex::new(()),
            open: Mutex::new(open),
            counted: AtomicBool::new(false),
        }
    }

    /// The transport.
    pub(crate) fn transport(&self) -> &Arc<dyn Transport> {
        &self.transport
    }

    /// Counts the transport as an external waker of `sched` (before the
    /// workers start), unless no peer is left.
    pub(crate) fn count_as_waker(&self, sched: &Scheduler) {
        if lock(&self.open).iter().any(|&o| o) && !self.counted.swap(true, Ordering::AcqRel) {
            sched.external_started();
        }
    }

    /// Stops counting the transport as a waker (every peer is gone, or the
    /// job ended); wakes the workers so the last one to sleep looks for a
    /// deadlock again.
    fn uncount(&self, sched: &Scheduler) {
        if self.counted.swap(false, Ordering::AcqRel) {
            sched.external_ended();
            sched.wake_all();
        }
    }

    /// Removes a synchronous send waiting for its acknowledgement: `true`
    /// if it was still there (then nobody completes it), `false` if the
    /// acknowledgement is being handled (it completes without parking).
    pub(crate) fn forget_ack(&self, completion: &Completion) -> bool {
        let mut acks = lock(&self.acks);
        let id = acks
            .iter()
            .find(|(_, s)| std::ptr::eq(s.completion, completion))
            .map(|(&id, _)| id);
        id.is_some_and(|id| acks.remove(&id).is_some())
    }

    /// The job of this process ended (`failure` if it failed): tells every
    /// peer still there (`Abort` with the error, or `Bye`), sends what is
    /// queued, and closes the transport.
    pub(crate) fn finish(&self, sched: &Scheduler, failure: Option<&Error>) {
        self.uncount(sched);
        let frame = match failure {
            None => Frame::control(Kind::Bye),
            Some(error) => abort_frame(error),
        };
        let open = lock(&self.open).clone();
        for (p, open) in open.into_iter().enumerate() {
            if open {
                let _ = self.transport.send(ProcessId::new(p as u32), &frame);
            }
        }
        self.transport.close(Duration::from_secs(10));
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn abort_frame(error: &Error) -> Frame {
    let mut frame = Frame::control(Kind::Abort);
    let message = match error {
        Error::Panic { rank, message } => {
            frame.source = *rank;
            frame.tag = 1;
            message.clone()
        }
        other => other.to_string(),
    };
    frame.payload = message.into_bytes();
    frame.payload.truncate(frame::MAX_PAYLOAD);
    frame
}

/// Sends `src` to world rank `dest` of process `to` (see the module docs).
#[cold]
#[inline(never)]
pub(super) fn send<N: Node>(
    node: &N,
    to: ProcessId,
    env: Envelope,
    dest: WorldRank,
    src: &Layout,
    synchronous: bool,
    completion: &Completion,
) -> Started {
    let remote = node
        .p2p()
        .remote()
        .expect("a remote destination has a transport");
    let bytes = src.bytes();
    let done = Started::Done(Outcome {
        bytes,
        ..Outcome::default()
    });
    if bytes > frame::MAX_PAYLOAD {
        node.sched().fail(Error::Unsupported {
            what: format!(
                "a message of {bytes} bytes to another process (at most {} bytes travel in one \
                 frame; rendezvous transfers are not implemented yet)",
                frame::MAX_PAYLOAD
            ),
        });
        return done;
    }
    let mut payload = vec![0u8; bytes];
    // SAFETY: `src` is the caller's live buffer of `bytes` packed bytes;
    // `payload` has room for them.
    unsafe { copy::pack(src, payload.as_mut_ptr()) };
    let mut frame = Frame {
        kind: Kind::Eager,
        context: env.context,
        source: env.source,
        tag: env.tag,
        dest: dest.get(),
        signature: src.ty.map().signature().to_vec(),
        count: src.count as u64,
        id: 0,
        payload,
    };
    if synchronous {
        frame.id = remote.next_id.fetch_add(1, Ordering::Relaxed);
        let entry = SyncSend { completion, bytes };
        lock(&remote.acks).insert(frame.id, entry);
    }
    match remote.transport.send(to, &frame) {
        Ok(()) if synchronous => Started::Pending,
        Ok(()) => done,
        Err(err) => {
            if synchronous {
                lock(&remote.acks).remove(&frame.id);
            }
            lost(node, to, err.to_string());
            done
        }
    }
}

/// Hands what the transport received to the mailboxes; `true` if it found
/// anything. Returns at once if another thread is doing it, or if the job
/// has no transport. Called by idle workers and the progress thread.
pub(crate) fn progress<N: Node>(node: &N) -> bool {
    let Some(remote) = node.p2p().remote() else {
        return false;
    };
    let _turn = match remote.progress.try_lock() {
        Ok(turn) => turn,
        Err(TryLockError::Poisoned(turn)) => turn.into_inner(),
        Err(TryLockError::WouldBlock) => return false,
    };
    remote
        .transport
        .poll(&mut |incoming| handle(node, remote, incoming))
        > 0
}

fn handle<N: Node>(node: &N, remote: &Remote, incoming: Incoming) {
    let (from, frame) = match incoming {
        Incoming::Frame(from, frame) => (from, frame),
        Incoming::Lost(from, why) => {
            if std::mem::replace(&mut lock(&remote.open)[from.get() as usize], false) {
                lost(node, from, why);
            }
            return;
        }
    };
    match frame.kind {
        Kind::Eager => {
            let processes = node.p2p().processes();
            let Some(index) = processes.local(WorldRank::new(frame.dest)) else {
                let why = format!(
                    "it sent a message for world rank {}, which process {} does not host",
                    frame.dest,
                    processes.this()
                );
                return lost(node, from, why);
            };
            let env = Envelope {
                context: frame.context,
                source: frame.source,
                tag: frame.tag,
            };
            let msg = RemoteMessage {
                from,
                data: frame.payload,
                signature: frame.signature,
                count: frame.count as usize,
                ack: frame.id,
            };
            arrive(node, &node.p2p().mailboxes[index.get() as usize], env, msg);
        }
        Kind::Ack => {
            let entry = lock(&remote.acks).remove(&frame.id);
            if let Some(send) = entry {
                // SAFETY: the sender keeps its completion alive until done
                // or until it removes the entry, which we just did first;
                // read the waiter before completing.
                let waiter = unsafe { (*send.completion).waiter() };
                // SAFETY: as above; we are its only completer.
                unsafe {
                    (*send.completion).complete(Outcome {
                        bytes: send.bytes,
                        ..Outcome::default()
                    })
                };
                sched::unpark(node.sched(), waiter);
            }
        }
        Kind::Bye => {
            let mut open = lock(&remote.open);
            open[from.get() as usize] = false;
            if !open.iter().any(|&o| o) {
                drop(open);
                remote.uncount(node.sched());
            }
        }
        Kind::Abort => {
            lock(&remote.open)[from.get() as usize] = false;
            let message = String::from_utf8_lossy(&frame.payload).into_owned();
            node.sched().fail(if frame.tag == 1 {
                Error::Panic {
                    rank: frame.source,
                    message,
                }
            } else {
                Error::Comm(CommError::ProcessFailed {
                    process: from.get(),
                    message,
                })
            });
        }
    }
}

/// Process `process` is gone or unusable: the job fails, naming it and
/// its ranks.
#[cold]
fn lost<N: Node>(node: &N, process: ProcessId, reason: String) {
    node.sched()
        .fail(lost_error(node.p2p().processes(), process, reason));
}

fn lost_error(processes: &Processes, process: ProcessId, reason: String) -> Error {
    let block = processes.block(process);
    Error::Comm(CommError::ProcessLost {
        process: process.get(),
        first: block.start as i32,
        end: block.end as i32,
        reason,
    })
}

/// A message from another process reaches `mailbox` (the remote twin of
/// `p2p::arrive`): it takes the first matching posted receive, or is
/// queued as unexpected and wakes the mailbox's probers.
fn arrive<N: Node>(node: &N, mailbox: &Mailbox, env: Envelope, msg: RemoteMessage) {
    let mut queues = mailbox.lock();
    if let Some(posted) = queues.take_posted(&env, || node.sched().is_aborting()) {
        drop(queues);
        let outcome = receive(node, &env, msg, &posted.dst);
        // SAFETY: the receiver keeps its completion alive until it is done;
        // we claimed the descriptor. Read the waiter before completing.
        let waiter = unsafe { (*posted.completion).waiter() };
        // SAFETY: as above; we are its only completer.
        unsafe { (*posted.completion).complete(outcome) };
        sched::unpark(node.sched(), waiter);
        return;
    }
    queues.unexpected.push_back(Unexpected {
        env,
        payload: Payload::Remote(Box::new(msg)),
    });
    let probers = queues.take_probers();
    drop(queues);
    for slot in probers {
        sched::unpark(node.sched(), slot);
    }
}

/// Receives a message from another process into `dst` (checking its
/// signature and size as `p2p::transfer` does), and acknowledges a
/// synchronous send.
pub(super) fn receive<N: Node>(
    node: &N,
    env: &Envelope,
    msg: RemoteMessage,
    dst: &Layout,
) -> Outcome {
    let len = msg.data.len();
    let mut outcome = Outcome {
        source: env.source,
        tag: env.tag,
        bytes: len,
        ..Outcome::default()
    };
    let mismatch = (msg.count != 0)
        .then(|| runs_mismatch(&msg.signature, msg.count, dst.ty.map().signature()))
        .flatten();
    if let Some((index, sent, expected)) = mismatch {
        outcome.fault = Some(Fault::Type {
            index,
            sent: sent.name(),
            expected: expected.name(),
        });
    } else {
        // SAFETY: `data` holds `len` packed bytes; `dst` is the receiver's
        // live buffer (it waits, or is the caller).
        unsafe { copy::unpack(msg.data.as_ptr(), len, dst) };
        if len > dst.bytes() {
            outcome.fault = Some(Fault::Truncated {
                buffer: dst.bytes(),
            });
        }
    }
    release(node, msg);
    outcome
}

/// A message from another process is received or dropped: acknowledges
/// it if its sender waits (a synchronous send).
pub(super) fn release<N: Node>(node: &N, msg: RemoteMessage) {
    if msg.ack == 0 {
        return;
    }
    let Some(remote) = node.p2p().remote() else {
        return;
    };
    let mut ack = Frame::control(Kind::Ack);
    ack.id = msg.ack;
    if let Err(err) = remote.transport.send(msg.from, &ack) {
        lost(node, msg.from, err.to_string());
    }
}
