//! The libfabric transport between endpoints of this process (whichever
//! provider libfabric picks, or `FI_PROVIDER`), the control streams over
//! the loopback interface.

use super::*;
use crate::transport::frame::Kind;
use crate::transport::tcp::loopback_mesh;

fn transports(n: usize) -> Vec<OfiTransport> {
    let mesh = loopback_mesh(n).unwrap();
    let opened: Vec<Opened> = (0..n).map(|_| OfiTransport::open().unwrap()).collect();
    let names: Vec<String> = opened.iter().map(Opened::name_hex).collect();
    opened
        .into_iter()
        .zip(mesh)
        .enumerate()
        .map(|(p, (o, s))| o.join(ProcessId::new(p as u32), s, &names).unwrap())
        .collect()
}

fn frame(id: u64, len: usize) -> Frame {
    let mut f = Frame::control(Kind::Ack);
    f.id = id;
    f.payload = (0..len).map(|j| (id as usize * 31 + j * 7) as u8).collect();
    f
}

/// Polls `t` (and `others`, which may have output to push) until `n`
/// items arrived, waiting in between as the progress thread does.
fn receive(t: &OfiTransport, others: &[&OfiTransport], n: usize) -> Vec<Incoming> {
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while got.len() < n {
        assert!(
            Instant::now() < deadline,
            "only {} of {n} items: {got:?}",
            got.len()
        );
        for o in others {
            o.poll(&mut |i| panic!("nothing for the sender: {i:?}"));
        }
        t.poll(&mut |i| got.push(i));
        if got.len() < n {
            t.wait(Some(Duration::from_millis(5)));
        }
    }
    got
}

#[test]
fn messages_cut_a_frame_and_carry_their_sender() {
    let head = vec![1u8; 10];
    let payload = vec![2u8; 2 * MSG];
    let m = messages(ProcessId::new(3), 7, &head, &payload);
    assert_eq!(m.len(), (10 + 2 * MSG).div_ceil(MSG - HEADER));
    for (i, m) in m.iter().enumerate() {
        assert!(m.len() <= MSG && m[..8] == [3, 0, 0, 0, 7 + i as u8, 0, 0, 0]);
    }
    let bytes: Vec<u8> = m.iter().flat_map(|m| m[HEADER..].iter().copied()).collect();
    assert_eq!(bytes.len(), 10 + 2 * MSG);
    assert!(bytes[..10].iter().all(|&b| b == 1) && bytes[10..].iter().all(|&b| b == 2));
    assert_eq!(unhex("00ff10"), Some(vec![0, 255, 16]));
    assert_eq!(unhex("0g"), None);
    assert_eq!(unhex("abc"), None);
}

/// Small frames and frames of many messages, interleaved, arrive whole
/// and in the order sent (FIFO per pair), both ways.
#[test]
fn frames_of_every_size_arrive_whole_and_in_order() {
    let t = transports(2);
    let sizes = [0, 1, MSG - 100, MSG, 3 * MSG + 5, 17, 1 << 20, 2];
    for (i, &n) in sizes.iter().enumerate() {
        if i % 2 == 0 {
            t[0].send(ProcessId::new(1), &frame(i as u64, n)).unwrap();
        } else {
            t[0].send_owned(ProcessId::new(1), frame(i as u64, n))
                .unwrap();
        }
        t[1].send(ProcessId::new(0), &frame(100 + i as u64, n))
            .unwrap();
    }
    let mut got = [Vec::new(), Vec::new()];
    let deadline = Instant::now() + Duration::from_secs(60);
    while got.iter().any(|g| g.len() < sizes.len()) {
        assert!(Instant::now() < deadline, "{got:?}");
        for (p, g) in got.iter_mut().enumerate() {
            t[p].poll(&mut |i| g.push(i));
        }
        t[0].wait(Some(Duration::from_millis(1)));
    }
    for (p, base) in [(1, 0), (0, 100)] {
        for (i, item) in got[p].drain(..).enumerate() {
            match item {
                Incoming::Frame(from, f) => {
                    assert_eq!(from.get() as usize, 1 - p);
                    assert_eq!(f, frame(base + i as u64, sizes[i]), "frame {i}");
                }
                other => panic!("{other:?}"),
            }
        }
    }
}

