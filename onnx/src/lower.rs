//! The lowering context: ONNX values ↔ graph tensors, and the shape
//! plumbing every mapping needs (reshape, permute, broadcast).
//!
//! Takes the values a model defines (graph inputs, initializers, constants,
//! node outputs) and a [`GraphBuilder`]; gives each lowering function of the
//! [table](crate::table) a way to read its inputs (as graph tensors, or as
//! data known at import time for shape-like arguments), to emit operators by
//! spec name (shapes inferred by [`tdl::OpSpec::bind`] through the builder)
//! and to bind its outputs.
//!
//! Invariants: every emitted operator of node `n` is named `n` (the first)
//! or `n/k`; a constant becomes a graph tensor only when an operator reads it
//! as data (weights: role `Weight`, named after the ONNX value); the shape
//! helpers emit only specs of `specs/onnx_shape.tdl` and `specs/shape.tdl`
//! and emit nothing when the shape already fits.

use std::collections::HashMap;

use graph::{Attr, DType, Fill, GraphBuilder, GraphError, TensorId};
use tdl::AttrValue;

use crate::tensor::{Data, Elem};

/// Largest rank of the trailing block the generated reshape/broadcast specs handle.
pub const MAX_BLOCK: usize = 5;

/// Where a known value comes from (decides the role of its graph tensor).
#[derive(Clone, Debug, PartialEq)]
pub enum Kind {
    /// A float initializer or `ConstantOfShape`/`Constant` output: a trainable parameter.
    Weight,
    /// A non-float initializer or a value computed at import: a constant input.
    Constant,
    /// A graph input whose value the caller supplied (conformance cases): an
    /// input, never folded.
    Input,
}

/// How a known value's elements are held.
#[derive(Clone, Debug)]
pub enum Src {
    /// Every element equal (ConstantOfShape): nothing is materialised.
    Splat(f64),
    /// Dense elements.
    Dense(Data),
    /// In an external data file, read only when needed ([`crate::external`]);
    /// the [`Known`]'s shape may be a view of the stored one.
    External(Box<crate::external::ExternalRef>),
}

/// A value known at import time.
#[derive(Clone, Debug)]
pub struct Known {
    /// Element type.
    pub elem: Elem,
    /// Shape.
    pub shape: Vec<usize>,
    /// Elements.
    pub src: Src,
    /// Role of its graph tensor.
    pub kind: Kind,
}

impl Known {
    /// Dense data (splats are expanded, external data is read; callers use
    /// this only for small shape-like values). Errors: external data that
    /// cannot be read (the message names the tensor and the file).
    pub fn data(&self) -> Result<Data, String> {
        Ok(match &self.src {
            Src::Dense(d) => d.clone(),
            Src::Splat(v) => Data {
                elem: self.elem,
                shape: self.shape.clone(),
                values: vec![*v; self.shape.iter().product()],
            },
            Src::External(x) => {
                let d = x.read()?;
                if d.numel() != self.numel() {
                    return Err(format!(
                        "tensor `{}`: external data holds {} elements, its view {:?} needs {}",
                        x.name,
                        d.numel(),
                        self.shape,
                        self.numel()
                    ));
                }
                Data {
                    shape: self.shape.clone(),
                    ..d
                }
            }
        })
    }

    /// Number of elements (saturating: a corrupted shape gives `usize::MAX`).
    pub fn numel(&self) -> usize {
        self.shape.iter().fold(1usize, |a, &d| a.saturating_mul(d))
    }
}

/// One ONNX value: a graph tensor, a known value, or both (a constant that was materialised).
#[derive(Clone, Debug, Default)]
pub struct Entry {
    /// Its graph tensor, once created.
    pub tensor: Option<TensorId>,
    /// Its value, if known at import time.
    pub known: Option<Known>,
    /// The `Loop` iteration that defined it (see [`Lower::set_step`]): the
    /// step its leaf tensor takes when a known value is materialised.
    pub step: Option<u32>,
}

