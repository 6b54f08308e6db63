//! The typed, name-resolved AST of a TDL operator (Tofu §3.1).
//!
//! Takes nothing: these are the data types produced by [`crate::lower`] from
//! the pest parse tree. Gives an [`OpSpec`] per operator in which every name is
//! resolved: index variables are [`VarId`]s with a symbolic range, tensors are
//! [`TensorRef`]s, symbolic dimensions are [`DimId`]s, attributes are
//! [`AttrId`]s. Every expression carries its [`Span`] in the source file so
//! later passes (interval analysis, shape inference) can point at it.
//!
//! Invariants kept by [`crate::lower`]: every `VarId`, `DimId`, `AttrId` and
//! `TensorRef` indexes into the owning `OpSpec`'s tables; every tensor read has
//! as many indices as the tensor has dimensions (an ellipsis counting as
//! "the ellipsis dims"); every statement's target is an output or a local and
//! each output is defined by exactly one statement; expressions in index
//! position are integer-typed or data-dependent (contain a tensor read).
//! An op whose [`OpSpec::has_ellipsis`] is true must be specialised with
//! [`OpSpec::expand_ellipsis`] before interpretation or analysis.

pub use crate::show::{ShowDim, ShowExpr};

use serde::{Deserialize, Serialize};

/// Byte range `[start, end)` in the source text of the file an op came from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Span {
    /// First byte (inclusive).
    pub start: usize,
    /// Last byte (exclusive).
    pub end: usize,
}

impl Span {
    /// A span covering `start..end` bytes.
    pub fn new(start: usize, end: usize) -> Self {
        Span { start, end }
    }
}

/// Index of an index variable in [`OpSpec::vars`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct VarId(pub u32);
/// Index of a symbolic dimension in [`OpSpec::dims`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct DimId(pub u32);
/// Index of an attribute in [`OpSpec::attrs`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AttrId(pub u32);

/// A tensor an expression can read or a statement can define.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum TensorRef {
    /// The i-th declared input.
    Input(u32),
    /// The i-th declared output.
    Output(u32),
    /// The i-th `let` temporary (see [`OpSpec::locals`]).
    Local(u32),
}

/// Type of a compile-time attribute.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AttrType {
    /// A signed integer (stride, padding, axis…). Usable in index and dim expressions.
    Int,
    /// A real number (epsilon, learning rate…). Usable only in value expressions.
    Float,
}

/// A concrete attribute value.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum AttrValue {
    /// Value of an `int` attribute.
    Int(i64),
    /// Value of a `float` attribute (±inf allowed: a one-sided clamp's
    /// bound; serialized as a number, non-finite values as `"inf"`,
    /// `"-inf"`, `"NaN"`, since JSON has no infinities).
    Float(#[serde(with = "real")] f64),
}

/// Serde of a real that may be non-finite: finite values as numbers, others
/// as the strings `"inf"`, `"-inf"` and `"NaN"`.
mod real {
    use std::fmt;

    use serde::{de, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        if v.is_finite() {
            s.serialize_f64(*v)
        } else if v.is_nan() {
            s.serialize_str("NaN")
        } else if *v > 0.0 {
            s.serialize_str("inf")
        } else {
            s.serialize_str("-inf")
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        d.deserialize_any(Real)
    }

    struct Real;

    impl de::Visitor<'_> for Real {
        type Value = f64;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a number, \"inf\", \"-inf\" or \"NaN\"")
        }

        fn visit_f64<E: de::Error>(self, v: f64) -> Result<f64, E> {
            Ok(v)
        }

        fn visit_i64<E: de::Error>(self, v: i64) -> Result<f64, E> {
            Ok(v as f64)
        }

        fn visit_u64<E: de::Error>(self, v: u64) -> Result<f64, E> {
            Ok(v as f64)
        }

        fn visit_str<E: de::Error>(self, v: &str) -> Result<f64, E> {
            match v {
                "inf" => Ok(f64::INFINITY),
                "-inf" => Ok(f64::NEG_INFINITY),
                "NaN" => Ok(f64::NAN),
                _ => Err(E::invalid_value(de::Unexpected::Str(v), &self)),
            }
        }
    }
}

impl AttrValue {
    /// The value as a real number.
    pub fn as_f64(self) -> f64 {
        match self {
            AttrValue::Int(i) => i as f64,
            AttrValue::Float(f) => f,
        }
    }
}

