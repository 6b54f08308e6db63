//! The 2-D convolution's shape recogniser (`conv2d`, `conv2d_grad_x`,
//! `conv2d_grad_w`): a bound op → its [`ConvShape`], the description any
//! convolution library needs (the CUDA backend runs it on cuDNN), or `None`
//! when the instance is not one a library computes exactly as the spec does.
//!
//! A library's convolution fixes the output size by the convolution
//! arithmetic `O = (I + 2·pad − dilation·(K − 1) − 1) // stride + 1`; the
//! gradient specs accept any `dy` size (windows past the input read
//! zeros), so an instance whose `dy` disagrees with that arithmetic is not
//! recognised (the spec's generated kernels run it).

use tdl::Binding;

use super::attrs::{inputs_named, int_attr, only_attrs};

/// Which of the three convolution computations an instance is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConvKind {
    /// `y = conv(x, w)` (`conv2d`).
    Forward,
    /// `dx` from `dy` and `w` (`conv2d_grad_x`).
    GradX,
    /// `dw` from `x` and `dy` (`conv2d_grad_w`).
    GradW,
}

/// One 2-D convolution, NCHW, f32, no groups: input `x[b, ci, h, w]`,
/// filter `w[co, ci, kh, kw]`, output `y[b, co, oh, ow]` with
/// `y[b, co, i, j] = Σ_{ci, p, q} x[b, ci, i·stride_h + p·dilation_h − pad_h,
/// j·stride_w + q·dilation_w − pad_w] · w[co, ci, p, q]` (zero outside the
/// input), and `oh`, `ow` given by the convolution arithmetic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvShape {
    /// Which computation.
    pub kind: ConvKind,
    /// Images.
    pub b: usize,
    /// Input channels.
    pub ci: usize,
    /// Input height.
    pub h: usize,
    /// Input width.
    pub w: usize,
    /// Output channels.
    pub co: usize,
    /// Kernel height.
    pub kh: usize,
    /// Kernel width.
    pub kw: usize,
    /// Output height.
    pub oh: usize,
    /// Output width.
    pub ow: usize,
    /// (stride, pad, dilation) along the height.
    pub along_h: (usize, usize, usize),
    /// (stride, pad, dilation) along the width.
    pub along_w: (usize, usize, usize),
}

impl ConvShape {
    /// Elements of `x`, `w`, `y`.
    pub fn elems(&self) -> [usize; 3] {
        [
            self.b * self.ci * self.h * self.w,
            self.co * self.ci * self.kh * self.kw,
            self.b * self.co * self.oh * self.ow,
        ]
    }

    /// Elements of the instance's inputs and output, in the op's order
    /// (forward: x, w → y; grad x: dy, w → dx; grad w: x, dy → dw).
    pub fn io(&self) -> ([usize; 2], usize) {
        let [x, w, y] = self.elems();
        match self.kind {
            ConvKind::Forward => ([x, w], y),
            ConvKind::GradX => ([y, w], x),
            ConvKind::GradW => ([x, y], w),
        }
    }

    /// Multiply-adds of the computation (the same for all three kinds).
    pub fn macs(&self) -> usize {
        self.b * self.co * self.oh * self.ow * self.ci * self.kh * self.kw
    }
}

/// Output size along one axis, `None` where it is not positive.
fn out_size(i: usize, k: usize, (s, p, d): (usize, usize, usize)) -> Option<usize> {
    let span = d * (k.checked_sub(1)?) + 1;
    let padded = i + 2 * p;
    (s > 0 && padded >= span).then(|| (padded - span) / s + 1)
}

