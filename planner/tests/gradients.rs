//! End-to-end check of the training graphs: for every zoo family, on a tiny
//! configuration of the same structure, execute the whole training step with
//! the TDL interpreter (op by op, in topological order, f64) and compare every
//! weight's gradient with finite differences of the loss.
//!
//! Differences are central and fourth-order,
//! `D(h) = (8·(L(h) − L(−h)) − (L(2h) − L(−2h))) / 12h` along a direction
//! `d` (truncation O(h⁴)), so that a step small enough not to cross a ReLU or
//! max-pool kink still leaves the round-off (~1e-16·L/h) far below the
//! tolerance. Smooth models (LSTM, transformer) use h = 1e-3, models with
//! kinks h = 1e-6 (WResNet's stem crosses a kink at 1e-5). Per weight tensor `w` with gradient `g`:
//! * along the gradient, `d = g / max|g|`: `D` against `⟨g, d⟩`;
//! * along a random direction `d ∈ [−1, 1]ⁿ`: `D` against `⟨g, d⟩`, relative
//!   to at least 1e-3·Σ|gᵢdᵢ| (the scale of the terms, in case they cancel);
//! * on a few random elements `i`: `D` along `eᵢ` against `gᵢ`, relative to at
//!   least 1e-3·max|g| (elements whose true gradient is ~0).
//!
//! Every relative error `|D − ⟨g, d⟩| / max(|D|, |⟨g, d⟩|, floor)` must be ≤ 1e-5.
//! Only the forward ops downstream of `w` are re-run per evaluation. The
//! optimizer step is checked too: SGD's new weight is `w − lr·g`.

use std::collections::HashSet;

use planner::graph::execute::{execute, synthesize, Values};
use planner::graph::{Graph, OpId, OpRole, Optimizer, TensorId, TensorRole};
use planner::zoo::{CnnConfig, GptConfig, MlpConfig, Model, RnnConfig, WResNetConfig};
use tdl::Library;

const TOL: f64 = 1e-5;
const LR: f64 = 0.1;

/// Forward ops that depend on tensor `w`.
fn downstream(graph: &Graph, w: TensorId) -> HashSet<OpId> {
    let mut set = HashSet::new();
    let mut stack = vec![w];
    while let Some(t) = stack.pop() {
        for &o in graph.consumers(t) {
            if graph.op(o).role == OpRole::Forward && set.insert(o) {
                stack.extend(graph.op(o).outputs.iter().copied());
            }
        }
    }
    set
}

struct Fd<'a> {
    graph: &'a Graph,
    lib: &'a Library,
    /// Values after a full step (forward values are the unperturbed ones).
    base: &'a Values,
    h: f64,
}

impl Fd<'_> {
    fn loss_at(&self, w: TensorId, ops: &HashSet<OpId>, value: tdl::Tensor) -> f64 {
        let mut v = self.base.clone();
        v.set(w, value);
        execute(self.graph, self.lib, &mut v, |id, _| ops.contains(&id)).unwrap();
        v.get(self.graph.loss().unwrap()).unwrap().data[0]
    }

    /// Fourth-order central difference of the loss along `d` at `w0`.
    fn derivative(&self, w: TensorId, ops: &HashSet<OpId>, w0: &tdl::Tensor, d: &[f64]) -> f64 {
        let at = |s: f64| {
            self.loss_at(
                w,
                ops,
                tdl::Tensor {
                    shape: w0.shape.clone(),
                    data: w0.data.iter().zip(d).map(|(x, y)| x + s * y).collect(),
                },
            )
        };
        let h = self.h;
        (8.0 * (at(h) - at(-h)) - (at(2.0 * h) - at(-2.0 * h))) / (12.0 * h)
    }
}

/// Small deterministic generator for directions and element choices.
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn unit(&mut self) -> f64 {
        (self.next() % 2_000_001) as f64 / 1_000_000.0 - 1.0
    }
}

/// Relative error; two values both below 1e-8 (above the finite differences'
/// round-off noise, ~1e-16·L/h ≈ 1e-9 at h = 1e-6) count as equal: gradients
/// that are zero in exact arithmetic, e.g. of the attention key bias (the
/// softmax cancels it) or of a batch-norm shift that the next batch norm
/// removes.
fn rel(a: f64, b: f64, floor: f64) -> f64 {
    if a.abs() <= 1e-8 && b.abs() <= 1e-8 {
        return 0.0;
    }
    (a - b).abs() / a.abs().max(b.abs()).max(floor)
}

