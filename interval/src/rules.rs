//! The egg rewrite rules that bring index expressions to affine normal form.
//!
//! Takes nothing; gives [`IndexLang`] (integer index arithmetic as an egg
//! language), [`ConstFold`] (an e-class analysis folding integer constants)
//! and [`rules`], the ordered list of named, directional rewrites. The normal
//! form they aim at is a *sum of products*: no product has a sum below it,
//! constants lead products (`(* 2 x)`) and trail sums (`(+ x 3)`), and
//! subtraction and negation become multiplication by -1.
//!
//! Kept true (shared/STYLE.md item 9): every rule is directional, constants go
//! to one side, and there is no blanket commutativity or associativity (which
//! would blow up the e-graph); only constants are moved across operands.

use egg::{
    define_language, rewrite as rw, Analysis, DidMerge, EGraph, Id, Rewrite, Subst, Symbol, Var,
};

define_language! {
    /// Integer index arithmetic. Symbols are `v{i}` (index variable),
    /// `d{i}` (symbolic dim) and `a{i}` (int attribute); `Num` is an integer
    /// constant; the operators are `+ - * neg // % min max` as in TDL.
    #[allow(missing_docs)]
    pub enum IndexLang {
        Num(i64),
        "+" = Add([Id; 2]),
        "-" = Sub([Id; 2]),
        "*" = Mul([Id; 2]),
        "neg" = Neg(Id),
        "//" = FloorDiv([Id; 2]),
        "%" = Mod([Id; 2]),
        "min" = Min([Id; 2]),
        "max" = Max([Id; 2]),
        Symbol(Symbol),
    }
}

/// E-class analysis: the integer value of a class, when it is a constant.
/// A constant class also gets a [`IndexLang::Num`] node.
#[derive(Default)]
pub struct ConstFold;

fn floor_div(a: i64, b: i64) -> i64 {
    let q = a.div_euclid(b);
    if b < 0 && a.rem_euclid(b) != 0 {
        q - 1
    } else {
        q
    }
}

impl Analysis<IndexLang> for ConstFold {
    type Data = Option<i64>;

    fn make(egraph: &mut EGraph<IndexLang, Self>, enode: &IndexLang) -> Self::Data {
        let c = |i: &Id| egraph[*i].data;
        match enode {
            IndexLang::Num(n) => Some(*n),
            IndexLang::Add([a, b]) => c(a)?.checked_add(c(b)?),
            IndexLang::Sub([a, b]) => c(a)?.checked_sub(c(b)?),
            IndexLang::Mul([a, b]) => c(a)?.checked_mul(c(b)?),
            IndexLang::Neg(a) => c(a)?.checked_neg(),
            IndexLang::FloorDiv([a, b]) => match c(b)? {
                0 => None,
                d => Some(floor_div(c(a)?, d)),
            },
            IndexLang::Mod([a, b]) => match c(b)? {
                0 => None,
                d => Some(c(a)? - d * floor_div(c(a)?, d)),
            },
            IndexLang::Min([a, b]) => Some(c(a)?.min(c(b)?)),
            IndexLang::Max([a, b]) => Some(c(a)?.max(c(b)?)),
            IndexLang::Symbol(_) => None,
        }
    }

    fn merge(&mut self, to: &mut Self::Data, from: Self::Data) -> DidMerge {
        egg::merge_option(to, from, |a, b| {
            debug_assert_eq!(*a, b, "merged different constants");
            DidMerge(false, false)
        })
    }

    fn modify(egraph: &mut EGraph<IndexLang, Self>, id: Id) {
        if let Some(n) = egraph[id].data {
            let k = egraph.add(IndexLang::Num(n));
            egraph.union(id, k);
        }
    }
}

/// The e-graph type the rules run on.
pub type IndexGraph = EGraph<IndexLang, ConstFold>;

fn is_const(v: &str) -> impl Fn(&mut IndexGraph, Id, &Subst) -> bool {
    let v: Var = v.parse().expect("pattern variable");
    move |g, _, s| g[s[v]].data.is_some()
}

fn not_const(v: &str) -> impl Fn(&mut IndexGraph, Id, &Subst) -> bool {
    let v: Var = v.parse().expect("pattern variable");
    move |g, _, s| g[s[v]].data.is_none()
}

fn positive_const(v: &str) -> impl Fn(&mut IndexGraph, Id, &Subst) -> bool {
    let v: Var = v.parse().expect("pattern variable");
    move |g, _, s| g[s[v]].data.is_some_and(|c| c > 0)
}

/// The rewrite rules, in the order they are listed to the runner (order does
/// not change the result; it groups them by topic).
pub fn rules() -> Vec<Rewrite<IndexLang, ConstFold>> {
    vec![
        // --- subtraction and negation become multiplication by -1 ---
        rw!("sub-to-add-neg"; "(- ?a ?b)" => "(+ ?a (* -1 ?b))"),
        rw!("neg-to-mul"; "(neg ?a)" => "(* -1 ?a)"),
        // --- products are distributed over sums (sum of products) ---
        rw!("distribute-left"; "(* ?a (+ ?b ?c))" => "(+ (* ?a ?b) (* ?a ?c))"),
        rw!("distribute-right"; "(* (+ ?a ?b) ?c)" => "(+ (* ?a ?c) (* ?b ?c))"),
        // --- constants lead products, and merge there ---
        rw!("mul-const-left"; "(* ?a ?c)" => "(* ?c ?a)" if is_const("?c") if not_const("?a")),
        rw!("mul-const-pull"; "(* ?a (* ?c ?b))" => "(* ?c (* ?a ?b))" if is_const("?c") if not_const("?a")),
        rw!("mul-const-merge"; "(* ?c1 (* ?c2 ?a))" => "(* (* ?c1 ?c2) ?a)" if is_const("?c1") if is_const("?c2")),
        rw!("mul-one"; "(* 1 ?a)" => "?a"),
        rw!("mul-zero"; "(* 0 ?a)" => "0"),
        // --- constants trail sums, and merge there ---
        rw!("add-const-right"; "(+ ?c ?a)" => "(+ ?a ?c)" if is_const("?c") if not_const("?a")),
        rw!("add-const-outward"; "(+ (+ ?a ?c) ?b)" => "(+ (+ ?a ?b) ?c)" if is_const("?c") if not_const("?b")),
        rw!("add-const-lift"; "(+ ?a (+ ?b ?c))" => "(+ (+ ?a ?b) ?c)" if is_const("?c")),
        rw!("add-const-merge"; "(+ (+ ?a ?c1) ?c2)" => "(+ ?a (+ ?c1 ?c2))" if is_const("?c1") if is_const("?c2")),
        rw!("add-zero"; "(+ ?a 0)" => "?a"),
        // --- floor division and modulo by a constant that divides exactly ---
        rw!("floordiv-one"; "(// ?a 1)" => "?a"),
        rw!("mod-one"; "(% ?a 1)" => "0"),
        rw!("floordiv-cancel"; "(// (* ?c ?a) ?c)" => "?a" if positive_const("?c")),
        rw!("mod-cancel"; "(% (* ?c ?a) ?c)" => "0" if positive_const("?c")),
        // --- min/max of equal operands ---
        rw!("min-same"; "(min ?a ?a)" => "?a"),
        rw!("max-same"; "(max ?a ?a)" => "?a"),
    ]
}
