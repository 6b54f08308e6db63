//! The 2-D max pooling's shape recogniser (`maxpool2d`, `maxpool2d_grad`):
//! a bound op → its [`PoolShape`], the description any pooling library
//! needs (the CUDA backend runs it on cuDNN), or `None` when the instance
//! is not one a library computes as the spec does: the output size must be
//! the pooling arithmetic's `O = (I + 2·pad − K) // stride + 1`, and every
//! window must hold an input element (`pad < kernel`, ONNX's rule, so
//! padding never wins).

use tdl::Binding;

use super::attrs::{inputs_named, int_attr, only_attrs};

/// One 2-D max pooling, NCHW, f32: `x[b, c, h, w] → y[b, c, oh, ow]`, the
/// window `kh × kw` at `(oh·stride_h − pad_h, ow·stride_w − pad_w)`.
/// The gradient (`grad`) takes `x`, `y`, `dy` and gives `dx`: each
/// window's `dy` goes to its first (row-major) element equal to `y`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolShape {
    /// The gradient (`maxpool2d_grad`), not the pooling.
    pub grad: bool,
    /// Images.
    pub b: usize,
    /// Channels.
    pub c: usize,
    /// Input height.
    pub h: usize,
    /// Input width.
    pub w: usize,
    /// Output height.
    pub oh: usize,
    /// Output width.
    pub ow: usize,
    /// Window height.
    pub kh: usize,
    /// Window width.
    pub kw: usize,
    /// (stride, pad) along the height.
    pub along_h: (usize, usize),
    /// (stride, pad) along the width.
    pub along_w: (usize, usize),
}

impl PoolShape {
    /// Elements of the inputs (x; or x, y, dy) and of the output.
    pub fn io(&self) -> (Vec<usize>, usize) {
        let x = self.b * self.c * self.h * self.w;
        let y = self.b * self.c * self.oh * self.ow;
        if self.grad {
            (vec![x, y, y], x)
        } else {
            (vec![x], y)
        }
    }
}

/// Output size along one axis where every window holds an input element.
fn out_size(i: usize, k: usize, (s, p): (usize, usize)) -> Option<usize> {
    (s > 0 && k > p && i + 2 * p >= k).then(|| (i + 2 * p - k) / s + 1)
}

/// The [`PoolShape`] of a bound `maxpool2d` or `maxpool2d_grad`, `None`
/// for any other op or an instance that does not fit (see the module doc).
pub fn pool_shape(b: &Binding) -> Option<PoolShape> {
    let grad = match b.spec.name.as_str() {
        "maxpool2d" if inputs_named(b, &["x"]) => false,
        "maxpool2d_grad" if inputs_named(b, &["x", "y", "dy"]) => true,
        _ => return None,
    };
    let known = [
        "kernel_h", "kernel_w", "stride_h", "stride_w", "pad_h", "pad_w",
    ];
    if !only_attrs(b, &known) || b.output_shapes.len() != 1 {
        return None;
    }
    let attr = |n: &str| usize::try_from(int_attr(b, n)?).ok();
    let four = |s: &[usize]| <[usize; 4]>::try_from(s).ok();
    let x = four(&b.input_shapes[0])?;
    let y = four(if grad {
        &b.input_shapes[1]
    } else {
        &b.output_shapes[0]
    })?;
    let s = PoolShape {
        grad,
        b: x[0],
        c: x[1],
        h: x[2],
        w: x[3],
        oh: y[2],
        ow: y[3],
        kh: attr("kernel_h")?,
        kw: attr("kernel_w")?,
        along_h: (attr("stride_h")?, attr("pad_h")?),
        along_w: (attr("stride_w")?, attr("pad_w")?),
    };
    let same = |t: &[usize]| t == y;
    let fits = y[..2] == x[..2]
        && (!grad || (same(&b.input_shapes[2]) && b.output_shapes[0] == x))
        && out_size(s.h, s.kh, s.along_h) == Some(s.oh)
        && out_size(s.w, s.kw, s.along_w) == Some(s.ow)
        && x.iter().chain(&y).all(|&n| n > 0)
        && s.b * s.c * s.h * s.w <= i32::MAX as usize;
    fits.then_some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bind(op: &str, shapes: &[Vec<usize>], attrs: &[(&str, i64)]) -> Binding {
        let lib = tdl::Library::shipped().expect("shipped specs");
        let mut a = tdl::Attrs::new();
        for (k, v) in attrs {
            a.insert(k.to_string(), tdl::AttrValue::Int(*v));
        }
        lib.get(op).expect(op).bind(shapes, &a).expect("binds")
    }

    #[test]
    fn a_padded_strided_max_pooling_and_its_gradient_are_recognised() {
        let at = [
            ("kernel_h", 3),
            ("kernel_w", 2),
            ("stride_h", 2),
            ("stride_w", 2),
            ("pad_h", 1),
        ];
        let f = pool_shape(&bind("maxpool2d", &[vec![2, 3, 7, 6]], &at)).unwrap();
        assert_eq!((f.grad, f.oh, f.ow), (false, 4, 3));
        assert_eq!(f.io(), (vec![2 * 3 * 42], 2 * 3 * 12));
        let y = vec![2, 3, 4, 3];
        let g = pool_shape(&bind(
            "maxpool2d_grad",
            &[vec![2, 3, 7, 6], y.clone(), y],
            &at,
        ));
        assert_eq!(g, Some(PoolShape { grad: true, ..f }));
        let other = bind(
            "maxpool2d_grad",
            &[vec![2, 3, 7, 6], vec![2, 3, 5, 3], vec![2, 3, 5, 3]],
            &at,
        );
        assert_eq!(
            pool_shape(&other),
            None,
            "a dy the arithmetic does not give"
        );
    }
}
