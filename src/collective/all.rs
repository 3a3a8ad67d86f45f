//! Collectives without a root: [`CommunicatorCollectives`] (barrier, all-gather(v),
//! all-to-all(v), all-reduce, reduce-scatter, scans), blocking and immediate.

use super::*;

/// Collectives of every communicator (rsmpi's `CommunicatorCollectives`).
pub trait CommunicatorCollectives: Communicator {
    /// Blocks until every rank of the communicator has called `barrier`
    /// (`MPI_Barrier`). The waiting ranks park: they cost no CPU.
    #[track_caller]
    fn barrier(&self) {
        self.try_barrier().or_raise()
    }

    /// Like [`barrier`](Self::barrier), returning errors instead of
    /// panicking (a myriad extension).
    #[track_caller]
    fn try_barrier(&self) -> Result<(), Error> {
        let sig = Signature::new(Collective::Barrier, None, None);
        blocking(self.core(), sig, Location::caller(), coll::barrier::barrier)
    }

    /// Starts a barrier (`MPI_Ibarrier`).
    #[track_caller]
    fn immediate_barrier(&self) -> Request<'static, ()> {
        let sig = Signature::new(Collective::Barrier, None, None);
        immediate(self.core(), sig, &(), StaticScope, coll::barrier::barrier)
    }

    /// Chooses the algorithm of `collective` on this communicator (for every
    /// rank: call it on all ranks before their next call of `collective`).
    /// An algorithm the collective does not have is an error listing those
    /// it has.
    fn set_collective_algorithm(
        &self,
        collective: Collective,
        algorithm: Algorithm,
    ) -> Result<(), Error> {
        let core = self.core();
        core.coll()
            .selection
            .set(collective, algorithm, &core.shared().locality, || {
                core.name()
            })
    }

    /// Gathers every rank's `sendbuf` into every rank's `recvbuf`, in rank
    /// order (`MPI_Allgather`).
    #[track_caller]
    fn all_gather_into<S, R>(&self, sendbuf: &S, recvbuf: &mut R)
    where
        S: Buffer + ?Sized,
        R: BufferMut + ?Sized,
    {
        let (send, recv) = (Layout::of(sendbuf), Layout::of_mut(recvbuf));
        let sig = Signature::new(Collective::AllGather, None, bytes_of(&send)).typed(&send);
        blocking(self.core(), sig, Location::caller(), |call| {
            coll::allgather::allgather(call, &send, &recv)
        })
        .or_raise()
    }

    /// Starts an all-gather (`MPI_Iallgather`).
    #[track_caller]
    fn immediate_all_gather_into<'a, Sc, S, R>(
        &self,
        scope: Sc,
        sendbuf: &'a S,
        recvbuf: &'a mut R,
    ) -> Request<'a, R, Sc>
    where
        S: 'a + Buffer + ?Sized,
        R: 'a + BufferMut + ?Sized,
        Sc: Scope<'a>,
    {
        let (send, recv) = (Layout::of(sendbuf), Layout::of_mut(recvbuf));
        let sig = Signature::new(Collective::AllGather, None, bytes_of(&send)).typed(&send);
        immediate(self.core(), sig, recvbuf as *const R, scope, move |call| {
            coll::allgather::allgather(call, &send, &recv)
        })
    }

    /// Gathers every rank's `sendbuf` into every rank's part of `recvbuf`
    /// (`MPI_Allgatherv`).
    #[track_caller]
    fn all_gather_varcount_into<S, R>(&self, sendbuf: &S, recvbuf: &mut R)
    where
        S: Buffer + ?Sized,
        R: PartitionedBufferMut + ?Sized,
    {
        let core = self.core();
        let send = Layout::of(sendbuf);
        let sig = Signature::new(Collective::AllGatherVarcount, None, None).typed(&send);
        recv_parts("all_gather_varcount_into", core, recvbuf)
            .and_then(|recv| {
                blocking(core, sig, Location::caller(), |call| {
                    coll::allgather::allgatherv(call, &send, &recv)
                })
            })
            .or_raise()
    }

    /// Starts an all-gather with varying counts (`MPI_Iallgatherv`).
    #[track_caller]
    fn immediate_all_gather_varcount_into<'a, Sc, S, R>(
        &self,
        scope: Sc,
        sendbuf: &'a S,
        recvbuf: &'a mut R,
    ) -> Request<'a, R, Sc>
    where
        S: 'a + Buffer + ?Sized,
        R: 'a + PartitionedBufferMut + ?Sized,
        Sc: Scope<'a>,
    {
        let core = self.core();
        let send = Layout::of(sendbuf);
        let recv = recv_parts("immediate_all_gather_varcount_into", core, recvbuf).or_raise();
        let sig = Signature::new(Collective::AllGatherVarcount, None, None).typed(&send);
        immediate(core, sig, recvbuf as *const R, scope, move |call| {
            coll::allgather::allgatherv(call, &send, &recv)
        })
    }

    /// Sends block `j` of `sendbuf` to rank `j`, which receives it in block
    /// `i` (the sender's rank) of its `recvbuf` (`MPI_Alltoall`).
    #[track_caller]
    fn all_to_all_into<S, R>(&self, sendbuf: &S, recvbuf: &mut R)
    where
        S: Buffer + ?Sized,
        R: BufferMut + ?Sized,
    {
        let (send, recv) = (Layout::of(sendbuf), Layout::of_mut(recvbuf));
        let sig = Signature::new(Collective::AllToAll, None, bytes_of(&send)).typed(&send);
        blocking(self.core(), sig, Location::caller(), |call| {
            coll::alltoall::alltoall(call, &send, &recv)
        })
        .or_raise()
    }

    /// Starts an all-to-all (`MPI_Ialltoall`).
    #[track_caller]
    fn immediate_all_to_all_into<'a, Sc, S, R>(
        &self,
        scope: Sc,
        sendbuf: &'a S,
        recvbuf: &'a mut R,
    ) -> Request<'a, R, Sc>
    where
        S: 'a + Buffer + ?Sized,
        R: 'a + BufferMut + ?Sized,
        Sc: Scope<'a>,
    {
        let (send, recv) = (Layout::of(sendbuf), Layout::of_mut(recvbuf));
        let sig = Signature::new(Collective::AllToAll, None, bytes_of(&send)).typed(&send);
        immediate(self.core(), sig, recvbuf as *const R, scope, move |call| {
            coll::alltoall::alltoall(call, &send, &recv)
        })
    }

    /// All-to-all with a part per rank on both sides (`MPI_Alltoallv`).
    #[track_caller]
    fn all_to_all_varcount_into<S, R>(&self, sendbuf: &S, recvbuf: &mut R)
    where
        S: PartitionedBuffer + ?Sized,
        R: PartitionedBufferMut + ?Sized,
    {
        let core = self.core();
        let sig = Signature::new(Collective::AllToAllVarcount, None, None);
        send_parts("all_to_all_varcount_into", core, sendbuf)
            .and_then(|send| {
                let recv = recv_parts("all_to_all_varcount_into", core, recvbuf)?;
                let sig = sig.typed(&send.buf);
                blocking(core, sig, Location::caller(), |call| {
                    coll::alltoall::alltoallv(call, &send, &recv)
                })
            })
            .or_raise()
    }

    /// Starts an all-to-all with varying counts (`MPI_Ialltoallv`).
    #[track_caller]
    fn immediate_all_to_all_varcount_into<'a, Sc, S, R>(
        &self,
        scope: Sc,
        sendbuf: &'a S,
        recvbuf: &'a mut R,
    ) -> Request<'a, R, Sc>
    where
        S: 'a + PartitionedBuffer + ?Sized,
        R: 'a + PartitionedBufferMut + ?Sized,
        Sc: Scope<'a>,
    {
        let core = self.core();
        let send = send_parts("immediate_all_to_all_varcount_into", core, sendbuf).or_raise();
        let recv = recv_parts("immediate_all_to_all_varcount_into", core, recvbuf).or_raise();
        let sig = Signature::new(Collective::AllToAllVarcount, None, None).typed(&send.buf);
        immediate(core, sig, recvbuf as *const R, scope, move |call| {
            coll::alltoall::alltoallv(call, &send, &recv)
        })
    }

    /// Reduces every rank's `sendbuf` with `op` into every rank's `recvbuf`
    /// (`MPI_Allreduce`).
    #[track_caller]
    fn all_reduce_into<S, R, O>(&self, sendbuf: &S, recvbuf: &mut R, op: O)
    where
        S: Buffer + ?Sized,
        R: BufferMut + ?Sized,
        O: Operation,
    {
        let (send, recv) = (Layout::of(sendbuf), Layout::of_mut(recvbuf));
        let sig = Signature::new(Collective::AllReduce, None, bytes_of(&send)).typed(&send);
        blocking(self.core(), sig, Location::caller(), |call| {
            reduce_body(call, None, &op, &send, Some(&recv))
        })
        .or_raise()
    }

    /// Starts an all-reduce (`MPI_Iallreduce`).
    #[track_caller]
    fn immediate_all_reduce_into<'a, Sc, S, R, O>(
        &self,
        scope: Sc,
        sendbuf: &'a S,
        recvbuf: &'a mut R,
        op: O,
    ) -> Request<'a, R, Sc>
    where
        S: 'a + Buffer + ?Sized,
        R: 'a + BufferMut + ?Sized,
        O: 'a + Operation,
        Sc: Scope<'a>,
    {
        let (send, recv) = (Layout::of(sendbuf), Layout::of_mut(recvbuf));
        let sig = Signature::new(Collective::AllReduce, None, bytes_of(&send)).typed(&send);
        immediate(self.core(), sig, recvbuf as *const R, scope, move |call| {
            reduce_body(call, None, &op, &send, Some(&recv))
        })
    }

    /// Reduces every rank's `sendbuf` (`size × recvbuf` elements) and gives
    /// rank `r` block `r` of the result (`MPI_Reduce_scatter_block`).
    #[track_caller]
    fn reduce_scatter_block_into<S, R, O>(&self, sendbuf: &S, recvbuf: &mut R, op: O)
    where
        S: Buffer + ?Sized,
        R: BufferMut + ?Sized,
        O: Operation,
    {
        let (send, recv) = (Layout::of(sendbuf), Layout::of_mut(recvbuf));
        let sig =
            Signature::new(Collective::ReduceScatterBlock, None, bytes_of(&recv)).typed(&send);
        blocking(self.core(), sig, Location::caller(), |call| {
            reduce_scatter_block_body(call, &op, &send, &recv)
        })
        .or_raise()
    }

    /// Starts a reduce-scatter-block (`MPI_Ireduce_scatter_block`).
    #[track_caller]
    fn immediate_reduce_scatter_block_into<'a, Sc, S, R, O>(
        &self,
        scope: Sc,
        sendbuf: &'a S,
        recvbuf: &'a mut R,
        op: O,
    ) -> Request<'a, R, Sc>
    where
        S: 'a + Buffer + ?Sized,
        R: 'a + BufferMut + ?Sized,
        O: 'a + Operation,
        Sc: Scope<'a>,
    {
        let (send, recv) = (Layout::of(sendbuf), Layout::of_mut(recvbuf));
        let sig =
            Signature::new(Collective::ReduceScatterBlock, None, bytes_of(&recv)).typed(&send);
        immediate(self.core(), sig, recvbuf as *const R, scope, move |call| {
            reduce_scatter_block_body(call, &op, &send, &recv)
        })
    }

    /// Inclusive prefix reduction: rank `r` gets `x0 op ... op xr`
    /// (`MPI_Scan`).
    #[track_caller]
    fn scan_into<S, R, O>(&self, sendbuf: &S, recvbuf: &mut R, op: O)
    where
        S: Buffer + ?Sized,
        R: BufferMut + ?Sized,
        O: Operation,
    {
        scan(
            self.core(),
            Collective::Scan,
            sendbuf,
            recvbuf,
            op,
            Location::caller(),
        )
    }

    /// Starts an inclusive scan (`MPI_Iscan`).
    #[track_caller]
    fn immediate_scan_into<'a, Sc, S, R, O>(
        &self,
        scope: Sc,
        sendbuf: &'a S,
        recvbuf: &'a mut R,
        op: O,
    ) -> Request<'a, R, Sc>
    where
        S: 'a + Buffer + ?Sized,
        R: 'a + BufferMut + ?Sized,
        O: 'a + Operation,
        Sc: Scope<'a>,
    {
        immediate_scan(self.core(), Collective::Scan, scope, sendbuf, recvbuf, op)
    }

    /// Exclusive prefix reduction: rank `r > 0` gets `x0 op ... op x(r-1)`;
    /// rank 0's `recvbuf` is left as it is (`MPI_Exscan`).
    #[track_caller]
    fn exclusive_scan_into<S, R, O>(&self, sendbuf: &S, recvbuf: &mut R, op: O)
    where
        S: Buffer + ?Sized,
        R: BufferMut + ?Sized,
        O: Operation,
    {
        scan(
            self.core(),
            Collective::ExclusiveScan,
            sendbuf,
            recvbuf,
            op,
            Location::caller(),
        )
    }

    /// Starts an exclusive scan (`MPI_Iexscan`).
    #[track_caller]
    fn immediate_exclusive_scan_into<'a, Sc, S, R, O>(
        &self,
        scope: Sc,
        sendbuf: &'a S,
        recvbuf: &'a mut R,
        op: O,
    ) -> Request<'a, R, Sc>
    where
        S: 'a + Buffer + ?Sized,
        R: 'a + BufferMut + ?Sized,
        O: 'a + Operation,
        Sc: Scope<'a>,
    {
        immediate_scan(
            self.core(),
            Collective::ExclusiveScan,
            scope,
            sendbuf,
            recvbuf,
            op,
        )
    }
}

