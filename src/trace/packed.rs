//! A busy party's events, packed: ~12 bytes an event instead of 64, so
//! that recording touches fewer fresh pages.
//!
//! ## Design note
//!
//! Events are written once to fresh memory and kept until the job ends,
//! so each page they fill is faulted in while the party runs. In a traced
//! 1 B ping-pong on one worker (two 64-byte events per message, a fault
//! every 32 messages) those faults were ~18 % of the worker's time, about
//! 60 ns per message on this VM (~2 µs a fault: the kernel's entry, the
//! memory cgroup's charge, page-table locks, and the hypervisor backing
//! the page; clearing it is the small part). Neither pre-faulting
//! (`MADV_POPULATE_WRITE`, the same work in one call) nor 2 MiB huge
//! pages (a huge page's first touch cost milliseconds here) helped;
//! writing fewer bytes does.
//!
//! A party's first [`PACK_AFTER`] events stay plain (most parties of a
//! million-rank job record a few events: they pay nothing here). Past
//! them, each event is encoded as a header byte (kind, which optional
//! fields follow), its depth, and LEB128 varints: the start as a signed
//! difference from the previous event's, the duration, the bytes, the
//! peer and tag (zigzag, the tag as a difference from the previous one),
//! the flow (a signed difference from the previous flow, its direction in
//! the low bit), the folded park's offset, and the names only when they
//! differ from the previous event's. A ping-pong's events take 10–14
//! bytes. The buffer is one `Vec<u8>`: glibc moves a large block with
//! `mremap` when it grows, without copying. [`Packed::unpack`] turns
//! them back into [`Event`]s when the trace is written.

use super::{Event, Name, NO_NAME, NO_PARK};

/// How many events a party records plain before it packs the rest.
pub(crate) const PACK_AFTER: usize = 8192;

/// Room kept for one packed event: header and depth, three u64 varints
/// of up to 10 bytes (start, duration, bytes), peer and tag (zigzagged
/// i32s: 5), the flow (ids below 2^53, so a zigzagged difference and the
/// direction bit: 8), the park (5), two names of 8: 73, rounded up.
pub(crate) const MAX_PACKED: usize = 2 + 6 * 10 + 5 + 16;

/// Header bits: the kind in the low four.
const KIND: u8 = 0x0f;
/// A flow follows.
const HAS_FLOW: u8 = 0x10;
/// A folded park's offset follows.
const HAS_PARK: u8 = 0x20;
/// Names: bit 6 set, the event's names are not the previous event's;
/// then bit 7 set, they follow; clear, they are both [`NO_NAME`].
const NEW_NAMES: u8 = 0x40;
const NAMES_FOLLOW: u8 = 0x80;

/// The packing state: what the next event is encoded against.
#[derive(Debug, Clone, Copy)]
struct Previous {
    ts: u64,
    tag: i32,
    /// The last flow id that left (0) and that came in (1).
    flow: [u64; 2],
    /// The names of the last event of each kind.
    names: [(Name, Name); 16],
}

impl Default for Previous {
    fn default() -> Previous {
        Previous {
            ts: 0,
            tag: 0,
            flow: [0; 2],
            names: [(NO_NAME, NO_NAME); 16],
        }
    }
}

/// Events packed one after another.
#[derive(Debug, Default)]
pub(crate) struct Packed {
    bytes: Vec<u8>,
    len: usize,
    prev: Previous,
}

#[inline(always)]
fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

#[inline(always)]
fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Writes `v` as a LEB128 varint at `out`; the position after it.
///
/// # Safety
///
/// `out` must be valid for writes of 10 bytes.
#[inline(always)]
unsafe fn put(mut out: *mut u8, mut v: u64) -> *mut u8 {
    // SAFETY: a u64 takes at most 10 bytes (7 bits each), which the
    // caller guarantees.
    unsafe {
        while v >= 0x80 {
            out.write(v as u8 | 0x80);
            v >>= 7;
            out = out.add(1);
        }
        out.write(v as u8);
        out.add(1)
    }
}

/// Reads a varint at `bytes[*at..]`, moving `at` past it.
fn get(bytes: &[u8], at: &mut usize) -> u64 {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let b = bytes[*at];
        *at += 1;
        v |= ((b & 0x7f) as u64) << shift;
        if b < 0x80 {
            return v;
        }
        shift += 7;
    }
}

impl Packed {
    /// How many events it holds.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The bytes the buffer holds room for (charged to the size cap).
    pub(crate) fn capacity(&self) -> usize {
        self.bytes.capacity()
    }

