//! Merging the trace files of a job's processes into one
//! ([`merge_traces`]), so that a message between processes gets its flow
//! arrow and every process's tracks share one time axis.
//!
//! Design note: each process writes its own file when its part of the job
//! ends (`trace.0.json`, `trace.1.json`, ...; no process waits for the
//! others), with the job's start in Unix time (`otherData.epoch_unix_ns`)
//! and, after its events, the ends of flows whose other end is not in
//! the file (`myriadFlows`; Perfetto stops reading at that unknown key).
//! The merge reads those files line by line — it relies on the writer's
//! layout (`chrome`: one event per line, a track's lines together and
//! sorted by start) rather than parsing JSON, so it needs no JSON
//! library and streams files of any size — shifts each file's times by
//! its start's distance from the earliest, and puts the flow ends whose
//! two ends it found into their tracks, in time order. Processes on one
//! host share the clock; across hosts the alignment is as good as their
//! clocks' synchronisation (NTP: about a millisecond).

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

/// One process's file, read.
struct Input {
    process: u64,
    epoch: u64,
    /// The notes array's contents, as written (JSON strings).
    notes: String,
    events: Vec<String>,
    flows: Vec<String>,
}

fn invalid(path: &Path, why: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{}: {why}", path.display()),
    )
}

/// The number after `"key":` in `line`.
fn number(line: &str, key: &str) -> Option<u64> {
    let at = line.find(&format!("\"{key}\":"))? + key.len() + 3;
    let digits = line[at..]
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(line.len() - at);
    line[at..at + digits].parse().ok()
}

/// The time `"ts":` of an event line, in ns (the file writes µs with
/// three decimals), and where its digits are.
fn ts(line: &str) -> Option<(u64, std::ops::Range<usize>)> {
    let at = line.find("\"ts\":")? + 5;
    let len = line[at..]
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(line.len() - at);
    let text = &line[at..at + len];
    let (us, frac) = text.split_once('.').unwrap_or((text, "0"));
    let frac = format!("{frac:0<3}");
    let ns = us.parse::<u64>().ok()? * 1000 + frac.get(..3)?.parse::<u64>().ok()?;
    Some((ns, at..at + len))
}

fn read(path: &Path) -> io::Result<Input> {
    let text = std::fs::read_to_string(path)?;
    let mut lines = text.lines();
    let header = lines.next().unwrap_or("");
    const START: &str = "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"generator\":\"myriad\"";
    const END: &str = "]},\"traceEvents\":[";
    if !header.starts_with(START) || !header.ends_with(END) {
        return Err(invalid(
            path,
            "not a trace written by myriad (MYRIAD_TRACE)",
        ));
    }
    let (Some(process), Some(epoch)) = (number(header, "process"), number(header, "epoch_unix_ns"))
    else {
        return Err(invalid(
            path,
            "the trace has no process index or start time (written by an older myriad?)",
        ));
    };
    let notes_at = header
        .find("\"notes\":[")
        .ok_or_else(|| invalid(path, "no notes"))?;
    let notes = header[notes_at + 9..header.len() - END.len()].to_string();
    let mut events = Vec::new();
    let mut flows = Vec::new();
    let mut in_flows = false;
    let mut ended = false;
    for line in lines {
        match line {
            "]" | "]}" if !in_flows => {
                ended = true;
                break;
            }
            "],\"myriadFlows\":[" => in_flows = true,
            "]}" => {
                ended = true;
                break;
            }
            line => {
                let line = line.strip_prefix(',').unwrap_or(line).to_string();
                if in_flows {
                    flows.push(line);
                } else {
                    events.push(line);
                }
            }
        }
    }
    if !ended {
        return Err(invalid(path, "the trace is cut short"));
    }
    Ok(Input {
        process,
        epoch,
        notes,
        events,
        flows,
    })
}

/// `line` with its time moved `offset` ns later.
fn shifted(line: &str, offset: u64) -> String {
    match ts(line) {
        Some((ns, at)) if offset != 0 => {
            let ns = ns + offset;
            format!(
                "{}{}.{:03}{}",
                &line[..at.start],
                ns / 1000,
                ns % 1000,
                &line[at.end..]
            )
        }
        _ => line.to_string(),
    }
}

