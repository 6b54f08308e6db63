//! The generic kernel: an op's TDL spec compiled once per op instance into
//! loop nests over flat f32 buffers.
//!
//! Takes a [`Binding`] (expanded spec, concrete dims, attributes, shapes);
//! gives a [`KernelImpl`] that runs the spec's statements in order. Each
//! statement is a loop nest over its target's dims (row-major, innermost dim
//! in a tight loop) evaluating the body compiled by `expr.rs` (closures over
//! precomputed strides: no AST walking, no hash lookups per element), one
//! row of the innermost dim at a time (`row.rs`: one dynamic call per node per
//! row, plain loops inside). `let`
//! temporaries are materialised whole in f64 before the statements that read
//! them, outputs are written as f32. A statement with enough work is split
//! into contiguous chunks of its flat target run in parallel on rayon; the
//! result does not depend on the split (each element is computed alone).
//!
//! **Windows** (codegen's local compute with global coordinates, Tofu §5):
//! [`compile_window`] compiles the op for one worker's share only: every
//! index variable ranges over the [`Window`]'s box of global values, each
//! input buffer holds one global region of its tensor (origin + extent),
//! each output buffer holds the box of its coordinate variables, and each
//! `let` temporary is computed over the hull of the elements the later
//! statements read from it (the layouts of [`crate::ops::window_layouts`],
//! which the CUDA backend's kernels use too). Index expressions keep their global meaning
//! (padding, positions, comparisons), so a share computes exactly the
//! elements the whole op would, or its partial result when a reduction
//! variable is cut (case 2).
//!
//! Errors at compile time ([`KernelError::Unsupported`]): a read of a tensor
//! before its defining statement, an unknown opaque function, a variable
//! range that disagrees with its target's shape. Errors at run time: the
//! first failure in flat order among the chunks (out-of-range read of an
//! unpadded tensor, integer division by zero, a failing opaque function).

mod expr;
mod opaque;
mod row;
mod value;

use rayon::prelude::*;
use tdl::{Binding, TensorRef};

use super::KernelImpl;
use crate::ops::{window_layouts, KernelError};
use expr::Compiler;
use row::RowFn;
use tdl::{ExprKind, Reducer};
use value::{for_each_index, Bufs, Env, Fail, ValFn};

/// Estimated scalar operations above which a statement runs in parallel.
const PARALLEL_WORK: f64 = 200_000.0;

/// Longest row evaluated at once (elements): rows stay in cache.
const ROW: usize = 512;

/// Where a statement writes.
#[derive(Clone, Copy, Debug)]
enum Target {
    Output(usize),
    Local(usize),
}

struct StmtProg {
    target: Target,
    /// The target's index variables, one per dim.
    vars: Vec<usize>,
    /// The target's shape (the extent of its buffer).
    shape: Vec<usize>,
    /// The first (global) value of each target variable.
    lo: Vec<i64>,
    body: ValFn,
    /// The body over rows of the innermost variable (`None` for a scalar target).
    row: Option<RowFn>,
    /// A scalar target defined by a reduction: its body over rows of the
    /// reduction's last variable.
    scalar: Option<ScalarReduce>,
    /// Estimated scalar operations per element.
    cost: f64,
}

/// A compiled op (see the module doc).
pub struct Program {
    op: String,
    stmts: Vec<StmtProg>,
    local_shapes: Vec<Vec<usize>>,
    /// (name, shape) of every tensor, for error messages.
    names: Vec<(TensorRef, String, Vec<usize>)>,
    n_vars: usize,
    n_opaque: usize,
}

/// Compile a bound op (see the module doc).
pub fn compile(b: &Binding) -> Result<Box<dyn KernelImpl>, KernelError> {
    Ok(Box::new(Program::new(b)?))
}

pub use crate::backend::Window;

