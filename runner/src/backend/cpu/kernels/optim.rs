//! Optimizer updates (`specs/optim.tdl`) as contiguous loops over the
//! parameter's elements, split into chunks run on rayon
//! ([`super::elementwise`]).
//!
//! Takes a bound `sgd_update`, `momentum_update`, `adam_update`,
//! `adamw_update`, `adagrad_update` or `rmsprop_update` (every tensor of the
//! same shape `[...]`, inputs in the spec's order `w, g[, state…]`); gives a
//! kernel computing each element as the interpreter does: in f64, a
//! statement that reads an earlier output (e.g. `w_new` reads `v_new`)
//! reading its f64 value, each output rounded to f32 once. (Re-reading the
//! rounded f32 state, as the compiled evaluator does, is off by the f32
//! rounding of `v_new` times `lr`, which cancellation against `w` can make
//! a large relative error of a small `w_new`.) A constructor declines (`None`) an instance whose inputs,
//! outputs or attributes are not the shipped spec's.

use tdl::Binding;

use super::elementwise::{fits, kernel};
use super::KernelImpl;
use crate::ops::float_attr as attr;

/// `sgd_update<lr>(w, g) -> w_new`: `w − lr·g`.
pub fn sgd(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    if !fits(b, &["w", "g"], &["w_new"], &["lr"]) {
        return None;
    }
    let lr = attr(b, "lr")?;
    kernel(Box::new(move |x, o| {
        for ((o, &w), &g) in o[0].iter_mut().zip(x[0]).zip(x[1]) {
            *o = (w as f64 - lr * g as f64) as f32;
        }
    }))
}

/// `momentum_update<lr, momentum>(w, g, v) -> (w_new, v_new)`:
/// `v_new = momentum·v + g`, `w_new = w − lr·v_new`.
pub fn momentum(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    if !fits(
        b,
        &["w", "g", "v"],
        &["w_new", "v_new"],
        &["lr", "momentum"],
    ) {
        return None;
    }
    let (lr, mu) = (attr(b, "lr")?, attr(b, "momentum")?);
    kernel(Box::new(move |x, o| {
        let [wn, vn] = o else { return };
        let n = wn.len();
        // Every slice cut to one length: the loop has no bounds checks and
        // vectorises (one pass, five streams: memory-bound).
        let (w, g, v, vn) = (&x[0][..n], &x[1][..n], &x[2][..n], &mut vn[..n]);
        for ((((wn, vn), &w), &g), &v) in wn.iter_mut().zip(vn.iter_mut()).zip(w).zip(g).zip(v) {
            let v = mu * v as f64 + g as f64;
            *vn = v as f32;
            *wn = (w as f64 - lr * v) as f32;
        }
    }))
}

/// `adam_update` / `adamw_update` (`decay` = the AdamW weight decay, else
/// 0): moments, then `w − lr·(m̂ / (√v̂ + eps) + decay·w)`.
fn adam_like(b: &Binding, decay: Option<f64>) -> Option<Box<dyn KernelImpl>> {
    let names: &[&str] = if decay.is_some() {
        &["lr", "beta1", "beta2", "eps", "weight_decay", "step"]
    } else {
        &["lr", "beta1", "beta2", "eps", "step"]
    };
    if !fits(
        b,
        &["w", "g", "m", "v"],
        &["w_new", "m_new", "v_new"],
        names,
    ) {
        return None;
    }
    let (lr, b1, b2, eps) = (
        attr(b, "lr")?,
        attr(b, "beta1")?,
        attr(b, "beta2")?,
        attr(b, "eps")?,
    );
    let step = attr(b, "step")?;
    let (c1, c2) = (1.0 - b1.powf(step), 1.0 - b2.powf(step));
    let d = decay.unwrap_or(0.0);
    kernel(Box::new(move |x, o| {
        let [wn, mn, vn] = o else { return };
        for i in 0..wn.len() {
            let (w, g) = (x[0][i] as f64, x[1][i] as f64);
            let m = b1 * x[2][i] as f64 + (1.0 - b1) * g;
            let v = b2 * x[3][i] as f64 + (1.0 - b2) * g * g;
            mn[i] = m as f32;
            vn[i] = v as f32;
            let adam = (m / c1) / ((v / c2).sqrt() + eps);
            wn[i] = (w - lr * (adam + d * w)) as f32;
        }
    }))
}

/// `adam_update<lr, beta1, beta2, eps, step>(w, g, m, v) -> (w_new, m_new, v_new)`.
pub fn adam(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    adam_like(b, None)
}

/// `adamw_update<…, weight_decay, step>(w, g, m, v) -> (w_new, m_new, v_new)`.
pub fn adamw(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    adam_like(b, Some(attr(b, "weight_decay")?))
}

/// `adagrad_update<lr, eps>(w, g, h) -> (w_new, h_new)`:
/// `h_new = h + g²`, `w_new = w − lr·g / (√h_new + eps)`.
pub fn adagrad(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    if !fits(b, &["w", "g", "h"], &["w_new", "h_new"], &["lr", "eps"]) {
        return None;
    }
    let (lr, eps) = (attr(b, "lr")?, attr(b, "eps")?);
    kernel(Box::new(move |x, o| {
        let [wn, hn] = o else { return };
        for i in 0..wn.len() {
            let g = x[1][i] as f64;
            let h = x[2][i] as f64 + g * g;
            hn[i] = h as f32;
            wn[i] = (x[0][i] as f64 - lr * g / (h.sqrt() + eps)) as f32;
        }
    }))
}

/// `rmsprop_update<lr, alpha, eps>(w, g, s) -> (w_new, s_new)`:
/// `s_new = alpha·s + (1 − alpha)·g²`, `w_new = w − lr·g / (√s_new + eps)`.
pub fn rmsprop(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    if !fits(
        b,
        &["w", "g", "s"],
        &["w_new", "s_new"],
        &["lr", "alpha", "eps"],
    ) {
        return None;
    }
    let (lr, alpha, eps) = (attr(b, "lr")?, attr(b, "alpha")?, attr(b, "eps")?);
    kernel(Box::new(move |x, o| {
        let [wn, sn] = o else { return };
        for i in 0..wn.len() {
            let g = x[1][i] as f64;
            let s = alpha * x[2][i] as f64 + (1.0 - alpha) * g * g;
            sn[i] = s as f32;
            wn[i] = (x[0][i] as f64 - lr * g / (s.sqrt() + eps)) as f32;
        }
    }))
}
