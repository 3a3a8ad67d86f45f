//! The matching engine: one mailbox per receiving rank.
//!
//! ## Matching rules (MPI 3.1 §3.5)
//!
//! A mailbox holds two FIFO queues, both scanned front to back:
//!
//! * **posted** receives that found no message when they were posted, each
//!   with a [`MatchSpec`] (communicator context, source or `ANY_SOURCE`, tag
//!   or `ANY_TAG`);
//! * **unexpected** messages that found no posted receive when they arrived.
//!
//! An arriving message takes the *first* posted receive that matches it; a new
//! receive takes the *first* unexpected message it matches. Invariant: no
//! unexpected message matches any posted receive (each side checked the other
//! queue under the same lock before queueing itself). With per-pair FIFO
//! order of arrival (a rank's sends to one destination are issued in program
//! order and each takes the lock), this gives MPI's non-overtaking rule per
//! (source, communicator), whatever the protocol of each message.
//!
//! Taking an entry out of either queue is a *claim*, removing one's own a
//! *withdrawal*; who may then touch the memory an entry points into is the
//! protocol of [`claim`] (in short: claims are refused once the job
//! aborts).
//!
//! A probe waits for *any* new message: the slots of waiting probers (the
//! rank, or a task acting for it) are listed in `probers`, and the next
//! sender wakes them all to look again.
//!
//! The engine does not care where a sender lives: a transport delivering a
//! message from another process queues it here like a local sender does.

use std::collections::VecDeque;

use super::claim;
use super::completion::Completion;
use super::eager::EagerBuf;
use crate::datatype::copy::Layout;
use crate::datatype::TypeHandle;
use crate::sync::spin::{SpinGuard, SpinLock};
use crate::{Rank, Tag, ANY_SOURCE, ANY_TAG};

/// Who sent a message, where, with which tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Envelope {
    pub(crate) context: u64,
    pub(crate) source: Rank,
    pub(crate) tag: Tag,
    /// The id of the message's flow in a trace (`crate::trace`; 0: its
    /// sender is not traced). Not part of matching.
    pub(crate) flow: u64,
}

/// What a receive accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MatchSpec {
    pub(crate) context: u64,
    pub(crate) source: Rank,
    pub(crate) tag: Tag,
}

impl MatchSpec {
    #[inline]
    pub(crate) fn matches(&self, env: &Envelope) -> bool {
        self.context == env.context
            && (self.source == ANY_SOURCE || self.source == env.source)
            && (self.tag == ANY_TAG || self.tag == env.tag)
    }
}

/// A receive waiting for its message.
#[derive(Debug)]
pub(crate) struct Posted {
    pub(crate) spec: MatchSpec,
    pub(crate) dst: Layout,
    pub(crate) completion: *const Completion,
}

/// A message waiting for its receive.
#[derive(Debug)]
pub(crate) struct Unexpected {
    pub(crate) env: Envelope,
    pub(crate) payload: Payload,
}

/// Where an unexpected message's data is.
#[derive(Debug)]
pub(crate) enum Payload {
    /// Packed into an eager buffer; the send has completed.
    Eager {
        buf: EagerBuf,
        ty: TypeHandle,
        count: usize,
    },
    /// From another process: its packed data, signature and sender.
    Remote(Box<super::remote::RemoteMessage>),
    /// Still in the sender's buffer; the sender waits on `completion`.
    Rendezvous {
        src: Layout,
        completion: *const Completion,
    },
}

impl Unexpected {
    /// Bytes of data in the message.
    pub(crate) fn bytes(&self) -> usize {
        match &self.payload {
            Payload::Eager { buf, .. } => buf.len(),
            Payload::Remote(msg) => msg.bytes,
            Payload::Rendezvous { src, .. } => src.bytes(),
        }
    }
}

// SAFETY: the raw pointers in queue entries point to buffers and completions
// kept alive by their owners until the entry is claimed or withdrawn
// (`p2p` module docs); entries move between threads only under the mailbox
// lock.
unsafe impl Send for Posted {}
// SAFETY: as above.
unsafe impl Send for Unexpected {}

