//! Known answers (issue 3, second "done when"): explicit assertions on the
//! strategies of the Tofu paper's examples, plus a snapshot of each op's
//! shape-free strategies.

use interval::{InputLayout, OpStrategies, OutputLayout, StrategyCache};
use tdl::{Library, Reducer};

fn analyse(name: &str, rank: u32) -> std::sync::Arc<OpStrategies> {
    let lib = Library::shipped().expect("shipped library loads");
    let spec = lib
        .get(name)
        .unwrap_or_else(|| panic!("shipped library has `{name}`"));
    StrategyCache::new()
        .get(spec, rank)
        .expect("analysis succeeds")
}

fn names(s: &OpStrategies) -> Vec<&str> {
    s.strategies.iter().map(|s| s.name.as_str()).collect()
}

/// Shape-free summary: strategy → output layouts, input layouts, symbolic regions.
fn summary(s: &OpStrategies) -> String {
    let spec = &s.spec;
    let mut out = format!("elementwise: {}\n", s.elementwise);
    for st in &s.strategies {
        out += &format!("{} over [0, {})\n", st.name, spec.show_dim(&st.extent));
        for o in 0..spec.outputs.len() {
            out += &format!(
                "  out {}: {:?}\n",
                spec.outputs[o].name,
                st.output_layout(o as u32)
            );
        }
        for (t, r) in spec.inputs.iter().zip(&st.inputs) {
            let dims = r.dims.as_ref().map_or("unused".to_string(), |d| {
                d.iter()
                    .map(|x| x.describe(spec, "part"))
                    .collect::<Vec<_>>()
                    .join("; ")
            });
            out += &format!("  in {}: {:?} [{dims}]\n", t.name, r.layout());
        }
    }
    for r in &s.rejected {
        out += &format!("rejected {}: {}\n", r.name, r.reason);
    }
    out
}

#[test]
fn matmul_has_exactly_three_strategies() {
    let s = analyse("matmul", 0);
    assert_eq!(names(&s), ["split m", "split n", "reduce k (Sum)"]);
    let m = s.get("split m").unwrap();
    assert_eq!(m.output_layout(0), OutputLayout::Split { axis: 0 });
    assert_eq!(m.inputs[0].layout(), InputLayout::Split { dims: vec![0] });
    assert_eq!(m.inputs[1].layout(), InputLayout::Replicated);
    let n = s.get("split n").unwrap();
    assert_eq!(n.output_layout(0), OutputLayout::Split { axis: 1 });
    assert_eq!(n.inputs[0].layout(), InputLayout::Replicated);
    assert_eq!(n.inputs[1].layout(), InputLayout::Split { dims: vec![1] });
    let k = s.get("reduce k (Sum)").unwrap();
    assert_eq!(
        k.output_layout(0),
        OutputLayout::Partial {
            reducer: Reducer::Sum
        }
    );
    assert_eq!(k.inputs[0].layout(), InputLayout::Split { dims: vec![1] });
    assert_eq!(k.inputs[1].layout(), InputLayout::Split { dims: vec![0] });
    assert!(s.rejected.is_empty());
    assert!(!s.elementwise);
    insta::assert_snapshot!("matmul", summary(&s));
}

#[test]
fn conv1d_splits_b_co_ci_and_rejects_x_dx() {
    // Tofu Figure 3 / §3.2: b and co without reduction, ci with Sum; the
    // output position (`o` here, `x` in the paper) and dx fail on `o + dx`.
    let s = analyse("conv1d", 0);
    assert_eq!(names(&s), ["split b", "split co", "reduce ci (Sum)"]);
    let b = s.get("split b").unwrap();
    assert_eq!(b.inputs[0].layout(), InputLayout::Split { dims: vec![0] });
    assert_eq!(b.inputs[1].layout(), InputLayout::Replicated);
    let ci = s.get("reduce ci (Sum)").unwrap();
    assert_eq!(
        ci.output_layout(0),
        OutputLayout::Partial {
            reducer: Reducer::Sum
        }
    );
    assert_eq!(ci.inputs[0].layout(), InputLayout::Split { dims: vec![1] });
    assert_eq!(ci.inputs[1].layout(), InputLayout::Split { dims: vec![1] });
    let rejected: Vec<&str> = s.rejected.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(rejected, ["split o", "reduce dx (Sum)"]);
    for r in &s.rejected {
        assert!(
            r.reason.contains("interval + interval"),
            "{}: {}",
            r.name,
            r.reason
        );
    }
    insta::assert_snapshot!("conv1d", summary(&s));
}