/// `name: type = default` in an op's `<...>` list.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AttrDecl {
    /// Attribute name, e.g. `stride`.
    pub name: String,
    /// Declared type.
    pub ty: AttrType,
    /// Default value; `None` means the attribute is required.
    pub default: Option<AttrValue>,
    /// Where it is declared.
    pub span: Span,
}

/// One entry of a tensor's declared shape.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum DimEntry {
    /// A single dimension.
    Dim(DimExpr),
    /// `...`: the op's ellipsis of batch dims (zero or more dims).
    Ellipsis,
}

/// A declared input `[padded] name[D0, D1, ...]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InputDecl {
    /// Tensor name.
    pub name: String,
    /// Shape; every `Dim` entry of an input is a bare [`DimExpr::Dim`].
    pub dims: Vec<DimEntry>,
    /// Reads outside the bounds yield 0 instead of being an error.
    pub padded: bool,
    /// Where it is declared.
    pub span: Span,
}

/// A declared output `name[expr, ...]` or a `let` temporary.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OutputDecl {
    /// Tensor name.
    pub name: String,
    /// Shape as expressions of input dims and int attributes.
    pub dims: Vec<DimEntry>,
    /// Where it is declared.
    pub span: Span,
}

/// A symbolic dimension bound by an input declaration (e.g. `K` in `a[M, K]`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DimInfo {
    /// Name as written (`K`), or `_e{i}` for the i-th ellipsis dim after expansion.
    pub name: String,
    /// First binding site: which input and which axis of it.
    pub input: u32,
    /// Axis of `input` that binds it (after ellipsis expansion).
    pub axis: u32,
}

/// An index variable: an output/local coordinate or a reduction variable.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VarInfo {
    /// Name as written (`m`, `dx`), or `_e{i}` for the i-th ellipsis variable.
    pub name: String,
    /// The variable ranges over `[0, range)`.
    pub range: DimExpr,
    /// Whether it is bound by a reducer (`Sum(k: ...)`) rather than a statement's target.
    pub reduction: bool,
    /// The ellipsis position it stands for, if it was created by `...` expansion.
    pub ellipsis: Option<u32>,
    /// A placeholder for a `...` binder (before expansion only); its range is meaningless.
    pub ellipsis_group: bool,
    /// Where it is bound.
    pub span: Span,
}

/// An integer expression over symbolic dims and int attributes: shapes and ranges.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum DimExpr {
    /// An integer literal.
    Const(i64),
    /// A symbolic dimension.
    Dim(DimId),
    /// An int attribute.
    Attr(AttrId),
    /// `a + b`.
    Add(Box<DimExpr>, Box<DimExpr>),
    /// `a - b`.
    Sub(Box<DimExpr>, Box<DimExpr>),
    /// `a * b`.
    Mul(Box<DimExpr>, Box<DimExpr>),
    /// `a // b` (floor division).
    FloorDiv(Box<DimExpr>, Box<DimExpr>),
    /// `a % b` (floor modulo).
    Mod(Box<DimExpr>, Box<DimExpr>),
    /// `min(a, b)`.
    Min(Box<DimExpr>, Box<DimExpr>),
    /// `max(a, b)`.
    Max(Box<DimExpr>, Box<DimExpr>),
}

/// A statement `[let] t[v0, v1, ...] = body;` defining an output or a temporary.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stmt {
    /// The tensor defined (an output or a local).
    pub target: TensorRef,
    /// The coordinates bound by the left-hand side, one per target dimension.
    pub vars: Vec<VarId>,
    /// The value of element `target[vars]`.
    pub body: Expr,
    /// Where the statement is.
    pub span: Span,
}

/// A reducer of Tofu's partition-n-reduce (case 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Reducer {
    /// Sum; identity 0.
    Sum,
    /// Maximum; identity -inf.
    Max,
    /// Minimum; identity +inf.
    Min,
    /// Product; identity 1.
    Prod,
}

impl Reducer {
    /// The identity element (value of an empty reduction).
    pub fn identity(self) -> f64 {
        match self {
            Reducer::Sum => 0.0,
            Reducer::Max => f64::NEG_INFINITY,
            Reducer::Min => f64::INFINITY,
            Reducer::Prod => 1.0,
        }
    }
    /// Combine two partial results.
    pub fn combine(self, a: f64, b: f64) -> f64 {
        match self {
            Reducer::Sum => a + b,
            Reducer::Max => a.max(b),
            Reducer::Min => a.min(b),
            Reducer::Prod => a * b,
        }
    }
    /// Keyword as written in TDL.
    pub fn name(self) -> &'static str {
        match self {
            Reducer::Sum => "Sum",
            Reducer::Max => "Max",
            Reducer::Min => "Min",
            Reducer::Prod => "Prod",
        }
    }
}

