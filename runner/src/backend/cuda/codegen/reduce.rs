//! Reductions to CUDA C: a loop inside the thread, or one block per target
//! element with a shared-memory tree where the reduction is long (split in
//! parts for very long ones). Accumulators are f32; a sum's serial loop is
//! compensated (the prelude's `ksum`/`kfin`), its tree and its combination
//! of split partials plain (pairwise, at most log2 of the threads deep).

use tdl::{Expr, ExprKind, Reducer};

use super::{reductions_in, Gen};
use crate::ops::KernelError;

impl Gen<'_> {
    /// Iterations of a reduction node times those of the longest reduction
    /// nested in its body (an estimate of the work per element).
    pub(super) fn work(&self, e: &Expr) -> u64 {
        let mut inner = 0u64;
        if let ExprKind::Reduce { body, .. } = &e.kind {
            let mut nested = Vec::new();
            reductions_in(body, &mut nested);
            inner = nested.iter().map(|r| self.work(r)).max().unwrap_or(0);
        }
        self.iterations(e).saturating_mul(inner.max(1))
    }

    /// Iterations of a reduction node over the window.
    pub(super) fn iterations(&self, e: &Expr) -> u64 {
        match &e.kind {
            ExprKind::Reduce { vars, .. } => vars
                .iter()
                .map(|v| {
                    let (l, h) = self.window.vars[v.0 as usize];
                    (h - l).max(0) as u64
                })
                .product(),
            _ => 0,
        }
    }

    /// Decode a statement's target index `r` (innermost dim fastest) into
    /// its variables.
    pub(super) fn decode(&mut self, vars: &[tdl::VarId], lo: &[i64], ext: &[usize]) {
        let ranges: Vec<(tdl::VarId, i64, usize)> = vars
            .iter()
            .enumerate()
            .map(|(d, v)| (*v, lo[d], ext[d]))
            .collect();
        self.unflatten("r", &ranges);
    }

    /// Declare each of `ranges`' variables (id, lo, extent) from the flat
    /// row-major index held in the `i64` variable `flat` (which must be
    /// below the extents' product), the last variable fastest. The
    /// outermost variable needs no modulo; where the product fits in 32
    /// bits the divisions are 32-bit (a 64-bit division is a long software
    /// sequence on the GPU, the cost of an elementwise kernel otherwise).
    pub(super) fn unflatten(&mut self, flat: &str, ranges: &[(tdl::VarId, i64, usize)]) {
        let total = ranges
            .iter()
            .try_fold(1u64, |a, r| a.checked_mul(r.2 as u64));
        let narrow = total.is_some_and(|n| n <= u32::MAX as u64);
        let q = format!("{flat}_q");
        let (ty, cast) = if narrow {
            ("unsigned", "(unsigned)")
        } else {
            ("i64", "")
        };
        if ranges.len() > 1 {
            self.line(&format!("{ty} {q} = {cast}{flat};"));
        }
        for (d, (v, lo, ext)) in ranges.iter().enumerate().rev() {
            let l = self.int_param(*lo);
            if d == 0 {
                let rest = if ranges.len() > 1 { &q } else { flat };
                self.line(&format!("i64 v{} = {l} + (i64){rest};", v.0));
                continue;
            }
            let e = self.int_param(*ext as i64);
            self.line(&format!(
                "i64 v{} = {l} + (i64)({q} % {cast}{e}); {q} /= {cast}{e};",
                v.0
            ));
        }
    }

    /// The identity and combination of a reducer, in C (f32).
    pub(super) fn combiner(reducer: Reducer) -> (&'static str, fn(&str, &str) -> String) {
        match reducer {
            Reducer::Sum => ("0.0f", |a, b| format!("{a} + {b}")),
            Reducer::Prod => ("1.0f", |a, b| format!("{a} * {b}")),
            Reducer::Max => ("(-1.0f/0.0f)", |a, b| format!("fmaxf({a}, {b})")),
            Reducer::Min => ("(1.0f/0.0f)", |a, b| format!("fminf({a}, {b})")),
        }
    }

    /// A thread's serial accumulator of `reducer`: its variable (declared
    /// at the identity), the compensation variable of a sum, and the
    /// statement adding a term `x`.
    fn accumulator(&mut self, reducer: Reducer) -> (String, Option<String>) {
        let (id, _) = Self::combiner(reducer);
        let acc = self.fresh("float", id);
        let comp = (reducer == Reducer::Sum).then(|| self.fresh("float", "0.0f"));
        (acc, comp)
    }

    /// The statement adding term `x` to an [`Self::accumulator`].
    fn accumulate(reducer: Reducer, acc: &str, comp: &Option<String>, x: &str) -> String {
        match comp {
            Some(c) => format!("ksum({acc}, {c}, {x});"),
            None => {
                let (_, comb) = Self::combiner(reducer);
                format!("{acc} = {};", comb(acc, x))
            }
        }
    }

    /// An accumulator's value: a sum's compensated total.
    fn total(acc: &str, comp: &Option<String>) -> String {
        match comp {
            Some(c) => format!("kfin({acc}, {c})"),
            None => acc.to_string(),
        }
    }

    /// The shared-memory tree over `acc` of every thread; every thread gets
    /// the result in the returned variable.
    pub(super) fn tree(&mut self, acc: &str, comb: fn(&str, &str) -> String) -> String {
        self.line(&format!("red[threadIdx.x] = {acc};"));
        self.line("__syncthreads();");
        self.line("for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {");
        self.indent += 1;
        let c = comb("red[threadIdx.x]", "red[threadIdx.x + s]");
        self.line(&format!("if (threadIdx.x < s) red[threadIdx.x] = {c};"));
        self.line("__syncthreads();");
        self.indent -= 1;
        self.line("}");
        let r = self.fresh("float", "red[0]");
        self.line("__syncthreads();");
        r
    }

    /// A split reduction's result: the block combines the `parts` partials
    /// the partials kernel left at `scr[base ..]`.
    pub(super) fn combine_parts(
        &mut self,
        e: &Expr,
        base: &str,
        parts: usize,
    ) -> Result<String, KernelError> {
        let ExprKind::Reduce { reducer, .. } = &e.kind else {
            return Err(self.unsupported("a split reduction of a non-reduction".into()));
        };
        let (id, comb) = Self::combiner(*reducer);
        let acc = self.fresh("float", id);
        self.line(&format!(
            "for (i64 j = threadIdx.x; j < {parts}; j += blockDim.x) {acc} = {};",
            comb(&acc, &format!("scr[{base} + j]"))
        ));
        Ok(self.tree(&acc, comb))
    }

    /// A reduction computed by the whole block: each thread combines a
    /// strided share of the flattened iterations, then a shared-memory tree
    /// combines the partials; every thread gets the result. With `parts`,
    /// only part `part` of the iterations (a strided share over `parts`
    /// blocks).
    pub(super) fn block_reduce(
        &mut self,
        e: &Expr,
        parts: Option<usize>,
    ) -> Result<String, KernelError> {
        let ExprKind::Reduce {
            reducer,
            vars,
            body,
        } = &e.kind
        else {
            return Err(self.unsupported("a block reduction of a non-reduction".into()));
        };
        let (_, comb) = Self::combiner(*reducer);
        let total = self.iterations(e);
        let n = self.int_param(total as i64);
        let (acc, comp) = self.accumulator(*reducer);
        let (start, step) = match parts {
            Some(p) => (
                "part * blockDim.x + threadIdx.x".to_string(),
                format!("(i64){p} * blockDim.x"),
            ),
            None => ("threadIdx.x".to_string(), "blockDim.x".to_string()),
        };
        self.line(&format!("for (i64 f = {start}; f < {n}; f += {step}) {{"));
        self.indent += 1;
        let ranges: Vec<(tdl::VarId, i64, usize)> = vars
            .iter()
            .map(|v| {
                let (lo, hi) = self.window.vars[v.0 as usize];
                (*v, lo, (hi - lo).max(0) as usize)
            })
            .collect();
        self.unflatten("f", &ranges);
        let x = self.real(body)?;
        self.line(&Self::accumulate(*reducer, &acc, &comp, &x));
        self.indent -= 1;
        self.line("}");
        let part = Self::total(&acc, &comp);
        Ok(self.tree(&part, comb))
    }

    pub(super) fn reduce(
        &mut self,
        reducer: Reducer,
        vars: &[tdl::VarId],
        body: &Expr,
    ) -> Result<String, KernelError> {
        let (acc, comp) = self.accumulator(reducer);
        let mut opened = 0;
        for v in vars {
            let (lo, hi) = self.window.vars[v.0 as usize];
            let (l, h) = (self.int_param(lo), self.int_param(hi));
            self.line(&format!("for (i64 v{0} = {l}; v{0} < {h}; ++v{0}) {{", v.0));
            self.indent += 1;
            opened += 1;
        }
        let x = self.real(body)?;
        self.line(&Self::accumulate(reducer, &acc, &comp, &x));
        for _ in 0..opened {
            self.indent -= 1;
            self.line("}");
        }
        Ok(Self::total(&acc, &comp))
    }
}

