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

use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::Direction;
use tdl::{Binding, Library, OpSpec};

use super::error::GraphError;
use super::ids::{GroupId, OpId, TensorId};
use super::outputs::GraphOutput;
pub use super::parts::{DType, Fill, Group, Op, OpRole, Tensor, TensorRole};

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

    /// Set the learning rate of every optimizer update: the `lr`
    /// attribute of the operators of role [`OpRole::Update`] that have one
    /// (`sgd_update`, `momentum_update`, `adam_update`), as `tofu train
    /// PLAN --lr` does. Shapes, partitions and costs do not depend on it.
    /// Gives how many operators were set (0: no update has a learning rate).
    pub fn set_learning_rate(&mut self, lr: f64) -> usize {
        let mut set = 0;
        for op in self.ops.iter_mut().filter(|o| o.role == OpRole::Update) {
            if let Some(v) = op.attrs.get_mut("lr") {
                *v = tdl::AttrValue::Float(lr);
                set += 1;
            }
        }
        set
    }

    /// Set the weight decay λ of a training graph built with one
    /// ([`crate::training_graph_with`]): the `alpha` of its
    /// `decay/<w>` operators, as `tofu train PLAN --weight-decay` does.
    /// Gives how many operators were set (0: the graph was built without
    /// weight decay, so there is nothing to set).
    pub fn set_weight_decay(&mut self, lambda: f64) -> usize {
        let mut set = 0;
        for op in self.ops.iter_mut().filter(|o| {
            o.role == OpRole::Backward
                && o.spec == "scale"
                && o.name.starts_with(crate::training::DECAY_PREFIX)
        }) {
            op.attrs
                .insert("alpha".to_string(), tdl::AttrValue::Float(lambda));
            set += 1;
        }
        set
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
