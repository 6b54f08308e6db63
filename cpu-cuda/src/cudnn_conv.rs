//! The convolution arithmetic of the stand-in's cuDNN ([`crate::cudnn`]):
//! a [`Conv`] (one 2-D convolution, NCHW, f32, no groups) checked against
//! cuDNN's rules, the workspace it asks for (one image's column matrix),
//! and the three computations as im2col / col2im into that workspace and
//! GEMMs by the `gemm` crate, one image at a time.

/// One convolution: input `[n, c, h, w]`, filter `[k, c, r, s]`, output
/// `[n, k, p, q]`, pads, strides, dilations (height, width), and whether
/// the filter is flipped (`CUDNN_CONVOLUTION`, a true convolution) or not
/// (`CUDNN_CROSS_CORRELATION`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv {
    pub n: usize,
    pub c: usize,
    pub h: usize,
    pub w: usize,
    pub k: usize,
    pub r: usize,
    pub s: usize,
    pub p: usize,
    pub q: usize,
    pub pad: [usize; 2],
    pub stride: [usize; 2],
    pub dilation: [usize; 2],
    pub flip: bool,
}

/// The output size of an axis as cuDNN computes it
/// (`cudnnGetConvolution2dForwardOutputDim`), `None` if not positive.
pub fn out_dim(i: usize, f: usize, pad: usize, stride: usize, dil: usize) -> Option<usize> {
    let span = dil * (f.checked_sub(1)?) + 1;
    (stride > 0 && i + 2 * pad >= span).then(|| (i + 2 * pad - span) / stride + 1)
}

impl Conv {
    /// Whether the four descriptors agree (cuDNN's `CUDNN_STATUS_BAD_PARAM`
    /// otherwise): channels, images, output channels and output sizes.
    pub fn consistent(&self) -> bool {
        let [ph, pw] = self.pad;
        let [sh, sw] = self.stride;
        let [dh, dw] = self.dilation;
        out_dim(self.h, self.r, ph, sh, dh) == Some(self.p)
            && out_dim(self.w, self.s, pw, sw, dw) == Some(self.q)
    }

    /// Rows of one image's column matrix (`c·r·s`).
    fn taps(&self) -> usize {
        self.c * self.r * self.s
    }

    /// Columns of one image's column matrix (`p·q`).
    fn outs(&self) -> usize {
        self.p * self.q
    }

    /// Bytes of workspace every algorithm asks for: one image's column
    /// matrix.
    pub fn workspace(&self) -> usize {
        self.taps() * self.outs() * 4
    }

    /// Elements of x, w, y.
    pub fn elems(&self) -> [usize; 3] {
        [
            self.n * self.c * self.h * self.w,
            self.k * self.c * self.r * self.s,
            self.n * self.k * self.outs(),
        ]
    }

    /// Where column-matrix row `t` (tap (ch, i, j) of the filter as stored,
    /// or its mirror when flipped), column `o` (output position (y, x))
    /// reads one image: the input element's offset, `None` in the padding.
    fn source(&self, t: usize, o: usize) -> Option<usize> {
        let (ch, i, j) = (t / (self.r * self.s), t / self.s % self.r, t % self.s);
        let (i, j) = if self.flip {
            (self.r - 1 - i, self.s - 1 - j)
        } else {
            (i, j)
        };
        let (y, x) = (o / self.q, o % self.q);
        let at = |out: usize, tap: usize, ax: usize| {
            (out * self.stride[ax] + tap * self.dilation[ax]).checked_sub(self.pad[ax])
        };
        let (row, col) = (at(y, i, 0)?, at(x, j, 1)?);
        (row < self.h && col < self.w).then(|| (ch * self.h + row) * self.w + col)
    }

    /// `col[t, o] = img[source(t, o)]` (zero in the padding).
    fn im2col(&self, img: &[f32], col: &mut [f32]) {
        let outs = self.outs();
        for (i, v) in col.iter_mut().enumerate() {
            *v = self.source(i / outs, i % outs).map_or(0.0, |s| img[s]);
        }
    }

    /// `img[source(t, o)] += col[t, o]` over the whole matrix, `img` zeroed
    /// first.
    fn col2im(&self, col: &[f32], img: &mut [f32]) {
        img.fill(0.0);
        let outs = self.outs();
        for (i, v) in col.iter().enumerate() {
            if let Some(s) = self.source(i / outs, i % outs) {
                img[s] += v;
            }
        }
    }

    /// `y = α·conv(x, w)` (y is not read). The slices have
    /// [`Self::elems`]' sizes, `ws` the workspace's (in elements).
    pub fn forward(&self, alpha: f32, x: &[f32], w: &[f32], ws: &mut [f32], y: &mut [f32]) {
        let (taps, outs, img) = (self.taps(), self.outs(), self.c * self.h * self.w);
        for b in 0..self.n {
            self.im2col(&x[b * img..(b + 1) * img], ws);
            // y_b[k, outs] = w[k, taps] · col[taps, outs]
            gemm(
                (self.k, outs, taps),
                &mut y[b * self.k * outs..],
                (w, taps, 1),
                (ws, outs, 1),
                alpha,
                false,
            );
        }
    }

