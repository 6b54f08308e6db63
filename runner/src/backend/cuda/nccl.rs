//! [`NcclCommunicator`]: collectives and grouped send/recv on device
//! buffers with NCCL (opened at run time by [`super::nccl_api`], under
//! `libnccl.so.2` among other names), one GPU per rank.
//!
//! Takes the CUDA backends of the ranks of this process (one device each:
//! NCCL refuses two ranks on one GPU); gives one communicator per rank whose
//! calls are enqueued on that backend's stream, so they are ordered with its
//! kernels and copies and never touch the host. [`Communicator::synchronize`]
//! waits for the stream under the watchdog of [`super::nccl_watchdog`]: work
//! that has not finished within `TOFU_NCCL_TIMEOUT_S` (default 600 s), a
//! failed stream or an NCCL asynchronous error aborts the communicator
//! (`ncclCommAbort`) and fails the call naming the rank; later calls on an
//! aborted communicator fail at once.
//!
//! NCCL has no collectives with uneven per-rank counts: an uneven
//! reduce-scatter is a group of `ncclReduce` calls (block j reduced onto rank
//! j), an uneven all-gather a group of `ncclBroadcast` calls. Byte counters
//! follow the ring formulas of [`comm::traffic`], like every communicator
//! here, so they equal the planner's prediction.

use std::ffi::c_int;
use std::sync::Arc;
use std::time::Duration;

use comm::traffic::{self, Traffic};
use comm::{ByteCounters, Collectives, CommError, Communicator, P2p, Rank, ReduceOp};
use cudarc::driver::CudaStream;

use super::nccl_api::{grouped, nccl, CommPtr, NcclApi, RawComm, StreamPtr, UniqueId, FLOAT32};
use super::nccl_watchdog::{self, nccl_timeout, Waited, NCCL_TIMEOUT_ENV};
use super::{CudaBackend, CudaBuffer};
use crate::backend::BackendError;

/// One rank of an NCCL clique (see the module doc).
pub struct NcclCommunicator {
    comm: RawComm,
    stream: Arc<CudaStream>,
    rank: usize,
    world: usize,
    counters: ByteCounters,
    /// How long [`Communicator::synchronize`] waits before it aborts.
    timeout: Duration,
}

// SAFETY: an NCCL communicator may be used from any thread as long as calls
// on it are not concurrent; it is only used through `&mut
// NcclCommunicator`, which gives one thread at a time.
unsafe impl Send for NcclCommunicator {}

impl std::fmt::Debug for NcclCommunicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NcclCommunicator")
            .field("rank", &self.rank)
            .field("world_size", &self.world)
            .finish()
    }
}

fn nccl_fail(message: String) -> BackendError {
    BackendError::Device {
        backend: "cuda",
        message,
    }
}

/// `ncclRedOp_t`.
fn op_of(op: ReduceOp) -> c_int {
    match op {
        ReduceOp::Sum => 0,
        ReduceOp::Prod => 1,
        ReduceOp::Max => 2,
        ReduceOp::Min => 3,
    }
}

impl NcclCommunicator {
    fn new(
        api: &'static NcclApi,
        ptr: CommPtr,
        backend: &CudaBackend,
        rank: usize,
        world: usize,
        timeout: Duration,
    ) -> Self {
        NcclCommunicator {
            comm: RawComm { api, ptr },
            stream: backend.stream().clone(),
            rank,
            world,
            counters: ByteCounters::new(world),
            timeout,
        }
    }

    /// One communicator per backend, rank r on `backends[r]`'s device and
    /// stream (`ncclCommInitAll`).
    ///
    /// Errors: libnccl missing, two backends on one device, an NCCL failure.
    pub fn for_backends(backends: &[CudaBackend]) -> Result<Vec<Self>, BackendError> {
        let fail = nccl_fail;
        let timeout = nccl_timeout().map_err(fail)?;
        let api = nccl()?;
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
        let devices: Vec<c_int> = backends.iter().map(|b| b.ordinal() as c_int).collect();
        let mut ptrs: Vec<CommPtr> = vec![std::ptr::null_mut(); backends.len()];
        // SAFETY: one communicator slot per device in `devices`.
        let status = unsafe {
            (api.comm_init_all)(ptrs.as_mut_ptr(), devices.len() as c_int, devices.as_ptr())
        };
        api.check(status)
            .map_err(|e| fail(format!("ncclCommInitAll on devices {devices:?}: {e}")))?;
        let world = backends.len();
        Ok(ptrs
            .into_iter()
            .zip(backends)
            .enumerate()
            .map(|(r, (p, b))| Self::new(api, p, b, r, world, timeout))
            .collect())
    }