#[test]
fn elementwise_ops_split_along_every_dim() {
    let lib = Library::shipped().unwrap();
    let cache = StrategyCache::new();
    let mut seen = 0;
    for spec in lib.ops() {
        let rank = 3;
        let s = cache.get(spec, rank).unwrap();
        if !s.elementwise {
            continue;
        }
        seen += 1;
        let out_rank = s.spec.outputs[0].dims.len();
        let axes: Vec<OutputLayout> = s.strategies.iter().map(|st| st.output_layout(0)).collect();
        for a in 0..out_rank as u32 {
            assert!(
                axes.contains(&OutputLayout::Split { axis: a }),
                "`{}` cannot split axis {a}: {:?}",
                spec.name,
                s.rejected
            );
        }
        assert!(s.rejected.is_empty(), "`{}`: {:?}", spec.name, s.rejected);
        for st in &s.strategies {
            for r in &st.inputs {
                assert!(
                    matches!(r.layout(), InputLayout::Split { .. }),
                    "`{}` {}: {:?}",
                    spec.name,
                    st.name,
                    r.layout()
                );
            }
        }
    }
    assert!(seen >= 1, "relu at least is elementwise");
    assert!(analyse("relu", 2).elementwise);
    insta::assert_snapshot!("relu", summary(&analyse("relu", 2)));
}

#[test]
fn softmax_splits_every_axis_but_the_normalised_one() {
    for rank in 1..=3u32 {
        let s = analyse("softmax", rank);
        let n = s.spec.outputs[0].dims.len() as u32;
        let axes: Vec<OutputLayout> = s.strategies.iter().map(|st| st.output_layout(0)).collect();
        let expected: Vec<OutputLayout> = (0..n - 1)
            .map(|axis| OutputLayout::Split { axis })
            .collect();
        assert_eq!(axes, expected, "rank {rank}");
        assert_eq!(s.rejected.len(), 1);
        assert!(
            s.rejected[0].reason.contains("independently"),
            "{}",
            s.rejected[0].reason
        );
        assert!(!s.elementwise);
    }
    insta::assert_snapshot!("softmax", summary(&analyse("softmax", 2)));
}

#[test]
fn batch_cholesky_splits_only_its_batch_dim() {
    let s = analyse("batch_cholesky", 0);
    assert_eq!(names(&s), ["split b"]);
    assert_eq!(
        s.strategies[0].inputs[0].layout(),
        InputLayout::Split { dims: vec![0] }
    );
    assert_eq!(s.rejected.len(), 2);
    for r in &s.rejected {
        assert!(r.reason.contains("opaque"), "{}", r.reason);
    }
    insta::assert_snapshot!("batch_cholesky", summary(&s));
}

#[test]
fn sum_leading_reduces_over_the_batch_dims() {
    let s = analyse("sum_leading", 2);
    assert_eq!(
        names(&s),
        ["split n", "reduce _e0 (Sum)", "reduce _e1 (Sum)"]
    );
}

/// Megatron-LM's vocabulary parallelism (issue 28): the vocabulary dim is a
/// reduction dim of `vocab_embedding` and of the cross-entropy parts, so the
/// analysis finds a `reduce` over it (partial sums, then an all-reduce);
/// `embedding`'s data-dependent read `table[ids, d]` has none.
#[test]
fn vocabulary_dim_is_reduced_by_the_vocab_parallel_ops() {
    let s = analyse("vocab_embedding", 2);
    assert_eq!(
        names(&s),
        ["split _e0", "split _e1", "split d", "reduce v (Sum)"]
    );
    let v = s.get("reduce v (Sum)").unwrap();
    assert_eq!(
        v.output_layout(0),
        OutputLayout::Partial {
            reducer: Reducer::Sum
        }
    );
    assert_eq!(v.inputs[0].layout(), InputLayout::Split { dims: vec![0] });
    assert_eq!(v.inputs[1].layout(), InputLayout::Replicated);
    assert!(!names(&analyse("embedding", 2))
        .iter()
        .any(|n| n.starts_with("reduce")));

    let s = analyse("reduce_max", 2);
    let n = s
        .get("reduce n (Max)")
        .expect("reduce_max reduces n by Max");
    assert_eq!(
        n.output_layout(0),
        OutputLayout::Partial {
            reducer: Reducer::Max
        }
    );

    let s = analyse("softmax_cross_entropy_parts", 2);
    let n = s.get("reduce n (Sum)").expect("the parts reduce n");
    for o in 0..3 {
        assert_eq!(
            n.output_layout(o),
            OutputLayout::Partial {
                reducer: Reducer::Sum
            },
            "output {o}"
        );
    }
    assert_eq!(n.inputs[0].layout(), InputLayout::Split { dims: vec![2] });
    assert_eq!(n.inputs[1].layout(), InputLayout::Replicated);
    assert_eq!(n.inputs[2].layout(), InputLayout::Split { dims: vec![2] });
    let g = analyse("softmax_cross_entropy_parts_grad", 2);
    let n = g.get("split n").expect("the gradient splits n");
    assert_eq!(n.output_layout(0), OutputLayout::Split { axis: 2 });

    // At class ids (issue 38): the ids are read whole by every shard (each
    // shard matches them against its own classes).
    let s = analyse("cross_entropy_parts", 2);
    let n = s
        .get("reduce n (Sum)")
        .expect("the class-id parts reduce n");
    for o in 0..3 {
        let sum = OutputLayout::Partial {
            reducer: Reducer::Sum,
        };
        assert_eq!(n.output_layout(o), sum, "output {o}");
    }
    assert_eq!(n.inputs[0].layout(), InputLayout::Split { dims: vec![2] });
    assert_eq!(n.inputs[2].layout(), InputLayout::Replicated);
    let g = analyse("cross_entropy_parts_grad", 2);
    let n = g.get("split n").expect("the class-id gradient splits n");
    assert_eq!(n.output_layout(0), OutputLayout::Split { axis: 2 });
}

