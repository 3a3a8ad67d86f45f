//! Seeing what ranks do: a timeline trace (`MYRIAD_TRACE=path`, Chrome
//! trace-event JSON that Perfetto and `chrome://tracing` open) and a profile
//! at exit (`MYRIAD_PROFILE=1`, an mpiP-like table).
//!
//! Layer L0: the scheduler, `p2p` and the collectives call it; it knows
//! nothing of them (operations come in as names and numbers).
//!
//! ## Design note
//!
//! * **Who records.** Each party that runs on a worker (a rank, or a task
//!   acting for one) gets a [`Recorder`] when it starts, if the job traces
//!   it or profiles: boxed in its `RankCtx` (`sched::rank`), so every hook
//!   is one load of that field and one branch when the job neither traces
//!   nor profiles, and no allocation. OS threads acting for ranks record
//!   nothing.
//! * **No lock on the hot path.** A recorder is touched only by its own
//!   party, on its worker's thread: events go into its own `Vec` (a
//!   `RefCell`), profile counters into its own table. The worker's [`Lane`]
//!   gets the recorder's events once, when the party ends (the recorder's
//!   `Drop`, which also runs when a failing job unwinds the rank), under a
//!   lock taken once per party. The size cap is per lane (`max_bytes /
//!   workers`), charged a chunk of events at a time when a party's buffer
//!   grows, by the lane's own worker with a relaxed load and store (nobody
//!   else writes it): once a lane is full its parties record no more
//!   events, and the file says so. A push checks only its chunk's room.
//!   A new chunk's pages fault in as events reach them: populating a
//!   chunk's pages in one call (`MADV_POPULATE_WRITE`) saved a traced
//!   1 B ping-pong ~10 ns per message but made `coll_bench --ranks 256`'s
//!   traced barrier loop ~1.3× slower (256 ranks each populating pages
//!   they never filled), so it was taken out.
//! * **Busy parties pack.** Past its first `packed::PACK_AFTER` events a
//!   party packs the rest (~11 bytes instead of 64, see `packed`): the
//!   page faults of fresh event memory were ~60 ns of a traced 1 B
//!   ping-pong message on this VM, more than the packing costs. The
//!   events are unpacked when the trace is written.
//! * **A time window** (`MYRIAD_TRACE_WINDOW`): its bounds are turned
//!   into clock ticks when the job starts (the tick rate measured over
//!   2 ms, the bounds widened a little); an event wholly outside is not
//!   recorded (two compares), and the writer cuts slices at the exact
//!   edges. The profile counts everything.
//! * **Slices are written when they end** (`X` events with their start and
//!   duration: one record per operation, begins never lack their end); the
//!   writer sorts each track by start (a parent before the children it
//!   starts with) and fills the gaps between a rank's outermost operations
//!   with `compute` slices. A park inside an operation ends at the
//!   operation's next clock reading; when that is the operation's end and
//!   the park is the wait the operation implies (a receive waiting for its
//!   message, a collective for its peers), the park is folded into the
//!   operation's event (`Event::park`, written as its own slice). A park
//!   that begins before anything else was recorded in its operation (a
//!   receive that found no message, a collective whose peers are not
//!   there yet) takes the operation's start reading as its own: what
//!   lies between is the operation's bookkeeping before it waits. A
//!   blocking call that waits costs one event and two clock readings. A
//!   small send that does not wait (at most `INSTANT_SEND_BYTES`, no
//!   profile) costs one reading: it is recorded as an instant at its
//!   start, its few tens of nanoseconds counted in the compute after it.
//! * **A park** (the scheduler's hook) starts a [`Parked`]: its fields
//!   only, no event, until the park ends or folds.
//! * **The common end** of an operation (no park to fold, no profile:
//!   `Recorder::slow` unset) reads the clock, folds a flow, compares with
//!   the window (a party not traced has an empty one) and pushes: the
//!   rest is out of line (`end_slow`).
//! * **Flows.** A traced send takes an id from its lane ([`flow_id`]: the
//!   process, the worker, a counter) and records a flow start; the id
//!   rides in the message's envelope (and, to another process, in its
//!   frame) and outcome to the receive, which records the flow's end when
//!   it completes. A flow end inside an operation rides in the
//!   operation's event (`Event::flow`: no event of its own). The writer
//!   keeps flows whose two ends it has; in a job
//!   of several processes it lists the other ends after the events, and
//!   [`merge`] pairs them across the processes' files.
//! * **Time** is clock ticks since the job's start (`clock`), turned into
//!   nanoseconds when the job ends.

pub(crate) mod chrome;
mod clock;
pub(crate) mod merge;
mod packed;
pub(crate) mod profile;

use clock::Clock;
use packed::Packed;
use profile::RankProfile;
use std::cell::{Cell, RefCell};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// The peer of a slice that has none.
pub(crate) const NO_PEER: i32 = -2;
/// The tag of a slice that has none.
pub(crate) const NO_TAG: i32 = i32::MIN;

/// Default cap of a trace's recorded events (`MYRIAD_TRACE_MAX_MB`).
pub(crate) const DEFAULT_MAX_BYTES: usize = 512 << 20;

/// Where the profile goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ProfileTo {
    /// Standard error (`MYRIAD_PROFILE=1`).
    Stderr,
    /// A file (`MYRIAD_PROFILE=path`).
    File(PathBuf),
}

/// What a job records, resolved from the builder and the environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Settings {
    /// Where the trace goes (`MYRIAD_TRACE`); `None`: no trace.
    pub(crate) trace: Option<PathBuf>,
    /// The world ranks traced (`MYRIAD_TRACE_RANKS`); `None`: all.
    pub(crate) ranks: Option<RankSet>,
    /// The cap of recorded events, in bytes (`MYRIAD_TRACE_MAX_MB`).
    pub(crate) max_bytes: usize,
    /// The time window traced (`MYRIAD_TRACE_WINDOW`); `None`: the whole
    /// job.
    pub(crate) window: Option<Window>,
    /// Where the profile goes (`MYRIAD_PROFILE`); `None`: no profile.
    pub(crate) profile: Option<ProfileTo>,
}

impl Settings {
    /// Whether anything is recorded.
    pub(crate) fn any(&self) -> bool {
        self.trace.is_some() || self.profile.is_some()
    }
}

/// A set of world ranks: `0-63,100`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RankSet {
    /// Inclusive ranges, sorted by start.
    ranges: Vec<(u32, u32)>,
}

impl RankSet {
    /// Parses `0-63,100` (ranges inclusive, comma-separated); the error
    /// says what is wrong.
    pub(crate) fn parse(text: &str) -> Result<RankSet, String> {
        let mut ranges = Vec::new();
        for part in text.split(',') {
            let part = part.trim();
            let number = |s: &str| {
                s.trim()
                    .parse::<u32>()
                    .map_err(|_| format!("{s:?} is not a rank (a whole number ≥ 0)"))
            };
            let (lo, hi) = match part.split_once('-') {
                Some((lo, hi)) => (number(lo)?, number(hi)?),
                None => {
                    let r = number(part)?;
                    (r, r)
                }
            };
            if lo > hi {
                return Err(format!(
                    "the range {part:?} is empty (its start is above its end)"
                ));
            }
            ranges.push((lo, hi));
        }
        ranges.sort_unstable();
        Ok(RankSet { ranges })
    }

    /// A set of explicit ranges (the builder's).
    pub(crate) fn from_ranges(ranges: impl IntoIterator<Item = (u32, u32)>) -> RankSet {
        let mut ranges: Vec<_> = ranges.into_iter().filter(|(lo, hi)| lo <= hi).collect();
        ranges.sort_unstable();
        RankSet { ranges }
    }

    /// Whether world rank `rank` is in the set.
    pub(crate) fn contains(&self, rank: u32) -> bool {
        let i = self.ranges.partition_point(|&(lo, _)| lo <= rank);
        self.ranges[..i].iter().any(|&(_, hi)| rank <= hi)
    }
}

