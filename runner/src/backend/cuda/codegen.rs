//! CUDA C from a TDL spec: the GPU counterpart of the CPU's compiled
//! evaluator (`kernels::compiled`).
//!
//! Takes a bound op ([`tdl::Binding`]), one worker's [`Window`] and the
//! buffer [`Layouts`] the CPU evaluator computes for it; gives a
//! [`Generated`]: CUDA C source with one `__global__` function per statement
//! (one thread per element of the statement's target, row-major; reduction
//! variables as loops inside the thread, in f64 as the interpreter does) and
//! the parameter array the functions read every number from.
//!
//! The source depends only on the spec's structure: dims, attributes,
//! window boxes, buffer origins and extents are all entries of the `long
//! long` parameter array `P` (floats in `F`), so one NVRTC compilation
//! serves every instance, rank and window of an op.
//!
//! Semantics follow the interpreter (`tdl::interp`): integer index
//! arithmetic with floor division, comparisons on reals, `select` and
//! `&&`/`||` evaluate only what they need, reads of a `padded` input outside
//! its shape give 0, any other read outside a tensor or a buffer sets the
//! error word (code 1; code 2 for an integer division by zero; with the
//! kernel's id) that the backend checks at its next synchronisation.
//!
//! Errors: [`KernelError::Unsupported`] for what has no CUDA form (opaque
//! functions over slices); the backend then runs the op on the host.

use std::fmt::Write;

use tdl::{BinOp, Binding, Builtin, Expr, ExprKind, Index, Reducer, TensorRef, Type, UnOp};

use crate::backend::Window;
use crate::kernels::compiled::Layouts;
use crate::kernels::KernelError;

/// Error codes written to the backend's error word.
pub const ERR_OUT_OF_BOUNDS: i32 = 1;
/// An integer division or modulo by zero.
pub const ERR_DIV_BY_ZERO: i32 = 2;

/// Reductions at least this long (iterations per target element) run one
/// block per target element, the block's threads splitting the reduction
/// (a shared-memory tree combines their partials); shorter ones run
/// serially in one thread per element.
pub const BLOCK_REDUCE_MIN: usize = 128;

/// Threads per block of a block-mode statement (a power of two).
pub const REDUCE_THREADS: u32 = 256;

/// A block-mode statement with at most [`SPLIT_TARGETS`] elements whose
/// reductions run at least this many iterations splits each element's
/// reductions over several blocks (a partials kernel, then a combining one):
/// one block per element would leave the GPU idle.
pub const SPLIT_MIN: usize = 1 << 20;

/// See [`SPLIT_MIN`].
pub const SPLIT_TARGETS: usize = 256;

/// How reductions are spread over the GPU (see [`BLOCK_REDUCE_MIN`],
/// [`SPLIT_MIN`]); tests lower the thresholds to exercise every path on
/// small shapes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReduceOptions {
    /// Iterations from which an element's reductions take a block.
    pub block_min: usize,
    /// Iterations from which a small statement's reductions take several
    /// blocks per element.
    pub split_min: usize,
}

impl Default for ReduceOptions {
    fn default() -> Self {
        ReduceOptions {
            block_min: BLOCK_REDUCE_MIN,
            split_min: SPLIT_MIN,
        }
    }
}

/// How one statement runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// One thread per element.
    Thread,
    /// One block of [`REDUCE_THREADS`] per element.
    Block,
    /// `parts` blocks per element compute partial reductions (`p<i>`), then
    /// one block per element combines them (`s<i>`); `scratch` doubles.
    Split {
        /// Blocks per element.
        parts: usize,
        /// Scratch doubles the partials need.
        scratch: usize,
    },
}

/// Kernel source plus the numbers it reads (see the module doc).
#[derive(Clone, Debug)]
pub struct Generated {
    /// CUDA C source; functions `s0`, `s1`, … in statement order.
    pub source: String,
    /// Integer parameters (`P`).
    pub ints: Vec<i64>,
    /// Real parameters (`F`).
    pub reals: Vec<f64>,
    /// Per statement: its target, its target elements, and how it runs.
    pub stmts: Vec<(TensorRef, usize, Mode)>,
}

