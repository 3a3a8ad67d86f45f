//! The bootstrap session: the PMI connection kept open for the job's life,
//! and the collective operations the processes of a job need from it
//! before they have a network of their own.
//!
//! ## Allgather over a key-value space
//!
//! PMI offers put, fence and get. [`Session::allgather`] is one epoch:
//! every process puts its value under `{name}.{epoch}.{process}` (and,
//! where the value is longer than the server's value limit, further chunks
//! under `{name}.{epoch}.{process}.{i}`), fences, and gets every process's
//! keys. The first chunk starts with the chunk count (`3/...`).
//!
//! Keys carry the epoch because a fast process may put its next value
//! while a slow one still reads the last: with one key per name, the slow
//! one could read the new value (PMI keeps only the last put). Every
//! process counts epochs the same way, because each allgather is called by
//! every process in the same order (as a collective is).
//!
//! Values travel as PMI text: no spaces, `;`, newlines or NULs (checked,
//! an error names the byte), and they are split at the server's value
//! limit (1023 bytes under Hydra) on character boundaries.
//!
//! ## PMI or PMIx
//!
//! The session speaks either: [`Kvs`] is the client underneath. PMIx
//! (feature `pmix`, `pmix.rs`) has the same put, fence and get, except that
//! a key belongs to the process that put it, so a get names its owner (PMI
//! ignores the owner: its keys already carry the process). The same keys,
//! epochs and checks serve both, so a program behaves alike under
//! `mpiexec` and Open MPI's `mpirun`.

use super::pmi::Client;
#[cfg(feature = "pmix")]
use super::pmix;
use super::wire;
use crate::error::LaunchError;

/// The longest allgather name: its keys `name.epoch.process.chunk` stay
/// within PMI's 63 bytes.
const MAX_NAME: usize = 32;

/// The client a session runs over.
#[derive(Debug)]
pub(crate) enum Kvs {
    /// PMI-1 or PMI-2 (`mpiexec`, `srun --mpi=pmi2`, the built-in launcher).
    Pmi(Client),
    /// PMIx (Open MPI's `mpirun`, `srun --mpi=pmix`).
    #[cfg(feature = "pmix")]
    Pmix(pmix::Client),
}

impl Kvs {
    fn rank(&self) -> u32 {
        match self {
            Kvs::Pmi(c) => c.rank(),
            #[cfg(feature = "pmix")]
            Kvs::Pmix(c) => c.rank(),
        }
    }

    fn size(&self) -> u32 {
        match self {
            Kvs::Pmi(c) => c.size(),
            #[cfg(feature = "pmix")]
            Kvs::Pmix(c) => c.size(),
        }
    }

    /// The largest value in bytes.
    fn value_max(&self) -> usize {
        match self {
            Kvs::Pmi(c) => c.limits().1,
            // No limit of its own: values go in one piece.
            #[cfg(feature = "pmix")]
            Kvs::Pmix(_) => usize::MAX,
        }
    }

    fn put(&mut self, key: &str, value: &str) -> Result<(), LaunchError> {
        match self {
            Kvs::Pmi(c) => c.put(key, value),
            #[cfg(feature = "pmix")]
            Kvs::Pmix(c) => c.put(key, value),
        }
    }

    fn fence(&mut self) -> Result<(), LaunchError> {
        match self {
            Kvs::Pmi(c) => c.fence(),
            #[cfg(feature = "pmix")]
            Kvs::Pmix(c) => c.fence(),
        }
    }

    /// The value of `key`, which process `owner` put.
    fn get(&mut self, owner: u32, key: &str) -> Result<String, LaunchError> {
        match self {
            Kvs::Pmi(c) => {
                let _ = owner;
                c.get(key)
            }
            #[cfg(feature = "pmix")]
            Kvs::Pmix(c) => c.get(owner, key),
        }
    }
}

/// The PMI connection of a job's process, open until [`finalize`](Self::finalize).
#[derive(Debug)]
pub(crate) struct Session {
    client: Kvs,
    /// Allgathers so far: part of every key.
    epoch: u32,
}

impl Session {
    /// A session over a started PMI client.
    pub(crate) fn new(client: Client) -> Session {
        Session::over(Kvs::Pmi(client))
    }

    /// A session over a started client of either kind.
    pub(crate) fn over(client: Kvs) -> Session {
        Session { client, epoch: 0 }
    }

    /// This process's index in the launcher's job.
    pub(crate) fn process(&self) -> u32 {
        self.client.rank()
    }

    /// The launcher's process count.
    pub(crate) fn processes(&self) -> u32 {
        self.client.size()
    }

    /// This process's index among the job's processes on its host, where
    /// the client learns it from the server (PMIx's `PMIX_LOCAL_RANK`);
    /// `None` under PMI, whose launchers set variables instead.
    pub(crate) fn local_process(&self) -> Option<u32> {
        match &self.client {
            Kvs::Pmi(_) => None,
            #[cfg(feature = "pmix")]
            Kvs::Pmix(c) => c.local_rank(),
        }
    }

