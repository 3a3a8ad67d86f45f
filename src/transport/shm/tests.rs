//! The links between "processes" that are threads of this test process
//! (each with its own segment, reached through `pidfd_getfd` of this very
//! process), under the routing transport over loopback TCP.

use std::time::{Duration, Instant};

use super::{id, joined_in_threads, joined_in_threads_on, Settings, DEFAULT_RING};
use crate::transport::frame::{self, Frame, Kind};
use crate::transport::route::Routed;
use crate::transport::tcp::{loopback_mesh, TcpTransport};
use crate::transport::{Borrowed, Incoming, Place, Sink, Transport};

/// `n` routed transports whose peers all go through shared memory.
fn routed(n: usize, settings: Settings) -> Vec<Routed> {
    let set_ups = joined_in_threads(n, settings).unwrap();
    loopback_mesh(n)
        .unwrap()
        .into_iter()
        .zip(set_ups)
        .enumerate()
        .map(|(p, (streams, set_up))| {
            assert!(set_up.unreached.is_empty(), "{:?}", set_up.notes);
            let tcp = TcpTransport::new(id(p as u32), streams).unwrap();
            Routed::new(tcp, set_up.links.expect("links")).unwrap()
        })
        .collect()
}

fn frame(id: u64, len: usize) -> Frame {
    let mut f = Frame::control(Kind::Ack);
    f.id = id;
    f.payload = (0..len).map(|j| (id as usize * 7 + j) as u8).collect();
    f
}

/// Places data frames into `buf` (once) and records what it is handed.
struct Placer<'a> {
    buf: Option<&'a mut Vec<u8>>,
    got: Vec<Incoming>,
}

impl Sink for Placer<'_> {
    fn take(&mut self, incoming: Incoming) {
        self.got.push(incoming);
    }

    fn place(
        &mut self,
        _from: crate::identity::ProcessId,
        _head: &Frame,
        len: usize,
    ) -> Option<Place> {
        let buf = self.buf.take()?;
        assert!(buf.len() >= len);
        // SAFETY: the test keeps `buf` borrowed and untouched until the
        // frame is handed over.
        Some(unsafe { Place::new(buf.as_mut_ptr(), len) })
    }
}

