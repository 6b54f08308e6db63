//! Data-parallel training of tofu's MLP training graph through the SSP
//! parameter server (`tofu ssp mlp`; issue 12, thesis ch. 3, seed 004).
//!
//! Takes a [`DataSet`] (features in [0, 1], a class per sample), the zoo's
//! MLP sized to it ([`MlpConfig`]) and the parameter server's settings
//! ([`SspMlpOptions`]); gives the loss and test accuracy per epoch
//! ([`SspMlpRun`]). A fifth of the samples, chosen by the seed, is held out.
//!
//! Each worker thread computes gradients with the runner (the CPU backend,
//! or another through `runner::choose`, [`SspMlp::with_backend`]): the
//! training graph, unpartitioned (k = 1), its programs patched to keep the
//! weights' gradient tiles, run one step per batch with the weights and
//! the batch given (`runner::choose::ExecChoice::execute`). A weight tensor of
//! shape `[.., out]` is an SSP table of rows of `out` columns; a
//! parameter is its fixed initial value (He-normal, the same in every
//! worker) plus the server row. Workers push `−lr · gradient` per layer,
//! last layer first, the order backprop yields them (wait-free backprop
//! only in order, not in time: the runner returns every gradient at the
//! end of the step, so pushes do not overlap the backward pass). With
//! [`SspMlpOptions::top_k`] = F each tensor sends only its `ceil(F · size)`
//! largest accumulated entries and keeps the rest as a residual
//! (`ssp::topk`), into tables of sparse rows so only the entries sent
//! travel. Test accuracy is worker 0's view after each epoch.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use codegen::Programs;
use interval::cache::StrategyCache;
use planner::graph::{training_graph, Optimizer, TensorId};
use planner::plan::BoundPlan;
use planner::zoo::MlpConfig;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use runner::choose::{ChooseError, ExecChoice};
use runner::{Given, RunOptions};
use ssp::topk::TopK;
use ssp::{ClusterConfig, CommConfig, LocalCluster, RowKey, RowValues, TableConfig, Worker};
use tdl::Library;

use crate::DataSet;

/// Why an SSP MLP run failed.
#[derive(Debug, thiserror::Error)]
pub enum SspMlpError {
    /// A count is zero or the top-k fraction is outside (0, 1].
    #[error("{0}")]
    Options(String),
    /// The MLP could not be built or the runner did not give its results.
    #[error("{0}")]
    Model(String),
    /// A gradient step failed in the runner.
    #[error("runner: {0}")]
    Runner(runner::ExecError),
    /// The chosen backend cannot run (no CUDA in this build, no device).
    #[error("{0}")]
    Backend(runner::choose::ChooseError),
    /// A worker's parameter-server call failed.
    #[error("worker {worker}: {source}")]
    Worker {
        /// The worker thread.
        worker: usize,
        /// What the parameter server said.
        #[source]
        source: ssp::SspError,
    },
    /// A worker thread panicked.
    #[error("an MLP worker panicked")]
    Panicked,
    /// The parameter server could not start or stop.
    #[error(transparent)]
    Cluster(ssp::SspError),
}

/// How to train (the flags of `tofu ssp mlp`).
#[derive(Clone, Debug)]
pub struct SspMlpOptions {
    /// Worker threads.
    pub workers: usize,
    /// Staleness s in clocks (0 = BSP).
    pub staleness: u32,
    /// Epochs (passes over the training split).
    pub epochs: u32,
    /// Seed of the split, the initial weights and the sample order.
    pub seed: u64,
    /// Dense layers.
    pub layers: usize,
    /// Hidden width.
    pub hidden: usize,
    /// Samples per step (one clock per batch).
    pub batch: usize,
    /// SGD learning rate.
    pub lr: f32,
    /// Send only this fraction of each tensor's entries per step (largest
    /// first), keeping the rest as a residual.
    pub top_k: Option<f32>,
    /// The clients' communication settings.
    pub comm: CommConfig,
}

