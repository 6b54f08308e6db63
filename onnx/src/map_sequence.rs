//! Lowering of ONNX's sequence operators: SplitToSequence, SequenceAt,
//! SequenceConstruct, SequenceEmpty, SequenceInsert, SequenceErase,
//! SequenceLength and ConcatFromSequence.
//!
//! A sequence is resolved at import time: a list of ordinary values
//! ([`Out::Seq`]; the importer binds element `i` of output `s` as the value
//! `s[i]` and records the list in [`Lower::sequences`]). Positions must be
//! known at import (constants or initializers), which is what exporters
//! write: the dynamo exporter turns `torch.split` / `chunk` into
//! SplitToSequence followed by SequenceAt at fixed positions. Only the
//! split (`split_last`) and the concatenation (`concat`, `concat_channels`)
//! emit operators; the other nodes only move values between lists. A
//! sequence that is a graph input or output (its length known only at run
//! time) is not supported.

use graph::TensorId;

use crate::lower::{unsupported, Kind, LResult, Lower, Out};
use crate::map_elementwise::input;
use crate::map_nn::axis_of;
use crate::map_shape::{concat_tensors, ints_input, split_sizes};
use crate::mapping::Mapping;
use crate::node::Node;
use crate::tensor::Data;

/// The element value names of the sequence read as input `i`.
fn elements(l: &Lower, n: &Node, i: usize) -> LResult<Vec<String>> {
    let Some(name) = n.input(i) else {
        return unsupported(format!("input {i} (a sequence) is missing"));
    };
    match l.sequences.get(name) {
        Some(names) => Ok(names.clone()),
        None => unsupported(format!(
            "input {i} (`{name}`) is not a sequence built in the graph (a sequence graph input is not supported)"
        )),
    }
}

/// The value `name` as an element of a new sequence: a constant stays a
/// constant, anything else (weights included) is its graph tensor.
fn element(l: &mut Lower, name: &str) -> LResult<Out> {
    let known = l.values.get(name).and_then(|e| {
        e.tensor
            .is_none()
            .then(|| e.known.clone())
            .flatten()
            .filter(|k| k.kind == Kind::Constant)
    });
    match known {
        Some(k) => Ok(Out::C(
            k.data().map_err(crate::lower::NodeError::Unsupported)?,
        )),
        None => Ok(Out::T(l.tensor(name)?)),
    }
}

/// The position input `i` as an index into a sequence of `len` elements
/// (negative counts from the back); `insert` allows `len` itself.
/// `None` when the input is absent.
fn position(l: &Lower, n: &Node, i: usize, len: usize, insert: bool) -> LResult<Option<usize>> {
    let Some(v) = ints_input(l, n, i)? else {
        return Ok(None);
    };
    let [p] = v[..] else {
        return unsupported(format!("position input {i} must be one integer, got {v:?}"));
    };
    let end = len as i64 + i64::from(insert);
    let at = if p < 0 { p + len as i64 } else { p };
    if !(0..end).contains(&at) {
        return unsupported(format!(
            "position {p} is outside a sequence of {len} element(s)"
        ));
    }
    Ok(Some(at as usize))
}

/// SplitToSequence: the split of input 0 along `axis` (default 0) into
/// parts of the sizes of input 1 (a scalar: equal chunks, the last one
/// shorter; a list: those sizes), or into single slices without it (the
/// axis dropped when `keepdims = 0`).
pub fn split_to_sequence(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let x = input(l, n, 0)?;
    let s = l.shape(x);
    let axis = axis_of(n.attrs.int("axis", 0), s.len())?;
    let dim = s[axis];
    let scalar = n
        .input(1)
        .and_then(|name| l.shape_of(name))
        .is_some_and(|sh| sh.is_empty());
    let sizes: Vec<usize> = match ints_input(l, n, 1)? {
        None => vec![1; dim],
        Some(v) if scalar => {
            let chunk = v[0];
            if chunk <= 0 {
                return unsupported(format!("split size {chunk} (must be positive)"));
            }
            let chunk = chunk as usize;
            (0..dim.div_ceil(chunk))
                .map(|i| chunk.min(dim - i * chunk))
                .collect()
        }
        Some(v) => v.iter().map(|&d| d.max(0) as usize).collect(),
    };
    if sizes.iter().sum::<usize>() != dim {
        return unsupported(format!("split sizes {sizes:?} for a dim of {dim}"));
    }
    let mut parts = split_sizes(l, x, axis, &sizes)?;
    if n.input(1).is_none() && n.attrs.int("keepdims", 1) == 0 {
        let mut dropped = s.clone();
        dropped.remove(axis);
        for p in &mut parts {
            if let Out::T(t) = p {
                *t = l.reshape(*t, &dropped)?;
            }
        }
    }
    Ok(vec![Out::Seq(parts)])
}

