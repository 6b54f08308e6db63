//! Row-major iteration over a box of multi-indices: the one odometer the
//! interpreter's reductions, the runner's region copies and codegen's
//! program checks share.

/// Advances the multi-index `idx` to the next index of the box `ranges`
/// (half-open `[lo, hi)` per dim, the last dim fastest); gives false, with
/// `idx` back at the box's first index, after the last one. A box with no
/// dims has one index, so this gives false at once.
pub fn next_index(idx: &mut [i64], ranges: &[(i64, i64)]) -> bool {
    for d in (0..idx.len()).rev() {
        idx[d] += 1;
        if idx[d] < ranges[d].1 {
            return true;
        }
        idx[d] = ranges[d].0;
    }
    false
}
