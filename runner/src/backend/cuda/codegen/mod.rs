//! CUDA C from a TDL spec: the GPU counterpart of the CPU's compiled
//! evaluator.
//!
//! Takes a bound op ([`tdl::Binding`]), one worker's [`Window`] and the
//! buffer [`Layouts`] of the window (`crate::ops::window_layouts`, as the CPU's
//! evaluator uses); gives a
//! [`Generated`]: CUDA C source with one `__global__` function per statement
//! (one thread per element of the statement's target, row-major; reduction
//! variables as loops inside the thread) and the parameter array the
//! functions read every number from.
//!
//! Precision: real arithmetic is f32 (`float`, the float built-ins `expf`,
//! `fmaxf`, …, literals `1.0f`), as the tensors are: the `let` temporaries,
//! the real parameters `F`, reduction accumulators, shared-memory partials
//! and split scratch are all `float` (TDL has no f64 type, so no spec asks
//! for more). Only index arithmetic is integer (`long long`). Sums are
//! compensated (Neumaier's variant of Kahan summation) in each thread's
//! serial loop, then combined pairwise by the block's tree, so a long
//! reduction loses no more than a few ulps of its terms' magnitude; the
//! interpreter computes in f64, and `runner/tests/cuda_emulated.rs` states
//! the tolerance between them.
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

use tdl::{BinOp, Binding, Builtin, Expr, ExprKind, TensorRef};

use crate::backend::Window;
use crate::ops::{KernelError, Layouts};

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
    /// one block per element combines them (`s<i>`); `scratch` floats.
    Split {
        /// Blocks per element.
        parts: usize,
        /// Scratch floats the partials need.
        scratch: usize,
    },
}

/// Threads per block of a one-thread-per-element kernel (thread-mode
/// statements, region copies).
pub const BLOCK: u32 = 256;

/// One parameter of every generated kernel function, in the order of
/// [`Generated::params`]: the signature is written from it, and the backend
/// passes its arguments by it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Param {
    /// Input `i`'s buffer (`f32`, the window's region of the tensor).
    Input(usize),
    /// Output `o`'s buffer (`f32`, the window's box).
    Output(usize),
    /// `let` temporary `l` (`f32`, its layout's box).
    Local(usize),
    /// The integer parameters `P` ([`Generated::ints`]).
    Ints,
    /// The real parameters `F` ([`Generated::reals`], `f32`).
    Reals,
    /// `f32` scratch for split partials ([`Generated::scratch`] elements).
    Scratch,
    /// The device error word: `int[2]`, code then kernel id.
    ErrorWord,
    /// The kernel id written with an error, by value (`int`).
    KernelId,
}

impl Param {
    /// The parameter as the kernel declares it.
    pub fn declaration(self) -> String {
        match self {
            Param::Input(i) => format!("const float* __restrict__ in{i}"),
            Param::Output(o) => format!("float* out{o}"),
            Param::Local(l) => format!("float* loc{l}"),
            Param::Ints => "const i64* __restrict__ P".into(),
            Param::Reals => "const float* __restrict__ F".into(),
            Param::Scratch => "float* scr".into(),
            Param::ErrorWord => "int* err".into(),
            Param::KernelId => "int kid".into(),
        }
    }
}

/// One kernel launch: the function, its blocks and threads per block (x
/// only, no dynamic shared memory).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launch {
    /// The `__global__` function's name.
    pub function: String,
    /// Blocks in the grid.
    pub blocks: u32,
    /// Threads per block.
    pub threads: u32,
}

impl Launch {
    /// One thread per element of `n`, [`BLOCK`] threads per block.
    pub fn per_element(function: &str, n: usize) -> Launch {
        Launch {
            function: function.to_string(),
            blocks: (n as u64).div_ceil(BLOCK as u64) as u32,
            threads: BLOCK,
        }
    }

    /// One block of [`REDUCE_THREADS`] per element of `n`.
    fn per_block(function: String, n: usize) -> Launch {
        Launch {
            function,
            blocks: n as u32,
            threads: REDUCE_THREADS,
        }
    }
}

