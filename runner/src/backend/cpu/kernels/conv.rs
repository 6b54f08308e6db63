//! Convolutions as im2col + gemm, and their gradients as gemm + col2im.
//!
//! Takes a bound `conv2d` (`x[B, CI, H, W], w[CO, CI, KH, KW] → y[B, CO, OH,
//! OW]`, attributes `stride_h/_w`, `pad_h/_w`, `dilation_h/_w`), `conv1d`
//! (`x[B, CI, X], w[CO, CI, DX] → y[B, CO, XO]`, attributes `stride`, `pad`,
//! `dilation`; run as a conv2d with H = KH = 1) or their gradients
//! `*_grad_x` (→ dx, from inputs named `dy` and `w`; the input size comes
//! from the output shape, i.e. the `in_h`/`in_w`/`in_x` attributes) and
//! `*_grad_w` (→ dw, from inputs named `x` and `dy`; the kernel size from the
//! output shape, i.e. `kernel_h`/`kernel_w`/`kernel`); gives a kernel that unrolls patches into a
//! `[CI·KH·KW, OH·OW]` column matrix (zero where the window hangs over the
//! zero padding) and multiplies with [`super::gemm::sgemm`]:
//!
//! * forward: `y_b[CO, OH·OW] = w[CO, CI·KH·KW] · col(x_b)`
//! * grad x: `dx_b = col2im(wᵀ · dy_b)` (col2im sums overlapping windows)
//! * grad w: `dw = Σ_b dy_b · col(x_b)ᵀ`
//!
//! A constructor declines (`None`, the compiled evaluator runs the op) when
//! the instance has an unknown attribute, unexpected ranks, tensor names it
//! cannot place, or an output shape that disagrees with the convolution
//! arithmetic `O = (I + 2·pad − dilation·(K − 1) − 1) // stride + 1`.

use rayon::prelude::*;
use tdl::Binding;

use super::gemm::{sgemm, Mat};
use super::{int_attr, only_attrs, KernelError, KernelImpl};

/// The sizes of a 2-D convolution (a 1-D one has `h = kh = oh = 1`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Geom {
    b: usize,
    ci: usize,
    h: usize,
    w: usize,
    co: usize,
    kh: usize,
    kw: usize,
    oh: usize,
    ow: usize,
    sh: i64,
    sw: i64,
    ph: i64,
    pw: i64,
    dh: i64,
    dw: i64,
}

/// Output size of a convolution along one axis, `None` if not positive.
fn out_size(i: usize, k: usize, s: i64, p: i64, d: i64) -> Option<usize> {
    if s <= 0 || d <= 0 || p < 0 || k == 0 {
        return None;
    }
    let o = (i as i64 + 2 * p - d * (k as i64 - 1) - 1).div_euclid(s) + 1;
    (o > 0).then_some(o as usize)
}

impl Geom {
    /// Rows of the column matrix.
    fn kdim(&self) -> usize {
        self.ci * self.kh * self.kw
    }

    /// Columns of the column matrix.
    fn odim(&self) -> usize {
        self.oh * self.ow
    }

    /// Whether the column matrix equals the input image (1×1, stride 1, no pad).
    fn identity_cols(&self) -> bool {
        self.kh == 1 && self.kw == 1 && self.sh == 1 && self.sw == 1 && self.ph == 0 && self.pw == 0
    }

    /// Unroll image `x` (`[ci, h, w]`) into `col` (`[ci·kh·kw, oh·ow]`).
    fn im2col(&self, x: &[f32], col: &mut [f32]) {
        let (od, ow) = (self.odim(), self.ow);
        for c in 0..self.ci {
            let img = &x[c * self.h * self.w..(c + 1) * self.h * self.w];
            for i in 0..self.kh {
                for j in 0..self.kw {
                    let row = &mut col[((c * self.kh + i) * self.kw + j) * od..][..od];
                    for oy in 0..self.oh {
                        let y = oy as i64 * self.sh + i as i64 * self.dh - self.ph;
                        let dst = &mut row[oy * ow..(oy + 1) * ow];
                        if y < 0 || y >= self.h as i64 {
                            dst.fill(0.0);
                            continue;
                        }
                        let src = &img[y as usize * self.w..(y as usize + 1) * self.w];
                        for (ox, d) in dst.iter_mut().enumerate() {
                            let x = ox as i64 * self.sw + j as i64 * self.dw - self.pw;
                            *d = if x >= 0 && x < self.w as i64 {
                                src[x as usize]
                            } else {
                                0.0
                            };
                        }
                    }
                }
            }
        }
    }

