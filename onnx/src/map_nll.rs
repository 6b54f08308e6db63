//! Lowering of ONNX NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss
//! onto `specs/onnx_loss.tdl`.
//!
//! The input [N, C, d…] is viewed as [N, C, D] (D = Πd), has its class axis
//! moved last and is viewed as [M, C] (M = N·D), the target [N, d…] as [M]; SoftmaxCrossEntropyLoss
//! takes `log_softmax` of that view first (its optional second output, the
//! log-probabilities, is that result moved back). `reduction` = "none"
//! gives `nll_elements` viewed as the target's shape, "sum" / "mean"
//! `nll_reduced` divided by 1 / by the counted targets' summed weight
//! (`nll_weight_sum`). No `ignore_index` is passed as -1000000000 (no class id);
//! no weight as ones.

use graph::{int, TensorId};

use crate::lower::{unsupported, LResult, Lower, Out};
use crate::map_elementwise::{input, splat_const};
use crate::mapping::Mapping;
use crate::node::Node;

/// The `ignore_index` passed when the node has none: no class id equals it.
const NO_IGNORE: i64 = -1_000_000_000;

/// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (see the module doc).
pub fn nll(l: &mut Lower, n: &Node, m: &Mapping) -> LResult<Vec<Out>> {
    let x = input(l, n, 0)?;
    let t = input(l, n, 1)?;
    let (sx, st) = (l.shape(x), l.shape(t));
    if sx.len() < 2 || st.len() != sx.len() - 1 || st[0] != sx[0] || st[1..] != sx[2..] {
        return unsupported(format!(
            "input of shape {sx:?} with a target of shape {st:?}"
        ));
    }
    let c = sx[1];
    let rows: usize = st.iter().product();
    // [N, C, D] (spatial dims merged) → [N, D, C] → [M, C].
    // Through [N, D], so that each reshape changes at most 5 trailing dims.
    let nd = [sx[0], rows / sx[0].max(1)];
    let x3 = l.reshape(x, &[nd[0], c, nd[1]])?;
    let xl = l.axis_to_last(x3, 1)?;
    let moved = l.shape(xl);
    let xv = l.reshape(xl, &[rows, c])?;
    let tv = l.reshape(t, &nd)?;
    let tv = l.reshape(tv, &[rows])?;
    let w: TensorId = match n.input(2) {
        Some(_) => input(l, n, 2)?,
        None => splat_const(l, &format!("{}.ones", n.name), &[c], 1.0)?,
    };
    if l.shape(w) != [c] {
        return unsupported(format!("weight of shape {:?} for {c} classes", l.shape(w)));
    }
    let softmax = m.op == "SoftmaxCrossEntropyLoss";
    let logp = if softmax {
        l.emit1("log_softmax", &[xv], &[])?
    } else {
        xv
    };
    let ii = n.attrs.int("ignore_index", NO_IGNORE);
    let reduction = n.attrs.string("reduction", "mean");
    let loss = match reduction.as_str() {
        "none" => {
            let y = l.emit1("nll_elements", &[logp, tv, w], &[("ignore_index", int(ii))])?;
            let y = l.reshape(y, &nd)?;
            l.reshape(y, &st)?
        }
        "sum" | "mean" => {
            let den = if reduction == "mean" {
                l.emit1("nll_weight_sum", &[tv, w], &[("ignore_index", int(ii))])?
            } else {
                splat_const(l, &format!("{}.one", n.name), &[], 1.0)?
            };
            l.emit1(
                "nll_reduced",
                &[logp, tv, w, den],
                &[("ignore_index", int(ii))],
            )?
        }
        other => return unsupported(format!("reduction = \"{other}\"")),
    };
    let mut outs = vec![Out::T(loss)];
    if softmax && n.wants_output(1) {
        let lp = l.reshape(logp, &moved)?;
        let lp = l.last_to_axis(lp, 1)?;
        outs.push(Out::T(l.reshape(lp, &sx)?));
    }
    Ok(outs)
}