/// Kernel source plus the numbers it reads (see the module doc).
#[derive(Clone, Debug)]
pub struct Generated {
    /// CUDA C source; functions `s0`, `s1`, … in statement order.
    pub source: String,
    /// Every function's parameters, in order.
    pub params: Vec<Param>,
    /// Integer parameters (`P`).
    pub ints: Vec<i64>,
    /// Real parameters (`F`), as the kernels read them.
    pub reals: Vec<f32>,
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
__device__ __forceinline__ float sgn(float x) { return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f); }
__device__ __forceinline__ float sigm(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float maxr(float a, float b) { return fmaxf(a, b); }
__device__ __forceinline__ float minr(float a, float b) { return fminf(a, b); }
// Compensated summation (Neumaier): s + c is the running sum, c the low
// part the f32 additions into s lost; kfin gives s + c, or s once s is
// infinite or NaN (c is then meaningless).
__device__ __forceinline__ void ksum(float& s, float& c, float x) {
  float t = s + x;
  c += fabsf(s) >= fabsf(x) ? (s - t) + x : (x - t) + s;
  s = t;
}
__device__ __forceinline__ float kfin(float s, float c) { return fabsf(s) <= 3.4028235e38f ? s + c : s; }
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
        target: None,
    };
    let spec = &b.spec;
    let mut source = String::from(PRELUDE);
    let mut stmts = Vec::new();
    // Signature: every input, output and local (float).
    let params: Vec<Param> = (0..spec.inputs.len())
        .map(Param::Input)
        .chain((0..spec.outputs.len()).map(Param::Output))
        .chain((0..spec.locals.len()).map(Param::Local))
        .chain([
            Param::Ints,
            Param::Reals,
            Param::Scratch,
            Param::ErrorWord,
            Param::KernelId,
        ])
        .collect();
    let sig = params
        .iter()
        .map(|p| p.declaration())
        .collect::<Vec<_>>()
        .join(", ");
    for (si, s) in spec.stmts.iter().enumerate() {
        let (lo, ext) = g.layout(s.target);
        let (lo, ext) = (lo.to_vec(), ext.to_vec());
        let n: usize = ext.iter().product();
        g.target = Some((s.vars.clone(), lo.clone(), ext.clone()));
        g.body.clear();
        g.tmp = 0;
        g.hoisted.clear();
        // Variables the statement's target does not bind are declared so a
        // stray reference compiles (their value is never read).
        let unbound: Vec<usize> = (0..spec.vars.len())
            .filter(|&v| !s.vars.iter().any(|x| x.0 as usize == v))
            .collect();
        let body = flatten::flatten(&s.body);
        let mut reduces = Vec::new();
        hoistable(&body, &mut reduces);
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
                "  i64 t = blockIdx.x / {parts};\n  i64 part = blockIdx.x % {parts};\n  if (t >= {total}) return;\n  i64 r = t;\n  __shared__ float red[{REDUCE_THREADS}];"
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
            let _ = writeln!(g.body, "  __shared__ float red[{REDUCE_THREADS}];");
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
        let val = g.real(&body)?;
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
        params,
        ints: g.ints,
        reals: g.reals,
        stmts,
    })
}

impl Generated {
    /// The launches that run the op, in order: per statement with elements,
    /// a split statement's partials kernel `p<i>` (one block per part of each
    /// element) then its combining kernel `s<i>` (one block per element), a
    /// block-mode statement's `s<i>` one block per element, a thread-mode
    /// one one thread per element.
    pub fn launches(&self) -> Vec<Launch> {
        let mut v = Vec::new();
        for (i, &(_, n, mode)) in self.stmts.iter().enumerate() {
            if n == 0 {
                continue;
            }
            let s = format!("s{i}");
            match mode {
                Mode::Split { parts, .. } => {
                    v.push(Launch::per_block(format!("p{i}"), n * parts));
                    v.push(Launch::per_block(s, n));
                }
                Mode::Block => v.push(Launch::per_block(s, n)),
                Mode::Thread => v.push(Launch::per_element(&s, n)),
            }
        }
        v
    }

    /// Elements of the scratch buffer ([`Param::Scratch`]): the most any
    /// split statement needs, at least 1.
    pub fn scratch(&self) -> usize {
        self.stmts
            .iter()
            .map(|s| match s.2 {
                Mode::Split { scratch, .. } => scratch,
                _ => 0,
            })
            .max()
            .unwrap_or(0)
            .max(1)
    }
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
    reals: Vec<f32>,
    body: String,
    tmp: usize,
    indent: usize,
    /// Reductions already computed by the block (node → variable).
    hoisted: Vec<(*const Expr, String)>,
    /// The statement being generated: its target's variables and box (lo,
    /// extents); its element's flat index in the box is `t`.
    target: Option<(Vec<tdl::VarId>, Vec<i64>, Vec<usize>)>,
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

    /// `F[k]` holding `v` rounded to f32.
    fn real_param(&mut self, v: f64) -> String {
        self.reals.push(v as f32);
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
}

mod expr;
mod flatten;
mod reduce;
