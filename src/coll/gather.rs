//! Gather and Gatherv algorithms.
//!
//! * `shm`: the root publishes its receive buffer's partition; every other
//!   rank, in its turn of the round, checks its count and copies its data
//!   straight into its part (copies run in parallel on all workers); the
//!   last copier wakes the root.
//! * `linear`: every rank sends to the root, which receives straight into
//!   its buffer: p − 1 peers at the root (MPICH's and Open MPI's Gatherv).
//! * `binomial` (Gather) and `binomial_conservative` / `binomial_aggressive`
//!   (Gatherv): seed 002's binomial tree.
//!
//! ## Seed 002's binomial Gatherv
//!
//! With `relative_rank = (rank − root + n) % n`, node `v` receives at step
//! `mask = 1, 2, 4, ...` (while `v & mask == 0`) from child `v + mask` the
//! data of the child's subtree, relative ranks `[v + mask, min(v + 2·mask,
//! n))`, and then sends its whole subtree to its parent `v − lowbit(v)`.
//! [`src_list`] lists a node's sources in that order, which sizes its
//! temporary buffer exactly: an interior node holds its own data and its
//! children's, packed in relative-rank order. The root receives its direct
//! leaves (subtrees of one rank) straight into its receive buffer, places its
//! own block directly, and receives each larger subtree as *message
//! chains*: consecutive sources whose blocks are adjacent in the root's
//! buffer (`displs[cur] == displs[prev] + counts[prev]`) form a continuous
//! chain, received straight into the buffer; other runs form a
//! non-continuous chain, sent as one message into the root's temporary buffer
//! and copied piece by piece after each step (copies interleaved with
//! communication). Both ends compute the same chains from the counts and
//! displacements, which every rank needs:
//!
//! * conservative level: the root first broadcasts counts and displacements
//!   (binomial tree), as the standard requires;
//! * aggressive level: every rank passes them
//!   (`gather_varcount_into_known`), so the broadcast is skipped.
//!
//! The root's peers drop from n − 1 to ⌈log2 n⌉; its temporary buffer holds
//! only the non-continuous chains.

use super::exchange::Exchange;
use super::parts::{check_elements, packed, Parts, Sides, Table};
use super::round::Readers;
use super::{bcast, copy_checked, pack_to, Algorithm, Call};
use crate::datatype::copy::Layout;
use crate::datatype::{Datatype, Equivalence, TypeHandle};
use crate::error::{ArgError, CountError, Error};
use crate::Rank;

/// Statistics of the last Gatherv a rank ran as root (for `gatherv_algos`
/// and the tests; public only with the `stats` feature).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(not(feature = "stats"), allow(unreachable_pub, dead_code))]
pub struct RootStats {
    /// Distinct ranks the root received from.
    pub peers: usize,
    /// Peak bytes of the root's temporary buffers.
    pub tmp_bytes: usize,
}

#[cfg(feature = "stats")]
thread_local! {
    static LAST_ROOT_STATS: std::cell::Cell<RootStats> = const {
        std::cell::Cell::new(RootStats { peers: 0, tmp_bytes: 0 })
    };
}

/// The statistics of the last gather the calling worker thread ran as root
/// (read it right after the call, on the root rank).
#[cfg(feature = "stats")]
pub fn last_root_stats() -> RootStats {
    LAST_ROOT_STATS.with(|s| s.get())
}

#[cfg(feature = "stats")]
fn set_root_stats(stats: RootStats) {
    LAST_ROOT_STATS.with(|s| s.set(stats));
}

#[cfg(not(feature = "stats"))]
#[inline]
fn set_root_stats(_: RootStats) {}

