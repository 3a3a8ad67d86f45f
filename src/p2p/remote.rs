//! Point-to-point with ranks of other processes: messages become frames
//! of a [`Transport`], frames that arrive go through the same matching as
//! local sends.
//!
//! ## Protocol
//!
//! * **Eager** (up to the eager limit, and every buffered send): the data
//!   is packed into an `Eager` frame with its envelope (context, source
//!   rank, tag, destination world rank) and its element's run-length type
//!   signature; the send is complete once the frame is queued (its buffer
//!   is free again), except a synchronous send, which waits for the
//!   receiver's `Ack` (the frame's `id` names it).
//! * **Rendezvous** (above the eager limit, standard or synchronous): a
//!   `RequestToSend` announces the message (envelope, signature and count,
//!   no data) and matches like any message; the receive that takes it asks
//!   for the data (`ClearToSend`, naming the send and the receive), and the
//!   sender answers with a `Data` frame that is unpacked straight into the
//!   receive buffer. The send completes once its data has left (for a
//!   synchronous send that is after the match, as MPI requires); the
//!   receive when its data arrives. Where the transport can (TCP), the
//!   data of a contiguous send of at least [`ZERO_COPY`] bytes is written
//!   from the sender's buffer (`send_borrowed`; the send completes when the
//!   transport gives the buffer back) and read into a contiguous receive
//!   buffer that takes it whole with matching types (`Sink::place`): no
//!   copy in user space, as MPI over TCP does it. Where the receiver can
//!   read the sender's memory itself (shared memory with CMA, large
//!   messages: `Transport::lend`), the announcement carries a handle to
//!   the contiguous send buffer, and a receive into a buffer that takes
//!   the data whole reads it when it matches and answers a `ClearToSend`
//!   that says it did (`FETCHED`): one hop before the copy instead of
//!   three. A matched probe's announced message
//!   that is dropped releases its sender as cancelled (`ClearToSend` naming
//!   no receive).
//! * **Arrival**: [`progress`] polls the transport and hands each frame to
//!   the destination rank's mailbox as a local send would (`arrive`): the
//!   first matching posted receive takes it, or it is queued as unexpected
//!   ([`Payload::Remote`]), so matching order, wildcards, probes, matched
//!   probes, truncation and type errors are those of one process.
//! * **Order**: frames from one process arrive in order (the transport's
//!   FIFO per pair) and one poller at a time hands them to the mailboxes
//!   (the `progress` lock), so MPI's non-overtaking rule holds across
//!   processes (an announced message is matched in its place; only its
//!   data comes later).
//! * **End**: a process whose job ends says `Bye` (it sends nothing more)
//!   or, when its job failed, `Abort` with the error (a rank's panic names
//!   the rank); every process's job then fails with it. A connection that
//!   ends without either fails the job naming the lost process and its
//!   ranks.
//!
//! ## Deadlocks across processes
//!
//! While a peer may still send, the transport counts as an external waker,
//! so no process reports a local deadlock. A termination-detection wave
//! (Mattern's channel counting, run by a coordinator) finds the deadlock
//! instead. Every process counts the frames it sends to and handles from
//! each process (one relaxed add per frame, where frames are sent and
//! handled; the wave's own frames are not counted). The coordinator, the
//! lowest process whose lower peers all said goodbye, starts a wave
//! ([`Remote::detect`], from the progress thread) only while it is idle
//! itself (`sched::deadlock::quiescent`: every worker asleep, every rank
//! parked, nothing local can wake one): a `Probe` to every open peer, each
//! of which answers `Idle` with whether it is idle, its counts, which
//! peers may still send to it and its deadlock report. A wave is clean if
//! every process is idle, for every pair the frames one sent equal the
//! frames the other handled, and every process saw the goodbye of every
//! process outside the wave (finished processes send nothing more, so
//! what they sent was handled). Two consecutive clean waves with the same
//! counts prove the job dead: between them no process handled a frame, so
//! none woke up, and nothing is in flight. The coordinator then fails its
//! job with `Error::Deadlock` whose report has every waiting process's
//! report (so it names every rank's wait) and sends it as `Abort` (tag 2)
//! to the others, whose jobs fail with the same report. A frame that
//! arrives between waves changes a count and spoils the pair. Failed waves
//! back off (1 ms doubling to 250 ms) so an idle job that waits for a
//! long computation sends a handful of small frames per second.
//!
//! ## Completions across processes
//!
//! A posted receive taken by an eager frame is completed by the poller
//! that took it, which copies and completes without parking, like a local
//! claimer. Operations that wait for another process (a synchronous
//! send's `Ack`, an announced send's `ClearToSend`, a matched receive's
//! `Data`) may wait long: each sits in one of [`Remote`]'s tables, whose
//! entry the answer's handler removes under the table's lock before it
//! touches the operation's buffer or completion. An owner that must settle
//! without parking (unwinding, an abort) removes the entry itself
//! ([`Remote::forget`]), after which nobody touches them; if the entry is
//! gone, a handler holds it and completes without parking. A buffer lent
//! to the transport (a borrowed send, a placed receive) is withdrawn from
//! it by `forget` too before the owner goes (`Transport::withdraw_send`
//! copies what was not written yet, `withdraw_place` drops the rest of the
//! payload). A cancel
//! cannot withdraw them (the message has left, or was matched).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::completion::{Completion, Fault, Outcome};
use super::mailbox::{Envelope, Mailbox, MailboxGuard, Payload, Unexpected};
use super::pollers::Pollers;
use super::{Node, SendMode, Started};
use crate::datatype::copy::{self, Layout};
use crate::datatype::{runs_mismatch, Run};
use crate::error::{CommError, Error};
use crate::identity::{ProcessId, Processes, WorldRank};
use crate::sched::{self, Scheduler};
use crate::sync::spin::SpinLock;
use crate::transport::frame::{self, Frame, InPlace, Kind};
use crate::transport::{Borrowed, Incoming, Place, SendError, Sink, Transport};

