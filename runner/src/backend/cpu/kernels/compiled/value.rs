//! The values compiled expressions compute with: per-thread state ([`Env`]),
//! the buffers read ([`Bufs`]), real and integer values that are folded
//! constants, affine forms or closures ([`V`], [`I`]) and reductions over
//! them. [`super::expr`] compiles TDL expressions into these.

use tdl::{Reducer, TensorRef};

/// Per-thread evaluation state.
pub(super) struct Env {
    /// Current value of every index variable (by `VarId`).
    pub vars: Vec<i64>,
    /// The first run-time failure, if any.
    pub err: Option<Fail>,
    /// Per opaque call site: the key of the last evaluation and its result.
    pub opaque: Vec<Option<(Vec<i64>, tdl::Tensor)>>,
    /// Reusable row buffers of [`super::row`] evaluation.
    pub pool: Vec<Vec<f64>>,
}

impl Env {
    pub fn new(n_vars: usize, n_opaque: usize) -> Self {
        Env {
            vars: vec![0; n_vars],
            err: None,
            opaque: (0..n_opaque).map(|_| None).collect(),
            pool: Vec::new(),
        }
    }

    pub(super) fn fail(&mut self, f: Fail) {
        if self.err.is_none() {
            self.err = Some(f);
        }
    }
}

/// A run-time failure, turned into a [`KernelError`] with names by the caller.
#[derive(Clone, Debug)]
pub(super) enum Fail {
    OutOfBounds { tensor: TensorRef, index: Vec<i64> },
    DivByZero,
    Opaque { name: String, message: String },
}

/// Where a tensor's elements are.
#[derive(Clone, Copy, Debug)]
pub(super) enum Src {
    In(usize),
    Out(usize),
    Loc(usize),
}

/// The buffers an expression reads: inputs, outputs already computed, and
/// `let` temporaries already computed (others are empty slices).
pub(super) struct Bufs<'a> {
    pub inputs: &'a [&'a [f32]],
    pub outputs: &'a [&'a [f32]],
    pub locals: &'a [&'a [f64]],
}

impl Bufs<'_> {
    #[inline]
    pub(super) fn get(&self, s: Src, off: usize) -> f64 {
        match s {
            Src::In(i) => self.inputs[i][off] as f64,
            Src::Out(o) => self.outputs[o][off] as f64,
            Src::Loc(l) => self.locals[l][off],
        }
    }
}

/// A compiled real-valued expression.
pub(super) type ValFn = Box<dyn Fn(&mut Env, &Bufs<'_>) -> f64 + Send + Sync>;
/// A compiled integer-valued expression.
pub(super) type IntFn = Box<dyn Fn(&mut Env, &Bufs<'_>) -> i64 + Send + Sync>;

/// A real value: folded constant or closure.
pub(super) enum V {
    Const(f64),
    Dyn(ValFn),
}

impl V {
    pub fn into_fn(self) -> ValFn {
        match self {
            V::Const(c) => Box::new(move |_, _| c),
            V::Dyn(f) => f,
        }
    }
}

pub(super) use crate::ops::index_range::Affine;

impl Affine {
    #[inline]
    pub(super) fn eval(&self, env: &Env) -> i64 {
        self.terms
            .iter()
            .fold(self.c, |s, &(v, k)| s + k * env.vars[v])
    }
}

/// An integer value: folded constant, affine form or closure.
pub(super) enum I {
    Const(i64),
    Affine(Affine),
    Dyn(IntFn),
}

impl I {
    #[inline]
    pub(super) fn eval(&self, env: &mut Env, b: &Bufs<'_>) -> i64 {
        match self {
            I::Const(c) => *c,
            I::Affine(a) => a.eval(env),
            I::Dyn(f) => f(env, b),
        }
    }

    pub(super) fn affine(&self) -> Option<Affine> {
        match self {
            I::Const(c) => Some(Affine {
                c: *c,
                terms: vec![],
            }),
            I::Affine(a) => Some(a.clone()),
            I::Dyn(_) => None,
        }
    }

    pub(super) fn normal(a: Affine) -> I {
        if a.terms.is_empty() {
            I::Const(a.c)
        } else {
            I::Affine(a)
        }
    }

    pub(super) fn into_fn(self) -> IntFn {
        match self {
            I::Const(c) => Box::new(move |_, _| c),
            I::Affine(a) => Box::new(move |e, _| a.eval(e)),
            I::Dyn(f) => f,
        }
    }
}

pub(super) fn un(a: V, f: impl Fn(f64) -> f64 + Send + Sync + Copy + 'static) -> V {
    match a {
        V::Const(x) => V::Const(f(x)),
        V::Dyn(g) => V::Dyn(Box::new(move |e, b| f(g(e, b)))),
    }
}

pub(super) fn bin(a: V, c: V, f: impl Fn(f64, f64) -> f64 + Send + Sync + Copy + 'static) -> V {
    match (a, c) {
        (V::Const(x), V::Const(y)) => V::Const(f(x, y)),
        (V::Dyn(g), V::Const(y)) => V::Dyn(Box::new(move |e, b| f(g(e, b), y))),
        (V::Const(x), V::Dyn(h)) => V::Dyn(Box::new(move |e, b| f(x, h(e, b)))),
        (V::Dyn(g), V::Dyn(h)) => V::Dyn(Box::new(move |e, b| {
            let x = g(e, b);
            f(x, h(e, b))
        })),
    }
}

pub(super) fn floor_div(a: i64, b: i64) -> i64 {
    let q = a.div_euclid(b);
    if b < 0 && a.rem_euclid(b) != 0 {
        q - 1
    } else {
        q
    }
}

/// Row-major strides (elements) of a shape.
pub(super) fn row_major_strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

pub(super) fn reduce(r: Reducer, vars: Vec<(usize, i64, i64)>, body: V) -> V {
    if vars.iter().any(|&(_, _, n)| n <= 0) {
        return V::Const(r.identity());
    }
    match r {
        Reducer::Sum => reduce_with(vars, body, 0.0, |a, x| a + x),
        Reducer::Prod => reduce_with(vars, body, 1.0, |a, x| a * x),
        Reducer::Max => reduce_with(vars, body, f64::NEG_INFINITY, f64::max),
        Reducer::Min => reduce_with(vars, body, f64::INFINITY, f64::min),
    }
}

fn reduce_with(
    vars: Vec<(usize, i64, i64)>,
    body: V,
    id: f64,
    f: impl Fn(f64, f64) -> f64 + Send + Sync + Copy + 'static,
) -> V {
    let body = body.into_fn();
    if let [(v, lo, n)] = vars[..] {
        return V::Dyn(Box::new(move |e, b| {
            let mut acc = id;
            for i in lo..lo + n {
                e.vars[v] = i;
                acc = f(acc, body(e, b));
            }
            acc
        }));
    }
    V::Dyn(Box::new(move |e, b| {
        let mut acc = id;
        for_each_index(e, &vars, |e| acc = f(acc, body(e, b)));
        acc
    }))
}

/// Run `f` once per value of the variables `vars` ((variable, first value,
/// count) each, every count positive), the last variable innermost, with
/// each value set in `e`; leaves every variable at its first value.
pub(super) fn for_each_index(e: &mut Env, vars: &[(usize, i64, i64)], mut f: impl FnMut(&mut Env)) {
    for &(v, lo, _) in vars {
        e.vars[v] = lo;
    }
    'outer: loop {
        f(e);
        for &(v, lo, n) in vars.iter().rev() {
            e.vars[v] += 1;
            if e.vars[v] < lo + n {
                continue 'outer;
            }
            e.vars[v] = lo;
        }
        break;
    }
}
