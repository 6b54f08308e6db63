//! [`NcclCommunicator`]: collectives and grouped send/recv on device
//! buffers with NCCL (loaded at run time through cudarc), one GPU per rank.
//!
//! Takes the CUDA backends of the ranks of this process (one device each:
//! NCCL refuses two ranks on one GPU); gives one communicator per rank whose
//! calls are enqueued on that backend's stream, so they are ordered with its
//! kernels and copies and never touch the host. [`Communicator::synchronize`]
//! waits for the stream.
//!
//! NCCL has no collectives with uneven per-rank counts: an uneven
//! reduce-scatter is a group of `ncclReduce` calls (block j reduced onto rank
//! j), an uneven all-gather a group of `ncclBroadcast` calls. Byte counters
//! follow the ring formulas of [`comm::traffic`], like every communicator
//! here, so they equal the planner's prediction.

use comm::traffic::{self, Traffic};
use comm::{ByteCounters, Collectives, CommError, Communicator, P2p, Rank, ReduceOp};
use cudarc::nccl::{group_end, group_start, Comm, ReduceOp as NcclOp};

use super::{CudaBackend, CudaBuffer};
use crate::backend::BackendError;

/// An NCCL communicator, owned by one rank's thread.
struct Owned(Comm);

// SAFETY: an NCCL communicator may be used from any thread as long as calls
// on it are not concurrent; `Owned` is only reached through `&mut
// NcclCommunicator`, which gives one thread at a time.
unsafe impl Send for Owned {}

/// One rank of an NCCL clique (see the module doc).
pub struct NcclCommunicator {
    comm: Owned,
    counters: ByteCounters,
}

impl std::fmt::Debug for NcclCommunicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NcclCommunicator")
            .field("rank", &self.comm.0.rank())
            .field("world_size", &self.comm.0.world_size())
            .finish()
    }
}

fn nccl_fail(message: String) -> BackendError {
    BackendError::Device {
        backend: "cuda",
        message,
    }
}

/// libnccl is loadable (so cudarc never panics on a missing library).
fn check_nccl() -> Result<(), BackendError> {
    // SAFETY: only tries to open the shared library.
    if unsafe { cudarc::nccl::sys::is_culib_present() } {
        Ok(())
    } else {
        Err(nccl_fail(
            "libnccl (NCCL) could not be loaded: install NCCL, or pass \
             --ranks-per-device to communicate through the host"
                .into(),
        ))
    }
}

fn op_of(op: ReduceOp) -> NcclOp {
    match op {
        ReduceOp::Sum => NcclOp::Sum,
        ReduceOp::Prod => NcclOp::Prod,
        ReduceOp::Max => NcclOp::Max,
        ReduceOp::Min => NcclOp::Min,
    }
}

impl NcclCommunicator {
    /// One communicator per backend, rank r on `backends[r]`'s device and
    /// stream (`ncclCommInitAll`).
    ///
    /// Errors: libnccl missing, two backends on one device, an NCCL failure.
    pub fn for_backends(backends: &[CudaBackend]) -> Result<Vec<Self>, BackendError> {
        let fail = nccl_fail;
        check_nccl()?;
        let mut seen = std::collections::HashSet::new();
        for b in backends {
            if !seen.insert(b.ordinal()) {
                return Err(fail(format!(
                    "two ranks on device {}: NCCL needs one GPU per rank (use \
                     --ranks-per-device for host-staged communication)",
                    b.ordinal()
                )));
            }
        }
        let streams = backends.iter().map(|b| b.stream().clone()).collect();
        let comms =
            Comm::from_devices(streams).map_err(|e| fail(format!("ncclCommInitAll: {e:?}")))?;
        Ok(comms
            .into_iter()
            .map(|c| NcclCommunicator {
                counters: ByteCounters::new(c.world_size()),
                comm: Owned(c),
            })
            .collect())
    }

    /// A fresh NCCL unique id (128 bytes) for rank 0 to hand to every rank
    /// of a multi-process clique (through a rendezvous, e.g. `tofu launch`).
    ///
    /// Errors: libnccl missing, an NCCL failure.
    pub fn unique_id() -> Result<Vec<u8>, BackendError> {
        check_nccl()?;
        let id =
            cudarc::nccl::Id::new().map_err(|e| nccl_fail(format!("ncclGetUniqueId: {e:?}")))?;
        Ok(id.internal().iter().map(|&c| c as u8).collect())
    }

