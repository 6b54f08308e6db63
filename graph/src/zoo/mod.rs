//! The model zoo: the Tofu paper's benchmarks and a modern transformer.
//!
//! Takes a model name and options; gives its forward graph or its training
//! graph (forward + backward + optimizer update). Names:
//!
//! | name | model | default batch |
//! | --- | --- | --- |
//! | `mlp-<layers>-<hidden>` | [`mlp`]: `layers` dense layers of `hidden`×`hidden` | 512 |
//! | `cnn-<channels>-<hidden>` | [`cnn`]: two 3×3 conv + max-pool stages, a hidden dense layer, 28×28 grey images, 10 classes | 64 |
//! | `wresnet-<depth>-<widen>` | [`wresnet`]: Wide ResNet, depth 50/101/152, every conv widened, 224×224 | 32 |
//! | `rnn-<layers>-<hidden>` | [`rnn`]: LSTM language model, 20 steps, embedding 512 | 512 |
//! | `gpt-<layers>-<d_model>` | [`gpt`]: decoder-only transformer, d_model/64 heads, sequence 1024, vocabulary 50257 | 8 |
//! | `bert-<layers>-<d_model>` | [`bert`]: encoder with an MLM head, d_model/64 heads, sequence 512, vocabulary 30522 (`bert-24-1024` = BERT-large) | 32 |
//!
//! Sizes accept a `k` suffix for ×1024 (`rnn-10-8k` = hidden 8192). Each
//! family's config also has a `tiny()` configuration of the same structure
//! (fewer layers, small dims and images) for tests that execute the graph.

pub mod bert;
pub mod cnn;
pub mod gpt;
mod layers;
pub mod mlp;
pub mod rnn;
pub mod wresnet;

use tdl::Library;

use crate::{training_graph_with, Graph, GraphError, Optimizer};

pub use bert::BertConfig;
pub use cnn::CnnConfig;
pub use gpt::GptConfig;
pub use mlp::MlpConfig;
pub use rnn::RnnConfig;
pub use wresnet::WResNetConfig;

/// Why a model could not be named or built.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ZooError {
    /// The name matches no family or has the wrong parts.
    #[error("unknown model `{name}`: {hint}")]
    UnknownModel {
        /// The name given.
        name: String,
        /// What is expected.
        hint: String,
    },
    /// Building the graph failed (a spec missing or not fitting).
    #[error("building `{model}`: {source}")]
    Graph {
        /// Model name.
        model: String,
        /// The graph error (names the operator).
        source: Box<GraphError>,
    },
}

/// A zoo model with its configuration.
#[derive(Clone, Debug, PartialEq)]
pub enum Model {
    /// Multi-layer perceptron.
    Mlp(MlpConfig),
    /// Small convolutional classifier.
    Cnn(CnnConfig),
    /// Wide ResNet.
    WResNet(WResNetConfig),
    /// Multi-layer LSTM language model.
    Rnn(RnnConfig),
    /// Decoder-only transformer.
    Gpt(GptConfig),
    /// Encoder-only transformer (BERT).
    Bert(BertConfig),
}

const NAMES: &str = "expected mlp-<layers>-<hidden>, cnn-<channels>-<hidden>, wresnet-<50|101|152>-<widen>, rnn-<layers>-<hidden>, gpt-<layers>-<d_model> or bert-<layers>-<d_model> (sizes may end in k = ×1024, e.g. rnn-10-8k)";

