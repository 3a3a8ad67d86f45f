//! Writing a trace as Chrome trace-event JSON, the format Perfetto
//! (ui.perfetto.dev) and `chrome://tracing` open.
//!
//! The file is one object: `traceEvents` (the events), `displayTimeUnit`,
//! and `otherData` (the process, and notes: a size cap reached, flows not
//! drawn across processes). Per party a track: `pid` the process index,
//! `tid` the world rank (tasks acting for a rank: above [`TASK_TID`]), named
//! by `thread_name` metadata (`rank 5 (w1)`) and ordered by worker
//! (`thread_sort_index`), so the tracks of a worker's ranks are
//! neighbours. Each track holds the party's lifetime (`rank` or `task`),
//! its operations as complete (`X`) slices with their arguments, its
//! parks, `compute` slices filling the gaps between its outermost
//! operations, and the ends of message flows (`s` at the send, `f` bound
//! to the enclosing slice at the receive). Per worker a counter (`C`):
//! runnable ranks and the eager pool's idle bytes. Events of a track are
//! written in start order (a slice before those it encloses).

use std::collections::HashSet;
use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use super::{Event, Op, PartyLog, Sample, What, Window, FLOW_IN, TASK_TID};

/// What one process writes.
pub(crate) struct Output<'a> {
    /// Every party's log, sorted by track then start.
    pub(crate) logs: &'a [PartyLog],
    /// Counter samples, by worker.
    pub(crate) samples: &'a [Vec<Sample>],
    /// Workers whose share of the cap was reached.
    pub(crate) full: &'a [usize],
    pub(crate) max_bytes: usize,
    /// The window traced, in ns (`MYRIAD_TRACE_WINDOW`).
    pub(crate) window: Option<Window>,
    pub(crate) process: u32,
    pub(crate) processes: u32,
    /// The job's start in this process, ns since the Unix epoch (what the
    /// merge of several processes' files aligns them by).
    pub(crate) epoch_unix_ns: u64,
}

/// The flow folded into slice `e`: its id, its time (a send's start, a
/// receive's end less 1 ns: inside the slice), whether it ended there.
fn flow_of(e: &Event) -> Option<(u64, u64, bool)> {
    if e.flow == 0 {
        return None;
    }
    let inward = e.flow & FLOW_IN != 0;
    let ts = if inward {
        e.ts + e.dur.saturating_sub(1)
    } else {
        e.ts
    };
    Some((e.flow & !FLOW_IN, ts, inward))
}

/// The line of a flow end.
fn flow_line(id: u64, ts: u64, inward: bool, pid: u32, tid: u64) -> String {
    let (ph, bind) = if inward {
        ("f", ",\"bp\":\"e\"")
    } else {
        ("s", "")
    };
    format!(
        "{{\"ph\":\"{ph}\",\"cat\":\"message\",\"name\":\"message\",\"id\":{id},\"pid\":{pid},\"tid\":{tid},\"ts\":{}{bind}}}",
        Us(ts)
    )
}

/// Cuts `[start, start + dur)` to the window `(lo, hi)`; `None` if they do
/// not meet (a slice that only touches an edge is kept: a zero-length
/// operation at the window's start).
fn clip(start: u64, dur: u64, (lo, hi): (u64, u64)) -> Option<(u64, u64)> {
    let end = start.saturating_add(dur);
    if end < lo || start > hi {
        return None;
    }
    let (s, e) = (start.max(lo), end.min(hi));
    Some((s, e - s))
}

/// Nanoseconds as the microseconds the format counts in (exact: three
/// decimals).
struct Us(u64);

impl std::fmt::Display for Us {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{:03}", self.0 / 1000, self.0 % 1000)
    }
}

/// A JSON string literal.
struct Str<'a>(&'a str);

impl std::fmt::Display for Str<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_char('"')?;
        for c in self.0.chars() {
            match c {
                '"' => f.write_str("\\\"")?,
                '\\' => f.write_str("\\\\")?,
                c if (c as u32) < 0x20 => write!(f, "\\u{:04x}", c as u32)?,
                c => f.write_char(c)?,
            }
        }
        f.write_char('"')
    }
}

