//! Convolutions as im2col + gemm, and their gradients as gemm + col2im.
//!
//! Takes a bound `conv2d` (`x[B, CI, H, W], w[CO, CI, KH, KW] → y[B, CO, OH,
//! OW]`, attributes `stride_h/_w`, `pad_h/_w`, `dilation_h/_w`), its grouped
//! form `conv2d_group` (`w[CO, CI/groups, KH, KW]`, attribute `groups`: the
//! CI input and CO output channels split into `groups` groups, depthwise when
//! groups = CI), the ONNX importer's forms with a per-channel bias
//! (`conv2d_bias`, `conv2d_group_bias`: a third input `b[CO]`) and with begin
//! pads unlike end pads (`conv2d_ext`, `conv2d_group_ext`: `pad_t`, `pad_l`,
//! `pad_b`, `pad_r`), `conv1d` (`x[B, CI, X], w[CO, CI, DX] → y[B, CO, XO]`,
//! attributes `stride`, `pad`, `dilation`; run as a conv2d with H = KH = 1)
//! or the gradients `*_grad_x` (→ dx, from inputs named `dy` and `w`; the
//! input size comes from the output shape, i.e. the `in_h`/`in_w`/`in_x`
//! attributes) and `*_grad_w` (→ dw, from inputs named `x` and `dy`; the
//! kernel size from the output shape, i.e. `kernel_h`/`kernel_w`/`kernel`);
//! gives a kernel that, per image and group, unrolls patches into a
//! `[CIG·KH·KW, OH·OW]` column matrix (CIG = CI/groups; zero where the window
//! hangs over the zero padding) and multiplies with [`super::gemm::sgemm`]:
//!
//! * forward: `y_bg[COG, OH·OW] = w_g[COG, CIG·KH·KW] · col(x_bg) (+ b_g)`
//! * grad x: `dx_bg = col2im(w_gᵀ · dy_bg)` (col2im sums overlapping windows)
//! * grad w: `dw_g = Σ_b dy_bg · col(x_bg)ᵀ`
//!
//! A constructor declines (`None`, the compiled evaluator runs the op) when
//! the instance has an unknown attribute, unexpected ranks, tensor names it
//! cannot place, channels that do not split into the groups, or a forward
//! output shape that disagrees with the convolution arithmetic
//! `O = (I + pad_begin + pad_end − dilation·(K − 1) − 1) // stride + 1` (a
//! gradient is defined for any dy size: windows past the input read zeros).

use rayon::prelude::*;
use tdl::Binding;

use super::gemm::{sgemm, Mat};
use super::KernelImpl;
use crate::ops::{int_attr, only_attrs, KernelError};

/// The sizes of a 2-D convolution of one group (a 1-D one has `h = kh = oh
/// = 1`): `ci`, `co` are the channels per group; `ph`, `pw` the begin pads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Geom {
    b: usize,
    groups: usize,
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

/// Output size of a convolution along one axis with begin and end pads
/// `pb`, `pe`, `None` if not positive.
fn out_size(i: usize, k: usize, s: i64, (pb, pe): (i64, i64), d: i64) -> Option<usize> {
    if s <= 0 || d <= 0 || pb < 0 || pe < 0 || k == 0 {
        return None;
    }
    let o = (i as i64 + pb + pe - d * (k as i64 - 1) - 1).div_euclid(s) + 1;
    (o > 0).then_some(o as usize)
}

impl Geom {
    /// Rows of the column matrix.
    fn kdim(&self) -> usize {
        self.ci * self.kh * self.kw
    }

    /// Elements of one group of one input image.
    fn img(&self) -> usize {
        self.ci * self.h * self.w
    }

    /// (image, group) pairs.
    fn units(&self) -> usize {
        self.b * self.groups
    }

    /// Columns of the column matrix.
    fn odim(&self) -> usize {
        self.oh * self.ow
    }

