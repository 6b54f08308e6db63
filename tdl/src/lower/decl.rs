//! Declarations: the op header (attributes, parameters, output
//! declarations), dimension expressions and index-variable binders.

use pest::iterators::Pair;

use super::{span_of, Lowerer, Rule, Scope};
use crate::ast::*;

impl Lowerer<'_> {
    pub(super) fn op(&mut self, pair: Pair<Rule>) -> Option<OpSpec> {
        self.op.span = span_of(&pair);
        let mut docs = Vec::new();
        let mut name_span = self.op.span;
        for p in pair.into_inner() {
            match p.as_rule() {
                Rule::doc_line => {
                    docs.push(p.as_str().trim_start_matches("///").trim().to_string())
                }
                Rule::kw_op => {}
                Rule::ident => {
                    self.op.name = p.as_str().to_string();
                    name_span = span_of(&p);
                }
                Rule::attr_list => self.attr_list(p),
                Rule::params => {
                    for q in p.into_inner() {
                        self.param(q);
                    }
                }
                Rule::outputs => {
                    for q in p.into_inner() {
                        self.output_decl(q);
                    }
                }
                Rule::body => {
                    self.lets = p
                        .clone()
                        .into_inner()
                        .filter(|q| q.as_rule() == Rule::stmt)
                        .filter_map(|q| {
                            let mut it = q.into_inner();
                            (it.next()?.as_rule() == Rule::let_kw)
                                .then(|| it.next().map(|n| n.as_str().to_string()))?
                        })
                        .collect();
                    for q in p.into_inner() {
                        match q.as_rule() {
                            Rule::stmt => {
                                let (errs, stmts, quiet, span) = (
                                    self.errors.len(),
                                    self.op.stmts.len(),
                                    self.quiet,
                                    span_of(&q),
                                );
                                self.stmt(q);
                                self.current = None;
                                if self.errors.len() == errs
                                    && self.op.stmts.len() == stmts
                                    && self.quiet == quiet
                                {
                                    // Safety net: a statement is never dropped silently.
                                    self.err(
                                        span,
                                        "this statement could not be checked",
                                        "here",
                                        Some("see docs/tdl.md for the form of statements".into()),
                                    );
                                }
                            }
                            Rule::grad => self.grad(q),
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
        self.op.doc = docs.join("\n");
        // Every output defined exactly once.
        for (i, o) in self.op.outputs.clone().iter().enumerate() {
            if !self.assigned.contains(&TensorRef::Output(i as u32)) {
                self.err(
                    o.span,
                    format!("output `{}` of `{}` is never defined", o.name, self.op.name),
                    "declared here",
                    Some(format!(
                        "add a statement `{}[...] = ...;` to the body",
                        o.name
                    )),
                );
            }
        }
        if self.op.outputs.is_empty() {
            self.err(
                name_span,
                format!("operator `{}` has no outputs", self.op.name),
                "here",
                None,
            );
        }
        Some(std::mem::replace(
            &mut self.op,
            Lowerer::new(self.file, self.src).op,
        ))
    }

    pub(super) fn attr_list(&mut self, pair: Pair<Rule>) {
        for d in pair.into_inner() {
            let span = span_of(&d);
            let mut it = d.into_inner();
            let (Some(name), Some(ty)) = (it.next(), it.next()) else {
                continue;
            };
            let name_s = name.as_str().to_string();
            let ty = if ty.as_str() == "int" {
                AttrType::Int
            } else {
                AttrType::Float
            };
            let default = it.next().map(|v| {
                let text = v.as_str();
                match ty {
                    AttrType::Int => match text.parse::<i64>() {
                        Ok(i) => AttrValue::Int(i),
                        Err(_) => {
                            self.err(
                                span_of(&v),
                                format!("default `{text}` of int attribute `{name_s}` is not an integer"),
                                "not an integer",
                                Some(format!("write an integer, or declare `{name_s}: float`")),
                            );
                            AttrValue::Int(0)
                        }
                    },
                    AttrType::Float => AttrValue::Float(text.parse::<f64>().unwrap_or(0.0)),
                }
            });
            if let Some(kind) = self.global_kind(&name_s) {
                self.err(
                    span_of(&name),
                    format!("`{name_s}` is already {kind}"),
                    "duplicate name",
                    Some("rename the attribute".into()),
                );
                continue;
            }
            self.op.attrs.push(AttrDecl {
                name: name_s,
                ty,
                default,
                span,
            });
        }
    }

    pub(super) fn param(&mut self, pair: Pair<Rule>) {
        let span = span_of(&pair);
        let mut padded = false;
        let mut name = None;
        let mut dims = Vec::new();
        let idx = self.op.inputs.len() as u32;
        for p in pair.into_inner() {
            match p.as_rule() {
                Rule::padded => padded = true,
                Rule::ident => name = Some((p.as_str().to_string(), span_of(&p))),
                Rule::dim_decl => {
                    let Some(d) = p.into_inner().next() else {
                        continue;
                    };
                    if d.as_rule() == Rule::ellipsis {
                        if dims.iter().any(|e| matches!(e, DimEntry::Ellipsis)) {
                            self.err(
                                span_of(&d),
                                "a tensor can have at most one `...`",
                                "second ellipsis",
                                Some("merge the batch dims into one `...`".into()),
                            );
                        }
                        dims.push(DimEntry::Ellipsis);
                        continue;
                    }
                    let dname = d.as_str();
                    let axis = dims.len() as u32;
                    if let Some(pos) = self.op.dims.iter().position(|x| x.name == dname) {
                        dims.push(DimEntry::Dim(DimExpr::Dim(DimId(pos as u32))));
                    } else {
                        if let Some(kind) = self.global_kind(dname) {
                            self.err(
                                span_of(&d),
                                format!("dimension name `{dname}` is already {kind}"),
                                "duplicate name",
                                Some("use distinct names for dims, attributes and tensors".into()),
                            );
                        }
                        self.op.dims.push(DimInfo {
                            name: dname.to_string(),
                            input: idx,
                            axis,
                        });
                        dims.push(DimEntry::Dim(DimExpr::Dim(DimId(
                            self.op.dims.len() as u32 - 1,
                        ))));
                    }
                }
                _ => {}
            }
        }
        let Some((name, nspan)) = name else { return };
        if let Some(kind) = self.global_kind(&name) {
            self.err(
                nspan,
                format!("`{name}` is already {kind}"),
                "duplicate name",
                Some("rename the input".into()),
            );
        }
        self.op.inputs.push(InputDecl {
            name,
            dims,
            padded,
            span,
        });
    }

    pub(super) fn has_input_ellipsis(&self) -> bool {
        self.op
            .inputs
            .iter()
            .any(|t| t.dims.iter().any(|d| matches!(d, DimEntry::Ellipsis)))
    }

    pub(super) fn output_decl(&mut self, pair: Pair<Rule>) {
        let span = span_of(&pair);
        let mut it = pair.into_inner();
        let Some(name) = it.next() else { return };
        let mut dims = Vec::new();
        for od in it {
            let Some(d) = od.into_inner().next() else {
                continue;
            };
            if d.as_rule() == Rule::ellipsis {
                if !self.has_input_ellipsis() {
                    self.err(
                        span_of(&d),
                        "output uses `...` but no input declares one",
                        "unbound ellipsis",
                        Some("declare the batch dims on an input, e.g. `x[..., N]`".into()),
                    );
                }
                dims.push(DimEntry::Ellipsis);
            } else {
                // A wrong dim is reported; a placeholder keeps the rank, so
                // statements are not also reported as rank mismatches.
                let e = self.dim_expr(d).unwrap_or(DimExpr::Const(0));
                dims.push(DimEntry::Dim(e));
            }
        }
        let n = name.as_str().to_string();
        if let Some(kind) = self.global_kind(&n) {
            self.err(
                span_of(&name),
                format!("`{n}` is already {kind}"),
                "duplicate name",
                Some("rename the output".into()),
            );
        }
        self.op.outputs.push(OutputDecl {
            name: n,
            dims,
            span,
        });
    }

    /// Lower an expression that must be an integer over dims and int attrs.
    pub(super) fn dim_expr(&mut self, pair: Pair<Rule>) -> Option<DimExpr> {
        let scope = Scope::default();
        let e = self.expr(pair, &scope)?;
        self.to_dim_expr(&e)
    }

    #[allow(clippy::wrong_self_convention)]
    pub(super) fn to_dim_expr(&mut self, e: &Expr) -> Option<DimExpr> {
        let b = |s: &mut Self, a: &Expr, c: &Expr| {
            Some((Box::new(s.to_dim_expr(a)?), Box::new(s.to_dim_expr(c)?)))
        };
        Some(match &e.kind {
            ExprKind::Int(i) => DimExpr::Const(*i),
            ExprKind::Dim(d) => DimExpr::Dim(*d),
            ExprKind::Attr(a) if self.op.attrs[a.0 as usize].ty == AttrType::Int => {
                DimExpr::Attr(*a)
            }
            ExprKind::Binary(op, x, y) => {
                let (x, y) = b(self, x, y)?;
                match op {
                    BinOp::Add => DimExpr::Add(x, y),
                    BinOp::Sub => DimExpr::Sub(x, y),
                    BinOp::Mul => DimExpr::Mul(x, y),
                    BinOp::FloorDiv => DimExpr::FloorDiv(x, y),
                    BinOp::Mod => DimExpr::Mod(x, y),
                    _ => return self.not_dim(e),
                }
            }
            ExprKind::Unary(UnOp::Neg, x) => {
                DimExpr::Sub(Box::new(DimExpr::Const(0)), Box::new(self.to_dim_expr(x)?))
            }
            ExprKind::Call(Builtin::Min, args) | ExprKind::Call(Builtin::Max, args) => {
                let (x, y) = b(self, &args[0], &args[1])?;
                if matches!(e.kind, ExprKind::Call(Builtin::Min, _)) {
                    DimExpr::Min(x, y)
                } else {
                    DimExpr::Max(x, y)
                }
            }
            _ => return self.not_dim(e),
        })
    }

    pub(super) fn not_dim(&mut self, e: &Expr) -> Option<DimExpr> {
        let hint = if matches!(e.kind, ExprKind::Binary(BinOp::Div, _, _)) {
            "`/` is real division; use `//` for integer division"
        } else {
            "a shape is an integer expression of input dims and int attributes (+ - * // % min max)"
        };
        self.err(
            e.span,
            "not an integer expression of dims and attributes",
            "not a shape",
            Some(hint.into()),
        );
        None
    }

    pub(super) fn lookup_tensor(&self, name: &str) -> Option<TensorRef> {
        if let Some(i) = self.op.inputs.iter().position(|t| t.name == name) {
            return Some(TensorRef::Input(i as u32));
        }
        if let Some(i) = self.op.outputs.iter().position(|t| t.name == name) {
            return Some(TensorRef::Output(i as u32));
        }
        if let Some(i) = self.op.locals.iter().position(|t| t.name == name) {
            return Some(TensorRef::Local(i as u32));
        }
        None
    }

    pub(super) fn new_var(
        &mut self,
        name: &str,
        range: Option<DimExpr>,
        reduction: bool,
        span: Span,
        group: bool,
    ) -> VarId {
        let id = VarId(self.op.vars.len() as u32);
        if range.is_none() && !group {
            self.pending.push(id);
        }
        self.op.vars.push(VarInfo {
            name: name.to_string(),
            range: range.unwrap_or(DimExpr::Const(0)),
            reduction,
            ellipsis: None,
            ellipsis_group: group,
            span,
        });
        id
    }

    /// Bind a binder (`i`, `i in N` or `...`) into `scope`.
    pub(super) fn binder(
        &mut self,
        b: Pair<Rule>,
        scope: &mut Scope,
        reduction: bool,
        declared: Option<&DimEntry>,
    ) -> Option<VarId> {
        let span = span_of(&b);
        let mut it = b.into_inner();
        let first = it.next()?;
        if first.as_rule() == Rule::ellipsis {
            if !self.has_input_ellipsis() {
                self.err(
                    span,
                    "`...` binds the ellipsis dims, but no input declares `...`",
                    "unbound ellipsis",
                    Some("declare the batch dims on an input, e.g. `x[..., N]`".into()),
                );
                return None;
            }
            let v = self.new_var("...", None, reduction, span, true);
            scope.ellipsis.push(v);
            return Some(v);
        }
        let name = first.as_str().to_string();
        if let Some((_, _)) = scope.vars.iter().rev().find(|(n, _)| *n == name) {
            let what = if reduction {
                "reduction variable"
            } else {
                "index variable"
            };
            self.err(
                span_of(&first),
                format!("{what} `{name}` shadows the variable `{name}` already bound here"),
                "shadows an outer variable",
                Some(format!(
                    "rename the inner `{name}`; each variable of an op needs its own name"
                )),
            );
            return None;
        }
        if let Some(kind) = self.global_kind(&name) {
            self.err(
                span_of(&first),
                format!("index variable `{name}` has the same name as {kind}"),
                "name clash",
                Some(
                    "use lower-case names for index variables and upper-case names for dims".into(),
                ),
            );
            return None;
        }
        let explicit = it.nth(1).and_then(|r| self.dim_expr(r));
        let range = match (explicit, declared) {
            (Some(r), _) => Some(r),
            (None, Some(DimEntry::Dim(d))) => Some(d.clone()),
            _ => None,
        };
        let v = self.new_var(&name, range, reduction, span_of(&first), false);
        scope.vars.push((name, v));
        Some(v)
    }
}
