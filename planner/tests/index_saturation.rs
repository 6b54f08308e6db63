//! egg's stop reason reaches the plan (issue 36): a plan built on strategies
//! whose analysis stopped at an egg limit says so (`Planned::index_saturation`,
//! the plan file's `index_saturation`), and a plan whose analysis saturated —
//! every zoo model's — writes exactly the file it wrote before (no field).

use std::sync::Arc;

use interval::cache::StrategyCache;
use interval::Saturation;
use planner::graph::Optimizer;
use planner::plan::model::Model;
use planner::plan::{plan_with_model, PlanFile, PlanOptions, SearchKind};
use planner::zoo::{self, MlpConfig};
use tdl::Library;

#[test]
fn an_egg_limit_reaches_the_plan_and_saturation_changes_nothing() {
    let lib = Library::shipped().unwrap();
    let cache = StrategyCache::new();
    let g = zoo::Model::Mlp(MlpConfig::tiny())
        .training(&lib, &Optimizer::Sgd { lr: 0.1 })
        .unwrap();
    let opts = PlanOptions::default();

    // Under the default limits egg saturates on every op of the model.
    let model = Model::new(&g, &lib, &cache).unwrap();
    for (op, m) in g.ops().iter().zip(&model.ops) {
        assert_eq!(
            m.strategies.saturation,
            Saturation::Saturated,
            "{}",
            op.name
        );
    }
    let (p, model) = plan_with_model(&g, model, 4, SearchKind::CriticalDp, opts).unwrap();
    assert_eq!(p.index_saturation, Saturation::Saturated);
    let text = serde_json::to_string_pretty(&PlanFile::new(&g, &model, &p)).unwrap();
    assert!(!text.contains("index_saturation"), "saturated: no field");

    // One op's analysis stopped at egg's node limit.
    let mut limited = Model::new(&g, &lib, &cache).unwrap();
    let mut s = (*limited.ops[0].strategies).clone();
    s.saturation = Saturation::NodeLimit;
    limited.ops[0].strategies = Arc::new(s);
    let (q, limited) = plan_with_model(&g, limited, 4, SearchKind::CriticalDp, opts).unwrap();
    assert_eq!(q.index_saturation, Saturation::NodeLimit);
    assert_eq!(
        q.decisions, p.decisions,
        "the same strategies, the same plan"
    );
    let file = PlanFile::new(&g, &limited, &q);
    let text = serde_json::to_string_pretty(&file).unwrap();
    assert!(
        text.contains("\"index_saturation\": \"node-limit\""),
        "{}",
        &text[..400]
    );
    let back: PlanFile = serde_json::from_str(&text).unwrap();
    assert_eq!(back, file);
}
