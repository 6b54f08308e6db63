//! `gpt-<layers>-<d_model>`: a decoder-only transformer (GPT-2 style, pre-norm).
//!
//! Shapes (B = batch, S = sequence 1024, D = d_model, A = heads = D/64,
//! F = 4D, V = vocabulary 50257): `ids[B, S]` → `vocab_embedding(wte[V, D])` +
//! `embedding(wpe[S, D], positions[B, S])` → per layer l (`h{l}.`):
//! `layernorm` → one fused `dense` `[D, 3D]` + `bias_add` (q, k, v,
//! head-interleaved as Megatron-LM's query_key_value) → `split_qkv<A>` →
//! `batch_matmul_nt` (scores `[B, A, S, S]`) →
//! `scale<1/√(D/A)>` → `causal_mask` → `softmax` → `batch_matmul` with v →
//! `merge_heads` → `dense` + `bias_add` (out projection) → `add` (residual);
//! `layernorm` → `dense` `[D, F]` + `bias_add` → `gelu` → `dense` `[F, D]` +
//! `bias_add` → `add` (residual). Then `layernorm` → logits
//! `dense_nt(x, wte)` `[B, S, V]` (the output projection is tied to the token
//! embedding, whose gradient is therefore a sum of two contributions) → the
//! cross-entropy at the integer next-token ids `labels[B, S]` in Megatron-LM's
//! vocabulary-parallel form ([`super::layers::cross_entropy_loss`]:
//! `reduce_max` → `cross_entropy_parts` → `cross_entropy_combine`). The
//! token lookup and the loss reduce over V, so a plan may split the
//! vocabulary (`wte`, the logits) and all-reduce `[B, S, D]` and `[B, S]`
//! tensors instead of gathering the table and the logits.

use tdl::Library;

use super::layers::{
    cross_entropy_loss, layernorm, linear, self_attention, token_and_position_embedding,
};
use crate::{Graph, GraphBuilder, GraphError};

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
        let (mut x, labels, wte) = token_and_position_embedding(&mut b, (bsz, s, d), self.vocab)?;
        for l in 0..self.layers {
            let p = format!("h{l}");
            let h = layernorm(&mut b, &format!("{p}.ln1"), x, d)?;
            let o = self_attention(&mut b, &p, h, d, self.heads, true)?;
            x = b.op1("add", &format!("{p}.res1"), &[x, o], &[])?;
            let h = layernorm(&mut b, &format!("{p}.ln2"), x, d)?;
            let h = linear(&mut b, &format!("{p}.fc1"), h, d, self.d_ff)?;
            let h = b.op1("gelu", &format!("{p}.gelu"), &[h], &[])?;
            let h = linear(&mut b, &format!("{p}.fc2"), h, self.d_ff, d)?;
            x = b.op1("add", &format!("{p}.res2"), &[x, h], &[])?;
        }
        let x = layernorm(&mut b, "ln_f", x, d)?;
        let logits = b.op1("dense_nt", "logits", &[x, wte], &[])?;
        let loss = cross_entropy_loss(&mut b, logits, labels)?;
        b.finish(loss)
    }
}
