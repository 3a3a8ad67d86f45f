//! `MYRIAD_TRACE`: the trace file parses as JSON, every slice ends and
//! nests within its track's enclosing slice, timestamps never go back on a
//! track, flows pair up (each start has its finish, both exist), one track
//! per traced rank, `MYRIAD_TRACE_RANKS` and the size cap are honoured, and
//! bad values are errors naming the variable.

mod common;

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;

use myriad::request;
use myriad::traits::*;
use serde_json::Value;

/// A file in the temporary directory for this test.
fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("myriad-{}-{name}.json", std::process::id()))
}

/// Point-to-point (blocking and immediate), probes, collectives: every
/// kind of slice the trace records.
fn program(universe: myriad::environment::Universe) {
    steps(&universe.world());
}

fn steps(world: &myriad::topology::SimpleCommunicator) {
    let (rank, size) = (world.rank(), world.size());
    let next = world.process_at_rank((rank + 1) % size);
    let prev = world.process_at_rank((rank + size - 1) % size);
    for i in 0..3u64 {
        next.send(&(rank as u64 * 10 + i));
        let (v, _) = prev.receive::<u64>();
        assert_eq!(v / 10, ((rank + size - 1) % size) as u64);
    }
    let mut got = 0u64;
    request::scope(|scope| {
        let req = prev.immediate_receive_into(scope, &mut got);
        next.send(&7u64);
        req.wait();
    });
    assert_eq!(got, 7);
    next.send_with_tag(&1u32, 5);
    let status = prev.probe_with_tag(5);
    assert_eq!(status.tag(), 5);
    let _ = prev.receive_with_tag::<u32>(5);
    world.barrier();
    let mut sum = 0u64;
    world.all_reduce_into(
        &(rank as u64),
        &mut sum,
        myriad::collective::SystemOperation::sum(),
    );
    assert_eq!(sum, (0..size as u64).sum::<u64>());
}

struct Trace {
    events: Vec<Value>,
    notes: Vec<String>,
}

fn load(path: &PathBuf) -> Trace {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let _ = std::fs::remove_file(path);
    let json: Value = serde_json::from_str(&text).expect("the trace is JSON");
    let events = json["traceEvents"].as_array().expect("traceEvents").clone();
    let notes = json["otherData"]["notes"]
        .as_array()
        .expect("otherData.notes")
        .iter()
        .map(|n| n.as_str().unwrap().to_string())
        .collect();
    Trace { events, notes }
}

fn track(e: &Value) -> (u64, u64) {
    (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap())
}

/// A time of the file (µs with three decimals) in whole ns.
fn ns(e: &Value, key: &str) -> i64 {
    (e[key].as_f64().expect(key) * 1000.0).round() as i64
}

