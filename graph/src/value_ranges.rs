//! Value ranges of a graph's tensors, for the synthetic values of integer
//! graph inputs that index tables (issue 45).
//!
//! Takes a [`Graph`] and the leaves' ranges (their values, fills, or the
//! values a run was given); gives each tensor an interval that holds every
//! value it can take ([`ranges`], `None` where an operator's values cannot be
//! bounded from its inputs'), the row ids each index read needs (an input
//! read as a whole index of another input's dim in its spec: `embedding`,
//! `gather`, `take_last`, `gather_elements_last`, `gather_nd_*`), the fills of integer graph inputs that keep every id
//! derived from them inside its table ([`integer_input_fills`], used by the
//! ONNX importer), and the check a run makes before it synthesizes inputs
//! ([`check_synthetic_ids`]): an input whose derived ids cannot be shown to
//! be rows is named, with the operator that hides its values, and the fix
//! (`--inputs`).
//!
//! The intervals are sound (every value lies inside) for the operators of
//! [`transfer`]: data movement, casts, integer arithmetic with known
//! operands, comparisons, reductions; every other operator gives `None`.
//! Fills are chosen by carrying each read's `[0, rows)` back through the
//! operators that can be inverted with the other operands fixed (movement,
//! casts, add/sub/mul/neg/scale with an operand that depends on no graph
//! input), then checked forward.

use std::collections::{BTreeSet, HashMap};

use tdl::{AttrValue, ExprKind, Index, Library, OpSpec, TensorRef};

use crate::{Fill, Graph, Op, OpId, OpRole, TensorId, TensorRole};

/// An interval `[lo, hi]` (inclusive) of a tensor's values; `None`: unbounded.
pub type Interval = Option<(f64, f64)>;

/// Operators whose output holds values of their first input only.
const MOVES: &[&str] = &[
    "identity",
    "transpose",
    "batch_transpose",
    "transpose_0213",
    "flatten",
    "unflatten",
    "split_last",
    "split_channels",
    "slice",
    "reverse_last",
    "tile_last",
    "split_heads",
    "merge_heads",
    "take_row",
    "take_last",
    "diagonal",
    "crop2d",
    "pad_edge",
    "pad_reflect",
    "pad_wrap",
    "gather",
    "embedding",
    "gather_elements_last",
    "gather_nd_1",
    "gather_nd_2",
    "reduce_max",
    "reduce_min",
];

/// Monotone maps of one input (the interval's ends map to the ends).
const MONOTONE: &[&str] = &[
    "cast_trunc",
    "cast_float_round",
    "cast_int_wrap",
    "floor",
    "ceil",
    "round",
    "relu",
];

/// Operators whose values are 0 or 1.
const BOOLEAN: &[&str] = &[
    "cast_bool",
    "less",
    "less_equal",
    "greater",
    "greater_equal",
    "equal",
    "not_equal",
    "logical_and",
    "logical_or",
    "logical_xor",
    "logical_not",
    "is_nan",
    "is_inf",
    "one_hot",
];

/// An index read: `op` reads rows `[0, rows)` of its table at the values of
/// `ids`.
#[derive(Clone, Debug, PartialEq)]
pub struct IndexRead {
    /// The reading operator.
    pub op: OpId,
    /// The tensor of row ids.
    pub ids: TensorId,
    /// The table's rows (the length of the dim the ids index).
    pub rows: usize,
}

/// Per spec input, whether its values index another input directly (its
/// read is the whole index expression of a dim, `table[ids[...], d]`).
fn reads_as_ids(spec: &OpSpec) -> Vec<(u32, u32, usize)> {
    let mut found = Vec::new();
    for st in &spec.stmts {
        st.body.visit(&mut |e| {
            let ExprKind::Read {
                tensor: TensorRef::Input(table),
                indices,
            } = &e.kind
            else {
                return;
            };
            for (d, ix) in indices.iter().enumerate() {
                if let Index::Expr(ie) = ix {
                    if let ExprKind::Read {
                        tensor: TensorRef::Input(ids),
                        ..
                    } = &ie.kind
                    {
                        found.push((*ids, *table, d));
                    }
                }
            }
        });
    }
    found
}

