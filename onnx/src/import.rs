//! The importer: an ONNX model → a tofu [`Graph`] (inference or training).
//!
//! Takes a decoded [`Model`], the operator [`Library`] and [`Options`];
//! gives an [`Imported`]: the graph (every shape inferred by the specs
//! through [`graph::GraphBuilder`]), the graph outputs, the values
//! known at import (weights, constants, supplied inputs) and a [`Summary`]
//! (opsets, node counts, folded nodes, defaulted dims, opaque nodes,
//! parameters).
//!
//! Steps: initializers → known values (float: weights; others: constants);
//! graph inputs → inputs with dims resolved ([`crate::dims`]; `--batch`
//! on a static batch: [`crate::batch`]); nodes in order → folded ([`crate::fold`]), lowered through the [table](crate::table),
//! or (with `opaque_unsupported`) opaque ([`crate::opaque`]); with
//! `training`, a loss on the chosen output and
//! [`graph::training_graph`].

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use graph::{Graph, GraphOutput, Optimizer, TensorId};
use tdl::Library;

use crate::attr::Attrs;
use crate::dims::{DefaultedDim, DimOptions};
use crate::error::OnnxError;
use crate::fold::fold;
use crate::import_inputs::{check_named_dims, declared_shapes, define_initializers, define_inputs};
use crate::import_training::{no_gradient_reason, training_step, unmapped, Origin};
use crate::lower::{Kind, Known, Lower, NodeError, Out, Src};
use crate::node::Node;
use crate::opaque;
use crate::proto::{normalise_domain, Model};
use crate::table;
use crate::tensor::Data;

/// How to import a model.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Dynamic dims: batch and named dims.
    pub dims: DimOptions,
    /// Exact input shapes by input name (overrides the model's dims).
    pub input_shapes: BTreeMap<String, Vec<usize>>,
    /// Values of graph inputs known to the caller (conformance cases): they
    /// stay inputs but shape-like arguments (Reshape's shape, axes) may use them.
    pub input_values: BTreeMap<String, Data>,
    /// Graph inputs fixed to a value at import (`--input-value NAME=V,…`),
    /// elements in row-major order: folded like constants, so `If`
    /// conditions, `Range` limits and shape chains that read them resolve.
    /// The shape is the `--input-shape` one, the model's static one, or for a
    /// rank-1 input the number of values; the element type is the input's.
    pub fixed_inputs: BTreeMap<String, Vec<f64>>,
    /// Build the training graph (backward + optimizer) instead of the inference graph.
    pub training: bool,
    /// The ONNX value the loss is taken on (default: the first graph output).
    pub loss: Option<String>,
    /// The added loss takes integer class ids `loss.labels[…]`
    /// (`cross_entropy`, as the CLI does unless `--soft-labels`) instead of
    /// probability rows `loss.labels[…, C]` (`softmax_cross_entropy`).
    pub class_ids: bool,
    /// Optimizer of the training graph (default: momentum).
    pub optimizer: Option<Optimizer>,
    /// L2 weight decay λ of the training graph (0: none;
    /// [`graph::training_graph_with`]).
    pub weight_decay: f64,
    /// Import unsupported nodes as opaque operators instead of failing.
    pub opaque_unsupported: bool,
    /// `--op-map`: `"DOMAIN::OP"` → the name of the spec a node of no table
    /// row lowers to ([`crate::custom`]).
    pub op_map: BTreeMap<String, String>,
}

/// A graph output.
#[derive(Clone, Debug)]
pub enum Output {
    /// A tensor of the graph.
    Tensor(TensorId),
    /// A value computed at import (constant folding).
    Const(Data),
}

/// A node imported as an opaque operator.
#[derive(Clone, Debug, PartialEq)]
pub struct OpaqueNode {
    /// Node name.
    pub node: String,
    /// ONNX op type.
    pub op_type: String,
    /// The generated spec's name.
    pub spec: String,
}

