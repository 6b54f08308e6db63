//! Where every buffer of one worker's share of an op lies ([`Layouts`]):
//! the layout both backends' kernels read and write with (the CPU's
//! compiled evaluator and the CUDA backend's generated kernels).
//!
//! Takes a bound op and a [`Window`]; gives per input the region the window
//! says its buffer holds, per output the box of its coordinate variables,
//! and per `let` temporary the hull of the elements later statements read
//! from it (computed backwards over the statements, from the affine forms
//! of the read indices, [`super::index_range`]; a temporary no one reads is
//! empty, a non-affine index needs the whole dim).

use tdl::{Binding, Expr, ExprKind, Index, TensorRef};

use super::index_range::IndexRanges;
use super::KernelError;
use crate::backend::Window;

/// Where each tensor's buffer sits in the tensor: `(origin, extent)` per
/// tensor, per dim the first global index it holds and how many (the whole
/// tensor unless a window says otherwise); row-major buffers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layouts {
    /// One per input.
    pub inputs: Vec<(Vec<i64>, Vec<usize>)>,
    /// One per output.
    pub outputs: Vec<(Vec<i64>, Vec<usize>)>,
    /// One per `let` temporary.
    pub locals: Vec<(Vec<i64>, Vec<usize>)>,
}

impl Layouts {
    /// Every buffer holds its whole tensor.
    pub fn whole(b: &Binding) -> Layouts {
        let w = |s: &Vec<usize>| (vec![0; s.len()], s.clone());
        Layouts {
            inputs: b.input_shapes.iter().map(w).collect(),
            outputs: b.output_shapes.iter().map(w).collect(),
            locals: b.local_shapes.iter().map(w).collect(),
        }
    }

    /// (origin, extent) of a tensor's buffer.
    pub fn get(&self, t: TensorRef) -> (&[i64], &[usize]) {
        let (o, e) = match t {
            TensorRef::Input(i) => &self.inputs[i as usize],
            TensorRef::Output(i) => &self.outputs[i as usize],
            TensorRef::Local(i) => &self.locals[i as usize],
        };
        (o, e)
    }
}

/// Where every buffer of a window's kernel lies (see the module doc).
///
/// Errors: [`KernelError::Unsupported`] for a window whose rank does not fit
/// the spec or a variable range that divides by zero.
pub fn window_layouts(b: &Binding, window: &Window) -> Result<Layouts, KernelError> {
    let spec = &b.spec;
    let unsupported = |what: String| KernelError::Unsupported {
        op: spec.name.clone(),
        what,
    };
    for v in &spec.vars {
        if b.eval_dim(&v.range).is_none() {
            return Err(unsupported(format!(
                "range of `{}` divides by zero",
                v.name
            )));
        }
    }
    if window.vars.len() != spec.vars.len()
        || window.inputs.len() != b.input_shapes.len()
        || window
            .inputs
            .iter()
            .zip(&b.input_shapes)
            .any(|(w, s)| w.len() != s.len())
    {
        return Err(unsupported(
            "a window whose rank does not fit the spec".into(),
        ));
    }
    let mut layouts = Layouts::whole(b);
    layouts.inputs = window.inputs.iter().map(|r| extent(r)).collect();
    for (o, lay) in layouts.outputs.iter_mut().enumerate() {
        if let Some(s) = spec
            .stmts
            .iter()
            .find(|s| s.target == TensorRef::Output(o as u32))
        {
            *lay = extent(
                &s.vars
                    .iter()
                    .map(|v| window.vars[v.0 as usize])
                    .collect::<Vec<_>>(),
            );
        }
    }
    let needed = local_hulls(b, window);
    for (l, lay) in layouts.locals.iter_mut().enumerate() {
        *lay = match &needed[l] {
            Some(r) => extent(r),
            None => (
                vec![0; b.local_shapes[l].len()],
                vec![0; b.local_shapes[l].len()],
            ),
        };
    }
    Ok(layouts)
}