/// A time window of a trace, in nanoseconds since the job started:
/// `MYRIAD_TRACE_WINDOW=100-250` (milliseconds), `100-` (to the end).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Window {
    pub(crate) start_ns: u64,
    /// `u64::MAX`: the job's end.
    pub(crate) end_ns: u64,
}

impl Window {
    /// Parses `START_MS-END_MS` (decimal milliseconds, the end may be
    /// left out: to the job's end); the error says what is wrong.
    pub(crate) fn parse(text: &str) -> Result<Window, String> {
        let Some((lo, hi)) = text.trim().split_once('-') else {
            return Err(
                "expected START_MS-END_MS (milliseconds since the job started, \
                        e.g. 100-250, or 100- for the rest of the job)"
                    .to_string(),
            );
        };
        let ms = |s: &str| -> Result<u64, String> {
            let v: f64 = s
                .trim()
                .parse()
                .map_err(|_| format!("{s:?} is not a number of milliseconds"))?;
            if !v.is_finite() || v < 0.0 {
                return Err(format!("{s:?} is not a number of milliseconds ≥ 0"));
            }
            Ok((v * 1e6).min(u64::MAX as f64 / 2.0) as u64)
        };
        let start_ns = ms(lo)?;
        let end_ns = if hi.trim().is_empty() {
            u64::MAX
        } else {
            ms(hi)?
        };
        Window::new(start_ns, end_ns)
    }

    /// The window from `start_ns` to `end_ns`, if it is not empty.
    pub(crate) fn new(start_ns: u64, end_ns: u64) -> Result<Window, String> {
        if start_ns >= end_ns {
            return Err(format!(
                "the window is empty (its start, {} ms, is not before its end, {} ms)",
                start_ns as f64 / 1e6,
                end_ns as f64 / 1e6
            ));
        }
        Ok(Window { start_ns, end_ns })
    }
}

/// A name as one word (a promoted `&"name"`), so that an event stays small.
pub(crate) type Name = &'static &'static str;

/// What an operation slice is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// A blocking send (`peer`: destination, `tag`, `bytes`).
    Send,
    /// A blocking receive (`peer`: source asked for, `bytes` received).
    Receive,
    /// A probe or matched probe.
    Probe,
    /// A wait for a request.
    Wait,
    /// A collective: its kind and algorithm names.
    Collective { kind: Name, algorithm: Name },
    /// A park (the rank suspended until woken): what it waited in
    /// (`sched::WaitOp`'s description) and the collective's label, if any.
    Park { what: Name, label: Name },
    /// A one-sided (RMA) call: an operation (`put`, `get`, ...; `peer`:
    /// its target, `bytes` the origin's), an epoch's synchronisation
    /// (`win_fence`, `win_lock`, ...) or a window's creation or free.
    Rma { kind: Name },
}

impl Op {
    /// The slice's name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Op::Send => "send",
            Op::Receive => "receive",
            Op::Probe => "probe",
            Op::Wait => "wait",
            Op::Collective { kind, .. } => kind,
            Op::Park { .. } => "park",
            Op::Rma { kind } => kind,
        }
    }
}

/// One recorded event, in one cache line: a kind byte and two name words
/// instead of the [`What`] it stands for (whose enum would pad), 32-bit
/// fields where they suffice (a million ranks' events must stay small).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Event {
    /// The names of a collective (kind, algorithm) or a park (what it
    /// waited in, label); [`NO_NAME`] otherwise.
    a: Name,
    b: Name,
    /// Start (slices) or time (flows), ns since the job started.
    pub(crate) ts: u64,
    /// Duration of a slice, ns.
    pub(crate) dur: u64,
    /// Bytes of a slice; the id of a flow.
    pub(crate) bytes: u64,
    /// A message's flow that started (a send) or ended (a receive) in
    /// this slice, folded into it (see `Recorder::flow`); bit 63 set: it
    /// ended here. 0: none.
    pub(crate) flow: u64,
    /// The start of a park that ended with this slice, folded into it
    /// (see `Recorder::end`), as ticks (ns once rescaled) after `ts`;
    /// [`NO_PARK`]: none.
    park: u32,
    pub(crate) peer: i32,
    pub(crate) tag: i32,
    kind: u8,
    /// Nesting depth of a slice among the party's operations (0: called by
    /// the user's code).
    pub(crate) depth: u8,
}

/// The name of an event that has none.
const NO_NAME: Name = &"";

/// [`Event::kind`] of a send.
const SEND: u8 = 0;

/// A send of at most this many bytes that does not wait (no park, the job
/// does not profile) is recorded without its end: a slice of no duration
/// at its start. Its bookkeeping (tens of nanoseconds: matching, a copy
/// of a few cache lines) shows as part of the compute after it; what it
/// saves is one clock reading per small message (a counter read costs
/// ~12 ns of CPU on this VM, a quarter of a traced 1 B message's cost
/// beyond the untraced one). A profile still times every send.
pub(crate) const INSTANT_SEND_BYTES: u64 = 256;

/// [`Event::park`] of a slice without a folded park.
const NO_PARK: u32 = u32::MAX;

/// [`Event::flow`]'s mark of a flow that ended in the slice.
pub(crate) const FLOW_IN: u64 = 1 << 63;

impl Event {
    #[inline(always)]
    fn new(what: What, ts: u64, bytes: u64, peer: i32, tag: i32, depth: u8) -> Event {
        let (kind, a, b) = match what {
            What::Slice(Op::Send) => (SEND, NO_NAME, NO_NAME),
            What::Slice(Op::Receive) => (1, NO_NAME, NO_NAME),
            What::Slice(Op::Probe) => (2, NO_NAME, NO_NAME),
            What::Slice(Op::Wait) => (3, NO_NAME, NO_NAME),
            What::Slice(Op::Collective { kind, algorithm }) => (4, kind, algorithm),
            What::Slice(Op::Park { what, label }) => (5, what, label),
            What::FlowOut => (6, NO_NAME, NO_NAME),
            What::FlowIn => (7, NO_NAME, NO_NAME),
            What::Slice(Op::Rma { kind }) => (8, kind, NO_NAME),
        };
        Event {
            a,
            b,
            ts,
            dur: 0,
            bytes,
            flow: 0,
            park: NO_PARK,
            peer,
            tag,
            kind,
            depth,
        }
    }

    /// What the event records.
    pub(crate) fn what(&self) -> What {
        match self.kind {
            0 => What::Slice(Op::Send),
            1 => What::Slice(Op::Receive),
            2 => What::Slice(Op::Probe),
            3 => What::Slice(Op::Wait),
            4 => What::Slice(Op::Collective {
                kind: self.a,
                algorithm: self.b,
            }),
            5 => What::Slice(Op::Park {
                what: self.a,
                label: self.b,
            }),
            6 => What::FlowOut,
            7 => What::FlowIn,
            _ => What::Slice(Op::Rma { kind: self.a }),
        }
    }

    fn is_park(&self) -> bool {
        self.kind == 5
    }

    /// Folds `park`, a park that ended when this operation did, into this
    /// operation's event if it is the wait the operation implies: its peer
    /// and tag, one level deeper, and for a collective the wait on this
    /// collective (`coll_wait`: the name `sched` gives a collective's wait,
    /// recognised once by its text, then by its address). Point-to-point
    /// events keep the park's names in their free name words.
    #[inline]
    fn fold(&mut self, park: &ParkNote, coll_wait: &Cell<Name>) -> bool {
        if park.peer != self.peer || park.tag != self.tag || park.depth != self.depth + 1 {
            return false;
        }
        match self.kind {
            0..=3 => {
                (self.a, self.b) = (park.what, park.label);
            }
            4 => {
                // The same name, promoted in two places (its text is
                // merged, its reference may not be).
                let (label, kind) = (*park.label, *self.a);
                if !(std::ptr::eq(label, kind) || label == kind) {
                    return false;
                }
                if !std::ptr::eq(park.what, coll_wait.get()) {
                    if *park.what != *COLLECTIVE_WAIT {
                        return false;
                    }
                    coll_wait.set(park.what);
                }
            }
            _ => return false,
        }
        match u32::try_from(park.ts.saturating_sub(self.ts)) {
            Ok(after) if after != NO_PARK => self.park = after,
            // Parked too long after the operation started to fold.
            _ => return false,
        }
        true
    }

