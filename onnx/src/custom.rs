//! Custom ONNX operators mapped to user specs (issue 43, item 3).
//!
//! Takes a node the mapping table has no row for (any domain: a
//! `torch.library` op, a custom autograd function, `com.example::SwiGLU`)
//! and the operator library; gives the spec it maps to — the one named by
//! `--op-map DOMAIN::OP=SPEC`, else the one whose `///` doc has the line
//! `onnx: DOMAIN::OP` — and lowers the node as one operator of that spec:
//! the node's inputs in order, its attributes bound to the spec's by name
//! (types checked; a required one missing, or one the spec does not declare,
//! is an error naming it). Its gradient is the spec's `grad` declarations
//! (a spec without them on a weight's path is the training import's
//! [`crate::OnnxError::NoGradient`]), its partition strategies the interval
//! analysis of the spec.

use std::collections::BTreeMap;

use onnx_protobuf::attribute_proto::AttributeType;
use tdl::{AttrType, AttrValue, Library, OpSpec};

use crate::lower::{LResult, Lower, NodeError, Out};
use crate::node::Node;

/// The doc line that maps a spec to an ONNX operator: `onnx: DOMAIN::OP`.
pub const ANNOTATION: &str = "onnx:";

/// The spec `domain::op_type` maps to: `op_map` (`"DOMAIN::OP"` → spec
/// name, from `--op-map`) first, else a spec of `library` whose doc has the
/// line `onnx: DOMAIN::OP`.
pub fn spec_for<'l>(
    library: &'l Library,
    op_map: &BTreeMap<String, String>,
    domain: &str,
    op_type: &str,
) -> Option<&'l OpSpec> {
    let key = format!("{domain}::{op_type}");
    if let Some(name) = op_map.get(&key) {
        return library.get(name);
    }
    library.ops().find(|s| {
        s.doc.lines().any(|l| {
            let l = l.trim().trim_start_matches('/').trim();
            l.strip_prefix(ANNOTATION).is_some_and(|k| k.trim() == key)
        })
    })
}

/// Parse `--op-map DOMAIN::OP=SPEC` texts into `"DOMAIN::OP"` → spec name.
///
/// Errors: a text not of that form, in words.
pub fn parse_op_map(texts: &[String]) -> Result<BTreeMap<String, String>, String> {
    let mut map = BTreeMap::new();
    for t in texts {
        let (key, spec) = t
            .split_once('=')
            .filter(|(k, s)| k.contains("::") && !s.trim().is_empty())
            .ok_or_else(|| {
                format!("--op-map `{t}`: expected DOMAIN::OP=SPEC, e.g. --op-map com.example::SwiGLU=swiglu")
            })?;
        map.insert(key.trim().to_string(), spec.trim().to_string());
    }
    Ok(map)
}

/// The node's attributes bound to `spec`'s by name.
///
/// Errors: an attribute the spec does not declare, one of another type
/// (an ONNX float for an `int`, a list, a string), a required one missing.
fn attrs<'s>(node: &Node, spec: &'s OpSpec) -> LResult<Vec<(&'s str, AttrValue)>> {
    let declared: Vec<&str> = spec.attrs.iter().map(|a| a.name.as_str()).collect();
    for a in &node.proto.attribute {
        if !declared.contains(&a.name.as_str()) {
            return Err(NodeError::Unsupported(format!(
                "its attribute `{}` is not an attribute of the spec `{}` (its attributes: {}); declare it in the spec or drop it from the node",
                a.name,
                spec.name,
                if declared.is_empty() { "none".to_string() } else { declared.join(", ") }
            )));
        }
    }
    let mut out = Vec::new();
    for d in &spec.attrs {
        let Some(a) = node.attrs.get(&d.name) else {
            if d.default.is_none() {
                return Err(NodeError::Unsupported(format!(
                    "it has no attribute `{}`, which the spec `{}` requires (`{}: {}`); set it on the node or give it a default in the spec",
                    d.name,
                    spec.name,
                    d.name,
                    ty_name(d.ty)
                )));
            }
            continue;
        };
        let ty = a.type_.enum_value_or_default();
        let v = match (d.ty, ty) {
            (AttrType::Int, AttributeType::INT) => AttrValue::Int(a.i),
            (AttrType::Float, AttributeType::FLOAT) => AttrValue::Float(a.f as f64),
            (AttrType::Float, AttributeType::INT) => AttrValue::Float(a.i as f64),
            _ => {
                return Err(NodeError::Unsupported(format!(
                    "its attribute `{}` is {:?} but the spec `{}` declares `{}: {}`; write the node's attribute as {} or change the spec",
                    d.name,
                    ty,
                    spec.name,
                    d.name,
                    ty_name(d.ty),
                    match d.ty {
                        AttrType::Int => "an int",
                        AttrType::Float => "a float",
                    }
                )))
            }
        };
        out.push((d.name.as_str(), v));
    }
    Ok(out)
}

fn ty_name(t: AttrType) -> &'static str {
    match t {
        AttrType::Int => "int",
        AttrType::Float => "float",
    }
}

/// Lower `node` as one operator of `spec` (see the module doc).
///
/// Errors: a node whose input or output count is not the spec's, an
/// omitted input, attributes as [`attrs`], shapes the spec rejects.
pub fn lower(l: &mut Lower, node: &Node, spec: &OpSpec) -> LResult<Vec<Out>> {
    if node.n_inputs() != spec.inputs.len() || node.proto.output.len() > spec.outputs.len() {
        return Err(NodeError::Unsupported(format!(
            "it has {} input(s) and {} output(s), the spec `{}` {} and {}",
            node.n_inputs(),
            node.proto.output.len(),
            spec.name,
            spec.inputs.len(),
            spec.outputs.len()
        )));
    }
    let mut ins = Vec::new();
    for (i, decl) in spec.inputs.iter().enumerate() {
        let x = node.input(i).ok_or_else(|| {
            NodeError::Unsupported(format!(
                "input {i} (`{}` of the spec `{}`) is omitted",
                decl.name, spec.name
            ))
        })?;
        ins.push(l.tensor(x)?);
    }
    let attrs = attrs(node, spec)?;
    let outs = l.emit(&spec.name, &ins, &attrs)?;
    Ok(outs.into_iter().map(Out::T).collect())
}
