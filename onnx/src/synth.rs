//! Graph-only ONNX models generated from a configuration: a decoder-only
//! transformer (LLaMA-like) whose weights are external data that need not
//! exist, so a model too big for this machine can be imported and planned.
//!
//! Takes a [`DecoderConfig`] (layers, model width d, feed-forward width,
//! heads, vocabulary, sequence length); gives a [`ModelProto`] (opset 17)
//! as an exporter such as torch.onnx writes it: token ids
//! `input_ids[batch, sequence]` (int64, both dims dynamic) → embedding
//! `Gather` → per layer RMSNorm (`Pow`, `ReduceMean`, `Add`, `Sqrt`, `Div`,
//! `Mul`), attention with its head split through a run-time shape chain
//! (`Shape → Gather → Unsqueeze → Concat → Reshape`, folded at import once
//! the input dims are fixed), `Transpose`, `MatMul`, `Softmax`, and a SwiGLU
//! feed-forward (`Sigmoid`, `Mul`) → final norm → `logits[batch, sequence,
//! vocab]`. Every float weight is an initializer with
//! `data_location = EXTERNAL` pointing into one data file (consecutive
//! offsets), which is never written: planning reads no weight byte.
//! Parameters: layers·(4d² + 3d·ffn + 2d) + 2·vocab·d + d.

use onnx_protobuf::attribute_proto::AttributeType;
use onnx_protobuf::tensor_proto::DataLocation;
use onnx_protobuf::tensor_shape_proto::{dimension, Dimension};
use onnx_protobuf::{
    type_proto, AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto,
    StringStringEntryProto, TensorProto, TensorShapeProto, TypeProto, ValueInfoProto,
};

/// The configuration of a generated decoder.
#[derive(Clone, Debug, PartialEq)]
pub struct DecoderConfig {
    /// Decoder layers.
    pub layers: usize,
    /// Model width d (elements).
    pub d_model: usize,
    /// Feed-forward width (elements).
    pub ffn: usize,
    /// Attention heads (d_model must be a multiple).
    pub heads: usize,
    /// Vocabulary size (tokens).
    pub vocab: usize,
    /// The external data file the initializers name (relative to the model).
    pub data_file: String,
}

impl DecoderConfig {
    /// LLaMA-7B: 32 layers, d = 4096, ffn 11008, 32 heads, vocabulary 32000
    /// (6.74 billion parameters).
    pub fn llama_7b() -> DecoderConfig {
        DecoderConfig {
            layers: 32,
            d_model: 4096,
            ffn: 11008,
            heads: 32,
            vocab: 32000,
            data_file: "weights.bin".into(),
        }
    }

    /// Trainable parameters of the model (elements; see the module doc).
    pub fn parameters(&self) -> u64 {
        let (d, f, v) = (self.d_model as u64, self.ffn as u64, self.vocab as u64);
        self.layers as u64 * (4 * d * d + 3 * d * f + 2 * d) + 2 * v * d + d
    }
}

struct Builder {
    nodes: Vec<NodeProto>,
    inits: Vec<TensorProto>,
    offset: u64,
    data_file: String,
}

fn attr_int(name: &str, v: i64) -> AttributeProto {
    let mut a = AttributeProto::new();
    a.name = name.into();
    a.type_ = AttributeType::INT.into();
    a.i = v;
    a
}

fn attr_ints(name: &str, v: &[i64]) -> AttributeProto {
    let mut a = AttributeProto::new();
    a.name = name.into();
    a.type_ = AttributeType::INTS.into();
    a.ints = v.to_vec();
    a
}

impl Builder {
    fn node(&mut self, op: &str, name: &str, ins: &[&str], attrs: Vec<AttributeProto>) -> String {
        let mut n = NodeProto::new();
        n.op_type = op.into();
        n.name = name.into();
        n.input = ins.iter().map(|s| s.to_string()).collect();
        let out = format!("{name}_out");
        n.output = vec![out.clone()];
        n.attribute = attrs;
        self.nodes.push(n);
        out
    }

    /// A float weight kept in the external data file.
    fn weight(&mut self, name: &str, dims: &[usize]) -> String {
        let mut t = TensorProto::new();
        t.name = name.into();
        t.data_type = 1;
        t.dims = dims.iter().map(|&d| d as i64).collect();
        t.data_location = DataLocation::EXTERNAL.into();
        let length = dims.iter().product::<usize>() as u64 * 4;
        for (k, v) in [
            ("location", self.data_file.clone()),
            ("offset", self.offset.to_string()),
            ("length", length.to_string()),
        ] {
            let mut e = StringStringEntryProto::new();
            e.key = k.into();
            e.value = v;
            t.external_data.push(e);
        }
        self.offset += length;
        self.inits.push(t);
        name.into()
    }

