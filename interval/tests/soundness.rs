//! Soundness and precision of every strategy of every shipped op, against
//! the reference interpreter (issue 3, first "done when").
//!
//! For random small shapes, attributes and data, and p ∈ {2, 3, 4} parts
//! (uneven and empty parts included), each part is evaluated with its split
//! variables restricted to its range ([`tdl::evaluate_traced`]), recording
//! every input element it reads. With T the elements the whole op reads and
//! T_i those part i reads, and B_i the predicted box:
//!
//! * soundness: T_i ⊆ B_i;
//! * precision: T_i = B_i ∩ T — the part reads every element of its box that
//!   the op reads at all (so equality with the box whenever the op reads its
//!   inputs densely; strided gaps and zero padding are elements nobody reads).
//!   Where a region has a data-dependent dim (`table[ids[b], d]`, or a read
//!   guarded by a data condition on the split variable), which elements are
//!   read is data and only soundness is checked;
//! * values: each part's output slice equals the whole op's, and partial
//!   outputs combined with the strategy's reducer equal the whole output.
//!
//! The list of ops comes from `tdl::Library::shipped()`; generators are
//! data-driven from the spec (dims, attribute defaults, inputs used as
//! indices get valid integers, ops with opaque functions get SPD matrices).

use std::collections::{BTreeSet, HashMap};

use interval::{DimRegion, OpStrategies, SplitKind, StrategyCache};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use tdl::{
    AttrType, AttrValue, Attrs, DimEntry, DimExpr, Expr, ExprKind, Library, OpSpec, Tensor, VarId,
};

/// Part evaluations checked (reported, so a vacuous pass shows).
static PART_CHECKS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Exactness checks of boxes of flattened indices (`k // q`, `k % q`) that
/// claim to be exact (part boundaries on block boundaries).
static FLAT_EXACT_CHECKS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Most scalar evaluations a generated case may cost (keeps CI fast).
const WORK_BUDGET: u64 = 1500;

type Reads = Vec<BTreeSet<Vec<i64>>>;

fn trace(
    b: &tdl::Binding,
    inputs: &[Tensor],
    restrict: &HashMap<VarId, (i64, i64)>,
) -> Result<(Reads, Vec<Tensor>), tdl::EvalError> {
    let mut reads: Reads = vec![BTreeSet::new(); inputs.len()];
    let out = tdl::evaluate_traced(b, inputs, restrict, &mut |i, idx| {
        reads[i as usize].insert(idx.to_vec());
    })?;
    Ok((reads, out))
}

/// Inputs read inside index expressions (they hold indices, e.g. `ids`).
fn index_inputs(spec: &OpSpec) -> BTreeSet<u32> {
    fn go(e: &Expr, in_index: bool, out: &mut BTreeSet<u32>) {
        match &e.kind {
            ExprKind::Read { tensor, .. } => {
                if let (tdl::TensorRef::Input(i), true) = (tensor, in_index) {
                    out.insert(*i);
                }
                e.children().for_each(|c| go(c, true, out));
            }
            ExprKind::Opaque { args, index, .. } => {
                args.iter().for_each(|a| go(a, in_index, out));
                index.iter().for_each(|a| go(a, true, out));
            }
            _ => e.children().for_each(|c| go(c, in_index, out)),
        }
    }
    let mut out = BTreeSet::new();
    spec.stmts.iter().for_each(|s| go(&s.body, false, &mut out));
    out
}

fn reduce_vars(e: &Expr, out: &mut BTreeSet<VarId>) {
    match &e.kind {
        // Reads and opaque calls end the walk (their indices and slices are not searched).
        ExprKind::Read { .. } | ExprKind::Opaque { .. } => {}
        ExprKind::Reduce { vars, .. } => {
            out.extend(vars.iter().copied());
            e.children().for_each(|c| reduce_vars(c, out));
        }
        _ => e.children().for_each(|c| reduce_vars(c, out)),
    }
}

fn has_opaque(e: &Expr) -> bool {
    e.any(&mut |x| matches!(x.kind, ExprKind::Opaque { .. }))
}

/// A tiny deterministic generator (xorshift), seeded by proptest.
struct Gen(u64);
impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// A value in {-2, -1.75, ..., 2}.
    fn value(&mut self) -> f64 {
        (self.next() % 17) as f64 * 0.25 - 2.0
    }
}

