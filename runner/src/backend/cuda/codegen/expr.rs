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
                format!("((i64)({x} == 0.0f))")
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
                    format!("((i64)llroundf({x}))")
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
                format!("((i64)llroundf({x}))")
            }
        })
    }

    /// `a && b` / `a || b` with the interpreter's short circuit, as 0/1.
    pub(super) fn logic(&mut self, op: BinOp, a: &Expr, c: &Expr) -> Result<String, KernelError> {
        let x = self.real(a)?;
        let r = self.fresh("i64", &format!("(i64)({x} != 0.0f)"));
        let cond = if op == BinOp::And {
            r.clone()
        } else {
            format!("!{r}")
        };
        self.line(&format!("if ({cond}) {{"));
        self.indent += 1;
        let y = self.real(c)?;
        self.line(&format!("{r} = (i64)({y} != 0.0f);"));
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
        self.line(&format!("if ({c} != 0.0f) {{"));
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

    /// A real-valued expression (the interpreter's `eval`), as f32. An
    /// expression of literals, attributes and dims only (`1.0 - beta1`,
    /// `1.0 - pow(beta2, step)`) is computed here in f64, as the
    /// interpreter does, and rounded to f32 once: rounding `beta2 = 0.999`
    /// first would make `1 - beta2` wrong by 1e-5 relative.
    pub(super) fn real(&mut self, e: &Expr) -> Result<String, KernelError> {
        if e.ty == Type::Int {
            let x = self.int(e)?;
            return Ok(format!("((float){x})"));
        }
        if !matches!(
            e.kind,
            ExprKind::Int(_) | ExprKind::Real(_) | ExprKind::Attr(_)
        ) {
            if let Some(c) = self.fold(e) {
                return Ok(if c.bound || !(c.value as f32).is_finite() {
                    self.real_param(c.value)
                } else {
                    float_literal(c.value)
                });
            }
        }
        Ok(match &e.kind {
            ExprKind::Int(i) => float_literal(*i as f64),
            ExprKind::Real(r) => {
                if (*r as f32).is_finite() {
                    float_literal(*r)
                } else {
                    self.real_param(*r)
                }
            }
            ExprKind::Attr(a) => self.real_param(self.b.attrs[a.0 as usize].as_f64()),
            ExprKind::Var(_) | ExprKind::Dim(_) => {
                let x = self.int(e)?;
                format!("((float){x})")
            }
            ExprKind::Read { tensor, indices } => self.read(*tensor, indices)?,
            ExprKind::Unary(UnOp::Neg, a) => {
                let x = self.real(a)?;
                format!("(-{x})")
            }
            ExprKind::Unary(UnOp::Not, a) => {
                let x = self.real(a)?;
                format!("((float)({x} == 0.0f))")
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
                        BinOp::FloorDiv => format!("floorf({x} / {y})"),
                        _ => format!("({x} - {y} * floorf({x} / {y}))"),
                    }
                }
                _ => {
                    let x = self.int(e)?;
                    format!("((float){x})")
                }
            },
            ExprKind::Call(Builtin::Select, args) => {
                self.select(args, "float", |g, x| g.real(x))?
            }
            ExprKind::Call(f, args) => {
                let x = self.real(&args[0])?;
                let name = match f {
                    Builtin::Exp => "expf",
                    Builtin::Log => "logf",
                    Builtin::Sqrt => "sqrtf",
                    Builtin::Tanh => "tanhf",
                    Builtin::Sigmoid => "sigm",
                    Builtin::Erf => "erff",
                    Builtin::Abs => "fabsf",
                    Builtin::Sin => "sinf",
                    Builtin::Cos => "cosf",
                    Builtin::Tan => "tanf",
                    Builtin::Asin => "asinf",
                    Builtin::Acos => "acosf",
                    Builtin::Atan => "atanf",
                    Builtin::Sinh => "sinhf",
                    Builtin::Cosh => "coshf",
                    Builtin::Asinh => "asinhf",
                    Builtin::Acosh => "acoshf",
                    Builtin::Atanh => "atanhf",
                    Builtin::Floor => "floorf",
                    Builtin::Ceil => "ceilf",
                    Builtin::Round => "rintf",
                    Builtin::Sign => "sgn",
                    Builtin::Max | Builtin::Min | Builtin::Pow => {
                        let y = self.real(&args[1])?;
                        let n = match f {
                            Builtin::Max => "maxr",
                            Builtin::Min => "minr",
                            _ => "powf",
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
            format!("{buf}[t]")
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
        let r = self.fresh("float", "0.0f");
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
            "if ({held}) {r} = {buf}[{off}]; else fail(err, kid, {ERR_OUT_OF_BOUNDS});"
        ));
        self.indent -= 1;
        self.line("}");
        Ok(r)
    }
}

/// A constant folded on the host: its value, and whether it reads an
/// attribute or a dim (then it goes in `F`, so that the source stays the
/// same for every binding).
#[derive(Clone, Copy)]
pub(super) struct Folded {
    value: f64,
    bound: bool,
}

impl Gen<'_> {
    /// `e` computed in f64 with the interpreter's semantics where it reads
    /// no variable, tensor or reduction; `None` otherwise, or where the
    /// kernel must report an error (an integer division by zero) or an
    /// integer overflows.
    fn fold(&self, e: &Expr) -> Option<Folded> {
        if e.ty == Type::Int {
            return self.fold_int(e).map(|(v, bound)| Folded {
                value: v as f64,
                bound,
            });
        }
        let both = |x: Folded, y: Folded, value: f64| Folded {
            value,
            bound: x.bound || y.bound,
        };
        Some(match &e.kind {
            ExprKind::Int(i) => Folded {
                value: *i as f64,
                bound: false,
            },
            ExprKind::Real(r) => Folded {
                value: *r,
                bound: false,
            },
            ExprKind::Attr(a) => Folded {
                value: self.b.attrs[a.0 as usize].as_f64(),
                bound: true,
            },
            ExprKind::Unary(UnOp::Neg, a) => {
                let x = self.fold(a)?;
                Folded {
                    value: -x.value,
                    ..x
                }
            }
            ExprKind::Binary(op, a, c) => {
                let (x, y) = (self.fold(a)?, self.fold(c)?);
                let (p, q) = (x.value, y.value);
                match op {
                    BinOp::Add => both(x, y, p + q),
                    BinOp::Sub => both(x, y, p - q),
                    BinOp::Mul => both(x, y, p * q),
                    BinOp::Div => both(x, y, p / q),
                    BinOp::FloorDiv => both(x, y, (p / q).floor()),
                    BinOp::Mod => both(x, y, p - q * (p / q).floor()),
                    _ => return None,
                }
            }
            ExprKind::Call(Builtin::Select, args) => {
                let c = self.fold(&args[0])?;
                let x = self.fold(&args[if c.value != 0.0 { 1 } else { 2 }])?;
                both(c, x, x.value)
            }
            ExprKind::Call(f, args) => {
                let mut bound = false;
                let mut v = Vec::with_capacity(args.len());
                for a in args {
                    let x = self.fold(a)?;
                    bound |= x.bound;
                    v.push(x.value);
                }
                Folded {
                    value: f.eval(&v),
                    bound,
                }
            }
            _ => return None,
        })
    }

    /// An integer expression of literals, dims and attributes (the
    /// interpreter's `eval_int`), and whether it reads a dim or attribute.
    fn fold_int(&self, e: &Expr) -> Option<(i64, bool)> {
        Some(match &e.kind {
            ExprKind::Int(i) => (*i, false),
            ExprKind::Dim(d) => (self.b.dims[d.0 as usize], true),
            ExprKind::Attr(a) => (self.b.attrs[a.0 as usize].as_f64() as i64, true),
            ExprKind::Unary(UnOp::Neg, a) if a.ty == Type::Int => {
                let (x, b) = self.fold_int(a)?;
                (x.checked_neg()?, b)
            }
            ExprKind::Binary(op, a, c)
                if e.ty == Type::Int && a.ty == Type::Int && c.ty == Type::Int =>
            {
                let ((x, p), (y, q)) = (self.fold_int(a)?, self.fold_int(c)?);
                let v = match op {
                    BinOp::Add => x.checked_add(y)?,
                    BinOp::Sub => x.checked_sub(y)?,
                    BinOp::Mul => x.checked_mul(y)?,
                    _ => return None,
                };
                (v, p || q)
            }
            _ => return None,
        })
    }
}

/// `r` as a C `float` literal (`1.0f`, `(-2.5e-5f)`): the shortest decimal
/// that reads back as `r` rounded to f32, so the kernel computes with the
/// f32 nearest the spec's constant. `r` must be finite in f32.
pub(super) fn float_literal(r: f64) -> String {
    let f = r as f32;
    debug_assert!(f.is_finite(), "{r} has no f32 literal");
    if f.is_sign_negative() {
        format!("({f:?}f)")
    } else {
        format!("{f:?}f")
    }
}
