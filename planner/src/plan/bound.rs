//! A plan bound to its graph: the one value that carries a plan from the plan
//! file (or a fresh search) to codegen, the runner and the trainer.
//!
//! Takes a plan file ([`PlanFile::load`]) or a finished search
//! ([`BoundPlan::from_planned`]) and the operator library; gives a checked
//! [`BoundPlan`]: the graph, every operator bound once (shapes, access
//! model, strategies: [`Model`]), the worker factor per recursion level, the
//! decisions and the model file's import record. Its methods give what the
//! plan implies — the cost model, the transfers of one step and the
//! per-worker memory — computed from the same bound operators, so nothing
//! downstream binds the graph again (Cranelift's `Context` is the model:
//! one value, compiled in one call by `codegen::compile`).
//!
//! Keeps true: a `BoundPlan` made by [`PlanFile::load`] has passed every
//! structural check (format, version, graph hash, one decision per tensor,
//! operator and level, split dims within rank, strategy indices that
//! exist); its recorded costs ([`BoundPlan::recorded`]) are checked against
//! its decisions by `codegen::compile` before programs are built.

use std::path::Path;

use interval::cache::StrategyCache;
use tdl::Library;

use super::cost::{exact_cost_in, CostModel};
use super::decisions::Decisions;
use super::driver::plan_with_model;
use super::file::{graph_sha256, PlanFile, PlanFileError, RecordedError, FORMAT, VERSION};
use super::memory::{per_worker, WorkerMemory};
use super::model::{Model, ModelError};
use super::options::PlanOptions;
use super::planned::{PlanError, Planned};
use super::searches::SearchKind;
use super::specs::plan_library;
use super::transfer::{transfers_in, Transfer};
use crate::graph::{format, Graph};

/// A plan bound to its graph (see the module doc).
#[derive(Clone, Debug)]
pub struct BoundPlan {
    /// The training graph.
    pub graph: Graph,
    /// Every operator bound: access model, strategies, kind; indexed by
    /// `OpId`.
    pub ops: Model,
    /// Worker factor per recursion level, outermost first; their product is
    /// the world size.
    pub factors: Vec<usize>,
    /// Per tensor its split dim per level, per operator its choice per level.
    pub decisions: Decisions,
    /// How the graph was imported from a model file (the plan file's
    /// `import` record, e.g. `{"onnx": {…}}`); `None` for a zoo model or a
    /// graph file.
    pub import: Option<serde_json::Value>,
    /// The plan file it was loaded from, whose recorded costs must equal
    /// what [`BoundPlan::decisions`] imply; `None` for a fresh search.
    pub recorded: Option<PlanFile>,
}

impl BoundPlan {
    /// A finished search's plan of `graph`, whose operators `ops` bound
    /// (the model the search used: it is not bound again).
    pub fn from_planned(graph: Graph, ops: Model, planned: &Planned) -> BoundPlan {
        BoundPlan {
            graph,
            ops,
            factors: planned.factors.clone(),
            decisions: planned.decisions.clone(),
            import: None,
            recorded: None,
        }
    }

    /// Search a plan of `graph` for `workers` workers with `search` and
    /// `opts` ([`super::driver::plan_with`]), binding its operators once:
    /// gives the bound plan and the search's report (bytes, memory, stop
    /// reason). What tests and tools use instead of binding a [`Model`] by
    /// hand beside [`super::driver::plan`].
    ///
    /// Errors: as [`super::driver::plan_with`] (k = 0, an operator whose spec
    /// is missing or does not fit, a level with no feasible assignment).
    pub fn search(
        graph: Graph,
        lib: &Library,
        cache: &StrategyCache,
        workers: usize,
        search: SearchKind,
        opts: PlanOptions,
    ) -> Result<(BoundPlan, Planned), PlanError> {
        let ops = Model::new(&graph, lib, cache)?;
        let (planned, ops) = plan_with_model(&graph, ops, workers, search, opts)?;
        Ok((BoundPlan::from_planned(graph, ops, &planned), planned))
    }

    /// The unpartitioned plan of `graph`: one worker, no recursion levels,
    /// its operators bound once.
    ///
    /// Errors: [`ModelError`] for an operator whose spec is missing or does
    /// not fit (naming the operator).
    pub fn unpartitioned(
        graph: Graph,
        lib: &Library,
        cache: &StrategyCache,
    ) -> Result<BoundPlan, ModelError> {
        let ops = Model::new(&graph, lib, cache)?;
        let decisions = Decisions {
            tensors: vec![Vec::new(); graph.tensors().len()],
            ops: vec![Vec::new(); graph.ops().len()],
        };
        Ok(BoundPlan {
            graph,
            ops,
            factors: Vec::new(),
            decisions,
            import: None,
            recorded: None,
        })
    }