/// The forward index reads of `g`, found from the specs in `lib`: an input
/// read as the whole index of a dim of another input (`embedding`,
/// `gather`, `take_last`, `gather_elements_last`, `gather_nd_*`) must hold
/// values in `[0, n)` of that dim (the smallest such dim per op and input).
pub fn index_reads(g: &Graph, lib: &Library) -> Vec<IndexRead> {
    let mut direct: HashMap<&str, bool> = HashMap::new();
    let mut out: Vec<IndexRead> = Vec::new();
    for o in g.op_ids() {
        let op = g.op(o);
        if op.role != OpRole::Forward {
            continue;
        }
        let Some(spec) = lib.get(&op.spec) else {
            continue;
        };
        if !*direct
            .entry(op.spec.as_str())
            .or_insert_with(|| !reads_as_ids(spec).is_empty())
        {
            continue;
        }
        // The expanded spec: an ellipsis stands for as many dims as it binds.
        let Ok((_, b)) = g.bind_op(lib, op) else {
            continue;
        };
        for (ids, table, d) in reads_as_ids(&b.spec) {
            let (ids, table) = (op.inputs[ids as usize], op.inputs[table as usize]);
            let Some(&rows) = g.tensor(table).shape.get(d) else {
                continue;
            };
            match out.iter_mut().find(|r| r.op == o && r.ids == ids) {
                Some(r) => r.rows = r.rows.min(rows),
                None => out.push(IndexRead { op: o, ids, rows }),
            }
        }
    }
    out
}

/// The interval of a leaf from its known values or its fill.
pub fn leaf_interval(g: &Graph, t: TensorId) -> Interval {
    let x = g.tensor(t);
    if let Some(v) = &x.value {
        return hull_of(v);
    }
    match x.fill? {
        Fill::Constant { value } => Some((value, value)),
        Fill::Indices { bound } => Some((0.0, bound.max(1) as f64 - 1.0)),
        Fill::Range { lo, hi } => Some((lo as f64, (hi - 1).max(lo) as f64)),
        Fill::Positions => Some((
            0.0,
            x.shape.last().copied().unwrap_or(1).max(1) as f64 - 1.0,
        )),
        Fill::Probabilities => Some((0.0, 1.0)),
        Fill::Normal { .. } => None,
    }
}

/// The smallest interval holding `v` (`None` for an empty or NaN slice).
pub fn hull_of(v: &[f64]) -> Interval {
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (lo <= hi).then_some((lo, hi))
}

/// Every tensor's interval: leaves from `leaves` when listed there, else
/// [`leaf_interval`]; operators' outputs by [`transfer`].
pub fn ranges(g: &Graph, leaves: &HashMap<TensorId, Interval>) -> Vec<Interval> {
    let mut iv: Vec<Interval> = g
        .tensor_ids()
        .map(|t| match leaves.get(&t) {
            Some(i) => *i,
            None if g.producer(t).is_none() => leaf_interval(g, t),
            None => None,
        })
        .collect();
    for o in g.topo_order() {
        let op = g.op(o);
        let ins: Vec<Interval> = op.inputs.iter().map(|t| iv[t.0 as usize]).collect();
        let out = transfer(g, op, &ins);
        for t in &op.outputs {
            iv[t.0 as usize] = out;
        }
    }
    iv
}

fn hull(a: Interval, b: Interval) -> Interval {
    let ((a0, a1), (b0, b1)) = (a?, b?);
    Some((a0.min(b0), a1.max(b1)))
}

fn mul(a: Interval, b: Interval) -> Interval {
    let ((a0, a1), (b0, b1)) = (a?, b?);
    let p = [a0 * b0, a0 * b1, a1 * b0, a1 * b1];
    hull_of(&p)
}

fn attr(op: &Op, name: &str) -> Option<f64> {
    match op.attrs.get(name)? {
        AttrValue::Int(i) => Some(*i as f64),
        AttrValue::Float(f) => Some(*f),
    }
}

fn numel(g: &Graph, t: TensorId) -> usize {
    g.tensor(t).shape.iter().product()
}