/// One line of a track, before sorting.
struct Line {
    ts: u64,
    dur: u64,
    text: String,
}

/// Writes `out` to `path`.
pub(crate) fn write(path: &Path, out: &Output<'_>) -> io::Result<()> {
    let mut file = BufWriter::new(File::create(path)?);
    write_to(&mut file, out)?;
    file.flush()
}

/// Writes `out` as JSON to `w`.
pub(crate) fn write_to(w: &mut impl Write, out: &Output<'_>) -> io::Result<()> {
    let pid = out.process;
    let window = out.window.map_or((0, u64::MAX), |w| (w.start_ns, w.end_ns));
    let in_window = |ts: u64| window.0 <= ts && ts <= window.1;
    // Flows whose both ends are here.
    let mut outs = HashSet::new();
    let mut ins = HashSet::new();
    for log in out.logs {
        for e in log.events.iter() {
            match (e.what(), flow_of(e)) {
                (What::FlowOut, _) if in_window(e.ts) => {
                    outs.insert(e.bytes);
                }
                (What::FlowIn, _) if in_window(e.ts) => {
                    ins.insert(e.bytes);
                }
                (What::Slice(_), Some((id, ts, inward))) if in_window(ts) => {
                    if inward {
                        ins.insert(id);
                    } else {
                        outs.insert(id);
                    }
                }
                _ => {}
            }
        }
    }
    let paired = |id: u64| outs.contains(&id) && ins.contains(&id);

    let mut notes = Vec::new();
    if !out.full.is_empty() {
        notes.push(format!(
            "recording stopped on workers {:?}: their share of the size cap \
             (MYRIAD_TRACE_MAX_MB, {} MiB for the process) was reached; later events are missing",
            out.full,
            out.max_bytes >> 20
        ));
    }
    if let Some(w) = out.window {
        let end = match w.end_ns {
            u64::MAX => "the job's end".to_string(),
            end => format!("{} ms", end as f64 / 1e6),
        };
        notes.push(format!(
            "only the window from {} ms to {end} since the job started is traced \
             (MYRIAD_TRACE_WINDOW): slices crossing its edges are cut at them, flows \
             with an end outside it are left out",
            w.start_ns as f64 / 1e6
        ));
    }
    if out.processes > 1 {
        notes.push(
            "messages between processes have their flow arrows in the merged trace \
             (myriad::merge_traces, or: cargo run --example trace_merge -- OUT FILES...); \
             this file lists their ends in myriadFlows"
                .to_string(),
        );
    }
    write!(
        w,
        "{{\"displayTimeUnit\":\"ns\",\"otherData\":{{\"generator\":\"myriad\",\
         \"process\":{pid},\"processes\":{},\"epoch_unix_ns\":{},\"notes\":[",
        out.processes, out.epoch_unix_ns
    )?;
    for (i, note) in notes.iter().enumerate() {
        write!(w, "{}{}", if i > 0 { "," } else { "" }, Str(note))?;
    }
    writeln!(w, "]}},\"traceEvents\":[")?;
    writeln!(
        w,
        "{{\"ph\":\"M\",\"pid\":{pid},\"tid\":0,\"name\":\"process_name\",\"args\":{{\"name\":{}}}}}",
        Str(&format!("myriad process {pid}"))
    )?;
    if !notes.is_empty() {
        let end = out.logs.iter().map(|l| l.end).max().unwrap_or(0);
        let end = end.clamp(window.0, window.1.max(window.0));
        writeln!(
            w,
            ",{{\"ph\":\"i\",\"s\":\"g\",\"pid\":{pid},\"tid\":0,\"ts\":{},\"name\":{}}}",
            Us(end),
            Str(&notes.join("; "))
        )?;
    }
    let mut named: Option<u64> = None;
    let mut lines: Vec<Line> = Vec::new();
    // Flow ends whose other end is not here (another process's, in a job
    // of several): the merge joins them.
    let mut remote: Vec<String> = Vec::new();
    for (i, log) in out.logs.iter().enumerate() {
        let tid = log.tid;
        let last_of_track = out.logs.get(i + 1).is_none_or(|next| next.tid != tid);
        let Some((start, life)) = clip(log.start, log.end - log.start, window) else {
            // A party wholly outside the window has no track (unless
            // another party of its slot had one).
            if last_of_track {
                flush(w, &mut lines)?;
            }
            continue;
        };
        if named != Some(tid) {
            named = Some(tid);
            let name = if log.task {
                format!(
                    "rank {} task {} (w{})",
                    log.rank,
                    tid - TASK_TID,
                    log.worker
                )
            } else {
                format!("rank {} (w{})", log.rank, log.worker)
            };
            writeln!(
                w,
                ",{{\"ph\":\"M\",\"pid\":{pid},\"tid\":{tid},\"name\":\"thread_name\",\"args\":{{\"name\":{}}}}}",
                Str(&name)
            )?;
            writeln!(
                w,
                ",{{\"ph\":\"M\",\"pid\":{pid},\"tid\":{tid},\"name\":\"thread_sort_index\",\"args\":{{\"sort_index\":{}}}}}",
                ((log.worker as u64) << 34) + tid
            )?;
        }
        let flows = Flows {
            paired: &paired,
            remote: (out.processes > 1).then_some(&mut remote),
        };
        track(log, (start, start + life), window, pid, flows, &mut lines);
        // One track's lines are written together, sorted (tasks reusing a
        // slot share a track, one after the other).
        if last_of_track {
            flush(w, &mut lines)?;
        }
    }
    for (worker, samples) in out.samples.iter().enumerate() {
        for s in samples.iter().filter(|s| in_window(s.ts)) {
            writeln!(
                w,
                ",{{\"ph\":\"C\",\"pid\":{pid},\"tid\":0,\"ts\":{},\"name\":\"worker {worker}\",\
                 \"args\":{{\"runnable\":{},\"eager_bytes\":{}}}}}",
                Us(s.ts),
                s.runnable,
                s.eager_bytes
            )?;
        }
    }
    if out.processes > 1 {
        // After the events: Perfetto stops reading at a key it does not
        // know, the merge reads these.
        writeln!(w, "],\"myriadFlows\":[")?;
        for (i, line) in remote.iter().enumerate() {
            writeln!(w, "{}{line}", if i > 0 { "," } else { "" })?;
        }
    }
    writeln!(w, "]}}")
}

