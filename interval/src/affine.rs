//! Affine normal form of index expressions.
//!
//! Takes the atoms of an index expression (index variables, symbolic dims,
//! int attributes, integer constants); gives [`Poly`], a sum of monomials
//! with integer coefficients, kept canonical (monomials sorted, no zero
//! coefficients) so that two equal polynomials compare equal structurally.
//! An index is *affine in the variables* when every monomial holds at most one
//! variable; coefficients and offsets may still be products of dims and
//! attributes (`o * stride + dx * dilation - pad`). This is the representation
//! behind Tofu's symbolic intervals (§3.2, Figure 5): the interval of
//! `a·v + c` for `v ∈ [L, H)` is computed from `a` and `c` at instantiation.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::Serialize;
use tdl::{AttrId, AttrValue, DimExpr, DimId, OpSpec, VarId};

/// A symbol of a monomial. Variables range; dims and attributes are constants
/// of the op known only at instantiation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum Atom {
    /// An index variable of the (ellipsis-expanded) spec.
    Var(VarId),
    /// A symbolic dimension size.
    Dim(DimId),
    /// An int attribute.
    Attr(AttrId),
    /// The floor quotient `n // d` of two parameters (`D // heads`, `rot // 2`):
    /// a constant of the op like a dim, known at instantiation. Only
    /// parameter-only quotients become atoms; a quotient of a variable stays
    /// non-affine.
    Quot(Param, Param),
}

/// A parameter of the op: a dim, an int attribute or an integer constant
/// (the operands of [`Atom::Quot`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum Param {
    /// A symbolic dimension size.
    Dim(DimId),
    /// An int attribute.
    Attr(AttrId),
    /// An integer constant.
    Const(i64),
    /// A constant multiple of a dim (`3 * E`), at least 2.
    ScaledDim(i64, DimId),
    /// A constant multiple of an int attribute (`3 * heads`, split_qkv's
    /// `E // (3 * heads)`), at least 2.
    ScaledAttr(i64, AttrId),
}

impl Param {
    /// The parameter a one-atom (or constant) polynomial is, if it is one.
    pub fn of_poly(p: &Poly) -> Option<Param> {
        if let Some(c) = p.as_constant() {
            return Some(Param::Const(c));
        }
        match p.terms().collect::<Vec<_>>().as_slice() {
            [([Atom::Dim(d)], 1)] => Some(Param::Dim(*d)),
            [([Atom::Attr(a)], 1)] => Some(Param::Attr(*a)),
            [([Atom::Dim(d)], c)] if *c >= 2 => Some(Param::ScaledDim(*c, *d)),
            [([Atom::Attr(a)], c)] if *c >= 2 => Some(Param::ScaledAttr(*c, *a)),
            _ => None,
        }
    }

    fn eval(self, dims: &[i64], attrs: &[AttrValue]) -> i64 {
        match self {
            Param::Dim(d) => dims[d.0 as usize],
            Param::Attr(a) => attr_int(attrs[a.0 as usize]),
            Param::Const(c) => c,
            Param::ScaledDim(c, d) => c * dims[d.0 as usize],
            Param::ScaledAttr(c, a) => c * attr_int(attrs[a.0 as usize]),
        }
    }

    fn name(self, op: &OpSpec) -> String {
        match self {
            Param::Dim(d) => atom_name(op, Atom::Dim(d)),
            Param::Attr(a) => atom_name(op, Atom::Attr(a)),
            Param::Const(c) => c.to_string(),
            Param::ScaledDim(c, d) => format!("{c}*{}", atom_name(op, Atom::Dim(d))),
            Param::ScaledAttr(c, a) => format!("{c}*{}", atom_name(op, Atom::Attr(a))),
        }
    }
}

/// `a // b` rounded toward negative infinity (TDL's `//`); `None` for `b = 0`.
pub fn floor_div(a: i64, b: i64) -> Option<i64> {
    if b == 0 {
        return None;
    }
    let q = a.div_euclid(b);
    Some(if b < 0 && a.rem_euclid(b) != 0 {
        q - 1
    } else {
        q
    })
}

/// A polynomial with integer coefficients over [`Atom`]s, in canonical form:
/// each monomial is a sorted list of atoms (repeats allowed), no coefficient is 0.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct Poly {
    terms: BTreeMap<Vec<Atom>, i64>,
}

impl Poly {
    /// The zero polynomial.
    pub fn zero() -> Poly {
        Poly::default()
    }

    /// A constant.
    pub fn constant(c: i64) -> Poly {
        let mut p = Poly::zero();
        if c != 0 {
            p.terms.insert(Vec::new(), c);
        }
        p
    }

    /// A single atom with coefficient 1.
    pub fn atom(a: Atom) -> Poly {
        let mut p = Poly::zero();
        p.terms.insert(vec![a], 1);
        p
    }

    /// A variable.
    pub fn var(v: VarId) -> Poly {
        Poly::atom(Atom::Var(v))
    }

