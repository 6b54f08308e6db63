//! SGD matrix factorisation (thesis §5.3.3's running example, Orion §2):
//! `for (u, i, r) in ratings: e = r − μ − w_u·h_i − b_u − b_i; update w_u,
//! h_i, b_u, b_i`, written against the loop API, so the schedule comes from
//! the dependence analysis: W[u, :] and H[i, :] give the vectors (0, *) and
//! (*, 0), and `auto` picks unordered 2D. Also the data-parallel baseline
//! (per-worker copies of W and H, averaged at each sync) that Orion is
//! compared against.
//!
//! Takes ratings (dense ids) and a [`MfConfig`](crate::apps::mf::MfConfig); gives per-epoch training
//! RMSE (accumulated during the pass, before each update), held-out RMSE
//! and seconds. Rows hold `rank` factors then the bias: W is
//! `users × (rank + 1)`, H is `items × (rank + 1)`.

use std::time::Instant;

use rand::{Rng, SeedableRng};

use crate::array::{random_permutation, DistArray, IterSpace};
use crate::ctx::Ctx;
use crate::depend::DepVec;
use crate::error::LoopError;
use crate::exec::run;
use crate::schedule::{plan, Choice, PlanOptions};
use crate::spec::{LoopBuilder, Mode, Sub};

/// One rating: (user, item, stars), indices widened for indexing.
pub type Rating = (usize, usize, f32);

/// Largest supported rank (rows live on the stack).
pub const MAX_RANK: usize = 63;

/// How the epochs run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MfSchedule {
    /// Through the loop API with this schedule choice.
    Orion(Choice),
    /// Data parallelism without the schedule: per-worker copies averaged
    /// at `syncs` synchronisations per epoch.
    DataParallel {
        /// Synchronisations per epoch (≥ 1).
        syncs: usize,
    },
}

/// A schedule name [`MfSchedule`]'s `FromStr` does not know.
#[derive(Debug, thiserror::Error)]
#[error("{0}: unknown; use auto, 1d, 2d, unordered-2d, unimodular or data-parallel")]
pub struct UnknownSchedule(pub String);

impl std::str::FromStr for MfSchedule {
    type Err = UnknownSchedule;

    /// `auto`, `1d`, `2d`, `unordered-2d`, `unimodular` (the loop API's
    /// choices) or `data-parallel` (one synchronisation per epoch).
    fn from_str(s: &str) -> Result<MfSchedule, UnknownSchedule> {
        Ok(match s {
            "auto" => MfSchedule::Orion(Choice::Auto),
            "1d" => MfSchedule::Orion(Choice::OneD),
            "2d" => MfSchedule::Orion(Choice::TwoD),
            "unordered-2d" => MfSchedule::Orion(Choice::Unordered2D),
            "unimodular" => MfSchedule::Orion(Choice::Unimodular),
            "data-parallel" => MfSchedule::DataParallel { syncs: 1 },
            other => return Err(UnknownSchedule(other.to_string())),
        })
    }
}

/// Hyper-parameters.
#[derive(Debug, Clone, Copy)]
pub struct MfConfig {
    /// Factors per row.
    pub rank: usize,
    /// SGD step.
    pub lr: f32,
    /// L2 regularisation of factors and biases.
    pub reg: f32,
    /// Passes over the training ratings.
    pub epochs: usize,
    /// Seed of the initial factors and the `randomize` permutations.
    pub seed: u64,
    /// Workers (1: the serial loop).
    pub workers: usize,
    /// Schedule.
    pub schedule: MfSchedule,
}

impl Default for MfConfig {
    fn default() -> Self {
        MfConfig {
            rank: 16,
            lr: 0.01,
            reg: 0.05,
            epochs: 12,
            seed: 1,
            workers: 1,
            schedule: MfSchedule::Orion(Choice::Auto),
        }
    }
}

/// What a run measured.
#[derive(Debug, Clone)]
pub struct MfReport {
    /// The schedule that ran (`serial`, `unordered-2d`, `data-parallel`, …).
    pub schedule: String,
    /// The schedule with its dimensions, e.g. `Unordered2D { space: 1, time: 0 }`.
    pub detail: String,
    /// The loop's dependence vectors.
    pub dvecs: Vec<DepVec>,
    /// DistArray elements communicated per epoch (from the plan).
    pub comm_elements: u64,
    /// Training RMSE per epoch (errors before each update).
    pub train_rmse: Vec<f64>,
    /// Held-out RMSE after each epoch.
    pub heldout_rmse: Vec<f64>,
    /// Seconds per epoch (the pass only).
    pub seconds: Vec<f64>,
}