#[cfg(test)]
mod tests {
    use crate::backend::Window;
    use crate::ops::window_layouts;

    /// The generated source of `y[a, b] = x[a, 0] - x[a, b]` on `x` of `shape`.
    fn source(shape: Vec<usize>) -> String {
        let text = "op rowdiff(x[A, B]) -> y[A, B] { y[a, b] = x[a, 0] - x[a, b]; }";
        let lib = tdl::Library::from_sources(&[("t.tdl".into(), text.into())]).unwrap();
        let b = lib
            .get("rowdiff")
            .unwrap()
            .bind(&[shape], &Default::default())
            .unwrap();
        let w = Window::whole(&b).unwrap();
        let l = window_layouts(&b, &w).unwrap();
        super::super::generate(&b, &w, &l, Default::default())
            .unwrap()
            .source
    }

    /// The kernels of shipped op `name` on `shapes` with `attrs` (the
    /// whole op, default reduction options).
    fn shipped(
        name: &str,
        shapes: &[Vec<usize>],
        attrs: &[(&str, f64)],
    ) -> super::super::Generated {
        let lib = tdl::Library::shipped().unwrap();
        let attrs: tdl::Attrs = attrs
            .iter()
            .map(|&(k, v)| (k.to_string(), tdl::AttrValue::Float(v)))
            .collect();
        let b = lib.get(name).unwrap().bind(shapes, &attrs).unwrap();
        let w = Window::whole(&b).unwrap();
        let l = window_layouts(&b, &w).unwrap();
        super::super::generate(&b, &w, &l, Default::default()).unwrap()
    }

