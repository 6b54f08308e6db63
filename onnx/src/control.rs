//! Control flow with import-time constants: `If` whose condition folds is
//! replaced by the taken branch (one on run-time float data is predicated:
//! both branches computed and selected with `Where`, when they declare the
//! same static output shapes; one decided by integer or boolean graph
//! inputs is an error naming them and `--input-value`); `Loop` with a constant trip count is
//! unrolled; `Scan` (whose trip count is its scan inputs' length) is
//! unrolled by [`crate::scan`].
//!
//! Takes an `If` or `Loop` node and the values known so far; gives the
//! nodes that replace it (the importer lowers them next, in order), each
//! with the `Loop` iteration it belongs to (its time step, which the
//! importer records as the graph's step metadata, `graph::Op::step`;
//! `None` for an `If` branch and for a loop's glue nodes after the last
//! iteration), or `None` for other nodes. A `Loop` inside an unrolled
//! iteration is unrolled too, but its nodes keep the outer iteration's step
//! (the importer's choice: every outer step then holds the same ops, which
//! is what coarsening matches steps by). Values defined inside a subgraph are renamed
//! `<node>/<name>` (`If`) or `<node>/t<i>/<name>` (`Loop` iteration i — the
//! `t<digits>` name segment is kept for readers; coarsening groups the
//! iterations by the step metadata); its initializers become
//! `Constant` nodes; the subgraph's outputs reach the node's outputs through
//! `Identity` nodes. A `Loop`'s scan outputs are the iterations' values
//! stacked along a new axis 0 (`Unsqueeze` + `Concat`). Errors (a reason)
//! say which input depends on run-time data, or what is not supported
//! (a loop-carried termination condition). A subgraph nested in an inlined
//! one reads the renamed values (its outer-scope references are renamed). Source: ONNX
//! operator spec, `If` (opset 1–21) and `Loop` (opset 1–21).

use std::collections::HashMap;

use onnx_protobuf::attribute_proto::AttributeType;
use onnx_protobuf::{AttributeProto, GraphProto, NodeProto, TensorProto};

use crate::lower::Lower;
use crate::node::Node;

/// The ai.onnx control-flow operators [`expand`] replaces at import.
pub const INLINED_OPS: &[&str] = &["If", "Loop", "Scan"];

/// Most `Loop` iterations unrolled.
pub const MAX_UNROLL: usize = 4096;

/// A node replacing a control-flow node, with the `Loop` iteration (0
/// first) it was unrolled from; `None` outside the iterations.
pub type Stepped = (NodeProto, Option<u32>);

/// The nodes replacing `n` (see the module doc); `Ok(None)` when `n` is not
/// control flow. Errors: a reason naming the input that depends on run-time
/// data, or the unsupported form.
pub fn expand(l: &Lower, n: &Node) -> Result<Option<Vec<Stepped>>, String> {
    let unstepped = |v: Vec<NodeProto>| v.into_iter().map(|p| (p, None)).collect();
    match n.op_type() {
        "If" => expand_if(l, n).map(unstepped).map(Some),
        "Loop" => expand_loop(l, n).map(Some),
        "Scan" => crate::scan::expand_scan(l, n).map(Some),
        _ => Ok(None),
    }
}

pub(crate) fn graph_attr<'a>(n: &Node<'a>, name: &str) -> Result<&'a GraphProto, String> {
    n.proto
        .attribute
        .iter()
        .find(|a| a.name == name)
        .and_then(|a| a.g.as_ref())
        .ok_or_else(|| format!("has no `{name}` subgraph"))
}

