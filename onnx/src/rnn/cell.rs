//! One time step of the LSTM, GRU and RNN cells of ONNX, as TDL operators,
//! and the per-direction weight views and initial states they read.
//!
//! Takes a direction's weights ([`DirWeights`], read once outside the time
//! steps), x_t [B, I] and the previous [`State`]; emits the step's operators
//! and gives the new state (h [B, H], and c [B, H] for LSTM). Every step
//! emits the same operators in the same order, so the planner's time-step
//! coarsening finds the k-th operator of every step at the same place.
//!
//! Equations (ONNX operator docs; ⊙ elementwise, f, g, h the activations):
//! * RNN: H = f(x·Wᵀ + H₋·Rᵀ + Wb + Rb).
//! * GRU: z = f(x·Wzᵀ + H₋·Rzᵀ + Wbz + Rbz), r likewise; with
//!   `linear_before_reset` n = g(x·Whᵀ + Wbh + r ⊙ (H₋·Rhᵀ + Rbh)), else
//!   n = g(x·Whᵀ + (r ⊙ H₋)·Rhᵀ + Rbh + Wbh); H = n + z ⊙ (H₋ − n).
//! * LSTM: i = f(x·Wiᵀ + H₋·Riᵀ + Pi ⊙ C₋ + Wbi + Rbi), f likewise with Pf
//!   (or 1 − i with `input_forget`), c̃ = g(…), C = f ⊙ C₋ + i ⊙ c̃,
//!   o = f(… + Po ⊙ C), H = o ⊙ h(C).
//!
//! `clip` is applied to every pre-activation of a gate.

use graph::{float, TensorId};

use super::act::{self, Act};
use super::{constant, slice, take_row, Config};
use crate::lower::{LResult, Lower, Src};
use crate::node::Node;

/// The recurrent cell of a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cell {
    /// ONNX RNN (one gate).
    Rnn,
    /// ONNX GRU (gates z, r, h).
    Gru,
    /// ONNX LSTM (gates i, o, f, c).
    Lstm,
}

impl Cell {
    /// Gates per direction (G in W's [D, G·H, I]).
    pub fn gates(self) -> usize {
        match self {
            Cell::Rnn => 1,
            Cell::Gru => 3,
            Cell::Lstm => 4,
        }
    }

    /// ONNX's default activations of one direction.
    pub fn default_activations(self) -> &'static [Act] {
        match self {
            Cell::Rnn => &[Act::Tanh],
            Cell::Gru => &[Act::Sigmoid, Act::Tanh],
            Cell::Lstm => &[Act::Sigmoid, Act::Tanh, Act::Tanh],
        }
    }
}

/// One direction's weight views, biases and constants.
pub struct DirWeights {
    /// W of the direction: [G·H, I].
    w: TensorId,
    /// R of the direction: [G·H, H] (GRU without `linear_before_reset`: the
    /// z and r rows, [2H, H]).
    r: TensorId,
    /// GRU without `linear_before_reset`: the h rows of R, [H, H].
    r_h: Option<TensorId>,
    /// Added to x·Wᵀ: Wb + Rb [G·H] (RNN, LSTM) or Wb [3H] (GRU).
    xb: Option<TensorId>,
    /// GRU: added to H₋·Rᵀ: Rb [3H], or its z, r part [2H] without
    /// `linear_before_reset`.
    hb: Option<TensorId>,
    /// GRU without `linear_before_reset`: Rbh [H].
    hb_h: Option<TensorId>,
    /// LSTM peepholes (i, o, f), each [H].
    p: Option<[TensorId; 3]>,
    /// Constant [B, H] of ones (LSTM `input_forget`).
    ones: Option<TensorId>,
    /// Constant [H] vectors of the Affine β's of this direction.
    betas: Vec<(f64, TensorId)>,
}

/// Rows from..to of a matrix [R, C].
fn rows(l: &mut Lower, t: TensorId, from: usize, to: usize) -> LResult<TensorId> {
    let s = l.shape(t);
    let (r, c) = (s[0], s[1]);
    let flat = l.reshape(t, &[r * c])?;
    let part = slice(l, flat, from * c, to * c)?;
    l.reshape(part, &[to - from, c])
}

