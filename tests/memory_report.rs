//! `MYRIAD_REPORT_MEMORY=1`: the report's lines parse, a rank that touches
//! more stack shows more stack, an unreceived message shows as unexpected,
//! the totals add up, and a bad value is an error naming the variable. Each
//! job runs in a child process (the variable is process-global).

mod common;

use std::collections::HashMap;

use myriad::traits::*;

myriad::rank_local! {
    /// A per-rank table, created only by rank 3.
    static TABLE: [u64; 512] = [3; 512];
}

/// Stack one rank touches on top of what every rank touches.
const DEEP: usize = 128 * 1024;
/// What rank 2 recurses through beyond [`DEEP`]: the stack the other ranks
/// touch of their own (rank 3's 4 KiB table initialiser, copied on its
/// stack in debug builds; the closure's frame, which grows with what is
/// inlined into it), so that the comparison measures the report, not how
/// the frames of the day fall on pages.
const HEADROOM: usize = 32 * 1024;

#[inline(never)]
fn recurse(depth: usize, sink: &mut [u8; 1024]) -> u8 {
    let mut local = [depth as u8; 1024];
    std::hint::black_box(&mut local);
    sink[0] = sink[0].wrapping_add(local[3]);
    if depth == 0 {
        return sink[0];
    }
    recurse(depth - 1, &mut local).wrapping_add(1)
}

/// Four ranks on one worker, with no barrier, so that each runs to its end
/// before the next starts and they reuse one stack (rank 3 runs on the
/// stack rank 2 deepened: its figure must not include rank 2's pages);
/// rank 2 recurses through `DEEP + HEADROOM` bytes of locals; rank 0 sends rank 1 a
/// message of 1000 bytes (eager: the send completes) that nobody receives;
/// rank 3 creates one `rank_local!` value of 4 KiB.
fn job() {
    myriad::Runtime::builder()
        .ranks(4)
        .workers(1)
        .run(|universe| {
            let world = universe.world();
            if world.rank() == 2 {
                let mut sink = [0u8; 1024];
                std::hint::black_box(recurse((DEEP + HEADROOM) / 1024, &mut sink));
            }
            if world.rank() == 3 {
                assert_eq!(TABLE.with(|t| t[511]), 3);
            }
            if world.rank() == 0 {
                world.process_at_rank(1).send_with_tag(&[7u8; 1000][..], 99);
            }
        })
        .expect("job failed");
}

/// The `key=value` fields of each `[myriad] memory` line, by its first key
/// (`ranks`, `rank`, `summary`, `total`).
fn parse(stderr: &str) -> Vec<(String, HashMap<String, String>)> {
    stderr
        .lines()
        .filter_map(|line| line.strip_prefix("[myriad] memory "))
        .map(|rest| {
            let mut kind = None;
            let mut fields = HashMap::new();
            for word in rest.split_whitespace() {
                match word.split_once('=') {
                    Some((k, v)) => {
                        kind.get_or_insert_with(|| k.to_string());
                        fields.insert(k.to_string(), v.to_string());
                    }
                    None => kind = Some(word.to_string()),
                }
            }
            (kind.expect("a line has fields"), fields)
        })
        .collect()
}

fn num(fields: &HashMap<String, String>, key: &str) -> usize {
    fields[key]
        .parse()
        .unwrap_or_else(|_| panic!("{key}: {fields:?}"))
}

#[test]
#[cfg_attr(
    feature = "sanitizer",
    ignore = "under ASan a function's locals live on its fake stack, not the rank's stack"
)]
fn memory_report_shows_stack_depth_and_adds_up() {
    let Some(stderr) = common::in_child(
        "memory_report_shows_stack_depth_and_adds_up",
        &[("MYRIAD_REPORT_MEMORY", "1")],
        job,
    ) else {
        return;
    };
    let lines = parse(&stderr);
    let head = &lines.iter().find(|(k, _)| k == "ranks").expect(&stderr).1;
    assert_eq!(num(head, "ranks"), 4);
    assert!(num(head, "rss") > 0 && num(head, "rss_peak") >= num(head, "rss"));
    let ranks: Vec<_> = lines
        .iter()
        .filter(|(k, _)| k == "rank")
        .map(|l| &l.1)
        .collect();
    assert_eq!(ranks.len(), 4, "{stderr}");
    let stack = |r: usize| num(ranks[r], "stack");
    for r in [0, 1, 3] {
        assert!(stack(r) > 0, "rank {r} touched no stack: {stderr}");
        assert!(
            stack(2) >= stack(r) + DEEP,
            "rank 2 recursed through {DEEP} bytes more than rank {r}: {stderr}"
        );
    }
    assert!(stack(2) <= num(head, "stack_size"), "{stderr}");
    assert_eq!(num(ranks[1], "unexpected"), 1, "{stderr}");
    assert_eq!(num(ranks[1], "unexpected_bytes"), 1000, "{stderr}");
    for (r, fields) in ranks.iter().enumerate() {
        let (count, bytes) = if r == 3 { (1, 4096) } else { (0, 0) };
        assert_eq!(num(fields, "locals"), count, "rank {r}: {stderr}");
        assert_eq!(num(fields, "locals_bytes"), bytes, "rank {r}: {stderr}");
    }
    let total = &lines.iter().find(|(k, _)| k == "total").expect(&stderr).1;
    for key in [
        "stack",
        "mailbox",
        "unexpected",
        "unexpected_bytes",
        "locals",
        "locals_bytes",
    ] {
        let sum: usize = ranks.iter().map(|r| num(r, key)).sum();
        assert_eq!(num(total, key), sum, "total {key}: {stderr}");
    }
    let accounted = [
        "stack",
        "mailbox",
        "unexpected_bytes",
        "locals_bytes",
        "eager_bytes",
        "hls_bytes",
    ]
    .iter()
    .map(|k| num(total, k))
    .sum::<usize>();
    assert_eq!(num(total, "accounted"), accounted, "{stderr}");
}

