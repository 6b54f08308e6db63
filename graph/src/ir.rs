//! The dataflow graph IR: operators, tensors, forward/backward groups.
//!
//! Takes operators and tensors from the [builder](super::GraphBuilder), the
//! [training-graph construction](super::training_graph) or a [graph
//! file](super::format); gives a [`Graph`] that answers structural questions
//! (producer and consumers of a tensor, a topological order, predecessors of
//! an operator).
//!
//! Invariants every `Graph` keeps (checked by [`Graph::from_parts`], kept by
//! every mutation): every id indexes its table; each tensor has at most one
//! producer; the operator graph is acyclic; a tensor produced by an op has no
//! [`Fill`], a tensor produced by none has one; gradient / update links point
//! at tensors. Shapes are the ones the specs infer when the graph came from
//! the builder; a loaded file can be re-checked with [`Graph::check_shapes`].
//!
//! Inside, a petgraph `DiGraph` holds one node per operator (node index =
//! [`OpId`]) and one edge per (tensor, consumer) pair from the tensor's
//! producer; its indices never leave this module.

use std::collections::BTreeMap;

use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::Direction;
use serde::{Deserialize, Serialize};
use tdl::{Attrs, Binding, Library, OpSpec};

use super::error::GraphError;
use super::ids::{GroupId, OpId, TensorId};
use super::outputs::GraphOutput;

/// Element type of a tensor (how it is stored and moved; arithmetic runs in
/// f32, see `codegen::wire`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DType {
    /// 32-bit float (4 bytes): every weight, activation and gradient of the zoo.
    F32,
    /// 16-bit IEEE float (2 bytes).
    F16,
    /// bfloat16 (2 bytes).
    Bf16,
    /// 64-bit float (8 bytes).
    F64,
    /// 32-bit integer (4 bytes): token ids.
    I32,
    /// 64-bit integer (8 bytes): ONNX's indices, shapes and token ids.
    I64,
    /// Unsigned byte (1 byte): quantised values, image bytes.
    U8,
    /// Boolean (1 byte, 0 or 1): masks.
    Bool,
}

impl DType {
    /// Bytes per element.
    pub fn size_bytes(self) -> u64 {
        match self {
            DType::U8 | DType::Bool => 1,
            DType::F16 | DType::Bf16 => 2,
            DType::F32 | DType::I32 => 4,
            DType::F64 | DType::I64 => 8,
        }
    }

    /// Whether its values are integers (compared exactly, rounded when
    /// computed in f32).
    pub fn is_integer(self) -> bool {
        matches!(self, DType::I32 | DType::I64 | DType::U8 | DType::Bool)
    }

    /// Its name in graph files and messages (`f32`, `i64`, `bool`, …).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::Bf16 => "bf16",
            DType::F64 => "f64",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::U8 => "u8",
            DType::Bool => "bool",
        }
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Which phase of a training step an operator belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpRole {
    /// Written by the model (forward propagation up to the loss).
    Forward,
    /// Generated from gradient declarations (back-propagation, gradient sums,
    /// zero gradients of unused outputs).
    Backward,
    /// Optimizer update of a weight and its state.
    Update,
}

/// What a tensor is in a training step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TensorRole {
    /// Data fed to the step (images, token ids, labels).
    Input,
    /// An intermediate result of the forward pass (including the loss).
    Activation,
    /// A trainable parameter (or its updated value, see [`Tensor::updates`]).
    Weight,
    /// A gradient (partial or total) of a forward tensor, see [`Tensor::grad_of`].
    Gradient,
    /// Optimizer state of a weight (momentum, Adam's m and v).
    OptimizerState,
}

/// How to fill a tensor that no operator produces: defined with its
/// generator in [`tdl::fill`], upstream of the runner, which fills its tiles
/// from programs alone.
pub use tdl::Fill;

/// A forward/backward group (Tofu §4.2.1): the unit the coarsened search
/// places together.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Group {
    /// A forward operator and its generated backward operators (including
    /// zero gradients of its unused outputs).
    Op(OpId),
    /// A forward tensor, its gradient(s), the `add` operators that sum its
    /// gradient contributions, and, for a weight, its optimizer state and
    /// update operator.
    Tensor(TensorId),
}

