//! The loss of an imported training graph.
//!
//! Takes the tensor `--loss` names; gives a scalar loss: the tensor itself
//! if it is a scalar (a model exported with its loss); otherwise the
//! cross-entropy of the logits `[…, C]` against the graph input
//! `loss.labels` — integer class ids `[…]` (`cross_entropy`, PyTorch's
//! `F.cross_entropy`: ids outside `0..C`, as its ignore_index -100, are not
//! counted), or with `--soft-labels` rows of probabilities `[…, C]`
//! (`softmax_cross_entropy`). The logits are the softmax's input when the
//! tensor is a `softmax` output (classifiers exported with their final
//! Softmax), the tensor itself otherwise.

use graph::{DType, Fill, TensorId};

use crate::lower::{LResult, Lower};

/// Attach the loss (see the module doc; `soft`: probability labels): the
/// loss tensor and the operators added.
pub fn attach(l: &mut Lower, t: TensorId, soft: bool) -> LResult<(TensorId, usize)> {
    let shape = l.shape(t);
    if shape.is_empty() {
        return Ok((t, 0));
    }
    let logits = match l.producers.get(&t) {
        Some((spec, ins)) if spec == "softmax" => ins[0],
        _ => t,
    };
    let lshape = l.shape(logits);
    if soft {
        let labels =
            l.b.input("loss.labels", &lshape, DType::F32, Fill::Probabilities)?;
        l.begin_node("loss");
        let loss = l.emit1("softmax_cross_entropy", &[logits, labels], &[])?;
        return Ok((loss, 1));
    }
    let (&classes, targets) = lshape.split_last().unwrap_or((&1, &[]));
    let fill = Fill::Indices { bound: classes };
    let labels = l.b.input("loss.labels", targets, DType::I32, fill)?;
    l.begin_node("loss");
    let cnt = l.emit1("count_targets", &[labels], &[])?;
    let loss = l.emit1("cross_entropy", &[logits, labels, cnt], &[])?;
    Ok((loss, 2))
}
