//! The vocabulary-parallel operators (Megatron-LM's VocabParallelEmbedding
//! and vocab_parallel_cross_entropy) against the operators they replace,
//! both run by the TDL interpreter through the training graph (the autodiff
//! of `planner::graph::training_graph`):
//!
//! * `reduce_max` → `softmax_cross_entropy_parts` → `softmax_cross_entropy_combine`
//!   gives `softmax_cross_entropy`'s loss and logits gradient on random
//!   logits and probability labels, and no gradient op for the row max (a
//!   stop-gradient: no `reduce_max_grad`);
//! * at integer class ids (issue 38), `count_targets` → `cross_entropy` and
//!   `reduce_max` → `cross_entropy_parts` → `cross_entropy_combine` give
//!   `softmax_cross_entropy`'s loss and logits gradient against the one-hot
//!   rows of the ids (`one_hot`), for `[B, S]` targets;
//! * `vocab_embedding` gives `embedding`'s rows and table gradient for ids in
//!   range, and a zero row for an id outside the table or not an integer.

use planner::graph::execute::{execute, synthesize, Values};
use planner::graph::{DType, Fill, Graph, GraphBuilder, Optimizer, TensorId};
use tdl::{Library, Tensor};

/// Shape of the logits: [B, S, V].
const SHAPE: [usize; 3] = [2, 3, 7];

/// The training graph of `build`'s forward graph and its values after one
/// step from fills seeded by `seed`.
fn run(lib: &Library, seed: u64, build: impl Fn(&mut GraphBuilder) -> TensorId) -> (Graph, Values) {
    let mut b = GraphBuilder::new(lib, "t");
    let loss = build(&mut b);
    let fwd = b.finish(loss).unwrap();
    let g = planner::graph::training_graph(&fwd, lib, &Optimizer::Sgd { lr: 0.1 }).unwrap();
    let mut v = synthesize(&g, seed);
    execute(&g, lib, &mut v, |_, _| true).unwrap_or_else(|e| panic!("{e}"));
    (g, v)
}

fn named<'a>(g: &Graph, v: &'a Values, name: &str) -> &'a Tensor {
    let t = g
        .tensor_ids()
        .find(|&t| g.tensor(t).name == name)
        .unwrap_or_else(|| panic!("no tensor {name}"));
    v.get(t).unwrap()
}

fn assert_close(a: &Tensor, b: &Tensor, what: &str) {
    assert_eq!(a.shape, b.shape, "{what}");
    for (i, (x, y)) in a.data.iter().zip(&b.data).enumerate() {
        assert!(
            (x - y).abs() <= 1e-12 * x.abs().max(1.0),
            "{what}[{i}]: {x} vs {y}"
        );
    }
}

#[test]
fn cross_entropy_parts_equal_softmax_cross_entropy() {
    let lib = Library::shipped().unwrap();
    for seed in 0..8 {
        // Logits with a spread of several units (the max matters).
        let leaves = |b: &mut GraphBuilder| {
            let w = b.weight("w", &SHAPE, 3.0).unwrap();
            let l = b
                .input("labels", &SHAPE, DType::F32, Fill::Probabilities)
                .unwrap();
            (w, l)
        };
        let (ga, va) = run(&lib, seed, |b| {
            let (w, l) = leaves(b);
            b.op1("softmax_cross_entropy", "loss", &[w, l], &[])
                .unwrap()
        });
        let (gb, vb) = run(&lib, seed, |b| {
            let (w, l) = leaves(b);
            let m = b.op1("reduce_max", "logits_max", &[w], &[]).unwrap();
            let parts = b
                .op("softmax_cross_entropy_parts", "parts", &[w, m, l], &[])
                .unwrap();
            b.op1(
                "softmax_cross_entropy_combine",
                "loss",
                &[m, parts[0], parts[1], parts[2]],
                &[],
            )
            .unwrap()
        });
        assert_close(named(&ga, &va, "w"), named(&gb, &vb, "w"), "same logits");
        assert_close(
            named(&ga, &va, "loss.loss"),
            named(&gb, &vb, "loss.loss"),
            "loss",
        );
        assert_close(
            named(&ga, &va, "grad/w"),
            named(&gb, &vb, "grad/w"),
            "dlogits",
        );
        let specs: Vec<&str> = gb.ops().iter().map(|o| o.spec.as_str()).collect();
        assert!(
            !specs.contains(&"reduce_max_grad"),
            "the row max is a stop-gradient: {specs:?}"
        );
        assert!(
            specs.contains(&"softmax_cross_entropy_parts_grad"),
            "{specs:?}"
        );
    }
}

