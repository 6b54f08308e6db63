//! Row evaluation: an expression evaluated for a whole run of the innermost
//! target variable at once.
//!
//! Takes an expression of a statement and that statement's innermost
//! variable `rv`; gives a [`RowFn`] that fills `out[t]` with the value at
//! `rv = first + t` (`first` is `rv`'s value in the [`Env`] on entry, and is
//! unchanged on exit). One dynamic call per node then covers a whole row, and
//! the loops inside are plain loops over slices: affine reads become strided
//! copies (or a broadcast when the read does not depend on `rv`),
//! arithmetic and built-ins map over the row, and a reduction evaluates its
//! body as rows, one per value of its variables, and combines them element
//! by element.
//!
//! Nodes whose semantics are per element (`&&`, `||`, reads that may leave
//! their tensor or depend on data, opaque calls, and a `select` whose
//! branches could fail where the condition would not have evaluated them)
//! run the scalar closure of [`super::expr`] once per element, so results
//! are identical to the scalar path and to the interpreter's semantics. A
//! `select` whose branches cannot fail evaluates condition and both
//! branches as rows and picks per element (the same values).

use tdl::{BinOp, Builtin, Expr, ExprKind, Reducer, Semantics, TensorRef, Type, UnOp};

use super::expr::Compiler;
use super::value::{for_each_index, Affine, Bufs, Env, Src, I};
use crate::ops::KernelError;

