//! The thread level of a rank (MPI's `MPI_THREAD_*`): the scheduler records
//! it per rank and decides by it whether an OS thread may act for the rank
//! (`sched::thread`). Public as `myriad::environment::Threading`.

/// MPI's thread-support levels (`MPI_THREAD_*`), ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Threading {
    /// Only the rank itself calls MPI, and it has no other threads.
    Single,
    /// The rank may have threads, but only the rank itself calls MPI.
    Funneled,
    /// Any thread of the rank may call MPI, one at a time.
    Serialized,
    /// Any thread of the rank may call MPI at any time.
    Multiple,
}

impl Threading {
    /// Every level, lowest first.
    pub const ALL: [Threading; 4] = [
        Threading::Single,
        Threading::Funneled,
        Threading::Serialized,
        Threading::Multiple,
    ];

    /// The level's name as it is displayed and parsed (`MYRIAD_THREADING`).
    pub fn name(self) -> &'static str {
        match self {
            Threading::Single => "single",
            Threading::Funneled => "funneled",
            Threading::Serialized => "serialized",
            Threading::Multiple => "multiple",
        }
    }
}

impl std::fmt::Display for Threading {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Threading {
    type Err = String;

    fn from_str(s: &str) -> Result<Threading, String> {
        let t = s.trim().to_ascii_lowercase();
        let t = t.strip_prefix("mpi_thread_").unwrap_or(&t);
        Threading::ALL
            .into_iter()
            .find(|l| l.name() == t)
            .ok_or_else(|| {
                format!(
                    "unknown thread level {s:?}; expected single, funneled, serialized or multiple"
                )
            })
    }
}