/// What the import did, for the summary and the tests.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// Model (graph) name.
    pub model: String,
    /// Opset per domain.
    pub opsets: BTreeMap<String, i64>,
    /// Nodes in the file.
    pub nodes: usize,
    /// Nodes computed at import (Constant, ConstantOfShape, Shape, views of weights, ...), by op type.
    pub folded: BTreeMap<String, usize>,
    /// Control-flow nodes replaced at import (`If` by its taken branch,
    /// `Loop` unrolled), by op type.
    pub inlined: BTreeMap<String, usize>,
    /// Nodes lowered to spec operators, by op type.
    pub mapped: BTreeMap<String, usize>,
    /// Forward operators emitted.
    pub forward_ops: usize,
    /// Dynamic dims that took a default value.
    pub defaulted_dims: Vec<DefaultedDim>,
    /// Nodes imported as opaque operators.
    pub opaque: Vec<OpaqueNode>,
    /// The loss tensor of a training graph.
    pub loss: Option<String>,
    /// Every folded node output of at most [`crate::fold_eval::FOLD_LIMIT`]
    /// elements, by ONNX value name, in node order (for checking folding
    /// against running, `tests/fold_equals_run.rs`).
    pub folded_values: Vec<(String, Data)>,
    /// The shape of every ONNX value the import defined (graph tensors and
    /// known values), by name.
    pub value_shapes: BTreeMap<String, Vec<usize>>,
}

/// An imported model.
pub struct Imported {
    /// The graph (inference graph, or training graph with `training`).
    pub graph: Graph,
    /// Graph outputs by ONNX name, in order.
    pub outputs: Vec<(String, Output)>,
    /// Leaf tensors whose values the file (or the caller) gives.
    pub leaf_values: Vec<(TensorId, Known)>,
    /// The library the graph's specs come from (the given one, plus the
    /// generated specs of opaque nodes if any).
    pub library: Library,
    /// What happened.
    pub summary: Summary,
}

/// Import a decoded model (see the module doc).
///
/// Errors: unsupported operators or uses ([`OnnxError::Unsupported`],
/// [`OnnxError::Node`]), nodes of other domains ([`OnnxError::Domain`]),
/// subgraphs ([`OnnxError::Subgraph`]), undefined values, bad options (a
/// `--dim` name no input has: [`OnnxError::Options`]), shape-inference
/// failures ([`OnnxError::Graph`]), an operator without a gradient on a
/// weight's path to the loss ([`OnnxError::NoGradient`]).
pub fn import(
    model: &Model,
    path: &Path,
    lib: &Library,
    opts: &Options,
) -> Result<Imported, OnnxError> {
    let graph = model
        .proto
        .graph
        .as_ref()
        .expect("checked by proto::decode");
    let name = if graph.name.is_empty() {
        path.file_stem()
            .map_or("onnx".into(), |s| s.to_string_lossy().into_owned())
    } else {
        graph.name.clone()
    };
    let summary = Summary {
        model: name.clone(),
        opsets: model.opsets.clone(),
        nodes: graph.node.len(),
        ..Summary::default()
    };
    check_named_dims(graph, opts, path)?;
    // Opaque nodes need their generated specs in the library before lowering.
    let mut opaque_specs = declared_shapes(graph, opts);
    let mut library = lib.clone();
    let rebatched = crate::batch::BatchChange::of(model, path, lib, opts)?;
    let explain = |e: OnnxError| match &rebatched {
        Some(c) => c.explain(e),
        None => e,
    };

    // Opaque nodes are lowered lazily: when one appears whose spec (generated
    // from the shapes known at that point) is not in the library yet, the
    // library is rebuilt with it and the pass starts over.
    for _attempt in 0..graph.node.len() + 3 {
        let b = graph::GraphBuilder::new(&library, &name);
        let mut pass = Pass {
            l: Lower::new(b, opts.training),
            s: summary.clone(),
            model,
            opts,
            path,
            rebatched: rebatched.as_ref(),
            used_names: HashSet::new(),
            unread: HashMap::new(),
            origins: HashMap::new(),
            queue: graph
                .node
                .iter()
                .cloned()
                .enumerate()
                .map(|(i, n)| (i, n, None))
                .collect(),
        };
        let init_names = define_initializers(&mut pass.l, graph, path)?;
        define_inputs(
            &mut pass.l,
            graph,
            &init_names,
            opts,
            path,
            &mut pass.s.defaulted_dims,
        )?;
        let mut needs_opaque = false;
        while let Some((i, np, step)) = pass.queue.pop_front() {
            pass.l.set_step(step);
            let next = pass.node(i, &np, step, &mut opaque_specs, &library);
            if next.map_err(explain)? == Next::NeedsOpaque {
                needs_opaque = true;
                break;
            }
        }
        pass.l.set_step(None);
        if needs_opaque {
            library = with_opaque_specs(lib, &opaque_specs)?;
            continue;
        }
        return pass.finish(graph, &library).map_err(explain);
    }
    Err(OnnxError::Library(
        "generated opaque specs did not load".into(),
    ))
}

/// What the pass does after a node.
#[derive(PartialEq)]
enum Next {
    /// Go on with the next node.
    Continue,
    /// An opaque node's spec is not in the library yet: rebuild it and start over.
    NeedsOpaque,
}

