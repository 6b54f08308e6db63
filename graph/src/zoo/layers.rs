//! Building blocks the transformer models of the zoo share ([`super::gpt`],
//! [`super::bert`]): a linear layer, layer normalisation and multi-head
//! self-attention written as matmuls (so the planner sees every matmul).
//!
//! Takes a [`GraphBuilder`] and the input activation; adds the weights and
//! operators of the block (names prefixed by the block's name) and gives the
//! output activation. Shapes: B = batch, S = sequence, D = width, A = heads.

use crate::{float, int, DType, Fill, GraphBuilder, GraphError, TensorId};

/// `dense` with weight `{name}.w[din, dout]` then `bias_add` with `{name}.b[dout]`.
pub(crate) fn linear(
    b: &mut GraphBuilder,
    name: &str,
    x: TensorId,
    din: usize,
    dout: usize,
) -> Result<TensorId, GraphError> {
    let w = b.weight(
        &format!("{name}.w"),
        &[din, dout],
        (1.0 / din as f64).sqrt(),
    )?;
    let bias = b.weight_const(&format!("{name}.b"), &[dout], 0.0)?;
    let y = b.op1("dense", name, &[x, w], &[])?;
    b.op1("bias_add", &format!("{name}.bias"), &[y, bias], &[])
}

/// `layernorm` with `{name}.gamma[d]` = 1 and `{name}.beta[d]` = 0.
pub(crate) fn layernorm(
    b: &mut GraphBuilder,
    name: &str,
    x: TensorId,
    d: usize,
) -> Result<TensorId, GraphError> {
    let gamma = b.weight_const(&format!("{name}.gamma"), &[d], 1.0)?;
    let beta = b.weight_const(&format!("{name}.beta"), &[d], 0.0)?;
    b.op1(
        "layernorm",
        name,
        &[x, gamma, beta],
        &[("eps", float(1e-5))],
    )
}

/// Multi-head self-attention of `h[B, S, D]` with `heads` heads, named
/// `{p}.*`: one fused `dense` + `bias_add` `{p}.qkv` (`[D, 3D]`, GPT-2's
/// c_attn, Megatron-LM's query_key_value) whose output columns are
/// head-interleaved (`h·3·DH + which·DH + d`) → `split_qkv<A>` into q, k, v
/// `[B, A, S, D/A]` (a contiguous column split of the weight gives each
/// tensor-parallel rank whole heads, so its backward all-reduces the input
/// gradient once, not three times) → `batch_matmul_nt` (scores `[B, A, S, S]`) →
/// `scale<1/√(D/A)>` → `causal_mask` (only when `causal`) → `softmax` →
/// `batch_matmul` with v → `merge_heads` → `dense` + `bias_add` (the output
/// projection). Gives the projection's output `[B, S, D]`.
pub(crate) fn self_attention(
    b: &mut GraphBuilder,
    p: &str,
    h: TensorId,
    d: usize,
    heads: usize,
    causal: bool,
) -> Result<TensorId, GraphError> {
    let dh = d / heads;
    let heads = [("heads", int(heads as i64))];
    let qkv = linear(b, &format!("{p}.qkv"), h, d, 3 * d)?;
    let name = format!("{p}.split");
    let outs = b.op("split_qkv", &name, &[qkv], &heads)?;
    let &[q, k, v] = outs.as_slice() else {
        return Err(GraphError::OutputCount {
            op: name,
            spec: "split_qkv".into(),
            expected: 3,
            got: outs.len(),
        });
    };
    let a = b.op1("batch_matmul_nt", &format!("{p}.scores"), &[q, k], &[])?;
    let mut a = b.op1(
        "scale",
        &format!("{p}.scaled"),
        &[a],
        &[("alpha", float(1.0 / (dh as f64).sqrt()))],
    )?;
    if causal {
        a = b.op1("causal_mask", &format!("{p}.mask"), &[a], &[])?;
    }
    let a = b.op1("softmax", &format!("{p}.probs"), &[a], &[])?;
    let o = b.op1("batch_matmul", &format!("{p}.context"), &[a, v], &[])?;
    let o = b.op1("merge_heads", &format!("{p}.merge"), &[o], &[])?;
    linear(b, &format!("{p}.proj"), o, d, d)
}

