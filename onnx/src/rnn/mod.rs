//! ONNX LSTM, GRU and RNN (opsets 1–22), unrolled over time into TDL
//! operators.
//!
//! Takes the node and its inputs X, W, R, B, sequence_lens, initial_h,
//! initial_c, P with every shape fixed at import (the importer resolves
//! dynamic dims first: `--input-shape`, a documented default, or an error
//! naming the input and the `--input-shape` flag); gives Y, Y_h (and Y_c
//! for LSTM), or an error naming the attribute or input that does not fit
//! (never a panic). The sequence is
//! unrolled: time step k of every direction becomes its own operators
//! (`take_row` or `slice` of the input, `matmul_nt` projections, `bias_add`, gate
//! `slice`s, activations, `mul`/`add`/`sub`, `where` for held states), so
//! the gradients come from those specs and the step's operators carry the
//! graph's `step` metadata k, the key of the planner's time-step coarsening
//! (Tofu §4.2.1) — the same metadata an unrolled ONNX `Loop` gets
//! ([`crate::control`]). A node already inside an unrolled `Loop` keeps the
//! loop's step. Weight and bias views (per direction, per gate block) are
//! computed once, outside the steps.
//!
//! Semantics (ONNX operator docs; onnxruntime for what they leave open):
//! * `direction` forward / reverse / bidirectional; step k of the reverse
//!   direction reads x[S − 1 − k]; Y holds both directions at their time.
//! * `sequence_lens` (known at import: constant masks; or computed at run
//!   time: masks `less(t, sequence_lens)`): for a batch row of length L, time
//!   steps t ≥ L output zeros and hold the state, so Y_h is the state after
//!   the row's last element (forward) or after x[0] (reverse, which starts
//!   at x[L − 1]).
//! * `layout` 0 (X [S, B, I], Y [S, D, B, H], states [D, B, H]) and 1
//!   (X [B, S, I], Y [B, S, D, H], states [B, D, H]).
//! * `clip` bounds every gate pre-activation to [−clip, clip]; LSTM peepholes
//!   `P` ([D, 3H], order i, o, f) and `input_forget` (f = 1 − i); GRU
//!   `linear_before_reset`; the activations of [`act`].
//!
//! W is [D, G·H, I], R [D, G·H, H], B [D, 2·G·H] with G = 1 (RNN), 3 (GRU:
//! z, r, h), 4 (LSTM: i, o, f, c).

pub mod act;
pub mod cell;

use graph::{int, TensorId};

use crate::lower::{unsupported, Kind, Known, LResult, Lower, Out, Src};
use crate::map_elementwise::shape;
use crate::mapping::Mapping;
use crate::node::Node;
use crate::tensor::{Data, Elem};
use act::Act;
use cell::{Cell, DirWeights, State};

/// Everything read from the node's attributes and input shapes.
pub struct Config {
    /// The cell.
    pub cell: Cell,
    /// Hidden size H.
    pub hidden: usize,
    /// Sequence length S, batch size B, input size I.
    pub seq: usize,
    /// Batch size B.
    pub batch: usize,
    /// Input size I.
    pub input: usize,
    /// Per direction: whether it runs backwards in time.
    pub reverse: Vec<bool>,
    /// `layout` 1: batch first.
    pub batch_first: bool,
    /// `clip` threshold.
    pub clip: Option<f64>,
    /// Activations, `cell.activations()` per direction.
    pub acts: Vec<Act>,
    /// LSTM `input_forget`.
    pub input_forget: bool,
    /// GRU `linear_before_reset`.
    pub linear_before_reset: bool,
}

/// LSTM (table row).
pub fn lstm(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    lower(l, n, Cell::Lstm)
}

/// GRU (table row).
pub fn gru(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    lower(l, n, Cell::Gru)
}

/// RNN (table row).
pub fn rnn(l: &mut Lower, n: &Node, _m: &Mapping) -> LResult<Vec<Out>> {
    lower(l, n, Cell::Rnn)
}

