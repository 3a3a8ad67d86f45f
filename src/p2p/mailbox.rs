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
use std::ptr::NonNull;

use super::claim;
use super::completion::Completion;
use super::eager::EagerBuf;
use crate::datatype::copy::{self, Layout};
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

/// A message left in a mailbox's line for its owner's blocking receive
/// (`Queues::first`), by a sender that found that receive [`resident`]:
/// the sender writes it under the mailbox lock and unlocks with the
/// [`DELIVERED`] flag; the owner, spinning on that flag, takes it under
/// its own lock and copies it into its buffer. One cache line travels
/// between their workers (the lock's), where the completion's and the
/// buffer's travelled too (`benches/handoff_model.c`, modes 0 and 3).
///
/// [`resident`]: MailboxGuard::post
#[derive(Debug)]
pub(crate) struct Delivery {
    /// The receive's completion: which receive it is (not followed).
    completion: NonNull<Completion>,
    pub(crate) source: Rank,
    pub(crate) tag: Tag,
    pub(crate) bytes: u32,
    pub(crate) data: [u8; RESIDENT_BYTES],
}

/// The largest message delivered into a mailbox's line.
pub(crate) const RESIDENT_BYTES: usize = 16;

/// Flag of a mailbox's lock word: `first` is a receive that takes a
/// [`Delivery`] in place.
const RESIDENT: u32 = 1 << 1;
/// Flag of a mailbox's lock word: `first` holds a [`Delivery`].
const DELIVERED: u32 = 1 << 2;

/// What [`Queues::first`] holds. (Two variants, the second an `Option`
/// of a `Delivery` whose pointer has a niche: 56 bytes, as
/// `Option<Posted>`; three variants would take 64.)
#[derive(Debug)]
enum First {
    /// The oldest posted receive.
    Posted(Posted),
    /// No receive; maybe a message for the owner's blocking receive.
    Vacant(Option<Delivery>),
}

// SAFETY: as `Posted` (a delivery's pointer is an identity, never followed).
unsafe impl Send for Delivery {}

impl Default for First {
    fn default() -> Self {
        First::Vacant(None)
    }
}

/// The two queues of one rank.
///
/// The posted queue is `first` (its oldest receive, when it is the only
/// one posted since the queue was last empty) followed by `posted`: a
/// receive is posted into `first` only if both are empty, so `first`, when
/// present, is older than every receive in `posted`, and claims and
/// withdrawals look at it first. `first` may hold instead a message
/// delivered in place ([`Delivery`]), which is no posted receive.
///
/// In this order (`repr(C)`), in a [`Mailbox`] of three lines: the
/// unexpected queue and the probers fill the first line, the posted
/// queue's overflow the second, `first` the third, next to the lock (the
/// last field of `SpinLock`). A send that finds its receive posted (the
/// common case, one receive at a time) takes one line from the
/// receiver's worker for the lock and the receive, not two (the lock and
/// the queue, then the queue's buffer on the heap, which the receiver
/// writes at every post).
///
/// The methods that touch `first` are [`MailboxGuard`]'s: they keep the
/// lock word's flags true to it.
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
    /// The oldest posted receive, if it was posted into an empty queue, or
    /// a message delivered in place.
    first: First,
}

impl Queues {
    /// [`take_posted`](Self::take_posted) in the queue after `first`.
    #[inline(never)]
    fn take_posted_queued(
        &mut self,
        env: &Envelope,
        aborting: impl FnOnce() -> bool,
    ) -> Option<Posted> {
        claim::claim(&mut self.posted, |p| p.spec.matches(env), aborting)
    }

    /// Claims the first unexpected message matching `spec`, unless the job
    /// is aborting (as [`MailboxGuard::take_posted`]).
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

/// What a sender found in a mailbox ([`MailboxGuard::claim`]).
#[derive(Debug)]
pub(crate) enum Claim {
    /// The message was left in the mailbox's line for its receive: the
    /// send is done.
    Delivered,
    /// This posted receive is the sender's to complete.
    Posted(Posted),
    /// No posted receive matches (or the job aborts).
    None,
}

/// The locked queues of a [`Mailbox`].
#[derive(Debug)]
pub(crate) struct MailboxGuard<'a>(SpinGuard<'a, Queues>);

impl std::ops::Deref for MailboxGuard<'_> {
    type Target = Queues;

    #[inline(always)]
    fn deref(&self) -> &Queues {
        &self.0
    }
}

