//! Scatter and Scatterv algorithms.
//!
//! A Scatter is a Scatterv whose partition is `p` blocks of the receive
//! count, rank by rank ([`Parts::uniform`], which also checks that the
//! root's send buffer holds them all); both share `shm` and `linear`.
//!
//! * `shm`: the root publishes its partition (buffer, type, counts and
//!   displacements), marks the round ready and wakes the others; every rank,
//!   in its turn of the round, copies its own part straight out of the
//!   root's buffer into its receive buffer (copies run in parallel on all
//!   workers), checking the count and the type signature. The last copier
//!   wakes the root, which only then leaves the round (nobody reads its
//!   buffer any more). A non-root leaves right after its copy: nobody else
//!   touches its buffer.
//! * `linear`: the root sends part r to rank r (p − 1 messages, all posted
//!   at once) and copies its own part.
//! * `binomial` (Scatter): a binomial tree rooted at the root, ⌈log2 p⌉
//!   steps. With relative ranks (the root is 0), node `v` owns the blocks of
//!   its subtree, relative ranks `[v, min(v + lowbit(v), p))`: it receives
//!   them from its parent `v − lowbit(v)` in one message, into an exactly
//!   sized packed temporary buffer (a leaf receives straight into its receive
//!   buffer), keeps its own block and forwards each child's subtree, largest
//!   first (the children are [`src_list`]'s, as in the binomial gather). The
//!   root sends straight out of its send buffer, except the one subtree
//!   whose blocks wrap around the buffer's end (root ≠ 0), which it packs
//!   into a temporary buffer first.
//!
//! Every rank must receive exactly the count the root sends it: `shm`
//! checks it on both sides and names the values; the message-based
//! algorithms report a message longer than the receive buffer as truncated.

use super::exchange::Exchange;
use super::gather::src_list;
use super::parts::{check_elements, packed, Parts, Sides};
use super::round::Readers;
use super::{copy_checked, pack_to, Algorithm, Call};
use crate::datatype::copy::Layout;
use crate::error::{CountError, Error};
use crate::Rank;

/// Scatters `n` blocks of `recv.count` elements of `send` (at the root).
pub(crate) fn scatter(
    call: &Call<'_>,
    root: Rank,
    send: Option<&Layout>,
    recv: &Layout,
) -> Result<(), Error> {
    if call.algorithm == Algorithm::Hierarchical {
        return super::hier::scatter(call, root, send, recv);
    }
    let parts = match send {
        Some(send) => Some(Parts::uniform(
            "scatter_into_root",
            send.clone(),
            recv.count,
            call.size(),
        )?),
        None => None,
    };
    if let Some(parts) = &parts {
        check_elements(call, &parts.buf, recv, Sides::ScatterRoot)?;
    }
    match call.algorithm {
        Algorithm::Linear => linear(call, root, parts.as_ref(), recv),
        Algorithm::Binomial => binomial(call, root, parts.as_ref(), recv),
        _ => shm(call, root, parts.as_ref(), recv),
    }
}

/// Scatters the parts of `send` (at the root).
pub(crate) fn scatterv(
    call: &Call<'_>,
    root: Rank,
    send: Option<&Parts>,
    recv: &Layout,
) -> Result<(), Error> {
    if let Some(parts) = send {
        check_elements(call, &parts.buf, recv, Sides::ScatterRoot)?;
    }
    match call.algorithm {
        Algorithm::Linear => linear(call, root, send, recv),
        _ => shm(call, root, send, recv),
    }
}

fn count_mismatch(call: &Call<'_>, rank: Rank, receives: usize, sent: usize) -> Error {
    Error::Count(CountError::SentByRoot {
        op: call.kind.name(),
        rank,
        receives,
        sent,
    })
}

/// Copies part `rank` of the root's `parts` into `recv` (our own receive
/// buffer, which no send buffer overlaps), checking the count.
fn take_part(call: &Call<'_>, root: Rank, parts: &Parts, recv: &Layout) -> Result<(), Error> {
    let part = parts.part(call.rank() as usize);
    if part.count != recv.count {
        return Err(count_mismatch(call, call.rank(), recv.count, part.count));
    }
    copy_checked(call, root, &part, recv)
}

