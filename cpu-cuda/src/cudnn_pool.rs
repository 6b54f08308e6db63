//! cuDNN's 2-D max pooling in the stand-in (`cudnn*Pooling*`, the C
//! signatures of cuDNN 9's `cudnn_ops.h`): pooling descriptors (max modes
//! only, any NaN option), `cudnnPoolingForward` and `cudnnPoolingBackward`
//! on 4-D NCHW f32 tensors ([`crate::cudnn`]'s descriptors), checked (the
//! output size by the pooling arithmetic, `pad < window`, every operand
//! inside one device allocation, β = 0) and queued on the handle's stream.
//! The backward pass gives each window's `dy` to its first (row-major)
//! in-bounds element equal to the window's `y`: the spec's rule (`maxpool2d_grad`);
//! what cuDNN does on ties is not documented, so a GPU may differ there.

use std::ffi::{c_int, c_void};

use crate::cudnn::{descriptors, get, launch, Dims, Status, BAD_PARAM, NOT_SUPPORTED, SUCCESS};

/// A pooling descriptor once set: window, pads, strides (height, width).
#[derive(Default)]
struct PoolDesc(Option<[[usize; 2]; 3]>);

/// One max pooling: `x[n, c, h, w] → y[n, c, p, q]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Pool {
    planes: usize,
    h: usize,
    w: usize,
    p: usize,
    q: usize,
    window: [usize; 2],
    pad: [usize; 2],
    stride: [usize; 2],
}

impl Pool {
    /// The in-bounds input offsets (within one plane) of output `o`'s
    /// window, row-major.
    fn window(&self, o: usize) -> impl Iterator<Item = usize> + '_ {
        let (oy, ox) = (o / self.q, o % self.q);
        (0..self.window[0]).flat_map(move |i| {
            (0..self.window[1]).filter_map(move |j| {
                let y = (oy * self.stride[0] + i).checked_sub(self.pad[0])?;
                let x = (ox * self.stride[1] + j).checked_sub(self.pad[1])?;
                (y < self.h && x < self.w).then_some(y * self.w + x)
            })
        })
    }

    fn forward(&self, x: &[f32], y: &mut [f32]) {
        let (pin, pout) = (self.h * self.w, self.p * self.q);
        for (i, v) in y.iter_mut().enumerate() {
            let plane = &x[i / pout * pin..][..pin];
            *v = self
                .window(i % pout)
                .map(|s| plane[s])
                .fold(
                    f32::NEG_INFINITY,
                    |m, a| if a > m || a.is_nan() { a } else { m },
                );
        }
    }

    fn backward(&self, x: &[f32], y: &[f32], dy: &[f32], dx: &mut [f32]) {
        dx.fill(0.0);
        let (pin, pout) = (self.h * self.w, self.p * self.q);
        for i in 0..y.len() {
            let base = i / pout * pin;
            if let Some(s) = self.window(i % pout).find(|&s| x[base + s] == y[i]) {
                dx[base + s] += dy[i];
            }
        }
    }
}

descriptors! {
    cudnnCreatePoolingDescriptor, cudnnDestroyPoolingDescriptor, PoolDesc;
}

#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "C" fn cudnnSetPooling2dDescriptor(
    d: *mut c_void,
    mode: c_int,
    nan: c_int,
    wh: c_int,
    ww: c_int,
    ph: c_int,
    pw: c_int,
    sh: c_int,
    sw: c_int,
) -> Status {
    let Some(d) = get::<PoolDesc>(d) else {
        return BAD_PARAM;
    };
    // CUDNN_POOLING_MAX (0) or CUDNN_POOLING_MAX_DETERMINISTIC (3).
    if mode != 0 && mode != 3 {
        return NOT_SUPPORTED;
    }
    let v = [wh, ww, ph, pw, sh, sw].map(|x| usize::try_from(x).ok());
    let [Some(wh), Some(ww), Some(ph), Some(pw), Some(sh), Some(sw)] = v else {
        return BAD_PARAM;
    };
    if !(0..=1).contains(&nan) || wh == 0 || ww == 0 || sh == 0 || sw == 0 {
        return BAD_PARAM;
    }
    d.0 = Some([[wh, ww], [ph, pw], [sh, sw]]);
    SUCCESS
}