impl std::ops::DerefMut for MailboxGuard<'_> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut Queues {
        &mut self.0
    }
}

impl MailboxGuard<'_> {
    /// Claims the first posted receive matching `env`, unless the job is
    /// aborting (`aborting` is read only if one matches; see
    /// [`claim::claim`]).
    ///
    /// `#[inline(always)]` for the look at `first`, the path of nearly
    /// every message; the overflow queue is searched out of line
    /// ([`Queues::take_posted_queued`]). Left to LLVM (`#[inline]`), the
    /// whole of it stayed a call, which moved the claimed descriptor out
    /// through memory twice (15 instructions a one-way message of a
    /// 1-worker ping-pong, callgrind).
    #[inline(always)]
    pub(crate) fn take_posted(
        &mut self,
        env: &Envelope,
        aborting: impl FnOnce() -> bool,
    ) -> Option<Posted> {
        match self.claim(env, None, aborting) {
            Claim::Posted(posted) => Some(posted),
            Claim::Delivered | Claim::None => None,
        }
    }

    /// [`take_posted`](Self::take_posted) by a local sender of `src`: if
    /// the receive it matches is `first` and [`resident`](Self::post),
    /// and `src` fits in a [`Delivery`] and in the receive's buffer (one
    /// contiguous type map on both sides), the message is left in
    /// `first` instead, flagged [`DELIVERED`] ([`Claim::Delivered`]).
    #[inline(always)]
    pub(crate) fn claim(
        &mut self,
        env: &Envelope,
        src: Option<&Layout>,
        aborting: impl FnOnce() -> bool,
    ) -> Claim {
        if let First::Posted(first) = &self.first {
            if first.spec.matches(env) {
                // The claim of `claim::claim`, on the queue's head.
                if aborting() {
                    return Claim::None;
                }
                let flags = self.0.flags();
                if flags & RESIDENT != 0 {
                    if let Some(src) = src.filter(|src| fits(src, &first.dst)) {
                        let delivery = delivery(env, src, first.completion);
                        self.first = First::Vacant(Some(delivery));
                        self.0.set_flags(flags & !RESIDENT | DELIVERED);
                        return Claim::Delivered;
                    }
                    self.0.set_flags(flags & !RESIDENT);
                }
                // Moved once, into the claim (through an `Option`, twice:
                // 9 instructions a message, callgrind).
                let First::Posted(posted) = std::mem::replace(&mut self.first, First::Vacant(None))
                else {
                    unreachable!("looked at above")
                };
                return Claim::Posted(posted);
            }
        }
        if self.posted.is_empty() {
            return Claim::None;
        }
        // A copy on this path: given `env` itself, the caller wrote the
        // envelope to its stack on every send (callgrind).
        match self.take_posted_queued(&{ *env }, aborting) {
            Some(posted) => Claim::Posted(posted),
            None => Claim::None,
        }
    }

    /// Posts a receive at the back of the posted queue. `resident`: the
    /// receive is its owner's blocking receive, which looks for a
    /// [`Delivery`] while it waits ([`take_delivery`](Self::take_delivery));
    /// honoured only if the receive goes into `first`.
    #[inline]
    pub(crate) fn post(&mut self, posted: Posted, resident: bool) {
        if matches!(self.first, First::Vacant(None)) && self.posted.is_empty() {
            // Written without dropping what was there (nothing to drop).
            std::mem::forget(std::mem::replace(&mut self.first, First::Posted(posted)));
            if resident {
                let flags = self.0.flags();
                self.0.set_flags(flags | RESIDENT);
            }
        } else {
            self.posted.push_back(posted);
        }
    }

    /// Takes the message delivered in place for the receive completing
    /// `completion`, if there is one; else that receive, if still posted,
    /// takes no delivery any more (its owner is about to park on its
    /// completion, which only a completer wakes).
    pub(crate) fn take_delivery(&mut self, completion: &Completion) -> Option<Delivery> {
        let flags = self.0.flags();
        if flags & DELIVERED != 0 {
            if let First::Vacant(Some(d)) = &self.first {
                if d.completion == NonNull::from(completion) {
                    let First::Vacant(delivery) = std::mem::take(&mut self.first) else {
                        unreachable!("looked at above")
                    };
                    self.0.set_flags(flags & !DELIVERED);
                    return delivery;
                }
            }
        }
        if flags & RESIDENT != 0 {
            self.0.set_flags(flags & !RESIDENT);
        }
        None
    }

    /// Withdraws the posted receive completing `completion`, or drops the
    /// message delivered in place for it (nobody completes it then).
    pub(crate) fn withdraw_posted(&mut self, completion: *const Completion) -> bool {
        match &self.first {
            First::Posted(p) if p.completion == completion => {
                self.first = First::Vacant(None);
                let flags = self.0.flags();
                self.0.set_flags(flags & !RESIDENT);
                return true;
            }
            First::Vacant(Some(d)) if std::ptr::eq(d.completion.as_ptr(), completion) => {
                self.first = First::Vacant(None);
                let flags = self.0.flags();
                self.0.set_flags(flags & !DELIVERED);
                return true;
            }
            _ => {}
        }
        claim::withdraw(&mut self.posted, |p| p.completion == completion)
    }
}