    /// Every process's `value`, by process index: a collective (each
    /// process calls it, in the same order as the others). `name` tells
    /// the epoch's purpose and becomes part of its keys (at most 32 bytes,
    /// PMI key text).
    pub(crate) fn allgather(
        &mut self,
        name: &str,
        value: &str,
    ) -> Result<Vec<String>, LaunchError> {
        wire::check_text("key", name, true)?;
        if name.len() > MAX_NAME {
            return Err(LaunchError::TooLong {
                what: "allgather name",
                len: name.len(),
                max: MAX_NAME,
                limit: "room for the epoch and process in a PMI key".to_string(),
            });
        }
        if name.contains('.') {
            return Err(LaunchError::BadByte {
                what: "allgather name",
                text: crate::error::shorten(name),
                byte: '.',
            });
        }
        wire::check_text("value", value, false)?;
        let epoch = self.epoch;
        self.epoch += 1;
        let value_max = self.client.value_max();
        // Room for the count prefix `n/` in the first chunk.
        let chunks = split(value, value_max.saturating_sub(12).max(1));
        let this = self.process();
        let base = format!("{name}.{epoch}.{this}");
        self.client
            .put(&base, &format!("{}/{}", chunks.len(), chunks[0]))?;
        for (i, chunk) in chunks.iter().enumerate().skip(1) {
            self.client.put(&format!("{base}.{i}"), chunk)?;
        }
        self.client.fence()?;
        let mut all = Vec::with_capacity(self.processes() as usize);
        for p in 0..self.processes() {
            let base = format!("{name}.{epoch}.{p}");
            let first = self.client.get(p, &base)?;
            let malformed = || LaunchError::Malformed {
                command: "get".to_string(),
                problem: format!("the value of {base} does not start with a chunk count"),
                reply: crate::error::shorten(&first),
            };
            let (count, head) = first.split_once('/').ok_or_else(malformed)?;
            let count: usize = count.parse().map_err(|_| malformed())?;
            if count == 0 {
                return Err(malformed());
            }
            let mut value = head.to_string();
            for i in 1..count {
                value.push_str(&self.client.get(p, &format!("{base}.{i}"))?);
            }
            all.push(value);
        }
        Ok(all)
    }

    /// Waits until every process of the job has called it.
    pub(crate) fn barrier(&mut self) -> Result<(), LaunchError> {
        match &mut self.client {
            Kvs::Pmi(c) => c.barrier(),
            #[cfg(feature = "pmix")]
            Kvs::Pmix(c) => c.barrier(),
        }
    }

    /// Tells the launcher this process is done (a process that exits
    /// without it is a failed one to Hydra).
    pub(crate) fn finalize(self) -> Result<(), LaunchError> {
        match self.client {
            Kvs::Pmi(c) => c.finalize(),
            #[cfg(feature = "pmix")]
            Kvs::Pmix(c) => c.finalize(),
        }
    }

    /// Asks the launcher to end the whole job with `exit_code`.
    #[allow(dead_code)] // For the glue: a failing process ends the job (issue 9).
    pub(crate) fn abort(self, exit_code: i32, message: &str) -> Result<(), LaunchError> {
        match self.client {
            Kvs::Pmi(c) => c.abort(exit_code, message),
            #[cfg(feature = "pmix")]
            Kvs::Pmix(c) => c.abort(exit_code, message),
        }
    }
}

/// `value` in pieces of at most `max` bytes, cut at character boundaries
/// (at least one piece, maybe empty).
fn split(value: &str, max: usize) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut rest = value;
    while rest.len() > max {
        let mut end = max;
        while !rest.is_char_boundary(end) {
            end -= 1;
        }
        if end == 0 {
            // A character longer than `max`: take it whole.
            end = rest.chars().next().map_or(rest.len(), char::len_utf8);
        }
        pieces.push(&rest[..end]);
        rest = &rest[end..];
    }
    if !rest.is_empty() || pieces.is_empty() {
        pieces.push(rest);
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::split;

    #[test]
    fn values_split_at_the_limit_on_character_boundaries() {
        assert_eq!(split("", 4), vec![""]);
        assert_eq!(split("abcd", 4), vec!["abcd"]);
        assert_eq!(split("abcdefghi", 4), vec!["abcd", "efgh", "i"]);
        assert_eq!(split("aé€b", 3), vec!["aé", "€", "b"]);
        assert_eq!(split("€€", 1), vec!["€", "€"]);
        let long = "x".repeat(5000);
        let pieces = split(&long, 1011);
        assert_eq!(pieces.len(), 5);
        assert_eq!(pieces.concat(), long);
    }
}
