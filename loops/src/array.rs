//! DistArrays (thesis §5.2, Orion §3): dense N-d arrays of `f32` that hold
//! model parameters, and iteration spaces (dense or sparse N-d index sets
//! with one `f32` value per point) that a parallel loop runs over.
//!
//! Takes shapes and values; gives row-major storage, lexicographically sorted
//! points and relabelling by a permutation (Orion's `randomize`, used to
//! balance skewed data before range partitioning). Keeps true: every point
//! lies inside its shape and appears once; points are in lexicographic order.

use rand::seq::SliceRandom;
use rand::SeedableRng;

use crate::error::LoopError;

/// A dense N-d DistArray of `f32`, row-major (thesis §5.2.1).
#[derive(Debug, Clone, PartialEq)]
pub struct DistArray {
    /// Name, used in messages.
    pub name: String,
    /// Extent of each dimension.
    pub shape: Vec<usize>,
    /// Row-major values, `shape.iter().product()` of them.
    pub data: Vec<f32>,
}

impl DistArray {
    /// A zero-filled array. Errors when a dimension is empty.
    pub fn zeros(name: &str, shape: &[usize]) -> Result<Self, LoopError> {
        if shape.is_empty() || shape.contains(&0) {
            return Err(LoopError::Declaration(format!(
                "array `{name}` has shape {shape:?}; every dimension needs extent ≥ 1"
            )));
        }
        Ok(DistArray {
            name: name.to_string(),
            shape: shape.to_vec(),
            data: vec![0.0; shape.iter().product()],
        })
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// True when the array has no elements (never, for a built array).
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Row-major flat offset of `idx`, or `None` when out of range.
    pub fn flat(&self, idx: &[usize]) -> Option<usize> {
        flat_index(&self.shape, idx)
    }

    /// Relabel dimension `pos`: the slice at index `i` moves to `perm[i]`.
    /// Errors when `perm` is not a permutation of `0..shape[pos]`.
    pub fn permute_axis(&mut self, pos: usize, perm: &[usize]) -> Result<(), LoopError> {
        check_perm(self.shape.get(pos).copied(), perm, &self.name)?;
        let outer: usize = self.shape[..pos].iter().product();
        let inner: usize = self.shape[pos + 1..].iter().product();
        let n = self.shape[pos];
        let mut out = vec![0.0; self.data.len()];
        for o in 0..outer {
            for (i, &pi) in perm.iter().enumerate() {
                let src = (o * n + i) * inner;
                let dst = (o * n + pi) * inner;
                out[dst..dst + inner].copy_from_slice(&self.data[src..src + inner]);
            }
        }
        self.data = out;
        Ok(())
    }
}

/// Row-major flat offset of `idx` in `shape`, or `None` when out of range.
pub fn flat_index(shape: &[usize], idx: &[usize]) -> Option<usize> {
    if idx.len() != shape.len() {
        return None;
    }
    let mut f = 0usize;
    for (&i, &n) in idx.iter().zip(shape) {
        if i >= n {
            return None;
        }
        f = f * n + i;
    }
    Some(f)
}

/// The iteration space of a parallel for-loop: the points of a dense or
/// sparse N-d DistArray, each an index vector with one `f32` value
/// (thesis §5.2.2: the loop runs over the array's elements).
#[derive(Debug, Clone, PartialEq)]
pub struct IterSpace {
    shape: Vec<usize>,
    coords: Vec<usize>,
    values: Vec<f32>,
}

impl IterSpace {
    /// Every index of `shape` (a dense array), values 0.
    pub fn dense(shape: &[usize]) -> Result<Self, LoopError> {
        if shape.is_empty() || shape.contains(&0) {
            return Err(LoopError::Space(format!(
                "dense shape {shape:?} needs at least one dimension, each ≥ 1"
            )));
        }
        let n: usize = shape.iter().product();
        let mut coords = Vec::with_capacity(n * shape.len());
        let mut idx = vec![0usize; shape.len()];
        for _ in 0..n {
            coords.extend_from_slice(&idx);
            for k in (0..shape.len()).rev() {
                idx[k] += 1;
                if idx[k] < shape[k] {
                    break;
                }
                idx[k] = 0;
            }
        }
        Ok(IterSpace {
            shape: shape.to_vec(),
            coords,
            values: vec![0.0; n],
        })
    }

