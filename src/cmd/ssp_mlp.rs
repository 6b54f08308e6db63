//! `tofu ssp mlp`: data-parallel training of tofu's own MLP training graph
//! through the SSP parameter server (issue 12; thesis ch. 3, seed 004).
//!
//! Takes a data set (`digits`: scikit-learn's 8×8 digits, cached by
//! `scripts/fetch-digits.sh`), the zoo's MLP (`planner::zoo::MlpConfig`,
//! input 64, 10 classes) and the communication flags; gives loss and test
//! accuracy per epoch on stderr and a `--json` summary (`loss_per_epoch`,
//! `accuracy_per_epoch`, `test_accuracy`, `epochs_to_target`, …).
//!
//! Each worker thread computes gradients with the runner's CPU backend:
//! the training graph, unpartitioned (k = 1), its programs patched to keep
//! the weights' gradient tiles, run one step per batch with the weights
//! and the batch given (`runner::run_programs_given`). A weight tensor of
//! shape `[.., out]` is an SSP table of rows of `out` columns; a
//! parameter is its fixed initial value (He-normal, the same in every
//! worker) plus the server row. Workers push `−lr · gradient` per layer,
//! last layer first, the order backprop yields them (wait-free backprop
//! only in order, not in time: the runner returns every gradient at the
//! end of the step, so pushes do not overlap the backward pass). With
//! `--top-k F` each tensor
//! sends only its `ceil(F · size)` largest accumulated entries and keeps
//! the rest as a residual (`ssp::topk`), into tables of sparse rows so
//! only the entries sent travel.

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use codegen::Programs;
use interval::cache::StrategyCache;
use planner::graph::{training_graph, Optimizer, TensorId};
use planner::plan::model::Model;
use planner::zoo::MlpConfig;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use runner::{run_programs_given, CpuBackend, Given, LocalCommunicator, RunOptions};
use ssp::topk::TopK;
use ssp::{ClusterConfig, LocalCluster, RowKey, RowValues, TableConfig, Worker};
use tdl::Library;
use train::DataSet;

use super::ssp::{comm_config, CommArgs};

