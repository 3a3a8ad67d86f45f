//! Collective operations, shaped like rsmpi's `mpi::collective`.
//!
//! Collectives that have no root are methods of every communicator
//! ([`CommunicatorCollectives`]); rooted ones are methods of the root
//! process ([`Root`]): `world.process_at_rank(0).broadcast_into(&mut buf)` on
//! every rank, `gather_into_root` on the root and `gather_into` elsewhere.
//! Every blocking collective has an `immediate_*` form returning a
//! [`Request`]; several may be outstanding on one communicator.
//!
//! Each collective call is checked against the other ranks' (same
//! operation, root, sizes and algorithm); a mismatch fails the job with both
//! calls and their call sites instead of hanging. Algorithms are chosen per
//! call by the selector, per communicator with
//! [`CommunicatorCollectives::set_collective_algorithm`], or per process
//! with `MYRIAD_COLL_<COLLECTIVE>=<algorithm>` (see [`Collective`] and
//! [`Algorithm`]).
//!
//! As in rsmpi, failures panic (the job then fails with the message); the
//! message names the rank, the operation and the values.

use std::panic::Location;

pub use crate::coll::gather::{last_root_stats, RootStats};
pub use crate::coll::op::{
    reduce_local_into, DynBuffer, DynBufferMut, Operation, SystemOperation, UserOperation,
};
pub use crate::coll::{Algorithm, Collective};

use crate::coll::check::Signature;
use crate::coll::parts::Parts;
use crate::coll::{self, Call};
use crate::comm::{AsCore, CommCore, Communicator, Process};
use crate::datatype::copy::Layout;
use crate::datatype::{Buffer, BufferMut, Partitioned, PartitionedBuffer, PartitionedBufferMut};
use crate::error::{Error, OrRaise};
use crate::p2p::completion::{Completion, Outcome};
use crate::p2p::Queued;
use crate::request::{Kind as RequestKind, PendingOp, Request, Scope, StaticScope};
use crate::sched::{self, task};
use crate::{Count, Rank};

