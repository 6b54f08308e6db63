//! Building forward graphs with shape inference from the specs.
//!
//! Takes an operator [`Library`] and a sequence of calls: data inputs,
//! weights, and operator applications by spec name. Gives a forward
//! [`Graph`] whose every output shape is the one [`tdl::OpSpec::bind`] infers,
//! with one group per forward operator and one per forward tensor (Tofu
//! §4.2.1). Errors name the operator instance and the mismatching dims.
//!
//! The same inference step ([`OpInserter`]) is used by the training pass
//! for backward and update operators.

use std::collections::HashSet;

use tdl::{AttrValue, Attrs, Library};

use super::error::GraphError;
use super::ids::{GroupId, OpId, TensorId};
use super::ir::{DType, Fill, Graph, Group, Op, OpRole, Tensor, TensorRole};

/// Builds a forward graph, one operator at a time, inferring shapes.
///
/// ```no_run
/// # use graph::{DType, Fill, GraphBuilder};
/// let lib = tdl::Library::shipped().unwrap();
/// let mut b = GraphBuilder::new(&lib, "example");
/// let x = b.input("x", &[8, 16], DType::F32, Fill::Normal { std: 1.0 }).unwrap();
/// let w = b.weight("fc.w", &[16, 4], 0.25).unwrap();
/// let y = b.op1("matmul", "fc", &[x, w], &[]).unwrap();
/// assert_eq!(b.shape(y), &[8, 4]);
/// ```
pub struct GraphBuilder<'l> {
    ins: OpInserter<'l>,
    /// The time step the ops added now belong to (see [`GraphBuilder::set_step`]).
    step: Option<u32>,
}

/// An attribute entry for [`GraphBuilder::op`]: `(name, value)`.
pub type Attr<'a> = (&'a str, AttrValue);

/// An `int` attribute value.
pub fn int(v: i64) -> AttrValue {
    AttrValue::Int(v)
}

/// A `float` attribute value.
pub fn float(v: f64) -> AttrValue {
    AttrValue::Float(v)
}

impl<'l> GraphBuilder<'l> {
    /// Start an empty graph named `name` whose ops come from `lib`.
    pub fn new(lib: &'l Library, name: &str) -> Self {
        GraphBuilder {
            ins: OpInserter::new(lib, Graph::new(name)),
            step: None,
        }
    }

    /// A data input (role [`TensorRole::Input`]) filled by `fill` in synthetic runs.
    ///
    /// Errors: [`GraphError::DuplicateName`].
    pub fn input(
        &mut self,
        name: &str,
        shape: &[usize],
        dtype: DType,
        fill: Fill,
    ) -> Result<TensorId, GraphError> {
        self.leaf(name, shape, dtype, TensorRole::Input, fill)
    }

    /// A trainable f32 weight initialised with normal samples of standard deviation `std`.
    ///
    /// Errors: [`GraphError::DuplicateName`].
    pub fn weight(
        &mut self,
        name: &str,
        shape: &[usize],
        std: f64,
    ) -> Result<TensorId, GraphError> {
        self.leaf(
            name,
            shape,
            DType::F32,
            TensorRole::Weight,
            Fill::Normal { std },
        )
    }

    /// A trainable f32 weight with every element `value` (batch-norm scale 1, bias 0).
    ///
    /// Errors: [`GraphError::DuplicateName`].
    pub fn weight_const(
        &mut self,
        name: &str,
        shape: &[usize],
        value: f64,
    ) -> Result<TensorId, GraphError> {
        self.leaf(
            name,
            shape,
            DType::F32,
            TensorRole::Weight,
            Fill::Constant { value },
        )
    }

    fn leaf(
        &mut self,
        name: &str,
        shape: &[usize],
        dtype: DType,
        role: TensorRole,
        fill: Fill,
    ) -> Result<TensorId, GraphError> {
        self.ins.claim(name)?;
        let next = TensorId(self.ins.graph.tensors().len() as u32);
        let group = self.ins.graph.push_group(Group::Tensor(next));
        Ok(self.ins.graph.push_tensor(Tensor {
            name: name.to_string(),
            shape: shape.to_vec(),
            dtype,
            role,
            group,
            grad: None,
            grad_of: None,
            updates: None,
            fill: Some(fill),
            value: None,
            step: self.step,
        }))
    }

    /// Apply spec `spec` to `inputs` as a forward operator named `name`; its
    /// outputs are activations named `{name}.{output}` (e.g. `fc.c`).
    ///
    /// Errors: [`GraphError::UnknownSpec`], [`GraphError::Shape`] (the spec's
    /// shape error: which dim of which input mismatches), duplicate names,
    /// non-finite float attributes.
    pub fn op(
        &mut self,
        spec: &str,
        name: &str,
        inputs: &[TensorId],
        attrs: &[Attr],
    ) -> Result<Vec<TensorId>, GraphError> {
        let attrs: Attrs = attrs.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        let op_group = self
            .ins
            .graph
            .push_group(Group::Op(OpId(self.ins.graph.ops().len() as u32)));
        let (outs, op) = self.ins.insert(
            spec,
            name,
            inputs.to_vec(),
            attrs,
            OpRole::Forward,
            op_group,
            |g, _k, out_name| {
                let next = TensorId(g.tensors().len() as u32);
                OutputMeta {
                    name: format!("{name}.{out_name}"),
                    role: TensorRole::Activation,
                    group: g.push_group(Group::Tensor(next)),
                    grad_of: None,
                }
            },
        )?;
        let graph = &mut self.ins.graph;
        graph.op_mut(op).step = self.step;
        for &t in &outs {
            graph.tensor_mut(t).step = self.step;
        }
        Ok(outs)
    }