/// Runs a Gatherv of `send` to `root`; `parts` at the root; `known` the
/// counts and displacements where a non-root passed them (aggressive level).
pub(crate) fn gatherv(
    call: &Call<'_>,
    root: Rank,
    send: &Layout,
    parts: Option<&Parts>,
    known: Option<(&[usize], &[usize])>,
) -> Result<(), Error> {
    if let Some(parts) = parts {
        check_elements(call, send, &parts.buf, Sides::GatherRoot)?;
    }
    match call.algorithm {
        Algorithm::Hierarchical => super::hier::gatherv(call, root, send, parts, known),
        Algorithm::Linear => linear(call, root, send, parts),
        Algorithm::BinomialConservative | Algorithm::Binomial => {
            binomial_conservative(call, root, send, parts)
        }
        // Every rank knows the table: no broadcast.
        Algorithm::BinomialAggressive => match (parts, known) {
            (Some(p), _) => binomial_tree(call, root, send, parts, p.table()),
            (None, Some((c, d))) => binomial_tree(call, root, send, None, Table::Given(c, d)),
            (None, None) => Err(Error::Arg(ArgError::CountsNotKnown {
                op: call.kind.name(),
                rank: call.rank(),
            })),
        },
        _ => shm(call, root, send, parts),
    }
}

/// Runs a Gather of `send` (the same count everywhere) to `root`, whose
/// buffer is `recv`.
pub(crate) fn gather(
    call: &Call<'_>,
    root: Rank,
    send: &Layout,
    recv: Option<&Layout>,
) -> Result<(), Error> {
    if call.algorithm == Algorithm::Hierarchical {
        return super::hier::gather(call, root, send, recv);
    }
    let parts = match recv {
        Some(recv) => Some(Parts::uniform(
            "gather_into_root",
            recv.clone(),
            send.count,
            call.size(),
        )?),
        None => None,
    };
    if let Some(parts) = &parts {
        check_elements(call, send, &parts.buf, Sides::GatherRoot)?;
    }
    match call.algorithm {
        Algorithm::Linear => linear(call, root, send, parts.as_ref()),
        Algorithm::Binomial => {
            binomial_tree(call, root, send, parts.as_ref(), Table::Uniform(send.count))
        }
        _ => shm(call, root, send, parts.as_ref()),
    }
}

fn count_mismatch(call: &Call<'_>, rank: usize, sent: usize, expected: usize) -> Error {
    Error::Count(CountError::SentToRoot {
        op: call.kind.name(),
        rank: rank as Rank,
        sent,
        expected,
    })
}

/// The root's own block, copied straight into its part, its count checked
/// like every sender's.
fn place_own(call: &Call<'_>, root: Rank, send: &Layout, parts: &Parts) -> Result<(), Error> {
    let rank = call.rank() as usize;
    let expected = parts.table().count(rank);
    if send.count != expected {
        return Err(count_mismatch(call, rank, send.count, expected));
    }
    // The root's own send and receive buffers, distinct.
    copy_checked(call, root, send, &parts.part(rank))
}

fn shm(call: &Call<'_>, root: Rank, send: &Layout, parts: Option<&Parts>) -> Result<(), Error> {
    let rounds = &call.comm.coll().rounds;
    let round = rounds.join_published(call, Readers::NonRoots)?;
    let rank = call.rank() as usize;
    let result = if let Some(parts) = parts {
        // Returns once every other rank has written its part.
        let placed = round.publish(call, rank, parts, || {
            round.set_ready(call);
            place_own(call, root, send, parts)
        });
        set_root_stats(RootStats {
            peers: 0,
            tmp_bytes: 0,
        });
        placed
    } else {
        round.wait_ready(call).map_err(Error::from).and_then(|()| {
            let turn = round.enter(call)?;
            let part = turn.deposit::<Parts>(root as usize).part(rank);
            if send.count != part.count {
                return Err(count_mismatch(call, rank, send.count, part.count));
            }
            // Parts do not overlap (checked at the root): we write only ours.
            copy_checked(call, call.rank(), send, &part)
        })
    };
    rounds.leave(call, round);
    result
}