impl DirWeights {
    /// Read direction `di`'s views of W, R, B and P (emitted outside the steps).
    pub fn read(l: &mut Lower, n: &Node, c: &Config, di: usize) -> LResult<DirWeights> {
        let h = c.hidden;
        let gh = c.cell.gates() * h;
        let name = |i: usize| n.input(i).expect("required input checked");
        let wt = l.tensor(name(1))?;
        let w = take_row(l, wt, di)?;
        let rt = l.tensor(name(2))?;
        let mut r = take_row(l, rt, di)?;
        let gru_split = c.cell == Cell::Gru && !c.linear_before_reset;
        let mut r_h = None;
        if gru_split {
            r_h = Some(rows(l, r, 2 * h, 3 * h)?);
            r = rows(l, r, 0, 2 * h)?;
        }
        let (mut xb, mut hb, mut hb_h) = (None, None, None);
        if let Some(bn) = n.input(3) {
            let bt = l.tensor(bn)?;
            let bd = take_row(l, bt, di)?;
            let wb = slice(l, bd, 0, gh)?;
            let rb = slice(l, bd, gh, 2 * gh)?;
            match c.cell {
                Cell::Rnn | Cell::Lstm => xb = Some(l.emit1("add", &[wb, rb], &[])?),
                Cell::Gru if gru_split => {
                    xb = Some(wb);
                    hb = Some(slice(l, rb, 0, 2 * h)?);
                    hb_h = Some(slice(l, rb, 2 * h, 3 * h)?);
                }
                Cell::Gru => (xb, hb) = (Some(wb), Some(rb)),
            }
        }
        let mut p = None;
        if let (Cell::Lstm, Some(pn)) = (c.cell, n.input(7)) {
            let pt = l.tensor(pn)?;
            let pd = take_row(l, pt, di)?;
            p = Some([
                slice(l, pd, 0, h)?,
                slice(l, pd, h, 2 * h)?,
                slice(l, pd, 2 * h, 3 * h)?,
            ]);
        }
        let ones = if c.input_forget {
            let nm = format!("{}#ones{di}", n.name);
            Some(constant(l, &nm, vec![c.batch, h], Src::Splat(1.0))?)
        } else {
            None
        };
        let per = c.cell.default_activations().len();
        let mut betas: Vec<(f64, TensorId)> = Vec::new();
        for (j, a) in c.acts[di * per..(di + 1) * per].iter().enumerate() {
            if let Act::Affine(_, b) = *a {
                if b != 0.0 && !betas.iter().any(|&(v, _)| v.to_bits() == b.to_bits()) {
                    let nm = format!("{}#beta{di}.{j}", n.name);
                    betas.push((b, constant(l, &nm, vec![h], Src::Splat(b))?));
                }
            }
        }
        Ok(DirWeights {
            w,
            r,
            r_h,
            xb,
            hb,
            hb_h,
            p,
            ones,
            betas,
        })
    }
}

/// A direction's recurrent state.
pub struct State {
    /// Hidden state [B, H].
    pub h: TensorId,
    /// Cell state [B, H] (LSTM).
    pub c: Option<TensorId>,
}

/// Direction `di`'s initial state from input `i` (zeros when absent).
fn initial(l: &mut Lower, n: &Node, c: &Config, di: usize, i: usize) -> LResult<TensorId> {
    let (b, h) = (c.batch, c.hidden);
    let Some(name) = n.input(i) else {
        let nm = format!("{}#init{i}.{di}", n.name);
        return constant(l, &nm, vec![b, h], Src::Splat(0.0));
    };
    let t = l.tensor(name)?;
    if !c.batch_first {
        return take_row(l, t, di);
    }
    let d = c.reverse.len();
    let flat = l.reshape(t, &[b, d * h])?;
    if d == 1 {
        return Ok(flat);
    }
    slice(l, flat, di * h, (di + 1) * h)
}

impl State {
    /// Direction `di`'s initial state (initial_h, initial_c, or zeros).
    pub fn initial(l: &mut Lower, n: &Node, c: &Config, di: usize) -> LResult<State> {
        Ok(State {
            h: initial(l, n, c, di, 5)?,
            c: if c.cell == Cell::Lstm {
                Some(initial(l, n, c, di, 6)?)
            } else {
                None
            },
        })
    }
}

/// The operators of one time step (see the module doc).
struct Step<'a> {
    c: &'a Config,
    w: &'a DirWeights,
    acts: &'a [Act],
}

