//! [`HostStaged`]: collectives on device buffers through a host
//! communicator, for several ranks sharing one GPU (NCCL refuses two ranks
//! on one device) — development and tests on one-GPU machines.
//!
//! Takes any host communicator ([`Collectives`] on `[f32]`, e.g. a
//! [`comm::LocalCommunicator`] clique); gives [`Collectives`] on
//! [`CudaBuffer`]s: each call copies its device inputs to the host, runs the
//! host call, and copies the results back. Byte counters are the host
//! communicator's, so they count exactly what the algorithm moves between
//! ranks (the device↔host copies are staging, not communication).

use comm::{ByteCounters, Collectives, CommError, Communicator, P2p, Rank, ReduceOp};

use super::CudaBuffer;

/// A host communicator used on device buffers (see the module doc).
#[derive(Debug)]
pub struct HostStaged<C> {
    inner: C,
}

impl<C> HostStaged<C> {
    /// Stage `inner`'s calls through the host.
    pub fn new(inner: C) -> Self {
        HostStaged { inner }
    }
}

impl<C: Communicator> HostStaged<C> {
    fn err(&self, op: &'static str, message: String) -> CommError {
        CommError::Device {
            rank: self.inner.rank(),
            op,
            message,
        }
    }

    fn down(&self, op: &'static str, b: &CudaBuffer) -> Result<Vec<f32>, CommError> {
        b.to_host().map_err(|m| self.err(op, m))
    }

    fn up(&self, op: &'static str, b: &mut CudaBuffer, v: &[f32]) -> Result<(), CommError> {
        b.copy_from_host(v).map_err(|m| self.err(op, m))
    }
}

impl<C: Communicator> Communicator for HostStaged<C> {
    fn rank(&self) -> Rank {
        self.inner.rank()
    }

    fn world_size(&self) -> usize {
        self.inner.world_size()
    }

    fn counters(&self) -> ByteCounters {
        self.inner.counters()
    }

    fn reset_counters(&mut self) {
        self.inner.reset_counters()
    }
}

impl<C: Collectives<[f32]>> Collectives<CudaBuffer> for HostStaged<C> {
    fn all_reduce(&mut self, buf: &mut CudaBuffer, op: ReduceOp) -> Result<(), CommError> {
        let mut h = self.down("all_reduce", buf)?;
        self.inner.all_reduce(&mut h[..], op)?;
        self.up("all_reduce", buf, &h)
    }

    fn reduce_scatter(
        &mut self,
        send: &CudaBuffer,
        recv: &mut CudaBuffer,
        counts: &[usize],
        op: ReduceOp,
    ) -> Result<(), CommError> {
        let s = self.down("reduce_scatter", send)?;
        let mut r = vec![0.0; recv.len()];
        self.inner.reduce_scatter(&s[..], &mut r[..], counts, op)?;
        self.up("reduce_scatter", recv, &r)
    }

    fn all_gather(
        &mut self,
        send: &CudaBuffer,
        recv: &mut CudaBuffer,
        counts: &[usize],
    ) -> Result<(), CommError> {
        let s = self.down("all_gather", send)?;
        let mut r = vec![0.0; recv.len()];
        self.inner.all_gather(&s[..], &mut r[..], counts)?;
        self.up("all_gather", recv, &r)
    }

    fn all_to_all(
        &mut self,
        send: &CudaBuffer,
        send_counts: &[usize],
        recv: &mut CudaBuffer,
        recv_counts: &[usize],
    ) -> Result<(), CommError> {
        let s = self.down("all_to_all", send)?;
        let mut r = vec![0.0; recv.len()];
        self.inner
            .all_to_all(&s[..], send_counts, &mut r[..], recv_counts)?;
        self.up("all_to_all", recv, &r)
    }

    fn broadcast(&mut self, buf: &mut CudaBuffer, root: Rank) -> Result<(), CommError> {
        let mut h = self.down("broadcast", buf)?;
        self.inner.broadcast(&mut h[..], root)?;
        self.up("broadcast", buf, &h)
    }

    fn group(&mut self, ops: &mut [P2p<'_, CudaBuffer>]) -> Result<(), CommError> {
        const OP: &str = "send/recv";
        let mut host: Vec<Vec<f32>> = Vec::with_capacity(ops.len());
        for o in ops.iter() {
            host.push(match o {
                P2p::Send { buf, .. } => self.down(OP, buf)?,
                P2p::Recv { buf, .. } => vec![0.0; buf.len()],
            });
        }
        {
            let mut h: Vec<P2p<'_, [f32]>> = ops
                .iter()
                .zip(host.iter_mut())
                .map(|(o, v)| match o {
                    P2p::Send { peer, .. } => P2p::Send {
                        peer: *peer,
                        buf: &v[..],
                    },
                    P2p::Recv { peer, .. } => P2p::Recv {
                        peer: *peer,
                        buf: &mut v[..],
                    },
                })
                .collect();
            self.inner.group(&mut h)?;
        }
        for (o, v) in ops.iter_mut().zip(&host) {
            if let P2p::Recv { buf, .. } = o {
                self.up(OP, buf, v)?;
            }
        }
        Ok(())
    }
}