/// An operator instance: one application of a spec.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Op {
    /// Unique name, e.g. `layer1.0.conv2` or `grad/layer1.0.conv2/x`.
    pub name: String,
    /// Name of its TDL spec in the library, e.g. `conv2d`.
    pub spec: String,
    /// Attribute values passed to the spec (missing ones take the spec's default).
    #[serde(
        with = "super::attrs",
        default,
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub attrs: Attrs,
    /// Input tensors, in the spec's input order.
    pub inputs: Vec<TensorId>,
    /// Output tensors, in the spec's output order.
    pub outputs: Vec<TensorId>,
    /// Forward, backward or update.
    pub role: OpRole,
    /// Its group (Tofu §4.2.1).
    pub group: GroupId,
    /// For a forward operator of an unrolled recurrent network: its time
    /// step (0 first). The coarsening rule `rnn_steps` gives the ops (and
    /// tensors, [`Tensor::step`]) at the same place of every step one
    /// decision (Tofu §4.2.1). Absent otherwise, and absent from the graph
    /// file then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<u32>,
}

/// A tensor: a value with a shape, produced by at most one operator.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tensor {
    /// Unique name, e.g. `layer1.0.conv2.w` or `grad/layer1.0.conv2.w`.
    pub name: String,
    /// Elements per dimension (row-major; a scalar has shape `[]`).
    pub shape: Vec<usize>,
    /// Element type.
    pub dtype: DType,
    /// Input, activation, weight, gradient or optimizer state.
    pub role: TensorRole,
    /// Its group (Tofu §4.2.1).
    pub group: GroupId,
    /// The total gradient of this tensor (sum of all contributions), if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grad: Option<TensorId>,
    /// For a gradient (partial or total): the forward tensor it is the gradient of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grad_of: Option<TensorId>,
    /// For an optimizer output: the tensor it replaces in place (new weight,
    /// new momentum). Memory accounting counts the pair once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updates: Option<TensorId>,
    /// For a tensor no operator produces: how to fill it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fill: Option<Fill>,
    /// For a constant leaf whose values are known (folded at ONNX import:
    /// index tables, masks, position ids): its values, row-major, as f64.
    /// A run uses them instead of [`Tensor::fill`], which stays as the
    /// description of their scale. Absent otherwise, and absent from the
    /// graph file then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Vec<f64>>,
    /// For a forward tensor of an unrolled recurrent network (an input or
    /// activation of one time step): its time step, as [`Op::step`]. Absent
    /// otherwise, and absent from the graph file then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<u32>,
}

impl Tensor {
    /// Number of elements (saturating at `u64::MAX`).
    pub fn numel(&self) -> u64 {
        self.shape
            .iter()
            .fold(1u64, |a, &d| a.saturating_mul(d as u64))
    }

    /// Size in bytes (elements × element size, saturating).
    pub fn bytes(&self) -> u64 {
        self.numel().saturating_mul(self.dtype.size_bytes())
    }
}

/// Derived structure, rebuilt from the tables: never serialized.
#[derive(Clone, Debug, Default)]
struct Topology {
    producer: Vec<Option<OpId>>,
    consumers: Vec<Vec<OpId>>,
    /// One node per op (node index = op index); edge producer → consumer per use.
    dag: DiGraph<OpId, TensorId>,
}

/// A dataflow graph: operators, tensors and forward/backward groups.
///
/// Operators are stored in a topological order (every input of op `i` is
/// produced by an op `< i` or by none), which is the schedule the memory
/// estimate uses.
#[derive(Clone, Debug)]
pub struct Graph {
    name: String,
    ops: Vec<Op>,
    tensors: Vec<Tensor>,
    groups: Vec<Group>,
    loss: Option<TensorId>,
    /// The model's outputs by name (ONNX graph outputs), see `outputs.rs`.
    pub(super) outputs: Vec<GraphOutput>,
    topo: Topology,
}

impl PartialEq for Graph {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
            && self.ops == other.ops
            && self.tensors == other.tensors
            && self.groups == other.groups
            && self.loss == other.loss
            && self.outputs == other.outputs
    }
}

impl Graph {
    /// An empty graph with a name (e.g. the model name `wresnet-50-4`).
    pub fn new(name: impl Into<String>) -> Graph {
        Graph {
            name: name.into(),
            ops: Vec::new(),
            tensors: Vec::new(),
            groups: Vec::new(),
            loss: None,
            outputs: Vec::new(),
            topo: Topology::default(),
        }
    }

