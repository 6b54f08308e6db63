//! The ONNX import flags `tofu plan` and `tofu train MODEL.onnx` share.

/// How to import an ONNX model (clap; flattened into the commands' args).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct ImportArgs {
    /// ONNX: value of a named dynamic dim, e.g. `--dim seq_len=512` (repeatable).
    /// Defaults: batch dim (axis 0) → --batch or 1; sequence-like names → 128;
    /// height/width → 224.
    #[arg(long = "dim", value_name = "NAME=VALUE")]
    pub dim: Vec<String>,
    /// ONNX: the whole shape of a graph input, e.g. `--input-shape images=1,3,320,320`
    /// (repeatable; gives every dynamic dim of that input, named or `?`).
    #[arg(long = "input-shape", value_name = "NAME=D0,D1,...")]
    pub input_shape: Vec<String>,
    /// ONNX: fix a graph input to a value at import, e.g. `--input-value sample_rate=16000`
    /// (repeatable; folded like a constant, so `If` conditions and `Range` limits resolve).
    #[arg(long = "input-value", value_name = "NAME=V[,V...]")]
    pub input_value: Vec<String>,
    /// ONNX: the output the loss is taken on (default: the first graph output; a
    /// non-scalar output gets a softmax cross-entropy loss against `loss.labels`).
    #[arg(long)]
    pub loss: Option<String>,
    /// ONNX: the loss's `loss.labels` are probabilities `[…, classes]`, not class ids `[…]`.
    #[arg(long)]
    pub soft_labels: bool,
    /// ONNX: import nodes without a spec mapping as opaque operators
    /// (replicated or split along their batch dim only) instead of failing.
    #[arg(long)]
    pub opaque_unsupported: bool,
    /// ONNX: map custom nodes to a spec, `DOMAIN::OP=SPEC` (repeatable).
    #[arg(long, value_name = "DOMAIN::OP=SPEC")]
    pub op_map: Vec<String>,
}

impl ImportArgs {
    /// The import options of the flags, with `batch`, `optimizer` and
    /// whether to build the training graph.
    pub fn options(
        &self,
        batch: Option<usize>,
        optimizer: &str,
        training: bool,
    ) -> onnx::ImportOptions {
        onnx::ImportOptions {
            batch,
            dims: self.dim.clone(),
            input_shapes: self.input_shape.clone(),
            input_values: self.input_value.clone(),
            training,
            loss: self.loss.clone(),
            class_ids: training && !self.soft_labels,
            optimizer: optimizer.to_string(),
            weight_decay: 0.0,
            opaque_unsupported: self.opaque_unsupported,
            op_map: self.op_map.clone(),
        }
    }
}