    /// A fresh NCCL unique id (128 bytes) for rank 0 to hand to every rank
    /// of a multi-process clique (through a rendezvous, e.g. `tofu launch`).
    ///
    /// Errors: libnccl missing, an NCCL failure.
    pub fn unique_id() -> Result<Vec<u8>, BackendError> {
        let api = nccl()?;
        let mut id = UniqueId { internal: [0; 128] };
        // SAFETY: writes the 128 bytes of `id`.
        let status = unsafe { (api.get_unique_id)(&mut id) };
        api.check(status)
            .map_err(|e| nccl_fail(format!("ncclGetUniqueId: {e}")))?;
        Ok(id.internal.iter().map(|&c| c as u8).collect())
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
        let internal: [std::ffi::c_char; 128] = id
            .iter()
            .map(|&b| b as std::ffi::c_char)
            .collect::<Vec<_>>()
            .try_into()
            .map_err(|v: Vec<_>| {
                nccl_fail(format!("an NCCL unique id has 128 bytes, got {}", v.len()))
            })?;
        let timeout = nccl_timeout().map_err(nccl_fail)?;
        let api = nccl()?;
        let what = format!(
            "ncclCommInitRank (rank {rank} of {world}, device {})",
            backend.ordinal()
        );
        // NCCL creates the communicator on the thread's current device.
        backend.bind()?;
        let mut ptr: CommPtr = std::ptr::null_mut();
        // SAFETY: writes one communicator into `ptr`.
        let status = unsafe {
            (api.comm_init_rank)(
                &mut ptr,
                world as c_int,
                UniqueId { internal },
                rank as c_int,
            )
        };
        api.check(status)
            .map_err(|e| nccl_fail(format!("{what}: {e}")))?;
        Ok(Self::new(api, ptr, backend, rank, world, timeout))
    }

    fn api(&self) -> &'static NcclApi {
        self.comm.api
    }

    /// The communicator, or an error naming `op` where it was aborted.
    fn live(&self, op: &'static str) -> Result<CommPtr, CommError> {
        if self.comm.ptr.is_null() {
            return Err(self.err(
                op,
                "this rank's communicator was aborted after an earlier failure",
            ));
        }
        Ok(self.comm.ptr)
    }

    /// Abort the communicator (its queued and later calls fail, here and
    /// on the peers); `e` with what the abort said added.
    fn abort_after(&mut self, e: CommError) -> CommError {
        match self.comm.abort() {
            Ok(()) => e,
            Err(a) => self.err(
                "ncclCommAbort",
                format!("{e}; then ncclCommAbort failed: {a}"),
            ),
        }
    }

    fn raw_stream(&self) -> StreamPtr {
        self.stream.cu_stream() as StreamPtr
    }

    fn err(&self, op: &'static str, e: impl std::fmt::Display) -> CommError {
        CommError::Device {
            rank: Rank(self.rank),
            op,
            message: format!("NCCL: {e}"),
        }
    }

    /// `status` as this call's result.
    fn call(&self, status: c_int) -> Result<(), String> {
        self.api().check(status)
    }

    /// `body` inside an NCCL group that always ends ([`grouped`]).
    fn group_of(&self, body: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
        let api = self.api();
        // SAFETY: group calls have no arguments.
        grouped(
            || api.check(unsafe { (api.group_start)() }),
            body,
            || api.check(unsafe { (api.group_end)() }),
        )
    }

    /// In one group, `call(j, n, p)` for each non-empty block `j` of
    /// `counts` (`n` elements), `p` pointing at `mine` on this rank's own
    /// block and null on the others' (the uneven collectives: one rooted
    /// call per block). Errors: the first failing call's, or the group's.
    fn each_block(
        &self,
        counts: &[usize],
        mine: u64,
        call: impl Fn(usize, usize, *mut std::ffi::c_void) -> c_int,
    ) -> Result<(), String> {
        let api = self.api();
        self.group_of(|| {
            for (j, &n) in counts.iter().enumerate().filter(|(_, &n)| n > 0) {
                let p = if j == self.rank {
                    at(mine, 0)
                } else {
                    std::ptr::null_mut()
                };
                api.check(call(j, n, p))?;
            }
            Ok(())
        })
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
                rank: Rank(self.rank),
                op,
                buffer: what,
                expected: want,
                got,
            });
        }
        Ok(())
    }

    fn check_counts(&self, op: &'static str, counts: &[usize]) -> Result<(), CommError> {
        let world = self.world;
        if counts.len() != world {
            return Err(CommError::CountsLength {
                rank: Rank(self.rank),
                op,
                what: "counts",
                expected: world,
                got: counts.len(),
            });
        }
        Ok(())
    }
}

/// A device pointer `elems` f32 elements into `buf`.
fn at(buf: u64, elems: usize) -> *mut std::ffi::c_void {
    (buf + 4 * elems as u64) as *mut std::ffi::c_void
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
        Rank(self.rank)
    }

    fn world_size(&self) -> usize {
        self.world
    }

    fn counters(&self) -> ByteCounters {
        self.counters.clone()
    }

    fn reset_counters(&mut self) {
        self.counters = ByteCounters::new(self.world_size());
    }

    fn synchronize(&mut self) -> Result<(), CommError> {
        const OP: &str = "synchronize";
        self.live(OP)?;
        let comm = &self.comm;
        let e = match nccl_watchdog::wait(&self.stream, self.timeout, || comm.async_error()) {
            Waited::Done => return Ok(()),
            Waited::Failed(e) => self.err(OP, format!("the stream failed: {e}")),
            Waited::AsyncError(e) => self.err(OP, format!("asynchronous error: {e}")),
            Waited::TimedOut(waited) => CommError::CollectiveTimeout {
                rank: Rank(self.rank),
                op: OP,
                waited,
                setting: NCCL_TIMEOUT_ENV,
            },
        };
        Err(self.abort_after(e))
    }
}