/// The cross-process half of a process's point-to-point state.
#[derive(Debug)]
pub(crate) struct Remote {
    transport: Arc<dyn Transport>,
    /// Synchronous sends waiting for their acknowledgement, by id.
    acks: Mutex<HashMap<u64, SyncSend>>,
    next_id: AtomicU64,
    /// Held by the one thread handing arrived frames to the mailboxes.
    /// Only ever tried (who finds it taken has nothing to do), on every
    /// poll of a polling loop: a spin lock, given back with a store where
    /// a mutex gives it back with a swap (it must look for sleepers).
    progress: SpinLock<()>,
    /// Peers that may still send (no goodbye, not lost), by process.
    open: Mutex<Vec<bool>>,
    /// The transport counts as an external waker of the scheduler (no
    /// local deadlock is reported while a peer may still send).
    counted: AtomicBool,
    /// Announced sends waiting for their clear-to-send, by id.
    announced: Mutex<HashMap<u64, Announced>>,
    /// Those of them whose buffer the receiver reads itself
    /// (`Transport::lend`: only large ones).
    lending: Arc<AtomicUsize>,
    /// Announced sends whose data the transport writes from their buffer
    /// (`Transport::send_borrowed`), by id.
    sending: Mutex<HashMap<u64, Sending>>,
    /// Receives matched with an announced message, waiting for its data,
    /// by id.
    pulls: Mutex<HashMap<u64, Pull>>,
    /// Frames sent to each process (wave frames excepted).
    sent: Box<[AtomicU64]>,
    /// Frames from each process handled (wave frames excepted).
    handled: Box<[AtomicU64]>,
    /// The termination-detection wave this process coordinates.
    wave: Mutex<Wave>,
    /// Idle workers polling the transport, for the progress thread to
    /// stand aside.
    pollers: Pollers,
    /// Every peer said goodbye while borrowed sends still waited for
    /// their `Incoming::Sent`: the transport stops counting as a waker
    /// when the last of them completes.
    goodbye_pending: AtomicBool,
}

/// The first and the longest pause after a wave that found work.
const BACKOFF: (Duration, Duration) = (Duration::from_millis(1), Duration::from_millis(250));

/// How often a busy coordinator looks whether it went idle (the progress
/// thread's wait otherwise ends only when a frame arrives).
const BUSY: Duration = Duration::from_millis(10);

/// A coordinator's termination-detection state (see the module docs).
#[derive(Debug)]
struct Wave {
    /// The number of the last wave started.
    number: u64,
    /// While a wave runs: each process's answer (this one's included), by
    /// process; `None` for processes outside the wave or not heard yet.
    answers: Vec<Option<Idle>>,
    /// Processes in the running wave (empty: none runs).
    members: Vec<bool>,
    /// The counts of the last clean wave, by process.
    clean: Option<Counts>,
    /// When the next wave may start.
    next: Instant,
    backoff: Duration,
}

/// Each member's frames sent to and handled from each process, by
/// process (`None`: not in the wave).
type Counts = Vec<Option<(Vec<u64>, Vec<u64>)>>;

/// One process's answer to a wave.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Idle {
    /// Its deadlock report if it is idle.
    report: Option<String>,
    /// Frames it sent to, and handled from, each process.
    sent: Vec<u64>,
    handled: Vec<u64>,
    /// Peers that may still send to it.
    open: Vec<bool>,
}

#[derive(Debug)]
struct SyncSend {
    completion: *const Completion,
    bytes: usize,
}

/// A send whose message was announced (rendezvous): its buffer and
/// completion, kept alive by the waiting sender.
#[derive(Debug)]
struct Announced {
    src: Layout,
    completion: *const Completion,
    bytes: usize,
    /// The receiver reads the buffer itself (`Transport::lend`): counted in
    /// `Remote::lending` while the entry lives.
    _lent: Option<Lending>,
}

/// One announced send whose buffer a peer reads itself, counted in
/// `Remote::lending` until it drops (answered, given up, or failed).
struct Lending {
    count: Arc<AtomicUsize>,
    /// The transport it was lent to, the peer and the buffer's address
    /// (`Transport::unlend` when the entry goes; `None` in tests).
    lent: Option<(Arc<dyn Transport>, ProcessId, usize)>,
}

impl std::fmt::Debug for Lending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lending").finish_non_exhaustive()
    }
}

impl Lending {
    fn new(
        count: &Arc<AtomicUsize>,
        lent: Option<(Arc<dyn Transport>, ProcessId, usize)>,
    ) -> Lending {
        count.fetch_add(1, Ordering::Relaxed);
        Lending {
            count: Arc::clone(count),
            lent,
        }
    }
}

impl Drop for Lending {
    fn drop(&mut self) {
        // The transport lets go of the memory before its owner can.
        if let Some((transport, to, address)) = self.lent.take() {
            transport.unlend(to, address);
        }
        self.count.fetch_sub(1, Ordering::Relaxed);
    }
}

/// An announced send whose data the transport writes from its buffer: it
/// completes when the transport gives the buffer back.
#[derive(Debug)]
struct Sending {
    to: ProcessId,
    completion: *const Completion,
    bytes: usize,
}

/// A receive that matched an announced message: where its data goes.
#[derive(Debug)]
struct Pull {
    env: Envelope,
    dst: Layout,
    completion: *const Completion,
    signature: Vec<Run>,
    count: usize,
    /// The process whose transport writes the data straight into `dst`
    /// (`Sink::place`, or `fetch` of its lent buffer), once it started.
    placed: Option<ProcessId>,
}

// SAFETY: the buffers and completions of the three table entries are kept
// alive by their waiting owners until the completion is done or the entry
// is removed (`Remote::forget`); whoever removes the entry under its
// table's lock is the only one to touch them afterwards.
unsafe impl Send for SyncSend {}
// SAFETY: as above.
unsafe impl Send for Announced {}
// SAFETY: as above.
unsafe impl Send for Pull {}
// SAFETY: as above.
unsafe impl Send for Sending {}

/// Data frames at least this large leave from the sender's buffer and land
/// in the receiver's (where the transport can and the layout is
/// contiguous): below it, a copy costs less than the bookkeeping.
const ZERO_COPY: usize = 64 * 1024;
/// The `tag` of a `ClearToSend` that says the receiver read the data
/// itself from the buffer its announcement lent (`Transport::lend`).
const FETCHED: i32 = 1;

