//! ONNX models built in the tests (protobuf messages written directly):
//! value infos, nodes, small constants, and the `If`-on-a-shape model.

use std::path::{Path, PathBuf};

use onnx::synth::{decoder, DecoderConfig};
use onnx_protobuf::tensor_proto::DataLocation;
use onnx_protobuf::StringStringEntryProto;

use onnx_protobuf::attribute_proto::AttributeType;
use onnx_protobuf::{
    type_proto, AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
    TensorShapeProto, TypeProto, ValueInfoProto,
};

pub fn vi(name: &str, elem: i32, dims: &[i64]) -> ValueInfoProto {
    let mut shape = TensorShapeProto::new();
    for &d in dims {
        let mut dim = onnx_protobuf::tensor_shape_proto::Dimension::new();
        if d < 0 {
            dim.set_dim_param("batch".into());
        } else {
            dim.set_dim_value(d);
        }
        shape.dim.push(dim);
    }
    let mut tt = type_proto::Tensor::new();
    tt.elem_type = elem;
    tt.shape = Some(shape).into();
    let mut tp = TypeProto::new();
    tp.set_tensor_type(tt);
    let mut v = ValueInfoProto::new();
    v.name = name.into();
    v.type_ = Some(tp).into();
    v
}

pub fn node(op: &str, ins: &[&str], outs: &[&str], attrs: Vec<AttributeProto>) -> NodeProto {
    let mut n = NodeProto::new();
    n.op_type = op.into();
    n.name = outs[0].into();
    n.input = ins.iter().map(|s| s.to_string()).collect();
    n.output = outs.iter().map(|s| s.to_string()).collect();
    n.attribute = attrs;
    n
}

pub fn ints(name: &str, v: &[i64], scalar: bool) -> TensorProto {
    let mut t = TensorProto::new();
    t.name = name.into();
    t.data_type = 7;
    if !scalar {
        t.dims = vec![v.len() as i64];
    }
    t.int64_data = v.to_vec();
    t
}

pub fn graph_attr(name: &str, g: GraphProto) -> AttributeProto {
    let mut a = AttributeProto::new();
    a.name = name.into();
    a.type_ = AttributeType::GRAPH.into();
    a.g = Some(g).into();
    a
}

pub fn model(g: GraphProto) -> onnx::proto::Model {
    model_with_opsets(g, &[("", 17)])
}

/// A model of `g` importing `opsets` (domain, version; `""` is ai.onnx).
pub fn model_with_opsets(g: GraphProto, opsets: &[(&str, i64)]) -> onnx::proto::Model {
    let mut m = ModelProto::new();
    m.ir_version = 8;
    m.opset_import = opsets
        .iter()
        .map(|&(domain, version)| {
            let mut o = OperatorSetIdProto::new();
            o.domain = domain.into();
            o.version = version;
            o
        })
        .collect();
    m.graph = Some(g).into();
    onnx::proto::decode(&onnx::synth::to_bytes(&m), Path::new("cf.onnx")).unwrap()
}

pub fn branch(op: &str) -> GraphProto {
    let mut g = GraphProto::new();
    g.name = op.into();
    g.node = vec![node(op, &["x"], &["y_branch"], vec![])];
    g.output = vec![vi("y_branch", 1, &[])];
    g
}

/// `y = If(Shape(x)[1] == width) then Relu(x) else Neg(x)`.
pub fn if_on_shape(width: i64) -> onnx::proto::Model {
    let mut g = GraphProto::new();
    g.name = "if_on_shape".into();
    g.input = vec![vi("x", 1, &[-1, 4])];
    g.output = vec![vi("y", 1, &[-1, 4])];
    g.initializer = vec![ints("one", &[1], true), ints("width", &[width], true)];
    g.node = vec![
        node("Shape", &["x"], &["s"], vec![]),
        node("Gather", &["s", "one"], &["s1"], vec![]),
        node("Equal", &["s1", "width"], &["c"], vec![]),
        node(
            "If",
            &["c"],
            &["y"],
            vec![
                graph_attr("then_branch", branch("Relu")),
                graph_attr("else_branch", branch("Neg")),
            ],
        ),
    ];
    model(g)
}