/// What a lowering function gives for each node output.
#[derive(Clone, Debug)]
pub enum Out {
    /// A graph tensor.
    T(TensorId),
    /// A value computed at import (constant folding).
    C(Data),
    /// A sequence (ONNX `seq(tensor)`), resolved at import: its elements in
    /// order, each bound as the value `NAME[i]` ([`Lower::sequences`]).
    Seq(Vec<Out>),
}

/// Why a node could not be lowered.
#[derive(Debug)]
pub enum NodeError {
    /// The op is mapped but not this use of it: the reason names what (attribute, rank, ...).
    Unsupported(String),
    /// Graph construction failed (shape inference through a spec).
    Graph(GraphError),
}

impl From<GraphError> for NodeError {
    fn from(e: GraphError) -> Self {
        NodeError::Graph(e)
    }
}

/// Shorthand for an unsupported use.
pub fn unsupported<T>(reason: impl Into<String>) -> Result<T, NodeError> {
    Err(NodeError::Unsupported(reason.into()))
}

/// Result of a lowering step.
pub type LResult<T> = Result<T, NodeError>;

/// The lowering context (see the module doc).
pub struct Lower<'l> {
    /// The graph under construction.
    pub b: GraphBuilder<'l>,
    /// ONNX value name → entry.
    pub values: HashMap<String, Entry>,
    /// Leaf values known at import, by graph tensor (weights, constants, supplied inputs).
    pub leaf_values: Vec<(TensorId, Known)>,
    /// Whether a training graph is being built (batch-norm statistics, dropout masks).
    pub training: bool,
    /// Operators emitted so far (all nodes).
    pub total_emitted: usize,
    /// Spec and inputs of every emitted operator's outputs.
    pub producers: HashMap<TensorId, (String, Vec<TensorId>)>,
    /// The graph inputs without a known value ([`Lower::define_input`]), by tensor.
    pub graph_inputs: HashMap<TensorId, String>,
    /// ONNX sequence value name → the value names of its elements, in order
    /// (`crate::map_sequence`).
    pub sequences: HashMap<String, Vec<String>>,
    node: String,
    emitted: usize,
    step: Option<u32>,
}

impl<'l> Lower<'l> {
    /// An empty context.
    pub fn new(b: GraphBuilder<'l>, training: bool) -> Self {
        Lower {
            b,
            values: HashMap::new(),
            leaf_values: Vec::new(),
            training,
            total_emitted: 0,
            producers: HashMap::new(),
            graph_inputs: HashMap::new(),
            sequences: HashMap::new(),
            node: String::new(),
            emitted: 0,
            step: None,
        }
    }

    /// Start lowering node `name` (operators it emits are named after it).
    pub fn begin_node(&mut self, name: &str) {
        self.node = name.to_string();
        self.emitted = 0;
    }

    /// Mark what is lowered from now on as time step `step` of an unrolled
    /// `Loop` (`None`: outside the iterations): the operators emitted, their
    /// outputs, and the known values defined (their leaf tensors, weights
    /// excepted, take the step of the iteration that defined them). Sets
    /// [`GraphBuilder::set_step`], the metadata coarsening groups time steps
    /// by (Tofu §4.2.1).
    pub fn set_step(&mut self, step: Option<u32>) {
        self.step = step;
        self.b.set_step(step);
    }

    /// The time step set by [`Lower::set_step`].
    pub fn step(&self) -> Option<u32> {
        self.step
    }

    /// Operators emitted for the current node so far.
    pub fn emitted(&self) -> usize {
        self.emitted
    }

    /// Shape of a value (graph tensor or known).
    pub fn shape_of(&self, name: &str) -> Option<Vec<usize>> {
        let e = self.values.get(name)?;
        if let Some(t) = e.tensor {
            return Some(self.b.shape(t).to_vec());
        }
        e.known.as_ref().map(|k| k.shape.clone())
    }