/// A compiled expression over a row: fills the slice (see the module doc).
pub(super) type RowFn = Box<dyn Fn(&mut Env, &Bufs<'_>, &mut [f64]) + Send + Sync>;

/// A scratch row from the environment's pool.
fn take(e: &mut Env, len: usize) -> Vec<f64> {
    let mut v = e.pool.pop().unwrap_or_default();
    v.clear();
    v.resize(len, 0.0);
    v
}

fn map(a: RowFn, f: impl Fn(f64) -> f64 + Send + Sync + Copy + 'static) -> RowFn {
    Box::new(move |e, b, out| {
        a(e, b, out);
        out.iter_mut().for_each(|x| *x = f(*x));
    })
}

fn zip(a: RowFn, c: RowFn, f: impl Fn(f64, f64) -> f64 + Send + Sync + Copy + 'static) -> RowFn {
    Box::new(move |e, b, out| {
        a(e, b, out);
        let mut tmp = take(e, out.len());
        c(e, b, &mut tmp);
        out.iter_mut().zip(&tmp).for_each(|(x, y)| *x = f(*x, *y));
        e.pool.push(tmp);
    })
}

impl Compiler<'_> {
    /// Compile `e` for rows of variable `rv` (see the module doc).
    pub(super) fn row(&mut self, e: &Expr, rv: usize) -> Result<RowFn, KernelError> {
        if e.ty == Type::Int {
            return Ok(match self.int(e)? {
                I::Const(c) => Box::new(move |_, _, out| out.fill(c as f64)),
                I::Affine(a) => {
                    let k = a.terms.iter().find(|t| t.0 == rv).map_or(0, |t| t.1);
                    Box::new(move |e, _, out| {
                        let base = a.eval(e);
                        out.iter_mut()
                            .enumerate()
                            .for_each(|(t, o)| *o = (base + k * t as i64) as f64);
                    })
                }
                I::Dyn(_) => self.per_element(e, rv)?,
            });
        }
        Ok(match &e.kind {
            ExprKind::Int(i) => {
                let c = *i as f64;
                Box::new(move |_, _, out| out.fill(c))
            }
            ExprKind::Real(r) => {
                let c = *r;
                Box::new(move |_, _, out| out.fill(c))
            }
            ExprKind::Attr(a) => {
                let c = self.b.attrs[a.0 as usize].as_f64();
                Box::new(move |_, _, out| out.fill(c))
            }
            ExprKind::Read { tensor, indices } => match self.safe_offset(*tensor, indices)? {
                Some((src, off)) => read_row(src, off, rv),
                None => self.per_element(e, rv)?,
            },
            ExprKind::Unary(UnOp::Neg, a) => map(self.row(a, rv)?, |x| -x),
            ExprKind::Binary(op, a, c) => {
                let f: fn(f64, f64) -> f64 = match op {
                    BinOp::Add => |x, y| x + y,
                    BinOp::Sub => |x, y| x - y,
                    BinOp::Mul => |x, y| x * y,
                    BinOp::Div => |x, y| x / y,
                    BinOp::FloorDiv => |x, y| (x / y).floor(),
                    BinOp::Mod => |x, y| x - y * (x / y).floor(),
                    BinOp::Lt => |x, y| (x < y) as i64 as f64,
                    BinOp::Le => |x, y| (x <= y) as i64 as f64,
                    BinOp::Gt => |x, y| (x > y) as i64 as f64,
                    BinOp::Ge => |x, y| (x >= y) as i64 as f64,
                    BinOp::Eq => |x, y| (x == y) as i64 as f64,
                    BinOp::Ne => |x, y| (x != y) as i64 as f64,
                    // Short-circuit: per element.
                    BinOp::And | BinOp::Or => return self.per_element(e, rv),
                };
                zip(self.row(a, rv)?, self.row(c, rv)?, f)
            }
            ExprKind::Call(Builtin::Select, args)
                if self.infallible(&args[1])? && self.infallible(&args[2])? =>
            {
                // Both branches are safe to evaluate everywhere: whole rows.
                let (c, x, y) = (
                    self.row(&args[0], rv)?,
                    self.row(&args[1], rv)?,
                    self.row(&args[2], rv)?,
                );
                Box::new(move |e, b, out| {
                    c(e, b, out);
                    let mut a = take(e, out.len());
                    let mut z = take(e, out.len());
                    x(e, b, &mut a);
                    y(e, b, &mut z);
                    for ((o, a), z) in out.iter_mut().zip(&a).zip(&z) {
                        *o = if *o != 0.0 { *a } else { *z };
                    }
                    e.pool.push(a);
                    e.pool.push(z);
                })
            }
            ExprKind::Call(Builtin::Select, _) => self.per_element(e, rv)?,
            ExprKind::Call(f, args) => {
                let x = self.row(&args[0], rv)?;
                match f.semantics() {
                    Semantics::Unary(g) => map(x, g),
                    Semantics::Binary(g) => zip(x, self.row(&args[1], rv)?, g),
                    Semantics::Select => self.per_element(e, rv)?,
                }
            }
            ExprKind::Reduce {
                reducer,
                vars,
                body,
            } => {
                let vars = self.reduction_ranges(vars);
                let body = self.row(body, rv)?;
                match reducer {
                    Reducer::Sum => reduce_row(vars, body, 0.0, |a, x| a + x),
                    Reducer::Prod => reduce_row(vars, body, 1.0, |a, x| a * x),
                    Reducer::Max => reduce_row(vars, body, f64::NEG_INFINITY, f64::max),
                    Reducer::Min => reduce_row(vars, body, f64::INFINITY, f64::min),
                }
            }
            _ => self.per_element(e, rv)?,
        })
    }

    /// Whether evaluating `e` can never record a failure, so that it may
    /// be evaluated where a `select` would not have evaluated it: every read
    /// provably inside its tensor and buffer (affine indices), no integer
    /// division or modulo, no opaque call.
    fn infallible(&mut self, e: &Expr) -> Result<bool, KernelError> {
        let risky = e.any(&mut |x| {
            matches!(x.kind, ExprKind::Opaque { .. })
                || (x.ty == Type::Int
                    && matches!(x.kind, ExprKind::Binary(BinOp::FloorDiv | BinOp::Mod, ..)))
        });
        if risky {
            return Ok(false);
        }
        let mut reads = Vec::new();
        reads_of(e, &mut reads);
        for (tensor, indices) in reads {
            if self.safe_offset(tensor, indices)?.is_none() {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The scalar closure, once per element of the row.
    fn per_element(&mut self, e: &Expr, rv: usize) -> Result<RowFn, KernelError> {
        let f = self.real(e)?.into_fn();
        Ok(Box::new(move |e, b, out| {
            let first = e.vars[rv];
            for (t, o) in out.iter_mut().enumerate() {
                e.vars[rv] = first + t as i64;
                *o = f(e, b);
            }
            e.vars[rv] = first;
        }))
    }

    /// The flat offset of a read as one affine form, if every index provably
    /// stays inside the tensor and the region its buffer holds.
    fn safe_offset(
        &mut self,
        tensor: TensorRef,
        indices: &[tdl::Index],
    ) -> Result<Option<(Src, Affine)>, KernelError> {
        let src = self.src(tensor)?;
        let idx = self.indices(indices)?;
        Ok(self.window_offset(tensor, &idx).map(|off| (src, off)))
    }
}

/// Every tensor read in `e`: (tensor, its indices).
fn reads_of<'e>(e: &'e Expr, out: &mut Vec<(TensorRef, &'e [tdl::Index])>) {
    if let ExprKind::Read { tensor, indices } = &e.kind {
        out.push((*tensor, indices));
    }
    e.children().for_each(|c| reads_of(c, out));
}

/// A strided copy (or broadcast) of a provably in-bounds affine read.
fn read_row(src: Src, off: Affine, rv: usize) -> RowFn {
    let k = off.terms.iter().find(|t| t.0 == rv).map_or(0, |t| t.1);
    let rest = Affine {
        c: off.c,
        terms: off.terms.into_iter().filter(|t| t.0 != rv).collect(),
    };
    Box::new(move |e, b, out| {
        let base = rest.eval(e) + k * e.vars[rv];
        macro_rules! copy {
            ($s:expr) => {{
                let s = $s;
                if k == 0 {
                    out.fill(s[base as usize] as f64);
                } else if k == 1 {
                    let (b, n) = (base as usize, out.len());
                    out.iter_mut()
                        .zip(&s[b..b + n])
                        .for_each(|(o, x)| *o = *x as f64);
                } else {
                    for (t, o) in out.iter_mut().enumerate() {
                        *o = s[(base + k * t as i64) as usize] as f64;
                    }
                }
            }};
        }
        match src {
            Src::In(i) => copy!(b.inputs[i]),
            Src::Out(o) => copy!(b.outputs[o]),
            Src::Loc(l) => copy!(b.locals[l]),
        }
    })
}

fn reduce_row(
    vars: Vec<(usize, i64, i64)>,
    body: RowFn,
    id: f64,
    f: impl Fn(f64, f64) -> f64 + Send + Sync + Copy + 'static,
) -> RowFn {
    if vars.iter().any(|&(_, _, n)| n <= 0) {
        return Box::new(move |_, _, out| out.fill(id));
    }
    Box::new(move |e, b, out| {
        out.fill(id);
        let mut tmp = take(e, out.len());
        for_each_index(e, &vars, |e| {
            body(e, b, &mut tmp);
            out.iter_mut().zip(&tmp).for_each(|(a, x)| *a = f(*a, *x));
        });
        e.pool.push(tmp);
    })
}