/// Arguments of `tofu ssp mlp`.
#[derive(clap::Args, Debug)]
pub struct MlpArgs {
    #[command(flatten)]
    pub comm: CommArgs,
    /// Data set: `digits` (scikit-learn's 8×8 digits) or `fashion-mnist`.
    #[arg(long, default_value = "digits")]
    pub data: String,
    /// Hidden width.
    #[arg(long, default_value_t = 64)]
    pub hidden: usize,
    /// Dense layers.
    #[arg(long, default_value_t = 2)]
    pub layers: usize,
    /// Batch per step (one clock per batch).
    #[arg(long, default_value_t = 32)]
    pub batch: usize,
    /// SGD learning rate.
    #[arg(long, default_value_t = 0.1)]
    pub lr: f32,
    /// Send only this fraction of each tensor's entries per step (largest
    /// first), keeping the rest as a residual.
    #[arg(long)]
    pub top_k: Option<f32>,
    /// Test accuracy whose first reach is reported (`epochs_to_target`).
    #[arg(long, default_value_t = 0.95)]
    pub target_accuracy: f64,
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

/// `sparse`: tables of sparse rows (top-k pushes a few entries per row).
fn build_net(cfg: MlpConfig, staleness: u32, seed: u64, sparse: bool) -> miette::Result<Net> {
    let err = |e: &dyn std::fmt::Display| miette::miette!("{e}");
    let lib = Library::shipped().map_err(|e| err(&e))?;
    let fwd = cfg.forward(&lib).map_err(|e| err(&e))?;
    // The update op is not run for its result: workers push gradients.
    let graph = training_graph(&fwd, &lib, &Optimizer::Sgd { lr: 1.0 }).map_err(|e| err(&e))?;
    let model = Model::new(&graph, &lib, &StrategyCache::new()).map_err(|e| err(&e))?;
    let mut progs = codegen::generate_unpartitioned(&graph, &lib, &model).map_err(|e| err(&e))?;
    let find = |name: &str| {
        graph
            .tensor_ids()
            .find(|&t| graph.tensor(t).name == name)
            .ok_or_else(|| miette::miette!("the MLP graph has no tensor `{name}`"))
    };
    let mut rng = StdRng::seed_from_u64(seed);
    let mut params = Vec::new();
    for i in 0..cfg.layers {
        for (suffix, he) in [("w", true), ("b", false)] {
            let tensor = find(&format!("fc{i}.{suffix}"))?;
            let t = graph.tensor(tensor);
            let grad = t
                .grad
                .ok_or_else(|| miette::miette!("`{}` has no gradient", t.name))?;
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
        .ok_or_else(|| miette::miette!("the MLP graph has no loss"))?;
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

    /// One forward + backward pass on the runner's CPU backend: the loss
    /// and every parameter's gradient.
    fn gradients(
        &self,
        weights: &[Vec<f32>],
        data: &DataSet,
        batch: &[usize],
    ) -> miette::Result<(f32, Vec<Vec<f32>>)> {
        let mut given = Given::new();
        for (p, w) in self.params.iter().zip(weights) {
            given.insert(p.tensor, w.clone());
        }
        let f = data.features;
        let x: Vec<f32> = batch
            .iter()
            .flat_map(|&i| data.x[i * f..(i + 1) * f].iter().copied())
            .collect();
        let mut labels = vec![0.0f32; batch.len() * data.classes];
        for (n, &i) in batch.iter().enumerate() {
            labels[n * data.classes + data.y[i]] = 1.0;
        }
        given.insert(self.x, x);
        given.insert(self.labels, labels);
        let ranks = LocalCommunicator::create(1)
            .into_iter()
            .map(|c| (CpuBackend::new(), c))
            .collect();
        let report = run_programs_given(
            &self.progs.programs,
            RunOptions { steps: 1, seed: 0 },
            None,
            ranks,
            &given,
        )
        .map_err(|e| miette::miette!("runner: {e}"))?;
        let out: HashMap<TensorId, Vec<f32>> = report.outputs.into_iter().collect();
        let loss = out.get(&self.loss).and_then(|v| v.first().copied());
        let grads = self
            .params
            .iter()
            .map(|p| out.get(&p.grad).cloned())
            .collect::<Option<Vec<_>>>();
        match (loss, grads) {
            (Some(l), Some(g)) => Ok((l, g)),
            _ => Err(miette::miette!(
                "the runner did not return the loss and every gradient"
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

/// What an MLP run measured.
#[derive(serde::Serialize)]
struct Report {
    loss_per_epoch: Vec<f64>,
    accuracy_per_epoch: Vec<f64>,
    test_accuracy: f64,
    epochs: u32,
    target_accuracy: f64,
    epochs_to_target: Option<u32>,
    seconds: f64,
    bytes_sent: u64,
    workers: usize,
    staleness: u32,
    top_k: Option<f32>,
}

/// Run `tofu ssp mlp`.
pub fn mlp(a: MlpArgs) -> miette::Result<ExitCode> {
    let c = &a.comm;
    if c.workers == 0 || c.epochs == 0 || a.batch == 0 || a.layers == 0 || a.hidden == 0 {
        return Err(miette::miette!(
            "--workers, --epochs, --batch, --layers and --hidden must be at least 1"
        ));
    }
    if let Some(f) = a.top_k {
        if !(f > 0.0 && f <= 1.0) {
            return Err(miette::miette!("--top-k {f}: give a fraction in (0, 1]"));
        }
    }
    let data = train::data::load(&a.data).map_err(|e| miette::miette!("{e}"))?;
    let mut order: Vec<usize> = (0..data.len()).collect();
    order.shuffle(&mut StdRng::seed_from_u64(c.seed));
    let n_test = data.len() / 5;
    let test: Vec<usize> = order[..n_test].to_vec();
    let train: Vec<usize> = order[n_test..].to_vec();
    let cfg = MlpConfig {
        layers: a.layers,
        hidden: a.hidden,
        input: data.features,
        classes: data.classes,
        batch: a.batch,
    };
    let net = Arc::new(build_net(cfg, c.staleness, c.seed, a.top_k.is_some())?);
    let clocks_per_epoch = (train.len() / (c.workers * a.batch)).max(1);
    if !c.json {
        eprintln!(
            "ssp mlp: {} train / {} test images, {} workers × {clocks_per_epoch} clocks of batch {} per epoch, s = {}{}",
            train.len(),
            test.len(),
            c.workers,
            a.batch,
            c.staleness,
            a.top_k.map(|f| format!(", top-k {f}")).unwrap_or_default()
        );
    }
    let (cluster, mut workers) = LocalCluster::start(&ClusterConfig {
        tables: net.params.iter().map(|p| p.table).collect(),
        shards: 2,
        clients: 1,
        workers_per_client: c.workers,
        comm: comm_config(c),
        checkpoint_every: 0,
    })
    .map_err(|e| miette::miette!("{e}"))?;
    let data = Arc::new(data);
    // Per epoch: (loss sum, steps, accuracy of worker 0's view).
    let sums = Arc::new(Mutex::new(vec![
        (0.0f64, 0usize, 0.0f64);
        c.epochs as usize
    ]));
    let start = Instant::now();
    let threads: Vec<_> = workers
        .remove(0)
        .into_iter()
        .enumerate()
        .map(|(wi, mut worker)| {
            let mine: Vec<usize> = train.iter().skip(wi).step_by(c.workers).copied().collect();
            let (net, data, sums, test) = (
                Arc::clone(&net),
                Arc::clone(&data),
                Arc::clone(&sums),
                test.clone(),
            );
            let (epochs, batch, lr, top_k, seed, quiet) =
                (c.epochs, a.batch, a.lr, a.top_k, c.seed, c.json);
            std::thread::spawn(move || -> miette::Result<()> {
                let mut rng = StdRng::seed_from_u64(seed ^ (wi as u64 + 1));
                let mut topk = top_k.map(|f| {
                    net.params
                        .iter()
                        .map(|p| TopK::new(p.init.len(), f))
                        .collect::<Vec<_>>()
                });
                let ssp_err = |e: ssp::SspError| miette::miette!("worker {wi}: {e}");
                let mut mine = mine;
                for epoch in 0..epochs as usize {
                    mine.shuffle(&mut rng);
                    let (mut loss_sum, mut steps) = (0.0f64, 0usize);
                    for k in 0..clocks_per_epoch {
                        let b: Vec<usize> = (0..batch)
                            .map(|j| mine[(k * batch + j) % mine.len()])
                            .collect();
                        let weights = net.read(&worker).map_err(ssp_err)?;
                        let (loss, grads) = net.gradients(&weights, &data, &b)?;
                        loss_sum += f64::from(loss);
                        steps += 1;
                        push(&net, &worker, &grads, lr, &mut topk).map_err(ssp_err)?;
                        worker.clock().map_err(ssp_err)?;
                    }
                    let acc = if wi == 0 {
                        let weights = net.read(&worker).map_err(ssp_err)?;
                        accuracy(&net, &weights, &data, &test)
                    } else {
                        0.0
                    };
                    let mut s = sums.lock().unwrap_or_else(|e| e.into_inner());
                    s[epoch].0 += loss_sum;
                    s[epoch].1 += steps;
                    if wi == 0 {
                        s[epoch].2 = acc;
                        if !quiet {
                            eprintln!(
                                "epoch {}: worker 0 loss {:.4}, test accuracy {:.4} ({:.1} s)",
                                epoch + 1,
                                loss_sum / steps.max(1) as f64,
                                acc,
                                start.elapsed().as_secs_f64()
                            );
                        }
                    }
                }
                Ok(())
            })
        })
        .collect();
    let mut first_err = None;
    for t in threads {
        match t.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                first_err.get_or_insert(e);
            }
            Err(_) => {
                first_err.get_or_insert(miette::miette!("an MLP worker panicked"));
            }
        }
    }
    let bytes_sent = cluster.bytes_sent();
    cluster.finish().map_err(|e| miette::miette!("{e}"))?;
    if let Some(e) = first_err {
        return Err(e);
    }
    let sums = sums.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let accuracy_per_epoch: Vec<f64> = sums.iter().map(|s| s.2).collect();
    let report = Report {
        loss_per_epoch: sums.iter().map(|s| s.0 / s.1.max(1) as f64).collect(),
        test_accuracy: accuracy_per_epoch.last().copied().unwrap_or(0.0),
        epochs_to_target: accuracy_per_epoch
            .iter()
            .position(|&x| x >= a.target_accuracy)
            .map(|e| e as u32 + 1),
        accuracy_per_epoch,
        epochs: c.epochs,
        target_accuracy: a.target_accuracy,
        seconds: start.elapsed().as_secs_f64(),
        bytes_sent,
        workers: c.workers,
        staleness: c.staleness,
        top_k: a.top_k,
    };
    if c.json {
        println!(
            "{}",
            serde_json::to_string(&report).map_err(|e| miette::miette!("{e}"))?
        );
    } else {
        println!(
            "test accuracy {:.4} after {} epochs, {:.2} s, {} bytes of updates sent",
            report.test_accuracy, report.epochs, report.seconds, report.bytes_sent
        );
    }
    Ok(ExitCode::SUCCESS)
}