fn linear(call: &Call<'_>, root: Rank, send: &Layout, parts: Option<&Parts>) -> Result<(), Error> {
    let mut ex = Exchange::new(call);
    match parts {
        Some(parts) => {
            for r in (0..call.size()).filter(|&r| r != root) {
                ex.recv(r, &parts.part(r as usize))?;
            }
            let own = place_own(call, root, send, parts);
            let received = ex.wait();
            set_root_stats(RootStats {
                peers: call.size() as usize - 1,
                tmp_bytes: 0,
            });
            own.and(received)
        }
        None => {
            ex.send(root, send);
            ex.wait()
        }
    }
}

/// The sources of node `v` (relative ranks), in the order it receives them:
/// seed 002's Algorithm 1. Each entry is a child's subtree `[start, end)`.
pub(crate) fn src_list(v: usize, n: usize) -> Vec<(usize, usize)> {
    let mut subtrees = Vec::new();
    let mut mask = 1;
    while mask < n {
        if v & mask != 0 {
            break;
        }
        let child = v | mask;
        if child < n {
            subtrees.push((child, (child + mask).min(n)));
        }
        mask <<= 1;
    }
    subtrees
}

/// The parent of node `v` (relative), if any.
fn parent(v: usize) -> Option<usize> {
    (v != 0).then(|| v & (v - 1))
}

/// A message chain: consecutive sources (relative ranks) sent as one
/// message; `continuous` if their blocks are adjacent in the root's buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Chain {
    pub(crate) sources: Vec<usize>,
    pub(crate) continuous: bool,
}

/// Splits the sources `[start, end)` (relative ranks, empty blocks skipped)
/// into message chains, as both the sender and the root compute them.
pub(crate) fn chains(
    start: usize,
    end: usize,
    absolute: impl Fn(usize) -> usize,
    table: Table<'_>,
) -> Vec<Chain> {
    let adjacent = |prev: usize, cur: usize| {
        let (p, c) = (absolute(prev), absolute(cur));
        table.displ(c) == table.displ(p) + table.count(p)
    };
    let mut chains = Vec::new();
    let mut cur: Vec<usize> = Vec::new();
    let mut continuous = true;
    for v in (start..end).filter(|&v| table.count(absolute(v)) > 0) {
        match cur.last().copied() {
            None => cur.push(v),
            Some(prev) => {
                let adj = adjacent(prev, v);
                if cur.len() == 1 {
                    continuous = adj;
                    cur.push(v);
                } else if continuous {
                    if adj {
                        cur.push(v);
                    } else {
                        chains.push(Chain {
                            sources: std::mem::take(&mut cur),
                            continuous: true,
                        });
                        cur.push(v);
                        continuous = true;
                    }
                } else if adj {
                    // The previous message starts a continuous chain with
                    // this one; what came before it is sent as it is.
                    let prev = cur.pop().expect("a chain of at least two");
                    chains.push(Chain {
                        continuous: cur.len() == 1,
                        sources: std::mem::take(&mut cur),
                    });
                    cur.extend([prev, v]);
                    continuous = true;
                } else {
                    cur.push(v);
                }
            }
        }
    }
    if !cur.is_empty() {
        chains.push(Chain {
            continuous: continuous || cur.len() == 1,
            sources: cur,
        });
    }
    chains
}

/// The conservative level: the root broadcasts counts and displacements
/// first (binomial tree), then the binomial Gatherv runs on them.
fn binomial_conservative(
    call: &Call<'_>,
    root: Rank,
    send: &Layout,
    parts: Option<&Parts>,
) -> Result<(), Error> {
    let n = call.size() as usize;
    let mut table: Vec<u64> = vec![0; 2 * n];
    if let Some(p) = parts {
        let t = p.table();
        for i in 0..n {
            table[i] = t.count(i) as u64;
            table[n + i] = t.displ(i) as u64;
        }
    }
    let layout = Layout {
        base: table.as_mut_ptr() as *const u8,
        count: table.len(),
        ty: u64::equivalent_datatype().handle(),
    };
    let table_call = Call {
        algorithm: Algorithm::Binomial,
        ..*call
    };
    bcast::broadcast(&table_call, root, &layout)?;
    let counts: Vec<usize> = table[..n].iter().map(|&c| c as usize).collect();
    let displs: Vec<usize> = table[n..].iter().map(|&d| d as usize).collect();
    binomial_tree(call, root, send, parts, Table::Given(&counts, &displs))
}

