//! The operators that communicate most, with time steps and layers folded
//! (`tofu plan`'s "top operators by communication").
//!
//! Takes a graph and a plan's bytes per operator ([`super::Planned::op_comm_bytes`]);
//! gives [`OpGroup`]s: the operators whose names differ only in a time step
//! or layer index ([`index_pattern`]), with the same spec, as one line —
//! `bwd/lstm.l*.t*.gh/w ×80` instead of eighty — their count and summed
//! bytes, the heaviest group first. An unrolled RNN or a deep stack of
//! identical blocks then lists its distinct operators, not ten copies of one.
//! An export's numbered nodes (`node_MatMul_155`), whose names carry no
//! layer index, fold by their place in a repeated block instead
//! ([`super::repeats`]).

use std::collections::BTreeMap;

use super::repeats::{block_pattern, block_places, BlockPlace};
use crate::graph::{Graph, OpId};

/// Operators whose names differ only in time step or layer index, with one spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpGroup {
    /// The shared name with every index replaced by `*` ([`index_pattern`]).
    pub pattern: String,
    /// The members' spec.
    pub spec: String,
    /// The members that move bytes, in graph order.
    pub members: Vec<OpId>,
    /// Bytes per step of all members together.
    pub comm_bytes: u64,
}

impl OpGroup {
    /// What a summary shows: the operator's own name for a group of one,
    /// else the pattern.
    pub fn label<'g>(&'g self, graph: &'g Graph) -> &'g str {
        match self.members.as_slice() {
            [one] => &graph.op(*one).name,
            _ => &self.pattern,
        }
    }
}

/// `name` with every time step or layer index replaced by `*`. A name is
/// split at `.` and `/`; a part that is a number (`layer1.0`, ONNX's
/// `h.3`) becomes `*`, and a part that is one letter and a number (the
/// zoo's `t12` time step, `l0` RNN layer, `h3` GPT block, `e5` BERT block)
/// becomes the letter and `*`. Longer words that end in digits name an
/// operator inside a layer (`fc1`, `conv3`, `ln2`) and stay.
pub fn index_pattern(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut start = 0;
    for (at, sep) in name.match_indices(['.', '/']) {
        out.push_str(&fold_index(&name[start..at]));
        out.push_str(sep);
        start = at + sep.len();
    }
    out.push_str(&fold_index(&name[start..]));
    out
}

/// One part of a name, its index folded (see [`index_pattern`]).
fn fold_index(part: &str) -> String {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let mut chars = part.chars();
    match chars.next() {
        _ if digits(part) => "*".to_string(),
        Some(c) if c.is_ascii_alphabetic() && digits(chars.as_str()) => format!("{c}*"),
        _ => part.to_string(),
    }
}

/// The operators that move bytes (`op_comm_bytes[i] > 0`), grouped by
/// ([`index_pattern`] of the name, spec); heaviest group first, ties by
/// pattern and spec. The bytes of a group are the sum of its members'.
///
/// An operator alone in its name group (an export's numbered node,
/// `node_MatMul_155`, whose name carries no layer index) is grouped
/// instead with the operators at its offset of a repeated block
/// ([`super::repeats`]): the same operator of every layer, pattern
/// [`block_pattern`] (`node_MatMul_{155,228,…}`). Named indices fold as
/// before, so the zoo's groups do not change.
pub fn group_ops(graph: &Graph, op_comm_bytes: &[u64]) -> Vec<OpGroup> {
    #[derive(PartialEq, Eq, PartialOrd, Ord)]
    enum Key {
        Name(String, String),
        Block(BlockPlace, String),
    }
    let moving: Vec<OpId> = graph
        .op_ids()
        .zip(op_comm_bytes)
        .filter(|(_, &b)| b > 0)
        .map(|(id, _)| id)
        .collect();
    let name_key = |id: OpId| {
        let op = graph.op(id);
        (index_pattern(&op.name), op.spec.clone())
    };
    let mut name_counts: BTreeMap<(String, String), usize> = BTreeMap::new();
    for &id in &moving {
        *name_counts.entry(name_key(id)).or_default() += 1;
    }
    let places = block_places(graph);
    let mut members: BTreeMap<Key, Vec<OpId>> = BTreeMap::new();
    for &id in &moving {
        let (pattern, spec) = name_key(id);
        let key = match places[id.index()] {
            Some(place) if name_counts[&(pattern.clone(), spec.clone())] == 1 => {
                Key::Block(place, spec)
            }
            _ => Key::Name(pattern, spec),
        };
        members.entry(key).or_default().push(id);
    }
    let mut out: Vec<OpGroup> = members
        .into_iter()
        .map(|(key, members)| {
            let (pattern, spec) = match key {
                Key::Name(pattern, spec) => (pattern, spec),
                Key::Block(_, spec) => {
                    let names: Vec<&str> =
                        members.iter().map(|&m| graph.op(m).name.as_str()).collect();
                    (block_pattern(&names), spec)
                }
            };
            let comm_bytes = members.iter().map(|m| op_comm_bytes[m.index()]).sum();
            OpGroup {
                pattern,
                spec,
                members,
                comm_bytes,
            }
        })
        .collect();
    out.sort_by(|a, b| {
        b.comm_bytes
            .cmp(&a.comm_bytes)
            .then_with(|| (&a.pattern, &a.spec).cmp(&(&b.pattern, &b.spec)))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::index_pattern;

    #[test]
    fn indices_fold_and_names_inside_a_layer_stay() {
        for (name, pattern) in [
            ("bwd/lstm.l0.t13.gh/w", "bwd/lstm.l*.t*.gh/w"),
            ("bwd/h3.fc1/w", "bwd/h*.fc1/w"),
            ("e11.ln2", "e*.ln2"),
            ("bwd/layer1.0.relu3/x", "bwd/layer1.*.relu3/x"),
            ("/h.10/attn/MatMul", "/h.*/attn/MatMul"),
            ("bwd/logits/w", "bwd/logits/w"),
            ("fc3", "fc3"),
            ("", ""),
        ] {
            assert_eq!(index_pattern(name), pattern, "{name}");
        }
    }
}
