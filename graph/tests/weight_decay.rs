//! L2 weight decay (`training_graph_with`, PyTorch SGD's `weight_decay`):
//! one step of the zoo's mlp-2-8 trained with decay λ against the same step
//! without it, both run by the TDL interpreter on the same synthetic
//! values. Oracle: PyTorch's rule, g ← g + λ·w before the update, which for
//! SGD and for momentum's first step (zero velocity) makes the decayed
//! weights the plain ones minus lr·λ·w₀, element by element.

use graph::execute::{execute, synthesize};
use graph::zoo::Model;
use graph::{training_graph, training_graph_with, Graph, Optimizer, TensorId, TensorRole};

fn lib() -> &'static tdl::Library {
    static LIB: std::sync::OnceLock<tdl::Library> = std::sync::OnceLock::new();
    LIB.get_or_init(|| tdl::Library::shipped().expect("shipped specs load"))
}

/// Each trained weight with its updated value: `(w, w')`.
fn updates(g: &Graph) -> Vec<(TensorId, TensorId)> {
    g.tensor_ids()
        .filter_map(|t| {
            let w = g.tensor(t).updates?;
            (g.tensor(w).role == TensorRole::Weight).then_some((w, t))
        })
        .collect()
}

/// The values of every tensor after one step of `g` on seed 7.
fn step(g: &Graph) -> graph::execute::Values {
    let mut v = synthesize(g, 7);
    execute(g, lib(), &mut v, |_, _| true).expect("the step runs");
    v
}

#[test]
fn decay_subtracts_lr_lambda_w_from_the_first_step() {
    let fwd = Model::parse("mlp-2-8").unwrap().forward(lib()).unwrap();
    let (lr, lambda) = (0.1, 0.05);
    let sgd = Optimizer::Sgd { lr };
    let momentum = Optimizer::Momentum { lr, momentum: 0.9 };
    for opt in [sgd, momentum] {
        let plain = training_graph(&fwd, lib(), &opt).unwrap();
        let decayed = training_graph_with(&fwd, lib(), &opt, lambda).unwrap();
        let (v0, v1) = (step(&plain), step(&decayed));
        let pairs = updates(&plain);
        assert!(pairs.len() >= 4, "{pairs:?}");
        for (w, new) in pairs {
            let name = &plain.tensor(w).name;
            let new_decayed = updates(&decayed)
                .into_iter()
                .find(|(d, _)| decayed.tensor(*d).name == *name)
                .expect("the same weight is trained")
                .1;
            let w0 = &v0.get(w).unwrap().data;
            let (a, b) = (
                &v0.get(new).unwrap().data,
                &v1.get(new_decayed).unwrap().data,
            );
            for i in 0..w0.len() {
                let want = a[i] - lr * lambda * w0[i];
                assert!(
                    (b[i] - want).abs() <= 1e-12 * (1.0 + want.abs()),
                    "{opt:?} {name}[{i}]: {} vs {want}",
                    b[i]
                );
            }
        }
    }
}

#[test]
fn a_plans_weight_decay_can_be_reset_and_a_plain_graph_has_none() {
    let fwd = Model::parse("mlp-2-8").unwrap().forward(lib()).unwrap();
    let opt = Optimizer::Sgd { lr: 0.1 };
    let mut plain = training_graph(&fwd, lib(), &opt).unwrap();
    assert_eq!(plain.set_weight_decay(0.1), 0);
    let mut decayed = training_graph_with(&fwd, lib(), &opt, 0.05).unwrap();
    let trained = updates(&decayed).len();
    assert_eq!(decayed.set_weight_decay(0.1), trained);
    // Resetting λ to 0.05 gives back the graph built with 0.05.
    decayed.set_weight_decay(0.05);
    assert_eq!(
        decayed,
        training_graph_with(&fwd, lib(), &opt, 0.05).unwrap()
    );
}
