//! The panic hook that attributes a panic to the rank that raised it.
//!
//! Installed once per process, chaining to the previous hook for panics
//! outside ranks. A rank's panic is not printed: its message and location go
//! into the job's error (`Error::Panic`), which `run` returns and `launch`
//! prints. With `RUST_BACKTRACE` set, the backtrace is appended.

use std::backtrace::{Backtrace, BacktraceStatus};
use std::panic;
use std::sync::Once;

use crate::sched::{self, worker};

pub(crate) fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if sched::rank::with_current(|ctx| ctx.is_none()) {
                previous(info);
                return;
            }
            let mut message = worker::payload_message(info.payload());
            if let Some(location) = info.location() {
                message = format!(
                    "{message} (at {}:{}:{})",
                    location.file(),
                    location.line(),
                    location.column()
                );
            }
            let backtrace = Backtrace::capture();
            if backtrace.status() == BacktraceStatus::Captured {
                message = format!("{message}\nbacktrace:\n{backtrace}");
            }
            worker::record_panic(message);
        }));
    });
}