    /// Shape of a graph tensor.
    pub fn shape(&self, t: TensorId) -> Vec<usize> {
        self.b.shape(t).to_vec()
    }

    /// Element type of a value (F32 for computed tensors).
    pub fn elem_of(&self, name: &str) -> Elem {
        self.values
            .get(name)
            .and_then(|e| e.known.as_ref().map(|k| k.elem))
            .unwrap_or(Elem::F32)
    }

    /// The value's data if it is a constant or weight known at import (not a
    /// supplied input): what constant folding and attribute-like inputs may use.
    pub fn const_data(&self, name: &str) -> Option<Data> {
        let k = self.values.get(name)?.known.as_ref()?;
        if k.kind == Kind::Input || k.numel() > 1 << 16 {
            return None;
        }
        k.data().ok()
    }

    /// The value's data if known at all, supplied inputs included: for
    /// shape-like arguments (Reshape's shape, Slice's starts, axes, pads).
    pub fn arg_data(&self, name: &str) -> Option<Data> {
        let k = self.values.get(name)?.known.as_ref()?;
        if k.numel() > 1 << 16 {
            return None;
        }
        k.data().ok()
    }

    /// The value as a graph tensor, materialising a known value as a leaf
    /// (weights as `Weight`, everything else as `Input`).
    pub fn tensor(&mut self, name: &str) -> LResult<TensorId> {
        let e = self
            .values
            .get(name)
            .cloned()
            .ok_or_else(|| NodeError::Unsupported(format!("value `{name}` is not defined")))?;
        if let Some(t) = e.tensor {
            return Ok(t);
        }
        let k = e.known.expect("an entry has a tensor or a value");
        let fill = match &k.src {
            Src::Splat(v) => Fill::Constant { value: *v },
            Src::Dense(d) => fill_of(&d.values),
            // Unread weights: the usual initialisation scale; unread constants: zeros.
            Src::External(_) if k.kind == Kind::Weight => Fill::Normal { std: 0.02 },
            Src::External(_) => Fill::Constant { value: 0.0 },
        };
        // The leaf belongs to the step that defined the value (weights and
        // outer-scope values to none), not to the step that first reads it.
        let leaf_step = if k.kind == Kind::Weight { None } else { e.step };
        self.b.set_step(leaf_step);
        let t = match k.kind {
            Kind::Weight => match fill {
                Fill::Constant { value } => self.b.weight_const(name, &k.shape, value),
                Fill::Normal { std } => self.b.weight(name, &k.shape, std),
                _ => unreachable!("fill_of gives constant or normal"),
            },
            Kind::Constant | Kind::Input => self.b.input(name, &k.shape, k.elem.dtype(), fill),
        };
        self.b.set_step(self.step);
        let t = t?;
        // A small folded constant keeps its values (index tables, masks,
        // position ids): a run reads them instead of the fill.
        if let Src::Dense(d) = &k.src {
            let leaf = matches!(k.kind, Kind::Constant | Kind::Input);
            if leaf && !matches!(fill, Fill::Constant { .. }) && d.values.len() <= MAX_KEPT_VALUES {
                self.b.set_value(t, d.values.clone())?;
            }
        }
        self.leaf_values.push((t, k.clone()));
        self.values.get_mut(name).expect("present").tensor = Some(t);
        Ok(t)
    }

    /// Define a graph input (no known value).
    pub fn define_input(&mut self, name: &str, shape: &[usize], dtype: DType) -> LResult<TensorId> {
        let t = self
            .b
            .input(name, shape, dtype, Fill::Normal { std: 1.0 })?;
        self.graph_inputs.insert(t, name.to_string());
        self.values.insert(
            name.to_string(),
            Entry {
                tensor: Some(t),
                known: None,
                step: self.step,
            },
        );
        Ok(t)
    }

    /// Define a known value.
    pub fn define_known(&mut self, name: &str, known: Known) {
        self.values.insert(
            name.to_string(),
            Entry {
                tensor: None,
                known: Some(known),
                step: self.step,
            },
        );
    }