/// Ratings as `datasets::movielens::load` reads them, with indices widened.
pub fn widen(ratings: &[datasets::movielens::Rating]) -> Vec<Rating> {
    ratings
        .iter()
        .map(|&(u, i, r)| (u as usize, i as usize, r))
        .collect()
}

/// Split ratings into train and held-out sets (`heldout` fraction, seeded).
pub fn split(ratings: &[Rating], heldout: f64, seed: u64) -> (Vec<Rating>, Vec<Rating>) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let (mut train, mut test) = (vec![], vec![]);
    for &r in ratings {
        if rng.gen::<f64>() < heldout {
            test.push(r);
        } else {
            train.push(r);
        }
    }
    (train, test)
}

/// Initial W and H (users × (rank+1), items × (rank+1)): factors uniform
/// in ±0.05 from `seed`, biases 0.
pub fn init_factors(
    users: usize,
    items: usize,
    rank: usize,
    seed: u64,
) -> Result<(DistArray, DistArray), LoopError> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut w = DistArray::zeros("W", &[users, rank + 1])?;
    let mut h = DistArray::zeros("H", &[items, rank + 1])?;
    for a in [&mut w, &mut h] {
        for (k, x) in a.data.iter_mut().enumerate() {
            if k % (rank + 1) != rank {
                *x = rng.gen_range(-0.05..0.05);
            }
        }
    }
    Ok((w, h))
}

/// One SGD update of rows `w`, `h` (length rank+1) for rating `r`; returns
/// the error before the update.
#[inline]
pub fn sgd_step(w: &mut [f32], h: &mut [f32], r: f32, mu: f32, lr: f32, reg: f32) -> f32 {
    let k = w.len() - 1;
    let dot: f32 = w[..k].iter().zip(&h[..k]).map(|(a, b)| a * b).sum();
    let e = r - (mu + dot + w[k] + h[k]);
    for f in 0..k {
        let (wf, hf) = (w[f], h[f]);
        w[f] += lr * (e * hf - reg * wf);
        h[f] += lr * (e * wf - reg * hf);
    }
    w[k] += lr * (e - reg * w[k]);
    h[k] += lr * (e - reg * h[k]);
    e
}

/// RMSE of `w`, `h` on `ratings`.
pub fn rmse(w: &DistArray, h: &DistArray, ratings: &[Rating], mu: f32) -> f64 {
    let k1 = w.shape[1];
    let k = k1 - 1;
    let mut s = 0f64;
    for &(u, i, r) in ratings {
        let wr = &w.data[u * k1..(u + 1) * k1];
        let hr = &h.data[i * k1..(i + 1) * k1];
        let dot: f32 = wr[..k].iter().zip(&hr[..k]).map(|(a, b)| a * b).sum();
        let e = (r - (mu + dot + wr[k] + hr[k])) as f64;
        s += e * e;
    }
    (s / ratings.len().max(1) as f64).sqrt()
}