    /// Build a graph from its tables, checking every invariant (see the module
    /// doc). Operators may come in any order; they are kept in the order given
    /// if it is topological, otherwise the error names the first violation.
    ///
    /// Errors: [`GraphError::Invalid`] naming the field (`ops[3].inputs[1]`)
    /// and what is wrong.
    pub fn from_parts(
        name: String,
        ops: Vec<Op>,
        tensors: Vec<Tensor>,
        groups: Vec<Group>,
        loss: Option<TensorId>,
    ) -> Result<Graph, GraphError> {
        let invalid = |at: String, message: String| GraphError::Invalid { at, message };
        let nt = tensors.len();
        let no = ops.len();
        let ng = groups.len();
        let tid = |at: String, t: TensorId| {
            if t.index() < nt {
                Ok(())
            } else {
                Err(invalid(
                    at,
                    format!(
                        "tensor id {} is out of range (the graph has {nt} tensors)",
                        t.0
                    ),
                ))
            }
        };
        let gid = |at: String, g: GroupId| {
            if g.index() < ng {
                Ok(())
            } else {
                Err(invalid(
                    at,
                    format!(
                        "group id {} is out of range (the graph has {ng} groups)",
                        g.0
                    ),
                ))
            }
        };
        for (i, g) in groups.iter().enumerate() {
            match *g {
                Group::Op(o) if o.index() >= no => {
                    return Err(invalid(
                        format!("groups[{i}].op"),
                        format!("op id {} is out of range (the graph has {no} ops)", o.0),
                    ))
                }
                Group::Tensor(t) => tid(format!("groups[{i}].tensor"), t)?,
                _ => {}
            }
        }
        let mut producer: Vec<Option<OpId>> = vec![None; nt];
        for (i, op) in ops.iter().enumerate() {
            gid(format!("ops[{i}].group"), op.group)?;
            for (j, &t) in op.inputs.iter().enumerate() {
                tid(format!("ops[{i}].inputs[{j}]"), t)?;
            }
            for (j, &t) in op.outputs.iter().enumerate() {
                tid(format!("ops[{i}].outputs[{j}]"), t)?;
                if let Some(p) = producer[t.index()] {
                    return Err(invalid(
                        format!("ops[{i}].outputs[{j}]"),
                        format!(
                            "tensor {} (`{}`) is already produced by ops[{}]",
                            t.0,
                            tensors[t.index()].name,
                            p.0
                        ),
                    ));
                }
                producer[t.index()] = Some(OpId(i as u32));
            }
        }
        for (i, t) in tensors.iter().enumerate() {
            gid(format!("tensors[{i}].group"), t.group)?;
            for (field, link) in [
                ("grad", t.grad),
                ("grad_of", t.grad_of),
                ("updates", t.updates),
            ] {
                if let Some(l) = link {
                    tid(format!("tensors[{i}].{field}"), l)?;
                }
            }
            match (producer[i], &t.fill) {
                (Some(p), Some(_)) => {
                    return Err(invalid(
                        format!("tensors[{i}].fill"),
                        format!(
                            "`{}` is produced by ops[{}], so it cannot have a fill",
                            t.name, p.0
                        ),
                    ))
                }
                (None, None) => {
                    return Err(invalid(
                        format!("tensors[{i}].fill"),
                        format!(
                            "`{}` is produced by no operator, so it needs a fill",
                            t.name
                        ),
                    ))
                }
                _ => {}
            }
            if let Some(v) = &t.value {
                if producer[i].is_some() || v.len() as u64 != t.numel() {
                    return Err(invalid(
                        format!("tensors[{i}].value"),
                        format!(
                            "`{}` has {} values; a value belongs to a leaf and has one number per element ({})",
                            t.name,
                            v.len(),
                            t.numel()
                        ),
                    ));
                }
            }
        }
        if let Some(l) = loss {
            tid("loss".into(), l)?;
        }
        let mut g = Graph {
            name,
            ops: Vec::new(),
            tensors,
            groups,
            loss,
            outputs: Vec::new(),
            topo: Topology::default(),
        };
        g.topo.producer = vec![None; nt];
        g.topo.consumers = vec![Vec::new(); nt];
        for (i, op) in ops.into_iter().enumerate() {
            for (j, &t) in op.inputs.iter().enumerate() {
                if let Some(p) = producer[t.index()] {
                    if p.index() >= i {
                        return Err(invalid(
                            format!("ops[{i}].inputs[{j}]"),
                            format!(
                                "`{}` is produced by ops[{}], which does not come before this op (operators must be listed in a topological order)",
                                g.tensors[t.index()].name,
                                p.0
                            ),
                        ));
                    }
                }
            }
            g.attach(op);
        }
        Ok(g)
    }