    /// Bind a node output name to a graph tensor.
    pub fn bind(&mut self, name: &str, t: TensorId) {
        self.values.insert(
            name.to_string(),
            Entry {
                tensor: Some(t),
                known: None,
                step: self.step,
            },
        );
    }

    /// Emit one operator of spec `spec` for the current node.
    pub fn emit(
        &mut self,
        spec: &str,
        inputs: &[TensorId],
        attrs: &[Attr],
    ) -> LResult<Vec<TensorId>> {
        let name = if self.emitted == 0 {
            self.node.clone()
        } else {
            format!("{}/{}", self.node, self.emitted)
        };
        self.emitted += 1;
        self.total_emitted += 1;
        let outs = self.b.op(spec, &name, inputs, attrs)?;
        for &o in &outs {
            self.producers
                .insert(o, (spec.to_string(), inputs.to_vec()));
        }
        Ok(outs)
    }

    /// [`Lower::emit`] for a one-output spec.
    pub fn emit1(&mut self, spec: &str, inputs: &[TensorId], attrs: &[Attr]) -> LResult<TensorId> {
        Ok(self.emit(spec, inputs, attrs)?[0])
    }

    /// Reshape (row-major) to `to`; nothing is emitted if the shape is already `to`.
    /// The common leading dims stay outside the spec (`reshape_A_B` with an ellipsis).
    pub fn reshape(&mut self, t: TensorId, to: &[usize]) -> LResult<TensorId> {
        let from = self.shape(t);
        if from == to {
            return Ok(t);
        }
        let n_from: usize = from.iter().product();
        let n_to: usize = to.iter().product();
        if n_from != n_to {
            return unsupported(format!(
                "cannot reshape {from:?} ({n_from} elements) to {to:?} ({n_to} elements)"
            ));
        }
        let p = from.iter().zip(to).take_while(|(a, b)| a == b).count();
        let (a, bb) = (from.len() - p, to.len() - p);
        if a > MAX_BLOCK || bb > MAX_BLOCK {
            return unsupported(format!(
                "reshape {from:?} → {to:?} changes {a} → {bb} trailing dims; the specs `reshape_A_B` cover at most {MAX_BLOCK}"
            ));
        }
        let names: Vec<String> = (0..bb).map(|i| format!("d{i}")).collect();
        let attrs: Vec<Attr> = names
            .iter()
            .zip(&to[p..])
            .map(|(n, &d)| (n.as_str(), AttrValue::Int(d as i64)))
            .collect();
        self.emit1(&format!("reshape_{a}_{bb}"), &[t], &attrs)
    }

    /// Permute the dims: output dim i is input dim `perm[i]`. Emitted as
    /// block swaps (`swap_blocks`, `batch_transpose`) between reshapes; the
    /// leading dims already in place stay outside every spec.
    pub fn permute(&mut self, t: TensorId, perm: &[usize]) -> LResult<TensorId> {
        let mut cur = t;
        let mut order: Vec<usize> = (0..perm.len()).collect(); // order[i] = original dim at position i
        let orig = self.shape(t);
        for target in 0..perm.len() {
            let s = order
                .iter()
                .position(|&d| d == perm[target])
                .ok_or_else(|| NodeError::Unsupported(format!("invalid permutation {perm:?}")))?;
            if s == target {
                continue;
            }
            // Swap block [target, s) with dim s: view as [prefix.., X, Y, R].
            let shape: Vec<usize> = order.iter().map(|&d| orig[d]).collect();
            let x: usize = shape[target..s].iter().product();
            let y = shape[s];
            let r: usize = shape[s + 1..].iter().product();
            let mut view: Vec<usize> = shape[..target].to_vec();
            view.extend([x, y, r]);
            let v = self.reshape(cur, &view)?;
            let sw = self.emit1("swap_blocks", &[v], &[])?;
            let moved = order.remove(s);
            order.insert(target, moved);
            let new_shape: Vec<usize> = order.iter().map(|&d| orig[d]).collect();
            cur = self.reshape(sw, &new_shape)?;
        }
        Ok(cur)
    }