/// The pooling the descriptors describe, if set and consistent.
fn pool_of(pd: *mut c_void, x: *mut c_void, y: *mut c_void) -> Option<Pool> {
    let [window, pad, stride] = get::<PoolDesc>(pd)?.0?;
    let [n, c, h, w] = get::<Dims>(x)?.0?;
    let [n2, c2, p, q] = get::<Dims>(y)?.0?;
    let out = |i: usize, ax: usize| {
        (window[ax] > pad[ax] && i + 2 * pad[ax] >= window[ax])
            .then(|| (i + 2 * pad[ax] - window[ax]) / stride[ax] + 1)
    };
    let fits = n2 == n && c2 == c && out(h, 0) == Some(p) && out(w, 1) == Some(q);
    fits.then_some(Pool {
        planes: n * c,
        h,
        w,
        p,
        q,
        window,
        pad,
        stride,
    })
}

/// Check and queue a pooling (`grad`: its backward pass) on `h`'s stream.
/// `ptrs`: x, y, dy (0 when forward), out (y, or dx).
fn queue(h: *mut c_void, pool: Pool, beta: *const c_void, ptrs: [u64; 4], grad: bool) -> Status {
    // SAFETY: a host pointer to a float (f32 data), checked non-null.
    if beta.is_null() || unsafe { *(beta as *const f32) } != 0.0 {
        return NOT_SUPPORTED;
    }
    let (nx, ny) = (pool.planes * pool.h * pool.w, pool.planes * pool.p * pool.q);
    let spans = if grad {
        [(ptrs[0], nx), (ptrs[1], ny), (ptrs[2], ny), (ptrs[3], nx)]
    } else {
        [(ptrs[0], nx), (ptrs[3], ny), (ptrs[3], ny), (ptrs[3], ny)]
    };
    let what = if grad {
        "cudnnPoolingBackward"
    } else {
        "cudnnPoolingForward"
    };
    launch(h, what, &spans.map(|(p, n)| (p, n * 4)), move |m| {
        if grad {
            let (x, y, dy) = (m.ro(ptrs[0], nx), m.ro(ptrs[1], ny), m.ro(ptrs[2], ny));
            pool.backward(x, y, dy, m.rw(ptrs[3], nx));
        } else {
            pool.forward(m.ro(ptrs[0], nx), m.rw(ptrs[3], ny));
        }
    })
}

#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "C" fn cudnnPoolingForward(
    h: *mut c_void,
    pd: *mut c_void,
    _alpha: *const c_void,
    xd: *mut c_void,
    x: u64,
    beta: *const c_void,
    yd: *mut c_void,
    y: u64,
) -> Status {
    match pool_of(pd, xd, yd) {
        Some(p) => queue(h, p, beta, [x, 0, 0, y], false),
        None => BAD_PARAM,
    }
}

#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "C" fn cudnnPoolingBackward(
    h: *mut c_void,
    pd: *mut c_void,
    _alpha: *const c_void,
    yd: *mut c_void,
    y: u64,
    dyd: *mut c_void,
    dy: u64,
    xd: *mut c_void,
    x: u64,
    beta: *const c_void,
    dxd: *mut c_void,
    dx: u64,
) -> Status {
    let same = |a: *mut c_void, b: *mut c_void| {
        get::<Dims>(a).and_then(|d| d.0) == get::<Dims>(b).and_then(|d| d.0)
    };
    match pool_of(pd, xd, yd) {
        Some(p) if same(yd, dyd) && same(xd, dxd) => queue(h, p, beta, [x, y, dy, dx], true),
        _ => BAD_PARAM,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gradient_goes_to_the_first_maximum_of_each_window() {
        // One 3×4 plane, 2×2 windows, stride 2, padding 1 on the width.
        let pool = Pool {
            planes: 1,
            h: 3,
            w: 4,
            p: 1,
            q: 3,
            window: [2, 2],
            pad: [0, 1],
            stride: [2, 2],
        };
        let x = [1.0, 5.0, 5.0, 0.0, 2.0, 5.0, 3.0, 7.0, 9.0, 9.0, 9.0, 9.0];
        let mut y = [0.0; 3];
        pool.forward(&x, &mut y);
        assert_eq!(y, [2.0, 5.0, 7.0], "padding never wins");
        let mut dx = [f32::NAN; 12];
        pool.backward(&x, &y, &[1.0, 10.0, 100.0], &mut dx);
        // Window 1 holds 5.0 at (0,1), (0,2) and (1,1): the first wins.
        let want = [
            0.0, 10.0, 0.0, 0.0, 1.0, 0.0, 0.0, 100.0, 0.0, 0.0, 0.0, 0.0,
        ];
        assert_eq!(dx, want);
    }
}