/// The inputs and embeddings of a language model with vocabulary `vocab`:
/// inputs `ids[B, S]`, `positions[B, S]` and integer target ids
/// `labels[B, S]` (each `< V`), weights
/// `wte[V, D]` and `wpe[S, D]`, and `embed` = `vocab_embedding(wte, ids)` +
/// `embedding(wpe, positions)`. Gives (`embed[B, S, D]`, `labels`, `wte`).
///
/// The token lookup is Megatron-LM's VocabParallelEmbedding: its vocabulary
/// dim is a reduction dim, so a plan may split `wte` by rows and all-reduce
/// the `[B, S, D]` partial lookups instead of gathering the table.
pub(crate) fn token_and_position_embedding(
    b: &mut GraphBuilder,
    (bsz, s, d): (usize, usize, usize),
    vocab: usize,
) -> Result<(TensorId, TensorId, TensorId), GraphError> {
    let ids = b.input("ids", &[bsz, s], DType::I32, Fill::Indices { bound: vocab })?;
    let pos = b.input("positions", &[bsz, s], DType::I32, Fill::Positions)?;
    let labels = class_labels(b, &[bsz, s], vocab)?;
    let wte = b.weight("wte", &[vocab, d], 0.5)?;
    let wpe = b.weight("wpe", &[s, d], 0.5)?;
    let te = b.op1("vocab_embedding", "embed.tokens", &[wte, ids], &[])?;
    let pe = b.op1("embedding", "embed.positions", &[wpe, pos], &[])?;
    let x = b.op1("add", "embed", &[te, pe], &[])?;
    Ok((x, labels, wte))
}

/// The mean softmax cross-entropy of `logits[B, S, V]` at integer target
/// ids `labels[B, S]` as Megatron-LM's vocab_parallel_cross_entropy computes
/// it: the row max `loss.max` = `reduce_max(logits)` `[B, S]` (a
/// stop-gradient), the per-row sums `loss.parts` =
/// `cross_entropy_parts(logits, max, labels)` (Σ exp(logits - max), the
/// target's logit, 1 for a counted target, each `[B, S]`), the number of
/// counted targets `loss.count` = `count_targets(labels)` (PyTorch's
/// ignore_index -100 is not counted) and `loss` = `cross_entropy_combine`
/// (the scalar loss, their mean; output `loss.loss`). Every reduction
/// is over V, so a plan that splits the logits by vocabulary all-reduces
/// `[B, S]` tensors instead of gathering the logits. Equals
/// `cross_entropy(logits, labels)` (`planner/tests/vocab_parallel.rs`).
pub(crate) fn cross_entropy_loss(
    b: &mut GraphBuilder,
    logits: TensorId,
    labels: TensorId,
) -> Result<TensorId, GraphError> {
    let m = b.op1("reduce_max", "loss.max", &[logits], &[])?;
    let spec = "cross_entropy_parts";
    let parts = b.op(spec, "loss.parts", &[logits, m, labels], &[])?;
    let &[z, p, sl] = parts.as_slice() else {
        return Err(GraphError::OutputCount {
            op: "loss.parts".into(),
            spec: spec.into(),
            expected: 3,
            got: parts.len(),
        });
    };
    let cnt = b.op1("count_targets", "loss.count", &[labels], &[])?;
    b.op1("cross_entropy_combine", "loss", &[m, z, p, sl, cnt], &[])
}

/// The integer class-id targets `labels[shape]` of a zoo model (I32, each
/// `< classes`; PyTorch's `F.cross_entropy` targets).
pub(crate) fn class_labels(
    b: &mut GraphBuilder,
    shape: &[usize],
    classes: usize,
) -> Result<TensorId, GraphError> {
    b.input(
        "labels",
        shape,
        DType::I32,
        Fill::Indices { bound: classes },
    )
}

/// The mean cross-entropy of `logits[..., classes]` at the class ids
/// `labels[...]`: the count of targets `loss.count` =
/// `count_targets(labels)` and `loss` = `cross_entropy(logits, labels,
/// count)` (output `loss.loss`).
pub(crate) fn class_id_loss(
    b: &mut GraphBuilder,
    logits: TensorId,
    labels: TensorId,
) -> Result<TensorId, GraphError> {
    let cnt = b.op1("count_targets", "loss.count", &[labels], &[])?;
    b.op1("cross_entropy", "loss", &[logits, labels, cnt], &[])
}