    /// Whether one more event surely fits without the buffer growing.
    #[inline(always)]
    pub(crate) fn has_room(&self) -> bool {
        self.bytes.capacity() - self.bytes.len() >= MAX_PACKED
    }

    /// Grows the buffer to hold at least `capacity` bytes.
    pub(crate) fn reserve_total(&mut self, capacity: usize) {
        self.bytes
            .reserve_exact(capacity.saturating_sub(self.bytes.len()));
    }

    /// Appends `e`; `false` (nothing written) if the buffer lacks room.
    #[inline]
    pub(crate) fn push(&mut self, e: &Event) -> bool {
        if !self.has_room() {
            return false;
        }
        let p = &mut self.prev;
        let mut head = e.kind & KIND;
        let names = p.names[head as usize];
        let names_same = std::ptr::eq(e.a, names.0) && std::ptr::eq(e.b, names.1);
        let len = self.bytes.len();
        let start = self.bytes.spare_capacity_mut().as_mut_ptr().cast::<u8>();
        // SAFETY: `has_room`: the spare capacity from `start` holds
        // `MAX_PACKED` bytes, as many as the header, depth, six varints,
        // the park's and the names take at most; the bytes up to `at`
        // are written before `set_len` counts them.
        unsafe {
            let mut at = put(start.add(2), zigzag(e.ts.wrapping_sub(p.ts) as i64));
            at = put(at, e.dur);
            at = put(at, e.bytes);
            at = put(at, zigzag(e.peer as i64));
            at = put(at, zigzag(e.tag.wrapping_sub(p.tag) as i64));
            if e.flow != 0 {
                head |= HAS_FLOW;
                let id = e.flow & !super::FLOW_IN;
                let dir = (e.flow >> 63) & 1;
                let last = &mut p.flow[dir as usize];
                at = put(at, (zigzag(id.wrapping_sub(*last) as i64) << 1) | dir);
                *last = id;
            }
            if e.park != NO_PARK {
                head |= HAS_PARK;
                at = put(at, e.park as u64);
            }
            if !names_same {
                head |= NEW_NAMES;
                if !(std::ptr::eq(e.a, NO_NAME) && std::ptr::eq(e.b, NO_NAME)) {
                    head |= NAMES_FOLLOW;
                    let a = (e.a as *const &str).expose_provenance() as u64;
                    let b = (e.b as *const &str).expose_provenance() as u64;
                    at.cast::<[u8; 8]>().write_unaligned(a.to_le_bytes());
                    at.add(8).cast::<[u8; 8]>().write_unaligned(b.to_le_bytes());
                    at = at.add(16);
                }
                p.names[(e.kind & KIND) as usize] = (e.a, e.b);
            }
            start.write(head);
            start.add(1).write(e.depth);
            let written = at.offset_from(start) as usize;
            debug_assert!(written <= MAX_PACKED, "{written} bytes");
            self.bytes.set_len(len + written);
        }
        p.ts = e.ts;
        p.tag = e.tag;
        self.len += 1;
        true
    }

