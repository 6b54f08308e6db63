//! Dynamic dims of graph inputs: the batch dim, named dims and defaults.
//!
//! Takes an input's dims as the model declares them (a value, a name such
//! as `batch_size` / `seq_len`, or nothing) and the caller's [`DimOptions`];
//! gives concrete sizes. Rules, in order: a dim with a value keeps it; a
//! named dim given by `--dim name=value` takes that value; axis 0 and a dim
//! named like `batch` are the batch dim and take `--batch` (default 1); a name that looks like a
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
        let (value, rule) = if axis == 0 || lower.contains("batch") {
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

/// One declared dim of a graph input: its size, or its name (`None`: unnamed `?`) when dynamic.
pub type ModelDim = Result<usize, Option<String>>;

/// Check that every name of `opts.named` (`--dim NAME=V`) is a dynamic dim
/// of one of `inputs` (graph inputs with their declared dims): a name none
/// has would be silently ignored. The error lists the model's dim names and
/// which inputs have them.
pub fn check_named(inputs: &[(String, Vec<ModelDim>)], opts: &DimOptions) -> Result<(), String> {
    let mut names: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (input, dims) in inputs {
        for d in dims {
            if let Err(Some(n)) = d {
                let users = names.entry(n.as_str()).or_default();
                if !users.contains(&input.as_str()) {
                    users.push(input);
                }
            }
        }
    }
    let unknown: Vec<&str> = opts
        .named
        .keys()
        .map(String::as_str)
        .filter(|n| !names.contains_key(n))
        .collect();
    if unknown.is_empty() {
        return Ok(());
    }
    let given: Vec<String> = unknown.iter().map(|n| format!("`{n}`")).collect();
    let have = if names.is_empty() {
        "the model's inputs have no named dynamic dims (give whole shapes with --input-shape NAME=D0,D1,…)"
            .to_string()
    } else {
        let list: Vec<String> = names
            .iter()
            .map(|(n, users)| format!("`{n}` ({})", users.join(", ")))
            .collect();
        format!("the model's dim names are {}", list.join(", "))
    };
    Err(format!(
        "--dim names {}, which no graph input has; {have}",
        given.join(", ")
    ))
}

/// Check a shape the caller gave for input `input` (`--input-shape`) against
/// the model's dims: same rank, and every static dim equal. Gives the shape;
/// errors are messages naming the input, the axis and both values.
pub fn check_given(
    input: &str,
    dims: &[Result<usize, Option<String>>],
    given: &[usize],
) -> Result<Vec<usize>, String> {
    if dims.len() != given.len() {
        return Err(format!(
            "--input-shape gives input `{input}` {} dims ({given:?}) but the model declares {} ({})",
            given.len(),
            dims.len(),
            show_dims(dims)
        ));
    }
    for (axis, (d, &g)) in dims.iter().zip(given).enumerate() {
        if let Ok(v) = d {
            if *v != g {
                return Err(format!(
                    "--input-shape gives input `{input}` size {g} at axis {axis}, but the model fixes it to {v} ({})",
                    show_dims(dims)
                ));
            }
        }
    }
    Ok(given.to_vec())
}

/// The model's dims as `[batch, 3, ?, ?]`.
pub fn show_dims(dims: &[Result<usize, Option<String>>]) -> String {
    let parts: Vec<String> = dims
        .iter()
        .map(|d| match d {
            Ok(v) => v.to_string(),
            Err(Some(n)) => n.clone(),
            Err(None) => "?".into(),
        })
        .collect();
    format!("[{}]", parts.join(", "))
}

/// The error for inputs whose dynamic dims have no value: one line per
/// input (`inputs`: name and model dims) with its dynamic axes and the exact
/// `--input-shape` flag to pass (static dims filled in, `D<axis>` for each
/// size to choose), plus the `--dim` alternative for named dims.
pub fn missing_dims_message(inputs: &[(String, Vec<ModelDim>)]) -> String {
    let mut lines = vec!["dynamic input dims have no value; give each input's shape:".to_string()];
    let mut named = Vec::new();
    for (input, dims) in inputs {
        let axes: Vec<String> = dims
            .iter()
            .enumerate()
            .filter_map(|(a, d)| match d {
                Ok(_) => None,
                Err(Some(n)) => {
                    named.push(n.clone());
                    Some(format!("axis {a} `{n}`"))
                }
                Err(None) => Some(format!("axis {a} `?`")),
            })
            .collect();
        let flag: Vec<String> = dims
            .iter()
            .enumerate()
            .map(|(a, d)| match d {
                Ok(v) => v.to_string(),
                Err(_) => format!("D{a}"),
            })
            .collect();
        lines.push(format!(
            "  input `{input}` {} (dynamic: {}): --input-shape {input}={}",
            show_dims(dims),
            axes.join(", "),
            flag.join(",")
        ));
    }
    lines.push("(replace each D<axis> with a size, e.g. 1 for a batch".to_string());
    named.sort();
    named.dedup();
    if named.is_empty() {
        lines.last_mut().expect("pushed").push(')');
    } else {
        lines.last_mut().expect("pushed").push_str(&format!(
            "; named dims can also be given once for all inputs with {})",
            named
                .iter()
                .map(|n| format!("--dim {n}=N"))
                .collect::<Vec<_>>()
                .join(" ")
        ));
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_dims_list_each_input_with_the_flag_to_pass() {
        let m = missing_dims_message(&[
            (
                "images".into(),
                vec![Err(None), Ok(3), Err(None), Err(Some("width".into()))],
            ),
            ("mask".into(), vec![Ok(1), Err(None)]),
        ]);
        assert!(
            m.contains("input `images` [?, 3, ?, width] (dynamic: axis 0 `?`, axis 2 `?`, axis 3 `width`): --input-shape images=D0,3,D2,D3"),
            "{m}"
        );
        assert!(m.contains("--input-shape mask=1,D1"), "{m}");
        assert!(m.contains("--dim width=N"), "{m}");
    }

    #[test]
    fn given_shapes_must_fit_the_static_dims() {
        let dims = vec![Err(None), Ok(3), Err(None)];
        assert_eq!(check_given("x", &dims, &[2, 3, 7]), Ok(vec![2, 3, 7]));
        let e = check_given("x", &dims, &[2, 4, 7]).unwrap_err();
        assert!(e.contains("axis 1") && e.contains("fixes it to 3"), "{e}");
        let e = check_given("x", &dims, &[2, 3]).unwrap_err();
        assert!(e.contains("2 dims"), "{e}");
    }
}