/// The two queues of one rank.
///
/// The posted queue is `first` (its oldest receive, when it is the only
/// one posted since the queue was last empty) followed by `posted`: a
/// receive is posted into `first` only if both are empty, so `first`, when
/// present, is older than every receive in `posted`, and claims and
/// withdrawals look at it first.
///
/// In this order (`repr(C)`), in a [`Mailbox`] of three lines: the
/// unexpected queue and the probers fill the first line, the posted
/// queue's overflow the second, `first` the third, next to the lock (the
/// last field of `SpinLock`). A send that finds its receive posted (the
/// common case, one receive at a time) takes one line from the
/// receiver's worker for the lock and the receive, not two (the lock and
/// the queue, then the queue's buffer on the heap, which the receiver
/// writes at every post).
#[derive(Debug, Default)]
#[repr(C)]
pub(crate) struct Queues {
    pub(crate) unexpected: VecDeque<Unexpected>,
    /// Slots of probes waiting for any new message.
    pub(crate) probers: Vec<u32>,
    /// Puts `posted` at the start of the second line.
    _line: [u64; 1],
    /// The posted receives after `first`.
    pub(crate) posted: VecDeque<Posted>,
    /// Puts `first` at the start of the third line.
    _line2: [u64; 4],
    /// The oldest posted receive, if it was posted into an empty queue.
    first: Option<Posted>,
}

impl Queues {
    /// Claims the first posted receive matching `env`, unless the job is
    /// aborting (`aborting` is read only if one matches; see
    /// [`claim::claim`]).
    ///
    /// `#[inline(always)]` for the look at `first`, the path of nearly
    /// every message; the overflow queue is searched out of line
    /// ([`take_posted_queued`](Self::take_posted_queued)). Left to LLVM
    /// (`#[inline]`), the whole of it stayed a call, which moved the
    /// claimed descriptor out through memory twice (15 instructions a
    /// one-way message of a 1-worker ping-pong, callgrind).
    #[inline(always)]
    pub(crate) fn take_posted(
        &mut self,
        env: &Envelope,
        aborting: impl FnOnce() -> bool,
    ) -> Option<Posted> {
        if let Some(first) = &self.first {
            if first.spec.matches(env) {
                // The claim of `claim::claim`, on the queue's head.
                if aborting() {
                    return None;
                }
                return self.first.take();
            }
        }
        if self.posted.is_empty() {
            return None;
        }
        // A copy on this path: given `env` itself, the caller wrote the
        // envelope to its stack on every send (callgrind).
        self.take_posted_queued(&{ *env }, aborting)
    }

    /// [`take_posted`](Self::take_posted) in the queue after `first`.
    #[inline(never)]
    fn take_posted_queued(
        &mut self,
        env: &Envelope,
        aborting: impl FnOnce() -> bool,
    ) -> Option<Posted> {
        claim::claim(&mut self.posted, |p| p.spec.matches(env), aborting)
    }

    /// Posts a receive at the back of the posted queue.
    #[inline]
    pub(crate) fn post(&mut self, posted: Posted) {
        if self.first.is_none() && self.posted.is_empty() {
            self.first = Some(posted);
        } else {
            self.posted.push_back(posted);
        }
    }

    /// Claims the first unexpected message matching `spec`, unless the job
    /// is aborting (as [`take_posted`](Self::take_posted)).
    #[inline]
    pub(crate) fn take_unexpected(
        &mut self,
        spec: &MatchSpec,
        aborting: impl FnOnce() -> bool,
    ) -> Option<Unexpected> {
        // The closure holds a copy (`move`): made by reference, it kept
        // the caller's `spec` on its stack, for the search past the
        // front, on every receive (callgrind).
        let spec = *spec;
        claim::claim(
            &mut self.unexpected,
            move |u| spec.matches(&u.env),
            aborting,
        )
    }

    /// The first unexpected message matching `spec`, left in place.
    pub(crate) fn peek_unexpected(&self, spec: &MatchSpec) -> Option<&Unexpected> {
        self.unexpected.iter().find(|u| spec.matches(&u.env))
    }

    /// Withdraws the posted receive completing `completion`.
    pub(crate) fn withdraw_posted(&mut self, completion: *const Completion) -> bool {
        if self
            .first
            .as_ref()
            .is_some_and(|p| p.completion == completion)
        {
            self.first = None;
            return true;
        }
        claim::withdraw(&mut self.posted, |p| p.completion == completion)
    }

    /// Withdraws the rendezvous message completing `completion`.
    pub(crate) fn withdraw_rendezvous(&mut self, completion: *const Completion) -> bool {
        claim::withdraw(
            &mut self.unexpected,
            |u| matches!(u.payload, Payload::Rendezvous { completion: c, .. } if c == completion),
        )
    }

    /// Takes the waiting probers: they must be woken.
    #[inline]
    pub(crate) fn take_probers(&mut self) -> Vec<u32> {
        std::mem::take(&mut self.probers)
    }

    /// Registers a waiting prober.
    pub(crate) fn add_prober(&mut self, slot: u32) {
        if !self.probers.contains(&slot) {
            self.probers.push(slot);
        }
    }
}

