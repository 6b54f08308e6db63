//! The graph IR and the training pass: shape errors, groups (Tofu §4.2.1),
//! gradient sums, zero gradients, optimizer state, memory accounting, zoo names.

use planner::graph::memory::{classify, weight_state_bytes};
use planner::graph::{
    training_graph, DType, Fill, GraphBuilder, GraphError, Group, MemoryClass, MemoryReport,
    OpRole, Optimizer, TensorRole,
};
use planner::zoo::{GptConfig, MlpConfig, Model, RnnConfig, WResNetConfig, ZooError};
use tdl::{Library, ShapeError};

fn lib() -> Library {
    Library::shipped().expect("shipped specs load")
}

#[test]
fn shape_error_names_operator_and_dims() {
    let lib = lib();
    let mut b = GraphBuilder::new(&lib, "bad");
    let x = b
        .input("x", &[2, 3], DType::F32, Fill::Normal { std: 1.0 })
        .unwrap();
    let w = b.weight("fc.w", &[4, 5], 1.0).unwrap();
    let err = b.op1("matmul", "fc", &[x, w], &[]).unwrap_err();
    let GraphError::Shape { op, source } = &err else {
        panic!("unexpected {err:?}")
    };
    assert_eq!(op, "fc");
    match source.as_ref() {
        ShapeError::DimMismatch { dim, a, b, .. } => {
            assert_eq!(dim, "K");
            assert_eq!((*a, *b), (3, 4));
        }
        other => panic!("unexpected {other:?}"),
    }
    let msg = err.to_string();
    assert!(msg.starts_with("operator `fc`: "), "{msg}");
    assert!(msg.contains('3') && msg.contains('4'), "{msg}");
}

#[test]
fn unknown_spec_and_duplicate_names_are_errors() {
    let lib = lib();
    let mut b = GraphBuilder::new(&lib, "bad");
    let x = b
        .input("x", &[2], DType::F32, Fill::Normal { std: 1.0 })
        .unwrap();
    assert!(matches!(
        b.op1("no_such_op", "n", &[x], &[]),
        Err(GraphError::UnknownSpec { .. })
    ));
    assert!(matches!(
        b.input("x", &[2], DType::F32, Fill::Normal { std: 1.0 }),
        Err(GraphError::DuplicateName { .. })
    ));
    let y = b.op1("relu", "r", &[x], &[]).unwrap();
    assert!(matches!(b.finish(y), Err(GraphError::LossNotScalar { .. })));
}

#[test]
fn backward_ops_join_their_forward_groups() {
    let lib = lib();
    let g = Model::Mlp(MlpConfig::tiny())
        .training(&lib, &Optimizer::default())
        .unwrap();
    for op in g.ops() {
        match op.role {
            OpRole::Forward => assert_eq!(
                g.groups()[op.group.index()],
                Group::Op(g.op_by_name(&op.name).unwrap())
            ),
            OpRole::Backward if op.name.starts_with("bwd/") => {
                let fwd = op.name.split('/').nth(1).unwrap();
                assert_eq!(
                    g.groups()[op.group.index()],
                    Group::Op(g.op_by_name(fwd).unwrap()),
                    "{}",
                    op.name
                );
            }
            _ => {}
        }
    }
    // Every weight, its gradient, its momentum state and its update share a group.
    for w in g
        .tensor_ids()
        .filter(|&t| g.tensor(t).role == TensorRole::Weight && g.tensor(t).updates.is_none())
    {
        let t = g.tensor(w);
        assert_eq!(g.groups()[t.group.index()], Group::Tensor(w));
        let grad = t.grad.expect("weight has a gradient");
        assert_eq!(g.tensor(grad).group, t.group);
        assert_eq!(g.tensor(grad).grad_of, Some(w));
        assert_eq!(g.tensor(grad).name, format!("grad/{}", t.name));
        let upd = g
            .consumers(w)
            .iter()
            .map(|&o| g.op(o))
            .find(|o| o.role == OpRole::Update)
            .unwrap();
        assert_eq!(upd.group, t.group);
        assert_eq!(upd.spec, "momentum_update");
        assert_eq!(g.tensor(upd.inputs[2]).role, TensorRole::OptimizerState);
        assert_eq!(g.tensor(upd.outputs[0]).updates, Some(w));
    }
    // The loss is seeded with the scalar 1.
    let loss = g.loss().unwrap();
    let seed = g.tensor_by_name("grad/loss.loss").unwrap();
    assert_eq!(g.tensor(seed).shape, Vec::<usize>::new());
    assert_eq!(g.tensor(seed).fill, Some(Fill::Constant { value: 1.0 }));
    assert_eq!(g.tensor(seed).grad_of, Some(loss));
}

