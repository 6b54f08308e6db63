//! Partial sums as a layout (issue 41, item 1; `PlanOptions::partial_sums`).
//!
//! The graph is the backward pattern of two projections reading one input:
//! their input gradients `dx1 = g1 · W1ᵀ` and `dx2 = g2 · W2ᵀ` (`matmul_nt`,
//! contracting a long dim N), summed by `add`, then a non-linear `relu`.
//! At k = 2 the output gradients `g1`, `g2` (`[1, N]`, too large to
//! replicate, only dim 1 splits) are split along N, so each matmul cuts its
//! contraction and yields two partial sums of `[1, K]`.
//!
//! Hand count (elements, k = 2, N = 2K): without partial layouts the
//! cheapest plan reduce-scatters `dx1` and `dx2` each into a K-split
//! (each owner receives its half from the other worker: K per tensor, 2K);
//! fetching `g` whole instead costs N = 2K per matmul. With partial layouts
//! `dx1`, `dx2` and their sum stay partial (free) and only the sum is
//! reduce-scattered for `relu`: K. Nothing is cheaper: `relu` needs the sum,
//! and reducing two partials of K elements into split halves receives K.

use interval::cache::StrategyCache;
use planner::graph::{DType, Fill, Graph, GraphBuilder};
use planner::plan::decisions::{OpChoice, PARTIAL};
use planner::plan::model::Model;
use planner::plan::{exact_cost, plan_with, PlanOptions, Planned, SearchKind};
use tdl::Library;

const K: usize = 32 * 1024;
const N: usize = 2 * K;

fn graph(lib: &Library) -> Graph {
    let mut b = GraphBuilder::new(lib, "two-projections");
    let normal = Fill::Normal { std: 1.0 };
    let g1 = b.input("g1", &[1, N], DType::F32, normal).unwrap();
    let g2 = b.input("g2", &[1, N], DType::F32, normal).unwrap();
    let w1 = b.weight("w1", &[K, N], 0.1).unwrap();
    let w2 = b.weight("w2", &[K, N], 0.1).unwrap();
    let dx1 = b.op1("matmul_nt", "dx1", &[g1, w1], &[]).unwrap();
    let dx2 = b.op1("matmul_nt", "dx2", &[g2, w2], &[]).unwrap();
    let s = b.op1("add", "sum", &[dx1, dx2], &[]).unwrap();
    b.op1("relu", "act", &[s], &[]).unwrap();
    b.into_graph()
}

fn planned(g: &Graph, lib: &Library, search: SearchKind, partial_sums: bool) -> Planned {
    let opts = PlanOptions {
        partial_sums,
        ..PlanOptions::default()
    };
    plan_with(g, lib, &StrategyCache::new(), 2, search, opts).unwrap()
}

/// The output of the op named `name`.
fn tensor(g: &Graph, name: &str) -> usize {
    g.ops().iter().find(|o| o.name == name).unwrap().outputs[0].index()
}

#[test]
fn summed_input_gradients_are_reduced_once_with_partial_sums() {
    let lib = Library::shipped().unwrap();
    let g = graph(&lib);
    for search in [SearchKind::CriticalDp, SearchKind::Ilp] {
        let off = planned(&g, &lib, search, false);
        assert_eq!(off.comm_bytes, (2 * K * 4) as u64, "{search:?} without");
        let on = planned(&g, &lib, search, true);
        assert_eq!(on.comm_bytes, (K * 4) as u64, "{search:?} with");
        let d = &on.decisions;
        for name in ["dx1", "dx2", "sum"] {
            assert_eq!(d.tensors[tensor(&g, name)], [Some(PARTIAL)], "{name}");
        }
        let add = g.ops().iter().position(|o| o.name == "sum").unwrap();
        assert_eq!(d.ops[add], [OpChoice::Linear(0b11)]);
    }
}

/// The plan's recorded bytes are its decisions' exact cost, and the rule
/// that makes `add(partial, whole)` wrong (the whole addend would be
/// counted once per worker) is enforced: with `dx2` whole while `add`
/// stays linear in both inputs, the plan is infeasible (`u64::MAX`,
/// saturated), not cheaper.
#[test]
fn a_linear_op_on_a_whole_input_is_infeasible() {
    let lib = Library::shipped().unwrap();
    let g = graph(&lib);
    let on = planned(&g, &lib, SearchKind::CriticalDp, true);
    let model = Model::new(&g, &lib, &StrategyCache::new()).unwrap();
    let mut d = on.decisions.clone();
    assert_eq!(exact_cost(&g, &model, &on.factors, &d).0, on.comm_bytes);
    d.tensors[tensor(&g, "dx2")] = vec![None];
    assert_eq!(exact_cost(&g, &model, &on.factors, &d).0, u64::MAX);
}