    /// Add `col` (`[ci·kh·kw, oh·ow]`) back into image `x` (`[ci, h, w]`).
    fn col2im(&self, col: &[f32], x: &mut [f32]) {
        let (od, ow) = (self.odim(), self.ow);
        for c in 0..self.ci {
            let img = &mut x[c * self.h * self.w..(c + 1) * self.h * self.w];
            for i in 0..self.kh {
                for j in 0..self.kw {
                    let row = &col[((c * self.kh + i) * self.kw + j) * od..][..od];
                    for oy in 0..self.oh {
                        let y = oy as i64 * self.sh + i as i64 * self.dh - self.ph;
                        if y < 0 || y >= self.h as i64 {
                            continue;
                        }
                        let dst = &mut img[y as usize * self.w..(y as usize + 1) * self.w];
                        for (ox, &v) in row[oy * ow..(oy + 1) * ow].iter().enumerate() {
                            let x = ox as i64 * self.sw + j as i64 * self.dw - self.pw;
                            if x >= 0 && x < self.w as i64 {
                                dst[x as usize] += v;
                            }
                        }
                    }
                }
            }
        }
    }
}

/// What a convolution kernel computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// `y` from (`x` = input `a`, `w` = input `b`).
    Forward,
    /// `dx` from (`dy` = input `a`, `w` = input `b`).
    GradX,
    /// `dw` from (`x` = input `a`, `dy` = input `b`).
    GradW,
}

struct ConvKernel {
    g: Geom,
    mode: Mode,
    /// Input positions of the two operands (see [`Mode`]).
    a: usize,
    b: usize,
}

