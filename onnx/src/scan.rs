//! `Scan` unrolled at import: its trip count is the length of its scan
//! inputs along their scan axis, known from their shapes.
//!
//! Takes a `Scan` node (opset 8, with a batch axis, or 9 and later) and the
//! shapes known so far; gives the nodes that replace it, each with the
//! iteration it belongs to (the importer's step metadata, as for `Loop`;
//! `None` for glue after the last iteration). Iteration t reads element t of
//! each scan input along its axis (`Gather` with a constant scalar index,
//! which drops the axis; element T−1−t for a reverse direction), binds the
//! body's state inputs to the previous iteration's state outputs, and
//! inlines the body under `<node>/t<t>/` ([`crate::control`]'s renaming).
//! The node's state outputs are the last iteration's; its scan outputs are
//! the iterations' values stacked along the output axis (`Unsqueeze` +
//! `Concat`, in reverse order for a reverse direction). Opset 8 has a batch
//! axis 0 on every input and output and the scan axis 1: each batch element
//! is unrolled alone (`<node>/b<b>/t<t>/`) and the results are stacked
//! along axis 0.
//!
//! Errors (a reason): a scan input whose shape is unknown at import, scan
//! inputs of different lengths, a `sequence_lens` input (opset 8) that is
//! not every sequence's full length, a body whose inputs and outputs do not
//! match the node's, more than [`crate::control::MAX_UNROLL`] iterations.
//! Source: ONNX operator spec, `Scan` (opset 8, 9, 11, 16, 19, 21).

use std::collections::HashMap;

use onnx_protobuf::{GraphProto, NodeProto};

use crate::control::{
    constant_i64, graph_attr, identity, inline, int_attr, unsqueeze, Stepped, MAX_UNROLL,
};
use crate::lower::Lower;
use crate::node::Node;

/// A scan input: value name, scan axis (as given: negative counts from the
/// back), reversed.
struct ScanIn {
    name: String,
    axis: i64,
    reverse: bool,
}

/// What one unrolling needs: the body, the opset of the node (for the
/// `Unsqueeze` form), the output axes and directions of the scan outputs.
struct Unroll<'a> {
    body: &'a GraphProto,
    opset: i64,
    out_axes: Vec<i64>,
    out_reverse: Vec<bool>,
}

