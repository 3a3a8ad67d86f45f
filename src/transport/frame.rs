//! The wire format of the frames processes exchange.
//!
//! ```text
//! offset  size  field
//!      0     4  length of the rest of the frame (header after this word,
//!               signature, payload), little endian like every field
//!      4     2  magic "My" (0x794d)
//!      6     1  version (FORMAT)
//!      7     1  kind (Kind)
//!      8     8  context (communicator context id)
//!     16     4  source (rank in the communicator, as receivers see it)
//!     20     4  tag
//!     24     4  destination world rank
//!     28     4  runs in the type signature (at most MAX_RUNS)
//!     32     8  count (elements of the signature's element)
//!     40     8  id (names a send waiting for an answer, or the
//!               receive a `Data` frame fills; 0: none)
//!     48     8  reply (the receive a `ClearToSend` names; on `Eager`
//!               and `RequestToSend` frames the message's flow id in a
//!               trace, `crate::trace`; else 0)
//!     56     8  payload length (at most MAX_PAYLOAD)
//!     64  9*runs  signature: (base kind u8, count u64) per run
//!      …     …  payload
//! ```
//!
//! Design note: one fixed header for every kind keeps the decoder a
//! straight line of bounds checks; the run-length signature travels with
//! the data so a receive checks it against its own type exactly as a local
//! receive does (same error, same index). The decoder never trusts a
//! length before checking it against the bytes it has and the caps
//! ([`MAX_PAYLOAD`], [`MAX_RUNS`]): truncated, oversized and garbled input
//! is an error ([`FrameError`]), never a panic or an allocation of a size
//! the peer chose. Streams (TCP) find frame boundaries with [`frame_len`]
//! before decoding a whole frame with [`Frame::decode`].

use std::fmt;

use crate::datatype::{BaseKind, Run};

/// The first bytes of every frame's header after its length.
const MAGIC: u16 = 0x794d;
/// The version of this format; a peer speaking another is refused.
pub(crate) const FORMAT: u8 = 2;
/// Bytes of the fixed header, the length word included.
pub(crate) const HEADER: usize = 64;
/// Bytes per signature run.
const RUN: usize = 9;
/// The largest payload a frame carries (1 GiB): a bigger length is garbage.
pub(crate) const MAX_PAYLOAD: usize = 1 << 30;
/// The most runs a signature may have.
pub(crate) const MAX_RUNS: usize = 1 << 16;
/// The largest handle an announcement carries (`Kind::RequestToSend`).
pub(crate) const MAX_HANDLE: usize = 32;

/// What a frame is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A message with its data (standard, buffered or synchronous send):
    /// an `id` other than 0 asks for an [`Ack`](Kind::Ack) once matched;
    /// `reply` is the message's flow id in a trace (0: none).
    Eager = 1,
    /// A synchronous send's message was matched (`id` names it).
    Ack = 2,
    /// The sender's job failed: `payload` is the UTF-8 message, `source`
    /// the world rank that failed (or -1), `tag` 1 if it panicked, 2 if
    /// the job deadlocked (the payload is the whole job's report).
    Abort = 3,
    /// The sender's job finished: it sends nothing more.
    Bye = 4,
    /// A large or synchronous message announced (rendezvous): envelope,
    /// signature and count, no data; `id` names the waiting send,
    /// `reply` is the message's flow id in a trace (0: none). The payload
    /// is empty, or (at most [`MAX_HANDLE`] bytes) the transport's handle
    /// with which the receiver may read the data itself
    /// (`Transport::lend`).
    RequestToSend = 5,
    /// A receive matched the announced message `id`: send its data as
    /// `Data` for receive `reply`; `reply` 0 means the message was given
    /// up (a dropped matched probe): the send completes as cancelled.
    /// `tag` 1 (with `reply` 0): the receiver read the data itself with
    /// the announcement's handle, the send is complete.
    ClearToSend = 6,
    /// The data of an announced message for receive `id`.
    Data = 7,
    /// A termination-detection wave asks whether the receiver is idle:
    /// `id` is the wave's number. Not counted as a message (it wakes no
    /// rank).
    Probe = 8,
    /// The answer to [`Probe`](Kind::Probe) `id`: `tag` 1 if the sender is
    /// idle; `payload` its counts of frames sent to and received from
    /// each process, which peers may still send to it, and its deadlock
    /// report (`p2p::remote` encodes it). Not counted either.
    Idle = 9,
}

impl Kind {
    fn from_u8(byte: u8) -> Option<Kind> {
        Some(match byte {
            1 => Kind::Eager,
            2 => Kind::Ack,
            3 => Kind::Abort,
            4 => Kind::Bye,
            5 => Kind::RequestToSend,
            6 => Kind::ClearToSend,
            7 => Kind::Data,
            8 => Kind::Probe,
            9 => Kind::Idle,
            _ => return None,
        })
    }
}

