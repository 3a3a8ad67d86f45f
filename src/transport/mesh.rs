//! The connection mesh.

/// The version of the bytes processes exchange over TCP: part of the
/// handshake and of the build id, so processes that frame messages
/// differently never join one job.
pub(crate) const WIRE_VERSION: u32 = 1;

/// What proves that a connection comes from a process of this job.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Credentials {
    /// Identifies the program's build (`launch::build_id`): processes of
    /// different builds are refused.
    pub(crate) build: u64,
    /// The job's secret, made by process 0 and shared through the
    /// launcher's key-value space.
    pub(crate) secret: [u8; 16],
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the secret.
        f.debug_struct("Credentials")
            .field("build", &format_args!("{:016x}", self.build))
            .finish_non_exhaustive()
    }
}
