//! What `tofu plan` computes, from one bound model: the plan (or the
//! `--pareto` frontier), the data-parallel plan beside it for comparison,
//! and the model itself for the plan file.
//!
//! Takes a graph, its library and a [`PlanRequest`] (k, search, options,
//! frontier or not); gives [`PlanResults`]. The graph's [`Model`] is bound
//! exactly once (the search, the data-parallel comparison and the plan file
//! all take it by value or by reference, never bind it again).

use std::time::Instant;

use interval::cache::StrategyCache;
use tdl::Library;

use super::candidates::{choose, Candidates};
use super::driver::plan_with_model;
use super::model::Model;
use super::options::PlanOptions;
use super::pareto::{pareto_with_model, ParetoPoint};
use super::planned::{PlanError, Planned};
use super::searches::SearchKind;
use crate::graph::Graph;

/// What to plan (the arguments of `tofu plan` after parsing).
#[derive(Clone, Debug)]
pub struct PlanRequest {
    /// Workers k (≥ 1).
    pub workers: usize,
    /// The search.
    pub search: SearchKind,
    /// Device memory, tensor parallelism, topology, budgets.
    pub opts: PlanOptions,
    /// The frontier of bytes against memory ([`super::pareto::pareto`])
    /// instead of one plan.
    pub pareto: bool,
}

/// The plans of a [`PlanRequest`].
pub enum Plans {
    /// The search's plan ([`super::driver::plan_with`]).
    One(Box<Planned>),
    /// The frontier ([`super::pareto::pareto`]), never empty.
    Frontier(Vec<ParetoPoint>),
}

/// What [`PlanRequest::run`] gives.
pub struct PlanResults {
    /// The plan or the frontier.
    pub plans: Plans,
    /// Data parallelism on the same k for comparison (no device-memory
    /// limit, no topology); `None` when the search is data parallelism
    /// itself or it could not be planned.
    pub data_parallel: Option<Planned>,
    /// The graph's bound model (for [`super::file::PlanFile::new`]).
    pub model: Model,
}

impl PlanRequest {
    /// Binds `graph`'s model once, plans it as asked, and plans data
    /// parallelism beside it with the same model.
    ///
    /// Errors: k = 0; an operator whose spec is missing or does not fit; a
    /// topology without k GPUs; a level without a feasible assignment. A
    /// plan that does not fit the device memory is not an error (its
    /// [`Planned::fit`] says so).
    pub fn run(
        &self,
        graph: &Graph,
        lib: &Library,
        cache: &StrategyCache,
    ) -> Result<PlanResults, PlanError> {
        if self.workers == 0 {
            return Err(PlanError::NoWorkers);
        }
        let model = Model::new(graph, lib, cache)?;
        let (plans, model) = if self.pareto {
            let (front, model) =
                pareto_with_model(graph, model, self.workers, self.search, self.opts)?;
            (Plans::Frontier(front), model)
        } else {
            let (p, model) = plan_with_model(graph, model, self.workers, self.search, self.opts)?;
            (Plans::One(Box::new(p)), model)
        };
        let (data_parallel, model) = if self.search == SearchKind::DataParallel {
            (None, model)
        } else {
            data_parallel(graph, model, self.workers)
        };
        Ok(PlanResults {
            plans,
            data_parallel,
            model,
        })
    }
}

/// Data parallelism over `workers` (≥ 1) with the default options, as
/// [`super::driver::plan`] would plan it, keeping the model whatever
/// happens (`None` when a level has no feasible assignment).
fn data_parallel(graph: &Graph, model: Model, workers: usize) -> (Option<Planned>, Model) {
    let start = Instant::now();
    let opts = PlanOptions::default();
    let ctx = Candidates::with_model(graph, model, workers, SearchKind::DataParallel, &opts)
        .expect("request.rs: k ≥ 1 was checked before planning");
    let plans = ctx.plan_all(None);
    let planned = plans.ok().map(|plans| {
        let mut best = choose(plans, None);
        best.plan_seconds = start.elapsed().as_secs_f64();
        best
    });
    (planned, ctx.into_model())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::Optimizer;
    use crate::zoo;

    fn run(pareto: bool, search: SearchKind) -> PlanResults {
        let lib = Library::shipped().expect("the shipped library loads");
        let m = zoo::Model::parse("mlp-2-32").expect("a zoo name");
        let graph = m
            .training(&lib, &Optimizer::Sgd { lr: 0.1 })
            .expect("builds");
        let req = PlanRequest {
            workers: 4,
            search,
            opts: PlanOptions::default(),
            pareto,
        };
        req.run(&graph, &lib, &StrategyCache::new()).expect("plans")
    }

    #[test]
    fn tofu_plan_plans_and_compares_with_data_parallelism() {
        let out = run(false, SearchKind::CriticalDp);
        assert!(matches!(out.plans, Plans::One(_)));
        assert!(out.data_parallel.is_some(), "the comparison is planned");
    }

    #[test]
    fn the_frontier_is_planned_with_the_comparison() {
        let out = run(true, SearchKind::CriticalDp);
        assert!(matches!(out.plans, Plans::Frontier(ref f) if !f.is_empty()));
        assert!(out.data_parallel.is_some());
    }

    #[test]
    fn data_parallelism_is_not_planned_twice() {
        let out = run(false, SearchKind::DataParallel);
        assert!(out.data_parallel.is_none());
    }
}
