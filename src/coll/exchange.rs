//! Point-to-point exchanges for the message-based collective algorithms.
//!
//! An algorithm posts the receives and sends of a step on an [`Exchange`]
//! and waits for all of them: receives are posted before the sends that
//! could block on them, so no step deadlocks, whatever the message sizes.
//! Messages travel in the communicator's collective context, tagged with the
//! call's sequence number, so they never match point-to-point traffic nor
//! another collective call. If the rank unwinds (job abort), pending
//! descriptors are withdrawn before the buffers they point to go away.
//!
//! ## Checking calls across processes
//!
//! The collective check (`check.rs`) compares the calls of one process's
//! ranks in memory. Across processes the signature travels instead: with
//! checking on, every message to a rank of another process is preceded by
//! a signature frame ([`SIGNATURE_BYTES`]: the call's kind, root, sizes,
//! type hash, algorithm, the sender's rank and call site), and every
//! receive from one first receives that frame (same source, tag and
//! context: the pair's messages do not overtake each other, so the frame
//! matches the frame). A frame that does not [`agree`](super::check::agree)
//! with the receiver's call fails the call with both ranks, calls and call
//! sites, before its data is waited for. A hierarchical call's leaders
//! carry the parent call's signature and name parent ranks
//! (`State::reported_rank`), so the report reads as for a flat call. The
//! processes of a job must agree on `MYRIAD_CHECK_COLLECTIVES`.
//! Waits go in posting order, so a frame's verdict comes before a wait for
//! data that a mismatched peer may never send.
use std::collections::{BTreeSet, HashMap};

use super::check::Signature;
use super::{Algorithm, Call};
use crate::datatype::copy::Layout;
use crate::error::{CollectiveError, CountError, Error};
use crate::identity::WorldRank;
use crate::p2p::completion::Completion;
use crate::p2p::Node;
use crate::p2p::{self, Queued, SendMode, Started};
use crate::sched;
use crate::sync::spin::SpinLock;
use crate::Rank;

/// The processes the ranks of this process exchanged collective messages
/// with, per world rank, since each last asked: counted where messages
/// are sent and received (only those that cross processes), so what it
/// reports is the traffic that happened, not an algorithm's plan. A
/// communicator and its hierarchical tiers share one. Off until a rank
/// first asks ([`take`](Self::take)), so a job that never asks keeps no
/// table (one load per message to another process).
#[derive(Debug, Default)]
pub(crate) struct Traffic {
    on: std::sync::atomic::AtomicBool,
    peers: SpinLock<HashMap<u32, BTreeSet<u32>>>,
}

impl Traffic {
    fn record(&self, rank: WorldRank, process: u32) {
        if !self.on.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        self.peers
            .lock()
            .entry(rank.get())
            .or_default()
            .insert(process);
    }

    /// The processes world rank `rank` exchanged collective messages with
    /// since the last call, ascending; forgets them.
    pub(crate) fn take(&self, rank: WorldRank) -> Vec<u32> {
        self.on.store(true, std::sync::atomic::Ordering::Relaxed);
        let set = self.peers.lock().remove(&rank.get());
        set.map(|s| s.into_iter().collect()).unwrap_or_default()
    }
}

struct Pending {
    completion: Box<Completion>,
    queued: Queued,
    /// For a receive: the sender and the bytes its message must have.
    expect: Option<(Rank, usize)>,
    /// A signature frame: the buffer it is received into, or sent from
    /// (boxed: the descriptor points into it while `Pending` moves).
    frame: Option<Box<Frame>>,
}

/// Bytes of a signature frame (module docs).
pub(crate) const SIGNATURE_BYTES: usize = 128;

type Frame = [u8; SIGNATURE_BYTES];

/// The operations of one step of a message-based algorithm.
pub(crate) struct Exchange<'c, 'a> {
    call: &'c Call<'a>,
    pending: Vec<Pending>,
}

impl<'c, 'a> Exchange<'c, 'a> {
    pub(crate) fn new(call: &'c Call<'a>) -> Self {
        Exchange {
            call,
            pending: Vec::new(),
        }
    }