impl Collectives<CudaBuffer> for NcclCommunicator {
    fn all_reduce(&mut self, buf: &mut CudaBuffer, op: ReduceOp) -> Result<(), CommError> {
        let n = buf.len();
        let p = at(buf.ptr_mut(), 0);
        let (c, s) = (self.live("all_reduce")?, self.raw_stream());
        // SAFETY: in place on `n` elements of `buf`, on its stream.
        let r = self.call(unsafe { (self.api().all_reduce)(p, p, n, FLOAT32, op_of(op), c, s) });
        r.map_err(|e| self.err("all_reduce", e))?;
        let t = traffic::all_reduce(n, self.world_size(), self.rank);
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
        let me = self.rank;
        self.check(OP, "send", offs[counts.len()], send.len())?;
        self.check(OP, "recv", counts[me], recv.len())?;
        let even = counts.iter().all(|&c| c == counts[0]);
        let (api, c, s, o) = (self.api(), self.live(OP)?, self.raw_stream(), op_of(op));
        let (src, dst) = (send.ptr(), recv.ptr_mut());
        // SAFETY (every call below): the lengths were checked above, so
        // each range lies inside its buffer; all work is on the stream.
        let r = if even {
            self.call(unsafe {
                (api.reduce_scatter)(at(src, 0), at(dst, 0), counts[me], FLOAT32, o, c, s)
            })
        } else {
            // Block j reduced onto rank j, all in one group.
            self.each_block(counts, dst, |j, n, out| unsafe {
                (api.reduce)(at(src, offs[j]), out, n, FLOAT32, o, j as c_int, c, s)
            })
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
        let me = self.rank;
        self.check(OP, "send", counts[me], send.len())?;
        self.check(OP, "recv", offs[counts.len()], recv.len())?;
        let even = counts.iter().all(|&c| c == counts[0]);
        let (api, c, s) = (self.api(), self.live(OP)?, self.raw_stream());
        let (src, dst) = (send.ptr(), recv.ptr_mut());
        // SAFETY (every call below): as in `reduce_scatter`.
        let r = if even {
            self.call(unsafe {
                (api.all_gather)(at(src, 0), at(dst, 0), counts[me], FLOAT32, c, s)
            })
        } else {
            // Block j broadcast from rank j, all in one group.
            self.each_block(counts, src, |j, n, from| unsafe {
                (api.broadcast)(from, at(dst, offs[j]), n, FLOAT32, j as c_int, c, s)
            })
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
        let (api, c, s) = (self.api(), self.live(OP)?, self.raw_stream());
        let (src, dst) = (send.ptr(), recv.ptr_mut());
        // SAFETY (every call below): as in `reduce_scatter`.
        let r = self.group_of(|| {
            for j in 0..send_counts.len() {
                let peer = j as c_int;
                if send_counts[j] > 0 {
                    api.check(unsafe {
                        (api.send)(at(src, so[j]), send_counts[j], FLOAT32, peer, c, s)
                    })?;
                }
                if recv_counts[j] > 0 {
                    api.check(unsafe {
                        (api.recv)(at(dst, ro[j]), recv_counts[j], FLOAT32, peer, c, s)
                    })?;
                }
            }
            Ok(())
        });
        r.map_err(|e| self.err(OP, e))?;
        let me = self.rank;
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
        let p = at(buf.ptr_mut(), 0);
        let (c, s) = (self.live("broadcast")?, self.raw_stream());
        // SAFETY: in place on `n` elements of `buf`, on its stream.
        let r =
            self.call(unsafe { (self.api().broadcast)(p, p, n, FLOAT32, root.0 as c_int, c, s) });
        r.map_err(|e| self.err("broadcast", e))?;
        let (p, me) = (self.world_size(), self.rank);
        self.count(traffic::broadcast(n, p, root.0, me));
        Ok(())
    }

    fn group(&mut self, ops: &mut [P2p<'_, CudaBuffer>]) -> Result<(), CommError> {
        const OP: &str = "send/recv";
        let me = self.rank;
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
        let (api, c, s) = (self.api(), self.live(OP)?, self.raw_stream());
        // SAFETY (every call below): each buffer whole, on the stream.
        let r = self.group_of(|| {
            for o in ops.iter_mut() {
                match o {
                    P2p::Send { peer, buf } if !buf.is_empty() => {
                        let (p, n) = (at(buf.ptr(), 0), buf.len());
                        api.check(unsafe { (api.send)(p, n, FLOAT32, peer.0 as c_int, c, s) })?;
                    }
                    P2p::Recv { peer, buf } if !buf.is_empty() => {
                        let (p, n) = (at(buf.ptr_mut(), 0), buf.len());
                        api.check(unsafe { (api.recv)(p, n, FLOAT32, peer.0 as c_int, c, s) })?;
                    }
                    _ => {}
                }
            }
            Ok(())
        });
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