#[test]
fn no_memory_report_unless_asked() {
    let Some(stderr) = common::in_child("no_memory_report_unless_asked", &[], job) else {
        return;
    };
    assert!(!stderr.contains("[myriad] memory"), "{stderr}");
}

#[test]
fn a_bad_memory_report_value_names_the_variable() {
    let Some(_) = common::in_child(
        "a_bad_memory_report_value_names_the_variable",
        &[("MYRIAD_REPORT_MEMORY", "sometimes")],
        || {
            let err = myriad::Runtime::builder()
                .ranks(2)
                .run(|_| ())
                .expect_err("a bad MYRIAD_REPORT_MEMORY must fail the job");
            assert!(err.to_string().contains("MYRIAD_REPORT_MEMORY"), "{err}");
        },
    ) else {
        return;
    };
}

static SHARED: myriad::hls::Hls<u64> = myriad::hls::Hls::new(myriad::hls::HlsLevel::Process);

#[test]
fn memory_report_counts_hls_values() {
    let Some(stderr) = common::in_child(
        "memory_report_counts_hls_values",
        &[("MYRIAD_REPORT_MEMORY", "1")],
        || {
            myriad::Runtime::builder()
                .ranks(3)
                .workers(1)
                .run(|_| {
                    SHARED.single(|_| 5);
                    assert_eq!(SHARED.with(|v| *v), 5);
                })
                .expect("job failed");
        },
    ) else {
        return;
    };
    let lines = parse(&stderr);
    let total = &lines.iter().find(|(k, _)| k == "total").expect(&stderr).1;
    assert_eq!(num(total, "hls_values"), 1, "{stderr}");
    assert!(num(total, "hls_bytes") >= 8, "{stderr}");
}

/// This test binary runs on myriad-alloc, whose figures the report shows
/// when the program passes them.
#[global_allocator]
static ALLOC: myriad_alloc::MyriadAlloc = myriad_alloc::MyriadAlloc;

fn allocator_figures() -> Vec<(&'static str, u64)> {
    let s = myriad_alloc::stats();
    vec![("in_use", s.in_use), ("mapped", s.mapped)]
}

#[test]
fn memory_report_shows_the_programs_allocator_figures() {
    let Some(stderr) = common::in_child(
        "memory_report_shows_the_programs_allocator_figures",
        &[("MYRIAD_REPORT_MEMORY", "1")],
        || {
            myriad::Runtime::builder()
                .ranks(2)
                .allocator_statistics(allocator_figures)
                .run(|_| std::hint::black_box(vec![1u8; 1 << 20]).len())
                .expect("job failed");
        },
    ) else {
        return;
    };
    let lines = parse(&stderr);
    let alloc = &lines
        .iter()
        .find(|(k, _)| k == "allocator")
        .expect(&stderr)
        .1;
    assert!(num(alloc, "in_use") > 0, "{stderr}");
    assert!(num(alloc, "mapped") >= num(alloc, "in_use"), "{stderr}");
}

#[test]
fn each_process_of_a_joined_job_reports_its_own_ranks() {
    let Some(stderr) = common::in_child(
        "each_process_of_a_joined_job_reports_its_own_ranks",
        &[("MYRIAD_REPORT_MEMORY", "1")],
        || {
            let results = myriad::Runtime::builder()
                .workers(1)
                .run_joined(&[2, 3], |universe| universe.world().rank())
                .expect("configuration");
            for result in results {
                result.expect("process failed");
            }
        },
    ) else {
        return;
    };
    let lines = parse(&stderr);
    let mut heads: Vec<(usize, usize)> = lines
        .iter()
        .filter(|(k, _)| k == "ranks")
        .map(|(_, f)| (num(f, "process"), num(f, "ranks")))
        .collect();
    heads.sort_unstable();
    assert_eq!(heads, [(0, 2), (1, 3)], "{stderr}");
    let mut ranks: Vec<usize> = lines
        .iter()
        .filter(|(k, _)| k == "rank")
        .map(|(_, f)| num(f, "rank"))
        .collect();
    ranks.sort_unstable();
    assert_eq!(ranks, [0, 1, 2, 3, 4], "world ranks, once each: {stderr}");
}