fn shm(call: &Call<'_>, root: Rank, parts: Option<&Parts>, recv: &Layout) -> Result<(), Error> {
    let rounds = &call.comm.coll().rounds;
    let round = rounds.join_published(call, Readers::NonRoots)?;
    let result = if let Some(parts) = parts {
        // Returns once every other rank has copied out of our buffer.
        round.publish(call, root as usize, parts, || {
            round.set_ready(call);
            take_part(call, root, parts, recv)
        })
    } else {
        round.wait_ready(call).map_err(Error::from).and_then(|()| {
            let turn = round.enter(call)?;
            take_part(call, root, turn.deposit::<Parts>(root as usize), recv)
        })
    };
    rounds.leave(call, round);
    result
}

fn linear(call: &Call<'_>, root: Rank, parts: Option<&Parts>, recv: &Layout) -> Result<(), Error> {
    let mut ex = Exchange::new(call);
    match parts {
        Some(parts) => {
            let size = call.size();
            for k in 1..size {
                let r = (root + k) % size;
                ex.send(r, &parts.part(r as usize));
            }
            // Our own buffers; send and receive buffers are distinct.
            let own = take_part(call, root, parts, recv);
            own.and(ex.wait())
        }
        None => {
            ex.recv(root, recv)?;
            ex.wait()
        }
    }
}

fn binomial(
    call: &Call<'_>,
    root: Rank,
    parts: Option<&Parts>,
    recv: &Layout,
) -> Result<(), Error> {
    let n = call.size() as usize;
    let rank = call.rank() as usize;
    let root = root as usize;
    let v = (rank + n - root) % n;
    let absolute = |rel: usize| ((rel + root) % n) as Rank;
    // Every rank receives the same count (the collective checker compares
    // the receive sizes), so each sizes subtrees with its own.
    let block = recv.count;
    let children = src_list(v, n);

    if let Some(parts) = parts {
        // The root: each child's subtree straight out of the send buffer,
        // largest first; the one that wraps around through a packed copy.
        let send = &parts.buf;
        let elem = packed(&send.ty);
        let esize = elem.map().size();
        let mut messages = Vec::with_capacity(children.len());
        // Packed copies; pushing one never moves another's heap data.
        let mut wrapped: Vec<Vec<u8>> = Vec::new();
        for &(s, e) in children.iter().rev() {
            let first = (s + root) % n;
            if first + (e - s) <= n {
                messages.push((s, send.slice(first * block, (e - s) * block)));
            } else {
                // Relative ranks [s, e) are absolute [first, n), then
                // [0, rest): pack both runs into one message. Subtrees are
                // disjoint runs of relative ranks, so only one wraps.
                let (head, rest) = (n - first, first + (e - s) - n);
                let mut packed = vec![0u8; (e - s) * block * esize];
                let (front, back) = packed.split_at_mut(head * block * esize);
                pack_to(&send.slice(first * block, head * block), front);
                pack_to(&send.slice(0, rest * block), back);
                wrapped.push(packed);
                let at = wrapped.last_mut().expect("just pushed").as_mut_ptr();
                let tmp = Layout {
                    base: at as *const u8,
                    count: (e - s) * block,
                    ty: elem.clone(),
                };
                messages.push((s, tmp));
            }
        }
        // Declared after the buffers it sends from, so dropped first.
        let mut ex = Exchange::new(call);
        for (s, layout) in &messages {
            ex.send(absolute(*s), layout);
        }
        // Our own buffers; send and receive buffers are distinct.
        let own = take_part(call, root as Rank, parts, recv);
        return own.and(ex.wait());
    }

    // A node: the blocks of its subtree [v, end) from its parent.
    let parent = absolute(v & (v - 1));
    let end = children.last().map_or(v + 1, |&(_, e)| e);
    if end == v + 1 {
        // A leaf: straight into the receive buffer.
        let mut ex = Exchange::new(call);
        ex.recv(parent, recv)?;
        return ex.wait();
    }
    let elem = packed(&recv.ty);
    let mut tmp = vec![0u8; (end - v) * block * elem.map().size()];
    let subtree = Layout {
        base: tmp.as_mut_ptr() as *const u8,
        count: (end - v) * block,
        ty: elem,
    };
    let mut ex = Exchange::new(call);
    ex.recv(parent, &subtree)?;
    ex.wait()?;
    for &(s, e) in children.iter().rev() {
        ex.send(
            absolute(s),
            &subtree.slice((s - v) * block, (e - s) * block),
        );
    }
    // `tmp` and the receive buffer are distinct, both ours.
    let own = copy_checked(call, root as Rank, &subtree.slice(0, block), recv);
    own.and(ex.wait())
}
