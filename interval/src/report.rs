//! The `tofu strategies` report: a table for people, JSON for machines.
//!
//! Takes a library spec, example shapes (`name=dims` overrides, every other
//! dim [`DEFAULT_DIM`]), attribute values and a part count; gives the text
//! table (strategy, output layout, each input's layout, bytes each part
//! reads for the example shape, assuming f32 = 4 bytes per element, marked
//! `*` where the part's box is a stated superset of its reads, see
//! [`crate::PartRegions::exact`]), the symbolic regions, the rejected candidates with reasons, and egg's stop
//! when a limit stopped it — or the same as JSON (`saturation` always).
//! Errors: a shape or attribute that does not fit, as [`ReportError`].

use std::collections::BTreeMap;
use std::fmt::Write as _;

use tdl::{AttrType, AttrValue, Attrs, DimEntry, DimExpr, OpSpec};

use crate::cache::StrategyCache;
use crate::canon::Saturation;
use crate::error::{AnalysisError, InstantiateError};
use crate::instantiate::{Instance, Region};
use crate::strategy::{InputLayout, OpStrategies, OutputLayout};

/// Size of every example dim the user does not give.
pub const DEFAULT_DIM: usize = 8;
/// Ellipsis rank of the example when no shape gives it.
pub const DEFAULT_RANK: usize = 2;
/// Bytes per element assumed for the byte counts (f32).
pub const BYTES_PER_ELEMENT: u64 = 4;