/// Per `let` temporary, the hull of the elements the statements after its
/// own read from it within `window` (`None`: read by no one), computed
/// backwards: a temporary's statement runs over the hull its readers need.
fn local_hulls(b: &Binding, window: &Window) -> Vec<Option<Vec<(i64, i64)>>> {
    let spec = &b.spec;
    let mut needed: Vec<Option<Vec<(i64, i64)>>> = vec![None; b.local_shapes.len()];
    for s in spec.stmts.iter().rev() {
        let region: Vec<(i64, i64)> = match s.target {
            TensorRef::Local(l) => match &needed[l as usize] {
                Some(r) => r.clone(),
                None => continue,
            },
            _ => s.vars.iter().map(|v| window.vars[v.0 as usize]).collect(),
        };
        let mut boxes = IndexRanges {
            b,
            lo: window.vars.iter().map(|&(l, _)| l).collect(),
            ranges: window.vars.iter().map(|&(l, h)| (h - l).max(0)).collect(),
        };
        for (v, &(l, h)) in s.vars.iter().zip(&region) {
            boxes.lo[v.0 as usize] = l;
            boxes.ranges[v.0 as usize] = (h - l).max(0);
        }
        let mut reads = Vec::new();
        local_reads(&s.body, &mut reads);
        for (l, indices) in reads {
            let shape = &b.local_shapes[l];
            let Some(hull) = read_hull(&boxes, shape, indices) else {
                continue;
            };
            let cur = needed[l].get_or_insert_with(|| hull.clone());
            for (a, h) in cur.iter_mut().zip(&hull) {
                if h.1 > h.0 {
                    *a = if a.1 > a.0 {
                        (a.0.min(h.0), a.1.max(h.1))
                    } else {
                        *h
                    };
                }
            }
        }
    }
    needed
}

/// The box a read of a tensor of `shape` at `indices` touches over
/// `boxes`, clamped to the shape (a non-affine index: its whole dim);
/// `None` if the read never happens (an empty box) or its rank is wrong.
fn read_hull(
    boxes: &IndexRanges<'_>,
    shape: &[usize],
    indices: &[Index],
) -> Option<Vec<(i64, i64)>> {
    let mut hull = Vec::with_capacity(shape.len());
    for (d, ix) in indices.iter().enumerate() {
        let n = shape.get(d).copied().unwrap_or(0) as i64;
        hull.push(match ix {
            Index::Expr(x) => match boxes.affine(x) {
                Some(a) => {
                    let (lo, hi) = boxes.hull(&a)?;
                    (lo.clamp(0, n), (hi + 1).clamp(0, n))
                }
                None => (0, n),
            },
            _ => (0, n),
        });
    }
    (hull.len() == shape.len()).then_some(hull)
}

/// (origin, extent) of a region `[lo, hi)` per dim.
fn extent(r: &[(i64, i64)]) -> (Vec<i64>, Vec<usize>) {
    (
        r.iter().map(|&(l, _)| l).collect(),
        r.iter().map(|&(l, h)| (h - l).max(0) as usize).collect(),
    )
}

/// Every read of a `let` temporary in `e`: (local, its indices).
fn local_reads<'e>(e: &'e Expr, out: &mut Vec<(usize, &'e [Index])>) {
    if let ExprKind::Read {
        tensor: TensorRef::Local(l),
        indices,
    } = &e.kind
    {
        out.push((*l as usize, indices));
    }
    e.children().for_each(|c| local_reads(c, out));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A window of `n` in `[2, 5)` of a 10-element op: `t` is read at `n`
    /// and at `9 - n` (the hull of [2, 5) and [5, 8)), `u` at an index that
    /// is not affine (its whole dim), `v` by no one (empty).
    #[test]
    fn temporaries_hold_the_hull_of_what_the_window_reads() {
        let text = "op shift(x[N]) -> y[N] {
            let t[i] = 2.0 * x[i];
            let u[i] = x[i] + 1.0;
            let v[i] = x[i];
            y[n] = t[n] * t[N - 1 - n] + u[select(n > 3, n, 0)];
        }";
        let lib = tdl::Library::from_sources(&[("t.tdl".into(), text.into())]).unwrap();
        let b = lib
            .get("shift")
            .unwrap()
            .bind(&[vec![10]], &Default::default())
            .unwrap();
        let mut w = Window::whole(&b).unwrap();
        let n = b.spec.vars.iter().position(|v| v.name == "n").unwrap();
        w.vars[n] = (2, 5);
        let l = window_layouts(&b, &w).unwrap();
        assert_eq!(l.inputs, vec![(vec![0], vec![10])]);
        assert_eq!(l.outputs, vec![(vec![2], vec![3])]);
        assert_eq!(
            l.locals,
            vec![(vec![2], vec![6]), (vec![0], vec![10]), (vec![0], vec![0])]
        );
        w.vars.pop();
        assert!(matches!(
            window_layouts(&b, &w),
            Err(KernelError::Unsupported { .. })
        ));
    }
}