/// Where a track's flow ends go: into the track if both ends are here,
/// else to `remote` (a job of several processes) or nowhere.
struct Flows<'a, F: Fn(u64) -> bool> {
    paired: &'a F,
    remote: Option<&'a mut Vec<String>>,
}

/// The line of slice `op` from `ts` for `dur` (the other arguments
/// from `e`).
fn slice(op: Op, ts: u64, dur: u64, e: &Event, pid: u32, tid: u64) -> String {
    let (cat, args) = match op {
        Op::Send | Op::Receive | Op::Probe | Op::Wait => (
            "p2p",
            format!(
                "\"peer\":{},\"tag\":{},\"bytes\":{}",
                e.peer, e.tag, e.bytes
            ),
        ),
        Op::Collective { algorithm, .. } => (
            "collective",
            format!("\"algorithm\":{},\"bytes\":{}", Str(algorithm), e.bytes),
        ),
        Op::Rma { .. } if e.peer == super::NO_PEER => ("rma", format!("\"bytes\":{}", e.bytes)),
        Op::Rma { .. } => (
            "rma",
            format!("\"target\":{},\"bytes\":{}", e.peer, e.bytes),
        ),
        Op::Park { what, label } => (
            "park",
            format!(
                "\"in\":{},\"label\":{},\"peer\":{},\"tag\":{}",
                Str(what),
                Str(label),
                e.peer,
                e.tag
            ),
        ),
    };
    format!(
        "{{\"ph\":\"X\",\"cat\":\"{cat}\",\"name\":{},\"pid\":{pid},\"tid\":{tid},\"ts\":{},\"dur\":{},\"args\":{{{args}}}}}",
        Str(op.name()),
        Us(ts),
        Us(dur)
    )
}

