//! Synthetic tensor values: how a tensor that no operator produces (a weight,
//! a data batch, optimizer state) is filled when no real values are given.
//!
//! Takes a [`Fill`], the tensor's shape, a seed and the tensor's position in
//! the seed's random stream ([`Fill::draws`] counts how many numbers a fill
//! uses, so a graph gives each filled tensor the sum of the draws of the
//! filled tensors before it); gives the tensor's values, or only a box of them
//! ([`fill_region`]), as f64. The same (fill, shape, seed, offset) give the
//! same values bit for bit, whoever asks: the reference execution of a whole
//! graph (`planner::graph::execute::synthesize`) and every rank of a
//! partitioned run, which generates only its tiles.
//!
//! The generator is SplitMix64 (Steele, Lea, Flood, "Fast splittable
//! pseudorandom number generators", OOPSLA 2014): its state after `j` draws is
//! `seed + j·γ`, so any draw is reachable in O(1). Normal samples take two
//! draws each (Box–Muller), integers (`Indices`, `Range`) and probabilities
//! one each, constants and positions none. Not for cryptography.

use serde::{Deserialize, Serialize};

use crate::multi_index::next_index;

/// How to fill a tensor that no operator produces (synthetic data for the
/// reference executor and the runner).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fill {
    /// Independent normal samples with mean 0 and this standard deviation.
    Normal {
        /// Standard deviation.
        std: f64,
    },
    /// Every element equal to `value` (e.g. the loss-gradient seed 1, zero
    /// optimizer state, batch-norm scale 1).
    Constant {
        /// The value.
        value: f64,
    },
    /// Integers uniform in `[0, bound)` (token ids).
    Indices {
        /// Exclusive upper bound (vocabulary size).
        bound: usize,
    },
    /// Integers uniform in `[lo, hi)` (ids that an integer computation
    /// shifts before they index a table: an ONNX import picks the range so
    /// that every id the computation derives is a row of the table).
    Range {
        /// Smallest value.
        lo: i64,
        /// Exclusive upper bound (`hi > lo`).
        hi: i64,
    },
    /// Rows along the last axis that are probability distributions (labels).
    Probabilities,
    /// Each element's coordinate along the last axis (position ids 0..S).
    Positions,
}

/// SplitMix64's increment γ.
const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

impl Fill {
    /// Random numbers the fill of `elems` elements draws from the stream.
    pub fn draws(&self, elems: u64) -> u64 {
        match self {
            Fill::Normal { .. } => 2 * elems,
            Fill::Indices { .. } | Fill::Range { .. } | Fill::Probabilities => elems,
            Fill::Constant { .. } | Fill::Positions => 0,
        }
    }

    /// Every value of a tensor of `shape` (row-major), the tensor starting at
    /// draw `offset` of the stream of `seed`.
    pub fn generate(&self, shape: &[usize], seed: u64, offset: u64) -> Vec<f64> {
        let whole: Vec<(i64, i64)> = shape.iter().map(|&d| (0, d as i64)).collect();
        fill_region(*self, shape, seed, offset, &whole)
    }
}

/// The values of the box `region` (`[lo, hi)` per dim, inside `shape`;
/// row-major) of the tensor [`Fill::generate`] would give: each element is
/// generated on its own from its draws (probability rows from their whole
/// row, which the normalisation needs).
pub fn fill_region(
    fill: Fill,
    shape: &[usize],
    seed: u64,
    offset: u64,
    region: &[(i64, i64)],
) -> Vec<f64> {
    let n: usize = region
        .iter()
        .map(|&(l, h)| (h - l).max(0) as usize)
        .product();
    if n == 0 {
        return Vec::new();
    }
    let last = shape.last().copied().unwrap_or(1).max(1);
    let mut out = Vec::with_capacity(n);
    let mut idx: Vec<i64> = region.iter().map(|r| r.0).collect();
    // The normaliser of the current row of a `Probabilities` fill: one sum
    // per row, not per element (a row of a vocabulary is 50K elements).
    let mut row_sum: Option<(u64, f64)> = None;
    loop {
        let mut i = 0u64;
        for (d, &x) in idx.iter().enumerate() {
            i = i * shape[d] as u64 + x as u64;
        }
        out.push(match fill {
            Fill::Probabilities => {
                let last = last as u64;
                let row = i / last * last;
                let s = match row_sum {
                    Some((r, s)) if r == row => s,
                    _ => {
                        let s = probability_row_sum(last, seed, offset, row);
                        row_sum = Some((row, s));
                        s
                    }
                };
                probability_weight(seed, offset, i) / s
            }
            _ => element(fill, last as u64, seed, offset, i),
        });
        if !next_index(&mut idx, region) {
            break;
        }
    }
    out
}

