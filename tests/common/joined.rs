//! Jobs of several processes run as threads of one test process, joined
//! by the in-memory loopback transport, by TCP over the loopback
//! interface, or by shared memory (`Runtime::run_joined`,
//! `run_joined_tcp`, `run_joined_shm`).

use std::time::Duration;

use myriad::{Error, Runtime, Universe};

/// `cases!(a, b)`: tests `loopback::a`, `tcp::a`, `shm::a`, ... calling the test
/// file's `fn a(via: Via)` once per transport (the file imports `Via`).
#[allow(unused_macros)] // Only the processes tests use it.
macro_rules! cases {
    ($($name:ident),* $(,)?) => {
        mod loopback {
            $(#[test] fn $name() { super::$name(super::Via::Loopback) })*
        }
        mod tcp {
            $(#[test] fn $name() { super::$name(super::Via::Tcp) })*
        }
        mod shm {
            $(#[test] fn $name() { super::$name(super::Via::Shm) })*
        }
    };
}

/// How long a joined job may take before the test fails as a hang.
pub(crate) const LIMIT: Duration = Duration::from_secs(60);

/// The transport joining the processes.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Via {
    Loopback,
    Tcp,
    /// Shared memory (`Runtime::run_joined_shm`).
    Shm,
}

/// Runs `f` on a job whose process `p` hosts `layout[p]` ranks (2 workers
/// each); each process's result. A job still running after [`LIMIT`]
/// fails the test.
pub(crate) fn joined<T, F>(via: Via, layout: &'static [usize], f: F) -> Vec<Result<Vec<T>, Error>>
where
    T: Send + 'static,
    F: Fn(Universe) -> T + Send + Sync + 'static,
{
    super::within_time_limit("a joined job", LIMIT, move || {
        let rt = Runtime::builder().workers(2);
        match via {
            Via::Loopback => rt.run_joined(layout, f),
            Via::Tcp => rt.run_joined_tcp(layout, f),
            Via::Shm => rt.run_joined_shm(layout, f),
        }
        .expect("the job starts")
    })
}
