//! Statements: `t[i, ...] = expr;` and `let` temporaries, with the range
//! inference of reduction and `let` variables.

use pest::iterators::Pair;

use super::{span_of, Lowerer, Rule, Scope};
use crate::ast::*;

impl Lowerer<'_> {
    pub(super) fn stmt(&mut self, pair: Pair<Rule>) {
        let span = span_of(&pair);
        let mut it = pair.into_inner().peekable();
        let is_let = it
            .peek()
            .map(|p| p.as_rule() == Rule::let_kw)
            .unwrap_or(false);
        if is_let {
            it.next();
        }
        let Some(name) = it.next() else { return };
        let tname = name.as_str().to_string();
        let tspan = span_of(&name);
        let mut binders = Vec::new();
        let mut body = None;
        for p in it {
            match p.as_rule() {
                Rule::binder => binders.push(p),
                Rule::expr => body = Some(p),
                _ => {}
            }
        }
        let target = if is_let {
            self.attempted_lets.push(tname.clone());
            if let Some(kind) = self.global_kind(&tname) {
                self.err(
                    tspan,
                    format!("temporary `{tname}` has the same name as {kind}"),
                    "name clash",
                    Some("rename the temporary".into()),
                );
                return;
            }
            TensorRef::Local(self.op.locals.len() as u32)
        } else {
            match self.lookup_tensor(&tname) {
                Some(t @ TensorRef::Output(_)) => {
                    if self.assigned.contains(&t) {
                        self.err(
                            tspan,
                            format!("output `{tname}` is defined twice"),
                            "second definition",
                            Some("each output is defined by exactly one statement".into()),
                        );
                        return;
                    }
                    self.assigned.push(t);
                    self.current = Some(t);
                    t
                }
                Some(TensorRef::Input(_)) => {
                    self.err(
                        tspan,
                        format!("`{tname}` is an input and cannot be assigned"),
                        "input",
                        Some("assign to an output, or declare a temporary with `let`".into()),
                    );
                    return;
                }
                _ => {
                    self.err(tspan, format!("unknown output `{tname}`"), "not declared", Some(format!("declare it after `->`, or write `let {tname}[...] = ...;` for a temporary")));
                    return;
                }
            }
        };
        let declared: Vec<DimEntry> = match target {
            TensorRef::Output(i) => self.op.outputs[i as usize].dims.clone(),
            _ => vec![],
        };
        if !is_let && declared.len() != binders.len() {
            self.err(span_of_binders(&binders, tspan), format!("rank mismatch: output `{tname}` has {} dims but the statement binds {} variables", declared.len(), binders.len()), "wrong number of variables", Some(format!("bind one variable per dim of `{tname}` (`...` counts as one)")));
            return;
        }
        let mut scope = Scope::default();
        let mut vars = Vec::new();
        let mut local_dims = Vec::new();
        self.pending.clear();
        for (i, b) in binders.into_iter().enumerate() {
            let decl = declared.get(i);
            let is_ell = b.as_str().trim() == "...";
            if !is_let && is_ell != matches!(decl, Some(DimEntry::Ellipsis)) {
                self.err(
                    span_of(&b),
                    format!(
                        "position {i} of output `{tname}` is {} in its declaration",
                        if is_ell { "not `...`" } else { "`...`" }
                    ),
                    "does not match the declaration",
                    Some(
                        "write the statement's variables in the same layout as the output's dims"
                            .into(),
                    ),
                );
                return;
            }
            let Some(v) = self.binder(b, &mut scope, false, decl) else {
                return;
            };
            vars.push(v);
            local_dims.push(if is_ell {
                DimEntry::Ellipsis
            } else {
                DimEntry::Dim(DimExpr::Const(0))
            });
        }
        let Some(body) = body else { return };
        let Some(body) = self.expr(body, &scope) else {
            return;
        };
        let pending = std::mem::take(&mut self.pending);
        for v in pending {
            if let Some(r) = self.infer_range(v, &body) {
                self.op.vars[v.0 as usize].range = r;
            } else {
                let info = &self.op.vars[v.0 as usize];
                let (n, s) = (info.name.clone(), info.span);
                self.err(s, format!("cannot infer the range of variable `{n}`: it is never used alone as an index"), "range unknown", Some(format!("give the range explicitly: `{n} in N`")));
                return;
            }
        }
        if is_let {
            for (d, v) in local_dims.iter_mut().zip(&vars) {
                if let DimEntry::Dim(r) = d {
                    *r = self.op.vars[v.0 as usize].range.clone();
                }
            }
            self.op.locals.push(OutputDecl {
                name: tname,
                dims: local_dims,
                span: tspan,
            });
        }
        self.defined.push(target);
        self.op.stmts.push(Stmt {
            target,
            vars,
            body,
            span,
        });
    }

    /// The range of `v`: the dim of the first read where it is a bare index
    /// (pre-order through [`Expr::children`]).
    pub(super) fn infer_range(&self, v: VarId, e: &Expr) -> Option<DimExpr> {
        if let ExprKind::Read { tensor, indices } = &e.kind {
            for (pos, ix) in indices.iter().enumerate() {
                if let Index::Expr(Expr {
                    kind: ExprKind::Var(w),
                    ..
                }) = ix
                {
                    if *w == v {
                        if let Some(DimEntry::Dim(d)) = self.op_tensor_dims(*tensor).get(pos) {
                            return Some(d.clone());
                        }
                    }
                }
            }
        }
        e.children().find_map(|x| self.infer_range(v, x))
    }

    pub(super) fn op_tensor_dims(&self, t: TensorRef) -> &[DimEntry] {
        match t {
            TensorRef::Input(i) => &self.op.inputs[i as usize].dims,
            TensorRef::Output(i) => &self.op.outputs[i as usize].dims,
            TensorRef::Local(i) => self
                .op
                .locals
                .get(i as usize)
                .map(|l| &l.dims[..])
                .unwrap_or(&[]),
        }
    }
}

fn span_of_binders(b: &[Pair<Rule>], fallback: Span) -> Span {
    match (b.first(), b.last()) {
        (Some(f), Some(l)) => Span::new(f.as_span().start(), l.as_span().end()),
        _ => fallback,
    }
}
