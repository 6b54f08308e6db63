//! Expressions to CUDA C: integer index arithmetic, logic, `select`, real
//! arithmetic with the built-ins, and tensor reads (bounds-checked, padded
//! inputs reading 0 outside their shape), in the interpreter's semantics.

use tdl::{BinOp, Builtin, Expr, ExprKind, Index, TensorRef, Type, UnOp};

use super::{Gen, ERR_OUT_OF_BOUNDS};
use crate::ops::KernelError;

impl Gen<'_> {
    /// An integer-valued expression (the interpreter's `eval_int`).
    pub(super) fn int(&mut self, e: &Expr) -> Result<String, KernelError> {
        Ok(match &e.kind {
            ExprKind::Int(i) => format!("((i64){i}LL)"),
            ExprKind::Var(v) => format!("v{}", v.0),
            ExprKind::Dim(d) => self.int_param(self.b.dims[d.0 as usize]),
            ExprKind::Attr(a) => self.int_param(self.b.attrs[a.0 as usize].as_f64() as i64),
            ExprKind::Unary(UnOp::Neg, a) if a.ty == Type::Int => {
                let x = self.int(a)?;
                format!("(-{x})")
            }
            ExprKind::Unary(UnOp::Not, a) => {
                let x = self.real(a)?;
                format!("((i64)({x} == 0.0))")
            }
            ExprKind::Binary(op, a, c) => match op {
                BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Eq | BinOp::Ne => {
                    let (x, y) = (self.real(a)?, self.real(c)?);
                    let sym = match op {
                        BinOp::Lt => "<",
                        BinOp::Le => "<=",
                        BinOp::Gt => ">",
                        BinOp::Ge => ">=",
                        BinOp::Eq => "==",
                        _ => "!=",
                    };
                    format!("((i64)({x} {sym} {y}))")
                }
                BinOp::And | BinOp::Or => self.logic(*op, a, c)?,
                _ if e.ty == Type::Int => {
                    let (x, y) = (self.int(a)?, self.int(c)?);
                    match op {
                        BinOp::Add => format!("({x} + {y})"),
                        BinOp::Sub => format!("({x} - {y})"),
                        BinOp::Mul => format!("({x} * {y})"),
                        BinOp::FloorDiv => format!("fdiv({x}, {y}, err, kid)"),
                        BinOp::Mod => format!("fmod_({x}, {y}, err, kid)"),
                        _ => return Err(self.unsupported(format!("integer `{}`", op.symbol()))),
                    }
                }
                _ => {
                    let x = self.real(e)?;
                    format!("((i64)llround({x}))")
                }
            },
            ExprKind::Call(Builtin::Max, args) if e.ty == Type::Int => {
                let (x, y) = (self.int(&args[0])?, self.int(&args[1])?);
                format!("max({x}, {y})")
            }
            ExprKind::Call(Builtin::Min, args) if e.ty == Type::Int => {
                let (x, y) = (self.int(&args[0])?, self.int(&args[1])?);
                format!("min({x}, {y})")
            }
            ExprKind::Call(Builtin::Select, args) if e.ty == Type::Int => {
                self.select(args, "i64", |g, x| g.int(x))?
            }
            _ => {
                let x = self.real(e)?;
                format!("((i64)llround({x}))")
            }
        })
    }

    /// `a && b` / `a || b` with the interpreter's short circuit, as 0/1.
    pub(super) fn logic(&mut self, op: BinOp, a: &Expr, c: &Expr) -> Result<String, KernelError> {
        let x = self.real(a)?;
        let r = self.fresh("i64", &format!("(i64)({x} != 0.0)"));
        let cond = if op == BinOp::And {
            r.clone()
        } else {
            format!("!{r}")
        };
        self.line(&format!("if ({cond}) {{"));
        self.indent += 1;
        let y = self.real(c)?;
        self.line(&format!("{r} = (i64)({y} != 0.0);"));
        self.indent -= 1;
        self.line("}");
        Ok(r)
    }

    /// `select(c, a, b)`: only the chosen branch runs.
    pub(super) fn select(
        &mut self,
        args: &[Expr],
        ty: &str,
        f: impl Fn(&mut Self, &Expr) -> Result<String, KernelError>,
    ) -> Result<String, KernelError> {
        let c = self.real(&args[0])?;
        let r = self.fresh(ty, "0");
        self.line(&format!("if ({c} != 0.0) {{"));
        self.indent += 1;
        let a = f(self, &args[1])?;
        self.line(&format!("{r} = {a};"));
        self.indent -= 1;
        self.line("} else {");
        self.indent += 1;
        let b = f(self, &args[2])?;
        self.line(&format!("{r} = {b};"));
        self.indent -= 1;
        self.line("}");
        Ok(r)
    }

    /// A real-valued expression (the interpreter's `eval`), as f64.
    pub(super) fn real(&mut self, e: &Expr) -> Result<String, KernelError> {
        if e.ty == Type::Int {
            let x = self.int(e)?;
            return Ok(format!("((double){x})"));
        }
        Ok(match &e.kind {
            ExprKind::Int(i) => format!("{i}.0"),
            ExprKind::Real(r) => {
                if r.is_finite() {
                    format!("{r:?}")
                } else {
                    self.real_param(*r)
                }
            }
            ExprKind::Attr(a) => self.real_param(self.b.attrs[a.0 as usize].as_f64()),
            ExprKind::Var(_) | ExprKind::Dim(_) => {
                let x = self.int(e)?;
                format!("((double){x})")
            }
            ExprKind::Read { tensor, indices } => self.read(*tensor, indices)?,
            ExprKind::Unary(UnOp::Neg, a) => {
                let x = self.real(a)?;
                format!("(-{x})")
            }
            ExprKind::Unary(UnOp::Not, a) => {
                let x = self.real(a)?;
                format!("((double)({x} == 0.0))")
            }
            ExprKind::Binary(op, a, c) => match op {
                BinOp::Add
                | BinOp::Sub
                | BinOp::Mul
                | BinOp::Div
                | BinOp::FloorDiv
                | BinOp::Mod => {
                    let (x, y) = (self.real(a)?, self.real(c)?);
                    match op {
                        BinOp::Add => format!("({x} + {y})"),
                        BinOp::Sub => format!("({x} - {y})"),
                        BinOp::Mul => format!("({x} * {y})"),
                        BinOp::Div => format!("({x} / {y})"),
                        BinOp::FloorDiv => format!("floor({x} / {y})"),
                        _ => format!("({x} - {y} * floor({x} / {y}))"),
                    }
                }
                _ => {
                    let x = self.int(e)?;
                    format!("((double){x})")
                }
            },
            ExprKind::Call(Builtin::Select, args) => {
                self.select(args, "double", |g, x| g.real(x))?
            }
            ExprKind::Call(f, args) => {
                let x = self.real(&args[0])?;
                let name = match f {
                    Builtin::Exp => "exp",
                    Builtin::Log => "log",
                    Builtin::Sqrt => "sqrt",
                    Builtin::Tanh => "tanh",
                    Builtin::Sigmoid => "sigm",
                    Builtin::Erf => "erf",
                    Builtin::Abs => "fabs",
                    Builtin::Sin => "sin",
                    Builtin::Cos => "cos",
                    Builtin::Tan => "tan",
                    Builtin::Asin => "asin",
                    Builtin::Acos => "acos",
                    Builtin::Atan => "atan",
                    Builtin::Sinh => "sinh",
                    Builtin::Cosh => "cosh",
                    Builtin::Asinh => "asinh",
                    Builtin::Acosh => "acosh",
                    Builtin::Atanh => "atanh",
                    Builtin::Floor => "floor",
                    Builtin::Ceil => "ceil",
                    Builtin::Round => "rint",
                    Builtin::Sign => "sgn",
                    Builtin::Max | Builtin::Min | Builtin::Pow => {
                        let y = self.real(&args[1])?;
                        let n = match f {
                            Builtin::Max => "maxr",
                            Builtin::Min => "minr",
                            _ => "pow",
                        };
                        return Ok(format!("{n}({x}, {y})"));
                    }
                    Builtin::Select => unreachable!("handled above"),
                };
                format!("{name}({x})")
            }
            ExprKind::Reduce {
                reducer,
                vars,
                body,
            } => match self.hoisted.iter().find(|h| std::ptr::eq(h.0, e)) {
                Some((_, name)) => name.clone(),
                None => self.reduce(*reducer, vars, body)?,
            },
            ExprKind::Opaque { name, .. } => {
                return Err(self.unsupported(format!("opaque function `{name}`")))
            }
        })
    }

    /// The fast path of a read (issue 25, item 4): where `indices` are the
    /// statement's target variables in order and `tensor`'s buffer has the
    /// target's box, which lies inside `tensor`'s shape, the element is the
    /// buffer's `t`-th — the target element's own flat index — with no
    /// decode and no bounds check (the elementwise ops, the optimizer
    /// updates).
    fn same_element(
        &self,
        tensor: TensorRef,
        indices: &[Index],
        shape: &[usize],
        lo: &[i64],
        ext: &[usize],
    ) -> Option<String> {
        let (vars, t_lo, t_ext) = self.target.as_ref()?;
        let identity = indices.len() == vars.len()
            && indices
                .iter()
                .zip(vars)
                .all(|(ix, v)| matches!(ix, Index::Expr(e) if matches!(e.kind, ExprKind::Var(x) if x == *v)));
        let inside = shape.len() == lo.len()
            && (0..lo.len()).all(|d| lo[d] >= 0 && lo[d] + ext[d] as i64 <= shape[d] as i64);
        (identity && inside && lo == t_lo.as_slice() && ext == t_ext.as_slice()).then(|| {
            let buf = match tensor {
                TensorRef::Input(i) => format!("in{i}"),
                TensorRef::Output(o) => format!("out{o}"),
                TensorRef::Local(l) => format!("loc{l}"),
            };
            format!("((double){buf}[t])")
        })
    }

    /// A read of `tensor` at `indices`: bounds against the tensor's shape
    /// (padded inputs read 0 outside it) and against the buffer's box.
    pub(super) fn read(
        &mut self,
        tensor: TensorRef,
        indices: &[Index],
    ) -> Result<String, KernelError> {
        let mut idx = Vec::with_capacity(indices.len());
        for ix in indices {
            match ix {
                Index::Expr(x) => {
                    let i = self.int(x)?;
                    idx.push(self.fresh("i64", &i));
                }
                _ => return Err(self.unsupported("a slice read outside an opaque call".into())),
            }
        }
        let shape = self.b.shape(tensor).to_vec();
        let (lo, ext) = self.layout(tensor);
        let (lo, ext) = (lo.to_vec(), ext.to_vec());
        if let Some(at) = self.same_element(tensor, indices, &shape, &lo, &ext) {
            return Ok(at);
        }
        if idx.len() != shape.len() || lo.len() != shape.len() {
            return Err(self.unsupported("a read whose rank differs from its tensor's".into()));
        }
        let padded = matches!(tensor, TensorRef::Input(i) if self.b.spec.inputs[i as usize].padded);
        let mut in_shape = Vec::new();
        let mut in_buf = Vec::new();
        let mut off = String::from("0");
        for d in 0..idx.len() {
            let n = self.int_param(shape[d] as i64);
            in_shape.push(format!("{0} >= 0 && {0} < {n}", idx[d]));
            let (l, e) = (self.int_param(lo[d]), self.int_param(ext[d] as i64));
            in_buf.push(format!("{0} >= {l} && {0} < {l} + {e}", idx[d]));
            off = format!("({off}) * {e} + ({} - {l})", idx[d]);
        }
        let buf = match tensor {
            TensorRef::Input(i) => format!("in{i}"),
            TensorRef::Output(o) => format!("out{o}"),
            TensorRef::Local(l) => format!("loc{l}"),
        };
        let all = |v: &[String]| {
            if v.is_empty() {
                "true".to_string()
            } else {
                v.join(" && ")
            }
        };
        let r = self.fresh("double", "0.0");
        let inside = all(&in_shape);
        let held = all(&in_buf);
        if padded {
            self.line(&format!("if ({inside}) {{"));
        } else {
            self.line(&format!(
                "if (!({inside})) fail(err, kid, {ERR_OUT_OF_BOUNDS}); else {{"
            ));
        }
        self.indent += 1;
        self.line(&format!(
            "if ({held}) {r} = (double){buf}[{off}]; else fail(err, kid, {ERR_OUT_OF_BOUNDS});"
        ));
        self.indent -= 1;
        self.line("}");
        Ok(r)
    }
}
