//! Truncated, corrupted and non-ONNX inputs give clear errors, never panics:
//! fixed cases plus a property test flipping, deleting and truncating bytes
//! of a real model (light_squeezenet, from the fetched ONNX test data).

mod common;

use std::path::Path;

use proptest::prelude::*;

fn import_bytes(bytes: &[u8]) -> Result<(), onnx::OnnxError> {
    let lib = library();
    let model = onnx::proto::decode(bytes, Path::new("corrupt.onnx"))?;
    onnx::import(
        &model,
        Path::new("corrupt.onnx"),
        lib,
        &onnx::Options::default(),
    )
    .map(|_| ())
}

fn library() -> &'static tdl::Library {
    static LIB: std::sync::OnceLock<tdl::Library> = std::sync::OnceLock::new();
    LIB.get_or_init(|| tdl::Library::shipped().expect("shipped specs load"))
}

#[test]
fn non_onnx_inputs_are_clear_errors() {
    for (bytes, expect) in [
        (&b""[..], "empty"),
        (
            &b"hello, this is not a model\n"[..],
            "not a valid ONNX model",
        ),
        (&[0x08, 0x07][..], "no graph"),
        (&[0xff; 16][..], "not a valid ONNX model"),
    ] {
        let e = import_bytes(bytes).expect_err("must fail").to_string();
        assert!(e.contains(expect), "{e}");
        assert!(e.contains("corrupt.onnx"), "names the file: {e}");
    }
    let e = onnx::load_graph(
        Path::new("/nonexistent/model.onnx"),
        &onnx::Options::default(),
    )
    .err()
    .expect("missing file")
    .to_string();
    assert!(e.contains("/nonexistent/model.onnx"), "{e}");
}

#[test]
fn truncated_model_is_a_clear_error() {
    let Some(dir) = common::data_dir() else {
        return;
    };
    let bytes = std::fs::read(dir.join("light/light_squeezenet.onnx")).unwrap();
    for cut in [1, 10, 100, bytes.len() / 2, bytes.len() - 1] {
        let e = import_bytes(&bytes[..cut])
            .expect_err("truncated")
            .to_string();
        assert!(e.contains("corrupt.onnx"), "{e}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn corrupted_model_never_panics(
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..8),
        cut in proptest::option::of(any::<prop::sample::Index>()),
    ) {
        let Some(dir) = common::data_dir() else { return Ok(()) };
        static BYTES: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
        let original = BYTES.get_or_init(|| std::fs::read(dir.join("light/light_squeezenet.onnx")).unwrap());
        let mut bytes = original.clone();
        for (at, value, kind) in edits {
            if bytes.is_empty() {
                break;
            }
            let i = at.index(bytes.len());
            match kind {
                0 => bytes[i] = value,
                1 => bytes[i] ^= 1 << (value % 8),
                _ => {
                    bytes.remove(i);
                }
            }
        }
        if let Some(c) = cut {
            let n = c.index(bytes.len().max(1));
            bytes.truncate(n);
        }
        // Ok or a typed error; a panic fails the test.
        let _ = import_bytes(&bytes);
    }
}

/// The bytes of `model` with `edits` applied (overwrite, flip a bit, delete).
fn corrupt(model: &[u8], edits: &[(prop::sample::Index, u8, u8)]) -> Vec<u8> {
    let mut bytes = model.to_vec();
    for (at, value, kind) in edits {
        if bytes.is_empty() {
            break;
        }
        let i = at.index(bytes.len());
        match kind {
            0 => bytes[i] = *value,
            1 => bytes[i] ^= 1 << (value % 8),
            _ => {
                bytes.remove(i);
            }
        }
    }
    bytes
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// The new paths of issue 15 — folding through the interpreter (the
    /// decoder's shape chains), `If` on a shape, external data with a
    /// missing, short or garbage data file — give errors, never panics.
    #[test]
    fn folding_control_flow_and_external_data_never_panic(
        which in 0u8..3,
        width in 0i64..6,
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 0..6),
        data in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40)),
    ) {
        let dir = std::env::temp_dir().join(format!("tofu-robust-{}-{which}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (path, bytes) = match which {
            0 => {
                let m = common::models::if_on_shape(width).proto;
                (dir.join("if.onnx"), onnx::synth::to_bytes(&m))
            }
            _ => {
                let (p, _) = common::models::with_external_shape(&dir);
                let b = std::fs::read(&p).unwrap();
                (p, b)
            }
        };
        let data_file = dir.join("shape.bin");
        let _ = std::fs::remove_file(&data_file);
        if let Some(d) = &data {
            std::fs::write(&data_file, d).unwrap();
        }
        let bytes = if which == 2 { bytes } else { corrupt(&bytes, &edits) };
        let opts = onnx::Options {
            input_shapes: [("input_ids".to_string(), vec![1, 1 + width as usize])].into(),
            ..Default::default()
        };
        // Ok or a typed error; a panic fails the test.
        if let Ok(model) = onnx::proto::decode(&bytes, &path) {
            let _ = onnx::import(&model, &path, library(), &opts);
            let _ = onnx::import(&model, &path, library(), &onnx::Options::default());
        }
    }
}