fn expand_if(l: &Lower, n: &Node) -> Result<Vec<NodeProto>, String> {
    let cond = n.input(0).ok_or("has no condition input")?;
    let Some(c) = l.arg_data(cond) else {
        let r = run_time(
            l,
            &format!("its condition `{cond}`"),
            cond,
            "the branch cannot be chosen at import",
        );
        // Integer and boolean inputs are settings (a sample rate, a flag):
        // the user fixes them. A condition on float data is predicated.
        let deciding = deciding_input_ids(l, cond);
        let setting = |t: &graph::TensorId| l.b.graph().tensor(*t).dtype.is_integer();
        if !deciding.is_empty() && deciding.iter().all(|(t, _)| setting(t)) {
            return Err(r);
        }
        return predicated_if(l, n, cond).map_err(|why| {
            format!("{r}; both branches cannot be computed and selected instead: {why}")
        });
    };
    if c.numel() != 1 {
        return Err(format!(
            "its condition `{cond}` has {} elements, not one",
            c.numel()
        ));
    }
    let branch = if c.values[0] != 0.0 {
        "then_branch"
    } else {
        "else_branch"
    };
    let g = graph_attr(n, branch)?;
    let prefix = format!("{}/{}", n.name, branch);
    let mut out = Vec::new();
    let rename = inline(g, &prefix, &HashMap::new(), &mut out);
    for (o, go) in n.proto.output.iter().zip(&g.output) {
        if !o.is_empty() {
            out.push(identity(&format!("{prefix}/out/{o}"), &rename(&go.name), o));
        }
    }
    Ok(out)
}

/// `If` on a condition known only at run time and decided by float data
/// (not by integer or boolean graph inputs, settings that
/// `--input-value` fixes), predicated: both branches
/// inlined (`<node>/then_branch/…`, `<node>/else_branch/…`), each output
/// reshaped to the static shape both branches declare for it and selected
/// with `Where(cond, then, else)` (ONNX branches have no side effects, so
/// computing both is the same function; gradients reach the taken branch
/// only). Errors: why not — an output whose branches do not declare one
/// static shape and element type, or a condition of higher rank.
fn predicated_if(l: &Lower, n: &Node, cond: &str) -> Result<Vec<NodeProto>, String> {
    let then_g = graph_attr(n, "then_branch")?;
    let else_g = graph_attr(n, "else_branch")?;
    if then_g.output.len() != else_g.output.len() {
        return Err("the branches have different numbers of outputs".into());
    }
    let cond_rank = l.shape_of(cond).map_or(0, |s| s.len());
    let mut shapes = Vec::new();
    for (a, b) in then_g.output.iter().zip(&else_g.output) {
        match (static_type(a), static_type(b)) {
            (Some(x), Some(y)) if x == y && x.1.len() >= cond_rank => shapes.push(x.1),
            _ => {
                return Err(format!(
                "its branch outputs `{}` and `{}` do not declare one static shape and element type",
                a.name, b.name
            ))
            }
        }
    }
    let mut out = Vec::new();
    let mut picked = Vec::new();
    for (branch, g) in [("then_branch", then_g), ("else_branch", else_g)] {
        let prefix = format!("{}/{branch}", n.name);
        let rename = inline(g, &prefix, &HashMap::new(), &mut out);
        picked.push(g.output.iter().map(|o| rename(&o.name)).collect::<Vec<_>>());
    }
    for (k, o) in n.proto.output.iter().enumerate() {
        if o.is_empty() {
            continue;
        }
        let base = format!("{}/select/{o}", n.name);
        let shape = format!("{base}/shape");
        out.push(constant_ints(&shape, &shapes[k]));
        let mut sel = vec![cond.to_string()];
        for (side, names) in ["then", "else"].iter().zip(&picked) {
            let r = format!("{base}/{side}");
            let mut c = NodeProto::new();
            c.op_type = "Reshape".into();
            c.name = r.clone();
            c.input = vec![names[k].clone(), shape.clone()];
            c.output = vec![r.clone()];
            out.push(c);
            sel.push(r);
        }
        let mut w = NodeProto::new();
        w.op_type = "Where".into();
        w.name = base;
        w.input = sel;
        w.output = vec![o.clone()];
        out.push(w);
    }
    Ok(out)
}

/// A value's declared element type and shape when every dim is static.
fn static_type(vi: &onnx_protobuf::ValueInfoProto) -> Option<(i32, Vec<i64>)> {
    let tp = vi.type_.as_ref()?;
    if !tp.has_tensor_type() {
        return None;
    }
    let tt = tp.tensor_type();
    let dims = tt
        .shape
        .as_ref()?
        .dim
        .iter()
        .map(|d| d.has_dim_value().then(|| d.dim_value()).filter(|&v| v > 0))
        .collect::<Option<Vec<i64>>>()?;
    Some((tt.elem_type, dims))
}

