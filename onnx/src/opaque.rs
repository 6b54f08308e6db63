//! `--opaque-unsupported`: nodes without a mapping become opaque operators.
//!
//! Takes a node the table does not map (or one with a subgraph) and the
//! shapes of its inputs (from the graph so far) and outputs (from the
//! model's `value_info` / graph outputs); gives a generated TDL spec named
//! `opaque_<node>` in which every output element of batch row b reads every
//! element of row b of every batched input and all of every other input
//! (the leading dim B is shared), and evaluates to 0. The spec's doc names
//! the node, op type and opset. Such an operator can only be replicated or
//! split along B: the reads sit under a condition on every other output
//! coordinate (always true), which the interval analysis cannot align with a
//! part of the inputs, so splitting any other output dim is rejected, and the
//! statement is no top-level reduction, so no reduction split exists either
//! (tested: `onnx/tests/opaque.rs`). It has no gradient, so a training graph
//! through it fails naming the node.
//!
//! The generated specs are added to the library returned with the graph
//! ([`crate::Imported::library`]); the planner must use that library.

use std::collections::{BTreeMap, HashMap};

use crate::lower::{LResult, Lower, NodeError, Out};
use crate::node::Node;

/// Why a node is opaque.
pub enum Why {
    /// It has a subgraph attribute (name, nodes inside).
    Subgraph(String, usize),
    /// Its op type has no row in the table (or its domain is not ai.onnx).
    NoMapping,
}

/// Generated opaque specs, and the static output shapes the model declares.
#[derive(Default)]
pub struct OpaqueSpecs {
    /// Spec name → TDL text.
    specs: BTreeMap<String, String>,
    /// Value name → declared static shape.
    pub declared: HashMap<String, Vec<usize>>,
    /// Value name → declared dims where some are dynamic (`None`).
    pub partial: HashMap<String, Vec<Option<usize>>>,
}

/// The error reason when an opaque node's output shapes are unknown.
pub fn no_shape_reason() -> String {
    "cannot import it as an opaque operator: the model does not declare the static shapes of its outputs \
     and tofu has no shape rule for it (run onnx.shape_inference.infer_shapes on the model first)"
        .into()
}

fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect()
}

impl OpaqueSpecs {
    /// The spec name for `node`, generating its text if it is new. `None` when
    /// an input or output shape is unknown.
    pub fn spec_for(&mut self, node: &Node, l: &Lower) -> Option<String> {
        let name = format!("opaque_{}", sanitize(&node.name));
        if self.specs.contains_key(&name) {
            return Some(name);
        }
        let ins: Vec<Vec<usize>> = (0..node.n_inputs())
            .filter_map(|i| node.input(i))
            .map(|x| l.shape_of(x))
            .collect::<Option<_>>()?;
        let outs: Vec<Vec<usize>> = (0..node.proto.output.len())
            .filter(|&j| node.wants_output(j))
            .map(|j| crate::opaque_shape::output_shape(node, l, j, &self.declared, &self.partial))
            .collect::<Option<_>>()?;
        let batch = ins.first().and_then(|s| s.first()).copied();
        let mut text = format!(
            "/// Opaque stand-in for ONNX node `{}` ({}, opset {}), which tofu has no spec for:\n\
             /// every output element of batch row b depends on all of row b of every input; the\n\
             /// value is 0 (it cannot be executed). Replicate it or split it along B only.\n\
             /// Source: ONNX {} (imported with --opaque-unsupported).\n",
            node.name,
            node.op_type(),
            node.opset,
            node.op_type()
        );
        let mut decls = Vec::new();
        let mut reads = Vec::new();
        for (i, s) in ins.iter().enumerate() {
            let batched = !s.is_empty() && Some(s[0]) == batch;
            let mut dims = Vec::new();
            let mut idx = Vec::new();
            let mut binders = Vec::new();
            for (a, _) in s.iter().enumerate() {
                if a == 0 && batched {
                    dims.push("B".to_string());
                    idx.push("b".to_string());
                } else {
                    dims.push(format!("I{i}_{a}"));
                    idx.push(format!("k{i}_{a}"));
                    binders.push(format!("k{i}_{a}"));
                }
            }
            decls.push(format!("x{i}[{}]", dims.join(", ")));
            let read = format!("x{i}[{}]", idx.join(", "));
            reads.push(if binders.is_empty() {
                read
            } else {
                format!("Sum({}: {read})", binders.join(", "))
            });
        }
        let mut out_decls = Vec::new();
        let mut stmts = Vec::new();
        for (j, s) in outs.iter().enumerate() {
            let batched = batch.is_some() && !s.is_empty() && Some(s[0]) == batch;
            let dims: Vec<String> = s
                .iter()
                .enumerate()
                .map(|(a, d)| {
                    if a == 0 && batched {
                        "B".into()
                    } else {
                        d.to_string()
                    }
                })
                .collect();
            let vars: Vec<String> = (0..s.len())
                .map(|a| {
                    if a == 0 && batched {
                        "b".into()
                    } else {
                        format!("j{a}")
                    }
                })
                .collect();
            out_decls.push(format!("y{j}[{}]", dims.join(", ")));
            // Every coordinate except b appears in the (always true) guard of
            // the reads: no strategy may split it (see the module doc).
            let guard: Vec<String> = vars
                .iter()
                .filter(|v| v.as_str() != "b")
                .map(|v| format!("{v} >= 0"))
                .collect();
            let all = if reads.is_empty() {
                "0.0".to_string()
            } else if batched {
                reads.join(" + ")
            } else {
                // No batch row: every input is read whole.
                ins.iter()
                    .enumerate()
                    .map(|(i, s)| {
                        let idx: Vec<String> = (0..s.len()).map(|a| format!("u{i}_{a}")).collect();
                        if idx.is_empty() {
                            format!("x{i}[]")
                        } else {
                            format!("Sum({}: x{i}[{}])", idx.join(", "), idx.join(", "))
                        }
                    })
                    .collect::<Vec<_>>()
                    .join(" + ")
            };
            let body = if guard.is_empty() {
                format!("select(1 > 0, {all}, 0.0) * 0.0")
            } else {
                format!("select({}, {all}, 0.0) * 0.0", guard.join(" && "))
            };
            stmts.push(format!("    y{j}[{}] = {body};", vars.join(", ")));
        }
        let outs_text = if out_decls.len() == 1 {
            out_decls[0].clone()
        } else {
            format!("({})", out_decls.join(", "))
        };
        text.push_str(&format!(
            "op {name}({}) -> {outs_text} {{\n{}\n}}\n",
            decls.join(", "),
            stmts.join("\n")
        ));
        self.specs.insert(name.clone(), text);
        Some(name)
    }

    /// Every generated spec, as one TDL source.
    pub fn source(&self) -> String {
        self.specs.values().cloned().collect::<Vec<_>>().join("\n")
    }
}

/// Emit the opaque operator of `node` with spec `spec`.
pub fn lower(l: &mut Lower, node: &Node, spec: &str) -> LResult<Vec<Out>> {
    let mut ins = Vec::new();
    for i in 0..node.n_inputs() {
        if let Some(x) = node.input(i) {
            ins.push(l.tensor(x)?);
        }
    }
    let outs = l.emit(spec, &ins, &[])?;
    if outs.is_empty() {
        return Err(NodeError::Unsupported("opaque spec has no outputs".into()));
    }
    Ok(outs.into_iter().map(Out::T).collect())
}
