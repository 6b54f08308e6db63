//! Dependence analysis (thesis Alg. 3, Orion Alg. 2): dependence vectors
//! from the declared subscripts.
//!
//! Takes a [`LoopSpec`]; gives the set of lexicographically positive
//! dependence vectors, one component per loop dimension, each an exact
//! distance or `*` (any distance). Every write reference is paired with every
//! reference to the same array, itself included; read–read pairs are skipped,
//! and write–write pairs too when the loop is unordered. Buffered writes are
//! exempt. Keeps true (checked by brute force in `tests/soundness.rs`): for
//! any two iterations p <lex q that conflict, q − p is covered by a vector.

use std::fmt;

use crate::spec::{LoopSpec, Sub};

/// One component of a dependence vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dist {
    /// Exactly this distance.
    Exact(i64),
    /// Any distance (Orion's ∞), from subscripts that do not pin it.
    Any,
}

/// A dependence vector: the set of distances q − p (lexicographically
/// positive) between conflicting iterations p and q that it covers.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DepVec(pub Vec<Dist>);

impl DepVec {
    /// True when the concrete, lexicographically positive distance `d` is
    /// one this vector stands for.
    pub fn covers(&self, d: &[i64]) -> bool {
        self.0.len() == d.len()
            && self.0.iter().zip(d).all(|(c, &x)| match c {
                Dist::Exact(e) => *e == x,
                Dist::Any => true,
            })
    }

    /// True when component `k` is exactly 0.
    pub fn is_zero(&self, k: usize) -> bool {
        self.0[k] == Dist::Exact(0)
    }

    /// True when some covered (lexicographically positive) distance has a
    /// negative component `k`: an exact negative value, or `*` after a
    /// component that is not exactly 0.
    pub fn may_be_negative(&self, k: usize) -> bool {
        match self.0[k] {
            Dist::Exact(e) => e < 0,
            Dist::Any => !(0..k).all(|j| self.is_zero(j)),
        }
    }

    /// True when every component is exact.
    pub fn is_exact(&self) -> bool {
        self.0.iter().all(|c| matches!(c, Dist::Exact(_)))
    }

    /// Components as JSON-friendly text: numbers, or `*`.
    pub fn components(&self) -> Vec<String> {
        self.0
            .iter()
            .map(|c| match c {
                Dist::Exact(e) => e.to_string(),
                Dist::Any => "*".to_string(),
            })
            .collect()
    }
}

impl fmt::Display for DepVec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({})", self.components().join(", "))
    }
}

/// One reference for the analysis: an access split into its read and write.
struct Ref<'a> {
    array: usize,
    subs: &'a [Sub],
    write: bool,
}

/// The dependence vectors of `spec` (thesis Alg. 3), sorted, without
/// duplicates and without the zero vector (an iteration with itself).
pub fn dependence_vectors(spec: &LoopSpec) -> Vec<DepVec> {
    let mut refs = vec![];
    for a in &spec.accesses {
        if a.mode.reads() {
            refs.push(Ref {
                array: a.array,
                subs: &a.subs,
                write: false,
            });
        }
        if a.mode.writes() {
            refs.push(Ref {
                array: a.array,
                subs: &a.subs,
                write: true,
            });
        }
    }
    let mut out = vec![];
    for (ia, ra) in refs.iter().enumerate() {
        for rb in &refs[ia..] {
            if ra.array != rb.array || (!ra.write && !rb.write) {
                continue;
            }
            if !spec.ordered && ra.write && rb.write {
                continue;
            }
            if let Some(v) = pair_vector(spec.ndim, ra.subs, rb.subs) {
                out.extend(
                    lex_positive(v)
                        .into_iter()
                        .filter(|v| v.0.iter().any(|c| *c != Dist::Exact(0))),
                );
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The vector of one reference pair, or `None` when they never touch the
/// same element (inconsistent distances or different constants).
fn pair_vector(ndim: usize, a: &[Sub], b: &[Sub]) -> Option<DepVec> {
    let mut v = vec![Dist::Any; ndim];
    for (sa, sb) in a.iter().zip(b) {
        match (*sa, *sb) {
            (
                Sub::Index {
                    dim: da,
                    offset: ca,
                },
                Sub::Index {
                    dim: db,
                    offset: cb,
                },
            ) if da == db => {
                // p[d] + ca = q[d] + cb  ⇒  q[d] − p[d] = ca − cb.
                let dist = ca - cb;
                match v[da] {
                    Dist::Exact(e) if e != dist => return None,
                    _ => v[da] = Dist::Exact(dist),
                }
            }
            (Sub::Const(x), Sub::Const(y)) if x != y => return None,
            // Different loop indices, index vs constant, or `any`: the pair
            // may meet at some distance; leave the dimensions unconstrained.
            _ => {}
        }
    }
    Some(DepVec(v))
}

/// The lexicographically positive forms of a pair's vector: negated when
/// its first component that is not exactly 0 is an exact negative number;
/// both signs when that component is `*` (the pair meets in either order).
fn lex_positive(v: DepVec) -> Vec<DepVec> {
    let neg = DepVec(
        v.0.iter()
            .map(|c| match c {
                Dist::Exact(e) => Dist::Exact(-e),
                Dist::Any => Dist::Any,
            })
            .collect(),
    );
    match v.0.iter().find(|c| **c != Dist::Exact(0)) {
        Some(Dist::Exact(e)) if *e < 0 => vec![neg],
        Some(Dist::Any) if neg != v => vec![v, neg],
        _ => vec![v],
    }
}