/// The mailbox of one rank.
///
/// Aligned to a line, three lines long ([`Queues`]): its 96 bytes used to
/// straddle lines with the neighbouring ranks' mailboxes, so that with the
/// two ranks of a ping-pong on two workers, each one's lock and the
/// other's posted queue bounced on one shared line at every message.
/// (Two lines aligned to 128 bytes, what adjacent-line prefetch pairs,
/// were enough before `Queues::first`.)
#[derive(Debug, Default)]
#[repr(align(64))]
pub(crate) struct Mailbox {
    queues: SpinLock<Queues>,
}

impl Mailbox {
    /// Locks the queues. Critical sections are a scan, a push or a pop:
    /// never a park and never a copy of message data.
    #[inline]
    pub(crate) fn lock(&self) -> SpinGuard<'_, Queues> {
        self.queues.lock()
    }

    /// [`lock`](Self::lock) without a read-modify-write, for the only
    /// thread that touches mailboxes (`Scheduler::is_solo`).
    ///
    /// # Safety
    ///
    /// The caller is the job's one worker (or a rank it runs) while the job
    /// is in solo mode: no other thread locks this mailbox meanwhile, and
    /// what any thread did with it before happens before (the mode starts
    /// before the worker's first rank and never comes back once it ends).
    #[inline]
    pub(crate) unsafe fn lock_alone(&self) -> SpinGuard<'_, Queues> {
        // SAFETY: the caller's contract.
        unsafe { self.queues.lock_alone() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(source: Rank, tag: Tag) -> Envelope {
        Envelope {
            context: 0,
            source,
            tag,
            flow: 0,
        }
    }

    #[test]
    fn a_mailbox_keeps_its_first_posted_receive_in_the_line_of_its_lock() {
        assert_eq!(std::mem::align_of::<Mailbox>(), 64);
        assert_eq!(std::mem::size_of::<Mailbox>(), 192);
        assert_eq!(std::mem::offset_of!(Queues, posted), 64);
        assert_eq!(std::mem::offset_of!(Queues, first), 128);
        assert_eq!(std::mem::size_of::<Queues>(), 128 + 56);
    }

    static BYTE: [u8; 1] = [0];

    /// A completion pointer standing for operation `n` (never followed).
    fn id(n: usize) -> *const Completion {
        std::ptr::without_provenance(n)
    }

    fn posted(tag: Tag, completion: usize) -> Posted {
        Posted {
            spec: MatchSpec {
                context: 0,
                source: 1,
                tag,
            },
            dst: Layout::of(&BYTE[..]),
            completion: id(completion),
        }
    }

    #[test]
    fn the_posted_queue_keeps_its_order_through_first() {
        let mut q = Queues::default();
        let tags = |q: &mut Queues, tags: &[Tag]| -> Vec<usize> {
            tags.iter()
                .filter_map(|&t| q.take_posted(&env(1, t), || false))
                .map(|p| p.completion.addr())
                .collect()
        };
        q.post(posted(5, 1));
        q.post(posted(5, 2));
        q.post(posted(6, 3));
        assert!(q.first.is_some());
        assert_eq!(tags(&mut q, &[6]), [3], "the first match, past `first`");
        assert_eq!(tags(&mut q, &[5]), [1], "`first` is the oldest");
        // `first` is empty but `posted` is not: a new post goes behind.
        q.post(posted(5, 4));
        assert!(q.first.is_none());
        assert_eq!(tags(&mut q, &[5, 5, 5]), [2, 4]);
        q.post(posted(7, 5));
        q.post(posted(7, 6));
        assert!(q.withdraw_posted(id(5)));
        assert!(!q.withdraw_posted(id(5)));
        assert_eq!(tags(&mut q, &[7, 7]), [6]);
        q.post(posted(8, 7));
        assert_eq!(
            q.take_posted(&env(1, 8), || true).map(|_| ()),
            None,
            "refused"
        );
        assert!(q.withdraw_posted(id(7)), "left to its owner");
    }

    #[test]
    fn wildcards_and_contexts() {
        let any = MatchSpec {
            context: 0,
            source: ANY_SOURCE,
            tag: ANY_TAG,
        };
        assert!(any.matches(&env(3, 7)));
        let exact = MatchSpec {
            context: 0,
            source: 3,
            tag: 7,
        };
        assert!(exact.matches(&env(3, 7)));
        assert!(!exact.matches(&env(3, 8)));
        assert!(!exact.matches(&env(2, 7)));
        let other = Envelope {
            context: 1,
            ..env(3, 7)
        };
        assert!(!any.matches(&other));
    }
}
