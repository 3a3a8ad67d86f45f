//! The libfabric transport (`ofi` feature, `MYRIAD_TRANSPORT=ofi`): frames
//! between processes over one reliable-datagram (`FI_EP_RDM`) endpoint per
//! process, on whatever provider libfabric picks or `FI_PROVIDER` names
//! (`verbs;ofi_rxm` on InfiniBand, `tcp;ofi_rxm` or `sockets` anywhere).
//!
//! * **Start-up** is in two steps so that any allgather can join them:
//!   [`OfiTransport::open`] opens the fabric, domain, completion queue,
//!   address vector and endpoint and gives the endpoint's name (hex,
//!   [`Opened::name_hex`]); [`Opened::join`] inserts every process's name
//!   into the address vector (process `p` is address `p`) and pre-posts the
//!   receive buffers.
//! * **Frames as a stream.** Each peer's frames (and this transport's
//!   records, below) are encoded exactly as for
//!   TCP (`transport::frame`) and the bytes cut into messages of at most
//!   [`MSG`] bytes, each led by an 8-byte header (the sending process); the
//!   receiver appends a message's bytes to that peer's input and cuts
//!   frames out of it as the TCP transport does (`frame_len`). Messages of
//!   one pair are matched in order (the endpoint is asked for
//!   `FI_ORDER_SAS`, send after send) but may complete out of order (the
//!   `tcp;ofi_rxm` provider completes a large message, which it moves by
//!   its own rendezvous, after later small ones), so the header also
//!   numbers them and the receiver holds early ones until their turn.
//!   A send posts from an owned copy (freed when its completion is read);
//!   what the provider does not take now (`FI_EAGAIN`) waits in the peer's
//!   queue, posted by later calls in order. [`RECVS`] buffers of [`MSG`]
//!   bytes are posted at start and re-posted as each completes.
//! * **poll** reads the completion queue without blocking (which also
//!   drives the provider's progress) and, every [`CONTROL_PERIOD`] or when
//!   a wait saw them ready, the control streams (one system call less per
//!   poll); **wait** blocks in `epoll` on the queue's wait object
//!   (`FI_WAIT_FD`, after `fi_trywait`), the control streams and an
//!   `eventfd` that [`wake`](Transport::wake) writes, for the time asked
//!   (to the microsecond: the termination wave's short timeouts are not a
//!   busy loop). A provider without a wait fd, or output the provider
//!   refused for now (`FI_EAGAIN`), is waited on in 1 ms steps.
//!
//! ## Design note: authentication and liveness
//!
//! libfabric has no notion of a job secret, and an RDM endpoint does not
//! tell when a peer dies. So the job's TCP mesh (`transport/mesh.rs`,
//! every connection authenticated with the job secret) stays open beside
//! the endpoint as the control channel: the endpoint names travel through
//! the launcher's key-value space, which only the job's processes reach,
//! and a message is only taken from a peer address inserted from those
//! names (an unknown sender's message is dropped and logged). A control
//! stream that ends is how a lost peer shows: [`close`](Transport::close)
//! writes, before ending the stream, how many messages it sent to that
//! peer, and the receiver reports the end ([`Incoming::Lost`], which
//! `p2p` ignores after a goodbye) once it has read that many, so a lost
//! peer is reported after its last frame, as TCP does. A stream that ends
//! without the count (a killed process) is reported at once. A send whose
//! completion fails is not reported by itself (the peer may have closed
//! after its goodbye, which is still on the way): the control stream
//! decides, and a peer whose sends fail while its stream stays open for
//! [`LAST_MESSAGES`] is reported lost (a broken fabric path).
//!
//! ## Rendezvous: the receiver reads (`fi_read`)
//!
//! A large payload lent by [`send_borrowed`](Transport::send_borrowed)
//! (at least [`RENDEZVOUS`] bytes, the data of an announced message) is
//! not copied into messages: the sender registers its buffer
//! (`fi_mr_reg`, `FI_REMOTE_READ`; the address it announces is the
//! buffer's under `FI_MR_VIRT_ADDR`, else 0, and the key the provider's
//! under `FI_MR_PROV_KEY`, else one of ours) and sends a record in the
//! pair's stream, told from a frame by its magic ("Of" where a frame has
//! "My"):
//!
//! ```text
//! offset  size  field
//!      0     4  length of the rest of the record
//!      4     2  RECORD_MAGIC
//!      6     1  type: 1 = announce, 2 = done
//!      7     1  0
//!   announce:  8 address, 16 key, 24 length, 32 token (u64 each),
//!              40… the frame's header and signature
//!   done:      8 token
//! ```
//!
//! The receiver asks its sink for a place ([`Sink::place`]) and reads the
//! payload straight into it (else into the frame's own buffer), in reads
//! of [`READ_CHUNK`] (or the provider's smaller `max_msg_size`), registering the destination
//! first if the provider wants local memory registered (`FI_MR_LOCAL`).
//! Only [`READS_AT_ONCE`] of them are in flight, the next posted as one
//! completes: one read of the whole payload had the `tcp` provider's
//! socket, whose buffers the kernel autotunes to megabytes, carry data
//! whose bytes left the caches before the receiver copied them out (the
//! reason our TCP keeps a small send buffer, `tcp.rs`); half a megabyte
//! on the way still fills a fabric's link.
//! Frames behind the announce wait until the reads complete, so the
//! payload is handed in its place among the pair's frames; then `done`
//! goes back, and its arrival deregisters the memory and hands
//! [`Incoming::Sent`]. A read that fails (the sender died) reports the
//! sender lost. A provider without `FI_RMA` is used without it: lent
//! payloads then go as eager messages (noted once at start).
//!
//! Withdrawals wait rather than copy: [`withdraw_place`](Transport::withdraw_place)
//! returns once no read into the place is in flight (a read the provider
//! accepted cannot be called back), driving progress itself;
//! [`withdraw_send`](Transport::withdraw_send) waits for the peer's
//! `done` (it is reading, or will: the announce is ahead of any abort in
//! the stream) unless the peer is lost or [`LAST_MESSAGES`] passes, then
//! deregisters.

pub(crate) mod fabric;

use std::collections::{HashMap, HashSet, VecDeque};
use std::ffi::c_void;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{self, Read};
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use self::fabric::{
    Av, Completion, Cq, Domain, Endpoint, Fabric, Info, Mr, OfiError, RemoteMemory, Wanted,
};
use super::epoll::{Doorbell, Epoll};
use super::frame::{frame_len, Frame, MAX_PAYLOAD};
use super::periodic::Periodic;
use super::{Borrowed, Incoming, Place, SendError, Sink, Transport};
use crate::error::Error;
use crate::identity::ProcessId;
use crate::sys::ofi as sys;

/// Bytes of one message, its header included.
pub(crate) const MSG: usize = 64 * 1024;
/// Bytes of a message's header: the sending process and the message's
/// number among those it sent to this process (u32 LE each, the number
/// wrapping).
const HEADER: usize = 8;
/// Receive buffers posted at once.
pub(crate) const RECVS: usize = 32;
/// Entries of the completion queue.
const CQ_SIZE: usize = 1024;
/// Completions read from the queue at once.
const BATCH: usize = 64;
/// The epoll token of the wake-up eventfd (control streams use their
/// process index).
const WAKE: u64 = u64::MAX;
/// The epoll token of the completion queue's wait fd.
const CQ: u64 = u64::MAX - 1;
/// The longest step of a `wait` while progress needs polls.
const STEP: Duration = Duration::from_millis(1);
/// The epoll token of the control streams' own epoll set.
const CONTROLS: u64 = u64::MAX - 2;
/// Polls between two readings of the clock for the control streams.
const CONTROL_EVERY: u32 = 64;
/// How often a poll looks at the control streams (which only carry a
/// closing peer's count or its end) unless a wait saw them ready: each
/// look is an `epoll_wait`, a system call that a worker polling in a loop
/// made on every poll beside the provider's own; a loss is seen within
/// this.
const CONTROL_PERIOD: Duration = Duration::from_millis(1);
/// How long a peer that closed may take for its last messages to arrive
/// before it is reported lost anyway.
const LAST_MESSAGES: Duration = Duration::from_secs(10);