fn expand_loop(l: &Lower, n: &Node) -> Result<Vec<Stepped>, String> {
    let unstepped = |v: Vec<NodeProto>| v.into_iter().map(|p| (p, None)).collect();
    let body = graph_attr(n, "body")?;
    let Some(m) = n.input(0) else {
        return Err("has no trip count (a while loop), which cannot be unrolled at import".into());
    };
    let Some(trips) = l.arg_data(m).filter(|d| d.numel() == 1) else {
        return Err(run_time(
            l,
            &format!("its trip count `{m}`"),
            m,
            "it cannot be unrolled at import",
        ));
    };
    if let Some(c) = n.input(1) {
        match l.arg_data(c) {
            Some(d) if d.values.iter().all(|&v| v != 0.0) => {}
            Some(_) => return Ok(unstepped(loop_outputs_without_iterations(n, body))),
            None => {
                return Err(format!(
                    "its termination condition `{c}` depends on run-time data; only loops with a constant trip count are unrolled"
                ))
            }
        }
    }
    let trips = trips.values[0].max(0.0) as usize;
    if trips > MAX_UNROLL {
        return Err(format!(
            "trip count {trips} is more than the {MAX_UNROLL} iterations unrolled at import"
        ));
    }
    if trips == 0 {
        return Ok(unstepped(loop_outputs_without_iterations(n, body)));
    }
    let carried = n.n_inputs().saturating_sub(2);
    if body.input.len() != carried + 2 || body.output.len() < carried + 1 {
        return Err(format!(
            "its body has {} inputs and {} outputs for {carried} loop-carried values",
            body.input.len(),
            body.output.len()
        ));
    }
    let mut out: Vec<Stepped> = Vec::new();
    let mut state: Vec<String> = (0..carried)
        .map(|k| n.input(k + 2).unwrap_or_default().to_string())
        .collect();
    let n_scan = body.output.len() - 1 - carried;
    let mut scans: Vec<Vec<String>> = vec![Vec::new(); n_scan];
    for t in 0..trips {
        let prefix = format!("{}/t{t}", n.name);
        let mut it = Vec::new();
        let mut bound = HashMap::new();
        let iter = format!("{prefix}/iteration");
        it.push(constant_i64(&iter, t as i64, false));
        bound.insert(body.input[0].name.clone(), iter);
        let cond = format!("{prefix}/cond");
        it.push(constant_i64(&cond, 1, true));
        bound.insert(body.input[1].name.clone(), cond);
        for (k, s) in state.iter().enumerate() {
            bound.insert(body.input[k + 2].name.clone(), s.clone());
        }
        let rename = inline(body, &prefix, &bound, &mut it);
        state = (0..carried)
            .map(|k| rename(&body.output[k + 1].name))
            .collect();
        for (j, sc) in scans.iter_mut().enumerate() {
            let v = rename(&body.output[1 + carried + j].name);
            let u = format!("{prefix}/scan{j}");
            it.extend(unsqueeze(&u, &v, 0, n.opset));
            sc.push(u);
        }
        // MAX_UNROLL bounds t well below u32::MAX.
        out.extend(it.into_iter().map(|p| (p, Some(t as u32))));
    }
    for (k, s) in state.iter().enumerate() {
        if let Some(o) = n.proto.output.get(k).filter(|o| !o.is_empty()) {
            out.push((identity(&format!("{}/out/{o}", n.name), s, o), None));
        }
    }
    for (j, sc) in scans.iter().enumerate() {
        if let Some(o) = n.proto.output.get(carried + j).filter(|o| !o.is_empty()) {
            let mut c = NodeProto::new();
            c.op_type = "Concat".into();
            c.name = format!("{}/scan{j}/concat", n.name);
            c.input = sc.clone();
            c.output = vec![o.clone()];
            c.attribute = vec![int_attr("axis", 0)];
            out.push((c, None));
        }
    }
    Ok(out)
}

