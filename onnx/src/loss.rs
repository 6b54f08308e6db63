//! The loss of an imported training graph.
//!
//! Takes the tensor `--loss` names; gives a scalar loss: the tensor itself
//! if it is a scalar; otherwise `softmax_cross_entropy` against a synthetic
//! `labels` input (rows of probabilities) — on the logits when the tensor is
//! a `softmax` output (classifiers exported with their final Softmax), on the
//! tensor itself otherwise.

use graph::{DType, Fill, TensorId};

use crate::lower::{LResult, Lower};

/// Attach the loss (see the module doc): the loss tensor and the operators added.
pub fn attach(l: &mut Lower, t: TensorId) -> LResult<(TensorId, usize)> {
    let shape = l.shape(t);
    if shape.is_empty() {
        return Ok((t, 0));
    }
    let logits = match l.producers.get(&t) {
        Some((spec, ins)) if spec == "softmax" => ins[0],
        _ => t,
    };
    let lshape = l.shape(logits);
    let labels =
        l.b.input("loss.labels", &lshape, DType::F32, Fill::Probabilities)?;
    l.begin_node("loss");
    let loss = l.emit1("softmax_cross_entropy", &[logits, labels], &[])?;
    Ok((loss, 1))
}
