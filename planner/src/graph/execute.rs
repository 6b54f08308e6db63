//! Reference execution of a graph with the TDL interpreter.
//!
//! Takes a [`Graph`], the operator [`Library`] and values (f64
//! [`tdl::Tensor`]s) for the tensors no operator produces; gives the value
//! of every tensor, computed op by op in the stored topological order with
//! [`tdl::evaluate`]. This is the semantic ground truth for a whole training
//! step (tests check gradients against finite differences with it; the
//! runner checks partitioned runs against it). Clarity over speed: use it on
//! small configurations only.
//!
//! [`synthesize`] makes the leaf values from each tensor's [`Fill`] with a
//! small deterministic generator (same seed, same values).

use tdl::{EvalError, Library, Tensor as Value};

use super::ids::{OpId, TensorId};
use super::ir::{Fill, Graph, Op};

/// Why executing a graph failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ExecError {
    /// An operator names a spec the library does not define.
    #[error("operator `{op}`: no spec named `{spec}` in the operator library")]
    UnknownSpec {
        /// Operator instance name.
        op: String,
        /// Spec name.
        spec: String,
    },
    /// An input of an operator has no value.
    #[error("operator `{op}`: input `{tensor}` has no value (feed it, or run its producer first)")]
    Missing {
        /// Operator instance name.
        op: String,
        /// Tensor name.
        tensor: String,
    },
    /// The interpreter failed.
    #[error("operator `{op}`: {source}")]
    Eval {
        /// Operator instance name.
        op: String,
        /// The interpreter's error.
        source: Box<EvalError>,
    },
}

/// Values of a graph's tensors, indexed by [`TensorId`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Values {
    values: Vec<Option<Value>>,
}

impl Values {
    /// No values for a graph of `n` tensors.
    pub fn new(n: usize) -> Values {
        Values {
            values: vec![None; n],
        }
    }

    /// The value of a tensor, if computed or fed.
    pub fn get(&self, t: TensorId) -> Option<&Value> {
        self.values.get(t.index()).and_then(|v| v.as_ref())
    }

    /// Set (feed) the value of a tensor.
    pub fn set(&mut self, t: TensorId, v: Value) {
        if self.values.len() <= t.index() {
            self.values.resize(t.index() + 1, None);
        }
        self.values[t.index()] = Some(v);
    }

    /// Drop the value of a tensor.
    pub fn clear(&mut self, t: TensorId) {
        if let Some(v) = self.values.get_mut(t.index()) {
            *v = None;
        }
    }
}

/// Execute every op selected by `select(id, op)`, in the stored order, reading
/// and writing `values` (outputs that already have values are overwritten).
///
/// Errors: a missing spec, a missing input value, an interpreter error; each
/// names the operator.
pub fn execute(
    graph: &Graph,
    lib: &Library,
    values: &mut Values,
    select: impl Fn(OpId, &Op) -> bool,
) -> Result<(), ExecError> {
    for (id, op) in graph.op_ids().zip(graph.ops()) {
        if !select(id, op) {
            continue;
        }
        let spec = lib.get(&op.spec).ok_or_else(|| ExecError::UnknownSpec {
            op: op.name.clone(),
            spec: op.spec.clone(),
        })?;
        let mut inputs = Vec::with_capacity(op.inputs.len());
        for &t in &op.inputs {
            let v = values.get(t).ok_or_else(|| ExecError::Missing {
                op: op.name.clone(),
                tensor: graph.tensor(t).name.clone(),
            })?;
            inputs.push(v.clone());
        }
        let outs = tdl::evaluate(spec, &inputs, &op.attrs).map_err(|source| ExecError::Eval {
            op: op.name.clone(),
            source: Box::new(source),
        })?;
        for (&t, v) in op.outputs.iter().zip(outs) {
            values.set(t, v);
        }
    }
    Ok(())
}

/// Values for every tensor that has a [`Fill`], generated deterministically from `seed`.
pub fn synthesize(graph: &Graph, seed: u64) -> Values {
    let mut values = Values::new(graph.tensors().len());
    let mut rng = SplitMix(seed);
    for t in graph.tensor_ids() {
        let tensor = graph.tensor(t);
        let Some(fill) = tensor.fill else { continue };
        let n = tensor.shape.iter().product::<usize>();
        let last = tensor.shape.last().copied().unwrap_or(1).max(1);
        let data: Vec<f64> = match fill {
            Fill::Normal { std } => (0..n).map(|_| rng.normal() * std).collect(),
            Fill::Constant { value } => vec![value; n],
            Fill::Indices { bound } => (0..n)
                .map(|_| (rng.next() % bound.max(1) as u64) as f64)
                .collect(),
            Fill::Positions => (0..n).map(|i| (i % last) as f64).collect(),
            Fill::Probabilities => {
                let mut d: Vec<f64> = (0..n).map(|_| 0.05 + rng.uniform()).collect();
                for row in d.chunks_mut(last) {
                    let s: f64 = row.iter().sum();
                    row.iter_mut().for_each(|x| *x /= s);
                }
                d
            }
        };
        values.set(
            t,
            Value {
                shape: tensor.shape.clone(),
                data,
            },
        );
    }
    values
}

/// SplitMix64: a tiny deterministic generator (not for cryptography).
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn uniform(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Standard normal (Box–Muller).
    fn normal(&mut self) -> f64 {
        let u1 = self.uniform().max(1e-300);
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}