/// Payloads of at least this many bytes lent by `send_borrowed` are read
/// by the receiver (`fi_read`) rather than sent as eager messages.
pub(crate) const RENDEZVOUS: usize = 64 * 1024;
/// The largest read posted at once (less where the provider's
/// `max_msg_size` is smaller).
const READ_CHUNK: usize = 256 * 1024;
/// Reads of one payload in flight at once: with [`READ_CHUNK`], at most
/// 512 KiB on the way (see "Rendezvous" in the module docs).
const READS_AT_ONCE: usize = 2;
/// The magic of this transport's records in a peer's stream ("Of" at
/// bytes 4..6, where a frame has its own magic).
const RECORD_MAGIC: u16 = 0x664f;
/// A record announcing a payload to read: `8` address, `16` key, `24`
/// length, `32` token (u64 LE each), `40…` the frame's header.
const ANNOUNCE: u8 = 1;
/// A record saying the read of the payload `8` (token) is done.
const DONE: u8 = 2;
/// Bytes of an announce before the frame's header.
const ANNOUNCE_HEAD: usize = 40;
/// The largest record: an announce with the largest signature.
const MAX_RECORD: usize = ANNOUNCE_HEAD + super::frame::HEADER + 9 * super::frame::MAX_RUNS;

/// Provider names that are not a fabric: `auto` prefers our own TCP to
/// them.
const NOT_FABRICS: [&str; 5] = ["tcp", "sockets", "udp", "shm", "net"];

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the transport asks of a provider: messages, and reads of remote
/// memory for the rendezvous if `rma`.
fn wanted(rma: bool) -> Wanted {
    let reads = if rma {
        sys::FI_RMA | sys::FI_READ | sys::FI_REMOTE_READ
    } else {
        0
    };
    Wanted {
        caps: (sys::FI_MSG | reads) as u64,
        msg_order: sys::FI_ORDER_SAS as u64,
    }
}

/// The first provider with reads of remote memory, else the first
/// without (large payloads then go as eager messages): its answer, and
/// whether it reads.
fn provider_info() -> Result<(Info, bool), OfiError> {
    match Info::get(wanted(true)) {
        Ok(info) if info.caps() & sys::FI_RMA as u64 != 0 => Ok((info, true)),
        with => match Info::get(wanted(false)) {
            Ok(info) => Ok((info, false)),
            Err(e) => Err(with.err().unwrap_or(e)),
        },
    }
}

/// The `FI_PROVIDER` this process sees, for messages.
fn provider_variable() -> String {
    match std::env::var("FI_PROVIDER") {
        Ok(v) if !v.is_empty() => format!("FI_PROVIDER={v:?}"),
        _ => "FI_PROVIDER unset (libfabric's choice)".to_string(),
    }
}

/// Whether a fabric provider (verbs, psm2, efa, cxi, ...: not `tcp`,
/// `sockets` or another that runs over the kernel's network stack) is up,
/// for `MYRIAD_TRANSPORT=auto`: its name if so. `MYRIAD_TEST_OFI_AS_FABRIC=1`
/// counts any provider as one: for tests of `auto`'s routing on hosts
/// without a fabric, never for jobs (our TCP beats libfabric's).
pub(crate) fn fabric_provider() -> Option<String> {
    let name = provider_info().ok()?.0.provider();
    let any = std::env::var("MYRIAD_TEST_OFI_AS_FABRIC").is_ok_and(|v| v.trim() == "1");
    (any || is_fabric(&name)).then_some(name)
}

impl super::route::Network for OfiTransport {
    /// The epoll set of the completion queue's wait fd, the control
    /// streams and the wake-up eventfd. Readable before a completion is
    /// read; `wait(Some(ZERO))` then re-arms the queue (`fi_trywait`).
    /// Progress that no descriptor announces (a send the provider refused
    /// for now, `FI_EAGAIN`) waits for the next poll: idle workers poll
    /// while [`busy`](Transport::busy), and the progress thread's waits
    /// are bounded.
    fn epoll_fd(&self) -> std::os::fd::RawFd {
        self.epoll.fd()
    }
}

/// Whether the provider `name` (`core;utility`, e.g. `verbs;ofi_rxm`)
/// drives a fabric rather than the kernel's network stack.
fn is_fabric(name: &str) -> bool {
    let core = name.split(';').next().unwrap_or_default();
    !core.is_empty() && !NOT_FABRICS.contains(&core)
}

/// An operation posted to the endpoint: its context (a `fi_context2` first,
/// for providers that use the caller's context) and its buffer, owned here
/// until its completion is read.
#[repr(C)]
struct Op {
    context: sys::fi_context2,
    what: What,
}

enum What {
    /// A receive buffer of [`MSG`] bytes.
    Recv(Box<[u8]>),
    /// A message to process `to`.
    Send { to: usize, message: Vec<u8> },
    /// A part of the read of process `from`'s payload (its input's
    /// [`Reading`] holds the memory).
    Read { from: usize },
}

impl Op {
    fn new(what: What) -> *mut Op {
        Box::into_raw(Box::new(Op {
            context: sys::fi_context2::default(),
            what,
        }))
    }
}

/// Hashes the addresses of live [`Op`]s (four lookups per message: a send
/// and a receive, each inserted and removed) with one multiplication
/// instead of SipHash, whose resistance to chosen keys these heap
/// addresses do not need.
#[derive(Default)]
struct AddressHasher(u64);

