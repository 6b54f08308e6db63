//! The operators that communicate most, with time steps and layers folded
//! (`tofu plan`'s "top operators by communication").
//!
//! Takes a graph and a plan's bytes per operator ([`super::Planned::op_comm_bytes`]);
//! gives [`OpGroup`]s: the operators whose names differ only in a time step
//! or layer index ([`index_pattern`]), with the same spec, as one line —
//! `bwd/lstm.l*.t*.gh/w ×80` instead of eighty — their count and summed
//! bytes, the heaviest group first. An unrolled RNN or a deep stack of
//! identical blocks then lists its distinct operators, not ten copies of one.

use std::collections::BTreeMap;

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
pub fn group_ops(graph: &Graph, op_comm_bytes: &[u64]) -> Vec<OpGroup> {
    let mut groups: BTreeMap<(String, String), OpGroup> = BTreeMap::new();
    for (id, &bytes) in graph.op_ids().zip(op_comm_bytes) {
        if bytes == 0 {
            continue;
        }
        let op = graph.op(id);
        let key = (index_pattern(&op.name), op.spec.clone());
        let group = groups
            .entry(key)
            .or_insert_with_key(|(pattern, spec)| OpGroup {
                pattern: pattern.clone(),
                spec: spec.clone(),
                members: Vec::new(),
                comm_bytes: 0,
            });
        group.members.push(id);
        group.comm_bytes += bytes;
    }
    let mut out: Vec<OpGroup> = groups.into_values().collect();
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