/// Three processes: every pair's frames stay in order while the pairs'
/// messages interleave in the one completion queue.
#[test]
fn each_pair_keeps_its_order_among_many() {
    let t = transports(3);
    for i in 0..200u64 {
        for from in [0, 2] {
            let len = if i % 50 == 0 { 200_000 } else { 8 };
            t[from].send(ProcessId::new(1), &frame(i, len)).unwrap();
        }
    }
    let got = receive(&t[1], &[&t[0], &t[2]], 400);
    let mut next = [0u64; 3];
    for item in got {
        let Incoming::Frame(p, f) = item else {
            panic!("{item:?}")
        };
        let p = p.get() as usize;
        assert_eq!(f.id, next[p], "from {p}");
        next[p] += 1;
    }
    assert_eq!(next, [200, 0, 200]);
}

/// A peer that closes is reported after its last frame; one that goes
/// without closing (killed) is reported too; each once.
#[test]
fn closed_and_vanished_peers_are_reported_lost_once() {
    let mut t = transports(3);
    let t2 = t.pop().unwrap();
    let t1 = t.pop().unwrap();
    for i in 0..5 {
        t1.send(ProcessId::new(0), &frame(i, 100_000)).unwrap();
    }
    // The receiver progresses while the sender closes (as its progress
    // thread does): the close waits for the sends to complete.
    let got = std::thread::scope(|s| {
        s.spawn(|| t1.close(Duration::from_secs(30)));
        receive(&t[0], &[], 6)
    });
    for (i, item) in got.iter().enumerate().take(5) {
        assert!(
            matches!(item, Incoming::Frame(p, f) if p.get() == 1 && f.id == i as u64),
            "{item:?}"
        );
    }
    assert!(
        matches!(&got[5], Incoming::Lost(p, why) if p.get() == 1 && why.contains("closed")),
        "{:?}",
        got[5]
    );
    // Process 2 vanishes: no count on its control stream.
    drop(t2);
    let got = receive(&t[0], &[], 1);
    assert!(
        matches!(&got[0], Incoming::Lost(p, _) if p.get() == 2),
        "{got:?}"
    );
    assert_eq!(t[0].poll(&mut |i| panic!("reported once: {i:?}")), 0);
    drop(t1);
}

#[test]
fn a_wake_ends_a_wait() {
    let t = transports(2);
    std::thread::scope(|s| {
        s.spawn(|| t[1].wait(None));
        t[1].wake();
    });
}

/// A frame ends a wait without a timeout: the progress thread's case.
#[test]
fn an_arriving_frame_ends_a_wait() {
    let t = transports(2);
    let mut got = Vec::new();
    std::thread::scope(|s| {
        s.spawn(|| {
            // The sender's side progresses its send (as its idle workers
            // and progress thread do).
            t[0].send(ProcessId::new(1), &frame(1, 10)).unwrap();
            while t[0].busy() {
                t[0].poll(&mut |i| panic!("nothing for the sender: {i:?}"));
                t[0].wait(Some(Duration::from_millis(1)));
            }
        });
        while got.is_empty() {
            t[1].wait(None);
            t[1].poll(&mut |i| got.push(i));
        }
    });
    assert!(matches!(&got[0], Incoming::Frame(_, f) if f.id == 1));
}

#[test]
fn sends_after_close_fail() {
    let t = transports(2);
    t[0].close(Duration::from_secs(1));
    assert_eq!(
        t[0].send(ProcessId::new(1), &frame(0, 1)),
        Err(SendError::Closed)
    );
}