    /// A small inline constant (int64 list, or a float scalar).
    fn ints(&mut self, name: &str, v: &[i64]) -> String {
        let mut t = TensorProto::new();
        t.name = name.into();
        t.data_type = 7;
        t.dims = vec![v.len() as i64];
        t.int64_data = v.to_vec();
        self.inits.push(t);
        name.into()
    }

    fn scalar(&mut self, name: &str, v: f32) -> String {
        let mut t = TensorProto::new();
        t.name = name.into();
        t.data_type = 1;
        t.float_data = vec![v];
        self.inits.push(t);
        name.into()
    }

    fn rms_norm(&mut self, p: &str, x: &str, d: usize) -> String {
        let g = self.weight(&format!("{p}.weight"), &[d]);
        let sq = self.node("Pow", &format!("{p}/pow"), &[x, "two"], vec![]);
        let ms = self.node(
            "ReduceMean",
            &format!("{p}/mean"),
            &[&sq],
            vec![attr_ints("axes", &[-1]), attr_int("keepdims", 1)],
        );
        let e = self.node("Add", &format!("{p}/add_eps"), &[&ms, "eps"], vec![]);
        let r = self.node("Sqrt", &format!("{p}/sqrt"), &[&e], vec![]);
        let n = self.node("Div", &format!("{p}/div"), &[x, &r], vec![]);
        self.node("Mul", &format!("{p}/scale"), &[&n, &g], vec![])
    }

    /// The run-time shape chain of an exporter: `[B, S] ++ tail` from `x`'s shape.
    fn batch_seq_shape(&mut self, p: &str, x: &str, tail: &str) -> String {
        let s = self.node("Shape", &format!("{p}/shape"), &[x], vec![]);
        let b = self.node(
            "Gather",
            &format!("{p}/gather_b"),
            &[&s, "zero"],
            vec![attr_int("axis", 0)],
        );
        let q = self.node(
            "Gather",
            &format!("{p}/gather_s"),
            &[&s, "one"],
            vec![attr_int("axis", 0)],
        );
        let bu = self.node("Unsqueeze", &format!("{p}/unsq_b"), &[&b, "axes0"], vec![]);
        let qu = self.node("Unsqueeze", &format!("{p}/unsq_s"), &[&q, "axes0"], vec![]);
        self.node(
            "Concat",
            &format!("{p}/concat"),
            &[&bu, &qu, tail],
            vec![attr_int("axis", 0)],
        )
    }
}

fn value_info(name: &str, elem: i32, dims: &[Result<i64, &str>]) -> ValueInfoProto {
    let mut shape = TensorShapeProto::new();
    for d in dims {
        let mut dim = Dimension::new();
        dim.value = Some(match d {
            Ok(v) => dimension::Value::DimValue(*v),
            Err(p) => dimension::Value::DimParam(p.to_string()),
        });
        shape.dim.push(dim);
    }
    let mut tt = type_proto::Tensor::new();
    tt.elem_type = elem;
    tt.shape = Some(shape).into();
    let mut tp = TypeProto::new();
    tp.set_tensor_type(tt);
    let mut vi = ValueInfoProto::new();
    vi.name = name.into();
    vi.type_ = Some(tp).into();
    vi
}

