//! `bert-<layers>-<d_model>`: a BERT-style encoder (post-norm, bidirectional
//! attention) trained with a masked-language-model head; `bert-24-1024` is
//! BERT-large (24 layers, D = 1024, 16 heads, F = 4096, sequence 512).
//!
//! Shapes (B = batch, S = sequence 512, D = d_model, A = heads = D/64,
//! F = 4D, V = vocabulary 30522): `ids[B, S]` → `vocab_embedding(wte[V, D])` +
//! `embedding(wpe[S, D], positions[B, S])` + `embedding(wtt[2, D],
//! token_types[B, S])` → `layernorm` → per layer l (`e{l}.`): self-attention
//! without a mask ([`super::layers::self_attention`]: one fused q, k, v
//! projection `[D, 3D]` split by `split_qkv`, scores
//! `[B, A, S, S]`, softmax, context, output projection) → `add` (residual) →
//! `layernorm` → `dense` `[D, F]` + `bias_add` → `gelu` → `dense` `[F, D]` +
//! `bias_add` → `add` (residual) → `layernorm`. Then the MLM head: `dense`
//! `[D, D]` + `bias_add` → `gelu` → `layernorm` → logits `dense_nt(x, wte)`
//! `[B, S, V]` (tied to the token embedding) → the cross-entropy at the
//! integer target ids `labels[B, S]` (unmasked positions carry PyTorch's
//! ignore_index -100 and are not counted; the planner's cost does not depend
//! on which positions are masked) in Megatron-LM's vocabulary-parallel
//! form ([`super::layers::cross_entropy_loss`]), which, with the token
//! lookup, lets a plan split the vocabulary.

use tdl::Library;

use super::layers::{
    cross_entropy_loss, layernorm, linear, self_attention, token_and_position_embedding,
};
use crate::{DType, Fill, Graph, GraphBuilder, GraphError};

/// Configuration of a BERT-style encoder.
#[derive(Clone, Debug, PartialEq)]
pub struct BertConfig {
    /// Encoder blocks.
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

impl BertConfig {
    /// `bert-<layers>-<d_model>`: heads = d_model/64, F = 4D, sequence 512,
    /// vocabulary 30522, batch 32; `None` unless d_model is a multiple of 64.
    pub fn new(layers: usize, d_model: usize) -> Option<BertConfig> {
        if !d_model.is_multiple_of(64) {
            return None;
        }
        Some(BertConfig {
            layers,
            d_model,
            heads: d_model / 64,
            d_ff: 4 * d_model,
            seq: 512,
            vocab: 30522,
            batch: 32,
        })
    }

    /// A small configuration of the same structure: 2 layers, D = 8, 2 heads,
    /// F = 16, sequence 4, vocabulary 7, batch 2.
    pub fn tiny() -> BertConfig {
        BertConfig {
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
        format!("bert-{}-{}", self.layers, self.d_model)
    }

    /// The forward graph.
    ///
    /// Errors: [`GraphError`] naming the operator whose spec is missing or does not fit.
    pub fn forward(&self, lib: &Library) -> Result<Graph, GraphError> {
        let (bsz, s, d) = (self.batch, self.seq, self.d_model);
        let mut b = GraphBuilder::new(lib, &self.name());
        let (x, labels, wte) = token_and_position_embedding(&mut b, (bsz, s, d), self.vocab)?;
        let types = b.input(
            "token_types",
            &[bsz, s],
            DType::I32,
            Fill::Indices { bound: 2 },
        )?;
        let wtt = b.weight("wtt", &[2, d], 0.5)?;
        let ye = b.op1("embedding", "embed.types", &[wtt, types], &[])?;
        let x = b.op1("add", "embed.with_types", &[x, ye], &[])?;
        let mut x = layernorm(&mut b, "embed.ln", x, d)?;
        for l in 0..self.layers {
            let p = format!("e{l}");
            let o = self_attention(&mut b, &p, x, d, self.heads, false)?;
            let x1 = b.op1("add", &format!("{p}.res1"), &[x, o], &[])?;
            let x1 = layernorm(&mut b, &format!("{p}.ln1"), x1, d)?;
            let h = linear(&mut b, &format!("{p}.fc1"), x1, d, self.d_ff)?;
            let h = b.op1("gelu", &format!("{p}.gelu"), &[h], &[])?;
            let h = linear(&mut b, &format!("{p}.fc2"), h, self.d_ff, d)?;
            let x2 = b.op1("add", &format!("{p}.res2"), &[x1, h], &[])?;
            x = layernorm(&mut b, &format!("{p}.ln2"), x2, d)?;
        }
        let h = linear(&mut b, "mlm.transform", x, d, d)?;
        let h = b.op1("gelu", "mlm.gelu", &[h], &[])?;
        let h = layernorm(&mut b, "mlm.ln", h, d)?;
        let logits = b.op1("dense_nt", "logits", &[h, wte], &[])?;
        let loss = cross_entropy_loss(&mut b, logits, labels)?;
        b.finish(loss)
    }
}