/// Every shipped op's shape-free strategies, one snapshot (reviewed like code).
#[test]
fn every_shipped_op_snapshot() {
    let lib = Library::shipped().unwrap();
    let cache = StrategyCache::new();
    let mut out = String::new();
    for spec in lib.ops() {
        let rank = if spec.has_ellipsis() { 2 } else { 0 };
        out += &format!("== {} ==\n", spec.name);
        match cache.get(spec, rank) {
            Ok(s) => out += &summary(&s),
            Err(e) => out += &format!("error: {e}\n"),
        }
    }
    insta::assert_snapshot!("library", out);
}

fn heads_attrs(heads: i64) -> tdl::Attrs {
    [("heads".to_string(), tdl::AttrValue::Int(heads))].into()
}

#[test]
fn split_heads_splits_heads_in_contiguous_blocks() {
    // Megatron-LM's tensor parallelism: head h of y is the block
    // x[..., h·(D / heads), (h + 1)·(D / heads)) of the model dim.
    let s = analyse("split_heads", 0);
    assert_eq!(names(&s), ["split b", "split h", "split s"]);
    let h = s.get("split h").unwrap();
    assert_eq!(h.output_layout(0), OutputLayout::Split { axis: 1 });
    assert_eq!(h.inputs[0].layout(), InputLayout::Split { dims: vec![2] });
    assert!(!h.inputs[0].data_dependent);
    // B = 2, S = 3, D = 12 with 4 heads of 3: two parts hold heads [0, 2)
    // and [2, 4), i.e. model-dim columns [0, 6) and [6, 12).
    let inst = s
        .instantiate(&[vec![2, 3, 12]], &heads_attrs(4), 2)
        .unwrap();
    let parts = &inst.strategies[1].parts;
    assert_eq!(parts[0].range, (0, 2));
    assert_eq!(
        parts[0].inputs[0],
        Some(interval::Region(vec![(0, 2), (0, 3), (0, 6)]))
    );
    assert_eq!(
        parts[1].inputs[0],
        Some(interval::Region(vec![(0, 2), (0, 3), (6, 12)]))
    );
    assert!(parts.iter().all(|p| p.exact == [true]));
    // The inner coordinate stays rejected: `h` also ranges in its index.
    assert_eq!(s.rejected.len(), 1);
    assert!(s.rejected[0].name == "split d", "{:?}", s.rejected);
}

