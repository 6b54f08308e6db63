//! `GraphBuilder::set_updates`: a forward op's output recorded as the next
//! value of a weight (batch normalization's running statistics), and the
//! pairs it refuses (each refusal names the tensor at fault).

use graph::memory::MemoryReport;
use graph::{float, DType, Fill, GraphBuilder, GraphError, TensorId, TensorRole};

fn lib() -> &'static tdl::Library {
    static LIB: std::sync::OnceLock<tdl::Library> = std::sync::OnceLock::new();
    LIB.get_or_init(|| tdl::Library::shipped().expect("shipped specs load"))
}

fn invalid_at(e: GraphError) -> (String, String) {
    match e {
        GraphError::Invalid { at, message } => (at, message),
        other => panic!("expected Invalid, got {other}"),
    }
}

/// A builder holding `x[2, 3, 4, 4]` and the weights `mean[3]`, `var[3]`.
fn batch_norm_inputs() -> (GraphBuilder<'static>, [TensorId; 3]) {
    let mut b = GraphBuilder::new(lib(), "bn");
    let x = b
        .input("x", &[2, 3, 4, 4], DType::F32, Fill::Normal { std: 1.0 })
        .unwrap();
    let mean = b.weight_const("mean", &[3], 0.0).unwrap();
    let var = b.weight_const("var", &[3], 1.0).unwrap();
    (b, [x, mean, var])
}

#[test]
fn a_running_statistic_becomes_the_next_value_of_its_weight() {
    let (mut b, [x, mean, var]) = batch_norm_inputs();
    let st = b
        .op(
            "batchnorm_running_stats",
            "stats",
            &[x, mean, var],
            &[("momentum", float(0.9))],
        )
        .unwrap();
    b.set_updates(st[0], mean).unwrap();
    b.set_updates(st[1], var).unwrap();
    let g = b.graph();
    for (next, state) in st.iter().zip([mean, var]) {
        assert_eq!(g.tensor(*next).updates, Some(state));
        assert_eq!(g.tensor(*next).role, TensorRole::Weight);
        assert_eq!(g.tensor(*next).group, g.tensor(state).group);
    }
    // Buffers, not parameters (PyTorch's count), but memory kept all the same.
    let mem = MemoryReport::of(g);
    assert_eq!(mem.parameters, 0);
    assert_eq!(mem.parameter_bytes, 2 * 3 * 4);
}

#[test]
fn set_updates_refuses_what_is_not_a_state_and_its_next_value() {
    let (mut b, [x, mean, var]) = batch_norm_inputs();
    let other = b.weight_const("other", &[4], 0.0).unwrap();
    let st = b
        .op("batchnorm_running_stats", "stats", &[x, mean, var], &[])
        .unwrap();
    // A leaf is no op's output.
    let (at, _) = invalid_at(b.set_updates(var, mean).unwrap_err());
    assert_eq!(at, "var");
    // An input is not a weight.
    let (at, _) = invalid_at(b.set_updates(st[0], x).unwrap_err());
    assert_eq!(at, "x");
    // Shapes differ.
    let (at, m) = invalid_at(b.set_updates(st[0], other).unwrap_err());
    assert_eq!(at, "other");
    assert!(m.contains("[3]") && m.contains("[4]"), "{m}");
    // One state, one writer: two BatchNormalization nodes sharing it.
    b.set_updates(st[0], mean).unwrap();
    let (at, m) = invalid_at(b.set_updates(st[1], mean).unwrap_err());
    assert_eq!(at, "mean");
    assert!(m.contains("already updates"), "{m}");
}
