//! `--batch B` on an export whose batch is static (torch.onnx's default
//! bakes the example input's batch into the graph input shapes).
//!
//! Takes the model's graph inputs and the importer [`Options`]; gives the
//! export's own batch ([`export_batch`]), each input's dims with the batch
//! dim set to `B` ([`rebatch`]: the symbolic dim named like `batch`, else
//! axis 0, replaced where it holds the export's batch), and a
//! [`BatchChange`] that rewrites the constant targets the export baked the
//! batch into: a `Reshape` whose target's leading entry is the export's
//! batch and whose input carries the batch in axis 0 (every other axis as
//! at the export's batch, checked against a probe import at that batch)
//! gets its leading entry set to `B`; a leading entry equal to the export's
//! batch that cannot be shown to be the batch is an error naming the node
//! and the fix (re-export with dynamic axes). Any other error of a
//! re-batched import gets the same fix appended ([`BatchChange::explain`]).

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use onnx_protobuf::{GraphProto, NodeProto};

use crate::dims::ModelDim;
use crate::error::OnnxError;
use crate::import::Options;
use crate::import_inputs::input_type;
use crate::lower::{Kind, Known, Lower, Src};
use crate::tensor::Data;

/// The fix for a batch baked into the export, for messages.
const REEXPORT: &str = "re-export the model with a dynamic batch (torch.onnx.export(…, dynamic_axes={'INPUT': {0: 'batch'}}) or dynamo's dynamic_shapes) or plan it at its own batch";

/// The batch axis of an input's dims: the symbolic dim whose name holds
/// `batch` (any case), else axis 0; `None` for a scalar.
pub fn batch_axis(dims: &[ModelDim]) -> Option<usize> {
    let named = dims
        .iter()
        .position(|d| matches!(d, Err(Some(n)) if n.to_lowercase().contains("batch")));
    named.or((!dims.is_empty()).then_some(0))
}