/// Whether `src` can be delivered in place into a receive of `dst`.
#[inline(always)]
fn fits(src: &Layout, dst: &Layout) -> bool {
    let bytes = src.bytes();
    std::ptr::eq(src.ty.map(), dst.ty.map())
        && src.ty.map().is_contiguous()
        && bytes <= RESIDENT_BYTES
        && bytes <= dst.bytes()
}

/// The [`Delivery`] of `src` (which [`fits`]) from `env`, for the receive
/// completing `completion`.
#[inline(always)]
fn delivery(env: &Envelope, src: &Layout, completion: *const Completion) -> Delivery {
    let bytes = src.bytes();
    let mut data = [0u8; RESIDENT_BYTES];
    // SAFETY: `src` is the sender's buffer, readable for its `bytes`,
    // contiguous (`fits`), and `bytes <= RESIDENT_BYTES`.
    unsafe { copy::copy_bytes(src.base, data.as_mut_ptr(), bytes) };
    Delivery {
        // A posted receive's completion is a reference's address.
        completion: NonNull::new(completion as *mut Completion).expect("a completion's address"),
        source: env.source,
        tag: env.tag,
        bytes: bytes as u32,
        data,
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
    /// never a park and never a copy of message data (but for the few
    /// bytes of a [`Delivery`]).
    #[inline]
    pub(crate) fn lock(&self) -> MailboxGuard<'_> {
        MailboxGuard(self.queues.lock())
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
    pub(crate) unsafe fn lock_alone(&self) -> MailboxGuard<'_> {
        // SAFETY: the caller's contract.
        MailboxGuard(unsafe { self.queues.lock_alone() })
    }

    /// Whether a [`Delivery`] waits in the mailbox: a load, without the
    /// lock, for its owner's blocking receive to spin on (it then takes
    /// the lock to read it, [`MailboxGuard::take_delivery`]).
    #[inline]
    pub(crate) fn has_delivery(&self) -> bool {
        self.queues.flags() & DELIVERED != 0
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
        let mailbox = Mailbox::default();
        let mut q = mailbox.lock();
        let tags = |q: &mut MailboxGuard<'_>, tags: &[Tag]| -> Vec<usize> {
            tags.iter()
                .filter_map(|&t| q.take_posted(&env(1, t), || false))
                .map(|p| p.completion.addr())
                .collect()
        };
        q.post(posted(5, 1), false);
        q.post(posted(5, 2), false);
        q.post(posted(6, 3), false);
        assert!(matches!(q.first, First::Posted(_)));
        assert_eq!(tags(&mut q, &[6]), [3], "the first match, past `first`");
        assert_eq!(tags(&mut q, &[5]), [1], "`first` is the oldest");
        // `first` is empty but `posted` is not: a new post goes behind.
        q.post(posted(5, 4), false);
        assert!(matches!(q.first, First::Vacant(None)));
        assert_eq!(tags(&mut q, &[5, 5, 5]), [2, 4]);
        q.post(posted(7, 5), false);
        q.post(posted(7, 6), false);
        assert!(q.withdraw_posted(id(5)));
        assert!(!q.withdraw_posted(id(5)));
        assert_eq!(tags(&mut q, &[7, 7]), [6]);
        q.post(posted(8, 7), false);
        assert_eq!(
            q.take_posted(&env(1, 8), || true).map(|_| ()),
            None,
            "refused"
        );
        assert!(q.withdraw_posted(id(7)), "left to its owner");
    }

    fn receive_into(buf: &[u32], completion: &Completion) -> Posted {
        Posted {
            spec: MatchSpec {
                context: 0,
                source: 1,
                tag: 9,
            },
            dst: Layout::of(buf),
            completion,
        }
    }

    fn claimed(mailbox: &Mailbox, src: &Layout) -> &'static str {
        match mailbox.lock().claim(&env(1, 9), Some(src), || false) {
            Claim::Delivered => "delivered",
            Claim::Posted(_) => "posted",
            Claim::None => "none",
        }
    }

    #[test]
    fn a_small_message_is_left_in_the_line_of_a_resident_receive() {
        let mailbox = Mailbox::default();
        let completion = Completion::new(0);
        let buf = [0u32; 4];
        mailbox
            .lock()
            .post(receive_into(&buf[..2], &completion), true);
        assert!(!mailbox.has_delivery());
        let data = [7u32, 8];
        assert_eq!(claimed(&mailbox, &Layout::of(&data[..])), "delivered");
        assert!(mailbox.has_delivery(), "flagged after the unlock");
        assert_eq!(
            claimed(&mailbox, &Layout::of(&data[..])),
            "none",
            "no receive any more"
        );
        let other = Completion::new(0);
        assert!(
            mailbox.lock().take_delivery(&other).is_none(),
            "not its receive's"
        );
        let delivery = mailbox
            .lock()
            .take_delivery(&completion)
            .expect("delivered");
        assert!(!mailbox.has_delivery());
        assert_eq!((delivery.source, delivery.tag, delivery.bytes), (1, 9, 8));
        assert_eq!(&delivery.data[..8], &[7, 0, 0, 0, 8, 0, 0, 0]);
        assert!(matches!(mailbox.lock().first, First::Vacant(None)));
        assert_eq!(mailbox.queues.flags(), 0);
    }

    #[test]
    fn a_message_that_does_not_fit_completes_the_receive_and_ends_residence() {
        let completion = Completion::new(0);
        let buf = [0u32; 2];
        let bytes = [1u8; 8];
        let five = [0u32; 5];
        let three = [0u32; 3];
        for (src, why) in [
            (Layout::of(&three[..]), "longer than the buffer"),
            (Layout::of(&bytes[..]), "another type"),
        ] {
            let mailbox = Mailbox::default();
            mailbox.lock().post(receive_into(&buf, &completion), true);
            assert_eq!(claimed(&mailbox, &src), "posted", "{why}");
            assert_eq!(mailbox.queues.flags(), 0, "{why}");
        }
        let big = [0u32; 8];
        let mailbox = Mailbox::default();
        mailbox.lock().post(receive_into(&big, &completion), true);
        assert_eq!(
            claimed(&mailbox, &Layout::of(&five[..])),
            "posted",
            "over 16 bytes"
        );
        // A receive of another process's message (no source layout) takes
        // the receive too, and ends its residence: a later receive posted
        // into `first` not resident is never delivered in place.
        mailbox.lock().post(receive_into(&big, &completion), true);
        assert!(mailbox.lock().take_posted(&env(1, 9), || false).is_some());
        mailbox.lock().post(receive_into(&big, &completion), false);
        assert_eq!(
            claimed(&mailbox, &Layout::of(&buf[..])),
            "posted",
            "not resident"
        );
        assert!(!mailbox.has_delivery());
    }

    #[test]
    fn residence_ends_when_the_receive_stops_looking_or_withdraws() {
        let completion = Completion::new(0);
        let buf = [0u32; 2];
        let data = [0u32; 1];
        let mailbox = Mailbox::default();
        mailbox.lock().post(receive_into(&buf, &completion), true);
        // Its owner found nothing and is about to park on its completion.
        assert!(mailbox.lock().take_delivery(&completion).is_none());
        assert_eq!(claimed(&mailbox, &Layout::of(&data[..])), "posted");
        // A delivery withdrawn (its receiver unwinds) is dropped.
        mailbox.lock().post(receive_into(&buf, &completion), true);
        assert_eq!(claimed(&mailbox, &Layout::of(&data[..])), "delivered");
        assert!(mailbox.lock().withdraw_posted(&completion));
        assert!(!mailbox.has_delivery());
        assert!(!mailbox.lock().withdraw_posted(&completion));
        // A resident receive posted behind another is not resident.
        let mut q = mailbox.lock();
        q.post(posted(5, 1), false);
        q.post(receive_into(&buf, &completion), true);
        drop(q);
        assert_eq!(mailbox.queues.flags(), 0);
        assert_eq!(claimed(&mailbox, &Layout::of(&data[..])), "posted");
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