    /// Check a parsed plan file and bind its embedded graph (`path` names
    /// the file in messages).
    ///
    /// Errors: [`PlanFileError::Version`] for another format or version;
    /// [`PlanFileError::Mismatch`] when the embedded graph does not parse,
    /// its hash differs, an operator does not bind, or the decisions do not
    /// fit the graph.
    pub fn from_file(
        file: PlanFile,
        path: &str,
        lib: &Library,
        cache: &StrategyCache,
    ) -> Result<BoundPlan, PlanFileError> {
        if file.format != FORMAT || file.version != VERSION {
            return Err(PlanFileError::Version {
                path: path.to_string(),
                format: file.format,
                version: file.version,
            });
        }
        let mismatch = |m: String| PlanFileError::Mismatch {
            path: path.to_string(),
            message: m,
        };
        let graph = format::from_json(&file.graph.to_string())
            .map_err(|e| mismatch(format!("embedded graph: {e}")))?;
        if graph_sha256(&graph) != file.graph_sha256 {
            return Err(mismatch(
                "graph_sha256 differs from the embedded graph".into(),
            ));
        }
        let ops = Model::new(&graph, lib, cache).map_err(|e| mismatch(e.to_string()))?;
        let decisions = file.check_bound(&graph, &ops).map_err(mismatch)?;
        Ok(BoundPlan {
            graph,
            ops,
            factors: file.factors.clone(),
            decisions,
            import: file.import.clone(),
            recorded: Some(file),
        })
    }

    /// Number of workers (ranks): the product of the factors.
    pub fn workers(&self) -> usize {
        self.factors.iter().product()
    }

    /// The exact cost model of this plan's graph, operators and factors
    /// (Tofu §4.2). Build it once and pass it on: it caches every worker's
    /// boxes and tiles.
    pub fn cost(&self) -> CostModel<'_> {
        CostModel::new(&self.graph, &self.ops, &self.factors)
    }

    /// Bytes sent by all workers together per step, total and per operator
    /// ([`super::cost::exact_cost`]), from `cm` (this plan's [`Self::cost`]).
    pub fn comm_bytes(&self, cm: &CostModel<'_>) -> (u64, Vec<u64>) {
        exact_cost_in(cm, &self.decisions)
    }

    /// Every transfer of one training step in program order
    /// ([`super::transfer::transfers`]), from `cm` (this plan's
    /// [`Self::cost`]).
    pub fn transfers(&self, cm: &CostModel<'_>) -> Vec<Transfer> {
        transfers_in(cm, &self.decisions)
    }

    /// Per worker: training-state and peak activation bytes.
    pub fn memory(&self) -> Vec<WorkerMemory> {
        per_worker(&self.graph, &self.decisions.tensors, &self.factors)
    }

    /// Check the recorded costs of the file it was loaded from (nothing for
    /// a fresh search) against its decisions, with `cm` (this plan's
    /// [`Self::cost`]): [`PlanFile::check_recorded`].
    ///
    /// Errors: as [`PlanFile::check_recorded`].
    pub fn check_recorded(&self, cm: &CostModel<'_>) -> Result<(), RecordedError> {
        match &self.recorded {
            Some(file) => file.check_recorded_in(cm, &self.decisions),
            None => Ok(()),
        }
    }
}

impl PlanFile {
    /// Read, parse and check a plan file and bind its graph
    /// ([`BoundPlan::from_file`]).
    ///
    /// Errors: [`PlanFileError::Io`] for a file that cannot be read,
    /// [`PlanFileError::Parse`] for JSON that is not a plan (naming the
    /// field, line and column), then as [`BoundPlan::from_file`].
    pub fn load(
        path: &Path,
        lib: &Library,
        cache: &StrategyCache,
    ) -> Result<BoundPlan, PlanFileError> {
        BoundPlan::from_file(
            PlanFile::read(path)?,
            &path.display().to_string(),
            lib,
            cache,
        )
    }

    /// Read a plan file made with or without user specs and bind it with
    /// the shipped library plus its recorded specs, checked against the
    /// spec files `given` now (`--specs`; [`super::specs::plan_library`]).
    /// Gives the bound plan and the library it was bound with.
    ///
    /// Errors: as [`PlanFile::load`], and [`PlanFileError::Specs`] for
    /// recorded specs that were edited, differ from `given` or do not load.
    pub fn load_with_specs(
        path: &Path,
        given: &[(String, String)],
        cache: &StrategyCache,
    ) -> Result<(BoundPlan, Library), PlanFileError> {
        let p = path.display().to_string();
        let file = PlanFile::read(path)?;
        let lib = plan_library(&file.specs, given).map_err(|e| PlanFileError::Specs {
            path: p.clone(),
            message: e.to_string(),
        })?;
        Ok((BoundPlan::from_file(file, &p, &lib, cache)?, lib))
    }

    /// Read and parse a plan file (nothing checked beyond its JSON).
    ///
    /// Errors: [`PlanFileError::Io`] for a file that cannot be read,
    /// [`PlanFileError::Parse`] for JSON that is not a plan (naming the
    /// field, line and column).
    pub fn read(path: &Path) -> Result<PlanFile, PlanFileError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| PlanFileError::Io {
            path: p.clone(),
            message: e.to_string(),
        })?;
        let de = &mut serde_json::Deserializer::from_str(&text);
        let file: PlanFile =
            serde_path_to_error::deserialize(de).map_err(|e| PlanFileError::Parse {
                path: p.clone(),
                message: format!("at `{}`: {}", e.path(), e.inner()),
            })?;
        Ok(file)
    }
}
