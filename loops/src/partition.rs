//! Histogram-balanced range partitions (thesis §5.3.3, Orion §4.2): cut one
//! dimension of the iteration space into `n` contiguous index ranges holding
//! about equally many points.
//!
//! Takes the histogram (points per index); gives `n + 1` bounds
//! `0 = b_0 ≤ b_1 ≤ … ≤ b_n = len`. Keeps true: range `r` is
//! `b_r..b_{r+1}`, and every range holds at most mean + the heaviest single
//! index (checked in `tests/schedules.rs`).

/// Bounds of `n` balanced ranges over `hist` (`n ≥ 1`): range `r` ends at
/// the first index where the running count reaches `(r + 1) · total / n`.
pub fn balanced_bounds(hist: &[usize], n: usize) -> Vec<usize> {
    let n = n.max(1);
    let total: usize = hist.iter().sum();
    let mut bounds = Vec::with_capacity(n + 1);
    bounds.push(0);
    let mut cum = 0usize;
    let mut idx = 0usize;
    for r in 1..n {
        // Smallest end with cum · n ≥ r · total (integer arithmetic: exact).
        while idx < hist.len() && cum * n < r * total {
            cum += hist[idx];
            idx += 1;
        }
        bounds.push(idx);
    }
    bounds.push(hist.len());
    bounds
}

/// Which range of `bounds` holds index `i`.
pub fn range_of(bounds: &[usize], i: usize) -> usize {
    bounds[1..].partition_point(|&b| b <= i)
}

/// Points per range: the load of each block.
pub fn loads(hist: &[usize], bounds: &[usize]) -> Vec<usize> {
    bounds
        .windows(2)
        .map(|w| hist[w[0]..w[1]].iter().sum())
        .collect()
}
