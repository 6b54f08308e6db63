//! The reference interpreter: the semantic ground truth of tofu.
//!
//! Takes a checked [`OpSpec`], concrete f64 input tensors and attribute values;
//! gives the output tensors, computed element by element straight from the
//! lambdas (clarity over speed). `let` temporaries are evaluated lazily per
//! element and memoised, so reading a temporary costs only the elements used.
//!
//! [`evaluate_traced`] additionally restricts chosen index variables to a
//! sub-range and reports every input element read: this is how the interval
//! analysis's predicted regions are checked (a part of a partitioned operator
//! is "the op with one variable restricted"). Reads of a padded input outside
//! its bounds yield 0 and are not reported; reads of an unpadded input outside
//! its bounds are an [`EvalError::OutOfBounds`].

use std::collections::HashMap;

use crate::ast::*;
use crate::bind::{Attrs, Binding, ShapeError};
pub use crate::builtin::erf;
use crate::builtin::Semantics;
use crate::multi_index::next_index;
use crate::opaque;
pub use crate::tensor::Tensor;

/// Why an evaluation failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[allow(missing_docs)]
pub enum EvalError {
    #[error(transparent)]
    Shape(#[from] ShapeError),
    #[error("`{op}`: input `{input}` has {got} elements but its shape {shape:?} needs {expected}")]
    BadInput {
        op: String,
        input: String,
        shape: Vec<usize>,
        expected: usize,
        got: usize,
    },
    #[error("`{op}`: read of `{tensor}` at {index:?} is outside its shape {shape:?} (in `{expr}`); declare the input `padded` if out-of-range reads mean zero")]
    OutOfBounds {
        op: String,
        tensor: String,
        index: Vec<i64>,
        shape: Vec<usize>,
        expr: String,
    },
    #[error("`{op}`: opaque function `{name}` failed: {message}")]
    Opaque {
        op: String,
        name: String,
        message: String,
    },
    #[error("`{op}`: division by zero in index expression `{expr}`")]
    DivByZero { op: String, expr: String },
}

/// Evaluate an op on concrete inputs: every output, whole.
///
/// Errors: shapes or attributes that do not fit ([`ShapeError`]), out-of-bounds
/// reads of unpadded inputs, failing opaque functions.
pub fn evaluate(spec: &OpSpec, inputs: &[Tensor], attrs: &Attrs) -> Result<Vec<Tensor>, EvalError> {
    let shapes: Vec<Vec<usize>> = inputs.iter().map(|t| t.shape.clone()).collect();
    let binding = spec.bind(&shapes, attrs)?;
    evaluate_traced(&binding, inputs, &HashMap::new(), &mut |_, _| {})
}

/// Evaluate a bound op with some index variables restricted to `[lo, hi)`,
/// calling `on_read(input, index)` for every input element read.
///
/// `restrict` is keyed by [`VarId`]s of `binding.spec` (the expanded spec).
/// Output elements outside the restricted coordinates are left at 0; a
/// restricted reduction variable gives the partial reduction over its range.
pub fn evaluate_traced(
    binding: &Binding,
    inputs: &[Tensor],
    restrict: &HashMap<VarId, (i64, i64)>,
    on_read: &mut dyn FnMut(u32, &[i64]),
) -> Result<Vec<Tensor>, EvalError> {
    let spec = &binding.spec;
    for (i, (t, s)) in inputs.iter().zip(&binding.input_shapes).enumerate() {
        let expected: usize = s.iter().product();
        if t.data.len() != expected || &t.shape != s {
            return Err(EvalError::BadInput {
                op: spec.name.clone(),
                input: spec.inputs[i].name.clone(),
                shape: s.clone(),
                expected,
                got: t.data.len(),
            });
        }
    }
    let mut ev = Eval {
        b: binding,
        inputs,
        outputs: binding
            .output_shapes
            .iter()
            .map(|s| Tensor::zeros(s))
            .collect(),
        memo: vec![HashMap::new(); spec.locals.len()],
        env: vec![0; spec.vars.len()],
        restrict,
        on_read,
    };
    for stmt in &spec.stmts {
        let TensorRef::Output(o) = stmt.target else {
            continue;
        };
        let ranges: Vec<(i64, i64)> = stmt
            .vars
            .iter()
            .map(|v| ev.range(*v))
            .collect::<Result<_, _>>()?;
        let mut idx: Vec<i64> = ranges.iter().map(|r| r.0).collect();
        if ranges.iter().any(|r| r.0 >= r.1) {
            continue;
        }
        loop {
            for (v, &i) in stmt.vars.iter().zip(&idx) {
                ev.env[v.0 as usize] = i;
            }
            let val = ev.eval(&stmt.body)?;
            let out = &mut ev.outputs[o as usize];
            if let Some(off) = out.offset(&idx) {
                out.data[off] = val;
            }
            if !next_index(&mut idx, &ranges) {
                break;
            }
        }
    }
    Ok(ev.outputs)
}

struct Eval<'a> {
    b: &'a Binding,
    inputs: &'a [Tensor],
    outputs: Vec<Tensor>,
    memo: Vec<HashMap<Vec<i64>, f64>>,
    env: Vec<i64>,
    restrict: &'a HashMap<VarId, (i64, i64)>,
    on_read: &'a mut dyn FnMut(u32, &[i64]),
}