#[test]
fn shared_weights_sum_their_gradients_in_the_tensor_group() {
    let lib = lib();
    let cfg = RnnConfig::tiny();
    let g = Model::Rnn(cfg.clone())
        .training(&lib, &Optimizer::default())
        .unwrap();
    let wx = g.tensor_by_name("lstm.l0.wx").unwrap();
    let sums: Vec<_> = g
        .ops()
        .iter()
        .filter(|o| o.name.starts_with("sum/lstm.l0.wx/"))
        .collect();
    assert_eq!(sums.len(), cfg.steps - 1, "one add per extra use");
    for s in &sums {
        assert_eq!(s.spec, "add");
        assert_eq!(s.role, OpRole::Backward);
        assert_eq!(
            s.group,
            g.tensor(wx).group,
            "the sum joins the tensor's group (§4.2.1)"
        );
    }
    assert_eq!(sums.last().unwrap().outputs[0], g.tensor(wx).grad.unwrap());
    // The embedding table is read once per step.
    assert_eq!(
        g.ops()
            .iter()
            .filter(|o| o.name.starts_with("sum/embed.table/"))
            .count(),
        cfg.steps - 1
    );
    // The last cell states feed nothing: their gradient is a zero (scale 0) in their group.
    let c_last = g
        .tensor_by_name(&format!("lstm.l0.t{}.cell.c", cfg.steps - 1))
        .unwrap();
    let zero = g.op(g
        .op_by_name(&format!("zero/{}", g.tensor(c_last).name))
        .unwrap());
    assert_eq!(zero.spec, "scale");
    assert_eq!(zero.attrs["alpha"].as_f64(), 0.0);
    assert_eq!(zero.group, g.tensor(c_last).group);
    assert_eq!(g.tensor(c_last).grad, Some(zero.outputs[0]));
}

#[test]
fn tied_embedding_gradient_is_a_sum() {
    let lib = lib();
    let g = Model::Gpt(GptConfig::tiny())
        .training(&lib, &Optimizer::default())
        .unwrap();
    let sums = g
        .ops()
        .iter()
        .filter(|o| o.name.starts_with("sum/wte/"))
        .count();
    assert_eq!(
        sums, 1,
        "wte is used by the embedding and the output projection"
    );
}

#[test]
fn operators_are_in_topological_order() {
    let lib = lib();
    for m in [
        Model::Mlp(MlpConfig::tiny()),
        Model::WResNet(WResNetConfig::tiny()),
        Model::Rnn(RnnConfig::tiny()),
        Model::Gpt(GptConfig::tiny()),
    ] {
        let g = m
            .training(&lib, &Optimizer::from_name("adam").unwrap())
            .unwrap();
        for o in g.op_ids() {
            for (p, t) in g.predecessors(o) {
                assert!(
                    p < o,
                    "{}: {} before its producer",
                    m.name(),
                    g.tensor(t).name
                );
                assert!(g.successors(p).any(|(s, _)| s == o));
            }
        }
        assert_eq!(g.topo_order().len(), g.ops().len());
        g.check_shapes(&lib).unwrap();
        let adam = g
            .ops()
            .iter()
            .filter(|o| o.role == OpRole::Update)
            .all(|o| o.spec == "adam_update" && o.outputs.len() == 3);
        assert!(adam);
    }
}

#[test]
fn missing_gradient_declaration_is_named() {
    let lib = Library::from_sources(&[(
        "t.tdl".into(),
        "/// y = x.\n/// Source: test.\nop nograd(x[N]) -> y[N] { y[n] = x[n]; }\n/// s = Σ x.\n/// Source: test.\nop total(x[N]) -> s[] { s[] = Sum(n: x[n]); }\n"
            .into(),
    )])
    .unwrap();
    let mut b = GraphBuilder::new(&lib, "t");
    let w = b.weight("w", &[3], 1.0).unwrap();
    let y = b.op1("nograd", "f", &[w], &[]).unwrap();
    let s = b.op1("total", "s", &[y], &[]).unwrap();
    let fwd = b.finish(s).unwrap();
    let err = training_graph(&fwd, &lib, &Optimizer::default()).unwrap_err();
    assert!(
        matches!(&err, GraphError::NoGradient { op, input, .. } if op == "s" && input == "x"),
        "{err}"
    );
}

