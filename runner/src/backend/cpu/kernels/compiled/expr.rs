//! Expression compilation: a TDL [`Expr`] of a bound op → a tree of closures
//! over flat buffers.
//!
//! Takes one expression of the ellipsis-expanded spec of a [`Binding`] (so
//! every dim, attribute and variable range is a number); gives a [`V`] (real
//! value) or [`I`] (integer index) that evaluates it for the index variables
//! currently in an [`Env`](super::value::Env), reading tensors from [`Bufs`](super::value::Bufs) at offsets computed
//! from precomputed row-major strides. Constants are folded at compile time;
//! integer index expressions are kept in affine form (`c + Σ coef·var`) where
//! they are one, and a read whose affine indices provably stay inside the
//! tensor (from the variables' ranges) compiles to one multiply-add per
//! variable with no bounds check.
//!
//! Keeps the reference interpreter's semantics exactly (`tdl::interp`): the
//! same integer/real typing rules, rounding of data-dependent indices,
//! short-circuit `select`/`&&`/`||`, zero for out-of-range reads of padded
//! inputs, reductions' identities, half-to-even `round`. Values are computed
//! in f64 and stored as f32 only in outputs. Run-time failures (an
//! out-of-range read of an unpadded tensor, an integer division by zero, a
//! failing opaque function) are recorded in [`Env::err`](super::value::Env::err) and the value is 0.

use tdl::{BinOp, Binding, Builtin, Expr, ExprKind, Index, Semantics, TensorRef, Type, UnOp};

use super::value::{bin, floor_div, reduce, row_major_strides, un, Affine, Fail, Src, I, V};
use crate::ops::{KernelError, Layouts};

/// Compiles the expressions of one bound op.
pub(super) struct Compiler<'b> {
    pub b: &'b Binding,
    /// Range of every variable (elements): it takes values `lo[v]..lo[v] + ranges[v]`.
    pub ranges: Vec<i64>,
    /// First value of every variable (0 unless a window restricts it).
    pub lo: Vec<i64>,
    /// Per tensor (inputs, outputs, locals, by [`TensorRef`]): the global
    /// region its buffer holds, as (origin, extent) per dim.
    pub layouts: Layouts,
    /// Opaque call sites so far (each gets a cache slot in [`Env::opaque`]).
    pub n_opaque: usize,
    /// Tensors defined by the statements compiled so far.
    pub defined: Vec<TensorRef>,
}

impl<'b> Compiler<'b> {
    pub fn new(b: &'b Binding) -> Result<Self, KernelError> {
        let ranges = b
            .spec
            .vars
            .iter()
            .map(|v| {
                b.eval_dim(&v.range)
                    .ok_or_else(|| KernelError::Unsupported {
                        op: b.spec.name.clone(),
                        what: format!("range of `{}` divides by zero", v.name),
                    })
            })
            .collect::<Result<_, _>>()?;
        let lo = vec![0; b.spec.vars.len()];
        let layouts = Layouts::whole(b);
        Ok(Compiler {
            b,
            ranges,
            lo,
            layouts,
            n_opaque: 0,
            defined: Vec::new(),
        })
    }

    pub(super) fn unsupported(&self, what: String) -> KernelError {
        KernelError::Unsupported {
            op: self.b.spec.name.clone(),
            what,
        }
    }

    /// Estimated scalar operations to evaluate `e` once (for parallelism decisions).
    pub fn cost(&self, e: &Expr) -> f64 {
        match &e.kind {
            ExprKind::Int(_)
            | ExprKind::Real(_)
            | ExprKind::Var(_)
            | ExprKind::Dim(_)
            | ExprKind::Attr(_) => 0.5,
            ExprKind::Read { indices, .. } => {
                2.0 + indices
                    .iter()
                    .map(|i| match i {
                        Index::Expr(x) => self.cost(x),
                        _ => 1.0,
                    })
                    .sum::<f64>()
            }
            ExprKind::Unary(_, a) => 1.0 + self.cost(a),
            ExprKind::Binary(_, a, c) => 1.0 + self.cost(a) + self.cost(c),
            ExprKind::Call(_, args) => 4.0 + args.iter().map(|a| self.cost(a)).sum::<f64>(),
            ExprKind::Reduce { vars, body, .. } => {
                let n: f64 = vars
                    .iter()
                    .map(|v| self.ranges[v.0 as usize].max(0) as f64)
                    .product();
                1.0 + n * (1.0 + self.cost(body))
            }
            ExprKind::Opaque { .. } => 1000.0,
        }
    }