/// One lowering pass over the nodes: the graph under construction and the
/// state the nodes share.
struct Pass<'p, 'l> {
    l: Lower<'l>,
    s: Summary,
    model: &'p Model,
    opts: &'p Options,
    path: &'p Path,
    /// `--batch` on an export of a static batch ([`crate::batch`]).
    rebatched: Option<&'p crate::batch::BatchChange>,
    used_names: HashSet<String>,
    /// Values left unknown because external data upstream could not be
    /// read (a graph-only model): value name → the read error.
    unread: HashMap<String, String>,
    /// Lowered nodes: name → op type, opset and why it would have no gradient.
    origins: HashMap<String, Origin>,
    /// Each node with the `Loop` iteration it was unrolled from (its time
    /// step; nested loops keep the outermost loop's steps).
    queue: std::collections::VecDeque<(usize, onnx_protobuf::NodeProto, Option<u32>)>,
}

impl Pass<'_, '_> {
    /// Node `np` (the `i`-th of the file, time step `step`): inlined (control
    /// flow), opaque, folded at import, or lowered through the table.
    fn node(
        &mut self,
        i: usize,
        np: &onnx_protobuf::NodeProto,
        step: Option<u32>,
        opaque_specs: &mut opaque::OpaqueSpecs,
        library: &Library,
    ) -> Result<Next, OnnxError> {
        let node_name = if !np.name.is_empty() && self.used_names.insert(np.name.clone()) {
            np.name.clone()
        } else {
            let n = format!("{}_{i}", np.op_type);
            self.used_names.insert(n.clone());
            n
        };
        let (path, opset) = (self.path, self.model.opset(&np.domain));
        let rebatched =
            crate::batch::node(self.rebatched, &mut self.l, np, (&node_name, opset, path))?;
        let np = rebatched.as_ref().unwrap_or(np);
        let node = Node {
            proto: np,
            name: node_name.clone(),
            opset: self.model.opset(&np.domain),
            attrs: Attrs::new(np),
        };
        if let Some(inp) = np.input.iter().find(|x| {
            !x.is_empty() && !self.l.values.contains_key(*x) && !self.l.sequences.contains_key(*x)
        }) {
            return Err(OnnxError::UndefinedValue {
                path: self.path.to_path_buf(),
                node: node_name,
                value: inp.clone(),
            });
        }
        self.l.begin_node(&node_name);
        match crate::control::expand(&self.l, &node) {
            Ok(Some(nodes)) => {
                for (n, t) in nodes.into_iter().rev() {
                    self.queue.push_front((i, n, step.or(t)));
                }
                *self.s.inlined.entry(np.op_type.clone()).or_default() += 1;
                return Ok(Next::Continue);
            }
            Ok(None) => {}
            Err(reason) if !self.opts.opaque_unsupported => {
                return Err(self.node_err(&node, reason))
            }
            Err(_) => {}
        }
        let domain = normalise_domain(&np.domain);
        let no_row = table::lookup_in(domain, &np.op_type).is_none();
        if let Some(spec) = no_row
            .then(|| crate::custom::spec_for(library, &self.opts.op_map, domain, &np.op_type))
            .flatten()
            .filter(|_| node.attrs.subgraph().is_none())
        {
            return self.custom(&node, spec).map(|()| Next::Continue);
        }
        let why = if let Some((attr, nodes)) = node.attrs.subgraph() {
            Some(opaque::Why::Subgraph(attr, nodes))
        } else if no_row {
            Some(opaque::Why::NoMapping)
        } else {
            None
        };
        match why {
            Some(why) if !self.opts.opaque_unsupported => {
                Err(unmapped(self.path, &node, domain, why))
            }
            Some(_) => self.opaque(&node, opaque_specs, library),
            None => self.fold_or_lower(&node, library).map(|()| Next::Continue),
        }
    }

    /// A node of no table row mapped to a user spec ([`crate::custom`]).
    fn custom(&mut self, node: &Node, spec: &tdl::OpSpec) -> Result<(), OnnxError> {
        let outs = crate::custom::lower(&mut self.l, node, spec).map_err(|e| match e {
            NodeError::Unsupported(r) => self.node_err(node, r),
            NodeError::Graph(g) => graph_err(self.path, &node.name, g),
        })?;
        bind_outputs(&mut self.l, node.proto, outs);
        let origin = crate::import_training::custom_origin(node);
        self.origins.insert(node.name.clone(), origin);
        *self.s.mapped.entry(node.proto.op_type.clone()).or_default() += 1;
        Ok(())
    }