/// The last dim of `op`'s first input (1 for a scalar).
fn last_dim(g: &Graph, op: &Op) -> f64 {
    op.inputs
        .first()
        .and_then(|&t| g.tensor(t).shape.last().copied())
        .unwrap_or(1) as f64
}

/// The interval of `op`'s outputs from its inputs' (`None` when the
/// operator is not one this module bounds, see the module doc).
pub fn transfer(g: &Graph, op: &Op, ins: &[Interval]) -> Interval {
    let s = op.spec.as_str();
    let arg = |i: usize| ins.get(i).copied().flatten();
    let same_size = || numel(g, op.inputs[0]) == numel(g, op.outputs[0]);
    if MOVES.contains(&s) {
        return arg(0);
    }
    if s.starts_with("reshape_") || s.starts_with("broadcast_") {
        // A reshape that pads reads zeros past the input's end.
        return if same_size() || s.starts_with("broadcast_") {
            arg(0)
        } else {
            hull(arg(0), Some((0.0, 0.0)))
        };
    }
    if MONOTONE.contains(&s) {
        let (lo, hi) = arg(0)?;
        let f = |x: f64| match s {
            "floor" => x.floor(),
            "ceil" => x.ceil(),
            "relu" => x.max(0.0),
            "cast_trunc" => x.trunc(),
            _ => x.round(),
        };
        return Some((f(lo), f(hi)));
    }
    if BOOLEAN.contains(&s) {
        return Some((0.0, 1.0));
    }
    match s {
        "concat" | "concat_channels" => hull(arg(0), arg(1)),
        "where" => hull(arg(1), arg(2)),
        "pad" => hull(arg(0), attr(op, "value").map(|v| (v, v))),
        "pad2d" | "trilu" => hull(arg(0), Some((0.0, 0.0))),
        "add" | "bias_add" | "channel_bias_add" => {
            let ((a0, a1), (b0, b1)) = (arg(0)?, arg(1)?);
            Some((a0 + b0, a1 + b1))
        }
        "sub" => {
            let ((a0, a1), (b0, b1)) = (arg(0)?, arg(1)?);
            Some((a0 - b1, a1 - b0))
        }
        "mul" | "bias_mul" | "channel_mul" => mul(arg(0), arg(1)),
        "scale" => mul(arg(0), attr(op, "alpha").map(|a| (a, a))),
        "neg" => arg(0).map(|(lo, hi)| (-hi, -lo)),
        "abs" => arg(0).map(|(lo, hi)| {
            let m = lo.abs().max(hi.abs());
            (
                if lo <= 0.0 && hi >= 0.0 {
                    0.0
                } else {
                    lo.abs().min(hi.abs())
                },
                m,
            )
        }),
        "sign" => Some((-1.0, 1.0)),
        "maximum" => {
            let ((a0, a1), (b0, b1)) = (arg(0)?, arg(1)?);
            Some((a0.max(b0), a1.max(b1)))
        }
        "minimum" => {
            let ((a0, a1), (b0, b1)) = (arg(0)?, arg(1)?);
            Some((a0.min(b0), a1.min(b1)))
        }
        "clip" => {
            let (lo, hi) = arg(0)?;
            let (m, n) = (
                attr(op, "min").unwrap_or(-1.0),
                attr(op, "max").unwrap_or(1.0),
            );
            Some((lo.clamp(m, n.max(m)), hi.clamp(m, n.max(m))))
        }
        // The divisor's sign for a positive divisor: [0, b - 1].
        "mod_floor" => match arg(1)? {
            (b0, b1) if b0 >= 1.0 => Some((0.0, b1 - 1.0)),
            _ => None,
        },
        "div_trunc" => {
            let ((a0, a1), (b0, b1)) = (arg(0)?, arg(1)?);
            if b0 < 1.0 {
                return None;
            }
            hull_of(&[
                (a0 / b0).trunc(),
                (a0 / b1).trunc(),
                (a1 / b0).trunc(),
                (a1 / b1).trunc(),
            ])
        }
        "reduce_sum" | "cumsum" => {
            let (lo, hi) = arg(0)?;
            let n = last_dim(g, op);
            Some((n * lo.min(0.0), n * hi.max(0.0)))
        }
        "argmax" | "argmin" | "argmax_last" | "argmin_last" => Some((0.0, last_dim(g, op) - 1.0)),
        _ => None,
    }
}

