//! The searches `--search` can name, one file each, in one ordered list.
//!
//! Takes nothing; gives [`SEARCHES`], the list the driver, the CLI and the
//! benchmark read, and the [`Search`] trait each entry implements. A search
//! says which candidate plans the driver builds (a factorisation of k with a
//! [`LayoutRule`] per recursion level) and how one level's pairwise problem
//! is solved; the driver ([`super::driver`], over `candidates.rs`) owns the
//! recursion and the choice among candidates, [`super::cost`] the exact
//! costs. Adding a baseline is one file here and one line in [`SEARCHES`]
//! (Tofu §6.3's baselines are layout restrictions or another solver on the
//! same path).

mod allrow_greedy;
mod critical_dp;
mod data_parallel;
mod equal_chop;
mod ilp;
pub mod megatron;
mod spartan;

use super::decisions::LayoutRule;
use super::options::PlanOptions;
pub use crate::search::SearchLimits;
use crate::search::{critical_dp::critical_dp_with, Problem, ProblemError, SearchResult};

/// Every search, in the order `--search` help and the benchmark list them.
/// Plans name their search by [`Search::name`], so names never change.
pub const SEARCHES: &[&dyn Search] = &[
    &critical_dp::CriticalDp,
    &ilp::Ilp,
    &data_parallel::DataParallel,
    &allrow_greedy::AllrowGreedy,
    &spartan::Spartan,
    &equal_chop::EqualChop,
    &megatron::Megatron,
];

/// A search algorithm: which candidate plans to build and how to solve one
/// recursion level.
pub trait Search: Sync {
    /// The name used by `--search` and in plan files (kebab-case).
    fn name(&self) -> &'static str;

    /// The candidate plans for `workers` workers (at least one); the driver
    /// builds each and keeps the best (see [`crate::plan::plan_with`]).
    /// Default: the recursion over the prime factors of k (the topology's
    /// levels, [`PlanOptions::factors`]) with [`Search::rule`] at every level.
    fn candidates(&self, workers: usize, opts: &PlanOptions) -> Vec<Candidate> {
        Candidate::uniform(opts.factors(workers), self.rule(), None)
    }

    /// The layout rule of [`Search::candidates`]' default (every level).
    fn rule(&self) -> LayoutRule {
        LayoutRule::Free
    }

    /// Solve one level's pairwise problem within `limits` (a limit that
    /// stops the solver is its result's [`crate::search::StopReason`]).
    /// Default: CriticalDP (Tofu §4.2.2).
    ///
    /// Errors: the problem is malformed or has no feasible assignment.
    fn solve(
        &self,
        problem: &Problem,
        limits: &SearchLimits,
    ) -> Result<SearchResult, ProblemError> {
        critical_dp_with(problem, limits)
    }
}

/// One candidate plan: a factorisation of k, each level's layout rule and
/// the search whose [`Search::solve`] runs the levels.
#[derive(Clone, Debug)]
pub struct Candidate {
    /// Worker factor per level, outermost first; their product is k.
    pub factors: Vec<usize>,
    /// Layout rule per level (same length as `factors`).
    pub rules: Vec<LayoutRule>,
    /// The label of the plan's [`crate::plan::Planned::choice`];
    /// `None`: `recursion p·q·…` or `one k-way level`.
    pub label: Option<String>,
    /// Kept only when it fits the device memory (an alternative beside the
    /// search's own plans, e.g. whole-model data parallelism).
    pub only_if_fits: bool,
}

impl Candidate {
    /// A candidate with one rule at every level, in a one-element vector.
    pub fn uniform(factors: Vec<usize>, rule: LayoutRule, label: Option<String>) -> Vec<Self> {
        vec![Candidate {
            rules: vec![rule; factors.len()],
            factors,
            label,
            only_if_fits: false,
        }]
    }
}

/// A search, by name: what plans, the CLI and reports carry. Compares,
/// hashes and serialises as its [`Search::name`].
#[derive(Clone, Copy)]
pub struct SearchKind(pub &'static dyn Search);

#[allow(non_upper_case_globals)]
impl SearchKind {
    /// CriticalDP on the coarsened graph, recursively (Tofu's algorithm).
    pub const CriticalDp: SearchKind = SearchKind(&critical_dp::CriticalDp);
    /// The exact pairwise MIP per recursion level (reference).
    pub const Ilp: SearchKind = SearchKind(&ilp::Ilp);
    /// Data parallelism: batch split, weights replicated, gradients all-reduced.
    pub const DataParallel: SearchKind = SearchKind(&data_parallel::DataParallel);
    /// Every tensor split along its first dim; operators choose the cheapest strategy.
    pub const AllrowGreedy: SearchKind = SearchKind(&allrow_greedy::AllrowGreedy);
    /// Spartan-style greedy: largest tensors decided first.
    pub const Spartan: SearchKind = SearchKind(&spartan::Spartan);
    /// One k-way level (no recursion), solved with CriticalDP.
    pub const EqualChop: SearchKind = SearchKind(&equal_chop::EqualChop);

    /// Every search of [`SEARCHES`], in its order.
    pub const ALL: [SearchKind; SEARCHES.len()] = {
        let mut all = [SearchKind(SEARCHES[0]); SEARCHES.len()];
        let mut i = 1;
        while i < SEARCHES.len() {
            all[i] = SearchKind(SEARCHES[i]);
            i += 1;
        }
        all
    };

    /// The name used by `--search`.
    pub fn name(self) -> &'static str {
        self.0.name()
    }
}

impl PartialEq for SearchKind {
    fn eq(&self, other: &Self) -> bool {
        self.name() == other.name()
    }
}

impl Eq for SearchKind {}

impl std::hash::Hash for SearchKind {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name().hash(state);
    }
}

impl std::fmt::Debug for SearchKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for SearchKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        SearchKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown search `{s}`; choose one of {}",
                    SearchKind::ALL.map(|k| k.name()).join(", ")
                )
            })
    }
}

impl serde::Serialize for SearchKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for SearchKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}