/// The checks every trace passes; returns the world ranks with a track.
fn check_well_formed(trace: &Trace) -> BTreeSet<u64> {
    let mut last_ts: HashMap<(u64, u64), i64> = HashMap::new();
    // Per track, the ends of the slices that enclose the current time.
    let mut open: HashMap<(u64, u64), Vec<(i64, String)>> = HashMap::new();
    let mut begins: HashMap<(u64, u64), i64> = HashMap::new();
    let mut flow_starts: HashMap<u64, usize> = HashMap::new();
    let mut flow_ends: HashMap<u64, usize> = HashMap::new();
    let mut ranks = BTreeSet::new();
    let mut rank_tracks = 0;
    for e in &trace.events {
        let ph = e["ph"].as_str().expect("ph");
        match ph {
            "M" => {
                if e["name"] == "thread_name" {
                    let name = e["args"]["name"].as_str().unwrap();
                    if name.starts_with("rank ") && !name.contains("task") {
                        rank_tracks += 1;
                        ranks.insert(e["tid"].as_u64().unwrap());
                    }
                }
                continue;
            }
            "C" | "i" => continue,
            _ => {}
        }
        let key = track(e);
        let t = ns(e, "ts");
        let last = last_ts.entry(key).or_insert(i64::MIN);
        assert!(
            t >= *last,
            "time goes back on track {key:?}: {t} after {last}: {e}"
        );
        *last = t;
        match ph {
            "X" => {
                let dur = ns(e, "dur");
                assert!(dur >= 0, "{e}");
                let stack = open.entry(key).or_default();
                // Slices that ended before this one starts are closed.
                while stack.last().is_some_and(|(end, _)| *end <= t) {
                    stack.pop();
                }
                if let Some((end, name)) = stack.last() {
                    assert!(
                        t + dur <= *end,
                        "{e} overlaps the end of its enclosing {name} ({end})"
                    );
                }
                stack.push((t + dur, e["name"].as_str().unwrap().to_string()));
            }
            "B" => *begins.entry(key).or_default() += 1,
            "E" => {
                let b = begins.entry(key).or_default();
                *b -= 1;
                assert!(*b >= 0, "an end without a begin on {key:?}");
            }
            "s" => *flow_starts.entry(e["id"].as_u64().unwrap()).or_default() += 1,
            "f" => {
                assert_eq!(e["bp"], "e", "a flow ends in its enclosing slice");
                *flow_ends.entry(e["id"].as_u64().unwrap()).or_default() += 1
            }
            other => panic!("unexpected event kind {other}: {e}"),
        }
    }
    assert!(begins.values().all(|&b| b == 0), "a begin without its end");
    assert_eq!(
        flow_starts.keys().collect::<BTreeSet<_>>(),
        flow_ends.keys().collect::<BTreeSet<_>>(),
        "every flow start has its finish"
    );
    assert!(flow_starts
        .values()
        .chain(flow_ends.values())
        .all(|&n| n == 1));
    assert_eq!(rank_tracks, ranks.len(), "one track per rank");
    ranks
}

fn names(trace: &Trace) -> BTreeSet<String> {
    trace
        .events
        .iter()
        .filter(|e| e["ph"] == "X")
        .map(|e| e["name"].as_str().unwrap().to_string())
        .collect()
}

fn flows(trace: &Trace) -> usize {
    trace.events.iter().filter(|e| e["ph"] == "s").count()
}

#[test]
fn a_trace_is_well_formed_and_shows_every_operation() {
    let path = temp("well-formed");
    myriad::Runtime::builder()
        .ranks(6)
        .workers(2)
        .trace(&path)
        .run(program)
        .expect("job");
    let trace = load(&path);
    let ranks = check_well_formed(&trace);
    assert_eq!(ranks, (0..6).collect(), "a track per rank");
    let names = names(&trace);
    for name in [
        "rank",
        "compute",
        "send",
        "receive",
        "probe",
        "wait",
        "park",
        "barrier",
        "all_reduce",
    ] {
        assert!(names.contains(name), "no {name} slice in {names:?}");
    }
    // 6 ranks × (3 + 1 + 1) sends, each to a traced rank: a flow each (the
    // all-reduce may add its own).
    assert!(flows(&trace) >= 30, "{} flows", flows(&trace));
    let send = trace
        .events
        .iter()
        .find(|e| e["name"] == "send" && e["args"]["tag"] == 5)
        .expect("the tagged send");
    assert_eq!(send["args"]["bytes"], 4);
    assert_eq!(
        send["args"]["peer"].as_u64().unwrap(),
        (send["tid"].as_u64().unwrap() + 1) % 6
    );
    let barrier = trace
        .events
        .iter()
        .find(|e| e["name"] == "barrier")
        .unwrap();
    assert!(barrier["args"]["algorithm"].is_string(), "{barrier}");
    assert!(
        trace.events.iter().any(|e| e["ph"] == "C"),
        "worker counters"
    );
    assert!(trace.notes.is_empty(), "{:?}", trace.notes);
}

