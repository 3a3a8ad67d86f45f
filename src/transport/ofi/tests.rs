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