/// A tiny decoder (`onnx::synth`) whose weights and head-split target shape
/// (`heads_tail`, 16 bytes at offset 8 of `shape.bin`) are external data;
/// gives the model's path (written into `dir`) and the shape's bytes.
pub fn with_external_shape(dir: &Path) -> (PathBuf, Vec<u8>) {
    let cfg = DecoderConfig {
        layers: 1,
        d_model: 8,
        ffn: 16,
        heads: 2,
        vocab: 11,
        data_file: "w.bin".into(),
    };
    let mut m = decoder(&cfg);
    let g = m.graph.as_mut().unwrap();
    let t = g
        .initializer
        .iter_mut()
        .find(|t| t.name == "heads_tail")
        .unwrap();
    let bytes: Vec<u8> = t.int64_data.iter().flat_map(|v| v.to_le_bytes()).collect();
    t.int64_data.clear();
    t.data_location = DataLocation::EXTERNAL.into();
    for (k, v) in [("location", "shape.bin"), ("offset", "8"), ("length", "16")] {
        let mut e = StringStringEntryProto::new();
        e.key = k.into();
        e.value = v.into();
        t.external_data.push(e);
    }
    let p = dir.join("tiny.onnx");
    std::fs::write(&p, onnx::synth::to_bytes(&m)).unwrap();
    (p, bytes)
}

/// A float32 tensor (initializer or input value).
pub fn floats(name: &str, dims: &[i64], v: &[f32]) -> TensorProto {
    let mut t = TensorProto::new();
    t.name = name.into();
    t.data_type = 1;
    t.dims = dims.to_vec();
    t.float_data = v.to_vec();
    t
}

/// An attribute: int (`i`), float (`f`), string (`s`), strings (`ss`) or floats (`fs`).
pub enum A<'a> {
    I(i64),
    F(f32),
    S(&'a str),
    Ss(&'a [&'a str]),
    Fs(&'a [f32]),
}

/// Build an attribute.
pub fn attr(name: &str, v: A) -> AttributeProto {
    let mut a = AttributeProto::new();
    a.name = name.into();
    match v {
        A::I(i) => {
            a.type_ = AttributeType::INT.into();
            a.i = i;
        }
        A::F(f) => {
            a.type_ = AttributeType::FLOAT.into();
            a.f = f;
        }
        A::S(s) => {
            a.type_ = AttributeType::STRING.into();
            a.s = s.as_bytes().to_vec();
        }
        A::Ss(ss) => {
            a.type_ = AttributeType::STRINGS.into();
            a.strings = ss.iter().map(|s| s.as_bytes().to_vec()).collect();
        }
        A::Fs(fs) => {
            a.type_ = AttributeType::FLOATS.into();
            a.floats = fs.to_vec();
        }
    }
    a
}

/// One recurrent node (`op` = LSTM, GRU or RNN) as a model. `slots` are its
/// inputs in ONNX order (X, W, R, B, sequence_lens, initial_h, initial_c,
/// P) with their dims; an empty name leaves the slot out. A slot named like
/// one of `weights` is that initializer (a trainable weight), the others
/// are graph inputs (float, `sequence_lens` int32). `outputs` are Y, Y_h,
/// Y_c (empty: not requested).
pub fn recurrent(
    op: &str,
    slots: &[(&str, Vec<i64>)],
    weights: Vec<TensorProto>,
    attrs: Vec<AttributeProto>,
    outputs: &[&str],
) -> onnx::proto::Model {
    let mut g = GraphProto::new();
    g.name = op.to_lowercase();
    for (name, dims) in slots {
        if name.is_empty() || weights.iter().any(|w| w.name == *name) {
            continue;
        }
        let elem = if *name == "sequence_lens" { 6 } else { 1 };
        g.input.push(vi(name, elem, dims));
    }
    g.output = outputs
        .iter()
        .filter(|o| !o.is_empty())
        .map(|o| vi(o, 1, &[]))
        .collect();
    g.initializer = weights;
    let ins: Vec<&str> = slots.iter().map(|(n, _)| *n).collect();
    let mut n = node(op, &ins, outputs, attrs);
    n.name = format!("{}_0", op.to_lowercase());
    g.node = vec![n];
    model(g)
}

/// An ints attribute (`pads`, `strides`, `kernel_shape`, …).
pub fn ints_attr(name: &str, v: &[i64]) -> AttributeProto {
    let mut a = AttributeProto::new();
    a.name = name.into();
    a.type_ = AttributeType::INTS.into();
    a.ints = v.to_vec();
    a
}
