//! Shared helpers of the `tofu run --save-outputs` tests: small ONNX
//! models built with `onnx-protobuf`, safetensors files of f32, the
//! normwise relative error, and the `tofu plan` / `tofu run` calls.

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use onnx_protobuf::{
    tensor_shape_proto, type_proto, AttributeProto, GraphProto, Message, ModelProto, NodeProto,
    OperatorSetIdProto, TensorProto, TensorShapeProto, TypeProto, ValueInfoProto,
};
use safetensors::{Dtype, SafeTensors};
use tofu_tests::{text, tofu};

/// The tolerance of issue 26: 1e-4 relative.
pub const TOLERANCE: f64 = 1e-4;

/// `‖a − b‖₂ / max(‖b‖₂, 1e-3·√n)`, as `runner::max_rel_error`.
pub fn rel_error(a: &[f32], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len(), "lengths differ");
    let nb = b.iter().map(|x| x * x).sum::<f64>().sqrt();
    let nd = a
        .iter()
        .zip(b)
        .map(|(x, y)| (*x as f64 - y).powi(2))
        .sum::<f64>()
        .sqrt();
    nd / nb.max(1e-3 * (b.len().max(1) as f64).sqrt())
}

/// Deterministic values in [-1, 1) (SplitMix64).
pub fn random(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            (z >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

/// A float tensor's type and shape.
pub fn value_info(name: &str, dims: &[i64]) -> ValueInfoProto {
    typed_value_info(name, 1, dims)
}

/// A tensor's type (ONNX `TensorProto.DataType`: 1 float, 7 int64) and shape.
pub fn typed_value_info(name: &str, elem_type: i32, dims: &[i64]) -> ValueInfoProto {
    let mut shape = TensorShapeProto::new();
    for &d in dims {
        let mut dim = tensor_shape_proto::Dimension::new();
        dim.set_dim_value(d);
        shape.dim.push(dim);
    }
    let mut tt = type_proto::Tensor::new();
    tt.elem_type = elem_type;
    tt.shape = Some(shape).into();
    let mut tp = TypeProto::new();
    tp.set_tensor_type(tt);
    let mut v = ValueInfoProto::new();
    v.name = name.into();
    v.type_ = Some(tp).into();
    v
}

/// A node with integer (list) attributes.
pub fn node(op: &str, inputs: &[&str], output: &str, ints: &[(&str, Vec<i64>)]) -> NodeProto {
    let mut n = NodeProto::new();
    n.name = output.into();
    n.op_type = op.into();
    n.input = inputs.iter().map(|s| s.to_string()).collect();
    n.output = vec![output.into()];
    for (name, v) in ints {
        let mut a = AttributeProto::new();
        a.name = name.to_string();
        if v.len() == 1 && *name != "pads" && *name != "kernel_shape" {
            a.type_ = onnx_protobuf::attribute_proto::AttributeType::INT.into();
            a.i = v[0];
        } else {
            a.type_ = onnx_protobuf::attribute_proto::AttributeType::INTS.into();
            a.ints = v.clone();
        }
        n.attribute.push(a);
    }
    n
}

/// A model of `nodes` reading `input`, with float initializers `weights`
/// (name, dims, values), giving `outputs`.
pub fn model(
    input: (&str, &[i64]),
    weights: &[(&str, Vec<i64>, Vec<f32>)],
    nodes: Vec<NodeProto>,
    outputs: &[(&str, &[i64])],
) -> Vec<u8> {
    let mut g = GraphProto::new();
    g.name = "save_outputs_test".into();
    g.input.push(value_info(input.0, input.1));
    for (name, dims, values) in weights {
        let mut t = TensorProto::new();
        t.name = name.to_string();
        t.data_type = 1;
        t.dims = dims.clone();
        t.float_data = values.clone();
        g.initializer.push(t);
    }
    g.node = nodes;
    for (n, s) in outputs {
        g.output.push(value_info(n, s));
    }
    serialise(g)
}

/// `g` as a serialised ONNX model (IR 8, opset 17).
pub fn serialise(g: GraphProto) -> Vec<u8> {
    let mut m = ModelProto::new();
    m.ir_version = 8;
    let mut op = OperatorSetIdProto::new();
    op.version = 17;
    m.opset_import.push(op);
    m.graph = Some(g).into();
    m.write_to_bytes().expect("serialises")
}

/// A safetensors file of f32 tensors.
pub fn write_f32(path: &Path, tensors: &[(&str, Vec<usize>, Vec<f32>)]) {
    let bytes: Vec<(String, Vec<usize>, Vec<u8>)> = tensors
        .iter()
        .map(|(n, s, v)| {
            (
                n.to_string(),
                s.clone(),
                v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            )
        })
        .collect();
    let views: Vec<(String, safetensors::tensor::TensorView)> = bytes
        .iter()
        .map(|(n, s, b)| {
            (
                n.clone(),
                safetensors::tensor::TensorView::new(Dtype::F32, s.clone(), b).unwrap(),
            )
        })
        .collect();
    std::fs::write(path, safetensors::serialize(views, None).unwrap()).unwrap();
}

/// Every tensor of a safetensors file as f32.
pub fn read_f32(path: &Path) -> HashMap<String, (Vec<usize>, Vec<f32>)> {
    let bytes = std::fs::read(path).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    st.tensors()
        .into_iter()
        .map(|(n, v)| {
            assert_eq!(v.dtype(), Dtype::F32, "{n}");
            let vals = v
                .data()
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect();
            (n, (v.shape().to_vec(), vals))
        })
        .collect()
}

/// Plan `onnx` for k workers; gives the plan file.
pub fn plan(dir: &Path, onnx: &Path, k: usize) -> PathBuf {
    plan_with(dir, onnx, k, &[])
}

/// Plan `onnx` for k workers with more `tofu plan` flags (`--input-value
/// sr=16000`); gives the plan file.
pub fn plan_with(dir: &Path, onnx: &Path, k: usize, flags: &[&str]) -> PathBuf {
    let out = dir.join(format!("plan-{k}.json"));
    let mut args = vec![
        "plan".to_string(),
        onnx.display().to_string(),
        "-k".into(),
        k.to_string(),
        "-o".into(),
        out.display().to_string(),
    ];
    args.extend(flags.iter().map(|f| f.to_string()));
    let o = tofu(&args);
    assert!(o.status.success(), "plan k={k}: {}", text(&o).1);
    out
}

/// `tofu run PLAN --weights ONNX [--inputs IN] --save-outputs OUT`.
pub fn save_outputs(
    plan: &Path,
    onnx: &Path,
    inputs: Option<&Path>,
    out: &Path,
) -> std::process::Output {
    let mut args = vec![
        "run".to_string(),
        plan.display().to_string(),
        "--weights".into(),
        onnx.display().to_string(),
        "--save-outputs".into(),
        out.display().to_string(),
    ];
    if let Some(i) = inputs {
        args.extend(["--inputs".into(), i.display().to_string()]);
    }
    tofu(&args)
}