/// Why a report cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The op cannot be analysed.
    #[error(transparent)]
    Analysis(#[from] AnalysisError),
    /// The example does not fit the op.
    #[error(transparent)]
    Instantiate(#[from] InstantiateError),
    /// A `--shape` names no input of the op, or has the wrong rank.
    #[error("`{op}`: bad example shape `{given}`: {why}")]
    Shape {
        /// Operator name.
        op: String,
        /// The shape as given.
        given: String,
        /// What is wrong.
        why: String,
    },
}

/// Strategies of one op instantiated on an example.
pub struct Report {
    /// The shape-free result.
    pub strategies: std::sync::Arc<OpStrategies>,
    /// The example instance.
    pub instance: Instance,
    /// Number of parts.
    pub parts: usize,
    /// The attribute values used (given, else default, else [`example_attrs`]'s).
    pub attrs: Attrs,
}

/// The given attributes, plus an example value for every required one not
/// given: 1 for an int, 0.1 for a float. Defaults are left to the spec.
pub fn example_attrs(spec: &OpSpec, given: &Attrs) -> Attrs {
    let mut out = given.clone();
    for a in &spec.attrs {
        if a.default.is_none() && !out.contains_key(&a.name) {
            let v = match a.ty {
                AttrType::Int => AttrValue::Int(1),
                AttrType::Float => AttrValue::Float(0.1),
            };
            out.insert(a.name.clone(), v);
        }
    }
    out
}

/// Example input shapes: the given ones (by input name), every other dim
/// [`DEFAULT_DIM`], dims shared by name kept equal.
pub fn example_shapes(
    spec: &OpSpec,
    given: &BTreeMap<String, Vec<usize>>,
) -> Result<Vec<Vec<usize>>, ReportError> {
    let bad = |g: &str, why: String| ReportError::Shape {
        op: spec.name.clone(),
        given: g.to_string(),
        why,
    };
    for name in given.keys() {
        if spec.input(name).is_none() {
            let known: Vec<&str> = spec.inputs.iter().map(|t| t.name.as_str()).collect();
            return Err(bad(
                name,
                format!("no input `{name}` (inputs: {})", known.join(", ")),
            ));
        }
    }
    let mut rank = DEFAULT_RANK;
    for t in &spec.inputs {
        if let (Some(s), true) = (
            given.get(&t.name),
            t.dims.iter().any(|d| matches!(d, DimEntry::Ellipsis)),
        ) {
            rank = s
                .len()
                .checked_sub(t.dims.len() - 1)
                .ok_or_else(|| bad(&t.name, format!("rank {} is too small", s.len())))?;
        }
    }
    let spec = spec.expand_ellipsis(rank);
    let mut dims: Vec<Option<usize>> = vec![None; spec.dims.len()];
    for t in &spec.inputs {
        if let Some(s) = given.get(&t.name) {
            if s.len() != t.dims.len() {
                return Err(bad(
                    &t.name,
                    format!("rank {} but the input has {} dims", s.len(), t.dims.len()),
                ));
            }
            for (d, &n) in t.dims.iter().zip(s) {
                if let DimEntry::Dim(DimExpr::Dim(id)) = d {
                    dims[id.0 as usize].get_or_insert(n);
                }
            }
        }
    }
    Ok(spec
        .inputs
        .iter()
        .map(|t| {
            given.get(&t.name).cloned().unwrap_or_else(|| {
                t.dims
                    .iter()
                    .map(|d| match d {
                        DimEntry::Dim(DimExpr::Dim(id)) => {
                            dims[id.0 as usize].unwrap_or(DEFAULT_DIM)
                        }
                        _ => DEFAULT_DIM,
                    })
                    .collect()
            })
        })
        .collect())
}

impl Report {
    /// Analyse (through `cache`) and instantiate `spec` on an example.
    pub fn new(
        cache: &StrategyCache,
        spec: &OpSpec,
        given: &BTreeMap<String, Vec<usize>>,
        attrs: &Attrs,
        parts: usize,
    ) -> Result<Report, ReportError> {
        let shapes = example_shapes(spec, given)?;
        let strategies = cache.for_shapes(spec, &shapes)?;
        let attrs = example_attrs(spec, attrs);
        let instance = strategies.instantiate(&shapes, &attrs, parts)?;
        Ok(Report {
            strategies,
            instance,
            parts,
            attrs,
        })
    }

    /// The table (see the module doc).
    pub fn text(&self) -> String {
        let s = &self.strategies;
        let spec = &s.spec;
        let mut out = String::new();
        let shape = |v: &[usize]| {
            v.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join("x")
        };
        let ins: Vec<String> = spec
            .inputs
            .iter()
            .zip(&self.instance.input_shapes)
            .map(|(t, v)| format!("{}={}", t.name, shape(v)))
            .collect();
        let outs: Vec<String> = spec
            .outputs
            .iter()
            .zip(&self.instance.output_shapes)
            .map(|(t, v)| format!("{}={}", t.name, shape(v)))
            .collect();
        let _ = writeln!(out, "op {}", spec.name);
        let _ = writeln!(out, "example: {} -> {}", ins.join(" "), outs.join(" "));
        if !spec.attrs.is_empty() {
            let vals = spec.resolve_attrs(&self.attrs).unwrap_or_default();
            let shown: Vec<String> = spec
                .attrs
                .iter()
                .zip(&vals)
                .map(|(a, v)| match v {
                    AttrValue::Int(i) => format!("{}={i}", a.name),
                    AttrValue::Float(f) => format!("{}={f}", a.name),
                })
                .collect();
            let _ = writeln!(out, "attributes: {}", shown.join(" "));
        }
        let _ = writeln!(
            out,
            "{} parts; bytes = elements each part reads of all inputs x {BYTES_PER_ELEMENT} (f32)",
            self.parts
        );
        let _ = writeln!(
            out,
            "elementwise: {}",
            if s.elementwise { "yes" } else { "no" }
        );
        if s.saturation.is_limit() {
            let _ = writeln!(
                out,
                "egg: stopped at its {} limit; an index kept the best form found within it (a candidate it leaves imprecise is rejected)",
                match s.saturation {
                    Saturation::NodeLimit => "node",
                    _ => "iteration",
                }
            );
        }
        let mut header = vec!["strategy".to_string()];
        header.extend(spec.outputs.iter().map(|t| t.name.clone()));
        header.extend(spec.inputs.iter().map(|t| t.name.clone()));
        header.push("bytes read per part".into());
        let mut rows = vec![header];
        let mut superset = false;
        for (st, cs) in s.strategies.iter().zip(&self.instance.strategies) {
            let mut row = vec![st.name.clone()];
            for o in 0..spec.outputs.len() {
                row.push(match st.output_layout(o as u32) {
                    OutputLayout::Split { axis } => format!("split {axis}"),
                    OutputLayout::Partial { reducer } => format!("partial {}", reducer.name()),
                });
            }
            for r in &st.inputs {
                row.push(match r.layout() {
                    InputLayout::Split { dims } => {
                        format!(
                            "split {}",
                            dims.iter()
                                .map(|d| d.to_string())
                                .collect::<Vec<_>>()
                                .join(",")
                        )
                    }
                    InputLayout::Replicated => "replicated".into(),
                    InputLayout::Unused => "unused".into(),
                });
            }
            let bytes: Vec<String> = cs
                .parts
                .iter()
                .map(|p| {
                    let b = p.inputs.iter().map(Region::count).sum::<u64>() * BYTES_PER_ELEMENT;
                    if p.exact.iter().all(|&e| e) {
                        b.to_string()
                    } else {
                        superset = true;
                        format!("{b}*")
                    }
                })
                .collect();
            row.push(bytes.join(" / "));
            rows.push(row);
        }
        let widths: Vec<usize> = (0..rows[0].len())
            .map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0))
            .collect();
        for r in &rows {
            let line: Vec<String> = r
                .iter()
                .zip(&widths)
                .map(|(c, w)| format!("{c:<w$}"))
                .collect();
            let _ = writeln!(out, "{}", line.join("  ").trim_end());
        }
        if s.strategies.is_empty() {
            let _ = writeln!(out, "(no exact strategy)");
        }
        if superset {
            let _ = writeln!(
                out,
                "* a stated superset: the part's boundaries cut the blocks of a flattened index (`k // q`, `k % q`), so its box holds elements it does not read"
            );
        }
        let _ = writeln!(
            out,
            "\nregions (part = the part's range of the split variable):"
        );
        for st in &s.strategies {
            let _ = writeln!(
                out,
                "  {} over [0, {}):",
                st.name,
                spec.show_dim(&st.extent)
            );
            for (t, r) in spec.inputs.iter().zip(&st.inputs) {
                let dims = match &r.dims {
                    None => "unused".to_string(),
                    Some(d) => d
                        .iter()
                        .map(|x| x.describe(spec, "part"))
                        .collect::<Vec<_>>()
                        .join("; "),
                };
                let _ = writeln!(out, "    {}[{dims}]", t.name);
            }
        }
        if !s.rejected.is_empty() {
            let _ = writeln!(out, "\nrejected:");
            for r in &s.rejected {
                let _ = writeln!(out, "  {}: {}", r.name, r.reason);
            }
        }
        out
    }

    /// The same as JSON.
    pub fn json(&self) -> serde_json::Value {
        let s = &self.strategies;
        let spec = &s.spec;
        let strategies: Vec<serde_json::Value> = s
            .strategies
            .iter()
            .zip(&self.instance.strategies)
            .map(|(st, cs)| {
                serde_json::json!({
                    "name": st.name,
                    "extent": spec.show_dim(&st.extent).to_string(),
                    "splits": st.splits,
                    "outputs": (0..spec.outputs.len()).map(|o| st.output_layout(o as u32)).collect::<Vec<_>>(),
                    "inputs": st.inputs.iter().zip(&spec.inputs).map(|(r, t)| serde_json::json!({
                        "name": t.name,
                        "layout": r.layout(),
                        "region": r.dims.as_ref().map(|d| d.iter().map(|x| x.describe(spec, "part")).collect::<Vec<_>>()),
                    })).collect::<Vec<_>>(),
                    "parts": cs.parts,
                    "bytes_read_per_part": cs.parts.iter().map(|p| p.inputs.iter().map(Region::count).sum::<u64>() * BYTES_PER_ELEMENT).collect::<Vec<_>>(),
                })
            })
            .collect();
        serde_json::json!({
            "op": spec.name,
            "ellipsis_rank": spec.ellipsis_rank,
            "input_shapes": self.instance.input_shapes,
            "output_shapes": self.instance.output_shapes,
            "parts": self.parts,
            "attrs": self.attrs,
            "bytes_per_element": BYTES_PER_ELEMENT,
            "elementwise": s.elementwise,
            "saturation": s.saturation,
            "strategies": strategies,
            "rejected": s.rejected,
        })
    }
}