/// One frame, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Frame {
    pub(crate) kind: Kind,
    pub(crate) context: u64,
    pub(crate) source: i32,
    pub(crate) tag: i32,
    pub(crate) dest: u32,
    /// The type signature of one element of the data.
    pub(crate) signature: Vec<Run>,
    /// Elements of `signature` in the data.
    pub(crate) count: u64,
    pub(crate) id: u64,
    pub(crate) reply: u64,
    pub(crate) payload: Vec<u8>,
}

impl Frame {
    /// A frame of `kind` with nothing but its kind set.
    pub(crate) fn control(kind: Kind) -> Frame {
        Frame {
            kind,
            context: 0,
            source: -1,
            tag: 0,
            dest: 0,
            signature: Vec::new(),
            count: 0,
            id: 0,
            reply: 0,
            payload: Vec::new(),
        }
    }

    /// The encoded length of this frame.
    pub(crate) fn encoded_len(&self) -> usize {
        HEADER + RUN * self.signature.len() + self.payload.len()
    }

    /// Appends the frame's bytes to `out`.
    ///
    /// # Panics
    ///
    /// If the payload or the signature exceed the caps (the senders split
    /// or refuse such messages before).
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        out.reserve(self.encoded_len());
        self.encode_head(out);
        out.extend_from_slice(&self.payload);
    }

    /// Appends the frame's bytes but its payload to `out`: a stream
    /// transport writes the payload from the frame's own buffer after them,
    /// without copying it into one buffer with the header.
    ///
    /// # Panics
    ///
    /// As [`encode`](Self::encode).
    pub(crate) fn encode_head(&self, out: &mut Vec<u8>) {
        self.encode_head_for(self.payload.len(), out);
    }

    /// [`encode_head`](Self::encode_head) of this frame with a payload of
    /// `payload_len` bytes kept elsewhere (its own payload must be empty):
    /// a stream transport writes them from the sender's buffer.
    ///
    /// # Panics
    ///
    /// As [`encode`](Self::encode), or if the frame has a payload of its own.
    pub(crate) fn encode_head_for(&self, payload_len: usize, out: &mut Vec<u8>) {
        assert!(self.payload.is_empty() || self.payload.len() == payload_len);
        self.encode_head_with(&self.signature, payload_len, out);
    }

    /// [`encode_head_for`](Self::encode_head_for) with `signature` in
    /// place of the frame's own (its own signature and payload are not
    /// used): a sender encodes a small message's header from the send's
    /// type map, without copying the signature into a frame first.
    ///
    /// # Panics
    ///
    /// As [`encode`](Self::encode).
    pub(crate) fn encode_head_with(
        &self,
        signature: &[Run],
        payload_len: usize,
        out: &mut Vec<u8>,
    ) {
        assert!(payload_len <= MAX_PAYLOAD && signature.len() <= MAX_RUNS);
        // Once, not the doublings of a dozen appends (callers start from an
        // empty `Vec`: ofi measured five growths per frame before).
        out.reserve(HEADER + RUN * signature.len());
        let rest = (HEADER + RUN * signature.len() + payload_len - 4) as u32;
        // The header as one array, appended once: a dozen appends each
        // checked the capacity (a sixth of an shm send's instructions).
        let mut head = [0u8; HEADER];
        head[0..4].copy_from_slice(&rest.to_le_bytes());
        head[4..6].copy_from_slice(&MAGIC.to_le_bytes());
        head[6] = FORMAT;
        head[7] = self.kind as u8;
        head[8..16].copy_from_slice(&self.context.to_le_bytes());
        head[16..20].copy_from_slice(&self.source.to_le_bytes());
        head[20..24].copy_from_slice(&self.tag.to_le_bytes());
        head[24..28].copy_from_slice(&self.dest.to_le_bytes());
        head[28..32].copy_from_slice(&(signature.len() as u32).to_le_bytes());
        head[32..40].copy_from_slice(&self.count.to_le_bytes());
        head[40..48].copy_from_slice(&self.id.to_le_bytes());
        head[48..56].copy_from_slice(&self.reply.to_le_bytes());
        head[56..64].copy_from_slice(&(payload_len as u64).to_le_bytes());
        out.extend_from_slice(&head);
        for run in signature {
            let mut bytes = [0u8; RUN];
            bytes[0] = kind_code(run.kind);
            bytes[1..].copy_from_slice(&(run.count as u64).to_le_bytes());
            out.extend_from_slice(&bytes);
        }
    }

    /// The frame's bytes.
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode(&mut out);
        out
    }

    /// Decodes exactly one frame from `bytes` (all of them).
    pub(crate) fn decode(bytes: &[u8]) -> Result<Frame, FrameError> {
        Frame::decode_split(bytes, None)
    }

    /// Decodes one frame whose header and signature are `head` (all of it)
    /// and whose payload, as long as the header says, was read into its
    /// own buffer: a stream transport reads a large payload once, straight
    /// into the buffer the frame keeps.
    pub(crate) fn decode_parts(head: &[u8], payload: Vec<u8>) -> Result<Frame, FrameError> {
        Frame::decode_split(head, Some(Split::Own(payload)))
    }

    /// Decodes the header and signature `head` (all of it) of a `Data`
    /// frame whose payload, `len` bytes as the header says, a stream
    /// transport writes elsewhere ([`Sink::place`](super::Sink::place)):
    /// the frame comes with an empty payload.
    pub(crate) fn decode_placed(head: &[u8], len: usize) -> Result<Frame, FrameError> {
        let frame = Frame::decode_split(head, Some(Split::Elsewhere(len)))?;
        if frame.kind != Kind::Data {
            return Err(FrameError::Garbled("a placed payload of a frame not data"));
        }
        Ok(frame)
    }

    /// The length of a frame's header and signature (where its payload
    /// starts), once `bytes` holds its fixed header: see [`frame_len`] for
    /// the checks and errors.
    pub(crate) fn head_len(bytes: &[u8]) -> Result<Option<usize>, FrameError> {
        frame_len(bytes)?;
        if bytes.len() < HEADER {
            return Ok(None);
        }
        let runs = u32::from_le_bytes(bytes[28..32].try_into().expect("4 bytes")) as usize;
        Ok(Some(HEADER + RUN * runs))
    }

    /// Decodes exactly one frame from `bytes` (all of them) in place: its
    /// signature inline (up to [`INLINE_RUNS`] runs), its payload borrowed
    /// from `bytes`. Why: a small message from a shared ring goes straight
    /// into a posted receive's buffer, without the two allocations of an
    /// owned frame.
    pub(crate) fn decode_in_place(bytes: &[u8]) -> Result<InPlace<'_>, FrameError> {
        let (frame, runs, payload) = Frame::decode_core(bytes, None)?;
        Ok(InPlace {
            frame,
            runs,
            payload: payload.unwrap_or_default(),
        })
    }

    fn decode_split(bytes: &[u8], split: Option<Split>) -> Result<Frame, FrameError> {
        let (mut frame, runs, payload) = Frame::decode_core(bytes, split)?;
        frame.signature = runs.into_vec();
        if let Some(payload) = payload {
            frame.payload = payload.to_vec();
        }
        Ok(frame)
    }

    /// Decodes the frame in `bytes` (and `split`): the frame with an empty
    /// signature (it is in the `Runs`) and, when `split` is `None`, an empty
    /// payload (it is the slice of `bytes`).
    fn decode_core(
        bytes: &[u8],
        split: Option<Split>,
    ) -> Result<(Frame, Runs, Option<&[u8]>), FrameError> {
        let len = frame_len(bytes)?.ok_or(FrameError::Truncated {
            have: bytes.len(),
            need: HEADER,
        })?;
        let have = bytes.len()
            + match &split {
                None => 0,
                Some(Split::Own(payload)) => payload.len(),
                Some(Split::Elsewhere(len)) => *len,
            };
        if len != have {
            return Err(if len > have {
                FrameError::Truncated { have, need: len }
            } else {
                FrameError::Trailing { extra: have - len }
            });
        }
        // The fixed header at fixed offsets (`frame_len` found it whole,
        // the magic and the version checked): no bounds check per field.
        let head: &[u8; HEADER] = bytes[..HEADER].try_into().expect("a whole header");
        let u32_at =
            |at: usize| u32::from_le_bytes([head[at], head[at + 1], head[at + 2], head[at + 3]]);
        let u64_at = |at: usize| u64::from_le_bytes(head[at..at + 8].try_into().expect("8 bytes"));
        let kind = Kind::from_u8(head[7]).ok_or(FrameError::Kind(head[7]))?;
        let context = u64_at(8);
        let source = u32_at(16) as i32;
        let tag = u32_at(20) as i32;
        let dest = u32_at(24);
        let runs = u32_at(28) as usize;
        let count = u64_at(32);
        let id = u64_at(40);
        let reply = u64_at(48);
        let payload_len = u64_at(56) as usize;
        let mut r = Reader { bytes, at: HEADER };
        let mut signature = Runs::with_capacity(runs);
        for _ in 0..runs {
            let code = r.u8()?;
            let kind = kind_of(code).ok_or(FrameError::BaseKind(code))?;
            let n = usize::try_from(r.u64()?).map_err(|_| FrameError::Garbled("run count"))?;
            if n == 0 {
                return Err(FrameError::Garbled("empty signature run"));
            }
            signature.push(Run { kind, count: n });
        }
        let (payload, borrowed) = match split {
            None => (Vec::new(), Some(r.take(payload_len)?)),
            Some(Split::Own(payload)) if payload.len() == payload_len => (payload, None),
            Some(Split::Elsewhere(len)) if len == payload_len => (Vec::new(), None),
            Some(_) => return Err(FrameError::Garbled("lengths disagree")),
        };
        if r.at != bytes.len() {
            return Err(FrameError::Garbled("lengths disagree"));
        }
        let payload_len = borrowed.map_or(payload.len(), <[u8]>::len);
        match kind {
            Kind::Eager => check_data(signature.as_slice(), count, payload_len)?,
            Kind::RequestToSend => {
                check_element(signature.as_slice())?;
                // No data (a handle at most), and a size that one data
                // frame can carry.
                if payload_len > MAX_HANDLE
                    || message_bytes(signature.as_slice(), count) > MAX_PAYLOAD as u128
                {
                    return Err(FrameError::Garbled(
                        "an announcement with more than a handle, or too large",
                    ));
                }
            }
            _ => {}
        }
        let frame = Frame {
            kind,
            context,
            source,
            tag,
            dest,
            signature: Vec::new(),
            count,
            id,
            reply,
            payload,
        };
        Ok((frame, signature, borrowed))
    }

    /// The bytes of the message a data frame carries or an announcement
    /// announces (its signature's size times its count).
    pub(crate) fn message_bytes(&self) -> usize {
        message_bytes(&self.signature, self.count) as usize
    }
}