/// A float initializer of `dims` (its data does not fit them unless `fits`).
fn rnn_tensor(name: &str, dims: &[i64], fits: bool) -> onnx_protobuf::TensorProto {
    let n: i64 = dims.iter().product::<i64>().clamp(0, 4096);
    let len = if fits { n } else { (n + 1) % 7 };
    common::models::floats(name, dims, &vec![0.25; len as usize])
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// LSTM / GRU / RNN (issue 15 item 4) with random shapes (consistent,
    /// or with one input's dims broken), attributes (garbage directions,
    /// layouts, clips, activation lists, α/β) and sequence lengths: imports
    /// for inference and training, or errors, never panics.
    #[test]
    fn recurrent_nodes_with_bad_attributes_and_shapes_never_panic(
        (op, dir, layout) in (0usize..3, prop::sample::select(vec![0usize, 0, 0, 1, 1, 1, 2, 2, 2, 3]),
            prop::sample::select(vec![0i64, 0, 0, 0, 0, 1, 1, 1, 1, 2])),
        (s, b, i, h) in (1i64..4, 1i64..3, 1i64..3, prop::sample::select(vec![0i64, 1, 1, 1, 2, 2, 2, 2])),
        present in any::<[bool; 6]>(),
        (broken, axis, delta) in (0usize..32, 0usize..4, 0usize..3),
        fits in proptest::bool::weighted(0.9),
        lens in proptest::option::weighted(0.3, proptest::collection::vec(-1i64..5, 3)),
        hidden in 0usize..8,
        clip in 0usize..16,
        acts in proptest::option::weighted(0.15, proptest::collection::vec(0usize..6, 0..7)),
        alphas in proptest::collection::vec(-2.0f32..2.0, 0..4),
        flags in any::<[bool; 3]>(),
    ) {
        use common::models::{attr, recurrent, A};
        let lens: Vec<i64> = lens.map(|v| v[..b as usize].to_vec()).unwrap_or_default();
        let op = ["LSTM", "GRU", "RNN"][op];
        let g = [4, 3, 1][["LSTM", "GRU", "RNN"].iter().position(|&o| o == op).unwrap()];
        let d = if dir == 2 { 2 } else { 1 };
        let (x0, x1) = if layout == 1 { (b, s) } else { (s, b) };
        let state = if layout == 1 { vec![b, d, h] } else { vec![d, b, h] };
        let mut dims: Vec<Vec<i64>> = vec![
            vec![x0, x1, i],
            vec![d, g * h, i],
            vec![d, g * h, h],
            vec![d, 2 * g * h],
            vec![lens.len() as i64],
            state.clone(),
            state,
            vec![d, 3 * h],
        ];
        // Break one input's dims: change an axis, or drop it.
        if let Some(bd) = dims.get_mut(broken) {
            match (delta, bd.len()) {
                (0, n) if n > 0 => {
                    bd.remove(axis % n);
                }
                (_, n) if n > 0 => bd[axis % n] += delta as i64,
                _ => {}
            }
        }
        let names = ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"];
        let mut weights = Vec::new();
        let mut slots: Vec<(&str, Vec<i64>)> = Vec::new();
        for (k, name) in names.iter().enumerate() {
            let wanted = match k {
                0..=2 => true,
                4 => !lens.is_empty(),
                _ => present[k - 3 - usize::from(k > 4)],
            };
            if !wanted {
                slots.push(("", vec![]));
                continue;
            }
            slots.push((name, dims[k].clone()));
            if k == 4 && flags[2] {
                // A graph input: lengths known only at run time.
            } else if k == 4 {
                let mut t = common::models::ints("sequence_lens", &lens, false);
                t.data_type = 6;
                t.dims = dims[4].clone();
                t.int32_data = lens.iter().map(|&v| v as i32).collect();
                t.int64_data.clear();
                weights.push(t);
            } else if k > 0 {
                weights.push(rnn_tensor(name, &dims[k], fits));
            }
        }
        let mut attrs = vec![
            attr("direction", A::S(["forward", "reverse", "bidirectional", "up"][dir])),
            attr("layout", A::I(layout)),
            attr("activation_alpha", A::Fs(&alphas)),
            attr("activation_beta", A::Fs(&alphas)),
            attr("input_forget", A::I(flags[0] as i64)),
            attr("linear_before_reset", A::I(flags[1] as i64)),
        ];
        if clip < 5 {
            attrs.push(attr("clip", A::F([-1.0, 0.0, 0.5, f32::NAN, f32::INFINITY][clip])));
        }
        if hidden > 0 {
            attrs.push(attr("hidden_size", A::I(if hidden == 7 { h + 1 } else { h })));
        }
        if let Some(acts) = &acts {
            let act_names: Vec<&str> = acts
                .iter()
                .map(|&k| ["Affine", "ScaledTanh", "Tanh", "Gelu", "HardSigmoid", "Relu"][k])
                .collect();
            attrs.push(attr("activations", A::Ss(&act_names)));
        }
        let outs: &[&str] = if op == "LSTM" { &["Y", "Y_h", "Y_c"] } else { &["Y", "Y_h"] };
        let m = recurrent(op, &slots, weights, attrs, outs);
        let path = Path::new("rnn.onnx");
        // Ok or a typed error; a panic fails the test.
        let _ = onnx::import(&m, path, library(), &onnx::Options::default());
        let opts = onnx::Options { training: true, ..Default::default() };
        let _ = onnx::import(&m, path, library(), &opts);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Issue 26 items 4 and 5: a weighted operator of a random op type,
    /// domain and opset with random float attributes (±inf, NaN), pad modes
    /// and cast targets, imported for inference or training, with or without
    /// `--opaque-unsupported` and with random `--dim` names: imports, or
    /// errors, never panics.
    #[test]
    fn new_gradient_domain_and_dim_paths_never_panic(
        op in prop::sample::select(vec![
            "Clip", "Pad", "Round", "Floor", "Ceil", "Sign", "Cast", "ArgMax", "IsNaN",
            "TreeEnsembleRegressor", "FusedMatMul",
        ]),
        domain in prop::sample::select(vec!["", "ai.onnx", "ai.onnx.ml", "com.microsoft", "x.y"]),
        opset in prop::sample::select(vec![6i64, 10, 11, 13, 17]),
        bound in prop::sample::select(vec![
            0.0f32, -1.0, 6.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN,
        ]),
        mode in prop::sample::select(vec!["constant", "edge", "reflect", "wrap", "mirror"]),
        pads in proptest::collection::vec(-1i64..6, 4),
        to in 0i64..27,
        dim in prop::sample::select(vec!["batch", "sequence", "n", ""]),
        (training, opaque) in (any::<bool>(), any::<bool>()),
    ) {
        use common::models::{attr, floats, ints, model_with_opsets, node, vi, A};
        let mut g = onnx_protobuf::GraphProto::new();
        g.name = "new_paths".into();
        g.input = vec![vi("x", 1, &[-1, 4])];
        g.output = vec![vi("y", 1, &[2, 5])];
        g.initializer = vec![floats("w", &[4, 4], &[0.25; 16]), ints("pads", &pads, false)];
        let mut attrs = vec![
            attr("min", A::F(-bound)),
            attr("max", A::F(bound)),
            attr("value", A::F(bound)),
            attr("mode", A::S(mode)),
            attr("to", A::I(to)),
        ];
        let mut pads_attr = onnx_protobuf::AttributeProto::new();
        pads_attr.name = "pads".into();
        pads_attr.type_ = onnx_protobuf::attribute_proto::AttributeType::INTS.into();
        pads_attr.ints = pads.clone();
        attrs.push(pads_attr);
        let ins: &[&str] = if op == "Pad" && opset >= 11 { &["h", "pads"] } else { &["h"] };
        let mut n = node(op, ins, &["y"], attrs);
        n.domain = domain.into();
        g.node = vec![node("MatMul", &["x", "w"], &["h"], vec![]), n];
        let m = model_with_opsets(g, &[("", opset), ("ai.onnx.ml", 3), ("com.microsoft", 1)]);
        let mut opts = onnx::Options {
            training,
            opaque_unsupported: opaque,
            ..Default::default()
        };
        if !dim.is_empty() {
            opts.dims.named.insert(dim.into(), 2);
        }
        // Ok or a typed error; a panic fails the test.
        let _ = onnx::import(&m, Path::new("new.onnx"), library(), &opts);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Issue 26 items 2 and 3: Conv / MaxPool / AveragePool of rank 1–3 with
    /// random pads (negative, begin unlike end), every `auto_pad` mode and a
    /// bogus one, zero strides, dilations, kernels and input sides, groups;
    /// and random `--input-value`s (unknown names, wrong counts, fractions,
    /// ±inf) on a model whose `If` and `Range` read them, for inference or
    /// training: imports, or errors, never panics.
    #[test]
    fn padding_and_input_value_paths_never_panic(
        op in prop::sample::select(vec!["Conv", "MaxPool", "AveragePool"]),
        rank in 1usize..4,
        side in 0i64..6,
        kernel in 0i64..4,
        pads in proptest::collection::vec(-1i64..4, 6),
        auto in prop::sample::select(vec!["NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID", "BOGUS"]),
        (stride, dil, group) in (0i64..3, 0i64..3, 0i64..3),
        training in any::<bool>(),
        name in prop::sample::select(vec!["sample_rate", "n", "x", "nope"]),
        values in proptest::collection::vec(
            prop::sample::select(vec![0.0, 1.0, 2.5, 16000.0, -3.0, f64::INFINITY]),
            0..3,
        ),
    ) {
        use common::models::{attr, branch, floats, graph_attr, ints, ints_attr, model, node, vi, A};
        let opts = onnx::Options { training, ..Default::default() };
        let mut g = onnx_protobuf::GraphProto::new();
        g.name = "pads".into();
        let mut xd = vec![2, 2];
        xd.extend(std::iter::repeat_n(side, rank));
        let mut wd = vec![2, 2 / group.max(1)];
        wd.extend(std::iter::repeat_n(kernel, rank));
        g.input = vec![vi("x", 1, &xd)];
        g.output = vec![vi("y", 1, &[])];
        let nw = wd.iter().product::<i64>().max(0) as usize;
        g.initializer = vec![floats("w", &wd, &vec![0.5; nw])];
        let attrs = vec![
            ints_attr("pads", &pads[..2 * rank]),
            attr("auto_pad", A::S(auto)),
            ints_attr("strides", &vec![stride; rank]),
            ints_attr("dilations", &vec![dil; rank]),
            ints_attr("kernel_shape", &vec![kernel; rank]),
            attr("group", A::I(group)),
        ];
        let ins: &[&str] = if op == "Conv" { &["x", "w"] } else { &["x"] };
        g.node = vec![node(op, ins, &["y"], attrs)];
        // Ok or a typed error; a panic fails the test.
        let _ = onnx::import(&model(g), Path::new("pads.onnx"), library(), &opts);

        let mut g = onnx_protobuf::GraphProto::new();
        g.name = "values".into();
        g.input = vec![vi("x", 1, &[2, 3]), vi("sample_rate", 7, &[]), vi("n", 7, &[])];
        g.output = vec![vi("y", 1, &[]), vi("r", 7, &[])];
        g.initializer = vec![ints("rate", &[16000], true), ints("zero", &[0], true), ints("one", &[1], true)];
        g.node = vec![
            node("Equal", &["sample_rate", "rate"], &["c"], vec![]),
            node("If", &["c"], &["y"], vec![
                graph_attr("then_branch", branch("Relu")),
                graph_attr("else_branch", branch("Neg")),
            ]),
            node("Range", &["zero", "n", "one"], &["r"], vec![]),
        ];
        let mut opts = opts;
        opts.fixed_inputs.insert(name.into(), values);
        let _ = onnx::import(&model(g), Path::new("values.onnx"), library(), &opts);
    }
}