fn make_inputs(spec: &OpSpec, shapes: &[Vec<usize>], seed: u64) -> Vec<Tensor> {
    let mut g = Gen(seed | 1);
    let idx = index_inputs(spec);
    let spd = spec.stmts.iter().any(|s| has_opaque(&s.body));
    // Indices must address every dim they may index: the smallest dim of the other inputs.
    let max_index = shapes
        .iter()
        .enumerate()
        .filter(|(i, _)| !idx.contains(&(*i as u32)))
        .flat_map(|(_, s)| s.iter().copied())
        .min()
        .unwrap_or(1)
        .max(1);
    shapes
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let n: usize = s.iter().product();
            let mut data: Vec<f64> = (0..n)
                .map(|_| {
                    if idx.contains(&(i as u32)) {
                        (g.next() % max_index as u64) as f64
                    } else {
                        g.value()
                    }
                })
                .collect();
            let r = s.len();
            if spd && r >= 2 && s[r - 1] == s[r - 2] {
                // Symmetric, diagonally dominant: positive definite.
                let m = s[r - 1];
                for (k, x) in data.iter_mut().enumerate() {
                    let (a, b) = ((k / m) % m, k % m);
                    *x = if a == b {
                        2.0 * m as f64
                    } else {
                        0.1 * (a + b) as f64 / m as f64
                    };
                }
            }
            Tensor::new(s, data).expect("sized")
        })
        .collect()
}

fn close(a: f64, b: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= 1e-6 * (1.0 + a.abs().max(b.abs()))
}

/// One generated case: `sizes` per dim id, `picks` per attribute, `p` parts.
fn check_case(
    spec: &OpSpec,
    strategies: &OpStrategies,
    sizes: &[usize],
    picks: &[usize],
    p: usize,
    seed: u64,
) -> Result<(), TestCaseError> {
    let expanded = &strategies.spec;
    let shapes = shapes_of(expanded, sizes);
    let mut attrs = Attrs::new();
    for (a, &k) in expanded.attrs.iter().zip(picks) {
        let v = match (a.ty, k) {
            (_, 0) => a.default.unwrap_or(AttrValue::Int(1)),
            (AttrType::Int, k) => AttrValue::Int([1, 2, 0][(k - 1) % 3]),
            (AttrType::Float, _) => AttrValue::Float(0.5),
        };
        attrs.insert(a.name.clone(), v);
    }
    check_instance(spec, strategies, &shapes, &attrs, p, seed)
}

/// Input shapes of an expanded spec with `sizes` per dim id (cycled).
fn shapes_of(expanded: &OpSpec, sizes: &[usize]) -> Vec<Vec<usize>> {
    expanded
        .inputs
        .iter()
        .map(|t| {
            t.dims
                .iter()
                .map(|d| match d {
                    DimEntry::Dim(DimExpr::Dim(id)) => sizes[id.0 as usize % sizes.len()],
                    _ => 1,
                })
                .collect()
        })
        .collect()
}