/// Bytes of a short eager frame's fixed header ([`Frame::short_head`]).
pub(crate) const SHORT_HEADER: usize = 32;
/// Bytes of a short frame's signature run (base kind u8, count u32).
const SHORT_RUN: usize = 5;
/// The largest payload a short frame carries.
pub(crate) const SHORT_PAYLOAD: usize = 256;

/// A short frame's header and run ([`Frame::short_head`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ShortHead {
    bytes: [u8; SHORT_HEADER + SHORT_RUN],
    len: usize,
}

impl ShortHead {
    /// Its bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

impl Frame {
    /// The header of the short form of this `Eager` frame, with
    /// `signature` and a payload of `payload_len` bytes (written after it
    /// by the caller), `mark` in bytes 4..7 (a transport's own record
    /// magic and type, which tell it from a frame), in an array of its own
    /// (a sender writes it into a ring from the stack); `None` where the
    /// frame does not fit the short form: not `Eager`,
    /// an `id` or `reply` (a synchronous send, a trace's flow), more than
    /// one run, a count or run count above `u32`, or a payload above
    /// [`SHORT_PAYLOAD`].
    ///
    /// ```text
    /// offset  size  field
    ///      0     4  length of the rest (as a frame's)
    ///      4     3  mark (the transport's)
    ///      7     1  runs (0 or 1)
    ///      8     8  context
    ///     16     4  source, 20 4 tag, 24 4 destination world rank
    ///     28     4  count
    ///     32  5*runs  (base kind u8, count u32)
    ///      …     …  payload
    /// ```
    ///
    /// Why: the 64-byte header with its 9-byte run put a 1-byte message
    /// over two or three cache lines of a shared-memory ring, each of
    /// which moves from the sender's core to the receiver's; a short one
    /// and its ring word fit one line.
    #[inline]
    pub(crate) fn short_head(
        &self,
        signature: &[Run],
        payload_len: usize,
        mark: [u8; 3],
    ) -> Option<ShortHead> {
        let fits = self.kind == Kind::Eager
            && self.id == 0
            && self.reply == 0
            && signature.len() <= 1
            && payload_len <= SHORT_PAYLOAD
            && u32::try_from(self.count).is_ok()
            && signature.iter().all(|r| u32::try_from(r.count).is_ok());
        if !fits {
            return None;
        }
        let head_len = SHORT_HEADER + SHORT_RUN * signature.len();
        let mut head = [0u8; SHORT_HEADER + SHORT_RUN];
        head[0..4].copy_from_slice(&((head_len + payload_len - 4) as u32).to_le_bytes());
        head[4..7].copy_from_slice(&mark);
        head[7] = signature.len() as u8;
        head[8..16].copy_from_slice(&self.context.to_le_bytes());
        head[16..20].copy_from_slice(&self.source.to_le_bytes());
        head[20..24].copy_from_slice(&self.tag.to_le_bytes());
        head[24..28].copy_from_slice(&self.dest.to_le_bytes());
        head[28..32].copy_from_slice(&(self.count as u32).to_le_bytes());
        if let Some(run) = signature.first() {
            head[32] = kind_code(run.kind);
            head[33..37].copy_from_slice(&(run.count as u32).to_le_bytes());
        }
        Some(ShortHead {
            bytes: head,
            len: head_len,
        })
    }