    /// `dx = α·convᵀ(dy, w)`.
    pub fn backward_data(&self, alpha: f32, dy: &[f32], w: &[f32], ws: &mut [f32], dx: &mut [f32]) {
        let (taps, outs, img) = (self.taps(), self.outs(), self.c * self.h * self.w);
        for b in 0..self.n {
            // col[taps, outs] = wᵀ[taps, k] · dy_b[k, outs]
            gemm(
                (taps, outs, self.k),
                ws,
                (w, 1, taps),
                (&dy[b * self.k * outs..], outs, 1),
                alpha,
                false,
            );
            self.col2im(ws, &mut dx[b * img..(b + 1) * img]);
        }
    }

    /// `dw = α·Σ_b dy_b · col(x_b)ᵀ`.
    pub fn backward_filter(
        &self,
        alpha: f32,
        x: &[f32],
        dy: &[f32],
        ws: &mut [f32],
        dw: &mut [f32],
    ) {
        let (taps, outs, img) = (self.taps(), self.outs(), self.c * self.h * self.w);
        for b in 0..self.n {
            self.im2col(&x[b * img..(b + 1) * img], ws);
            // dw[k, taps] (+)= dy_b[k, outs] · colᵀ[outs, taps]
            gemm(
                (self.k, taps, outs),
                dw,
                (&dy[b * self.k * outs..], outs, 1),
                (ws, 1, outs),
                alpha,
                b > 0,
            );
        }
    }
}

/// `dst[m, n] (+)= α · a[m, k] · b[k, n]`, row-major `dst` (row stride
/// `n`), operands given as (data, row stride, column stride).
fn gemm(
    (m, n, k): (usize, usize, usize),
    dst: &mut [f32],
    a: (&[f32], usize, usize),
    b: (&[f32], usize, usize),
    alpha: f32,
    accumulate: bool,
) {
    assert!(dst.len() >= m * n, "gemm: destination too short");
    // SAFETY: the operands span their slices (the caller's sizes).
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            n as isize,
            accumulate,
            a.0.as_ptr(),
            a.2 as isize,
            a.1 as isize,
            b.0.as_ptr(),
            b.2 as isize,
            b.1 as isize,
            1.0,
            alpha,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition, one output element at a time (the oracle).
    fn direct(c: &Conv, x: &[f32], w: &[f32]) -> Vec<f32> {
        let mut y = vec![0.0; c.elems()[2]];
        for (idx, v) in y.iter_mut().enumerate() {
            let (b, rest) = (idx / (c.k * c.p * c.q), idx % (c.k * c.p * c.q));
            let (k, o) = (rest / (c.p * c.q), rest % (c.p * c.q));
            for t in 0..c.taps() {
                if let Some(s) = c.source(t, o) {
                    *v += x[b * c.c * c.h * c.w + s] * w[k * c.taps() + t];
                }
            }
        }
        y
    }

    fn sample() -> Conv {
        Conv {
            n: 2,
            c: 3,
            h: 7,
            w: 6,
            k: 4,
            r: 3,
            s: 2,
            p: 4,
            q: 2,
            pad: [1, 0],
            stride: [2, 2],
            dilation: [1, 2],
            flip: false,
        }
    }

    fn ramp(n: usize, f: f32) -> Vec<f32> {
        (0..n).map(|i| ((i * 7 % 11) as f32 - 5.0) * f).collect()
    }

    #[test]
    fn forward_and_gradients_agree_with_the_definition_and_its_adjoint() {
        let c = sample();
        assert!(c.consistent());
        let [nx, nw, ny] = c.elems();
        let (x, w, dy) = (ramp(nx, 0.1), ramp(nw, 0.3), ramp(ny, 0.2));
        let mut ws = vec![0.0; c.workspace() / 4];
        let mut y = vec![f32::NAN; ny];
        c.forward(1.0, &x, &w, &mut ws, &mut y);
        let want = direct(&c, &x, &w);
        for (a, b) in y.iter().zip(&want) {
            assert!((a - b).abs() <= 1e-5 * (1.0 + b.abs()), "{a} vs {b}");
        }
        // <conv(x, w), dy> = <x, dx(dy, w)> = <w, dw(x, dy)>.
        let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(p, q)| (p * q) as f64).sum::<f64>();
        let mut dx = vec![f32::NAN; nx];
        c.backward_data(1.0, &dy, &w, &mut ws, &mut dx);
        let mut dw = vec![f32::NAN; nw];
        c.backward_filter(1.0, &x, &dy, &mut ws, &mut dw);
        let (a, b, d) = (dot(&y, &dy), dot(&x, &dx), dot(&w, &dw));
        assert!((a - b).abs() < 1e-3 && (a - d).abs() < 1e-3, "{a} {b} {d}");
    }

    #[test]
    fn a_true_convolution_flips_the_filter() {
        let c = Conv {
            flip: true,
            ..sample()
        };
        let [nx, nw, ny] = c.elems();
        let (x, w) = (ramp(nx, 0.1), ramp(nw, 0.3));
        let mut flipped = w.clone();
        for (i, v) in flipped.iter_mut().enumerate() {
            let (kc, i2, j) = (i / (c.r * c.s), i / c.s % c.r, i % c.s);
            *v = w[kc * c.r * c.s + (c.r - 1 - i2) * c.s + (c.s - 1 - j)];
        }
        let mut ws = vec![0.0; c.workspace() / 4];
        let mut y = vec![0.0; ny];
        c.forward(1.0, &x, &w, &mut ws, &mut y);
        let want = direct(&Conv { flip: false, ..c }, &x, &flipped);
        assert!(y.iter().zip(&want).all(|(a, b)| (a - b).abs() < 1e-4));
        assert!(!Conv { p: 5, ..c }.consistent());
    }
}