#[test]
fn liveness_peak_of_small_graphs() {
    let lib = lib();
    // Chain x → relu → relu: at most two 40-byte tensors live.
    let mut b = GraphBuilder::new(&lib, "chain");
    let x = b
        .input("x", &[10], DType::F32, Fill::Normal { std: 1.0 })
        .unwrap();
    let y = b.op1("relu", "r1", &[x], &[]).unwrap();
    b.op1("relu", "r2", &[y], &[]).unwrap();
    let m = MemoryReport::of(&b.into_graph());
    assert_eq!(
        (m.peak_activation_bytes, m.input_bytes, m.parameters),
        (80, 40, 0)
    );
    // Fan-out: x feeds two relus whose results are added: x, a, b live at once.
    let mut b = GraphBuilder::new(&lib, "fan");
    let x = b
        .input("x", &[10], DType::F32, Fill::Normal { std: 1.0 })
        .unwrap();
    let p = b.op1("relu", "a", &[x], &[]).unwrap();
    let q = b.op1("tanh", "b", &[x], &[]).unwrap();
    b.op1("add", "c", &[p, q], &[]).unwrap();
    let g = b.into_graph();
    let m = MemoryReport::of(&g);
    assert_eq!(m.peak_activation_bytes, 120);
    assert_eq!(
        m.peak_at.map(|o| g.op(o).name.clone()),
        Some("b".to_string())
    );
}

#[test]
fn training_state_is_weights_grads_and_optimizer_state() {
    let lib = lib();
    let cfg = MlpConfig::tiny();
    let params = (cfg.input * cfg.hidden + cfg.hidden)
        + (cfg.hidden * cfg.hidden + cfg.hidden)
        + (cfg.hidden * cfg.classes + cfg.classes);
    for (opt, states) in [("sgd", 0u64), ("momentum", 1), ("adam", 2)] {
        let g = Model::Mlp(cfg.clone())
            .training(&lib, &Optimizer::from_name(opt).unwrap())
            .unwrap();
        let m = MemoryReport::of(&g);
        assert_eq!(m.parameters, params as u64);
        assert_eq!(m.parameter_bytes, 4 * params as u64);
        assert_eq!(m.gradient_bytes, 4 * params as u64);
        assert_eq!(m.optimizer_state_bytes, 4 * states * params as u64, "{opt}");
        assert_eq!(m.training_state_bytes(), (2 + states) * 4 * params as u64);
        assert!(m.peak_activation_bytes > 0);
        let per_weight: u64 = g.tensor_ids().map(|t| weight_state_bytes(&g, t)).sum();
        assert_eq!(per_weight, m.training_state_bytes());
        let aliases = g
            .tensor_ids()
            .filter(|&t| classify(&g, t) == MemoryClass::Alias)
            .count();
        assert_eq!(aliases as u64, 6 * (1 + states));
    }
}

#[test]
fn zoo_names_parse() {
    let rnn = |n: &str| match Model::parse(n).unwrap() {
        Model::Rnn(c) => (c.layers, c.hidden, c.steps, c.embed),
        m => panic!("{m:?}"),
    };
    assert_eq!(rnn("rnn-10-8k"), (10, 8192, 20, 512));
    assert_eq!(rnn("RNN-6-4K"), (6, 4096, 20, 512));
    assert_eq!(rnn("rnn-8-6k"), (8, 6144, 20, 512));
    assert_eq!(rnn("rnn-2-4096"), (2, 4096, 20, 512));
    assert!(matches!(
        Model::parse("wresnet-152-10").unwrap(),
        Model::WResNet(WResNetConfig {
            blocks: [3, 8, 36, 3],
            widen: 10,
            image: 224,
            ..
        })
    ));
    assert!(matches!(
        Model::parse("gpt-12-768").unwrap(),
        Model::Gpt(GptConfig {
            heads: 12,
            seq: 1024,
            vocab: 50257,
            ..
        })
    ));
    assert!(matches!(
        Model::parse("mlp-4-1k").unwrap(),
        Model::Mlp(MlpConfig {
            layers: 4,
            hidden: 1024,
            ..
        })
    ));
    assert_eq!(Model::parse("mlp-4-1k").unwrap().with_batch(7).batch(), 7);
    for bad in [
        "wresnet-34-2",
        "gpt-2-100",
        "foo-1-2",
        "mlp-2",
        "mlp-0-4",
        "rnn-x-4k",
        "",
        "rnn-2-4kk",
    ] {
        assert!(
            matches!(Model::parse(bad), Err(ZooError::UnknownModel { .. })),
            "{bad}"
        );
    }
}
