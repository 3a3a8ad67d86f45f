//! Merges the trace files of a job's processes into one file that
//! Perfetto opens, with flow arrows for the messages between processes
//! (`myriad::merge_traces`).
//!
//! ```text
//! MYRIAD_TRACE=trace.json cargo run --release --example pingpong -- --processes 2 --iters 0.01
//! cargo run --release --example trace_merge -- trace.json trace.0.json trace.1.json
//! ```
//!
//! Arguments: the output file, then the processes' files.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 2 {
        eprintln!("usage: trace_merge OUTPUT INPUT...");
        std::process::exit(2);
    }
    match myriad::merge_traces(&args[1..], &args[0]) {
        Ok(summary) => println!(
            "{}: {} files, {} messages between processes joined",
            args[0], summary.files, summary.flows_joined
        ),
        Err(err) => {
            eprintln!("trace_merge: {err}");
            std::process::exit(1);
        }
    }
}