/// One-sided calls are slices of category `rma` with their target and
/// bytes: a put and an exclusive lock on the next rank in a window's life.
#[test]
fn rma_calls_are_slices_with_their_target_and_bytes() {
    use myriad::window::{Epoch, LockType, WindowCreation};
    let path = temp("rma");
    myriad::Runtime::builder()
        .ranks(4)
        .workers(2)
        .trace(&path)
        .run(|universe| {
            let world = universe.world();
            let t = (world.rank() + 1) % world.size();
            let win = world.allocate_window::<u64>(4).unwrap();
            let lock = win.lock(t, LockType::Exclusive).unwrap();
            lock.put(t, 0, &[1, 2, 3]).unwrap();
            lock.unlock();
            let fence = win.fence().unwrap();
            fence.end().unwrap();
            win.free().unwrap();
        })
        .expect("job");
    let trace = load(&path);
    check_well_formed(&trace);
    let rma: Vec<&Value> = trace.events.iter().filter(|e| e["cat"] == "rma").collect();
    let count = |name: &str| rma.iter().filter(|e| e["name"] == name).count();
    for (name, n) in [
        ("win_create", 4),
        ("win_lock", 4),
        ("put", 4),
        ("win_unlock", 4),
        ("win_fence", 8),
        ("win_free", 4),
    ] {
        assert_eq!(count(name), n, "{name} slices in {rma:?}");
    }
    for put in rma.iter().filter(|e| e["name"] == "put") {
        assert_eq!(put["args"]["bytes"], 24, "{put}");
        assert_eq!(
            put["args"]["target"].as_u64().unwrap(),
            (put["tid"].as_u64().unwrap() + 1) % 4,
            "{put}"
        );
    }
}

#[test]
fn trace_ranks_limit_the_tracks_and_flows_stay_paired() {
    let path = temp("ranks");
    myriad::Runtime::builder()
        .ranks(6)
        .workers(2)
        .trace(&path)
        .trace_ranks(&[1..=2, 4..=4])
        .run(program)
        .expect("job");
    let trace = load(&path);
    let ranks = check_well_formed(&trace);
    assert_eq!(ranks, [1, 2, 4].into_iter().collect());
    // Only 1 → 2 has both ends traced: 5 messages.
    assert_eq!(flows(&trace), 5);
}

#[test]
fn the_size_cap_stops_recording_and_says_so() {
    let path = temp("cap");
    myriad::Runtime::builder()
        .ranks(4)
        .workers(2)
        .trace(&path)
        .trace_max_bytes(8 << 10)
        .run(|universe| {
            let world = universe.world();
            for _ in 0..20 {
                steps(&world);
            }
        })
        .expect("job");
    let trace = load(&path);
    check_well_formed(&trace);
    assert_eq!(trace.notes.len(), 1, "{:?}", trace.notes);
    assert!(
        trace.notes[0].contains("MYRIAD_TRACE_MAX_MB"),
        "{:?}",
        trace.notes
    );
    let slices = trace.events.iter().filter(|e| e["ph"] == "X").count();
    assert!(slices < 400, "{slices} slices recorded under an 8 KiB cap");
}

#[test]
fn myriad_trace_writes_the_file() {
    let path = temp("env");
    let Some(_) = common::in_child(
        "myriad_trace_writes_the_file",
        &[
            ("MYRIAD_TRACE", path.to_str().unwrap()),
            ("MYRIAD_TRACE_RANKS", "0,2"),
        ],
        || {
            myriad::Runtime::builder()
                .ranks(3)
                .run(program)
                .expect("job");
        },
    ) else {
        return;
    };
    let trace = load(&path);
    assert_eq!(check_well_formed(&trace), [0, 2].into_iter().collect());
}

#[test]
fn no_trace_unless_asked() {
    let path = temp("none");
    let _ = std::fs::remove_file(&path);
    myriad::Runtime::builder()
        .ranks(2)
        .run(program)
        .expect("job");
    assert!(!path.exists());
}

