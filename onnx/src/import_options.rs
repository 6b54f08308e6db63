//! The import options of `tofu graph FILE.onnx` and `tofu plan FILE.onnx` as
//! one serialisable value, and the plan file's `import` record it writes and
//! reads.
//!
//! Takes the options as the command line spells them (`--batch`, `--dim
//! NAME=VALUE`, `--input-shape NAME=D0,D1,…`, `--input-value NAME=V[,V…]`,
//! `--training`, `--loss`, `--soft-labels`, `--optimizer`,
//! `--opaque-unsupported`); gives the checked importer [`Options`]
//! ([`ImportOptions::options`]) and the record `{"onnx": {batch, dim,
//! input_shape, input_value, loss, optimizer, opaque_unsupported,
//! [class_ids,] training}}` that lets `tofu run --weights MODEL.onnx`
//! import the model again exactly as it was planned
//! ([`ImportOptions::record`], [`ImportOptions::from_record`]). A record
//! missing a field reads it as its default (`training` true, `optimizer`
//! `sgd`, lists empty, `class_ids` false: older plans' losses took
//! probabilities), as records of older plans do.

use graph::Optimizer;
use serde::{Deserialize, Deserializer, Serialize};

use crate::Options;

/// The ONNX import options of a command line (see the module doc).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ImportOptions {
    /// `--batch`: the batch dim (default [`crate::dims::DEFAULT_BATCH`]).
    #[serde(default)]
    pub batch: Option<usize>,
    /// `--dim NAME=VALUE`, as written.
    #[serde(default, rename = "dim", deserialize_with = "null_empty")]
    pub dims: Vec<String>,
    /// `--input-shape NAME=D0,D1,…`, as written.
    #[serde(default, rename = "input_shape", deserialize_with = "null_empty")]
    pub input_shapes: Vec<String>,
    /// `--input-value NAME=V[,V…]`, as written.
    #[serde(default, rename = "input_value", deserialize_with = "null_empty")]
    pub input_values: Vec<String>,
    /// Build the training graph (backward + optimizer).
    #[serde(default = "yes")]
    pub training: bool,
    /// `--loss`: the output the loss is taken on.
    #[serde(default)]
    pub loss: Option<String>,
    /// The added loss of a training import takes class ids (the CLI's
    /// default; `--soft-labels` turns it off: probabilities). Recorded only
    /// when set: a record without it (an inference plan's, an older plan's
    /// or a soft-label one's) reads as `false`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub class_ids: bool,
    /// `--optimizer`: sgd, momentum or adam.
    #[serde(default = "sgd")]
    pub optimizer: String,
    /// `--weight-decay`: L2 weight decay λ (recorded only when set).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub weight_decay: f64,
    /// `--opaque-unsupported`.
    #[serde(default)]
    pub opaque_unsupported: bool,
    /// `--op-map DOMAIN::OP=SPEC`, as written (absent from a record when empty).
    #[serde(
        default,
        deserialize_with = "null_empty",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub op_map: Vec<String>,
}

fn yes() -> bool {
    true
}

fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

fn sgd() -> String {
    "sgd".to_string()
}

/// A list that a record may hold as `null`.
fn null_empty<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    Ok(Option::<Vec<String>>::deserialize(d)?.unwrap_or_default())
}

/// An option that does not parse, or a record that is not what tofu writes.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ImportOptionsError {
    /// `--batch 0`.
    #[error("--batch must be at least 1")]
    Batch,
    /// A `--dim` that is not `NAME=VALUE` with a positive integer.
    #[error("--dim `{0}`: expected NAME=VALUE with a positive integer, e.g. --dim seq_len=512")]
    Dim(String),
    /// A malformed `--input-shape`.
    #[error("--input-shape `{0}`: expected NAME=D0,D1,... with positive integers, e.g. --input-shape images=1,3,320,320")]
    InputShape(String),
    /// A malformed `--input-value`.
    #[error("--input-value `{0}`: expected NAME=V[,V…] with numbers, e.g. --input-value sample_rate=16000")]
    InputValue(String),
    /// An optimizer name other than sgd, momentum, adam.
    #[error("unknown optimizer `{0}`: expected sgd, momentum or adam")]
    Optimizer(String),
    /// A malformed `--op-map`.
    #[error("{0}")]
    OpMap(String),
    /// The `import` record does not decode (the serde message).
    #[error("the `import` record is not what tofu writes: {0}")]
    Record(String),
}

