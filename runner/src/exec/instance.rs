//! The op instance behind a program's `Compute` instruction: its spec and
//! attributes, and either the local input shapes (a kernel on whole tiles,
//! `KernelMode::Local`) or the global input shapes with the window of the
//! iteration space it computes (`KernelMode::Window`). What a backend
//! prepares a kernel for, and what the static GPU estimate costs.

use program::{Instr, KernelMode, Program};
use tdl::{Attrs, OpSpec};

use super::ExecError;
use crate::backend::Window;

/// One `Compute` instruction's op instance (see the module doc).
pub struct Instance<'p> {
    /// The operator.
    pub spec: &'p OpSpec,
    /// Its attributes.
    pub attrs: &'p Attrs,
    /// Input shapes: local tiles (no window) or global tensors (window).
    pub shapes: Vec<Vec<usize>>,
    /// The window for a windowed kernel; `None` for a whole-tile one.
    pub window: Option<Window>,
}

/// The instance `ins` computes, `None` for an instruction that is not a
/// `Compute`.
///
/// Errors: [`ExecError::Invalid`] when it names a spec the program does not
/// carry.
pub fn instance<'p>(p: &'p Program, ins: &'p Instr) -> Result<Option<Instance<'p>>, ExecError> {
    let Instr::Compute {
        op,
        spec,
        attrs,
        shapes,
        var_box,
        inputs,
        mode,
        ..
    } = ins
    else {
        return Ok(None);
    };
    let spec = p.specs.get(*spec as usize).ok_or_else(|| {
        ExecError::Invalid(format!(
            "rank {}: op {} names spec {spec} of {}",
            p.rank,
            op.0,
            p.specs.len()
        ))
    })?;
    let regions: Vec<Vec<(i64, i64)>> = inputs
        .iter()
        .map(|&b| p.buffers[b as usize].region.0.clone())
        .collect();
    Ok(Some(match mode {
        KernelMode::Local => Instance {
            spec,
            attrs,
            shapes: regions
                .iter()
                .map(|r| r.iter().map(|&(l, h)| (h - l) as usize).collect())
                .collect(),
            window: None,
        },
        KernelMode::Window => Instance {
            spec,
            attrs,
            shapes: shapes.clone(),
            window: Some(Window {
                vars: var_box.clone(),
                inputs: regions,
            }),
        },
    }))
}
