//! Megatron's fused, head-interleaved QKV layout: `split_qkv` and its
//! gradient `merge_qkv` (`specs/attention.tdl`) as row copies, rows in
//! parallel on rayon.
//!
//! Takes a bound `split_qkv<heads>(x[B, S, E]) -> (q, k, v)[B, heads, S, DH]`
//! (E = 3·heads·DH) or `merge_qkv(q, k, v[B, NH, S, DH]) -> y[B, S, 3·NH·DH]`.
//! Both see the fused tensor as `[B, S, NH, 3, DH]` (column `h·3·DH +
//! which·DH + d`, which = 0 q, 1 k, 2 v) and copy rows of `DH` contiguous
//! elements. A constructor declines (`None`) an instance it cannot see that
//! way (`E` not a multiple of `3·heads`, whose spec drops the remainder).

use rayon::prelude::*;
use tdl::Binding;

use super::KernelImpl;
use crate::ops::{inputs_named, int_attr, only_attrs, outputs_named, KernelError};

/// The fused tensor's view `[B, S, NH, 3, DH]`.
#[derive(Clone, Copy)]
struct Fused {
    b: usize,
    s: usize,
    nh: usize,
    dh: usize,
}

impl Fused {
    /// Offset of row (b, s, h, which) in the fused tensor.
    fn fused_at(&self, b: usize, s: usize, h: usize, which: usize) -> usize {
        (((b * self.s + s) * self.nh + h) * 3 + which) * self.dh
    }

    /// Offset of row (b, h, s) in a per-head tensor `[B, NH, S, DH]`.
    fn head_at(&self, b: usize, h: usize, s: usize) -> usize {
        ((b * self.nh + h) * self.s + s) * self.dh
    }

    fn elems(&self) -> usize {
        self.b * self.s * self.nh * self.dh
    }
}

struct SplitQkv(Fused);

impl KernelImpl for SplitQkv {
    fn run(&self, inputs: &[&[f32]], outputs: &mut [&mut [f32]]) -> Result<(), KernelError> {
        let f = self.0;
        let x = inputs[0];
        if f.dh == 0 {
            return Ok(());
        }
        for (which, out) in outputs.iter_mut().enumerate() {
            out.par_chunks_mut(f.dh).enumerate().for_each(|(r, y)| {
                // Output row r is (b, h, s) of [B, NH, S].
                let (b, h, s) = (r / (f.nh * f.s), r / f.s % f.nh, r % f.s);
                let at = f.fused_at(b, s, h, which);
                y.copy_from_slice(&x[at..at + f.dh]);
            });
        }
        Ok(())
    }
}

struct MergeQkv(Fused);

impl KernelImpl for MergeQkv {
    fn run(&self, inputs: &[&[f32]], outputs: &mut [&mut [f32]]) -> Result<(), KernelError> {
        let f = self.0;
        if f.dh == 0 {
            return Ok(());
        }
        outputs[0]
            .par_chunks_mut(f.dh)
            .enumerate()
            .for_each(|(r, y)| {
                // Output row r is (b, s, h, which) of [B, S, NH, 3].
                let which = r % 3;
                let h = r / 3 % f.nh;
                let (b, s) = (r / (3 * f.nh * f.s), r / (3 * f.nh) % f.s);
                let at = f.head_at(b, h, s);
                y.copy_from_slice(&inputs[which][at..at + f.dh]);
            });
        Ok(())
    }
}

/// `split_qkv<heads>(x[B, S, E]) -> (q, k, v)[B, heads, S, E / (3·heads)]`.
pub fn split_qkv(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    let &[bs, s, e] = b.input_shapes[0].as_slice() else {
        return None;
    };
    let nh = usize::try_from(int_attr(b, "heads")?).ok()?;
    let ok = only_attrs(b, &["heads"])
        && inputs_named(b, &["x"])
        && outputs_named(b, &["q", "k", "v"])
        && nh > 0
        && e % (3 * nh) == 0;
    let f = Fused {
        b: bs,
        s,
        nh,
        dh: e / (3 * nh.max(1)),
    };
    let shapes_fit = b.output_shapes.iter().all(|o| *o == [bs, nh, s, f.dh]);
    (ok && shapes_fit).then(|| Box::new(SplitQkv(f)) as Box<dyn KernelImpl>)
}

/// `merge_qkv(q, k, v[B, NH, S, DH]) -> y[B, S, 3·NH·DH]`.
pub fn merge_qkv(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    let &[bs, nh, s, dh] = b.input_shapes[0].as_slice() else {
        return None;
    };
    let f = Fused { b: bs, s, nh, dh };
    let ok = only_attrs(b, &[])
        && inputs_named(b, &["q", "k", "v"])
        && b.input_shapes.iter().all(|x| *x == [bs, nh, s, dh])
        && b.output_shapes.len() == 1
        && b.output_shapes[0].iter().product::<usize>() == 3 * f.elems();
    ok.then(|| Box::new(MergeQkv(f)) as Box<dyn KernelImpl>)
}
