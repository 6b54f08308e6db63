//! Graph inputs fixed to a value at import (`--input-value`, issue 26 item
//! 3): folded like constants, so an `If` on a sample rate takes its branch,
//! a `Range` whose limit is an input and a `Reshape` to an input shape
//! resolve; the run-time-condition error names the input that decides it
//! and the flag. Oracles: the branch the condition picks by ONNX's `If`
//! semantics, `Range`'s values worked out by hand, and the interpreter's run
//! of the resulting graph.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::models::{branch, graph_attr, ints, model, node, vi};
use common::run_imported;
use onnx::Options;
use onnx_protobuf::GraphProto;

fn library() -> &'static tdl::Library {
    static LIB: std::sync::OnceLock<tdl::Library> = std::sync::OnceLock::new();
    LIB.get_or_init(|| tdl::Library::shipped().expect("shipped specs load"))
}

fn fixed(pairs: &[(&str, &[f64])]) -> Options {
    Options {
        fixed_inputs: pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_vec()))
            .collect::<BTreeMap<_, _>>(),
        ..Options::default()
    }
}

/// `x = features · w`, `y = If(sample_rate == 16000) then Relu(x) else
/// Neg(x)`, the shape of an audio front end that resamples unless the rate
/// is the one it was trained at. Committed as
/// `onnx/tests/fixtures/if-sample-rate.onnx` for the CLI tests.
fn if_on_sample_rate() -> GraphProto {
    let mut g = GraphProto::new();
    g.name = "if_on_sample_rate".into();
    g.input = vec![vi("features", 1, &[2, 3]), vi("sample_rate", 7, &[])];
    g.output = vec![vi("y", 1, &[2, 3])];
    g.initializer = vec![
        ints("rate", &[16000], true),
        common::models::floats(
            "w",
            &[3, 3],
            &[0.5, -0.25, 1.0, 0.75, 0.5, -1.0, 0.25, 1.5, -0.5],
        ),
    ];
    g.node = vec![
        node("MatMul", &["features", "w"], &["x"], vec![]),
        node("Equal", &["sample_rate", "rate"], &["is_16k"], vec![]),
        node(
            "If",
            &["is_16k"],
            &["y"],
            vec![
                graph_attr("then_branch", branch("Relu")),
                graph_attr("else_branch", branch("Neg")),
            ],
        ),
    ];
    g
}