    /// The start of the park folded into this slice.
    pub(crate) fn park_start(&self) -> Option<u64> {
        (self.park != NO_PARK).then(|| self.ts + self.park as u64)
    }

    /// The park folded into this slice (see [`fold`](Self::fold)), if any.
    pub(crate) fn folded_park(&self) -> Option<Op> {
        self.park_start()?;
        Some(match self.kind {
            4 => Op::Park {
                what: COLLECTIVE_WAIT,
                label: self.a,
            },
            _ => Op::Park {
                what: self.a,
                label: self.b,
            },
        })
    }
}

/// A park inside an operation that ended, noted until the next reading
/// of the clock ends its slice (see `Recorder::pending`): the fields of
/// its event, without the rest of one (the common case, its fold into
/// the operation's event, copies no event).
#[derive(Debug, Clone, Copy)]
struct ParkNote {
    what: Name,
    label: Name,
    ts: u64,
    peer: i32,
    tag: i32,
    depth: u8,
}

impl ParkNote {
    const NONE: ParkNote = ParkNote {
        what: NO_NAME,
        label: NO_NAME,
        ts: 0,
        peer: NO_PEER,
        tag: NO_TAG,
        depth: 0,
    };

    /// The park's event, but for its duration.
    fn event(&self) -> Event {
        let op = Op::Park {
            what: self.what,
            label: self.label,
        };
        Event::new(What::Slice(op), self.ts, 0, self.peer, self.tag, self.depth)
    }
}

/// What `sched` calls a collective's wait (`WaitOp::Collective`).
const COLLECTIVE_WAIT: Name = &"collective";

/// What an [`Event`] records.
#[derive(Debug, Clone, Copy)]
pub(crate) enum What {
    Slice(Op),
    /// A message left: a flow begins (id in `bytes`).
    FlowOut,
    /// A message was received: its flow ends (id in `bytes`).
    FlowIn,
}

/// A per-worker counter sample.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sample {
    pub(crate) ts: u64,
    /// Ranks and tasks in the worker's run queue.
    pub(crate) runnable: u64,
    /// Bytes of idle buffers in the eager pool (the job's, sampled by this
    /// worker).
    pub(crate) eager_bytes: u64,
}

/// Everything one party recorded, handed to its lane when it ended.
#[derive(Debug)]
pub(crate) struct PartyLog {
    /// The world rank it acts for.
    pub(crate) rank: u32,
    /// Its track: the world rank for a rank, above `TASK_TID` for a task.
    pub(crate) tid: u64,
    pub(crate) worker: u32,
    /// A task acting for `rank` (an immediate collective), not the rank.
    pub(crate) task: bool,
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) events: Events,
    pub(crate) profile: Option<Box<RankProfile>>,
}

/// A party's events, in chunks that never move once written: growing a
/// single `Vec` would copy every event recorded so far each time it doubles
/// (a ping-pong records millions), and a million parties must start small.
/// A chunk's room is charged to the lane's share of the size cap when the
/// chunk is allocated, so a push checks nothing but the chunk's room.
/// Past [`packed::PACK_AFTER`] events, a party packs the rest (see
/// `packed`: a fifth of the bytes, so a fifth of the page faults); they
/// are unpacked when the trace is written.
#[derive(Debug, Default)]
pub(crate) struct Events {
    full: Vec<Vec<Event>>,
    current: Vec<Event>,
    /// Set once the party has recorded `PACK_AFTER` events.
    packed: Option<Box<Packed>>,
}

impl Events {
    /// The largest chunk, in events.
    const CHUNK: usize = 4096;

    /// Records `event` if there is room; `lane` pays for a new chunk.
    #[inline]
    fn push(&mut self, event: Event, lane: &Lane, budget: usize) {
        if let Some(packed) = &mut self.packed {
            if !packed.push(&event) && Self::grow_packed(packed, lane, budget) {
                packed.push(&event);
            }
            return;
        }
        if self.current.len() == self.current.capacity() {
            if !self.grow(lane, budget) {
                return;
            }
            if let Some(packed) = &mut self.packed {
                packed.push(&event);
                return;
            }
        }
        self.current.push(event);
    }

    /// A new chunk, as large as the lane's share of the cap allows, or
    /// the packed buffer once the party has recorded enough; `false` if
    /// the cap allows none (the lane is full: it stays so).
    #[cold]
    #[inline(never)]
    fn grow(&mut self, lane: &Lane, budget: usize) -> bool {
        let recorded = self.full.iter().map(Vec::len).sum::<usize>() + self.current.len();
        if recorded >= packed::PACK_AFTER {
            let mut packed = Box::<Packed>::default();
            if !Self::grow_packed(&mut packed, lane, budget) {
                return false;
            }
            self.packed = Some(packed);
            return true;
        }
        if lane.full.load(Ordering::Relaxed) {
            return false;
        }
        let size = std::mem::size_of::<Event>();
        let used = lane.used.load(Ordering::Relaxed);
        let wanted = (self.current.capacity() * 2).clamp(16, Self::CHUNK);
        let capacity = wanted.min(budget.saturating_sub(used) / size);
        if capacity == 0 {
            lane.full.store(true, Ordering::Relaxed);
            return false;
        }
        lane.used.store(used + capacity * size, Ordering::Relaxed);
        let chunk = std::mem::replace(&mut self.current, Vec::with_capacity(capacity));
        if !chunk.is_empty() {
            self.full.push(chunk);
        }
        true
    }

    /// Room for at least one more packed event: the buffer doubles (from
    /// 64 KiB), charged to the lane as chunks are; `false` if the cap
    /// allows no more.
    #[cold]
    #[inline(never)]
    fn grow_packed(packed: &mut Packed, lane: &Lane, budget: usize) -> bool {
        if lane.full.load(Ordering::Relaxed) {
            return false;
        }
        let used = lane.used.load(Ordering::Relaxed);
        let old = packed.capacity();
        let wanted = (old * 2).max(64 << 10);
        let new = wanted.min(old + budget.saturating_sub(used));
        if new < old + packed::MAX_PACKED {
            lane.full.store(true, Ordering::Relaxed);
            return false;
        }
        packed.reserve_total(new);
        lane.used
            .store(used + packed.capacity() - old, Ordering::Relaxed);
        true
    }

    /// Unpacks the packed events (if any) after the plain ones, so that
    /// [`iter`](Self::iter) sees them all.
    pub(crate) fn unpack(&mut self) {
        if let Some(packed) = self.packed.take() {
            let chunk = std::mem::replace(&mut self.current, packed.unpack());
            if !chunk.is_empty() {
                self.full.push(chunk);
            }
        }
    }

    /// The events in the order recorded (once [`unpack`](Self::unpack)ed).
    fn iter_mut(&mut self) -> impl Iterator<Item = &mut Event> {
        debug_assert!(self.packed.is_none(), "unpack first");
        self.full.iter_mut().flatten().chain(&mut self.current)
    }

    /// The events in the order recorded (once [`unpack`](Self::unpack)ed).
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Event> {
        debug_assert!(self.packed.is_none(), "unpack first");
        self.full.iter().flatten().chain(&self.current)
    }

    /// How many there are.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.full.iter().map(Vec::len).sum::<usize>()
            + self.current.len()
            + self.packed.as_ref().map_or(0, |p| p.len())
    }
}

/// Tracks of tasks start here (plus their slot), above any world rank.
pub(crate) const TASK_TID: u64 = 1 << 32;

