//! [`Window`]: one worker's share of an op instance in global coordinates
//! (codegen's local compute, Tofu §5), the unit every backend prepares a
//! windowed kernel for.
//!
//! Takes a bound op ([`tdl::Binding`]); gives the global index box of every
//! variable and the global region each input buffer holds.

use tdl::{Binding, TensorRef};

/// One worker's share of an op instance, in global coordinates (see the
/// module doc).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Window {
    /// Per index variable of the expanded spec (`VarId` order): the global
    /// values `[lo, hi)` it takes.
    pub vars: Vec<(i64, i64)>,
    /// Per input: the global region `[lo, hi)` per dim that its buffer holds
    /// (row-major, `hi − lo` elements per dim).
    pub inputs: Vec<Vec<(i64, i64)>>,
}

impl Window {
    /// The whole op: every variable over its full range, whole inputs.
    ///
    /// Errors: the name of a variable whose range divides by zero.
    pub fn whole(b: &Binding) -> Result<Window, String> {
        let ranges = b
            .spec
            .vars
            .iter()
            .map(|v| {
                b.eval_dim(&v.range)
                    .ok_or_else(|| format!("range of `{}` divides by zero", v.name))
            })
            .collect::<Result<Vec<i64>, String>>()?;
        Ok(Window {
            vars: ranges.iter().map(|&n| (0, n)).collect(),
            inputs: b
                .input_shapes
                .iter()
                .map(|s| s.iter().map(|&n| (0, n as i64)).collect())
                .collect(),
        })
    }

    /// The box of output `o` this window computes (global `[lo, hi)` per dim).
    pub fn output_region(&self, b: &Binding, o: usize) -> Vec<(i64, i64)> {
        b.spec
            .stmts
            .iter()
            .find(|s| s.target == TensorRef::Output(o as u32))
            .map(|s| s.vars.iter().map(|v| self.vars[v.0 as usize]).collect())
            .unwrap_or_default()
    }
}
