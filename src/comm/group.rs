//! Groups: ordered sets of ranks, and their algebra (MPI §6.3, rsmpi's
//! `Group`).
//!
//! A [`UserGroup`] is a list of *world* ranks in group-rank order plus the
//! world rank of the rank that made it (so [`Group::rank`] can answer).
//! A communicator's group shares the communicator's member table (no copy,
//! even for a world of a million ranks); operations that make new groups
//! cost O(size of the operands). Everything here is local: no other rank
//! takes part.

use std::collections::{HashMap, HashSet};

use super::Members;
use crate::error::{raise, ArgError, Error};
use crate::Rank;

/// The relation between two groups ([`Group::compare`], `MPI_Group_compare`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroupRelation {
    /// The same members in the same order.
    Identical,
    /// The same members in another order.
    Similar,
    /// Anything else.
    Unequal,
}

mod sealed {
    /// Access to a group's members (sealed: only myriad's groups have it).
    pub trait AsGroup {
        /// The group, `None` for the empty group.
        fn user_group(&self) -> Option<&super::UserGroup>;
    }
}

use sealed::AsGroup;

static EMPTY: Members = Members::World(0);

/// The members of any group (the empty list for [`SystemGroup::empty`]).
pub(crate) fn members_of<G: AsGroup + ?Sized>(group: &G) -> &Members {
    group.user_group().map_or(&EMPTY, |g| &g.members)
}

/// The world rank of the rank that made a group, if known.
fn me_of<G: AsGroup + ?Sized>(group: &G) -> Option<u32> {
    group.user_group().and_then(|g| g.me)
}

/// Whether world ranks belong to a member list, answered in O(1).
enum Lookup {
    World(u32),
    Table(HashMap<u32, Rank>),
}

impl Lookup {
    fn new(members: &Members) -> Lookup {
        match members {
            Members::World(n) => Lookup::World(*n),
            Members::Ranks(ranks) => Lookup::Table(
                ranks
                    .iter()
                    .enumerate()
                    .map(|(i, &w)| (w, i as Rank))
                    .collect(),
            ),
        }
    }

    fn position(&self, world: u32) -> Option<Rank> {
        match self {
            Lookup::World(n) => (world < *n).then_some(world as Rank),
            Lookup::Table(map) => map.get(&world).copied(),
        }
    }
}

/// A group of ranks (rsmpi's `Group`; object safe: `&dyn Group` works).
///
/// Ranks are group ranks (`0..size()`). Groups from communicators of one
/// job can be combined freely: members are identified by their world rank.
///
/// ```
/// use myriad::topology::{GroupRelation, SystemGroup};
/// use myriad::traits::*;
///
/// myriad::run(6, |universe| {
///     let world = universe.world().group();
///     let evens = world.include(&[0, 2, 4]);
///     let low = world.include(&[0, 1, 2]);
///     assert_eq!(evens.union(&low).size(), 4); // 0 2 4 1
///     assert_eq!(evens.intersection(&low).translate_rank(1, &world), Some(2));
///     assert_eq!(world.difference(&evens).compare(&world.exclude(&[0, 2, 4])), GroupRelation::Identical);
///     assert_eq!(evens.compare(&world.include(&[4, 2, 0])), GroupRelation::Similar);
///     assert_eq!(SystemGroup::empty().size(), 0);
/// })
/// .unwrap();
/// ```
pub trait Group: AsGroup {
    /// The members of `self`, then those of `other` that are not in `self`
    /// (`MPI_Group_union`).
    fn union(&self, other: &dyn Group) -> UserGroup {
        let (a, b) = (members_of(self), members_of(other));
        let in_a = Lookup::new(a);
        let mut list: Vec<u32> = a.iter().collect();
        list.extend(b.iter().filter(|&w| in_a.position(w).is_none()));
        UserGroup::new(Members::from_vec(list), me_of(self).or(me_of(other)))
    }

    /// The members of `self` that are also in `other`, in `self`'s order
    /// (`MPI_Group_intersection`).
    fn intersection(&self, other: &dyn Group) -> UserGroup {
        let (a, b) = (members_of(self), members_of(other));
        let in_b = Lookup::new(b);
        let list = a.iter().filter(|&w| in_b.position(w).is_some()).collect();
        UserGroup::new(Members::from_vec(list), me_of(self).or(me_of(other)))
    }

    /// The members of `self` that are not in `other`, in `self`'s order
    /// (`MPI_Group_difference`).
    fn difference(&self, other: &dyn Group) -> UserGroup {
        let (a, b) = (members_of(self), members_of(other));
        let in_b = Lookup::new(b);
        let list = a.iter().filter(|&w| in_b.position(w).is_none()).collect();
        UserGroup::new(Members::from_vec(list), me_of(self).or(me_of(other)))
    }

    /// The group whose rank `i` is rank `ranks[i]` of this one
    /// (`MPI_Group_incl`).
    ///
    /// # Panics
    ///
    /// If a rank is not in the group or is listed twice.
    #[track_caller]
    fn include(&self, ranks: &[Rank]) -> UserGroup {
        let a = members_of(self);
        check_ranks("include", a.size(), ranks);
        let list = ranks.iter().map(|&r| a.world_rank(r)).collect();
        UserGroup::new(Members::from_vec(list), me_of(self))
    }