fn dims3(l: &Lower, n: &Node, i: usize, what: &str) -> LResult<[usize; 3]> {
    let Some(name) = n.input(i) else {
        return unsupported(format!("input {what} is missing"));
    };
    match shape(l, name)?[..] {
        [a, b, c] => Ok([a, b, c]),
        ref s => unsupported(format!("input {what} must have rank 3, has shape {s:?}")),
    }
}

/// Read and check the attributes and input shapes.
pub fn config(l: &Lower, n: &Node, cell: Cell) -> LResult<Config> {
    let batch_first = match n.attrs.int("layout", 0) {
        0 => false,
        1 => true,
        v => return unsupported(format!("layout = {v}; ONNX allows 0 and 1")),
    };
    let [x0, x1, input] = dims3(l, n, 0, "X")?;
    let (seq, batch) = if batch_first { (x1, x0) } else { (x0, x1) };
    let [wd, wg, wi] = dims3(l, n, 1, "W")?;
    let [rd, rg, rh] = dims3(l, n, 2, "R")?;
    let hidden = rh;
    if let Some(h) = n.attrs.get("hidden_size").map(|a| a.i) {
        if h != hidden as i64 {
            return unsupported(format!(
                "hidden_size = {h} but R has shape [{rd}, {rg}, {rh}] (hidden size {rh})"
            ));
        }
    }
    let gates = cell.gates();
    let reverse = match n.attrs.string("direction", "forward").as_str() {
        "forward" => vec![false],
        "reverse" => vec![true],
        "bidirectional" => vec![false, true],
        d => {
            return unsupported(format!(
                "direction = \"{d}\"; ONNX allows forward, reverse, bidirectional"
            ))
        }
    };
    let dirs = reverse.len();
    if (wd, wg, wi) != (dirs, gates * hidden, input) || (rd, rg) != (dirs, gates * hidden) {
        return unsupported(format!(
            "W [{wd}, {wg}, {wi}] and R [{rd}, {rg}, {rh}] do not fit {dirs} direction(s), \
             {gates} gate(s) of hidden size {hidden} and X of input size {input} \
             (W must be [{dirs}, {}, {input}], R [{dirs}, {}, {hidden}])",
            gates * hidden,
            gates * hidden
        ));
    }
    if seq == 0 || batch == 0 || hidden == 0 || input == 0 {
        return unsupported(format!(
            "empty sequence, batch, input or hidden size (S = {seq}, B = {batch}, I = {input}, \
             H = {hidden})"
        ));
    }
    let clip = match n.attrs.get("clip").map(|a| a.f as f64) {
        // An infinite threshold bounds nothing.
        Some(c) if c == f64::INFINITY => None,
        Some(c) if !(c > 0.0 && c.is_finite()) => {
            return unsupported(format!("clip = {c}; it must be a positive threshold"))
        }
        c => c,
    };
    let acts = act::activations(n, cell.default_activations(), dirs)?;
    Ok(Config {
        cell,
        hidden,
        seq,
        batch,
        input,
        reverse,
        batch_first,
        clip,
        acts,
        input_forget: cell == Cell::Lstm && n.attrs.int("input_forget", 0) != 0,
        linear_before_reset: cell == Cell::Gru && n.attrs.int("linear_before_reset", 0) != 0,
    })
}

/// Check an optional input's shape.
fn expect_shape(l: &Lower, n: &Node, i: usize, what: &str, want: &[usize]) -> LResult<bool> {
    let Some(name) = n.input(i) else {
        return Ok(false);
    };
    let s = shape(l, name)?;
    if s != want {
        return unsupported(format!("input {what} has shape {s:?}, expected {want:?}"));
    }
    Ok(true)
}

/// The sequence lengths of the batch rows.
enum Lens {
    /// No `sequence_lens`, or every row full length: no masking.
    Full,
    /// Known at import: per row.
    Known(Vec<usize>),
    /// Computed at run time: the [B] tensor.
    Tensor(TensorId),
}

