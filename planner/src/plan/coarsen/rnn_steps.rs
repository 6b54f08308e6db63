//! Rule 4 (Tofu §4.2.1, "merging unrolled timesteps"): the time steps of an
//! unrolled RNN share weights and logic, so they share one partition
//! strategy.
//!
//! Takes clusters (must run last); a cluster belongs to a time step when its
//! name has a dot-separated segment `t<digits>` (the zoo names unrolled ops
//! `…t3…`). Clusters whose names agree once those segments are replaced, and
//! whose slots match in structure (same specs, same shapes), are coalesced:
//! slot i of the result holds slot i of every step, so all steps take the same
//! decision.

use std::collections::BTreeMap;

use super::Cluster;
use crate::graph::Graph;

/// The name with every `t<digits>` segment replaced by `t*`, if it had one.
pub fn template(name: &str) -> Option<String> {
    let mut found = false;
    let parts: Vec<String> = name
        .split(['.', '/'])
        .map(|seg| {
            let is_step = seg.len() > 1
                && seg.starts_with('t')
                && seg[1..].bytes().all(|b| b.is_ascii_digit());
            found |= is_step;
            if is_step {
                "t*".to_string()
            } else {
                seg.to_string()
            }
        })
        .collect();
    found.then(|| parts.join("."))
}

fn signature(graph: &Graph, c: &Cluster) -> String {
    let ops: Vec<String> = c
        .op_slots
        .iter()
        .map(|s| graph.op(s[0]).spec.clone())
        .collect();
    let ts: Vec<String> = c
        .tensor_slots
        .iter()
        .map(|s| format!("{:?}", graph.tensor(s[0]).shape))
        .collect();
    format!(
        "{}|{}|{}|{}",
        ops.join(","),
        ts.join(","),
        c.tied_axis,
        c.op_slots.len()
    )
}

/// Coalesce the time steps of unrolled RNNs (see the module doc).
pub fn merge(graph: &Graph, clusters: Vec<Cluster>) -> Vec<Cluster> {
    let mut groups: BTreeMap<(String, String), usize> = BTreeMap::new();
    let mut out: Vec<Cluster> = Vec::new();
    for c in clusters {
        let Some(t) = template(&c.name) else {
            out.push(c);
            continue;
        };
        let key = (t, signature(graph, &c));
        match groups.get(&key) {
            Some(&i) => {
                let m = &mut out[i];
                for (dst, src) in m.op_slots.iter_mut().zip(&c.op_slots) {
                    dst.extend(src.iter().copied());
                }
                for (dst, src) in m.tensor_slots.iter_mut().zip(&c.tensor_slots) {
                    dst.extend(src.iter().copied());
                }
            }
            None => {
                groups.insert(key.clone(), out.len());
                let mut c = c;
                c.name = key.0;
                out.push(c);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::template;

    #[test]
    fn templates_replace_only_step_segments() {
        assert_eq!(template("l0.t13.cell").as_deref(), Some("l0.t*.cell"));
        assert_eq!(
            template("grad/l1.t2.gates").as_deref(),
            Some("grad.l1.t*.gates")
        );
        assert_eq!(template("layer1.conv"), None);
        assert_eq!(template("tanh.t"), None);
    }
}