#[test]
fn merge_heads_splits_the_model_dim_by_heads() {
    let s = analyse("merge_heads", 0);
    assert_eq!(names(&s), ["split b", "split s", "split k"]);
    let k = s.get("split k").unwrap();
    assert_eq!(k.output_layout(0), OutputLayout::Split { axis: 2 });
    assert_eq!(k.inputs[0].layout(), InputLayout::Split { dims: vec![1] });
    assert!(s.rejected.is_empty(), "{:?}", s.rejected);
    // x[B = 2, NH = 4, S = 3, DH = 5], y[2, 3, 20]. Two parts: k in [0, 10)
    // and [10, 20) are heads [0, 2) and [2, 4), whole: exact.
    let inst = s
        .instantiate(&[vec![2, 4, 3, 5]], &tdl::Attrs::new(), 2)
        .unwrap();
    let parts = &inst.strategies[2].parts;
    let x = |p: &interval::PartRegions| p.inputs[0].clone().unwrap().0;
    assert_eq!(x(&parts[0]), [(0, 2), (0, 2), (0, 3), (0, 5)]);
    assert_eq!(x(&parts[1]), [(0, 2), (2, 4), (0, 3), (0, 5)]);
    assert!(parts.iter().all(|p| p.exact == [true]));
    // Three parts cut heads: k in [0, 7), [7, 14), [14, 20) need heads
    // [0, 2), [1, 3), [2, 4) — a stated superset, not exact.
    let inst = s
        .instantiate(&[vec![2, 4, 3, 5]], &tdl::Attrs::new(), 3)
        .unwrap();
    let parts = &inst.strategies[2].parts;
    let heads: Vec<(i64, i64)> = parts.iter().map(|p| x(p)[1]).collect();
    assert_eq!(heads, [(0, 2), (1, 3), (2, 4)]);
    assert!(parts.iter().all(|p| p.exact == [false]));
    // A part inside one head reads exactly its columns of that head.
    let inst = s
        .instantiate(&[vec![1, 1, 1, 8]], &tdl::Attrs::new(), 4)
        .unwrap();
    let p = &inst.strategies[2].parts[1];
    assert_eq!(x(p), [(0, 1), (0, 1), (0, 1), (2, 4)]);
    assert_eq!(p.exact, [true]);
}

#[test]
fn split_qkv_splits_whole_heads_of_the_interleaved_columns() {
    // Megatron-LM's fused QKV: head h owns columns [h·3·DH, (h + 1)·3·DH) of
    // x (its q, k and v), so `split h` reads whole blocks of 3·DH.
    let s = analyse("split_qkv", 0);
    let h = s.get("split h").expect("split_qkv has `split h`");
    assert_eq!(h.inputs[0].layout(), InputLayout::Split { dims: vec![2] });
    // B = 1, S = 2, E = 24 with 4 heads of DH = 2: two parts hold heads
    // [0, 2) and [2, 4), columns [0, 12) and [12, 24), exactly.
    let inst = s
        .instantiate(&[vec![1, 2, 24]], &heads_attrs(4), 2)
        .unwrap();
    let i = s
        .strategies
        .iter()
        .position(|x| x.name == "split h")
        .unwrap();
    let parts = &inst.strategies[i].parts;
    let x = |p: &interval::PartRegions| p.inputs[0].clone().unwrap().0;
    assert_eq!(x(&parts[0]), [(0, 1), (0, 2), (0, 12)]);
    assert_eq!(x(&parts[1]), [(0, 1), (0, 2), (12, 24)]);
    assert!(parts.iter().all(|p| p.exact == [true]));
}

#[test]
fn merge_qkv_splits_the_fused_dim_by_heads() {
    let s = analyse("merge_qkv", 0);
    let k = s.get("split c").expect("merge_qkv has `split c`");
    assert_eq!(k.output_layout(0), OutputLayout::Split { axis: 2 });
    for r in &k.inputs {
        assert_eq!(r.layout(), InputLayout::Split { dims: vec![1] });
    }
    // q, k, v[B = 1, NH = 4, S = 2, DH = 3], y[1, 2, 36]. Two parts: columns
    // [0, 18) and [18, 36) are heads [0, 2) and [2, 4) of each: exact.
    let shapes = vec![vec![1, 4, 2, 3]; 3];
    let inst = s.instantiate(&shapes, &tdl::Attrs::new(), 2).unwrap();
    let i = s
        .strategies
        .iter()
        .position(|x| x.name == "split c")
        .unwrap();
    let parts = &inst.strategies[i].parts;
    for (p, heads) in parts.iter().zip([(0, 2), (2, 4)]) {
        for r in &p.inputs {
            assert_eq!(r.clone().unwrap().0, [(0, 1), heads, (0, 2), (0, 3)]);
        }
        assert_eq!(p.exact, [true, true, true]);
    }
    // Three parts cut heads (12 columns each = one head and a third): a
    // stated superset.
    let inst = s.instantiate(&shapes, &tdl::Attrs::new(), 3).unwrap();
    assert!(inst.strategies[i]
        .parts
        .iter()
        .all(|p| p.exact == [false, false, false]));
}
