//! Lowering of ONNX's optimizer operators (domain ai.onnx.preview.training):
//! Adagrad, Adam and Momentum, one `onnx_*` operator per optimized tensor.
//!
//! Inputs are R (learning rate, scalar), T (update count, scalar), then n
//! tensors X, n gradients G and n states per state kind (Adagrad: H; Adam:
//! V, H; Momentum: V). Outputs are the n new X, then the n new states of
//! each kind, in that order.

use graph::{float, Attr, TensorId};

use crate::lower::{unsupported, LResult, Lower, NodeError, Out};
use crate::mapping::Mapping;
use crate::node::Node;

/// R and T as scalar graph tensors.
fn scalars(l: &mut Lower, n: &Node) -> LResult<(TensorId, TensorId)> {
    let mut get = |i: usize| -> LResult<TensorId> {
        let name = n
            .input(i)
            .ok_or_else(|| NodeError::Unsupported(format!("input {i} is missing")))?;
        let t = l.tensor(name)?;
        if l.shape(t).iter().product::<usize>() != 1 {
            return unsupported(format!("input {i} (`{name}`) must hold one value"));
        }
        l.reshape(t, &[])
    };
    Ok((get(0)?, get(1)?))
}

/// Emit `spec` once per optimized tensor, the tensor and its `states` state
/// inputs following R and T; gives the outputs in ONNX's order.
fn per_tensor(
    l: &mut Lower,
    n: &Node,
    spec: &str,
    states: usize,
    attrs: &[Attr],
) -> LResult<Vec<Out>> {
    let groups = 2 + states;
    let inputs = n.n_inputs().saturating_sub(2);
    if inputs == 0 || !inputs.is_multiple_of(groups) {
        return unsupported(format!(
            "{} inputs after R and T; expected {groups} per optimized tensor",
            inputs
        ));
    }
    let k = inputs / groups;
    let (r, t) = scalars(l, n)?;
    let mut outs: Vec<Vec<Out>> = vec![Vec::new(); 1 + states];
    for i in 0..k {
        let mut ins = vec![r, t];
        for g in 0..groups {
            let name = n.input(2 + g * k + i).ok_or_else(|| {
                NodeError::Unsupported(format!("input {} is missing", 2 + g * k + i))
            })?;
            ins.push(l.tensor(name)?);
        }
        let shape = l.shape(ins[2]);
        if ins[3..].iter().any(|&x| l.shape(x) != shape) {
            return unsupported(format!(
                "tensor {i}: its gradient and states must have its shape {shape:?}"
            ));
        }
        for (j, o) in l.emit(spec, &ins, attrs)?.into_iter().enumerate() {
            outs[j].push(Out::T(o));
        }
    }
    Ok(outs.into_iter().flatten().collect())
}

/// Adagrad: `onnx_adagrad` (decay_factor, epsilon, norm_coefficient).
pub fn adagrad(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let a = &n.attrs;
    let attrs = [
        ("decay_factor", float(a.float("decay_factor", 0.0))),
        ("epsilon", float(a.float("epsilon", 1e-6))),
        ("norm_coefficient", float(a.float("norm_coefficient", 0.0))),
    ];
    per_tensor(l, n, "onnx_adagrad", 1, &attrs)
}

/// Adam: `onnx_adam` (alpha, beta, epsilon, norm_coefficient, norm_coefficient_post).
pub fn adam(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let a = &n.attrs;
    let attrs = [
        ("alpha", float(a.float("alpha", 0.9))),
        ("beta", float(a.float("beta", 0.999))),
        ("epsilon", float(a.float("epsilon", 1e-6))),
        ("norm_coefficient", float(a.float("norm_coefficient", 0.0))),
        (
            "norm_coefficient_post",
            float(a.float("norm_coefficient_post", 0.0)),
        ),
    ];
    per_tensor(l, n, "onnx_adam", 2, &attrs)
}

/// Momentum: mode "standard" → `onnx_momentum`, "nesterov" → `onnx_nesterov`
/// (alpha, beta and norm_coefficient are required).
pub fn momentum(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let a = &n.attrs;
    let spec = match a.string("mode", "").as_str() {
        "standard" => "onnx_momentum",
        "nesterov" => "onnx_nesterov",
        other => return unsupported(format!("mode = \"{other}\" (standard or nesterov)")),
    };
    let mut attrs = Vec::new();
    for name in ["alpha", "beta", "norm_coefficient"] {
        if !a.has(name) {
            return unsupported(format!("the required attribute {name} is missing"));
        }
        attrs.push((name, float(a.float(name, 0.0))));
    }
    per_tensor(l, n, spec, 1, &attrs)
}