/// A message from another process waiting for its receive.
#[derive(Debug)]
pub(crate) struct RemoteMessage {
    from: ProcessId,
    /// The packed data; for an announced message, the handle with which
    /// its sender lent its buffer (`Transport::lend`), or nothing.
    data: Vec<u8>,
    /// Bytes in the message.
    pub(crate) bytes: usize,
    /// An announced message's id at its sender (0: the data is here).
    announced: u64,
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
            acks: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            progress: SpinLock::new(()),
            pollers: Pollers::new(),
            goodbye_pending: AtomicBool::new(false),
            open: Mutex::new(open),
            counted: AtomicBool::new(false),
            announced: Mutex::new(HashMap::new()),
            lending: Arc::default(),
            sending: Mutex::new(HashMap::new()),
            pulls: Mutex::new(HashMap::new()),
            sent: counters(transport.processes()),
            handled: counters(transport.processes()),
            wave: Mutex::new(Wave {
                number: 0,
                answers: Vec::new(),
                members: Vec::new(),
                clean: None,
                next: Instant::now(),
                backoff: BACKOFF.0,
            }),
            transport,
        }
    }

    /// Queues `frame` for process `to`, counting it for the termination
    /// wave (before it can arrive, so a count never shows a frame handled
    /// that was not sent).
    #[inline]
    fn send(&self, to: ProcessId, frame: &Frame) -> Result<(), crate::transport::SendError> {
        self.sent[to.get() as usize].fetch_add(1, Ordering::Relaxed);
        self.transport.send(to, frame)
    }

    /// [`send`](Self::send) of a frame with its signature and payload
    /// from the caller's memory (`Transport::send_parts`).
    fn send_parts(
        &self,
        to: ProcessId,
        frame: &Frame,
        signature: &[Run],
        payload: &[u8],
    ) -> Result<(), crate::transport::SendError> {
        self.sent[to.get() as usize].fetch_add(1, Ordering::Relaxed);
        self.transport.send_parts(to, frame, signature, payload)
    }

    /// [`send`](Self::send) of a frame given away (its payload leaves from
    /// its own buffer: large data frames).
    fn send_owned(&self, to: ProcessId, frame: Frame) -> Result<(), crate::transport::SendError> {
        self.sent[to.get() as usize].fetch_add(1, Ordering::Relaxed);
        self.transport.send_owned(to, frame)
    }

    /// Bytes of a frame are in flight on a connection (`Transport::busy`).
    pub(crate) fn transport_busy(&self) -> bool {
        self.transport.busy()
    }

    /// A copy that wants every CPU is under way: a peer reads a buffer
    /// this process lent (it lends only large ones), or this process
    /// reads a long payload (`Transport::copy_under_way`).
    pub(crate) fn copy_under_way(&self) -> bool {
        self.lending.load(Ordering::Relaxed) > 0 || self.transport.copy_under_way()
    }

    /// The idle workers polling the transport (see `pollers.rs`).
    pub(crate) fn pollers(&self) -> &Pollers {
        &self.pollers
    }

    /// Starts a termination-detection wave if this process coordinates
    /// them, is idle, and the backoff has passed (see the module docs).
    /// Called by the progress thread after each poll; returns how long it
    /// may wait before calling again (`None`: no wave to run).
    pub(crate) fn detect(&self, sched: &Scheduler) -> Option<Duration> {
        if !self.counted.load(Ordering::Acquire) || sched.is_aborting() {
            return None;
        }
        if !sched::deadlock::idle(sched, 1) {
            // Busy (the common case, checked without a lock): the next
            // wave starts soon after it goes idle.
            let mut wave = lock(&self.wave);
            if wave.members.is_empty() {
                wave.clean = None;
                wave.backoff = BACKOFF.0;
                wave.next = Instant::now() + BACKOFF.0;
            }
            return Some(BUSY);
        }
        // Frames are handled under this lock: none arrives while we look.
        let Some(_turn) = self.progress.try_lock() else {
            return Some(BACKOFF.0);
        };
        let open = lock(&self.open).clone();
        let this = self.transport.this().get() as usize;
        if open[..this].iter().any(|&o| o) || !open.iter().any(|&o| o) {
            // A lower process coordinates, or no peer is left.
            return None;
        }
        let mut wave = lock(&self.wave);
        if !wave.members.is_empty() {
            // A member that ended (goodbye) will not answer: start over.
            if (0..open.len()).any(|p| p != this && wave.members[p] && !open[p]) {
                wave.members.clear();
                wave.clean = None;
            } else {
                return Some(BACKOFF.1);
            }
        }
        let now = Instant::now();
        if now < wave.next {
            return Some(wave.next - now);
        }
        let mine = self.idle(sched);
        if mine.report.is_none() {
            // Busy: the next wave starts soon after it goes idle.
            wave.clean = None;
            wave.backoff = BACKOFF.0;
            wave.next = now + BACKOFF.0;
            return Some(BUSY);
        }
        wave.number += 1;
        let mut probe = Frame::control(Kind::Probe);
        probe.id = wave.number;
        wave.members = open.clone();
        wave.members[this] = true;
        wave.answers = vec![None; open.len()];
        wave.answers[this] = Some(mine);
        for (p, &open) in open.iter().enumerate() {
            if open {
                // A failed send shows up as a lost peer at the next poll.
                let _ = self.transport.send(ProcessId::new(p as u32), &probe);
            }
        }
        Some(BACKOFF.1)
    }

    /// This process's answer to a wave (taken with the progress lock held,
    /// so no frame is handled meanwhile).
    fn idle(&self, sched: &Scheduler) -> Idle {
        let this = self.transport.this();
        let wakers = usize::from(self.counted.load(Ordering::Acquire));
        // A transport still moving bytes or holding a completion it has not
        // handed back (a `Sent` found by the write that finished a borrowed
        // payload, handed at the end of this very poll) is about to wake a
        // rank: answering idle then let two waves pass a ping-pong whose
        // receiver had the data while its sender still waited for `Sent`.
        let report = if self.transport.holds_completions() {
            None
        } else {
            sched::deadlock::quiescent(sched, wakers, &format!("process {this}"))
        };
        let read = |c: &[AtomicU64]| c.iter().map(|n| n.load(Ordering::SeqCst)).collect();
        Idle {
            report,
            sent: read(&self.sent),
            handled: read(&self.handled),
            open: lock(&self.open).clone(),
        }
    }

    /// The answer of process `from` to wave `number`: once every member
    /// answered, judges the wave (see the module docs).
    fn answered(&self, sched: &Scheduler, from: ProcessId, number: u64, idle: Idle) {
        let mut wave = lock(&self.wave);
        let from = from.get() as usize;
        if number != wave.number || !wave.members.get(from).copied().unwrap_or(false) {
            return;
        }
        wave.answers[from] = Some(idle);
        if (0..wave.members.len()).any(|p| wave.members[p] && wave.answers[p].is_none()) {
            return;
        }
        let members = std::mem::take(&mut wave.members);
        let answers = std::mem::take(&mut wave.answers);
        let now = Instant::now();
        let Some(counts) = clean(&members, &answers) else {
            wave.clean = None;
            wave.backoff = (wave.backoff * 2).min(BACKOFF.1);
            wave.next = now + wave.backoff;
            return;
        };
        if wave.clean.as_ref() != Some(&counts) {
            // Clean once: confirm with a second wave at once.
            wave.clean = Some(counts);
            wave.next = now;
            return;
        }
        drop(wave);
        let report = whole_report(&answers);
        let error = Error::Deadlock { report };
        let frame = abort_frame(&error);
        let this = self.transport.this().get() as usize;
        for (p, &member) in members.iter().enumerate() {
            if member && p != this {
                let _ = self.send(ProcessId::new(p as u32), &frame);
            }
        }
        sched.fail(error);
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

    /// Removes the entry of an operation waiting for another process (a
    /// synchronous send's acknowledgement, an announced send's
    /// clear-to-send, a receive's data): `true` if there was one (then
    /// nobody completes it), `false` if there is none (it is not waiting
    /// for another process, or its answer is being handled right now,
    /// which completes it without parking).
    pub(crate) fn forget(&self, completion: &Completion) -> bool {
        fn take<T>(table: &Mutex<HashMap<u64, T>>, is_it: impl Fn(&T) -> bool) -> Option<(u64, T)> {
            let mut table = lock(table);
            let id = table.iter().find(|(_, e)| is_it(e)).map(|(&id, _)| id)?;
            table.remove(&id).map(|entry| (id, entry))
        }
        if take(&self.acks, |s| std::ptr::eq(s.completion, completion)).is_some()
            || take(&self.announced, |s| std::ptr::eq(s.completion, completion)).is_some()
        {
            return true;
        }
        // Memory lent to the transport comes back before the owner goes.
        if let Some((id, send)) = take(&self.sending, |s| std::ptr::eq(s.completion, completion)) {
            self.transport.withdraw_send(send.to, id);
            return true;
        }
        if let Some((id, pull)) = take(&self.pulls, |p| std::ptr::eq(p.completion, completion)) {
            if let Some(from) = pull.placed {
                self.transport.withdraw_place(from, id);
            }
            return true;
        }
        false
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
                let _ = self.send(ProcessId::new(p as u32), &frame);
            }
        }
        self.transport.close(Duration::from_secs(10));
    }
}