/// What one worker gathers: the logs of the parties it ran, its counter
/// samples, its share of the size cap.
#[derive(Debug, Default)]
pub(crate) struct Lane {
    /// Bytes of event chunks this worker's parties allocated (written only
    /// by the worker's thread).
    used: AtomicUsize,
    /// The cap was reached: nothing more is recorded here.
    full: AtomicBool,
    /// Flow ids handed out (written only by the worker's thread).
    flows: AtomicU64,
    /// The last counter sample's time (written only by the worker's
    /// thread).
    sampled: AtomicU64,
    /// Resumes since the worker started (written only by its thread).
    resumes: AtomicU64,
    logs: Mutex<Vec<PartyLog>>,
    samples: Mutex<Vec<Sample>>,
}

/// Reads the eager pool's idle bytes (given by the layer that owns it).
type EagerProbe = Box<dyn Fn() -> usize + Send + Sync>;

/// A job's recording: settings, clock, one [`Lane`] per worker.
pub(crate) struct Tracer {
    settings: Settings,
    /// The job writes a trace (`settings.trace` is set).
    traces: bool,
    clock: Clock,
    lanes: Box<[Lane]>,
    /// Bytes of events each lane may record.
    budget: usize,
    /// The window's bounds in clock ticks, a little wide (the tick rate is
    /// estimated when the job starts; the writer clips exactly): events
    /// wholly outside are not recorded. `(0, u64::MAX)` without a window.
    window: (u64, u64),
    /// This process's index and the job's process count (file names, `pid`).
    process: u32,
    processes: u32,
    /// The job's start, ns since the Unix epoch.
    epoch_unix_ns: u64,
    eager: OnceLock<EagerProbe>,
}

impl std::fmt::Debug for Tracer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracer")
            .field("settings", &self.settings)
            .field("workers", &self.lanes.len())
            .finish()
    }
}

/// How far apart a worker samples its counters.
const SAMPLE_NS: u64 = 100_000;

impl Tracer {
    /// The recording of a job with `workers` workers, in process `process`
    /// of `processes`.
    pub(crate) fn new(settings: Settings, workers: usize, process: u32, processes: u32) -> Tracer {
        let workers = workers.max(1);
        let clock = Clock::new();
        let window = match settings.window {
            Some(w) => {
                let per_ns = clock.ticks_per_ns();
                // 0.1% and 10 µs wider on both sides than the estimate.
                let ticks = |ns: u64| (ns as f64 * per_ns) as u64;
                let margin = |ns: u64| ticks(ns / 1000 + 10_000);
                (
                    ticks(w.start_ns).saturating_sub(margin(w.start_ns)),
                    if w.end_ns == u64::MAX {
                        u64::MAX
                    } else {
                        ticks(w.end_ns).saturating_add(margin(w.end_ns))
                    },
                )
            }
            None => (0, u64::MAX),
        };
        Tracer {
            budget: settings.max_bytes / workers,
            traces: settings.trace.is_some(),
            settings,
            clock,
            window,
            lanes: (0..workers).map(|_| Lane::default()).collect(),
            process,
            processes,
            epoch_unix_ns: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64),
            eager: OnceLock::new(),
        }
    }

    /// Gives the tracer a way to read the eager pool's idle bytes (the
    /// counters' second series).
    pub(crate) fn set_eager_probe(&self, probe: impl Fn() -> usize + Send + Sync + 'static) {
        let _ = self.eager.set(Box::new(probe));
    }

    /// Ticks since the job started (nanoseconds once [`finish`]
    /// rescales them: see `clock`).
    ///
    /// [`finish`]: Self::finish
    #[inline]
    pub(crate) fn now(&self) -> u64 {
        self.clock.now()
    }

    /// The recorder of a party starting on `worker`: world rank `rank`, at
    /// park slot `slot`, a task acting for the rank if `task`; `None` if
    /// nothing of it is recorded (the job only traces, and not this rank).
    pub(crate) fn recorder(
        self: &Arc<Self>,
        rank: u32,
        worker: u32,
        slot: u32,
        task: bool,
    ) -> Option<Box<Recorder>> {
        let trace = self.settings.trace.is_some()
            && self
                .settings
                .ranks
                .as_ref()
                .is_none_or(|set| set.contains(rank));
        let profile = self.settings.profile.is_some();
        if !trace && !profile {
            return None;
        }
        Some(Box::new(Recorder {
            tracer: Arc::clone(self),
            lane: worker.min(self.lanes.len() as u32 - 1),
            rank,
            tid: if task {
                TASK_TID + slot as u64
            } else {
                rank as u64
            },
            task,
            trace,
            start: self.now(),
            depth: Cell::new(0),
            last: Cell::new(0),
            fresh: Cell::new(false),
            window: if trace { self.window } else { (u64::MAX, 0) },
            slow: Cell::new(profile),
            park_pending: Cell::new(false),
            pending: Cell::new(ParkNote::NONE),
            coll_wait: Cell::new(NO_NAME),
            open_flow: Cell::new(0),
            open_flow_depth: Cell::new(0),
            events: RefCell::new(Events::default()),
            profile: profile.then(|| RefCell::new(RankProfile::default())),
        }))
    }

    /// Samples worker `worker`'s counters (`runnable`: its run queue's
    /// length), at most every 100 µs. Called by the worker's own thread at
    /// each resume: a look at the clock every 32 resumes only.
    #[inline]
    pub(crate) fn sample(&self, worker: usize, runnable: usize) {
        if !self.traces {
            return;
        }
        let Some(lane) = self.lanes.get(worker) else {
            return;
        };
        let resumes = lane.resumes.load(Ordering::Relaxed).wrapping_add(1);
        lane.resumes.store(resumes, Ordering::Relaxed);
        if resumes % 32 == 1 {
            self.sample_slow(lane, runnable);
        }
    }

    #[cold]
    #[inline(never)]
    fn sample_slow(&self, lane: &Lane, runnable: usize) {
        let now = self.now();
        let last = lane.sampled.load(Ordering::Relaxed);
        if last != 0 && now < last + SAMPLE_NS {
            return;
        }
        if now < self.window.0 || now > self.window.1 {
            return;
        }
        lane.sampled.store(now.max(1), Ordering::Relaxed);
        let eager_bytes = self.eager.get().map_or(0, |probe| probe()) as u64;
        lane.samples
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Sample {
                ts: now,
                runnable: runnable as u64,
                eager_bytes,
            });
    }

    /// Writes the trace and prints the profile, once every worker is done
    /// (the job's owner calls it after joining them). Problems writing are
    /// reported on standard error: the job's results stand.
    pub(crate) fn finish(&self) {
        let end = self.now();
        let scale = self.clock.scale();
        let mut logs = Vec::new();
        let mut samples = Vec::new();
        let mut full = Vec::new();
        for (w, lane) in self.lanes.iter().enumerate() {
            logs.append(&mut lane.logs.lock().unwrap_or_else(|e| e.into_inner()));
            for log in &mut logs {
                log.events.unpack();
            }
            let lane_samples =
                std::mem::take(&mut *lane.samples.lock().unwrap_or_else(|e| e.into_inner()));
            samples.push(lane_samples);
            if lane.full.load(Ordering::Relaxed) {
                full.push(w);
            }
        }
        if scale != 1.0 {
            rescale(&mut logs, &mut samples, scale);
        }
        let end = (end as f64 * scale) as u64;
        logs.sort_by_key(|log| (log.tid, log.start));
        if let Some(path) = &self.settings.trace {
            let path = self.trace_path(path);
            let out = chrome::Output {
                logs: &logs,
                samples: &samples,
                full: &full,
                max_bytes: self.settings.max_bytes,
                window: self.settings.window,
                process: self.process,
                processes: self.processes,
                epoch_unix_ns: self.epoch_unix_ns,
            };
            if let Err(err) = chrome::write(&path, &out) {
                say!(
                    "[myriad] could not write the trace to {}: {err}",
                    path.display()
                );
            }
        }
        if let Some(to) = &self.settings.profile {
            let text = profile::report(&logs, end, self.process, self.processes);
            match to {
                ProfileTo::Stderr => eprint!("{text}"),
                ProfileTo::File(path) => {
                    let path = self.trace_path(path);
                    if let Err(err) = std::fs::write(&path, text) {
                        say!(
                            "[myriad] could not write the profile to {}: {err}",
                            path.display()
                        );
                    }
                }
            }
        }
    }

    /// The file of this process: `path` itself in a job of one process,
    /// else `path` with `.<process index>` before its extension
    /// (`trace.json` → `trace.1.json`).
    pub(crate) fn trace_path(&self, path: &std::path::Path) -> PathBuf {
        if self.processes <= 1 {
            return path.to_path_buf();
        }
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let name = match path.extension() {
            Some(ext) => format!("{stem}.{}.{}", self.process, ext.to_string_lossy()),
            None => format!("{stem}.{}", self.process),
        };
        path.with_file_name(name)
    }
}

