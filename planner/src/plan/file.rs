//! The plan file: a documented, versioned JSON format (`tofu-plan`, version 1).
//!
//! Takes a [`Planned`] and the graph it was made for; gives a [`PlanFile`]
//! that embeds the graph (so `tofu run plan.json` needs nothing else) and its
//! SHA-256 (so a tampered or mismatched graph is detected on load), and writes
//! it atomically (a temporary file renamed into place: a plan file is written
//! whole or not at all).
//!
//! Fields (units: bytes, seconds):
//! * `format` = `"tofu-plan"`, `version` = 1;
//! * `search`, `workers` (k), `factors` (worker factor per recursion level,
//!   outermost first; their product is k);
//! * `comm_bytes_per_step`: bytes sent by all workers together in one
//!   training step; `max_worker_memory_bytes`; `stop_reason`;
//!   `index_saturation` (only when a limit stopped egg in the strategy
//!   analysis: `iteration-limit` or `node-limit`); `plan_seconds`;
//! * `tensors[i]`: `name`, `shape`, `splits` (per level: the split dim, or
//!   `null` for replicated at that level);
//! * `ops[i]`: `name`, `spec`, `choices` (per level: `{"strategy": n}` or
//!   `"replicate"`), `strategies` (the chosen strategies' names per level),
//!   `comm_bytes` (per step);
//! * `memory[w]`: per worker `training_state_bytes`, `peak_activation_bytes`,
//!   `largest_tile`;
//! * `links` (only for a plan made with `--topology`): `topology` (`nodes`,
//!   `gpus_per_node`, `intra_bytes_per_s`, `inter_bytes_per_s`) and `load`
//!   (`bytes` and estimated `seconds` per step over the inter-node and the
//!   intra-node links, in that order), what the search minimised;
//! * `graph_sha256` and `graph` (the `tofu-graph` JSON document);
//! * `import` (only for a graph imported from a model file): how it was
//!   imported, e.g. `{"onnx": {"input_shape": […], "input_value": […], …}}`
//!   (`tofu plan`'s importer flags), so `tofu run --weights MODEL.onnx` can
//!   import the model again and read every value the import took from it;
//!   opaque to the planner;
//! * `specs` (only for a plan made with `tofu plan --specs`): the user
//!   operator specs, `[{"file", "sha256", "text"}]`, so `tofu run` needs no
//!   spec files and a spec changed since is refused ([`super::specs`]).

use std::path::Path;

use interval::Saturation;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::cluster::LinkReport;
use super::cost::{exact_cost_in, CostModel};
use super::decisions::{Decisions, OpChoice};
use super::memory::{per_worker, WorkerMemory};
use super::model::Model;
use super::planned::Planned;
use super::searches::SearchKind;
use super::specs::SpecFile;
use super::topology;
use crate::graph::{format, Graph};
use crate::search::StopReason;

/// Format name in every plan file.
pub const FORMAT: &str = "tofu-plan";
/// Current version of the plan format.
pub const VERSION: u32 = 1;

/// One tensor's decisions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TensorPlan {
    /// Tensor name (as in the graph).
    pub name: String,
    /// Shape (elements per dim).
    pub shape: Vec<usize>,
    /// Split dim per level; `null` = replicated at that level.
    pub splits: Vec<Option<u32>>,
}

/// One operator's decisions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpPlan {
    /// Operator name (as in the graph).
    pub name: String,
    /// Its spec.
    pub spec: String,
    /// Choice per level.
    pub choices: Vec<OpChoice>,
    /// Name of the chosen strategy per level (`replicate` for replication).
    pub strategies: Vec<String>,
    /// Bytes per step attributed to this operator.
    pub comm_bytes: u64,
}

