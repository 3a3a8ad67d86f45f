//! Rooted collectives: [`Root`] (broadcast, gather(v), scatter(v), reduce), blocking and
//! immediate.

use super::*;
use crate::communicator::AsCommunicator;
use crate::error::CountError;

/// Rooted collectives, called on the root process (rsmpi's `Root`):
/// `world.process_at_rank(root).gather_into(&x)` on every rank but the
/// root, `..._root(&x, &mut all)` on the root.
pub trait Root: AsCore + AsCommunicator {
    /// The root's rank in the communicator.
    fn root_rank(&self) -> Rank;

    /// Launches `maxprocs` copies of a program as new ranks (rsmpi's
    /// `Root::spawn`, `MPI_Comm_spawn`): `Error::Unsupported` at every
    /// rank. myriad's ranks are coroutines of one program, so a program
    /// cannot join the job; spawn ranks running a closure with
    /// [`Communicator::spawn_ranks_from`](crate::traits::Communicator::spawn_ranks_from)
    /// instead (an inter-communicator to the children, as here).
    fn spawn(
        &self,
        command: &std::process::Command,
        maxprocs: Rank,
    ) -> Result<crate::topology::InterCommunicator, Error> {
        let _ = maxprocs;
        Err(Error::Unsupported {
            what: format!(
                "spawning a program ({:?}) as ranks: myriad's ranks are coroutines of this \
                 program; spawn ranks running a closure with \
                 Communicator::spawn_ranks / spawn_ranks_from",
                command.get_program()
            ),
        })
    }

    /// Broadcasts the root's `buffer` into every rank's (`MPI_Bcast`).
    #[track_caller]
    fn broadcast_into<Buf: BufferMut + ?Sized>(&self, buffer: &mut Buf) {
        let (core, root) = (self.core(), self.root_rank());
        let buf = Layout::of_mut(buffer);
        let sig = Signature::new(Collective::Broadcast, Some(root), bytes_of(&buf)).typed(&buf);
        blocking_rooted(
            core,
            "broadcast_into",
            root,
            sig,
            Location::caller(),
            |call| coll::bcast::broadcast(call, root, &buf),
        )
        .or_raise()
    }