impl SspMlpOptions {
    /// Checks the counts and the top-k fraction.
    ///
    /// Errors: [`SspMlpError::Options`] for a zero count or a top-k
    /// fraction outside (0, 1] (naming the flags of `tofu ssp mlp`).
    pub fn check(&self) -> Result<(), SspMlpError> {
        if self.workers == 0
            || self.epochs == 0
            || self.batch == 0
            || self.layers == 0
            || self.hidden == 0
        {
            return Err(SspMlpError::Options(
                "--workers, --epochs, --batch, --layers and --hidden must be at least 1".into(),
            ));
        }
        if let Some(f) = self.top_k {
            if !(f > 0.0 && f <= 1.0) {
                return Err(SspMlpError::Options(format!(
                    "--top-k {f}: give a fraction in (0, 1]"
                )));
            }
        }
        Ok(())
    }
}

/// What a run measured.
#[derive(Clone, Debug)]
pub struct SspMlpRun {
    /// Mean training loss per epoch over every worker's steps.
    pub loss_per_epoch: Vec<f64>,
    /// Worker 0's test accuracy after each epoch (fraction).
    pub accuracy_per_epoch: Vec<f64>,
    /// Seconds from the workers' start to the end.
    pub seconds: f64,
    /// Bytes of updates the clients sent.
    pub bytes_sent: u64,
}

/// Worker 0's view after an epoch (for progress lines).
#[derive(Clone, Copy, Debug)]
pub struct EpochEnd {
    /// The epoch, from 1.
    pub epoch: usize,
    /// Worker 0's mean loss over the epoch.
    pub loss: f64,
    /// Test accuracy (fraction).
    pub accuracy: f64,
    /// Seconds since the workers started.
    pub seconds: f64,
}

/// A run ready to start: the data split and the MLP built.
pub struct SspMlp<'a> {
    data: &'a DataSet,
    opts: SspMlpOptions,
    train: Vec<usize>,
    test: Vec<usize>,
    net: Net,
    exec: ExecChoice,
}

impl<'a> SspMlp<'a> {
    /// Splits `data` (a fifth held out, by `opts.seed`) and builds the MLP.
    ///
    /// Errors: [`SspMlpError::Options`] for a zero count or a top-k
    /// fraction outside (0, 1]; [`SspMlpError::Model`] when the graph
    /// cannot be built.
    pub fn new(data: &'a DataSet, opts: SspMlpOptions) -> Result<SspMlp<'a>, SspMlpError> {
        opts.check()?;
        let o = &opts;
        let mut order: Vec<usize> = (0..data.len()).collect();
        order.shuffle(&mut StdRng::seed_from_u64(o.seed));
        let n_test = data.len() / 5;
        let test = order[..n_test].to_vec();
        let train = order[n_test..].to_vec();
        let cfg = MlpConfig {
            layers: o.layers,
            hidden: o.hidden,
            input: data.features,
            classes: data.classes,
            batch: o.batch,
        };
        let net = build_net(cfg, o.staleness, o.seed, o.top_k.is_some())?;
        Ok(SspMlp {
            data,
            opts,
            train,
            test,
            net,
            exec: ExecChoice::cpu(),
        })
    }

    /// The same run with its gradient steps on the backend of `exec` (the
    /// seam `tofu train --backend` uses; default: the CPU).
    pub fn with_backend(mut self, exec: ExecChoice) -> SspMlp<'a> {
        self.exec = exec;
        self
    }

    /// Samples in the training split.
    pub fn train_len(&self) -> usize {
        self.train.len()
    }

    /// Samples held out.
    pub fn test_len(&self) -> usize {
        self.test.len()
    }

    /// Clocks (steps of one batch) per epoch on each worker.
    pub fn clocks_per_epoch(&self) -> usize {
        (self.train.len() / (self.opts.workers * self.opts.batch)).max(1)
    }