/// Binary operators. Arithmetic on two ints stays int (index arithmetic);
/// `/` is real division, `//` floor division, `%` floor modulo; comparisons and
/// logical operators yield 1.0 or 0.0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[allow(missing_docs)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    FloorDiv,
    Mod,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    And,
    Or,
}

impl BinOp {
    /// The operator as written in TDL.
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::FloorDiv => "//",
            BinOp::Mod => "%",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::And => "&&",
            BinOp::Or => "||",
        }
    }
}

/// Unary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum UnOp {
    /// Arithmetic negation `-x`.
    Neg,
    /// Logical not `!x` (1.0 if x == 0, else 0.0).
    Not,
}

/// Built-in scalar functions (elementwise, total on reals where the math is).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[allow(missing_docs)]
pub enum Builtin {
    Exp,
    Log,
    Sqrt,
    Tanh,
    Sigmoid,
    Erf,
    Abs,
    Max,
    Min,
    Pow,
    /// `select(cond, a, b)`: `a` if `cond != 0` else `b`; only the chosen branch is evaluated.
    Select,
    Sin,
    Cos,
    Tan,
    Asin,
    Acos,
    Atan,
    Sinh,
    Cosh,
    Asinh,
    Acosh,
    Atanh,
    Floor,
    Ceil,
    Round,
    Sign,
}

impl Builtin {
    /// All built-ins with their TDL names and arities.
    pub const ALL: &'static [(Builtin, &'static str, usize)] = &[
        (Builtin::Exp, "exp", 1),
        (Builtin::Log, "log", 1),
        (Builtin::Sqrt, "sqrt", 1),
        (Builtin::Tanh, "tanh", 1),
        (Builtin::Sigmoid, "sigmoid", 1),
        (Builtin::Erf, "erf", 1),
        (Builtin::Abs, "abs", 1),
        (Builtin::Max, "max", 2),
        (Builtin::Min, "min", 2),
        (Builtin::Pow, "pow", 2),
        (Builtin::Select, "select", 3),
        (Builtin::Sin, "sin", 1),
        (Builtin::Cos, "cos", 1),
        (Builtin::Tan, "tan", 1),
        (Builtin::Asin, "asin", 1),
        (Builtin::Acos, "acos", 1),
        (Builtin::Atan, "atan", 1),
        (Builtin::Sinh, "sinh", 1),
        (Builtin::Cosh, "cosh", 1),
        (Builtin::Asinh, "asinh", 1),
        (Builtin::Acosh, "acosh", 1),
        (Builtin::Atanh, "atanh", 1),
        (Builtin::Floor, "floor", 1),
        (Builtin::Ceil, "ceil", 1),
        (Builtin::Round, "round", 1),
        (Builtin::Sign, "sign", 1),
    ];

    /// Look a built-in up by its TDL name; gives it and its arity.
    pub fn lookup(name: &str) -> Option<(Builtin, usize)> {
        Self::ALL
            .iter()
            .find(|(_, n, _)| *n == name)
            .map(|(b, _, a)| (*b, *a))
    }

    /// The TDL name.
    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(b, _, _)| *b == self)
            .map(|(_, n, _)| *n)
            .unwrap_or("?")
    }
}

/// One index of a tensor read.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Index {
    /// An index expression (integer-typed, or data-dependent).
    Expr(Expr),
    /// `...`: the ellipsis variables bound by the innermost `...` binder, given
    /// by its placeholder variable (before expansion only).
    Ellipsis(VarId),
    /// `:` the whole dimension (only in arguments of opaque functions).
    Full,
}

/// Static type of an expression.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Type {
    /// An integer built from literals, index variables, dims and int attributes.
    Int,
    /// A real value (anything involving a tensor element, a real literal or a float attribute).
    Real,
}

/// An expression node with its source span and static type.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Expr {
    /// What it is.
    pub kind: ExprKind,
    /// Where it is in the source.
    pub span: Span,
    /// Its static type.
    pub ty: Type,
}