    /// Starts a broadcast (`MPI_Ibcast`).
    #[track_caller]
    fn immediate_broadcast_into<'a, Sc, Buf>(
        &self,
        scope: Sc,
        buffer: &'a mut Buf,
    ) -> Request<'a, Buf, Sc>
    where
        Buf: 'a + BufferMut + ?Sized,
        Sc: Scope<'a>,
    {
        let (core, root) = (self.core(), self.root_rank());
        coll::check_root(core, "immediate_broadcast_into", root).or_raise();
        let buf = Layout::of_mut(buffer);
        let sig = Signature::new(Collective::Broadcast, Some(root), bytes_of(&buf)).typed(&buf);
        immediate(core, sig, buffer as *const Buf, scope, move |call| {
            coll::bcast::broadcast(call, root, &buf)
        })
    }

    /// Sends `sendbuf` to the root's gather (`MPI_Gather`, non-root side).
    #[track_caller]
    fn gather_into<S: Buffer + ?Sized>(&self, sendbuf: &S) {
        gather(self, sendbuf, None, Location::caller())
    }

    /// Gathers every rank's `sendbuf` into `recvbuf`, in rank order
    /// (`MPI_Gather`, root side).
    #[track_caller]
    fn gather_into_root<S, R>(&self, sendbuf: &S, recvbuf: &mut R)
    where
        S: Buffer + ?Sized,
        R: BufferMut + ?Sized,
    {
        let recv = Layout::of_mut(recvbuf);
        gather(self, sendbuf, Some(recv), Location::caller())
    }

    /// Starts the non-root side of a gather (`MPI_Igather`).
    #[track_caller]
    fn immediate_gather_into<'a, Sc, S>(&self, scope: Sc, sendbuf: &'a S) -> Request<'a, S, Sc>
    where
        S: 'a + Buffer + ?Sized,
        Sc: Scope<'a>,
    {
        let (core, root) = (self.core(), self.root_rank());
        coll::check_root(core, "immediate_gather_into", root).or_raise();
        let send = Layout::of(sendbuf);
        let sig = Signature::new(Collective::Gather, Some(root), bytes_of(&send)).typed(&send);
        immediate(core, sig, sendbuf as *const S, scope, move |call| {
            coll::gather::gather(call, root, &send, None)
        })
    }

    /// Starts the root side of a gather (`MPI_Igather`).
    #[track_caller]
    fn immediate_gather_into_root<'a, Sc, S, R>(
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
        let (core, root) = (self.core(), self.root_rank());
        coll::check_root(core, "immediate_gather_into_root", root).or_raise();
        let (send, recv) = (Layout::of(sendbuf), Layout::of_mut(recvbuf));
        let sig = Signature::new(Collective::Gather, Some(root), bytes_of(&send)).typed(&send);
        immediate(core, sig, recvbuf as *const R, scope, move |call| {
            coll::gather::gather(call, root, &send, Some(&recv))
        })
    }

    /// Sends `sendbuf` to the root's Gatherv (`MPI_Gatherv`, non-root side).
    #[track_caller]
    fn gather_varcount_into<S: Buffer + ?Sized>(&self, sendbuf: &S) {
        gatherv(self, sendbuf, None, None, Location::caller())
    }

    /// Like [`gather_varcount_into`](Self::gather_varcount_into), passing
    /// the counts and displacements the root uses, so that the
    /// `binomial_aggressive` algorithm can skip broadcasting them (seed
    /// 002's aggressive level; a myriad extension).
    #[track_caller]
    fn gather_varcount_into_known<S: Buffer + ?Sized>(
        &self,
        sendbuf: &S,
        counts: &[Count],
        displs: &[Count],
    ) {
        gatherv(
            self,
            sendbuf,
            None,
            Some((counts, displs)),
            Location::caller(),
        )
    }

    /// Gathers every rank's `sendbuf` into its part of `recvbuf`
    /// (`MPI_Gatherv`, root side).
    #[track_caller]
    fn gather_varcount_into_root<S, R>(&self, sendbuf: &S, recvbuf: &mut R)
    where
        S: Buffer + ?Sized,
        R: PartitionedBufferMut + ?Sized,
    {
        let parts = recv_parts("gather_varcount_into_root", self.core(), recvbuf).or_raise();
        gatherv(self, sendbuf, Some(parts), None, Location::caller())
    }

    /// Starts the non-root side of a Gatherv (`MPI_Igatherv`).
    #[track_caller]
    fn immediate_gather_varcount_into<'a, Sc, S>(
        &self,
        scope: Sc,
        sendbuf: &'a S,
    ) -> Request<'a, S, Sc>
    where
        S: 'a + Buffer + ?Sized,
        Sc: Scope<'a>,
    {
        let (core, root) = (self.core(), self.root_rank());
        coll::check_root(core, "immediate_gather_varcount_into", root).or_raise();
        let send = Layout::of(sendbuf);
        let sig = Signature::new(Collective::GatherVarcount, Some(root), None).typed(&send);
        immediate(core, sig, sendbuf as *const S, scope, move |call| {
            coll::gather::gatherv(call, root, &send, None, None)
        })
    }

    /// Starts the root side of a Gatherv (`MPI_Igatherv`).
    #[track_caller]
    fn immediate_gather_varcount_into_root<'a, Sc, S, R>(
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
        let (core, root) = (self.core(), self.root_rank());
        coll::check_root(core, "immediate_gather_varcount_into_root", root).or_raise();
        let send = Layout::of(sendbuf);
        let parts = recv_parts("immediate_gather_varcount_into_root", core, recvbuf).or_raise();
        let sig = Signature::new(Collective::GatherVarcount, Some(root), None).typed(&send);
        immediate(core, sig, recvbuf as *const R, scope, move |call| {
            coll::gather::gatherv(call, root, &send, Some(&parts), None)
        })
    }

    /// Receives this rank's block of the root's scatter (`MPI_Scatter`,
    /// non-root side).
    #[track_caller]
    fn scatter_into<R: BufferMut + ?Sized>(&self, recvbuf: &mut R) {
        let recv = Layout::of_mut(recvbuf);
        scatter(self, None, recv, Location::caller())
    }

    /// Scatters `sendbuf` in blocks of `recvbuf`'s size, block `r` to rank
    /// `r` (`MPI_Scatter`, root side).
    #[track_caller]
    fn scatter_into_root<S, R>(&self, sendbuf: &S, recvbuf: &mut R)
    where
        S: Buffer + ?Sized,
        R: BufferMut + ?Sized,
    {
        let recv = Layout::of_mut(recvbuf);
        scatter(self, Some(Layout::of(sendbuf)), recv, Location::caller())
    }

    /// Starts the non-root side of a scatter (`MPI_Iscatter`).
    #[track_caller]
    fn immediate_scatter_into<'a, Sc, R>(&self, scope: Sc, recvbuf: &'a mut R) -> Request<'a, R, Sc>
    where
        R: 'a + BufferMut + ?Sized,
        Sc: Scope<'a>,
    {
        let (core, root) = (self.core(), self.root_rank());
        coll::check_root(core, "immediate_scatter_into", root).or_raise();
        let recv = Layout::of_mut(recvbuf);
        let sig = Signature::new(Collective::Scatter, Some(root), bytes_of(&recv)).typed(&recv);
        immediate(core, sig, recvbuf as *const R, scope, move |call| {
            coll::scatter::scatter(call, root, None, &recv)
        })
    }

    /// Starts the root side of a scatter (`MPI_Iscatter`).
    #[track_caller]
    fn immediate_scatter_into_root<'a, Sc, S, R>(
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
        let (core, root) = (self.core(), self.root_rank());
        coll::check_root(core, "immediate_scatter_into_root", root).or_raise();
        let (send, recv) = (Layout::of(sendbuf), Layout::of_mut(recvbuf));
        let sig = Signature::new(Collective::Scatter, Some(root), bytes_of(&recv)).typed(&recv);
        immediate(core, sig, recvbuf as *const R, scope, move |call| {
            coll::scatter::scatter(call, root, Some(&send), &recv)
        })
    }

    /// Receives this rank's part of the root's Scatterv (`MPI_Scatterv`,
    /// non-root side).
    #[track_caller]
    fn scatter_varcount_into<R: BufferMut + ?Sized>(&self, recvbuf: &mut R) {
        let recv = Layout::of_mut(recvbuf);
        scatterv(self, None, recv, Location::caller())
    }

    /// Scatters the parts of `sendbuf`, part `r` to rank `r`
    /// (`MPI_Scatterv`, root side).
    #[track_caller]
    fn scatter_varcount_into_root<S, R>(&self, sendbuf: &S, recvbuf: &mut R)
    where
        S: PartitionedBuffer + ?Sized,
        R: BufferMut + ?Sized,
    {
        let parts = send_parts("scatter_varcount_into_root", self.core(), sendbuf).or_raise();
        let recv = Layout::of_mut(recvbuf);
        scatterv(self, Some(parts), recv, Location::caller())
    }

    /// Starts the non-root side of a Scatterv (`MPI_Iscatterv`).
    #[track_caller]
    fn immediate_scatter_varcount_into<'a, Sc, R>(
        &self,
        scope: Sc,
        recvbuf: &'a mut R,
    ) -> Request<'a, R, Sc>
    where
        R: 'a + BufferMut + ?Sized,
        Sc: Scope<'a>,
    {
        let (core, root) = (self.core(), self.root_rank());
        coll::check_root(core, "immediate_scatter_varcount_into", root).or_raise();
        let recv = Layout::of_mut(recvbuf);
        let sig = Signature::new(Collective::ScatterVarcount, Some(root), None).typed(&recv);
        immediate(core, sig, recvbuf as *const R, scope, move |call| {
            coll::scatter::scatterv(call, root, None, &recv)
        })
    }

    /// Starts the root side of a Scatterv (`MPI_Iscatterv`).
    #[track_caller]
    fn immediate_scatter_varcount_into_root<'a, Sc, S, R>(
        &self,
        scope: Sc,
        sendbuf: &'a S,
        recvbuf: &'a mut R,
    ) -> Request<'a, R, Sc>
    where
        S: 'a + PartitionedBuffer + ?Sized,
        R: 'a + BufferMut + ?Sized,
        Sc: Scope<'a>,
    {
        let (core, root) = (self.core(), self.root_rank());
        coll::check_root(core, "immediate_scatter_varcount_into_root", root).or_raise();
        let parts = send_parts("immediate_scatter_varcount_into_root", core, sendbuf).or_raise();
        let recv = Layout::of_mut(recvbuf);
        let sig = Signature::new(Collective::ScatterVarcount, Some(root), None).typed(&recv);
        immediate(core, sig, recvbuf as *const R, scope, move |call| {
            coll::scatter::scatterv(call, root, Some(&parts), &recv)
        })
    }

    /// Contributes `sendbuf` to the root's reduction (`MPI_Reduce`,
    /// non-root side).
    #[track_caller]
    fn reduce_into<S, O>(&self, sendbuf: &S, op: O)
    where
        S: Buffer + ?Sized,
        O: Operation,
    {
        reduce(self, sendbuf, None, op, Location::caller())
    }

    /// Reduces every rank's `sendbuf` with `op` into `recvbuf`
    /// (`MPI_Reduce`, root side).
    #[track_caller]
    fn reduce_into_root<S, R, O>(&self, sendbuf: &S, recvbuf: &mut R, op: O)
    where
        S: Buffer + ?Sized,
        R: BufferMut + ?Sized,
        O: Operation,
    {
        let recv = Layout::of_mut(recvbuf);
        reduce(self, sendbuf, Some(recv), op, Location::caller())
    }

    /// Starts the non-root side of a reduction (`MPI_Ireduce`).
    #[track_caller]
    fn immediate_reduce_into<'a, Sc, S, O>(
        &self,
        scope: Sc,
        sendbuf: &'a S,
        op: O,
    ) -> Request<'a, S, Sc>
    where
        S: 'a + Buffer + ?Sized,
        O: 'a + Operation,
        Sc: Scope<'a>,
    {
        let (core, root) = (self.core(), self.root_rank());
        coll::check_root(core, "immediate_reduce_into", root).or_raise();
        let send = Layout::of(sendbuf);
        let sig = Signature::new(Collective::Reduce, Some(root), bytes_of(&send)).typed(&send);
        immediate(core, sig, sendbuf as *const S, scope, move |call| {
            reduce_body(call, Some(root), &op, &send, None)
        })
    }

    /// Starts the root side of a reduction (`MPI_Ireduce`).
    #[track_caller]
    fn immediate_reduce_into_root<'a, Sc, S, R, O>(
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
        let (core, root) = (self.core(), self.root_rank());
        coll::check_root(core, "immediate_reduce_into_root", root).or_raise();
        let (send, recv) = (Layout::of(sendbuf), Layout::of_mut(recvbuf));
        let sig = Signature::new(Collective::Reduce, Some(root), bytes_of(&send)).typed(&send);
        immediate(core, sig, recvbuf as *const R, scope, move |call| {
            reduce_body(call, Some(root), &op, &send, Some(&recv))
        })
    }
}

