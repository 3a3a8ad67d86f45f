//! An in-memory transport: several jobs of one process joined as if they
//! were processes (tests, `runtime::run_joined`).
//!
//! Every frame is encoded on `send` and decoded on `poll`, so the tests
//! that run across loopback processes cover the wire format too. A process
//! that ends without [`close`](Transport::close) (its transport dropped, or
//! `Loopback::sever` in tests) is reported as lost to the others once they read
//! everything it sent, as a dropped TCP connection would be.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use super::frame::{self, Frame};
use super::{Incoming, SendError, Sink, Transport};
use crate::identity::ProcessId;

/// What one process of the hub receives.
#[derive(Debug, Default)]
struct Inbox {
    /// Encoded frames, with their senders, in arrival order.
    frames: VecDeque<(u32, Vec<u8>)>,
    /// A `wake` is pending.
    woken: bool,
}

/// The processes of one loopback job.
#[derive(Debug)]
struct Hub {
    inboxes: Box<[(Mutex<Inbox>, Condvar)]>,
    /// Process `p` is gone: `Some(true)` after a clean close, `Some(false)`
    /// lost.
    ended: Box<[Mutex<Option<bool>>]>,
}

/// One process's end of a loopback job.
#[derive(Debug)]
pub(crate) struct Loopback {
    hub: Arc<Hub>,
    this: u32,
    closed: AtomicBool,
    /// Peers already reported lost (reported once).
    reported: Mutex<Vec<bool>>,
}

impl Loopback {
    /// The transports of a job of `processes` processes, by process.
    pub(crate) fn join(processes: u32) -> Vec<Arc<Loopback>> {
        let n = processes as usize;
        let hub = Arc::new(Hub {
            inboxes: (0..n).map(|_| Default::default()).collect(),
            ended: (0..n).map(|_| Mutex::new(None)).collect(),
        });
        (0..processes)
            .map(|this| {
                Arc::new(Loopback {
                    hub: Arc::clone(&hub),
                    this,
                    closed: AtomicBool::new(false),
                    reported: Mutex::new(vec![false; n]),
                })
            })
            .collect()
    }

    /// Ends this process as a crash would: the others see it lost.
    #[cfg(test)]
    pub(crate) fn sever(&self) {
        self.end(false);
    }

    fn end(&self, clean: bool) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        *lock(&self.hub.ended[self.this as usize]) = Some(clean);
        for (inbox, ready) in self.hub.inboxes.iter() {
            lock(inbox).woken = true;
            ready.notify_all();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Transport for Loopback {
    fn this(&self) -> ProcessId {
        ProcessId::new(self.this)
    }

    fn processes(&self) -> u32 {
        self.hub.inboxes.len() as u32
    }

    fn send(&self, to: ProcessId, frame: &Frame) -> Result<(), SendError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(SendError::Closed);
        }
        if frame.payload.len() > frame::MAX_PAYLOAD {
            return Err(SendError::TooLarge(frame.payload.len()));
        }
        let p = to.get() as usize;
        if let Some(false) = *lock(&self.hub.ended[p]) {
            return Err(SendError::Lost(to, "the process ended".into()));
        }
        let (inbox, ready) = &self.hub.inboxes[p];
        lock(inbox).frames.push_back((self.this, frame.to_bytes()));
        ready.notify_all();
        Ok(())
    }

    fn poll(&self, sink: &mut dyn Sink) -> usize {
        let (inbox, _) = &self.hub.inboxes[self.this as usize];
        let frames = std::mem::take(&mut lock(inbox).frames);
        let mut handed = 0;
        for (from, bytes) in frames {
            handed += 1;
            let from = ProcessId::new(from);
            match Frame::decode(&bytes) {
                Ok(frame) => sink.take(Incoming::Frame(from, frame)),
                Err(err) => sink.take(Incoming::Lost(from, format!("a bad frame: {err}"))),
            }
        }
        // Lost peers, reported after everything they sent (their frames
        // were queued before they ended, and are taken above).
        let mut reported = lock(&self.reported);
        for (p, ended) in self.hub.ended.iter().enumerate() {
            if p as u32 != self.this && !reported[p] && *lock(ended) == Some(false) {
                reported[p] = true;
                handed += 1;
                sink.take(Incoming::Lost(
                    ProcessId::new(p as u32),
                    "the process ended without closing its connection".into(),
                ));
            }
        }
        handed
    }

