//! 2-D max pooling and its gradient as direct loops over each (image,
//! channel) plane, planes run in parallel on rayon.
//!
//! Takes a bound `maxpool2d` / `maxpool2d_grad` (`specs/pool.tdl`: pads
//! `pad_h`, `pad_w`, no dilation) or `maxpool2d_ext` / `maxpool2d_ext_grad`
//! (`specs/onnx_nn.tdl`: begin pads `pad_t`, `pad_l`, dilations; the end pads
//! and `ceil_mode` only shape the output, which the binding already has):
//! `x[B, C, H, W] → y[B, C, OH, OW]`, and `(x, y, dy[B, C, OH, OW]) → dx[B,
//! C, H, W]`. Window (oh, ow) covers `x[oh·sh + kh·dh − pt, ow·sw + kw·dw −
//! pl]`; positions outside `x` never win (a window with none gives −1e300 as
//! f32, as the spec). The gradient sends each window's `dy` to the window's
//! first element (row-major scan) equal to its `y`, as the spec (and
//! PyTorch) does, summed in window order (a different order of the same f32
//! sums than the interpreter's, within rounding).

use rayon::prelude::*;
use tdl::Binding;

use super::KernelImpl;
use crate::ops::{inputs_named, int_attr, only_attrs, KernelError};

/// Window geometry.
#[derive(Clone, Copy, Debug)]
struct Geom {
    h: usize,
    w: usize,
    oh: usize,
    ow: usize,
    kh: i64,
    kw: i64,
    sh: i64,
    sw: i64,
    pt: i64,
    pl: i64,
    dh: i64,
    dw: i64,
}

impl Geom {
    /// Every in-bounds input position `(i·w + j)` of window (oy, ox), in (kh, kw) order.
    fn window(&self, oy: usize, ox: usize, mut f: impl FnMut(usize)) {
        for a in 0..self.kh {
            let i = oy as i64 * self.sh + a * self.dh - self.pt;
            if i < 0 || i >= self.h as i64 {
                continue;
            }
            for c in 0..self.kw {
                let j = ox as i64 * self.sw + c * self.dw - self.pl;
                if j >= 0 && j < self.w as i64 {
                    f(i as usize * self.w + j as usize);
                }
            }
        }
    }
}

struct MaxPool {
    g: Geom,
    grad: bool,
}

impl KernelImpl for MaxPool {
    fn run(&self, inputs: &[&[f32]], outputs: &mut [&mut [f32]]) -> Result<(), KernelError> {
        let g = self.g;
        let (plane, oplane) = (g.h * g.w, g.oh * g.ow);
        if plane == 0 || oplane == 0 {
            outputs[0].fill(0.0);
            return Ok(());
        }
        let x = inputs[0];
        if !self.grad {
            outputs[0]
                .par_chunks_mut(oplane)
                .enumerate()
                .for_each(|(p, y)| {
                    let x = &x[p * plane..(p + 1) * plane];
                    for oy in 0..g.oh {
                        for ox in 0..g.ow {
                            let mut m = -1e300f64 as f32;
                            g.window(oy, ox, |k| m = m.max(x[k]));
                            y[oy * g.ow + ox] = m;
                        }
                    }
                });
            return Ok(());
        }
        let (y, dy) = (inputs[1], inputs[2]);
        outputs[0]
            .par_chunks_mut(plane)
            .enumerate()
            .for_each(|(p, dx)| {
                dx.fill(0.0);
                let x = &x[p * plane..(p + 1) * plane];
                let (y, dy) = (
                    &y[p * oplane..(p + 1) * oplane],
                    &dy[p * oplane..(p + 1) * oplane],
                );
                for oy in 0..g.oh {
                    for ox in 0..g.ow {
                        let (m, d) = (y[oy * g.ow + ox], dy[oy * g.ow + ox]);
                        let mut found = false;
                        g.window(oy, ox, |k| {
                            if !found && x[k] == m {
                                dx[k] += d;
                                found = true;
                            }
                        });
                    }
                }
            });
        Ok(())
    }
}

/// Attribute names of one pooling family: (pad top, pad left, dilations).
struct Names {
    known: &'static [&'static str],
    pads: [&'static str; 2],
    dilations: Option<[&'static str; 2]>,
}

const POOL: Names = Names {
    known: &[
        "kernel_h", "kernel_w", "stride_h", "stride_w", "pad_h", "pad_w",
    ],
    pads: ["pad_h", "pad_w"],
    dilations: None,
};

const POOL_EXT: Names = Names {
    known: &[
        "kernel_h",
        "kernel_w",
        "stride_h",
        "stride_w",
        "pad_t",
        "pad_l",
        "pad_b",
        "pad_r",
        "dilation_h",
        "dilation_w",
        "ceil_mode",
    ],
    pads: ["pad_t", "pad_l"],
    dilations: Some(["dilation_h", "dilation_w"]),
};

fn build(b: &Binding, names: &Names, grad: bool) -> Option<Box<dyn KernelImpl>> {
    let want: &[&str] = if grad { &["x", "y", "dy"] } else { &["x"] };
    if !only_attrs(b, names.known) || !inputs_named(b, want) || b.output_shapes.len() != 1 {
        return None;
    }
    let a = |n: &str, d: i64| int_attr(b, n).unwrap_or(d);
    let (kh, kw) = (int_attr(b, "kernel_h")?, int_attr(b, "kernel_w")?);
    let (sh, sw) = (a("stride_h", 1), a("stride_w", 1));
    let (pt, pl) = (a(names.pads[0], 0), a(names.pads[1], 0));
    let (dh, dw) = names.dilations.map_or((1, 1), |[h, w]| (a(h, 1), a(w, 1)));
    if kh <= 0 || kw <= 0 || sh <= 0 || sw <= 0 || dh <= 0 || dw <= 0 {
        return None;
    }
    let x = b.input_shapes[0].as_slice();
    let &[bn, c, h, w] = x else { return None };
    let pooled = if grad {
        &b.input_shapes[1]
    } else {
        &b.output_shapes[0]
    };
    let &[pb, pc, oh, ow] = pooled.as_slice() else {
        return None;
    };
    let shapes_fit =
        (pb, pc) == (bn, c) && (!grad || (b.input_shapes[2] == *pooled && b.output_shapes[0] == x));
    shapes_fit.then(|| {
        Box::new(MaxPool {
            g: Geom {
                h,
                w,
                oh,
                ow,
                kh,
                kw,
                sh,
                sw,
                pt,
                pl,
                dh,
                dw,
            },
            grad,
        }) as Box<dyn KernelImpl>
    })
}

/// `maxpool2d<kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w>(x) -> y`.
pub fn maxpool2d(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    build(b, &POOL, false)
}

/// `maxpool2d_grad<…>(x, y, dy) -> dx`.
pub fn maxpool2d_grad(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    build(b, &POOL, true)
}

/// `maxpool2d_ext<kernel_*, stride_*, pad_t/l/b/r, dilation_*, ceil_mode>(x) -> y`.
pub fn maxpool2d_ext(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    build(b, &POOL_EXT, false)
}

/// `maxpool2d_ext_grad<kernel_*, stride_*, pad_t/l, dilation_*>(x, y, dy) -> dx`.
pub fn maxpool2d_ext_grad(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    build(b, &POOL_EXT, true)
}