/// Runs a binomial Gather(v) whose counts and displacements every rank
/// knows (`table`).
pub(crate) fn binomial_tree(
    call: &Call<'_>,
    root: Rank,
    send: &Layout,
    parts: Option<&Parts>,
    table: Table<'_>,
) -> Result<(), Error> {
    let n = call.size() as usize;
    let root = root as usize;
    let rank = call.rank() as usize;
    let v = (rank + n - root) % n;
    let absolute = |rel: usize| (rel + root) % n;
    if send.count != table.count(rank) {
        return Err(count_mismatch(call, rank, send.count, table.count(rank)));
    }
    let elem = packed(&send.ty);
    let esize = elem.map().size();

    if let Some(parts) = parts {
        return binomial_root(call, send, parts, table, &elem, &absolute);
    }

    // Interior node or leaf: pack own data, receive children's subtrees.
    let subtrees = src_list(v, n);
    let end = subtrees.last().map_or(v + 1, |&(_, e)| e);
    let mut offsets = Vec::with_capacity(end - v);
    let mut total = 0;
    for r in v..end {
        offsets.push(total);
        total += table.count(absolute(r));
    }
    let mut tmp = vec![0u8; total * esize];
    // Our own data first, at offset 0.
    pack_to(send, &mut tmp);
    let base = tmp.as_mut_ptr();
    let at = |from: usize, count: usize| Layout {
        base: base.wrapping_add(offsets[from - v] * esize) as *const u8,
        count,
        ty: elem.clone(),
    };
    let mut ex = Exchange::new(call);
    for &(s, e) in &subtrees {
        let count: usize = (s..e).map(|r| table.count(absolute(r))).sum();
        ex.recv(absolute(s) as Rank, &at(s, count))?;
    }
    ex.wait()?;
    let up = parent(v).expect("only the root has no parent");
    if up == 0 {
        // To the root: as message chains.
        for chain in chains(v, end, absolute, table) {
            let count: usize = chain
                .sources
                .iter()
                .map(|&r| table.count(absolute(r)))
                .sum();
            ex.send(root as Rank, &at(chain.sources[0], count));
        }
    } else {
        ex.send(absolute(up) as Rank, &at(v, total));
    }
    let sent = ex.wait();
    drop(tmp);
    sent
}