/// Turns clock ticks into nanoseconds (`scale` ns per tick).
fn rescale(logs: &mut [PartyLog], samples: &mut [Vec<Sample>], scale: f64) {
    let ns = |ticks: &mut u64| *ticks = (*ticks as f64 * scale) as u64;
    for log in logs {
        ns(&mut log.start);
        ns(&mut log.end);
        for e in log.events.iter_mut() {
            // Start and end, so that slices stay nested after rounding.
            let mut end = e.ts + e.dur;
            let end_ticks = end;
            // The folded park's start, in ticks: `park_start` adds the
            // offset to `ts`, so it must be read before `ts` is in ns.
            let park_ticks = e.park_start().map(|p| p.min(end_ticks));
            ns(&mut e.ts);
            ns(&mut end);
            e.dur = end - e.ts;
            if let Some(mut park) = park_ticks {
                ns(&mut park);
                e.park = (park.clamp(e.ts, end) - e.ts).min(NO_PARK as u64 - 1) as u32;
            }
        }
        if let Some(profile) = &mut log.profile {
            profile.rescale(scale);
        }
    }
    for s in samples.iter_mut().flatten() {
        ns(&mut s.ts);
    }
}

/// What one party records: its events and, when the job profiles, its
/// counters. Touched only by the party itself (on its worker's thread).
pub(crate) struct Recorder {
    tracer: Arc<Tracer>,
    lane: u32,
    rank: u32,
    tid: u64,
    task: bool,
    /// Its events are recorded (the job traces, and this rank).
    trace: bool,
    start: u64,
    depth: Cell<u8>,
    /// The last time read from the clock (a span's start or end).
    last: Cell<u64>,
    /// `last` is the start of the innermost open operation, and nothing
    /// was recorded since: a park beginning now shares that reading (see
    /// `start`).
    fresh: Cell<bool>,
    /// The window in ticks where this party's events are recorded:
    /// the tracer's, or none (`(u64::MAX, 0)`) if it is not traced, so
    /// that one test says both.
    window: (u64, u64),
    /// Something the common end of an operation does not handle: a park
    /// to end (`park_pending`), or the party profiles. See `end`.
    slow: Cell<bool>,
    /// A park inside an operation ended, and its end is the next reading
    /// of the clock (the operation's end, a few instructions later): one
    /// reading less per park.
    park_pending: Cell<bool>,
    /// That park's slice (valid while `park_pending`).
    pending: Cell<ParkNote>,
    /// The name of a collective's wait, once seen (see `Event::fold`).
    coll_wait: Cell<Name>,
    /// A flow that started or ended inside the innermost open operation,
    /// to be folded into its event (see `flow`); 0: none.
    open_flow: Cell<u64>,
    /// The depth it was recorded at (the operation's depth + 1).
    open_flow_depth: Cell<u8>,
    events: RefCell<Events>,
    profile: Option<RefCell<RankProfile>>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("rank", &self.rank)
            .field("tid", &self.tid)
            .finish()
    }
}

impl Recorder {
    fn lane(&self) -> &Lane {
        &self.tracer.lanes[self.lane as usize]
    }

    /// Records `event` (if its lane has room).
    #[inline]
    fn push(&self, event: Event) {
        let tracer = &*self.tracer;
        self.events
            .borrow_mut()
            .push(event, &tracer.lanes[self.lane as usize], tracer.budget);
    }