    /// Move dim `axis` to the end.
    pub fn axis_to_last(&mut self, t: TensorId, axis: usize) -> LResult<TensorId> {
        let r = self.shape(t).len();
        let perm: Vec<usize> = (0..r).filter(|&d| d != axis).chain([axis]).collect();
        self.permute(t, &perm)
    }

    /// Move the last dim back to position `axis` (inverse of [`Lower::axis_to_last`]).
    pub fn last_to_axis(&mut self, t: TensorId, axis: usize) -> LResult<TensorId> {
        let r = self.shape(t).len();
        let perm: Vec<usize> = (0..r)
            .map(|d| match d.cmp(&axis) {
                std::cmp::Ordering::Less => d,
                std::cmp::Ordering::Equal => r - 1,
                std::cmp::Ordering::Greater => d - 1,
            })
            .collect();
        self.permute(t, &perm)
    }

    /// Broadcast (numpy rules) to `to`: reshape to its rank with leading 1s,
    /// then `broadcast_R` over the trailing dims that differ.
    pub fn broadcast_to(&mut self, t: TensorId, to: &[usize]) -> LResult<TensorId> {
        let from = self.shape(t);
        if from == to {
            return Ok(t);
        }
        if from.len() > to.len() {
            return unsupported(format!("cannot broadcast {from:?} to {to:?}"));
        }
        let mut padded = vec![1; to.len() - from.len()];
        padded.extend(&from);
        for (a, b) in padded.iter().zip(to) {
            if *a != 1 && a != b {
                return unsupported(format!("shapes {from:?} and {to:?} do not broadcast"));
            }
        }
        let t = self.reshape(t, &padded)?;
        if padded == to {
            return Ok(t);
        }
        let p = padded.iter().zip(to).take_while(|(a, b)| a == b).count();
        let r = to.len() - p;
        if r > MAX_BLOCK {
            return unsupported(format!(
                "broadcast {from:?} → {to:?} over {r} trailing dims; `broadcast_R` covers at most {MAX_BLOCK}"
            ));
        }
        let names: Vec<String> = (0..r).map(|i| format!("n{i}")).collect();
        let attrs: Vec<Attr> = names
            .iter()
            .zip(&to[p..])
            .map(|(n, &d)| (n.as_str(), AttrValue::Int(d as i64)))
            .collect();
        self.emit1(&format!("broadcast_{r}"), &[t], &attrs)
    }
}

/// The broadcast shape of two shapes (numpy rules), or `None`.
pub fn broadcast_shape(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let r = a.len().max(b.len());
    let get = |s: &[usize], i: usize| {
        if i + s.len() >= r {
            s[i + s.len() - r]
        } else {
            1
        }
    };
    (0..r)
        .map(|i| {
            let (x, y) = (get(a, i), get(b, i));
            if x == y || y == 1 {
                Some(x)
            } else if x == 1 {
                Some(y)
            } else {
                None
            }
        })
        .collect()
}

/// Elements of the largest folded constant whose values the graph keeps
/// ([`graph::Tensor::value`]); a larger one keeps only its fill.
pub const MAX_KEPT_VALUES: usize = 1 << 16;

/// A fill describing dense values: constant if all equal, else normal with their std.
pub fn fill_of(values: &[f64]) -> Fill {
    let first = values.first().copied().unwrap_or(0.0);
    if values.iter().all(|&v| v == first) && first.is_finite() {
        return Fill::Constant { value: first };
    }
    let n = values.len().min(1 << 16);
    let s = &values[..n];
    let mean = s.iter().sum::<f64>() / n as f64;
    let var = s.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n as f64;
    let std = var.sqrt();
    Fill::Normal {
        std: if std.is_finite() { std } else { 1.0 },
    }
}