    /// Decodes a short frame ([`short_head`](Self::short_head)), the
    /// whole of `bytes`, in place (its mark not looked at): an `Eager`
    /// frame whose payload is the end of `bytes`.
    pub(crate) fn decode_short(bytes: &[u8]) -> Result<InPlace<'_>, FrameError> {
        let Some(head) = bytes.first_chunk::<SHORT_HEADER>() else {
            return Err(FrameError::Truncated {
                have: bytes.len(),
                need: SHORT_HEADER,
            });
        };
        let u32_at =
            |at: usize| u32::from_le_bytes([head[at], head[at + 1], head[at + 2], head[at + 3]]);
        if u32_at(0) as usize + 4 != bytes.len() {
            return Err(FrameError::Garbled("lengths disagree"));
        }
        let runs = head[7] as usize;
        let at = SHORT_HEADER + SHORT_RUN * runs;
        if runs > 1 || bytes.len() < at {
            return Err(FrameError::Garbled("a short frame's runs"));
        }
        let count = u32_at(28) as u64;
        let payload = &bytes[at..];
        if payload.len() > SHORT_PAYLOAD {
            return Err(FrameError::Garbled("a short frame's payload"));
        }
        let mut run = Run {
            kind: BaseKind::U8,
            count: 0,
        };
        if runs == 1 {
            let code = bytes[32];
            run.kind = kind_of(code).ok_or(FrameError::BaseKind(code))?;
            run.count = u32::from_le_bytes(bytes[33..37].try_into().expect("4 bytes")) as usize;
            if run.count == 0 {
                return Err(FrameError::Garbled("empty signature run"));
            }
        }
        // At most 2^32 elements of 2^32 base values of at most 16 bytes.
        if (run.kind.size() * run.count) as u128 * count as u128 != payload.len() as u128 {
            return Err(FrameError::Garbled("payload length is not count elements"));
        }
        let signature = Runs::Inline(runs, [run; INLINE_RUNS]);
        let frame = Frame {
            kind: Kind::Eager,
            context: u64::from_le_bytes(head[8..16].try_into().expect("8 bytes")),
            source: u32_at(16) as i32,
            tag: u32_at(20) as i32,
            dest: u32_at(24),
            signature: Vec::new(),
            count,
            id: 0,
            reply: 0,
            payload: Vec::new(),
        };
        Ok(InPlace {
            frame,
            runs: signature,
            payload,
        })
    }
}

