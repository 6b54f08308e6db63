//! Limits are results (issue 28): a plan whose level searches a limit
//! stopped says which limit, in the plan and in its file; without the limit
//! the same plan is proven optimal.

use std::time::Duration;

use interval::cache::StrategyCache;
use planner::graph::Optimizer;
use planner::plan::{plan_with, PlanOptions, SearchKind};
use planner::search::{SearchLimits, StopReason};
use planner::zoo::{self, RnnConfig};
use tdl::Library;

#[test]
fn an_ilp_plan_stopped_by_its_time_limit_says_so() {
    let lib = Library::shipped().expect("shipped specs load");
    let g = zoo::Model::Rnn(RnnConfig::tiny())
        .training(&lib, &Optimizer::Sgd { lr: 0.1 })
        .unwrap();
    let cache = StrategyCache::new();
    let timed = PlanOptions {
        limits: SearchLimits {
            ilp_time_limit: Some(Duration::ZERO),
            ..SearchLimits::default()
        },
        ..PlanOptions::default()
    };
    let cut = plan_with(&g, &lib, &cache, 4, SearchKind::Ilp, timed).unwrap();
    assert_eq!(cut.stop_reason, StopReason::TimeLimit);
    assert!(cut
        .levels
        .iter()
        .all(|l| l.stop_reason == StopReason::TimeLimit));
    let model = planner::plan::model::Model::new(&g, &lib, &cache).unwrap();
    let file = planner::plan::PlanFile::new(&g, &model, &cut);
    assert_eq!(file.stop_reason, StopReason::TimeLimit);
    let json = serde_json::to_string(&file).unwrap();
    assert!(
        json.contains("\"stop_reason\":\"time-limit\""),
        "{json:.300}"
    );
    // The same search without a limit proves every level optimal.
    let exact = plan_with(&g, &lib, &cache, 4, SearchKind::Ilp, PlanOptions::default()).unwrap();
    assert_eq!(exact.stop_reason, StopReason::Optimal);
}
