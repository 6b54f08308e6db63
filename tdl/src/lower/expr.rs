//! Expressions: names, reads, calls, reductions and their types.

use pest::iterators::Pair;

use super::{span_of, Lowerer, Rule, Scope};
use crate::ast::*;
use crate::diagnostic::closest;
use crate::opaque;

impl Lowerer<'_> {
    pub(super) fn mk(kind: ExprKind, span: Span, ty: Type) -> Expr {
        Expr { kind, span, ty }
    }

    pub(super) fn expr(&mut self, pair: Pair<Rule>, scope: &Scope) -> Option<Expr> {
        let span = span_of(&pair);
        match pair.as_rule() {
            Rule::expr => self.expr(pair.into_inner().next()?, scope),
            Rule::or_expr | Rule::and_expr | Rule::add_expr | Rule::mul_expr | Rule::cmp_expr => {
                let mut it = pair.into_inner();
                let mut lhs = self.expr(it.next()?, scope);
                while let Some(op) = it.next() {
                    let rhs = self.expr(it.next()?, scope);
                    let bop = match op.as_str() {
                        "+" => BinOp::Add,
                        "-" => BinOp::Sub,
                        "*" => BinOp::Mul,
                        "/" => BinOp::Div,
                        "//" => BinOp::FloorDiv,
                        "%" => BinOp::Mod,
                        "<" => BinOp::Lt,
                        "<=" => BinOp::Le,
                        ">" => BinOp::Gt,
                        ">=" => BinOp::Ge,
                        "==" => BinOp::Eq,
                        "!=" => BinOp::Ne,
                        "&&" => BinOp::And,
                        _ => BinOp::Or,
                    };
                    let (l, r) = (lhs?, rhs?);
                    let ty = match bop {
                        BinOp::Div => Type::Real,
                        BinOp::Lt
                        | BinOp::Le
                        | BinOp::Gt
                        | BinOp::Ge
                        | BinOp::Eq
                        | BinOp::Ne
                        | BinOp::And
                        | BinOp::Or => Type::Int,
                        _ if l.ty == Type::Int && r.ty == Type::Int => Type::Int,
                        _ => Type::Real,
                    };
                    let sp = Span::new(l.span.start, r.span.end);
                    lhs = Some(Self::mk(
                        ExprKind::Binary(bop, Box::new(l), Box::new(r)),
                        sp,
                        ty,
                    ));
                }
                lhs
            }
            Rule::unary => {
                let mut ops = Vec::new();
                let mut inner = None;
                for p in pair.into_inner() {
                    if p.as_rule() == Rule::neg_op {
                        ops.push(p.as_str() == "-");
                    } else {
                        inner = Some(p);
                    }
                }
                let mut e = self.expr(inner?, scope)?;
                for neg in ops.into_iter().rev() {
                    e = if neg {
                        match e.kind {
                            ExprKind::Int(i) => Self::mk(ExprKind::Int(-i), span, Type::Int),
                            ExprKind::Real(r) => Self::mk(ExprKind::Real(-r), span, Type::Real),
                            _ => {
                                let ty = e.ty;
                                Self::mk(ExprKind::Unary(UnOp::Neg, Box::new(e)), span, ty)
                            }
                        }
                    } else {
                        Self::mk(ExprKind::Unary(UnOp::Not, Box::new(e)), span, Type::Int)
                    };
                }
                Some(e)
            }
            Rule::postfix => {
                let mut it = pair.into_inner();
                let prim = it.next()?;
                match it.next() {
                    None => self.expr(prim, scope),
                    Some(ix) => {
                        // Only an opaque call can be indexed.
                        let inner = prim.clone().into_inner().next();
                        match inner {
                            Some(c) if c.as_rule() == Rule::call => self.call(c, Some(ix), scope),
                            _ => {
                                self.err(
                                    span_of(&ix),
                                    "only the result of an opaque function can be indexed here",
                                    "unexpected index",
                                    Some(
                                        "index a tensor directly: `x[i, j]`, not `x[i][j]`".into(),
                                    ),
                                );
                                None
                            }
                        }
                    }
                }
            }
            Rule::primary => {
                let inner = pair.into_inner().next()?;
                self.expr(inner, scope)
            }
            Rule::number => {
                let t = pair.as_str();
                if t.contains(['.', 'e', 'E']) {
                    match t.parse::<f64>() {
                        Ok(v) => Some(Self::mk(ExprKind::Real(v), span, Type::Real)),
                        Err(_) => {
                            self.err(span, format!("bad number `{t}`"), "not a number", None);
                            None
                        }
                    }
                } else {
                    match t.parse::<i64>() {
                        Ok(v) => Some(Self::mk(ExprKind::Int(v), span, Type::Int)),
                        Err(_) => {
                            self.err(
                                span,
                                format!("integer `{t}` is too large"),
                                "overflows i64",
                                None,
                            );
                            None
                        }
                    }
                }
            }
            Rule::ident => self.ident(pair.as_str(), span, scope),
            Rule::reduce => self.reduce(pair, scope),
            Rule::call => self.call(pair, None, scope),
            Rule::tensor_read => self.read(pair, scope, false),
            _ => {
                self.err(span, "unsupported expression", "here", None);
                None
            }
        }
    }

    pub(super) fn ident(&mut self, name: &str, span: Span, scope: &Scope) -> Option<Expr> {
        if let Some((_, v)) = scope.vars.iter().rev().find(|(n, _)| n == name) {
            return Some(Self::mk(ExprKind::Var(*v), span, Type::Int));
        }
        if let Some(d) = self.op.dims.iter().position(|d| d.name == name) {
            return Some(Self::mk(ExprKind::Dim(DimId(d as u32)), span, Type::Int));
        }
        if let Some(a) = self.op.attrs.iter().position(|a| a.name == name) {
            let ty = if self.op.attrs[a].ty == AttrType::Int {
                Type::Int
            } else {
                Type::Real
            };
            return Some(Self::mk(ExprKind::Attr(AttrId(a as u32)), span, ty));
        }
        if self.lookup_tensor(name).is_some() {
            self.err(
                span,
                format!("tensor `{name}` is used without indices"),
                "needs indices",
                Some(format!(
                    "read an element: `{name}[...]` (a scalar tensor is read as `{name}[]`)"
                )),
            );
            return None;
        }
        let mut known: Vec<&str> = scope.vars.iter().map(|(n, _)| n.as_str()).collect();
        known.extend(self.op.dims.iter().map(|d| d.name.as_str()));
        known.extend(self.op.attrs.iter().map(|a| a.name.as_str()));
        let help = if let Some(c) = closest(name, known.iter().copied()) {
            format!("did you mean `{c}`? Otherwise bind `{name}` on the left-hand side or in a reducer `Sum({name}: ...)`")
        } else if known.is_empty() {
            "bind it on the left-hand side, in a reducer `Sum(k: ...)`, or declare it as a dim or attribute".to_string()
        } else {
            format!("names in scope here: {}; bind `{name}` on the left-hand side or in a reducer `Sum({name}: ...)`", known.join(", "))
        };
        self.err(
            span,
            format!("unbound name `{name}`"),
            "not bound",
            Some(help),
        );
        None
    }

    pub(super) fn reduce(&mut self, pair: Pair<Rule>, scope: &Scope) -> Option<Expr> {
        let span = span_of(&pair);
        let mut it = pair.into_inner();
        let reducer = match it.next()?.as_str() {
            "Sum" => Reducer::Sum,
            "Max" => Reducer::Max,
            "Min" => Reducer::Min,
            _ => Reducer::Prod,
        };
        let mut inner = Scope {
            vars: scope.vars.clone(),
            ellipsis: scope.ellipsis.clone(),
        };
        let mut vars = Vec::new();
        let mut body = None;
        for p in it {
            match p.as_rule() {
                Rule::binder => vars.push(self.binder(p, &mut inner, true, None)?),
                _ => body = Some(p),
            }
        }
        let body = self.expr(body?, &inner)?;
        for v in &vars {
            let info = &self.op.vars[v.0 as usize];
            if !info.ellipsis_group && !uses_var(&body, *v) {
                let (n, s) = (info.name.clone(), info.span);
                self.err(
                    s,
                    format!("reduction variable `{n}` is not used in the reduced expression"),
                    "unused",
                    Some(format!("remove `{n}` from the reducer")),
                );
                return None;
            }
        }
        Some(Self::mk(
            ExprKind::Reduce {
                reducer,
                vars,
                body: Box::new(body),
            },
            span,
            Type::Real,
        ))
    }

    pub(super) fn call(
        &mut self,
        pair: Pair<Rule>,
        index: Option<Pair<Rule>>,
        scope: &Scope,
    ) -> Option<Expr> {
        let span = span_of(&pair);
        let mut it = pair.into_inner();
        let name = it.next()?;
        let fname = name.as_str().to_string();
        let args: Vec<Pair<Rule>> = it.map(|a| a.into_inner().next()).collect::<Option<_>>()?;
        if let Some((b, arity)) = Builtin::lookup(&fname) {
            if index.is_some() {
                self.err(
                    span,
                    format!("`{fname}` is a scalar function and cannot be indexed"),
                    "scalar",
                    None,
                );
                return None;
            }
            if args.len() != arity {
                self.err(
                    span,
                    format!(
                        "wrong arity: `{fname}` takes {arity} argument(s), got {}",
                        args.len()
                    ),
                    "wrong number of arguments",
                    Some(format!(
                        "call it as `{fname}({})`",
                        (0..arity)
                            .map(|i| format!("a{i}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )),
                );
                return None;
            }
            let mut out = Vec::new();
            let mut ok = true;
            for a in args {
                let e = if a.as_rule() == Rule::slice_read {
                    self.read(a, scope, false)
                } else {
                    self.expr(a, scope)
                };
                match e {
                    Some(e) => out.push(e),
                    None => ok = false,
                }
            }
            if !ok {
                return None;
            }
            let ty = match b {
                Builtin::Max | Builtin::Min if out.iter().all(|e| e.ty == Type::Int) => Type::Int,
                Builtin::Select if out[1].ty == Type::Int && out[2].ty == Type::Int => Type::Int,
                _ => Type::Real,
            };
            return Some(Self::mk(ExprKind::Call(b, out), span, ty));
        }
        let Some(info) = opaque::lookup(&fname) else {
            let builtins: Vec<&str> = Builtin::ALL.iter().map(|(_, n, _)| *n).collect();
            let opaques: Vec<&str> = opaque::KNOWN.iter().map(|o| o.name).collect();
            let all = builtins.iter().chain(&opaques).copied();
            let hint = match closest(&fname, all) {
                Some(c) => format!(
                    "did you mean `{c}`? Built-ins: {}; opaque functions: {}",
                    builtins.join(", "),
                    opaques.join(", ")
                ),
                None => format!(
                    "built-ins: {}; opaque functions: {}",
                    builtins.join(", "),
                    opaques.join(", ")
                ),
            };
            self.err(
                span_of(&name),
                format!("unknown function `{fname}`"),
                "not a built-in or opaque function",
                Some(hint),
            );
            return None;
        };
        if args.len() != info.arity {
            self.err(
                span,
                format!(
                    "wrong arity: opaque function `{fname}` takes {} argument(s), got {}",
                    info.arity,
                    args.len()
                ),
                "wrong number of arguments",
                None,
            );
            return None;
        }
        let mut out = Vec::new();
        let mut slice_ranks = Vec::new();
        for a in args {
            let e = if a.as_rule() == Rule::slice_read {
                self.read(a, scope, true)?
            } else {
                self.expr(a, scope)?
            };
            let rank = match &e.kind {
                ExprKind::Read { indices, .. } => {
                    indices.iter().filter(|i| matches!(i, Index::Full)).count()
                }
                _ => 0,
            };
            slice_ranks.push(rank);
            out.push(e);
        }
        let want = (info.result_rank)(&slice_ranks);
        let mut idx = Vec::new();
        if let Some(ix) = index {
            for r in ix.into_inner() {
                let rspan = span_of(&r);
                let Some(e) = r.into_inner().next() else {
                    continue;
                };
                if e.as_rule() == Rule::ellipsis {
                    self.err(
                        rspan,
                        "`...` cannot index the result of an opaque function",
                        "here",
                        None,
                    );
                    return None;
                }
                let e = self.expr(e, scope)?;
                self.check_index(&e);
                idx.push(e);
            }
        }
        if idx.len() != want {
            self.err(span, format!("rank mismatch: `{fname}` returns a rank-{want} result here but is indexed with {} indices", idx.len()), "wrong number of indices", Some(format!("index the result with {want} indices: `{fname}(...)[i, j]`")));
            return None;
        }
        Some(Self::mk(
            ExprKind::Opaque {
                name: fname,
                args: out,
                index: idx,
            },
            span,
            Type::Real,
        ))
    }

    pub(super) fn check_index(&mut self, e: &Expr) {
        if e.ty == Type::Real && !contains_read(e) {
            let hint = if has_real_div(e) {
                "`/` is real division; use `//` for integer division"
            } else {
                "indices are integers: index variables, dims, int attributes and integer literals"
            };
            self.err(
                e.span,
                "index is not an integer",
                "real-valued index",
                Some(hint.into()),
            );
        }
    }

    pub(super) fn read(
        &mut self,
        pair: Pair<Rule>,
        scope: &Scope,
        allow_full: bool,
    ) -> Option<Expr> {
        let span = span_of(&pair);
        let mut it = pair.into_inner();
        let name = it.next()?;
        let tname = name.as_str();
        let Some(t) = self.lookup_tensor(tname) else {
            if self.lets.iter().any(|l| l == tname) {
                // A temporary whose `let` is later in the body, or whose `let` had a mistake (already reported).
                if self.attempted_lets.iter().any(|l| l == tname) {
                    self.quiet += 1;
                } else {
                    self.err(
                        span_of(&name),
                        format!("temporary `{tname}` is read before it is defined"),
                        "not yet defined",
                        Some(format!(
                            "move `let {tname}[...] = ...;` above the statement that reads it"
                        )),
                    );
                }
                return None;
            }
            let known: Vec<String> = self
                .op
                .inputs
                .iter()
                .map(|t| t.name.clone())
                .chain(self.op.locals.iter().map(|t| t.name.clone()))
                .collect();
            let help = match closest(tname, known.iter().map(String::as_str)) {
                Some(c) => format!("did you mean `{c}`? Tensors here: {}", known.join(", ")),
                None => format!("tensors here: {}", known.join(", ")),
            };
            self.err(
                span_of(&name),
                format!("unknown tensor `{tname}`"),
                "not declared",
                Some(help),
            );
            return None;
        };
        if !matches!(t, TensorRef::Input(_)) && !self.defined.contains(&t) {
            if self.assigned.contains(&t) && self.current != Some(t) {
                // Its defining statement had a mistake, already reported.
                self.quiet += 1;
                return None;
            }
            self.err(span_of(&name), format!("`{tname}` is read before it is defined"), "not yet defined", Some("define it in an earlier statement; a tensor cannot be defined in terms of itself".into()));
            return None;
        }
        let decl: Vec<DimEntry> = self.op_tensor_dims(t).to_vec();
        let mut indices = Vec::new();
        let mut ok = true;
        for ix in it {
            let ispan = span_of(&ix);
            let Some(e) = ix.into_inner().next() else {
                continue;
            };
            match e.as_rule() {
                Rule::ellipsis => match scope.ellipsis.last() {
                    Some(v) => indices.push(Index::Ellipsis(*v)),
                    None => {
                        self.err(ispan, "`...` used as an index, but no `...` is bound here", "unbound ellipsis", Some("bind the ellipsis on the left-hand side (`y[..., n] = ...`) or in a reducer (`Sum(...: ...)`)".into()));
                        ok = false;
                    }
                },
                Rule::colon => {
                    if !allow_full {
                        self.err(
                            ispan,
                            "`:` slices are only allowed in arguments of opaque functions",
                            "slice",
                            Some("index every dim with an expression".into()),
                        );
                        ok = false;
                    }
                    indices.push(Index::Full);
                }
                _ => match self.expr(e, scope) {
                    Some(x) => {
                        self.check_index(&x);
                        indices.push(Index::Expr(x));
                    }
                    None => ok = false,
                },
            }
        }
        if !ok {
            return None;
        }
        if indices.len() != decl.len() {
            self.err(
                span,
                format!(
                    "rank mismatch: `{tname}` has {} dims but is indexed with {}",
                    decl.len(),
                    indices.len()
                ),
                "wrong number of indices",
                Some(format!(
                    "index `{tname}` with one index per dim (`...` counts as one)"
                )),
            );
            return None;
        }
        for (i, (ix, d)) in indices.iter().zip(&decl).enumerate() {
            let is_ell = matches!(ix, Index::Ellipsis(_));
            if is_ell != matches!(d, DimEntry::Ellipsis) {
                self.err(
                    span,
                    format!(
                        "index {i} of `{tname}` {} but its declaration {}",
                        if is_ell { "is `...`" } else { "is not `...`" },
                        if is_ell {
                            "has no `...` there"
                        } else {
                            "has `...` there"
                        }
                    ),
                    "misplaced ellipsis",
                    Some("put `...` in the same position as in the tensor's declaration".into()),
                );
                return None;
            }
        }
        Some(Self::mk(
            ExprKind::Read { tensor: t, indices },
            span,
            Type::Real,
        ))
    }
}

/// Whether `e` mentions variable `v` anywhere.
fn uses_var(e: &Expr, v: VarId) -> bool {
    e.any(&mut |x| match &x.kind {
        ExprKind::Var(w) => *w == v,
        ExprKind::Read { indices, .. } => indices
            .iter()
            .any(|i| matches!(i, Index::Ellipsis(w) if *w == v)),
        _ => false,
    })
}

fn contains_read(e: &Expr) -> bool {
    e.any(&mut |x| matches!(x.kind, ExprKind::Read { .. } | ExprKind::Opaque { .. }))
}

fn has_real_div(e: &Expr) -> bool {
    e.any(&mut |x| matches!(x.kind, ExprKind::Binary(BinOp::Div, _, _)))
}