fn counters(processes: u32) -> Box<[AtomicU64]> {
    (0..processes).map(|_| AtomicU64::new(0)).collect()
}

/// The counts of a clean wave (every member idle, every pair's frames
/// handled as sent, every process outside the wave seen gone by every
/// member), by process; `None` if it is not clean.
fn clean(members: &[bool], answers: &[Option<Idle>]) -> Option<Counts> {
    let answer = |p: usize| answers[p].as_ref();
    for p in (0..members.len()).filter(|&p| members[p]) {
        let a = answer(p)?;
        a.report.as_ref()?;
        for (q, &member) in members.iter().enumerate() {
            if q == p {
                continue;
            }
            if member {
                let b = answer(q)?;
                if !a.open[q] || a.sent[q] != b.handled[p] {
                    return None;
                }
            } else if a.open[q] {
                // q's goodbye (after its last frame) has not reached p.
                return None;
            }
        }
    }
    Some(
        answers
            .iter()
            .map(|a| a.as_ref().map(|a| (a.sent.clone(), a.handled.clone())))
            .collect(),
    )
}

/// The whole job's deadlock report: every idle process's own.
fn whole_report(answers: &[Option<Idle>]) -> String {
    let reports: Vec<&str> = answers
        .iter()
        .filter_map(|a| a.as_ref()?.report.as_deref())
        .collect();
    let finished = answers.iter().filter(|a| a.is_none()).count();
    let mut out = format!(
        "every process of the job is idle and no message is in flight between them \
         ({} processes waiting, {finished} finished):",
        reports.len()
    );
    for report in reports {
        out.push('\n');
        out.push_str(report);
    }
    out
}

/// An `Idle` frame: per process the frames sent and handled (u64 each,
/// little endian), then per process whether it is open (one byte), then
/// the report (UTF-8; `tag` 1 if there is one).
fn encode_idle(idle: &Idle) -> Frame {
    let mut frame = Frame::control(Kind::Idle);
    let mut payload = Vec::with_capacity(idle.sent.len() * 17);
    for (s, h) in idle.sent.iter().zip(&idle.handled) {
        payload.extend_from_slice(&s.to_le_bytes());
        payload.extend_from_slice(&h.to_le_bytes());
    }
    payload.extend(idle.open.iter().map(|&o| u8::from(o)));
    if let Some(report) = &idle.report {
        frame.tag = 1;
        payload.extend_from_slice(report.as_bytes());
    }
    payload.truncate(frame::MAX_PAYLOAD);
    frame.payload = payload;
    frame
}