/// The [`ConvShape`] of a bound `conv2d`, `conv2d_grad_x` or
/// `conv2d_grad_w`, `None` for any other op or an instance that does not
/// fit (see the module doc).
pub fn conv_shape(b: &Binding) -> Option<ConvShape> {
    let (kind, names, extra) = match b.spec.name.as_str() {
        "conv2d" => (ConvKind::Forward, ["x", "w"], None),
        "conv2d_grad_x" => (ConvKind::GradX, ["dy", "w"], Some(["in_h", "in_w"])),
        "conv2d_grad_w" => (ConvKind::GradW, ["x", "dy"], Some(["kernel_h", "kernel_w"])),
        _ => return None,
    };
    let mut known = vec![
        "stride_h",
        "stride_w",
        "pad_h",
        "pad_w",
        "dilation_h",
        "dilation_w",
    ];
    known.extend(extra.iter().flatten());
    if !inputs_named(b, &names) || !only_attrs(b, &known) || b.output_shapes.len() != 1 {
        return None;
    }
    let attr = |n: &str| usize::try_from(int_attr(b, n).unwrap_or(0)).ok();
    let along_h = (attr("stride_h")?, attr("pad_h")?, attr("dilation_h")?);
    let along_w = (attr("stride_w")?, attr("pad_w")?, attr("dilation_w")?);
    let four = |s: &[usize]| <[usize; 4]>::try_from(s).ok();
    let (a, c) = (four(&b.input_shapes[0])?, four(&b.input_shapes[1])?);
    let out = four(&b.output_shapes[0])?;
    // (x, w, y) in NCHW / KCRS.
    let (x, w, y) = match kind {
        ConvKind::Forward => (a, c, out),
        ConvKind::GradX => (out, c, a),
        ConvKind::GradW => (a, out, c),
    };
    let s = ConvShape {
        kind,
        b: x[0],
        ci: x[1],
        h: x[2],
        w: x[3],
        co: w[0],
        kh: w[2],
        kw: w[3],
        oh: y[2],
        ow: y[3],
        along_h,
        along_w,
    };
    let fits = w[1] == s.ci
        && y[0] == s.b
        && y[1] == s.co
        && out_size(s.h, s.kh, along_h) == Some(s.oh)
        && out_size(s.w, s.kw, along_w) == Some(s.ow)
        && s.elems().iter().all(|&n| n > 0 && n <= i32::MAX as usize);
    fits.then_some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bind(op: &str, shapes: &[Vec<usize>], attrs: &[(&str, i64)]) -> Binding {
        let lib = tdl::Library::shipped().expect("shipped specs");
        let spec = lib.get(op).expect(op);
        let mut a = tdl::Attrs::new();
        for (k, v) in attrs {
            a.insert(k.to_string(), tdl::AttrValue::Int(*v));
        }
        spec.bind(shapes, &a).expect("binds")
    }

    #[test]
    fn a_strided_padded_convolution_and_its_gradients_are_recognised() {
        let at = [("stride_h", 2), ("stride_w", 1), ("pad_h", 1), ("pad_w", 0)];
        let f = conv_shape(&bind("conv2d", &[vec![2, 3, 7, 5], vec![4, 3, 3, 2]], &at)).unwrap();
        assert_eq!((f.kind, f.oh, f.ow), (ConvKind::Forward, 4, 4));
        assert_eq!(f.io(), ([2 * 3 * 35, 4 * 3 * 6], 2 * 4 * 16));
        let mut gx = at.to_vec();
        gx.extend([("in_h", 7), ("in_w", 5)]);
        let g = conv_shape(&bind(
            "conv2d_grad_x",
            &[vec![2, 4, 4, 4], vec![4, 3, 3, 2]],
            &gx,
        ));
        assert_eq!(
            g,
            Some(ConvShape {
                kind: ConvKind::GradX,
                ..f
            })
        );
        let mut gw = at.to_vec();
        gw.extend([("kernel_h", 3), ("kernel_w", 2)]);
        let g = conv_shape(&bind(
            "conv2d_grad_w",
            &[vec![2, 3, 7, 5], vec![2, 4, 4, 4]],
            &gw,
        ));
        assert_eq!(
            g,
            Some(ConvShape {
                kind: ConvKind::GradW,
                ..f
            })
        );
    }

    #[test]
    fn a_dy_larger_than_the_convolution_arithmetic_is_left_to_the_spec() {
        // dy of 5 rows where the arithmetic gives 4: the spec reads zeros
        // past the input, a library would refuse the shapes.
        let at = [("stride_h", 2), ("pad_h", 1), ("in_h", 7), ("in_w", 5)];
        let b = bind("conv2d_grad_x", &[vec![2, 4, 5, 4], vec![4, 3, 3, 2]], &at);
        assert_eq!(conv_shape(&b), None);
        let g = bind(
            "conv2d_group",
            &[vec![2, 4, 5, 5], vec![4, 2, 3, 3]],
            &[("groups", 2)],
        );
        assert_eq!(
            conv_shape(&g),
            None,
            "grouped convolutions are not recognised"
        );
    }
}
