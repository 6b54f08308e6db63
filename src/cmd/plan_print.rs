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
use planner::plan::{summary, Planned, SearchKind};

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
        summary::over(self.planned)
    }

    /// The `--json` object ([`summary::json_summary`]).
    pub fn json(&self) -> serde_json::Value {
        let context = summary::Context {
            name: self.name,
            workers: self.workers,
            search: self.search,
            max_worker_memory_bytes: self.max_worker_memory_bytes,
            data_parallel: self.data_parallel,
            device_memory: self.device_memory,
            front: self.front.map(|(f, _)| f),
        };
        summary::json_summary(self.graph, self.planned, &context)
    }

    /// Prints the frontier (with `--pareto`) and the summary.
    pub fn print(&self) {
        if let Some((f, i)) = self.front {
            plan_memory::print_pareto(f, i);
        }
        let (name, graph, p) = (self.name, self.graph, self.planned);
        let cap = self.device_memory;
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
        self.print_comparisons();
        self.print_top_and_fit();
    }

    /// The plan not kept, the topology's link levels and data parallelism.
    fn print_comparisons(&self) {
        let (p, dp) = (self.planned, self.data_parallel);
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
    }

    /// The operators that communicate most, and DOES NOT FIT.
    fn print_top_and_fit(&self) {
        let (graph, p) = (self.graph, self.planned);
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
        if let Some((w, m, c)) = self.over() {
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

/// The lines naming the files written (`-o`, `--dot`).
pub fn print_written(output: Option<&std::path::Path>, dot: Option<&std::path::Path>) {
    if let Some(p) = output {
        println!("plan written to {}", p.display());
    }
    if let Some(p) = dot {
        println!(
            "picture written to {} (render with `dot -Tsvg`)",
            p.display()
        );
    }
}