/// Parse a size: digits with an optional `k`/`K` suffix (×1024).
pub fn parse_size(s: &str) -> Option<usize> {
    let (digits, mult) = match s.strip_suffix(['k', 'K']) {
        Some(d) => (d, 1024),
        None => (s, 1),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<usize>().ok()?.checked_mul(mult)
}

impl Model {
    /// Parse a zoo name (see the module doc) with the family's default configuration.
    ///
    /// Errors: [`ZooError::UnknownModel`] saying what is expected.
    pub fn parse(name: &str) -> Result<Model, ZooError> {
        let bad = |hint: String| ZooError::UnknownModel {
            name: name.to_string(),
            hint,
        };
        let lower = name.trim().to_ascii_lowercase();
        let parts: Vec<&str> = lower.split('-').collect();
        let [family, a, b] = parts.as_slice() else {
            return Err(bad(NAMES.into()));
        };
        let (Some(a), Some(b)) = (parse_size(a), parse_size(b)) else {
            return Err(bad(NAMES.into()));
        };
        if a == 0 || b == 0 {
            return Err(bad("sizes must be positive".into()));
        }
        match *family {
            "mlp" => Ok(Model::Mlp(MlpConfig::new(a, b))),
            "cnn" => Ok(Model::Cnn(CnnConfig::new(a, b))),
            "wresnet" => WResNetConfig::new(a, b)
                .map(Model::WResNet)
                .ok_or_else(|| bad(format!("WResNet depth must be 50, 101 or 152, not {a}"))),
            "rnn" => Ok(Model::Rnn(RnnConfig::new(a, b))),
            "gpt" => GptConfig::new(a, b).map(Model::Gpt).ok_or_else(|| {
                bad(format!(
                    "GPT d_model must be a multiple of 64 (heads = d_model/64), not {b}"
                ))
            }),
            "bert" => BertConfig::new(a, b).map(Model::Bert).ok_or_else(|| {
                bad(format!(
                    "BERT d_model must be a multiple of 64 (heads = d_model/64), not {b}"
                ))
            }),
            _ => Err(bad(NAMES.into())),
        }
    }

    /// The model's name as the zoo spells it (`wresnet-50-4`, `rnn-10-8192`).
    pub fn name(&self) -> String {
        match self {
            Model::Mlp(c) => c.name(),
            Model::Cnn(c) => c.name(),
            Model::WResNet(c) => c.name(),
            Model::Rnn(c) => c.name(),
            Model::Gpt(c) => c.name(),
            Model::Bert(c) => c.name(),
        }
    }

    /// The batch size.
    pub fn batch(&self) -> usize {
        match self {
            Model::Mlp(c) => c.batch,
            Model::Cnn(c) => c.batch,
            Model::WResNet(c) => c.batch,
            Model::Rnn(c) => c.batch,
            Model::Gpt(c) => c.batch,
            Model::Bert(c) => c.batch,
        }
    }

    /// The same model with another batch size.
    pub fn with_batch(mut self, batch: usize) -> Model {
        match &mut self {
            Model::Mlp(c) => c.batch = batch,
            Model::Cnn(c) => c.batch = batch,
            Model::WResNet(c) => c.batch = batch,
            Model::Rnn(c) => c.batch = batch,
            Model::Gpt(c) => c.batch = batch,
            Model::Bert(c) => c.batch = batch,
        }
        self
    }

    /// The forward graph (ends in a scalar loss).
    ///
    /// Errors: [`ZooError::Graph`] (a spec the model needs is missing or does not fit).
    pub fn forward(&self, lib: &Library) -> Result<Graph, ZooError> {
        let r = match self {
            Model::Mlp(c) => c.forward(lib),
            Model::Cnn(c) => c.forward(lib),
            Model::WResNet(c) => c.forward(lib),
            Model::Rnn(c) => c.forward(lib),
            Model::Gpt(c) => c.forward(lib),
            Model::Bert(c) => c.forward(lib),
        };
        r.map_err(|source| ZooError::Graph {
            model: self.name(),
            source: Box::new(source),
        })
    }

    /// The model `name` (at `batch`, when given) and its training graph
    /// with the optimizer named `optimizer` (sgd, momentum or adam) and L2
    /// weight decay `weight_decay` (0: none): what `tofu graph --model` and
    /// `tofu plan --model` build.
    ///
    /// Errors: an unknown model or optimizer, batch 0, a weight decay that
    /// is negative or not finite, a graph the specs reject, in words.
    pub fn named_training(
        name: &str,
        batch: Option<usize>,
        (optimizer, weight_decay): (&str, f64),
        lib: &Library,
    ) -> Result<(Model, Graph), String> {
        crate::optimizer::checked_weight_decay(weight_decay)?;
        let mut model = Model::parse(name).map_err(|e| e.to_string())?;
        if let Some(b) = batch {
            if b == 0 {
                return Err("--batch must be at least 1".into());
            }
            model = model.with_batch(b);
        }
        let optimizer = Optimizer::from_name(optimizer).ok_or_else(|| {
            format!("unknown optimizer `{optimizer}`: expected sgd, momentum or adam")
        })?;
        let graph = model
            .training_with(lib, &optimizer, weight_decay)
            .map_err(|e| e.to_string())?;
        Ok((model, graph))
    }

    /// The training graph: forward + backward + `optimizer` update.
    ///
    /// Errors: [`ZooError::Graph`].
    pub fn training(&self, lib: &Library, optimizer: &Optimizer) -> Result<Graph, ZooError> {
        self.training_with(lib, optimizer, 0.0)
    }

    /// [`Model::training`] with L2 weight decay `weight_decay`
    /// ([`training_graph_with`]).
    ///
    /// Errors: [`ZooError::Graph`].
    pub fn training_with(
        &self,
        lib: &Library,
        optimizer: &Optimizer,
        weight_decay: f64,
    ) -> Result<Graph, ZooError> {
        let fwd = self.forward(lib)?;
        training_graph_with(&fwd, lib, optimizer, weight_decay).map_err(|source| ZooError::Graph {
            model: self.name(),
            source: Box::new(source),
        })
    }
}