/// Helpers every generated module starts with.
const PRELUDE: &str = r#"
typedef long long i64;
__device__ __forceinline__ void fail(int* err, int kid, int code) {
  if (atomicCAS(err, 0, code) == 0) err[1] = kid;
}
__device__ __forceinline__ i64 fdiv(i64 x, i64 y, int* err, int kid) {
  if (y == 0) { fail(err, kid, 2); return 0; }
  i64 q = x / y;
  if ((x % y != 0) && ((x < 0) != (y < 0))) q -= 1;
  return q;
}
__device__ __forceinline__ i64 fmod_(i64 x, i64 y, int* err, int kid) {
  return x - y * fdiv(x, y, err, kid);
}
__device__ __forceinline__ double sgn(double x) { return x > 0.0 ? 1.0 : (x < 0.0 ? -1.0 : 0.0); }
__device__ __forceinline__ double sigm(double x) { return 1.0 / (1.0 + exp(-x)); }
__device__ __forceinline__ double maxr(double a, double b) { return fmax(a, b); }
__device__ __forceinline__ double minr(double a, double b) { return fmin(a, b); }
"#;

/// Generate the kernels of one window of a bound op (see the module doc);
/// `opts` says when reductions take a block or several per element.
///
/// Errors: [`KernelError::Unsupported`] for an opaque function or a slice
/// read; the caller falls back to the host.
pub fn generate(
    b: &Binding,
    window: &Window,
    layouts: &Layouts,
    opts: ReduceOptions,
) -> Result<Generated, KernelError> {
    let mut g = Gen {
        b,
        window,
        layouts,
        ints: Vec::new(),
        reals: Vec::new(),
        body: String::new(),
        tmp: 0,
        indent: 1,
        hoisted: Vec::new(),
    };
    let spec = &b.spec;
    let mut source = String::from(PRELUDE);
    let mut stmts = Vec::new();
    // Signature: every input (float), output (float) and local (double).
    let mut params = Vec::new();
    for i in 0..spec.inputs.len() {
        params.push(format!("const float* __restrict__ in{i}"));
    }
    for o in 0..spec.outputs.len() {
        params.push(format!("float* out{o}"));
    }
    for l in 0..spec.locals.len() {
        params.push(format!("double* loc{l}"));
    }
    params.push("const i64* __restrict__ P".into());
    params.push("const double* __restrict__ F".into());
    params.push("double* scr".into());
    params.push("int* err".into());
    params.push("int kid".into());
    let sig = params.join(", ");
    for (si, s) in spec.stmts.iter().enumerate() {
        let (lo, ext) = g.layout(s.target);
        let (lo, ext) = (lo.to_vec(), ext.to_vec());
        let n: usize = ext.iter().product();
        g.body.clear();
        g.tmp = 0;
        g.hoisted.clear();
        // Variables the statement's target does not bind are declared so a
        // stray reference compiles (their value is never read).
        let unbound: Vec<usize> = (0..spec.vars.len())
            .filter(|&v| !s.vars.iter().any(|x| x.0 as usize == v))
            .collect();
        let mut reduces = Vec::new();
        hoistable(&s.body, &mut reduces);
        let longest = reduces.iter().map(|r| g.iterations(r)).max().unwrap_or(0);
        // Work per element counts the reductions nested inside (a loss
        // summing a row-wise reduction over all rows).
        let work = reduces.iter().map(|r| g.work(r)).max().unwrap_or(0);
        let block = longest >= opts.block_min.max(1) as u64;
        let parts = if block && n <= SPLIT_TARGETS && work >= opts.split_min.max(1) as u64 {
            // Enough blocks to fill the GPU, each thread ≥ 1 outer iteration.
            (longest / REDUCE_THREADS as u64).clamp(2, 1024) as usize
        } else {
            1
        };
        let mode = if parts > 1 {
            Mode::Split {
                parts,
                scratch: reduces.len() * n * parts,
            }
        } else if block {
            Mode::Block
        } else {
            Mode::Thread
        };
        if parts > 1 {
            // The partials kernel `p<i>`: block b computes part b % parts of
            // element b / parts.
            g.body.clear();
            let total = g.int_param(n as i64);
            let _ = writeln!(
                g.body,
                "  i64 t = blockIdx.x / {parts};\n  i64 part = blockIdx.x % {parts};\n  if (t >= {total}) return;\n  i64 r = t;\n  __shared__ double red[{REDUCE_THREADS}];"
            );
            g.decode(&s.vars, &lo, &ext);
            for (k, e) in reduces.iter().enumerate() {
                let part = g.block_reduce(e, Some(parts))?;
                let at = format!("(({k} * {total} + t) * {parts} + part)");
                g.line(&format!("if (threadIdx.x == 0) scr[{at}] = {part};"));
            }
            let _ = write!(
                source,
                "{}",
                kernel(&format!("p{si}"), &sig, &unbound, &g.body)
            );
            g.body.clear();
            g.tmp = 0;
        }
        let total = g.int_param(n as i64);
        let index = if block {
            "blockIdx.x"
        } else {
            "(i64)blockIdx.x * blockDim.x + threadIdx.x"
        };
        let _ = writeln!(
            g.body,
            "  i64 t = {index};\n  if (t >= {total}) return;\n  i64 r = t;"
        );
        g.decode(&s.vars, &lo, &ext);
        if block {
            let _ = writeln!(g.body, "  __shared__ double red[{REDUCE_THREADS}];");
            for (k, e) in reduces.iter().enumerate() {
                let name = if parts > 1 {
                    g.combine_parts(e, &format!("(({k} * {total} + t) * {parts})"), parts)?
                } else {
                    g.block_reduce(e, None)?
                };
                g.hoisted.push((*e as *const Expr, name));
            }
            let _ = writeln!(g.body, "  if (threadIdx.x != 0) return;");
        }
        let val = g.real(&s.body)?;
        let store = match s.target {
            TensorRef::Output(o) => format!("  out{o}[t] = (float)({val});"),
            TensorRef::Local(l) => format!("  loc{l}[t] = {val};"),
            TensorRef::Input(_) => {
                return Err(g.unsupported("a statement assigns an input".into()));
            }
        };
        let _ = writeln!(g.body, "{store}");
        let _ = write!(
            source,
            "{}",
            kernel(&format!("s{si}"), &sig, &unbound, &g.body)
        );
        stmts.push((s.target, n, mode));
    }
    Ok(Generated {
        source,
        ints: g.ints,
        reals: g.reals,
        stmts,
    })
}

