//! Top-k sparsification of pushed updates with residuals (seed 004's
//! modular parameter server; Aji & Heafield's gradient dropping).
//!
//! Takes, per step, the dense increment a worker would push for one
//! tensor; gives the `k = ceil(fraction · len)` entries of largest |value|
//! of increment + residual to send now, and keeps every entry not sent as
//! the residual added to the next step's increment. Keeps true: nothing is
//! lost — after any number of steps, the sum of everything sent plus the
//! residual equals the sum of every increment (exactly, up to f32
//! rounding of the additions; exactly for integer-valued increments).

/// The residual of one tensor and the fraction of it sent per step.
#[derive(Clone, Debug)]
pub struct TopK {
    fraction: f32,
    residual: Vec<f32>,
}

impl TopK {
    /// A zero residual of `len` elements; each step sends
    /// `ceil(fraction · len)` of them (at least 1; `fraction` is clamped
    /// to `(0, 1]`).
    pub fn new(len: usize, fraction: f32) -> TopK {
        TopK {
            fraction: fraction.clamp(f32::MIN_POSITIVE, 1.0),
            residual: vec![0.0; len],
        }
    }

    /// Entries sent per step.
    pub fn k(&self) -> usize {
        ((self.fraction as f64 * self.residual.len() as f64).ceil() as usize)
            .clamp(1, self.residual.len().max(1))
    }

    /// Adds `delta` (same length as the tensor; shorter is zero-padded,
    /// longer is cut) to the residual and takes out the `k` entries of
    /// largest magnitude (ties: lower index first), returned as `(index,
    /// value)` in index order; those entries of the residual become 0.
    pub fn step(&mut self, delta: &[f32]) -> Vec<(usize, f32)> {
        for (r, d) in self.residual.iter_mut().zip(delta) {
            *r += d;
        }
        let k = self.k().min(self.residual.len());
        let mut idx: Vec<usize> = (0..self.residual.len()).collect();
        if k < idx.len() {
            let res = &self.residual;
            idx.select_nth_unstable_by(k, |&a, &b| {
                res[b].abs().total_cmp(&res[a].abs()).then(a.cmp(&b))
            });
            idx.truncate(k);
        }
        idx.sort_unstable();
        idx.into_iter()
            .map(|i| (i, std::mem::take(&mut self.residual[i])))
            .collect()
    }

    /// What has not been sent yet.
    pub fn residual(&self) -> &[f32] {
        &self.residual
    }
}
