//! Unimodular transformation (thesis §5.3.3, after Wolf & Lam): when no
//! dimension serves as 1D or 2D, skew the iteration space so that one new
//! dimension carries every dependence.
//!
//! Takes the dependence vectors (all exact) and the rank; gives an integer
//! `n × n` matrix T with determinant ±1 whose first row h has h · d ≥ 1 for
//! every vector d: iterations with equal h · p never depend on each other,
//! so each hyperplane is one parallel step. Keeps true: T is integer and
//! unimodular (row h has a component ±1 at k; the other rows are the unit
//! vectors e_j, j ≠ k, so det T = ±h_k).

use crate::depend::{DepVec, Dist};

/// Largest |coefficient| tried for the first row.
const MAX_COEF: i64 = 3;

/// The transformation, or `None` when a vector has a `*` component, the
/// rank is not 2..=5, or no first row with coefficients in ±3 works.
/// Prefers the row with the smallest Σ|h_k| (fewest, widest hyperplanes).
pub fn find_transform(n: usize, dvecs: &[DepVec]) -> Option<Vec<Vec<i64>>> {
    if !(2..=5).contains(&n) || dvecs.is_empty() || !dvecs.iter().all(DepVec::is_exact) {
        return None;
    }
    let exact: Vec<Vec<i64>> = dvecs
        .iter()
        .map(|v| {
            v.0.iter()
                .map(|c| match c {
                    Dist::Exact(e) => *e,
                    Dist::Any => 0,
                })
                .collect()
        })
        .collect();
    let width = (2 * MAX_COEF + 1) as usize;
    let mut best: Option<(i64, Vec<i64>)> = None;
    for code in 0..width.pow(n as u32) {
        let mut c = code;
        let h: Vec<i64> = (0..n)
            .map(|_| {
                let x = (c % width) as i64 - MAX_COEF;
                c /= width;
                x
            })
            .collect();
        if !h.iter().any(|x| x.abs() == 1) {
            continue;
        }
        if !exact
            .iter()
            .all(|d| d.iter().zip(&h).map(|(a, b)| a * b).sum::<i64>() >= 1)
        {
            continue;
        }
        let cost: i64 = h.iter().map(|x| x.abs()).sum();
        if best.as_ref().map(|b| cost < b.0).unwrap_or(true) {
            best = Some((cost, h));
        }
    }
    let (_, h) = best?;
    let k = h.iter().position(|x| x.abs() == 1)?;
    let mut t = vec![h];
    for j in (0..n).filter(|&j| j != k) {
        let mut e = vec![0; n];
        e[j] = 1;
        t.push(e);
    }
    Some(t)
}