impl Root for Process<'_> {
    fn root_rank(&self) -> Rank {
        self.rank
    }
}

#[track_caller]
fn gather<P: Root + ?Sized, S: Buffer + ?Sized>(
    root: &P,
    sendbuf: &S,
    recv: Option<Layout>,
    site: &'static Location<'static>,
) {
    let (core, r) = (root.core(), root.root_rank());
    let send = Layout::of(sendbuf);
    let sig = Signature::new(Collective::Gather, Some(r), bytes_of(&send)).typed(&send);
    blocking_rooted(core, "gather_into", r, sig, site, |call| {
        coll::gather::gather(call, r, &send, recv.as_ref())
    })
    .or_raise()
}

#[track_caller]
fn gatherv<P: Root + ?Sized, S: Buffer + ?Sized>(
    root: &P,
    sendbuf: &S,
    parts: Option<Parts>,
    known: Option<(&[Count], &[Count])>,
    site: &'static Location<'static>,
) {
    let (core, r) = (root.core(), root.root_rank());
    let send = Layout::of(sendbuf);
    let sig = Signature::new(Collective::GatherVarcount, Some(r), None).typed(&send);
    let known: Option<(Vec<usize>, Vec<usize>)> = known.map(|(c, d)| {
        (
            c.iter().map(|&x| x.max(0) as usize).collect(),
            d.iter().map(|&x| x.max(0) as usize).collect(),
        )
    });
    coll::check_root(core, "gather_varcount_into", r)
        .and_then(|()| {
            if let Some((c, d)) = &known {
                if c.len() != core.size() as usize || d.len() != core.size() as usize {
                    return Err(Error::Count(CountError::PartitionLength {
                        op: "gather_varcount_into_known",
                        counts: c.len(),
                        displs: d.len(),
                        size: core.size() as usize,
                    }));
                }
            }
            blocking(core, sig, site, |call| {
                let known = known.as_ref().map(|(c, d)| (c.as_slice(), d.as_slice()));
                coll::gather::gatherv(call, r, &send, parts.as_ref(), known)
            })
        })
        .or_raise()
}