/// A plan file (see the module doc).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanFile {
    /// Always [`FORMAT`].
    pub format: String,
    /// Always [`VERSION`] when written by this version.
    pub version: u32,
    /// The search that made the plan.
    pub search: SearchKind,
    /// Number of workers k.
    pub workers: usize,
    /// Worker factor per recursion level.
    pub factors: Vec<usize>,
    /// Bytes sent by all workers together per training step.
    pub comm_bytes_per_step: u64,
    /// The largest per-worker memory (bytes).
    pub max_worker_memory_bytes: u64,
    /// Why the search stopped.
    pub stop_reason: StopReason,
    /// Why egg stopped rewriting index expressions in the strategy analysis
    /// ([`Planned::index_saturation`]); written only when a limit stopped it
    /// (`iteration-limit`, `node-limit`), absent when it saturated.
    #[serde(default, skip_serializing_if = "Saturation::is_saturated")]
    pub index_saturation: Saturation,
    /// Search time (seconds).
    pub plan_seconds: f64,
    /// Per tensor, in graph order.
    pub tensors: Vec<TensorPlan>,
    /// Per operator, in graph order.
    pub ops: Vec<OpPlan>,
    /// Per worker.
    pub memory: Vec<WorkerMemory>,
    /// With a topology (`--topology`): the cluster and the plan's bytes and
    /// estimated seconds per link level ([`super::topology`]); absent
    /// otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub links: Option<LinkReport>,
    /// SHA-256 (hex) of the embedded graph document.
    pub graph_sha256: String,
    /// The graph, as a `tofu-graph` document.
    pub graph: serde_json::Value,
    /// How the graph was imported from a model file (see the module doc);
    /// absent otherwise and in plans written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub import: Option<serde_json::Value>,
    /// The user operator specs the plan was made with (`tofu plan --specs`):
    /// each file's name, SHA-256 and text ([`super::specs`]), so the plan
    /// runs without the files; absent when there were none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub specs: Vec<SpecFile>,
}

/// Why a plan file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PlanFileError {
    /// Reading or writing failed.
    #[error("{path}: {message}")]
    Io {
        /// The file.
        path: String,
        /// What failed.
        message: String,
    },
    /// Not JSON of the plan format (field and position given).
    #[error("{path}: not a valid tofu plan: {message}")]
    Parse {
        /// The file.
        path: String,
        /// serde's message with the field path, line and column.
        message: String,
    },
    /// Wrong format name or version.
    #[error("{path}: format `{format}` version {version} is not supported (expected `{FORMAT}` version {VERSION})")]
    Version {
        /// The file.
        path: String,
        /// Its format field.
        format: String,
        /// Its version field.
        version: u32,
    },
    /// The recorded user specs cannot be used ([`super::specs::plan_library`]).
    #[error("{path}: {message}")]
    Specs {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// The plan does not match its graph (tampered, or made for another graph).
    #[error("{path}: the plan does not match its graph: {message}")]
    Mismatch {
        /// The file.
        path: String,
        /// What does not match.
        message: String,
    },
}

/// Why a plan file's recorded costs are not the ones its decisions imply
/// ([`PlanFile::check_recorded`]).
#[derive(Debug, thiserror::Error)]
pub enum RecordedError {
    /// The file's lists do not have one entry per operator or worker.
    #[error("plan does not fit the graph: {0}")]
    Mismatch(String),
    /// A recorded cost differs from what the decisions imply (an edited plan).
    #[error("{0}; the plan file was edited or comes from another planner: make it again with `tofu plan`")]
    Tampered(String),
}