    /// Compile an expression in integer (index) position.
    pub fn int(&mut self, e: &Expr) -> Result<I, KernelError> {
        Ok(match &e.kind {
            ExprKind::Int(i) => I::Const(*i),
            ExprKind::Var(v) => I::Affine(Affine {
                c: 0,
                terms: vec![(v.0 as usize, 1)],
            }),
            ExprKind::Dim(d) => I::Const(self.b.dims[d.0 as usize]),
            ExprKind::Attr(a) => I::Const(self.b.attrs[a.0 as usize].as_f64() as i64),
            ExprKind::Unary(UnOp::Neg, a) if a.ty == Type::Int => match self.int(a)? {
                I::Dyn(f) => I::Dyn(Box::new(move |e, b| -f(e, b))),
                x => I::normal(x.affine().expect("not dyn").scale(-1)),
            },
            ExprKind::Unary(UnOp::Not, a) => {
                let f = self.real(a)?.into_fn();
                I::Dyn(Box::new(move |e, b| (f(e, b) == 0.0) as i64))
            }
            ExprKind::Binary(
                op @ (BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Eq | BinOp::Ne),
                a,
                c,
            ) => {
                let (f, g) = (self.real(a)?.into_fn(), self.real(c)?.into_fn());
                macro_rules! cmp {
                    ($op:tt) => {
                        I::Dyn(Box::new(move |e, b| {
                            let x = f(e, b);
                            (x $op g(e, b)) as i64
                        }))
                    };
                }
                match op {
                    BinOp::Lt => cmp!(<),
                    BinOp::Le => cmp!(<=),
                    BinOp::Gt => cmp!(>),
                    BinOp::Ge => cmp!(>=),
                    BinOp::Eq => cmp!(==),
                    _ => cmp!(!=),
                }
            }
            ExprKind::Binary(BinOp::And, a, c) => {
                let (f, g) = (self.real(a)?.into_fn(), self.real(c)?.into_fn());
                I::Dyn(Box::new(move |e, b| {
                    (f(e, b) != 0.0 && g(e, b) != 0.0) as i64
                }))
            }
            ExprKind::Binary(BinOp::Or, a, c) => {
                let (f, g) = (self.real(a)?.into_fn(), self.real(c)?.into_fn());
                I::Dyn(Box::new(move |e, b| {
                    (f(e, b) != 0.0 || g(e, b) != 0.0) as i64
                }))
            }
            ExprKind::Binary(op, a, c) if e.ty == Type::Int => {
                let (x, y) = (self.int(a)?, self.int(c)?);
                self.int_arith(*op, x, y)?
            }
            ExprKind::Call(f @ (Builtin::Max | Builtin::Min), args) if e.ty == Type::Int => {
                let (x, y) = (self.int(&args[0])?, self.int(&args[1])?);
                let is_max = *f == Builtin::Max;
                match (&x, &y) {
                    (I::Const(p), I::Const(q)) => {
                        I::Const(if is_max { *p.max(q) } else { *p.min(q) })
                    }
                    _ => {
                        let (f, g) = (x.into_fn(), y.into_fn());
                        I::Dyn(Box::new(move |e, b| {
                            let (p, q) = (f(e, b), g(e, b));
                            if is_max {
                                p.max(q)
                            } else {
                                p.min(q)
                            }
                        }))
                    }
                }
            }
            ExprKind::Call(Builtin::Select, args) if e.ty == Type::Int => {
                let c = self.real(&args[0])?.into_fn();
                let (x, y) = (self.int(&args[1])?.into_fn(), self.int(&args[2])?.into_fn());
                I::Dyn(Box::new(
                    move |e, b| if c(e, b) != 0.0 { x(e, b) } else { y(e, b) },
                ))
            }
            _ => match self.real_typed(e)? {
                V::Const(x) => I::Const(x.round() as i64),
                V::Dyn(f) => I::Dyn(Box::new(move |e, b| f(e, b).round() as i64)),
            },
        })
    }