/// The answer an `Idle` frame carries for a job of `processes`, or `None`
/// if its payload is too short.
fn decode_idle(frame: &Frame, processes: usize) -> Option<Idle> {
    let bytes = &frame.payload;
    let counts = bytes.get(..processes * 16)?;
    let open = bytes.get(processes * 16..processes * 17)?;
    let word = |i: usize| u64::from_le_bytes(counts[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
    Some(Idle {
        report: (frame.tag == 1)
            .then(|| String::from_utf8_lossy(&bytes[processes * 17..]).into_owned()),
        sent: (0..processes).map(|p| word(2 * p)).collect(),
        handled: (0..processes).map(|p| word(2 * p + 1)).collect(),
        open: open.iter().map(|&b| b != 0).collect(),
    })
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
        Error::Deadlock { report } => {
            frame.tag = 2;
            report.clone()
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
    mode: SendMode,
    completion: &Completion,
) -> Started {
    let remote = node
        .p2p()
        .remote()
        .expect("a remote destination has a transport");
    let bytes = src.bytes();
    let synchronous = mode == SendMode::Synchronous;
    let done = Started::Done(Outcome {
        bytes,
        ..Outcome::default()
    });
    if bytes > frame::MAX_PAYLOAD {
        node.sched().fail(Error::Unsupported {
            what: format!(
                "a message of {bytes} bytes to another process (one frame carries at most {} \
                 bytes; splitting larger messages is not implemented yet)",
                frame::MAX_PAYLOAD
            ),
        });
        return done;
    }
    if mode != SendMode::Buffered && bytes > node.p2p().eager_limit {
        return announce(node, remote, to, env, dest, src, completion);
    }
    // The signature and the payload go from the send's own type map and
    // (contiguous) buffer: the transport copies them once, where it can
    // straight into the peer's memory (`Transport::send_parts`).
    let mut frame = Frame {
        kind: Kind::Eager,
        context: env.context,
        source: env.source,
        tag: env.tag,
        dest: dest.get(),
        signature: Vec::new(),
        count: src.count as u64,
        id: 0,
        // A trace's flow id (0: none; see `frame`).
        reply: env.flow,
        payload: Vec::new(),
    };
    if synchronous {
        frame.id = remote.next_id.fetch_add(1, Ordering::Relaxed);
        let entry = SyncSend { completion, bytes };
        lock(&remote.acks).insert(frame.id, entry);
    }
    let map = src.ty.map();
    let packed_copy;
    let payload: &[u8] = if bytes == 0 {
        &[]
    } else if map.is_contiguous() {
        // SAFETY: `src` is a live buffer (its owner waits, or is the
        // caller) whose `bytes` bytes are contiguous from `base`.
        unsafe { std::slice::from_raw_parts(src.base, bytes) }
    } else {
        packed_copy = packed(src);
        &packed_copy
    };
    match remote.send_parts(to, &frame, map.signature(), payload) {
        Ok(()) if synchronous => Started::Pending,
        Ok(()) => done,
        Err(err) => {
            if synchronous {
                lock(&remote.acks).remove(&frame.id);
            }
            send_failed(node, to, &err);
            done
        }
    }
}

/// The packed bytes of `src`, written once into fresh capacity (no
/// zeroing first: a 4 KiB eager send's memset per message).
fn packed(src: &Layout) -> Vec<u8> {
    let len = src.bytes();
    if len == 0 {
        return Vec::new();
    }
    let mut payload = Vec::with_capacity(len);
    // SAFETY: `src` is a live buffer (its owner waits, or is the caller)
    // of `len` packed bytes; `payload` has capacity for them, and `pack`
    // writes all of them, so they are initialised before `set_len`.
    unsafe {
        copy::pack(src, payload.as_mut_ptr());
        payload.set_len(len);
    }
    payload
}

/// Announces a large or synchronous message (rendezvous): the sender
/// waits until a receive matches and the data has left.
fn announce<N: Node>(
    node: &N,
    remote: &Remote,
    to: ProcessId,
    env: Envelope,
    dest: WorldRank,
    src: &Layout,
    completion: &Completion,
) -> Started {
    let id = remote.next_id.fetch_add(1, Ordering::Relaxed);
    let mut frame = Frame {
        kind: Kind::RequestToSend,
        context: env.context,
        source: env.source,
        tag: env.tag,
        dest: dest.get(),
        signature: src.ty.map().signature().to_vec(),
        count: src.count as u64,
        id,
        // A trace's flow id (0: none; see `frame`).
        reply: env.flow,
        payload: Vec::new(),
    };
    let bytes = src.bytes();
    let mut lent = None;
    if let Some(contiguous) = src.as_bytes().filter(|_| bytes >= ZERO_COPY) {
        // The receiver may read the data itself when a receive matches
        // (`Transport::lend`); the send waits as usual until it says so.
        if let Some(handle) = remote.transport.lend(to, contiguous.base as usize, bytes) {
            frame.payload = handle;
            lent = Some(Lending::new(
                &remote.lending,
                Some((Arc::clone(&remote.transport), to, contiguous.base as usize)),
            ));
        }
    }
    let entry = Announced {
        src: src.clone(),
        completion,
        bytes,
        _lent: lent,
    };
    lock(&remote.announced).insert(id, entry);
    match remote.send(to, &frame) {
        Ok(()) => Started::Pending,
        Err(err) => {
            lock(&remote.announced).remove(&id);
            send_failed(node, to, &err);
            Started::Done(Outcome {
                bytes,
                ..Outcome::default()
            })
        }
    }
}

/// A receive matched the announced message `msg`: asks its sender for the
/// data, which completes `completion` (with `dst` filled) when it arrives.
pub(super) fn pull<N: Node>(
    node: &N,
    env: Envelope,
    msg: RemoteMessage,
    dst: &Layout,
    completion: *const Completion,
) {
    let remote = node
        .p2p()
        .remote()
        .expect("an announced message has a transport");
    if !msg.data.is_empty() {
        if let Some(whole) = takes_whole(&msg.signature, msg.count, msg.bytes, dst) {
            return fetch(node, remote, env, msg, whole, completion);
        }
    }
    let id = remote.next_id.fetch_add(1, Ordering::Relaxed);
    let entry = Pull {
        env,
        dst: dst.clone(),
        completion,
        signature: msg.signature,
        count: msg.count,
        placed: None,
    };
    lock(&remote.pulls).insert(id, entry);
    let mut clear = Frame::control(Kind::ClearToSend);
    clear.id = msg.announced;
    clear.reply = id;
    if let Err(err) = remote.send(msg.from, &clear) {
        lock(&remote.pulls).remove(&id);
        send_failed(node, msg.from, &err);
    }
}

/// The contiguous bytes of `dst` if they take a message of `len` bytes
/// (`count` elements of `signature`) whole with matching types, so that
/// its data can be written there as it comes (else it is unpacked, and
/// `unpack_checked` reports what is wrong).
fn takes_whole(signature: &[Run], count: usize, len: usize, dst: &Layout) -> Option<Layout> {
    let whole = dst.as_bytes()?;
    let fits = len <= whole.bytes()
        && (count == 0 || runs_mismatch(signature, count, dst.ty.map().signature()).is_none());
    fits.then_some(whole)
}

/// A receive matched an announced message whose sender lent its buffer
/// (`Transport::lend`): reads the data straight into `whole` (the receive
/// buffer), completes `completion` and tells the sender its send is done.
/// No `ClearToSend` and data frame on the way: one hop instead of three.
///
/// The receive is a pull with its place given (`placed`) while the data
/// is read: a rank that unwinds meanwhile (the job failing) forgets it
/// (`Remote::forget`), whose `withdraw_place` returns only once the read
/// ended; a failed read leaves it there for that, as a pull whose data
/// never comes.
fn fetch<N: Node>(
    node: &N,
    remote: &Remote,
    env: Envelope,
    msg: RemoteMessage,
    whole: Layout,
    completion: *const Completion,
) {
    let (from, len) = (msg.from, msg.bytes);
    let id = remote.next_id.fetch_add(1, Ordering::Relaxed);
    let entry = Pull {
        env,
        dst: whole.clone(),
        completion,
        signature: msg.signature,
        count: msg.count,
        placed: Some(from),
    };
    lock(&remote.pulls).insert(id, entry);
    // SAFETY: `whole` is the receive buffer of a rank that waits for this
    // data (it posted the receive, or is the caller), writable for
    // `whole.bytes()` >= `len` bytes (`takes_whole`); the rank forgets the
    // pull, which waits for this read, before its buffer can go.
    let read = unsafe {
        remote
            .transport
            .fetch(from, &msg.data, whole.base as *mut u8, len)
    };
    if let Err(why) = read {
        return lost(node, from, why);
    }
    // The receiving rank first, then the sender: its rank, woken by the
    // answer, then finds the reply this rank sends next already there
    // more often, rather than parking for it and being woken again.
    complete_pull(node, remote, id, len);
    let mut done = Frame::control(Kind::ClearToSend);
    done.id = msg.announced;
    done.tag = FETCHED;
    if let Err(err) = remote.send(from, &done) {
        send_failed(node, from, &err);
    }
}

/// The data of pull `id` is in its receive buffer, `len` bytes: completes
/// the receive, unless its rank forgot it meanwhile.
fn complete_pull<N: Node>(node: &N, remote: &Remote, id: u64, len: usize) {
    let entry = lock(&remote.pulls).remove(&id);
    if let Some(pull) = entry {
        let outcome = Outcome {
            source: pull.env.source,
            tag: pull.env.tag,
            bytes: len,
            flow: pull.env.flow,
            ..Outcome::default()
        };
        complete(node, pull.completion, outcome);
    }
}

/// Hands what the transport received to the mailboxes; `true` if it found
/// anything. Returns at once if another thread is doing it, or if the job
/// has no transport. Called by idle workers and the progress thread.
pub(crate) fn progress<N: Node>(node: &N) -> bool {
    let Some(remote) = node.p2p().remote() else {
        return false;
    };
    let Some(_turn) = remote.progress.try_lock() else {
        return false;
    };
    remote.transport.poll(&mut Arrivals { node, remote }) > 0
}

/// Where the transport hands what it received.
struct Arrivals<'a, N> {
    node: &'a N,
    remote: &'a Remote,
}

impl<N: Node> Sink for Arrivals<'_, N> {
    fn take(&mut self, incoming: Incoming) {
        handle(self.node, self.remote, incoming);
    }

    /// A small message whose payload is still where it arrived goes
    /// straight into a posted receive's buffer (no buffers of its own on
    /// the way); else it becomes an owned frame as `take` has it.
    fn take_in_place(&mut self, from: ProcessId, frame: InPlace<'_>) {
        if frame.frame.kind != Kind::Eager {
            return handle(
                self.node,
                self.remote,
                Incoming::Frame(from, frame.into_frame()),
            );
        }
        let (node, remote) = (self.node, self.remote);
        count_handled(remote, from);
        let Some((mailbox, env)) = destination(node, from, &frame.frame) else {
            return;
        };
        let mut queues = mailbox.lock();
        let Some(posted) = queues.take_posted(&env, || node.sched().is_aborting()) else {
            let msg = RemoteMessage {
                from,
                bytes: frame.payload.len(),
                data: frame.payload.to_vec(),
                signature: frame.runs.into_vec(),
                count: frame.frame.count as usize,
                announced: 0,
                ack: frame.frame.id,
            };
            return queue_unexpected(node, queues, env, msg);
        };
        drop(queues);
        let outcome = unpack_checked(
            &env,
            frame.runs.as_slice(),
            frame.frame.count as usize,
            frame.payload,
            &posted.dst,
        );
        if frame.frame.id != 0 {
            acknowledge(node, from, frame.frame.id);
        }
        complete(node, posted.completion, outcome);
    }

    /// The data of a matched receive goes straight into its buffer when
    /// it is contiguous, takes the data whole and the types match (else
    /// the frame keeps it, and `unpack_checked` reports what is wrong).
    fn place(&mut self, from: ProcessId, head: &Frame, len: usize) -> Option<Place> {
        let mut pulls = lock(&self.remote.pulls);
        let pull = pulls.get_mut(&head.id)?;
        if pull.placed.is_some() {
            return None;
        }
        let dst = takes_whole(&pull.signature, pull.count, len, &pull.dst)?;
        pull.placed = Some(from);
        // SAFETY: `dst` is the receive buffer of a rank that waits for this
        // data (its entry is in `pulls`), writable for `dst.bytes()` ≥ `len`
        // bytes; the rank takes the entry out and withdraws the place
        // (`Remote::forget`) before its buffer can go, and nothing else
        // touches the buffer until the frame is handed over.
        Some(unsafe { Place::new(dst.base as *mut u8, len) })
    }
}

fn handle<N: Node>(node: &N, remote: &Remote, incoming: Incoming) {
    let (from, frame) = match incoming {
        Incoming::Frame(from, frame) => (from, frame),
        Incoming::Placed(from, frame, len) => {
            count_handled(remote, from);
            // The data is in the buffer already (checked by `place`).
            complete_pull(node, remote, frame.id, len);
            return;
        }
        Incoming::Sent(to, id) => {
            let (entry, last) = {
                let mut sending = lock(&remote.sending);
                let entry = sending.remove(&id);
                (entry, sending.is_empty())
            };
            if let Some(send) = entry {
                debug_assert_eq!(send.to, to);
                let outcome = Outcome {
                    bytes: send.bytes,
                    ..Outcome::default()
                };
                complete(node, send.completion, outcome);
            }
            // The sender is runnable now: no deadlock check can pass it by.
            if last && remote.goodbye_pending.swap(false, Ordering::AcqRel) {
                remote.uncount(node.sched());
            }
            return;
        }
        Incoming::Lost(from, why) => {
            // Reported once, and only while the process may still send.
            lost(node, from, why);
            lock(&remote.open)[from.get() as usize] = false;
            return;
        }
    };
    if !matches!(frame.kind, Kind::Probe | Kind::Idle) {
        count_handled(remote, from);
    }
    match frame.kind {
        Kind::Probe => {
            let idle = remote.idle(node.sched());
            let mut answer = encode_idle(&idle);
            answer.id = frame.id;
            // A failed send shows up as a lost peer at the next poll.
            let _ = remote.transport.send(from, &answer);
        }
        Kind::Idle => match decode_idle(&frame, remote.sent.len()) {
            Some(idle) => remote.answered(node.sched(), from, frame.id, idle),
            None => lost(node, from, "it answered a wave with garbled counts".into()),
        },
        Kind::Eager | Kind::RequestToSend => {
            let Some((mailbox, env)) = destination(node, from, &frame) else {
                return;
            };
            let announce = frame.kind == Kind::RequestToSend;
            let msg = RemoteMessage {
                from,
                bytes: frame.message_bytes(),
                data: frame.payload,
                signature: frame.signature,
                count: frame.count as usize,
                announced: if announce { frame.id } else { 0 },
                ack: if announce { 0 } else { frame.id },
            };
            arrive(node, mailbox, env, msg);
        }
        Kind::Ack => {
            let entry = lock(&remote.acks).remove(&frame.id);
            if let Some(send) = entry {
                let outcome = Outcome {
                    bytes: send.bytes,
                    ..Outcome::default()
                };
                complete(node, send.completion, outcome);
            }
        }
        Kind::ClearToSend => {
            let entry = lock(&remote.announced).remove(&frame.id);
            let Some(send) = entry else {
                // Given up by its sender (unwound during an abort).
                return;
            };
            let mut outcome = Outcome {
                bytes: send.bytes,
                ..Outcome::default()
            };
            if frame.tag == FETCHED {
                // The receiver read the lent buffer: the send is done.
            } else if frame.reply == 0 {
                outcome.cancelled = true;
            } else {
                let mut data = Frame::control(Kind::Data);
                data.id = frame.reply;
                match send.src.as_bytes().filter(|_| send.bytes >= ZERO_COPY) {
                    Some(bytes) => {
                        // The data leaves from the sender's buffer: the send
                        // completes when the transport gives it back.
                        let sending = Sending {
                            to: from,
                            completion: send.completion,
                            bytes: send.bytes,
                        };
                        lock(&remote.sending).insert(frame.id, sending);
                        // SAFETY: the sender's buffer is valid for reads of
                        // its `bytes` and not written while it waits (the
                        // send borrows it); it waits until its entry in
                        // `sending` is completed, or takes the entry out and
                        // withdraws the borrow (`Remote::forget`) first.
                        let data_ref = unsafe { Borrowed::new(bytes.base, bytes.bytes()) };
                        remote.sent[from.get() as usize].fetch_add(1, Ordering::Relaxed);
                        let sent = remote
                            .transport
                            .send_borrowed(from, data, data_ref, frame.id);
                        let done = match sent {
                            Ok(done) => done,
                            Err(err) => {
                                send_failed(node, from, &err);
                                true
                            }
                        };
                        if done {
                            let entry = lock(&remote.sending).remove(&frame.id);
                            if let Some(send) = entry {
                                complete(node, send.completion, outcome);
                            }
                        }
                        return;
                    }
                    None => {
                        data.payload = packed(&send.src);
                        if let Err(err) = remote.send_owned(from, data) {
                            send_failed(node, from, &err);
                        }
                    }
                }
            }
            complete(node, send.completion, outcome);
        }
        Kind::Data => {
            let entry = lock(&remote.pulls).remove(&frame.id);
            if let Some(pull) = entry {
                let outcome = unpack_checked(
                    &pull.env,
                    &pull.signature,
                    pull.count,
                    &frame.payload,
                    &pull.dst,
                );
                complete(node, pull.completion, outcome);
            }
        }
        Kind::Bye => {
            let mut open = lock(&remote.open);
            open[from.get() as usize] = false;
            if !open.iter().any(|&o| o) {
                drop(open);
                // A borrowed send whose bytes all left may still wait for
                // its `Sent`, which the transport hands over after frames
                // it read meanwhile (this goodbye among them): the
                // transport wakes it, so it still counts as a waker.
                if lock(&remote.sending).is_empty() {
                    remote.uncount(node.sched());
                } else {
                    remote.goodbye_pending.store(true, Ordering::Release);
                }
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
            } else if frame.tag == 2 {
                Error::Deadlock { report: message }
            } else {
                Error::Comm(CommError::ProcessFailed {
                    process: from.get(),
                    message,
                })
            });
        }
    }
}