    #[test]
    fn arithmetic_is_f32_and_constants_of_attributes_are_folded_in_f64() {
        let shapes = vec![vec![4]; 4];
        let g = shipped("adam_update", &shapes, &[("lr", 0.01)]);
        assert!(!g.source.contains("double"), "{}", g.source);
        // 1 − beta2 (0.999 by default) computed in f64 and rounded once,
        // not from beta2 rounded to f32 first (1e-5 relative off).
        let folded = (1.0f64 - 0.999) as f32;
        assert_ne!(folded, 1.0f32 - 0.999f32);
        assert!(g.reals.contains(&folded), "{:?}", g.reals);
        // 1 − beta1^step (step 1 by default) likewise.
        assert!(g.reals.contains(&((1.0f64 - 0.9) as f32)), "{:?}", g.reals);
        // The values are parameters: another beta2, the same source.
        let h = shipped("adam_update", &shapes, &[("lr", 0.01), ("beta2", 0.99)]);
        assert_eq!(g.source, h.source);
        assert!(h.reals.contains(&((1.0f64 - 0.99) as f32)));
    }

    #[test]
    fn sums_are_compensated_and_block_partials_are_f32() {
        // Rows of 500: a block per row (`BLOCK_REDUCE_MIN`).
        let g = shipped("softmax", &[vec![3, 500]], &[]);
        assert!(
            g.source.contains("ksum(") && g.source.contains("kfin("),
            "{}",
            g.source
        );
        assert!(g.source.contains("__shared__ float red["), "{}", g.source);
    }

    #[test]
    fn indices_are_32_bit_unless_the_box_needs_64_and_the_same_element_is_read_directly() {
        let small = source(vec![300, 200]);
        assert!(small.contains("unsigned r_q = (unsigned)r;"), "{small}");
        assert!(
            small.contains("in0[t]"),
            "x[a, b] is the target's element: {small}"
        );
        let big = source(vec![1 << 17, 1 << 16]);
        assert!(
            big.contains("i64 r_q = r;") && !big.contains("unsigned"),
            "{big}"
        );
    }
}
