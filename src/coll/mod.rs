//! Collective operations.
//!
//! For now: the scheduler-managed barrier of communicators whose ranks share
//! the process. The algorithms of the reference papers (binomial Gatherv,
//! symmetric broadcast, ...), the selector and the mismatch checker come with
//! the collectives issue.

pub(crate) mod barrier;
