//! `wresnet-<depth>-<widen>`: Wide ResNet on ImageNet-sized images (Tofu §6.1).
//!
//! ResNet-50/101/152 (He et al.) with bottleneck blocks, where — as the paper
//! says — *every* convolution's channel counts are multiplied by the widening
//! factor W on both input and output sides, so weights grow as W². That
//! includes the stem and the expansion (4×) convolutions; only the image's 3
//! input channels and the 1000 classes are not widened. This is what Table 1's
//! sizes require (see `planner/tests/table1.rs`).
//!
//! Shapes (B = batch, NCHW): `x[B, 3, 224, 224]` → stem `conv2d` 7×7/2 to
//! 64W channels → `batchnorm` → `relu` → `maxpool2d` 3×3/2 → four stages of
//! bottleneck blocks (3/4/6/3, 3/4/23/3 or 3/8/36/3 blocks; inner width
//! 64W·2^s, output 256W·2^s; stride 2 on the 3×3 conv of each stage's first
//! block but the first stage's; projection shortcut `conv2d` 1×1 + `batchnorm`
//! on each stage's first block, identity otherwise; `add` + `relu`) →
//! `global_avgpool` → `matmul` + `bias_add` to 1000 classes →
//! `softmax_cross_entropy` against `labels[B, 1000]`. Convolutions have no
//! bias (batch norm follows); batch norm has a scale and a shift per channel.

use tdl::Library;

use crate::{float, int, DType, Fill, Graph, GraphBuilder, GraphError, TensorId};

/// Configuration of a Wide ResNet.
#[derive(Clone, Debug, PartialEq)]
pub struct WResNetConfig {
    /// Nominal depth (50, 101, 152; informational for tiny configs).
    pub depth: usize,
    /// Bottleneck blocks per stage.
    pub blocks: [usize; 4],
    /// Widening factor W.
    pub widen: usize,
    /// Un-widened width of the first stage (64 in ResNet).
    pub base: usize,
    /// Image height and width.
    pub image: usize,
    /// Output classes.
    pub classes: usize,
    /// Batch size.
    pub batch: usize,
}

impl WResNetConfig {
    /// `wresnet-<depth>-<widen>` on 224×224 images, 1000 classes, batch 32;
    /// `None` unless depth is 50, 101 or 152.
    pub fn new(depth: usize, widen: usize) -> Option<WResNetConfig> {
        let blocks = match depth {
            50 => [3, 4, 6, 3],
            101 => [3, 4, 23, 3],
            152 => [3, 8, 36, 3],
            _ => return None,
        };
        Some(WResNetConfig {
            depth,
            blocks,
            widen,
            base: 64,
            image: 224,
            classes: 1000,
            batch: 32,
        })
    }

    /// A small configuration of the same structure: blocks 2/1/1/1 (so both
    /// shortcut kinds occur), base width 1, W = 2, 16×16 images (the last
    /// stages are 1×1, as ImageNet's are 7×7), 5 classes, batch 3.
    pub fn tiny() -> WResNetConfig {
        WResNetConfig {
            depth: 50,
            blocks: [2, 1, 1, 1],
            widen: 2,
            base: 1,
            image: 16,
            classes: 5,
            batch: 3,
        }
    }

    /// Zoo name.
    pub fn name(&self) -> String {
        format!("wresnet-{}-{}", self.depth, self.widen)
    }

    /// The forward graph.
    ///
    /// Errors: [`GraphError`] naming the operator whose spec is missing or does not fit.
    pub fn forward(&self, lib: &Library) -> Result<Graph, GraphError> {
        let mut b = GraphBuilder::new(lib, &self.name());
        let x = b.input(
            "x",
            &[self.batch, 3, self.image, self.image],
            DType::F32,
            Fill::Normal { std: 1.0 },
        )?;
        let labels = b.input(
            "labels",
            &[self.batch, self.classes],
            DType::F32,
            Fill::Probabilities,
        )?;
        let c0 = self.base * self.widen;
        let mut h = conv_bn(&mut b, "stem", x, 3, c0, 7, 2, 3)?;
        h = b.op1("relu", "stem.relu", &[h], &[])?;
        h = b.op1(
            "maxpool2d",
            "stem.pool",
            &[h],
            &[
                ("kernel_h", int(3)),
                ("kernel_w", int(3)),
                ("stride_h", int(2)),
                ("stride_w", int(2)),
                ("pad_h", int(1)),
                ("pad_w", int(1)),
            ],
        )?;
        let mut cin = c0;
        for (s, &n) in self.blocks.iter().enumerate() {
            let mid = (self.base * self.widen) << s;
            let out = 4 * mid;
            for blk in 0..n {
                let stride = if s > 0 && blk == 0 { 2 } else { 1 };
                let p = format!("layer{}.{blk}", s + 1);
                let mut y = conv_bn(&mut b, &format!("{p}.conv1"), h, cin, mid, 1, 1, 0)?;
                y = b.op1("relu", &format!("{p}.relu1"), &[y], &[])?;
                y = conv_bn(&mut b, &format!("{p}.conv2"), y, mid, mid, 3, stride, 1)?;
                y = b.op1("relu", &format!("{p}.relu2"), &[y], &[])?;
                y = conv_bn(&mut b, &format!("{p}.conv3"), y, mid, out, 1, 1, 0)?;
                let shortcut = if blk == 0 {
                    conv_bn(&mut b, &format!("{p}.proj"), h, cin, out, 1, stride, 0)?
                } else {
                    h
                };
                y = b.op1("add", &format!("{p}.add"), &[y, shortcut], &[])?;
                h = b.op1("relu", &format!("{p}.relu3"), &[y], &[])?;
                cin = out;
            }
        }
        h = b.op1("global_avgpool", "pool", &[h], &[])?;
        let w = b.weight("fc.w", &[cin, self.classes], (1.0 / cin as f64).sqrt())?;
        let bias = b.weight_const("fc.b", &[self.classes], 0.0)?;
        h = b.op1("matmul", "fc", &[h, w], &[])?;
        h = b.op1("bias_add", "fc.bias", &[h, bias], &[])?;
        let loss = b.op1("softmax_cross_entropy", "loss", &[h, labels], &[])?;
        b.finish(loss)
    }
}

/// `conv2d` (no bias, weight `{name}.w[cout, cin, k, k]`) followed by
/// `batchnorm` (`{name}.bn.gamma[cout]` = 1, `{name}.bn.beta[cout]` = 0).
#[allow(clippy::too_many_arguments)]
fn conv_bn(
    b: &mut GraphBuilder,
    name: &str,
    x: TensorId,
    cin: usize,
    cout: usize,
    k: usize,
    stride: i64,
    pad: i64,
) -> Result<TensorId, GraphError> {
    let w = b.weight(
        &format!("{name}.w"),
        &[cout, cin, k, k],
        (2.0 / (cin * k * k) as f64).sqrt(),
    )?;
    let y = b.op1(
        "conv2d",
        name,
        &[x, w],
        &[
            ("stride_h", int(stride)),
            ("stride_w", int(stride)),
            ("pad_h", int(pad)),
            ("pad_w", int(pad)),
        ],
    )?;
    let gamma = b.weight_const(&format!("{name}.bn.gamma"), &[cout], 1.0)?;
    let beta = b.weight_const(&format!("{name}.bn.beta"), &[cout], 0.0)?;
    b.op1(
        "batchnorm",
        &format!("{name}.bn"),
        &[y, gamma, beta],
        &[("eps", float(1e-5))],
    )
}