#[track_caller]
fn scatter<P: Root + ?Sized>(
    root: &P,
    send: Option<Layout>,
    recv: Layout,
    site: &'static Location<'static>,
) {
    let (core, r) = (root.core(), root.root_rank());
    let sig = Signature::new(Collective::Scatter, Some(r), bytes_of(&recv)).typed(&recv);
    blocking_rooted(core, "scatter_into", r, sig, site, |call| {
        coll::scatter::scatter(call, r, send.as_ref(), &recv)
    })
    .or_raise()
}

#[track_caller]
fn scatterv<P: Root + ?Sized>(
    root: &P,
    parts: Option<Parts>,
    recv: Layout,
    site: &'static Location<'static>,
) {
    let (core, r) = (root.core(), root.root_rank());
    let sig = Signature::new(Collective::ScatterVarcount, Some(r), None).typed(&recv);
    blocking_rooted(core, "scatter_varcount_into", r, sig, site, |call| {
        coll::scatter::scatterv(call, r, parts.as_ref(), &recv)
    })
    .or_raise()
}

#[track_caller]
fn reduce<P: Root + ?Sized, S: Buffer + ?Sized, O: Operation>(
    root: &P,
    sendbuf: &S,
    recv: Option<Layout>,
    op: O,
    site: &'static Location<'static>,
) {
    let (core, r) = (root.core(), root.root_rank());
    let send = Layout::of(sendbuf);
    let sig = Signature::new(Collective::Reduce, Some(r), bytes_of(&send)).typed(&send);
    blocking_rooted(core, "reduce_into", r, sig, site, |call| {
        reduce_body(call, Some(r), &op, &send, recv.as_ref())
    })
    .or_raise()
}
