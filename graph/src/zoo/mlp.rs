//! `mlp-<layers>-<hidden>`: a multi-layer perceptron (Tofu Figure 7).
//!
//! Shapes (B = batch, H = hidden): input `x[B, input]`, then `layers` dense
//! layers `matmul` + `bias_add` (weight `fc{i}.w[in, out]`, bias
//! `fc{i}.b[out]`) with `relu` between them, and `cross_entropy` against
//! integer class ids `labels[B]` (PyTorch's `F.cross_entropy`). By default `input` =
//! `classes` = H, so every weight is H×H and the coarsened graph is a chain.

use tdl::Library;

use super::layers::{class_id_loss, class_labels};
use crate::{DType, Fill, Graph, GraphBuilder, GraphError};

/// Configuration of an MLP.
#[derive(Clone, Debug, PartialEq)]
pub struct MlpConfig {
    /// Number of dense layers (weights).
    pub layers: usize,
    /// Width of every hidden layer.
    pub hidden: usize,
    /// Input features.
    pub input: usize,
    /// Output classes.
    pub classes: usize,
    /// Batch size.
    pub batch: usize,
}

impl MlpConfig {
    /// `mlp-<layers>-<hidden>` with input = classes = hidden and batch 512.
    pub fn new(layers: usize, hidden: usize) -> MlpConfig {
        MlpConfig {
            layers,
            hidden,
            input: hidden,
            classes: hidden,
            batch: 512,
        }
    }

    /// A small configuration of the same structure (3 layers, width 4, batch 3).
    pub fn tiny() -> MlpConfig {
        MlpConfig {
            layers: 3,
            hidden: 4,
            input: 5,
            classes: 3,
            batch: 3,
        }
    }

    /// Zoo name.
    pub fn name(&self) -> String {
        format!("mlp-{}-{}", self.layers, self.hidden)
    }

    /// The forward graph.
    ///
    /// Errors: [`GraphError`] naming the operator whose spec is missing or does not fit.
    pub fn forward(&self, lib: &Library) -> Result<Graph, GraphError> {
        let mut b = GraphBuilder::new(lib, &self.name());
        let mut h = b.input(
            "x",
            &[self.batch, self.input],
            DType::F32,
            Fill::Normal { std: 1.0 },
        )?;
        let labels = class_labels(&mut b, &[self.batch], self.classes)?;
        let mut width = self.input;
        for i in 0..self.layers {
            let out = if i + 1 == self.layers {
                self.classes
            } else {
                self.hidden
            };
            let w = b.weight(
                &format!("fc{i}.w"),
                &[width, out],
                (2.0 / width as f64).sqrt(),
            )?;
            let bias = b.weight_const(&format!("fc{i}.b"), &[out], 0.0)?;
            h = b.op1("matmul", &format!("fc{i}"), &[h, w], &[])?;
            h = b.op1("bias_add", &format!("fc{i}.bias"), &[h, bias], &[])?;
            if i + 1 < self.layers {
                h = b.op1("relu", &format!("fc{i}.relu"), &[h], &[])?;
            }
            width = out;
        }
        let loss = class_id_loss(&mut b, h, labels)?;
        b.finish(loss)
    }
}