/// Train on `train` and evaluate on `test` after every epoch; `progress`
/// is called with (epoch, train RMSE, held-out RMSE, seconds). Users and
/// items are relabelled by random permutations first (Orion `randomize`),
/// so that range blocks are balanced and the serial order is shuffled.
pub fn train(
    train: &[Rating],
    test: &[Rating],
    users: usize,
    items: usize,
    cfg: &MfConfig,
    progress: &mut dyn FnMut(usize, f64, f64, f64),
) -> Result<MfReport, LoopError> {
    if cfg.rank == 0 || cfg.rank > MAX_RANK {
        return Err(LoopError::Declaration(format!(
            "rank {} must be in 1..={MAX_RANK}",
            cfg.rank
        )));
    }
    let pu = random_permutation(users, cfg.seed ^ 0x5eed_0001);
    let pi = random_permutation(items, cfg.seed ^ 0x5eed_0002);
    let relabel =
        |rs: &[Rating]| -> Vec<Rating> { rs.iter().map(|&(u, i, r)| (pu[u], pi[i], r)).collect() };
    let (train, test) = (relabel(train), relabel(test));
    let mu = (train.iter().map(|r| r.2 as f64).sum::<f64>() / train.len().max(1) as f64) as f32;
    let (w, h) = init_factors(users, items, cfg.rank, cfg.seed)?;
    let mut arrays = vec![w, h];
    let space = IterSpace::sparse(
        &[users, items],
        train.iter().map(|&(u, i, r)| (vec![u, i], r)).collect(),
    )?;
    let mut lb = LoopBuilder::new(
        2,
        vec![vec![users, cfg.rank + 1], vec![items, cfg.rank + 1]],
    );
    let wa = lb.access(0, vec![Sub::idx(0), Sub::Any], Mode::ReadWrite);
    let ha = lb.access(1, vec![Sub::idx(1), Sub::Any], Mode::ReadWrite);
    let loss = lb.accumulator(0.0, |a, b| a + b);
    let spec = lb.build()?;
    let (choice, dp_syncs) = match cfg.schedule {
        MfSchedule::Orion(c) => (c, None),
        MfSchedule::DataParallel { syncs } => (Choice::Serial, Some(syncs.max(1))),
    };
    let p = plan(
        &spec,
        &space,
        PlanOptions {
            workers: cfg.workers,
            choice,
            pipeline: true,
        },
    )?;
    let (lr, reg, k1) = (cfg.lr, cfg.reg, cfg.rank + 1);
    let body = move |ctx: &mut Ctx| {
        let (u, i, r) = (ctx.point()[0], ctx.point()[1], ctx.value());
        let mut w = [0f32; MAX_RANK + 1];
        let mut h = [0f32; MAX_RANK + 1];
        ctx.read_row(wa, &[u], &mut w[..k1]);
        ctx.read_row(ha, &[i], &mut h[..k1]);
        let e = sgd_step(&mut w[..k1], &mut h[..k1], r, mu, lr, reg);
        ctx.write_row(wa, &[u], &w[..k1]);
        ctx.write_row(ha, &[i], &h[..k1]);
        ctx.accumulate(loss, (e * e) as f64);
    };
    let mut report = MfReport {
        schedule: if dp_syncs.is_some() && cfg.workers > 1 {
            "data-parallel".into()
        } else {
            p.kind.to_string()
        },
        detail: match dp_syncs {
            Some(syncs) if cfg.workers > 1 => format!("DataParallel {{ syncs: {syncs} }}"),
            _ => format!("{:?}", p.kind),
        },
        dvecs: p.dvecs.clone(),
        comm_elements: p.comm_elements,
        train_rmse: vec![],
        heldout_rmse: vec![],
        seconds: vec![],
    };
    for epoch in 0..cfg.epochs {
        let t0 = Instant::now();
        let sq = match dp_syncs {
            Some(syncs) if cfg.workers > 1 => {
                data_parallel_epoch(&train, &mut arrays, cfg, mu, syncs)
            }
            _ => run(&p, &spec, &space, &mut arrays, &body, false)?.accums[0],
        };
        let secs = t0.elapsed().as_secs_f64();
        let tr = (sq / train.len().max(1) as f64).sqrt();
        let ho = rmse(&arrays[0], &arrays[1], &test, mu);
        progress(epoch + 1, tr, ho, secs);
        report.train_rmse.push(tr);
        report.heldout_rmse.push(ho);
        report.seconds.push(secs);
    }
    Ok(report)
}

/// One data-parallel epoch: worker w takes every M-th rating; each holds
/// its own copy of W and H; at each of `syncs` points the coordinator
/// averages the copies (adds the mean of the workers' deltas; summing them
/// instead overshoots and diverges at this step size). Returns Σ e².
fn data_parallel_epoch(
    train: &[Rating],
    arrays: &mut [DistArray],
    cfg: &MfConfig,
    mu: f32,
    syncs: usize,
) -> f64 {
    let m = cfg.workers;
    let k1 = cfg.rank + 1;
    let mut sq = 0f64;
    let chunk = train.len().div_ceil(syncs);
    for part in train.chunks(chunk.max(1)) {
        let (w0, h0) = (arrays[0].data.clone(), arrays[1].data.clone());
        let results: Vec<(Vec<f32>, Vec<f32>, f64)> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..m)
                .map(|wk| {
                    let (mut w, mut h) = (w0.clone(), h0.clone());
                    s.spawn(move || {
                        let mut sq = 0f64;
                        for &(u, i, r) in part.iter().skip(wk).step_by(m) {
                            let (wr, hr) =
                                (&mut w[u * k1..(u + 1) * k1], &mut h[i * k1..(i + 1) * k1]);
                            let e = sgd_step(wr, hr, r, mu, cfg.lr, cfg.reg);
                            sq += (e * e) as f64;
                        }
                        (w, h, sq)
                    })
                })
                .collect();
            hs.into_iter()
                .map(|h| h.join().unwrap_or_default())
                .collect()
        });
        let scale = 1.0 / m as f32;
        for (w, h, s) in results {
            for (x, (n, o)) in arrays[0].data.iter_mut().zip(w.iter().zip(&w0)) {
                *x += (n - o) * scale;
            }
            for (x, (n, o)) in arrays[1].data.iter_mut().zip(h.iter().zip(&h0)) {
                *x += (n - o) * scale;
            }
            sq += s;
        }
    }
    sq
}
