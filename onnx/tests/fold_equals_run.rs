//! Folding is proven equal to running: every value the importer folded
//! equals what the TDL interpreter computes for the unfolded subgraph on the
//! same input shapes.
//!
//! The independent path walks the ONNX nodes itself. For each node whose
//! outputs the importer folded, it builds a one-node model whose inputs are
//! graph inputs carrying the values this walk computed (not the importer's),
//! imports it the way ONNX's node tests are imported (supplied input values
//! are never folded, so the node is lowered to operators) and runs it with
//! the interpreter; the results feed the next nodes. Values from shapes only
//! (`Shape`, `Size`) take the shapes the importer inferred. Models: the
//! nine light models, the real models, the torch.onnx exports of
//! `tests/fixtures/exports` and a small decoder of `onnx::synth` with the
//! exporters' shape chains: every folded node of each.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use onnx::synth::{decoder, DecoderConfig};
use onnx::{Data, Elem};
use onnx_protobuf::{type_proto, GraphProto, ModelProto, TypeProto, ValueInfoProto};
use planner::graph::execute::{execute, Values};

fn library() -> &'static tdl::Library {
    static LIB: std::sync::OnceLock<tdl::Library> = std::sync::OnceLock::new();
    LIB.get_or_init(|| tdl::Library::shipped().expect("shipped specs load"))
}

fn code(e: Elem) -> i32 {
    (1..=26)
        .find(|&c| Elem::from_code(c) == Some(e))
        .unwrap_or(1)
}

fn input_info(name: &str, d: &Data) -> ValueInfoProto {
    let mut shape = onnx_protobuf::TensorShapeProto::new();
    for &s in &d.shape {
        let mut dim = onnx_protobuf::tensor_shape_proto::Dimension::new();
        dim.set_dim_value(s as i64);
        shape.dim.push(dim);
    }
    let mut tt = type_proto::Tensor::new();
    tt.elem_type = code(d.elem);
    tt.shape = Some(shape).into();
    let mut tp = TypeProto::new();
    tp.set_tensor_type(tt);
    let mut vi = ValueInfoProto::new();
    vi.name = name.into();
    vi.type_ = Some(tp).into();
    vi
}

/// Run node `i` of `model` alone on `inputs` with the interpreter.
fn run_node(model: &ModelProto, i: usize, inputs: &HashMap<String, Data>) -> Vec<Data> {
    let g = model.graph.as_ref().unwrap();
    let node = &g.node[i];
    let mut sub = GraphProto::new();
    sub.name = format!("node_{i}");
    sub.node = vec![node.clone()];
    let mut opts = onnx::Options::default();
    let mut seen = Vec::new();
    for x in node.input.iter().filter(|x| !x.is_empty()) {
        if seen.contains(x) {
            continue;
        }
        seen.push(x.clone());
        let d = &inputs[x];
        sub.input.push(input_info(x, d));
        opts.input_shapes.insert(x.clone(), d.shape.clone());
        opts.input_values.insert(x.clone(), d.clone());
    }
    for o in node.output.iter().filter(|o| !o.is_empty()) {
        let mut vi = ValueInfoProto::new();
        vi.name = o.clone();
        sub.output.push(vi);
    }
    let mut m = model.clone();
    m.graph = Some(sub).into();
    let imported = onnx::import(
        &onnx::proto::decode(&onnx::synth::to_bytes(&m), Path::new("node.onnx")).unwrap(),
        Path::new("node.onnx"),
        library(),
        &opts,
    )
    .unwrap_or_else(|e| panic!("node {} ({}) alone: {e}", node.name, node.op_type));
    let mut values = Values::new(imported.graph.tensors().len());
    for (t, k) in &imported.leaf_values {
        let d = k.data().unwrap();
        values.set(
            *t,
            tdl::Tensor {
                shape: d.shape,
                data: d.values,
            },
        );
    }
    execute(&imported.graph, &imported.library, &mut values, |_, _| true)
        .unwrap_or_else(|e| panic!("node {} ({}): {e}", node.name, node.op_type));
    imported
        .outputs
        .iter()
        .map(|(_, o)| match o {
            onnx::Output::Tensor(t) => {
                let v = values.get(*t).expect("computed");
                Data {
                    elem: Elem::F64,
                    shape: v.shape.clone(),
                    values: v.data.clone(),
                }
            }
            onnx::Output::Const(d) => d.clone(),
        })
        .collect()
}

fn same(a: &Data, b: &Data) -> bool {
    a.shape == b.shape
        && a.values.iter().zip(&b.values).all(|(&x, &y)| {
            (x.is_nan() && y.is_nan()) || x == y || (x - y).abs() <= 1e-6 * y.abs().max(1.0)
        })
}

