//! Boxes of elements: the one `Region` type the interval analysis, the
//! planner's tiles, codegen's programs and the runner share (it lives here,
//! beside the tensors it cuts, so the runner needs no interval analysis).
//!
//! A region is a half-open `[lo, hi)` per dim, in elements. Parts of a split
//! follow [`part_range`] (the first `n % p` parts get one
//! element more, as `torch.tensor_split`).

use serde::{Deserialize, Serialize};

/// A half-open box: `[lo, hi)` per dim, in elements (a scalar has no dims and
/// holds its one element). Empty when some `lo >= hi`; the regions an
/// [`crate::Instance`] gives are non-empty.
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

    /// Number of elements; the same as [`Region::volume`].
    pub fn elements(&self) -> u64 {
        self.volume()
    }

    /// Elements of an optional region (`None`: nothing).
    pub fn count(r: &Option<Region>) -> u64 {
        r.as_ref().map_or(0, Region::volume)
    }

    /// Whether it holds `index`.
    pub fn contains(&self, index: &[i64]) -> bool {
        index.len() == self.0.len()
            && index
                .iter()
                .zip(&self.0)
                .all(|(&i, &(lo, hi))| lo <= i && i < hi)
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
        let (lo, hi) = self.0[d];
        let (a, b) = part_range(hi - lo, p, i);
        r.0[d] = (lo + a, lo + b);
        r
    }
}

/// The `[lo, hi)` of part `i` of `p` over `[0, n)`: the first `n % p` parts
/// get `⌊n/p⌋ + 1` elements, the others `⌊n/p⌋` (as `torch.tensor_split`).
pub fn part_range(n: i64, p: usize, i: usize) -> (i64, i64) {
    let (p, i) = (p as i64, i as i64);
    let n = n.max(0);
    let (base, rem) = (n / p, n % p);
    let lo = i * base + i.min(rem);
    (lo, lo + base + i64::from(i < rem))
}