    /// Whether the column matrix equals the input image (1×1, stride 1, no pad).
    /// (A gradient's dy may be larger than the input, its windows past the
    /// input reading the padding, so the sizes are compared too.)
    fn identity_cols(&self) -> bool {
        self.kh == 1
            && self.kw == 1
            && self.sh == 1
            && self.sw == 1
            && self.ph == 0
            && self.pw == 0
            && self.oh == self.h
            && self.ow == self.w
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
    /// `y` from (`x` = input `a`, `w` = input `b`, optionally a bias).
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
    /// Input position of the forward bias `b[CO]`.
    bias: Option<usize>,
}

/// One spatial axis's attribute names: stride, begin pad, end pad (the
/// same name when symmetric), dilation.
type Axis = [&'static str; 4];

/// The attributes of a family of bound ops, by name.
struct AttrNames {
    known: &'static [&'static str],
    /// The h axis, `None` for 1-D.
    h: Option<Axis>,
    w: Axis,
}

const CONV2D: AttrNames = AttrNames {
    known: &[
        "groups",
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
    h: Some(["stride_h", "pad_h", "pad_h", "dilation_h"]),
    w: ["stride_w", "pad_w", "pad_w", "dilation_w"],
};

/// The ONNX importer's convolutions with begin pads unlike end pads.
const CONV2D_EXT: AttrNames = AttrNames {
    known: &[
        "groups",
        "stride_h",
        "stride_w",
        "pad_t",
        "pad_l",
        "pad_b",
        "pad_r",
        "dilation_h",
        "dilation_w",
    ],
    h: Some(["stride_h", "pad_t", "pad_b", "dilation_h"]),
    w: ["stride_w", "pad_l", "pad_r", "dilation_w"],
};

const CONV1D: AttrNames = AttrNames {
    known: &["stride", "pad", "dilation", "in_x", "kernel"],
    h: None,
    w: ["stride", "pad", "pad", "dilation"],
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
    let axis = |[s, pb, pe, d]: Axis| (attr(s, 1), (attr(pb, 0), attr(pe, 0)), attr(d, 1));
    let (sh, ph, dh) = names.h.map_or((1, (0, 0), 1), axis);
    let (sw, pw, dw) = axis(names.w);
    let groups = usize::try_from(attr("groups", 1)).ok().filter(|&g| g > 0)?;
    let (a, bi, bias) = match mode {
        Mode::Forward if b.input_shapes.len() == 2 => (0, 1, None),
        Mode::Forward if b.input_shapes.len() == 3 => (0, 1, Some(input_named(b, &["b"])?)),
        Mode::Forward => return None,
        Mode::GradX => (input_named(b, DY)?, input_named(b, &["w"])?, None),
        Mode::GradW => (input_named(b, &["x"])?, input_named(b, DY)?, None),
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
    if x[1] % groups != 0 || w[0] % groups != 0 {
        return None;
    }
    let g = Geom {
        b: x[0],
        groups,
        ci: x[1] / groups,
        h: x[2],
        w: x[3],
        co: w[0] / groups,
        kh: w[2],
        kw: w[3],
        oh: y[2],
        ow: y[3],
        sh,
        sw,
        ph: ph.0,
        pw: pw.0,
        dh,
        dw,
    };
    let sizes = match mode {
        Mode::Forward => {
            out_size(g.h, g.kh, sh, ph, dh) == Some(g.oh)
                && out_size(g.w, g.kw, sw, pw, dw) == Some(g.ow)
        }
        // Any dy size: its windows past the input read the zero padding.
        Mode::GradX | Mode::GradW => {
            [sh, sw, dh, dw].iter().all(|&v| v > 0) && ph.0 >= 0 && pw.0 >= 0
        }
    };
    let bias_fits = bias.is_none_or(|i| b.input_shapes[i] == [w[0]]);
    let fits = w[1] == g.ci && y[0] == g.b && y[1] == w[0] && sizes && bias_fits;
    fits.then(|| {
        Box::new(ConvKernel {
            g,
            mode,
            a,
            b: bi,
            bias,
        }) as Box<dyn KernelImpl>
    })
}

impl KernelImpl for ConvKernel {
    fn run(&self, inputs: &[&[f32]], outputs: &mut [&mut [f32]]) -> Result<(), KernelError> {
        let (a, b) = (inputs[self.a], inputs[self.b]);
        let out = &mut *outputs[0];
        match self.mode {
            Mode::Forward => self.forward(a, b, self.bias.map(|i| inputs[i]), out),
            Mode::GradX => self.grad_x(a, b, out),
            Mode::GradW => self.grad_w(a, b, out),
        }
        Ok(())
    }
}

impl ConvKernel {
    /// Per-(image, group) work in parallel when there are enough of them,
    /// else gemm's threads.
    fn unit_parallel(&self) -> bool {
        self.g.units() >= rayon::current_num_threads()
    }

    /// Group `grp`'s weights `[COG, CIG·KH·KW]`.
    fn weights<'w>(&self, w: &'w [f32], grp: usize) -> &'w [f32] {
        let per = self.g.co * self.g.kdim();
        &w[grp * per..(grp + 1) * per]
    }

    fn forward(&self, x: &[f32], w: &[f32], bias: Option<&[f32]>, y: &mut [f32]) {
        let g = &self.g;
        let (kd, od, img) = (g.kdim(), g.odim(), g.img());
        // Unit u = (image u / groups, group u % groups); its input channels
        // and output rows are contiguous.
        let one = |u: usize, y: &mut [f32], col: &mut Vec<f32>, parallel: bool| {
            let grp = u % g.groups;
            let xb = &x[u * img..(u + 1) * img];
            let cols: &[f32] = if g.identity_cols() {
                xb
            } else {
                col.resize(kd * od, 0.0);
                g.im2col(xb, col);
                col
            };
            let wm = Mat {
                data: self.weights(w, grp),
                rs: kd,
                cs: 1,
            };
            let cm = Mat {
                data: cols,
                rs: od,
                cs: 1,
            };
            sgemm(g.co, od, kd, y, wm, cm, false, parallel);
            if let Some(bias) = bias {
                for (row, &c) in y.chunks_mut(od).zip(&bias[grp * g.co..(grp + 1) * g.co]) {
                    row.iter_mut().for_each(|v| *v += c);
                }
            }
        };
        let per = g.co * od;
        if per == 0 {
            return;
        }
        if self.unit_parallel() {
            y.par_chunks_mut(per)
                .enumerate()
                .for_each_init(Vec::new, |col, (u, y)| one(u, y, col, false));
        } else {
            let mut col = Vec::new();
            y.chunks_mut(per)
                .enumerate()
                .for_each(|(u, y)| one(u, y, &mut col, true));
        }
    }

    fn grad_x(&self, dy: &[f32], w: &[f32], dx: &mut [f32]) {
        let g = &self.g;
        let (kd, od, img) = (g.kdim(), g.odim(), g.img());
        let one = |u: usize, dx: &mut [f32], col: &mut Vec<f32>, parallel: bool| {
            let wt = Mat {
                data: self.weights(w, u % g.groups),
                rs: 1,
                cs: kd,
            };
            let dyb = Mat {
                data: &dy[u * g.co * od..(u + 1) * g.co * od],
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
        if self.unit_parallel() {
            dx.par_chunks_mut(img)
                .enumerate()
                .for_each_init(Vec::new, |col, (u, dx)| one(u, dx, col, false));
        } else {
            let mut col = Vec::new();
            dx.chunks_mut(img)
                .enumerate()
                .for_each(|(u, dx)| one(u, dx, &mut col, true));
        }
    }

    fn grad_w(&self, x: &[f32], dy: &[f32], dw: &mut [f32]) {
        let g = &self.g;
        let (kd, od, img) = (g.kdim(), g.odim(), g.img());
        let per = g.co * kd;
        // dw_grp (= `dw`, one group's block) += dy_u · col(x_u)ᵀ over the
        // images lo..hi of group grp.
        let group = |grp: usize, lo: usize, hi: usize, dw: &mut [f32], parallel: bool| {
            let mut col = Vec::new();
            for i in lo..hi {
                let u = i * g.groups + grp;
                let xb = &x[u * img..(u + 1) * img];
                let cols: &[f32] = if g.identity_cols() {
                    xb
                } else {
                    col.resize(kd * od, 0.0);
                    g.im2col(xb, &mut col);
                    &col
                };
                let dyb = Mat {
                    data: &dy[u * g.co * od..(u + 1) * g.co * od],
                    rs: od,
                    cs: 1,
                };
                let ct = Mat {
                    data: cols,
                    rs: 1,
                    cs: od,
                };
                sgemm(g.co, kd, od, dw, dyb, ct, true, parallel);
            }
        };
        // Every group over images lo..hi into the whole `dw`.
        let part = |lo: usize, hi: usize, dw: &mut [f32], parallel: bool| {
            dw.fill(0.0);
            for (grp, d) in dw.chunks_mut(per).enumerate() {
                group(grp, lo, hi, d, parallel);
            }
        };
        if per == 0 {
            return;
        }
        let t = rayon::current_num_threads();
        if g.b >= t {
            // Fixed chunks of images, summed in order: deterministic for a
            // given thread count.
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
        } else if g.groups >= t {
            dw.par_chunks_mut(per).enumerate().for_each(|(grp, d)| {
                d.fill(0.0);
                group(grp, 0, g.b, d, false);
            });
        } else {
            part(0, g.b, dw, true);
        }
    }
}

/// `conv2d(x[B, CI, H, W], w[CO, CI, KH, KW]) -> y[B, CO, OH, OW]`; also
/// `conv2d_group` (`w[CO, CI/groups, KH, KW]`) and the bias forms
/// `conv2d_bias`, `conv2d_group_bias` (`b[CO]`).
pub fn conv2d(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    build(b, &CONV2D, Mode::Forward)
}

/// `conv2d_ext` / `conv2d_group_ext`: [`conv2d`] with begin pads `pad_t`,
/// `pad_l` and end pads `pad_b`, `pad_r`.
pub fn conv2d_ext(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    build(b, &CONV2D_EXT, Mode::Forward)
}

/// `conv2d_grad_x(..., dy[B, CO, OH, OW], w[CO, CI, KH, KW]) -> dx[B, CI, H, W]`;
/// also `conv2d_group_grad_x` (`w[CO, CI/groups, KH, KW]`).
pub fn conv2d_grad_x(b: &Binding) -> Option<Box<dyn KernelImpl>> {
    build(b, &CONV2D, Mode::GradX)
}

/// `conv2d_grad_w(x[B, CI, H, W], dy[B, CO, OH, OW], ...) -> dw[CO, CI, KH, KW]`;
/// also `conv2d_group_grad_w` (`dw[CO, CI/groups, KH, KW]`).
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