    fn int_arith(&self, op: BinOp, x: I, y: I) -> Result<I, KernelError> {
        Ok(match op {
            BinOp::Add | BinOp::Sub => {
                let sign = if op == BinOp::Add { 1 } else { -1 };
                match (x.affine(), y.affine()) {
                    (Some(p), Some(q)) => I::normal(p.add(&q, sign)),
                    _ => {
                        let (f, g) = (x.into_fn(), y.into_fn());
                        I::Dyn(Box::new(move |e, b| {
                            let p = f(e, b);
                            p + sign * g(e, b)
                        }))
                    }
                }
            }
            BinOp::Mul => match (&x, &y) {
                (I::Const(k), other) | (other, I::Const(k)) if other.affine().is_some() => {
                    I::normal(other.affine().expect("checked").scale(*k))
                }
                _ => {
                    let (f, g) = (x.into_fn(), y.into_fn());
                    I::Dyn(Box::new(move |e, b| {
                        let p = f(e, b);
                        p * g(e, b)
                    }))
                }
            },
            BinOp::FloorDiv | BinOp::Mod => {
                let is_div = op == BinOp::FloorDiv;
                let apply = move |p: i64, q: i64| {
                    if is_div {
                        floor_div(p, q)
                    } else {
                        p - q * floor_div(p, q)
                    }
                };
                match (&x, &y) {
                    (I::Const(p), I::Const(q)) if *q != 0 => I::Const(apply(*p, *q)),
                    _ => {
                        let (f, g) = (x.into_fn(), y.into_fn());
                        I::Dyn(Box::new(move |e, b| {
                            let p = f(e, b);
                            let q = g(e, b);
                            if q == 0 {
                                e.fail(Fail::DivByZero);
                                return 0;
                            }
                            apply(p, q)
                        }))
                    }
                }
            }
            other => return Err(self.unsupported(format!("integer operator `{}`", other.symbol()))),
        })
    }

    /// A reduction's variables with their ranges: `(var, lo, extent)`.
    pub fn reduction_ranges(&self, vars: &[tdl::VarId]) -> Vec<(usize, i64, i64)> {
        vars.iter()
            .map(|v| {
                let v = v.0 as usize;
                (v, self.lo[v], self.ranges[v])
            })
            .collect()
    }

    /// Compile an expression in value position.
    pub fn real(&mut self, e: &Expr) -> Result<V, KernelError> {
        if e.ty == Type::Int {
            return Ok(match self.int(e)? {
                I::Const(c) => V::Const(c as f64),
                I::Affine(a) => V::Dyn(Box::new(move |e, _| a.eval(e) as f64)),
                I::Dyn(f) => V::Dyn(Box::new(move |e, b| f(e, b) as f64)),
            });
        }
        self.real_typed(e)
    }