    /// `--opaque-unsupported`: the node as an operator of its generated spec.
    fn opaque(
        &mut self,
        node: &Node,
        opaque_specs: &mut opaque::OpaqueSpecs,
        library: &Library,
    ) -> Result<Next, OnnxError> {
        match opaque_specs.spec_for(node, &self.l) {
            Some(spec) if library.get(&spec).is_some() => {
                let outs = opaque::lower(&mut self.l, node, &spec).map_err(|e| match e {
                    NodeError::Unsupported(r) => self.node_err(node, r),
                    NodeError::Graph(g) => graph_err(self.path, &node.name, g),
                })?;
                bind_outputs(&mut self.l, node.proto, outs);
                self.origins
                    .insert(node.name.clone(), no_gradient_reason(node, true));
                self.s.opaque.push(OpaqueNode {
                    node: node.name.clone(),
                    op_type: node.proto.op_type.clone(),
                    spec,
                });
                Ok(Next::Continue)
            }
            Some(_) => Ok(Next::NeedsOpaque),
            None => Err(self.node_err(node, opaque::no_shape_reason())),
        }
    }

    /// A mapped node: folded when its values are known at import, else
    /// lowered through its table row.
    fn fold_or_lower(&mut self, node: &Node, library: &Library) -> Result<(), OnnxError> {
        let np = node.proto;
        // A node of constants that does not fold because external data
        // cannot be read, or one reading such a node's outputs: lowered,
        // and its outputs remember why their values are unknown.
        let mut unknown_because = None;
        let folded = match fold(&self.l, node) {
            Ok(None) if crate::fold_eval::foldable(&self.l, node) => {
                let r = crate::fold_eval::evaluate(&self.l, node, library);
                if matches!(r, Ok(None)) {
                    unknown_because = Some(unread_inputs(&self.l, np, &self.unread));
                }
                r
            }
            r => r,
        };
        if let Some(r) = np.input.iter().find_map(|x| self.unread.get(x)) {
            unknown_because = Some(r.clone());
        }
        match folded {
            Ok(Some(known)) => {
                for (o, k) in np.output.iter().zip(known) {
                    if !o.is_empty() {
                        if k.numel() <= crate::fold_eval::FOLD_LIMIT {
                            if let Ok(d) = k.data() {
                                self.s.folded_values.push((o.clone(), d));
                            }
                        }
                        self.l.define_known(o, k);
                    }
                }
                *self.s.folded.entry(np.op_type.clone()).or_default() += 1;
                return Ok(());
            }
            Ok(None) => {}
            Err(NodeError::Unsupported(r)) => return Err(self.node_err(node, r)),
            Err(NodeError::Graph(g)) => return Err(graph_err(self.path, &node.name, g)),
        }
        let m = table::lookup(&np.op_type).expect("checked by the caller");
        let outs = (m.lower)(&mut self.l, node, m).map_err(|e| match e {
            NodeError::Unsupported(r) => {
                self.node_err(node, r + &unread_inputs(&self.l, np, &self.unread))
            }
            NodeError::Graph(g) => graph_err(self.path, &node.name, g),
        })?;
        if outs.len() < np.output.iter().filter(|o| !o.is_empty()).count() {
            return Err(self.node_err(
                node,
                format!("only {} of its outputs are mapped", outs.len()),
            ));
        }
        bind_outputs(&mut self.l, np, outs);
        self.origins
            .insert(node.name.clone(), no_gradient_reason(node, false));
        if let Some(why) = unknown_because.filter(|w| !w.is_empty()) {
            for o in np.output.iter().filter(|o| !o.is_empty()) {
                self.unread.insert(o.clone(), why.clone());
            }
        }
        *self.s.mapped.entry(np.op_type.clone()).or_default() += 1;
        Ok(())
    }

    /// [`OnnxError::Node`] for `node`.
    fn node_err(&self, node: &Node, reason: String) -> OnnxError {
        OnnxError::Node {
            path: self.path.to_path_buf(),
            node: node.name.clone(),
            op_type: node.proto.op_type.clone(),
            opset: node.opset,
            reason,
        }
    }

