//! Models of a message delivered into its receiver's mailbox line
//! (`src/p2p/mailbox.rs`: `MailboxGuard::{post, claim, take_delivery,
//! withdraw_posted}`, and `p2p::wait_resident`), on the runtime's own
//! `SpinLock` with flags and `Completion`.
//!
//! The mailbox is a `SpinLock` around its first slot: a posted receive, or
//! vacant with maybe a delivery. The receiver posts its receive resident,
//! looks once for a delivery or its completion (the spin, bounded in the
//! runtime), then under its lock takes the delivery or ends the residence,
//! and parks on its completion. The sender locks the mailbox and either
//! leaves the message in the slot (it fits) or takes the receive, writes
//! the receiver's buffer (a loom cell: an access not ordered after the
//! receiver's is a race loom reports) and finishes the completion. Each
//! model asserts the receiver gets the message exactly once, every park is
//! matched by a wake-up, and the flags end clear.

use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;

use crate::completion::{Completion, Outcome};
use crate::park::ParkState;
use crate::sync::spin::SpinLock;

const RESIDENT: u32 = 1 << 1;
const DELIVERED: u32 = 1 << 2;
const DATA: u64 = 42;

enum First {
    Posted,
    Vacant(Option<u64>),
}

struct Receiver {
    mailbox: SpinLock<First>,
    completion: Completion,
    buf: UnsafeCell<u64>,
    park: ParkState,
}

impl Receiver {
    fn new() -> Receiver {
        Receiver {
            mailbox: SpinLock::new(First::Vacant(None)),
            completion: Completion::spinning(7, true),
            buf: UnsafeCell::new(0),
            park: ParkState::new(),
        }
    }

    /// `MailboxGuard::post(.., true)` into an empty mailbox.
    fn post_resident(&self) {
        let mut first = self.mailbox.lock();
        *first = First::Posted;
        let flags = first.flags();
        first.set_flags(flags | RESIDENT);
    }

    /// `MailboxGuard::take_delivery`.
    fn take_delivery(&self) -> Option<u64> {
        let mut first = self.mailbox.lock();
        let flags = first.flags();
        if flags & DELIVERED != 0 {
            let First::Vacant(delivery) = std::mem::replace(&mut *first, First::Vacant(None))
            else {
                panic!("DELIVERED without a delivery");
            };
            first.set_flags(flags & !DELIVERED);
            return delivery;
        }
        first.set_flags(flags & !RESIDENT);
        None
    }

    /// `p2p::wait_resident`, its spin one look; then the data, whichever
    /// way it came, and how many times the receiver parked.
    fn wait(&self) -> (u64, usize) {
        let _looked = self.mailbox.flags() & DELIVERED != 0 || self.completion.is_done();
        if !self.completion.is_done() {
            if let Some(data) = self.take_delivery() {
                return (data, 0);
            }
        }
        let mut parks = 0;
        while self.completion.announce_park() {
            if self.park.try_park() {
                parks += 1;
                thread::park();
            }
        }
        // SAFETY: loom checks that the completer's write happens before.
        (self.buf.with(|b| unsafe { *b }), parks)
    }

    /// A local sender (`MailboxGuard::claim` with its source, then
    /// `p2p::deliver`), whose message fits in the line or not; the rank to
    /// wake and the count of wake-ups.
    fn send(&self, fits: bool, rank: &thread::Thread, requeues: &AtomicUsize) {
        let mut first = self.mailbox.lock();
        assert!(matches!(*first, First::Posted), "posted before the send");
        let flags = first.flags();
        if flags & RESIDENT != 0 && fits {
            *first = First::Vacant(Some(DATA));
            first.set_flags(flags & !RESIDENT | DELIVERED);
            return;
        }
        *first = First::Vacant(None);
        first.set_flags(flags & !RESIDENT);
        drop(first);
        // SAFETY: loom checks that no access of the receiver's races.
        self.buf.with_mut(|b| unsafe { *b = DATA });
        // SAFETY: this thread claimed the receive: its only completer.
        let waiter = unsafe {
            self.completion.finish(Outcome {
                bytes: 8,
                ..Outcome::default()
            })
        };
        if waiter.is_some() && self.park.unpark() {
            requeues.fetch_add(1, Ordering::SeqCst);
            rank.unpark();
        }
    }
}

fn one_message(fits: bool) {
    loom::model(move || {
        let receiver = Arc::new(Receiver::new());
        let requeues = Arc::new(AtomicUsize::new(0));
        receiver.post_resident();
        let rank = {
            let receiver = receiver.clone();
            thread::spawn(move || receiver.wait())
        };
        receiver.send(fits, rank.thread(), &requeues);
        let (data, parks) = rank.join().unwrap();
        assert_eq!(data, DATA);
        assert_eq!(parks, requeues.load(Ordering::SeqCst));
        assert_eq!(receiver.mailbox.flags(), 0);
        assert!(matches!(*receiver.mailbox.lock(), First::Vacant(None)));
    });
}

#[test]
fn a_resident_receive_takes_a_message_left_in_its_line_once() {
    one_message(true);
}

#[test]
fn a_message_that_does_not_fit_completes_a_resident_receive() {
    one_message(false);
}