/// SequenceAt: the element at a position known at import.
pub fn sequence_at(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let names = elements(l, n, 0)?;
    let Some(at) = position(l, n, 1, names.len(), false)? else {
        return unsupported("input 1 (position) is missing");
    };
    Ok(vec![element(l, &names[at])?])
}

/// SequenceConstruct: the inputs as a sequence.
pub fn sequence_construct(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let names: Vec<String> = (0..n.n_inputs())
        .filter_map(|i| n.input(i))
        .map(str::to_string)
        .collect();
    let items = names
        .iter()
        .map(|name| element(l, name))
        .collect::<LResult<_>>()?;
    Ok(vec![Out::Seq(items)])
}

/// SequenceEmpty: a sequence of no elements.
pub fn sequence_empty(_l: &mut Lower, _n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    Ok(vec![Out::Seq(Vec::new())])
}

/// SequenceInsert: input 1 inserted at the position of input 2 (default:
/// appended).
pub fn sequence_insert(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let names = elements(l, n, 0)?;
    let at = position(l, n, 2, names.len(), true)?.unwrap_or(names.len());
    let Some(new) = n.input(1) else {
        return unsupported("input 1 (the tensor to insert) is missing");
    };
    let mut items: Vec<Out> = names
        .iter()
        .map(|name| element(l, name))
        .collect::<LResult<_>>()?;
    items.insert(at, element(l, new)?);
    Ok(vec![Out::Seq(items)])
}

/// SequenceErase: the sequence without the element at the position of
/// input 1 (default: the last).
pub fn sequence_erase(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let names = elements(l, n, 0)?;
    if names.is_empty() {
        return unsupported("erasing from an empty sequence");
    }
    let at = position(l, n, 1, names.len(), false)?.unwrap_or(names.len() - 1);
    let mut items: Vec<Out> = names
        .iter()
        .map(|name| element(l, name))
        .collect::<LResult<_>>()?;
    items.remove(at);
    Ok(vec![Out::Seq(items)])
}

/// SequenceLength: the number of elements, an int64 scalar known at import.
pub fn sequence_length(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let len = elements(l, n, 0)?.len();
    Ok(vec![Out::C(Data::ints(vec![], &[len as i64]))])
}

/// ConcatFromSequence: the elements concatenated along `axis`, or stacked
/// along a new `axis` when `new_axis = 1` (`concat` / `concat_channels`).
pub fn concat_from_sequence(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    let names = elements(l, n, 0)?;
    let Some(axis) = n.attrs.get("axis").map(|a| a.i) else {
        return unsupported("attribute axis is missing");
    };
    let stack = n.attrs.int("new_axis", 0) == 1;
    let mut ts: Vec<TensorId> = Vec::new();
    for name in &names {
        ts.push(l.tensor(name)?);
    }
    let Some(&first) = ts.first() else {
        return unsupported("the sequence is empty");
    };
    let r = l.shape(first).len() + usize::from(stack);
    let axis = axis_of(axis, r)?;
    if stack {
        for t in &mut ts {
            let mut s = l.shape(*t);
            s.insert(axis, 1);
            *t = l.reshape(*t, &s)?;
        }
    }
    let nonempty: Vec<TensorId> = ts
        .into_iter()
        .filter(|&t| l.shape(t).iter().product::<usize>() > 0)
        .collect();
    if nonempty.is_empty() {
        return unsupported("every element is empty");
    }
    Ok(vec![Out::T(concat_tensors(l, &nonempty, axis)?)])
}