/// The mailbox and envelope of a message frame from `from`, or `None`
/// (the peer is reported lost) if its rank is not hosted here.
fn destination<'n, N: Node>(
    node: &'n N,
    from: ProcessId,
    frame: &Frame,
) -> Option<(&'n Mailbox, Envelope)> {
    let processes = node.p2p().processes();
    let Some(index) = processes.local(WorldRank::new(frame.dest)) else {
        let why = format!(
            "it sent a message for world rank {}, which process {} does not host",
            frame.dest,
            processes.this()
        );
        lost(node, from, why);
        return None;
    };
    let env = Envelope {
        context: frame.context,
        source: frame.source,
        tag: frame.tag,
        // The sender's flow id in a trace (0: none).
        flow: frame.reply,
    };
    Some((&node.p2p().mailboxes[index.get() as usize], env))
}

/// Counts a frame from `from` as handled (for the termination waves).
fn count_handled(remote: &Remote, from: ProcessId) {
    let handled = &remote.handled[from.get() as usize];
    // Only the holder of the progress lock changes it.
    handled.store(handled.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

/// Completes an operation whose table entry the caller removed, and wakes
/// its owner.
fn complete<N: Node>(node: &N, completion: *const Completion, outcome: Outcome) {
    // SAFETY: the owner keeps its completion alive until it is done or
    // until it removes the entry (`Remote::forget`, or withdraws its posted
    // receive), and the caller claimed it first under that table's or
    // mailbox's lock; read the waiter before completing.
    let waiter = unsafe { (*completion).waiter() };
    // SAFETY: as above; the caller is its only completer.
    unsafe { (*completion).complete(outcome) };
    sched::unpark(node.sched(), waiter);
}

/// Process `process` is gone or unusable: the job fails, naming it and
/// its ranks.
/// A process that said goodbye is not lost: what could not reach it had
/// no receiver any more.
#[cold]
fn lost<N: Node>(node: &N, process: ProcessId, reason: String) {
    if let Some(remote) = node.p2p().remote() {
        if !lock(&remote.open)[process.get() as usize] {
            return;
        }
    }
    node.sched()
        .fail(lost_error(node.p2p().processes(), process, reason));
}

/// A frame could not be sent to `process`. The connection's reading side
/// decides what that means, so it is not reported here: a peer whose job
/// failed sends its `Abort` and closes, and a send that finds the
/// connection closed before this process read that `Abort` must not
/// replace the peer's error with a lost connection. The frames the peer
/// sent before closing are read first, then the end of the stream
/// (`Incoming::Lost`, reported by [`lost`] unless a goodbye came first);
/// the transport is woken so that whoever waits in it reads them now.
#[cold]
fn send_failed<N: Node>(node: &N, process: ProcessId, err: &SendError) {
    match err {
        SendError::Lost(..) => {
            if let Some(remote) = node.p2p().remote() {
                remote.transport.wake();
                remote.pollers.release();
            }
        }
        // The job ends (its transport was closed by `finish`).
        SendError::Closed => {}
        SendError::TooLarge(_) => lost(node, process, err.to_string()),
    }
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
        if msg.is_announced() {
            // Completed when the data arrives.
            return pull(node, env, msg, &posted.dst, posted.completion);
        }
        let outcome = receive(node, &env, msg, &posted.dst);
        complete(node, posted.completion, outcome);
        return;
    }
    queue_unexpected(node, queues, env, msg);
}

/// Queues `msg` as unexpected in the mailbox whose lock `queues` holds (no
/// posted receive matched it) and wakes the ranks probing there.
fn queue_unexpected<N: Node>(
    node: &N,
    mut queues: MailboxGuard<'_>,
    env: Envelope,
    msg: RemoteMessage,
) {
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

/// Receives a message from another process (its data here) into `dst`
/// (checking its signature and size as `p2p::transfer` does), and
/// acknowledges a synchronous send.
pub(super) fn receive<N: Node>(
    node: &N,
    env: &Envelope,
    msg: RemoteMessage,
    dst: &Layout,
) -> Outcome {
    debug_assert!(!msg.is_announced());
    let outcome = unpack_checked(env, &msg.signature, msg.count, &msg.data, dst);
    release(node, msg);
    outcome
}

/// Checks a message's signature against `dst`'s type and unpacks its
/// packed `data` into `dst` (as `p2p::transfer` does for local messages).
fn unpack_checked(
    env: &Envelope,
    signature: &[Run],
    count: usize,
    data: &[u8],
    dst: &Layout,
) -> Outcome {
    let len = data.len();
    let mut outcome = Outcome {
        source: env.source,
        tag: env.tag,
        bytes: len,
        flow: env.flow,
        ..Outcome::default()
    };
    let mismatch = (count != 0)
        .then(|| runs_mismatch(signature, count, dst.ty.map().signature()))
        .flatten();
    if let Some((index, sent, expected)) = mismatch {
        outcome.fault = Some(Fault::Type {
            index,
            sent,
            expected,
        });
    } else {
        // SAFETY: `data` holds `len` packed bytes; `dst` is the receiver's
        // live buffer (it waits, or is the caller).
        unsafe { copy::unpack(data.as_ptr(), len, dst) };
        if len > dst.bytes() {
            outcome.fault = Some(Fault::Truncated {
                buffer: dst.bytes(),
            });
        }
    }
    outcome
}

impl RemoteMessage {
    /// Whether the message was announced (its data is still at its
    /// sender, to be pulled once a receive matches).
    #[inline]
    pub(crate) fn is_announced(&self) -> bool {
        self.announced != 0
    }
}

/// A message from another process is received or dropped: acknowledges a
/// synchronous send's; an announced message that is dropped (a matched
/// probe's `Message`) releases its sender as cancelled.
pub(super) fn release<N: Node>(node: &N, msg: RemoteMessage) {
    if msg.ack != 0 {
        return acknowledge(node, msg.from, msg.ack);
    }
    if !msg.is_announced() {
        return;
    }
    let Some(remote) = node.p2p().remote() else {
        return;
    };
    let mut clear = Frame::control(Kind::ClearToSend);
    clear.id = msg.announced;
    if let Err(err) = remote.send(msg.from, &clear) {
        send_failed(node, msg.from, &err);
    }
}

/// Tells process `from` that its synchronous send `id` was matched.
fn acknowledge<N: Node>(node: &N, from: ProcessId, id: u64) {
    let Some(remote) = node.p2p().remote() else {
        return;
    };
    let mut ack = Frame::control(Kind::Ack);
    ack.id = id;
    if let Err(err) = remote.send(from, &ack) {
        send_failed(node, from, &err);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::Threading;
    use crate::transport::loopback::Loopback;

    /// An idle process's answer with its counts (sent, handled) per process.
    fn idle(counts: &[(u64, u64)], open: &[bool]) -> Option<Idle> {
        Some(Idle {
            report: Some("idle".into()),
            sent: counts.iter().map(|c| c.0).collect(),
            handled: counts.iter().map(|c| c.1).collect(),
            open: open.to_vec(),
        })
    }

    /// A wave is clean only if every member is idle, every pair's frames
    /// were handled as sent, and no member may still hear from a process
    /// outside the wave.
    #[test]
    fn a_clean_wave_is_idle_balanced_and_agrees_on_who_left() {
        let all = [true, true, true];
        let (t, f) = (true, false);
        // 0 sent 2 frames to 1, 1 handled them; 1 sent 1 to 2, handled.
        let good = vec![
            idle(&[(0, 0), (2, 0), (0, 0)], &[f, t, t]),
            idle(&[(0, 2), (0, 0), (1, 0)], &[t, f, t]),
            idle(&[(0, 0), (0, 1), (0, 0)], &[t, t, f]),
        ];
        assert!(clean(&all, &good).is_some());
        // A frame from 1 to 2 still in flight.
        let mut in_flight = good.clone();
        in_flight[1] = idle(&[(0, 2), (0, 0), (2, 0)], &[t, f, t]);
        assert!(clean(&all, &in_flight).is_none());
        // Process 2 busy.
        let mut busy = good.clone();
        busy[2].as_mut().unwrap().report = None;
        assert!(clean(&all, &busy).is_none());
        // Process 2 left (goodbye): clean once every member saw it leave,
        // whatever the counts with it.
        let members = [true, true, false];
        let mut left = good.clone();
        left[2] = None;
        left[0] = idle(&[(0, 0), (2, 0), (5, 0)], &[f, t, f]);
        left[1] = idle(&[(0, 2), (0, 0), (1, 7)], &[t, f, t]);
        assert!(clean(&members, &left).is_none(), "1 did not see 2 leave");
        left[1].as_mut().unwrap().open[2] = false;
        assert!(clean(&members, &left).is_some());
    }

    /// A send whose buffer a peer reads itself counts as a copy under way
    /// (idle workers leave the CPUs to it) until its entry goes: answered,
    /// or given up by its owner (`forget`).
    #[test]
    fn a_lent_buffer_counts_as_a_copy_until_its_send_is_forgotten() {
        let remote = Remote::new(Loopback::join(2).remove(0));
        let data = [7u64; 4];
        let completion = Completion::new(0);
        let entry = |lent| Announced {
            src: Layout::of(&data[..]),
            completion: &completion,
            bytes: 32,
            _lent: lent,
        };
        lock(&remote.announced).insert(1, entry(None));
        assert!(
            !remote.copy_under_way(),
            "an announcement that lent nothing"
        );
        lock(&remote.announced).insert(2, entry(Some(Lending::new(&remote.lending, None))));
        assert!(remote.copy_under_way());
        assert!(remote.forget(&completion));
        assert!(remote.forget(&completion));
        assert!(!remote.copy_under_way());
    }

    /// The verdict needs two consecutive clean waves with the same counts:
    /// a clean wave followed by one with other counts (a frame was handled
    /// between them) is no deadlock.
    #[test]
    fn a_deadlock_takes_two_clean_waves_with_the_same_counts() {
        let run = |second: (u64, u64)| {
            let transport = Loopback::join(2).remove(0);
            let remote = Remote::new(transport);
            let sched = Scheduler::new(
                std::iter::once(WorldRank::new(0)),
                Box::new([]),
                Threading::Single,
                |c| c.to_string(),
            );
            let (t, f) = (true, false);
            let mut verdicts = Vec::new();
            for counts in [(3, 4), second] {
                {
                    let mut wave = lock(&remote.wave);
                    wave.number += 1;
                    wave.members = vec![true, true];
                    wave.answers = vec![idle(&[(0, 0), counts], &[f, t]), None];
                }
                let number = lock(&remote.wave).number;
                let answer = idle(&[(counts.1, counts.0), (0, 0)], &[t, f]).unwrap();
                remote.answered(&sched, ProcessId::new(1), number, answer);
                verdicts.push(sched.is_aborting());
            }
            (verdicts, sched.take_failure())
        };
        let (verdicts, failure) = run((3, 4));
        assert_eq!(verdicts, [false, true]);
        match failure {
            Some(Error::Deadlock { report }) => assert!(
                report.starts_with("every process of the job is idle") && report.contains("idle"),
                "{report}"
            ),
            other => panic!("expected a deadlock, got {other:?}"),
        }
        let (verdicts, failure) = run((4, 4));
        assert_eq!(verdicts, [false, false]);
        assert!(failure.is_none());
    }

    /// An `Idle` frame decodes to the answer it encodes; a short one is
    /// refused.
    #[test]
    fn idle_answers_survive_the_wire() {
        let answer = Idle {
            report: Some("all 1 live ranks of process 1 are blocked".into()),
            sent: vec![1, 2, 3],
            handled: vec![4, 5, u64::MAX],
            open: vec![true, false, true],
        };
        let frame = Frame::decode(&encode_idle(&answer).to_bytes()).unwrap();
        assert_eq!(decode_idle(&frame, 3), Some(answer.clone()));
        let busy = Idle {
            report: None,
            ..answer
        };
        assert_eq!(decode_idle(&encode_idle(&busy), 3), Some(busy.clone()));
        let mut short = encode_idle(&busy);
        short.payload.pop();
        assert_eq!(decode_idle(&short, 3), None);
    }
}
