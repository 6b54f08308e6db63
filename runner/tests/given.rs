//! Real tensors in: weights and inputs read from a safetensors file are
//! what runs (the partitioned run on them equals the reference interpreter
//! fed the same values), and a file whose names, shapes or kinds do not fit
//! the graph is an error naming the tensor.

mod partition;

use partition::{lib, SEED};
use planner::graph::execute::{execute, synthesize};
use planner::graph::{Graph, Optimizer, TensorRole};
use planner::plan::{PlanOptions, SearchKind};
use planner::zoo::{self, MlpConfig};
use runner::given::Kind;
use runner::{
    from_safetensors, max_rel_error, run_programs_given, CpuBackend, GivenError, LocalCommunicator,
    RunOptions, RunReport,
};
use safetensors::tensor::TensorView;
use safetensors::Dtype;

fn mlp() -> Graph {
    zoo::Model::Mlp(MlpConfig::tiny())
        .training(lib(), &Optimizer::default())
        .unwrap()
}

/// A safetensors file of `(name, shape, values)` as F32 (or F64 with `f64`).
fn file(tensors: &[(String, Vec<usize>, Vec<f32>)], f64: bool) -> Vec<u8> {
    let bytes: Vec<Vec<u8>> = tensors
        .iter()
        .map(|(_, _, v)| {
            if f64 {
                v.iter().flat_map(|x| (*x as f64).to_le_bytes()).collect()
            } else {
                v.iter().flat_map(|x| x.to_le_bytes()).collect()
            }
        })
        .collect();
    let views: Vec<(String, TensorView<'_>)> = tensors
        .iter()
        .zip(&bytes)
        .map(|((n, s, _), b)| {
            let dt = if f64 { Dtype::F64 } else { Dtype::F32 };
            (n.clone(), TensorView::new(dt, s.clone(), b).unwrap())
        })
        .collect();
    safetensors::serialize(views, None).unwrap()
}

/// Every weight of `g` with values unlike its synthetic fill.
fn weights(g: &Graph) -> Vec<(String, Vec<usize>, Vec<f32>)> {
    g.tensor_ids()
        .map(|t| g.tensor(t))
        .filter(|t| t.role == TensorRole::Weight && t.fill.is_some())
        .map(|t| {
            let n: usize = t.shape.iter().product();
            let v = (0..n).map(|i| ((i * 7 % 11) as f32 - 5.0) / 8.0).collect();
            (t.name.clone(), t.shape.clone(), v)
        })
        .collect()
}

/// The interpreter's step (f64) on the synthetic leaves with `given` in
/// place, reported like `like`.
fn oracle(g: &Graph, given: &runner::Given, like: &RunReport) -> RunReport {
    let mut vals = synthesize(g, SEED);
    for t in g.tensor_ids() {
        if let Some(v) = vals.get(t) {
            let mut v = v.clone();
            if let Some(x) = given.get(&t) {
                v.data = x.iter().map(|&x| x as f64).collect();
            } else {
                v.data.iter_mut().for_each(|x| *x = *x as f32 as f64);
            }
            vals.set(t, v);
        }
    }
    execute(g, lib(), &mut vals, |_, _| true).unwrap();
    RunReport {
        outputs: like
            .outputs
            .iter()
            .map(|(t, _)| {
                (
                    *t,
                    vals.get(*t)
                        .unwrap()
                        .data
                        .iter()
                        .map(|&x| x as f32)
                        .collect(),
                )
            })
            .collect(),
        ..Default::default()
    }
}

#[test]
fn given_weights_are_what_runs_partitioned_or_not() {
    let g = mlp();
    let bytes = file(&weights(&g), true);
    let given = from_safetensors(&g, "w.safetensors", &bytes, Kind::Weights).unwrap();
    assert_eq!(given.len(), weights(&g).len());
    let cache = interval::cache::StrategyCache::new();
    for k in [1, 3] {
        let opts = PlanOptions::default();
        let progs = partition::compiled(&g, &cache, k, SearchKind::CriticalDp, opts);
        let ranks = LocalCommunicator::create(k)
            .into_iter()
            .map(|c| (CpuBackend::new(), c))
            .collect();
        let opts = RunOptions {
            steps: 1,
            seed: SEED,
        };
        let r = run_programs_given(&progs.programs, opts, None, ranks, &given).unwrap();
        let (e, _) = max_rel_error(&r, &oracle(&g, &given, &r));
        assert!(
            e <= 1e-4,
            "k={k}: {e:e} from the interpreter on the same weights"
        );
        // And the weights really changed the result.
        let (d, _) = max_rel_error(&r, &oracle(&g, &runner::Given::new(), &r));
        assert!(d > 1e-3, "k={k}: given weights made no difference ({d:e})");
    }
}

#[test]
fn bad_files_are_errors_naming_the_tensor() {
    let g = mlp();
    let mut w = weights(&g);
    let (name, shape, _) = w[0].clone();
    // Unknown name, with a hint.
    let bad = file(
        &[(
            format!("{name}x"),
            shape.clone(),
            vec![0.0; shape.iter().product()],
        )],
        false,
    );
    let e = from_safetensors(&g, "w.safetensors", &bad, Kind::Weights).unwrap_err();
    assert!(
        matches!(&e, GivenError::Unknown { name: n, .. } if *n == format!("{name}x")),
        "{e}"
    );
    assert!(e.to_string().contains("w.safetensors"), "{e}");
    // Wrong shape.
    w[0].1 = vec![shape.iter().product::<usize>() + 1];
    w[0].2 = vec![0.0; w[0].1[0]];
    let e = from_safetensors(&g, "w.safetensors", &file(&w, false), Kind::Weights).unwrap_err();
    assert!(
        matches!(&e, GivenError::Shape { name: n, .. } if *n == name),
        "{e}"
    );
    // An input given as a weight names the flag that takes it.
    let x = g.tensor_ids().find(|&t| g.tensor(t).name == "x").unwrap();
    let xs = g.tensor(x).shape.clone();
    let input = file(
        &[("x".into(), xs.clone(), vec![0.5; xs.iter().product()])],
        false,
    );
    let e = from_safetensors(&g, "w.safetensors", &input, Kind::Weights).unwrap_err();
    assert!(e.to_string().contains("--inputs"), "{e}");
    assert!(from_safetensors(&g, "in.safetensors", &input, Kind::Inputs).is_ok());
    // Not safetensors at all.
    let e = from_safetensors(&g, "junk.bin", b"not a safetensors file", Kind::Weights).unwrap_err();
    assert!(matches!(e, GivenError::Format { .. }), "{e}");
}