/// One `__global__` function: `unbound` variables declared (zero), then `body`.
fn kernel(name: &str, sig: &str, unbound: &[usize], body: &str) -> String {
    let mut decl = String::new();
    for v in unbound {
        let _ = writeln!(decl, "  i64 v{v} = 0; (void)v{v};");
    }
    format!("extern \"C\" __global__ void {name}({sig}) {{\n{decl}{body}}}\n")
}

/// The reductions of `e` evaluated unconditionally (not under `select`,
/// `&&`, `||`, another reduction or an index): the ones a block can compute
/// cooperatively before the rest of the expression.
fn hoistable<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
    match &e.kind {
        ExprKind::Reduce { .. } => out.push(e),
        ExprKind::Unary(_, a) => hoistable(a, out),
        ExprKind::Binary(op, a, c) if !matches!(op, BinOp::And | BinOp::Or) => {
            hoistable(a, out);
            hoistable(c, out);
        }
        ExprKind::Call(f, args) if *f != Builtin::Select => {
            args.iter().for_each(|a| hoistable(a, out))
        }
        _ => {}
    }
}

/// Every reduction in `e` not nested in another (anywhere, conditional or not).
fn reductions_in<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
    match &e.kind {
        ExprKind::Reduce { .. } => out.push(e),
        ExprKind::Opaque { .. } => {}
        _ => e.children().for_each(|c| reductions_in(c, out)),
    }
}