    /// This process's rank of a clique of `world` processes that share the
    /// unique id `id` (from [`NcclCommunicator::unique_id`] on rank 0), on
    /// `backend`'s device and stream (`ncclCommInitRank`).
    ///
    /// Errors: an id that is not 128 bytes, libnccl missing, an NCCL failure
    /// (e.g. a peer that never joins).
    pub fn from_unique_id(
        backend: &CudaBackend,
        rank: usize,
        world: usize,
        id: &[u8],
    ) -> Result<Self, BackendError> {
        check_nccl()?;
        let raw: [std::ffi::c_char; 128] = id
            .iter()
            .map(|&b| b as std::ffi::c_char)
            .collect::<Vec<_>>()
            .try_into()
            .map_err(|v: Vec<_>| {
                nccl_fail(format!("an NCCL unique id has 128 bytes, got {}", v.len()))
            })?;
        let comm = Comm::from_rank(
            backend.stream().clone(),
            rank,
            world,
            cudarc::nccl::Id::uninit(raw),
        )
        .map_err(|e| nccl_fail(format!("ncclCommInitRank (rank {rank} of {world}): {e:?}")))?;
        Ok(NcclCommunicator {
            counters: ByteCounters::new(world),
            comm: Owned(comm),
        })
    }

    fn err(&self, op: &'static str, e: impl std::fmt::Debug) -> CommError {
        CommError::Device {
            rank: Rank(self.comm.0.rank()),
            op,
            message: format!("NCCL: {e:?}"),
        }
    }

    fn count(&mut self, t: Traffic) {
        self.counters.sent += t.sent;
        self.counters.received += t.received;
    }

    fn check(
        &self,
        op: &'static str,
        what: &'static str,
        want: usize,
        got: usize,
    ) -> Result<(), CommError> {
        if want != got {
            return Err(CommError::BufferLength {
                rank: Rank(self.comm.0.rank()),
                op,
                buffer: what,
                expected: want,
                got,
            });
        }
        Ok(())
    }

    fn check_counts(&self, op: &'static str, counts: &[usize]) -> Result<(), CommError> {
        let world = self.comm.0.world_size();
        if counts.len() != world {
            return Err(CommError::CountsLength {
                rank: Rank(self.comm.0.rank()),
                op,
                what: "counts",
                expected: world,
                got: counts.len(),
            });
        }
        Ok(())
    }
}

fn offsets(counts: &[usize]) -> Vec<usize> {
    let mut o = vec![0];
    for c in counts {
        o.push(o.last().copied().unwrap_or(0) + c);
    }
    o
}

impl Communicator for NcclCommunicator {
    fn rank(&self) -> Rank {
        Rank(self.comm.0.rank())
    }

    fn world_size(&self) -> usize {
        self.comm.0.world_size()
    }

    fn counters(&self) -> ByteCounters {
        self.counters.clone()
    }

    fn reset_counters(&mut self) {
        self.counters = ByteCounters::new(self.world_size());
    }

    fn synchronize(&mut self) -> Result<(), CommError> {
        self.comm
            .0
            .stream()
            .synchronize()
            .map_err(|e| self.err("synchronize", e))
    }
}

impl Collectives<CudaBuffer> for NcclCommunicator {
    fn all_reduce(&mut self, buf: &mut CudaBuffer, op: ReduceOp) -> Result<(), CommError> {
        let n = buf.len();
        let r = self
            .comm
            .0
            .all_reduce_in_place(&mut buf.view_mut(), &op_of(op));
        r.map_err(|e| self.err("all_reduce", e))?;
        let t = traffic::all_reduce(n, self.world_size(), self.rank().0);
        self.count(t);
        Ok(())
    }