/// Expression forms (Tofu §3.1: constants, index variables, tensor elements,
/// arithmetic, reductions, opaque functions).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ExprKind {
    /// Integer literal.
    Int(i64),
    /// Real literal.
    Real(f64),
    /// An index variable.
    Var(VarId),
    /// The size of a symbolic dimension.
    Dim(DimId),
    /// An attribute's value.
    Attr(AttrId),
    /// An element `t[i0, i1, ...]`.
    Read {
        /// Which tensor.
        tensor: TensorRef,
        /// One index per dimension (ellipsis counts for the ellipsis dims).
        indices: Vec<Index>,
    },
    /// `-a`, `!a`.
    Unary(UnOp, Box<Expr>),
    /// `a op b`.
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// A built-in scalar function.
    Call(Builtin, Vec<Expr>),
    /// `Sum(k, l: body)` etc.
    Reduce {
        /// The reducer.
        reducer: Reducer,
        /// The reduction variables it binds.
        vars: Vec<VarId>,
        /// The reduced expression.
        body: Box<Expr>,
    },
    /// An opaque function over slices, e.g. `cholesky(m[b, :, :])[i, j]`.
    Opaque {
        /// Function name (see [`crate::opaque`]).
        name: String,
        /// Arguments: slices (reads with `:` indices) or scalar expressions.
        args: Vec<Expr>,
        /// Index into the function's result (empty for a scalar result).
        index: Vec<Expr>,
    },
}

/// The expression visitor: every walker over [`Expr`] trees (lowering checks,
/// interval analysis, codegen, the kernels) goes through these two methods
/// instead of matching every [`ExprKind`] itself.
impl Expr {
    /// The direct sub-expressions of `self`, in source order: the index
    /// expressions of a read (not `...` or `:`), the operands of a unary or
    /// binary operator, the arguments of a call, the body of a reduction, and
    /// the arguments then result indices of an opaque function. Leaves
    /// (literals, variables, dims, attributes) have none.
    pub fn children(&self) -> impl Iterator<Item = &Expr> + '_ {
        let (slice, pair): (&[Expr], [Option<&Expr>; 2]) = match &self.kind {
            ExprKind::Unary(_, a) => (&[], [Some(a), None]),
            ExprKind::Binary(_, a, b) => (&[], [Some(a), Some(b)]),
            ExprKind::Call(_, args) => (args, [None, None]),
            ExprKind::Reduce { body, .. } => (&[], [Some(body), None]),
            ExprKind::Opaque { args, .. } => (args, [None, None]),
            _ => (&[], [None, None]),
        };
        let indices: &[Index] = match &self.kind {
            ExprKind::Read { indices, .. } => indices,
            _ => &[],
        };
        let opaque_index: &[Expr] = match &self.kind {
            ExprKind::Opaque { index, .. } => index,
            _ => &[],
        };
        indices
            .iter()
            .filter_map(|i| match i {
                Index::Expr(x) => Some(x),
                _ => None,
            })
            .chain(pair.into_iter().flatten())
            .chain(slice)
            .chain(opaque_index)
    }

    /// Pre-order walk: `f` sees `self`, then every sub-expression (see
    /// [`Expr::children`]) depth first.
    pub fn visit(&self, f: &mut dyn FnMut(&Expr)) {
        f(self);
        for c in self.children() {
            c.visit(f);
        }
    }

    /// The direct sub-expressions of `self`, mutably, in the order of
    /// [`Expr::children`].
    pub fn children_mut(&mut self) -> Vec<&mut Expr> {
        match &mut self.kind {
            ExprKind::Read { indices, .. } => indices
                .iter_mut()
                .filter_map(|i| match i {
                    Index::Expr(x) => Some(x),
                    _ => None,
                })
                .collect(),
            ExprKind::Unary(_, a) => vec![a],
            ExprKind::Binary(_, a, b) => vec![a, b],
            ExprKind::Call(_, args) => args.iter_mut().collect(),
            ExprKind::Reduce { body, .. } => vec![body],
            ExprKind::Opaque { args, index, .. } => {
                args.iter_mut().chain(index.iter_mut()).collect()
            }
            _ => vec![],
        }
    }

    /// Post-order rewrite: every sub-expression (see [`Expr::children`]) is
    /// rewritten depth first, then `f` rewrites `self` (so what `f` inserts
    /// is not visited again).
    pub fn rewrite(&mut self, f: &mut dyn FnMut(&mut Expr)) {
        for c in self.children_mut() {
            c.rewrite(f);
        }
        f(self);
    }

    /// Whether `f` holds for `self` or any sub-expression (pre-order, stops
    /// at the first hit).
    pub fn any(&self, f: &mut dyn FnMut(&Expr) -> bool) -> bool {
        f(self) || self.children().any(|c| c.any(f))
    }
}

/// Pre-order walk over an expression and all its sub-expressions (including
/// indices); the free-function form of [`Expr::visit`].
pub fn visit(e: &Expr, f: &mut dyn FnMut(&Expr)) {
    e.visit(f)
}

