//! loom models of the concurrency primitives of myriad and myriad-alloc.
//!
//! The models only build with `RUSTFLAGS="--cfg loom"` (use a separate
//! target directory: the flag rebuilds every dependency):
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target-loom cargo test -p loom-tests --release
//! ```
//!
//! myriad's protocol modules depend on nothing but `crate::sync`, so they are
//! compiled here, by path, against loom's atomics and cells: the model tests
//! the very code the runtime runs. (loom cannot model a stackful context
//! switch, so a rank's suspension is modelled as a blocked loom thread.)
//! The mailbox claim/withdraw protocol (`src/p2p/claim.rs`) is modelled in
//! `claim_models`; the ring of collective rounds (`src/coll/ring.rs`) in
//! `ring_models`; arrivals in a round counted by worker
//! (`src/coll/census.rs`) in `census_models`; the progress thread standing aside for polling workers
//! (`src/p2p/pollers.rs`) in `pollers_models`; the shared-memory ring between
//! processes and its sleep/wake flags (`src/transport/shm/ring.rs`) in
//! `shm_ring_models`; a large copy shared by its reader and its lender
//! (`src/transport/shm/split.rs`) in `shm_split_models`. A collective's wake-up handed to another worker
//! (`Round::wake_all`, `sched::unpark_on`), the workers' sleep and the
//! deadlock check, end to end, in `wake_models`. The hand-over from a
//! one-worker job's solo mode (plain loads and stores on park states and
//! mailbox locks) to read-modify-writes, in `solo_models`. A small message
//! left in its blocking receiver's mailbox line (the lock word's flags,
//! `src/sync/spin.rs`), in `resident_models`.
//! myriad-alloc's remote-free list is modelled in `tests/alloc_remote_free.rs`.

#[cfg(loom)]
#[allow(dead_code, unreachable_pub)]
#[path = "../../src/sync/mod.rs"]
mod sync;

#[cfg(loom)]
#[allow(dead_code)]
#[path = "../../src/sched/park.rs"]
mod park;

#[cfg(loom)]
#[allow(dead_code)]
#[path = "../../src/sched/idle.rs"]
mod idle;

#[cfg(loom)]
#[allow(dead_code)]
#[path = "../../src/p2p/completion.rs"]
mod completion;

#[cfg(loom)]
#[allow(dead_code)]
#[path = "../../src/p2p/claim.rs"]
mod claim;

#[cfg(loom)]
#[allow(dead_code)]
#[path = "../../src/sched/join.rs"]
mod join;

#[cfg(loom)]
#[allow(dead_code)]
#[path = "../../src/coll/published.rs"]
mod published;

#[cfg(loom)]
#[allow(dead_code)]
#[path = "../../src/coll/ring.rs"]
mod ring;

#[cfg(loom)]
#[allow(dead_code)]
#[path = "../../src/coll/census.rs"]
mod census;

#[cfg(loom)]
#[allow(dead_code)]
#[path = "../../src/p2p/pollers.rs"]
mod pollers;

#[cfg(loom)]
#[allow(dead_code)]
#[path = "../../src/transport/shm/ring.rs"]
mod shm_ring;

#[cfg(loom)]
#[allow(dead_code)]
#[path = "../../src/transport/shm/split.rs"]
mod shm_split;

#[cfg(all(loom, test))]
mod models;

#[cfg(all(loom, test))]
mod shm_ring_models;

#[cfg(all(loom, test))]
mod shm_split_models;

#[cfg(all(loom, test))]
mod pollers_models;

#[cfg(all(loom, test))]
mod ring_models;

#[cfg(all(loom, test))]
mod census_models;

#[cfg(all(loom, test))]
mod claim_models;

#[cfg(all(loom, test))]
mod round_gate;

#[cfg(all(loom, test))]
mod wake_models;

#[cfg(all(loom, test))]
mod solo_models;

#[cfg(all(loom, test))]
mod resident_models;