/// Where the payload of a frame decoded from its header is.
enum Split {
    /// Read into its own buffer.
    Own(Vec<u8>),
    /// Written elsewhere: this many bytes.
    Elsewhere(usize),
}

/// Runs of a signature kept inline up to this many (one run: a message
/// of one base type; two: a pair such as (i32, f64)).
pub(crate) const INLINE_RUNS: usize = 2;

/// A decoded signature: inline when short (no allocation), else on the
/// heap.
#[derive(Debug, Clone)]
pub(crate) enum Runs {
    /// The first `usize` of the array.
    Inline(usize, [Run; INLINE_RUNS]),
    /// More than [`INLINE_RUNS`].
    Heap(Vec<Run>),
}

impl Runs {
    #[inline]
    fn with_capacity(runs: usize) -> Runs {
        if runs <= INLINE_RUNS {
            let none = Run {
                kind: BaseKind::U8,
                count: 0,
            };
            Runs::Inline(0, [none; INLINE_RUNS])
        } else {
            Runs::Heap(Vec::with_capacity(runs))
        }
    }

    #[inline]
    fn push(&mut self, run: Run) {
        match self {
            Runs::Inline(len, runs) if *len < INLINE_RUNS => {
                runs[*len] = run;
                *len += 1;
            }
            Runs::Inline(len, runs) => {
                let mut all = runs[..*len].to_vec();
                all.push(run);
                *self = Runs::Heap(all);
            }
            Runs::Heap(all) => all.push(run),
        }
    }

    /// The runs.
    pub(crate) fn as_slice(&self) -> &[Run] {
        match self {
            Runs::Inline(len, runs) => &runs[..*len],
            Runs::Heap(all) => all,
        }
    }

    /// The runs in a `Vec` of their own.
    pub(crate) fn into_vec(self) -> Vec<Run> {
        match self {
            Runs::Inline(len, runs) => runs[..len].to_vec(),
            Runs::Heap(all) => all,
        }
    }
}

/// A frame decoded in place ([`Frame::decode_in_place`]): its fields but
/// the signature and the payload in `frame` (those two empty), its
/// signature in `runs`, its payload borrowed.
#[derive(Debug)]
pub(crate) struct InPlace<'a> {
    /// The frame without its signature and payload.
    pub(crate) frame: Frame,
    /// Its signature.
    pub(crate) runs: Runs,
    /// Its payload, where it arrived.
    pub(crate) payload: &'a [u8],
}

impl InPlace<'_> {
    /// The frame with its own signature and payload (copied out).
    pub(crate) fn into_frame(self) -> Frame {
        Frame {
            signature: self.runs.into_vec(),
            payload: self.payload.to_vec(),
            ..self.frame
        }
    }
}

fn message_bytes(signature: &[Run], count: u64) -> u128 {
    let element: u128 = signature
        .iter()
        .map(|r| r.kind.size() as u128 * r.count as u128)
        .sum();
    element * count as u128
}

/// The payload of a data frame must be `count` elements of the signature.
fn check_data(signature: &[Run], count: u64, payload: usize) -> Result<(), FrameError> {
    let element = check_element(signature)?;
    if element * count as u128 != payload as u128 {
        return Err(FrameError::Garbled("payload length is not count elements"));
    }
    Ok(())
}

/// An element's signature is bounded (so sums over it cannot overflow),
/// also when the count is 0: returns its size.
fn check_element(signature: &[Run]) -> Result<u128, FrameError> {
    let element = message_bytes(signature, 1);
    if element > (MAX_PAYLOAD as u128) << 8 {
        return Err(FrameError::Oversized {
            what: "element signature",
            len: u64::try_from(element).unwrap_or(u64::MAX),
        });
    }
    Ok(element)
}