/// Compile one worker's share of a bound op (see the module doc). The
/// kernel's buffers are the window's: input `i` holds `window.inputs[i]`,
/// output `o` holds [`Window::output_region`].
///
/// Errors: [`KernelError::Unsupported`] for a window whose rank does not fit
/// the spec, besides those of [`compile`].
pub fn compile_window(b: &Binding, window: &Window) -> Result<Program, KernelError> {
    Program::with_window(b, window)
}

impl Program {
    /// Compile a bound op (see the module doc).
    pub fn new(b: &Binding) -> Result<Program, KernelError> {
        Self::with_window(
            b,
            &Window::whole(b).map_err(|what| KernelError::Unsupported {
                op: b.spec.name.clone(),
                what,
            })?,
        )
    }

    /// Compile one worker's share (see [`compile_window`]).
    pub fn with_window(b: &Binding, window: &Window) -> Result<Program, KernelError> {
        let spec = &b.spec;
        let mut c = Compiler::new(b)?;
        // Checks the window's rank against the spec's.
        let layouts = window_layouts(b, window)?;
        let full = c.ranges.clone();
        for (v, &(l, h)) in window.vars.iter().enumerate() {
            c.lo[v] = l;
            c.ranges[v] = (h - l).max(0);
        }
        let (wlo, wranges) = (c.lo.clone(), c.ranges.clone());
        c.layouts = layouts.clone();
        let mut stmts = Vec::new();
        for s in &spec.stmts {
            let (lo, shape) = match s.target {
                TensorRef::Output(o) => layouts.outputs[o as usize].clone(),
                TensorRef::Local(l) => layouts.locals[l as usize].clone(),
                TensorRef::Input(_) => (vec![], vec![]),
            };
            for ((v, &l), &n) in s.vars.iter().zip(&lo).zip(&shape) {
                c.lo[v.0 as usize] = l;
                c.ranges[v.0 as usize] = n as i64;
            }
            let (target, shape) = match s.target {
                TensorRef::Output(o) => (Target::Output(o as usize), shape),
                TensorRef::Local(l) => (Target::Local(l as usize), shape),
                TensorRef::Input(_) => {
                    return Err(KernelError::Unsupported {
                        op: spec.name.clone(),
                        what: "a statement assigns an input".into(),
                    })
                }
            };
            let vars: Vec<usize> = s.vars.iter().map(|v| v.0 as usize).collect();
            let global = b.shape(s.target);
            let ranges_fit = vars.len() == global.len()
                && vars.iter().zip(global).all(|(&v, &n)| full[v] == n as i64);
            if !ranges_fit {
                return Err(KernelError::Unsupported {
                    op: spec.name.clone(),
                    what: format!(
                        "the variables of the statement defining `{}` do not range over its shape {global:?}",
                        spec.tensor_name(s.target)
                    ),
                });
            }
            let cost = c.cost(&s.body);
            let body = c.real(&s.body)?.into_fn();
            let row = match vars.last() {
                Some(&rv) => Some(c.row(&s.body, rv)?),
                None => None,
            };
            let scalar = match (&s.body.kind, vars.is_empty()) {
                (
                    ExprKind::Reduce {
                        reducer,
                        vars: rvars,
                        body,
                    },
                    true,
                ) => {
                    let ranges = c.reduction_ranges(rvars);
                    match ranges.last() {
                        Some(&(rv, _, _)) => Some(ScalarReduce {
                            reducer: *reducer,
                            row: c.row(body, rv)?,
                            ranges,
                        }),
                        None => None,
                    }
                }
                _ => None,
            };
            c.defined.push(s.target);
            c.lo.clone_from(&wlo);
            c.ranges.clone_from(&wranges);
            stmts.push(StmtProg {
                target,
                vars,
                shape,
                lo,
                body,
                row,
                scalar,
                cost,
            });
        }
        let mut names = Vec::new();
        for (i, t) in spec.inputs.iter().enumerate() {
            names.push((
                TensorRef::Input(i as u32),
                t.name.clone(),
                b.input_shapes[i].clone(),
            ));
        }
        for (i, t) in spec.outputs.iter().enumerate() {
            names.push((
                TensorRef::Output(i as u32),
                t.name.clone(),
                b.output_shapes[i].clone(),
            ));
        }
        for (i, t) in spec.locals.iter().enumerate() {
            names.push((
                TensorRef::Local(i as u32),
                t.name.clone(),
                b.local_shapes[i].clone(),
            ));
        }
        Ok(Program {
            op: spec.name.clone(),
            stmts,
            local_shapes: layouts.locals.iter().map(|l| l.1.clone()).collect(),
            names,
            n_vars: spec.vars.len(),
            n_opaque: c.n_opaque,
        })
    }