/// Two senders push many frames of every size through small rings (each
/// wraps hundreds of times, and fills up): each sender's frames arrive
/// whole and in order, interleaved with the other's.
#[test]
fn frames_from_each_peer_arrive_in_order_through_wrapping_rings() {
    let t = routed(
        3,
        Settings {
            ring: 4096,
            cma: true,
        },
    );
    const N: u64 = 600;
    let mut got: Vec<Vec<Frame>> = vec![Vec::new(), Vec::new()];
    std::thread::scope(|s| {
        for sender in 1..3usize {
            let t = &t;
            s.spawn(move || {
                for i in 0..N {
                    let len = (i as usize * 37 + sender * 5) % 3000;
                    t[sender].send(id(0), &frame(i, len)).unwrap();
                    // Flush what the full ring did not take.
                    while t[sender].busy() {
                        t[sender].poll(&mut |_: Incoming| {});
                        t[sender].wait(Some(Duration::from_millis(50)));
                    }
                }
            });
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        while got.iter().map(Vec::len).sum::<usize>() < 2 * N as usize {
            assert!(Instant::now() < deadline, "frames missing");
            t[0].poll(&mut |i| match i {
                Incoming::Frame(p, f) => got[p.get() as usize - 1].push(f),
                other => panic!("{other:?}"),
            });
            t[0].wait(Some(Duration::from_millis(50)));
        }
    });
    for (k, frames) in got.iter().enumerate() {
        let sender = k + 1;
        for (i, f) in frames.iter().enumerate() {
            let expect = frame(i as u64, (i * 37 + sender * 5) % 3000);
            assert_eq!(f, &expect, "frame {i} from process {sender}");
        }
    }
}

/// Eager messages of 0 to 300 bytes (a short form up to 256, a frame's
/// beyond; one run or none, with or without an id) through a small ring
/// that wraps: each arrives as it was sent, whether it was decoded where it
/// lay in the ring or, cut by the ring's end, from the input buffer.
#[test]
fn small_eager_messages_arrive_whole_in_short_form_or_not() {
    let t = routed(
        2,
        Settings {
            ring: 4096,
            cma: true,
        },
    );
    let run = |count| crate::datatype::Run {
        kind: crate::datatype::BaseKind::U8,
        count,
    };
    let sent = |i: usize| {
        let len = i % 301;
        let mut f = Frame::control(Kind::Eager);
        f.context = 0x1234_5678_9abc + i as u64;
        f.source = i as i32 % 7 - 1;
        f.tag = -(i as i32);
        f.dest = i as u32;
        f.count = if len == 0 { (i % 3) as u64 } else { 1 };
        f.id = if i % 5 == 0 { i as u64 } else { 0 };
        f.signature = if len == 0 && i % 2 == 0 {
            Vec::new()
        } else {
            vec![run(len)]
        };
        if len == 0 && f.signature.len() == 1 {
            f.signature = vec![run(3)];
            f.count = 0;
        }
        f.payload = (0..len).map(|j| (i * 3 + j) as u8).collect();
        f
    };
    const N: usize = 1500;
    let mut got = Vec::new();
    std::thread::scope(|s| {
        let t = &t;
        s.spawn(move || {
            for i in 0..N {
                let f = sent(i);
                t[1].send_parts(id(0), &f, &f.signature, &f.payload)
                    .unwrap();
                while t[1].busy() {
                    t[1].poll(&mut |_: Incoming| {});
                    t[1].wait(Some(Duration::from_millis(50)));
                }
            }
        });
        let deadline = Instant::now() + Duration::from_secs(60);
        while got.len() < N {
            assert!(Instant::now() < deadline, "frames missing");
            t[0].poll(&mut |i| match i {
                Incoming::Frame(_, f) => got.push(f),
                other => panic!("{other:?}"),
            });
        }
    });
    for (i, f) in got.iter().enumerate() {
        assert_eq!(f, &sent(i), "message {i}");
    }
}

/// A receiver asleep in `wait` wakes up when a frame arrives: the sender
/// saw the sleeping flag and rang its doorbell (without it, each wait
/// would last its whole 30 s).
#[test]
fn a_sleeping_receiver_is_woken_by_a_frame() {
    let t = routed(
        2,
        Settings {
            ring: DEFAULT_RING,
            cma: true,
        },
    );
    for round in 0..20u64 {
        let mut got = Vec::new();
        std::thread::scope(|s| {
            s.spawn(|| {
                let start = Instant::now();
                while got.is_empty() {
                    t[1].wait(Some(Duration::from_secs(30)));
                    assert!(start.elapsed() < Duration::from_secs(20), "not woken");
                    t[1].poll(&mut |i| got.push(i));
                }
            });
            // Only once the receiver is about to sleep (or asleep).
            while !t[1].shm().asleep(id(0)) {
                std::thread::yield_now();
            }
            t[0].send(id(1), &frame(round, 8)).unwrap();
        });
        assert!(matches!(&got[..], [Incoming::Frame(_, f)] if f.id == round));
    }
}

fn large_through(settings: Settings) {
    let t = routed(2, settings);
    let len = 16usize << 20;
    let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    let mut head = Frame::control(Kind::Data);
    head.id = 7;
    // SAFETY: `data` outlives the transfer (checked through `Sent`) and is
    // not written meanwhile.
    let lent = unsafe { Borrowed::new(data.as_ptr(), len) };
    assert!(!t[0].send_borrowed(id(1), head, lent, 99).unwrap());
    let mut buf = vec![0u8; len];
    let mut sink = Placer {
        buf: Some(&mut buf),
        got: Vec::new(),
    };
    let mut at_sender = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while sink.got.is_empty() || at_sender.is_empty() {
        assert!(Instant::now() < deadline, "the transfer did not end");
        t[0].poll(&mut |i| at_sender.push(i));
        t[1].poll(&mut sink);
    }
    match &sink.got[..] {
        [Incoming::Placed(p, f, n)] => assert_eq!((p.get(), f.id, *n), (0, 7, len)),
        other => panic!("{other:?}"),
    }
    drop(sink);
    assert!(buf == data, "the placed bytes differ");
    assert!(matches!(&at_sender[..], [Incoming::Sent(p, 99)] if p.get() == 1));
}

#[test]
fn sixteen_mib_arrive_in_place_through_cma() {
    large_through(Settings {
        ring: DEFAULT_RING,
        cma: true,
    });
}

#[test]
fn sixteen_mib_arrive_in_place_through_the_ring_without_cma() {
    large_through(Settings {
        ring: 64 << 10,
        cma: false,
    });
}

/// A sender whose payload its peer reads alone by CMA counts as busy (its
/// worker polls on) until the peer's `done` arrives; one whose payload the
/// peer shares with its helper thread does not (the helper wants its core).
#[test]
fn a_sender_is_busy_until_the_done_of_a_read_its_peer_does_alone() {
    let t = routed(
        2,
        Settings {
            ring: DEFAULT_RING,
            cma: true,
        },
    );
    for (len, busy) in [(1usize << 20, true), (super::cma::SHARED_READ, false)] {
        let data: Vec<u8> = (0..len).map(|i| (i % 253) as u8).collect();
        let mut head = Frame::control(Kind::Data);
        head.id = 5;
        // SAFETY: `data` outlives the transfer (checked through `Sent`)
        // and is not written meanwhile.
        let lent = unsafe { Borrowed::new(data.as_ptr(), len) };
        assert!(!t[0].send_borrowed(id(1), head, lent, 11).unwrap());
        assert_eq!(t[0].busy(), busy, "{len} bytes announced");
        let (mut got, mut at_sender) = (Vec::new(), Vec::new());
        let deadline = Instant::now() + Duration::from_secs(60);
        while got.is_empty() || at_sender.is_empty() {
            assert!(Instant::now() < deadline, "the transfer did not end");
            t[1].poll(&mut |i| got.push(i));
            t[0].poll(&mut |i| at_sender.push(i));
        }
        match &got[..] {
            [Incoming::Frame(p, f)] => assert!(p.get() == 0 && f.payload == data),
            other => panic!("{other:?}"),
        }
        assert!(matches!(&at_sender[..], [Incoming::Sent(p, 11)] if p.get() == 1));
        assert!(!t[0].busy(), "{len} bytes done");
    }
}

/// A payload of at least `cma::SHARED_READ` is lent to a peer that reads
/// by CMA (a smaller one is not, nor one to a peer that cannot), and the
/// peer fetches it whole with the handle; a garbled handle, or one for
/// another length, is refused.
#[test]
fn large_payloads_are_lent_to_cma_readers_and_fetched_whole() {
    let len = super::cma::SHARED_READ + 4097;
    let data: Vec<u8> = (0..len).map(|i| (i % 249) as u8).collect();
    let at = data.as_ptr() as usize;
    let t = routed(
        2,
        Settings {
            ring: DEFAULT_RING,
            cma: true,
        },
    );
    assert!(t[0].lend(id(1), at, 1 << 20).is_none(), "a short read");
    let handle = t[0].lend(id(1), at, len).expect("lent");
    let mut buf = vec![0u8; len];
    // SAFETY: `buf` has `len` writable bytes, ours alone.
    unsafe { t[1].fetch(id(0), &handle, buf.as_mut_ptr(), len) }.unwrap();
    assert!(buf == data, "the fetched bytes differ");
    // SAFETY: as above.
    let garbled = unsafe { t[1].fetch(id(0), &handle[..8], buf.as_mut_ptr(), len) };
    assert!(garbled.unwrap_err().contains("handle"));
    // SAFETY: as above (`len - 1` bytes).
    let other = unsafe { t[1].fetch(id(0), &handle, buf.as_mut_ptr(), len - 1) };
    assert!(other.unwrap_err().contains("lent"));
    let t = routed(
        2,
        Settings {
            ring: DEFAULT_RING,
            cma: false,
        },
    );
    assert!(t[0].lend(id(1), at, len).is_none(), "no CMA");
}

/// A lent buffer read while its lender polls: the lender writes part of
/// it into the reader's buffer (`split.rs`), and the bytes arrive exact.
/// Taken back (`unlend`), a buffer is not written from any more: the
/// reader then reads it all. Fails if the lender never helps, helps from
/// a buffer taken back, or a piece is lost or misplaced.
#[test]
fn a_lender_that_polls_writes_part_of_a_lent_buffer() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let set_ups = joined_in_threads(
        2,
        Settings {
            ring: DEFAULT_RING,
            cma: true,
        },
    )
    .unwrap();
    let links: Vec<_> = set_ups
        .into_iter()
        .map(|s| s.links.expect("links"))
        .collect();
    let len = 4 * super::cma::SHARED_READ + 12345;
    let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    let at = data.as_ptr() as usize;
    /// Stops the lender's poller however the test ends (a failed
    /// assertion must not leave the scope waiting for it).
    struct Stop<'a>(&'a AtomicBool);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let lender = &links[0];
        let _stop = Stop(&stop);
        let stop = &stop;
        s.spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                lender.poll(&mut |_: Incoming| {});
            }
        });
        let mut helped_once = false;
        for round in 0..6 {
            let handle = links[0].lend(id(1), at, len).expect("lent");
            let before = links[0].helped();
            let mut buf = vec![0u8; len];
            // SAFETY: `buf` has `len` writable bytes, ours alone.
            unsafe { links[1].fetch(id(0), &handle, buf.as_mut_ptr(), len) }.unwrap();
            assert!(buf == data, "round {round}: the fetched bytes differ");
            links[0].unlend(id(1), at);
            helped_once |= links[0].helped() > before;
        }
        assert!(helped_once, "the lender never wrote a piece");
        // Not lent any more: the request is refused, the reader reads all.
        let handle = links[0].lend(id(1), at, len).expect("lent");
        links[0].unlend(id(1), at);
        let before = links[0].helped();
        let mut buf = vec![0u8; len];
        // SAFETY: as above.
        unsafe { links[1].fetch(id(0), &handle, buf.as_mut_ptr(), len) }.unwrap();
        assert!(buf == data, "read alone");
        // Let a late request be seen before the count is checked.
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(links[0].helped(), before, "wrote from a buffer taken back");
    });
}