/// Element `i` (row-major) of a fill whose rows have `last` elements.
fn element(fill: Fill, last: u64, seed: u64, offset: u64, i: u64) -> f64 {
    match fill {
        Fill::Normal { std } => {
            let u1 = uniform(draw(seed, offset + 2 * i)).max(1e-300);
            let u2 = uniform(draw(seed, offset + 2 * i + 1));
            (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos() * std
        }
        Fill::Constant { value } => value,
        Fill::Indices { bound } => (draw(seed, offset + i) % bound.max(1) as u64) as f64,
        Fill::Range { lo, hi } => {
            let width = hi.saturating_sub(lo).max(1) as u64;
            lo as f64 + (draw(seed, offset + i) % width) as f64
        }
        Fill::Positions => (i % last) as f64,
        Fill::Probabilities => {
            let row = i / last * last;
            probability_weight(seed, offset, i) / probability_row_sum(last, seed, offset, row)
        }
    }
}

/// The unnormalised weight of element `j` of a `Probabilities` fill.
fn probability_weight(seed: u64, offset: u64, j: u64) -> f64 {
    0.05 + uniform(draw(seed, offset + j))
}

/// The sum of the weights of the row starting at element `row` (in order).
fn probability_row_sum(last: u64, seed: u64, offset: u64, row: u64) -> f64 {
    (row..row + last)
        .map(|j| probability_weight(seed, offset, j))
        .sum()
}

/// Draw `j` (0-based) of SplitMix64 seeded with `seed`.
fn draw(seed: u64, j: u64) -> u64 {
    let mut z = seed.wrapping_add(j.wrapping_add(1).wrapping_mul(GAMMA));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A draw as a uniform number in [0, 1).
fn uniform(x: u64) -> f64 {
    (x >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sequential SplitMix64 with Box–Muller, as the reference executor
    /// generated values before fills could be generated per element.
    struct Sequential(u64);

    impl Sequential {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(GAMMA);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
        fn uniform(&mut self) -> f64 {
            (self.next() >> 11) as f64 / (1u64 << 53) as f64
        }
        fn normal(&mut self) -> f64 {
            let u1 = self.uniform().max(1e-300);
            let u2 = self.uniform();
            (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
        }
    }

    fn sequential(fills: &[(Fill, Vec<usize>)], seed: u64) -> Vec<Vec<f64>> {
        let mut rng = Sequential(seed);
        fills
            .iter()
            .map(|(fill, shape)| {
                let n = shape.iter().product::<usize>();
                let last = shape.last().copied().unwrap_or(1).max(1);
                match *fill {
                    Fill::Normal { std } => (0..n).map(|_| rng.normal() * std).collect(),
                    Fill::Constant { value } => vec![value; n],
                    Fill::Indices { bound } => (0..n)
                        .map(|_| (rng.next() % bound.max(1) as u64) as f64)
                        .collect(),
                    Fill::Range { lo, hi } => (0..n)
                        .map(|_| lo as f64 + (rng.next() % (hi - lo) as u64) as f64)
                        .collect(),
                    Fill::Positions => (0..n).map(|i| (i % last) as f64).collect(),
                    Fill::Probabilities => {
                        let mut d: Vec<f64> = (0..n).map(|_| 0.05 + rng.uniform()).collect();
                        for row in d.chunks_mut(last) {
                            let s: f64 = row.iter().sum();
                            row.iter_mut().for_each(|x| *x /= s);
                        }
                        d
                    }
                }
            })
            .collect()
    }

    fn fills() -> Vec<(Fill, Vec<usize>)> {
        vec![
            (Fill::Normal { std: 0.5 }, vec![3, 4]),
            (Fill::Probabilities, vec![2, 5]),
            (Fill::Constant { value: 2.0 }, vec![7]),
            (Fill::Indices { bound: 11 }, vec![2, 2, 3]),
            (Fill::Positions, vec![2, 3]),
            (Fill::Range { lo: 2, hi: 14 }, vec![4]),
            (Fill::Normal { std: 1.0 }, vec![5]),
        ]
    }

    #[test]
    fn stream_offsets_give_the_sequential_values_bit_for_bit() {
        for seed in [0, 1, 42, u64::MAX] {
            let want = sequential(&fills(), seed);
            let mut offset = 0;
            for ((fill, shape), w) in fills().iter().zip(want) {
                let got = fill.generate(shape, seed, offset);
                assert_eq!(
                    got.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                    w.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                    "{fill:?} {shape:?} seed {seed}"
                );
                offset += fill.draws(shape.iter().product::<usize>() as u64);
            }
        }
    }

    #[test]
    fn a_region_is_the_slice_of_the_whole() {
        for (fill, shape) in fills() {
            let whole = fill.generate(&shape, 7, 13);
            let region: Vec<(i64, i64)> =
                shape.iter().map(|&d| ((d / 2) as i64, d as i64)).collect();
            let got = fill_region(fill, &shape, 7, 13, &region);
            let mut want = Vec::new();
            let mut idx: Vec<i64> = region.iter().map(|r| r.0).collect();
            loop {
                let mut i = 0;
                for (d, &x) in idx.iter().enumerate() {
                    i = i * shape[d] + x as usize;
                }
                want.push(whole[i]);
                if !next_index(&mut idx, &region) {
                    break;
                }
            }
            assert_eq!(got, want, "{fill:?} {shape:?}");
        }
    }
}