#[test]
fn a_fixed_input_chooses_the_if_branch() {
    for (rate, taken, not) in [(16000.0, "relu", "neg"), (8000.0, "neg", "relu")] {
        let opts = fixed(&[("sample_rate", &[rate])]);
        let imp = onnx::import(
            &model(if_on_sample_rate()),
            Path::new("sr.onnx"),
            library(),
            &opts,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let specs: Vec<&str> = imp.graph.ops().iter().map(|o| o.spec.as_str()).collect();
        assert!(specs.contains(&taken), "{specs:?}");
        assert!(!specs.contains(&not), "{specs:?}");
        assert_eq!(imp.summary.inlined.get("If"), Some(&1));
        // Folded: no graph tensor for the fixed input.
        let names: Vec<&str> = imp
            .graph
            .tensors()
            .iter()
            .map(|t| t.name.as_str())
            .collect();
        assert!(!names.contains(&"sample_rate"), "{names:?}");
    }
}

#[test]
fn an_if_on_an_input_value_names_the_input_and_the_flag() {
    let e = onnx::import(
        &model(if_on_sample_rate()),
        Path::new("sr.onnx"),
        library(),
        &Options::default(),
    )
    .err()
    .expect("run-time condition")
    .to_string();
    assert!(e.contains("sr.onnx") && e.contains("If"), "{e}");
    assert!(e.contains("`is_16k` depends on run-time data"), "{e}");
    assert!(e.contains("graph input `sample_rate` decides it"), "{e}");
    assert!(e.contains("--input-value sample_rate=V"), "{e}");
}

/// `idx = Range(0, n, 1)`, `y = Reshape(x, shape)`, `z = Cast(idx) + 1`.
fn range_and_reshape() -> GraphProto {
    let mut g = GraphProto::new();
    g.name = "range_and_reshape".into();
    g.input = vec![vi("x", 1, &[8]), vi("n", 7, &[]), vi("shape", 7, &[-1])];
    g.output = vec![vi("y", 1, &[]), vi("z", 1, &[])];
    g.initializer = vec![ints("zero", &[0], true), ints("one", &[1], true)];
    let mut cast = node("Cast", &["idx"], &["idx_f"], vec![]);
    cast.attribute = vec![common::models::attr("to", common::models::A::I(1))];
    g.node = vec![
        node("Range", &["zero", "n", "one"], &["idx"], vec![]),
        cast,
        node("Reshape", &["x", "shape"], &["y"], vec![]),
        node("Relu", &["idx_f"], &["z"], vec![]),
    ];
    g
}

#[test]
fn a_fixed_input_resolves_range_limits_and_shape_chains() {
    let mut opts = fixed(&[("n", &[5.0]), ("shape", &[2.0, -1.0])]);
    // x stays a graph input (with a value to run the graph on).
    let xs: Vec<f64> = (0..8).map(f64::from).collect();
    opts.input_shapes.insert("x".into(), vec![8]);
    opts.input_values
        .insert("x".into(), onnx::Data::floats(vec![8], xs.clone()));
    let imp = onnx::import(
        &model(range_and_reshape()),
        Path::new("r.onnx"),
        library(),
        &opts,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let out = run_imported(&imp);
    // Reshape to [2, -1] of 8 elements: [2, 4].
    assert_eq!(out[0].0, [2, 4]);
    assert_eq!(out[0].1, xs);
    // Range(0, 5, 1) = 0, 1, 2, 3, 4.
    assert_eq!(out[1].0, [5]);
    assert_eq!(out[1].1, [0.0, 1.0, 2.0, 3.0, 4.0]);
    assert_eq!(imp.summary.folded.get("Range"), Some(&1));
}

#[test]
fn input_values_that_do_not_fit_are_errors_naming_the_fix() {
    let err = |pairs: &[(&str, &[f64])]| {
        onnx::import(
            &model(range_and_reshape()),
            Path::new("r.onnx"),
            library(),
            &fixed(pairs),
        )
        .err()
        .expect("refused")
        .to_string()
    };
    let e = err(&[("nope", &[1.0])]);
    assert!(
        e.contains("r.onnx") && e.contains("--input-value names `nope`"),
        "{e}"
    );
    assert!(e.contains("the inputs are x, n, shape"), "{e}");
    let e = err(&[("n", &[1.0, 2.0])]);
    assert!(
        e.contains("gives input `n` 2 values") && e.contains("holds 1"),
        "{e}"
    );
    let e = err(&[("n", &[2.5])]);
    assert!(e.contains("give whole numbers"), "{e}");
    let e = err(&[("x", &[1.0; 3])]);
    assert!(e.contains("fixes its length to 8"), "{e}");
}

/// The committed CLI fixture is the model [`if_on_sample_rate`] builds
/// (`TOFU_WRITE_FIXTURES=1` rewrites it).
#[test]
fn the_cli_fixture_is_the_model_built_here() {
    let mut m = onnx_protobuf::ModelProto::new();
    m.ir_version = 8;
    let mut o = onnx_protobuf::OperatorSetIdProto::new();
    o.version = 17;
    m.opset_import = vec![o];
    m.graph = Some(if_on_sample_rate()).into();
    let bytes = onnx::synth::to_bytes(&m);
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/if-sample-rate.onnx");
    if std::env::var_os("TOFU_WRITE_FIXTURES").is_some() {
        std::fs::write(&path, &bytes).expect("write the fixture");
    }
    let committed = std::fs::read(&path).expect("fixture committed");
    assert!(
        committed == bytes,
        "{} is stale: rerun with TOFU_WRITE_FIXTURES=1",
        path.display()
    );
}