/// Check every folded value of `path` (imported with `opts`); gives the
/// number of folded nodes compared. `None` when the model does not import.
fn check(path: &Path, opts: &onnx::Options, cap: usize) -> Option<usize> {
    let imported = match onnx::load_graph_with(path, library(), opts) {
        Ok(i) => i,
        Err(e) => {
            println!("{}: does not import on this branch: {e}", path.display());
            return None;
        }
    };
    let s = &imported.summary;
    let folded: HashMap<&str, &Data> = s
        .folded_values
        .iter()
        .map(|(n, d)| (n.as_str(), d))
        .collect();
    let model = onnx::proto::read(path).unwrap().proto;
    let g = model.graph.as_ref().unwrap();
    // The walk's own values: initializers (small ones), then what it computes.
    let mut values: HashMap<String, Data> = HashMap::new();
    for t in &g.initializer {
        if t.dims.iter().product::<i64>() <= 1 << 16 {
            if let Ok(d) = onnx::tensor::decode(t) {
                values.insert(t.name.clone(), d);
            }
        }
    }
    let mut compared = 0;
    for (i, n) in g.node.iter().enumerate() {
        let outs: Vec<&String> = n.output.iter().filter(|o| !o.is_empty()).collect();
        if outs.is_empty() || !outs.iter().all(|o| folded.contains_key(o.as_str())) {
            continue;
        }
        if compared >= cap {
            break;
        }
        let mut inputs = HashMap::new();
        for x in n.input.iter().filter(|x| !x.is_empty()) {
            let d = match values.get(x) {
                Some(d) => d.clone(),
                // A run-time tensor (Shape's input): only its shape matters.
                None => {
                    let shape = s.value_shapes[x].clone();
                    Data {
                        elem: Elem::F32,
                        values: vec![0.0; shape.iter().product()],
                        shape,
                    }
                }
            };
            inputs.insert(x.clone(), d);
        }
        let got = run_node(&model, i, &inputs);
        for (o, d) in outs.iter().zip(got) {
            let f = folded[o.as_str()];
            assert!(
                same(&d, f),
                "{}: node {} ({}) output `{o}`: folded {:?} {:?}, running gives {:?} {:?}",
                path.display(),
                n.name,
                n.op_type,
                f.shape,
                &f.values[..f.values.len().min(16)],
                d.shape,
                &d.values[..d.values.len().min(16)]
            );
            // Element types are ONNX's type rules, not values: take the folded one.
            values.insert(o.to_string(), Data { elem: f.elem, ..d });
        }
        compared += 1;
    }
    Some(compared)
}

#[test]
fn decoder_shape_chains_fold_to_what_running_gives() {
    let cfg = DecoderConfig {
        layers: 2,
        d_model: 16,
        ffn: 32,
        heads: 4,
        vocab: 13,
        data_file: "w.bin".into(),
    };
    let dir = std::env::temp_dir().join(format!("tofu-fold-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("decoder.onnx");
    std::fs::write(&path, onnx::synth::to_bytes(&decoder(&cfg))).unwrap();
    let opts = onnx::Options {
        input_shapes: BTreeMap::from([("input_ids".to_string(), vec![3, 7])]),
        ..Default::default()
    };
    let n = check(&path, &opts, usize::MAX).expect("imports");
    // Shape, 2 Gather, 2 Unsqueeze, Concat per split: 4 splits per layer.
    assert_eq!(n, 4 * 6 * cfg.layers);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn zoo_and_real_models_fold_to_what_running_gives() {
    let Some(dir) = common::data_dir() else {
        return;
    };
    let mut report = Vec::new();
    for name in common::LIGHT {
        let path = dir.join("light").join(format!("{name}.onnx"));
        let n = check(&path, &onnx::Options::default(), usize::MAX).expect("light models import");
        report.push(format!("{name}: {n} folded nodes equal running"));
    }
    if let Some(mdir) = common::models_dir() {
        for (name, file) in common::REAL {
            let n = check(&mdir.join(file), &onnx::Options::default(), usize::MAX)
                .unwrap_or_else(|| panic!("{name} does not import"));
            report.push(format!("{name}: {n} folded nodes equal running"));
        }
    }
    println!("{}", report.join("\n"));
}

/// The real exports of `tests/fixtures/exports` (torch.onnx dynamo,
/// graph only) at the input shapes `exports.rs` uses: every folded node.
#[test]
fn exports_fold_to_what_running_gives() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/exports");
    let text = |n: &str| (n.to_string(), vec![2, 128]);
    for (name, shapes) in [
        ("bert-base", vec![text("input_ids"), text("attention_mask")]),
        ("gpt2", vec![text("input_ids")]),
        (
            "vit-b16",
            vec![("pixel_values".into(), vec![2, 3, 224, 224])],
        ),
        ("lstm-lm", vec![("input_ids".into(), vec![2, 35])]),
        (
            "resnet50",
            vec![("pixel_values".into(), vec![2, 3, 224, 224])],
        ),
    ] {
        let opts = onnx::Options {
            input_shapes: shapes.into_iter().collect(),
            ..Default::default()
        };
        match check(&dir.join(format!("{name}.onnx")), &opts, usize::MAX) {
            Some(n) => {
                // The ResNet-50 export has no shape-computing nodes: nothing folds.
                assert!(n > 0 || name == "resnet50", "{name}: nothing folded");
                println!("{name}: {n} folded nodes equal running");
            }
            None => panic!("{name} does not import"),
        }
    }
}
