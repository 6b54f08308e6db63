//! A finished plan and what planning reports about it.
//!
//! Takes nothing; gives [`Planned`] (the decisions per level, the exact
//! bytes per step in total and per operator, per-worker memory, why the
//! search stopped, which candidate was kept) with its reports: per level
//! ([`LevelReport`]), against the device memory ([`MemoryFit`],
//! [`BudgetReport`]) and per link level ([`LinkReport`]); [`PlanError`],
//! why planning failed; and [`max_memory`], the largest worker of a plan.
//! The planner that makes them is [`super::driver`].

use interval::Saturation;

use super::cluster::{LinkReport, TopologyError};
use super::coarse::CoarseGraph;
use super::decisions::Decisions;
use super::memory::WorkerMemory;
use super::model::ModelError;
use super::searches::SearchKind;
use crate::search::{ProblemError, StopReason};

/// Why planning failed.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// k = 0.
    #[error("--workers must be at least 1")]
    NoWorkers,
    /// The graph's operators do not fit their specs.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// The topology does not fit the workers.
    #[error(transparent)]
    Topology(#[from] TopologyError),
    /// A level's search failed.
    #[error("level {level} ({factor} groups): {source}")]
    Search {
        /// Level index.
        level: usize,
        /// Its worker factor.
        factor: usize,
        /// The cause.
        source: ProblemError,
    },
}

/// Whether a plan fits the device memory (`--device-memory`): a plan that
/// does not is a result, the smallest the search found, not an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case", tag = "fit")]
pub enum MemoryFit {
    /// No limit was given.
    Unlimited,
    /// Every worker's peak fits the limit.
    Fits {
        /// The limit (bytes per worker).
        device_memory: u64,
    },
    /// No plan the search found fits the limit; this plan is the one whose
    /// largest worker is the smallest (its memory report names the worst
    /// worker and tile).
    DoesNotFit {
        /// The limit (bytes per worker).
        device_memory: u64,
        /// This plan's largest worker (bytes), the smallest of any plan tried.
        smallest: u64,
    },
}

impl MemoryFit {
    /// Whether the plan exceeds the limit.
    pub fn does_not_fit(self) -> bool {
        matches!(self, MemoryFit::DoesNotFit { .. })
    }
}

/// Statistics of one recursion level.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LevelReport {
    /// Worker factor of the level.
    pub factor: usize,
    /// Nodes of the coarsened problem.
    pub nodes: usize,
    /// Edges of the coarsened problem.
    pub edges: usize,
    /// Exact communication (bytes per step) of the plan made of the levels
    /// so far (what the search minimised, unless a topology priced it in time).
    pub comm_bytes: f64,
    /// Why this level's search stopped.
    pub stop_reason: StopReason,
}

/// A finished plan (see the module doc).
#[derive(Clone, Debug)]
pub struct Planned {
    /// The search that made it.
    pub search: SearchKind,
    /// Worker factor per level (outermost first); their product is k.
    pub factors: Vec<usize>,
    /// Decisions per tensor and operator, per level.
    pub decisions: Decisions,
    /// Bytes sent by all workers together in one training step.
    pub comm_bytes: u64,
    /// Bytes per step attributed to each operator (its fetches and output
    /// assembly), indexed by op id.
    pub op_comm_bytes: Vec<u64>,
    /// Memory per worker.
    pub memory: Vec<WorkerMemory>,
    /// Per level.
    pub levels: Vec<LevelReport>,
    /// Why the search stopped ([`StopReason::overall`] of the levels): the
    /// first limit that stopped a level; else `optimal` only if every level
    /// was solved exactly.
    pub stop_reason: StopReason,
    /// Why egg stopped rewriting the index expressions of the analysis that
    /// gave the operators' strategies: the worst over the operators
    /// ([`Saturation`]); a limit means some strategies were found on the best
    /// form egg reached, not its normal form.
    pub index_saturation: Saturation,
    /// Search time in seconds (model building and search; not graph construction).
    pub plan_seconds: f64,
    /// The coarsened graph of the first level, for pictures.
    pub coarse: CoarseGraph,
    /// Which of the search's candidate plans was kept, e.g. `recursion 2·2·2`,
    /// `one 8-way level` or `data parallelism` (see
    /// [`plan_with`](super::plan_with)).
    pub choice: String,
    /// The best candidate that was not kept, for the summary: its
    /// [`Planned::choice`] label, bytes per step and largest worker's memory
    /// (bytes). `None` when the search had one candidate.
    pub runner_up: Option<(String, u64, u64)>,
    /// How `--device-memory` shaped the search (`None` without a limit):
    /// whether it bound and what it traded ([`super::budget`]).
    pub budget: Option<BudgetReport>,
    /// With [`PlanOptions::topology`](super::options::PlanOptions::topology):
    /// bytes and estimated seconds per link level, what the search
    /// minimised ([`super::topology`]).
    pub links: Option<LinkReport>,
    /// Whether it fits
    /// [`PlanOptions::device_memory`](super::options::PlanOptions::device_memory):
    /// with a limit, the search keeps a fitting plan when it finds one, else
    /// the smallest plan it found, marked [`MemoryFit::DoesNotFit`].
    pub fit: MemoryFit,
}

impl Planned {
    /// What candidates are compared by: estimated seconds of communication
    /// on the topology when there is one, else bytes per step.
    pub fn objective(&self) -> f64 {
        self.links
            .as_ref()
            .map_or(self.comm_bytes as f64, LinkReport::seconds)
    }
}

/// What the device memory limit did to a plan (bytes unless said otherwise).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BudgetReport {
    /// The limit: memory of one device.
    pub device_memory: u64,
    /// Whether the plan with the fewest bytes (no limit) exceeded it, so
    /// the search had to trade bytes for memory.
    pub bound: bool,
    /// The plan the search keeps without a limit: its choice label.
    pub unconstrained_choice: String,
    /// Its bytes per step (all workers together).
    pub unconstrained_comm_bytes: u64,
    /// Its largest worker's memory.
    pub unconstrained_max_memory_bytes: u64,
    /// The memory price λ of the kept plan (0: priced-free search).
    pub price: f64,
    /// Candidate plans built and checked exactly.
    pub plans_tried: usize,
}

/// The largest worker's memory of a plan (bytes).
pub fn max_memory(p: &Planned) -> u64 {
    p.memory.iter().map(|m| m.total()).max().unwrap_or(0)
}