    fn reduce_scatter(
        &mut self,
        send: &CudaBuffer,
        recv: &mut CudaBuffer,
        counts: &[usize],
        op: ReduceOp,
    ) -> Result<(), CommError> {
        const OP: &str = "reduce_scatter";
        self.check_counts(OP, counts)?;
        let offs = offsets(counts);
        let me = self.rank().0;
        self.check(OP, "send", offs[counts.len()], send.len())?;
        self.check(OP, "recv", counts[me], recv.len())?;
        let even = counts.iter().all(|&c| c == counts[0]);
        let c = &self.comm.0;
        let r = if even {
            c.reduce_scatter(&send.view(), &mut recv.view_mut(), &op_of(op))
                .map(|_| ())
        } else {
            // Block j reduced onto rank j, all in one group.
            group_start()
                .and_then(|_| {
                    for (j, &n) in counts.iter().enumerate().filter(|(_, &n)| n > 0) {
                        let part = send.view().slice(offs[j]..offs[j] + n);
                        if j == me {
                            let mut dst = recv.view_mut();
                            c.reduce(&part, Some(&mut dst), &op_of(op), j as i32)?;
                        } else {
                            c.reduce::<_, cudarc::driver::CudaViewMut<'_, f32>, f32>(
                                &part,
                                None,
                                &op_of(op),
                                j as i32,
                            )?;
                        }
                    }
                    Ok(())
                })
                .and_then(|_| group_end().map(|_| ()))
        };
        r.map_err(|e| self.err(OP, e))?;
        self.count(traffic::reduce_scatter(counts, me));
        Ok(())
    }

    fn all_gather(
        &mut self,
        send: &CudaBuffer,
        recv: &mut CudaBuffer,
        counts: &[usize],
    ) -> Result<(), CommError> {
        const OP: &str = "all_gather";
        self.check_counts(OP, counts)?;
        let offs = offsets(counts);
        let me = self.rank().0;
        self.check(OP, "send", counts[me], send.len())?;
        self.check(OP, "recv", offs[counts.len()], recv.len())?;
        let even = counts.iter().all(|&c| c == counts[0]);
        let c = &self.comm.0;
        let r = if even {
            c.all_gather(&send.view(), &mut recv.view_mut()).map(|_| ())
        } else {
            group_start()
                .and_then(|_| {
                    for (j, &n) in counts.iter().enumerate().filter(|(_, &n)| n > 0) {
                        let mut whole = recv.view_mut();
                        let mut dst = whole.slice_mut(offs[j]..offs[j] + n);
                        let src = send.view();
                        c.broadcast((j == me).then_some(&src), &mut dst, j as i32)?;
                    }
                    Ok(())
                })
                .and_then(|_| group_end().map(|_| ()))
        };
        r.map_err(|e| self.err(OP, e))?;
        self.count(traffic::all_gather(counts, me));
        Ok(())
    }

    fn all_to_all(
        &mut self,
        send: &CudaBuffer,
        send_counts: &[usize],
        recv: &mut CudaBuffer,
        recv_counts: &[usize],
    ) -> Result<(), CommError> {
        const OP: &str = "all_to_all";
        self.check_counts(OP, send_counts)?;
        self.check_counts(OP, recv_counts)?;
        let (so, ro) = (offsets(send_counts), offsets(recv_counts));
        self.check(OP, "send", so[send_counts.len()], send.len())?;
        self.check(OP, "recv", ro[recv_counts.len()], recv.len())?;
        let c = &self.comm.0;
        let r = group_start()
            .and_then(|_| {
                for j in 0..send_counts.len() {
                    if send_counts[j] > 0 {
                        c.send(&send.view().slice(so[j]..so[j + 1]), j as i32)?;
                    }
                    if recv_counts[j] > 0 {
                        let mut whole = recv.view_mut();
                        c.recv(&mut whole.slice_mut(ro[j]..ro[j + 1]), j as i32)?;
                    }
                }
                Ok(())
            })
            .and_then(|_| group_end().map(|_| ()));
        r.map_err(|e| self.err(OP, e))?;
        let me = self.rank().0;
        self.count(traffic::all_to_all(send_counts, recv_counts, me));
        Ok(())
    }

    fn broadcast(&mut self, buf: &mut CudaBuffer, root: Rank) -> Result<(), CommError> {
        if root.0 >= self.world_size() {
            return Err(CommError::PeerOutOfRange {
                rank: self.rank(),
                op: "broadcast",
                peer: root.0,
                world_size: self.world_size(),
            });
        }
        let n = buf.len();
        let r = self
            .comm
            .0
            .broadcast_in_place(&mut buf.view_mut(), root.0 as i32);
        r.map_err(|e| self.err("broadcast", e))?;
        let (p, me) = (self.world_size(), self.rank().0);
        self.count(traffic::broadcast(n, p, root.0, me));
        Ok(())
    }

    fn group(&mut self, ops: &mut [P2p<'_, CudaBuffer>]) -> Result<(), CommError> {
        const OP: &str = "send/recv";
        let me = self.rank().0;
        let world = self.world_size();
        for o in ops.iter() {
            let (P2p::Send { peer, .. } | P2p::Recv { peer, .. }) = o;
            if peer.0 >= world {
                return Err(CommError::PeerOutOfRange {
                    rank: self.rank(),
                    op: OP,
                    peer: peer.0,
                    world_size: world,
                });
            }
        }
        let c = &self.comm.0;
        let r = group_start()
            .and_then(|_| {
                for o in ops.iter_mut() {
                    match o {
                        P2p::Send { peer, buf } if !buf.is_empty() => {
                            c.send(&buf.view(), peer.0 as i32)?;
                        }
                        P2p::Recv { peer, buf } if !buf.is_empty() => {
                            c.recv(&mut buf.view_mut(), peer.0 as i32)?;
                        }
                        _ => {}
                    }
                }
                Ok(())
            })
            .and_then(|_| group_end().map(|_| ()));
        r.map_err(|e| self.err(OP, e))?;
        let sizes: Vec<(usize, usize, bool)> = ops
            .iter()
            .map(|o| match o {
                P2p::Send { peer, buf } => (peer.0, buf.len(), true),
                P2p::Recv { peer, buf } => (peer.0, buf.len(), false),
            })
            .collect();
        self.count(traffic::group(&sizes, me));
        Ok(())
    }
}
