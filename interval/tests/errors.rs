//! Malformed or unsupported constructs give typed errors naming the op and
//! the expression, never a panic (issue 3, last "done when").

use std::collections::BTreeMap;

use interval::{analyse, AnalysisError, InstantiateError, StrategyCache};
use tdl::{parse_file, AttrValue, Attrs, ExprKind, Index, Library, OpSpec, ShapeError};

fn parse(src: &str) -> OpSpec {
    parse_file("test.tdl", src).expect("parses").remove(0)
}

#[test]
fn unexpanded_ellipsis_is_an_error() {
    let lib = Library::shipped().unwrap();
    let relu = lib.get("relu").unwrap();
    let e = analyse(relu).unwrap_err();
    assert!(
        matches!(&e, AnalysisError::Unexpanded { op, .. } if op == "relu"),
        "{e}"
    );
    assert!(e.to_string().contains("relu"));
}

#[test]
fn whole_dim_outside_an_opaque_function_is_an_error() {
    let mut op = parse("/// t\nop f(x[N]) -> y[N] {\n y[i] = x[i];\n}\n");
    let ExprKind::Read { indices, .. } = &mut op.stmts[0].body.kind else {
        panic!()
    };
    indices[0] = Index::Full;
    let e = analyse(&op).unwrap_err();
    assert!(
        matches!(&e, AnalysisError::Unsupported { op, expr, .. } if op == "f" && expr == "x[:]"),
        "{e}"
    );
}

#[test]
fn reduction_inside_an_index_is_an_error() {
    let mut op = parse("/// t\nop f(x[N], z[N]) -> y[N] {\n y[i] = x[i] + Sum(k: z[k]);\n}\n");
    // Move the reduction into x's index: x[Sum(k: z[k])].
    let ExprKind::Binary(_, a, b) = op.stmts[0].body.kind.clone() else {
        panic!()
    };
    let mut a = *a;
    let ExprKind::Read { indices, .. } = &mut a.kind else {
        panic!()
    };
    let mut red = *b;
    red.ty = tdl::Type::Int;
    if let ExprKind::Reduce { body, .. } = &mut red.kind {
        body.kind = ExprKind::Int(1);
        body.ty = tdl::Type::Int;
    }
    indices[0] = Index::Expr(red);
    op.stmts[0].body = a;
    let e = analyse(&op).unwrap_err();
    assert!(
        matches!(&e, AnalysisError::Unsupported { op, expr, .. } if op == "f" && expr.contains("Sum")),
        "{e}"
    );
}

#[test]
fn a_cycle_through_a_temporary_is_an_error() {
    let mut op = parse("/// t\nop f(x[N]) -> y[N] {\n let t[i] = x[i];\n y[i] = t[i];\n}\n");
    // Make t read itself.
    let y_body = op.stmts[1].body.clone();
    op.stmts[0].body = y_body;
    let e = analyse(&op).unwrap_err();
    assert!(
        matches!(&e, AnalysisError::Cyclic { op, expr } if op == "f" && expr == "t[i]"),
        "{e}"
    );
}

#[test]
fn non_affine_and_data_dependent_indices_are_not_errors() {
    let op = parse(
        "/// t\nop f(x[N], ids[N], t[V, N]) -> y[N] {\n y[i] = x[i // 2] + x[i % 2] + t[ids[i], i] + x[i * i // N];\n}\n",
    );
    let s = analyse(&op).unwrap();
    assert!(s.strategies.is_empty());
    assert_eq!(s.rejected.len(), 1);
    assert!(
        s.rejected[0].reason.contains("non-affine"),
        "{}",
        s.rejected[0].reason
    );
}

#[test]
fn instantiation_errors_are_typed() {
    let lib = Library::shipped().unwrap();
    let cache = StrategyCache::new();
    let s = cache.get(lib.get("matmul").unwrap(), 0).unwrap();
    let e = s
        .instantiate(&[vec![2, 3], vec![4, 5]], &Attrs::new(), 2)
        .unwrap_err();
    assert!(
        matches!(&e, InstantiateError::Shape(ShapeError::DimMismatch { op, .. }) if op == "matmul"),
        "{e}"
    );
    let e = s.instantiate(&[vec![2, 3]], &Attrs::new(), 2).unwrap_err();
    assert!(
        matches!(e, InstantiateError::Shape(ShapeError::InputCount { .. })),
        "{e}"
    );
    let e = s
        .instantiate(&[vec![2, 3, 1], vec![3, 5]], &Attrs::new(), 2)
        .unwrap_err();
    assert!(
        matches!(e, InstantiateError::Shape(ShapeError::Rank { .. })),
        "{e}"
    );
    let e = s
        .instantiate(&[vec![2, 3], vec![3, 5]], &Attrs::new(), 1)
        .unwrap_err();
    assert!(
        matches!(&e, InstantiateError::Parts { op, parts: 1 } if op == "matmul"),
        "{e}"
    );
    let attrs: Attrs = BTreeMap::from([("nope".to_string(), AttrValue::Int(1))]);
    let e = s
        .instantiate(&[vec![2, 3], vec![3, 5]], &attrs, 2)
        .unwrap_err();
    assert!(
        matches!(e, InstantiateError::Shape(ShapeError::UnknownAttr { .. })),
        "{e}"
    );
}