fn check_model(model: Model, h: f64, elements_per_weight: usize) {
    let lib = Library::shipped().expect("shipped specs load");
    let graph = model
        .training(&lib, &Optimizer::Sgd { lr: LR })
        .unwrap_or_else(|e| panic!("{e}"));
    let mut full = synthesize(&graph, 7);
    let base = full.clone();
    execute(&graph, &lib, &mut full, |_, _| true)
        .unwrap_or_else(|e| panic!("{}: {e}", model.name()));
    let loss = full.get(graph.loss().unwrap()).unwrap().data[0];
    assert!(loss.is_finite(), "loss {loss}");
    let fd = Fd {
        graph: &graph,
        lib: &lib,
        base: &full,
        h,
    };
    let mut rng = Lcg(11);
    let mut worst: (f64, String) = (0.0, String::new());
    let mut checked = 0;
    let mut report = |e: f64, what: String| {
        assert!(
            e <= TOL,
            "{}: {what}: rel error {e:e} > {TOL:e}",
            model.name()
        );
        if e >= worst.0 {
            worst = (e, what);
        }
    };
    for w in graph.tensor_ids() {
        let t = graph.tensor(w);
        if t.role != TensorRole::Weight || t.updates.is_some() {
            continue;
        }
        let g_id = t
            .grad
            .unwrap_or_else(|| panic!("weight `{}` has no gradient", t.name));
        let g = full.get(g_id).unwrap().clone();
        let w0 = base.get(w).unwrap().clone();
        assert_eq!(g.shape, w0.shape, "gradient shape of `{}`", t.name);
        // The SGD update: w_new = w - lr * g.
        let upd = graph
            .consumers(w)
            .iter()
            .map(|&o| graph.op(o))
            .find(|o| o.role == OpRole::Update)
            .expect("update op");
        let w_new = full.get(upd.outputs[0]).unwrap();
        for ((a, b), c) in w_new.data.iter().zip(&w0.data).zip(&g.data) {
            assert!(
                (a - (b - LR * c)).abs() <= 1e-12 * (1.0 + b.abs()),
                "sgd update of `{}`",
                t.name
            );
        }
        let ops = downstream(&graph, w);
        let gmax = g.data.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        // Along the gradient.
        if gmax > 1e-8 {
            let d: Vec<f64> = g.data.iter().map(|x| x / gmax).collect();
            let an: f64 = g.data.iter().zip(&d).map(|(x, y)| x * y).sum();
            let num = fd.derivative(w, &ops, &w0, &d);
            report(
                rel(num, an, 0.0),
                format!(
                    "`{}` along its gradient: finite difference {num:e}, gradient {an:e}",
                    t.name
                ),
            );
        }
        // Along a random direction.
        let d: Vec<f64> = (0..w0.len()).map(|_| rng.unit()).collect();
        let an: f64 = g.data.iter().zip(&d).map(|(x, y)| x * y).sum();
        let scale: f64 = g.data.iter().zip(&d).map(|(x, y)| (x * y).abs()).sum();
        let num = fd.derivative(w, &ops, &w0, &d);
        report(
            rel(num, an, 1e-3 * scale),
            format!(
                "`{}` along a random direction: finite difference {num:e}, gradient {an:e}",
                t.name
            ),
        );
        // Single elements.
        for _ in 0..elements_per_weight.min(w0.len()) {
            let i = (rng.next() as usize) % w0.len();
            let mut e = vec![0.0; w0.len()];
            e[i] = 1.0;
            let num = fd.derivative(w, &ops, &w0, &e);
            report(
                rel(num, g.data[i], 1e-3 * gmax),
                format!(
                    "`{}`[{i}]: finite difference {num:e}, gradient {:e}",
                    t.name, g.data[i]
                ),
            );
        }
        checked += 1;
    }
    assert!(checked > 0);
    println!(
        "{}: {checked} weights checked, loss {loss:.6}, worst rel error {:e}: {}",
        model.name(),
        worst.0,
        worst.1
    );
}

#[test]
fn mlp_gradients_match_finite_differences() {
    check_model(Model::Mlp(MlpConfig::tiny()), 1e-6, 3);
}

#[test]
fn cnn_gradients_match_finite_differences() {
    check_model(Model::Cnn(CnnConfig::tiny()), 1e-6, 2);
}

#[test]
fn wresnet_gradients_match_finite_differences() {
    check_model(Model::WResNet(WResNetConfig::tiny()), 1e-6, 1);
}

#[test]
fn rnn_gradients_match_finite_differences() {
    check_model(Model::Rnn(RnnConfig::tiny()), 1e-3, 2);
}

#[test]
fn gpt_gradients_match_finite_differences() {
    check_model(Model::Gpt(GptConfig::tiny()), 1e-3, 2);
}

/// Momentum and Adam training steps execute and move every weight.
#[test]
fn momentum_and_adam_steps_execute() {
    let lib = Library::shipped().unwrap();
    for opt in [Optimizer::default(), Optimizer::from_name("adam").unwrap()] {
        let graph = Model::Mlp(MlpConfig::tiny()).training(&lib, &opt).unwrap();
        let mut v = synthesize(&graph, 3);
        execute(&graph, &lib, &mut v, |_, _| true).unwrap();
        for op in graph.ops().iter().filter(|o| o.role == OpRole::Update) {
            assert_eq!(op.outputs.len(), 1 + opt.state_names().len(), "{}", op.name);
            let (w, w_new) = (v.get(op.inputs[0]).unwrap(), v.get(op.outputs[0]).unwrap());
            assert!(w_new.data.iter().all(|x| x.is_finite()));
            assert_ne!(w.data, w_new.data, "{:?}: `{}` did not move", opt, op.name);
        }
    }
}
