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
use tdl::{AttrId, AttrValue, DimId, OpSpec, VarId};

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

    /// Value under concrete dims and attributes; `None` if it holds a variable.
    pub fn eval(&self, dims: &[i64], attrs: &[AttrValue]) -> Option<i64> {
        let mut s = 0i64;
        for (m, &c) in &self.terms {
            let mut t = c;
            for a in m {
                t *= match a {
                    Atom::Var(_) => return None,
                    Atom::Dim(d) => dims[d.0 as usize],
                    Atom::Attr(x) => attr_int(attrs[x.0 as usize]),
                };
            }
            s += t;
        }
        Some(s)
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
