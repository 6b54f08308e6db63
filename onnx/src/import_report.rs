//! What `tofu graph FILE.onnx` says about an import: the file, opsets,
//! nodes mapped, folded and opaque, the dims that took a default and the
//! loss, as text lines ([`fmt::Display`]) or as the `--json` fields (the
//! [`Summary`]'s, [`crate::summary_json`], and the options': `file`,
//! `training`, `batch`, `optimizer`).
//!
//! Takes the [`ImportOptions`] of the command and the [`Summary`] of the
//! import; gives text and a JSON map.

use std::fmt;
use std::path::Path;

use serde_json::{Map, Value};

use crate::dims::DEFAULT_BATCH;
use crate::{ImportOptions, Summary};

/// An import as `tofu graph FILE.onnx` reports it.
#[derive(Clone, Copy, Debug)]
pub struct ImportReport<'a> {
    /// The ONNX file.
    pub file: &'a Path,
    /// The options it was imported with.
    pub options: &'a ImportOptions,
    /// What the import did.
    pub summary: &'a Summary,
}

impl ImportReport<'_> {
    /// The `--json` fields of the import: the summary's and `file`,
    /// `training`, `batch` (the default when not given), `optimizer`
    /// (`null` for an inference graph).
    pub fn json_fields(&self) -> Map<String, Value> {
        let (args, mut m) = (self.options, self.summary.json_fields());
        let optimizer = args.training.then(|| args.optimizer.clone());
        m.insert("file".into(), self.file.display().to_string().into());
        m.insert("training".into(), args.training.into());
        m.insert("batch".into(), args.batch.unwrap_or(DEFAULT_BATCH).into());
        m.insert("optimizer".into(), optimizer.into());
        m
    }
}

/// The model and file, opsets, node counts, folded op types, defaulted
/// dims (with the flag that sets each), opaque nodes and the loss.
impl fmt::Display for ImportReport<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.summary;
        let (mapped, folded) = (s.mapped_nodes(), s.folded_nodes());
        let opsets: Vec<String> = s.opsets.iter().map(|(d, v)| format!("{d} {v}")).collect();
        writeln!(f, "model        {} ({})", s.model, self.file.display())?;
        writeln!(f, "opsets       {}", opsets.join(", "))?;
        writeln!(
            f,
            "onnx nodes   {} ({mapped} mapped, {folded} folded at import, {} opaque)",
            s.nodes,
            s.opaque.len()
        )?;
        if !s.folded.is_empty() {
            let fo: Vec<String> = s.folded.iter().map(|(k, v)| format!("{k} {v}")).collect();
            writeln!(f, "folded       {}", fo.join(", "))?;
        }
        for d in &s.defaulted_dims {
            writeln!(
                f,
                "default dim  input `{}` axis {} (`{}`) = {} ({} default; set with {})",
                d.input,
                d.axis,
                d.name,
                d.value,
                d.rule,
                if d.rule == "batch" {
                    "--batch".to_string()
                } else {
                    format!("--dim {}=N", d.name)
                }
            )?;
        }
        for o in &s.opaque {
            writeln!(
                f,
                "opaque       node `{}` ({}) → spec `{}`",
                o.node, o.op_type, o.spec
            )?;
        }
        if let Some(l) = &s.loss {
            writeln!(
                f,
                "loss         on `{l}` (optimizer {})",
                self.options.optimizer
            )?;
        }
        Ok(())
    }
}