/// SHA-256 (hex) of a graph's canonical JSON document.
pub fn graph_sha256(graph: &Graph) -> String {
    let digest = Sha256::digest(format::to_json(graph).as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

impl PlanFile {
    /// The file for a finished plan.
    pub fn new(graph: &Graph, model: &Model, planned: &Planned) -> PlanFile {
        let doc = format::to_json(graph);
        let tensors = graph
            .tensors()
            .iter()
            .zip(&planned.decisions.tensors)
            .map(|(t, s)| TensorPlan {
                name: t.name.clone(),
                shape: t.shape.clone(),
                splits: s.clone(),
            })
            .collect();
        let ops = graph
            .ops()
            .iter()
            .enumerate()
            .map(|(i, o)| OpPlan {
                name: o.name.clone(),
                spec: o.spec.clone(),
                choices: planned.decisions.ops[i].clone(),
                strategies: planned.decisions.ops[i]
                    .iter()
                    .map(|c| match c {
                        OpChoice::Strategy(s) => model.ops[i]
                            .strategies
                            .strategies
                            .get(*s as usize)
                            .map_or_else(|| format!("#{s}"), |st| st.name.clone()),
                        OpChoice::Replicate => "replicate".to_string(),
                        OpChoice::Linear(_) => "linear (partial sums)".to_string(),
                    })
                    .collect(),
                comm_bytes: planned.op_comm_bytes[i],
            })
            .collect();
        PlanFile {
            format: FORMAT.to_string(),
            version: VERSION,
            search: planned.search,
            workers: planned.factors.iter().product(),
            factors: planned.factors.clone(),
            comm_bytes_per_step: planned.comm_bytes,
            max_worker_memory_bytes: planned
                .memory
                .iter()
                .map(WorkerMemory::total)
                .max()
                .unwrap_or(0),
            stop_reason: planned.stop_reason,
            index_saturation: planned.index_saturation,
            plan_seconds: planned.plan_seconds,
            tensors,
            ops,
            memory: planned.memory.clone(),
            links: planned.links,
            graph_sha256: graph_sha256(graph),
            graph: serde_json::from_str(&doc).unwrap_or(serde_json::Value::Null),
            import: None,
            specs: Vec::new(),
        }
    }

    /// Write atomically (whole or not at all).
    pub fn save(&self, path: &Path) -> Result<(), PlanFileError> {
        let text = serde_json::to_string_pretty(self).map_err(|e| PlanFileError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        format::write_atomic(path, text.as_bytes()).map_err(|e| PlanFileError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        })
    }

    /// Check the decisions against the graph and its bound operators
    /// (one entry per tensor, operator and level, split dims within rank,
    /// strategy indices that exist); gives them as [`Decisions`].
    ///
    /// Errors: the first misfit, in words.
    pub fn check_bound(&self, graph: &Graph, model: &Model) -> Result<Decisions, String> {
        let levels = self.factors.len();
        if self.factors.iter().product::<usize>() != self.workers || self.factors.contains(&0) {
            return Err(format!(
                "factors {:?} do not multiply to {} workers",
                self.factors, self.workers
            ));
        }
        if self.tensors.len() != graph.tensors().len() || self.ops.len() != graph.ops().len() {
            return Err(format!(
                "{} tensors and {} ops in the plan, {} and {} in the graph",
                self.tensors.len(),
                self.ops.len(),
                graph.tensors().len(),
                graph.ops().len()
            ));
        }
        for (tp, t) in self.tensors.iter().zip(graph.tensors()) {
            if tp.name != t.name || tp.shape != t.shape {
                return Err(format!(
                    "tensor `{}` {:?} does not match graph tensor `{}` {:?}",
                    tp.name, tp.shape, t.name, t.shape
                ));
            }
            if tp.splits.len() != levels {
                return Err(format!(
                    "tensor `{}` has {} split entries for {levels} levels",
                    tp.name,
                    tp.splits.len()
                ));
            }
            if let Some(d) = tp
                .splits
                .iter()
                .flatten()
                .find(|d| **d != super::decisions::PARTIAL && **d as usize >= t.shape.len())
            {
                return Err(format!(
                    "tensor `{}` is split along dim {d} but has rank {}",
                    tp.name,
                    t.shape.len()
                ));
            }
        }
        for (i, (op, o)) in self.ops.iter().zip(graph.ops()).enumerate() {
            if op.name != o.name || op.spec != o.spec {
                return Err(format!(
                    "op `{}` ({}) does not match graph op `{}` ({})",
                    op.name, op.spec, o.name, o.spec
                ));
            }
            if op.choices.len() != levels {
                return Err(format!(
                    "op `{}` has {} choices for {levels} levels",
                    op.name,
                    op.choices.len()
                ));
            }
            let n = model.ops[i].strategies.strategies.len() as u32;
            if let Some(OpChoice::Strategy(s)) = op
                .choices
                .iter()
                .find(|c| matches!(c, OpChoice::Strategy(s) if *s >= n))
            {
                return Err(format!(
                    "op `{}` uses strategy {s}, but `{}` has {n}",
                    op.name, op.spec
                ));
            }
        }
        Ok(Decisions {
            tensors: self.tensors.iter().map(|t| t.splits.clone()).collect(),
            ops: self.ops.iter().map(|o| o.choices.clone()).collect(),
        })
    }

    /// Check that the recorded costs are the ones the decisions imply:
    /// `comm_bytes` of every operator (bytes per step),
    /// `comm_bytes_per_step`, every worker's memory (`memory[w]`,
    /// bytes) and, with a topology, the bytes per link level, so that an edited tile (a split changed to another valid dim,
    /// which [`PlanFile::check`] cannot see) is caught before programs are
    /// built. `graph` and `d` are what [`PlanFile::load`] bound for `self`.
    ///
    /// Errors: [`RecordedError::Tampered`] naming the first operator or
    /// worker whose record differs; [`RecordedError::Mismatch`] when the
    /// file's lists do not have one entry per operator or worker.
    pub fn check_recorded(
        &self,
        graph: &Graph,
        model: &Model,
        d: &Decisions,
    ) -> Result<(), RecordedError> {
        self.check_recorded_in(&CostModel::new(graph, model, &self.factors), d)
    }

    /// [`PlanFile::check_recorded`] with the plan's cost model `cm` (of the
    /// graph and bound operators `d` is for, and this file's factors).
    ///
    /// Errors: as [`PlanFile::check_recorded`].
    pub fn check_recorded_in(
        &self,
        cm: &CostModel<'_>,
        d: &Decisions,
    ) -> Result<(), RecordedError> {
        let (graph, model) = (cm.graph, cm.model);
        if self.ops.len() != graph.ops().len() || d.ops.len() != graph.ops().len() {
            return Err(RecordedError::Mismatch(format!(
                "{} op entries in the plan for {} ops in the graph",
                self.ops.len(),
                graph.ops().len()
            )));
        }
        let (total, per_op) = exact_cost_in(cm, d);
        for ((rec, &implied), op) in self.ops.iter().zip(&per_op).zip(graph.ops()) {
            if rec.comm_bytes != implied {
                return Err(RecordedError::Tampered(format!(
                    "op `{}` records {} bytes per step but the plan's tiles and strategies imply {implied}",
                    op.name, rec.comm_bytes
                )));
            }
        }
        if self.comm_bytes_per_step != total {
            return Err(RecordedError::Tampered(format!(
                "the plan records {} bytes per step but its decisions imply {total}",
                self.comm_bytes_per_step
            )));
        }
        let mem = per_worker(graph, &d.tensors, &self.factors);
        if self.memory.len() != mem.len() {
            return Err(RecordedError::Mismatch(format!(
                "memory recorded for {} workers, the plan has {}",
                self.memory.len(),
                mem.len()
            )));
        }
        for (w, (rec, implied)) in self.memory.iter().zip(&mem).enumerate() {
            if rec != implied {
                return Err(RecordedError::Tampered(format!(
                    "worker {w} records {} bytes of training state and {} of activations, but the plan's tiles imply {} and {}",
                    rec.training_state_bytes,
                    rec.peak_activation_bytes,
                    implied.training_state_bytes,
                    implied.peak_activation_bytes
                )));
            }
        }
        if let Some(rec) = &self.links {
            if rec.topology.workers() != self.workers {
                return Err(RecordedError::Mismatch(format!(
                    "the recorded topology has {} GPUs, the plan {} workers",
                    rec.topology.workers(),
                    self.workers
                )));
            }
            let implied = topology::price(graph, model, &self.factors, d, &rec.topology);
            if implied.load.bytes != rec.load.bytes {
                return Err(RecordedError::Tampered(format!(
                    "the plan records {:?} bytes per step over the inter- and intra-node links but its decisions imply {:?}",
                    rec.load.bytes, implied.load.bytes
                )));
            }
        }
        Ok(())
    }
}
