//! How `tofu plan` shows a plan: the summary lines and the `--json`
//! object (field names in [`super::plan`]'s module doc).
//!
//! Takes the plan, its graph, the data-parallel plan beside it and the
//! `--pareto` frontier; gives text on stdout. Units: bytes (per step for
//! communication, per worker for memory), shown in powers of 1024.

use planner::graph::Graph;
use planner::plan::memory::WorkerMemory;
use planner::plan::op_groups::group_ops;
use planner::plan::pareto::ParetoPoint;
use planner::plan::{MemoryFit, Planned, SearchKind};

use super::plan_memory;

/// Human-readable bytes (powers of 1024).
pub fn human(b: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.2} {}", units[u])
    }
}

fn top_ops(graph: &Graph, planned: &Planned, n: usize) -> Vec<(String, String, u64)> {
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

/// A plan as `tofu plan` shows it.
pub struct Shown<'a> {
    /// The model's name (zoo name or file).
    pub name: &'a str,
    /// `--workers`.
    pub workers: usize,
    /// `--search`.
    pub search: SearchKind,
    /// The training graph.
    pub graph: &'a Graph,
    /// The plan shown (and written).
    pub planned: &'a Planned,
    /// The plan file's largest worker memory (bytes).
    pub max_worker_memory_bytes: u64,
    /// Data parallelism on the same workers, for comparison.
    pub data_parallel: Option<&'a Planned>,
    /// `--device-memory` (bytes).
    pub device_memory: Option<u64>,
    /// The `--pareto` frontier and the index of the point shown.
    pub front: Option<(&'a [ParetoPoint], usize)>,
}

impl Shown<'_> {
    /// When the plan does not fit the device memory: the largest worker,
    /// its memory and the device memory (bytes).
    pub fn over(&self) -> Option<(usize, WorkerMemory, u64)> {
        match self.planned.fit {
            MemoryFit::DoesNotFit { device_memory, .. } => self
                .planned
                .memory
                .iter()
                .enumerate()
                .max_by_key(|(_, m)| m.total())
                .map(|(w, m)| (w, m.clone(), device_memory)),
            MemoryFit::Unlimited | MemoryFit::Fits { .. } => None,
        }
    }

    /// The `--json` object.
    pub fn json(&self) -> serde_json::Value {
        let (graph, planned, dp) = (self.graph, self.planned, self.data_parallel);
        let top = top_ops(graph, planned, 10);
        serde_json::json!({
            "model": self.name,
            "workers": self.workers,
            "factors": planned.factors,
            "search": self.search.name(),
            "comm_bytes_per_step": planned.comm_bytes,
            "max_worker_memory_bytes": self.max_worker_memory_bytes,
            "plan_seconds": planned.plan_seconds,
            "stop_reason": planned.stop_reason,
            "choice": planned.choice,
            "runner_up": planned.runner_up.as_ref().map(|(c, b, m)| serde_json::json!({"choice": c, "comm_bytes_per_step": b, "max_worker_memory_bytes": m})),
            "ops": graph.ops().len(),
            "tensors": graph.tensors().len(),
            "coarsened_nodes": planned.levels.first().map_or(0, |l| l.nodes),
            "fits_device_memory": self.over().is_none(),
            "device_memory_bytes": self.device_memory,
            "data_parallel_comm_bytes_per_step": dp.map(|d| d.comm_bytes),
            "data_parallel_max_worker_memory_bytes": dp.map(|d| d.memory.iter().map(|m| m.total()).max().unwrap_or(0)),
            "budget": plan_memory::budget_json(planned),
            "pareto": self.front.map(|(f, _)| plan_memory::pareto_json(f)),
            "topology": super::plan_topology::json(planned),
            "top_ops": top.iter().map(|(n, s, b)| serde_json::json!({"op": n, "spec": s, "comm_bytes": b})).collect::<Vec<_>>(),
            "top_op_groups": group_ops(graph, &planned.op_comm_bytes).iter().take(10).map(|g| serde_json::json!({"pattern": g.pattern, "spec": g.spec, "ops": g.members.len(), "comm_bytes": g.comm_bytes})).collect::<Vec<_>>(),
        })
    }

    /// Prints the frontier (with `--pareto`) and the summary.
    pub fn print(&self) {
        if let Some((f, i)) = self.front {
            plan_memory::print_pareto(f, i);
        }
        let (name, graph, p, dp) = (self.name, self.graph, self.planned, self.data_parallel);
        let (cap, over) = (self.device_memory, self.over());
        let k: usize = p.factors.iter().product();
        let max_mem = p.memory.iter().map(|m| m.total()).max().unwrap_or(0);
        let min_mem = p.memory.iter().map(|m| m.total()).min().unwrap_or(0);
        println!(
            "model      {name}: {} ops, {} tensors, {} coarsened nodes",
            graph.ops().len(),
            graph.tensors().len(),
            p.levels.first().map_or(0, |l| l.nodes)
        );
        println!(
            "search     {} on {k} workers (levels {:?}), {:.3} s, stopped: {:?}, kept: {}",
            p.search.name(),
            p.factors,
            p.plan_seconds,
            p.stop_reason,
            p.choice
        );
        print_saturation(p.index_saturation);
        println!(
            "comm       {} per training step (all workers together)",
            human(p.comm_bytes)
        );
        match cap {
            Some(c) => println!(
                "memory     {} … {} per worker (device: {})",
                human(min_mem),
                human(max_mem),
                human(c)
            ),
            None => println!(
                "memory     {} … {} per worker",
                human(min_mem),
                human(max_mem)
            ),
        }
        for line in plan_memory::budget_lines(p) {
            println!("{line}");
        }
        if let Some((choice, bytes, mem)) = &p.runner_up {
            println!(
                "not kept   {choice}: {} per step, {} per worker{}",
                human(*bytes),
                human(*mem),
                if p.choice == "data parallelism" {
                    " (data parallelism replicates every weight; bound it with --device-memory)"
                } else {
                    ""
                }
            );
        }
        for line in super::plan_topology::summary(p) {
            println!("{line}");
        }
        if let Some(d) = dp {
            let dmem = d.memory.iter().map(|m| m.total()).max().unwrap_or(0);
            println!(
                "data-par.  {} per step, {} per worker (for comparison)",
                human(d.comm_bytes),
                human(dmem)
            );
        }
        let groups = group_ops(graph, &p.op_comm_bytes);
        if !groups.is_empty() {
            println!("top operators by communication (time steps and layers folded):");
            for g in groups.iter().take(10) {
                let count = match g.members.len() {
                    1 => String::new(),
                    n => format!(" ×{n}"),
                };
                let (label, bytes) = (g.label(graph), human(g.comm_bytes));
                println!("  {bytes:>12}  {label}{count} ({})", g.spec);
            }
        }
        if let Some((w, m, c)) = over {
            println!(
                "DOES NOT FIT: no plan the search found fits; the smallest peak found: worker {w} needs {} > device memory {} (largest tile: `{}`, {})",
                human(m.total()),
                human(c),
                m.largest_tile.0,
                human(m.largest_tile.1)
            );
        }
    }
}

/// The summary's line when a limit stopped egg in the strategy analysis
/// (nothing when it saturated).
fn print_saturation(s: interval::Saturation) {
    let limit = match s {
        interval::Saturation::Saturated => return,
        interval::Saturation::IterationLimit => "iteration",
        interval::Saturation::NodeLimit => "node",
    };
    println!("analysis   egg stopped at its {limit} limit on some index expressions (strategies from the best form found)");
}