/// `grad x, y = op(args; attr = expr, ...);`: which spec computes the gradients
/// of some inputs from the output gradients.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GradDecl {
    /// The inputs (indices into [`OpSpec::inputs`]) whose gradients are the
    /// outputs of `op`, in order.
    pub wrt: Vec<u32>,
    /// Name of the op computing them.
    pub op: String,
    /// Its arguments, in its input order.
    pub args: Vec<GradArg>,
    /// Attribute values passed to it, as constant expressions over this op's
    /// dims and attributes (no index variables, no tensor reads).
    pub attrs: Vec<(String, Expr)>,
    /// Where the declaration is.
    pub span: Span,
}

/// An argument of a gradient op.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum GradArg {
    /// A forward input or output, by reference.
    Tensor(TensorRef),
    /// `grad(y)`: the gradient of the forward output `y` (index into outputs).
    OutputGrad(u32),
}

/// A checked operator spec.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OpSpec {
    /// Operator name, e.g. `conv2d`.
    pub name: String,
    /// The `///` doc comment: semantics and source.
    pub doc: String,
    /// File the op was read from (for diagnostics).
    pub file: String,
    /// Span of the whole op.
    pub span: Span,
    /// Compile-time attributes.
    pub attrs: Vec<AttrDecl>,
    /// Inputs.
    pub inputs: Vec<InputDecl>,
    /// Outputs.
    pub outputs: Vec<OutputDecl>,
    /// `let` temporaries.
    pub locals: Vec<OutputDecl>,
    /// Symbolic dims bound by the inputs.
    pub dims: Vec<DimInfo>,
    /// Index variables.
    pub vars: Vec<VarInfo>,
    /// Statements in definition order (a local is defined before it is read).
    pub stmts: Vec<Stmt>,
    /// Gradient declarations.
    pub grads: Vec<GradDecl>,
    /// Number of ellipsis dims if this spec was produced by [`OpSpec::expand_ellipsis`].
    pub ellipsis_rank: Option<u32>,
}

impl OpSpec {
    /// Whether any declaration or expression still uses `...`.
    pub fn has_ellipsis(&self) -> bool {
        let ell = |d: &[DimEntry]| d.iter().any(|d| matches!(d, DimEntry::Ellipsis));
        self.inputs.iter().any(|t| ell(&t.dims))
            || self
                .outputs
                .iter()
                .chain(&self.locals)
                .any(|t| ell(&t.dims))
    }

    /// Name of a tensor.
    pub fn tensor_name(&self, t: TensorRef) -> &str {
        match t {
            TensorRef::Input(i) => &self.inputs[i as usize].name,
            TensorRef::Output(i) => &self.outputs[i as usize].name,
            TensorRef::Local(i) => &self.locals[i as usize].name,
        }
    }

    /// Declared shape of a tensor (inputs: bare dims; outputs/locals: expressions).
    pub fn tensor_dims(&self, t: TensorRef) -> &[DimEntry] {
        match t {
            TensorRef::Input(i) => &self.inputs[i as usize].dims,
            TensorRef::Output(i) => &self.outputs[i as usize].dims,
            TensorRef::Local(i) => &self.locals[i as usize].dims,
        }
    }

    /// The statement defining a tensor, if any (inputs have none).
    pub fn defining_stmt(&self, t: TensorRef) -> Option<&Stmt> {
        self.stmts.iter().find(|s| s.target == t)
    }

    /// Look up an attribute by name.
    pub fn attr(&self, name: &str) -> Option<AttrId> {
        self.attrs
            .iter()
            .position(|a| a.name == name)
            .map(|i| AttrId(i as u32))
    }

    /// Look up an input by name.
    pub fn input(&self, name: &str) -> Option<u32> {
        self.inputs
            .iter()
            .position(|a| a.name == name)
            .map(|i| i as u32)
    }

    /// Look up an output by name.
    pub fn output(&self, name: &str) -> Option<u32> {
        self.outputs
            .iter()
            .position(|a| a.name == name)
            .map(|i| i as u32)
    }

    /// Pretty-print an expression with this op's names (used in error messages).
    pub fn show<'a>(&'a self, e: &'a Expr) -> ShowExpr<'a> {
        ShowExpr::new(self, e)
    }

    /// Pretty-print a dim expression with this op's names.
    pub fn show_dim<'a>(&'a self, e: &'a DimExpr) -> ShowDim<'a> {
        ShowDim::new(self, e)
    }
}