impl ImportOptions {
    /// The checked importer options.
    ///
    /// Errors: the first option that does not parse ([`ImportOptionsError`],
    /// whose message names the flag and shows its form).
    pub fn options(&self) -> Result<Options, ImportOptionsError> {
        let mut opts = Options {
            training: self.training,
            loss: self.loss.clone(),
            class_ids: self.class_ids,
            opaque_unsupported: self.opaque_unsupported,
            ..Default::default()
        };
        if let Some(b) = self.batch {
            if b == 0 {
                return Err(ImportOptionsError::Batch);
            }
            opts.dims.batch = Some(b);
        }
        for d in &self.dims {
            let (name, value) = d
                .split_once('=')
                .and_then(|(n, v)| Some((n.trim(), v.trim().parse::<usize>().ok()?)))
                .filter(|(n, v)| !n.is_empty() && *v > 0)
                .ok_or_else(|| ImportOptionsError::Dim(d.clone()))?;
            opts.dims.named.insert(name.to_string(), value);
        }
        for spec in &self.input_shapes {
            let (name, dims) = parse_input_shape(spec)?;
            opts.input_shapes.insert(name, dims);
        }
        for spec in &self.input_values {
            let (name, values) = parse_input_value(spec)?;
            opts.fixed_inputs.insert(name, values);
        }
        opts.op_map =
            crate::custom::parse_op_map(&self.op_map).map_err(ImportOptionsError::OpMap)?;
        opts.optimizer = Some(
            Optimizer::from_name(&self.optimizer)
                .ok_or_else(|| ImportOptionsError::Optimizer(self.optimizer.clone()))?,
        );
        opts.weight_decay = self.weight_decay;
        Ok(opts)
    }

    /// The plan file's `import` record: `{"onnx": {…}}` (keys sorted).
    pub fn record(&self) -> serde_json::Value {
        serde_json::json!({ "onnx": self })
    }

    /// The options of a plan file's `import` record; `None` when it records
    /// no ONNX import.
    ///
    /// Errors: [`ImportOptionsError::Record`] when a field has the wrong type.
    pub fn from_record(import: &serde_json::Value) -> Result<Option<Self>, ImportOptionsError> {
        let Some(o) = import.get("onnx") else {
            return Ok(None);
        };
        serde_json::from_value(o.clone())
            .map(Some)
            .map_err(|e| ImportOptionsError::Record(e.to_string()))
    }
}

/// Parse `--input-shape NAME=D0,D1,...` (the name may itself hold `=`: the
/// last one separates; an empty list is a scalar input).
///
/// Errors: [`ImportOptionsError::InputShape`].
pub fn parse_input_shape(spec: &str) -> Result<(String, Vec<usize>), ImportOptionsError> {
    let bad = || ImportOptionsError::InputShape(spec.to_string());
    let (name, dims) = spec.rsplit_once('=').ok_or_else(bad)?;
    let name = name.trim();
    if name.is_empty() {
        return Err(bad());
    }
    let dims = dims.trim();
    let dims: Vec<usize> = if dims.is_empty() {
        Vec::new()
    } else {
        dims.split(',')
            .map(|d| d.trim().parse::<usize>().ok().filter(|&v| v > 0))
            .collect::<Option<_>>()
            .ok_or_else(bad)?
    };
    Ok((name.to_string(), dims))
}

