//! `gpt-<layers>-<d_model>`: a decoder-only transformer (GPT-2 style, pre-norm).
//!
//! Shapes (B = batch, S = sequence 1024, D = d_model, A = heads = D/64,
//! F = 4D, V = vocabulary 50257): `ids[B, S]` → `embedding(wte[V, D])` +
//! `embedding(wpe[S, D], positions[B, S])` → per layer l (`h{l}.`):
//! `layernorm` → `dense` + `bias_add` for q, k, v (`[D, D]` each) →
//! `split_heads<A>` → `batch_matmul_nt` (scores `[B, A, S, S]`) →
//! `scale<1/√(D/A)>` → `causal_mask` → `softmax` → `batch_matmul` with v →
//! `merge_heads` → `dense` + `bias_add` (out projection) → `add` (residual);
//! `layernorm` → `dense` `[D, F]` + `bias_add` → `gelu` → `dense` `[F, D]` +
//! `bias_add` → `add` (residual). Then `layernorm` → logits
//! `dense_nt(x, wte)` `[B, S, V]` (the output projection is tied to the token
//! embedding, whose gradient is therefore a sum of two contributions) →
//! `softmax_cross_entropy` against `labels[B, S, V]`.

use tdl::Library;

use crate::graph::{float, int, DType, Fill, Graph, GraphBuilder, GraphError, TensorId};

/// Configuration of a decoder-only transformer.
#[derive(Clone, Debug, PartialEq)]
pub struct GptConfig {
    /// Transformer blocks.
    pub layers: usize,
    /// Model width D.
    pub d_model: usize,
    /// Attention heads (D must be a multiple).
    pub heads: usize,
    /// Feed-forward width F.
    pub d_ff: usize,
    /// Sequence length S.
    pub seq: usize,
    /// Vocabulary V.
    pub vocab: usize,
    /// Batch size.
    pub batch: usize,
}

impl GptConfig {
    /// `gpt-<layers>-<d_model>`: heads = d_model/64, F = 4D, sequence 1024,
    /// vocabulary 50257, batch 8; `None` unless d_model is a multiple of 64.
    pub fn new(layers: usize, d_model: usize) -> Option<GptConfig> {
        if !d_model.is_multiple_of(64) {
            return None;
        }
        Some(GptConfig {
            layers,
            d_model,
            heads: d_model / 64,
            d_ff: 4 * d_model,
            seq: 1024,
            vocab: 50257,
            batch: 8,
        })
    }

    /// A small configuration of the same structure: 2 layers, D = 8, 2 heads,
    /// F = 16, sequence 4, vocabulary 7, batch 2.
    pub fn tiny() -> GptConfig {
        GptConfig {
            layers: 2,
            d_model: 8,
            heads: 2,
            d_ff: 16,
            seq: 4,
            vocab: 7,
            batch: 2,
        }
    }

    /// Zoo name.
    pub fn name(&self) -> String {
        format!("gpt-{}-{}", self.layers, self.d_model)
    }

    /// The forward graph.
    ///
    /// Errors: [`GraphError`] naming the operator whose spec is missing or does not fit.
    pub fn forward(&self, lib: &Library) -> Result<Graph, GraphError> {
        let (bsz, s, d) = (self.batch, self.seq, self.d_model);
        let mut b = GraphBuilder::new(lib, &self.name());
        let ids = b.input(
            "ids",
            &[bsz, s],
            DType::I32,
            Fill::Indices { bound: self.vocab },
        )?;
        let pos = b.input("positions", &[bsz, s], DType::I32, Fill::Positions)?;
        let labels = b.input(
            "labels",
            &[bsz, s, self.vocab],
            DType::F32,
            Fill::Probabilities,
        )?;
        let wte = b.weight("wte", &[self.vocab, d], 0.5)?;
        let wpe = b.weight("wpe", &[s, d], 0.5)?;
        let te = b.op1("embedding", "embed.tokens", &[wte, ids], &[])?;
        let pe = b.op1("embedding", "embed.positions", &[wpe, pos], &[])?;
        let mut x = b.op1("add", "embed", &[te, pe], &[])?;
        let dh = d / self.heads;
        let heads = [("heads", int(self.heads as i64))];
        for l in 0..self.layers {
            let p = format!("h{l}");
            let h = layernorm(&mut b, &format!("{p}.ln1"), x, d)?;
            let q = linear(&mut b, &format!("{p}.q"), h, d, d)?;
            let k = linear(&mut b, &format!("{p}.k"), h, d, d)?;
            let v = linear(&mut b, &format!("{p}.v"), h, d, d)?;
            let q = b.op1("split_heads", &format!("{p}.q.split"), &[q], &heads)?;
            let k = b.op1("split_heads", &format!("{p}.k.split"), &[k], &heads)?;
            let v = b.op1("split_heads", &format!("{p}.v.split"), &[v], &heads)?;
            let a = b.op1("batch_matmul_nt", &format!("{p}.scores"), &[q, k], &[])?;
            let a = b.op1(
                "scale",
                &format!("{p}.scaled"),
                &[a],
                &[("alpha", float(1.0 / (dh as f64).sqrt()))],
            )?;
            let a = b.op1("causal_mask", &format!("{p}.mask"), &[a], &[])?;
            let a = b.op1("softmax", &format!("{p}.probs"), &[a], &[])?;
            let o = b.op1("batch_matmul", &format!("{p}.context"), &[a, v], &[])?;
            let o = b.op1("merge_heads", &format!("{p}.merge"), &[o], &[])?;
            let o = linear(&mut b, &format!("{p}.proj"), o, d, d)?;
            x = b.op1("add", &format!("{p}.res1"), &[x, o], &[])?;
            let h = layernorm(&mut b, &format!("{p}.ln2"), x, d)?;
            let h = linear(&mut b, &format!("{p}.fc1"), h, d, self.d_ff)?;
            let h = b.op1("gelu", &format!("{p}.gelu"), &[h], &[])?;
            let h = linear(&mut b, &format!("{p}.fc2"), h, self.d_ff, d)?;
            x = b.op1("add", &format!("{p}.res2"), &[x, h], &[])?;
        }
        let x = layernorm(&mut b, "ln_f", x, d)?;
        let logits = b.op1("dense_nt", "logits", &[x, wte], &[])?;
        let loss = b.op1("softmax_cross_entropy", "loss", &[logits, labels], &[])?;
        b.finish(loss)
    }
}

/// `dense` with weight `{name}.w[din, dout]` then `bias_add` with `{name}.b[dout]`.
fn linear(
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
fn layernorm(
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
