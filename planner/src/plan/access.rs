//! Concrete access model of one operator instance: which input elements a
//! box of iteration space reads, and which output elements it writes.
//!
//! Takes a bound spec ([`tdl::Binding`]: ellipsis expanded, dims and attributes
//! concrete). Gives, for any box of index-variable ranges (the share of a
//! worker after several levels of splits, Tofu §4.4), the hull of the input
//! elements read per input and the output box per output, and whether that
//! output is a partial result (a reduction variable was cut). Index
//! expressions are reduced to concrete affine forms `c + Σ a_v·v`; `let`
//! temporaries are inlined at their reads; data-dependent, opaque (`:`) and
//! non-affine indices read the whole dim. Reads outside a padded input are
//! clamped away (they are zeros, not data). Which splits are *valid* (exact,
//! no redundant work) is the interval analysis's business; this model only
//! measures regions.

use std::collections::BTreeMap;

use tdl::{BinOp, Binding, Expr, ExprKind, Index, Reducer, TensorRef, Type, UnOp, VarId};

use super::tile::Region;

/// `c + Σ a_v · v` with concrete integers.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Affine {
    c: i64,
    terms: BTreeMap<VarId, i64>,
}

impl Affine {
    fn constant(c: i64) -> Self {
        Affine {
            c,
            terms: BTreeMap::new(),
        }
    }
    fn var(v: VarId) -> Self {
        Affine {
            c: 0,
            terms: [(v, 1)].into_iter().collect(),
        }
    }
    fn add(mut self, o: &Affine, sign: i64) -> Self {
        self.c += sign * o.c;
        for (v, a) in &o.terms {
            *self.terms.entry(*v).or_insert(0) += sign * a;
        }
        self.terms.retain(|_, a| *a != 0);
        self
    }
    fn scale(mut self, k: i64) -> Self {
        self.c *= k;
        self.terms.values_mut().for_each(|a| *a *= k);
        self.terms.retain(|_, a| *a != 0);
        self
    }
    /// Smallest and largest value over a box of variable ranges (`None` if a range is empty).
    fn hull(&self, ranges: &[(i64, i64)]) -> Option<(i64, i64)> {
        let (mut lo, mut hi) = (self.c, self.c);
        for (v, &a) in &self.terms {
            let (l, h) = ranges[v.0 as usize];
            if h <= l {
                return None;
            }
            let (x, y) = (a * l, a * (h - 1));
            lo += x.min(y);
            hi += x.max(y);
        }
        Some((lo, hi))
    }
}

/// One index of a read: an affine form, or the quotient or remainder of one
/// by a positive constant (the coordinates of a flattened index, `k // DH`,
/// `k % DH`).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Form {
    Affine(Affine),
    Div(Affine, i64),
    Mod(Affine, i64),
}

impl Form {
    /// Smallest and largest value over a box (`None` if a range is empty);
    /// for a remainder, the hull of the residues (all of `[0, q)` once the
    /// affine part spans two blocks).
    fn hull(&self, ranges: &[(i64, i64)]) -> Option<(i64, i64)> {
        match self {
            Form::Affine(a) => a.hull(ranges),
            Form::Div(a, q) => {
                let (lo, hi) = a.hull(ranges)?;
                Some((lo.div_euclid(*q), hi.div_euclid(*q)))
            }
            Form::Mod(a, q) => {
                let (lo, hi) = a.hull(ranges)?;
                Some(if lo.div_euclid(*q) == hi.div_euclid(*q) {
                    (lo.rem_euclid(*q), hi.rem_euclid(*q))
                } else {
                    (0, q - 1)
                })
            }
        }
    }
}

/// How one dim of one input is read.
#[derive(Clone, Debug, PartialEq, Eq)]
enum DimRead {
    /// By these indices (one per read site).
    Affine(Vec<Form>),
    /// Whole (data-dependent, opaque slice, non-affine).
    Whole,
}

/// One output statement: its coordinate variables and the reduction variables it depends on.
#[derive(Clone, Debug, PartialEq)]
pub struct OutputAccess {
    /// Coordinate variable per output dim.
    pub coords: Vec<VarId>,
    /// Reduction variables reached from the statement (through temporaries too), with their reducer.
    pub reductions: Vec<(VarId, Reducer)>,
}

/// The access model of one operator instance (see the module doc).
#[derive(Clone, Debug)]
pub struct OpAccess {
    /// Full range of every variable of the expanded spec: `[0, n)`.
    pub var_ranges: Vec<(i64, i64)>,
    /// Per output (spec order).
    pub outputs: Vec<OutputAccess>,
    /// Per input: per dim.
    inputs: Vec<Vec<DimRead>>,
    input_shapes: Vec<Vec<usize>>,
}