/// Parse `--input-value NAME=V[,V…]`: a graph input fixed to these values
/// (row-major) at import (the name may itself hold `=`: the last one
/// separates).
///
/// Errors: [`ImportOptionsError::InputValue`].
pub fn parse_input_value(spec: &str) -> Result<(String, Vec<f64>), ImportOptionsError> {
    let bad = || ImportOptionsError::InputValue(spec.to_string());
    let (name, values) = spec.rsplit_once('=').ok_or_else(bad)?;
    let name = name.trim();
    if name.is_empty() {
        return Err(bad());
    }
    let values: Vec<f64> = values
        .split(',')
        .map(|v| v.trim().parse::<f64>().ok().filter(|v| !v.is_nan()))
        .collect::<Option<_>>()
        .ok_or_else(bad)?;
    Ok((name.to_string(), values))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full() -> ImportOptions {
        ImportOptions {
            batch: Some(4),
            dims: vec!["seq_len=16".into()],
            input_shapes: vec!["a=b=2,3".into()],
            input_values: vec!["sr=16000".into()],
            training: false,
            loss: Some("y".into()),
            class_ids: false,
            optimizer: "adam".into(),
            weight_decay: 0.0,
            opaque_unsupported: true,
            op_map: vec![],
        }
    }

    /// The record is the JSON object the CLI wrote before this type existed
    /// (written out by hand), and reads back to the same options.
    #[test]
    fn record_is_the_old_object_and_round_trips() {
        let o = full();
        let want = r#"{"onnx":{"batch":4,"dim":["seq_len=16"],"input_shape":["a=b=2,3"],"input_value":["sr=16000"],"loss":"y","opaque_unsupported":true,"optimizer":"adam","training":false}}"#;
        assert_eq!(o.record().to_string(), want);
        assert_eq!(ImportOptions::from_record(&o.record()), Ok(Some(o)));
    }

    /// Missing fields take the old reader's defaults; no `onnx` key is no
    /// import; a wrong type is an error (negative control).
    #[test]
    fn record_defaults_and_errors() {
        let v = serde_json::json!({"onnx": {"dim": null}});
        let o = ImportOptions::from_record(&v).unwrap().unwrap();
        assert!(o.training && o.optimizer == "sgd" && o.dims.is_empty() && o.batch.is_none());
        assert_eq!(
            ImportOptions::from_record(&serde_json::json!({"zoo": 1})),
            Ok(None)
        );
        let bad = serde_json::json!({"onnx": {"batch": "four"}});
        assert!(matches!(
            ImportOptions::from_record(&bad),
            Err(ImportOptionsError::Record(_))
        ));
    }

    /// The options parse to the importer's: the last `=` separates, an empty
    /// shape is a scalar; each malformed flag is its own error.
    #[test]
    fn options_parse_and_reject() {
        let opts = full().options().unwrap();
        assert_eq!(opts.dims.batch, Some(4));
        assert_eq!(opts.dims.named["seq_len"], 16);
        assert_eq!(opts.input_shapes["a=b"], vec![2, 3]);
        assert_eq!(opts.fixed_inputs["sr"], vec![16000.0]);
        assert_eq!(parse_input_shape("x="), Ok(("x".into(), vec![])));
        let with = |f: fn(&mut ImportOptions)| {
            let mut o = full();
            f(&mut o);
            o.options().unwrap_err()
        };
        assert_eq!(with(|o| o.batch = Some(0)), ImportOptionsError::Batch);
        assert!(matches!(
            with(|o| o.dims = vec!["n=0".into()]),
            ImportOptionsError::Dim(_)
        ));
        assert!(matches!(
            with(|o| o.input_shapes = vec!["=2".into()]),
            ImportOptionsError::InputShape(_)
        ));
        assert!(matches!(
            with(|o| o.input_values = vec!["v=nan".into()]),
            ImportOptionsError::InputValue(_)
        ));
        assert!(matches!(
            with(|o| o.optimizer = "rmsprop".into()),
            ImportOptionsError::Optimizer(_)
        ));
    }
}