    /// After the last node: the graph outputs, then the inference graph or
    /// (`--training`) the training graph.
    fn finish(
        self,
        graph: &onnx_protobuf::GraphProto,
        library: &Library,
    ) -> Result<Imported, OnnxError> {
        let path = self.path;
        let mut outputs = Vec::new();
        for o in &graph.output {
            let e = self.l.values.get(&o.name).cloned().unwrap_or_default();
            let out = match (e.tensor, e.known) {
                (Some(t), _) => Output::Tensor(t),
                (None, Some(k)) => {
                    Output::Const(k.data().map_err(|message| OnnxError::Unreadable {
                        path: path.to_path_buf(),
                        message,
                    })?)
                }
                (None, None) => {
                    return Err(OnnxError::UndefinedValue {
                        path: path.to_path_buf(),
                        node: "<graph outputs>".into(),
                        value: o.name.clone(),
                    })
                }
            };
            outputs.push((o.name.clone(), out));
        }
        let mut s = self.s;
        let mut l = self.l;
        s.value_shapes = l
            .values
            .keys()
            .filter_map(|n| Some((n.clone(), l.shape_of(n)?)))
            .collect();
        crate::index_fill::set_index_fills(&mut l.b, &l.graph_inputs)
            .map_err(|e| graph_err(path, "<graph inputs>", e))?;
        let leaf_values = std::mem::take(&mut l.leaf_values);
        s.forward_ops = l.total_emitted;
        let mut graph_out = if self.opts.training {
            training_step(l, graph, self.opts, path, library, &mut s, &self.origins)?
        } else {
            l.b.into_graph()
        };
        // Forward tensors keep their ids in the training graph.
        let mut named: Vec<GraphOutput> = Vec::new();
        for (name, o) in &outputs {
            if let Output::Tensor(t) = o {
                if !named.iter().any(|n| &n.name == name) {
                    named.push(GraphOutput {
                        name: name.clone(),
                        tensor: *t,
                    });
                }
            }
        }
        graph_out
            .set_outputs(named)
            .map_err(|e| graph_err(path, "<graph outputs>", e))?;
        Ok(Imported {
            graph: graph_out,
            outputs,
            leaf_values,
            library: library.clone(),
            summary: s,
        })
    }
}

/// The shipped library `lib` plus the generated specs of the opaque nodes.
fn with_opaque_specs(lib: &Library, specs: &opaque::OpaqueSpecs) -> Result<Library, OnnxError> {
    let mut files: Vec<(String, String)> = Vec::new();
    for (f, _) in lib.files() {
        if let Some(src) = lib.source(f) {
            files.push((f.to_string(), src.as_str().to_string()));
        }
    }
    files.push(("<opaque onnx nodes>".to_string(), specs.source()));
    Library::from_sources(&files).map_err(|d| OnnxError::Library(d.to_string()))
}

fn bind_outputs(l: &mut Lower, np: &onnx_protobuf::NodeProto, outs: Vec<Out>) {
    for (o, out) in np.output.iter().zip(outs) {
        if !o.is_empty() {
            bind_value(l, o, out);
        }
    }
}

/// Bind the value `name`; a sequence's elements as `name[i]`.
fn bind_value(l: &mut Lower, name: &str, out: Out) {
    match out {
        Out::T(t) => l.bind(name, t),
        Out::C(d) => l.define_known(
            name,
            Known {
                elem: d.elem,
                shape: d.shape.clone(),
                src: Src::Dense(d),
                kind: Kind::Constant,
            },
        ),
        Out::Seq(items) => {
            let mut names = Vec::with_capacity(items.len());
            for (i, item) in items.into_iter().enumerate() {
                let element = format!("{name}[{i}]");
                bind_value(l, &element, item);
                names.push(element);
            }
            l.sequences.insert(name.to_string(), names);
        }
    }
}

/// Why inputs of `np` kept in external data could not be read, directly or
/// upstream (`unread`: values computed from such data; empty when none
/// failed): appended to a node's error, since a lowering that needs a
/// constant only sees that it has none.
fn unread_inputs(
    l: &Lower,
    np: &onnx_protobuf::NodeProto,
    unread: &HashMap<String, String>,
) -> String {
    let mut why = String::new();
    for x in &np.input {
        if let Some(r) = unread.get(x) {
            if why.is_empty() {
                why.push_str(r);
            }
            continue;
        }
        let Some(k) = l.values.get(x).and_then(|e| e.known.as_ref()) else {
            continue;
        };
        if !matches!(k.src, Src::External(_)) || k.numel() > crate::fold_eval::FOLD_LIMIT {
            continue;
        }
        if let Err(e) = k.data() {
            why.push_str(&format!("; its input {e}"));
        }
    }
    why
}

pub(crate) fn graph_err(path: &Path, context: &str, source: graph::GraphError) -> OnnxError {
    OnnxError::Graph {
        path: path.to_path_buf(),
        context: format!("node `{context}`"),
        source: Box::new(source),
    }
}