impl<C: Communicator + ?Sized> CommunicatorCollectives for C {}

#[track_caller]
fn scan<S, R, O>(
    core: &CommCore,
    kind: Collective,
    sendbuf: &S,
    recvbuf: &mut R,
    op: O,
    site: &'static Location<'static>,
) where
    S: Buffer + ?Sized,
    R: BufferMut + ?Sized,
    O: Operation,
{
    let (send, recv) = (Layout::of(sendbuf), Layout::of_mut(recvbuf));
    let sig = Signature::new(kind, None, bytes_of(&send)).typed(&send);
    blocking(core, sig, site, |call| {
        scan_body(call, kind, &op, &send, &recv)
    })
    .or_raise()
}

#[track_caller]
fn immediate_scan<'a, Sc, S, R, O>(
    core: &CommCore,
    kind: Collective,
    scope: Sc,
    sendbuf: &'a S,
    recvbuf: &'a mut R,
    op: O,
) -> Request<'a, R, Sc>
where
    S: 'a + Buffer + ?Sized,
    R: 'a + BufferMut + ?Sized,
    O: 'a + Operation,
    Sc: Scope<'a>,
{
    let (send, recv) = (Layout::of(sendbuf), Layout::of_mut(recvbuf));
    let sig = Signature::new(kind, None, bytes_of(&send)).typed(&send);
    immediate(core, sig, recvbuf as *const R, scope, move |call| {
        scan_body(call, kind, &op, &send, &recv)
    })
}
