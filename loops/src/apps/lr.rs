//! Sparse logistic regression (thesis §5.2.4's buffer example): a 1D loop
//! over samples; the weights are read through an `Any` subscript and the
//! gradient goes to a DistArray buffer, so the loop has no dependence vector
//! and runs 1D. Each epoch is one full-gradient step: the buffered writes
//! `w_f += −lr/n · g_f` are applied when the pass ends.
//!
//! Takes a synthetic, seeded data set ([`synthetic`](crate::apps::lr::synthetic): `n` samples, `f`
//! features, `nnz` non-zeros per sample, labels from a hidden weight
//! vector); gives the mean log-loss per epoch and the final weights.

use rand::{Rng, SeedableRng};

use crate::array::{DistArray, IterSpace};
use crate::ctx::Ctx;
use crate::depend::DepVec;
use crate::error::LoopError;
use crate::exec::run;
use crate::schedule::{plan, Choice, PlanOptions};
use crate::spec::{LoopBuilder, Mode, Sub};

/// A sparse data set in CSR form.
#[derive(Debug, Clone)]
pub struct Data {
    /// Row starts into `cols`/`vals` (`n + 1` entries).
    pub row_ptr: Vec<usize>,
    /// Feature of each non-zero.
    pub cols: Vec<usize>,
    /// Value of each non-zero.
    pub vals: Vec<f32>,
    /// Label per sample, 0 or 1.
    pub labels: Vec<f32>,
    /// Number of features.
    pub features: usize,
}

/// `n` samples over `f` features with `nnz` random non-zeros each (values
/// ±1), labelled by a hidden weight vector with label noise (seeded).
pub fn synthetic(n: usize, f: usize, nnz: usize, seed: u64) -> Data {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let truth: Vec<f32> = (0..f).map(|_| rng.gen_range(-1.0..1.0)).collect();
    let (mut row_ptr, mut cols, mut vals, mut labels) = (vec![0], vec![], vec![], vec![]);
    for _ in 0..n {
        let mut z = 0f32;
        for _ in 0..nnz {
            let c = rng.gen_range(0..f);
            let v = if rng.gen::<bool>() { 1.0 } else { -1.0 };
            cols.push(c);
            vals.push(v);
            z += truth[c] * v;
        }
        row_ptr.push(cols.len());
        let p = 1.0 / (1.0 + (-z).exp());
        labels.push(if rng.gen::<f32>() < p { 1.0 } else { 0.0 });
    }
    Data {
        row_ptr,
        cols,
        vals,
        labels,
        features: f,
    }
}

/// What a run measured.
#[derive(Debug, Clone)]
pub struct LrReport {
    /// Schedule that ran.
    pub schedule: String,
    /// Dependence vectors (none: the writes are buffered).
    pub dvecs: Vec<DepVec>,
    /// Mean log-loss per epoch (during the pass, before its step).
    pub loss: Vec<f64>,
    /// Weights after the last epoch.
    pub weights: Vec<f32>,
    /// Seconds per epoch.
    pub seconds: Vec<f64>,
}

/// Train for `epochs` with step `lr` on `workers` threads (`1`: serial);
/// `progress` gets (epoch, loss, seconds).
pub fn train(
    data: &Data,
    epochs: usize,
    lr: f32,
    workers: usize,
    choice: Choice,
    progress: &mut dyn FnMut(usize, f64, f64),
) -> Result<LrReport, LoopError> {
    let n = data.labels.len();
    let space = IterSpace::sparse(
        &[n],
        data.labels
            .iter()
            .enumerate()
            .map(|(i, &y)| (vec![i], y))
            .collect(),
    )?;
    let mut arrays = vec![DistArray::zeros("w", &[data.features])?];
    let mut lb = LoopBuilder::new(1, vec![vec![data.features]]);
    let wa = lb.access(0, vec![Sub::Any], Mode::Read);
    let gb = lb.buffer(0, vec![Sub::Any], |old, d| old + d);
    let loss = lb.accumulator(0.0, |a, b| a + b);
    let spec = lb.build()?;
    let p = plan(
        &spec,
        &space,
        PlanOptions {
            workers,
            choice,
            pipeline: true,
        },
    )?;
    let step = -lr / n.max(1) as f32;
    let body = |ctx: &mut Ctx| {
        let (i, y) = (ctx.point()[0], ctx.value());
        let (lo, hi) = (data.row_ptr[i], data.row_ptr[i + 1]);
        let mut z = 0f32;
        for k in lo..hi {
            z += ctx.get(wa, &[data.cols[k]]) * data.vals[k];
        }
        let pr = 1.0 / (1.0 + (-z).exp());
        let l = -(y * pr.max(1e-7).ln() + (1.0 - y) * (1.0 - pr).max(1e-7).ln());
        ctx.accumulate(loss, l as f64);
        for k in lo..hi {
            ctx.buffer(gb, &[data.cols[k]], step * (pr - y) * data.vals[k]);
        }
    };
    let mut rep = LrReport {
        schedule: p.kind.to_string(),
        dvecs: p.dvecs.clone(),
        loss: vec![],
        weights: vec![],
        seconds: vec![],
    };
    for e in 0..epochs {
        let t0 = std::time::Instant::now();
        let out = run(&p, &spec, &space, &mut arrays, &body, false)?;
        let secs = t0.elapsed().as_secs_f64();
        let l = out.accums[0] / n.max(1) as f64;
        progress(e + 1, l, secs);
        rep.loss.push(l);
        rep.seconds.push(secs);
    }
    rep.weights = arrays.remove(0).data;
    Ok(rep)
}