/// Merges the trace files `inputs`, written by the processes of one job
/// (`MYRIAD_TRACE=trace.json` in a job of several processes writes
/// `trace.0.json`, `trace.1.json`, ...), into one file `output` that
/// Perfetto opens: every process's tracks on one time axis (each file's
/// times moved by its process's start), and flow arrows for the messages
/// between processes (each file lists the ends it could not pair). Flows
/// with an end in no input are left out.
///
/// Errors: a file that cannot be read, or that is not a trace myriad
/// wrote (`InvalidData`, naming the file); two files of one process.
///
/// ```no_run
/// myriad::merge_traces(&["trace.0.json", "trace.1.json"], "trace.json").unwrap();
/// ```
pub fn merge_traces(
    inputs: &[impl AsRef<Path>],
    output: impl AsRef<Path>,
) -> io::Result<MergeSummary> {
    let mut files = Vec::new();
    for path in inputs {
        files.push(read(path.as_ref())?);
    }
    files.sort_by_key(|f| f.process);
    if let Some(w) = files.windows(2).find(|w| w[0].process == w[1].process) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("two trace files of process {}", w[0].process),
        ));
    }
    let epoch = files.iter().map(|f| f.epoch).min().unwrap_or(0);
    // The flows both of whose ends are in some file.
    let mut starts = HashSet::new();
    let mut finishes = HashSet::new();
    for file in &files {
        for line in &file.flows {
            let Some(id) = number(line, "id") else {
                continue;
            };
            if line.contains("\"ph\":\"s\"") {
                starts.insert(id);
            } else {
                finishes.insert(id);
            }
        }
    }
    let joined: HashSet<u64> = starts.intersection(&finishes).copied().collect();

    let mut w = BufWriter::new(File::create(output.as_ref())?);
    let notes: Vec<&str> = files
        .iter()
        .map(|f| f.notes.as_str())
        .filter(|n| !n.is_empty())
        .collect();
    write!(
        w,
        "{{\"displayTimeUnit\":\"ns\",\"otherData\":{{\"generator\":\"myriad\",\
         \"merged\":{},\"epoch_unix_ns\":{epoch},\"notes\":[{}]}},\"traceEvents\":[",
        files.len(),
        notes.join(",")
    )?;
    let mut first = true;
    let mut emit = |w: &mut BufWriter<File>, line: &str| -> io::Result<()> {
        let sep = if first { "\n" } else { "\n," };
        first = false;
        write!(w, "{sep}{line}")
    };
    for file in &files {
        let offset = file.epoch - epoch;
        // This file's joined flow ends by track, latest first (popped in
        // time order).
        let mut by_track: HashMap<u64, Vec<(u64, String)>> = HashMap::new();
        for line in &file.flows {
            let (Some(id), Some(tid), Some((ns, _))) =
                (number(line, "id"), number(line, "tid"), ts(line))
            else {
                continue;
            };
            if joined.contains(&id) {
                by_track
                    .entry(tid)
                    .or_default()
                    .push((ns, shifted(line, offset)));
            }
        }
        for flows in by_track.values_mut() {
            flows.sort_by_key(|f| std::cmp::Reverse(f.0));
        }
        let mut track: Option<u64> = None;
        for line in &file.events {
            // Metadata, counters and notes (`tid` 0 too) are not a
            // track's lines.
            let on_track = ["\"ph\":\"X\"", "\"ph\":\"s\"", "\"ph\":\"f\""]
                .iter()
                .any(|ph| line.contains(ph));
            if !on_track {
                emit(&mut w, &shifted(line, offset))?;
                continue;
            }
            let tid = number(line, "tid");
            if tid != track {
                // Leaving a track: the rest of its flow ends.
                if let Some(rest) = track.and_then(|t| by_track.remove(&t)) {
                    for (_, flow) in rest.into_iter().rev() {
                        emit(&mut w, &flow)?;
                    }
                }
                track = tid;
            }
            if let (Some(t), Some((ns, _))) = (tid, ts(line)) {
                // Flow ends before this line's start (a flow end goes after
                // the slices starting at its time).
                if let Some(flows) = by_track.get_mut(&t) {
                    while flows.last().is_some_and(|(at, _)| *at < ns) {
                        let (_, flow) = flows.pop().expect("just looked");
                        emit(&mut w, &flow)?;
                    }
                }
            }
            emit(&mut w, &shifted(line, offset))?;
        }
        let mut rest: Vec<(u64, Vec<(u64, String)>)> = by_track.into_iter().collect();
        rest.sort_by_key(|(tid, _)| *tid);
        for (_, flows) in rest {
            for (_, flow) in flows.into_iter().rev() {
                emit(&mut w, &flow)?;
            }
        }
    }
    writeln!(w, "\n]}}")?;
    w.flush()?;
    Ok(MergeSummary {
        files: files.len(),
        flows_joined: joined.len(),
    })
}

/// What [`merge_traces`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MergeSummary {
    /// The files merged.
    pub files: usize,
    /// Messages between processes whose arrows the merge drew.
    pub flows_joined: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_and_shift_exactly() {
        let line = r#"{"ph":"X","pid":0,"tid":3,"ts":12.345,"dur":1.000}"#;
        assert_eq!(ts(line).unwrap().0, 12_345);
        assert_eq!(
            shifted(line, 1_000_001),
            r#"{"ph":"X","pid":0,"tid":3,"ts":1012.346,"dur":1.000}"#
        );
        assert_eq!(number(line, "tid"), Some(3));
        assert_eq!(number(line, "id"), None);
    }
}