#[test]
fn auto_prefers_only_fabric_providers() {
    for fabric in ["verbs;ofi_rxm", "psm2", "psm3", "efa", "cxi", "opx"] {
        assert!(is_fabric(fabric), "{fabric}");
    }
    for not in [
        "tcp;ofi_rxm",
        "tcp",
        "sockets",
        "udp;ofi_rxd",
        "shm",
        "net",
        "",
    ] {
        assert!(!is_fabric(not), "{not}");
    }
}

/// A sink that places the payload of frame `id` into `buf`.
struct Into<'a> {
    id: u64,
    buf: &'a mut [u8],
    got: Vec<Incoming>,
}

impl Sink for Into<'_> {
    fn take(&mut self, incoming: Incoming) {
        self.got.push(incoming);
    }

    fn place(&mut self, _: ProcessId, head: &Frame, len: usize) -> Option<Place> {
        // SAFETY: the buffer outlives the test's transports' use of it
        // (the frame is handed before the test reads it).
        (head.id == self.id).then(|| unsafe { Place::new(self.buf.as_mut_ptr(), len) })
    }
}

fn data_frame(id: u64) -> Frame {
    let mut f = Frame::control(Kind::Data);
    f.id = id;
    f
}

/// A lent payload is announced in one message and read by the receiver
/// (`fi_read`) straight into its place (or, with none, into the frame),
/// in its place among the pair's frames; the sender gets its memory back
/// (`Sent`) once the receiver said it is done.
#[test]
fn a_lent_payload_is_read_into_its_place_in_order() {
    let t = transports(2);
    assert!(
        t[0].rma,
        "the provider ({}) reads remote memory",
        t[0].provider
    );
    let n = (3 << 20) + 5;
    let data: Vec<u8> = (0..n).map(|i| (i * 13 % 251) as u8).collect();
    let mut buf = vec![0u8; n];
    let mut sent = Vec::new();
    let mut sink = Into {
        id: 41,
        buf: &mut buf,
        got: Vec::new(),
    };
    for placed in [true, false] {
        sink.got.clear();
        let id = if placed { 41 } else { 42 };
        t[0].send(ProcessId::new(1), &frame(1, 10)).unwrap();
        // SAFETY: `data` outlives the transports' use (the `Sent` below).
        let lent = unsafe { Borrowed::new(data.as_ptr(), n) };
        let before = lock(&t[0].peers[1].as_ref().unwrap().out).numbered;
        let done = t[0]
            .send_borrowed(ProcessId::new(1), data_frame(id), lent, 7)
            .unwrap();
        assert!(!done, "lent, not copied");
        let after = lock(&t[0].peers[1].as_ref().unwrap().out).numbered;
        assert_eq!(
            after - before,
            1,
            "announced in one message, not sent eagerly"
        );
        t[0].send(ProcessId::new(1), &frame(2, 10)).unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while sink.got.len() < 3 || sent.is_empty() {
            assert!(Instant::now() < deadline, "{:?} {sent:?}", sink.got);
            t[0].poll(&mut |i| sent.push(i));
            t[1].poll(&mut sink);
            t[1].wait(Some(Duration::from_millis(1)));
        }
        assert!(matches!(sent.pop(), Some(Incoming::Sent(p, 7)) if p.get() == 1));
        assert!(lock(&t[0].peers[1].as_ref().unwrap().out).lent.is_empty());
        let got = std::mem::take(&mut sink.got);
        assert!(
            matches!(&got[0], Incoming::Frame(_, f) if f.id == 1),
            "{got:?}"
        );
        assert!(
            matches!(&got[2], Incoming::Frame(_, f) if f.id == 2),
            "{got:?}"
        );
        match &got[1] {
            Incoming::Placed(p, f, len) if placed => {
                assert_eq!((p.get(), f.id, *len), (0, 41, n));
                assert!(sink.buf == &data[..], "the placed payload differs");
            }
            Incoming::Frame(p, f) if !placed => {
                assert_eq!((p.get(), f.id), (0, 42));
                assert!(f.payload == data, "the payload differs");
            }
            other => panic!("{other:?}"),
        }
    }
}

