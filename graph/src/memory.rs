//! Memory accounting of a training graph, per tensor and in total.
//!
//! Takes a [`Graph`]; gives a [`MemoryReport`]. All sizes are **bytes**
//! (elements × [`DType::size_bytes`](super::DType::size_bytes); f32 = 4), and
//! "parameters" counts elements.
//!
//! Every tensor falls in one [`MemoryClass`]:
//! * persistent across steps: parameters (weights), the weights' total
//!   gradients, optimizer state (momentum velocity, Adam m and v);
//! * aliases: optimizer outputs that overwrite a weight or a state in place
//!   (counted zero times: the buffer is the one they replace);
//! * transient: data inputs, activations, activation gradients, partial
//!   weight gradients before summation, the loss seed.
//!
//! The peak of transient memory is a liveness estimate for the stored
//! topological schedule (the graph's op order): a tensor is live from the
//! step that produces it (step 0 for data fed to the step) through its last
//! consumer (or only at its producing step if nothing reads it), and the peak
//! is the largest sum of live transient bytes over all steps. It assumes
//! every op's outputs are allocated while its inputs are still live and that
//! nothing is freed in place.

use super::ids::{OpId, TensorId};
use super::ir::{Graph, OpRole, TensorRole};

/// How a tensor's bytes are counted (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemoryClass {
    /// A weight (trainable parameter).
    Parameter,
    /// The total gradient of a weight.
    WeightGradient,
    /// Optimizer state of a weight.
    OptimizerState,
    /// An in-place update output (aliases the tensor it replaces; 0 bytes).
    Alias,
    /// Everything live only within a step: inputs, activations, other gradients.
    Transient,
}

/// Memory of one training step (bytes unless said otherwise).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct MemoryReport {
    /// Number of trainable parameters: elements of all weights but the
    /// buffers a forward op updates in place (batch normalization's running
    /// statistics, which PyTorch keeps as buffers, not parameters).
    pub parameters: u64,
    /// Bytes of all weights.
    pub parameter_bytes: u64,
    /// Bytes of the weights' total gradients.
    pub gradient_bytes: u64,
    /// Bytes of optimizer state.
    pub optimizer_state_bytes: u64,
    /// Bytes of data inputs fed to the step.
    pub input_bytes: u64,
    /// Peak bytes of live transient tensors over the schedule.
    pub peak_activation_bytes: u64,
    /// The op at which the peak is reached (`None` for a graph without ops).
    pub peak_at: Option<OpId>,
}

impl MemoryReport {
    /// Account a graph (see the module doc).
    pub fn of(graph: &Graph) -> MemoryReport {
        let mut r = MemoryReport::default();
        let n = graph.ops().len();
        // delta[i]: change of live transient bytes when step i starts; delta[last + 1] frees.
        let mut delta = vec![0i128; n + 2];
        // Weights a forward op (not the optimizer) replaces: buffers.
        let buffers: std::collections::HashSet<TensorId> = graph
            .tensor_ids()
            .filter(|&t| {
                graph
                    .producer(t)
                    .is_some_and(|p| graph.op(p).role != OpRole::Update)
            })
            .filter_map(|t| graph.tensor(t).updates)
            .collect();
        for t in graph.tensor_ids() {
            let tensor = graph.tensor(t);
            let bytes = tensor.bytes();
            match classify(graph, t) {
                MemoryClass::Parameter => {
                    if !buffers.contains(&t) {
                        r.parameters = r.parameters.saturating_add(tensor.numel());
                    }
                    r.parameter_bytes = r.parameter_bytes.saturating_add(bytes);
                }
                MemoryClass::WeightGradient => {
                    r.gradient_bytes = r.gradient_bytes.saturating_add(bytes)
                }
                MemoryClass::OptimizerState => {
                    r.optimizer_state_bytes = r.optimizer_state_bytes.saturating_add(bytes)
                }
                MemoryClass::Alias => {}
                MemoryClass::Transient => {
                    if tensor.role == TensorRole::Input {
                        r.input_bytes = r.input_bytes.saturating_add(bytes);
                    }
                    if n > 0 {
                        let (first, last) = lifetime(graph, t);
                        delta[first] += bytes as i128;
                        delta[last + 1] -= bytes as i128;
                    }
                }
            }
        }
        let mut live = 0i128;
        for (i, d) in delta.iter().take(n).enumerate() {
            live += d;
            if live as u64 > r.peak_activation_bytes || r.peak_at.is_none() {
                r.peak_activation_bytes = live.max(0) as u64;
                r.peak_at = Some(OpId(i as u32));
            }
        }
        r
    }

    /// Bytes kept across steps: parameters + their gradients + optimizer state.
    pub fn training_state_bytes(&self) -> u64 {
        self.parameter_bytes
            .saturating_add(self.gradient_bytes)
            .saturating_add(self.optimizer_state_bytes)
    }

    /// Estimated peak of one step: training state + peak transient bytes.
    pub fn peak_bytes(&self) -> u64 {
        self.training_state_bytes()
            .saturating_add(self.peak_activation_bytes)
    }
}

/// The class of a tensor (see the module doc).
pub fn classify(graph: &Graph, t: TensorId) -> MemoryClass {
    let tensor = graph.tensor(t);
    if tensor.updates.is_some() {
        return MemoryClass::Alias;
    }
    match tensor.role {
        TensorRole::Weight => MemoryClass::Parameter,
        TensorRole::OptimizerState => MemoryClass::OptimizerState,
        TensorRole::Gradient => match tensor.grad_of {
            Some(w)
                if graph.tensor(w).role == TensorRole::Weight
                    && graph.tensor(w).grad == Some(t) =>
            {
                MemoryClass::WeightGradient
            }
            _ => MemoryClass::Transient,
        },
        TensorRole::Input | TensorRole::Activation => MemoryClass::Transient,
    }
}

/// Steps `(first, last)` (op indices, inclusive) during which a tensor is
/// live in the stored schedule. Panics on a graph without ops.
pub fn lifetime(graph: &Graph, t: TensorId) -> (usize, usize) {
    let first = graph.producer(t).map_or(0, |p| p.index());
    let last = graph
        .consumers(t)
        .iter()
        .map(|c| c.index())
        .max()
        .unwrap_or(first)
        .max(first);
    (first, last)
}

/// Bytes a weight keeps across steps: itself, its total gradient and the
/// optimizer state its update op reads (0 for a tensor that is not a weight).
pub fn weight_state_bytes(graph: &Graph, w: TensorId) -> u64 {
    let tensor = graph.tensor(w);
    if tensor.role != TensorRole::Weight || tensor.updates.is_some() {
        return 0;
    }
    let mut bytes = tensor.bytes();
    if let Some(g) = tensor.grad {
        bytes = bytes.saturating_add(graph.tensor(g).bytes());
    }
    for &c in graph.consumers(w) {
        let op = graph.op(c);
        if op.role == OpRole::Update && op.inputs.first() == Some(&w) {
            for &s in op.inputs.iter().skip(2) {
                if graph.tensor(s).role == TensorRole::OptimizerState {
                    bytes = bytes.saturating_add(graph.tensor(s).bytes());
                }
            }
        }
    }
    bytes
}