/// The synthesized leaves each tensor's values depend on: graph inputs
/// (role `Input`) with no known values, no constant fill and not in
/// `given`.
fn dependences(g: &Graph, given: &dyn Fn(TensorId) -> bool) -> Vec<BTreeSet<TensorId>> {
    let mut deps: Vec<BTreeSet<TensorId>> = g
        .tensor_ids()
        .map(|t| {
            let x = g.tensor(t);
            // A constant fill is its leaf's value (an ONNX constant whose
            // elements are all equal): nothing synthetic to blame.
            let synthesized = x.role == TensorRole::Input
                && g.producer(t).is_none()
                && x.value.is_none()
                && !matches!(x.fill, Some(Fill::Constant { .. }))
                && !given(t);
            if synthesized {
                BTreeSet::from([t])
            } else {
                BTreeSet::new()
            }
        })
        .collect();
    for o in g.topo_order() {
        let op = g.op(o);
        let mut d = BTreeSet::new();
        for t in &op.inputs {
            d.extend(deps[t.0 as usize].iter().copied());
        }
        for t in &op.outputs {
            deps[t.0 as usize] = d.clone();
        }
    }
    deps
}

fn intersect(a: Option<(f64, f64)>, b: (f64, f64)) -> (f64, f64) {
    match a {
        Some((a0, a1)) => (a0.max(b.0), a1.min(b.1)),
        None => b,
    }
}

/// What `op`'s input `i` must hold so that its output holds `need`, the
/// other inputs fixed at `iv`; `None` when it cannot be inverted.
fn invert(op: &Op, i: usize, need: (f64, f64), iv: &[Interval]) -> Option<(f64, f64)> {
    let s = op.spec.as_str();
    let other = |j: usize| op.inputs.get(j).and_then(|t| iv[t.0 as usize]);
    let (l, h) = need;
    let passes = (i == 0
        && (MOVES.contains(&s)
            || MONOTONE.contains(&s)
            || s.starts_with("reshape_")
            || s.starts_with("broadcast_")
            || s == "clip"))
        || (s == "where" && i > 0)
        || matches!(s, "concat" | "concat_channels" | "maximum" | "minimum");
    if passes {
        return Some(need);
    }
    match (s, i) {
        ("add" | "bias_add" | "channel_bias_add", _) => {
            let (c0, c1) = other(1 - i)?;
            Some((l - c0, h - c1))
        }
        ("sub", 0) => {
            let (c0, c1) = other(1)?;
            Some((l + c1, h + c0))
        }
        ("sub", 1) => {
            let (c0, c1) = other(0)?;
            Some((c1 - h, c0 - l))
        }
        ("neg", 0) => Some((-h, -l)),
        ("mul" | "bias_mul" | "channel_mul" | "scale", _) => {
            let k = if s == "scale" {
                attr(op, "alpha")?
            } else {
                match other(1 - i)? {
                    (c0, c1) if c0 == c1 => c0,
                    _ => return None,
                }
            };
            match k {
                k if k > 0.0 => Some(((l / k).ceil(), (h / k).floor())),
                k if k < 0.0 => Some(((h / k).ceil(), (l / k).floor())),
                _ => None,
            }
        }
        _ => None,
    }
}