    /// Append an op (its inputs and outputs already exist) and update the topology.
    fn attach(&mut self, op: Op) -> OpId {
        let id = OpId(self.ops.len() as u32);
        let node = self.topo.dag.add_node(id);
        debug_assert_eq!(node.index(), id.index());
        for &t in &op.inputs {
            self.topo.consumers[t.index()].push(id);
            if let Some(p) = self.topo.producer[t.index()] {
                self.topo.dag.add_edge(NodeIndex::new(p.index()), node, t);
            }
        }
        for &t in &op.outputs {
            self.topo.producer[t.index()] = Some(id);
        }
        self.ops.push(op);
        id
    }

    /// Append a tensor (crate-internal: the builder and the training pass).
    pub(crate) fn push_tensor(&mut self, t: Tensor) -> TensorId {
        let id = TensorId(self.tensors.len() as u32);
        self.tensors.push(t);
        self.topo.producer.push(None);
        self.topo.consumers.push(Vec::new());
        id
    }

    /// Append an op whose inputs exist and whose outputs exist and have no
    /// producer yet (crate-internal; keeps the topological order).
    pub(crate) fn push_op(&mut self, op: Op) -> OpId {
        debug_assert!(op
            .outputs
            .iter()
            .all(|t| self.topo.producer[t.index()].is_none()));
        self.attach(op)
    }

    /// Append a group (crate-internal).
    pub(crate) fn push_group(&mut self, g: Group) -> GroupId {
        self.groups.push(g);
        GroupId(self.groups.len() as u32 - 1)
    }

    /// Mutable access to an op's metadata (crate-internal: its time step).
    pub(crate) fn op_mut(&mut self, id: OpId) -> &mut Op {
        &mut self.ops[id.0 as usize]
    }

    /// Mutable access to a tensor's metadata (crate-internal: names, links, groups).
    pub(crate) fn tensor_mut(&mut self, t: TensorId) -> &mut Tensor {
        &mut self.tensors[t.index()]
    }

    /// Set the loss tensor (crate-internal).
    pub(crate) fn set_loss(&mut self, t: TensorId) {
        self.loss = Some(t);
    }

    /// The graph's name (the model name for zoo graphs).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Every operator, in topological order (index = [`OpId`]).
    pub fn ops(&self) -> &[Op] {
        &self.ops
    }

    /// Every tensor (index = [`TensorId`]).
    pub fn tensors(&self) -> &[Tensor] {
        &self.tensors
    }

    /// Every group (index = [`GroupId`]).
    pub fn groups(&self) -> &[Group] {
        &self.groups
    }

    /// The scalar loss tensor, if the graph has one.
    pub fn loss(&self) -> Option<TensorId> {
        self.loss
    }

    /// An operator by id. Panics if the id is not of this graph.
    pub fn op(&self, id: OpId) -> &Op {
        &self.ops[id.index()]
    }

    /// A tensor by id. Panics if the id is not of this graph.
    pub fn tensor(&self, id: TensorId) -> &Tensor {
        &self.tensors[id.index()]
    }