#[test]
fn class_id_losses_equal_the_dense_loss_on_one_hot_rows() {
    let lib = Library::shipped().unwrap();
    let v = SHAPE[2];
    for seed in 0..8 {
        let leaves = |b: &mut GraphBuilder| {
            let w = b.weight("w", &SHAPE, 3.0).unwrap();
            let fill = Fill::Indices { bound: v };
            let ids = b.input("ids", &SHAPE[..2], DType::I32, fill).unwrap();
            (w, ids)
        };
        let (ga, va) = run(&lib, seed, |b| {
            let (w, ids) = leaves(b);
            let depth = [("depth", tdl::AttrValue::Int(v as i64))];
            let dense = b.op1("one_hot", "dense", &[ids], &depth).unwrap();
            b.op1("softmax_cross_entropy", "loss", &[w, dense], &[])
                .unwrap()
        });
        let (gb, vb) = run(&lib, seed, |b| {
            let (w, ids) = leaves(b);
            let cnt = b.op1("count_targets", "count", &[ids], &[]).unwrap();
            b.op1("cross_entropy", "loss", &[w, ids, cnt], &[]).unwrap()
        });
        let (gc, vc) = run(&lib, seed, |b| {
            let (w, ids) = leaves(b);
            let m = b.op1("reduce_max", "logits_max", &[w], &[]).unwrap();
            let parts = b
                .op("cross_entropy_parts", "parts", &[w, m, ids], &[])
                .unwrap();
            let cnt = b.op1("count_targets", "count", &[ids], &[]).unwrap();
            let inputs = [m, parts[0], parts[1], parts[2], cnt];
            b.op1("cross_entropy_combine", "loss", &inputs, &[])
                .unwrap()
        });
        for (g, vals, what) in [(&gb, &vb, "cross_entropy"), (&gc, &vc, "parts")] {
            assert_close(named(&ga, &va, "w"), named(g, vals, "w"), "same logits");
            assert_close(named(&ga, &va, "ids"), named(g, vals, "ids"), "same ids");
            let (la, lb) = (named(&ga, &va, "loss.loss"), named(g, vals, "loss.loss"));
            assert_close(la, lb, &format!("{what}: loss"));
            let (da, db) = (named(&ga, &va, "grad/w"), named(g, vals, "grad/w"));
            assert_close(da, db, &format!("{what}: dlogits"));
        }
    }
}

#[test]
fn vocab_embedding_equals_embedding_in_range() {
    let lib = Library::shipped().unwrap();
    for seed in 0..4 {
        let graph = |spec: &'static str| {
            move |b: &mut GraphBuilder| {
                let table = b.weight("table", &[5, 3], 1.0).unwrap();
                let ids = b
                    .input("ids", &[2, 4], DType::I32, Fill::Indices { bound: 5 })
                    .unwrap();
                let y = b.op1(spec, "embed", &[table, ids], &[]).unwrap();
                let y2 = b.op1("mul", "sq", &[y, y], &[]).unwrap();
                // Σ y² over [2, 4, 3], one axis at a time.
                let r = b.op1("reduce_sum", "r", &[y2], &[]).unwrap();
                let r = b.op1("reduce_sum", "r2", &[r], &[]).unwrap();
                b.op1("reduce_sum", "loss", &[r], &[]).unwrap()
            }
        };
        let (ga, va) = run(&lib, seed, graph("embedding"));
        let (gb, vb) = run(&lib, seed, graph("vocab_embedding"));
        assert_close(
            named(&ga, &va, "embed.y"),
            named(&gb, &vb, "embed.y"),
            "rows",
        );
        assert_close(
            named(&ga, &va, "grad/table"),
            named(&gb, &vb, "grad/table"),
            "dtable",
        );
    }
}

#[test]
fn vocab_embedding_gives_zero_rows_outside_the_table() {
    let lib = Library::shipped().unwrap();
    let spec = lib.get("vocab_embedding").unwrap();
    let table = Tensor {
        shape: vec![3, 2],
        data: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
    };
    let ids = Tensor {
        shape: vec![5],
        data: vec![2.0, -1.0, 3.0, 0.5, 0.0],
    };
    let y = tdl::evaluate(spec, &[table, ids], &Default::default()).unwrap();
    assert_eq!(
        y[0].data,
        vec![5.0, 6.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 2.0]
    );
}