    /// Trains: one client of `workers` threads over two shards, calling
    /// `on_epoch` from worker 0 after each epoch.
    ///
    /// Errors: the first worker's failure ([`SspMlpError::Worker`],
    /// [`SspMlpError::Runner`], [`SspMlpError::Panicked`]), or
    /// [`SspMlpError::Cluster`] when the server cannot start or stop.
    pub fn run(&self, on_epoch: &(dyn Fn(EpochEnd) + Sync)) -> Result<SspMlpRun, SspMlpError> {
        let (o, net) = (&self.opts, &self.net);
        let (cluster, mut workers) = LocalCluster::start(&ClusterConfig {
            tables: net.params.iter().map(|p| p.table).collect(),
            shards: 2,
            clients: 1,
            workers_per_client: o.workers,
            comm: o.comm.clone(),
            checkpoint_every: 0,
        })
        .map_err(SspMlpError::Cluster)?;
        // Per epoch: (loss sum, steps, accuracy of worker 0's view).
        let sums = Mutex::new(vec![(0.0f64, 0usize, 0.0f64); o.epochs as usize]);
        let start = Instant::now();
        let results: Vec<std::thread::Result<Result<(), SspMlpError>>> = std::thread::scope(|s| {
            let threads: Vec<_> = workers
                .remove(0)
                .into_iter()
                .enumerate()
                .map(|(wi, worker)| {
                    let (sums, start) = (&sums, start);
                    s.spawn(move || self.work(wi, worker, sums, start, on_epoch))
                })
                .collect();
            threads.into_iter().map(|t| t.join()).collect()
        });
        let mut first_err = None;
        for r in results {
            match r {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    first_err.get_or_insert(e);
                }
                Err(_) => {
                    first_err.get_or_insert(SspMlpError::Panicked);
                }
            }
        }
        let bytes_sent = cluster.bytes_sent();
        cluster.finish().map_err(SspMlpError::Cluster)?;
        if let Some(e) = first_err {
            return Err(e);
        }
        let sums = sums.into_inner().unwrap_or_else(|e| e.into_inner());
        Ok(SspMlpRun {
            loss_per_epoch: sums.iter().map(|s| s.0 / s.1.max(1) as f64).collect(),
            accuracy_per_epoch: sums.iter().map(|s| s.2).collect(),
            seconds: start.elapsed().as_secs_f64(),
            bytes_sent,
        })
    }

    /// Worker `wi`'s epochs on its share of the training split.
    fn work(
        &self,
        wi: usize,
        mut worker: Worker,
        sums: &Mutex<Vec<(f64, usize, f64)>>,
        start: Instant,
        on_epoch: &(dyn Fn(EpochEnd) + Sync),
    ) -> Result<(), SspMlpError> {
        let (o, net, data) = (&self.opts, &self.net, self.data);
        let (workers, batch) = (o.workers, o.batch);
        let mut mine: Vec<usize> = self
            .train
            .iter()
            .skip(wi)
            .step_by(workers)
            .copied()
            .collect();
        let mut rng = StdRng::seed_from_u64(o.seed ^ (wi as u64 + 1));
        let mut topk = o.top_k.map(|f| {
            net.params
                .iter()
                .map(|p| TopK::new(p.init.len(), f))
                .collect::<Vec<_>>()
        });
        let ssp_err = |source: ssp::SspError| SspMlpError::Worker { worker: wi, source };
        for epoch in 0..o.epochs as usize {
            mine.shuffle(&mut rng);
            let (mut loss_sum, mut steps) = (0.0f64, 0usize);
            for k in 0..self.clocks_per_epoch() {
                let b: Vec<usize> = (0..batch)
                    .map(|j| mine[(k * batch + j) % mine.len()])
                    .collect();
                let weights = net.read(&worker).map_err(ssp_err)?;
                let (loss, grads) = net.gradients(&self.exec, &weights, data, &b)?;
                loss_sum += f64::from(loss);
                steps += 1;
                push(net, &worker, &grads, o.lr, &mut topk).map_err(ssp_err)?;
                worker.clock().map_err(ssp_err)?;
            }
            let acc = if wi == 0 {
                let weights = net.read(&worker).map_err(ssp_err)?;
                accuracy(net, &weights, data, &self.test)
            } else {
                0.0
            };
            let mut s = sums.lock().unwrap_or_else(|e| e.into_inner());
            s[epoch].0 += loss_sum;
            s[epoch].1 += steps;
            if wi == 0 {
                s[epoch].2 = acc;
                on_epoch(EpochEnd {
                    epoch: epoch + 1,
                    loss: loss_sum / steps.max(1) as f64,
                    accuracy: acc,
                    seconds: start.elapsed().as_secs_f64(),
                });
            }
        }
        Ok(())
    }
}

