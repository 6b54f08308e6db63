//! Folding by evaluation: a node whose inputs are all known at import time
//! is computed through the TDL interpreter, with the specs the mapping table
//! chooses for it — one mechanism for every mapped operator, no per-op code.
//!
//! Takes a node of a mapped op type whose every input is a known value of
//! kind [`Kind::Constant`] (integer initializers, `Constant` scalars, values
//! folded before: the `Shape → Gather → Unsqueeze → Concat → …` chains of
//! exported models once input dims are fixed); gives its outputs as known
//! values. How: the node is lowered by its table row into a scratch
//! [`GraphBuilder`] whose leaves are the known inputs, and the scratch graph
//! is run with [`graph::execute::execute`] (the TDL reference
//! interpreter, the semantic ground truth). Elements are f64 as everywhere
//! in the importer; the output element type follows ONNX's type rules
//! ([`out_elem`]) and integer outputs are rounded onto their type.
//!
//! Not folded (lowered as operators instead): nodes reading a weight (a
//! float initializer or `ConstantOfShape` output stays a parameter), a
//! caller-supplied input ([`Kind::Input`], conformance cases), or more than
//! [`FOLD_LIMIT`] elements in or out (large constants are not evaluated
//! needlessly), and nodes whose op has no row in the table. What the
//! interpreter cannot do (shapes only: `Shape`, `Size`; views of weights;
//! data-dependent output shapes: `ConstantOfShape`, `Range`) is in
//! [`crate::fold`].

use graph::execute::{execute, Values};
use graph::GraphBuilder;
use tdl::{Library, Tensor as Value};

use crate::lower::{Kind, Known, LResult, Lower, NodeError, Out, Src};
use crate::node::Node;
use crate::table;
use crate::tensor::{round_to, Data, Elem};

/// Most elements a folded node may read or write (inputs and outputs each).
pub const FOLD_LIMIT: usize = 1 << 16;

/// Whether `n` is a candidate: every input known, of kind constant, small.
pub fn foldable(l: &Lower, n: &Node) -> bool {
    if table::lookup(n.op_type()).is_none_or(|m| m.specs.is_empty()) {
        return false;
    }
    let mut any = false;
    for i in 0..n.n_inputs() {
        let Some(x) = n.input(i) else { continue };
        let Some(k) = l.values.get(x).and_then(|e| e.known.as_ref()) else {
            return false;
        };
        if k.kind != Kind::Constant || k.numel() > FOLD_LIMIT {
            return false;
        }
        any = true;
    }
    any
}

/// Evaluate `n` (a [`foldable`] node) with the interpreter; `Ok(None)` when
/// an output would exceed [`FOLD_LIMIT`], its lowering does not apply to
/// these values, or an input's external data cannot be read (the node is
/// then lowered as usual, which reports the problem). Errors: the interpreter's (an out-of-range index in a constant
/// shape computation, ...), naming the spec.
pub fn evaluate(l: &Lower, n: &Node, lib: &Library) -> LResult<Option<Vec<Known>>> {
    let Some(m) = table::lookup(n.op_type()) else {
        return Ok(None);
    };
    let mut scratch = Lower::new(GraphBuilder::new(lib, "fold"), false);
    let mut elems = Vec::new();
    for i in 0..n.n_inputs() {
        let Some(x) = n.input(i) else {
            elems.push(None);
            continue;
        };
        let Some(k) = l.values.get(x).and_then(|e| e.known.clone()) else {
            return Ok(None);
        };
        elems.push(Some(k.elem));
        scratch.define_known(x, k);
    }
    scratch.begin_node(&n.name);
    let outs = match (m.lower)(&mut scratch, n, m) {
        Ok(o) => o,
        Err(_) => return Ok(None),
    };
    let graph = scratch.b.into_graph();
    let too_big = outs.iter().any(|o| match o {
        Out::T(t) => graph.tensor(*t).shape.iter().product::<usize>() > FOLD_LIMIT,
        Out::C(d) => d.numel() > FOLD_LIMIT,
        // Sequences are lists of values at import, never folded as one.
        Out::Seq(_) => true,
    });
    if too_big {
        return Ok(None);
    }
    let mut values = Values::new(graph.tensors().len());
    for (t, k) in &scratch.leaf_values {
        // External data that cannot be read (a graph-only model): not folded;
        // the node is lowered and a later node that needs the value names
        // the file (`import::unread_inputs`).
        let Ok(data) = k.data() else {
            return Ok(None);
        };
        let data = data.values;
        values.set(
            *t,
            Value {
                shape: k.shape.clone(),
                data,
            },
        );
    }
    execute(&graph, lib, &mut values, |_, _| true)
        .map_err(|e| NodeError::Unsupported(format!("folding it at import failed: {e}")))?;
    let mut known = Vec::with_capacity(outs.len());
    for (i, o) in outs.into_iter().enumerate() {
        let (shape, vals) = match o {
            Out::T(t) => {
                let Some(v) = values.get(t) else {
                    return Ok(None);
                };
                (v.shape.clone(), v.data.clone())
            }
            Out::C(d) => (d.shape, d.values),
            Out::Seq(_) => return Ok(None),
        };
        let elem = out_elem(n, i, &elems);
        let vals = if elem.is_integer() {
            vals.into_iter().map(|v| round_to(elem, v, false)).collect()
        } else {
            vals
        };
        let d = Data {
            elem,
            shape,
            values: vals,
        };
        known.push(Known {
            elem,
            shape: d.shape.clone(),
            src: Src::Dense(d),
            kind: Kind::Constant,
        });
    }
    Ok(Some(known))
}

/// The element type of output `i` of `n` given its inputs' element types
/// (ONNX's type constraints: comparisons and logic give bool, `Cast` its
/// `to`, `CastLike` its second input's, index outputs int64, everything else
/// its first input's).
pub fn out_elem(n: &Node, i: usize, inputs: &[Option<Elem>]) -> Elem {
    let first = inputs.iter().flatten().next().copied().unwrap_or(Elem::F32);
    match n.op_type() {
        "Equal" | "Less" | "LessOrEqual" | "Greater" | "GreaterOrEqual" | "Not" | "And" | "Or"
        | "Xor" | "IsNaN" | "IsInf" => Elem::Bool,
        "Cast" => Elem::from_code(n.attrs.int("to", 1) as i32).unwrap_or(first),
        "CastLike" => inputs.get(1).copied().flatten().unwrap_or(first),
        "ArgMax" | "ArgMin" | "Shape" | "Size" | "NonZero" => Elem::Int(64),
        "Where" => inputs.get(1).copied().flatten().unwrap_or(first),
        "MaxPool" if i == 1 => Elem::Int(64),
        _ => first,
    }
}