    fn add_term(&mut self, mono: Vec<Atom>, c: i64) {
        if c == 0 {
            return;
        }
        let e = self.terms.entry(mono.clone()).or_insert(0);
        *e += c;
        if *e == 0 {
            self.terms.remove(&mono);
        }
    }

    /// `self + other`.
    pub fn add(&self, other: &Poly) -> Poly {
        let mut p = self.clone();
        for (m, &c) in &other.terms {
            p.add_term(m.clone(), c);
        }
        p
    }

    /// `m` when `self = m · unit` for an integer constant `m` (0 for a zero
    /// `self`); `None` otherwise or for a zero `unit`.
    pub fn multiple_of(&self, unit: &Poly) -> Option<i64> {
        let (mono, cu) = unit.terms.iter().next()?;
        let cp = self.terms.get(mono).copied().unwrap_or(0);
        if cp % cu != 0 {
            return None;
        }
        let m = cp / cu;
        (unit.scale(m) == *self).then_some(m)
    }

    /// `c · self`.
    pub fn scale(&self, c: i64) -> Poly {
        if c == 0 {
            return Poly::zero();
        }
        Poly {
            terms: self
                .terms
                .iter()
                .map(|(m, &k)| (m.clone(), k * c))
                .collect(),
        }
    }

    /// `self - other`.
    pub fn sub(&self, other: &Poly) -> Poly {
        self.add(&other.scale(-1))
    }

    /// `self · other`.
    pub fn mul(&self, other: &Poly) -> Poly {
        let mut p = Poly::zero();
        for (m1, &c1) in &self.terms {
            for (m2, &c2) in &other.terms {
                let mut m: Vec<Atom> = m1.iter().chain(m2).copied().collect();
                m.sort();
                p.add_term(m, c1 * c2);
            }
        }
        p
    }

    /// Whether it is 0.
    pub fn is_zero(&self) -> bool {
        self.terms.is_empty()
    }

    /// The value if it is a constant.
    pub fn as_constant(&self) -> Option<i64> {
        match self.terms.len() {
            0 => Some(0),
            1 => self.terms.get(&Vec::new()).copied(),
            _ => None,
        }
    }

    /// Monomials and their coefficients, in canonical order.
    pub fn terms(&self) -> impl Iterator<Item = (&[Atom], i64)> {
        self.terms.iter().map(|(m, &c)| (m.as_slice(), c))
    }

    /// The variables it mentions.
    pub fn vars(&self) -> BTreeSet<VarId> {
        self.terms
            .keys()
            .flatten()
            .filter_map(|a| match a {
                Atom::Var(v) => Some(*v),
                _ => None,
            })
            .collect()
    }

    /// Whether no monomial holds a variable (a coefficient or an offset).
    pub fn is_param_only(&self) -> bool {
        self.vars().is_empty()
    }

    /// Whether every monomial holds at most one variable, to the first power.
    pub fn is_affine(&self) -> bool {
        self.terms
            .keys()
            .all(|m| m.iter().filter(|a| matches!(a, Atom::Var(_))).count() <= 1)
    }

    /// Split into `(a, r)` with `self = a·v + r` and `v` in neither; `None`
    /// when some monomial holds `v` more than once (not affine in `v`).
    pub fn split_var(&self, v: VarId) -> Option<(Poly, Poly)> {
        let mut a = Poly::zero();
        let mut r = Poly::zero();
        for (m, &c) in &self.terms {
            let n = m.iter().filter(|x| **x == Atom::Var(v)).count();
            match n {
                0 => r.add_term(m.clone(), c),
                1 => a.add_term(
                    m.iter().filter(|x| **x != Atom::Var(v)).copied().collect(),
                    c,
                ),
                _ => return None,
            }
        }
        Some((a, r))
    }

    /// Replace variables by polynomials (`f` gives `None` to keep a variable).
    pub fn substitute(&self, f: &dyn Fn(VarId) -> Option<Poly>) -> Poly {
        let mut out = Poly::zero();
        for (m, &c) in &self.terms {
            let mut t = Poly::constant(c);
            for a in m {
                let x = match a {
                    Atom::Var(v) => f(*v).unwrap_or_else(|| Poly::atom(*a)),
                    _ => Poly::atom(*a),
                };
                t = t.mul(&x);
            }
            out = out.add(&t);
        }
        out
    }

    /// Value under concrete dims and attributes; `None` if it holds a
    /// variable or a quotient by zero.
    pub fn eval(&self, dims: &[i64], attrs: &[AttrValue]) -> Option<i64> {
        let mut s = 0i64;
        for (m, &c) in &self.terms {
            let mut t = c;
            for a in m {
                t *= match a {
                    Atom::Var(_) => return None,
                    Atom::Dim(d) => dims[d.0 as usize],
                    Atom::Attr(x) => attr_int(attrs[x.0 as usize]),
                    Atom::Quot(n, d) => floor_div(n.eval(dims, attrs), d.eval(dims, attrs))?,
                };
            }
            s += t;
        }
        Some(s)
    }