/// Fills for the integer graph inputs `inputs` of a forward graph: ids
/// uniform in the widest integer range that every index read they reach
/// through invertible operators accepts ([`Fill::Indices`] when it starts
/// at 0, else [`Fill::Range`]); 0/1 ([`Fill::Indices`] with bound 2, masks
/// and flags) for an input that reaches no index read that way, or whose
/// reads need an empty range ([`check_synthetic_ids`] then names it).
pub fn integer_input_fills(g: &Graph, lib: &Library, inputs: &[TensorId]) -> Vec<(TensorId, Fill)> {
    let deps = dependences(g, &|t| !inputs.contains(&t));
    // Intervals of what depends on no input: constants, weights' values.
    let fixed: HashMap<TensorId, Interval> = inputs.iter().map(|&t| (t, None)).collect();
    let iv = ranges(g, &fixed);
    let mut need: HashMap<TensorId, (f64, f64)> = HashMap::new();
    for r in index_reads(g, lib) {
        let want = (0.0, r.rows as f64 - 1.0);
        let n = intersect(need.get(&r.ids).copied(), want);
        need.insert(r.ids, n);
    }
    let mut order = g.topo_order();
    order.reverse();
    for o in order {
        let op = g.op(o);
        let Some(&out) = op.outputs.first() else {
            continue;
        };
        let Some(&n) = need.get(&out) else {
            continue;
        };
        for (i, &t) in op.inputs.iter().enumerate() {
            if deps[t.0 as usize].is_empty() {
                continue;
            }
            if let Some(m) = invert(op, i, n, &iv) {
                let m = intersect(need.get(&t).copied(), m);
                need.insert(t, m);
            }
        }
    }
    inputs
        .iter()
        .map(|&t| {
            let ints = need
                .get(&t)
                .map(|&(l, h)| (l.ceil(), h.floor()))
                .filter(|&(l, h)| l <= h && l > -1e15 && h < 1e15);
            let fill = match ints {
                // From 0 when the range allows it: the common case, and the
                // ids of a direct read as before.
                Some((l, h)) if l <= 0.0 && h >= 0.0 => Fill::Indices {
                    bound: h as usize + 1,
                },
                Some((l, h)) => Fill::Range {
                    lo: l as i64,
                    hi: h as i64 + 1,
                },
                None => Fill::Indices { bound: 2 },
            };
            (t, fill)
        })
        .collect()
}

/// A synthesized graph input whose values may index outside a table.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "graph input `{input}` needs real values (--inputs): its synthetic values reach the row ids \
     of `{reader}` (a table of {rows} rows) {how}"
)]
pub struct UnboundedIds {
    /// The graph input.
    pub input: String,
    /// The operator that reads the table.
    pub reader: String,
    /// The table's rows.
    pub rows: usize,
    /// Why they may be outside: the values they become, or the operator
    /// whose values cannot be bounded.
    pub how: String,
}

/// Check that the synthetic values of every graph input that is not given
/// (`given` lists the intervals of the values a run was given) keep every
/// index read's ids inside its table.
///
/// Errors: [`UnboundedIds`] naming the first such input, the reading
/// operator and the range its ids can take, or the operator whose values
/// cannot be bounded.
pub fn check_synthetic_ids(
    g: &Graph,
    lib: &Library,
    given: &HashMap<TensorId, Interval>,
) -> Result<(), UnboundedIds> {
    let deps = dependences(g, &|t| given.contains_key(&t));
    let iv = ranges(g, given);
    for r in index_reads(g, lib) {
        let ok =
            iv[r.ids.0 as usize].is_some_and(|(lo, hi)| lo >= 0.0 && hi <= r.rows as f64 - 1.0);
        let Some(&input) = deps[r.ids.0 as usize].iter().next() else {
            continue;
        };
        if ok {
            continue;
        }
        let how = match iv[r.ids.0 as usize] {
            Some((lo, hi)) => format!("as values in [{lo}, {hi}]"),
            None => {
                let hider = g.topo_order().into_iter().map(|o| g.op(o)).find(|op| {
                    let out = op.outputs.first().map(|t| t.0 as usize);
                    out.is_some_and(|t| iv[t].is_none() && deps[t].contains(&input))
                        && op.inputs.iter().all(|t| iv[t.0 as usize].is_some())
                });
                match hider {
                    Some(op) => format!(
                        "through `{}` ({}), an operator whose values tofu does not bound",
                        op.name, op.spec
                    ),
                    None => "as values tofu cannot bound".into(),
                }
            }
        };
        return Err(UnboundedIds {
            input: g.tensor(input).name.clone(),
            reader: g.op(r.op).name.clone(),
            rows: r.rows,
            how,
        });
    }
    Ok(())
}