/// What the front of a stream of frames holds, for a stream reader
/// ([`front`]).
#[derive(Debug)]
pub(crate) enum Front<'a> {
    /// Not enough bytes to act on yet.
    Wanting,
    /// A whole frame, the first `usize` bytes of the stream.
    Whole(Frame, usize),
    /// The header and signature of a frame with a large payload (`len`
    /// bytes), and the first bytes of that payload: the reader places the
    /// rest as it comes instead of waiting for the whole frame.
    Large {
        head: &'a [u8],
        already: &'a [u8],
        len: usize,
    },
}

/// Cuts the front of a stream of frames: a whole frame, the start of one
/// whose payload is at least `large` bytes (once its head is there), or
/// nothing yet. An error is a stream that carries no frames.
pub(crate) fn front(rest: &[u8], large: usize) -> Result<Front<'_>, FrameError> {
    let Some(len) = frame_len(rest)? else {
        return Ok(Front::Wanting);
    };
    if rest.len() >= len {
        return Frame::decode(&rest[..len]).map(|frame| Front::Whole(frame, len));
    }
    if let Ok(Some(head)) = Frame::head_len(rest) {
        if len - head >= large && rest.len() >= head {
            let (head, already) = rest.split_at(head);
            return Ok(Front::Large {
                head,
                already,
                len: len - head.len(),
            });
        }
    }
    Ok(Front::Wanting)
}

/// The length of the frame that starts `bytes` once its header is there
/// (`Ok(None)` before), after checking the magic, the version and the
/// caps: what a stream reader needs to cut frames.
pub(crate) fn frame_len(bytes: &[u8]) -> Result<Option<usize>, FrameError> {
    // The magic and the version are checked as soon as they are there: a
    // stray peer is refused after 7 bytes, not after a header's worth.
    if bytes.len() >= 6 {
        let magic = u16::from_le_bytes(bytes[4..6].try_into().expect("2 bytes"));
        if magic != MAGIC {
            return Err(FrameError::Magic(magic));
        }
    }
    if bytes.len() >= 7 && bytes[6] != FORMAT {
        return Err(FrameError::Version(bytes[6]));
    }
    if bytes.len() < HEADER {
        return Ok(None);
    }
    let rest = u32::from_le_bytes(bytes[0..4].try_into().expect("4 bytes")) as usize;
    let runs = u32::from_le_bytes(bytes[28..32].try_into().expect("4 bytes")) as usize;
    let payload = u64::from_le_bytes(bytes[56..64].try_into().expect("8 bytes"));
    if runs > MAX_RUNS {
        return Err(FrameError::Oversized {
            what: "signature runs",
            len: runs as u64,
        });
    }
    if payload > MAX_PAYLOAD as u64 {
        return Err(FrameError::Oversized {
            what: "payload",
            len: payload,
        });
    }
    let len = HEADER + RUN * runs + payload as usize;
    if rest + 4 != len {
        return Err(FrameError::Garbled("length word disagrees with the header"));
    }
    Ok(Some(len))
}

/// A base kind's wire code: its place in [`BaseKind::ALL`] (the enum's
/// declaration order, checked there at compile time), so a cast, not a
/// search, on the send path. Codes are part of the format: kinds are only
/// ever appended.
fn kind_code(kind: BaseKind) -> u8 {
    kind as u8
}

fn kind_of(code: u8) -> Option<BaseKind> {
    BaseKind::ALL.get(code as usize).copied()
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], FrameError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&end| end <= self.bytes.len())
            .ok_or(FrameError::Garbled("a field runs past the frame"))?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn u8(&mut self) -> Result<u8, FrameError> {
        Ok(self.take(1)?[0])
    }

    fn u64(&mut self) -> Result<u64, FrameError> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8")))
    }
}