    fn wait(&self, timeout: Option<Duration>) {
        let (inbox, ready) = &self.hub.inboxes[self.this as usize];
        let mut guard = lock(inbox);
        if guard.frames.is_empty() && !guard.woken {
            guard = match timeout {
                Some(t) => {
                    ready
                        .wait_timeout(guard, t)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
                None => ready.wait(guard).unwrap_or_else(|e| e.into_inner()),
            };
        }
        guard.woken = false;
    }

    fn wake(&self) {
        let (inbox, ready) = &self.hub.inboxes[self.this as usize];
        lock(inbox).woken = true;
        ready.notify_all();
    }

    fn close(&self, _timeout: Duration) {
        self.end(true);
    }
}

impl Drop for Loopback {
    fn drop(&mut self) {
        self.end(false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::frame::Kind;

    fn frames(t: &Loopback) -> Vec<(u32, Frame)> {
        let mut got = Vec::new();
        t.poll(&mut |i| match i {
            Incoming::Frame(p, f) => got.push((p.get(), f)),
            Incoming::Lost(p, why) => panic!("lost {p}: {why}"),
            other => panic!("nothing was placed or borrowed: {other:?}"),
        });
        got
    }

    #[test]
    fn frames_arrive_in_order_per_pair() {
        let t = Loopback::join(3);
        for i in 0..5u64 {
            let mut f = Frame::control(Kind::Ack);
            f.id = i;
            t[0].send(ProcessId::new(2), &f).unwrap();
            f.id = 100 + i;
            t[1].send(ProcessId::new(2), &f).unwrap();
        }
        let got = frames(&t[2]);
        let from = |p| {
            got.iter()
                .filter(|(q, _)| *q == p)
                .map(|(_, f)| f.id)
                .collect::<Vec<_>>()
        };
        assert_eq!(from(0), [0, 1, 2, 3, 4]);
        assert_eq!(from(1), [100, 101, 102, 103, 104]);
        assert!(frames(&t[0]).is_empty());
    }

    #[test]
    fn a_severed_process_is_lost_after_its_frames_a_closed_one_is_not() {
        let t = Loopback::join(3);
        t[0].send(ProcessId::new(2), &Frame::control(Kind::Bye))
            .unwrap();
        t[0].sever();
        t[1].close(Duration::ZERO);
        let mut seen = Vec::new();
        t[2].poll(&mut |i| {
            seen.push(match i {
                Incoming::Frame(p, f) => format!("{p}:{:?}", f.kind),
                Incoming::Lost(p, _) => format!("{p}:lost"),
                other => format!("{other:?}"),
            })
        });
        assert_eq!(seen, ["0:Bye", "0:lost"]);
        assert_eq!(t[2].poll(&mut |_| panic!("reported once")), 0);
        assert!(matches!(
            t[2].send(ProcessId::new(0), &Frame::control(Kind::Ack)),
            Err(SendError::Lost(..))
        ));
    }

    #[test]
    fn wait_returns_on_a_frame_or_a_wake() {
        let t = Loopback::join(2);
        std::thread::scope(|s| {
            s.spawn(|| t[1].wait(None));
            t[1].wake();
        });
        std::thread::scope(|s| {
            s.spawn(|| t[1].wait(None));
            t[0].send(ProcessId::new(1), &Frame::control(Kind::Bye))
                .unwrap();
        });
        assert_eq!(frames(&t[1]).len(), 1);
    }
}
