//! Context ids: how a new communicator's pair is derived, the same way in
//! every process.
//!
//! Each communicator owns a pair of context ids: the even one for
//! point-to-point messages, the odd one (`+ 1`) for its collectives'
//! messages. The world has the pair (0, 1). Every other pair is a function
//! of what all members of the new communicator know about the call that
//! creates it — never of a process-local counter, so processes that each
//! create their part of a communicator (a transport's job) agree on its
//! ids without talking:
//!
//! * **collective creation** (`duplicate`, `split_*`,
//!   `split_by_subgroup_collective`, Cartesian): the parent's context, the
//!   call's sequence number on the parent (`coll::begin` gives every rank
//!   of the parent the same one: the parent's collectives are ordered), and
//!   the lowest world rank of the new communicator, which tells apart the
//!   disjoint communicators one split creates ([`Creation::Collective`]);
//! * **group-collective creation** (`split_by_subgroup_with_tag`, where only
//!   the group's members call, so the parent's sequence numbers are not
//!   shared): the parent's context, the tag, the group's size and digest,
//!   and how many earlier calls with that same tag and group the members
//!   made on the parent — MPI requires those to come in the same order at
//!   every member, so they all count the same ([`Creation::Group`]);
//! * **inter-communicators**: each side owns a pair (messages to the other
//!   side travel in the other side's pair). A side's pair comes from its
//!   local communicator's context and the creating call's sequence number
//!   there, and the other side's two values, which the leaders exchange
//!   ([`Creation::InterSide`]); a duplicate of one side is a collective
//!   creation on that side, and the sides' sequence numbers on the
//!   inter-communicator stay equal (both sides make the same calls on it),
//!   so either side derives both new pairs; a merge comes from both pairs
//!   and that sequence number ([`Creation::Merge`]);
//! * **tiers** of a communicator spanning processes (its members in one
//!   process, its leaders: what its hierarchical collectives run on): the
//!   parent's context and which tier, plus the process for a local part
//!   ([`Creation::Tier`]); on a parent spanning hosts, also its leaders on
//!   one host and its one leader per host ([`Creation::HostTier`]). Each
//!   parent has one of each, so the inputs never repeat either.
//! * **spawned ranks**: their world comes from the parent's context and the
//!   spawn call's sequence number there ([`Creation::Spawn`]); the
//!   inter-communicator to them is an [`Creation::InterSide`] pair of the
//!   parent and that world (at its sequence number 0).
//!
//! The inputs are mixed into 64 bits by a fixed function ([`derive`]: a
//! multiply-xor fold and the splitmix64 finaliser; no `Hasher` whose output
//! may change between Rust versions); the pair's base is that value made
//! even, never the world's nor the last pair (`u64::MAX` means "no
//! communicator" in a wait). Context ids are 64 bits wide throughout
//! (matching, routes, waits), so the pair keeps 63 bits of the hash.
//!
//! ## Collisions
//!
//! Two different creations can only get the same pair if their inputs
//! differ and the hash collides. Inputs never repeat: a parent's sequence
//! numbers only grow, the disjoint communicators of one call have different
//! lowest ranks, and a group call's count grows with each call of that key.
//! For a hash collision between a new communicator and one of `n` live ones
//! the chance is about `n / 2^63` per creation: a program that creates a
//! billion communicators while a thousand are alive meets one with odds
//! of about 10^-7. Should it happen, the collision is *detected*
//! where it would matter: messages in a context only reach members'
//! mailboxes, and every communicator with a member in this process is
//! registered in this process's [`Registry`](super::Registry) (its name
//! table, keyed by the even id). `Registry::create` refuses a pair that a
//! live communicator holds, and the creating call fails with an error that
//! says so, instead of two communicators sharing their messages.

/// The context pair of the world communicator.
pub(crate) const WORLD: u64 = 0;

/// The pair no communicator gets: its odd id is a wait's "no
/// communicator" (`sched::WaitInfo::comm`).
const LAST: u64 = u64::MAX - 1;

