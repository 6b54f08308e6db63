//! When a worker's share of an operator may run as the same operator on
//! local shapes (Tofu §5: "the local kernel call on local shapes").
//!
//! Takes the op's [`Binding`] (global shapes), the share's index box and the
//! regions its input and output buffers hold; says whether binding the spec
//! to the buffers' extents and running it (library GEMM/convolution kernels
//! included) computes exactly the share. That holds when
//!
//! 1. every index variable cut by the box (range ≠ its full range) appears
//!    only as a bare index `t[…, v, …]` (coefficient 1, offset 0), and each
//!    input dim it indexes holds exactly the box's range of `v`;
//! 2. every other input dim is held whole (local index = global index);
//! 3. the local binding gives every variable the box's length, every output
//!    the share's box, and every dim the expressions use its global value
//!    (so `x / N`, counts and positions keep their meaning).
//!
//! A `let` statement binds variables of its own, which the box leaves
//! whole: each takes the box of the variable that every read of its
//! temporary indexes it with, bare (`first[b, c, …]` read at the output's
//! cut `b` is computed on `b`'s range), so a temporary computed per batch
//! row runs locally on a batch-split tile (see [`let_boxes`]).
//!
//! Otherwise the share runs through the compiled evaluator with a window
//! (global coordinates), which is always exact but slower.

use tdl::{Attrs, Binding, Expr, ExprKind, Index, OpSpec, Stmt, TensorRef};

/// Whether the share runs on local shapes (see the module doc). `spec` and
/// `attrs` are the op's (unexpanded) spec and attributes, `b` their binding
/// to the global input shapes.
pub fn runs_locally(
    spec: &OpSpec,
    attrs: &Attrs,
    b: &Binding,
    var_box: &[(i64, i64)],
    inputs: &[Vec<(i64, i64)>],
    outputs: &[Vec<(i64, i64)>],
) -> bool {
    let full: Vec<(i64, i64)> = b
        .spec
        .vars
        .iter()
        .map(|v| (0, b.eval_dim(&v.range).unwrap_or(0).max(0)))
        .collect();
    if full.len() != var_box.len() {
        return false;
    }
    if full == var_box {
        // The whole op: only if the buffers are whole too.
        return inputs
            .iter()
            .zip(&b.input_shapes)
            .all(|(r, s)| r.iter().zip(s).all(|(&(l, h), &n)| l == 0 && h == n as i64));
    }
    let Some((var_box, root)) = let_boxes(&b.spec.stmts, var_box, &full) else {
        return false;
    };
    let var_box = &var_box[..];
    let cut: Vec<bool> = full.iter().zip(var_box).map(|(f, b)| f != b).collect();
    // Per input dim: the cut variable indexing it (bare), or None; false if a cut var is used otherwise.
    let mut dim_var: Vec<Vec<Option<Option<usize>>>> =
        b.input_shapes.iter().map(|s| vec![None; s.len()]).collect();
    let mut dims_used = Vec::new();
    let mut ok = true;
    for s in &b.spec.stmts {
        let mut w = Walk {
            cut: &cut,
            root: &root,
            dim_var: &mut dim_var,
            dims: &mut dims_used,
            ok: &mut ok,
        };
        w.walk(&s.body);
    }
    if !ok {
        return false;
    }
    // Rules 1 and 2: buffer regions.
    for (i, (dims, shape)) in dim_var.iter().zip(&b.input_shapes).enumerate() {
        for (d, v) in dims.iter().enumerate() {
            let want = match v {
                Some(Some(v)) => var_box[*v],
                _ => (0, shape[d] as i64),
            };
            if inputs[i][d] != want {
                return false;
            }
        }
    }
    // Rule 3: the local binding.
    let local_shapes: Vec<Vec<usize>> = inputs
        .iter()
        .map(|r| r.iter().map(|&(l, h)| (h - l).max(0) as usize).collect())
        .collect();
    let Ok(lb) = spec.bind(&local_shapes, attrs) else {
        return false;
    };
    if lb.spec.vars.len() != var_box.len() {
        return false;
    }
    for (v, &(l, h)) in lb.spec.vars.iter().zip(var_box) {
        if lb.eval_dim(&v.range) != Some(h - l) {
            return false;
        }
    }
    for (o, r) in outputs.iter().enumerate() {
        let ext: Vec<usize> = r.iter().map(|&(l, h)| (h - l).max(0) as usize).collect();
        if lb.output_shapes.get(o) != Some(&ext) {
            return false;
        }
    }
    dims_used.iter().all(|&d| lb.dims.get(d) == b.dims.get(d))
}