    /// Posts a receive of the message from `src` into `dst`, which must stay
    /// valid until [`wait`](Self::wait) returns. The message must fill `dst`
    /// exactly: in a collective every message's size is known, and a
    /// shorter one means the ranks disagree on counts (an error, not
    /// silently unwritten data).
    pub(crate) fn recv(&mut self, src: Rank, dst: &Layout) -> Result<(), Error> {
        let call = self.call;
        if self.note_peer(WorldRank::new(call.comm.shared().peers.world_rank(src))) {
            let mut frame: Box<Frame> = Box::new([0; SIGNATURE_BYTES]);
            let layout = Layout::of_mut(&mut frame[..]);
            self.post_recv(src, &layout, Some(frame))?;
        }
        self.post_recv(src, dst, None)
    }

    fn post_recv(
        &mut self,
        src: Rank,
        dst: &Layout,
        frame: Option<Box<Frame>>,
    ) -> Result<(), Error> {
        let call = self.call;
        let completion = Box::new(Completion::new(call.ctx.slot));
        let expect = (src, dst.bytes());
        let spec = call.comm.accept(call.context(), src, call.tag());
        match p2p::start_receive(call.comm.endpoint(), spec, dst, &completion) {
            Started::Done(outcome) => {
                let status = p2p::receive_result(call.comm.rank(), outcome)?;
                self.check_size(expect, status.bytes)?;
                if let Some(frame) = &frame {
                    self.check_frame(frame)?;
                }
            }
            Started::Pending => self.pending.push(Pending {
                completion,
                queued: Queued::Receive(call.comm.world()),
                expect: Some(expect),
                frame,
            }),
        }
        Ok(())
    }

    /// Checks a received signature frame against this rank's call.
    fn check_frame(&self, frame: &Frame) -> Result<(), Error> {
        let call = self.call;
        let theirs = decode(frame);
        let agree = theirs
            .as_ref()
            .is_some_and(|(sig, ..)| super::check::agree(sig, &call.signature));
        if agree {
            return Ok(());
        }
        Err(frame_mismatch(call, theirs))
    }

    /// Counts a peer of another process in the communicator's traffic;
    /// whether a signature frame goes with the message (module docs).
    #[inline]
    fn note_peer(&self, peer: WorldRank) -> bool {
        let processes = self.call.comm.job().p2p().processes();
        if processes.local(peer).is_none() {
            return self.note_remote(processes.process_of(peer).get());
        }
        false
    }

    #[cold]
    fn note_remote(&self, process: u32) -> bool {
        let call = self.call;
        let state = call.comm.coll();
        state.traffic.record(call.comm.world(), process);
        state.checker.enabled()
    }

    fn check_size(&self, (src, expected): (Rank, usize), got: usize) -> Result<(), Error> {
        if got == expected {
            return Ok(());
        }
        Err(Error::Count(CountError::ReceivedBytes {
            op: self.call.kind.name(),
            rank: self.call.rank(),
            source: src as Rank,
            expected,
            received: got,
        }))
    }

    /// Sends `src` to `dest`; `src` must stay valid until
    /// [`wait`](Self::wait) returns.
    pub(crate) fn send(&mut self, dest: Rank, src: &Layout) {
        let call = self.call;
        let route = call.comm.route(call.context(), dest);
        if self.note_peer(route.dest_world) {
            let frame = Box::new(encode(call));
            let layout = Layout::of(&frame[..]);
            self.post_send(route, &layout, Some(frame));
        }
        self.post_send(route, src, None);
    }

    fn post_send(&mut self, route: p2p::Route, src: &Layout, frame: Option<Box<Frame>>) {
        let call = self.call;
        let completion = Box::new(Completion::new(call.ctx.slot));
        let started = p2p::start_send(
            call.comm.endpoint(),
            route,
            call.tag(),
            src,
            SendMode::Standard,
            &completion,
        );
        if let Started::Pending = started {
            self.pending.push(Pending {
                completion,
                queued: Queued::Send(route.dest_world),
                expect: None,
                frame,
            });
        }
    }

    /// Waits for every operation posted so far, in posting order.
    pub(crate) fn wait(&mut self) -> Result<(), Error> {
        let info = self.call.wait_info();
        let mut first_error = None;
        self.pending.reverse();
        while let Some(p) = self.pending.last() {
            sched::wait_until(self.call.ctx, &info, || p.completion.is_done())?;
            let p = self.pending.pop().expect("just looked at it");
            if let Some(expect) = p.expect {
                let checked = p2p::receive_result(self.call.comm.rank(), p.completion.outcome())
                    .and_then(|status| self.check_size(expect, status.bytes));
                if let Err(err) = checked {
                    first_error.get_or_insert(err);
                } else if let Some(frame) = &p.frame {
                    // A mismatch first, and at once: the data may never come.
                    self.check_frame(frame)?;
                }
            }
        }
        match first_error {
            Some(err) => Err(err),
            None => Ok(()),
        }
    }
}