    /// A sparse space from `(index, value)` points, sorted here. Errors when
    /// a point has the wrong rank, lies outside `shape` or is repeated.
    pub fn sparse(shape: &[usize], mut points: Vec<(Vec<usize>, f32)>) -> Result<Self, LoopError> {
        if shape.is_empty() {
            return Err(LoopError::Space(
                "a sparse space needs at least one dimension".into(),
            ));
        }
        for (p, _) in &points {
            if flat_index(shape, p).is_none() {
                return Err(LoopError::Space(format!(
                    "point {p:?} lies outside shape {shape:?}"
                )));
            }
        }
        points.sort_by(|a, b| a.0.cmp(&b.0));
        if let Some(w) = points.windows(2).find(|w| w[0].0 == w[1].0) {
            return Err(LoopError::Space(format!(
                "point {:?} appears twice",
                w[0].0
            )));
        }
        let mut coords = Vec::with_capacity(points.len() * shape.len());
        let mut values = Vec::with_capacity(points.len());
        for (p, v) in points {
            coords.extend_from_slice(&p);
            values.push(v);
        }
        Ok(IterSpace {
            shape: shape.to_vec(),
            coords,
            values,
        })
    }

    /// Extent of each dimension.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Number of dimensions of the index vectors.
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// Number of points (iterations).
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// True when there are no points.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The index vector of point `i` (lexicographic order).
    pub fn point(&self, i: usize) -> &[usize] {
        let n = self.shape.len();
        &self.coords[i * n..(i + 1) * n]
    }

    /// The value of point `i`.
    pub fn value(&self, i: usize) -> f32 {
        self.values[i]
    }

    /// Points per index of dimension `dim` (the histogram that balanced
    /// partitioning cuts).
    pub fn histogram(&self, dim: usize) -> Vec<usize> {
        let mut h = vec![0usize; self.shape[dim]];
        for i in 0..self.len() {
            h[self.point(i)[dim]] += 1;
        }
        h
    }

    /// Relabel dimension `dim`: index `i` becomes `perm[i]`; points are
    /// re-sorted. Errors when `perm` is not a permutation of `0..shape[dim]`.
    pub fn permute_dim(&mut self, dim: usize, perm: &[usize]) -> Result<(), LoopError> {
        check_perm(self.shape.get(dim).copied(), perm, "iteration space")?;
        let pts: Vec<(Vec<usize>, f32)> = (0..self.len())
            .map(|i| {
                let mut p = self.point(i).to_vec();
                p[dim] = perm[p[dim]];
                (p, self.values[i])
            })
            .collect();
        *self = IterSpace::sparse(&self.shape, pts)?;
        Ok(())
    }
}

/// A random permutation of `0..n` from `seed` (Orion's `randomize`).
pub fn random_permutation(n: usize, seed: u64) -> Vec<usize> {
    let mut p: Vec<usize> = (0..n).collect();
    p.shuffle(&mut rand::rngs::StdRng::seed_from_u64(seed));
    p
}

fn check_perm(n: Option<usize>, perm: &[usize], what: &str) -> Result<(), LoopError> {
    let n = n.ok_or_else(|| LoopError::Declaration(format!("{what}: no such dimension")))?;
    let mut seen = vec![false; n];
    if perm.len() != n
        || perm
            .iter()
            .any(|&p| p >= n || std::mem::replace(&mut seen[p], true))
    {
        return Err(LoopError::Declaration(format!(
            "{what}: the permutation must hold each of 0..{n} once"
        )));
    }
    Ok(())
}
