//! What a data set gives a training run, whatever its task: numbered
//! samples, each with values for named graph inputs, and how a sample's
//! logits score. Implemented by [`crate::data::DataSet`] (classification:
//! `x` and class ids `labels`), [`crate::text::TokenSet`] (a language
//! model: byte ids `ids` and next-byte ids `labels`) and
//! [`crate::tensors::TensorSet`] (the user's tensors). Class ids are given as
//! they are; the feed one-hot encodes them where a graph takes dense labels
//! ([`crate::feed::TaskTensors::sample`]).

use std::borrow::Cow;

/// A data set as the feed and the evaluation see it (see the module doc).
pub trait Samples: Sync {
    /// Number of samples.
    fn len(&self) -> usize;

    /// Whether there is none.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The graph inputs it feeds, by name, with their elements per sample
    /// (the graph's input is `[batch, …]` with that many elements after the
    /// batch dim).
    fn inputs(&self) -> Vec<(&str, usize)>;

    /// Sample `i`'s values of input `k` (row-major, `inputs()[k].1` of them).
    fn sample(&self, i: usize, k: usize) -> Cow<'_, [f32]>;

    /// The number of classes when the input `labels` (one of
    /// [`crate::tensors::LABEL_INPUTS`]) gives class ids (`None`: no labels,
    /// or labels that are probabilities already).
    fn classes(&self) -> Option<usize> {
        None
    }

    /// Sample `i`'s logits (its rows of the logits tensor, row-major)
    /// scored: cross-entropy summed over its predictions (nats), the
    /// predictions whose largest logit is right, and how many it makes.
    fn score(&self, i: usize, logits: &[f32]) -> (f64, usize, usize);
}

/// Cross-entropy (nats) of `softmax(logits)` at class `y`, and whether the
/// largest logit is `y`.
pub fn cross_entropy(logits: &[f32], y: usize) -> (f64, bool) {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let sum: f64 = logits.iter().map(|&v| (v as f64 - max).exp()).sum();
    let best = (0..logits.len())
        .max_by(|&a, &b| logits[a].total_cmp(&logits[b]))
        .unwrap_or(0);
    (max + sum.ln() - logits[y] as f64, best == y)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cross_entropy_and_argmax() {
        let (l, _) = cross_entropy(&[0.0, 0.0], 1);
        assert!((l - std::f64::consts::LN_2).abs() < 1e-12);
        let (_, ok) = cross_entropy(&[2.0, 0.5], 1);
        assert!(!ok);
        let (l, ok) = cross_entropy(&[1.0, 3.0, 0.0], 1);
        let z = 1f64.exp() + 3f64.exp() + 1.0;
        assert!((l - (z.ln() - 3.0)).abs() < 1e-9);
        assert!(ok);
    }
}
