//! The world communicator's predefined attributes, `MPI_UNIVERSE_SIZE` and
//! `MPI_APPNUM`, as plain values the job's [`Registry`] keeps. They are
//! attributes (`CommAttribute`, public as `myriad::attribute`) in the API
//! layer above, which answers them for the world (`AnyCommunicator::get_attr`).

use std::any::Any;

use super::Registry;

/// `MPI_UNIVERSE_SIZE`, a predefined attribute of the world communicator:
/// the number of ranks of the job (`usize::from(&size)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UniverseSize(usize);

impl UniverseSize {
    pub(crate) fn new(ranks: u32) -> UniverseSize {
        UniverseSize(ranks as usize)
    }
}

impl From<&UniverseSize> for usize {
    fn from(size: &UniverseSize) -> usize {
        size.0
    }
}

/// `MPI_APPNUM`, a predefined attribute of the world communicator: the
/// number of the application in the job (myriad runs one: 0;
/// `isize::from(&appnum)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppNum(isize);

impl AppNum {
    pub(crate) fn new(number: isize) -> AppNum {
        AppNum(number)
    }
}

impl From<&AppNum> for isize {
    fn from(appnum: &AppNum) -> isize {
        appnum.0
    }
}

impl Registry {
    /// The world communicator's predefined attribute of type `A`, if `A`
    /// is one.
    pub(crate) fn predefined<A: Any>(&self) -> Option<&A> {
        let universe: &dyn Any = &self.universe_size;
        let appnum: &dyn Any = &self.appnum;
        universe
            .downcast_ref::<A>()
            .or_else(|| appnum.downcast_ref::<A>())
    }
}
