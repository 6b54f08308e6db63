//! Printing expressions with their op's names (`x[i, k] * w[k, j]`), for
//! error messages and reports: [`crate::OpSpec::show`] and
//! [`crate::OpSpec::show_dim`].

use std::fmt;

use crate::ast::*;

/// Display adaptor for [`Expr`], see [`OpSpec::show`].
pub struct ShowExpr<'a> {
    op: &'a OpSpec,
    e: &'a Expr,
}

/// Display adaptor for [`DimExpr`], see [`OpSpec::show_dim`].
pub struct ShowDim<'a> {
    op: &'a OpSpec,
    e: &'a DimExpr,
}

impl<'a> ShowExpr<'a> {
    pub(crate) fn new(op: &'a OpSpec, e: &'a Expr) -> Self {
        ShowExpr { op, e }
    }
}

impl<'a> ShowDim<'a> {
    pub(crate) fn new(op: &'a OpSpec, e: &'a DimExpr) -> Self {
        ShowDim { op, e }
    }
}

impl fmt::Display for ShowDim<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = self.op;
        let bin = |f: &mut fmt::Formatter<'_>, a: &DimExpr, s: &str, b: &DimExpr| {
            write!(f, "({} {} {})", op.show_dim(a), s, op.show_dim(b))
        };
        match self.e {
            DimExpr::Const(c) => write!(f, "{c}"),
            DimExpr::Dim(d) => write!(f, "{}", op.dims[d.0 as usize].name),
            DimExpr::Attr(a) => write!(f, "{}", op.attrs[a.0 as usize].name),
            DimExpr::Add(a, b) => bin(f, a, "+", b),
            DimExpr::Sub(a, b) => bin(f, a, "-", b),
            DimExpr::Mul(a, b) => bin(f, a, "*", b),
            DimExpr::FloorDiv(a, b) => bin(f, a, "//", b),
            DimExpr::Mod(a, b) => bin(f, a, "%", b),
            DimExpr::Min(a, b) => write!(f, "min({}, {})", op.show_dim(a), op.show_dim(b)),
            DimExpr::Max(a, b) => write!(f, "max({}, {})", op.show_dim(a), op.show_dim(b)),
        }
    }
}

impl fmt::Display for ShowExpr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = self.op;
        let list = |f: &mut fmt::Formatter<'_>, xs: &[Expr]| -> fmt::Result {
            for (i, x) in xs.iter().enumerate() {
                if i > 0 {
                    write!(f, ", ")?;
                }
                write!(f, "{}", op.show(x))?;
            }
            Ok(())
        };
        match &self.e.kind {
            ExprKind::Int(i) => write!(f, "{i}"),
            ExprKind::Real(r) => write!(f, "{r:?}"),
            ExprKind::Var(v) => write!(f, "{}", op.vars[v.0 as usize].name),
            ExprKind::Dim(d) => write!(f, "{}", op.dims[d.0 as usize].name),
            ExprKind::Attr(a) => write!(f, "{}", op.attrs[a.0 as usize].name),
            ExprKind::Read { tensor, indices } => {
                write!(f, "{}[", op.tensor_name(*tensor))?;
                for (i, x) in indices.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    match x {
                        Index::Expr(e) => write!(f, "{}", op.show(e))?,
                        Index::Ellipsis(_) => write!(f, "...")?,
                        Index::Full => write!(f, ":")?,
                    }
                }
                write!(f, "]")
            }
            ExprKind::Unary(UnOp::Neg, a) => write!(f, "-{}", op.show(a)),
            ExprKind::Unary(UnOp::Not, a) => write!(f, "!{}", op.show(a)),
            ExprKind::Binary(o, a, b) => {
                write!(f, "({} {} {})", op.show(a), o.symbol(), op.show(b))
            }
            ExprKind::Call(b, args) => {
                write!(f, "{}(", b.name())?;
                list(f, args)?;
                write!(f, ")")
            }
            ExprKind::Reduce {
                reducer,
                vars,
                body,
            } => {
                write!(f, "{}(", reducer.name())?;
                for (i, v) in vars.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{}", op.vars[v.0 as usize].name)?;
                }
                write!(f, ": {})", op.show(body))
            }
            ExprKind::Opaque { name, args, index } => {
                write!(f, "{name}(")?;
                list(f, args)?;
                write!(f, ")")?;
                if !index.is_empty() {
                    write!(f, "[")?;
                    list(f, index)?;
                    write!(f, "]")?;
                }
                Ok(())
            }
        }
    }
}