    /// Starts an operation slice (see [`span`]): the span carries its
    /// event, filled in as far as its start tells. Inlined, so that the
    /// operation's encoding folds into a constant at the hook.
    #[inline(always)]
    pub(crate) fn span(&self, op: Op, peer: i32, tag: i32, bytes: usize) -> Span<'_> {
        self.start(Event::new(What::Slice(op), 0, bytes as u64, peer, tag, 0))
    }

    /// Fills in the start of `ev` (its depth and time). Out of line, so
    /// that a hook stays small where it is inlined (the call sites of an
    /// untraced job must not grow).
    #[inline(never)]
    fn start(&self, mut ev: Event) -> Span<'_> {
        let depth = self.depth.get();
        self.depth.set(depth.saturating_add(1));
        ev.depth = depth;
        // A park that begins before anything else happened in its
        // operation (a receive that found no message, a collective whose
        // peers are not there yet) begins at the operation's start: the
        // matching or arrival in between is the operation's bookkeeping
        // before it waits, tens of nanoseconds; one clock reading less.
        ev.ts = if ev.is_park() && self.fresh.get() && depth > 0 {
            // Once: a second park in the operation (a wake-up that finds
            // nothing to do parks again) reads the clock, which also ends
            // the first.
            self.fresh.set(false);
            self.last.get()
        } else {
            let now = self.stamp();
            self.fresh.set(!ev.is_park());
            now
        };
        Span { rec: self, ev }
    }

    /// Starts the slice of a park (the scheduler's hook): [`start`] for
    /// the one kind of slice whose end is only noted (see `pending`),
    /// without building its event until then.
    ///
    /// [`start`]: Self::start
    #[inline(never)]
    pub(crate) fn park(&self, what: Name, label: Name, peer: i32, tag: i32) -> Parked<'_> {
        let depth = self.depth.get();
        self.depth.set(depth.saturating_add(1));
        // As in `start`: a park at once shares its operation's reading.
        let ts = if self.fresh.get() && depth > 0 {
            // Once, as in `start`.
            self.fresh.set(false);
            self.last.get()
        } else {
            let now = self.stamp();
            self.fresh.set(false);
            now
        };
        Parked {
            rec: self,
            note: ParkNote {
                what,
                label,
                ts,
                peer,
                tag,
                depth,
            },
        }
    }

    /// Ends the park `p`: inside an operation, noted for the next reading
    /// of the clock (see `end`).
    #[inline(never)]
    fn park_ended(&self, p: &Parked<'_>) {
        let note = p.note;
        if note.depth > 0 {
            self.depth.set(note.depth);
            self.pending.set(note);
            self.park_pending.set(true);
            self.slow.set(true);
            return;
        }
        self.end(&note.event());
    }

    /// Ends the slice `ev`. A park inside an operation is ended by the
    /// next reading of the clock (see `pending`); when that reading is
    /// the end of the operation it waited in, and the park is the one
    /// the operation's kind implies (`Event::folded_park`), it is folded
    /// into the operation's event (`Event::park`): one event per
    /// operation that waits, not two.
    #[inline(never)]
    fn end(&self, ev: &Event) {
        self.depth.set(ev.depth);
        if ev.is_park() && ev.depth > 0 {
            self.pending.set(ParkNote {
                what: ev.a,
                label: ev.b,
                ts: ev.ts,
                peer: ev.peer,
                tag: ev.tag,
                depth: ev.depth,
            });
            self.park_pending.set(true);
            self.slow.set(true);
            return;
        }
        if ev.kind == SEND && ev.bytes <= INSTANT_SEND_BYTES && !self.slow.get() {
            return self.end_instant(ev);
        }
        let now = self.tracer.now();
        self.last.set(now);
        self.fresh.set(false);
        if self.slow.get() {
            return self.end_slow(ev, now);
        }
        // The common case: no park folds into the event, no profile.
        let flow = self.take_flow(ev.depth);
        let (lo, hi) = self.window;
        if now >= lo && ev.ts <= hi {
            self.push(Event {
                dur: now.saturating_sub(ev.ts),
                flow,
                ..*ev
            });
        }
    }

    /// `end` of a small send that did not wait (nothing pending, no
    /// profile): recorded as an instant at its start, without a clock
    /// reading (see [`INSTANT_SEND_BYTES`]).
    #[inline(always)]
    fn end_instant(&self, ev: &Event) {
        self.fresh.set(false);
        let flow = self.take_flow(ev.depth);
        let (lo, hi) = self.window;
        if ev.ts >= lo && ev.ts <= hi {
            self.push(Event { flow, ..*ev });
        }
    }

    /// The flow that started or ended inside the operation at `depth`
    /// now ending, to fold into its event (0: none).
    #[inline(always)]
    fn take_flow(&self, depth: u8) -> u64 {
        let flow = self.open_flow.get();
        if flow != 0 && self.open_flow_depth.get() == depth + 1 {
            self.open_flow.set(0);
            return flow;
        }
        0
    }

    /// `end` when a park may fold into the event, or the party profiles.
    #[inline(never)]
    fn end_slow(&self, ev: &Event, now: u64) {
        let mut ev = Event {
            flow: self.take_flow(ev.depth),
            ..*ev
        };
        if self.park_pending.get() {
            let park = self.pending.get();
            if ev.fold(&park, &self.coll_wait) {
                self.park_pending.set(false);
                if let Some(profile) = &self.profile {
                    profile.borrow_mut().wait_ns += now.saturating_sub(park.ts);
                }
            } else {
                self.end_park(now);
            }
        }
        self.record(&ev, now);
        self.slow.set(self.profile.is_some());
    }

    /// Reads the clock, and ends a pending park there.
    #[inline]
    fn stamp(&self) -> u64 {
        let now = self.tracer.now();
        self.last.set(now);
        self.fresh.set(false);
        if self.park_pending.get() {
            self.end_park(now);
        }
        now
    }

    /// Records the pending park, ending at `now` (out of line: `record`
    /// stays inlined once, in `end`).
    #[inline(never)]
    fn end_park(&self, now: u64) {
        self.park_pending.set(false);
        self.record(&self.pending.get().event(), now);
        self.slow.set(self.profile.is_some());
    }

    /// Records the slice `ev` ending at `now` (and counts it in the
    /// profile).
    #[inline(always)]
    fn record(&self, ev: &Event, now: u64) {
        let dur = now.saturating_sub(ev.ts);
        if let Some(profile) = &self.profile {
            if let What::Slice(op) = ev.what() {
                profile.borrow_mut().record(op, ev.bytes, dur, ev.depth);
            }
        }
        let (lo, hi) = self.window;
        if now >= lo && ev.ts <= hi {
            self.push(Event { dur, ..*ev });
        }
    }

    /// A message leaves: a new flow id (0 if this party is not traced),
    /// and its start recorded. Inlined into `sched`'s one caller: a
    /// traced message takes this path every time.
    #[inline]
    pub(crate) fn flow_out(&self) -> u64 {
        if !self.trace {
            return 0;
        }
        let lane = self.lane();
        // Wrapped here, so that `flow_id` divides nothing: a 64-bit
        // division costs tens of cycles, a message on one worker 140 ns.
        let seq = match lane.flows.load(Ordering::Relaxed) {
            FLOW_SEQ_MAX.. => 1,
            seq => seq + 1,
        };
        lane.flows.store(seq, Ordering::Relaxed);
        let id = flow_id(self.tracer.process, self.lane, seq);
        self.flow(What::FlowOut, id);
        id
    }

    /// The message of flow `id` was received (inlined as `flow_out`).
    #[inline]
    pub(crate) fn flow_in(&self, id: u64) {
        if self.trace {
            self.flow(What::FlowIn, id);
        }
    }

    #[inline(always)]
    fn flow(&self, what: What, id: u64) {
        // Inside an operation, the first flow rides in the operation's
        // event (no event, no clock reading of its own: a ping-pong's
        // message is two events, not four); the writer puts it at the
        // operation's start (a send) or end (a receive).
        let depth = self.depth.get();
        if depth > 0 && self.open_flow.get() == 0 {
            let mark = if let What::FlowIn = what { FLOW_IN } else { 0 };
            self.open_flow.set(id | mark);
            self.open_flow_depth.set(depth);
            return;
        }
        self.flow_event(what, id, depth);
    }

    /// A flow outside any operation, or a second one inside it: an event
    /// of its own.
    #[cold]
    #[inline(never)]
    fn flow_event(&self, what: What, id: u64, depth: u8) {
        // Inside an operation, the time of the last reading (its
        // start, or the end of a park in it) stands for now.
        let ts = if depth > 0 {
            self.last.get()
        } else {
            self.tracer.now()
        };
        self.fresh.set(false);
        let (lo, hi) = self.window;
        if ts < lo || ts > hi {
            return;
        }
        self.push(Event::new(what, ts, id, 0, 0, depth));
    }
}

impl Drop for Recorder {
    /// The party ended (or was unwound): its log goes to its lane.
    fn drop(&mut self) {
        let log = PartyLog {
            rank: self.rank,
            tid: self.tid,
            worker: self.lane,
            task: self.task,
            start: self.start,
            end: self.stamp(),
            events: if self.trace {
                std::mem::take(self.events.get_mut())
            } else {
                Events::default()
            },
            profile: self.profile.take().map(|p| Box::new(p.into_inner())),
        };
        self.lane()
            .logs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(log);
    }
}

/// The largest sequence number of a flow id (32 bits, never 0).
const FLOW_SEQ_MAX: u64 = 0xffff_ffff;

/// The id of the `seq`-th flow (from 1) of worker `lane` in process
/// `process`: unique in the job (messages between processes carry it in
/// their frames), never 0, and below 2^53 so that JavaScript viewers
/// read it exactly: 11 bits of process, 10 of worker, 32 of sequence
/// (ids repeat past 2,047 processes, 1,023 workers or 4 × 10^9 messages
/// of a worker: arrows may then join the wrong ends).
#[inline]
pub(crate) fn flow_id(process: u32, lane: u32, seq: u64) -> u64 {
    let seq = if seq <= FLOW_SEQ_MAX {
        seq
    } else {
        (seq - 1) % FLOW_SEQ_MAX + 1
    };
    ((process as u64 & 0x7ff) << 42) | ((lane as u64 & 0x3ff) << 32) | seq
}

/// An operation in progress; its slice (and profile entry) is recorded
/// when it drops, so every path out of the operation ends it.
#[derive(Debug)]
pub(crate) struct Span<'a> {
    rec: &'a Recorder,
    /// Its slice, but for the duration.
    ev: Event,
}

impl Span<'_> {
    /// Sets the bytes the operation moved (known at its end: a receive).
    #[inline]
    pub(crate) fn set_bytes(&mut self, bytes: usize) {
        self.ev.bytes = bytes as u64;
    }
}

impl Drop for Span<'_> {
    #[inline]
    fn drop(&mut self) {
        self.rec.end(&self.ev);
    }
}

/// A park in progress (see [`Recorder::park`]); noted when it drops.
#[derive(Debug)]
pub(crate) struct Parked<'a> {
    rec: &'a Recorder,
    note: ParkNote,
}

impl Drop for Parked<'_> {
    #[inline]
    fn drop(&mut self) {
        self.rec.park_ended(self);
    }
}