/// Each variable's box, and its root: the variable itself, or for a `let`
/// variable aliased to a cut one (see [`let_boxes`]) that one's root.
type LetBoxes = (Vec<(i64, i64)>, Vec<usize>);

/// `var_box` with each `let` variable given the box of the variable its
/// temporary's reads index it with, where every read uses the same bare
/// variable and that variable is cut; `None` when a cut variable indexes a
/// temporary's dim some reads do not index with it (the temporary's rows
/// and the reads' would not line up). Later statements go first, so a
/// temporary read by another takes that one's boxes.
fn let_boxes(stmts: &[Stmt], var_box: &[(i64, i64)], full: &[(i64, i64)]) -> Option<LetBoxes> {
    let mut bx = var_box.to_vec();
    let mut root: Vec<usize> = (0..bx.len()).collect();
    for (k, s) in stmts.iter().enumerate().rev() {
        if !matches!(s.target, TensorRef::Local(_)) {
            continue;
        }
        // Per read of the temporary: per dim, the bare variable indexing it.
        let mut reads: Vec<Vec<Option<usize>>> = Vec::new();
        for later in &stmts[k + 1..] {
            later.body.visit(&mut |e| {
                if let ExprKind::Read { tensor, indices } = &e.kind {
                    if *tensor == s.target {
                        reads.push(indices.iter().map(bare_var).collect());
                    }
                }
            });
        }
        for (d, lv) in s.vars.iter().enumerate() {
            let lv = lv.0 as usize;
            // By root: temporaries read with aliased variables line up.
            let vs: Vec<Option<usize>> = reads
                .iter()
                .map(|r| r.get(d).copied().flatten().map(|w| root[w]))
                .collect();
            let cut: Vec<usize> = vs
                .iter()
                .flatten()
                .copied()
                .filter(|&w| bx[w] != full[w])
                .collect();
            match (vs.first().copied().flatten(), cut.is_empty()) {
                (_, true) => {}
                (Some(v), false) if vs.iter().all(|&w| w == Some(v)) && bx[lv] == full[lv] => {
                    bx[lv] = bx[v];
                    root[lv] = root[v];
                }
                _ => return None,
            }
        }
    }
    Some((bx, root))
}

/// The variable an index is, bare.
fn bare_var(ix: &Index) -> Option<usize> {
    match ix {
        Index::Expr(x) => match x.kind {
            ExprKind::Var(v) => Some(v.0 as usize),
            _ => None,
        },
        _ => None,
    }
}

/// The walk of rule 1 over a statement's body: per input dim, the cut
/// variable indexing it (by its root: a `let` variable aliased to a cut
/// variable counts as that variable, see [`let_boxes`]).
struct Walk<'a> {
    cut: &'a [bool],
    root: &'a [usize],
    dim_var: &'a mut [Vec<Option<Option<usize>>>],
    dims: &'a mut Vec<usize>,
    ok: &'a mut bool,
}

impl Walk<'_> {
    fn walk(&mut self, e: &Expr) {
        match &e.kind {
            // A cut variable used as a value or in arithmetic.
            ExprKind::Var(v) if self.cut[v.0 as usize] => *self.ok = false,
            ExprKind::Dim(d) => self.dims.push(d.0 as usize),
            ExprKind::Read { tensor, indices } => {
                for (d, ix) in indices.iter().enumerate() {
                    let Index::Expr(x) = ix else { continue };
                    let TensorRef::Input(i) = tensor else {
                        if !matches!(x.kind, ExprKind::Var(_)) {
                            self.walk(x);
                        }
                        continue;
                    };
                    let slot = &mut self.dim_var[*i as usize][d];
                    if let ExprKind::Var(v) = x.kind {
                        let v = v.0 as usize;
                        let this = self.cut[v].then_some(self.root[v]);
                        match slot {
                            None => *slot = Some(this),
                            Some(prev) if *prev != this => *self.ok = false,
                            _ => {}
                        }
                    } else {
                        match slot {
                            None => *slot = Some(None),
                            Some(Some(_)) => *self.ok = false,
                            _ => {}
                        }
                        self.walk(x);
                    }
                }
            }
            _ => e.children().for_each(|c| self.walk(c)),
        }
    }
}