fn sequence_lens(l: &mut Lower, n: &Node, c: &Config) -> LResult<Lens> {
    if !expect_shape(l, n, 4, "sequence_lens", &[c.batch])? {
        return Ok(Lens::Full);
    }
    let name = n.input(4).expect("checked");
    let Some(d) = l.arg_data(name) else {
        return Ok(Lens::Tensor(l.tensor(name)?));
    };
    let mut lens = Vec::with_capacity(d.values.len());
    for &v in &d.values {
        if !(v >= 0.0 && v <= c.seq as f64) {
            return unsupported(format!(
                "sequence_lens holds {v}; every length must be in 0..={}",
                c.seq
            ));
        }
        lens.push(v as usize);
    }
    Ok(if lens.iter().any(|&v| v < c.seq) {
        Lens::Known(lens)
    } else {
        Lens::Full
    })
}

/// The [B, H] 0/1 mask of the rows still running at time `t` (`None`: all
/// are): a constant for known lengths, else `less(t, sequence_lens)`
/// broadcast over H.
fn mask(
    l: &mut Lower,
    n: &Node,
    c: &Config,
    lens: &Lens,
    di: usize,
    t: usize,
) -> LResult<Option<TensorId>> {
    let (b, h) = (c.batch, c.hidden);
    match lens {
        Lens::Full => Ok(None),
        Lens::Known(lens) => {
            let values: Vec<f64> = lens
                .iter()
                .flat_map(|&len| std::iter::repeat_n(f64::from(u8::from(t < len)), h))
                .collect();
            let name = format!("{}#mask{di}.t{t}", n.name);
            let src = Src::Dense(Data::floats(vec![b, h], values));
            Ok(Some(constant(l, &name, vec![b, h], src)?))
        }
        Lens::Tensor(lt) => {
            let name = format!("{}#time{di}.t{t}", n.name);
            let tc = constant(l, &name, vec![b], Src::Splat(t as f64))?;
            let m = l.emit1("less", &[tc, *lt], &[])?;
            let m = l.reshape(m, &[b, 1])?;
            Ok(Some(l.broadcast_to(m, &[b, h])?))
        }
    }
}

/// A constant [rows, cols] tensor (defined in the current step).
pub fn constant(l: &mut Lower, name: &str, shape: Vec<usize>, src: Src) -> LResult<TensorId> {
    l.define_known(
        name,
        Known {
            elem: Elem::F32,
            shape,
            src,
            kind: Kind::Constant,
        },
    );
    l.tensor(name)
}

/// Row `d` of a tensor of shape [D, rest…], as a tensor of shape rest
/// (`take_row`, `specs/onnx_rnn.tdl`: the rest stays splittable).
pub fn take_row(l: &mut Lower, t: TensorId, d: usize) -> LResult<TensorId> {
    l.emit1("take_row", &[t], &[("d", int(d as i64))])
}

/// `x[..., start..end]`.
pub fn slice(l: &mut Lower, x: TensorId, start: usize, end: usize) -> LResult<TensorId> {
    l.emit1(
        "slice",
        &[x],
        &[("start", int(start as i64)), ("end", int(end as i64))],
    )
}

/// Concatenate along the last axis as a balanced tree of `concat`s.
fn concat_all(l: &mut Lower, ts: &[TensorId]) -> LResult<TensorId> {
    match ts {
        [] => unsupported("nothing to concatenate"),
        [t] => Ok(*t),
        _ => {
            let (a, b) = ts.split_at(ts.len() / 2);
            let a = concat_all(l, a)?;
            let b = concat_all(l, b)?;
            l.emit1("concat", &[a, b], &[])
        }
    }
}

/// Stack per-direction states [B, H] into [D, B, H] (layout 0) or [B, D, H].
fn stack_states(l: &mut Lower, c: &Config, hs: &[TensorId]) -> LResult<TensorId> {
    let (b, h, d) = (c.batch, c.hidden, hs.len());
    if d == 1 {
        let to = if c.batch_first { [b, 1, h] } else { [1, b, h] };
        return l.reshape(hs[0], &to);
    }
    let cat = concat_all(l, hs)?;
    let bdh = l.reshape(cat, &[b, d, h])?;
    if c.batch_first {
        Ok(bdh)
    } else {
        l.permute(bdh, &[1, 0, 2])
    }
}