/// Starts the slice of RMA call `kind` (`target`: the rank it accesses,
/// or [`NO_PEER`]; `bytes`: the origin's) for the party whose recorder is
/// `rec`, as [`span`] does.
#[inline]
pub(crate) fn rma_span(
    rec: Option<&Recorder>,
    kind: Name,
    target: i32,
    bytes: usize,
) -> Option<Span<'_>> {
    span(rec, Op::Rma { kind }, target, NO_TAG, bytes)
}

/// Starts a slice of `op` for the party whose recorder is `rec` (`None`:
/// nothing recorded, the one branch a hook costs then).
#[inline(always)]
pub(crate) fn span(
    rec: Option<&Recorder>,
    op: Op,
    peer: i32,
    tag: i32,
    bytes: usize,
) -> Option<Span<'_>> {
    rec.map(|rec| rec.span(op, peer, tag, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Settings that trace (and, with `profile`, profile) with the default cap.
    fn tracing(profile: bool) -> Settings {
        Settings {
            profile: profile.then_some(ProfileTo::Stderr),
            trace: Some("unused".into()),
            max_bytes: DEFAULT_MAX_BYTES,
            ..Settings::default()
        }
    }

    /// A tracer of one process with one worker.
    fn one_worker(settings: Settings) -> Arc<Tracer> {
        Arc::new(Tracer::new(settings, 1, 0, 1))
    }

    #[test]
    fn rank_sets_parse_and_contain() {
        let set = RankSet::parse("100, 0-63,70-70").unwrap();
        for r in [0, 5, 63, 70, 100] {
            assert!(set.contains(r), "{r}");
        }
        for r in [64, 69, 71, 99, 101] {
            assert!(!set.contains(r), "{r}");
        }
        assert!(RankSet::parse("5-3").unwrap_err().contains("empty"));
        assert!(RankSet::parse("a").unwrap_err().contains("\"a\""));
        assert!(RankSet::parse("1,,2").is_err());
        assert!(RankSet::parse("-1").is_err());
    }

    #[test]
    fn a_job_of_several_processes_numbers_its_files() {
        let settings = Settings::default();
        let one = Tracer::new(settings.clone(), 1, 0, 1);
        assert_eq!(
            one.trace_path("t/x.json".as_ref()),
            PathBuf::from("t/x.json")
        );
        let two = Tracer::new(settings, 1, 1, 2);
        assert_eq!(
            two.trace_path("t/x.json".as_ref()),
            PathBuf::from("t/x.1.json")
        );
        assert_eq!(two.trace_path("x".as_ref()), PathBuf::from("x.1"));
    }

    /// A ping-pong records five events per message: they must stay small.
    #[test]
    fn an_event_is_at_most_a_cache_line() {
        assert!(
            std::mem::size_of::<Event>() <= 64,
            "{}",
            std::mem::size_of::<Event>()
        );
    }

    #[test]
    fn a_full_lane_records_nothing_more() {
        let settings = Settings {
            trace: Some("unused".into()),
            max_bytes: 3 * std::mem::size_of::<Event>(),
            ..Settings::default()
        };
        let tracer = one_worker(settings);
        let rec = tracer.recorder(0, 0, 0, false).unwrap();
        for _ in 0..5 {
            drop(span(Some(&rec), Op::Send, 1, 0, 8));
        }
        assert_eq!(rec.events.borrow().len(), 3);
        assert!(tracer.lanes[0].full.load(Ordering::Relaxed));
    }

    #[test]
    fn a_party_that_records_a_lot_packs_and_unpacks_in_order() {
        let tracer = one_worker(tracing(false));
        let rec = tracer.recorder(0, 0, 0, false).unwrap();
        let n = 3 * packed::PACK_AFTER;
        for i in 0..n {
            let _receive = span(Some(&rec), Op::Receive, 1, i as i32, 8);
            rec.flow_in(i as u64 + 1);
            drop(rec.park(&"receive", NO_NAME, 1, i as i32));
        }
        let mut events = rec.events.borrow_mut();
        assert_eq!(events.len(), n);
        let packed = events.packed.as_ref().expect("packed").len();
        let plain: usize = events.full.iter().map(Vec::len).sum::<usize>() + events.current.len();
        assert!(
            plain >= packed::PACK_AFTER && plain + packed == n,
            "{plain} + {packed}"
        );
        assert!(
            events.current.len() == events.current.capacity(),
            "no chunk grew"
        );
        events.unpack();
        assert!(events.iter().map(|e| e.tag).eq(0..n as i32));
        assert!(events.iter().all(|e| e.folded_park().is_some()));
        let flows: Vec<u64> = events.iter().map(|e| e.flow).collect();
        assert!(flows
            .iter()
            .enumerate()
            .all(|(i, &f)| f == (i as u64 + 1) | FLOW_IN));
    }

    #[test]
    fn events_outside_the_window_are_not_recorded() {
        let settings = Settings {
            trace: Some("unused".into()),
            max_bytes: DEFAULT_MAX_BYTES,
            // From 1 hour on: nothing of this test is in it.
            window: Some(Window::new(3_600_000_000_000, u64::MAX).unwrap()),
            ..Settings::default()
        };
        let tracer = one_worker(settings);
        let rec = tracer.recorder(0, 0, 0, false).unwrap();
        drop(span(Some(&rec), Op::Send, 1, 0, 8));
        assert_eq!(rec.flow_out() >> 32, 0, "flow ids start at worker 0's");
        assert_eq!(rec.events.borrow().len(), 0);
    }

    #[test]
    fn a_park_that_ends_with_its_operation_is_folded_into_it() {
        let tracer = one_worker(tracing(true));
        let rec = tracer.recorder(0, 0, 0, false).unwrap();
        let park = |what: Name| Op::Park {
            what,
            label: NO_NAME,
        };
        {
            let _receive = span(Some(&rec), Op::Receive, 1, 7, 0);
            drop(span(Some(&rec), park(&"receive"), 1, 7, 0));
        }
        {
            // Another peer: not the receive's own wait, recorded apart.
            let _receive = span(Some(&rec), Op::Receive, 1, 7, 0);
            drop(span(Some(&rec), park(&"receive"), 2, 7, 0));
        }
        let events: Vec<Event> = rec.events.borrow().iter().copied().collect();
        assert_eq!(events.len(), 3, "{events:?}");
        let folded = events[0].folded_park().expect("folded");
        assert!(matches!(folded, Op::Park { what, .. } if *what == "receive"));
        let park = events[0].park_start().unwrap();
        assert!(park >= events[0].ts && park <= events[0].ts + events[0].dur);
        assert!(events[1].is_park() && events[2].folded_park().is_none());
        let profile = rec.profile.as_ref().unwrap().borrow();
        assert_eq!(profile.calls("receive"), 2);
        assert!(profile.wait_ns <= events[0].dur + events[1].dur);
    }

    /// The scheduler's hook (`Recorder::park`) as the generic span of a
    /// park: folded into the operation it waited in, else its own slice.
    #[test]
    fn the_schedulers_park_folds_or_stands_alone() {
        let tracer = one_worker(tracing(false));
        let rec = tracer.recorder(0, 0, 0, false).unwrap();
        {
            let _receive = span(Some(&rec), Op::Receive, 1, 7, 0);
            drop(rec.park(&"receive", NO_NAME, 1, 7));
        }
        {
            // Another tag: not the receive's own wait.
            let _receive = span(Some(&rec), Op::Receive, 1, 7, 0);
            drop(rec.park(&"receive", NO_NAME, 1, 8));
        }
        // Outside any operation: a slice at once.
        drop(rec.park(&"barrier", &"label", NO_PEER, NO_TAG));
        let events: Vec<Event> = rec.events.borrow().iter().copied().collect();
        assert_eq!(events.len(), 4, "{events:?}");
        assert_eq!(events[0].park_start(), Some(events[0].ts), "at once");
        assert!(
            matches!(events[0].folded_park(), Some(Op::Park { what, .. }) if *what == "receive")
        );
        assert!(events[1].is_park() && events[1].tag == 8 && events[1].depth == 1);
        assert!(events[2].folded_park().is_none());
        assert!(events[3].is_park() && events[3].depth == 0);
        assert!(
            matches!(events[3].what(), What::Slice(Op::Park { label, .. }) if *label == "label")
        );
        assert_eq!(rec.depth.get(), 0);
    }

    #[test]
    fn a_second_park_in_one_operation_starts_after_the_first_ends() {
        let tracer = one_worker(tracing(false));
        let rec = tracer.recorder(0, 0, 0, false).unwrap();
        let park = Op::Park {
            what: &"receive",
            label: NO_NAME,
        };
        {
            let _receive = span(Some(&rec), Op::Receive, 1, 7, 0);
            drop(span(Some(&rec), park, 1, 7, 0));
            std::thread::sleep(std::time::Duration::from_millis(1));
            drop(span(Some(&rec), park, 1, 7, 0));
        }
        let events: Vec<Event> = rec.events.borrow().iter().copied().collect();
        assert_eq!(events.len(), 2, "{events:?}");
        let (first, receive) = (events[0], events[1]);
        assert!(first.is_park(), "{events:?}");
        let second = receive.park_start().expect("the second park is folded");
        assert!(second >= first.ts + first.dur, "{events:?}");
    }

    #[test]
    fn a_folded_park_late_in_its_operation_is_rescaled_from_ticks() {
        // The park folded into the receive starts well after the receive
        // (a second park in it): its offset must be turned into ns with
        // the receive's start, not added in ticks to the start in ns (the
        // per-process test's parks that overlapped their predecessor).
        let tracer = one_worker(tracing(false));
        let rec = tracer.recorder(0, 0, 0, false).unwrap();
        let park = Op::Park {
            what: &"receive",
            label: NO_NAME,
        };
        {
            let _receive = span(Some(&rec), Op::Receive, 1, 7, 0);
            drop(span(Some(&rec), park, 1, 7, 0));
            std::thread::sleep(std::time::Duration::from_millis(1));
            drop(span(Some(&rec), park, 1, 7, 0));
        }
        let events = std::mem::take(&mut *rec.events.borrow_mut());
        let before: Vec<Event> = events.iter().copied().collect();
        let (first, receive) = (before[0], before[1]);
        let park_ticks = receive.park_start().expect("the second park is folded");
        assert!(park_ticks > receive.ts + 1000, "{before:?}");
        let mut logs = vec![PartyLog {
            rank: 0,
            tid: 0,
            worker: 0,
            task: false,
            start: 0,
            end: receive.ts + receive.dur,
            events,
            profile: None,
        }];
        let scale = 0.25;
        rescale(&mut logs, &mut [], scale);
        let after: Vec<Event> = logs[0].events.iter().copied().collect();
        let (first_ns, receive_ns) = (after[0], after[1]);
        let park_ns = receive_ns.park_start().unwrap();
        let want = (park_ticks as f64 * scale) as u64;
        assert!(
            park_ns.abs_diff(want) <= 1,
            "{park_ns} ns, want {want}: {after:?}"
        );
        // It still starts where the first park ended.
        assert_eq!(park_ticks, first.ts + first.dur);
        assert!(park_ns >= first_ns.ts + first_ns.dur, "{after:?}");
    }

    #[test]
    fn a_small_send_that_does_not_wait_is_an_instant_and_a_large_one_a_slice() {
        let tracer = one_worker(tracing(false));
        let rec = tracer.recorder(0, 0, 0, false).unwrap();
        let big = INSTANT_SEND_BYTES as usize + 1;
        for bytes in [1, INSTANT_SEND_BYTES as usize, big] {
            let _send = span(Some(&rec), Op::Send, 1, 7, bytes);
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let events: Vec<Event> = rec.events.borrow().iter().copied().collect();
        assert_eq!(events.len(), 3, "{events:?}");
        assert_eq!((events[0].dur, events[1].dur), (0, 0), "{events:?}");
        assert!(events[2].dur > 0, "{events:?}");
        // A send that waited (a park folded into it) keeps its duration.
        {
            let _send = span(Some(&rec), Op::Send, 1, 7, 1);
            let _park = rec.park(&"send", NO_NAME, 1, 7);
        }
        let last = *rec.events.borrow().iter().last().unwrap();
        assert!(last.dur > 0 && last.park_start().is_some(), "{last:?}");
        // When the job profiles, every send is timed.
        let tracer = one_worker(tracing(true));
        let rec = tracer.recorder(0, 0, 0, false).unwrap();
        drop(span(Some(&rec), Op::Send, 1, 7, 1));
        let first = *rec.events.borrow().iter().next().unwrap();
        assert_eq!(first.ts + first.dur, rec.last.get(), "{first:?}");
    }

    #[test]
    fn a_park_at_once_shares_its_operations_start_reading() {
        let tracer = one_worker(tracing(false));
        let rec = tracer.recorder(0, 0, 0, false).unwrap();
        let park = Op::Park {
            what: &"receive",
            label: NO_NAME,
        };
        {
            let _receive = span(Some(&rec), Op::Receive, 1, 7, 0);
            drop(span(Some(&rec), park, 1, 7, 0));
        }
        {
            // Something recorded between the start and the park: the
            // park reads the clock.
            let _receive = span(Some(&rec), Op::Receive, 1, 7, 0);
            drop(span(Some(&rec), Op::Probe, 1, 7, 0));
            std::thread::sleep(std::time::Duration::from_millis(1));
            drop(span(Some(&rec), park, 1, 7, 0));
        }
        let events: Vec<Event> = rec.events.borrow().iter().copied().collect();
        assert_eq!(events.len(), 3, "{events:?}");
        assert_eq!(events[0].park_start(), Some(events[0].ts));
        let (probe, receive) = (events[1], events[2]);
        assert!(receive.park_start().unwrap() >= probe.ts + probe.dur);
    }

    #[test]
    fn flow_ids_name_their_process_and_stay_below_2_to_the_53() {
        let id = flow_id(2047, 1023, u32::MAX as u64);
        assert!(id < 1 << 53 && id != 0);
        assert_ne!(flow_id(1, 0, 1), flow_id(0, 0, 1));
        assert_ne!(flow_id(0, 1, 1), flow_id(0, 0, 1));
        assert_ne!(flow_id(0, 0, 0xffff_ffff + 1), 0);
        // A worker's counter wraps to 1, never 0.
        let tracer = one_worker(tracing(false));
        let rec = tracer.recorder(0, 0, 0, false).unwrap();
        tracer.lanes[0].flows.store(FLOW_SEQ_MAX, Ordering::Relaxed);
        assert_eq!(rec.flow_out(), 1);
        assert_eq!(rec.flow_out(), 2);
    }

    #[test]
    fn spans_nest_and_the_profile_counts_outer_calls_as_mpi_time() {
        let tracer = one_worker(tracing(true));
        let rec = tracer.recorder(3, 0, 3, false).unwrap();
        {
            let _outer = span(
                Some(&rec),
                Op::Collective {
                    kind: &"barrier",
                    algorithm: &"x",
                },
                -2,
                0,
                0,
            );
            let mut inner = span(Some(&rec), Op::Receive, 1, 0, 0);
            inner.as_mut().unwrap().set_bytes(16);
        }
        let events: Vec<Event> = rec.events.borrow().iter().copied().collect();
        assert_eq!(events.len(), 2);
        assert_eq!((events[0].depth, events[0].bytes), (1, 16));
        assert_eq!(events[1].depth, 0);
        assert!(
            events[1].ts <= events[0].ts
                && events[0].ts + events[0].dur <= events[1].ts + events[1].dur
        );
        let profile = rec.profile.as_ref().unwrap().borrow();
        assert_eq!(
            profile.calls("receive"),
            0,
            "inside the barrier: not a call of its own"
        );
        assert_eq!(profile.calls("barrier"), 1);
        assert_eq!(profile.mpi_ns, events[1].dur);
    }
}
