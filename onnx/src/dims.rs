//! Dynamic dims of graph inputs: the batch dim, named dims and defaults.
//!
//! Takes an input's dims as the model declares them (a value, a name such
//! as `batch_size` / `seq_len`, or nothing) and the caller's [`DimOptions`];
//! gives concrete sizes. Rules, in order: a dim with a value keeps it; a
//! named dim given by `--dim name=value` takes that value; axis 0 is the
//! batch dim and takes `--batch` (default 1); a name that looks like a
//! sequence length (`seq`, `len`, `token`, `time`, `step`) defaults to
//! [`DEFAULT_SEQUENCE`]; one that looks like a spatial size (`height`,
//! `width`) defaults to [`DEFAULT_SPATIAL`]. Every default taken is recorded
//! as a [`DefaultedDim`] for the summary; any other dynamic dim is an error
//! that names it and the option to give.

use std::collections::BTreeMap;

/// Default for sequence-length-like dims.
pub const DEFAULT_SEQUENCE: usize = 128;
/// Default for height/width-like dims.
pub const DEFAULT_SPATIAL: usize = 224;
/// Default batch size.
pub const DEFAULT_BATCH: usize = 1;

/// The caller's values for dynamic dims.
#[derive(Clone, Debug, Default)]
pub struct DimOptions {
    /// The batch size (`--batch`); default [`DEFAULT_BATCH`].
    pub batch: Option<usize>,
    /// Named dims (`--dim name=value`).
    pub named: BTreeMap<String, usize>,
}

/// A dynamic dim that took a default.
#[derive(Clone, Debug, PartialEq)]
pub struct DefaultedDim {
    /// Graph input name.
    pub input: String,
    /// Axis.
    pub axis: usize,
    /// The dim's name in the model (`?` if unnamed).
    pub name: String,
    /// The value used.
    pub value: usize,
    /// Which rule gave it (`batch`, `sequence`, `spatial`).
    pub rule: &'static str,
}

/// Resolve the dims of input `input` (see the module doc). Errors are messages with the fix.
pub fn resolve_dims(
    input: &str,
    _index: usize,
    dims: &[Result<usize, Option<String>>],
    opts: &DimOptions,
    defaulted: &mut Vec<DefaultedDim>,
) -> Result<Vec<usize>, String> {
    let mut out = Vec::with_capacity(dims.len());
    for (axis, d) in dims.iter().enumerate() {
        let name = match d {
            Ok(v) => {
                out.push(*v);
                continue;
            }
            Err(n) => n.clone(),
        };
        if let Some(v) = name.as_ref().and_then(|n| opts.named.get(n)) {
            out.push(*v);
            continue;
        }
        let shown = name.clone().unwrap_or_else(|| "?".into());
        let lower = shown.to_lowercase();
        let (value, rule) = if axis == 0 {
            match opts.batch {
                Some(b) => {
                    out.push(b);
                    continue;
                }
                None => (DEFAULT_BATCH, "batch"),
            }
        } else if ["seq", "len", "token", "time", "step"]
            .iter()
            .any(|k| lower.contains(k))
        {
            (DEFAULT_SEQUENCE, "sequence")
        } else if ["height", "width"].iter().any(|k| lower.contains(k)) {
            (DEFAULT_SPATIAL, "spatial")
        } else {
            return Err(format!(
                "input `{input}` has a dynamic dim `{shown}` at axis {axis} with no default; give it with --dim {}=VALUE",
                if name.is_some() { shown.as_str() } else { "NAME" }
            ));
        };
        defaulted.push(DefaultedDim {
            input: input.to_string(),
            axis,
            name: shown,
            value,
            rule,
        });
        out.push(value);
    }
    Ok(out)
}