fn lower(l: &mut Lower, n: &Node, cell: Cell) -> LResult<Vec<Out>> {
    let c = config(l, n, cell)?;
    let (s, b, h, d) = (c.seq, c.batch, c.hidden, c.reverse.len());
    let g = cell.gates();
    expect_shape(l, n, 3, "B", &[d, 2 * g * h])?;
    if cell == Cell::Lstm {
        expect_shape(l, n, 7, "P", &[d, 3 * h])?;
    }
    let state_shape = if c.batch_first { [b, d, h] } else { [d, b, h] };
    expect_shape(l, n, 5, "initial_h", &state_shape)?;
    if cell == Cell::Lstm {
        expect_shape(l, n, 6, "initial_c", &state_shape)?;
    }
    let lens = sequence_lens(l, n, &c)?;

    // Layout 0: x_t = X[t] (`take_row`). Layout 1: X as [B, S·I], x_t its
    // columns t·I .. (t+1)·I.
    let x = l.tensor(n.input(0).expect("checked"))?;
    let x = if c.batch_first {
        l.reshape(x, &[b, s * c.input])?
    } else {
        x
    };
    let mut dirs: Vec<DirWeights> = Vec::with_capacity(d);
    let mut states: Vec<State> = Vec::with_capacity(d);
    for di in 0..d {
        dirs.push(DirWeights::read(l, n, &c, di)?);
        states.push(State::initial(l, n, &c, di)?);
    }
    let mut ys: Vec<Vec<Option<TensorId>>> = vec![vec![None; s]; d];
    let outer = l.step();
    for k in 0..s {
        if outer.is_none() {
            l.set_step(Some(k as u32));
        }
        for di in 0..d {
            let t = if c.reverse[di] { s - 1 - k } else { k };
            let xt = if !c.batch_first {
                take_row(l, x, t)?
            } else if s == 1 {
                x
            } else {
                slice(l, x, t * c.input, (t + 1) * c.input)?
            };
            let new = cell::step(l, &c, &dirs[di], di, xt, &states[di])?;
            let mask = mask(l, n, &c, &lens, di, t)?;
            let prev = std::mem::replace(&mut states[di], new);
            ys[di][t] = Some(match mask {
                None => states[di].h,
                Some(m) => {
                    let y = l.emit1("mul", &[states[di].h, m], &[])?;
                    states[di].h = l.emit1("where", &[m, states[di].h, prev.h], &[])?;
                    if let (Some(cn), Some(cp)) = (states[di].c, prev.c) {
                        states[di].c = Some(l.emit1("where", &[m, cn, cp], &[])?);
                    }
                    y
                }
            });
        }
    }
    l.set_step(outer);

    let mut outs = Vec::new();
    if n.wants_output(0) {
        // [B, S·D·H] in (t, d) order → [B, S, D, H] → layout 0: [S, D, B, H].
        let pieces: Vec<TensorId> = (0..s)
            .flat_map(|t| ys.iter().map(move |y| y[t]))
            .map(|y| y.expect("every step ran"))
            .collect();
        let cat = concat_all(l, &pieces)?;
        let y = l.reshape(cat, &[b, s, d, h])?;
        let y = if c.batch_first {
            y
        } else if b == 1 {
            l.reshape(y, &[s, d, b, h])?
        } else {
            l.permute(y, &[1, 2, 0, 3])?
        };
        outs.push(Out::T(y));
    } else {
        outs.push(Out::C(crate::map_shape::empty(Elem::F32, vec![0])));
    }
    if n.wants_output(1) {
        let hs: Vec<TensorId> = states.iter().map(|st| st.h).collect();
        outs.push(Out::T(stack_states(l, &c, &hs)?));
    } else {
        outs.push(Out::C(crate::map_shape::empty(Elem::F32, vec![0])));
    }
    if cell == Cell::Lstm && n.wants_output(2) {
        let cs: Vec<TensorId> = states
            .iter()
            .map(|st| st.c.expect("an LSTM state has a cell"))
            .collect();
        outs.push(Out::T(stack_states(l, &c, &cs)?));
    }
    Ok(outs)
}
