//! Plans with partial-sum layouts (`tofu plan --partial-sums`, issue 41) are
//! refused before anything runs: codegen cannot emit them yet, so `tofu
//! run` must never execute one wrong.
//!
//! The graph: two `matmul_nt` whose contractions are cut at k = 2, summed by
//! `add`, then `relu` (planner/tests/partial_sums.rs: the planner keeps the
//! products and their sum partial). The oracle is the plan itself: its
//! first partial tensor is the one the error names.

use codegen::{compile, CodegenError};
use interval::cache::StrategyCache;
use planner::graph::{DType, Fill, Graph, GraphBuilder};
use planner::plan::decisions::is_partial;
use planner::plan::{BoundPlan, PlanOptions, SearchKind};
use tdl::Library;

fn graph(lib: &Library) -> Graph {
    let (k, n) = (32 * 1024, 64 * 1024);
    let mut b = GraphBuilder::new(lib, "two-projections");
    let normal = Fill::Normal { std: 1.0 };
    let g1 = b.input("g1", &[1, n], DType::F32, normal).unwrap();
    let g2 = b.input("g2", &[1, n], DType::F32, normal).unwrap();
    let w1 = b.weight("w1", &[k, n], 0.1).unwrap();
    let w2 = b.weight("w2", &[k, n], 0.1).unwrap();
    let dx1 = b.op1("matmul_nt", "dx1", &[g1, w1], &[]).unwrap();
    let dx2 = b.op1("matmul_nt", "dx2", &[g2, w2], &[]).unwrap();
    let s = b.op1("add", "sum", &[dx1, dx2], &[]).unwrap();
    b.op1("relu", "act", &[s], &[]).unwrap();
    b.into_graph()
}

#[test]
fn a_plan_with_partial_sums_is_refused_naming_its_first_partial_tensor() {
    let lib = Library::shipped().unwrap();
    let cache = StrategyCache::new();
    let search = |partial_sums| {
        let opts = PlanOptions {
            partial_sums,
            ..PlanOptions::default()
        };
        BoundPlan::search(graph(&lib), &lib, &cache, 2, SearchKind::CriticalDp, opts).unwrap()
    };
    let (bound, p) = search(true);
    let first = p
        .decisions
        .tensors
        .iter()
        .position(|s| s.iter().any(|x| is_partial(*x)))
        .expect("the plan holds a partial tensor");
    let name = bound.graph.tensors()[first].name.clone();
    match compile(&bound, &lib) {
        Err(e @ CodegenError::PartialSums { .. }) => {
            assert_eq!(
                e,
                CodegenError::PartialSums {
                    what: "tensor",
                    name: name.clone(),
                    level: 0
                }
            );
            let msg = e.to_string();
            assert!(msg.contains(&format!("`{name}`")) && msg.contains("not executable yet"));
        }
        other => panic!(
            "expected a partial-sums refusal, got {:?}",
            other.map(|_| ())
        ),
    }
    // Negative control: the same graph planned without the option compiles.
    let (plain, _) = search(false);
    compile(&plain, &lib).expect("a plan without partial sums compiles");
}
