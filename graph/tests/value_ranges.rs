//! Synthetic ids of integer inputs stay inside the tables they index
//! (issue 45, item 2), checked against the TDL interpreter: the graph is run
//! on its synthetic values for many seeds and every derived id must be a
//! row, every tensor's values inside the interval `value_ranges` gives it.

use std::collections::HashMap;

use graph::value_ranges::{check_synthetic_ids, integer_input_fills, ranges};
use graph::{float, DType, Fill, Graph, GraphBuilder, TensorId};

fn lib() -> &'static tdl::Library {
    static LIB: std::sync::OnceLock<tdl::Library> = std::sync::OnceLock::new();
    LIB.get_or_init(|| tdl::Library::shipped().expect("shipped specs load"))
}

/// `table[ids · 2 − 4]` (a table of 12 rows) times a 0/1 mask; with
/// `shifted`, plus `table[other << 1]`, which the analysis cannot bound.
/// The integer inputs' fills come from `fills` (given the graph and the
/// inputs). Gives the graph, the integer inputs and the row-id tensors.
fn text_model(
    shifted: bool,
    fills: impl Fn(&Graph, &[TensorId]) -> Vec<(TensorId, Fill)>,
) -> (Graph, Vec<TensorId>, Vec<TensorId>) {
    let mut b = GraphBuilder::new(lib(), "text");
    let placeholder = Fill::Normal { std: 1.0 };
    let ids = b.input("ids", &[2, 5], DType::I64, placeholder).unwrap();
    let mask = b.input("mask", &[2, 5], DType::I64, placeholder).unwrap();
    let table = b.weight("table", &[12, 12], 1.0).unwrap();
    let four = b.weight_const("four", &[2, 5], 4.0).unwrap();
    let twice = b
        .op1("scale", "twice", &[ids], &[("alpha", float(2.0))])
        .unwrap();
    let rows = b.op1("sub", "rows", &[twice, four], &[]).unwrap();
    let e = b.op1("embedding", "lookup", &[table, rows], &[]).unwrap();
    let mut inputs = vec![ids, mask];
    let mut reads = vec![rows];
    let mut out = e;
    if shifted {
        let other = b.input("other", &[2, 5], DType::I64, placeholder).unwrap();
        let one = b.weight_const("one", &[2, 5], 1.0).unwrap();
        let shifted = b
            .op1("bit_shift_left", "shift", &[other, one], &[])
            .unwrap();
        let e2 = b
            .op1("embedding", "lookup2", &[table, shifted], &[])
            .unwrap();
        out = b.op1("add", "both", &[out, e2], &[]).unwrap();
        inputs.push(other);
        reads.push(shifted);
    }
    let _ = (out, mask);
    for (t, f) in fills(b.graph(), &inputs) {
        b.set_fill(t, f).unwrap();
    }
    (b.into_graph(), inputs, reads)
}

/// Run `g` on its synthetic values of `seed`: every tensor's values.
fn run(g: &Graph, seed: u64) -> graph::execute::Values {
    let mut v = graph::execute::synthesize(g, seed);
    graph::execute::execute(g, lib(), &mut v, |_, _| true).unwrap();
    v
}

#[test]
fn computed_ids_land_in_their_table_for_every_seed() {
    let (g, inputs, reads) = text_model(false, |g, i| integer_input_fills(g, lib(), i));
    // ids · 2 − 4 ∈ [0, 12) ⟺ ids ∈ [2, 8); the mask reaches no table.
    assert_eq!(g.tensor(inputs[0]).fill, Some(Fill::Range { lo: 2, hi: 8 }));
    assert_eq!(g.tensor(inputs[1]).fill, Some(Fill::Indices { bound: 2 }));
    check_synthetic_ids(&g, lib(), &HashMap::new()).unwrap();
    let iv = ranges(&g, &HashMap::new());
    let mut seen = std::collections::BTreeSet::new();
    for seed in 0..50 {
        let v = run(&g, seed);
        for t in g.tensor_ids() {
            let (Some((lo, hi)), Some(x)) = (iv[t.0 as usize], v.get(t)) else {
                continue;
            };
            for &e in &x.data {
                assert!(
                    lo <= e && e <= hi,
                    "{}: {e} outside [{lo}, {hi}]",
                    g.tensor(t).name
                );
            }
        }
        for &e in &v.get(reads[0]).unwrap().data {
            assert!((0.0..12.0).contains(&e), "row {e}");
            seen.insert(e as i64);
        }
    }
    // The fill is not narrower than it must be: every even row is used.
    assert_eq!(
        seen.into_iter().collect::<Vec<_>>(),
        vec![0, 2, 4, 6, 8, 10]
    );
}

/// Negative control: the fill the importer gave before (ids in [0, rows)
/// of the table, found through one-input operators) puts rows outside the
/// table, which the interpreter shows and the check reports.
#[test]
fn the_table_bound_alone_puts_rows_outside_and_the_check_says_so() {
    let (g, _, reads) = text_model(false, |_, inputs| {
        vec![(inputs[0], Fill::Indices { bound: 12 })]
    });
    let mut v = graph::execute::synthesize(&g, 0);
    let e = graph::execute::execute(&g, lib(), &mut v, |_, _| true).unwrap_err();
    assert!(format!("{e:?}").contains("OutOfBounds"), "{e:?}");
    assert!(v.get(reads[0]).unwrap().data.iter().any(|&e| e < 0.0));
    let e = check_synthetic_ids(&g, lib(), &HashMap::new()).unwrap_err();
    assert_eq!(e.input, "ids");
    assert!(e.to_string().contains("[-4, 18]"), "{e}");
}

#[test]
fn an_input_with_no_derivable_range_is_named_with_the_fix() {
    let (g, inputs, _) = text_model(true, |g, i| integer_input_fills(g, lib(), i));
    let e = check_synthetic_ids(&g, lib(), &HashMap::new()).unwrap_err();
    assert_eq!(e.input, "other");
    assert_eq!(e.rows, 12);
    let msg = e.to_string();
    for want in ["`other`", "--inputs", "bit_shift_left", "`lookup2`"] {
        assert!(msg.contains(want), "`{want}` missing from: {msg}");
    }
    // Given values are the user's: the run takes them (`--inputs`).
    let given = HashMap::from([(inputs[2], Some((0.0, 3.0)))]);
    check_synthetic_ids(&g, lib(), &given).unwrap();
}

/// Index reads come from the specs: `take_last` reads `x[..., ids[k]]`, so
/// its ids are drawn from the last dim (7) and the check accepts them.
#[test]
fn index_reads_are_found_in_the_specs() {
    let mut b = GraphBuilder::new(lib(), "take");
    let x = b.weight("x", &[3, 7], 1.0).unwrap();
    let ids = b
        .input("ids", &[4], DType::I64, Fill::Normal { std: 1.0 })
        .unwrap();
    b.op1("take_last", "take", &[x, ids], &[]).unwrap();
    for (t, f) in integer_input_fills(b.graph(), lib(), &[ids]) {
        b.set_fill(t, f).unwrap();
    }
    let g = b.into_graph();
    let reads = graph::value_ranges::index_reads(&g, lib());
    assert_eq!(reads.len(), 1);
    assert_eq!((reads[0].ids, reads[0].rows), (ids, 7));
    assert_eq!(g.tensor(ids).fill, Some(Fill::Indices { bound: 7 }));
    check_synthetic_ids(&g, lib(), &HashMap::new()).unwrap();
}