#[test]
fn each_process_of_a_job_writes_its_own_file_and_the_merge_joins_them() {
    let path = temp("processes");
    let results = myriad::Runtime::builder()
        .trace(&path)
        .run_joined(&[2, 3], program)
        .expect("configuration");
    for result in results {
        result.expect("process");
    }
    let stem = path.file_stem().unwrap().to_str().unwrap().to_string();
    let files: Vec<PathBuf> = (0..2)
        .map(|p| path.with_file_name(format!("{stem}.{p}.json")))
        .collect();
    let merged = temp("merged");
    let summary = myriad::merge_traces(&files, &merged).expect("merge");
    assert_eq!(summary.files, 2);
    let mut in_files = 0;
    for (process, ranks) in [(0u64, vec![0, 1]), (1, vec![2, 3, 4])] {
        let trace = load(&files[process as usize]);
        assert_eq!(check_well_formed(&trace), ranks.into_iter().collect());
        assert!(trace
            .events
            .iter()
            .all(|e| e["pid"].as_u64() == Some(process)));
        assert!(
            trace.notes.iter().any(|n| n.contains("between processes")),
            "{:?}",
            trace.notes
        );
        in_files += flows(&trace);
    }
    assert!(!path.exists(), "no file without a process index");
    let trace = load(&merged);
    assert_eq!(check_well_formed(&trace), (0..5).collect());
    // The ring crosses processes twice (1 → 2 and 4 → 0), 5 messages each:
    // their arrows are in the merged trace only, from one process to the
    // other.
    assert!(summary.flows_joined >= 10, "{summary:?}");
    assert_eq!(flows(&trace), in_files + summary.flows_joined);
    let pid_of = |ph: &str| -> HashMap<u64, u64> {
        trace
            .events
            .iter()
            .filter(|e| e["ph"] == ph)
            .map(|e| (e["id"].as_u64().unwrap(), e["pid"].as_u64().unwrap()))
            .collect()
    };
    let (starts, ends) = (pid_of("s"), pid_of("f"));
    let across = starts.iter().filter(|(id, pid)| ends[*id] != **pid).count();
    assert_eq!(across, summary.flows_joined);
}

#[test]
fn merging_refuses_what_myriad_did_not_write() {
    let bad = temp("not-a-trace");
    std::fs::write(&bad, "{\"traceEvents\":[]}").unwrap();
    let err = myriad::merge_traces(&[&bad], temp("never")).unwrap_err();
    let _ = std::fs::remove_file(&bad);
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
    assert!(
        err.to_string().contains("not a trace written by myriad"),
        "{err}"
    );
}

#[test]
fn a_time_window_keeps_only_its_events_and_cuts_slices_at_its_edges() {
    // The ranks run rounds of the ring before, during and after the
    // window. On a loaded machine the job may not run at all during the
    // window (all its ranks parked, their workers waiting for a CPU), or
    // its ranks may start after the window began: the flows and the cuts
    // at the window's start are checked on a run where every rank started
    // before the window and ran one same round surely inside it (up to 5
    // runs, the last checks regardless); the rest on every run.
    for attempt in 1..=5 {
        if window_run(attempt == 5) {
            return;
        }
    }
}

/// One traced run of `a_time_window_...`; `false` if no round ran surely
/// inside the window (the flows are not checked then, unless `last`).
fn window_run(last: bool) -> bool {
    use std::time::{Duration, Instant};
    let path = temp("window");
    let (lo, hi) = (30_000u64, 60_000u64); // µs
    let (lo_d, hi_d) = (Duration::from_micros(lo), Duration::from_micros(hi));
    // Before the job's clock starts, as each rank's `start` is after it.
    let before = Instant::now();
    let rounds = myriad::Runtime::builder()
        .ranks(4)
        .workers(2)
        .trace(&path)
        .trace_window(lo_d..hi_d)
        .run(|universe| {
            let world = universe.world();
            let start = Instant::now();
            let margin = Duration::from_millis(1);
            // In the job's time, this rank started before `start - before`.
            let early = start - before + margin <= lo_d;
            let mut inside = BTreeSet::new();
            // Until well past the window's end (the job's clock started a
            // little before this rank's), as long as any rank wants.
            for round in 0u64.. {
                let a = Instant::now();
                steps(&world);
                // In the job's time, the round began after `a - start`
                // and ended before `now - before`.
                if a - start >= lo_d + margin && before.elapsed() + margin <= hi_d {
                    inside.insert(round);
                }
                let more = (start.elapsed() < hi_d + Duration::from_millis(20)) as u32;
                let mut any = 0u32;
                world.all_reduce_into(&more, &mut any, myriad::collective::SystemOperation::max());
                if any == 0 {
                    break;
                }
            }
            (early, inside)
        })
        .expect("job");
    // Every rank computes or waits across both edges (its slices there are
    // cut at them) if it started before the window (on a loaded machine,
    // the job's ranks may start after it began).
    let early = rounds.iter().all(|(early, _)| *early);
    let trace = load(&path);
    check_well_formed(&trace);
    assert!(
        trace
            .notes
            .iter()
            .any(|n| n.contains("MYRIAD_TRACE_WINDOW")),
        "{:?}",
        trace.notes
    );
    let (lo_ns, hi_ns) = (lo as i64 * 1000, hi as i64 * 1000);
    let mut at_start = 0;
    let mut at_end = 0;
    for e in trace.events.iter().filter(|e| e["ph"] != "M") {
        let t = ns(e, "ts");
        let end = t + if e["ph"] == "X" { ns(e, "dur") } else { 0 };
        assert!(t >= lo_ns && end <= hi_ns, "outside the window: {e}");
        if e["ph"] == "X" && e["cat"] != "rank" {
            at_start += (t == lo_ns) as usize;
            at_end += (end == hi_ns) as usize;
        }
    }
    assert!(at_end >= 4, "{at_start} {at_end}");
    // A round that every rank ran inside the window: its ring messages
    // have both ends there.
    let mut common = rounds[0].1.clone();
    for (_, r) in &rounds[1..] {
        common.retain(|k| r.contains(k));
    }
    if (common.is_empty() || !early) && !last {
        return false;
    }
    assert!(
        at_start >= 4,
        "{at_start} {at_end} (ranks started early: {early})"
    );
    assert!(
        flows(&trace) > 0,
        "messages inside the window keep their arrows (rounds inside it: {common:?})"
    );
    true
}

