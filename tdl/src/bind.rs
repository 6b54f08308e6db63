//! Shape inference: bind an op's symbolic dims and attributes to concrete
//! values from its input shapes.
//!
//! Takes a checked [`OpSpec`], the concrete input shapes (elements per dim)
//! and the attribute values given by the caller; gives a [`Binding`]: the spec
//! expanded for the actual ellipsis rank, the value of every dim and attribute,
//! and every output and temporary shape. Errors ([`ShapeError`]) name the
//! operator, the tensor and the mismatching dims.

use std::collections::BTreeMap;

use crate::ast::*;

/// Attribute values given by the caller, by name. Missing ones take the spec's default.
pub type Attrs = BTreeMap<String, AttrValue>;

/// Why shapes or attributes do not fit an op.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[allow(missing_docs)]
pub enum ShapeError {
    #[error("`{op}` takes {expected} input(s), got {got}")]
    InputCount {
        op: String,
        expected: usize,
        got: usize,
    },
    #[error("`{op}`: input `{input}` has rank {got}, expected {expected}")]
    Rank {
        op: String,
        input: String,
        expected: String,
        got: usize,
    },
    #[error("`{op}`: dim `{dim}` is {a} in `{first}` but {b} in `{second}`")]
    DimMismatch {
        op: String,
        dim: String,
        first: String,
        a: usize,
        second: String,
        b: usize,
    },
    #[error("`{op}` has no attribute `{attr}` (it has: {known})")]
    UnknownAttr {
        op: String,
        attr: String,
        known: String,
    },
    #[error("`{op}`: attribute `{attr}` is required")]
    MissingAttr { op: String, attr: String },
    #[error("`{op}`: attribute `{attr}` is an int, got {value}")]
    AttrType {
        op: String,
        attr: String,
        value: f64,
    },
    #[error(
        "`{op}`: `{tensor}` dim {axis} = {expr} evaluates to {value}, which is not a valid size"
    )]
    BadDim {
        op: String,
        tensor: String,
        axis: usize,
        expr: String,
        value: i64,
    },
    #[error("`{op}`: division by zero in `{expr}`")]
    DivByZero { op: String, expr: String },
}

/// An op with every dim and attribute bound to a value.
#[derive(Debug, Clone)]
pub struct Binding {
    /// The spec, expanded for the actual ellipsis rank.
    pub spec: OpSpec,
    /// Value of each [`DimId`] (elements).
    pub dims: Vec<i64>,
    /// Value of each [`AttrId`].
    pub attrs: Vec<AttrValue>,
    /// Shape of each input (elements per dim).
    pub input_shapes: Vec<Vec<usize>>,
    /// Shape of each output.
    pub output_shapes: Vec<Vec<usize>>,
    /// Shape of each `let` temporary.
    pub local_shapes: Vec<Vec<usize>>,
}

impl Binding {
    /// Value of a dim expression under this binding (`None` on division by zero).
    pub fn eval_dim(&self, e: &DimExpr) -> Option<i64> {
        eval_dim(e, &self.dims, &self.attrs)
    }

    /// Shape of any tensor of the op.
    pub fn shape(&self, t: TensorRef) -> &[usize] {
        match t {
            TensorRef::Input(i) => &self.input_shapes[i as usize],
            TensorRef::Output(i) => &self.output_shapes[i as usize],
            TensorRef::Local(i) => &self.local_shapes[i as usize],
        }
    }
}

/// Evaluate a dim expression with floor division/modulo; `None` on division by zero.
pub fn eval_dim(e: &DimExpr, dims: &[i64], attrs: &[AttrValue]) -> Option<i64> {
    let b = |x: &DimExpr, y: &DimExpr| Some((eval_dim(x, dims, attrs)?, eval_dim(y, dims, attrs)?));
    Some(match e {
        DimExpr::Const(c) => *c,
        DimExpr::Dim(d) => dims[d.0 as usize],
        DimExpr::Attr(a) => match attrs[a.0 as usize] {
            AttrValue::Int(i) => i,
            AttrValue::Float(f) => f as i64,
        },
        DimExpr::Add(x, y) => b(x, y).map(|(x, y)| x + y)?,
        DimExpr::Sub(x, y) => b(x, y).map(|(x, y)| x - y)?,
        DimExpr::Mul(x, y) => b(x, y).map(|(x, y)| x * y)?,
        DimExpr::FloorDiv(x, y) => {
            let (x, y) = b(x, y)?;
            if y == 0 {
                return None;
            }
            x.div_euclid(y) - if y < 0 && x.rem_euclid(y) != 0 { 1 } else { 0 }
        }
        DimExpr::Mod(x, y) => {
            let (x, y) = b(x, y)?;
            if y == 0 {
                return None;
            }
            x - y * (x.div_euclid(y) - if y < 0 && x.rem_euclid(y) != 0 { 1 } else { 0 })
        }
        DimExpr::Min(x, y) => b(x, y).map(|(x, y)| x.min(y))?,
        DimExpr::Max(x, y) => b(x, y).map(|(x, y)| x.max(y))?,
    })
}

