//! Nested reductions merged into one before CUDA C is generated (issue 25,
//! item 4: parallel inner reductions).
//!
//! Takes a statement body; gives an equal body where a reduction whose
//! body is (up to a cheap linear factor) another reduction of the same
//! reducer iterates over the variables of both at once:
//!
//! * `Sum(a: Sum(b: x))` → `Sum(a, b: x)`, likewise `Max`, `Min`, `Prod`;
//! * `Sum(a: Sum(b: x) / c)`, `Sum(a: c * Sum(b: x))`, `Sum(a: Sum(b: x) * c)`
//!   → `Sum(a, b: x / c)` (resp. `c * x`, `x * c`), `Sum(a: -Sum(b: x))` →
//!   `Sum(a, b: -x)`, where `c` holds no reduction (it is evaluated once per
//!   inner iteration instead of once per outer one).
//!
//! Why: the loss of a batch, `Sum(rows: Sum(n: labels · (lse − logits)) /
//! count)`, has 256 outer iterations at batch 256, so its split reduction
//! could use at most 256 threads, each walking a 4,096-long row alone with
//! uncoalesced reads; merged, its 1M iterations spread over 1,024 blocks
//! with the innermost variable fastest across threads.
//!
//! Only the summation order changes (exact in real arithmetic, within
//! rounding in floating point). `c` cannot read an inner variable: TDL
//! scopes a reduction's variables to its body.

use tdl::{BinOp, Expr, ExprKind, Reducer, UnOp};

/// `e` with every mergeable nest of reductions merged (see the module doc).
pub(super) fn flatten(e: &Expr) -> Expr {
    let mut out = e.clone();
    flatten_in_place(&mut out);
    out
}

fn flatten_in_place(e: &mut Expr) {
    for c in e.children_mut() {
        flatten_in_place(c);
    }
    let ExprKind::Reduce {
        reducer,
        vars,
        body,
    } = &mut e.kind
    else {
        return;
    };
    if let Some((inner_vars, inner_body)) = merge(*reducer, body) {
        vars.extend(inner_vars);
        **body = inner_body;
    }
}

/// If `body` is a reduction by `outer` (for a sum: up to a cheap linear
/// factor), its variables and the body to reduce over both nests.
fn merge(outer: Reducer, body: &Expr) -> Option<(Vec<tdl::VarId>, Expr)> {
    let inner = |e: &Expr| match &e.kind {
        ExprKind::Reduce {
            reducer,
            vars,
            body,
        } if *reducer == outer => Some((vars.clone(), (**body).clone())),
        _ => None,
    };
    if let Some(m) = inner(body) {
        return Some(m);
    }
    if outer != Reducer::Sum {
        return None;
    }
    let rebuild = |kind: ExprKind, like: &Expr| Expr {
        kind,
        span: body.span,
        ty: like.ty,
    };
    match &body.kind {
        ExprKind::Unary(UnOp::Neg, a) => {
            let (vars, x) = inner(a)?;
            let neg = rebuild(ExprKind::Unary(UnOp::Neg, Box::new(x.clone())), &x);
            Some((vars, neg))
        }
        ExprKind::Binary(op @ (BinOp::Div | BinOp::Mul), a, c) if cheap(c) => {
            let (vars, x) = inner(a)?;
            let k = ExprKind::Binary(*op, Box::new(x.clone()), c.clone());
            Some((vars, rebuild(k, body)))
        }
        ExprKind::Binary(BinOp::Mul, c, a) if cheap(c) => {
            let (vars, x) = inner(a)?;
            let k = ExprKind::Binary(BinOp::Mul, c.clone(), Box::new(x));
            Some((vars, rebuild(k, body)))
        }
        _ => None,
    }
}

/// Holds no reduction (so evaluating it per inner iteration costs little).
fn cheap(e: &Expr) -> bool {
    !matches!(e.kind, ExprKind::Reduce { .. }) && e.children().all(cheap)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reductions of `e`, outermost first, as (reducer, variable count).
    fn nest(e: &Expr, out: &mut Vec<(Reducer, usize)>) {
        if let ExprKind::Reduce { reducer, vars, .. } = &e.kind {
            out.push((*reducer, vars.len()));
        }
        e.children().for_each(|c| nest(c, out));
    }

    fn body_of(src: &str, op: &str, stmt: usize) -> Expr {
        let lib = tdl::Library::from_sources(&[("test.tdl".into(), src.into())]).unwrap();
        lib.get(op).unwrap().stmts[stmt].body.clone()
    }

    fn nests(src: &str, op: &str, stmt: usize) -> Vec<(Reducer, usize)> {
        let mut v = Vec::new();
        nest(&flatten(&body_of(src, op, stmt)), &mut v);
        v
    }

    #[test]
    fn a_sum_of_row_sums_over_a_count_becomes_one_sum() {
        let src = "op l(x[B, N], y[B, N]) -> loss[] {
            let c[] = Sum(b, n: x[b, n]);
            loss[] = Sum(b: Sum(n: y[b, n] * x[b, n]) / c[]);
        }";
        assert_eq!(nests(src, "l", 1), vec![(Reducer::Sum, 2)]);
    }

    #[test]
    fn a_nonlinear_outer_body_or_another_reducer_stays_nested() {
        let src = "op l(x[B, N]) -> (a[], m[], p[]) {
            a[] = Sum(b: log(Sum(n: x[b, n])));
            m[] = Max(b: Sum(n: x[b, n]));
            p[] = Sum(b: Sum(n: x[b, n]) / Sum(n: x[b, n]));
        }";
        assert_eq!(
            nests(src, "l", 0),
            vec![(Reducer::Sum, 1), (Reducer::Sum, 1)]
        );
        assert_eq!(
            nests(src, "l", 1),
            vec![(Reducer::Max, 1), (Reducer::Sum, 1)]
        );
        assert_eq!(
            nests(src, "l", 2).len(),
            3,
            "an expensive divisor is not moved inside"
        );
    }

    #[test]
    fn max_of_max_negated_and_scaled_sums_merge() {
        let src = "op l(x[B, N]) -> (m[], s[], t[]) {
            m[] = Max(b: Max(n: x[b, n]));
            s[] = Sum(b: -Sum(n: x[b, n]));
            t[] = Sum(b: 2.0 * Sum(n: x[b, n]));
        }";
        for stmt in 0..3 {
            assert_eq!(nests(src, "l", stmt).len(), 1, "statement {stmt}");
        }
    }
}
