//! Boxes of elements and how splits cut them into tiles.
//!
//! Takes shapes (elements per dim) and split decisions; gives half-open boxes
//! `[lo, hi)` per dim. A range of n elements split into p parts gives the
//! first `n % p` parts `⌊n/p⌋ + 1` elements and the others `⌊n/p⌋` (as
//! `torch.tensor_split` does); parts are empty when n < p.

use serde::{Deserialize, Serialize};

/// A half-open box: `[lo, hi)` per dim, in elements.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Region(pub Vec<(i64, i64)>);

impl Region {
    /// The whole of a tensor of this shape.
    pub fn whole(shape: &[usize]) -> Region {
        Region(shape.iter().map(|&n| (0, n as i64)).collect())
    }

    /// Number of elements (0 if any dim is empty).
    pub fn volume(&self) -> u64 {
        self.0
            .iter()
            .map(|&(lo, hi)| (hi - lo).max(0) as u64)
            .product()
    }

    /// The intersection with another box of the same rank.
    pub fn intersect(&self, other: &Region) -> Region {
        Region(
            self.0
                .iter()
                .zip(&other.0)
                .map(|(&(a, b), &(c, d))| (a.max(c), b.min(d).max(a.max(c))))
                .collect(),
        )
    }

    /// Number of elements in common with another box.
    pub fn overlap(&self, other: &Region) -> u64 {
        self.0
            .iter()
            .zip(&other.0)
            .map(|(&(a, b), &(c, d))| (b.min(d) - a.max(c)).max(0) as u64)
            .product()
    }

    /// This box with dim `d` cut to part `i` of `p` (see the module doc).
    pub fn split(&self, d: usize, p: usize, i: usize) -> Region {
        let mut r = self.clone();
        r.0[d] = part(self.0[d], p, i);
        r
    }
}

/// Part `i` of `p` of the range `[lo, hi)`: the first `n % p` parts get
/// one element more (the convention of [`interval::instantiate::part_range`], which the
/// interval analysis, the planner and codegen share).
pub fn part((lo, hi): (i64, i64), p: usize, i: usize) -> (i64, i64) {
    let (a, b) = interval::instantiate::part_range(hi - lo, p, i);
    (lo + a, lo + b)
}

/// The digits of `rank` in the mixed radix of the level factors
/// (`factors[0]` is the outermost level): worker `rank` is in group
/// `digits[0]` at level 0, sub-group `digits[1]` at level 1, …
pub fn digits(rank: usize, factors: &[usize]) -> Vec<usize> {
    let mut d = vec![0; factors.len()];
    let mut r = rank;
    for (i, &f) in factors.iter().enumerate().rev() {
        d[i] = r % f;
        r /= f;
    }
    d
}

/// Split `k ≥ 1` workers into recursion levels (Tofu §4.4): its prime
/// factors, largest first (k = 1 gives no level; 12 gives [3, 2, 2]).
pub fn factorize(k: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let mut n = k;
    let mut f = 2;
    while f * f <= n {
        while n.is_multiple_of(f) {
            out.push(f);
            n /= f;
        }
        f += 1;
    }
    if n > 1 {
        out.push(n);
    }
    out.sort_by(|a, b| b.cmp(a));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_cover_the_range_exactly_once() {
        for n in 0..20 {
            for p in 1..7 {
                let mut next = 3;
                for i in 0..p {
                    let (lo, hi) = part((3, 3 + n), p, i);
                    assert_eq!(lo, next);
                    assert!(hi >= lo && hi - lo <= (n + p as i64 - 1) / p as i64);
                    next = hi;
                }
                assert_eq!(next, 3 + n);
            }
        }
    }

    #[test]
    fn factorize_multiplies_back() {
        for k in 1..200 {
            let f = factorize(k);
            assert_eq!(f.iter().product::<usize>(), k);
            assert!(f.windows(2).all(|w| w[0] >= w[1]));
        }
        assert_eq!(factorize(12), vec![3, 2, 2]);
        assert_eq!(digits(5, &[3, 2]), vec![2, 1]);
    }
}