/// What a new communicator's context pair is derived from (module docs).
///
/// For the `parent` argument of [`derive`], `Collective` and `Group` take
/// the parent's context, `InterSide` the creating side's local communicator,
/// `Merge` the lower of the inter-communicator's two pairs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Creation {
    /// A creation call of every rank of the parent.
    Collective {
        /// The call's sequence number on the parent.
        seq: u32,
        /// The lowest world rank of the new communicator.
        lowest: u32,
    },
    /// `split_by_subgroup_with_tag`, called by the group's members only.
    Group {
        tag: i32,
        size: u32,
        digest: u64,
        /// Earlier calls with this tag and group on the parent.
        count: u64,
    },
    /// One side of an inter-communicator (`InterCommunicator::create`):
    /// made from the side's local communicator at sequence number `seq`,
    /// facing a remote side whose local communicator has context `remote`
    /// and made the call at `remote_seq`. Each side derives both pairs.
    InterSide {
        seq: u32,
        remote: u64,
        remote_seq: u32,
    },
    /// The merge of an inter-communicator whose other pair is `high` (the
    /// higher of the two; the lower is `derive`'s parent), at sequence
    /// number `seq` of both sides.
    Merge { seq: u32, high: u64 },
    /// `MPI_COMM_SELF` of world rank `world` (derived from the world's
    /// pair): the same pair every time that rank asks.
    SelfComm { world: u32 },
    /// A part of a communicator spanning processes that its hierarchical
    /// collectives run on (`coll/hier.rs`), made by each process on first
    /// use without a round: its members in process `process` (`leaders`
    /// false: a pair of this process only, the part's messages never leave
    /// it), or its leaders (`leaders` true, `process` 0: the same pair in
    /// every process).
    Tier { leaders: bool, process: u32 },
    /// A host tier of a communicator spanning hosts: the leaders of the
    /// processes of host `host` (`heads` false), or one leader per host
    /// (`heads` true, `host` 0: the same pair in every process).
    HostTier { heads: bool, host: u32 },
    /// The world of the ranks spawned by a spawn call at sequence number
    /// `seq` of the parent communicator. The inter-communicator between
    /// parents and children is then derived as if the children's world had
    /// met the parent at its sequence number 0 ([`Creation::InterSide`]).
    Spawn { seq: u32 },
}

/// The even context id of the communicator that `creation` makes from the
/// communicator with context `parent` (either id of its pair).
pub(crate) fn derive(parent: u64, creation: Creation) -> u64 {
    let words: [u64; 5] = match creation {
        Creation::Collective { seq, lowest } => [1, parent & !1, seq.into(), lowest.into(), 0],
        Creation::Group {
            tag,
            size,
            digest,
            count,
        } => [
            2,
            parent & !1,
            u64::from(tag as u32) | u64::from(size) << 32,
            digest,
            count,
        ],
        Creation::InterSide {
            seq,
            remote,
            remote_seq,
        } => [3, parent & !1, seq.into(), remote & !1, remote_seq.into()],
        Creation::Merge { seq, high } => [4, parent & !1, seq.into(), high & !1, 0],
        Creation::SelfComm { world } => [5, parent & !1, world.into(), 0, 0],
        Creation::Tier { leaders, process } => {
            [6, parent & !1, u64::from(leaders), process.into(), 0]
        }
        Creation::Spawn { seq } => [7, parent & !1, seq.into(), 0, 0],
        Creation::HostTier { heads, host } => [8, parent & !1, u64::from(heads), host.into(), 0],
    };
    let h = mix(&words);
    // The even ids but the world's and the last (whose odd id, u64::MAX,
    // means "no communicator" in a wait): 2, 4, ..., 2^64 - 4.
    match h & !1 {
        WORLD | LAST => 2,
        base => base,
    }
}

/// A fixed 64-bit mix of `words` (the same in every process and build).
fn mix(words: &[u64]) -> u64 {
    let mut h: u64 = 0x9e37_79b9_7f4a_7c15;
    for &w in words {
        h = (h ^ w).wrapping_mul(0x100_0000_01b3).rotate_left(29);
        h = finalise(h);
    }
    finalise(h)
}

/// splitmix64's finaliser: every input bit affects every output bit.
fn finalise(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_pairs_are_even_not_the_world_and_spread() {
        let mut seen = std::collections::HashSet::new();
        for parent in [0u64, 2, 1_000_002] {
            for seq in 0..200 {
                for lowest in 0..8 {
                    let c = derive(parent, Creation::Collective { seq, lowest });
                    assert_eq!(c & 1, 0);
                    assert_ne!(c, WORLD);
                    assert!(seen.insert(c), "a collision among 4800 derived pairs");
                }
            }
        }
        // Either id of the parent's pair gives the same child.
        let a = derive(6, Creation::Collective { seq: 3, lowest: 1 });
        assert_eq!(a, derive(7, Creation::Collective { seq: 3, lowest: 1 }));
        let g = |count| {
            derive(
                6,
                Creation::Group {
                    tag: 0,
                    size: 2,
                    digest: 42,
                    count,
                },
            )
        };
        assert_ne!(g(0), g(1));
    }

    /// Every kind of creation has its own first word: the simplest inputs
    /// of two kinds (all zero) still give different pairs.
    #[test]
    fn creations_of_different_kinds_differ() {
        let kinds = [
            Creation::Collective { seq: 0, lowest: 0 },
            Creation::Group {
                tag: 0,
                size: 0,
                digest: 0,
                count: 0,
            },
            Creation::InterSide {
                seq: 0,
                remote: 0,
                remote_seq: 0,
            },
            Creation::Merge { seq: 0, high: 0 },
            Creation::SelfComm { world: 0 },
            Creation::Tier {
                leaders: false,
                process: 0,
            },
            Creation::Spawn { seq: 0 },
            Creation::HostTier {
                heads: false,
                host: 0,
            },
        ];
        let pairs: std::collections::HashSet<u64> = kinds.iter().map(|&k| derive(2, k)).collect();
        assert_eq!(pairs.len(), kinds.len());
    }
}