/// The graph inputs `--batch` re-batches: not initializers, not fixed
/// (`--input-value`) nor shaped by the caller (`--input-shape`), with their dims.
fn batched_inputs<'g>(
    graph: &'g GraphProto,
    opts: &'g Options,
) -> impl Iterator<Item = (&'g str, Vec<ModelDim>)> + 'g {
    let inits: HashSet<&str> = graph.initializer.iter().map(|t| t.name.as_str()).collect();
    graph.input.iter().filter_map(move |vi| {
        let n = vi.name.as_str();
        let skip = inits.contains(n)
            || opts.fixed_inputs.contains_key(n)
            || opts.input_shapes.contains_key(n);
        (!skip).then(|| Some((n, input_type(vi).ok()?.1))).flatten()
    })
}

/// The export's static batch when `--batch` asks for another: the static
/// size of the batch axis ([`batch_axis`]) of the first re-batched input;
/// `None` without `--batch`, when that input's batch dim is symbolic (the
/// dynamic dims take `--batch` as they are), or when it already is `--batch`.
pub fn export_batch(graph: &GraphProto, opts: &Options) -> Option<usize> {
    let new = opts.dims.batch?;
    let (_, dims) = batched_inputs(graph, opts).find(|(_, d)| !d.is_empty())?;
    let old = *dims[batch_axis(&dims)?].as_ref().ok()?;
    (old != new).then_some(old)
}

/// `dims` with the batch axis set to `new` where it is the static `old`
/// (an input whose batch axis holds another size is not batched: kept).
pub fn rebatch(dims: &[ModelDim], old: usize, new: usize) -> Vec<ModelDim> {
    let mut out = dims.to_vec();
    if let Some(a) = batch_axis(dims) {
        if out[a] == Ok(old) {
            out[a] = Ok(new);
        }
    }
    out
}

/// A re-batched import: the export's batch, the new one, and every value's
/// shape in a probe import at the export's batch.
#[derive(Clone, Debug)]
pub struct BatchChange {
    /// The export's static batch.
    pub old: usize,
    /// `--batch`.
    pub new: usize,
    /// ONNX value name → shape at the export's batch.
    pub probe: BTreeMap<String, Vec<usize>>,
}

impl BatchChange {
    /// The change `opts` asks of `model`, with its probe import (inference,
    /// at the export's batch); `None` when nothing changes.
    ///
    /// Errors: the probe import's (the model does not import at its own batch).
    pub fn of(
        model: &crate::proto::Model,
        path: &Path,
        lib: &tdl::Library,
        opts: &Options,
    ) -> Result<Option<Self>, OnnxError> {
        let graph = model
            .proto
            .graph
            .as_ref()
            .expect("checked by proto::decode");
        let (Some(old), Some(new)) = (export_batch(graph, opts), opts.dims.batch) else {
            return Ok(None);
        };
        let mut at_old = opts.clone();
        at_old.training = false;
        at_old.dims.batch = Some(old);
        let probe = crate::import::import(model, path, lib, &at_old)?;
        Ok(Some(BatchChange {
            old,
            new,
            probe: probe.summary.value_shapes,
        }))
    }

    /// `np` with its target rewritten when it is a `Reshape` whose constant
    /// target leads with the export's batch and whose data input carries the
    /// batch in axis 0 (see the module doc); `None` when it stays as it is.
    /// The new target is defined in `l` as `<target>.batch<new>`.
    ///
    /// Errors: a message for the node's error when the leading entry equals
    /// the export's batch but the input's axis 0 cannot be shown to be the batch.
    pub fn reshape(&self, l: &mut Lower, np: &NodeProto) -> Result<Option<NodeProto>, String> {
        if np.op_type != "Reshape" || np.input.len() < 2 {
            return Ok(None);
        }
        let (data, target) = (&np.input[0], &np.input[1]);
        let Some(t) = l.arg_data(target) else {
            return Ok(None);
        };
        if t.values.first() != Some(&(self.old as f64)) {
            return Ok(None);
        }
        let now = l.shape_of(data).unwrap_or_default();
        let before = self.probe.get(data);
        if before == Some(&now) {
            return Ok(None);
        }
        let carries = before.is_some_and(|b| {
            b.len() == now.len()
                && b.first() == Some(&self.old)
                && now.first() == Some(&self.new)
                && b[1..] == now[1..]
        });
        if !carries {
            return Err(format!(
                "its target `{target}` {:?} leads with the export's batch {}, but its input `{data}` {now:?} (at the export's batch {}) does not carry the batch in axis 0, so --batch {} cannot rewrite the target safely; {REEXPORT}",
                t.values.iter().map(|v| *v as i64).collect::<Vec<_>>(),
                self.old,
                before.map_or("unknown".to_string(), |b| format!("{b:?}")),
                self.new,
            ));
        }
        let mut values = t.values.clone();
        values[0] = self.new as f64;
        let name = format!("{target}.batch{}", self.new);
        let data = Data {
            elem: t.elem,
            shape: t.shape.clone(),
            values,
        };
        l.define_known(
            &name,
            Known {
                elem: t.elem,
                shape: t.shape.clone(),
                src: Src::Dense(data),
                kind: Kind::Constant,
            },
        );
        let mut out = np.clone();
        out.input[1] = name;
        Ok(Some(out))
    }

    /// `e` with the fix appended: a node or shape error of a re-batched
    /// import may come from a constant that bakes the export's batch.
    pub fn explain(&self, e: OnnxError) -> OnnxError {
        let note = format!(
            " (--batch {} replaced the export's static batch {}; a constant of the export that holds the batch cannot follow: {REEXPORT})",
            self.new, self.old
        );
        match e {
            OnnxError::Node {
                path,
                node,
                op_type,
                opset,
                reason,
            } if !reason.contains(REEXPORT) => OnnxError::Node {
                path,
                node,
                op_type,
                opset,
                reason: reason + &note,
            },
            OnnxError::Graph {
                path,
                context,
                source,
            } => OnnxError::Graph {
                path,
                context: context + &note,
                source,
            },
            e => e,
        }
    }
}

/// Node `np` as the import lowers it under `change` (none: as it is): a
/// `Reshape` of a baked batch rewritten ([`BatchChange::reshape`]). `at`:
/// the node's display name, its opset and the model's path, for the error.
///
/// Errors: [`OnnxError::Node`] for a target that cannot be rewritten safely.
pub(crate) fn node(
    change: Option<&BatchChange>,
    l: &mut Lower,
    np: &NodeProto,
    at: (&str, i64, &Path),
) -> Result<Option<NodeProto>, OnnxError> {
    let Some(c) = change else {
        return Ok(None);
    };
    if np
        .input
        .iter()
        .any(|x| !x.is_empty() && !l.values.contains_key(x))
    {
        return Ok(None);
    }
    c.reshape(l, np).map_err(|reason| OnnxError::Node {
        path: at.2.to_path_buf(),
        node: at.0.to_string(),
        op_type: np.op_type.clone(),
        opset: at.1,
        reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_batch_axis_is_the_named_dim_else_the_first() {
        let named = vec![Ok(7), Err(Some("Batch_Size".to_string())), Ok(3)];
        assert_eq!(batch_axis(&named), Some(1));
        assert_eq!(batch_axis(&[Ok(16), Ok(64)]), Some(0));
        assert_eq!(batch_axis(&[]), None);
        assert_eq!(rebatch(&[Ok(16), Ok(64)], 16, 4), vec![Ok(4), Ok(64)]);
        // An input whose first dim is not the export's batch is not batched.
        assert_eq!(rebatch(&[Ok(2), Ok(16)], 16, 4), vec![Ok(2), Ok(16)]);
    }
}
