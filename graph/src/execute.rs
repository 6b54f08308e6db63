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
//! [`synthesize`] makes the leaf values from each tensor's [`Fill`](tdl::Fill) with the
//! deterministic generator of [`tdl::fill`] (same seed, same values).

use tdl::{EvalError, Library, Tensor as Value};

use super::ids::{OpId, TensorId};
use super::ir::{Graph, Op};

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

/// Where each tensor's synthetic values start in the random stream of a
/// seed (index = [`TensorId`]; `None` for a tensor with no [`Fill`](tdl::Fill)): the
/// draws ([`Fill::draws`](tdl::Fill::draws)) of the filled tensors before it in id order. Codegen
/// writes these offsets into the programs' allocations, so a rank generates
/// its tiles alone and gets the values [`synthesize`] gives.
pub fn fill_offsets(graph: &Graph) -> Vec<Option<u64>> {
    let mut at = 0u64;
    graph
        .tensor_ids()
        .map(|t| {
            let tensor = graph.tensor(t);
            tensor.fill.map(|fill| {
                let here = at;
                at += fill.draws(tensor.shape.iter().product::<usize>() as u64);
                here
            })
        })
        .collect()
}

/// Values for every tensor that has a [`Fill`](tdl::Fill), generated deterministically
/// from `seed` ([`tdl::fill`], each tensor from its [`fill_offsets`] entry).
pub fn synthesize(graph: &Graph, seed: u64) -> Values {
    let mut values = Values::new(graph.tensors().len());
    for (t, offset) in graph.tensor_ids().zip(fill_offsets(graph)) {
        let tensor = graph.tensor(t);
        let (Some(fill), Some(offset)) = (tensor.fill, offset) else {
            continue;
        };
        values.set(
            t,
            Value {
                shape: tensor.shape.clone(),
                data: fill.generate(&tensor.shape, seed, offset),
            },
        );
    }
    values
}
