//! Per-operator facts the cost model and the searches need, computed once per
//! graph.
//!
//! Takes a [`Graph`], the spec [`Library`] and a [`StrategyCache`]; gives a
//! [`Model`]: for every operator its bound spec's [`OpAccess`], its exact
//! partition strategies (from the interval analysis, Tofu §3.2) and whether it
//! is elementwise, and its kind (operators of one kind cost the same under
//! the same decisions). Errors name the operator whose spec or strategies
//! failed.

use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;

use interval::cache::StrategyCache;
use interval::strategy::OpStrategies;
use tdl::Library;

use super::access::OpAccess;
use crate::graph::{Graph, GraphError, OpId};

/// Why a graph cannot be planned.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// An operator's spec is missing from the library.
    #[error(
        "operator `{op}` uses spec `{spec}`, which the library does not define; add it to specs/"
    )]
    UnknownSpec {
        /// Operator name.
        op: String,
        /// Spec name.
        spec: String,
    },
    /// Shapes or attributes do not fit the spec.
    #[error("operator `{op}`: {source}")]
    Shape {
        /// Operator name.
        op: String,
        /// The shape error.
        source: Box<tdl::ShapeError>,
    },
    /// The interval analysis failed on the spec.
    #[error("operator `{op}`: strategy analysis failed: {message}")]
    Analysis {
        /// Operator name.
        op: String,
        /// What went wrong.
        message: String,
    },
}

impl ModelError {
    /// The planner's error for a failed [`Graph::bind_op`] (same cases, the
    /// planner's wording).
    fn from_bind(e: GraphError) -> ModelError {
        match e {
            GraphError::UnknownSpec { op, spec } => ModelError::UnknownSpec { op, spec },
            GraphError::Shape { op, source } => ModelError::Shape { op, source },
            // `bind_op` gives no other error; kept total rather than panicking.
            other => ModelError::Analysis {
                op: "(binding)".to_string(),
                message: other.to_string(),
            },
        }
    }
}

/// What the planner knows about one operator instance.
#[derive(Clone, Debug)]
pub struct OpModel {
    /// Which input elements a share reads, which output elements it writes.
    pub access: OpAccess,
    /// Its exact strategies (shape-free, from the interval analysis).
    pub strategies: Arc<OpStrategies>,
    /// Its kind: operators with the same spec, attributes and input and
    /// output shapes and dtypes share it (and so have the same access model,
    /// strategies and costs under the same decisions; the per-kind memo of
    /// [`super::cost::CostMemo`] relies on it). Numbered from 0 in op order.
    pub kind: u32,
    /// Every set of its inputs it is linear in, as bit masks (bit i = input
    /// i; [`tdl::linear_input_sets`]): where a partial-sum layout may flow
    /// through it (issue 41).
    pub linear_sets: Arc<Vec<u32>>,
}

/// Per-operator facts for a whole graph (see the module doc).
#[derive(Clone, Debug)]
pub struct Model {
    /// Indexed by [`OpId`].
    pub ops: Vec<OpModel>,
}

impl Model {
    /// Bind every operator and look up its strategies.
    ///
    /// Errors: unknown spec, shape mismatch, failed analysis (naming the operator).
    pub fn new(graph: &Graph, lib: &Library, cache: &StrategyCache) -> Result<Model, ModelError> {
        let mut ops = Vec::with_capacity(graph.ops().len());
        let mut kinds: HashMap<String, u32> = HashMap::default();
        let mut linear: HashMap<String, Arc<Vec<u32>>> = HashMap::default();
        for op in graph.ops() {
            let (spec, binding) = graph.bind_op(lib, op).map_err(ModelError::from_bind)?;
            let shapes = graph.input_shapes(op);
            let strategies = cache
                .for_shapes(spec, &shapes)
                .map_err(|e| ModelError::Analysis {
                    op: op.name.clone(),
                    message: e.to_string(),
                })?;
            let n = kinds.len() as u32;
            let kind = *kinds.entry(signature(graph, op)).or_insert(n);
            let linear_sets = linear
                .entry(op.spec.clone())
                .or_insert_with(|| Arc::new(tdl::linear_input_sets(spec)))
                .clone();
            ops.push(OpModel {
                access: OpAccess::new(&binding),
                strategies,
                kind,
                linear_sets,
            });
        }
        Ok(Model { ops })
    }

    /// The model of one operator.
    pub fn op(&self, id: OpId) -> &OpModel {
        &self.ops[id.index()]
    }
}

/// What an operator's access model, strategies and costs depend on: its
/// spec, attributes (floats by their exact value) and its inputs' and
/// outputs' shapes and dtypes.
fn signature(graph: &Graph, op: &crate::graph::Op) -> String {
    let tensors = |ts: &[crate::graph::TensorId]| -> Vec<(Vec<usize>, crate::graph::DType)> {
        ts.iter()
            .map(|t| {
                let t = graph.tensor(*t);
                (t.shape.clone(), t.dtype)
            })
            .collect()
    };
    format!(
        "{}|{:?}|{:?}|{:?}",
        op.spec,
        op.attrs,
        tensors(&op.inputs),
        tensors(&op.outputs)
    )
}
