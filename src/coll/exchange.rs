//! Point-to-point exchanges for the message-based collective algorithms.
//!
//! An algorithm posts the receives and sends of a step on an [`Exchange`]
//! and waits for all of them: receives are posted before the sends that
//! could block on them, so no step deadlocks, whatever the message sizes.
//! Messages travel in the communicator's collective context, tagged with the
//! call's sequence number, so they never match point-to-point traffic nor
//! another collective call. If the rank unwinds (job abort), pending
//! descriptors are withdrawn before the buffers they point to go away.

use std::collections::{BTreeSet, HashMap};

use super::Call;
use crate::datatype::copy::Layout;
use crate::error::{CountError, Error};
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
/// communicator and its hierarchical tiers share one.
#[derive(Debug, Default)]
pub(crate) struct Traffic {
    peers: SpinLock<HashMap<u32, BTreeSet<u32>>>,
}

impl Traffic {
    fn record(&self, rank: WorldRank, process: u32) {
        self.peers
            .lock()
            .entry(rank.get())
            .or_default()
            .insert(process);
    }

    /// The processes world rank `rank` exchanged collective messages with
    /// since the last call, ascending; forgets them.
    pub(crate) fn take(&self, rank: WorldRank) -> Vec<u32> {
        let set = self.peers.lock().remove(&rank.get());
        set.map(|s| s.into_iter().collect()).unwrap_or_default()
    }
}

struct Pending {
    completion: Box<Completion>,
    queued: Queued,
    /// For a receive: the sender and the bytes its message must have.
    expect: Option<(Rank, usize)>,
}

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
        self.note_peer(WorldRank::new(call.comm.shared().group.world_rank(src)));
        let completion = Box::new(Completion::new(call.ctx.slot));
        let expect = (src, dst.bytes());
        let spec = call.comm.accept(call.context(), src, call.tag());
        match p2p::start_receive(call.comm.endpoint(), spec, dst, &completion) {
            Started::Done(outcome) => {
                let status = p2p::receive_result(call.comm.rank(), outcome)?;
                self.check_size(expect, status.bytes)?;
            }
            Started::Pending => self.pending.push(Pending {
                completion,
                queued: Queued::Receive(call.comm.world()),
                expect: Some(expect),
            }),
        }
        Ok(())
    }

    /// Counts a peer of another process in the communicator's traffic.
    #[inline]
    fn note_peer(&self, peer: WorldRank) {
        let processes = self.call.comm.job().p2p().processes();
        if processes.local(peer).is_none() {
            self.note_remote(processes.process_of(peer).get());
        }
    }

    #[cold]
    fn note_remote(&self, process: u32) {
        let call = self.call;
        call.comm.coll().traffic.record(call.comm.world(), process);
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
        let completion = Box::new(Completion::new(call.ctx.slot));
        let route = call.comm.route(call.context(), dest);
        self.note_peer(route.dest_world);
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
            });
        }
    }

    /// Waits for every operation posted so far.
    pub(crate) fn wait(&mut self) -> Result<(), Error> {
        let info = self.call.wait_info();
        let mut first_error = None;
        while let Some(p) = self.pending.last() {
            sched::wait_until(self.call.ctx, &info, || p.completion.is_done())?;
            let p = self.pending.pop().expect("just looked at it");
            if let Some(expect) = p.expect {
                let checked = p2p::receive_result(self.call.comm.rank(), p.completion.outcome())
                    .and_then(|status| self.check_size(expect, status.bytes));
                if let Err(err) = checked {
                    first_error.get_or_insert(err);
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