impl Step<'_> {
    fn clip(&self, l: &mut Lower, t: TensorId) -> LResult<TensorId> {
        match self.c.clip {
            None => Ok(t),
            Some(v) => l.emit1("clip", &[t], &[("min", float(-v)), ("max", float(v))]),
        }
    }

    /// Activation slot `k` of the direction applied to `clip(t)` (`clip`) or `t`.
    fn act(&self, l: &mut Lower, k: usize, t: TensorId, clip: bool) -> LResult<TensorId> {
        let t = if clip { self.clip(l, t)? } else { t };
        let betas = &self.w.betas;
        act::emit(l, self.acts[k], t, &mut |_, b| {
            Ok(betas
                .iter()
                .find(|&&(v, _)| v.to_bits() == b.to_bits())
                .expect("β vectors are made for every Affine of the direction")
                .1)
        })
    }

    fn bias(&self, l: &mut Lower, t: TensorId, b: Option<TensorId>) -> LResult<TensorId> {
        match b {
            None => Ok(t),
            Some(b) => l.emit1("bias_add", &[t, b], &[]),
        }
    }

    fn add(&self, l: &mut Lower, a: TensorId, b: TensorId) -> LResult<TensorId> {
        l.emit1("add", &[a, b], &[])
    }

    fn mul(&self, l: &mut Lower, a: TensorId, b: TensorId) -> LResult<TensorId> {
        l.emit1("mul", &[a, b], &[])
    }

    /// x·Wᵀ + H₋·Rᵀ + bias: [B, G·H].
    fn gates(&self, l: &mut Lower, x: TensorId, h: TensorId) -> LResult<TensorId> {
        let xw = l.emit1("matmul_nt", &[x, self.w.w], &[])?;
        let hr = l.emit1("matmul_nt", &[h, self.w.r], &[])?;
        let g = self.add(l, xw, hr)?;
        self.bias(l, g, self.w.xb)
    }

    fn rnn(&self, l: &mut Lower, x: TensorId, s: &State) -> LResult<State> {
        let g = self.gates(l, x, s.h)?;
        Ok(State {
            h: self.act(l, 0, g, true)?,
            c: None,
        })
    }

    fn lstm(&self, l: &mut Lower, x: TensorId, s: &State) -> LResult<State> {
        let h = self.c.hidden;
        let c_prev = s.c.expect("an LSTM state has a cell");
        let g = self.gates(l, x, s.h)?;
        let mut i = slice(l, g, 0, h)?;
        let mut o = slice(l, g, h, 2 * h)?;
        let mut f = slice(l, g, 2 * h, 3 * h)?;
        let cc = slice(l, g, 3 * h, 4 * h)?;
        if let Some([pi, _, pf]) = self.w.p {
            let t = l.emit1("bias_mul", &[c_prev, pi], &[])?;
            i = self.add(l, i, t)?;
            let t = l.emit1("bias_mul", &[c_prev, pf], &[])?;
            f = self.add(l, f, t)?;
        }
        let i = self.act(l, 0, i, true)?;
        let f = match self.w.ones {
            Some(ones) => l.emit1("sub", &[ones, i], &[])?,
            None => self.act(l, 0, f, true)?,
        };
        let cc = self.act(l, 1, cc, true)?;
        let fc = self.mul(l, f, c_prev)?;
        let ic = self.mul(l, i, cc)?;
        let c_new = self.add(l, fc, ic)?;
        if let Some([_, po, _]) = self.w.p {
            let t = l.emit1("bias_mul", &[c_new, po], &[])?;
            o = self.add(l, o, t)?;
        }
        let o = self.act(l, 0, o, true)?;
        let hc = self.act(l, 2, c_new, false)?;
        Ok(State {
            h: self.mul(l, o, hc)?,
            c: Some(c_new),
        })
    }

    fn gru(&self, l: &mut Lower, x: TensorId, s: &State) -> LResult<State> {
        let h = self.c.hidden;
        let xw = l.emit1("matmul_nt", &[x, self.w.w], &[])?;
        let xg = self.bias(l, xw, self.w.xb)?;
        let hr = l.emit1("matmul_nt", &[s.h, self.w.r], &[])?;
        let hg = self.bias(l, hr, self.w.hb)?;
        let mut zr = [x; 2];
        for (k, gate) in zr.iter_mut().enumerate() {
            let a = slice(l, xg, k * h, (k + 1) * h)?;
            let b = slice(l, hg, k * h, (k + 1) * h)?;
            let pre = self.add(l, a, b)?;
            *gate = self.act(l, 0, pre, true)?;
        }
        let [z, r] = zr;
        let xh = slice(l, xg, 2 * h, 3 * h)?;
        let pre = match self.w.r_h {
            None => {
                let hh = slice(l, hg, 2 * h, 3 * h)?;
                let rhh = self.mul(l, r, hh)?;
                self.add(l, xh, rhh)?
            }
            Some(r_h) => {
                let rh = self.mul(l, r, s.h)?;
                let rhr = l.emit1("matmul_nt", &[rh, r_h], &[])?;
                let t = self.add(l, xh, rhr)?;
                self.bias(l, t, self.w.hb_h)?
            }
        };
        let nn = self.act(l, 1, pre, true)?;
        let d = l.emit1("sub", &[s.h, nn], &[])?;
        let zd = self.mul(l, z, d)?;
        Ok(State {
            h: self.add(l, nn, zd)?,
            c: None,
        })
    }
}

/// Emit one time step of direction `di` reading x_t [B, I]; gives the new state.
pub fn step(
    l: &mut Lower,
    c: &Config,
    w: &DirWeights,
    di: usize,
    x: TensorId,
    s: &State,
) -> LResult<State> {
    let per = c.cell.default_activations().len();
    let st = Step {
        c,
        w,
        acts: &c.acts[di * per..(di + 1) * per],
    };
    match c.cell {
        Cell::Rnn => st.rnn(l, x, s),
        Cell::Gru => st.gru(l, x, s),
        Cell::Lstm => st.lstm(l, x, s),
    }
}
