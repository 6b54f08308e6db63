//! `rnn-<layers>-<hidden>`: a multi-layer LSTM language model unrolled over
//! time (Tofu §6.1, after Jozefowicz et al. [32]).
//!
//! Shapes (B = batch, E = embedding 512, H = hidden, V = vocabulary, G = 4
//! gates in the order i, f, g, o), per step t of `steps` (20):
//! `ids.t{t}[B]` → `embedding(embed.table[V, E])` → per layer l:
//! `gate_matmul(x, lstm.l{l}.wx[K, 4, H])` + `gate_matmul(h, lstm.l{l}.wh[H, 4, H])`
//! (`add`) → `bias_add2(lstm.l{l}.b[4, H])` → `lstm_cell` with the previous
//! cell state → `(h, c)`; K = E for the first layer and H above. The top
//! layer's `h` → `matmul(softmax.w[H, V])` + `bias_add(softmax.b[V])` →
//! `softmax_cross_entropy` against `labels.t{t}[B, V]`; the step losses are
//! added and scaled by 1/steps. Initial states `lstm.l{l}.h0`, `.c0` are zero
//! inputs. Weights are shared by all steps, so their gradients are sums of
//! one contribution per step (Tofu §4.2.1).
//!
//! The LSTM weights are 4H·(K + H) + 4H per layer; Table 1 counts those only
//! (see `planner/tests/table1.rs`). The vocabulary is not given by the paper;
//! the default, 10 000 (Penn Treebank), is our choice.

use tdl::Library;

use crate::{float, DType, Fill, Graph, GraphBuilder, GraphError};

/// Configuration of an LSTM language model.
#[derive(Clone, Debug, PartialEq)]
pub struct RnnConfig {
    /// Stacked LSTM layers.
    pub layers: usize,
    /// Hidden (and cell) size H.
    pub hidden: usize,
    /// Embedding size (512).
    pub embed: usize,
    /// Unrolled time steps (20).
    pub steps: usize,
    /// Vocabulary size.
    pub vocab: usize,
    /// Batch size.
    pub batch: usize,
}

impl RnnConfig {
    /// `rnn-<layers>-<hidden>`: embedding 512, 20 steps, vocabulary 10 000, batch 512.
    pub fn new(layers: usize, hidden: usize) -> RnnConfig {
        RnnConfig {
            layers,
            hidden,
            embed: 512,
            steps: 20,
            vocab: 10_000,
            batch: 512,
        }
    }

    /// A small configuration of the same structure: 2 layers, H = 3,
    /// embedding 4, 3 steps, vocabulary 5, batch 2.
    pub fn tiny() -> RnnConfig {
        RnnConfig {
            layers: 2,
            hidden: 3,
            embed: 4,
            steps: 3,
            vocab: 5,
            batch: 2,
        }
    }

    /// Zoo name.
    pub fn name(&self) -> String {
        format!("rnn-{}-{}", self.layers, self.hidden)
    }

    /// The forward graph.
    ///
    /// Errors: [`GraphError`] naming the operator whose spec is missing or does not fit.
    pub fn forward(&self, lib: &Library) -> Result<Graph, GraphError> {
        let (bsz, hid) = (self.batch, self.hidden);
        let mut b = GraphBuilder::new(lib, &self.name());
        let table = b.weight("embed.table", &[self.vocab, self.embed], 1.0)?;
        let mut wx = Vec::new();
        let mut wh = Vec::new();
        let mut bias = Vec::new();
        let mut h = Vec::new();
        let mut c = Vec::new();
        for l in 0..self.layers {
            let k = if l == 0 { self.embed } else { hid };
            let std = (1.0 / hid as f64).sqrt();
            wx.push(b.weight(&format!("lstm.l{l}.wx"), &[k, 4, hid], std)?);
            wh.push(b.weight(&format!("lstm.l{l}.wh"), &[hid, 4, hid], std)?);
            bias.push(b.weight_const(&format!("lstm.l{l}.b"), &[4, hid], 0.0)?);
            h.push(b.input(
                &format!("lstm.l{l}.h0"),
                &[bsz, hid],
                DType::F32,
                Fill::Constant { value: 0.0 },
            )?);
            c.push(b.input(
                &format!("lstm.l{l}.c0"),
                &[bsz, hid],
                DType::F32,
                Fill::Constant { value: 0.0 },
            )?);
        }
        let w_out = b.weight("softmax.w", &[hid, self.vocab], (1.0 / hid as f64).sqrt())?;
        let b_out = b.weight_const("softmax.b", &[self.vocab], 0.0)?;
        let mut total = None;
        for t in 0..self.steps {
            let ids = b.input(
                &format!("ids.t{t}"),
                &[bsz],
                DType::I32,
                Fill::Indices { bound: self.vocab },
            )?;
            let labels = b.input(
                &format!("labels.t{t}"),
                &[bsz, self.vocab],
                DType::F32,
                Fill::Probabilities,
            )?;
            let mut x = b.op1("embedding", &format!("embed.t{t}"), &[table, ids], &[])?;
            for l in 0..self.layers {
                let p = format!("lstm.l{l}.t{t}");
                let gx = b.op1("gate_matmul", &format!("{p}.gx"), &[x, wx[l]], &[])?;
                let gh = b.op1("gate_matmul", &format!("{p}.gh"), &[h[l], wh[l]], &[])?;
                let g = b.op1("add", &format!("{p}.gsum"), &[gx, gh], &[])?;
                let g = b.op1("bias_add2", &format!("{p}.bias"), &[g, bias[l]], &[])?;
                let hc = b.op("lstm_cell", &format!("{p}.cell"), &[g, c[l]], &[])?;
                h[l] = hc[0];
                c[l] = hc[1];
                x = h[l];
            }
            let logits = b.op1("matmul", &format!("softmax.t{t}"), &[x, w_out], &[])?;
            let logits = b.op1(
                "bias_add",
                &format!("softmax.t{t}.bias"),
                &[logits, b_out],
                &[],
            )?;
            let loss = b.op1(
                "softmax_cross_entropy",
                &format!("loss.t{t}"),
                &[logits, labels],
                &[],
            )?;
            total = Some(match total {
                None => loss,
                Some(acc) => b.op1("add", &format!("loss.sum{t}"), &[acc, loss], &[])?,
            });
        }
        let total = total.ok_or(GraphError::NoLoss)?;
        let loss = b.op1(
            "scale",
            "loss",
            &[total],
            &[("alpha", float(1.0 / self.steps as f64))],
        )?;
        b.finish(loss)
    }
}