/// Strides, paddings and dilations of a bound op, by attribute name.
struct AttrNames {
    known: &'static [&'static str],
    /// (stride, pad, dilation) for the h axis, `None` for 1-D.
    h: Option<[&'static str; 3]>,
    w: [&'static str; 3],
}

const CONV2D: AttrNames = AttrNames {
    known: &[
        "stride_h",
        "stride_w",
        "pad_h",
        "pad_w",
        "dilation_h",
        "dilation_w",
        "in_h",
        "in_w",
        "kernel_h",
        "kernel_w",
    ],
    h: Some(["stride_h", "pad_h", "dilation_h"]),
    w: ["stride_w", "pad_w", "dilation_w"],
};

const CONV1D: AttrNames = AttrNames {
    known: &["stride", "pad", "dilation", "in_x", "kernel"],
    h: None,
    w: ["stride", "pad", "dilation"],
};

/// Shapes `[B, CI, H, W]`-style of rank 4 (2-D) or 3 (1-D, H = 1 inserted).
fn as4(s: &[usize], two_d: bool) -> Option<[usize; 4]> {
    match (two_d, s) {
        (true, &[a, b, c, d]) => Some([a, b, c, d]),
        (false, &[a, b, d]) => Some([a, b, 1, d]),
        _ => None,
    }
}

fn input_named(b: &Binding, names: &[&str]) -> Option<usize> {
    b.spec
        .inputs
        .iter()
        .position(|t| names.contains(&t.name.as_str()))
}

const DY: &[&str] = &["dy", "gy", "grad_y", "dout"];

fn build(b: &Binding, names: &AttrNames, mode: Mode) -> Option<Box<dyn KernelImpl>> {
    if !only_attrs(b, names.known) || b.output_shapes.len() != 1 {
        return None;
    }
    let two_d = names.h.is_some();
    let attr = |n: &str, default: i64| int_attr(b, n).unwrap_or(default);
    let (sh, ph, dh) = match names.h {
        Some([s, p, d]) => (attr(s, 1), attr(p, 0), attr(d, 1)),
        None => (1, 0, 1),
    };
    let [s, p, d] = names.w;
    let (sw, pw, dw) = (attr(s, 1), attr(p, 0), attr(d, 1));
    let (a, bi) = match mode {
        Mode::Forward if b.input_shapes.len() == 2 => (0, 1),
        Mode::Forward => return None,
        Mode::GradX => (input_named(b, DY)?, input_named(b, &["w"])?),
        Mode::GradW => (input_named(b, &["x"])?, input_named(b, DY)?),
    };
    let sa = as4(&b.input_shapes[a], two_d)?;
    let sb = as4(&b.input_shapes[bi], two_d)?;
    let so = as4(&b.output_shapes[0], two_d)?;
    // (x, w, y) shapes, whichever two are the operands and the output.
    let (x, w, y) = match mode {
        Mode::Forward => (sa, sb, so),
        Mode::GradX => (so, sb, sa),
        Mode::GradW => (sa, so, sb),
    };
    let g = Geom {
        b: x[0],
        ci: x[1],
        h: x[2],
        w: x[3],
        co: w[0],
        kh: w[2],
        kw: w[3],
        oh: y[2],
        ow: y[3],
        sh,
        sw,
        ph,
        pw,
        dh,
        dw,
    };
    let fits = w[1] == g.ci
        && y[0] == g.b
        && y[1] == g.co
        && out_size(g.h, g.kh, sh, ph, dh) == Some(g.oh)
        && out_size(g.w, g.kw, sw, pw, dw) == Some(g.ow);
    fits.then(|| Box::new(ConvKernel { g, mode, a, b: bi }) as Box<dyn KernelImpl>)
}

impl KernelImpl for ConvKernel {
    fn run(&self, inputs: &[&[f32]], outputs: &mut [&mut [f32]]) -> Result<(), KernelError> {
        let (a, b) = (inputs[self.a], inputs[self.b]);
        let out = &mut *outputs[0];
        match self.mode {
            Mode::Forward => self.forward(a, b, out),
            Mode::GradX => self.grad_x(a, b, out),
            Mode::GradW => self.grad_w(a, b, out),
        }
        Ok(())
    }
}

impl ConvKernel {
    /// Per-image work in parallel when there are enough images, else gemm's threads.
    fn batch_parallel(&self) -> bool {
        self.g.b >= rayon::current_num_threads()
    }

    fn forward(&self, x: &[f32], w: &[f32], y: &mut [f32]) {
        let g = &self.g;
        let (kd, od, img) = (g.kdim(), g.odim(), g.ci * g.h * g.w);
        let wm = Mat {
            data: w,
            rs: kd,
            cs: 1,
        };
        let one = |i: usize, y: &mut [f32], col: &mut Vec<f32>, parallel: bool| {
            let xb = &x[i * img..(i + 1) * img];
            let cols: &[f32] = if g.identity_cols() {
                xb
            } else {
                col.resize(kd * od, 0.0);
                g.im2col(xb, col);
                col
            };
            sgemm(
                g.co,
                od,
                kd,
                y,
                wm,
                Mat {
                    data: cols,
                    rs: od,
                    cs: 1,
                },
                false,
                parallel,
            );
        };
        let per = g.co * od;
        if per == 0 {
            return;
        }
        if self.batch_parallel() {
            y.par_chunks_mut(per)
                .enumerate()
                .for_each_init(Vec::new, |col, (i, y)| one(i, y, col, false));
        } else {
            let mut col = Vec::new();
            y.chunks_mut(per)
                .enumerate()
                .for_each(|(i, y)| one(i, y, &mut col, true));
        }
    }

    fn grad_x(&self, dy: &[f32], w: &[f32], dx: &mut [f32]) {
        let g = &self.g;
        let (kd, od, img) = (g.kdim(), g.odim(), g.ci * g.h * g.w);
        let wt = Mat {
            data: w,
            rs: 1,
            cs: kd,
        };
        let one = |i: usize, dx: &mut [f32], col: &mut Vec<f32>, parallel: bool| {
            let dyb = Mat {
                data: &dy[i * g.co * od..(i + 1) * g.co * od],
                rs: od,
                cs: 1,
            };
            if g.identity_cols() {
                sgemm(kd, od, g.co, dx, wt, dyb, false, parallel);
                return;
            }
            col.resize(kd * od, 0.0);
            sgemm(kd, od, g.co, col, wt, dyb, false, parallel);
            dx.fill(0.0);
            g.col2im(col, dx);
        };
        if img == 0 {
            return;
        }
        if self.batch_parallel() {
            dx.par_chunks_mut(img)
                .enumerate()
                .for_each_init(Vec::new, |col, (i, dx)| one(i, dx, col, false));
        } else {
            let mut col = Vec::new();
            dx.chunks_mut(img)
                .enumerate()
                .for_each(|(i, dx)| one(i, dx, &mut col, true));
        }
    }

    fn grad_w(&self, x: &[f32], dy: &[f32], dw: &mut [f32]) {
        let g = &self.g;
        let (kd, od, img) = (g.kdim(), g.odim(), g.ci * g.h * g.w);
        // dw += dy_i · col(x_i)ᵀ over images lo..hi.
        let part = |lo: usize, hi: usize, dw: &mut [f32], parallel: bool| {
            let mut col = Vec::new();
            dw.fill(0.0);
            for i in lo..hi {
                let xb = &x[i * img..(i + 1) * img];
                let cols: &[f32] = if g.identity_cols() {
                    xb
                } else {
                    col.resize(kd * od, 0.0);
                    g.im2col(xb, &mut col);
                    &col
                };
                let dyb = Mat {
                    data: &dy[i * g.co * od..(i + 1) * g.co * od],
                    rs: od,
                    cs: 1,
                };
                sgemm(
                    g.co,
                    kd,
                    od,
                    dw,
                    dyb,
                    Mat {
                        data: cols,
                        rs: 1,
                        cs: od,
                    },
                    true,
                    parallel,
                );
            }
        };
        if self.batch_parallel() {
            // Fixed chunks, summed in order: deterministic for a given thread count.
            let t = rayon::current_num_threads();
            let chunk = g.b.div_ceil(t);
            let partials: Vec<Vec<f32>> = (0..t)
                .into_par_iter()
                .map(|c| {
                    let mut p = vec![0.0; dw.len()];
                    part(
                        (c * chunk).min(g.b),
                        ((c + 1) * chunk).min(g.b),
                        &mut p,
                        false,
                    );
                    p
                })
                .collect();
            dw.fill(0.0);
            for p in partials {
                dw.iter_mut().zip(&p).for_each(|(d, v)| *d += v);
            }
        } else {
            part(0, g.b, dw, true);
        }
    }
}

/// `conv2d(x[B, CI, H, W], w[CO, CI, KH, KW]) -> y[B, CO, OH, OW]`.
pub fn conv2d(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    build(b, &CONV2D, Mode::Forward)
}

/// `conv2d_grad_x(..., dy[B, CO, OH, OW], w[CO, CI, KH, KW]) -> dx[B, CI, H, W]`.
pub fn conv2d_grad_x(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    build(b, &CONV2D, Mode::GradX)
}

/// `conv2d_grad_w(x[B, CI, H, W], dy[B, CO, OH, OW], ...) -> dw[CO, CI, KH, KW]`.
pub fn conv2d_grad_w(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    build(b, &CONV2D, Mode::GradW)
}

/// `conv1d(x[B, CI, X], w[CO, CI, DX]) -> y[B, CO, XO]`.
pub fn conv1d(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    build(b, &CONV1D, Mode::Forward)
}

/// `conv1d_grad_x(..., dy[B, CO, XO], w[CO, CI, DX]) -> dx[B, CI, X]`.
pub fn conv1d_grad_x(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    build(b, &CONV1D, Mode::GradX)
}

/// `conv1d_grad_w(x[B, CI, X], dy[B, CO, XO], ...) -> dw[CO, CI, DX]`.
pub fn conv1d_grad_w(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    build(b, &CONV1D, Mode::GradW)
}