/// One weight tensor as an SSP table.
#[derive(Clone)]
struct Param {
    tensor: TensorId,
    grad: TensorId,
    table: TableConfig,
    rows: u64,
    cols: usize,
    init: Vec<f32>,
}

/// Everything a worker needs to compute a gradient with the runner.
struct Net {
    progs: Programs,
    params: Vec<Param>,
    x: TensorId,
    labels: TensorId,
    loss: TensorId,
    cfg: MlpConfig,
}

/// The MLP `cfg`'s training graph, its unpartitioned programs keeping
/// the gradients, and its weights as tables of staleness `staleness`
/// (He-normal initial values from `seed`); `sparse`: tables of sparse rows
/// (top-k pushes a few entries per row).
fn build_net(cfg: MlpConfig, staleness: u32, seed: u64, sparse: bool) -> Result<Net, SspMlpError> {
    let err = |e: &dyn std::fmt::Display| SspMlpError::Model(e.to_string());
    let lib = Library::shipped().map_err(|e| err(&e))?;
    let fwd = cfg.forward(&lib).map_err(|e| err(&e))?;
    // The update op is not run for its result: workers push gradients.
    let graph = training_graph(&fwd, &lib, &Optimizer::Sgd { lr: 1.0 }).map_err(|e| err(&e))?;
    let plan = BoundPlan::unpartitioned(graph, &lib, &StrategyCache::new()).map_err(|e| err(&e))?;
    let mut progs = codegen::compile_unpartitioned(&plan, &lib).map_err(|e| err(&e))?;
    let graph = plan.graph;
    let find = |name: &str| {
        graph
            .tensor_ids()
            .find(|&t| graph.tensor(t).name == name)
            .ok_or_else(|| SspMlpError::Model(format!("the MLP graph has no tensor `{name}`")))
    };
    let mut rng = StdRng::seed_from_u64(seed);
    let mut params = Vec::new();
    for i in 0..cfg.layers {
        for (suffix, he) in [("w", true), ("b", false)] {
            let tensor = find(&format!("fc{i}.{suffix}"))?;
            let t = graph.tensor(tensor);
            let grad = t
                .grad
                .ok_or_else(|| SspMlpError::Model(format!("`{}` has no gradient", t.name)))?;
            let cols = *t.shape.last().unwrap_or(&1);
            let numel: usize = t.shape.iter().product();
            let std = (2.0 / t.shape[0] as f64).sqrt();
            let init = (0..numel)
                .map(|_| {
                    if he {
                        // Box–Muller normal, std sqrt(2 / fan_in).
                        let (u1, u2): (f64, f64) = (rng.gen::<f64>().max(1e-12), rng.gen());
                        ((-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos() * std) as f32
                    } else {
                        0.0
                    }
                })
                .collect();
            params.push(Param {
                tensor,
                grad,
                table: if sparse {
                    TableConfig::sparse(params.len() as u32, cols as u32, staleness)
                } else {
                    TableConfig::dense(params.len() as u32, cols as u32, staleness)
                },
                rows: (numel / cols) as u64,
                cols,
                init,
            });
        }
    }
    let grads: Vec<TensorId> = params.iter().map(|p| p.grad).collect();
    progs.programs.iter_mut().for_each(|p| p.keep_tiles(&grads));
    let (x, labels) = (find("x")?, find("labels")?);
    let loss = graph
        .loss()
        .ok_or_else(|| SspMlpError::Model("the MLP graph has no loss".into()))?;
    Ok(Net {
        progs,
        params,
        x,
        labels,
        loss,
        cfg,
    })
}

impl Net {
    /// Current parameters as this worker may read them (init + server).
    fn read(&self, w: &Worker) -> Result<Vec<Vec<f32>>, ssp::SspError> {
        self.params
            .iter()
            .map(|p| {
                let mut v = p.init.clone();
                for r in 0..p.rows {
                    let row = w.get_row(RowKey::new(p.table.id.0, r))?.to_dense(p.cols);
                    let dst = &mut v[r as usize * p.cols..(r as usize + 1) * p.cols];
                    dst.iter_mut().zip(&row).for_each(|(a, b)| *a += b);
                }
                Ok(v)
            })
            .collect()
    }

    /// One forward + backward pass on `exec`'s backend: the loss
    /// and every parameter's gradient.
    fn gradients(
        &self,
        exec: &ExecChoice,
        weights: &[Vec<f32>],
        data: &DataSet,
        batch: &[usize],
    ) -> Result<(f32, Vec<Vec<f32>>), SspMlpError> {
        let mut given = Given::new();
        for (p, w) in self.params.iter().zip(weights) {
            given.insert(p.tensor, w.clone());
        }
        let f = data.features;
        let x: Vec<f32> = batch
            .iter()
            .flat_map(|&i| data.x[i * f..(i + 1) * f].iter().copied())
            .collect();
        // The zoo MLP's labels are class ids `[batch]`.
        let labels: Vec<f32> = batch.iter().map(|&i| data.y[i] as f32).collect();
        given.insert(self.x, x);
        given.insert(self.labels, labels);
        let opts = RunOptions { steps: 1, seed: 0 };
        let report = exec
            .execute(&self.progs.programs, opts, None, &given)
            .map_err(|e| match e {
                ChooseError::Exec(e) => SspMlpError::Runner(e),
                e => SspMlpError::Backend(e),
            })?;
        let out: HashMap<TensorId, Vec<f32>> = report.outputs.into_iter().collect();
        let loss = out.get(&self.loss).and_then(|v| v.first().copied());
        let grads = self
            .params
            .iter()
            .map(|p| out.get(&p.grad).cloned())
            .collect::<Option<Vec<_>>>();
        match (loss, grads) {
            (Some(l), Some(g)) => Ok((l, g)),
            _ => Err(SspMlpError::Model(
                "the runner did not return the loss and every gradient".into(),
            )),
        }
    }
}

/// Test accuracy of `weights` (a host forward pass: matmul, bias, ReLU).
fn accuracy(net: &Net, weights: &[Vec<f32>], data: &DataSet, idx: &[usize]) -> f64 {
    let mut right = 0;
    for &i in idx {
        let mut h: Vec<f32> = data.x[i * data.features..(i + 1) * data.features].to_vec();
        for l in 0..net.cfg.layers {
            let (w, b) = (&weights[2 * l], &weights[2 * l + 1]);
            let out = b.len();
            let mut next = b.clone();
            for (k, &hk) in h.iter().enumerate() {
                for j in 0..out {
                    next[j] += hk * w[k * out + j];
                }
            }
            if l + 1 < net.cfg.layers {
                next.iter_mut().for_each(|v| *v = v.max(0.0));
            }
            h = next;
        }
        let best = (0..h.len())
            .max_by(|&a, &b| h[a].total_cmp(&h[b]))
            .unwrap_or(0);
        right += usize::from(best == data.y[i]);
    }
    right as f64 / idx.len().max(1) as f64
}

/// Pushes one step's increments, last layer first (the order backprop
/// yields them), through top-k residuals when configured.
fn push(
    net: &Net,
    worker: &Worker,
    grads: &[Vec<f32>],
    lr: f32,
    topk: &mut Option<Vec<TopK>>,
) -> Result<(), ssp::SspError> {
    for (pi, p) in net.params.iter().enumerate().rev() {
        let delta: Vec<f32> = grads[pi].iter().map(|g| -lr * g).collect();
        match topk {
            Some(t) => {
                let incs: Vec<(RowKey, u32, f32)> = t[pi]
                    .step(&delta)
                    .into_iter()
                    .map(|(i, v)| {
                        let key = RowKey::new(p.table.id.0, (i / p.cols) as u64);
                        (key, (i % p.cols) as u32, v)
                    })
                    .collect();
                worker.batch_inc(&incs)?;
            }
            None => {
                for r in 0..p.rows as usize {
                    let row = delta[r * p.cols..(r + 1) * p.cols].to_vec();
                    worker.inc_row(RowKey::new(p.table.id.0, r as u64), &RowValues::Dense(row))?;
                }
            }
        }
    }
    Ok(())
}
