//! A text corpus as a language-model data set: bytes as token ids
//! (vocabulary 256), cut into windows of `seq` bytes whose labels are the
//! next bytes.
//!
//! Takes a corpus name (`kjv`: the King James Bible, public domain, from
//! Debian's `bible-kjv-text` through its own `bible` program, cached by
//! `scripts/fetch-kjv.sh` in `${TOFU_DATA_CACHE:-~/.cache/tofu}/kjv/kjv.txt`)
//! and a window length; gives a training and a held-out [`TokenSet`] (the
//! last tenth of the text held out) and the corpus's unigram entropy, the
//! loss of a model that knows only byte frequencies.

use std::borrow::Cow;
use std::path::Path;

use crate::samples::{cross_entropy, Samples};
use crate::TrainError;

/// Token ids: one per byte.
pub const VOCAB: usize = 256;

/// Windows of a byte string (see the module doc).
#[derive(Clone, Debug, PartialEq)]
pub struct TokenSet {
    /// The bytes.
    pub tokens: Vec<u8>,
    /// Window length (tokens per sample).
    pub seq: usize,
}

impl TokenSet {
    /// Unigram entropy of the bytes (nats per byte): `−Σ p log p` over byte
    /// frequencies.
    pub fn unigram_entropy(&self) -> f64 {
        let mut n = [0u64; VOCAB];
        for &b in &self.tokens {
            n[b as usize] += 1;
        }
        let total = self.tokens.len().max(1) as f64;
        n.iter()
            .filter(|&&c| c > 0)
            .map(|&c| {
                let p = c as f64 / total;
                -p * p.ln()
            })
            .sum()
    }
}

impl Samples for TokenSet {
    /// Whole windows with a next byte for each position.
    fn len(&self) -> usize {
        self.tokens.len().saturating_sub(1) / self.seq.max(1)
    }

    fn inputs(&self) -> Vec<(&str, usize)> {
        vec![("ids", self.seq), ("labels", self.seq)]
    }

    fn sample(&self, i: usize, k: usize) -> Cow<'_, [f32]> {
        let at = i * self.seq;
        if k == 0 {
            return self.tokens[at..at + self.seq]
                .iter()
                .map(|&b| b as f32)
                .collect();
        }
        self.tokens[at + 1..at + 1 + self.seq]
            .iter()
            .map(|&b| b as f32)
            .collect()
    }

    fn classes(&self) -> Option<usize> {
        Some(VOCAB)
    }

    fn score(&self, i: usize, logits: &[f32]) -> (f64, usize, usize) {
        let at = i * self.seq + 1;
        let (mut loss, mut right) = (0.0, 0);
        for (s, row) in logits.chunks_exact(VOCAB).enumerate().take(self.seq) {
            let (l, ok) = cross_entropy(row, self.tokens[at + s] as usize);
            loss += l;
            right += usize::from(ok);
        }
        (loss, right, self.seq)
    }
}

/// The corpus `kjv` from the cache, split: the first nine tenths for
/// training, the last tenth held out.
///
/// Errors: [`TrainError::Data`] naming the file and the script that fetches it.
pub fn load_kjv(path: &Path, seq: usize) -> Result<(TokenSet, TokenSet), TrainError> {
    let tokens = std::fs::read(path).map_err(|e| {
        TrainError::Data(format!(
            "{}: {e}: run scripts/fetch-kjv.sh to cache the King James Bible",
            path.display()
        ))
    })?;
    if seq == 0 || tokens.len() < 20 * (seq + 1) {
        return Err(TrainError::Data(format!(
            "{}: {} bytes do not make windows of {seq}",
            path.display(),
            tokens.len()
        )));
    }
    let cut = tokens.len() * 9 / 10;
    Ok((
        TokenSet {
            tokens: tokens[..cut].to_vec(),
            seq,
        },
        TokenSet {
            tokens: tokens[cut..].to_vec(),
            seq,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_label_the_next_byte_and_entropy_counts_frequencies() {
        let t = TokenSet {
            tokens: b"abcabcab".to_vec(),
            seq: 3,
        };
        assert_eq!(t.len(), 2);
        assert_eq!(t.sample(1, 0).as_ref(), &[97.0, 98.0, 99.0]);
        assert_eq!(
            t.sample(0, 1).as_ref(),
            &[98.0, 99.0, 97.0],
            "labels are the next bytes"
        );
        assert_eq!(t.classes(), Some(VOCAB));
        let (p_ab, p_c) = (3.0 / 8.0, 2.0 / 8.0);
        let h: f64 = -(2.0 * p_ab * f64::ln(p_ab) + p_c * f64::ln(p_c));
        assert!((t.unigram_entropy() - h).abs() < 1e-12);
        let mut logits = vec![0.0; 3 * VOCAB];
        for (s, b) in [98usize, 99, 97].into_iter().enumerate() {
            logits[s * VOCAB + b] = 100.0;
        }
        let (loss, right, n) = t.score(0, &logits);
        assert!(loss < 1e-6 && right == 3 && n == 3);
    }
}