/// Why bytes are not a frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FrameError {
    /// Fewer bytes than the frame needs.
    Truncated { have: usize, need: usize },
    /// Bytes after the frame.
    Trailing { extra: usize },
    /// A length above its cap.
    Oversized { what: &'static str, len: u64 },
    /// Not a frame of this protocol.
    Magic(u16),
    /// Another version of the format (another build of myriad).
    Version(u8),
    /// An unknown frame kind.
    Kind(u8),
    /// An unknown base type code in the signature.
    BaseKind(u8),
    /// Fields that contradict each other.
    Garbled(&'static str),
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::Truncated { have, need } => {
                write!(f, "truncated frame: {have} bytes of {need}")
            }
            FrameError::Trailing { extra } => write!(f, "{extra} bytes after the frame"),
            FrameError::Oversized { what, len } => write!(f, "oversized frame: {what} {len}"),
            FrameError::Magic(m) => write!(f, "not a myriad frame (magic {m:#06x})"),
            FrameError::Version(v) => write!(
                f,
                "frame format version {v}, this build speaks {FORMAT} (processes of \
                 different builds in one job)"
            ),
            FrameError::Kind(k) => write!(f, "unknown frame kind {k}"),
            FrameError::BaseKind(k) => write!(f, "unknown base type code {k}"),
            FrameError::Garbled(what) => write!(f, "garbled frame: {what}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Frame {
        Frame {
            kind: Kind::Eager,
            context: 0xdead_beef_0042,
            source: 3,
            tag: -7,
            dest: 9,
            signature: vec![
                Run {
                    kind: BaseKind::I32,
                    count: 2,
                },
                Run {
                    kind: BaseKind::F64,
                    count: 1,
                },
            ],
            count: 3,
            id: 77,
            reply: 5,
            payload: (0..48).collect(),
        }
    }

    #[test]
    fn base_kind_wire_codes_are_fixed() {
        // Part of the format between processes: a reordered enum must not
        // change them.
        let codes = [
            (BaseKind::Bool, 0),
            (BaseKind::I8, 1),
            (BaseKind::U8, 2),
            (BaseKind::I16, 3),
            (BaseKind::U16, 4),
            (BaseKind::I32, 5),
            (BaseKind::U32, 6),
            (BaseKind::I64, 7),
            (BaseKind::U64, 8),
            (BaseKind::F32, 9),
            (BaseKind::F64, 10),
            (BaseKind::C32, 11),
            (BaseKind::C64, 12),
        ];
        for (kind, code) in codes {
            assert_eq!(kind_code(kind), code, "{kind:?}");
            assert_eq!(kind_of(code), Some(kind));
        }
        assert_eq!(kind_of(13), None);
    }

    /// The short form: what fits it comes back whole; what does not is
    /// refused by the encoder; every cut or scribbled byte string is an
    /// error or a valid frame, never a panic.
    #[test]
    fn short_frames_round_trip_and_garbage_is_an_error() {
        let mark = [1, 2, 3];
        let mut f = sample();
        let one = [Run {
            kind: BaseKind::F64,
            count: 2,
        }];
        assert!(f.short_head(&one, 48, mark).is_none(), "an id");
        f.id = 0;
        assert!(f.short_head(&one, 48, mark).is_none(), "a flow id");
        f.reply = 0;
        assert!(f.short_head(&f.signature, 48, mark).is_none(), "2 runs");
        assert!(f.short_head(&one, SHORT_PAYLOAD + 16, mark).is_none());
        f.signature = one.to_vec();
        let mut short = f.short_head(&one, 48, mark).unwrap().bytes().to_vec();
        assert_eq!(short.len(), SHORT_HEADER + SHORT_RUN);
        assert_eq!(&short[4..7], &mark);
        short.extend_from_slice(&f.payload);
        let back = Frame::decode_short(&short).unwrap();
        assert_eq!(back.payload, &f.payload[..]);
        assert_eq!(back.into_frame(), f);
        for cut in 0..short.len() {
            assert!(Frame::decode_short(&short[..cut]).is_err(), "cut at {cut}");
        }
        for at in 0..SHORT_HEADER + SHORT_RUN {
            for byte in [0u8, 1, 0x7f, 0xff] {
                let mut bad = short.clone();
                bad[at] = byte;
                let _ = Frame::decode_short(&bad);
            }
        }
    }

    #[test]
    fn frames_round_trip() {
        let frame = sample();
        let bytes = frame.to_bytes();
        assert_eq!(bytes.len(), frame.encoded_len());
        assert_eq!(frame_len(&bytes), Ok(Some(bytes.len())));
        assert_eq!(Frame::decode(&bytes), Ok(frame));
        let bye = Frame::control(Kind::Bye);
        assert_eq!(Frame::decode(&bye.to_bytes()), Ok(bye));
    }

    /// A frame decoded in place is the frame `decode` makes, its
    /// signature inline or (more runs than `INLINE_RUNS`) on the heap, and
    /// bad bytes are the same errors.
    #[test]
    fn frames_decode_in_place_as_they_decode() {
        let mut three = sample();
        three.signature.push(Run {
            kind: BaseKind::U8,
            count: 8,
        });
        three.count = 2;
        three.payload = (0..48).collect();
        for frame in [sample(), three, Frame::control(Kind::Bye)] {
            let bytes = frame.to_bytes();
            let in_place = Frame::decode_in_place(&bytes).unwrap();
            assert_eq!(in_place.runs.as_slice(), &frame.signature[..]);
            assert_eq!(in_place.payload, &frame.payload[..]);
            assert!(in_place.frame.signature.is_empty() && in_place.frame.payload.is_empty());
            assert_eq!(in_place.into_frame(), frame);
            for cut in [0, 7, HEADER, bytes.len() - 1] {
                assert_eq!(
                    Frame::decode_in_place(&bytes[..cut]).map(InPlace::into_frame),
                    Frame::decode(&bytes[..cut])
                );
            }
        }
        let mut bad = sample();
        bad.count = 4;
        assert!(matches!(
            Frame::decode_in_place(&bad.to_bytes()),
            Err(FrameError::Garbled(_))
        ));
    }

    /// A header encoded with a signature given apart is the header of the
    /// frame that carries it.
    #[test]
    fn a_header_encodes_with_a_signature_given_apart() {
        let frame = sample();
        let bare = Frame {
            signature: Vec::new(),
            payload: Vec::new(),
            ..frame.clone()
        };
        let (mut apart, mut whole) = (Vec::new(), Vec::new());
        bare.encode_head_with(&frame.signature, frame.payload.len(), &mut apart);
        frame.encode_head(&mut whole);
        assert_eq!(apart, whole);
    }

    #[test]
    fn every_truncation_is_rejected() {
        let bytes = sample().to_bytes();
        for cut in 0..bytes.len() {
            assert!(
                matches!(
                    Frame::decode(&bytes[..cut]),
                    Err(FrameError::Truncated { .. })
                ),
                "cut at {cut}"
            );
        }
        let mut long = bytes.clone();
        long.push(0);
        assert_eq!(Frame::decode(&long), Err(FrameError::Trailing { extra: 1 }));
    }

    #[test]
    fn oversized_and_foreign_frames_are_rejected() {
        let mut bytes = sample().to_bytes();
        bytes[56..64].copy_from_slice(&(MAX_PAYLOAD as u64 + 1).to_le_bytes());
        assert!(matches!(
            frame_len(&bytes),
            Err(FrameError::Oversized {
                what: "payload",
                ..
            })
        ));
        let mut bytes = sample().to_bytes();
        bytes[28..32].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            frame_len(&bytes),
            Err(FrameError::Oversized { .. })
        ));
        let mut bytes = sample().to_bytes();
        bytes[6] = FORMAT + 1;
        assert_eq!(frame_len(&bytes), Err(FrameError::Version(FORMAT + 1)));
        let mut bytes = sample().to_bytes();
        bytes[4] ^= 0xff;
        assert!(matches!(frame_len(&bytes), Err(FrameError::Magic(_))));
    }

    #[test]
    fn a_payload_that_is_not_count_elements_is_garbled() {
        let mut frame = sample();
        frame.count = 4;
        assert!(matches!(
            Frame::decode(&frame.to_bytes()),
            Err(FrameError::Garbled(_))
        ));
    }

    #[test]
    fn an_announcement_carries_a_handle_at_most_and_a_size_a_frame_can_carry() {
        let announce = Frame {
            kind: Kind::RequestToSend,
            payload: Vec::new(),
            ..sample()
        };
        let decoded = Frame::decode(&announce.to_bytes()).unwrap();
        assert_eq!(decoded.message_bytes(), 48, "3 elements of (2 i32, f64)");
        let lent = Frame {
            kind: Kind::RequestToSend,
            payload: (0..16).collect(),
            ..sample()
        };
        let decoded = Frame::decode(&lent.to_bytes()).unwrap();
        assert_eq!(decoded.payload, lent.payload, "the handle travels");
        assert_eq!(decoded.message_bytes(), 48, "not the handle's length");
        let with_data = Frame {
            kind: Kind::RequestToSend,
            ..sample()
        };
        assert!(matches!(
            Frame::decode(&with_data.to_bytes()),
            Err(FrameError::Garbled(_))
        ));
        let huge = Frame {
            count: (MAX_PAYLOAD as u64 / 16) + 1,
            ..announce
        };
        assert!(matches!(
            Frame::decode(&huge.to_bytes()),
            Err(FrameError::Garbled(_))
        ));
    }

    /// A small deterministic generator (xorshift) instead of a fuzzing
    /// crate: mutations of valid frames (bit flips, byte overwrites,
    /// truncations, insertions) must decode to an error or to a frame that
    /// encodes back to the same bytes, and never panic.
    #[test]
    fn mutated_frames_never_panic() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let seeds = [
            sample().to_bytes(),
            Frame::control(Kind::Ack).to_bytes(),
            Frame::control(Kind::Abort).to_bytes(),
            Frame {
                kind: Kind::RequestToSend,
                payload: Vec::new(),
                ..sample()
            }
            .to_bytes(),
        ];
        let (mut decoded, mut rejected) = (0, 0);
        for i in 0..20_000 {
            let mut bytes = seeds[i % seeds.len()].clone();
            for _ in 0..1 + next() % 4 {
                let at = (next() as usize) % bytes.len().max(1);
                match next() % 4 {
                    0 if !bytes.is_empty() => bytes[at] ^= 1 << (next() % 8),
                    1 if !bytes.is_empty() => bytes[at] = next() as u8,
                    2 => bytes.truncate(at),
                    _ => bytes.insert(at.min(bytes.len()), next() as u8),
                }
            }
            match Frame::decode(&bytes) {
                Ok(frame) => {
                    assert_eq!(
                        frame.to_bytes(),
                        bytes,
                        "a decoded frame re-encodes exactly"
                    );
                    decoded += 1;
                }
                Err(_) => rejected += 1,
            }
            let _ = frame_len(&bytes);
        }
        assert!(rejected > 10_000, "most mutations are rejected: {rejected}");
        assert!(decoded > 0, "some mutations (payload bytes) stay frames");
    }
}