    fn error(&self, f: Fail) -> KernelError {
        match f {
            Fail::OutOfBounds { tensor, index } => {
                let (_, name, shape) = self
                    .names
                    .iter()
                    .find(|n| n.0 == tensor)
                    .cloned()
                    .unwrap_or((tensor, "?".into(), vec![]));
                KernelError::OutOfBounds {
                    op: self.op.clone(),
                    tensor: name,
                    index,
                    shape,
                }
            }
            Fail::DivByZero => KernelError::DivByZero {
                op: self.op.clone(),
            },
            Fail::Opaque { name, message } => KernelError::Opaque {
                op: self.op.clone(),
                name,
                message,
            },
        }
    }

    /// Run one statement into `out` (its target's flat buffer).
    fn exec<T: Store>(
        &self,
        s: &StmtProg,
        out: &mut [T],
        bufs: &Bufs<'_>,
    ) -> Result<(), KernelError> {
        let total = out.len();
        if total == 0 {
            return Ok(());
        }
        let threads = rayon::current_num_threads();
        let work = total as f64 * s.cost;
        let fail = if threads > 1 && work > PARALLEL_WORK && total > 1 {
            let chunk = total.div_ceil(threads * 4).max(1);
            out.par_chunks_mut(chunk)
                .enumerate()
                .map(|(i, c)| self.exec_range(s, c, i * chunk, bufs))
                .collect::<Vec<_>>()
                .into_iter()
                .flatten()
                .next()
        } else {
            self.exec_range(s, out, 0, bufs)
        };
        fail.map_or(Ok(()), |f| Err(self.error(f)))
    }

    /// Compute elements `start..start + out.len()` (flat, row-major) of a statement.
    fn exec_range<T: Store>(
        &self,
        s: &StmtProg,
        out: &mut [T],
        start: usize,
        bufs: &Bufs<'_>,
    ) -> Option<Fail> {
        let mut env = Env::new(self.n_vars, self.n_opaque);
        let rank = s.shape.len();
        if rank == 0 {
            let v = match &s.scalar {
                Some(r) => r.run(&mut env, bufs),
                None => (s.body)(&mut env, bufs),
            };
            out[0] = T::store(v);
            return env.err;
        }
        // Decode the start index.
        let mut idx = vec![0usize; rank];
        let mut r = start;
        for d in (0..rank).rev() {
            idx[d] = r % s.shape[d];
            r /= s.shape[d];
        }
        let (last, inner) = (s.vars[rank - 1], s.shape[rank - 1]);
        let last_lo = s.lo[rank - 1];
        let mut row = Vec::new();
        let mut j = 0;
        while j < out.len() {
            for ((&v, &i), &l) in s.vars.iter().zip(&idx).zip(&s.lo) {
                env.vars[v] = l + i as i64;
            }
            let run = (inner - idx[rank - 1]).min(out.len() - j).min(ROW);
            let dst = &mut out[j..j + run];
            match &s.row {
                Some(f) => {
                    row.resize(run, 0.0);
                    f(&mut env, bufs, &mut row);
                    dst.iter_mut()
                        .zip(&row)
                        .for_each(|(o, v)| *o = T::store(*v));
                }
                None => {
                    let first = idx[rank - 1];
                    for (t, o) in dst.iter_mut().enumerate() {
                        env.vars[last] = last_lo + (first + t) as i64;
                        *o = T::store((s.body)(&mut env, bufs));
                    }
                }
            }
            if env.err.is_some() {
                return env.err;
            }
            j += run;
            // Advance the odometer by `run` along the last dim.
            idx[rank - 1] += run;
            for d in (1..rank).rev() {
                if idx[d] < s.shape[d] {
                    break;
                }
                idx[d] = 0;
                idx[d - 1] += 1;
            }
        }
        env.err
    }
}

