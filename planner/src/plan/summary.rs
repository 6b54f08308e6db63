//! What `tofu plan --json` reports about a plan, as JSON values: the
//! summary object, the `--pareto` frontier, the `--topology` link levels;
//! and the facts the text summary shares with it (the operators that
//! communicate most, the worker that does not fit).
//!
//! Takes a [`Planned`] with its graph (and the frontier of
//! [`super::pareto::pareto`]); gives `serde_json` values whose keys are
//! sorted. Units: bytes (per step for communication, per worker for
//! memory), seconds, bytes per second per GPU and direction.

use graph::Graph;
use serde_json::{json, Value};

use super::memory::WorkerMemory;
use super::op_groups::group_ops;
use super::pareto::ParetoPoint;
use super::topology::Link;
use super::{max_memory, MemoryFit, Planned, SearchKind};

/// The `n` operators that send most, `(name, spec, bytes)`, most first
/// (ties by name).
pub fn top_ops(graph: &Graph, planned: &Planned, n: usize) -> Vec<(String, String, u64)> {
    let mut v: Vec<(String, String, u64)> = graph
        .ops()
        .iter()
        .zip(&planned.op_comm_bytes)
        .filter(|(_, b)| **b > 0)
        .map(|(o, b)| (o.name.clone(), o.spec.clone(), *b))
        .collect();
    v.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)));
    v.truncate(n);
    v
}

/// When the plan does not fit the device memory: the largest worker, its
/// memory and the device memory (bytes).
pub fn over(planned: &Planned) -> Option<(usize, WorkerMemory, u64)> {
    match planned.fit {
        MemoryFit::DoesNotFit { device_memory, .. } => planned
            .memory
            .iter()
            .enumerate()
            .max_by_key(|(_, m)| m.total())
            .map(|(w, m)| (w, m.clone(), device_memory)),
        MemoryFit::Unlimited | MemoryFit::Fits { .. } => None,
    }
}

/// Point `index` of the frontier (default 0, the fewest bytes), or `None`
/// past its end.
pub fn pick(front: &[ParetoPoint], index: Option<usize>) -> Option<(usize, Planned)> {
    let i = index.unwrap_or(0);
    front.get(i).map(|p| (i, p.plan.clone()))
}

/// What the summary object is of, beside the plan.
#[derive(Clone, Copy, Debug)]
pub struct Context<'a> {
    /// The model's name (zoo name or file).
    pub name: &'a str,
    /// Workers.
    pub workers: usize,
    /// The search asked for.
    pub search: SearchKind,
    /// The plan file's largest worker memory (bytes).
    pub max_worker_memory_bytes: u64,
    /// Data parallelism on the same workers, for comparison.
    pub data_parallel: Option<&'a Planned>,
    /// The device memory (bytes).
    pub device_memory: Option<u64>,
    /// The frontier, with `--pareto`.
    pub front: Option<&'a [ParetoPoint]>,
}

/// The `tofu plan --json` object (fields in `tofu plan`'s module doc).
pub fn json_summary(graph: &Graph, planned: &Planned, c: &Context<'_>) -> Value {
    let dp = c.data_parallel;
    let top = top_ops(graph, planned, 10);
    let groups = group_ops(graph, &planned.op_comm_bytes);
    json!({
        "model": c.name,
        "workers": c.workers,
        "factors": planned.factors,
        "search": c.search.name(),
        "comm_bytes_per_step": planned.comm_bytes,
        "max_worker_memory_bytes": c.max_worker_memory_bytes,
        "plan_seconds": planned.plan_seconds,
        "stop_reason": planned.stop_reason,
        "choice": planned.choice,
        "runner_up": planned.runner_up.as_ref().map(|(c, b, m)| json!({"choice": c, "comm_bytes_per_step": b, "max_worker_memory_bytes": m})),
        "ops": graph.ops().len(),
        "tensors": graph.tensors().len(),
        "coarsened_nodes": planned.levels.first().map_or(0, |l| l.nodes),
        "fits_device_memory": over(planned).is_none(),
        "device_memory_bytes": c.device_memory,
        "data_parallel_comm_bytes_per_step": dp.map(|d| d.comm_bytes),
        "data_parallel_max_worker_memory_bytes": dp.map(max_memory),
        "budget": planned.budget.as_ref().map_or(Value::Null, |b| json!(b)),
        "pareto": c.front.map(pareto_json),
        "topology": topology_json(planned),
        "top_ops": top.iter().map(|(n, s, b)| json!({"op": n, "spec": s, "comm_bytes": b})).collect::<Vec<_>>(),
        "top_op_groups": groups.iter().take(10).map(|g| json!({"pattern": g.pattern, "spec": g.spec, "ops": g.members.len(), "comm_bytes": g.comm_bytes})).collect::<Vec<_>>(),
    })
}

/// The `pareto` JSON array: per point its `index` (for `--pareto-point`),
/// `comm_bytes_per_step`, `max_worker_memory_bytes`, `choice`, `factors`,
/// `price` and the arguments that write its plan; with a topology also
/// `estimated_seconds_per_step` (the frontier's coordinate then).
pub fn pareto_json(front: &[ParetoPoint]) -> Value {
    front
        .iter()
        .enumerate()
        .map(|(i, p)| {
            json!({
                "index": i,
                "comm_bytes_per_step": p.plan.comm_bytes,
                "max_worker_memory_bytes": max_memory(&p.plan),
                "choice": p.plan.choice,
                "factors": p.plan.factors,
                "price": p.price,
                "estimated_seconds_per_step": p.plan.links.as_ref().map(|l| l.seconds()),
                "write": format!("--pareto --pareto-point {i} -o plan.json"),
            })
        })
        .collect()
}

/// The `topology` object (null without one): nodes, GPUs per node, which
/// levels cross nodes, and per link level its bandwidth (bytes per second
/// per GPU and direction), bytes per step and estimated seconds.
pub fn topology_json(p: &Planned) -> Value {
    let Some(r) = &p.links else {
        return Value::Null;
    };
    let t = &r.topology;
    json!({
        "nodes": t.nodes,
        "gpus_per_node": t.gpus_per_node,
        "node_levels": t.node_levels().min(p.factors.len()),
        "estimated_comm_seconds": r.seconds(),
        "links": Link::ALL.iter().map(|&link| json!({
            "link": link.name(),
            "bandwidth_bytes_per_s": t.bandwidth(link),
            "bytes": r.load.bytes[link as usize],
            "seconds": r.load.seconds[link as usize],
        })).collect::<Vec<_>>(),
    })
}