/// Why `what` (value `value`) cannot be known at import, so that
/// `consequence`: the graph inputs whose values decide it, each with the
/// `--input-value` flag that fixes it; without such inputs (it is computed
/// from weights), the input dims and an export with it resolved.
fn run_time(l: &Lower, what: &str, value: &str, consequence: &str) -> String {
    let inputs = deciding_inputs(l, value);
    if inputs.is_empty() {
        return format!(
            "{what} depends on run-time data, so {consequence}; fix the input dims that decide it \
             (--input-shape) or export the model with it resolved"
        );
    }
    let flags: Vec<String> = inputs
        .iter()
        .map(|i| {
            let n: usize = l.shape_of(i).unwrap_or_default().iter().product();
            let v = match n {
                1 => "V".to_string(),
                2..=4 => vec!["V"; n].join(","),
                _ => format!("V,V,… ({n} values)"),
            };
            format!("--input-value {i}={v}")
        })
        .collect();
    let names: Vec<String> = inputs.iter().map(|i| format!("`{i}`")).collect();
    let (s, them) = if inputs.len() == 1 {
        ("", "it")
    } else {
        ("s", "them")
    };
    format!(
        "{what} depends on run-time data: the value of graph input{s} {} decides it, so {consequence}; \
         fix {them} at import with {} (the value the model is always run with, e.g. a sample rate or a flag)",
        names.join(", "),
        flags.join(" ")
    )
}

/// The graph inputs (no value known at import) that value `value` is
/// computed from through the operators lowered so far, sorted.
fn deciding_inputs(l: &Lower, value: &str) -> Vec<String> {
    deciding_input_ids(l, value)
        .into_iter()
        .map(|(_, n)| n)
        .collect()
}

/// [`deciding_inputs`] with their graph tensors.
fn deciding_input_ids(l: &Lower, value: &str) -> Vec<(graph::TensorId, String)> {
    let Some(start) = l.values.get(value).and_then(|e| e.tensor) else {
        return Vec::new();
    };
    let mut seen = std::collections::HashSet::from([start]);
    let mut stack = vec![start];
    let mut leaves = std::collections::HashSet::new();
    while let Some(t) = stack.pop() {
        match l.producers.get(&t) {
            Some((_, ins)) => {
                for &i in ins {
                    if seen.insert(i) {
                        stack.push(i);
                    }
                }
            }
            None => {
                leaves.insert(t);
            }
        }
    }
    let mut names: Vec<(graph::TensorId, String)> = leaves
        .iter()
        .filter_map(|t| Some((*t, l.graph_inputs.get(t)?.clone())))
        .collect();
    names.sort_by(|a, b| a.1.cmp(&b.1));
    names
}

/// A loop that runs no iteration: its carried values pass through.
fn loop_outputs_without_iterations(n: &Node, _body: &GraphProto) -> Vec<NodeProto> {
    let carried = n.n_inputs().saturating_sub(2);
    (0..carried)
        .filter_map(|k| {
            let o = n.proto.output.get(k).filter(|o| !o.is_empty())?;
            Some(identity(&format!("{}/out/{o}", n.name), n.input(k + 2)?, o))
        })
        .collect()
}

/// Append `g`'s initializers (as `Constant` nodes) and nodes, renamed under
/// `prefix`, to `out`; `bound` maps subgraph input names to outer values.
/// Gives the renaming (names not defined in `g` stay: outer-scope values).
pub(crate) fn inline<'a>(
    g: &'a GraphProto,
    prefix: &str,
    bound: &HashMap<String, String>,
    out: &mut Vec<NodeProto>,
) -> impl Fn(&str) -> String + 'a {
    let mut map: HashMap<String, String> = bound.clone();
    let fresh = |v: &str| format!("{prefix}/{v}");
    for t in &g.initializer {
        let name = fresh(&t.name);
        map.insert(t.name.clone(), name.clone());
        let mut c = NodeProto::new();
        c.op_type = "Constant".into();
        c.name = name.clone();
        c.output = vec![name];
        let mut a = AttributeProto::new();
        a.name = "value".into();
        a.type_ = AttributeType::TENSOR.into();
        a.t = Some(t.clone()).into();
        c.attribute = vec![a];
        out.push(c);
    }
    for node in &g.node {
        for o in node.output.iter().filter(|o| !o.is_empty()) {
            map.insert(o.clone(), fresh(o));
        }
    }
    for (i, node) in g.node.iter().enumerate() {
        let mut c = node.clone();
        let base = if node.name.is_empty() {
            format!("{}_{i}", node.op_type)
        } else {
            node.name.clone()
        };
        c.name = fresh(&base);
        for x in c.input.iter_mut().chain(c.output.iter_mut()) {
            if let Some(r) = map.get(x.as_str()) {
                *x = r.clone();
            }
        }
        for a in c.attribute.iter_mut() {
            for sub in a.g.as_mut().into_iter().chain(a.graphs.iter_mut()) {
                rename_outer(sub, &map);
            }
        }
        out.push(c);
    }
    move |v: &str| map.get(v).cloned().unwrap_or_else(|| v.to_string())
}