/// The nodes replacing `Scan` node `n` (see the module doc). Errors: why it
/// cannot be unrolled.
pub fn expand_scan(l: &Lower, n: &Node) -> Result<Vec<Stepped>, String> {
    let body = graph_attr(n, "body")?;
    let m = usize::try_from(n.attrs.int("num_scan_inputs", 0))
        .ok()
        .filter(|&m| m > 0)
        .ok_or("has no scan inputs (num_scan_inputs < 1)")?;
    let first = usize::from(n.opset < 9);
    let n_in = n.proto.input.len();
    if n_in < first + m {
        return Err(format!(
            "has {n_in} inputs for {m} scan inputs (num_scan_inputs)"
        ));
    }
    let n_state = n_in - first - m;
    if body.input.len() != n_state + m || body.output.len() < n_state {
        return Err(format!(
            "its body has {} inputs and {} outputs for {n_state} state values and {m} scan inputs",
            body.input.len(),
            body.output.len()
        ));
    }
    let k = body.output.len() - n_state;
    let list = |name: &str, len: usize| -> Result<Vec<i64>, String> {
        match n.attrs.ints(name) {
            None => Ok(vec![0; len]),
            Some(v) if v.len() == len => Ok(v),
            Some(v) => Err(format!("`{name}` has {} entries, not {len}", v.len())),
        }
    };
    let name_of = |i: usize| -> Result<String, String> {
        n.input(i)
            .map(str::to_string)
            .ok_or_else(|| format!("input {i} is missing"))
    };
    let states: Vec<String> = (first..first + n_state)
        .map(name_of)
        .collect::<Result<_, _>>()?;
    let mut u = Unroll {
        body,
        opset: n.opset,
        out_axes: list("scan_output_axes", k)?,
        out_reverse: list("scan_output_directions", k)?
            .iter()
            .map(|&d| d != 0)
            .collect(),
    };
    let scan_names: Vec<String> = (first + n_state..n_in)
        .map(name_of)
        .collect::<Result<_, _>>()?;
    if n.opset >= 9 {
        let axes = list("scan_input_axes", m)?;
        let dirs = list("scan_input_directions", m)?;
        let scans: Vec<ScanIn> = scan_names
            .into_iter()
            .zip(axes.iter().zip(&dirs))
            .map(|(name, (&axis, &d))| ScanIn {
                name,
                axis,
                reverse: d != 0,
            })
            .collect();
        let trips = trip_count(l, &scans)?;
        let mut out = Vec::new();
        let prefix = n.name.clone();
        let (fin, stacked) = u.unroll(&prefix, &states, &scans, trips, &mut out);
        for (o, v) in n.proto.output.iter().zip(fin.iter().chain(&stacked)) {
            if !o.is_empty() {
                out.push((identity(&format!("{prefix}/out/{o}"), v, o), None));
            }
        }
        return Ok(out);
    }
    // Opset 8: a batch axis 0 everywhere, the scan axis 1 (0 once a batch
    // element is taken), stacked along axis 0 within a batch element.
    u.out_axes = vec![0; k];
    let dirs = list("directions", m)?;
    let batch = l
        .shape_of(&scan_names[0])
        .and_then(|s| s.first().copied())
        .ok_or_else(|| format!("the shape of scan input `{}` is unknown", scan_names[0]))?;
    let scans: Vec<ScanIn> = scan_names
        .iter()
        .zip(&dirs)
        .map(|(name, &d)| ScanIn {
            name: name.clone(),
            axis: 1,
            reverse: d != 0,
        })
        .collect();
    let trips = trip_count(l, &scans)?;
    if let Some(lens) = n.input(0) {
        match l.arg_data(lens) {
            Some(d) if d.values.iter().all(|&v| v == trips as f64) => {}
            Some(_) => {
                return Err(format!(
                    "`sequence_lens` `{lens}` is not every sequence's full length {trips}; only full-length sequences are unrolled"
                ))
            }
            None => {
                return Err(format!(
                    "`sequence_lens` `{lens}` depends on run-time data; only full-length sequences are unrolled"
                ))
            }
        }
    }
    let mut out = Vec::new();
    let mut per_out: Vec<Vec<String>> = vec![Vec::new(); n_state + k];
    for b in 0..batch {
        let prefix = format!("{}/b{b}", n.name);
        let idx = format!("{prefix}/index");
        out.push((constant_i64(&idx, b as i64, false), None));
        let take = |v: &str, out: &mut Vec<Stepped>| {
            let name = format!("{prefix}/in/{v}");
            out.push((gather(&name, v, &idx, 0), None));
            name
        };
        let st: Vec<String> = states.iter().map(|s| take(s, &mut out)).collect();
        let sc: Vec<ScanIn> = scans
            .iter()
            .map(|s| ScanIn {
                name: take(&s.name, &mut out),
                axis: 0,
                reverse: s.reverse,
            })
            .collect();
        let (fin, stacked) = u.unroll(&prefix, &st, &sc, trips, &mut out);
        for (j, v) in fin.iter().chain(&stacked).enumerate() {
            let name = format!("{prefix}/out{j}");
            out.extend(
                unsqueeze(&name, v, 0, n.opset)
                    .into_iter()
                    .map(|p| (p, None)),
            );
            per_out[j].push(name);
        }
    }
    for (o, parts) in n.proto.output.iter().zip(&per_out) {
        if !o.is_empty() {
            out.push((concat(&format!("{}/out/{o}", n.name), parts, o, 0), None));
        }
    }
    Ok(out)
}