    /// The polynomial of a shape expression (a variable's range, a dim of a
    /// tensor); a quotient of two parameters becomes an [`Atom::Quot`].
    /// `None` for `%`, `min`, `max` or any other quotient.
    pub fn of_dim(e: &DimExpr) -> Option<Poly> {
        Some(match e {
            DimExpr::Const(c) => Poly::constant(*c),
            DimExpr::Dim(d) => Poly::atom(Atom::Dim(*d)),
            DimExpr::Attr(a) => Poly::atom(Atom::Attr(*a)),
            DimExpr::Add(a, b) => Poly::of_dim(a)?.add(&Poly::of_dim(b)?),
            DimExpr::Sub(a, b) => Poly::of_dim(a)?.sub(&Poly::of_dim(b)?),
            DimExpr::Mul(a, b) => Poly::of_dim(a)?.mul(&Poly::of_dim(b)?),
            DimExpr::FloorDiv(a, b) => Poly::quotient(&Poly::of_dim(a)?, &Poly::of_dim(b)?)?,
            DimExpr::Mod(..) | DimExpr::Min(..) | DimExpr::Max(..) => return None,
        })
    }

    /// `n // d` as a polynomial: the folded constant, `n` itself for
    /// `d = 1`, or an [`Atom::Quot`] of two parameters; `None` otherwise
    /// (a variable, a product or a sum in either operand, or `d = 0`).
    pub fn quotient(n: &Poly, d: &Poly) -> Option<Poly> {
        match (n.as_constant(), d.as_constant()) {
            (_, Some(0)) => None,
            (_, Some(1)) => Some(n.clone()),
            (Some(a), Some(b)) => floor_div(a, b).map(Poly::constant),
            _ => Some(Poly::atom(Atom::Quot(
                Param::of_poly(n)?,
                Param::of_poly(d)?,
            ))),
        }
    }

    /// Display with the op's names (`2*o*stride + -1*pad`).
    pub fn show<'a>(&'a self, op: &'a OpSpec) -> ShowPoly<'a> {
        ShowPoly { p: self, op }
    }
}

/// An int attribute's value (a float one is truncated, as `tdl::bind` does).
pub(crate) fn attr_int(v: AttrValue) -> i64 {
    match v {
        AttrValue::Int(i) => i,
        AttrValue::Float(f) => f as i64,
    }
}

/// Display adaptor for [`Poly`], see [`Poly::show`].
pub struct ShowPoly<'a> {
    p: &'a Poly,
    op: &'a OpSpec,
}

impl fmt::Display for ShowPoly<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.p.is_zero() {
            return write!(f, "0");
        }
        // Highest-degree monomials first, constant last.
        let mut terms: Vec<(&Vec<Atom>, i64)> = self.p.terms.iter().map(|(m, &c)| (m, c)).collect();
        terms.sort_by_key(|(m, _)| std::cmp::Reverse(m.len()));
        for (i, (m, c)) in terms.into_iter().enumerate() {
            let (sign, c) = if c < 0 { ("-", -c) } else { ("+", c) };
            if i == 0 {
                if sign == "-" {
                    write!(f, "-")?;
                }
            } else {
                write!(f, " {sign} ")?;
            }
            let names: Vec<String> = m.iter().map(|a| atom_name(self.op, *a)).collect();
            match (c, names.is_empty()) {
                (c, true) => write!(f, "{c}")?,
                (1, false) => write!(f, "{}", names.join("*"))?,
                (c, false) => write!(f, "{c}*{}", names.join("*"))?,
            }
        }
        Ok(())
    }
}

/// Name of an atom in the op.
pub(crate) fn atom_name(op: &OpSpec, a: Atom) -> String {
    match a {
        Atom::Var(v) => op
            .vars
            .get(v.0 as usize)
            .map_or_else(|| format!("v{}", v.0), |x| x.name.clone()),
        Atom::Dim(d) => op
            .dims
            .get(d.0 as usize)
            .map_or_else(|| format!("d{}", d.0), |x| x.name.clone()),
        Atom::Attr(x) => op
            .attrs
            .get(x.0 as usize)
            .map_or_else(|| format!("a{}", x.0), |x| x.name.clone()),
        Atom::Quot(n, d) => format!("({} // {})", n.name(op), d.name(op)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_is_canonical() {
        let x = Poly::var(VarId(0));
        let y = Poly::var(VarId(1));
        let a = x.add(&y).scale(2).sub(&Poly::constant(2));
        let b = y.scale(2).add(&x.scale(2)).add(&Poly::constant(-2));
        assert_eq!(a, b);
        assert_eq!(x.sub(&x), Poly::zero());
        let (c, r) = a.split_var(VarId(0)).unwrap();
        assert_eq!(c, Poly::constant(2));
        assert_eq!(r, y.scale(2).add(&Poly::constant(-2)));
        assert!(x.mul(&x).split_var(VarId(0)).is_none());
        assert!(!x.mul(&y).is_affine());
    }
}