/// `NAME=VALUE` split at the first `=`.
fn pair(s: &str) -> Result<(&str, &str), String> {
    s.split_once('=')
        .ok_or_else(|| format!("expected NAME=VALUE, got `{s}`"))
}

/// Example input shapes from `NAME=DIMS` texts (`a=64x32`; dims separated by
/// `x` or `,`), by input name (`tofu strategies --shape`).
///
/// Errors: a text without `=` or a dim that is not a number, in words.
pub fn parse_shapes(texts: &[String]) -> Result<BTreeMap<String, Vec<usize>>, String> {
    let mut shapes = BTreeMap::new();
    for s in texts {
        let (name, dims) = pair(s)?;
        let dims: Vec<usize> = dims
            .split(['x', ','])
            .filter(|d| !d.is_empty())
            .map(|d| {
                d.trim()
                    .parse()
                    .map_err(|_| format!("bad dim `{d}` in `{s}`"))
            })
            .collect::<Result<_, _>>()?;
        shapes.insert(name.to_string(), dims);
    }
    Ok(shapes)
}

/// Attribute values from `NAME=VALUE` texts: an integer, else a float
/// (`tofu strategies --attr`).
///
/// Errors: a text without `=` or a value that is not a number, in words.
pub fn parse_attrs(texts: &[String]) -> Result<Attrs, String> {
    let mut attrs = Attrs::new();
    for a in texts {
        let (name, v) = pair(a)?;
        let v = match v.parse::<i64>() {
            Ok(i) => AttrValue::Int(i),
            Err(_) => AttrValue::Float(v.parse().map_err(|_| format!("bad value in `{a}`"))?),
        };
        attrs.insert(name.to_string(), v);
    }
    Ok(attrs)
}
