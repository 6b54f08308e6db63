//! Opaque function calls (Tofu §3.1, Figure 4) in compiled kernels.
//!
//! Takes a call `f(t[i, :, :], …)[j, k]` of a registered opaque function
//! (`tdl::opaque`, e.g. `cholesky`); gives a closure that materialises the
//! argument slices, calls the function, and indexes its result. The result is
//! cached per call site and thread, keyed by the slices' fixed indices and
//! scalar arguments, so `l[b, i, j] = cholesky(m[b, :, :])[i, j]` factorises
//! each matrix once per thread rather than once per element.

use tdl::{Expr, ExprKind, Index, TensorRef};

use super::expr::Compiler;
use super::value::{row_major_strides, Bufs, Env, Fail, Src, ValFn, I, V};
use crate::ops::KernelError;

impl Compiler<'_> {
    /// Compile `name(args…)[index…]`.
    pub(super) fn opaque(
        &mut self,
        name: &str,
        args: &[Expr],
        index: &[Expr],
    ) -> Result<V, KernelError> {
        let info = tdl::opaque::lookup(name)
            .ok_or_else(|| self.unsupported(format!("unknown opaque function `{name}`")))?;
        /// An argument: a slice `t[i, :, :]` or a scalar.
        enum Arg {
            Slice {
                src: Src,
                tensor: TensorRef,
                padded: bool,
                shape: Vec<usize>,
                /// The region the buffer holds: origin and extent per dim.
                window: (Vec<i64>, Vec<usize>),
                /// Per dim: `None` for `:`, else the index.
                fixed: Vec<Option<I>>,
            },
            Scalar(ValFn),
        }
        let mut cargs = Vec::new();
        for a in args {
            match &a.kind {
                ExprKind::Read { tensor, indices }
                    if indices.iter().any(|i| matches!(i, Index::Full)) =>
                {
                    let mut fixed = Vec::new();
                    for ix in indices {
                        fixed.push(match ix {
                            Index::Full => None,
                            Index::Expr(x) => Some(self.int(x)?),
                            Index::Ellipsis(_) => {
                                return Err(self.unsupported("`...` in an opaque argument".into()))
                            }
                        });
                    }
                    let (o, e) = self.layouts.get(*tensor);
                    cargs.push(Arg::Slice {
                        src: self.src(*tensor)?,
                        tensor: *tensor,
                        padded: self.padded(*tensor),
                        shape: self.b.shape(*tensor).to_vec(),
                        window: (o.to_vec(), e.to_vec()),
                        fixed,
                    });
                }
                _ => cargs.push(Arg::Scalar(self.real(a)?.into_fn())),
            }
        }
        let idx: Vec<I> = index
            .iter()
            .map(|x| self.int(x))
            .collect::<Result<_, _>>()?;
        let slot = self.n_opaque;
        self.n_opaque += 1;
        let eval = info.eval;
        let name = name.to_string();
        Ok(V::Dyn(Box::new(move |e, b| {
            // The key: every fixed index and scalar argument.
            let mut key = Vec::new();
            let mut scalars = Vec::new();
            for a in &cargs {
                match a {
                    Arg::Slice { fixed, .. } => {
                        key.extend(fixed.iter().flatten().map(|i| i.eval(e, b)))
                    }
                    Arg::Scalar(f) => {
                        let x = f(e, b);
                        key.push(x.to_bits() as i64);
                        scalars.push(x);
                    }
                }
            }
            let hit = matches!(&e.opaque[slot], Some((k, _)) if *k == key);
            if !hit {
                let mut tensors = Vec::new();
                let mut scalars = scalars.into_iter();
                for a in &cargs {
                    match a {
                        Arg::Slice {
                            src,
                            tensor,
                            padded,
                            shape,
                            window,
                            fixed,
                        } => {
                            match materialise(e, b, *src, *tensor, *padded, shape, window, fixed) {
                                Some(t) => tensors.push(t),
                                None => return 0.0,
                            }
                        }
                        Arg::Scalar(_) => tensors
                            .push(tdl::Tensor::scalar(scalars.next().expect("one per scalar"))),
                    }
                }
                match eval(&tensors) {
                    Ok(r) => e.opaque[slot] = Some((key, r)),
                    Err(message) => {
                        e.fail(Fail::Opaque {
                            name: name.clone(),
                            message,
                        });
                        return 0.0;
                    }
                }
            }
            let at: Vec<i64> = idx.iter().map(|i| i.eval(e, b)).collect();
            let r = &e.opaque[slot].as_ref().expect("filled above").1;
            match r.get(&at) {
                Some(v) => v,
                None => {
                    let message = format!("result of shape {:?} indexed at {at:?}", r.shape);
                    e.fail(Fail::Opaque {
                        name: name.clone(),
                        message,
                    });
                    0.0
                }
            }
        })))
    }
}

/// Copy the slice `t[fixed…, :, …]` into an f64 tensor (`None` after
/// recording a failure). `window` is the region (origin, extent per dim) of
/// the tensor that the buffer holds.
#[allow(clippy::too_many_arguments)]
fn materialise(
    e: &mut Env,
    b: &Bufs<'_>,
    src: Src,
    tensor: TensorRef,
    padded: bool,
    shape: &[usize],
    window: &(Vec<i64>, Vec<usize>),
    fixed: &[Option<I>],
) -> Option<tdl::Tensor> {
    let (origin, extent) = window;
    let strides = row_major_strides(extent);
    let mut base: Vec<i64> = Vec::with_capacity(shape.len());
    for f in fixed {
        base.push(f.as_ref().map_or(0, |i| i.eval(e, b)));
    }
    let free: Vec<usize> = (0..shape.len()).filter(|&d| fixed[d].is_none()).collect();
    let out_shape: Vec<usize> = free.iter().map(|&d| shape[d]).collect();
    let mut out = tdl::Tensor::zeros(&out_shape);
    let mut idx = base;
    for k in 0..out.len() {
        // Decode k into the free dims (row-major).
        let mut r = k;
        for (j, &d) in free.iter().enumerate().rev() {
            idx[d] = (r % out_shape[j]) as i64;
            r /= out_shape[j];
        }
        let inside = idx
            .iter()
            .zip(shape)
            .all(|(&i, &n)| i >= 0 && (i as usize) < n);
        let held = idx
            .iter()
            .zip(origin.iter().zip(extent))
            .all(|(&i, (&o, &n))| i >= o && i < o + n as i64);
        if inside && held {
            let off: usize = idx
                .iter()
                .zip(&strides)
                .zip(origin)
                .map(|((&i, &s), &o)| (i - o) as usize * s)
                .sum();
            out.data[k] = b.get(src, off);
        } else if inside || !padded {
            // Outside the held region (a codegen bug) or an unpadded tensor.
            e.fail(Fail::OutOfBounds {
                tensor,
                index: idx.clone(),
            });
            return None;
        }
    }
    Some(out)
}