/// The sender of a lent payload vanishes while the receiver reads it: the
/// receiver reports it lost (once) instead of waiting, hands no data, and
/// its read completes (failed), so nothing is left writing its memory.
#[test]
fn a_sender_lost_while_its_payload_is_read_is_reported() {
    let mut t = transports(2);
    let sender = t.pop().unwrap();
    let n = 4 << 20;
    let data = vec![5u8; n];
    // SAFETY: `data` outlives the sender (dropped below, before `data`).
    let lent = unsafe { Borrowed::new(data.as_ptr(), n) };
    sender
        .send_borrowed(ProcessId::new(0), data_frame(3), lent, 9)
        .unwrap();
    // Both progress until the receiver reads (its read posted, not
    // served: the sender does not progress after that).
    let deadline = Instant::now() + Duration::from_secs(10);
    while !t[0].reading() {
        assert!(Instant::now() < deadline, "the announce never arrived");
        sender.poll(&mut |i| panic!("nothing for the sender: {i:?}"));
        t[0].poll(&mut |i| panic!("nothing before the read: {i:?}"));
    }
    drop(sender);
    let got = receive(&t[0], &[], 1);
    assert!(
        matches!(&got[0], Incoming::Lost(p, _) if p.get() == 1),
        "{got:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while t[0].reading() {
        assert!(Instant::now() < deadline, "the failed read never completed");
        assert_eq!(t[0].poll(&mut |i| panic!("reported once: {i:?}")), 0);
        t[0].wait(Some(Duration::from_millis(1)));
    }
    drop(data);
}

/// Output to a peer reported lost is not waited for at close (memory lent
/// to it, messages it never acknowledged): a process that lost a peer
/// closes at once rather than after the close's whole timeout, so it
/// reports the loss before the launcher's grace ends.
#[test]
fn close_does_not_wait_for_a_lost_peer() {
    let mut t = transports(2);
    let peer = t.pop().unwrap();
    let n = 1 << 20;
    let data = vec![5u8; n];
    // SAFETY: `data` outlives the transport (dropped at the end).
    let lent = unsafe { Borrowed::new(data.as_ptr(), n) };
    t[0].send_borrowed(ProcessId::new(1), data_frame(3), lent, 9)
        .unwrap();
    drop(peer);
    let got = receive(&t[0], &[], 1);
    assert!(
        matches!(&got[0], Incoming::Lost(p, _) if p.get() == 1),
        "{got:?}"
    );
    assert!(!lock(&t[0].peers[1].as_ref().unwrap().out).lent.is_empty());
    let start = Instant::now();
    t[0].close(Duration::from_secs(120));
    assert!(
        start.elapsed() < Duration::from_secs(60),
        "close waited {:?} for a lost peer",
        start.elapsed()
    );
    drop(t);
    drop(data);
}

