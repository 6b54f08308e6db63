//! How `tofu plan` reports a plan as text: the summary lines (model,
//! search, communication, memory, the plan not kept, the link levels, data
//! parallelism, the operators that communicate most, DOES NOT FIT) and,
//! with a frontier, the `--pareto` table before them.
//!
//! Takes a finished [`Planned`] with its graph, the data-parallel plan
//! beside it and the frontier of [`super::pareto::pareto`]; gives a
//! [`Report`] whose [`Display`](fmt::Display) is the text and whose
//! [`Report::json`] is the `--json` object ([`super::summary`]). Units:
//! bytes (per step for communication, per worker for memory), shown in
//! powers of 1024 ([`human_bytes`]); seconds.

pub mod memory;
pub mod topology;

use std::fmt;

use graph::Graph;

use super::memory::WorkerMemory;
use super::op_groups::group_ops;
use super::pareto::ParetoPoint;
use super::{summary, Planned, SearchKind};

/// Bytes in powers of 1024 with two decimals (`512 B`, `1.50 KiB`, …,
/// `2.00 TiB`).
pub fn human_bytes(b: u64) -> String {
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

/// A plan as `tofu plan` reports it.
#[derive(Clone, Copy, Debug)]
pub struct Report<'a> {
    /// The model's name (zoo name or file).
    pub name: &'a str,
    /// Workers asked for.
    pub workers: usize,
    /// The search asked for.
    pub search: SearchKind,
    /// The training graph.
    pub graph: &'a Graph,
    /// The plan reported (and written).
    pub planned: &'a Planned,
    /// The plan file's largest worker memory (bytes).
    pub max_worker_memory_bytes: u64,
    /// Data parallelism on the same workers, for comparison.
    pub data_parallel: Option<&'a Planned>,
    /// The device memory (bytes).
    pub device_memory: Option<u64>,
    /// The `--pareto` frontier and the index of the point reported.
    pub front: Option<(&'a [ParetoPoint], usize)>,
}

impl Report<'_> {
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

    /// The model, search, analysis, communication and memory lines.
    fn head(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (name, graph, p) = (self.name, self.graph, self.planned);
        let k: usize = p.factors.iter().product();
        let max_mem = p.memory.iter().map(|m| m.total()).max().unwrap_or(0);
        let min_mem = p.memory.iter().map(|m| m.total()).min().unwrap_or(0);
        writeln!(
            f,
            "model      {name}: {} ops, {} tensors, {} coarsened nodes",
            graph.ops().len(),
            graph.tensors().len(),
            p.levels.first().map_or(0, |l| l.nodes)
        )?;
        writeln!(
            f,
            "search     {} on {k} workers (levels {:?}), {:.3} s, stopped: {:?}, kept: {}",
            p.search.name(),
            p.factors,
            p.plan_seconds,
            p.stop_reason,
            p.choice
        )?;
        saturation(f, p.index_saturation)?;
        writeln!(
            f,
            "comm       {} per training step (all workers together)",
            human_bytes(p.comm_bytes)
        )?;
        let device = self
            .device_memory
            .map_or_else(String::new, |c| format!(" (device: {})", human_bytes(c)));
        writeln!(
            f,
            "memory     {} … {} per worker{device}",
            human_bytes(min_mem),
            human_bytes(max_mem)
        )?;
        memory::budget(f, p)
    }

    /// The plan not kept, the topology's link levels and data parallelism.
    fn comparisons(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = self.planned;
        if let Some((choice, bytes, mem)) = &p.runner_up {
            writeln!(
                f,
                "not kept   {choice}: {} per step, {} per worker{}",
                human_bytes(*bytes),
                human_bytes(*mem),
                if p.choice == "data parallelism" {
                    " (data parallelism replicates every weight; bound it with --device-memory)"
                } else {
                    ""
                }
            )?;
        }
        topology::links(f, p)?;
        if let Some(d) = self.data_parallel {
            let dmem = d.memory.iter().map(|m| m.total()).max().unwrap_or(0);
            writeln!(
                f,
                "data-par.  {} per step, {} per worker (for comparison)",
                human_bytes(d.comm_bytes),
                human_bytes(dmem)
            )?;
        }
        Ok(())
    }

    /// The operators that communicate most, and DOES NOT FIT.
    fn top_and_fit(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (graph, p) = (self.graph, self.planned);
        let groups = group_ops(graph, &p.op_comm_bytes);
        if !groups.is_empty() {
            writeln!(
                f,
                "top operators by communication (time steps and layers folded):"
            )?;
            for g in groups.iter().take(10) {
                let count = match g.members.len() {
                    1 => String::new(),
                    n => format!(" ×{n}"),
                };
                let (label, bytes) = (g.label(graph), human_bytes(g.comm_bytes));
                writeln!(f, "  {bytes:>12}  {label}{count} ({})", g.spec)?;
            }
        }
        if let Some((w, m, c)) = self.over() {
            writeln!(
                f,
                "DOES NOT FIT: no plan the search found fits; the smallest peak found: worker {w} needs {} > device memory {} (largest tile: `{}`, {})",
                human_bytes(m.total()),
                human_bytes(c),
                m.largest_tile.0,
                human_bytes(m.largest_tile.1)
            )?;
        }
        Ok(())
    }
}

/// The frontier's table (with `--pareto`), then the summary lines.
impl fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some((front, chosen)) = self.front {
            memory::pareto(f, front, chosen)?;
        }
        self.head(f)?;
        self.comparisons(f)?;
        self.top_and_fit(f)
    }
}

/// The line saying that a limit stopped egg in the strategy analysis
/// (nothing when it saturated).
fn saturation(f: &mut fmt::Formatter<'_>, s: interval::Saturation) -> fmt::Result {
    let limit = match s {
        interval::Saturation::Saturated => return Ok(()),
        interval::Saturation::IterationLimit => "iteration",
        interval::Saturation::NodeLimit => "node",
    };
    writeln!(f, "analysis   egg stopped at its {limit} limit on some index expressions (strategies from the best form found)")
}