    /// Every op id, in topological order.
    pub fn op_ids(&self) -> impl Iterator<Item = OpId> + '_ {
        (0..self.ops.len() as u32).map(OpId)
    }

    /// Every tensor id.
    pub fn tensor_ids(&self) -> impl Iterator<Item = TensorId> + '_ {
        (0..self.tensors.len() as u32).map(TensorId)
    }

    /// The op producing a tensor (`None` for inputs, weights, optimizer state, seeds).
    pub fn producer(&self, t: TensorId) -> Option<OpId> {
        self.topo.producer[t.index()]
    }

    /// The ops reading a tensor, in topological order (an op reading it twice appears twice).
    pub fn consumers(&self, t: TensorId) -> &[OpId] {
        &self.topo.consumers[t.index()]
    }

    /// Ops producing an input of `op` (with the tensor), via the petgraph DAG.
    pub fn predecessors(&self, op: OpId) -> impl Iterator<Item = (OpId, TensorId)> + '_ {
        self.topo
            .dag
            .edges_directed(NodeIndex::new(op.index()), Direction::Incoming)
            .map(|e| {
                (
                    OpId(petgraph::visit::EdgeRef::source(&e).index() as u32),
                    *e.weight(),
                )
            })
    }

    /// Ops consuming an output of `op` (with the tensor), via the petgraph DAG.
    pub fn successors(&self, op: OpId) -> impl Iterator<Item = (OpId, TensorId)> + '_ {
        self.topo
            .dag
            .edges_directed(NodeIndex::new(op.index()), Direction::Outgoing)
            .map(|e| {
                (
                    OpId(petgraph::visit::EdgeRef::target(&e).index() as u32),
                    *e.weight(),
                )
            })
    }

    /// A topological order computed by petgraph (for checking; the stored
    /// order [`Graph::op_ids`] is already topological).
    pub fn topo_order(&self) -> Vec<OpId> {
        petgraph::algo::toposort(&self.topo.dag, None)
            .expect("invariant: the operator graph is acyclic")
            .into_iter()
            .map(|n| OpId(n.index() as u32))
            .collect()
    }

    /// Find a tensor by name (linear scan).
    pub fn tensor_by_name(&self, name: &str) -> Option<TensorId> {
        self.tensors
            .iter()
            .position(|t| t.name == name)
            .map(|i| TensorId(i as u32))
    }

    /// Find an op by name (linear scan).
    pub fn op_by_name(&self, name: &str) -> Option<OpId> {
        self.ops
            .iter()
            .position(|o| o.name == name)
            .map(|i| OpId(i as u32))
    }

    /// The shapes of `op`'s inputs, in order.
    pub fn input_shapes(&self, op: &Op) -> Vec<Vec<usize>> {
        op.inputs
            .iter()
            .map(|&t| self.tensor(t).shape.clone())
            .collect()
    }

    /// `op`'s spec from `lib` and its binding to the op's input shapes and
    /// attributes (the one place the planner, codegen and training-graph
    /// builder bind an operator of a graph).
    ///
    /// Errors: [`GraphError::UnknownSpec`]; [`GraphError::Shape`] naming the
    /// operator and the spec's shape error.
    pub fn bind_op<'l>(
        &self,
        lib: &'l Library,
        op: &Op,
    ) -> Result<(&'l OpSpec, Binding), GraphError> {
        let spec = lib.get(&op.spec).ok_or_else(|| GraphError::UnknownSpec {
            op: op.name.clone(),
            spec: op.spec.clone(),
        })?;
        let binding = spec
            .bind(&self.input_shapes(op), &op.attrs)
            .map_err(|source| GraphError::Shape {
                op: op.name.clone(),
                source: Box::new(source),
            })?;
        Ok((spec, binding))
    }

    /// Re-infer every op's output shapes from its spec and compare with the
    /// stored ones (for graphs loaded from a file).
    ///
    /// Errors: [`GraphError::UnknownSpec`], [`GraphError::Shape`] naming the
    /// operator and the mismatching dims, [`GraphError::OutputShape`].
    pub fn check_shapes(&self, lib: &Library) -> Result<(), GraphError> {
        for op in &self.ops {
            let (spec, b) = self.bind_op(lib, op)?;
            if b.output_shapes.len() != op.outputs.len() {
                return Err(GraphError::OutputCount {
                    op: op.name.clone(),
                    spec: op.spec.clone(),
                    expected: b.output_shapes.len(),
                    got: op.outputs.len(),
                });
            }
            for (k, (&t, s)) in op.outputs.iter().zip(&b.output_shapes).enumerate() {
                if &self.tensor(t).shape != s {
                    return Err(GraphError::OutputShape {
                        op: op.name.clone(),
                        output: spec.outputs[k].name.clone(),
                        expected: s.clone(),
                        got: self.tensor(t).shape.clone(),
                    });
                }
            }
        }
        Ok(())
    }
}
