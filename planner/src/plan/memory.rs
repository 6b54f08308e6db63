//! Per-worker memory of a plan.
//!
//! Takes a graph and a plan's decisions; gives, for every worker, the bytes
//! of its tiles of the training state (parameters, their gradients, optimizer
//! state, kept across steps) plus the peak of its live transient tiles
//! (activations, partial gradients, inputs) over the stored schedule, with the
//! liveness rules of [`crate::graph::memory`]. Fetch buffers are not counted.

use super::cost::CostModel;
use super::tile::digits;
use crate::graph::memory::{classify, lifetime, MemoryClass};
use crate::graph::{Graph, TensorId};

/// Memory of one worker (bytes).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WorkerMemory {
    /// Tiles of parameters, their gradients and optimizer state.
    pub training_state_bytes: u64,
    /// Peak of live transient tiles.
    pub peak_activation_bytes: u64,
    /// The largest tensor tile this worker holds: (tensor name, bytes).
    pub largest_tile: (String, u64),
}

impl WorkerMemory {
    /// Training state + activation peak.
    pub fn total(&self) -> u64 {
        self.training_state_bytes + self.peak_activation_bytes
    }
}

/// Memory of every worker (see the module doc).
pub fn per_worker(
    graph: &Graph,
    splits: &[Vec<Option<u32>>],
    factors: &[usize],
) -> Vec<WorkerMemory> {
    let workers: usize = factors.iter().product();
    let n_ops = graph.ops().len().max(1);
    (0..workers)
        .map(|w| {
            let d = digits(w, factors);
            let mut m = WorkerMemory::default();
            let mut delta = vec![0i64; n_ops + 1];
            for (i, t) in graph.tensors().iter().enumerate() {
                let id = TensorId(i as u32);
                let tile = CostModel::tile(&t.shape, &splits[i], factors, &d);
                let bytes = tile.volume() * t.dtype.size_bytes();
                if bytes > m.largest_tile.1 {
                    m.largest_tile = (t.name.clone(), bytes);
                }
                match classify(graph, id) {
                    MemoryClass::Alias => {}
                    MemoryClass::Transient => {
                        if graph.ops().is_empty() {
                            continue;
                        }
                        let (a, b) = lifetime(graph, id);
                        delta[a] += bytes as i64;
                        delta[b + 1] -= bytes as i64;
                    }
                    _ => m.training_state_bytes += bytes,
                }
            }
            let mut live = 0i64;
            for x in &delta {
                live += x;
                m.peak_activation_bytes = m.peak_activation_bytes.max(live.max(0) as u64);
            }
            m
        })
        .collect()
}