/// Runs a blocking collective: begins the call, runs `body`.
fn blocking(
    core: &CommCore,
    signature: Signature,
    site: &'static Location<'static>,
    body: impl FnOnce(&Call<'_>) -> Result<(), Error>,
) -> Result<(), Error> {
    let call = coll::begin(core, signature, Algorithm::Auto, site)?;
    body(&call)
}

/// Runs a blocking rooted collective: checks the root (errors name `op`),
/// then as [`blocking`].
fn blocking_rooted(
    core: &CommCore,
    op: &'static str,
    root: Rank,
    signature: Signature,
    site: &'static Location<'static>,
    body: impl FnOnce(&Call<'_>) -> Result<(), Error>,
) -> Result<(), Error> {
    coll::check_root(core, op, root)?;
    blocking(core, signature, site, body)
}

/// Starts an immediate collective: begins the call now (its sequence number
/// fixes its place among the communicator's collectives) and runs `body` on
/// a task; the request completes when the body returns.
#[track_caller]
fn immediate<'a, D: ?Sized, Sc: Scope<'a>>(
    core: &CommCore,
    mut signature: Signature,
    data: *const D,
    scope: Sc,
    body: impl FnOnce(&Call<'_>) -> Result<(), Error> + 'a,
) -> Request<'a, D, Sc> {
    let site = Location::caller();
    let ctx = core.caller().or_raise();
    let (seq, kind, algorithm, signature) = {
        let call = coll::begin_as(core, ctx, &mut signature, Algorithm::Auto, site).or_raise();
        (call.seq, call.kind, call.algorithm, call.signature)
    };
    let pending = PendingOp::new(core, ctx.slot, Queued::Task, RequestKind::Collective);
    let completion: *const Completion = &pending.completion;
    let comm = core.clone();
    let run = move || {
        let ctx = sched::rank::current().expect("a task runs on a worker");
        let call = Call {
            comm: &comm,
            ctx,
            seq,
            kind,
            algorithm,
            site,
            signature,
        };
        // A failure fails the job (the task panics with the error).
        body(&call).or_raise();
        // SAFETY: the request keeps the completion alive until it is done
        // (dropping it early settles it: its rank waits for this task, and
        // where it cannot wait the job fails and this task never resumes);
        // read the waiter first.
        let waiter = unsafe { (*completion).waiter() };
        // SAFETY: this task is the completion's only completer.
        unsafe { (*completion).complete(Outcome::default()) };
        sched::unpark(comm.job(), waiter);
    };
    // SAFETY: the task borrows buffers for 'a; the request, registered in a
    // scope of 'a, completes (or its drop waits) only once the task's body
    // has returned.
    unsafe { task::spawn(ctx, Box::new(run)) }.or_raise();
    Request::new(pending.into_op(), data, scope)
}

fn bytes_of(layout: &Layout) -> Option<usize> {
    Some(layout.bytes())
}

/// The body of a reduction, blocking or immediate: checks the operation
/// and the buffers, then reduces to `root` (`None`: to every rank).
fn reduce_body<O: Operation + ?Sized>(
    call: &Call<'_>,
    root: Option<Rank>,
    op: &O,
    send: &Layout,
    recv: Option<&Layout>,
) -> Result<(), Error> {
    let (opref, commutative) = (op.op(), op.is_commutative());
    coll::reduce::check(call, &opref, send, recv)?;
    coll::reduce::reduce(call, root, &opref, commutative, send, recv)
}

/// The body of a reduce-scatter-block, blocking or immediate.
fn reduce_scatter_block_body<O: Operation + ?Sized>(
    call: &Call<'_>,
    op: &O,
    send: &Layout,
    recv: &Layout,
) -> Result<(), Error> {
    let opref = op.op();
    coll::reduce::check(call, &opref, send, None)?;
    coll::reduce::reduce_scatter_block(call, &opref, send, recv)
}

/// The body of an inclusive or exclusive scan (`kind`), blocking or
/// immediate.
fn scan_body<O: Operation + ?Sized>(
    call: &Call<'_>,
    kind: Collective,
    op: &O,
    send: &Layout,
    recv: &Layout,
) -> Result<(), Error> {
    let (opref, commutative) = (op.op(), op.is_commutative());
    coll::reduce::check(call, &opref, send, Some(recv))?;
    let exclusive = kind == Collective::ExclusiveScan;
    coll::scan::scan(call, &opref, commutative, send, recv, exclusive)
}

fn parts_of<P: Partitioned + ?Sized>(
    op: &'static str,
    core: &CommCore,
    buf: Layout,
    p: &P,
    total: Count,
    receive: bool,
) -> Result<Parts, Error> {
    Parts::new(op, buf, p.counts(), p.displs(), total, core.size(), receive)
}

fn send_parts<B: PartitionedBuffer + ?Sized>(
    op: &'static str,
    core: &CommCore,
    buf: &B,
) -> Result<Parts, Error> {
    let layout = Layout::at(
        buf.pointer() as *const u8,
        buf.total_count() as usize,
        crate::datatype::Datatype::handle(&buf.as_datatype()),
    );
    parts_of(op, core, layout, buf, buf.total_count(), false)
}

fn recv_parts<B: PartitionedBufferMut + ?Sized>(
    op: &'static str,
    core: &CommCore,
    buf: &mut B,
) -> Result<Parts, Error> {
    let total = buf.total_count();
    let layout = Layout::at(
        buf.pointer_mut() as *const u8,
        total as usize,
        crate::datatype::Datatype::handle(&buf.as_datatype()),
    );
    parts_of(op, core, layout, &*buf, total, true)
}

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
        self.core()
            .shared()
            .coll
            .selection
            .set(collective, algorithm)
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

/// Rooted collectives, called on the root process (rsmpi's `Root`):
/// `world.process_at_rank(root).gather_into(&x)` on every rank but the
/// root, `..._root(&x, &mut all)` on the root.
pub trait Root: AsCore {
    /// The root's rank in the communicator.
    fn root_rank(&self) -> Rank;

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
                    return Err(Error::Count {
                        message: format!(
                            "gather_varcount_into_known: {} counts and {} displacements for a \
                             communicator of {} ranks",
                            c.len(),
                            d.len(),
                            core.size()
                        ),
                    });
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