impl Drop for Exchange<'_, '_> {
    fn drop(&mut self) {
        let ep = self.call.comm.endpoint();
        for p in self.pending.drain(..) {
            p2p::settle(ep, p.queued, &p.completion);
        }
    }
}

/// The signature frame of `call` (module docs): fixed fields, then the
/// call site's file (its end, if long).
fn encode(call: &Call<'_>) -> Frame {
    let sig = &call.signature;
    let state = call.comm.coll();
    let mut f = [0u8; SIGNATURE_BYTES];
    let mut at = 0;
    let mut put = |bytes: &[u8]| {
        f[at..at + bytes.len()].copy_from_slice(bytes);
        at += bytes.len();
    };
    put(&[sig.kind.index() as u8]);
    put(&sig.root.unwrap_or(-1).to_le_bytes());
    put(&[u8::from(sig.root.is_some())]);
    put(&(sig.bytes.unwrap_or(0) as u64).to_le_bytes());
    put(&[u8::from(sig.bytes.is_some())]);
    put(&sig.types.unwrap_or(0).to_le_bytes());
    put(&[u8::from(sig.types.is_some())]);
    let algorithm = sig.algorithm.map_or(u8::MAX, |a| {
        Algorithm::ALL.iter().position(|&x| x == a).unwrap_or(0) as u8
    });
    put(&[algorithm]);
    put(&state.reported_rank(call.rank()).to_le_bytes());
    put(&call.site.line().to_le_bytes());
    put(&call.site.column().to_le_bytes());
    let file = call.site.file().as_bytes();
    let room = SIGNATURE_BYTES - HEADER - 1;
    let file = &file[file.len().saturating_sub(room)..];
    put(&[file.len() as u8]);
    put(file);
    f
}

/// Bytes of a frame before the file's length.
const HEADER: usize = 1 + 5 + 9 + 9 + 1 + 4 + 4 + 4;

/// A decoded frame: the signature, the sender's rank, its call site as
/// text. `None` for bytes that are no frame.
fn decode(f: &Frame) -> Option<(Signature, Rank, String)> {
    let u32_at = |i: usize| u32::from_le_bytes(f[i..i + 4].try_into().expect("4 bytes"));
    let u64_at = |i: usize| u64::from_le_bytes(f[i..i + 8].try_into().expect("8 bytes"));
    let kind = *super::Collective::ALL.get(f[0] as usize)?;
    let root = (f[5] != 0).then(|| u32_at(1) as Rank);
    let bytes = (f[14] != 0).then(|| u64_at(6) as usize);
    let types = (f[23] != 0).then(|| u64_at(15));
    let algorithm = match f[24] {
        u8::MAX => None,
        i => Some(*Algorithm::ALL.get(i as usize)?),
    };
    let rank = u32_at(25) as Rank;
    let (line, column) = (u32_at(29), u32_at(33));
    let len = f[HEADER] as usize;
    let file = String::from_utf8_lossy(f.get(HEADER + 1..HEADER + 1 + len)?);
    let mut sig = Signature::new(kind, root, bytes);
    sig.types = types;
    sig.algorithm = algorithm;
    Some((sig, rank, format!("{file}:{line}:{column}")))
}

/// The error for a frame that disagrees with `call` (or is no frame).
#[cold]
fn frame_mismatch(call: &Call<'_>, theirs: Option<(Signature, Rank, String)>) -> Error {
    let state = call.comm.coll();
    let (their_call, their_rank, their_site) = match theirs {
        Some((sig, rank, site)) => (sig.to_string(), rank, site),
        None => ("something unreadable".to_string(), -1, "?".to_string()),
    };
    Error::Collective(CollectiveError::MismatchAcrossProcesses {
        seq: state.reported_seq(call.seq),
        ranks: (their_rank, state.reported_rank(call.rank())),
        calls: (their_call, call.signature.to_string()),
        sites: (their_site, call.site.to_string()),
    })
}