/// Check every strategy of `spec` on these shapes and attributes, `p` parts.
fn check_instance(
    spec: &OpSpec,
    strategies: &OpStrategies,
    shapes: &[Vec<usize>],
    attrs: &Attrs,
    p: usize,
    seed: u64,
) -> Result<(), TestCaseError> {
    let expanded = &strategies.spec;
    let shapes = shapes.to_vec();
    let binding = spec
        .bind(&shapes, attrs)
        .map_err(|e| TestCaseError::reject(e.to_string()))?;
    // Work estimate: per statement, the product of its variables' ranges.
    let work: u64 = binding
        .spec
        .stmts
        .iter()
        .map(|st| {
            let mut vars: BTreeSet<VarId> = st.vars.iter().copied().collect();
            reduce_vars(&st.body, &mut vars);
            vars.iter()
                .map(|v| {
                    binding
                        .eval_dim(&binding.spec.vars[v.0 as usize].range)
                        .unwrap_or(1)
                        .max(1) as u64
                })
                .product::<u64>()
        })
        .sum();
    if work > WORK_BUDGET * 4 {
        return Err(TestCaseError::reject("too much work"));
    }
    let inputs = make_inputs(&binding.spec, &shapes, seed);
    let (whole, whole_out) = trace(&binding, &inputs, &HashMap::new())
        .map_err(|e| TestCaseError::reject(e.to_string()))?;
    let inst = strategies.instantiate(&shapes, attrs, p).map_err(|e| {
        TestCaseError::fail(format!("instantiate failed where bind succeeded: {e}"))
    })?;
    for (st, cs) in strategies.strategies.iter().zip(&inst.strategies) {
        let ctx = |m: String| {
            format!(
                "`{}` strategy `{}`, shapes {shapes:?}, attrs {attrs:?}, {p} parts: {m}",
                spec.name, st.name
            )
        };
        let mut combined: Vec<Option<Tensor>> = vec![None; whole_out.len()];
        for (i, part) in cs.parts.iter().enumerate() {
            let restrict: HashMap<VarId, (i64, i64)> =
                st.splits.iter().map(|s| (s.var, part.range)).collect();
            PART_CHECKS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let (reads, out) = trace(&binding, &inputs, &restrict)
                .map_err(|e| TestCaseError::fail(ctx(format!("part {i}: {e}"))))?;
            for (k, region) in part.inputs.iter().enumerate() {
                let name = &expanded.inputs[k].name;
                let inside = |e: &Vec<i64>| region.as_ref().is_some_and(|r| r.contains(e));
                for r in &reads[k] {
                    prop_assert!(
                        inside(r),
                        "{}",
                        ctx(format!(
                            "part {i} reads {name}{r:?} outside its region {region:?}"
                        ))
                    );
                }
                let data_dependent = st.inputs[k].data_dependent;
                if data_dependent || !part.exact[k] {
                    // Which elements are read is data, or the box is a
                    // stated superset (a flattened index split off its
                    // block boundaries): soundness only.
                    continue;
                }
                let flattened = st.inputs[k]
                    .dims
                    .iter()
                    .flatten()
                    .any(|d| matches!(d, DimRegion::Residue { .. }));
                if flattened && reads[k].len() > 1 {
                    FLAT_EXACT_CHECKS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                // A block with gaps claimed exact holds no gap: the part
                // reads every element of its box.
                let gapped = st.inputs[k]
                    .dims
                    .iter()
                    .flatten()
                    .any(|d| matches!(d, DimRegion::Slots { .. }));
                if gapped {
                    let volume = region.as_ref().map_or(0, |r| r.volume());
                    prop_assert!(
                        reads[k].len() as u64 == volume,
                        "{}",
                        ctx(format!(
                            "part {i} of {name}: region {region:?} claimed exact holds {volume} element(s), the part reads {}",
                            reads[k].len()
                        ))
                    );
                }
                let expected: BTreeSet<Vec<i64>> =
                    whole[k].iter().filter(|e| inside(e)).cloned().collect();
                let got = &reads[k];
                prop_assert!(
                    *got == expected,
                    "{}",
                    ctx(format!(
                        "part {i} of {name}: region {region:?} holds {} element(s) the op reads, the part reads {} (missing e.g. {:?})",
                        expected.len(),
                        got.len(),
                        expected.difference(got).next()
                    ))
                );
            }
            // Values: slices equal the whole result; partials reduce to it.
            for s in &st.splits {
                let o = s.output as usize;
                match s.kind {
                    SplitKind::Output { .. } => {
                        let region = &part.outputs[o];
                        let t = &out[o];
                        let mut idx = vec![0i64; t.shape.len()];
                        for (k, v) in t.data.iter().enumerate() {
                            let mut rest = k;
                            for d in (0..idx.len()).rev() {
                                idx[d] = (rest % t.shape[d]) as i64;
                                rest /= t.shape[d];
                            }
                            if region.contains(&idx) {
                                prop_assert!(
                                    close(*v, whole_out[o].data[k]),
                                    "{}",
                                    ctx(format!(
                                        "part {i} output {idx:?} = {v} but the whole op gives {}",
                                        whole_out[o].data[k]
                                    ))
                                );
                            }
                        }
                    }
                    SplitKind::Reduction { reducer } => {
                        let acc = combined[o].get_or_insert_with(|| Tensor {
                            shape: out[o].shape.clone(),
                            data: vec![reducer.identity(); out[o].len()],
                        });
                        for (a, b) in acc.data.iter_mut().zip(&out[o].data) {
                            *a = reducer.combine(*a, *b);
                        }
                    }
                }
            }
        }
        for (o, acc) in combined.iter().enumerate() {
            if let Some(acc) = acc {
                for (k, (a, b)) in acc.data.iter().zip(&whole_out[o].data).enumerate() {
                    prop_assert!(
                        close(*a, *b),
                        "{}",
                        ctx(format!(
                            "combined partials of output {o} at {k}: {a} vs whole {b}"
                        ))
                    );
                }
            }
        }
    }
    Ok(())
}

fn check_library(cases: u32) {
    let lib = Library::shipped().expect("shipped library loads");
    let cache = StrategyCache::new();
    let mut failures = Vec::new();
    for spec in lib.ops() {
        let ranks: Vec<u32> = if spec.has_ellipsis() {
            vec![0, 1, 2]
        } else {
            vec![0]
        };
        for &rank in &ranks {
            let strategies = match cache.get(spec, rank) {
                Ok(s) => s,
                Err(e) => {
                    failures.push(format!("{}: analysis failed: {e}", spec.name));
                    continue;
                }
            };
            let ndims = strategies.spec.dims.len().max(1);
            // Fewer, smaller dims for ops with many: keeps each case cheap.
            let max = ((WORK_BUDGET as f64).powf(1.0 / ndims as f64).floor() as usize).clamp(2, 6);
            let nattrs = strategies.spec.attrs.len();
            let per_rank =
                (cases / ranks.len() as u32).max(if ranks.len() > 1 { 22 } else { cases });
            let mut runner = TestRunner::new(Config {
                cases: per_rank,
                max_global_rejects: per_rank * 200,
                failure_persistence: None,
                ..Config::default()
            });
            let strat = (
                proptest::collection::vec(1..=max, ndims),
                proptest::collection::vec(0usize..4, nattrs),
                2usize..=4,
                any::<u64>(),
            );
            let r = runner.run(&strat, |(sizes, picks, p, seed)| {
                check_case(spec, &strategies, &sizes, &picks, p, seed)
            });
            if let Err(e) = r {
                failures.push(format!("{} (ellipsis rank {rank}): {e}", spec.name));
            }
        }
    }
    let checks = PART_CHECKS.load(std::sync::atomic::Ordering::Relaxed);
    eprintln!(
        "{} ops, {checks} part evaluations checked against the interpreter",
        lib.len()
    );
    assert!(checks >= lib.len() as u64 * 10, "too few checks: {checks}");
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// At least 64 cases per op (split across ellipsis ranks 0, 1, 2 for rank-polymorphic ops).
#[test]
fn every_shipped_op_is_sound_and_precise() {
    check_library(66);
}

/// Many more cases; run with `cargo test -p interval -- --ignored`.
#[test]
#[ignore]
fn every_shipped_op_is_sound_and_precise_many_cases() {
    check_library(1024);
}

/// The transformer head ops at shapes where `heads` divides `D` (and any
/// `NH`, `DH` for merge_heads), with p ∈ {2, 3, 4}: `split h` reads blocks of
/// `D // heads`, `split k` reads whole heads when p divides NH (exact) and a
/// stated superset otherwise; the same for the fused QKV ops split_qkv
/// (`split h`: blocks of 3·DH) and merge_qkv (`split c`); every region is
/// checked against the interpreter.
#[test]
fn head_ops_are_sound_and_exact_where_aligned() {
    let lib = Library::shipped().expect("shipped library loads");
    let cache = StrategyCache::new();
    let mut runner = TestRunner::new(Config {
        cases: 160,
        failure_persistence: None,
        ..Config::default()
    });
    let strat = (
        (1usize..=3, 1usize..=3),
        (1usize..=4, 1usize..=3),
        2usize..=4,
        any::<u64>(),
    );
    let before = FLAT_EXACT_CHECKS.load(std::sync::atomic::Ordering::Relaxed);
    runner
        .run(&strat, |((b, s), (heads, c), p, seed)| {
            let split = lib.get("split_heads").unwrap();
            let st = cache.get(split, 0).unwrap();
            prop_assert!(st.get("split h").is_some(), "split_heads lost `split h`");
            let attrs: Attrs = [("heads".to_string(), AttrValue::Int(heads as i64))].into();
            check_instance(split, &st, &[vec![b, s, heads * c]], &attrs, p, seed)?;
            let merge = lib.get("merge_heads").unwrap();
            let st = cache.get(merge, 0).unwrap();
            prop_assert!(st.get("split k").is_some(), "merge_heads lost `split k`");
            check_instance(merge, &st, &[vec![b, heads, s, c]], &Attrs::new(), p, seed)?;
            // Megatron's fused, head-interleaved QKV: E = 3·heads·c.
            let split = lib.get("split_qkv").unwrap();
            let st = cache.get(split, 0).unwrap();
            prop_assert!(st.get("split h").is_some(), "split_qkv lost `split h`");
            check_instance(split, &st, &[vec![b, s, 3 * heads * c]], &attrs, p, seed)?;
            let merge = lib.get("merge_qkv").unwrap();
            let st = cache.get(merge, 0).unwrap();
            prop_assert!(st.get("split c").is_some(), "merge_qkv lost `split c`");
            check_instance(
                merge,
                &st,
                &vec![vec![b, heads, s, c]; 3],
                &Attrs::new(),
                p,
                seed,
            )
        })
        .unwrap();
    let flat = FLAT_EXACT_CHECKS.load(std::sync::atomic::Ordering::Relaxed) - before;
    assert!(
        flat >= 20,
        "too few aligned merge_heads parts checked exactly: {flat}"
    );
}

/// Reads of some of the three slots of split_qkv's interleaved columns (a
/// block with gaps: one slot, two slots with a gap between them, two
/// adjacent): `split h` gives the hull of the slots read inside each part's
/// blocks, exact only where claimed (a one-head part reading adjacent slots).
#[test]
fn gapped_blocks_are_sound_and_exact_where_claimed() {
    let ops: Vec<OpSpec> = [
        "y[b, h, d] = x[b, h * (3 * (E // (3 * heads))) + E // (3 * heads) + d];",
        "y[b, h, d] = x[b, h * (3 * (E // (3 * heads))) + d] + x[b, h * (3 * (E // (3 * heads))) + 2 * (E // (3 * heads)) + d];",
        "y[b, h, d] = x[b, h * (3 * (E // (3 * heads))) + d] + x[b, h * (3 * (E // (3 * heads))) + E // (3 * heads) + d];",
    ]
    .iter()
    .enumerate()
    .map(|(i, body)| {
        // Distinct names: the strategy cache is keyed by name.
        let src = format!(
            "/// t\nop slots{i}<heads: int>(x[B, E]) -> y[B, heads, E // (3 * heads)] {{\n {body}\n}}\n"
        );
        tdl::parse_file("slots.tdl", &src).expect("parses").remove(0)
    })
    .collect();
    let cache = StrategyCache::new();
    let mut runner = TestRunner::new(Config {
        cases: 120,
        failure_persistence: None,
        ..Config::default()
    });
    let strat = (1usize..=2, 1usize..=5, 1usize..=3, 2usize..=4, any::<u64>());
    let before = PART_CHECKS.load(std::sync::atomic::Ordering::Relaxed);
    runner
        .run(&strat, |(b, heads, c, p, seed)| {
            let attrs: Attrs = [("heads".to_string(), AttrValue::Int(heads as i64))].into();
            for op in &ops {
                let st = cache.get(op, 0).unwrap();
                let h = st.get("split h");
                prop_assert!(h.is_some(), "gapped read lost `split h`");
                let gapped = h.unwrap().inputs[0]
                    .dims
                    .iter()
                    .flatten()
                    .any(|d| matches!(d, DimRegion::Slots { .. }));
                prop_assert!(gapped, "not a block with gaps: {:?}", h.unwrap().inputs[0]);
                check_instance(op, &st, &[vec![b, 3 * heads * c]], &attrs, p, seed)?;
            }
            Ok(())
        })
        .unwrap();
    assert!(PART_CHECKS.load(std::sync::atomic::Ordering::Relaxed) - before > 100);
}