impl Hasher for AddressHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_usize(&mut self, n: usize) {
        // Fibonacci hashing: the high bits depend on every bit of the
        // address; folded down, so do the low bits (the table's index;
        // an address's own low bits are zero, as it is aligned).
        let x = (n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        self.0 = x ^ (x >> 32);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// The endpoint opened, its name not yet exchanged (see the module docs).
#[derive(Debug)]
pub(crate) struct Opened {
    ep: Endpoint,
    domain: Arc<Domain>,
    name: Vec<u8>,
    /// The provider reads remote memory.
    rma: bool,
}

/// One process's libfabric endpoint and control streams to the others.
#[derive(Debug)]
pub(crate) struct OfiTransport {
    this: ProcessId,
    /// `None` only while dropping.
    ep: Option<Endpoint>,
    domain: Arc<Domain>,
    /// Each process's address in the AV.
    addrs: Box<[sys::fi_addr_t]>,
    peers: Box<[Option<Peer>]>,
    /// What `wait` blocks on: the wake-up eventfd, the completion queue's
    /// wait fd and `controls`.
    epoll: Epoll,
    /// The control streams, looked at by polls every [`CONTROL_PERIOD`].
    controls: Epoll,
    /// A wait saw `controls` ready: the next poll looks at them.
    controls_ready: AtomicBool,
    /// When a poll looks at `controls` next, unless a wait saw them ready.
    control_looks: Periodic,
    wake: Doorbell,
    closed: AtomicBool,
    /// Operations posted and not completed (as addresses of `Op`s), freed
    /// at drop once the endpoint is closed.
    live: Mutex<HashSet<usize, BuildHasherDefault<AddressHasher>>>,
    /// Serialises reading the completion queue (poll and close); holds
    /// the buffer completions are read into (kept: a poll allocates
    /// nothing).
    progress: Mutex<Vec<Completion>>,
    /// What a `close` read that a later poll hands over.
    stash: Mutex<Vec<Incoming>>,
    provider: String,
    /// The provider reads remote memory (`FI_RMA`): large borrowed
    /// payloads go by rendezvous.
    rma: bool,
    /// The provider's `FI_MR_*` modes.
    mr_mode: u64,
    /// The largest read posted at once.
    max_read: usize,
    /// The key asked for the next registration (providers without
    /// `FI_MR_PROV_KEY` take the caller's).
    next_key: AtomicU64,
}

#[derive(Debug)]
struct Peer {
    stream: TcpStream,
    out: Mutex<Output>,
    input: Mutex<Input>,
}

#[derive(Debug, Default)]
struct Output {
    /// Messages not posted yet (`FI_EAGAIN`), in order.
    queue: VecDeque<Vec<u8>>,
    /// Messages numbered (queued or posted) for this peer.
    numbered: u64,
    /// Of them, not completed yet.
    in_flight: usize,
    /// A send failed: the peer is gone (or its fabric path broken).
    failed: Option<String>,
    /// When the first send failed.
    failed_at: Option<Instant>,
    /// Memory lent to the peer's reads (`send_borrowed`), by token,
    /// registered until its `DONE` record arrives.
    lent: HashMap<u64, Mr>,
}

#[derive(Debug, Default)]
struct Input {
    /// Stream bytes not yet cut into frames.
    bytes: Vec<u8>,
    /// Messages received from this peer and taken in order.
    received: u64,
    /// Messages that completed before one numbered lower (a provider may
    /// complete a large message after a later small one, though it
    /// matches them in order): held, by number, until their turn.
    early: std::collections::BTreeMap<u32, Vec<u8>>,
    /// Bytes read from the control stream.
    control: Vec<u8>,
    /// The peer closed after sending this many messages (and when its
    /// stream ended).
    closing: Option<(u64, Instant)>,
    /// Nothing more is taken from this peer (reported lost).
    ended: bool,
    /// A payload this process reads from the peer: frames after it wait
    /// in `bytes` until it is done.
    reading: Option<Reading>,
}

/// A payload being read from a peer's memory (`fi_read`).
#[derive(Debug)]
struct Reading {
    /// Where it goes.
    into: Target,
    /// Bytes.
    len: usize,
    /// Where it is.
    from: RemoteMemory,
    /// The sender's name for it, sent back in `DONE`.
    token: u64,
    /// Bytes whose reads are posted.
    posted: usize,
    /// Reads posted and not completed.
    outstanding: usize,
    /// A read failed: why.
    failed: Option<String>,
    /// The place was withdrawn (or the peer ended): post nothing more,
    /// drop the data once the posted reads completed.
    dropped: bool,
    /// The destination registered, for providers of `FI_MR_LOCAL` mode.
    local: Option<Mr>,
}

/// Where a payload read goes.
#[derive(Debug)]
enum Target {
    /// The frame's own buffer.
    Own { head: Vec<u8>, payload: Vec<u8> },
    /// The place the sink gave (its memory is the transport's until the
    /// frame is handed over or the place withdrawn).
    Placed { frame: Frame, place: Place },
}

impl Reading {
    /// The destination's first byte.
    fn base(&mut self) -> *mut u8 {
        match &mut self.into {
            Target::Own { payload, .. } => payload.as_mut_ptr(),
            Target::Placed { place, .. } => place.rest(0).0,
        }
    }

    /// No read of it is in flight and none will be posted.
    fn settled(&self) -> bool {
        self.outstanding == 0 && (self.posted == self.len || self.failed.is_some() || self.dropped)
    }
}

impl OfiTransport {
    /// Opens this process's endpoint: the first provider libfabric offers
    /// for RDM endpoints with messages, reads and send-after-send order
    /// (`FI_PROVIDER` filters them).
    ///
    /// # Errors
    ///
    /// No provider answers (naming `FI_PROVIDER` and `fi_info`), or opening
    /// one of its objects fails.
    pub(crate) fn open() -> Result<Opened, Error> {
        let (info, rma) = provider_info().map_err(|e| {
            Error::unsupported(format!(
                "MYRIAD_TRANSPORT=ofi: no libfabric provider offers reliable datagram \
                 endpoints with messages, reads and ordered sends ({e}; {}); `fi_info -l` \
                 lists the providers this host has, `fi_info -p NAME -t FI_EP_RDM` what one \
                 offers; set FI_PROVIDER to one of them (e.g. FI_PROVIDER=tcp) or use \
                 MYRIAD_TRANSPORT=tcp",
                provider_variable()
            ))
        })?;
        let provider = info.provider();
        if !rma {
            say!(
                "[myriad] note: libfabric's {provider} provider cannot read remote memory \
                 (no FI_RMA): large messages go as eager messages, copied on both sides"
            );
        }
        let fail = |e: OfiError| {
            Error::config(format!(
                "MYRIAD_TRANSPORT=ofi: setting up libfabric's {provider} provider: {e}"
            ))
        };
        let fabric = Fabric::open(info).map_err(fail)?;
        let domain = Domain::open(&fabric).map_err(fail)?;
        let cq = Cq::open(&domain, CQ_SIZE).map_err(fail)?;
        let av = Av::open(&domain, 64).map_err(fail)?;
        let ep = Endpoint::open(&domain, &cq, &av).map_err(fail)?;
        let name = ep.name().map_err(fail)?;
        Ok(Opened {
            ep,
            domain,
            name,
            rma,
        })
    }
}

impl Opened {
    /// The endpoint's name in hex (for the key-value space: a few dozen
    /// bytes for most providers).
    pub(crate) fn name_hex(&self) -> String {
        self.name.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The provider's name.
    pub(crate) fn provider(&self) -> String {
        self.domain.fabric().info().provider()
    }

    /// The transport of process `this`: `names[p]` is process `p`'s
    /// [`name_hex`](Self::name_hex), `streams[p]` its authenticated control
    /// stream (`None` for `this`).
    ///
    /// # Errors
    ///
    /// A name that is not hex or that the AV refuses, streams that do not
    /// match the names, or epoll or the receives cannot be set up.
    pub(crate) fn join(
        self,
        this: ProcessId,
        streams: Vec<Option<TcpStream>>,
        names: &[String],
    ) -> Result<OfiTransport, Error> {
        let provider = self.provider();
        let fail =
            |what: String| Error::config(format!("MYRIAD_TRANSPORT=ofi ({provider}): {what}"));
        if names.len() != streams.len() || this.get() as usize >= names.len() {
            return Err(fail(format!(
                "{} names and {} streams for process {this}",
                names.len(),
                streams.len()
            )));
        }
        let mut addrs = Vec::with_capacity(names.len());
        for (p, hex) in names.iter().enumerate() {
            let name = unhex(hex).ok_or_else(|| {
                fail(format!(
                    "process {p} published {hex:?}, which is not an endpoint name"
                ))
            })?;
            let addr = self
                .ep
                .av()
                .insert(&name)
                .map_err(|e| fail(format!("the address of process {p}: {e}")))?;
            addrs.push(addr);
        }
        let io = |e: io::Error| fail(e.to_string());
        let epoll = Epoll::new().map_err(io)?;
        let controls = Epoll::new().map_err(io)?;
        epoll
            .add(controls.fd(), libc::EPOLLIN as u32, CONTROLS)
            .map_err(io)?;
        let wake = Doorbell::new().map_err(io)?;
        epoll
            .add(wake.fd(), libc::EPOLLIN as u32, WAKE)
            .map_err(io)?;
        if let Some(fd) = self.ep.cq().wait_fd() {
            epoll.add(fd, libc::EPOLLIN as u32, CQ).map_err(io)?;
        }
        let mut peers = Vec::with_capacity(streams.len());
        for (p, stream) in streams.into_iter().enumerate() {
            match (p == this.get() as usize, stream) {
                (true, None) => peers.push(None),
                (true, Some(_)) => return Err(fail(format!("a stream to process {this} itself"))),
                (false, None) => return Err(fail(format!("no control stream to process {p}"))),
                (false, Some(stream)) => {
                    stream.set_nonblocking(true).map_err(io)?;
                    controls
                        .add(stream.as_raw_fd(), libc::EPOLLIN as u32, p as u64)
                        .map_err(io)?;
                    peers.push(Some(Peer {
                        stream,
                        out: Mutex::default(),
                        input: Mutex::default(),
                    }));
                }
            }
        }
        let info = self.domain.fabric().info();
        let (mr_mode, max_msg) = (info.mr_mode(), info.max_msg_size());
        let transport = OfiTransport {
            rma: self.rma,
            mr_mode,
            // A provider that gives no size reads at most 1 GiB at once.
            // A provider that gives no size reads a chunk at once.
            max_read: if max_msg == 0 {
                READ_CHUNK
            } else {
                max_msg.min(READ_CHUNK)
            },
            next_key: AtomicU64::new(1),
            this,
            ep: Some(self.ep),
            domain: self.domain,
            addrs: addrs.into(),
            peers: peers.into(),
            epoll,
            controls,
            controls_ready: AtomicBool::new(false),
            control_looks: Periodic::new(CONTROL_EVERY, CONTROL_PERIOD),
            wake,
            closed: AtomicBool::new(false),
            live: Mutex::default(),
            progress: Mutex::new(Vec::with_capacity(BATCH)),
            stash: Mutex::default(),
            provider: provider.clone(),
        };
        for _ in 0..RECVS {
            let op = Op::new(What::Recv(vec![0u8; MSG].into_boxed_slice()));
            transport
                .post_recv(op)
                .map_err(|e| fail(format!("posting the receive buffers: {e}")))?;
        }
        Ok(transport)
    }
}

/// The transports of a job whose processes are threads of this one,
/// `mesh[p]` process `p`'s control streams (`tcp::loopback_mesh`): for
/// tests of the multi-process behaviour over libfabric.
///
/// # Errors
///
/// As [`OfiTransport::open`] and [`Opened::join`].
pub(crate) fn join_in_process(
    mesh: Vec<Vec<Option<TcpStream>>>,
) -> Result<Vec<Arc<dyn Transport>>, Error> {
    let opened = mesh
        .iter()
        .map(|_| OfiTransport::open())
        .collect::<Result<Vec<_>, _>>()?;
    let names: Vec<String> = opened.iter().map(Opened::name_hex).collect();
    opened
        .into_iter()
        .zip(mesh)
        .enumerate()
        .map(|(p, (o, streams))| {
            o.join(ProcessId::new(p as u32), streams, &names)
                .map(|t| Arc::new(t) as Arc<dyn Transport>)
        })
        .collect()
}

fn unhex(hex: &str) -> Option<Vec<u8>> {
    if hex.len() % 2 != 0 || hex.is_empty() {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Cuts `bytes` (frame bytes, `head` then `payload`) into messages from
/// process `from`.
fn messages(from: ProcessId, first: u64, head: &[u8], payload: &[u8]) -> Vec<Vec<u8>> {
    let total = head.len() + payload.len();
    let room = MSG - HEADER;
    let mut out = Vec::with_capacity(total.div_ceil(room));
    let mut parts = [head, payload];
    let mut at = 0;
    while at < total {
        let n = room.min(total - at);
        let mut m = Vec::with_capacity(HEADER + n);
        m.extend_from_slice(&from.get().to_le_bytes());
        m.extend_from_slice(&((first + out.len() as u64) as u32).to_le_bytes());
        let mut want = n;
        for part in &mut parts {
            let take = want.min(part.len());
            m.extend_from_slice(&part[..take]);
            *part = &part[take..];
            want -= take;
        }
        at += n;
        out.push(m);
    }
    out
}

impl OfiTransport {
    fn ep(&self) -> &Endpoint {
        self.ep.as_ref().expect("the endpoint is open until drop")
    }

    fn post_recv(&self, op: *mut Op) -> Result<(), OfiError> {
        // SAFETY: `op` is a live Op from `Op::new` holding a receive
        // buffer; it stays allocated (tracked in `live`) until its
        // completion is read or the endpoint is closed.
        let (buf, len) = unsafe {
            match &mut (*op).what {
                What::Recv(buf) => (buf.as_mut_ptr(), buf.len()),
                What::Send { .. } | What::Read { .. } => unreachable!("a receive"),
            }
        };
        lock(&self.live).insert(op as usize);
        // SAFETY: as above: buffer and context stay valid until the
        // completion.
        let posted = unsafe { self.ep().recv(buf, len, op.cast::<c_void>()) };
        if posted.is_err() {
            lock(&self.live).remove(&(op as usize));
            // SAFETY: not posted: the Op is ours again, freed once.
            drop(unsafe { Box::from_raw(op) });
        }
        posted
    }

    /// Posts what `out` queues for process `p`, in order, until the
    /// provider says `FI_EAGAIN`.
    fn flush(&self, p: usize, out: &mut Output) {
        while let Some(message) = out.queue.pop_front() {
            let op = Op::new(What::Send { to: p, message });
            // SAFETY: `op` is live (from `Op::new`).
            let (buf, len) = unsafe {
                match &(*op).what {
                    What::Send { message, .. } => (message.as_ptr(), message.len()),
                    What::Recv(_) | What::Read { .. } => unreachable!("a send"),
                }
            };
            lock(&self.live).insert(op as usize);
            // SAFETY: the message and the context stay allocated (the Op,
            // tracked in `live`) and unchanged until the completion.
            let posted = unsafe { self.ep().send(buf, len, self.addrs[p], op.cast()) };
            match posted {
                Ok(()) => {
                    out.in_flight += 1;
                }
                Err(e) => {
                    lock(&self.live).remove(&(op as usize));
                    // SAFETY: not posted: the Op is ours again.
                    let op = unsafe { Box::from_raw(op) };
                    let What::Send { message, .. } = op.what else {
                        unreachable!("a send")
                    };
                    if e.is_again() {
                        out.queue.push_front(message);
                    } else {
                        out.failed = Some(e.to_string());
                        out.queue.clear();
                    }
                    return;
                }
            }
        }
    }

    /// Queues the frame made of `head` and `payload` for `to` and posts
    /// what the provider takes.
    fn enqueue(&self, to: ProcessId, head: &[u8], payload: &[u8]) -> Result<(), SendError> {
        if payload.len() > MAX_PAYLOAD {
            return Err(SendError::TooLarge(payload.len()));
        }
        if head.len() + payload.len() <= MSG - HEADER {
            let mut message = Vec::with_capacity(HEADER + head.len() + payload.len());
            message.extend_from_slice(&[0; HEADER]);
            message.extend_from_slice(head);
            message.extend_from_slice(payload);
            return self.enqueue_message(to, message);
        }
        self.queue(to, |this, out| {
            let messages = messages(this, out.numbered, head, payload);
            out.numbered += messages.len() as u64;
            out.queue.extend(messages);
        })
    }

    /// Queues one message for `to` whose first [`HEADER`] bytes are left
    /// for its header (written here: the sender and the message's number)
    /// and posts what the provider takes.
    fn enqueue_message(&self, to: ProcessId, mut message: Vec<u8>) -> Result<(), SendError> {
        self.queue(to, move |this, out| {
            message[..4].copy_from_slice(&this.get().to_le_bytes());
            message[4..HEADER].copy_from_slice(&(out.numbered as u32).to_le_bytes());
            out.numbered += 1;
            out.queue.push_back(message);
        })
    }

    /// Has `add` number and queue messages for `to` (given this process
    /// and the peer's output) and posts what the provider takes: the queue
    /// is posted here if it was empty, else by the progress that posts its
    /// head.
    fn queue(
        &self,
        to: ProcessId,
        add: impl FnOnce(ProcessId, &mut Output),
    ) -> Result<(), SendError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(SendError::Closed);
        }
        let p = to.get() as usize;
        let peer = self
            .peers
            .get(p)
            .and_then(Option::as_ref)
            .ok_or_else(|| SendError::Lost(to, "no such peer".into()))?;
        let mut out = lock(&peer.out);
        if let Some(why) = &out.failed {
            return Err(SendError::Lost(to, why.clone()));
        }
        let idle = out.queue.is_empty();
        add(self.this, &mut out);
        if idle {
            self.flush(p, &mut out);
        }
        match &out.failed {
            Some(why) => Err(SendError::Lost(to, why.clone())),
            None => Ok(()),
        }
    }

    /// Ends peer `p`: nothing more is taken from it; hands `Lost` once.
    fn end(&self, p: usize, input: &mut Input, why: String, sink: &mut dyn Sink) -> usize {
        if input.ended {
            return 0;
        }
        input.ended = true;
        input.bytes = Vec::new();
        input.early.clear();
        // Reads in flight keep their memory until they complete.
        if let Some(r) = &mut input.reading {
            r.dropped = true;
        }
        if input.reading.as_ref().is_some_and(Reading::settled) {
            input.reading = None;
        }
        if let Some(Some(peer)) = self.peers.get(p) {
            let _ = self.controls.delete(peer.stream.as_raw_fd());
        }
        sink.take(Incoming::Lost(ProcessId::new(p as u32), why));
        1
    }

    /// A peer that closed is reported once its last message arrived (or
    /// after [`LAST_MESSAGES`]).
    fn check_closing(&self, p: usize, input: &mut Input, sink: &mut dyn Sink) -> usize {
        if input.reading.is_some() {
            // Its end comes after the payload being read.
            return 0;
        }
        match input.closing {
            Some((count, _)) if input.received >= count => {
                self.end(p, input, "the connection was closed".into(), sink)
            }
            Some((count, since)) if since.elapsed() > LAST_MESSAGES => {
                let why = format!(
                    "it closed its connection, but {} of the {count} messages it sent never \
                     arrived",
                    count - input.received
                );
                self.end(p, input, why, sink)
            }
            _ => 0,
        }
    }

    /// Handles a received message (its bytes, header included).
    fn received(&self, message: &[u8], sink: &mut dyn Sink) -> usize {
        let from = message
            .get(..4)
            .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize);
        let peer = from.and_then(|p| self.peers.get(p)?.as_ref().map(|peer| (p, peer)));
        let Some((p, peer)) = peer else {
            say!(
                "[myriad] process {}: a libfabric message from no process of this job \
                 ({} bytes) dropped",
                self.this,
                message.len()
            );
            return 0;
        };
        let mut input = lock(&peer.input);
        if input.ended || message.len() < HEADER {
            return 0;
        }
        let number = u32::from_le_bytes(message[4..8].try_into().expect("4 bytes"));
        if number != input.received as u32 {
            input.early.insert(number, message[HEADER..].to_vec());
            return 0;
        }
        input.received += 1;
        input.bytes.extend_from_slice(&message[HEADER..]);
        loop {
            let number = input.received as u32;
            let Some(next) = input.early.remove(&number) else {
                break;
            };
            input.received += 1;
            input.bytes.extend_from_slice(&next);
        }
        self.cut(p, &mut input, sink)
    }

    /// Hands the frames and records at the start of the input of `p` to
    /// `sink` and removes them; stops at a payload to read (the frames
    /// behind it wait for it). Ends the peer on bytes that are neither.
    fn cut(&self, p: usize, input: &mut Input, sink: &mut dyn Sink) -> usize {
        let mut handed = 0;
        let mut at = 0;
        let from = ProcessId::new(p as u32);
        let bad = loop {
            if input.reading.is_some() || input.ended {
                break None;
            }
            let rest = &input.bytes[at..];
            if rest.len() >= 6 && u16::from_le_bytes([rest[4], rest[5]]) == RECORD_MAGIC {
                if rest.len() < 8 {
                    break None;
                }
                let len = u32::from_le_bytes(rest[..4].try_into().expect("4 bytes")) as usize + 4;
                if !(16..=MAX_RECORD).contains(&len) {
                    break Some(format!("a record of {len} bytes"));
                }
                if rest.len() < len {
                    break None;
                }
                let record = rest[..len].to_vec();
                // Removed first: handling it may cut what follows.
                input.bytes.drain(..at + len);
                at = 0;
                match self.record(p, input, &record, sink) {
                    Ok(n) => handed += n,
                    Err(why) => break Some(why),
                }
                continue;
            }
            match frame_len(rest) {
                Ok(Some(len)) if rest.len() >= len => match Frame::decode(&rest[..len]) {
                    Ok(frame) => {
                        handed += 1;
                        sink.take(Incoming::Frame(from, frame));
                        at += len;
                    }
                    Err(e) => break Some(format!("a bad frame: {e}")),
                },
                Ok(_) => break None,
                Err(e) => break Some(format!("a bad frame: {e}")),
            }
        };
        if !input.ended {
            input.bytes.drain(..at);
        }
        if let Some(why) = bad {
            return handed + self.end(p, input, why, sink);
        }
        handed + self.check_closing(p, input, sink)
    }

    /// Handles one of this transport's records from `p` (`record`, its
    /// length word included): a payload to read, or a read of ours done.
    fn record(
        &self,
        p: usize,
        input: &mut Input,
        record: &[u8],
        sink: &mut dyn Sink,
    ) -> Result<usize, String> {
        let word = |i: usize| u64::from_le_bytes(record[i..i + 8].try_into().expect("8 bytes"));
        let from = ProcessId::new(p as u32);
        match record[6] {
            DONE => {
                let token = word(8);
                let Some(Some(peer)) = self.peers.get(p) else {
                    return Ok(0);
                };
                // Deregistered: the peer read it all.
                let lent = lock(&peer.out).lent.remove(&token);
                Ok(match lent {
                    Some(_) => {
                        sink.take(Incoming::Sent(from, token));
                        1
                    }
                    // Withdrawn meanwhile.
                    None => 0,
                })
            }
            ANNOUNCE if record.len() >= ANNOUNCE_HEAD + super::frame::HEADER => {
                let (addr, key, len, token) = (word(8), word(16), word(24) as usize, word(32));
                let head = &record[ANNOUNCE_HEAD..];
                if len > MAX_PAYLOAD || frame_len(head).ok().flatten() != Some(head.len() + len) {
                    return Err("a bad announce record".into());
                }
                if !self.rma {
                    return Err(
                        "a payload to read, but this process's provider cannot read \
                                remote memory"
                            .into(),
                    );
                }
                let into = match super::place_large(sink, from, head, len, &[]) {
                    Some((frame, place)) => Target::Placed { frame, place },
                    None => Target::Own {
                        head: head.to_vec(),
                        payload: vec![0u8; len],
                    },
                };
                let mut reading = Reading {
                    into,
                    len,
                    from: RemoteMemory {
                        peer: self.addrs[p],
                        addr,
                        key,
                    },
                    token,
                    posted: 0,
                    outstanding: 0,
                    failed: None,
                    dropped: false,
                    local: None,
                };
                if self.mr_mode & sys::FI_MR_LOCAL as u64 != 0 && len > 0 {
                    let base = reading.base();
                    let key = self.next_key.fetch_add(1, Ordering::Relaxed);
                    // SAFETY: the destination (the frame's own buffer, or
                    // the place, which `withdraw_place` does not give back
                    // while reads are in flight) outlives the registration,
                    // dropped with the reading.
                    let mr =
                        unsafe { Mr::register(&self.domain, base, len, sys::FI_READ as u64, key) };
                    reading.local = Some(mr.map_err(|e| {
                        format!("registering {len} bytes to read its memory into: {e}")
                    })?);
                }
                self.post_reads(p, &mut reading);
                input.reading = Some(reading);
                Ok(self.settle(p, input, sink))
            }
            other => Err(format!("a record of unknown type {other}")),
        }
    }

    /// Posts the reads of `r` not posted yet (from process `p`), each at
    /// most [`max_read`](Self::max_read) bytes, until [`READS_AT_ONCE`]
    /// are in flight (a completion posts the next) or the provider says
    /// `FI_EAGAIN` (the next progress posts the rest).
    fn post_reads(&self, p: usize, r: &mut Reading) {
        let desc = r.local.as_ref().map_or(std::ptr::null_mut(), Mr::desc);
        let base = r.base();
        while r.posted < r.len && r.failed.is_none() && !r.dropped && r.outstanding < READS_AT_ONCE
        {
            let n = self.max_read.min(r.len - r.posted);
            let op = Op::new(What::Read { from: p });
            lock(&self.live).insert(op as usize);
            let from = RemoteMemory {
                addr: r.from.addr.wrapping_add(r.posted as u64),
                ..r.from
            };
            // SAFETY: `base + posted .. + n` is inside the destination,
            // which stays valid for writes until the read completes (the
            // frame's own buffer lives in the reading, kept until its reads
            // completed; a place is not given back before either); the
            // context is a live Op.
            let posted = unsafe {
                self.ep()
                    .read(base.wrapping_add(r.posted), n, desc, from, op.cast())
            };
            match posted {
                Ok(()) => {
                    r.posted += n;
                    r.outstanding += 1;
                }
                Err(e) => {
                    lock(&self.live).remove(&(op as usize));
                    // SAFETY: not posted: the Op is ours again.
                    drop(unsafe { Box::from_raw(op) });
                    if !e.is_again() {
                        r.failed = Some(format!(
                            "reading {} bytes of its memory ({}) failed: {e}",
                            r.len, self.provider
                        ));
                    }
                    return;
                }
            }
        }
    }

    /// Finishes the read from `p` once no read of it is in flight: hands
    /// its frame (or ends the peer if a read failed), tells the sender it
    /// is done, and cuts the frames that waited behind it.
    fn settle(&self, p: usize, input: &mut Input, sink: &mut dyn Sink) -> usize {
        if !input.reading.as_ref().is_some_and(Reading::settled) {
            return 0;
        }
        let r = input.reading.take().expect("a reading");
        if input.ended {
            return 0;
        }
        if let Some(why) = r.failed {
            return self.end(p, input, why, sink);
        }
        let from = ProcessId::new(p as u32);
        let incoming = match r.into {
            Target::Own { head, payload } => match Frame::decode_parts(&head, payload) {
                Ok(frame) => Incoming::Frame(from, frame),
                Err(e) => return self.end(p, input, format!("a bad frame: {e}"), sink),
            },
            // Also when the place was withdrawn (the rest was dropped).
            Target::Placed { frame, .. } => Incoming::Placed(from, frame, r.len),
        };
        sink.take(incoming);
        let mut done = Vec::with_capacity(16);
        done.extend_from_slice(&12u32.to_le_bytes());
        done.extend_from_slice(&RECORD_MAGIC.to_le_bytes());
        done.extend_from_slice(&[DONE, 0]);
        done.extend_from_slice(&r.token.to_le_bytes());
        // A failure here shows as the peer's loss.
        let _ = self.enqueue(from, &done, &[]);
        1 + self.cut(p, input, sink)
    }

    /// Runs this transport's progress for a caller that waits for it (a
    /// withdrawal), what it finds kept for the next poll; if a poll is
    /// running, lets it.
    fn drive(&self) {
        let mut guard = match self.progress.try_lock() {
            Ok(guard) => guard,
            Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => {
                std::thread::sleep(Duration::from_micros(20));
                return;
            }
        };
        let mut found = Vec::new();
        self.progress_locked(&mut guard, &mut |i| found.push(i));
        lock(&self.stash).extend(found);
        drop(guard);
    }

    /// Reads what the control stream of `p` carries: the message count
    /// of a closing peer, or its end.
    fn control(&self, p: usize, sink: &mut dyn Sink) -> usize {
        let Some(Some(peer)) = self.peers.get(p) else {
            return 0;
        };
        let mut input = lock(&peer.input);
        if input.ended || input.closing.is_some() {
            return 0;
        }
        let mut buf = [0u8; 64];
        loop {
            match (&peer.stream).read(&mut buf) {
                Ok(0) => {
                    if input.control.len() != 8 {
                        let why = "the connection was closed".to_string();
                        return self.end(p, &mut input, why, sink);
                    }
                    let count = u64::from_le_bytes(input.control[..8].try_into().expect("8"));
                    input.closing = Some((count, Instant::now()));
                    let _ = self.controls.delete(peer.stream.as_raw_fd());
                    return self.check_closing(p, &mut input, sink);
                }
                Ok(n) => {
                    input.control.extend_from_slice(&buf[..n]);
                    if input.control.len() > 8 {
                        let why = "garbage on its control connection".to_string();
                        return self.end(p, &mut input, why, sink);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return 0,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return self.end(p, &mut input, e.to_string(), sink),
            }
        }
    }

    /// Reads the completion queue (into `done`, the buffer of
    /// `self.progress`, which the caller holds) and the control streams,
    /// handing what arrived to `sink`; posts queued messages and reads.
    fn progress_locked(&self, done: &mut Vec<Completion>, sink: &mut dyn Sink) -> usize {
        let mut handed = 0;
        loop {
            done.clear();
            if let Err(e) = self.ep().cq().read(done, BATCH) {
                // The queue itself failed: every peer is unreachable.
                for (p, peer) in self.peers.iter().enumerate() {
                    if let Some(peer) = peer {
                        let mut input = lock(&peer.input);
                        handed += self.end(p, &mut input, format!("libfabric: {e}"), sink);
                    }
                }
                return handed;
            }
            for c in done.iter() {
                handed += self.completed(c, sink);
            }
            if done.len() < BATCH {
                break;
            }
        }
        // Control streams that epoll reports readable, when due.
        const BATCH: usize = 16;
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; BATCH];
        while self.controls_due() {
            // A zero timeout does not block.
            let ready = self.controls.ready(&mut events, 0);
            for event in ready {
                if event.u64 < self.peers.len() as u64 {
                    handed += self.control(event.u64 as usize, sink);
                }
            }
            if ready.len() < BATCH {
                break;
            }
            self.controls_ready.store(true, Ordering::Relaxed);
        }
        for (p, peer) in self.peers.iter().enumerate() {
            let Some(peer) = peer else { continue };
            let mut out = lock(&peer.out);
            if !out.queue.is_empty() {
                self.flush(p, &mut out);
            }
            let failed = out
                .failed_at
                .filter(|at| at.elapsed() > LAST_MESSAGES)
                .and(out.failed.clone());
            drop(out);
            let mut input = lock(&peer.input);
            if let Some(r) = &mut input.reading {
                // What `FI_EAGAIN` left, or a reading dropped meanwhile.
                if r.posted < r.len && !r.dropped && r.failed.is_none() {
                    self.post_reads(p, r);
                }
                handed += self.settle(p, &mut input, sink);
            }
            if input.closing.is_some() {
                handed += self.check_closing(p, &mut input, sink);
            } else if let Some(why) = failed {
                // Sends fail but the control stream stays open: the
                // fabric path to the peer is broken.
                handed += self.end(p, &mut input, why, sink);
            }
        }
        handed
    }

    /// Whether this progress should look at the control streams: a wait
    /// saw them ready, or [`CONTROL_PERIOD`] passed (the clock read every
    /// [`CONTROL_EVERY`]th poll).
    fn controls_due(&self) -> bool {
        if self.controls_ready.load(Ordering::Relaxed)
            && self.controls_ready.swap(false, Ordering::Relaxed)
        {
            return true;
        }
        self.control_looks.due()
    }

    /// Handles one completion.
    fn completed(&self, c: &Completion, sink: &mut dyn Sink) -> usize {
        let op = c.context as *mut Op;
        if op.is_null() || !lock(&self.live).remove(&(op as usize)) {
            return 0;
        }
        // SAFETY: `op` was live (posted by this transport, removed from
        // `live` just now): its completion is read once, so it is ours.
        let op = unsafe { Box::from_raw(op) };
        match (&op.what, &c.error) {
            (What::Send { to, .. }, error) => {
                let Some(Some(peer)) = self.peers.get(*to) else {
                    return 0;
                };
                let mut out = lock(&peer.out);
                out.in_flight = out.in_flight.saturating_sub(1);
                let Some(error) = error else { return 0 };
                // Not reported here: the peer may have said goodbye and
                // closed, its last frames and count still on the way (the
                // reading side decides, as for TCP; `p2p::remote`'s
                // `send_failed`). A peer whose control stream stays open
                // is reported after `LAST_MESSAGES`.
                if out.failed.is_none() {
                    let why = format!("a libfabric send ({}) failed: {error}", self.provider);
                    out.failed = Some(why);
                    out.failed_at = Some(Instant::now());
                }
                out.queue.clear();
                0
            }
            (What::Read { from }, error) => {
                let Some(Some(peer)) = self.peers.get(*from) else {
                    return 0;
                };
                let mut input = lock(&peer.input);
                let Some(r) = &mut input.reading else {
                    return 0;
                };
                r.outstanding = r.outstanding.saturating_sub(1);
                if let (Some(error), None) = (error, &r.failed) {
                    r.failed = Some(format!(
                        "reading {} bytes of its memory ({}) failed: {error}",
                        r.len, self.provider
                    ));
                }
                if r.posted < r.len && !r.dropped && r.failed.is_none() {
                    self.post_reads(*from, r);
                }
                self.settle(*from, &mut input, sink)
            }
            (What::Recv(buf), None) => {
                let handed = self.received(&buf[..c.len.min(buf.len())], sink);
                self.repost(op);
                handed
            }
            (What::Recv(buf), Some(error)) => {
                if error.code == sys::FI_ECANCELED as i32 {
                    return 0;
                }
                // A message that did not fit (or failed otherwise): its
                // sender's stream is broken.
                let from = buf
                    .get(..4)
                    .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize);
                let mut handed = 0;
                if let Some((p, Some(peer))) = from.and_then(|p| Some((p, self.peers.get(p)?))) {
                    let mut input = lock(&peer.input);
                    handed = self.end(
                        p,
                        &mut input,
                        format!("a libfabric receive failed: {error}"),
                        sink,
                    );
                }
                self.repost(op);
                handed
            }
        }
    }

    fn repost(&self, op: Box<Op>) {
        if self.closed.load(Ordering::Acquire) {
            return;
        }
        let op = Box::into_raw(op);
        // SAFETY: a fresh context for the next receive.
        unsafe { (*op).context = sys::fi_context2::default() };
        if let Err(e) = self.post_recv(op) {
            say!(
                "[myriad] process {}: re-posting a libfabric receive: {e}",
                self.this
            );
        }
    }

    /// Output to a peer not lost waits or is in flight (messages, or
    /// memory lent to its reads).
    fn pending_output(&self) -> bool {
        self.peers.iter().flatten().any(|peer| {
            // A lost peer takes nothing more: its output is not waited for.
            let lost = peer.input.try_lock().is_ok_and(|input| input.ended);
            let out = peer
                .out
                .try_lock()
                .map(|out| !out.queue.is_empty() || out.in_flight > 0 || !out.lent.is_empty());
            !lost && out.unwrap_or(true)
        })
    }

    /// Output that no completion will announce waits: messages or reads
    /// the provider refused for now (`FI_EAGAIN`), posted by a later
    /// progress. (A send or read in flight completes through the queue,
    /// whose wait fd wakes a `wait`; the completion of a read posts the
    /// payload's next.)
    fn unannounced_output(&self) -> bool {
        self.peers.iter().flatten().any(|peer| {
            let queued = peer
                .out
                .try_lock()
                .map_or(true, |out| !out.queue.is_empty());
            let reads = peer.input.try_lock().map_or(true, |input| {
                input.reading.as_ref().is_some_and(|r| {
                    r.posted < r.len && r.outstanding == 0 && !r.dropped && r.failed.is_none()
                })
            });
            queued || reads
        })
    }

    /// A payload is being read from a peer.
    fn reading(&self) -> bool {
        self.peers.iter().flatten().any(|peer| {
            peer.input
                .try_lock()
                .map_or(true, |input| input.reading.is_some())
        })
    }
}

impl Transport for OfiTransport {
    fn this(&self) -> ProcessId {
        self.this
    }

    fn processes(&self) -> u32 {
        self.peers.len() as u32
    }

    fn send(&self, to: ProcessId, frame: &Frame) -> Result<(), SendError> {
        let len = frame.encoded_len();
        if len <= MSG - HEADER {
            // One message: the frame encoded right behind its header.
            let mut message = Vec::with_capacity(HEADER + len);
            message.extend_from_slice(&[0; HEADER]);
            frame.encode(&mut message);
            return self.enqueue_message(to, message);
        }
        let mut head = Vec::with_capacity(len - frame.payload.len());
        frame.encode_head(&mut head);
        self.enqueue(to, &head, &frame.payload)
    }

    fn send_borrowed(
        &self,
        to: ProcessId,
        frame: Frame,
        data: Borrowed,
        token: u64,
    ) -> Result<bool, SendError> {
        let bytes = data.bytes();
        let len = bytes.len();
        let mut head = Vec::new();
        frame.encode_head_for(len, &mut head);
        if !self.rma || len < RENDEZVOUS {
            // Eager, copied into the messages.
            return self.enqueue(to, &head, bytes).map(|()| true);
        }
        if self.closed.load(Ordering::Acquire) {
            return Err(SendError::Closed);
        }
        if len > MAX_PAYLOAD {
            return Err(SendError::TooLarge(len));
        }
        let peer = self
            .peers
            .get(to.get() as usize)
            .and_then(Option::as_ref)
            .ok_or_else(|| SendError::Lost(to, "no such peer".into()))?;
        let key = self.next_key.fetch_add(1, Ordering::Relaxed);
        // SAFETY: `Borrowed`'s contract: the memory stays valid and
        // unchanged until `Sent` is handed or `withdraw_send` returns; the
        // registration is dropped before either (`DONE`, `withdraw_send`).
        let mr = unsafe {
            Mr::register(
                &self.domain,
                bytes.as_ptr(),
                len,
                sys::FI_REMOTE_READ as u64,
                key,
            )
        };
        let mr = match mr {
            Ok(mr) => mr,
            Err(e) => {
                say!(
                    "[myriad] process {}: registering {len} bytes for libfabric's {} failed \
                     ({e}): sent as eager messages",
                    self.this,
                    self.provider
                );
                return self.enqueue(to, &head, bytes).map(|()| true);
            }
        };
        // FI_MR_VIRT_ADDR: the peer reads at our address; else at offsets.
        let addr = if self.mr_mode & sys::FI_MR_VIRT_ADDR as u64 != 0 {
            bytes.as_ptr() as u64
        } else {
            0
        };
        let mut record = Vec::with_capacity(ANNOUNCE_HEAD + head.len());
        record.extend_from_slice(&[0; 4]);
        record.extend_from_slice(&RECORD_MAGIC.to_le_bytes());
        record.extend_from_slice(&[ANNOUNCE, 0]);
        for word in [addr, mr.key(), len as u64, token] {
            record.extend_from_slice(&word.to_le_bytes());
        }
        record.extend_from_slice(&head);
        let rest = (record.len() - 4) as u32;
        record[..4].copy_from_slice(&rest.to_le_bytes());
        // Lent before the announce leaves: its `DONE` may come at once.
        lock(&peer.out).lent.insert(token, mr);
        if let Err(e) = self.enqueue(to, &record, &[]) {
            drop(lock(&peer.out).lent.remove(&token));
            return Err(e);
        }
        Ok(false)
    }

    /// Waits (driving progress) until the peer read the memory and said
    /// so, it is lost, or [`LAST_MESSAGES`] passed; then deregisters it.
    fn withdraw_send(&self, to: ProcessId, token: u64) {
        let Some(Some(peer)) = self.peers.get(to.get() as usize) else {
            return;
        };
        let deadline = Instant::now() + LAST_MESSAGES;
        loop {
            if !lock(&peer.out).lent.contains_key(&token) {
                return;
            }
            let lost = lock(&peer.input).ended;
            let failed = lock(&peer.out).failed.is_some();
            if lost || failed || Instant::now() > deadline {
                break;
            }
            self.drive();
        }
        drop(lock(&peer.out).lent.remove(&token));
    }

    /// Waits (driving progress) until no read into the place is in
    /// flight: a read the provider accepted cannot be called back.
    fn withdraw_place(&self, from: ProcessId, id: u64) {
        let Some(Some(peer)) = self.peers.get(from.get() as usize) else {
            return;
        };
        loop {
            {
                let mut input = lock(&peer.input);
                let Some(r) = &mut input.reading else {
                    return;
                };
                if !matches!(&r.into, Target::Placed { frame, .. } if frame.id == id) {
                    return;
                }
                r.dropped = true;
                if r.outstanding == 0 {
                    // The next progress hands the frame on.
                    return;
                }
            }
            self.drive();
        }
    }

    fn busy(&self) -> bool {
        self.pending_output() || self.reading()
    }

    fn holds_completions(&self) -> bool {
        // What a withdrawal found waits in the stash for the next poll.
        !lock(&self.stash).is_empty()
    }

    fn poll(&self, sink: &mut dyn Sink) -> usize {
        // Under the progress lock: what a withdrawal found comes first.
        let mut done = lock(&self.progress);
        let stash = std::mem::take(&mut *lock(&self.stash));
        let mut handed = stash.len();
        for item in stash {
            sink.take(item);
        }
        handed += self.progress_locked(&mut done, sink);
        handed
    }

    fn wait(&self, mut timeout: Option<Duration>) {
        let closing = self.peers.iter().flatten().any(|peer| {
            peer.input
                .try_lock()
                .map_or(true, |input| input.closing.is_some() && !input.ended)
        });
        let cq = self.ep().cq();
        if cq.wait_fd().is_none() || closing || self.unannounced_output() {
            // Progress needs polls: wait in short steps.
            timeout = Some(timeout.map_or(STEP, |t| t.min(STEP)));
        }
        if !lock(&self.stash).is_empty() {
            return;
        }
        if cq.wait_fd().is_some() && self.domain.fabric().trywait(cq).is_err() {
            return;
        }
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 4];
        // Sub-millisecond timeouts (the termination wave's) are waited,
        // not rounded down to a busy loop of the progress thread.
        for event in self.epoll.ready_within(&mut events, timeout) {
            match event.u64 {
                WAKE => self.wake.clear(),
                CONTROLS => self.controls_ready.store(true, Ordering::Relaxed),
                _ => {}
            }
        }
    }

    fn wake(&self) {
        self.wake.ring();
    }

    fn close(&self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        let mut stash = Vec::new();
        // Every message posted and completed (so it left this process)
        // before the counts go out.
        while self.pending_output() && Instant::now() < deadline {
            let mut serial = lock(&self.progress);
            self.progress_locked(&mut serial, &mut |i| stash.push(i));
            lock(&self.stash).append(&mut stash);
            drop(serial);
            std::thread::sleep(Duration::from_micros(200));
        }
        self.closed.store(true, Ordering::Release);
        for peer in self.peers.iter().flatten() {
            // Every message numbered: one still queued (the deadline
            // passed) is reported missing by the peer, not silently lost.
            let count = lock(&peer.out).numbered.to_le_bytes();
            // SAFETY: `count` is 8 readable bytes; the socket is open.
            // MSG_NOSIGNAL: a peer that is gone is an error, not SIGPIPE.
            let n = unsafe {
                libc::send(
                    peer.stream.as_raw_fd(),
                    count.as_ptr().cast(),
                    count.len(),
                    libc::MSG_NOSIGNAL,
                )
            };
            let _ = n;
            let _ = peer.stream.shutdown(Shutdown::Write);
        }
    }
}

impl Drop for OfiTransport {
    fn drop(&mut self) {
        // Closing the endpoint ends its operations; then their buffers go.
        drop(self.ep.take());
        for op in lock(&self.live).drain() {
            // SAFETY: every address in `live` is an Op of this transport
            // that no completion handed back; the endpoint is closed, so
            // nothing refers to it any more.
            drop(unsafe { Box::from_raw(op as *mut Op) });
        }
    }
}

#[cfg(test)]
mod tests;