/// `auto` with a fabric: processes 0 and 1 share a host (shared memory
/// between them), process 2 is on another (libfabric): each frame goes
/// the way of its pair, a lent payload to the other host is read by
/// `fi_read`, and the pair on one host sends nothing through libfabric.
#[test]
fn routed_over_shared_memory_and_libfabric() {
    use crate::transport::route::Routed;
    use crate::transport::shm;
    let hosts: Vec<String> = ["a", "a", "b"].iter().map(|h| h.to_string()).collect();
    let settings = shm::Settings {
        ring: shm::DEFAULT_RING,
        cma: true,
    };
    let mut links = shm::joined_in_threads_on(&hosts, settings).unwrap();
    let mut ofi = transports(3);
    let remote = ofi.pop().unwrap();
    let numbered = |t: &OfiTransport, p: usize| lock(&t.peers[p].as_ref().unwrap().out).numbered;
    let routed: Vec<Routed> = ofi
        .into_iter()
        .zip(&mut links)
        .map(|(t, set_up)| Routed::new(t, set_up.links.take().unwrap()).unwrap())
        .collect();
    // SAFETY: the network transports are the `OfiTransport`s just given
    // (the cast drops the vtable of `dyn Network`); the references live
    // as long as `routed`.
    let inside: Vec<&OfiTransport> = routed
        .iter()
        .map(|r| unsafe {
            &*(r.network() as *const dyn super::super::route::Network).cast::<OfiTransport>()
        })
        .collect();
    routed[0].send(ProcessId::new(1), &frame(1, 100)).unwrap();
    routed[0].send(ProcessId::new(2), &frame(2, 100)).unwrap();
    remote.send(ProcessId::new(0), &frame(3, 100)).unwrap();
    let n = 1 << 20;
    let data: Vec<u8> = (0..n).map(|i| (i % 253) as u8).collect();
    // SAFETY: `data` outlives the transports' use (the `Sent` below).
    let lent = unsafe { Borrowed::new(data.as_ptr(), n) };
    assert!(!routed[0]
        .send_borrowed(ProcessId::new(2), data_frame(4), lent, 5)
        .unwrap());
    let mut got: [Vec<Incoming>; 3] = Default::default();
    let deadline = Instant::now() + Duration::from_secs(60);
    while got[0].len() < 2 || got[1].is_empty() || got[2].len() < 2 {
        assert!(Instant::now() < deadline, "{got:?}");
        routed[0].poll(&mut |i| got[0].push(i));
        routed[1].poll(&mut |i| got[1].push(i));
        remote.poll(&mut |i| got[2].push(i));
        routed[0].wait(Some(Duration::from_millis(1)));
    }
    assert!(matches!(&got[1][..], [Incoming::Frame(p, f)] if p.get() == 0 && f.id == 1));
    assert!(matches!(&got[0][0], Incoming::Frame(p, f) if p.get() == 2 && f.id == 3));
    assert!(matches!(&got[0][1], Incoming::Sent(p, 5) if p.get() == 2));
    assert!(matches!(&got[2][0], Incoming::Frame(p, f) if p.get() == 0 && f.id == 2));
    assert!(
        matches!(&got[2][1], Incoming::Frame(p, f) if p.get() == 0 && f.id == 4 && f.payload == data)
    );
    // 0 → 2: a frame and an announce; 2 → 0: a frame and the read's
    // done; nothing between 0 and 1 through libfabric.
    assert_eq!(numbered(inside[0], 2), 2);
    assert_eq!(numbered(&remote, 0), 2);
    assert_eq!((numbered(inside[0], 1), numbered(inside[1], 0)), (0, 0));
    drop(routed);
}

/// An announce that needs no read (an empty payload) is handed at once,
/// and the frames behind it once each.
#[test]
fn an_empty_announce_is_handed_in_order() {
    let t = transports(2);
    let mut head = Vec::new();
    data_frame(6).encode_head_for(0, &mut head);
    let mut record = vec![0u8; 4];
    record.extend_from_slice(&RECORD_MAGIC.to_le_bytes());
    record.extend_from_slice(&[ANNOUNCE, 0]);
    for word in [0u64, 0, 0, 1] {
        record.extend_from_slice(&word.to_le_bytes());
    }
    record.extend_from_slice(&head);
    let rest = (record.len() - 4) as u32;
    record[..4].copy_from_slice(&rest.to_le_bytes());
    t[0].send(ProcessId::new(1), &frame(1, 3)).unwrap();
    t[0].enqueue(ProcessId::new(1), &record, &[]).unwrap();
    t[0].send(ProcessId::new(1), &frame(2, 3)).unwrap();
    let got = receive(&t[1], &[&t[0]], 3);
    let ids: Vec<u64> = got
        .iter()
        .map(|i| match i {
            Incoming::Frame(_, f) => f.id,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(ids, [1, 6, 2]);
    assert_eq!(t[1].poll(&mut |i| panic!("once: {i:?}")), 0);
}