    /// Give the leaf `t` its known values ([`Tensor::value`]: row-major,
    /// one per element), e.g. a constant folded at import.
    ///
    /// Errors: [`GraphError::Invalid`] when `t` is produced by an op or the
    /// count is not its element count.
    pub fn set_value(&mut self, t: TensorId, values: Vec<f64>) -> Result<(), GraphError> {
        let tensor = self.ins.graph.tensor_mut(t);
        if tensor.fill.is_none() || values.len() as u64 != tensor.numel() {
            return Err(GraphError::Invalid {
                at: tensor.name.clone(),
                message: format!(
                    "{} values for a tensor of {} elements (a value belongs to a leaf and has one number per element)",
                    values.len(),
                    tensor.numel()
                ),
            });
        }
        tensor.value = Some(values);
        Ok(())
    }

    /// Mark the forward ops, their outputs and the inputs added from now on
    /// as time step `step` of an unrolled recurrent network (`None`: outside
    /// the time steps). This is the graph metadata the coarsening rule
    /// `rnn_steps` keys on (see [`crate::Op::step`]); an importer sets
    /// it while unrolling.
    pub fn set_step(&mut self, step: Option<u32>) {
        self.step = step;
    }

    /// [`GraphBuilder::op`] for a spec with exactly one output.
    pub fn op1(
        &mut self,
        spec: &str,
        name: &str,
        inputs: &[TensorId],
        attrs: &[Attr],
    ) -> Result<TensorId, GraphError> {
        let outs = self.op(spec, name, inputs, attrs)?;
        match outs.as_slice() {
            [t] => Ok(*t),
            _ => Err(GraphError::OutputCount {
                op: name.into(),
                spec: spec.into(),
                expected: 1,
                got: outs.len(),
            }),
        }
    }

    /// Shape of a tensor built so far.
    pub fn shape(&self, t: TensorId) -> &[usize] {
        &self.ins.graph.tensor(t).shape
    }

    /// The graph built so far (read-only: consumers, specs, shapes).
    pub fn graph(&self) -> &Graph {
        &self.ins.graph
    }

    /// Replace the fill of the leaf `t` (e.g. an importer that learns from
    /// the graph's consumers that an integer input holds row ids).
    ///
    /// Errors: [`GraphError::Invalid`] when `t` is produced by an op.
    pub fn set_fill(&mut self, t: TensorId, fill: Fill) -> Result<(), GraphError> {
        let tensor = self.ins.graph.tensor_mut(t);
        if tensor.fill.is_none() {
            return Err(GraphError::Invalid {
                at: tensor.name.clone(),
                message: "an operator produces it, so it has no fill".into(),
            });
        }
        tensor.fill = Some(fill);
        Ok(())
    }

    /// Make the op output `t` the next step's value of the weight `replaced`
    /// ([`Tensor::updates`]): a state a forward op updates in place, such as
    /// batch normalization's running statistics (ONNX BatchNormalization's
    /// `running_mean` / `running_var`, PyTorch's buffers). `t` takes the
    /// weight's role and tensor group (Tofu §4.2.1: one group, one layout,
    /// as an optimizer's output), so the planner gives the pair one layout
    /// and memory counts them as one weight, and every step's run carries
    /// it into `replaced`.
    ///
    /// Errors: [`GraphError::Invalid`] naming `t` when no operator produces
    /// it, and naming `replaced` when it is not a weight leaf, when its shape
    /// or element type differs from `t`'s, or when another tensor already
    /// updates it (one state, one writer).
    pub fn set_updates(&mut self, t: TensorId, replaced: TensorId) -> Result<(), GraphError> {
        let g = &self.ins.graph;
        let (new, old) = (g.tensor(t), g.tensor(replaced));
        let invalid = |at: &str, message: String| GraphError::Invalid {
            at: at.to_string(),
            message,
        };
        if g.producer(t).is_none() {
            return Err(invalid(
                &new.name,
                "no operator produces it, so it cannot be the next value of a weight".into(),
            ));
        }
        if old.role != TensorRole::Weight || g.producer(replaced).is_some() {
            return Err(invalid(
                &old.name,
                "only a weight no operator produces (an initializer) can be updated in place"
                    .into(),
            ));
        }
        if new.shape != old.shape || new.dtype != old.dtype {
            return Err(invalid(
                &old.name,
                format!(
                    "its update `{}` has shape {:?} ({:?}), the weight {:?} ({:?})",
                    new.name, new.shape, new.dtype, old.shape, old.dtype
                ),
            ));
        }
        if let Some(other) = g.tensors().iter().find(|o| o.updates == Some(replaced)) {
            return Err(invalid(
                &old.name,
                format!(
                    "`{}` already updates it; a state has one writer",
                    other.name
                ),
            ));
        }
        let group = old.group;
        let tensor = self.ins.graph.tensor_mut(t);
        tensor.role = TensorRole::Weight;
        tensor.group = group;
        tensor.updates = Some(replaced);
        Ok(())
    }

