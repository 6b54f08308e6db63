//! Region copies on host memory: the elements of a box of a row-major
//! tensor, moved (or combined with a reduction) between two buffers that
//! each hold a box of the same tensor, all in global coordinates.
//!
//! Takes flat f32 slices and their boxes (`[lo, hi)` per dim); gives the
//! copy, one contiguous run of the innermost dim at a time. Used by the CPU
//! backend's [`crate::Backend::copy_region`] and by the executor to assemble
//! whole tensors on the host (kept outputs, carried values).

use comm::ReduceOp;
use tdl::multi_index::next_index;

use crate::backend::{BackendError, Bounds};

/// Elements of a box.
pub fn volume(r: &Bounds) -> u64 {
    r.iter().map(|&(l, h)| (h - l).max(0) as u64).product()
}

/// Whether `inner` lies inside `outer` (same rank).
pub fn contains(outer: &Bounds, inner: &Bounds) -> bool {
    outer.len() == inner.len()
        && outer
            .iter()
            .zip(inner)
            .all(|(&(ol, oh), &(il, ih))| il >= ol && ih <= oh)
}

/// Row-major strides (elements) of a buffer holding `r`.
pub fn strides(r: &Bounds) -> Vec<i64> {
    let rank = r.len();
    let mut s = vec![1i64; rank];
    for d in (0..rank.saturating_sub(1)).rev() {
        s[d] = s[d + 1] * (r[d + 1].1 - r[d + 1].0);
    }
    s
}

/// Copy (or combine with `op`) the elements of `region` from `src` (holding
/// `src_r`) into `dst` (holding `dst_r`); see the module doc.
///
/// Errors: [`BackendError::Region`] when `region` is not inside both boxes
/// or a buffer is shorter than its box.
pub fn copy_region(
    src: &[f32],
    src_r: &Bounds,
    dst: &mut [f32],
    dst_r: &Bounds,
    region: &Bounds,
    op: Option<ReduceOp>,
) -> Result<(), BackendError> {
    if volume(region) == 0 {
        return Ok(());
    }
    if !contains(src_r, region)
        || !contains(dst_r, region)
        || (src.len() as u64) < volume(src_r)
        || (dst.len() as u64) < volume(dst_r)
    {
        return Err(BackendError::Region {
            region: region.to_vec(),
            src: src_r.to_vec(),
            dst: dst_r.to_vec(),
        });
    }
    let rank = region.len();
    if rank == 0 {
        match op {
            Some(o) => dst[0] = o.apply(dst[0], src[0]),
            None => dst[0] = src[0],
        }
        return Ok(());
    }
    let (ss, ds) = (strides(src_r), strides(dst_r));
    let run = (region[rank - 1].1 - region[rank - 1].0) as usize;
    let mut idx: Vec<i64> = region.iter().map(|&(l, _)| l).collect();
    loop {
        let so: i64 = (0..rank).map(|d| (idx[d] - src_r[d].0) * ss[d]).sum();
        let dof: i64 = (0..rank).map(|d| (idx[d] - dst_r[d].0) * ds[d]).sum();
        let (s, t) = (
            &src[so as usize..so as usize + run],
            &mut dst[dof as usize..dof as usize + run],
        );
        match op {
            Some(o) => o.accumulate(t, s),
            None => t.copy_from_slice(s),
        }
        // The next run: every dim but the last, row-major.
        if !next_index(&mut idx[..rank - 1], &region[..rank - 1]) {
            return Ok(());
        }
    }
}

/// The elements of `region` of a whole row-major tensor of `shape`.
///
/// Errors: as [`copy_region`].
pub fn slice(all: &[f32], shape: &[usize], region: &Bounds) -> Result<Vec<f32>, BackendError> {
    let mut v = vec![0.0; volume(region) as usize];
    let whole: Vec<(i64, i64)> = shape.iter().map(|&n| (0, n as i64)).collect();
    copy_region(all, &whole, &mut v, region, region, None)?;
    Ok(v)
}

/// The reduction that combines partial results of a TDL reduction (Tofu's
/// partition-n-reduce, case 2) as a collective's [`ReduceOp`].
pub fn reduce_op(r: tdl::Reducer) -> ReduceOp {
    match r {
        tdl::Reducer::Sum => ReduceOp::Sum,
        tdl::Reducer::Prod => ReduceOp::Prod,
        tdl::Reducer::Max => ReduceOp::Max,
        tdl::Reducer::Min => ReduceOp::Min,
    }
}