    /// Value position, ignoring the static type (the interpreter's `eval`
    /// once past its integer shortcut).
    fn real_typed(&mut self, e: &Expr) -> Result<V, KernelError> {
        Ok(match &e.kind {
            ExprKind::Int(i) => V::Const(*i as f64),
            ExprKind::Real(r) => V::Const(*r),
            ExprKind::Attr(a) => V::Const(self.b.attrs[a.0 as usize].as_f64()),
            ExprKind::Var(_) | ExprKind::Dim(_) => match self.int(e)? {
                I::Const(c) => V::Const(c as f64),
                i => {
                    let f = i.into_fn();
                    V::Dyn(Box::new(move |e, b| f(e, b) as f64))
                }
            },
            ExprKind::Read { tensor, indices } => self.read(*tensor, indices)?,
            ExprKind::Unary(UnOp::Neg, a) => un(self.real(a)?, |x| -x),
            ExprKind::Unary(UnOp::Not, a) => un(self.real(a)?, |x| (x == 0.0) as i64 as f64),
            ExprKind::Binary(op, a, c) => match op {
                BinOp::Add => bin(self.real(a)?, self.real(c)?, |x, y| x + y),
                BinOp::Sub => bin(self.real(a)?, self.real(c)?, |x, y| x - y),
                BinOp::Mul => bin(self.real(a)?, self.real(c)?, |x, y| x * y),
                BinOp::Div => bin(self.real(a)?, self.real(c)?, |x, y| x / y),
                BinOp::FloorDiv => bin(self.real(a)?, self.real(c)?, |x, y| (x / y).floor()),
                BinOp::Mod => bin(self.real(a)?, self.real(c)?, |x, y| x - y * (x / y).floor()),
                _ => {
                    let f = self.int(e)?.into_fn();
                    V::Dyn(Box::new(move |e, b| f(e, b) as f64))
                }
            },
            ExprKind::Call(Builtin::Select, args) => {
                let c = self.real(&args[0])?;
                let (x, y) = (self.real(&args[1])?, self.real(&args[2])?);
                match c {
                    V::Const(c) => {
                        if c != 0.0 {
                            x
                        } else {
                            y
                        }
                    }
                    V::Dyn(c) => {
                        let (x, y) = (x.into_fn(), y.into_fn());
                        V::Dyn(Box::new(
                            move |e, b| if c(e, b) != 0.0 { x(e, b) } else { y(e, b) },
                        ))
                    }
                }
            }
            ExprKind::Call(f, args) => {
                let x = self.real(&args[0])?;
                match f.semantics() {
                    Semantics::Unary(g) => un(x, g),
                    Semantics::Binary(g) => bin(x, self.real(&args[1])?, g),
                    Semantics::Select => unreachable!("handled above"),
                }
            }
            ExprKind::Reduce {
                reducer,
                vars,
                body,
            } => {
                let vars = self.reduction_ranges(vars);
                let body = self.real(body)?;
                reduce(*reducer, vars, body)
            }
            ExprKind::Opaque { name, args, index } => self.opaque(name, args, index)?,
        })
    }

    pub(super) fn src(&self, t: TensorRef) -> Result<Src, KernelError> {
        if !matches!(t, TensorRef::Input(_)) && !self.defined.contains(&t) {
            return Err(self.unsupported(format!(
                "`{}` is read before the statement defining it",
                self.b.spec.tensor_name(t)
            )));
        }
        Ok(match t {
            TensorRef::Input(i) => Src::In(i as usize),
            TensorRef::Output(o) => Src::Out(o as usize),
            TensorRef::Local(l) => Src::Loc(l as usize),
        })
    }

    pub(super) fn padded(&self, t: TensorRef) -> bool {
        matches!(t, TensorRef::Input(i) if self.b.spec.inputs[i as usize].padded)
    }

    /// Whether an index provably stays in `lo..hi` over its variables' ranges.
    pub(super) fn within(&self, i: &I, lo: i64, hi: i64) -> bool {
        match self.hull(i) {
            Some(None) => true, // the enclosing loop never runs
            Some(Some((l, h))) => l >= lo && h < hi,
            None => false,
        }
    }

    /// Smallest and largest value of an affine index over the variables'
    /// ranges (`Some(None)` if some range is empty, `None` if not affine).
    pub(super) fn hull(&self, i: &I) -> Option<Option<(i64, i64)>> {
        let a = i.affine()?;
        if a.terms.iter().any(|&(v, _)| self.ranges[v] <= 0) {
            return Some(None);
        }
        let (mut lo, mut hi) = (a.c, a.c);
        for &(v, k) in &a.terms {
            let (x, y) = (k * self.lo[v], k * (self.lo[v] + self.ranges[v] - 1));
            lo += x.min(y);
            hi += x.max(y);
        }
        Some(Some((lo, hi)))
    }