struct Gen<'a> {
    b: &'a Binding,
    window: &'a Window,
    layouts: &'a Layouts,
    ints: Vec<i64>,
    reals: Vec<f64>,
    body: String,
    tmp: usize,
    indent: usize,
    /// Reductions already computed by the block (node → variable).
    hoisted: Vec<(*const Expr, String)>,
}

impl Gen<'_> {
    fn unsupported(&self, what: String) -> KernelError {
        KernelError::Unsupported {
            op: self.b.spec.name.clone(),
            what,
        }
    }

    fn layout(&self, t: TensorRef) -> (&[i64], &[usize]) {
        self.layouts.get(t)
    }

    /// `P[k]` holding `v`.
    fn int_param(&mut self, v: i64) -> String {
        self.ints.push(v);
        format!("P[{}]", self.ints.len() - 1)
    }

    fn real_param(&mut self, v: f64) -> String {
        self.reals.push(v);
        format!("F[{}]", self.reals.len() - 1)
    }

    fn fresh(&mut self, ty: &str, init: &str) -> String {
        let name = format!("x{}", self.tmp);
        self.tmp += 1;
        self.line(&format!("{ty} {name} = {init};"));
        name
    }

    fn line(&mut self, l: &str) {
        for _ in 0..self.indent {
            self.body.push_str("  ");
        }
        self.body.push_str(l);
        self.body.push('\n');
    }

    /// An integer-valued expression (the interpreter's `eval_int`).
    fn int(&mut self, e: &Expr) -> Result<String, KernelError> {
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
    fn logic(&mut self, op: BinOp, a: &Expr, c: &Expr) -> Result<String, KernelError> {
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
    fn select(
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
    fn real(&mut self, e: &Expr) -> Result<String, KernelError> {
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

    /// Iterations of a reduction node times those of the longest reduction
    /// nested in its body (an estimate of the work per element).
    fn work(&self, e: &Expr) -> u64 {
        let mut inner = 0u64;
        if let ExprKind::Reduce { body, .. } = &e.kind {
            let mut nested = Vec::new();
            reductions_in(body, &mut nested);
            inner = nested.iter().map(|r| self.work(r)).max().unwrap_or(0);
        }
        self.iterations(e).saturating_mul(inner.max(1))
    }

    /// Iterations of a reduction node over the window.
    fn iterations(&self, e: &Expr) -> u64 {
        match &e.kind {
            ExprKind::Reduce { vars, .. } => vars
                .iter()
                .map(|v| {
                    let (l, h) = self.window.vars[v.0 as usize];
                    (h - l).max(0) as u64
                })
                .product(),
            _ => 0,
        }
    }

    /// Decode a statement's target index `r` (innermost dim fastest) into
    /// its variables.
    fn decode(&mut self, vars: &[tdl::VarId], lo: &[i64], ext: &[usize]) {
        for (d, v) in vars.iter().enumerate().rev() {
            let e = self.int_param(ext[d] as i64);
            let l = self.int_param(lo[d]);
            let _ = writeln!(self.body, "  i64 v{} = {l} + r % {e}; r /= {e};", v.0);
        }
    }

    /// The identity and combination of a reducer, in C.
    fn combiner(reducer: Reducer) -> (&'static str, fn(&str, &str) -> String) {
        match reducer {
            Reducer::Sum => ("0.0", |a, b| format!("{a} + {b}")),
            Reducer::Prod => ("1.0", |a, b| format!("{a} * {b}")),
            Reducer::Max => ("(-1.0/0.0)", |a, b| format!("fmax({a}, {b})")),
            Reducer::Min => ("(1.0/0.0)", |a, b| format!("fmin({a}, {b})")),
        }
    }

    /// The shared-memory tree over `acc` of every thread; every thread gets
    /// the result in the returned variable.
    fn tree(&mut self, acc: &str, comb: fn(&str, &str) -> String) -> String {
        self.line(&format!("red[threadIdx.x] = {acc};"));
        self.line("__syncthreads();");
        self.line("for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {");
        self.indent += 1;
        let c = comb("red[threadIdx.x]", "red[threadIdx.x + s]");
        self.line(&format!("if (threadIdx.x < s) red[threadIdx.x] = {c};"));
        self.line("__syncthreads();");
        self.indent -= 1;
        self.line("}");
        let r = self.fresh("double", "red[0]");
        self.line("__syncthreads();");
        r
    }

    /// A split reduction's result: the block combines the `parts` partials
    /// the partials kernel left at `scr[base ..]`.
    fn combine_parts(&mut self, e: &Expr, base: &str, parts: usize) -> Result<String, KernelError> {
        let ExprKind::Reduce { reducer, .. } = &e.kind else {
            return Err(self.unsupported("a split reduction of a non-reduction".into()));
        };
        let (id, comb) = Self::combiner(*reducer);
        let acc = self.fresh("double", id);
        self.line(&format!(
            "for (i64 j = threadIdx.x; j < {parts}; j += blockDim.x) {acc} = {};",
            comb(&acc, &format!("scr[{base} + j]"))
        ));
        Ok(self.tree(&acc, comb))
    }

    /// A reduction computed by the whole block: each thread combines a
    /// strided share of the flattened iterations, then a shared-memory tree
    /// combines the partials; every thread gets the result. With `parts`,
    /// only part `part` of the iterations (a strided share over `parts`
    /// blocks).
    fn block_reduce(&mut self, e: &Expr, parts: Option<usize>) -> Result<String, KernelError> {
        let ExprKind::Reduce {
            reducer,
            vars,
            body,
        } = &e.kind
        else {
            return Err(self.unsupported("a block reduction of a non-reduction".into()));
        };
        let (id, comb) = Self::combiner(*reducer);
        let total = self.iterations(e);
        let n = self.int_param(total as i64);
        let acc = self.fresh("double", id);
        let (start, step) = match parts {
            Some(p) => (
                "part * blockDim.x + threadIdx.x".to_string(),
                format!("(i64){p} * blockDim.x"),
            ),
            None => ("threadIdx.x".to_string(), "blockDim.x".to_string()),
        };
        self.line(&format!("for (i64 f = {start}; f < {n}; f += {step}) {{"));
        self.indent += 1;
        self.line("i64 q = f;");
        for v in vars.iter().rev() {
            let (lo, hi) = self.window.vars[v.0 as usize];
            let (l, x) = (self.int_param(lo), self.int_param((hi - lo).max(0)));
            self.line(&format!("i64 v{} = {l} + q % {x}; q /= {x};", v.0));
        }
        let x = self.real(body)?;
        let c = comb(&acc, &x);
        self.line(&format!("{acc} = {c};"));
        self.indent -= 1;
        self.line("}");
        Ok(self.tree(&acc, comb))
    }

    fn reduce(
        &mut self,
        reducer: Reducer,
        vars: &[tdl::VarId],
        body: &Expr,
    ) -> Result<String, KernelError> {
        let id = match reducer {
            Reducer::Sum => "0.0",
            Reducer::Prod => "1.0",
            Reducer::Max => "(-1.0/0.0)",
            Reducer::Min => "(1.0/0.0)",
        };
        let acc = self.fresh("double", id);
        let mut opened = 0;
        for v in vars {
            let (lo, hi) = self.window.vars[v.0 as usize];
            let (l, h) = (self.int_param(lo), self.int_param(hi));
            self.line(&format!("for (i64 v{0} = {l}; v{0} < {h}; ++v{0}) {{", v.0));
            self.indent += 1;
            opened += 1;
        }
        let x = self.real(body)?;
        let comb = match reducer {
            Reducer::Sum => format!("{acc} += {x};"),
            Reducer::Prod => format!("{acc} *= {x};"),
            Reducer::Max => format!("{acc} = fmax({acc}, {x});"),
            Reducer::Min => format!("{acc} = fmin({acc}, {x});"),
        };
        self.line(&comb);
        for _ in 0..opened {
            self.indent -= 1;
            self.line("}");
        }
        Ok(acc)
    }

    /// A read of `tensor` at `indices`: bounds against the tensor's shape
    /// (padded inputs read 0 outside it) and against the buffer's box.
    fn read(&mut self, tensor: TensorRef, indices: &[Index]) -> Result<String, KernelError> {
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
