//! Rule 4 (Tofu §4.2.1, "merging unrolled timesteps"): the time steps of an
//! unrolled RNN share weights and logic, so they share one partition
//! strategy.
//!
//! Takes clusters (must run last: it matches whole clusters by structure).
//! Which time step a cluster belongs to comes from the graph's metadata: the
//! `step` of the forward op or tensor that anchors its group
//! ([`crate::graph::Op::step`], [`crate::graph::Tensor::step`]). The
//! clusters anchored at the k-th op (or tensor) of every step are coalesced
//! into one where their structure matches (same specs, same shapes): slot i
//! of the result holds slot i of every step, so all steps take the same
//! decision.
//!
//! Graphs without step metadata (the zoo's, whose plan files hash the graph
//! file) give the steps by name instead: a dot-separated segment `t<digits>`
//! (the zoo names unrolled ops `…t3…`), and clusters whose names agree once
//! those segments are replaced (and whose structure matches) are coalesced.

use std::collections::{BTreeMap, HashMap};

use super::{Cluster, Context, Rule};
use crate::graph::{Graph, Group};

/// Rule 4 (see the module doc).
pub struct RnnSteps;

impl Rule for RnnSteps {
    fn name(&self) -> &'static str {
        "rnn_steps"
    }

    fn apply(&self, cx: &Context, clusters: Vec<Cluster>) -> Vec<Cluster> {
        merge(cx.graph, clusters)
    }
}

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

/// How a cluster is coalesced with its other time steps; `None` for a
/// cluster outside the time steps.
type StepKey = Option<Coalesce>;

struct Coalesce {
    /// Clusters with the same key are coalesced.
    key: (String, String),
    /// The coalesced cluster's name.
    name: String,
    /// Whether a cluster takes that name even when no other step joins it.
    rename_alone: bool,
}

/// Each stepped op's and tensor's place within its step: the number of ops
/// (tensors) of the same step before it in graph order, by id.
fn places(graph: &Graph) -> (HashMap<u32, usize>, HashMap<u32, usize>) {
    fn number(steps: impl Iterator<Item = Option<u32>>) -> HashMap<u32, usize> {
        let mut seen: HashMap<u32, usize> = HashMap::new();
        let mut out = HashMap::new();
        for (i, s) in steps.enumerate() {
            if let Some(s) = s {
                let k = seen.entry(s).or_insert(0);
                out.insert(i as u32, *k);
                *k += 1;
            }
        }
        out
    }
    (
        number(graph.ops().iter().map(|o| o.step)),
        number(graph.tensors().iter().map(|t| t.step)),
    )
}

/// Keys from the graph's step metadata (see the module doc): a cluster
/// anchored at the k-th op (tensor) of its step is coalesced with the
/// clusters anchored at the k-th op (tensor) of the other steps, if their
/// structure matches.
fn keys_from_metadata(graph: &Graph, clusters: &[Cluster]) -> Vec<StepKey> {
    let (op_place, tensor_place) = places(graph);
    clusters
        .iter()
        .map(|c| {
            let group = match (c.ops().next(), c.tensors().next()) {
                (Some(o), _) => graph.op(o).group,
                (None, Some(t)) => graph.tensor(t).group,
                (None, None) => return None,
            };
            let place = match graph.groups()[group.index()] {
                Group::Op(f) => format!("op {}", op_place.get(&f.0)?),
                Group::Tensor(root) => format!("tensor {}", tensor_place.get(&root.0)?),
            };
            Some(Coalesce {
                key: (place, signature(graph, c)),
                name: format!("{} (every step)", c.name),
                rename_alone: false,
            })
        })
        .collect()
}

/// Keys from the zoo's `t<digits>` names (graphs without step metadata).
fn keys_from_names(graph: &Graph, clusters: &[Cluster]) -> Vec<StepKey> {
    clusters
        .iter()
        .map(|c| {
            let t = template(&c.name)?;
            Some(Coalesce {
                key: (t.clone(), signature(graph, c)),
                name: t,
                rename_alone: true,
            })
        })
        .collect()
}

/// Coalesce the time steps of unrolled RNNs (see the module doc).
fn merge(graph: &Graph, clusters: Vec<Cluster>) -> Vec<Cluster> {
    let stepped = graph.ops().iter().any(|o| o.step.is_some())
        || graph.tensors().iter().any(|t| t.step.is_some());
    let keys = if stepped {
        keys_from_metadata(graph, &clusters)
    } else {
        keys_from_names(graph, &clusters)
    };
    let mut groups: BTreeMap<(String, String), usize> = BTreeMap::new();
    let mut out: Vec<Cluster> = Vec::new();
    for (c, key) in clusters.into_iter().zip(keys) {
        let Some(Coalesce {
            key,
            name,
            rename_alone,
        }) = key
        else {
            out.push(c);
            continue;
        };
        match groups.get(&key) {
            Some(&i) => {
                let m = &mut out[i];
                m.name = name;
                for (dst, src) in m.op_slots.iter_mut().zip(&c.op_slots) {
                    dst.extend(src.iter().copied());
                }
                for (dst, src) in m.tensor_slots.iter_mut().zip(&c.tensor_slots) {
                    dst.extend(src.iter().copied());
                }
            }
            None => {
                groups.insert(key, out.len());
                let mut c = c;
                if rename_alone {
                    c.name = name;
                }
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