/// A scalar statement `t[] = R(v1, …, vk: body)` evaluated with `body` as
/// rows of `vk`: the same values combined in the same order as the scalar
/// closure (`acc = R(acc, x)` from the identity, `vk` innermost), without a
/// dynamic call per element. What makes a loss (a scalar output) cheap.
struct ScalarReduce {
    reducer: Reducer,
    /// (variable, first value, count) per reduction variable, `vk` last.
    ranges: Vec<(usize, i64, i64)>,
    row: RowFn,
}

impl ScalarReduce {
    fn run(&self, env: &mut Env, bufs: &Bufs<'_>) -> f64 {
        let (r, id) = (self.reducer, self.reducer.identity());
        let Some((&(rv, lo, n), outer)) = self.ranges.split_last() else {
            return id;
        };
        if self.ranges.iter().any(|&(_, _, n)| n <= 0) {
            return id;
        }
        let mut row = vec![0.0; (n as usize).min(ROW)];
        let mut acc = id;
        for_each_index(env, outer, |env| {
            let mut at = 0;
            while at < n {
                let len = (n - at).min(ROW as i64) as usize;
                env.vars[rv] = lo + at;
                (self.row)(env, bufs, &mut row[..len]);
                acc = row[..len].iter().fold(acc, |a, &x| r.combine(a, x));
                at += len as i64;
            }
        });
        acc
    }
}

/// An element type a statement can write.
trait Store: Send + Copy {
    fn store(v: f64) -> Self;
}

impl Store for f32 {
    #[inline]
    fn store(v: f64) -> Self {
        v as f32
    }
}

impl Store for f64 {
    #[inline]
    fn store(v: f64) -> Self {
        v
    }
}

impl KernelImpl for Program {
    fn run(&self, inputs: &[&[f32]], outputs: &mut [&mut [f32]]) -> Result<(), KernelError> {
        let mut locals: Vec<Vec<f64>> = self
            .local_shapes
            .iter()
            .map(|s| vec![0.0; s.iter().product()])
            .collect();
        for s in &self.stmts {
            match s.target {
                Target::Output(o) => {
                    let (before, rest) = outputs.split_at_mut(o);
                    let (cur, after) = rest.split_first_mut().expect("output index in range");
                    let outs: Vec<&[f32]> = before
                        .iter()
                        .map(|x| &**x)
                        .chain(std::iter::once(&[][..]))
                        .chain(after.iter().map(|x| &**x))
                        .collect();
                    let locs: Vec<&[f64]> = locals.iter().map(|v| &v[..]).collect();
                    let bufs = Bufs {
                        inputs,
                        outputs: &outs,
                        locals: &locs,
                    };
                    self.exec(s, cur, &bufs)?;
                }
                Target::Local(l) => {
                    let mut cur = std::mem::take(&mut locals[l]);
                    let outs: Vec<&[f32]> = outputs.iter().map(|x| &**x).collect();
                    let locs: Vec<&[f64]> = locals.iter().map(|v| &v[..]).collect();
                    let bufs = Bufs {
                        inputs,
                        outputs: &outs,
                        locals: &locs,
                    };
                    let r = self.exec(s, &mut cur, &bufs);
                    locals[l] = cur;
                    r?;
                }
            }
        }
        Ok(())
    }
}