    /// The events, unpacked, in the order pushed.
    pub(crate) fn unpack(&self) -> Vec<Event> {
        let mut out = Vec::with_capacity(self.len);
        let mut p = Previous::default();
        let bytes = &self.bytes[..];
        let mut at = 0;
        while at < bytes.len() {
            let head = bytes[at];
            let depth = bytes[at + 1];
            at += 2;
            let ts = p.ts.wrapping_add(unzigzag(get(bytes, &mut at)) as u64);
            let dur = get(bytes, &mut at);
            let nbytes = get(bytes, &mut at);
            let peer = unzigzag(get(bytes, &mut at)) as i32;
            let tag = p.tag.wrapping_add(unzigzag(get(bytes, &mut at)) as i32);
            let mut flow = 0;
            if head & HAS_FLOW != 0 {
                let v = get(bytes, &mut at);
                let last = &mut p.flow[(v & 1) as usize];
                let id = last.wrapping_add(unzigzag(v >> 1) as u64);
                *last = id;
                flow = id | ((v & 1) << 63);
            }
            let park = if head & HAS_PARK != 0 {
                get(bytes, &mut at) as u32
            } else {
                NO_PARK
            };
            let names = &mut p.names[(head & KIND) as usize];
            if head & NEW_NAMES != 0 {
                if head & NAMES_FOLLOW != 0 {
                    let word = |at: usize| {
                        let mut w = [0u8; 8];
                        w.copy_from_slice(&bytes[at..at + 8]);
                        u64::from_le_bytes(w) as usize
                    };
                    let (a, b) = (word(at), word(at + 8));
                    at += 16;
                    // SAFETY: `a` and `b` are the addresses of `Name`s
                    // (`&'static &'static str`) that `push` wrote from
                    // live references: 'static, so still valid.
                    unsafe {
                        *names = (
                            &*std::ptr::with_exposed_provenance::<&'static str>(a),
                            &*std::ptr::with_exposed_provenance::<&'static str>(b),
                        );
                    }
                } else {
                    *names = (NO_NAME, NO_NAME);
                }
            }
            p.ts = ts;
            p.tag = tag;
            out.push(Event {
                a: names.0,
                b: names.1,
                ts,
                dur,
                bytes: nbytes,
                flow,
                park,
                peer,
                tag,
                kind: head & KIND,
                depth,
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{FLOW_IN, NO_PEER, NO_TAG};

    fn event(i: u64) -> Event {
        static NAMES: [&str; 3] = ["receive", "barrier", "binomial"];
        let name = |k: u64| -> Name { &NAMES[(k % 3) as usize] };
        Event {
            a: if i % 4 == 0 { NO_NAME } else { name(i) },
            b: if i % 5 == 0 { NO_NAME } else { name(i / 3) },
            // Not monotonic: a parent is recorded after its children.
            ts: 1_000_000 + i * 100 - (i % 7) * 300,
            dur: [0, 5, 1 << 40, u64::MAX][(i % 4) as usize],
            bytes: [1, 0, u64::MAX, 65_536][(i % 4) as usize],
            flow: match i % 5 {
                0 => 0,
                1 => (7 << 42) | i,
                2 => ((3 << 32) | (i * 1000)) | FLOW_IN,
                3 => (1 << 53) - 1,
                _ => 1 | FLOW_IN,
            },
            park: if i % 3 == 0 { NO_PARK } else { i as u32 * 17 },
            peer: [NO_PEER, 0, i32::MAX, -1][(i % 4) as usize],
            tag: [NO_TAG, 7, i32::MAX, 0, -5][(i % 5) as usize],
            kind: (i % 9) as u8,
            depth: (i % 4) as u8,
        }
    }

    fn same(x: &Event, y: &Event) -> bool {
        std::ptr::eq(x.a, y.a)
            && std::ptr::eq(x.b, y.b)
            && (
                x.ts, x.dur, x.bytes, x.flow, x.park, x.peer, x.tag, x.kind, x.depth,
            ) == (
                y.ts, y.dur, y.bytes, y.flow, y.park, y.peer, y.tag, y.kind, y.depth,
            )
    }

    #[test]
    fn events_unpack_to_what_was_packed() {
        let mut packed = Packed::default();
        let events: Vec<Event> = (0..1000).map(event).collect();
        for e in &events {
            if !packed.has_room() {
                packed.reserve_total(packed.capacity() * 2 + 4096);
            }
            assert!(packed.push(e));
        }
        assert_eq!(packed.len(), events.len());
        let back = packed.unpack();
        assert_eq!(back.len(), events.len());
        for (i, (x, y)) in events.iter().zip(&back).enumerate() {
            assert!(same(x, y), "event {i}: {x:?} came back as {y:?}");
        }
    }

    #[test]
    fn a_ping_pongs_events_pack_small() {
        let mut packed = Packed::default();
        packed.reserve_total(1 << 20);
        let receive: Name = &"receive";
        for i in 0..1000u64 {
            // A send instant, then a receive with its park folded in.
            let mut send = event(0);
            (send.a, send.b, send.kind, send.depth) = (NO_NAME, NO_NAME, 0, 0);
            (send.ts, send.dur, send.bytes, send.park) = (i * 900, 0, 1, NO_PARK);
            (send.peer, send.tag, send.flow) = (1, 0, (2 << 32) | (2 * i + 1));
            let mut recv = send;
            (recv.a, recv.b, recv.kind) = (receive, NO_NAME, 1);
            (recv.ts, recv.dur, recv.park) = (i * 900 + 40, 700, 0);
            recv.flow = ((2 << 32) | (2 * i + 2)) | FLOW_IN;
            assert!(packed.push(&send) && packed.push(&recv));
        }
        let per_event = packed.bytes.len() as f64 / packed.len() as f64;
        assert!(per_event <= 14.0, "{per_event} bytes an event");
    }
}