impl OpAccess {
    /// Build the model of a bound spec.
    pub fn new(b: &Binding) -> OpAccess {
        let spec = &b.spec;
        let var_ranges = spec
            .vars
            .iter()
            .map(|v| (0, b.eval_dim(&v.range).unwrap_or(0).max(0)))
            .collect();
        let mut walker = Walker {
            b,
            inputs: b
                .input_shapes
                .iter()
                .map(|s| vec![DimRead::Affine(Vec::new()); s.len()])
                .collect(),
            reductions: Vec::new(),
        };
        let mut outputs = vec![
            OutputAccess {
                coords: vec![],
                reductions: vec![]
            };
            spec.outputs.len()
        ];
        for stmt in &spec.stmts {
            let TensorRef::Output(o) = stmt.target else {
                continue;
            };
            walker.reductions.clear();
            let env: BTreeMap<VarId, Option<Affine>> = stmt
                .vars
                .iter()
                .map(|v| (*v, Some(Affine::var(*v))))
                .collect();
            walker.expr(&stmt.body, &env, 0);
            let mut reds = walker.reductions.clone();
            reds.sort_by_key(|r| r.0);
            reds.dedup_by_key(|r| r.0);
            outputs[o as usize] = OutputAccess {
                coords: stmt.vars.clone(),
                reductions: reds,
            };
        }
        OpAccess {
            var_ranges,
            outputs,
            inputs: walker.inputs,
            input_shapes: b.input_shapes.clone(),
        }
    }

    /// The hull of the elements of input `i` read by the box `ranges`
    /// (clamped to the input's bounds; empty if the box is empty).
    pub fn input_region(&self, i: usize, ranges: &[(i64, i64)]) -> Region {
        let shape = &self.input_shapes[i];
        let dims = self.inputs[i]
            .iter()
            .zip(shape)
            .map(|(d, &n)| {
                let n = n as i64;
                match d {
                    DimRead::Whole => (0, n),
                    DimRead::Affine(forms) if forms.is_empty() => (0, 0),
                    DimRead::Affine(forms) => {
                        // A read site over an empty range of one of its
                        // variables (a reduction over an empty domain, e.g.
                        // `Σ(i in before)` with before = 0, or an empty
                        // share) reads nothing; the other sites still read.
                        let mut lo = i64::MAX;
                        let mut hi = i64::MIN;
                        for (l, h) in forms.iter().filter_map(|f| f.hull(ranges)) {
                            lo = lo.min(l);
                            hi = hi.max(h + 1);
                        }
                        if lo > hi {
                            return (0, 0);
                        }
                        let (lo, hi) = (lo.clamp(0, n), hi.clamp(0, n));
                        (lo, hi.max(lo))
                    }
                }
            })
            .collect();
        Region(dims)
    }

    /// The box of output `o` written by the box `ranges`, and whether it is a
    /// partial result (some reduction variable of it is cut).
    pub fn output_region(&self, o: usize, ranges: &[(i64, i64)]) -> (Region, bool) {
        let out = &self.outputs[o];
        let region = Region(out.coords.iter().map(|v| ranges[v.0 as usize]).collect());
        let partial = out
            .reductions
            .iter()
            .any(|(v, _)| ranges[v.0 as usize] != self.var_ranges[v.0 as usize]);
        (region, partial)
    }

    /// Number of inputs.
    pub fn num_inputs(&self) -> usize {
        self.inputs.len()
    }
}

struct Walker<'a> {
    b: &'a Binding,
    inputs: Vec<Vec<DimRead>>,
    reductions: Vec<(VarId, Reducer)>,
}

