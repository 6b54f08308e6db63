//! The activation functions ONNX allows inside LSTM, GRU and RNN cells, read
//! from the `activations` / `activation_alpha` / `activation_beta`
//! attributes, and their lowering to elementwise TDL specs.
//!
//! Takes a node's attributes; gives one [`Act`] per activation slot (per
//! direction: RNN f; GRU f, g; LSTM f, g, h). Every function ONNX lists is
//! expressible: Relu, Tanh, Sigmoid, LeakyRelu, ThresholdedRelu,
//! HardSigmoid, Elu, Softsign and Softplus map to their own specs; Affine
//! (α·x + β) is `scale` then `bias_add` of a constant β vector; ScaledTanh
//! (α·tanh(β·x)) is `scale`, `tanh`, `scale`. An unknown name is an error
//! naming it and listing the allowed ones.
//!
//! α and β are consumed in the order of the activation list, each function
//! taking as many as it uses (ONNX LSTM spec: "consumed in the order of
//! activation functions"; onnxruntime reads them the same way); a function
//! whose values are not given takes the default of the ONNX operator of
//! the same name (Affine α = 1, β = 0; ScaledTanh α = β = 1).

use graph::{float, TensorId};

use crate::lower::{unsupported, LResult, Lower};
use crate::node::Node;

/// One activation function with its parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Act {
    /// max(0, x).
    Relu,
    /// tanh(x).
    Tanh,
    /// 1 / (1 + e^(−x)).
    Sigmoid,
    /// α·x + β.
    Affine(f64, f64),
    /// x if x ≥ 0 else α·x.
    LeakyRelu(f64),
    /// x if x > α else 0.
    ThresholdedRelu(f64),
    /// α·tanh(β·x).
    ScaledTanh(f64, f64),
    /// max(0, min(1, α·x + β)).
    HardSigmoid(f64, f64),
    /// x if x ≥ 0 else α·(eˣ − 1).
    Elu(f64),
    /// x / (1 + |x|).
    Softsign,
    /// ln(1 + eˣ).
    Softplus,
}

/// The names ONNX allows (for error messages).
const ALLOWED: &str = "Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, \
                       HardSigmoid, Elu, Softsign, Softplus";

/// How many of (α, β) a function takes, and their defaults.
fn params(name: &str) -> Option<(usize, f64, f64)> {
    Some(match name {
        "relu" | "tanh" | "sigmoid" | "softsign" | "softplus" => (0, 0.0, 0.0),
        "leakyrelu" => (1, 0.01, 0.0),
        "thresholdedrelu" => (1, 1.0, 0.0),
        "elu" => (1, 1.0, 0.0),
        "affine" => (2, 1.0, 0.0),
        "scaledtanh" => (2, 1.0, 1.0),
        "hardsigmoid" => (2, 0.2, 0.5),
        _ => return None,
    })
}

fn build(name: &str, a: f64, b: f64) -> Act {
    match name {
        "relu" => Act::Relu,
        "tanh" => Act::Tanh,
        "sigmoid" => Act::Sigmoid,
        "softsign" => Act::Softsign,
        "softplus" => Act::Softplus,
        "leakyrelu" => Act::LeakyRelu(a),
        "thresholdedrelu" => Act::ThresholdedRelu(a),
        "elu" => Act::Elu(a),
        "affine" => Act::Affine(a, b),
        "scaledtanh" => Act::ScaledTanh(a, b),
        _ => Act::HardSigmoid(a, b),
    }
}

/// The activations of node `n`: `per_dir` slots for each of `dirs`
/// directions, from the attributes or `defaults` (repeated per direction).
/// A list of `per_dir` names for a bidirectional node is used for both
/// directions. Errors: an unknown name, or a list of the wrong length.
pub fn activations(n: &Node, defaults: &[Act], dirs: usize) -> LResult<Vec<Act>> {
    let per_dir = defaults.len();
    let Some(names) = n.attrs.get("activations").map(|a| {
        a.strings
            .iter()
            .map(|s| String::from_utf8_lossy(s).to_ascii_lowercase())
            .collect::<Vec<_>>()
    }) else {
        return Ok(defaults.repeat(dirs));
    };
    let names = if names.len() == per_dir && dirs == 2 {
        [names.clone(), names].concat()
    } else {
        names
    };
    if names.len() != per_dir * dirs {
        return unsupported(format!(
            "attribute `activations` lists {} functions; this node needs {per_dir} per direction \
             ({} in all)",
            names.len(),
            per_dir * dirs
        ));
    }
    let alphas = n.attrs.floats("activation_alpha").unwrap_or_default();
    let betas = n.attrs.floats("activation_beta").unwrap_or_default();
    let (mut ai, mut bi) = (alphas.iter(), betas.iter());
    let mut out = Vec::with_capacity(names.len());
    for name in &names {
        let Some((count, da, db)) = params(name) else {
            return unsupported(format!(
                "activation `{name}` is not one ONNX allows (allowed: {ALLOWED})"
            ));
        };
        let a = if count >= 1 {
            ai.next().copied().unwrap_or(da)
        } else {
            da
        };
        let b = if count >= 2 {
            bi.next().copied().unwrap_or(db)
        } else {
            db
        };
        out.push(build(name, a, b));
    }
    Ok(out)
}

/// Emit `act(x)` for x of shape [B, H]; `beta` gives the constant [H]
/// vector filled with β (for Affine).
pub fn emit(
    l: &mut Lower,
    act: Act,
    x: TensorId,
    beta: &mut dyn FnMut(&mut Lower, f64) -> LResult<TensorId>,
) -> LResult<TensorId> {
    let one = |l: &mut Lower, spec: &str, x: TensorId| l.emit1(spec, &[x], &[]);
    match act {
        Act::Relu => one(l, "relu", x),
        Act::Tanh => one(l, "tanh", x),
        Act::Sigmoid => one(l, "sigmoid", x),
        Act::Softsign => one(l, "softsign", x),
        Act::Softplus => one(l, "softplus", x),
        Act::LeakyRelu(a) => l.emit1("leaky_relu", &[x], &[("alpha", float(a))]),
        Act::ThresholdedRelu(a) => l.emit1("thresholded_relu", &[x], &[("alpha", float(a))]),
        Act::Elu(a) => l.emit1("elu", &[x], &[("alpha", float(a))]),
        Act::HardSigmoid(a, b) => l.emit1(
            "hard_sigmoid",
            &[x],
            &[("alpha", float(a)), ("beta", float(b))],
        ),
        Act::Affine(a, b) => {
            let y = l.emit1("scale", &[x], &[("alpha", float(a))])?;
            if b == 0.0 {
                return Ok(y);
            }
            let bv = beta(l, b)?;
            l.emit1("bias_add", &[y, bv], &[])
        }
        Act::ScaledTanh(a, b) => {
            if !a.is_finite() || !b.is_finite() {
                return unsupported("ScaledTanh needs finite α and β");
            }
            let y = l.emit1("scale", &[x], &[("alpha", float(b))])?;
            let y = l.emit1("tanh", &[y], &[])?;
            l.emit1("scale", &[y], &[("alpha", float(a))])
        }
    }
}
