//! Ellipsis expansion: a rank-polymorphic spec (`x[..., N]`) → the spec for
//! one concrete number of ellipsis dims.
//!
//! Takes an [`OpSpec`] and the ellipsis rank r; gives an equal spec without any
//! `...`: each ellipsis dim becomes a [`DimInfo`] `_e{i}`, each `...` binder
//! becomes r variables ranging over those dims, and each `...` index becomes
//! those variables. Placeholder variables are dropped and the remaining
//! [`VarId`]s renumbered. Specs without an ellipsis come back unchanged.

use crate::ast::*;

impl OpSpec {
    /// Specialise to `rank` ellipsis dims (see the module doc).
    pub fn expand_ellipsis(&self, rank: usize) -> OpSpec {
        if !self.has_ellipsis() {
            return self.clone();
        }
        let mut op = self.clone();
        // Dims: first the ellipsis dims, bound by the first input that declares `...`.
        let (ell_input, ell_pos) = self
            .inputs
            .iter()
            .enumerate()
            .find_map(|(i, t)| {
                t.dims
                    .iter()
                    .position(|d| matches!(d, DimEntry::Ellipsis))
                    .map(|p| (i, p))
            })
            .unwrap_or((0, 0));
        let base = op.dims.len() as u32;
        for i in 0..rank {
            op.dims.push(DimInfo {
                name: format!("_e{i}"),
                input: ell_input as u32,
                axis: (ell_pos + i) as u32,
            });
        }
        // Fix the axes of named dims declared after an ellipsis.
        for d in op.dims.iter_mut().take(base as usize) {
            let t = &self.inputs[d.input as usize];
            if let Some(p) = t.dims.iter().position(|e| matches!(e, DimEntry::Ellipsis)) {
                if (d.axis as usize) > p {
                    d.axis = (d.axis as usize + rank - 1) as u32;
                }
            }
        }
        let ell_dims: Vec<DimEntry> = (0..rank)
            .map(|i| DimEntry::Dim(DimExpr::Dim(DimId(base + i as u32))))
            .collect();
        let expand_entries = |dims: &mut Vec<DimEntry>| {
            let mut out = Vec::new();
            for d in dims.drain(..) {
                match d {
                    DimEntry::Ellipsis => out.extend(ell_dims.iter().cloned()),
                    d => out.push(d),
                }
            }
            *dims = out;
        };
        for t in op.inputs.iter_mut() {
            expand_entries(&mut t.dims);
        }
        for t in op.outputs.iter_mut().chain(op.locals.iter_mut()) {
            expand_entries(&mut t.dims);
        }
        // Vars: keep the non-placeholders, then r fresh vars per placeholder.
        let mut map: Vec<Vec<VarId>> = Vec::new();
        let mut vars = Vec::new();
        for v in &self.vars {
            if !v.ellipsis_group {
                map.push(vec![VarId(vars.len() as u32)]);
                vars.push(v.clone());
            } else {
                map.push(Vec::new());
            }
        }
        for (old, v) in self.vars.iter().enumerate() {
            if v.ellipsis_group {
                for i in 0..rank {
                    map[old].push(VarId(vars.len() as u32));
                    vars.push(VarInfo {
                        name: format!("_e{i}"),
                        range: DimExpr::Dim(DimId(base + i as u32)),
                        reduction: v.reduction,
                        ellipsis: Some(i as u32),
                        ellipsis_group: false,
                        span: v.span,
                    });
                }
            }
        }
        op.vars = vars;
        let remap = |vs: &[VarId]| -> Vec<VarId> {
            vs.iter()
                .flat_map(|v| map[v.0 as usize].iter().copied())
                .collect()
        };
        for s in op.stmts.iter_mut() {
            s.vars = remap(&s.vars);
            rewrite(&mut s.body, &map);
        }
        op.ellipsis_rank = Some(rank as u32);
        op
    }
}

/// Replaces each variable by its first image under `map`, each `...` index
/// by the ellipsis variables, and each reduction's variables by their images.
fn rewrite(e: &mut Expr, map: &[Vec<VarId>]) {
    e.rewrite(&mut |x| {
        let span = x.span;
        match &mut x.kind {
            ExprKind::Var(v) => *v = map[v.0 as usize][0],
            ExprKind::Read { indices, .. } => {
                *indices = std::mem::take(indices)
                    .into_iter()
                    .flat_map(|ix| match ix {
                        Index::Ellipsis(p) => map[p.0 as usize]
                            .iter()
                            .map(|v| {
                                Index::Expr(Expr {
                                    kind: ExprKind::Var(*v),
                                    span,
                                    ty: Type::Int,
                                })
                            })
                            .collect(),
                        other => vec![other],
                    })
                    .collect();
            }
            ExprKind::Reduce { vars, .. } => {
                *vars = vars
                    .iter()
                    .flat_map(|v| map[v.0 as usize].iter().copied())
                    .collect();
            }
            _ => {}
        }
    });
}