/// Writes one track's lines, sorted by start (a slice before those it
/// encloses), and empties `lines`.
fn flush(w: &mut impl Write, lines: &mut Vec<Line>) -> io::Result<()> {
    lines.sort_by(|a, b| a.ts.cmp(&b.ts).then(b.dur.cmp(&a.dur)));
    for line in lines.drain(..) {
        writeln!(w, ",{}", line.text)?;
    }
    Ok(())
}

/// The lines of one party's track: its life `(start, end)` (cut to the
/// window), its events within `window`.
fn track(
    log: &PartyLog,
    (start, end): (u64, u64),
    window: (u64, u64),
    pid: u32,
    mut flows: Flows<'_, impl Fn(u64) -> bool>,
    lines: &mut Vec<Line>,
) {
    let tid = log.tid;
    let in_window = |ts: u64| window.0 <= ts && ts <= window.1;
    let mut push = |ts: u64, dur: u64, text: String| lines.push(Line { ts, dur, text });
    let life = end - start;
    push(
        start,
        life,
        format!(
            "{{\"ph\":\"X\",\"cat\":\"rank\",\"name\":\"{}\",\"pid\":{pid},\"tid\":{tid},\"ts\":{},\"dur\":{},\"args\":{{\"rank\":{},\"worker\":{}}}}}",
            if log.task { "task" } else { "rank" },
            Us(start),
            Us(life),
            log.rank,
            log.worker
        ),
    );
    let mut outer: Vec<(u64, u64)> = Vec::new();
    for e in log.events.iter() {
        match e.what() {
            What::Slice(op) => {
                let Some((ts, dur)) = clip(e.ts, e.dur, window) else {
                    continue;
                };
                if e.depth == 0 {
                    outer.push((ts, ts + dur));
                }
                push(ts, dur, slice(op, ts, dur, e, pid, tid));
                // A park folded into the operation it waited in.
                if let (Some(park), Some(start)) = (e.folded_park(), e.park_start()) {
                    let end = e.ts + e.dur;
                    if let Some((ts, dur)) = clip(start, end - start.min(end), window) {
                        push(ts, dur, slice(park, ts, dur, e, pid, tid));
                    }
                }
                if let Some((id, ts, inward)) = flow_of(e).filter(|f| in_window(f.1)) {
                    let line = flow_line(id, ts, inward, pid, tid);
                    if (flows.paired)(id) {
                        push(ts, 0, line);
                    } else if let Some(remote) = &mut flows.remote {
                        remote.push(line);
                    }
                }
            }
            What::FlowOut | What::FlowIn if in_window(e.ts) => {
                let inward = matches!(e.what(), What::FlowIn);
                let line = flow_line(e.bytes, e.ts, inward, pid, tid);
                if (flows.paired)(e.bytes) {
                    // Duration 0: after the slices starting at the same
                    // time (a flow binds to the slice enclosing it).
                    push(e.ts, 0, line);
                } else if let Some(remote) = &mut flows.remote {
                    remote.push(line);
                }
            }
            What::FlowOut | What::FlowIn => {}
        }
    }
    if log.task {
        return;
    }
    // Compute: the rank's time outside its outermost operations.
    outer.sort_unstable();
    let mut at = start;
    for (start, end) in outer.into_iter().chain([(end, end)]) {
        if start > at {
            push(
                at,
                start - at,
                format!(
                    "{{\"ph\":\"X\",\"cat\":\"compute\",\"name\":\"compute\",\"pid\":{pid},\"tid\":{tid},\"ts\":{},\"dur\":{}}}",
                    Us(at),
                    Us(start - at)
                ),
            );
        }
        at = at.max(end);
    }
}