fn binomial_root(
    call: &Call<'_>,
    send: &Layout,
    parts: &Parts,
    table: Table<'_>,
    elem: &TypeHandle,
    absolute: &dyn Fn(usize) -> usize,
) -> Result<(), Error> {
    let n = call.size() as usize;
    let rank = call.rank() as usize;
    let esize = elem.map().size();
    // Step 0: the root's own block, placed directly.
    place_own(call, rank as Rank, send, parts)?;
    let mut peers = 0;
    let mut peak_tmp = 0;
    for (s, e) in src_list(0, n) {
        peers += 1;
        let mut ex = Exchange::new(call);
        // A direct leaf is a chain of one, received straight into the
        // receive buffer like every continuous chain.
        let chains = chains(s, e, absolute, table);
        // Exact temporary space: the non-continuous chains of this subtree.
        let tmp_elems: usize = chains
            .iter()
            .filter(|c| !c.continuous)
            .map(|c| {
                c.sources
                    .iter()
                    .map(|&r| table.count(absolute(r)))
                    .sum::<usize>()
            })
            .sum();
        let mut tmp = vec![0u8; tmp_elems * esize];
        peak_tmp = peak_tmp.max(tmp.len());
        let base = tmp.as_mut_ptr();
        let mut offset = 0;
        let mut copies = Vec::new();
        // Every chain of the subtree comes from the subtree's root.
        let child = absolute(s) as Rank;
        for chain in &chains {
            let count: usize = chain
                .sources
                .iter()
                .map(|&r| table.count(absolute(r)))
                .sum();
            let first = absolute(chain.sources[0]);
            if chain.continuous {
                ex.recv(child, &parts.buf.slice(table.displ(first), count))?;
            } else {
                let dst = Layout {
                    base: base.wrapping_add(offset * esize) as *const u8,
                    count,
                    ty: elem.clone(),
                };
                ex.recv(child, &dst)?;
                copies.push((chain.sources.clone(), offset));
                offset += count;
            }
        }
        ex.wait()?;
        // Copy the non-continuous chains piece by piece.
        for (sources, mut offset) in copies {
            for r in sources {
                let a = absolute(r);
                let src = Layout {
                    base: base.wrapping_add(offset * esize) as *const u8,
                    count: table.count(a),
                    ty: elem.clone(),
                };
                // `tmp` holds the chain; parts do not overlap.
                copy_checked(call, a as Rank, &src, &parts.part(a))?;
                offset += table.count(a);
            }
        }
        drop(tmp);
    }
    set_root_stats(RootStats {
        peers,
        tmp_bytes: peak_tmp,
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn src_lists_cover_every_rank_once() {
        for n in 1..40 {
            let mut seen = vec![0; n];
            seen[0] += 1;
            // Every node's own rank plus its children's subtrees.
            fn walk(v: usize, n: usize, seen: &mut [usize]) {
                for (s, e) in src_list(v, n) {
                    for r in s..e {
                        let _ = r;
                    }
                    seen[s] += 1;
                    walk(s, n, seen);
                }
            }
            walk(0, n, &mut seen);
            assert!(seen.iter().all(|&c| c == 1), "n={n}: {seen:?}");
            // The root has ⌈log2 n⌉ children.
            let expected = if n == 1 {
                0
            } else {
                (n as f64).log2().ceil() as usize
            };
            assert_eq!(src_list(0, n).len(), expected, "n={n}");
        }
    }

    #[test]
    fn chains_follow_the_papers_rules() {
        let id = |r: usize| r;
        // Blocks in rank order: one continuous chain.
        let counts = [2usize, 2, 2, 2];
        let displs = [0usize, 2, 4, 6];
        assert_eq!(
            chains(1, 4, id, Table::Given(&counts, &displs)),
            vec![Chain {
                sources: vec![1, 2, 3],
                continuous: true
            }]
        );
        // Reversed blocks: one non-continuous chain.
        let displs = [6usize, 4, 2, 0];
        assert_eq!(
            chains(1, 4, id, Table::Given(&counts, &displs)),
            vec![Chain {
                sources: vec![1, 2, 3],
                continuous: false
            }]
        );
        // Non-continuous then continuous: the previous message moves over.
        let counts = [1usize, 1, 1, 1, 1];
        let displs = [0usize, 10, 20, 21, 22];
        assert_eq!(
            chains(1, 5, id, Table::Given(&counts, &displs)),
            vec![
                Chain {
                    sources: vec![1],
                    continuous: true
                },
                Chain {
                    sources: vec![2, 3, 4],
                    continuous: true
                },
            ]
        );
        // Empty blocks are skipped.
        let counts = [1usize, 0, 1, 1];
        let displs = [0usize, 99, 1, 2];
        assert_eq!(
            chains(1, 4, id, Table::Given(&counts, &displs)),
            vec![Chain {
                sources: vec![2, 3],
                continuous: true
            }]
        );
    }
}
