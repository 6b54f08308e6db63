//! `cnn-<channels>-<hidden>`: a small convolutional classifier for 28×28
//! images (LeNet-style; what `tofu train --data fashion-mnist` trains).
//!
//! Shapes (B = batch, C = channels, H = hidden): input `x[B, in, 28, 28]` →
//! `conv1` (3×3, padding 1, weight `conv1.w[C, in, 3, 3]`, bias
//! `conv1.b[C]`) → ReLU → 2×2 max-pool → `conv2` (3×3, padding 1, `2C`
//! channels) → ReLU → 2×2 max-pool → flatten `[B, 2C·7·7]` → `fc0`
//! (dense `H`, bias) → ReLU → `fc1` (dense `classes`, bias) →
//! `cross_entropy` against integer class ids `labels[B]` (PyTorch's
//! `F.cross_entropy`).

use tdl::Library;

use super::layers::{class_id_loss, class_labels};
use crate::{int, DType, Fill, Graph, GraphBuilder, GraphError, TensorId};

/// Configuration of a CNN.
#[derive(Clone, Debug, PartialEq)]
pub struct CnnConfig {
    /// Channels of the first convolution (the second has twice as many).
    pub channels: usize,
    /// Width of the hidden dense layer.
    pub hidden: usize,
    /// Input channels (1: grey images).
    pub in_channels: usize,
    /// Image side (pixels; a multiple of 4).
    pub image: usize,
    /// Output classes.
    pub classes: usize,
    /// Batch size.
    pub batch: usize,
}

impl CnnConfig {
    /// `cnn-<channels>-<hidden>` for 28×28 grey images, 10 classes, batch 64.
    pub fn new(channels: usize, hidden: usize) -> CnnConfig {
        CnnConfig {
            channels,
            hidden,
            in_channels: 1,
            image: 28,
            classes: 10,
            batch: 64,
        }
    }

    /// A small configuration of the same structure (2 channels, 8×8 images).
    pub fn tiny() -> CnnConfig {
        CnnConfig {
            channels: 2,
            hidden: 5,
            in_channels: 1,
            image: 8,
            classes: 3,
            batch: 2,
        }
    }

    /// Zoo name.
    pub fn name(&self) -> String {
        format!("cnn-{}-{}", self.channels, self.hidden)
    }

    /// The forward graph.
    ///
    /// Errors: [`GraphError`] naming the operator whose spec is missing or does not fit.
    pub fn forward(&self, lib: &Library) -> Result<Graph, GraphError> {
        let mut b = GraphBuilder::new(lib, &self.name());
        let side = self.image;
        let x = b.input(
            "x",
            &[self.batch, self.in_channels, side, side],
            DType::F32,
            Fill::Normal { std: 1.0 },
        )?;
        let labels = class_labels(&mut b, &[self.batch], self.classes)?;
        let c = self.channels;
        let h = conv_relu_pool(&mut b, "conv1", x, self.in_channels, c)?;
        let h = conv_relu_pool(&mut b, "conv2", h, c, 2 * c)?;
        let mut h = b.op1("flatten", "flatten", &[h], &[])?;
        let widths = [2 * c * (side / 4) * (side / 4), self.hidden, self.classes];
        for i in 0..2 {
            let w = b.weight(
                &format!("fc{i}.w"),
                &[widths[i], widths[i + 1]],
                (2.0 / widths[i] as f64).sqrt(),
            )?;
            let bias = b.weight_const(&format!("fc{i}.b"), &[widths[i + 1]], 0.0)?;
            h = b.op1("matmul", &format!("fc{i}"), &[h, w], &[])?;
            h = b.op1("bias_add", &format!("fc{i}.bias"), &[h, bias], &[])?;
            if i == 0 {
                h = b.op1("relu", "fc0.relu", &[h], &[])?;
            }
        }
        let loss = class_id_loss(&mut b, h, labels)?;
        b.finish(loss)
    }
}

/// 3×3 convolution (padding 1) with a bias, ReLU, then 2×2 max-pooling.
fn conv_relu_pool(
    b: &mut GraphBuilder,
    name: &str,
    x: TensorId,
    cin: usize,
    cout: usize,
) -> Result<TensorId, GraphError> {
    let w = b.weight(
        &format!("{name}.w"),
        &[cout, cin, 3, 3],
        (2.0 / (cin * 9) as f64).sqrt(),
    )?;
    let bias = b.weight_const(&format!("{name}.b"), &[cout], 0.0)?;
    let pad = [("pad_h", int(1)), ("pad_w", int(1))];
    let y = b.op1("conv2d", name, &[x, w], &pad)?;
    let y = b.op1("channel_bias_add", &format!("{name}.bias"), &[y, bias], &[])?;
    let y = b.op1("relu", &format!("{name}.relu"), &[y], &[])?;
    let two = [
        ("kernel_h", int(2)),
        ("kernel_w", int(2)),
        ("stride_h", int(2)),
        ("stride_w", int(2)),
    ];
    b.op1("maxpool2d", &format!("{name}.pool"), &[y], &two)
}