/// The decoder of `cfg` (see the module doc).
pub fn decoder(cfg: &DecoderConfig) -> ModelProto {
    let (d, f, h) = (cfg.d_model, cfg.ffn, cfg.heads);
    let dh = d / h.max(1);
    let mut b = Builder {
        nodes: Vec::new(),
        inits: Vec::new(),
        offset: 0,
        data_file: cfg.data_file.clone(),
    };
    b.scalar("two", 2.0);
    b.scalar("eps", 1e-6);
    b.scalar("attn_scale", 1.0 / (dh as f32).sqrt());
    let mut t = TensorProto::new();
    t.name = "zero".into();
    t.data_type = 7;
    t.int64_data = vec![0];
    b.inits.push(t.clone());
    t.name = "one".into();
    t.int64_data = vec![1];
    b.inits.push(t);
    b.ints("axes0", &[0]);
    b.ints("heads_tail", &[h as i64, dh as i64]);
    b.ints("model_tail", &[d as i64]);
    let emb = b.weight("embed_tokens.weight", &[cfg.vocab, d]);
    let mut x = b.node(
        "Gather",
        "embed_tokens",
        &[&emb, "input_ids"],
        vec![attr_int("axis", 0)],
    );
    for i in 0..cfg.layers {
        let p = format!("layers.{i}");
        let hn = b.rms_norm(&format!("{p}.input_layernorm"), &x, d);
        let mut heads = Vec::new();
        for (proj, perm) in [
            ("q", [0, 2, 1, 3]),
            ("k", [0, 2, 3, 1]),
            ("v", [0, 2, 1, 3]),
        ] {
            let w = b.weight(&format!("{p}.self_attn.{proj}_proj.weight"), &[d, d]);
            let y = b.node(
                "MatMul",
                &format!("{p}/attn/{proj}_proj"),
                &[&hn, &w],
                vec![],
            );
            let shape = b.batch_seq_shape(&format!("{p}/attn/{proj}_split"), &y, "heads_tail");
            let r = b.node(
                "Reshape",
                &format!("{p}/attn/{proj}_reshape"),
                &[&y, &shape],
                vec![],
            );
            heads.push(b.node(
                "Transpose",
                &format!("{p}/attn/{proj}_transpose"),
                &[&r],
                vec![attr_ints("perm", &perm)],
            ));
        }
        let s = b.node(
            "MatMul",
            &format!("{p}/attn/scores"),
            &[&heads[0], &heads[1]],
            vec![],
        );
        let s = b.node(
            "Mul",
            &format!("{p}/attn/scale"),
            &[&s, "attn_scale"],
            vec![],
        );
        let pr = b.node(
            "Softmax",
            &format!("{p}/attn/softmax"),
            &[&s],
            vec![attr_int("axis", -1)],
        );
        let c = b.node(
            "MatMul",
            &format!("{p}/attn/context"),
            &[&pr, &heads[2]],
            vec![],
        );
        let c = b.node(
            "Transpose",
            &format!("{p}/attn/merge_transpose"),
            &[&c],
            vec![attr_ints("perm", &[0, 2, 1, 3])],
        );
        let shape = b.batch_seq_shape(&format!("{p}/attn/merge"), &x, "model_tail");
        let c = b.node(
            "Reshape",
            &format!("{p}/attn/merge_reshape"),
            &[&c, &shape],
            vec![],
        );
        let wo = b.weight(&format!("{p}.self_attn.o_proj.weight"), &[d, d]);
        let o = b.node("MatMul", &format!("{p}/attn/o_proj"), &[&c, &wo], vec![]);
        x = b.node("Add", &format!("{p}/attn/residual"), &[&x, &o], vec![]);
        let hn = b.rms_norm(&format!("{p}.post_attention_layernorm"), &x, d);
        let wg = b.weight(&format!("{p}.mlp.gate_proj.weight"), &[d, f]);
        let wu = b.weight(&format!("{p}.mlp.up_proj.weight"), &[d, f]);
        let wd = b.weight(&format!("{p}.mlp.down_proj.weight"), &[f, d]);
        let g = b.node("MatMul", &format!("{p}/mlp/gate_proj"), &[&hn, &wg], vec![]);
        let sg = b.node("Sigmoid", &format!("{p}/mlp/sigmoid"), &[&g], vec![]);
        let act = b.node("Mul", &format!("{p}/mlp/silu"), &[&g, &sg], vec![]);
        let u = b.node("MatMul", &format!("{p}/mlp/up_proj"), &[&hn, &wu], vec![]);
        let m = b.node("Mul", &format!("{p}/mlp/gate_up"), &[&act, &u], vec![]);
        let dn = b.node("MatMul", &format!("{p}/mlp/down_proj"), &[&m, &wd], vec![]);
        x = b.node("Add", &format!("{p}/mlp/residual"), &[&x, &dn], vec![]);
    }
    let xn = b.rms_norm("norm", &x, d);
    let lm = b.weight("lm_head.weight", &[d, cfg.vocab]);
    let logits = b.node("MatMul", "lm_head", &[&xn, &lm], vec![]);
    b.nodes.last_mut().expect("lm_head was pushed").output = vec!["logits".into()];
    let _ = logits;
    let mut g = GraphProto::new();
    g.name = format!("decoder_{}l_{}d", cfg.layers, d);
    g.node = b.nodes;
    g.initializer = b.inits;
    g.input = vec![value_info("input_ids", 7, &[Err("batch"), Err("sequence")])];
    g.output = vec![value_info(
        "logits",
        1,
        &[Err("batch"), Err("sequence"), Ok(cfg.vocab as i64)],
    )];
    let mut m = ModelProto::new();
    m.ir_version = 8;
    m.producer_name = "tofu onnx::synth".into();
    let mut o = OperatorSetIdProto::new();
    o.version = 17;
    m.opset_import = vec![o];
    m.graph = Some(g).into();
    m
}

/// The bytes of a model (protobuf).
pub fn to_bytes(m: &ModelProto) -> Vec<u8> {
    use onnx_protobuf::Message;
    m.write_to_bytes().unwrap_or_default()
}