    /// This group without the ranks listed, in this group's order
    /// (`MPI_Group_excl`).
    ///
    /// # Panics
    ///
    /// If a rank is not in the group or is listed twice.
    #[track_caller]
    fn exclude(&self, ranks: &[Rank]) -> UserGroup {
        let a = members_of(self);
        check_ranks("exclude", a.size(), ranks);
        let dropped: HashSet<Rank> = ranks.iter().copied().collect();
        let list = a
            .iter()
            .enumerate()
            .filter(|(i, _)| !dropped.contains(&(*i as Rank)))
            .map(|(_, w)| w)
            .collect();
        UserGroup::new(Members::from_vec(list), me_of(self))
    }

    /// Number of ranks in the group.
    fn size(&self) -> Rank {
        members_of(self).size() as Rank
    }

    /// The calling rank's rank in the group, `None` if it is not a member.
    fn rank(&self) -> Option<Rank> {
        self.user_group().and_then(|g| g.rank)
    }

    /// The rank in `other` of the member with rank `rank` here, `None` if it
    /// is not in `other` (`MPI_Group_translate_ranks`).
    ///
    /// # Panics
    ///
    /// If `rank` is not in this group.
    #[track_caller]
    fn translate_rank(&self, rank: Rank, other: &dyn Group) -> Option<Rank> {
        let a = members_of(self);
        check_ranks("translate_rank", a.size(), &[rank]);
        members_of(other).position(a.world_rank(rank))
    }

    /// [`translate_rank`](Self::translate_rank) for several ranks.
    ///
    /// # Panics
    ///
    /// If a rank is not in this group.
    #[track_caller]
    fn translate_ranks(&self, ranks: &[Rank], other: &dyn Group) -> Vec<Option<Rank>> {
        let a = members_of(self);
        for &rank in ranks {
            if rank < 0 || rank as u32 >= a.size() {
                raise(out_of_range("translate_ranks", rank, a.size()));
            }
        }
        let in_other = Lookup::new(members_of(other));
        ranks
            .iter()
            .map(|&r| in_other.position(a.world_rank(r)))
            .collect()
    }

    /// Compares two groups (`MPI_Group_compare`).
    fn compare(&self, other: &dyn Group) -> GroupRelation {
        let (a, b) = (members_of(self), members_of(other));
        if a.same(b) {
            GroupRelation::Identical
        } else if a.same_set(b) {
            GroupRelation::Similar
        } else {
            GroupRelation::Unequal
        }
    }
}

fn out_of_range(op: &'static str, rank: Rank, size: u32) -> Error {
    let size = size as Rank;
    Error::Arg(ArgError::NotInGroup { op, rank, size })
}

/// Checks that `ranks` are distinct ranks of a group of `size`.
#[track_caller]
fn check_ranks(op: &'static str, size: u32, ranks: &[Rank]) {
    let mut seen = HashSet::with_capacity(ranks.len());
    for &rank in ranks {
        if rank < 0 || rank as u32 >= size {
            raise(out_of_range(op, rank, size));
        }
        if !seen.insert(rank) {
            raise(Error::Arg(ArgError::RankRepeated { op, rank }));
        }
    }
}

/// A group made by the program: from [`Communicator::group`](crate::communicator::Communicator::group)
/// or a [`Group`] operation (rsmpi's `UserGroup`).
#[derive(Debug, Clone)]
pub struct UserGroup {
    members: Members,
    /// World rank of the rank that made the group.
    me: Option<u32>,
    /// Its rank in the group.
    rank: Option<Rank>,
}

impl UserGroup {
    fn new(members: Members, me: Option<u32>) -> UserGroup {
        let rank = me.and_then(|w| members.position(w));
        UserGroup { members, me, rank }
    }

    /// The remote group of an inter-communicator (the caller is not in it).
    pub(crate) fn remote(members: Members) -> UserGroup {
        UserGroup::new(members, None)
    }

    /// The group of a communicator, seen by its rank `rank` (world rank
    /// `me`).
    pub(crate) fn from_comm(members: Members, me: u32, rank: Rank) -> UserGroup {
        UserGroup {
            members,
            me: Some(me),
            rank: Some(rank),
        }
    }
}

impl AsGroup for UserGroup {
    fn user_group(&self) -> Option<&UserGroup> {
        Some(self)
    }
}

impl Group for UserGroup {}

/// A predefined group (rsmpi's `SystemGroup`): only the empty group.
#[derive(Debug, Clone, Copy)]
pub struct SystemGroup(());

impl SystemGroup {
    /// The group without members (`MPI_GROUP_EMPTY`).
    pub fn empty() -> SystemGroup {
        SystemGroup(())
    }
}

impl AsGroup for SystemGroup {
    fn user_group(&self) -> Option<&UserGroup> {
        None
    }
}

impl Group for SystemGroup {}