    /// The library the builder resolves specs in.
    pub fn library(&self) -> &'l Library {
        self.ins.lib
    }

    /// Finish the forward graph with `loss` as its loss (a scalar).
    ///
    /// Errors: [`GraphError::LossNotScalar`].
    pub fn finish(mut self, loss: TensorId) -> Result<Graph, GraphError> {
        let t = self.ins.graph.tensor(loss);
        if !t.shape.is_empty() {
            return Err(GraphError::LossNotScalar {
                name: t.name.clone(),
                shape: t.shape.clone(),
            });
        }
        self.ins.graph.set_loss(loss);
        Ok(self.ins.graph)
    }

    /// The graph built so far, without a loss (for graphs that are not trained).
    pub fn into_graph(self) -> Graph {
        self.ins.graph
    }
}

/// Metadata of an output tensor created by [`OpInserter::insert`].
pub(crate) struct OutputMeta {
    pub name: String,
    pub role: TensorRole,
    pub group: GroupId,
    pub grad_of: Option<TensorId>,
}

/// Appends operators to a graph with shape inference and unique names.
pub(crate) struct OpInserter<'l> {
    pub lib: &'l Library,
    pub graph: Graph,
    names: HashSet<String>,
}

impl<'l> OpInserter<'l> {
    /// Wrap a graph; its existing op and tensor names are taken.
    pub fn new(lib: &'l Library, graph: Graph) -> Self {
        let names = graph
            .ops()
            .iter()
            .map(|o| o.name.clone())
            .chain(graph.tensors().iter().map(|t| t.name.clone()))
            .collect();
        OpInserter { lib, graph, names }
    }

    /// Reserve a name. Errors if it is taken.
    pub fn claim(&mut self, name: &str) -> Result<(), GraphError> {
        if self.names.insert(name.to_string()) {
            Ok(())
        } else {
            Err(GraphError::DuplicateName {
                name: name.to_string(),
            })
        }
    }

    /// Append a leaf tensor (no producer).
    pub fn leaf(&mut self, t: Tensor) -> Result<TensorId, GraphError> {
        self.claim(&t.name)?;
        Ok(self.graph.push_tensor(t))
    }

    /// Infer the output shapes of `spec` on `inputs`, create the outputs
    /// (f32, metadata from `meta(graph, k, output name)`) and append the op.
    /// Gives the outputs and the bound output shapes.
    #[allow(clippy::too_many_arguments)]
    pub fn insert(
        &mut self,
        spec_name: &str,
        name: &str,
        inputs: Vec<TensorId>,
        attrs: Attrs,
        role: OpRole,
        group: GroupId,
        mut meta: impl FnMut(&mut Graph, usize, &str) -> OutputMeta,
    ) -> Result<(Vec<TensorId>, OpId), GraphError> {
        let spec = self
            .lib
            .get(spec_name)
            .ok_or_else(|| GraphError::UnknownSpec {
                op: name.into(),
                spec: spec_name.into(),
            })?;
        for (k, v) in &attrs {
            if matches!(v, AttrValue::Float(f) if f.is_nan()) {
                return Err(GraphError::NanAttr {
                    op: name.into(),
                    attr: k.clone(),
                });
            }
        }
        let shapes: Vec<Vec<usize>> = inputs
            .iter()
            .map(|&t| self.graph.tensor(t).shape.clone())
            .collect();
        let binding = spec
            .bind(&shapes, &attrs)
            .map_err(|source| GraphError::Shape {
                op: name.into(),
                source: Box::new(source),
            })?;
        self.claim(name)?;
        let mut outputs = Vec::with_capacity(binding.output_shapes.len());
        for (k, shape) in binding.output_shapes.into_iter().enumerate() {
            let m = meta(&mut self.graph, k, &spec.outputs[k].name);
            self.claim(&m.name)?;
            outputs.push(self.graph.push_tensor(Tensor {
                name: m.name,
                shape,
                dtype: DType::F32,
                role: m.role,
                group: m.group,
                grad: None,
                grad_of: m.grad_of,
                updates: None,
                fill: None,
                value: None,
                step: None,
            }));
        }
        let op = self.graph.push_op(Op {
            name: name.to_string(),
            spec: spec_name.to_string(),
            attrs,
            inputs,
            outputs: outputs.clone(),
            role,
            group,
            step: None,
        });
        Ok((outputs, op))
    }
}