/// A peer's frames written before its TCP stream closed are handed over
/// before its loss.
#[test]
fn a_lost_peer_s_last_frames_come_before_its_loss() {
    let t = routed(
        2,
        Settings {
            ring: DEFAULT_RING,
            cma: true,
        },
    );
    let mut t = t.into_iter();
    let (a, b) = (t.next().unwrap(), t.next().unwrap());
    for i in 0..3 {
        b.send(id(0), &frame(i, 100)).unwrap();
    }
    // Its stream ends (as when the process dies), rings untouched.
    drop(b);
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !got.iter().any(|i| matches!(i, Incoming::Lost(..))) {
        assert!(Instant::now() < deadline, "the loss was not seen");
        // Only TCP's wake-up tells of the loss: poll until it shows up.
        a.wait(Some(Duration::from_millis(50)));
        a.poll(&mut |i| got.push(i));
    }
    let ids: Vec<String> = got
        .iter()
        .map(|i| match i {
            Incoming::Frame(_, f) => format!("frame {}", f.id),
            Incoming::Lost(p, why) => format!(
                "lost {p}{}",
                if why.contains("closed") {
                    String::new()
                } else {
                    format!(": {why}")
                }
            ),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(ids, ["frame 0", "frame 1", "frame 2", "lost 1"]);
}

#[test]
fn a_segment_that_cannot_be_created_leaves_every_peer_to_tcp() {
    let set_ups = joined_in_threads(
        2,
        Settings {
            ring: 1 << 62,
            cma: true,
        },
    )
    .unwrap();
    for (p, s) in set_ups.iter().enumerate() {
        assert!(s.links.is_none());
        assert_eq!(s.unreached, [1 - p as u32]);
        assert!(
            s.notes.iter().any(|n| n.contains("could not be created")),
            "{:?}",
            s.notes
        );
    }
}

#[test]
fn settings_parse_sizes_and_refuse_nonsense() {
    let parse = |ring: Option<&str>, cma: Option<&str>| {
        Settings::from_env(&|name| match name {
            "MYRIAD_SHM_RING_BYTES" => ring.map(str::to_owned),
            "MYRIAD_SHM_CMA" => cma.map(str::to_owned),
            _ => None,
        })
    };
    assert_eq!(
        parse(None, None).unwrap(),
        Settings {
            ring: DEFAULT_RING,
            cma: true
        }
    );
    assert_eq!(parse(Some("256K"), Some("off")).unwrap().ring, 256 << 10);
    assert_eq!(parse(Some("5000"), None).unwrap().ring, 8192);
    for bad in ["x", "12", "-4096", "4096Q"] {
        let e = parse(Some(bad), None).unwrap_err().to_string();
        assert!(e.contains("MYRIAD_SHM_RING_BYTES"), "{e}");
    }
    let e = parse(None, Some("maybe")).unwrap_err().to_string();
    assert!(e.contains("MYRIAD_SHM_CMA"), "{e}");
}

/// Processes 0 and 1 share a host, 2 is on another: frames between 0 and
/// 1 go through their rings, to and from 2 through TCP, and every frame
/// arrives, in order per pair, through the one routed transport.
#[test]
fn peers_of_this_host_go_through_shared_memory_the_others_through_tcp() {
    let hosts: Vec<String> = ["a", "a", "b"].iter().map(|h| h.to_string()).collect();
    let set_ups = joined_in_threads_on(
        &hosts,
        Settings {
            ring: 4096,
            cma: true,
        },
    )
    .unwrap();
    let mut t = Vec::new();
    for (p, (streams, set_up)) in loopback_mesh(3)
        .unwrap()
        .into_iter()
        .zip(set_ups)
        .enumerate()
    {
        let tcp = TcpTransport::new(id(p as u32), streams).unwrap();
        match set_up.links {
            Some(links) => {
                assert!(links.reaches(id(1 - p as u32)) && !links.reaches(id(2)));
                t.push(Box::new(Routed::new(tcp, links).unwrap()) as Box<dyn Transport>);
            }
            None => {
                assert_eq!((p, set_up.unreached.len()), (2, 0));
                t.push(Box::new(tcp));
            }
        }
    }
    const N: u64 = 200;
    for i in 0..N {
        for (from, to) in [(0, 1), (1, 0), (0, 2), (2, 0), (1, 2), (2, 1)] {
            t[from]
                .send(id(to), &frame(i, (i as usize * 53) % 5000))
                .unwrap();
        }
    }
    let mut got = vec![vec![Vec::new(); 3]; 3];
    let deadline = Instant::now() + Duration::from_secs(60);
    while got.iter().flatten().map(Vec::len).sum::<usize>() < 6 * N as usize {
        assert!(Instant::now() < deadline, "frames missing");
        for (to, transport) in t.iter().enumerate() {
            transport.poll(&mut |i| match i {
                Incoming::Frame(p, f) => got[to][p.get() as usize].push(f.id),
                other => panic!("{other:?}"),
            });
        }
    }
    for (to, from) in [(1, 0), (0, 1), (2, 0), (0, 2), (2, 1), (1, 2)] {
        assert_eq!(got[to][from], (0..N).collect::<Vec<_>>(), "{from} to {to}");
    }
}

/// Callgrind harness (not a test of behaviour): `MYRIAD_SHM_BENCH=N,LEN`
/// frames of LEN bytes from one set of links to another, in one thread,
/// without pidfd (valgrind lacks it).
#[test]
#[ignore]
fn bench_send_poll() {
    use super::links::{Peer, ShmLinks};
    use super::segment::Segment;
    use crate::transport::epoll::Doorbell;
    use std::os::fd::{FromRawFd, OwnedFd};
    let spec = std::env::var("MYRIAD_SHM_BENCH").unwrap_or_else(|_| "1000,1".into());
    let mut it = spec.split(',').map(|v| v.parse::<usize>().unwrap());
    let (n, len) = (it.next().unwrap(), it.next().unwrap());
    let ring = DEFAULT_RING;
    let a = Segment::create(2, ring).unwrap();
    let b = Segment::create(2, ring).unwrap();
    // SAFETY: fresh duplicates.
    let dup = |s: &Segment| unsafe { OwnedFd::from_raw_fd(libc::dup(s.fd())) };
    let (a2, b2) = (
        Segment::attach(dup(&a), 2, ring).unwrap(),
        Segment::attach(dup(&b), 2, ring).unwrap(),
    );
    let pid = std::process::id();
    let la = ShmLinks::new(
        a,
        Doorbell::new().unwrap(),
        vec![
            None,
            Some(Peer::new(
                pid,
                1,
                b2,
                0,
                Doorbell::new().unwrap(),
                false,
                false,
            )),
        ],
    );
    let lb = ShmLinks::new(
        b,
        Doorbell::new().unwrap(),
        vec![
            Some(Peer::new(
                pid,
                0,
                a2,
                1,
                Doorbell::new().unwrap(),
                false,
                false,
            )),
            None,
        ],
    );
    // As a posted receive takes a small message: copied out of the ring
    // into the receiver's buffer (`p2p::remote`'s `take_in_place`).
    struct Count(usize, Vec<u8>);
    impl Sink for Count {
        fn take(&mut self, incoming: Incoming) {
            if let Incoming::Frame(_, f) = incoming {
                self.0 += f.payload.len();
            }
        }
        fn take_in_place(&mut self, _: crate::identity::ProcessId, f: frame::InPlace<'_>) {
            self.1[..f.payload.len()].copy_from_slice(f.payload);
            self.0 += f.payload.len();
        }
        fn place(&mut self, _: crate::identity::ProcessId, _: &Frame, _: usize) -> Option<Place> {
            None
        }
    }
    let mut sink = Count(0, vec![0; len]);
    // As `p2p::remote::send` sends: the signature from the type map, the
    // payload from the sender's buffer.
    let mut f = Frame::control(Kind::Eager);
    let signature = [crate::datatype::Run {
        kind: crate::datatype::BaseKind::U8,
        count: 1,
    }];
    f.count = len as u64;
    let mut data = vec![0u8; len];
    for i in 0..n {
        data.fill(i as u8);
        la.send_parts(id(1), &f, &signature, &data).unwrap();
        while lb.poll(&mut sink) == 0 {}
    }
    assert_eq!(sink.0, n * len);
}

/// Timing harness (not a test of behaviour): `MYRIAD_SHM_PINGPONG=N,LEN`
/// round trips of LEN-byte eager messages between two threads through two
/// sets of links, each thread polling its links in a loop (no scheduler,
/// no matching): the transport's part of a one-way between processes.
/// Prints the one-way time. Run with `--ignored --nocapture`.
#[test]
#[ignore]
fn bench_pingpong_links() {
    let spec = std::env::var("MYRIAD_SHM_PINGPONG").unwrap_or_else(|_| "200000,1".into());
    let mut it = spec.split(',').map(|v| v.parse::<usize>().unwrap());
    let (n, len) = (it.next().unwrap(), it.next().unwrap());
    let t = routed(
        2,
        Settings {
            ring: DEFAULT_RING,
            cma: true,
        },
    );
    let mut f = Frame::control(Kind::Eager);
    let signature = [crate::datatype::Run {
        kind: crate::datatype::BaseKind::U8,
        count: 1,
    }];
    f.count = len as u64;
    let f = &f;
    struct Got(usize, Vec<u8>);
    impl Sink for Got {
        fn take(&mut self, _: Incoming) {
            self.0 += 1;
        }
        fn take_in_place(&mut self, _: crate::identity::ProcessId, f: frame::InPlace<'_>) {
            self.1[..f.payload.len()].copy_from_slice(f.payload);
            self.0 += 1;
        }
    }
    let side = |me: usize, first: bool| {
        let t = &t;
        let signature = &signature;
        move || {
            let data = vec![me as u8; len];
            let mut got = Got(0, vec![0; len]);
            let to = id(1 - me as u32);
            let start = Instant::now();
            for i in 0..n {
                if first {
                    t[me].send_parts(to, f, signature, &data).unwrap();
                }
                while got.0 <= i {
                    std::hint::spin_loop();
                    t[me].poll(&mut got);
                }
                if !first {
                    t[me].send_parts(to, f, signature, &data).unwrap();
                }
            }
            start.elapsed()
        }
    };
    let elapsed = std::thread::scope(|s| {
        let b = s.spawn(side(1, false));
        let a = side(0, true)();
        b.join().unwrap();
        a
    });
    println!(
        "links ping-pong {len} B: {:.4} us one-way",
        elapsed.as_secs_f64() * 1e6 / n as f64 / 2.0
    );
}

/// Ring positions are masked, not divided: a segment whose rings are not
/// a power of two is refused (creating or mapping it).
#[test]
fn rings_that_are_not_a_power_of_two_are_refused() {
    use super::segment::Segment;
    let err = Segment::create(2, 3000).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{err}");
    assert!(Segment::create(2, 4096).is_ok());
}