impl Walker<'_> {
    /// Affine form of an integer expression, `None` if not affine.
    fn affine(&self, e: &Expr, env: &BTreeMap<VarId, Option<Affine>>) -> Option<Affine> {
        match &e.kind {
            ExprKind::Int(i) => Some(Affine::constant(*i)),
            ExprKind::Var(v) => env.get(v).cloned().unwrap_or_else(|| Some(Affine::var(*v))),
            ExprKind::Dim(d) => Some(Affine::constant(self.b.dims[d.0 as usize])),
            ExprKind::Attr(a) => Some(Affine::constant(self.b.attrs[a.0 as usize].as_f64() as i64)),
            ExprKind::Unary(UnOp::Neg, x) => Some(self.affine(x, env)?.scale(-1)),
            ExprKind::Binary(op, x, y) if e.ty == Type::Int => {
                let (a, c) = (self.affine(x, env), self.affine(y, env));
                match op {
                    BinOp::Add => Some(a?.add(&c?, 1)),
                    BinOp::Sub => Some(a?.add(&c?, -1)),
                    BinOp::Mul => {
                        let (a, c) = (a?, c?);
                        if a.terms.is_empty() {
                            Some(c.scale(a.c))
                        } else if c.terms.is_empty() {
                            Some(a.scale(c.c))
                        } else {
                            None
                        }
                    }
                    _ => {
                        let (a, c) = (a?, c?);
                        if a.terms.is_empty() && c.terms.is_empty() && c.c != 0 {
                            let q = a.c.div_euclid(c.c);
                            Some(Affine::constant(if matches!(op, BinOp::Mod) {
                                a.c - c.c * q
                            } else {
                                q
                            }))
                        } else {
                            None
                        }
                    }
                }
            }
            _ => None,
        }
    }

    /// The [`Form`] of an index, `None` if it has none (read whole).
    fn form(&self, e: &Expr, env: &BTreeMap<VarId, Option<Affine>>) -> Option<Form> {
        if let Some(a) = self.affine(e, env) {
            return Some(Form::Affine(a));
        }
        let ExprKind::Binary(op @ (BinOp::FloorDiv | BinOp::Mod), x, y) = &e.kind else {
            return None;
        };
        let (num, den) = (self.affine(x, env)?, self.affine(y, env)?);
        if !den.terms.is_empty() || den.c <= 0 {
            return None;
        }
        Some(match op {
            BinOp::FloorDiv => Form::Div(num, den.c),
            _ => Form::Mod(num, den.c),
        })
    }

    fn note_read(
        &mut self,
        input: usize,
        idx: &[Index],
        env: &BTreeMap<VarId, Option<Affine>>,
        depth: usize,
    ) {
        for (d, ix) in idx.iter().enumerate() {
            let form = match ix {
                Index::Expr(x) => {
                    self.expr(x, env, depth);
                    self.form(x, env)
                }
                _ => None,
            };
            match (&mut self.inputs[input][d], form) {
                (DimRead::Affine(forms), Some(f)) => {
                    if !forms.contains(&f) {
                        forms.push(f);
                    }
                }
                (slot, None) => *slot = DimRead::Whole,
                (DimRead::Whole, Some(_)) => {}
            }
        }
    }

    /// Walks `e` through the one expression visitor ([`Expr::children`]):
    /// input reads are noted, temporaries are inlined at their reads (one
    /// level deeper), reductions are recorded; every other node just walks
    /// its children.
    fn expr(&mut self, e: &Expr, env: &BTreeMap<VarId, Option<Affine>>, depth: usize) {
        if depth > 64 {
            return;
        }
        match &e.kind {
            ExprKind::Read {
                tensor: TensorRef::Input(i),
                indices,
            } => return self.note_read(*i as usize, indices, env, depth),
            ExprKind::Read { tensor, indices } => {
                e.children().for_each(|x| self.expr(x, env, depth));
                let b = self.b;
                if let Some(stmt) = b.spec.defining_stmt(*tensor) {
                    // Inline: the temporary's coordinates are the read's index forms.
                    let mut inner = env.clone();
                    for (v, ix) in stmt.vars.iter().zip(indices) {
                        let f = match ix {
                            Index::Expr(x) => self.affine(x, env),
                            _ => None,
                        };
                        inner.insert(*v, f);
                    }
                    // A coordinate mapped to `None` (non-affine read) makes every
                    // index that uses it read the whole dim.
                    self.expr(&stmt.body, &inner, depth + 1);
                }
                return;
            }
            ExprKind::Reduce { reducer, vars, .. } => {
                self.reductions.extend(vars.iter().map(|v| (*v, *reducer)));
            }
            _ => {}
        }
        e.children().for_each(|c| self.expr(c, env, depth));
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use tdl::{AttrValue, Attrs, Library, Tensor};

    use super::*;

    /// The hull of the elements the interpreter reads of input 0 when `var`
    /// is restricted to `[lo, hi)`.
    fn traced_hull(b: &Binding, var: VarId, lo: i64, hi: i64) -> Region {
        let inputs: Vec<Tensor> = b
            .input_shapes
            .iter()
            .map(|s| Tensor::new(s, vec![0.0; s.iter().product()]).unwrap())
            .collect();
        let rank = b.input_shapes[0].len();
        let mut hull = vec![(i64::MAX, i64::MIN); rank];
        let restrict: HashMap<VarId, (i64, i64)> = [(var, (lo, hi))].into();
        tdl::evaluate_traced(b, &inputs, &restrict, &mut |i, idx| {
            if i == 0 {
                for (h, &x) in hull.iter_mut().zip(idx) {
                    *h = (h.0.min(x), h.1.max(x + 1));
                }
            }
        })
        .unwrap();
        Region(hull)
    }

    /// Every non-empty sub-range `[lo, hi)` of variable `v`'s range (the
    /// others whole), with the region of input 0 it needs.
    fn boxes(access: &OpAccess, v: VarId) -> Vec<(i64, i64, Region)> {
        let n = access.var_ranges[v.0 as usize].1;
        let mut out = Vec::new();
        for lo in 0..n {
            for hi in lo + 1..=n {
                let mut ranges = access.var_ranges.clone();
                ranges[v.0 as usize] = (lo, hi);
                out.push((lo, hi, access.input_region(0, &ranges)));
            }
        }
        out
    }

    /// The gradients of the padded reads with a pad of 0 on one side (a
    /// reduction over an empty domain, `Σ(i in before)` with before = 0):
    /// every box of the output variable needs at least what the
    /// interpreter reads. The empty reduction once emptied the whole dim
    /// (an edge-padded ResNet failed at run time: issue 45).
    #[test]
    fn one_sided_pad_gradients_need_what_they_read() {
        let lib = Library::shipped().unwrap();
        let attrs = |before: i64, n: i64| -> Attrs {
            [
                ("before".to_string(), AttrValue::Int(before)),
                ("n".to_string(), AttrValue::Int(n)),
            ]
            .into()
        };
        // (op, dy's last dim M, before, n): after = M - before - n.
        let cases = [
            ("pad_edge_grad", 7, 0, 6),
            ("pad_edge_grad", 7, 1, 6),
            ("pad_edge_grad", 6, 0, 6),
            ("pad_reflect_grad", 8, 0, 6),
            ("pad_reflect_grad", 8, 2, 6),
            ("pad_wrap_grad", 8, 0, 6),
            ("pad_wrap_grad", 8, 2, 6),
        ];
        for (op, m, before, n) in cases {
            let shapes = vec![vec![2, m as usize]];
            let b = lib
                .get(op)
                .unwrap()
                .bind(&shapes, &attrs(before, n))
                .unwrap();
            let out = b
                .spec
                .stmts
                .iter()
                .find(|s| s.target == TensorRef::Output(0));
            let j = *out.unwrap().vars.last().unwrap();
            for (lo, hi, got) in boxes(&OpAccess::new(&b), j) {
                let read = traced_hull(&b, j, lo, hi);
                let what = format!("{op} before {before} n {n} M {m}, j in [{lo}, {hi})");
                assert_eq!(got.intersect(&read), read, "{what}: needs {got:?}");
            }
        }
    }

    /// Every box of the head variable of split_heads (`h * (D // heads) + d`),
    /// split_qkv (`h * (3 * DH) + which * DH + d`, three reads) and
    /// merge_heads (`k // DH`, `k % DH`) needs exactly the hull of what the
    /// interpreter reads; merge_qkv (`c // (3 * DH)`, `c % DH`, each input
    /// read under a condition on `c % (3 * DH)`) a superset of it, exactly
    /// it on whole heads.
    #[test]
    fn head_ops_regions_are_the_hull_of_the_reads() {
        let lib = Library::shipped().unwrap();
        let heads = |h: i64| -> Attrs { [("heads".to_string(), AttrValue::Int(h))].into() };
        // (op, input shapes, attributes, split variable, head width in it)
        type Case = (&'static str, Vec<Vec<usize>>, Attrs, &'static str, i64);
        let cases: [Case; 4] = [
            ("split_heads", vec![vec![2, 3, 12]], heads(4), "h", 1),
            ("split_qkv", vec![vec![2, 3, 24]], heads(4), "h", 1),
            ("merge_heads", vec![vec![2, 4, 3, 5]], Attrs::new(), "k", 1),
            ("merge_qkv", vec![vec![2, 3, 2, 2]; 3], Attrs::new(), "c", 6),
        ];
        for (op, shapes, attrs, var, whole) in cases {
            let b = lib.get(op).unwrap().bind(&shapes, &attrs).unwrap();
            let v = VarId(b.spec.vars.iter().position(|x| x.name == var).unwrap() as u32);
            for (lo, hi, got) in boxes(&OpAccess::new(&b), v) {
                let read = traced_hull(&b, v, lo, hi);
                if lo % whole == 0 && hi % whole == 0 {
                    assert_eq!(got, read, "{op} {var} in [{lo}, {hi})");
                } else if read.0.iter().all(|&(a, z)| a < z) {
                    assert_eq!(got.intersect(&read), read, "{op} {var} in [{lo}, {hi})");
                }
            }
        }
    }
}