/// Rename, in nested subgraph `g` and the subgraphs inside it, the
/// outer-scope values it reads by `map`; names `g` defines itself (inputs,
/// initializers, node outputs) shadow the outer ones and stay.
fn rename_outer(g: &mut GraphProto, map: &HashMap<String, String>) {
    let own: std::collections::HashSet<String> = g
        .input
        .iter()
        .map(|i| i.name.clone())
        .chain(g.initializer.iter().map(|t| t.name.clone()))
        .chain(g.node.iter().flat_map(|n| n.output.iter().cloned()))
        .collect();
    let inner: HashMap<String, String> = map
        .iter()
        .filter(|(k, _)| !own.contains(*k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for node in g.node.iter_mut() {
        for x in node.input.iter_mut() {
            if let Some(r) = inner.get(x.as_str()) {
                *x = r.clone();
            }
        }
        for a in node.attribute.iter_mut() {
            for sub in a.g.as_mut().into_iter().chain(a.graphs.iter_mut()) {
                rename_outer(sub, &inner);
            }
        }
    }
    for o in g.output.iter_mut() {
        if let Some(r) = inner.get(o.name.as_str()) {
            o.name = r.clone();
        }
    }
}

pub(crate) fn int_attr(name: &str, v: i64) -> AttributeProto {
    let mut a = AttributeProto::new();
    a.name = name.into();
    a.type_ = AttributeType::INT.into();
    a.i = v;
    a
}

pub(crate) fn identity(name: &str, from: &str, to: &str) -> NodeProto {
    let mut c = NodeProto::new();
    c.op_type = "Identity".into();
    c.name = name.into();
    c.input = vec![from.into()];
    c.output = vec![to.into()];
    c
}

pub(crate) fn constant_i64(name: &str, v: i64, boolean: bool) -> NodeProto {
    let mut t = TensorProto::new();
    t.name = name.into();
    if boolean {
        t.data_type = 9;
        t.int32_data = vec![v as i32];
    } else {
        t.data_type = 7;
        t.int64_data = vec![v];
    }
    let mut c = NodeProto::new();
    c.op_type = "Constant".into();
    c.name = name.into();
    c.output = vec![name.into()];
    let mut a = AttributeProto::new();
    a.name = "value".into();
    a.type_ = AttributeType::TENSOR.into();
    a.t = Some(t).into();
    c.attribute = vec![a];
    c
}

/// `Unsqueeze` of `x` at `axis` into value `name`, in the form opset
/// `opset` reads (`axes` an attribute before 13, a constant input from 13).
pub(crate) fn unsqueeze(name: &str, x: &str, axis: i64, opset: i64) -> Vec<NodeProto> {
    let mut c = NodeProto::new();
    c.op_type = "Unsqueeze".into();
    c.name = name.into();
    c.input = vec![x.into()];
    c.output = vec![name.into()];
    if opset < 13 {
        c.attribute = vec![ints_attr("axes", &[axis])];
        return vec![c];
    }
    let axes = format!("{name}_axes");
    let mut k = constant_i64(&axes, axis, false);
    if let Some(t) = k.attribute.first_mut().and_then(|a| a.t.as_mut()) {
        t.dims = vec![1];
    }
    c.input.push(axes);
    vec![k, c]
}

/// A `Constant` node giving the 1-D int64 tensor `v`.
fn constant_ints(name: &str, v: &[i64]) -> NodeProto {
    let mut c = constant_i64(name, 0, false);
    if let Some(t) = c.attribute.first_mut().and_then(|a| a.t.as_mut()) {
        t.dims = vec![v.len() as i64];
        t.int64_data = v.to_vec();
    }
    c
}

fn ints_attr(name: &str, v: &[i64]) -> AttributeProto {
    let mut a = AttributeProto::new();
    a.name = name.into();
    a.type_ = AttributeType::INTS.into();
    a.ints = v.to_vec();
    a
}