fn floor_div(a: i64, b: i64) -> i64 {
    let q = a.div_euclid(b);
    if b < 0 && a.rem_euclid(b) != 0 {
        q - 1
    } else {
        q
    }
}

impl Eval<'_> {
    fn spec(&self) -> &OpSpec {
        &self.b.spec
    }

    fn range(&self, v: VarId) -> Result<(i64, i64), EvalError> {
        let full = self
            .b
            .eval_dim(&self.spec().vars[v.0 as usize].range)
            .ok_or_else(|| EvalError::DivByZero {
                op: self.spec().name.clone(),
                expr: self
                    .spec()
                    .show_dim(&self.spec().vars[v.0 as usize].range)
                    .to_string(),
            })?;
        Ok(match self.restrict.get(&v) {
            Some(&(lo, hi)) => (lo.max(0), hi.min(full)),
            None => (0, full),
        })
    }

    fn eval_int(&mut self, e: &Expr) -> Result<i64, EvalError> {
        Ok(match &e.kind {
            ExprKind::Int(i) => *i,
            ExprKind::Var(v) => self.env[v.0 as usize],
            ExprKind::Dim(d) => self.b.dims[d.0 as usize],
            ExprKind::Attr(a) => self.b.attrs[a.0 as usize].as_f64() as i64,
            ExprKind::Unary(UnOp::Neg, a) if a.ty == Type::Int => -self.eval_int(a)?,
            ExprKind::Unary(UnOp::Not, a) => (self.eval(a)? == 0.0) as i64,
            ExprKind::Binary(op, a, c) => match op {
                BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Eq | BinOp::Ne => {
                    let (x, y) = (self.eval(a)?, self.eval(c)?);
                    (match op {
                        BinOp::Lt => x < y,
                        BinOp::Le => x <= y,
                        BinOp::Gt => x > y,
                        BinOp::Ge => x >= y,
                        BinOp::Eq => x == y,
                        _ => x != y,
                    }) as i64
                }
                BinOp::And => (self.eval(a)? != 0.0 && self.eval(c)? != 0.0) as i64,
                BinOp::Or => (self.eval(a)? != 0.0 || self.eval(c)? != 0.0) as i64,
                _ if e.ty == Type::Int => {
                    let (x, y) = (self.eval_int(a)?, self.eval_int(c)?);
                    match op {
                        BinOp::Add => x + y,
                        BinOp::Sub => x - y,
                        BinOp::Mul => x * y,
                        BinOp::FloorDiv | BinOp::Mod if y == 0 => {
                            return Err(EvalError::DivByZero {
                                op: self.spec().name.clone(),
                                expr: self.spec().show(e).to_string(),
                            })
                        }
                        BinOp::FloorDiv => floor_div(x, y),
                        BinOp::Mod => x - y * floor_div(x, y),
                        _ => unreachable!("typed int"),
                    }
                }
                _ => self.eval(e)?.round() as i64,
            },
            ExprKind::Call(Builtin::Max, args) if e.ty == Type::Int => {
                self.eval_int(&args[0])?.max(self.eval_int(&args[1])?)
            }
            ExprKind::Call(Builtin::Min, args) if e.ty == Type::Int => {
                self.eval_int(&args[0])?.min(self.eval_int(&args[1])?)
            }
            ExprKind::Call(Builtin::Select, args) if e.ty == Type::Int => {
                if self.eval(&args[0])? != 0.0 {
                    self.eval_int(&args[1])?
                } else {
                    self.eval_int(&args[2])?
                }
            }
            _ => self.eval(e)?.round() as i64,
        })
    }

    fn index(&mut self, ix: &Index) -> Result<i64, EvalError> {
        match ix {
            Index::Expr(x) => self.eval_int(x),
            Index::Ellipsis(_) | Index::Full => {
                unreachable!("expanded spec; slices handled by opaque")
            }
        }
    }

    fn read(&mut self, e: &Expr, tensor: TensorRef, indices: &[Index]) -> Result<f64, EvalError> {
        let idx: Vec<i64> = indices
            .iter()
            .map(|i| self.index(i))
            .collect::<Result<_, _>>()?;
        match tensor {
            TensorRef::Input(i) => {
                let t = &self.inputs[i as usize];
                match t.get(&idx) {
                    Some(v) => {
                        (self.on_read)(i, &idx);
                        Ok(v)
                    }
                    None if self.spec().inputs[i as usize].padded => Ok(0.0),
                    None => Err(self.oob(e, tensor, idx)),
                }
            }
            TensorRef::Output(o) => self.outputs[o as usize]
                .get(&idx)
                .ok_or_else(|| self.oob(e, tensor, idx.clone())),
            TensorRef::Local(l) => {
                if let Some(v) = self.memo[l as usize].get(&idx) {
                    return Ok(*v);
                }
                let shape = &self.b.local_shapes[l as usize];
                if idx.len() != shape.len()
                    || idx
                        .iter()
                        .zip(shape)
                        .any(|(&i, &n)| i < 0 || i as usize >= n)
                {
                    return Err(self.oob(e, tensor, idx));
                }
                let spec = &self.b.spec;
                let stmt = spec
                    .defining_stmt(tensor)
                    .expect("checked: locals are defined");
                for (v, &i) in stmt.vars.iter().zip(&idx) {
                    self.env[v.0 as usize] = i;
                }
                let v = self.eval(&stmt.body)?;
                self.memo[l as usize].insert(idx, v);
                Ok(v)
            }
        }
    }

    fn oob(&self, e: &Expr, tensor: TensorRef, index: Vec<i64>) -> EvalError {
        EvalError::OutOfBounds {
            op: self.spec().name.clone(),
            tensor: self.spec().tensor_name(tensor).to_string(),
            index,
            shape: self.b.shape(tensor).to_vec(),
            expr: self.spec().show(e).to_string(),
        }
    }

    fn eval(&mut self, e: &Expr) -> Result<f64, EvalError> {
        if e.ty == Type::Int {
            return Ok(self.eval_int(e)? as f64);
        }
        Ok(match &e.kind {
            ExprKind::Int(i) => *i as f64,
            ExprKind::Real(r) => *r,
            ExprKind::Attr(a) => self.b.attrs[a.0 as usize].as_f64(),
            ExprKind::Var(_) | ExprKind::Dim(_) => self.eval_int(e)? as f64,
            ExprKind::Read { tensor, indices } => self.read(e, *tensor, indices)?,
            ExprKind::Unary(UnOp::Neg, a) => -self.eval(a)?,
            ExprKind::Unary(UnOp::Not, a) => (self.eval(a)? == 0.0) as i64 as f64,
            ExprKind::Binary(op, a, c) => {
                let (x, y) = (self.eval(a)?, self.eval(c)?);
                match op {
                    BinOp::Add => x + y,
                    BinOp::Sub => x - y,
                    BinOp::Mul => x * y,
                    BinOp::Div => x / y,
                    BinOp::FloorDiv => (x / y).floor(),
                    BinOp::Mod => x - y * (x / y).floor(),
                    _ => self.eval_int(e)? as f64,
                }
            }
            ExprKind::Call(Builtin::Select, args) => {
                if self.eval(&args[0])? != 0.0 {
                    self.eval(&args[1])?
                } else {
                    self.eval(&args[2])?
                }
            }
            ExprKind::Call(b, args) => {
                let x = self.eval(&args[0])?;
                match b.semantics() {
                    Semantics::Unary(f) => f(x),
                    Semantics::Binary(f) => f(x, self.eval(&args[1])?),
                    Semantics::Select => unreachable!("handled above"),
                }
            }
            ExprKind::Reduce {
                reducer,
                vars,
                body,
            } => {
                let ranges: Vec<(i64, i64)> = vars
                    .iter()
                    .map(|v| self.range(*v))
                    .collect::<Result<_, _>>()?;
                let mut acc = reducer.identity();
                if ranges.iter().any(|r| r.0 >= r.1) {
                    return Ok(acc);
                }
                let mut idx: Vec<i64> = ranges.iter().map(|r| r.0).collect();
                loop {
                    for (v, &i) in vars.iter().zip(&idx) {
                        self.env[v.0 as usize] = i;
                    }
                    acc = reducer.combine(acc, self.eval(body)?);
                    if !next_index(&mut idx, &ranges) {
                        break;
                    }
                }
                acc
            }
            ExprKind::Opaque { name, args, index } => {
                let info = opaque::lookup(name).expect("checked: opaque function exists");
                let mut slices = Vec::new();
                for a in args {
                    slices.push(self.slice(a)?);
                }
                let r = (info.eval)(&slices).map_err(|message| EvalError::Opaque {
                    op: self.spec().name.clone(),
                    name: name.clone(),
                    message,
                })?;
                let idx: Vec<i64> = index
                    .iter()
                    .map(|i| self.eval_int(i))
                    .collect::<Result<_, _>>()?;
                r.get(&idx).ok_or_else(|| EvalError::Opaque {
                    op: self.spec().name.clone(),
                    name: name.clone(),
                    message: format!("result of shape {:?} indexed at {idx:?}", r.shape),
                })?
            }
        })
    }

    /// Materialise an opaque function's argument: a slice read or a scalar.
    fn slice(&mut self, a: &Expr) -> Result<Tensor, EvalError> {
        let ExprKind::Read { tensor, indices } = &a.kind else {
            return Ok(Tensor::scalar(self.eval(a)?));
        };
        if !indices.iter().any(|i| matches!(i, Index::Full)) {
            return Ok(Tensor::scalar(self.eval(a)?));
        }
        let full_shape = self.b.shape(*tensor).to_vec();
        let mut fixed = Vec::new();
        let mut ranges = Vec::new();
        for (d, ix) in indices.iter().enumerate() {
            match ix {
                Index::Full => {
                    fixed.push(None);
                    ranges.push((0, full_shape[d] as i64));
                }
                other => fixed.push(Some(self.index(other)?)),
            }
        }
        let shape: Vec<usize> = ranges.iter().map(|r| r.1 as usize).collect();
        let mut out = Tensor::zeros(&shape);
        if out.is_empty() {
            return Ok(out);
        }
        let mut idx: Vec<i64> = vec![0; ranges.len()];
        let mut k = 0;
        loop {
            let mut it = idx.iter();
            let full: Vec<Index> = fixed
                .iter()
                .map(|f| {
                    let v = f.unwrap_or_else(|| *it.next().expect("one per full dim"));
                    Index::Expr(Expr {
                        kind: ExprKind::Int(v),
                        span: a.span,
                        ty: Type::Int,
                    })
                })
                .collect();
            out.data[k] = self.read(a, *tensor, &full)?;
            k += 1;
            if !next_index(&mut idx, &ranges) {
                break;
            }
        }
        Ok(out)
    }
}