/// The common length of the scan inputs along their axes. Errors: an
/// unknown shape, an axis out of range, lengths that differ, no iteration,
/// too many iterations.
fn trip_count(l: &Lower, scans: &[ScanIn]) -> Result<usize, String> {
    let mut trips = None;
    for s in scans {
        let shape = l
            .shape_of(&s.name)
            .ok_or_else(|| format!("the shape of scan input `{}` is unknown", s.name))?;
        let r = shape.len() as i64;
        let a = if s.axis < 0 { s.axis + r } else { s.axis };
        let len = usize::try_from(a)
            .ok()
            .and_then(|a| shape.get(a).copied())
            .ok_or_else(|| {
                format!(
                    "scan axis {} is out of range for scan input `{}` of shape {shape:?}",
                    s.axis, s.name
                )
            })?;
        match trips {
            Some(t) if t != len => {
                return Err(format!(
                    "its scan inputs have different lengths ({t} and {len} for `{}`)",
                    s.name
                ))
            }
            _ => trips = Some(len),
        }
    }
    let trips = trips.ok_or("has no scan inputs")?;
    if trips == 0 {
        return Err("its scan inputs are empty (no iteration to unroll)".into());
    }
    if trips > MAX_UNROLL {
        return Err(format!(
            "its {trips} iterations are more than the {MAX_UNROLL} unrolled at import"
        ));
    }
    Ok(trips)
}

impl Unroll<'_> {
    /// Unroll the body `trips` times under `prefix`, from state values
    /// `states` over `scans`; appends the nodes to `out` and gives the final
    /// state values and the stacked scan outputs.
    fn unroll(
        &self,
        prefix: &str,
        states: &[String],
        scans: &[ScanIn],
        trips: usize,
        out: &mut Vec<Stepped>,
    ) -> (Vec<String>, Vec<String>) {
        let body = self.body;
        let n_state = states.len();
        let k = body.output.len() - n_state;
        let mut state = states.to_vec();
        let mut pieces: Vec<Vec<String>> = vec![Vec::new(); k];
        for t in 0..trips {
            let p = format!("{prefix}/t{t}");
            let mut it = Vec::new();
            let mut bound = HashMap::new();
            for (bi, s) in body.input.iter().zip(&state) {
                bound.insert(bi.name.clone(), s.clone());
            }
            for (j, s) in scans.iter().enumerate() {
                let i = if s.reverse { trips - 1 - t } else { t };
                let idx = format!("{p}/scan_in{j}_index");
                it.push(constant_i64(&idx, i as i64, false));
                let v = format!("{p}/scan_in{j}");
                it.push(gather(&v, &s.name, &idx, s.axis));
                bound.insert(body.input[n_state + j].name.clone(), v);
            }
            let rename = inline(body, &p, &bound, &mut it);
            state = (0..n_state).map(|i| rename(&body.output[i].name)).collect();
            for (j, piece) in pieces.iter_mut().enumerate() {
                let v = rename(&body.output[n_state + j].name);
                let u = format!("{p}/scan_out{j}");
                it.extend(unsqueeze(&u, &v, self.out_axes[j], self.opset));
                piece.push(u);
            }
            // MAX_UNROLL bounds t well below u32::MAX.
            out.extend(it.into_iter().map(|q| (q, Some(t as u32))));
        }
        let stacked = pieces
            .into_iter()
            .enumerate()
            .map(|(j, mut parts)| {
                if self.out_reverse[j] {
                    parts.reverse();
                }
                let name = format!("{prefix}/scan_out{j}");
                out.push((concat(&name, &parts, &name, self.out_axes[j]), None));
                name
            })
            .collect();
        (state, stacked)
    }
}

/// `Gather` of element `idx` (a scalar constant) of `x` along `axis`: the
/// axis is dropped.
fn gather(name: &str, x: &str, idx: &str, axis: i64) -> NodeProto {
    let mut c = NodeProto::new();
    c.op_type = "Gather".into();
    c.name = name.into();
    c.input = vec![x.into(), idx.into()];
    c.output = vec![name.into()];
    c.attribute = vec![int_attr("axis", axis)];
    c
}

fn concat(name: &str, parts: &[String], to: &str, axis: i64) -> NodeProto {
    let mut c = NodeProto::new();
    c.op_type = "Concat".into();
    c.name = name.into();
    c.input = parts.to_vec();
    c.output = vec![to.into()];
    c.attribute = vec![int_attr("axis", axis)];
    c
}