#[test]
fn a_trace_into_a_missing_directory_names_the_variable() {
    bad_value(
        "a_trace_into_a_missing_directory_names_the_variable",
        "MYRIAD_TRACE",
        "/nonexistent-myriad-dir/trace.json",
    );
}

#[test]
fn a_bad_trace_window_names_the_variable() {
    bad_value(
        "a_bad_trace_window_names_the_variable",
        "MYRIAD_TRACE_WINDOW",
        "250-100",
    );
}

#[test]
fn an_empty_builder_window_is_an_error() {
    let d = std::time::Duration::from_millis;
    let err = myriad::Runtime::builder()
        .ranks(2)
        .trace_window(d(5)..d(5))
        .run(|_| ())
        .expect_err("an empty window");
    assert!(err.to_string().contains("trace_window"), "{err}");
}

fn bad_value(test: &str, var: &str, value: &str) {
    let Some(_) = common::in_child(test, &[(var, value)], || {
        let err = myriad::Runtime::builder()
            .ranks(2)
            .run(|_| ())
            .expect_err("a bad value must fail the job");
        let var = std::env::vars()
            .find(|(k, _)| k.starts_with("MYRIAD_TRACE"))
            .unwrap()
            .0;
        assert!(err.to_string().contains(&var), "{err}");
    }) else {
        return;
    };
}

#[test]
fn a_bad_trace_ranks_value_names_the_variable() {
    bad_value(
        "a_bad_trace_ranks_value_names_the_variable",
        "MYRIAD_TRACE_RANKS",
        "3-1",
    );
}

#[test]
fn a_bad_trace_size_names_the_variable() {
    bad_value(
        "a_bad_trace_size_names_the_variable",
        "MYRIAD_TRACE_MAX_MB",
        "lots",
    );
}

/// The target: `MYRIAD_TRACE` on 100,000 ranks finishes and the
/// file loads with a track per rank (about 30 s in a debug build:
/// `cargo test --test trace -- --ignored`).
#[test]
#[ignore]
fn a_trace_of_100_000_ranks_loads() {
    let path = temp("100k");
    let n = 100_000;
    myriad::Runtime::builder()
        .ranks(n)
        .trace(&path)
        .stack_size(32 << 10)
        .run(|universe| {
            let world = universe.world();
            let (rank, size) = (world.rank(), world.size());
            if rank % 2 == 0 && rank + 1 < size {
                world.process_at_rank(rank + 1).send(&(rank as u64));
            } else if rank % 2 == 1 {
                let _ = world.process_at_rank(rank - 1).receive::<u64>();
            }
            world.barrier();
        })
        .expect("job");
    let trace = load(&path);
    let ranks = check_well_formed(&trace);
    assert_eq!(ranks.len(), n);
    assert_eq!(flows(&trace), n / 2);
}