impl OpSpec {
    /// Resolve attribute values: given ones (type-checked) or defaults.
    ///
    /// Errors: unknown attribute, missing required attribute, real for an int.
    pub fn resolve_attrs(&self, given: &Attrs) -> Result<Vec<AttrValue>, ShapeError> {
        for k in given.keys() {
            if self.attr(k).is_none() {
                return Err(ShapeError::UnknownAttr {
                    op: self.name.clone(),
                    attr: k.clone(),
                    known: self
                        .attrs
                        .iter()
                        .map(|a| a.name.clone())
                        .collect::<Vec<_>>()
                        .join(", "),
                });
            }
        }
        self.attrs
            .iter()
            .map(|a| {
                let v = given.get(&a.name).copied().or(a.default).ok_or_else(|| {
                    ShapeError::MissingAttr {
                        op: self.name.clone(),
                        attr: a.name.clone(),
                    }
                })?;
                match (a.ty, v) {
                    (AttrType::Int, AttrValue::Float(f)) if f.fract() != 0.0 => {
                        Err(ShapeError::AttrType {
                            op: self.name.clone(),
                            attr: a.name.clone(),
                            value: f,
                        })
                    }
                    (AttrType::Int, v) => Ok(AttrValue::Int(v.as_f64() as i64)),
                    (AttrType::Float, v) => Ok(AttrValue::Float(v.as_f64())),
                }
            })
            .collect()
    }

    /// Number of ellipsis dims implied by the input shapes (0 if the op has none).
    pub fn ellipsis_rank_for(&self, input_shapes: &[Vec<usize>]) -> Result<usize, ShapeError> {
        for (t, s) in self.inputs.iter().zip(input_shapes) {
            if t.dims.iter().any(|d| matches!(d, DimEntry::Ellipsis)) {
                let fixed = t.dims.len() - 1;
                return s.len().checked_sub(fixed).ok_or_else(|| ShapeError::Rank {
                    op: self.name.clone(),
                    input: t.name.clone(),
                    expected: format!("at least {fixed}"),
                    got: s.len(),
                });
            }
        }
        Ok(0)
    }

    /// Errors with [`ShapeError::InputCount`] unless the op takes `given` inputs.
    pub fn check_input_count(&self, given: usize) -> Result<(), ShapeError> {
        if given != self.inputs.len() {
            return Err(ShapeError::InputCount {
                op: self.name.clone(),
                expected: self.inputs.len(),
                got: given,
            });
        }
        Ok(())
    }

    /// The dim binder: the value of each [`DimId`] (elements) read off the
    /// input shapes, for a spec without `...` (see [`OpSpec::expand_ellipsis`]).
    /// A dim no input names directly is 0.
    ///
    /// Errors: input count, an input of the wrong rank, a dim with two values.
    pub fn bind_dims(&self, input_shapes: &[Vec<usize>]) -> Result<Vec<i64>, ShapeError> {
        self.check_input_count(input_shapes.len())?;
        let spec = self;
        let mut dims: Vec<Option<(usize, usize)>> = vec![None; spec.dims.len()];
        for (ti, (t, s)) in spec.inputs.iter().zip(input_shapes).enumerate() {
            if t.dims.len() != s.len() {
                return Err(ShapeError::Rank {
                    op: spec.name.clone(),
                    input: t.name.clone(),
                    expected: t.dims.len().to_string(),
                    got: s.len(),
                });
            }
            for (d, &n) in t.dims.iter().zip(s) {
                if let DimEntry::Dim(DimExpr::Dim(id)) = d {
                    match dims[id.0 as usize] {
                        None => dims[id.0 as usize] = Some((n, ti)),
                        Some((m, tj)) if m != n => {
                            return Err(ShapeError::DimMismatch {
                                op: spec.name.clone(),
                                dim: spec.dims[id.0 as usize].name.clone(),
                                first: spec.inputs[tj].name.clone(),
                                a: m,
                                second: t.name.clone(),
                                b: n,
                            })
                        }
                        _ => {}
                    }
                }
            }
        }
        Ok(dims
            .into_iter()
            .map(|d| d.map_or(0, |(n, _)| n as i64))
            .collect())
    }

    /// Shape inference (see the module doc).
    pub fn bind(&self, input_shapes: &[Vec<usize>], attrs: &Attrs) -> Result<Binding, ShapeError> {
        self.check_input_count(input_shapes.len())?;
        let attrs = self.resolve_attrs(attrs)?;
        let rank = self.ellipsis_rank_for(input_shapes)?;
        let spec = self.expand_ellipsis(rank);
        let dims = spec.bind_dims(input_shapes)?;
        let shapes = |decls: &[OutputDecl]| -> Result<Vec<Vec<usize>>, ShapeError> {
            decls
                .iter()
                .map(|o| {
                    o.dims
                        .iter()
                        .enumerate()
                        .map(|(axis, d)| {
                            let DimEntry::Dim(e) = d else {
                                unreachable!("expanded")
                            };
                            let shown = spec.show_dim(e).to_string();
                            match eval_dim(e, &dims, &attrs) {
                                None => Err(ShapeError::DivByZero {
                                    op: spec.name.clone(),
                                    expr: shown,
                                }),
                                Some(v) if v < 0 => Err(ShapeError::BadDim {
                                    op: spec.name.clone(),
                                    tensor: o.name.clone(),
                                    axis,
                                    expr: shown,
                                    value: v,
                                }),
                                Some(v) => Ok(v as usize),
                            }
                        })
                        .collect()
                })
                .collect()
        };
        let output_shapes = shapes(&spec.outputs)?;
        let local_shapes = shapes(&spec.locals)?;
        Ok(Binding {
            dims,
            attrs,
            input_shapes: input_shapes.to_vec(),
            output_shapes,
            local_shapes,
            spec,
        })
    }
}