    /// The flat offset into a tensor's buffer of a read at global indices
    /// `idx`, as one affine form, if every index provably stays inside the
    /// region the buffer holds (which lies inside the tensor).
    pub(super) fn window_offset(&self, tensor: TensorRef, idx: &[I]) -> Option<Affine> {
        let (origin, extent) = self.layouts.get(tensor);
        if idx.len() != extent.len() {
            return None;
        }
        let mut off = Affine {
            c: 0,
            terms: vec![],
        };
        for ((i, s), (&o, &e)) in idx
            .iter()
            .zip(row_major_strides(extent))
            .zip(origin.iter().zip(extent))
        {
            if !self.within(i, o, o + e as i64) {
                return None;
            }
            let local = i.affine()?.add(
                &Affine {
                    c: o,
                    terms: vec![],
                },
                -1,
            );
            off = off.add(&local.scale(s as i64), 1);
        }
        Some(off)
    }

    pub(super) fn indices(&mut self, indices: &[Index]) -> Result<Vec<I>, KernelError> {
        indices
            .iter()
            .map(|ix| match ix {
                Index::Expr(x) => self.int(x),
                _ => Err(self.unsupported("`...` or `:` outside an opaque call".into())),
            })
            .collect()
    }

    fn read(&mut self, tensor: TensorRef, indices: &[Index]) -> Result<V, KernelError> {
        let src = self.src(tensor)?;
        let shape = self.b.shape(tensor).to_vec();
        let idx = self.indices(indices)?;
        if idx.len() != shape.len() {
            return Err(self.unsupported(format!(
                "read of `{}` with the wrong rank",
                self.b.spec.tensor_name(tensor)
            )));
        }
        if let Some(off) = self.window_offset(tensor, &idx) {
            let c = off.c;
            let t = off.terms;
            // Offsets are provably in 0..len, so the final cast is exact.
            return Ok(V::Dyn(match t[..] {
                [] => Box::new(move |_, b| b.get(src, c as usize)),
                [(v0, k0)] => Box::new(move |e, b| b.get(src, (c + k0 * e.vars[v0]) as usize)),
                [(v0, k0), (v1, k1)] => Box::new(move |e, b| {
                    b.get(src, (c + k0 * e.vars[v0] + k1 * e.vars[v1]) as usize)
                }),
                [(v0, k0), (v1, k1), (v2, k2)] => Box::new(move |e, b| {
                    b.get(
                        src,
                        (c + k0 * e.vars[v0] + k1 * e.vars[v1] + k2 * e.vars[v2]) as usize,
                    )
                }),
                _ => Box::new(move |e, b| {
                    b.get(
                        src,
                        t.iter().fold(c, |s, &(v, k)| s + k * e.vars[v]) as usize,
                    )
                }),
            }));
        }
        let padded = self.padded(tensor);
        let (origin, extent) = self.layouts.get(tensor);
        let strides = row_major_strides(extent);
        let dims: Vec<(I, i64, i64, i64, usize)> = idx
            .into_iter()
            .zip(&shape)
            .zip(strides.iter().zip(origin.iter().zip(extent)))
            .map(|((i, &n), (&s, (&o, &e)))| (i, n as i64, o, o + e as i64, s))
            .collect();
        Ok(V::Dyn(Box::new(move |e, b| {
            let mut off = 0usize;
            for (i, n, lo, hi, s) in &dims {
                let x = i.eval(e, b);
                if x < 0 || x >= *n {
                    if !padded {
                        let index = dims.iter().map(|d| d.0.eval(e, b)).collect();
                        e.fail(Fail::OutOfBounds { tensor, index });
                    }
                    return 0.0;
                }
                if x < *lo || x >= *hi {
                    // Inside the tensor but outside the region this worker
                    // holds: a codegen bug, reported rather than misread.
                    let index = dims.iter().map(|d| d.0.eval(e, b)).collect();
                    e.fail(Fail::OutOfBounds { tensor, index });
                    return 0.0;
                }
                off += (x - lo) as usize * s;
            }
            b.get(src, off)
        })))
    }
}
