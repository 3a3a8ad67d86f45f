//! Collective operations, shaped like rsmpi's `mpi::collective`.

use std::panic::Location;

use crate::comm::Communicator;
use crate::error::{raise, Error};

/// Collectives every communicator has (rsmpi's `CommunicatorCollectives`).
pub trait CommunicatorCollectives: Communicator {
    /// Blocks until every rank of the communicator has called `barrier`
    /// (`MPI_Barrier`). The waiting ranks park: they cost no CPU.
    #[track_caller]
    fn barrier(&self) {
        if let Err(err) = self.try_barrier_at(Location::caller()) {
            raise(err)
        }
    }

    /// Like [`barrier`](Self::barrier), returning errors instead of
    /// panicking (a myriad extension).
    #[track_caller]
    fn try_barrier(&self) -> Result<(), Error> {
        self.try_barrier_at(Location::caller())
    }

    #[doc(hidden)]
    fn try_barrier_at(&self, site: &'static Location<'static>) -> Result<(), Error> {
        let core = self.core();
        core.shared().barrier.wait(core, site)
    }
}

impl<C: Communicator + ?Sized> CommunicatorCollectives for C {}
