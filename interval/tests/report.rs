//! Snapshot of the `tofu strategies` table for every shipped op (issue 3,
//! third "done when"). The CLI prints exactly [`interval::report::Report::text`]
//! for the default example (every dim 8, rank-polymorphic ops at rank 2, 2 parts).

use std::collections::BTreeMap;

use interval::report::Report;
use interval::StrategyCache;
use tdl::{Attrs, Library};

#[test]
fn strategies_table_of_every_shipped_op() {
    let lib = Library::shipped().unwrap();
    let cache = StrategyCache::new();
    for spec in lib.ops() {
        let r = Report::new(&cache, spec, &BTreeMap::new(), &Attrs::new(), 2)
            .unwrap_or_else(|e| panic!("report for `{}`: {e}", spec.name));
        insta::assert_snapshot!(format!("strategies_{}", spec.name), r.text());
        // JSON carries the same strategies.
        let j = r.json();
        assert_eq!(
            j["strategies"].as_array().map(|a| a.len()),
            Some(r.strategies.strategies.len())
        );
    }
}

#[test]
fn example_shapes_follow_given_ones_and_parts_may_be_uneven() {
    let lib = Library::shipped().unwrap();
    let spec = lib.get("matmul").unwrap();
    let shapes: BTreeMap<String, Vec<usize>> = [("a".to_string(), vec![5, 3])].into();
    let r = Report::new(&StrategyCache::new(), spec, &shapes, &Attrs::new(), 3).unwrap();
    assert_eq!(r.instance.input_shapes, vec![vec![5, 3], vec![3, 8]]);
    let m = &r.instance.strategies[0];
    let ranges: Vec<(i64, i64)> = m.parts.iter().map(|p| p.range).collect();
    assert_eq!(ranges, [(0, 2), (2, 4), (4, 5)]);
    assert_eq!(
        m.parts[2].inputs[0],
        Some(interval::Region(vec![(4, 5), (0, 3)]))
    );
    insta::assert_snapshot!("matmul_5x3_3parts", r.text());
}
